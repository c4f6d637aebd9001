"""Collocation: run several workloads on one GPU (exclusive, naive, mps, mig) as one parent run
with a child run per workload.

    from radt_ext.collocation import Group, Workload, run_group
    result = run_group(Group(mode="mps", workloads=[Workload("a", ["python", "a.py"]), ...]))

May import `radt_ext.run`, `radt_ext.sampling`, `radt_ext.store`, `radt_ext.figures`, `radt_ext.report`,
`radt_ext.errors` and `listeners`; sweeps and packing build on it.
"""
from radt_ext.collocation.group import ChildResult, GroupResult, run_group
from radt_ext.collocation.modes import MODES, Group, Workload

__all__ = ["MODES", "Group", "Workload", "run_group", "GroupResult", "ChildResult"]
