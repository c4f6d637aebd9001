"""Stand-in for DCGM's DcgmReader module (shipped with DCGM, not on PyPI) for tests: the constructor and
GetLatestGpuValuesAsFieldIdDict() as DCGM's bindings spell them, serving the `GPU <id>` rows of
fixtures/dcgm/dmon_mig.txt one sample per call, keyed by field id. $STANDIN_DCGM_NO_ENGINE=1 fails to
connect as DCGM does without nv-hostengine."""
import os
from pathlib import Path

TAGS = {"POWER": 155, "TOTEC": 156, "GRACT": 1001, "SMACT": 1002, "SMOCC": 1003, "TENSO": 1004, "DRAMA": 1005,
        "FP64A": 1006, "FP32A": 1007, "FP16A": 1008, "PCITX": 1009, "PCIRX": 1010, "NVLTX": 1011, "NVLRX": 1012}
BLANK = 9223372036854775794  # DCGM_INT64_BLANK


def _samples():
    header, out = [], []
    for line in (Path(__file__).resolve().parent.parent / "fixtures" / "dcgm" / "dmon_mig.txt").read_text().splitlines():
        if line.startswith("#"):
            header = line.lstrip("#").split()[1:]
        elif line.startswith("GPU "):
            parts = line.split()
            values = {TAGS[t]: (BLANK if c == "N/A" else float(c)) for t, c in zip(header, parts[2:])}
            out.append({int(parts[1]): values})
    return out


class DcgmReader:
    def __init__(self, hostname="localhost", fieldIds=None, updateFrequency=10000000, gpuIds=None, **kwargs):
        if os.environ.get("STANDIN_DCGM_NO_ENGINE"):
            raise Exception("Host engine connection invalid/disconnected")
        self.fieldIds, self.gpuIds, self.updateFrequency = fieldIds, gpuIds, updateFrequency
        self._samples = _samples()
        self._next = 0

    def GetLatestGpuValuesAsFieldIdDict(self):
        sample = self._samples[min(self._next, len(self._samples) - 1)]
        self._next += 1
        return {g: {f: v for f, v in values.items() if f in self.fieldIds}
                for g, values in sample.items() if self.gpuIds is None or g in self.gpuIds}

    def Shutdown(self):
        self._samples = []
