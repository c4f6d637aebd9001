"""Collocation: run several workloads on one GPU (exclusive, naive, mps, mig) as one parent run
with a child run per workload.

    from radt_ext.collocation import Group, Workload, run_group
    result = run_group(Group(mode="mps", workloads=[Workload("a", ["python", "a.py"]), ...]))
"""
from radt_ext.collocation.group import ChildResult, GroupResult, run_group
from radt_ext.collocation.modes import MODES, Group, Workload

__all__ = ["MODES", "Group", "Workload", "run_group", "GroupResult", "ChildResult"]
