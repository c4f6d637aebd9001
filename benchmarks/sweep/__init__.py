"""Sweeps over several GPUs and host settings: lanes, pools, MPS on two GPUs, a DDP job, CPUs per variant. (README.md beside this file.)"""
