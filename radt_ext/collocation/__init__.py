"""Collocation: run several workloads on one GPU (exclusive, naive, mps, mig) as one parent run
with a child run per workload.

    from radt_ext.collocation import Group, Workload, run_group
    result = run_group(Group(mode="mps", workloads=[Workload("a", ["python", "a.py"]), ...]))

May import `radt_ext.run`, `radt_ext.sampling`, `radt_ext.store`, `radt_ext.figures`, `radt_ext.report`,
`radt_ext.errors` and `listeners`; sweeps and packing build on it.
"""
import importlib

# imported when named: a sweep plans and starts its first job before MLflow (which group.py needs) is imported
_WHERE = {"ChildResult": "group", "GroupResult": "group", "run_group": "group",
          "MODES": "modes", "Group": "modes", "Workload": "modes"}


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = ["MODES", "Group", "Workload", "run_group", "GroupResult", "ChildResult"]
