#!/usr/bin/env bash
# Where a sweep of one job spends its own time on a GPU host (benchmarks/startup/one_job_profile.py): the
# host packages a sweep imports that still lack bytecode after gpu_wheels compiled them; a sweep of one
# 8 s GEMM job profiled in-process; the same sweep through the installed `radt-ext` under -X importtime with
# RADT_EXT_TIMINGS. Everything in $OUT/prof.tar.gz.   OUT=DIR bash benchmarks/startup/one_job_profile.sh
set -u
. benchmarks/gpu_lib.sh
W=/tmp/one_job_profile; gpu_work $W; P=$W/prof; mkdir -p $P
export HOME=$W/home; mkdir -p $HOME
gpu_wheels
echo "after gpu_wheels: $(python3 -m benchmarks.startup.bytecode 2>&1 | tail -1)"
timeout 150 python3 -m benchmarks.startup.one_job_profile --out $P --seconds 8 --repeats 2 2>&1 | grep "^## repeat\|^imports"
cd $P
for n in 1 2 3; do
  printf 'name: cli-%s\nexperiment: one-job-cli\nmodes: [exclusive]\ndevices: ["0"]\nworkloads:\n  job: {command: "python3 %s %s 8 cuda"}\n' \
    $n $P/job.py $P/cli-$n.job.json > cli-$n.yaml
  t0=$(date +%s.%N)
  RADT_EXT_TIMINGS=$P/cli-$n.timings.json timeout 60 python3 -X importtime $(command -v radt-ext) sweep cli-$n.yaml \
    > cli-$n.log 2> cli-$n.imports.txt
  t1=$(date +%s.%N)
  python3 -c "import json, sys; j = json.load(open(sys.argv[1])); t0, t1 = map(float, sys.argv[2:])
print(f'cli {sys.argv[1]}: job started {j[\"started\"] - t0:.3f} s after the command, exit {t1 - j[\"ended\"]:.3f} s after its last line')" \
    $P/cli-$n.job.json $t0 $t1
done
cd $REPO; tar czf $OUT/prof.tar.gz -C $W prof
