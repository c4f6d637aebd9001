"""The GPU proof: a bf16 matmul load under `radt-ext run` with every available listener.

Runs only where a real NVIDIA GPU answers (marker `gpu`); its command and output are
committed under docs/validation/.
"""
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import full_rate, only_run, radt

pytestmark = pytest.mark.gpu


def test_matmul_under_every_listener(tracking_uri):
    res = radt("run", "--interval", "0.1", "--", sys.executable, "-m", "radt_ext.workloads.matmul",
               "--seconds", "12", "--idle", "3", timeout=300)
    assert res.returncode == 0, res.stderr
    run = only_run(tracking_uri)
    client = MlflowClient(tracking_uri)
    m, tags = run.data.metrics, run.data.tags
    print("listeners:", tags["radt_ext.listeners"])
    print({k: v for k, v in sorted(m.items()) if k.startswith("summary/")})
    assert "nvml" in tags["radt_ext.listeners"] and "gpm" in tags["radt_ext.listeners"]

    power = sorted(full_rate(tracking_uri, run.info.run_id, "system/gpu0_power_w"), key=lambda p: p.timestamp)
    idle = min(p.value for p in power[:10])
    peak = max(p.value for p in power)
    print(f"idle {idle:.0f} W, peak {peak:.0f} W")
    assert peak > idle + 100

    energy = sorted(full_rate(tracking_uri, run.info.run_id, "system/gpu0_energy_j"), key=lambda p: p.timestamp)
    assert all(b.value >= a.value for a, b in zip(energy, energy[1:]))  # the counter only grows
    counter, integrated = m["summary/e2e_gpu_total_energy_j"], m["summary/e2e_gpu_total_energy_integrated_j"]
    print(f"counter {counter:.1f} J, integrated power {integrated:.1f} J")
    assert abs(counter - integrated) / counter < 0.05

    sm = full_rate(tracking_uri, run.info.run_id, "system/gpu0_sm_active_pct")
    loaded = [p.value for p in sm if p.value > 0]
    assert max(loaded) > 50
    half = (idle + peak) / 2
    busy_ts = [p.timestamp for p in power if p.value > half]
    during = [p.value for p in sm if busy_ts and busy_ts[0] <= p.timestamp <= busy_ts[-1]]
    print(f"SM active during load: mean {sum(during) / len(during):.1f} %")
    assert sum(during) / len(during) > 50

    for name in ("system/gpu0_temp_c", "system/gpu0_sm_clock_mhz", "system/gpu0_mem_clock_mhz"):
        assert name in m, name
    assert m["summary/e2e_gpu_max_peak_temp_c"] > 20
    assert tags["machine.gpu.0.name"].startswith("NVIDIA") and tags["machine.gpu.driver"]
