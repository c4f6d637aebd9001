"""What the energy figures are worth: the listener's power timeline against the GPU's energy counter, and
each run's energy over its own span. (README.md beside this file.)"""
