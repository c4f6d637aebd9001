"""Packing a queue of jobs onto GPUs from measured profiles, under a slowdown bound and the guard. (README.md beside this file.)"""
