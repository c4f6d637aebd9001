#!/usr/bin/env bash
# Validation on a real GPU (run from the repository root with $OUT set):
# NVML/GPM trace recordings, nvidia-smi fixtures, the end-to-end GPU proof, MPS smoke check.
# Everything lands in $OUT/validate_real_gpu.tar.gz.
# A real GPU only (the traces and fixtures are recorded from the driver): no dry run.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
gpu_work /tmp/validate_real_gpu; mkdir -p $W/traces $W/smi $W/proof
nvidia-smi; python3 -c "import torch, pynvml, mlflow; print('torch', torch.__version__, 'pynvml', pynvml.__version__ if hasattr(pynvml,'__version__') else '', 'mlflow', mlflow.__version__)"

echo "== NVML/GPM traces"; (
  OUT=$W/traces
  GPU=$(python3 -c "import pynvml as p; p.nvmlInit(); n=str(p.nvmlDeviceGetName(p.nvmlDeviceGetHandleByIndex(0))); print('h200' if 'H200' in n else 'h100' if 'H100' in n else 'gpu')")
  timeout 120 python3 -m listeners.record_trace --out $OUT/${GPU}_matmul.json --seconds 20 --interval 0.1 --gpm-interval 0.2 --load > $OUT/${GPU}_matmul.log 2>&1
  timeout 60 python3 -m listeners.record_trace --out $OUT/${GPU}_idle.json --seconds 4 --interval 0.1 --gpm-interval 0.2 > $OUT/${GPU}_idle.log 2>&1
  nvidia-smi -q > $OUT/${GPU}_nvidia_smi_q.txt 2>&1; nvidia-smi --query-gpu=name,uuid,mig.mode.current,driver_version --format=csv > $OUT/${GPU}_smi.csv 2>&1
  timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/listeners/test_nvml.py tests/listeners/test_gpm.py tests/listeners/test_devices.py tests/listeners/test_replay.py > $OUT/${GPU}_pytest_gpu.log 2>&1
  tail -3 $OUT/*.log
)
echo "== nvidia-smi fixtures"; OUT=$W/smi timeout 120 bash tests/listeners/fixtures/record_smi.sh; ls $W/smi

echo "== GPU proof"; (
  cd $W/proof
  timeout 300 python3 -m pytest -v -s -p no:cacheprovider -m gpu --rootdir=$OLDPWD $OLDPWD/tests/radt_ext/test_gpu_proof.py > pytest_gpu_proof.log 2>&1; tail -30 pytest_gpu_proof.log
  export MLFLOW_TRACKING_URI=sqlite:///$W/proof/mlflow.db
  python3 -m radt_ext.cli listeners > listeners.txt 2>&1; cat listeners.txt
  timeout 120 python3 -m radt_ext.cli run --interval 0.1 --run-name gpu-proof-cli -- python3 -m radt_ext.workloads.matmul --seconds 10 --idle 2 > run_cli.log 2>&1; tail -3 run_cli.log
)

echo "== MPS smoke"; (
  gpu_mps $W/mps  # a private daemon: its own pipe and log folders
  nvidia-cuda-mps-control -d && echo started; sleep 1
  python3 -c "import torch; x=torch.ones(1000,device='cuda'); print('mps client ok', x.sum().item())"
  echo get_server_list | nvidia-cuda-mps-control; echo quit | nvidia-cuda-mps-control; sleep 1; ls $CUDA_MPS_LOG_DIRECTORY; cat $CUDA_MPS_LOG_DIRECTORY/control.log | tail -5
) > $W/mps.log 2>&1; cat $W/mps.log
tar -czf $OUT/validate_real_gpu.tar.gz -C $W .
ls -la $OUT
