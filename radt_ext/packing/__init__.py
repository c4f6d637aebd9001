"""Packing a queue of jobs onto a node's GPUs so that every job keeps a promise as it lives it (its wall
time in the queue over its wall time alone within max_slowdown): one chain per GPU, each job's start-up
beside the active phase before it, two active phases side by side only where measured or on a trial a
split keeps safe (docs/collocation.md, "Packing a queue").

    options.py   schedule: pack, max_slowdown and the pack: block of a sweep spec
    profiles.py  what the store knows: profiles, pairs measured side by side (the experiments of pack.pairs_from
                 too), jobs done in packed groups
    model.py     the contention model: a trial's expected slowdowns
    chains.py    a GPU's jobs one after another: each link's overlap, start times, the play that predicts them
    planner.py   the queue → a chain per GPU (or jobs alone), each with its reason
    explain.py   the dry run's plan table and the tags of each group run
    queue.py     a sweep spec as a queue of jobs
    cpusets.py   disjoint CPU sets for the jobs that share a GPU
    executor.py  runs the plan, replanning whenever a device of the pool frees; says what became of each
                 chain (as planned, or split by the guard, and the seconds a split lost)
    run.py       the sweep command's entry (dry run or run)
    scheduler.py what the sweep calls: the spec's packing keys, the jobs, the run

May import `radt_ext.sweep` (whose scheduler it is, registered in setup.cfg), `radt_ext.collocation` and
everything below them; nothing imports it but its entry point.
"""
