"""Published specifications of the GPUs the predictor knows, keyed by the name NVML reports.

Peak dense TFLOPs per precision (bf16: tensor cores; fp32: CUDA cores, although convolutions may
use TF32 tensor cores, an efficiency the fitted models learn), memory bandwidth, board power limit,
SM count and boost clock, from the vendors' data sheets (SXM parts where there is a choice). What NVML measured
at profile time (power limit, clocks, bus width) overrides the table for the profiled GPU.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from radt_ext.errors import UsageError


@dataclass(frozen=True)
class GpuSpec:
    name: str
    short: str
    tflops_fp32: float
    tflops_bf16: float
    mem_bandwidth_gbs: float
    power_limit_w: float
    sm_count: int
    sm_clock_max_mhz: int

    def peak_tflops(self, precision: str) -> float:
        return self.tflops_fp32 if precision == "fp32" else self.tflops_bf16

    def row(self) -> dict:
        return asdict(self)


SPECS = {s.name: s for s in [
    GpuSpec("NVIDIA H100 80GB HBM3", "H100", 66.9, 989.4, 3352, 700, 132, 1980),
    GpuSpec("NVIDIA H200", "H200", 66.9, 989.4, 4800, 700, 132, 1980),
    GpuSpec("NVIDIA H100 PCIe", "H100-PCIe", 51.2, 756.0, 2039, 350, 114, 1755),
    GpuSpec("NVIDIA A100-SXM4-80GB", "A100", 19.5, 312.0, 2039, 400, 108, 1410),
    GpuSpec("NVIDIA L40S", "L40S", 91.6, 362.1, 864, 350, 142, 2520),
]}
BY_SHORT = {s.short.lower(): s for s in SPECS.values()}


def lookup(name: str) -> GpuSpec:
    """The spec of a GPU by NVML name or short name; one line naming the known ones otherwise."""
    spec = SPECS.get(name) or BY_SHORT.get(name.lower())
    if spec is None:
        known = ", ".join(f"{s.short} ({s.name})" for s in SPECS.values())
        raise UsageError(f"unknown GPU {name!r}: no specification to predict with; known GPUs: {known}")
    return spec
