"""Packing a queue of jobs onto a node's GPUs: which jobs share a GPU, in which mode, from the store's
exclusive profiles and measured group slowdowns, measurements before the model, trials under the guard
where nothing was measured (docs/collocation.md, "Packing a queue").

    options.py   schedule: pack, max_slowdown and the pack: block of a sweep spec
    profiles.py  what the store knows: profiles, measured groups, jobs done in packed groups
    model.py     the contention model: predicted slowdown, MPS thread percentage, energy
    planner.py   the queue → groups per GPU, each with its reason
    explain.py   the dry run's plan table and the tags of each group run
    queue.py     a sweep spec as a queue of jobs
    cpusets.py   disjoint CPU sets for the jobs that share a GPU
    executor.py  runs the plan, replanning whenever a device of the pool frees; says what became of each
                 shared group (kept, or split by the guard, and the seconds a split lost)
    run.py       the sweep command's entry (dry run or run)
    scheduler.py what the sweep calls: the spec's packing keys, the jobs, the run

May import `radt_ext.sweep` (whose scheduler it is, registered in setup.cfg), `radt_ext.collocation` and
everything below them; nothing imports it but its entry point.
"""
