"""Which GPUs the workload sees: CUDA_VISIBLE_DEVICES → NVML handles, names, UUIDs, MIG instances.

Every GPU listener resolves its devices here. `GpuDevice.index` is the position in
CUDA_VISIBLE_DEVICES (the index the workload itself uses), which is what metric names carry.
Integer entries are NVML indices (PCI bus order, as with CUDA_DEVICE_ORDER=PCI_BUS_ID).
Callers must have called nvmlInit().
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from listeners.base import ListenerError
from listeners.nvml_backend import nvml


@dataclass
class MigInstance:
    gpu_instance_id: int
    handle: Any
    uuid: str
    name: str


@dataclass
class GpuDevice:
    index: int  # position in CUDA_VISIBLE_DEVICES
    nvml_index: int  # index of the physical GPU (the parent for a MIG device)
    handle: Any  # the device handle; for a MIG device, the MIG handle
    name: str
    uuid: str
    parent_handle: Any = None  # the physical GPU's handle (itself when not MIG)
    gpu_instance_id: int | None = None  # set for a MIG device
    mig_enabled: bool = False  # MIG mode of the physical GPU
    mig_instances: list[MigInstance] = field(default_factory=list)  # a whole GPU's MIG devices

    @property
    def is_mig(self) -> bool:
        return self.gpu_instance_id is not None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mig_enabled(nv, handle) -> bool:
    try:
        current, _pending = nv.nvmlDeviceGetMigMode(handle)
    except nv.NVMLError:  # NotSupported on GPUs without MIG
        return False
    return current == nv.NVML_DEVICE_MIG_ENABLE


def _mig_instances(nv, handle) -> list[MigInstance]:
    out = []
    try:
        count = nv.nvmlDeviceGetMaxMigDeviceCount(handle)
    except nv.NVMLError:
        return out
    for slot in range(count):
        try:
            mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nv.NVMLError:  # NotFound: an empty slot
            continue
        out.append(MigInstance(
            gpu_instance_id=int(nv.nvmlDeviceGetGpuInstanceId(mig)),
            handle=mig,
            uuid=_text(nv.nvmlDeviceGetUUID(mig)),
            name=_text(nv.nvmlDeviceGetName(mig)),
        ))
    return out


def all_gpus() -> list[GpuDevice]:
    """Every physical GPU in NVML order, with its MIG instances when MIG is on."""
    nv = nvml()
    gpus = []
    for i in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(i)
        mig = _mig_enabled(nv, handle)
        gpus.append(GpuDevice(
            index=i, nvml_index=i, handle=handle, parent_handle=handle,
            name=_text(nv.nvmlDeviceGetName(handle)), uuid=_text(nv.nvmlDeviceGetUUID(handle)),
            mig_enabled=mig, mig_instances=_mig_instances(nv, handle) if mig else [],
        ))
    return gpus


def _existing(gpus: list[GpuDevice]) -> str:
    if not gpus:
        return "this machine has no GPU"
    listed = ", ".join(f"{g.nvml_index} ({g.name}, {g.uuid})" for g in gpus)
    migs = [m.uuid for g in gpus for m in g.mig_instances]
    return f"this machine has GPUs {listed}" + (f" and MIG devices {', '.join(migs)}" if migs else "")


def resolve(cuda_visible_devices: str | None) -> list[GpuDevice]:
    """The GPUs a workload with this CUDA_VISIBLE_DEVICES sees, in its own order.

    None: every GPU; "": none; otherwise comma-separated NVML indices, `GPU-<uuid>` (a
    unique prefix is enough, as CUDA allows) or `MIG-<uuid>`. A value naming no device
    raises ListenerError with one line saying which value and which devices exist.
    """
    gpus = all_gpus()
    if cuda_visible_devices is None:
        return gpus
    entries = [e.strip() for e in cuda_visible_devices.split(",")]
    if entries == [""]:
        return []
    out: list[GpuDevice] = []
    for position, entry in enumerate(entries):
        device = _lookup(entry, gpus, cuda_visible_devices)
        device.index = position
        if any(d.uuid == device.uuid for d in out):
            raise ListenerError(
                f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} names {entry!r} twice; list each GPU once")
        out.append(device)
    return out


def _lookup(entry: str, gpus: list[GpuDevice], whole: str) -> GpuDevice:
    def bad(why: str) -> ListenerError:
        return ListenerError(f"CUDA_VISIBLE_DEVICES={whole!r}: {why}; {_existing(gpus)}")

    if not entry:
        raise bad("an empty entry")
    if re.fullmatch(r"-?[0-9]+", entry):  # ASCII digits only: str.isdigit() also takes "²"
        n = int(entry)
        if not 0 <= n < len(gpus):
            raise bad(f"no GPU with index {n}")
        return _copy(gpus[n])
    if entry.startswith("GPU-"):
        found = [g for g in gpus if g.uuid.startswith(entry)]
        if len(found) > 1:
            raise bad(f"{entry!r} matches {len(found)} GPUs; give more of the UUID")
        if not found:
            raise bad(f"no GPU with UUID {entry!r}")
        return _copy(found[0])
    if entry.startswith("MIG-"):
        found = [(g, m) for g in gpus for m in g.mig_instances if m.uuid.startswith(entry)]
        if len(found) > 1:
            raise bad(f"{entry!r} matches {len(found)} MIG devices; give more of the UUID")
        if not found:
            raise bad(f"no MIG device with UUID {entry!r}")
        g, m = found[0]
        return GpuDevice(index=0, nvml_index=g.nvml_index, handle=m.handle, name=m.name, uuid=m.uuid,
                         parent_handle=g.handle, gpu_instance_id=m.gpu_instance_id, mig_enabled=True)
    raise bad(f"{entry!r} is not a GPU index, GPU-<uuid> or MIG-<uuid>")


def _copy(g: GpuDevice) -> GpuDevice:
    return GpuDevice(index=g.index, nvml_index=g.nvml_index, handle=g.handle, name=g.name, uuid=g.uuid,
                     parent_handle=g.parent_handle, mig_enabled=g.mig_enabled,
                     mig_instances=list(g.mig_instances))


def describe(devices: list[GpuDevice] | None = None) -> dict[str, str]:
    """Machine facts for run tags (str → str), for the given devices or every GPU."""
    nv = nvml()
    if devices is None:
        devices = all_gpus()
    tags: dict[str, str] = {"gpu.count": str(len(devices))}

    def put(key: str, fn, *args, convert=_text) -> None:
        try:
            tags[key] = convert(fn(*args))
        except nv.NVMLError:
            pass  # a fact this GPU does not report is left out

    put("gpu.driver", nv.nvmlSystemGetDriverVersion)
    put("gpu.cuda_driver", nv.nvmlSystemGetCudaDriverVersion,
        convert=lambda v: f"{int(v) // 1000}.{int(v) % 1000 // 10}")
    for d in devices:
        p = f"gpu.{d.index}."
        tags[p + "name"] = d.name
        tags[p + "uuid"] = d.uuid
        tags[p + "nvml_index"] = str(d.nvml_index)
        parent = d.parent_handle if d.parent_handle is not None else d.handle
        tags[p + "mig_mode"] = "enabled" if d.mig_enabled else "disabled"
        if d.is_mig:
            tags[p + "gpu_instance_id"] = str(d.gpu_instance_id)
        if d.mig_instances:
            tags[p + "mig_devices"] = ",".join(m.uuid for m in d.mig_instances)
        put(p + "compute_mode", nv.nvmlDeviceGetComputeMode, parent, convert=_compute_mode)
        put(p + "power_limit_w", nv.nvmlDeviceGetPowerManagementLimit, parent,
            convert=lambda mw: f"{int(mw) / 1000:g}")
        put(p + "compute_capability", nv.nvmlDeviceGetCudaComputeCapability, parent,
            convert=lambda cc: f"{cc[0]}.{cc[1]}")
        put(p + "memory_total_mib", nv.nvmlDeviceGetMemoryInfo, d.handle,
            convert=lambda m: str(int(m.total) // (1024 * 1024)))
    return tags


def _compute_mode(mode: Any) -> str:
    return {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}.get(
        int(mode), str(mode))


def unavailable_reason(cuda_visible_devices: str | None) -> str | None:
    """None when NVML starts and at least one visible GPU resolves, else one line why not."""
    nv = nvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        from listeners.nvml_backend import init_error

        return init_error(exc)
    try:
        visible = resolve(cuda_visible_devices)
    except ListenerError as exc:
        return str(exc)
    finally:
        nv.nvmlShutdown()
    if not visible:
        return "no GPU visible to the workload (CUDA_VISIBLE_DEVICES is empty)"
    return None


@contextlib.contextmanager
def started() -> Iterator[Any]:
    """NVML started for the block (a one-line ListenerError where it does not start), shut down after."""
    nv = nvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        from listeners.nvml_backend import init_error

        raise ListenerError(init_error(exc)) from None
    try:
        yield nv
    finally:
        nv.nvmlShutdown()


def gpu_indices() -> list[str]:
    """The NVML index of every physical GPU on this machine, as text ("0", "1", ...); a one-line
    ListenerError when NVML does not start or lists none."""
    with started() as nv:
        try:
            indices = [str(g.nvml_index) for g in all_gpus()]
        except nv.NVMLError as exc:
            raise ListenerError(f"NVML cannot list the GPUs: {exc}") from None
    if not indices:
        raise ListenerError("NVML lists no GPU on this machine")
    return indices


def identities(entries: list[str]) -> dict[str, tuple[str, str]]:
    """{entry: (UUID, name)} for each entry (an NVML index, GPU-<uuid> or MIG-<uuid>) that names a GPU;
    {} where NVML does not start. What an MPS daemon and its clients are given, and how a pool of
    devices tells GPU models apart."""
    nv = nvml()
    try:
        nv.nvmlInit()
    except Exception:
        return {}
    out: dict[str, tuple[str, str]] = {}
    try:
        gpus = all_gpus()
        for entry in entries:
            try:
                found = _lookup(entry.strip(), gpus, entry)
            except ListenerError:
                continue
            out[entry] = (found.uuid, found.name)
    except nv.NVMLError:
        return {}
    finally:
        nv.nvmlShutdown()
    return out
