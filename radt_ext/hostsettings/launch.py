"""Pin this process to CPUs and move it into a cgroup, then become the workload (exec): every process the
workload starts inherits both. Run by path with `python -I -S`, so it imports nothing but the standard
library and starts in milliseconds:

    python -I -S launch.py --cpus 0,1 --cgroup /sys/fs/cgroup/x/radt-ext-1 --report FILE -- python train.py

--report FILE: a JSON line of what the kernel says this process got (its CPUs, its cgroup) is appended.
"""
import json
import os
import sys


def main(argv):
    cut = argv.index("--")
    opts = dict(zip(argv[:cut:2], argv[1:cut:2]))
    command = argv[cut + 1:]
    if opts.get("--cgroup"):
        with open(os.path.join(opts["--cgroup"], "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    if opts.get("--cpus"):
        os.sched_setaffinity(0, {int(c) for c in opts["--cpus"].split(",")})
    if opts.get("--report"):
        try:
            with open("/proc/self/cgroup") as fh:
                cgroup = [line[3:].strip() for line in fh if line.startswith("0::")]
        except OSError:
            cgroup = []
        with open(opts["--report"], "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "cpus": sorted(os.sched_getaffinity(0)),
                                 "cgroup": cgroup[0] if cgroup else None}) + "\n")
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"radt-ext: cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
