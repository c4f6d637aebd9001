"""The traces the CPU tests replay for a machine they do not have, named once here."""
import os

TRACES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "listeners", "traces")
# a 2-GPU host recorded on two H100s: GPU 0 idle, GPU 1 idle then a bf16 matmul load, each with its own UUID
# and the driver's power sample buffer (every 2-GPU test replays this file)
TWO_GPUS = os.path.join(TRACES, "h100x2_power_samples.json")
# a machine without an NVIDIA driver: nvmlInit fails
NO_DRIVER = os.path.join(TRACES, "no_driver.json")


def answers(path: str, call: str) -> dict:
    import json

    with open(path) as fh:
        return json.load(fh)["calls"][call]


def _handle(path: str, index: int) -> str:
    """The call key of NVML's GPU `index` in a trace (its handle as the recorder labelled it)."""
    import json

    return "[" + json.dumps(answers(path, "nvmlDeviceGetHandleByIndex")[f"[{index}]"][0], separators=(",", ":")) + "]"


def gpu_uuids(path: str = TWO_GPUS) -> list[str]:
    """The UUID of each GPU of a trace, in NVML order."""
    uuids = answers(path, "nvmlDeviceGetUUID")
    return [uuids[_handle(path, i)][0] for i in range(len(answers(path, "nvmlDeviceGetHandleByIndex")))]


def gpu_name(path: str = TWO_GPUS, index: int = 0) -> str:
    return answers(path, "nvmlDeviceGetName")[_handle(path, index)][0]


# one H200 recorded under a bf16 matmul load (every one-GPU GPU-settings test derives from it)
H200_MATMUL = os.path.join(TRACES, "h200_matmul.json")


def settings_trace(folder, permitted: bool = True, near_cpus=(1,), mig: bool = False) -> str:
    """A derived trace of that H200 that answers the GPU settings' calls (listeners/traces/derive_settings.py):
    setters permitted or not, the CPUs near it, in MIG mode or not; its path in `folder`."""
    import json
    import sys

    if TRACES not in sys.path:
        sys.path.insert(0, TRACES)
    import derive_mig
    import derive_settings
    from listeners.replay import read_recorded

    trace = read_recorded(H200_MATMUL)
    if mig:
        trace = derive_mig.derive(trace)
    path = os.path.join(str(folder), f"h200_settings_{'ok' if permitted else 'refused'}{'_mig' if mig else ''}.json")
    with open(path, "w") as fh:
        json.dump(derive_settings.derive(trace, permitted=permitted, near_cpus=tuple(near_cpus)), fh)
    return path
