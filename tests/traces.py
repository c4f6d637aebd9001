"""The traces the CPU tests replay for a machine they do not have, named once here."""
import os

TRACES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "listeners", "traces")
# a 2-GPU host: GPU 0 and GPU 1 with their own UUIDs (every 2-GPU test replays this file)
TWO_GPUS = os.path.join(TRACES, "h200x2_derived.json")


def answers(path: str, call: str) -> dict:
    import json

    with open(path) as fh:
        return json.load(fh)["calls"][call]


def gpu_uuids(path: str = TWO_GPUS) -> list[str]:
    """The UUID of each GPU of a trace, in NVML order."""
    found = answers(path, "nvmlDeviceGetUUID")
    return [found[f'[{{"ref":"dev{i}"}}]'][0] for i in range(len(found)) if f'[{{"ref":"dev{i}"}}]' in found]


def gpu_name(path: str = TWO_GPUS, index: int = 0) -> str:
    return answers(path, "nvmlDeviceGetName")[f'[{{"ref":"dev{index}"}}]'][0]
