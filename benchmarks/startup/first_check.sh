#!/usr/bin/env bash
# Where a sweep's first device check goes on a GPU host: the imports it makes and its NVML calls, in a fresh
# interpreter (python -X importtime, cProfile), and `import radt_ext.cli` alone. Output on stdout.
#   bash benchmarks/startup/first_check.sh
set -u
. benchmarks/gpu_lib.sh
gpu_wheels > /dev/null 2>&1
cd /tmp
for _ in 1 2 3; do
  python3 -c 'import time; t = time.time(); import radt_ext.cli; a = time.time(); from radt_ext.sweep import spec, plan, head_start
import radt_ext.sweep.cli; b = time.time(); import radt_ext.sweep.variant_run as v; c = time.time(); v.check_devices
from radt_ext.collocation.group import check_devices; d = time.time(); check_devices(["0"]); e = time.time(); check_devices(["0"])
print(f"cli {a - t:.3f} sweep cli {b - a:.3f} variant_run {c - b:.3f} first check {e - d:.3f} second {time.time() - e:.3f}")'
done
python3 -X importtime -c 'import radt_ext.cli; from radt_ext.sweep import spec, plan, head_start; import radt_ext.sweep.cli
import radt_ext.sweep.variant_run
from radt_ext.collocation.group import check_devices; check_devices(["0"])' 2> /tmp/imp.txt
n=$(grep -n "radt_ext.sweep.variant_run$" /tmp/imp.txt | tail -1 | cut -d: -f1)
echo "imports after variant_run (self us, cumulative us, module):"
tail -n +$((n + 1)) /tmp/imp.txt | awk -F'|' '{gsub(/ /,"",$1); split($1,a,":"); gsub(/ /,"",$2); print a[2], $2, $3}' | sort -n | tail -12
echo "largest before (cumulative us, depth <= 1):"
head -n "$n" /tmp/imp.txt | awk -F'|' '{gsub(/ /,"",$2); name=$3; m=match(name,/[^ ]/); if ((m-2)/2 <= 1) print $2, name}' | sort -n | tail -14
python3 - <<'PY'
import cProfile, io, pstats
import radt_ext.sweep.variant_run  # noqa: F401
from radt_ext.collocation.group import check_devices
pr = cProfile.Profile(); pr.enable(); check_devices(["0"]); pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(18)
print("\n".join(line[:150] for line in s.getvalue().splitlines()[4:]))
PY
