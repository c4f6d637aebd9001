#!/usr/bin/env bash
# Re-record the NVML/GPM traces with the nvml listener reading power, energy and memory
# temperature through one nvmlDeviceGetFieldValues call (instantaneous power), check the field units
# against nvmlDeviceGetPowerUsage, re-run the energy-fidelity benchmark and the GPU tests.
# Run from the repository root: OUT=<dir> bash benchmarks/energy/nvml_field_units.sh (a real GPU: it reads
# pynvml directly, so it has no dry run).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
gpu_work /tmp/record_traces_field_values; mkdir -p $W/traces $W/fidelity $W/tests
python3 - <<'PY' > $W/power_fields.txt 2>&1
import time, subprocess, sys, pynvml as nv
nv.nvmlInit(); h = nv.nvmlDeviceGetHandleByIndex(0)
ids = [nv.NVML_FI_DEV_POWER_INSTANT, nv.NVML_FI_DEV_POWER_AVERAGE, nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION]
load = subprocess.Popen([sys.executable, "-c", "import torch,time\na=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16)\nt=time.time()\nwhile time.time()-t<4: a@a\ntorch.cuda.synchronize()"])
for i in range(24):
    f = nv.nvmlDeviceGetFieldValues(h, ids)
    print(f"t={i*0.25:5.2f}s PowerUsage={nv.nvmlDeviceGetPowerUsage(h)} mW  INSTANT={f[0].value.uiVal} ret={f[0].nvmlReturn} type={f[0].valueType}  AVERAGE={f[1].value.uiVal} ret={f[1].nvmlReturn}  ENERGY={f[2].value.ullVal} ret={f[2].nvmlReturn}  counter={nv.nvmlDeviceGetTotalEnergyConsumption(h)}")
    time.sleep(0.25)
load.wait()
PY
cat $W/power_fields.txt
timeout 120 python3 -m listeners.record_trace --out $W/traces/h200_matmul.json --seconds 20 --interval 0.1 --gpm-interval 0.2 --load --note "idle 5 s, bf16 8192^2 matmul 10 s, idle" > $W/traces/h200_matmul.log 2>&1; tail -n 25 $W/traces/h200_matmul.log
timeout 60 python3 -m listeners.record_trace --out $W/traces/h200_idle.json --seconds 4 --interval 0.1 --gpm-interval 0.2 > $W/traces/h200_idle.log 2>&1; tail -n 5 $W/traces/h200_idle.log
timeout 120 python3 -m benchmarks.energy.energy_fidelity --seconds 12 --out $W/fidelity > $W/fidelity/log.txt 2>&1; cat $W/fidelity/*.md
export MLFLOW_TRACKING_URI=sqlite:///$W/tests/mlflow.db  # the GPU tests' own store
timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/listeners tests/radt_ext/test_gpu_proof.py > $W/tests/pytest_gpu.log 2>&1; tail -n 15 $W/tests/pytest_gpu.log
tar -czf $OUT/record_traces_field_values.tar.gz -C $W .
