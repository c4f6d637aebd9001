"""Jobs sharing one GPU: the collocation table, and each job's own share of the GPU's energy. (README.md beside this file.)"""
