"""The YAML sweep spec: parsing and validation into plain objects.

Every problem is one SpecError line naming the file, the entry and the field, raised
before anything runs. The format (docs/collocation.md):

    name: cnn-colloc            # sweep id (tag sweep.id); default: the file's stem
    experiment: collocation     # MLflow experiment; default: the name
    modes: [exclusive, naive, mps]
    devices: all                # or a list ["0", "1"] / [cpu]: a pool; each variant runs once, on the next
                                # free device (default: this machine's GPUs, or cpu where it has none; with
                                # --executor slurm ["0"], each job's first GPU)
    gpus_per_variant: 1         # devices each variant takes from the pool (its CUDA_VISIBLE_DEVICES)
    device_mode: pool           # or each: every variant on every listed device (to compare GPUs)
    repeats: 1
    listeners: nvml,gpm         # device-level, on each group's parent run
    child_listeners: top,gpu_procs
    interval: 0.1
    workloads:
      cnn: {recipe: cnn_baseline, params: {batch_size: 128, epochs: 1}}
      toy: {command: "python toy.py --bs {batch_size}", params: {batch_size: 8},
            mps: {thread_percentage: 50, pinned_mem_limit: 20G}, mig: 3g.71gb, env: {K: V}}
    groups:                     # default: every workload on its own
      - [cnn]
      - {workloads: [cnn, cnn, toy], modes: [naive, mps], grid: {batch_size: [64, 256]}}
      - {workloads: [cnn, toy], modes: [mps], measure_s: 10}   # stopped after 10 s side by side: a pair measured
      - {workloads: [toy], measure_s: 10}                      # ... or alone: its rate, the pairs' baseline
    grid: {batch_size: [128, 512]}      # every workload that declares the param
    random: {samples: 3, seed: 0, params: {lr: {loguniform: [1e-4, 1e-2]}}}
    slurm: {partition: gpu, gpus_per_job: 1, time_limit: 90}   # for --executor slurm (slurm_options.py)
    schedule: pack              # pack the jobs onto the GPUs (radt_ext/packing/options.py): max_slowdown, pack
    system: {cpus: [2, 4], governor: [performance, powersave], env: {OMP_NUM_THREADS: [1, 4]},
             optional: [governor]}  # host settings swept like grid (radt_ext/hostsettings; top or per group)
"""
from __future__ import annotations

import math
import random as random_mod
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from radt_ext.collocation.modes import MODES, NAME
from radt_ext.errors import UsageError
from radt_ext.sweep import recipes

DEVICE_MODES = ("pool", "each")
TOP_KEYS = {"name", "experiment", "modes", "devices", "device_mode", "gpus_per_variant", "repeats", "listeners",
            "child_listeners", "interval", "workloads", "groups", "grid", "random", "slurm", "schedule",
            "max_slowdown", "pack", "system"}
WORKLOAD_KEYS = {"recipe", "command", "params", "mps", "mig", "env"}
GROUP_KEYS = {"workloads", "modes", "grid", "random", "name", "system", "measure_s"}
DISTRIBUTIONS = {"uniform", "loguniform", "choice", "randint"}


class SpecError(UsageError):
    pass


@dataclass
class WorkloadDef:
    name: str
    template: str  # command with {param} placeholders
    params: dict[str, str]
    recipe: str | None = None
    mps_thread_percentage: int | None = None
    mps_pinned_mem_limit: str | None = None
    mig: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] | None = None  # a command given as a list: each item one word, {param} filled in as is

    def render(self, params: dict[str, str]) -> list[str]:
        if self.argv is not None:
            return recipes.render_argv(self.argv, params)
        return recipes.render(self.template, params)


@dataclass
class GroupDef:
    label: str
    workloads: list[str]
    modes: list[str]
    assignments: list[dict[str, str]]  # the grid × random parameter settings, [{}] when none
    systems: list[dict[str, str]] = field(default_factory=lambda: [{}])  # the `system:` settings swept, [{}]: none
    optional: tuple[str, ...] = ()  # system settings that are skipped, not refused, where the host cannot apply them
    # a measurement group: its workloads stopped once their active phases ran this long side by side (their
    # pair measured: collocation/group.py, as pack.pairs_from reads it), or one workload alone (its rate
    # alone, the pairs' baseline); None: each runs to its end
    measure_s: float | None = None


@dataclass
class Sweep:
    name: str
    experiment: str
    source: str
    devices: list[str]
    repeats: int
    listeners: str | None
    child_listeners: str | None
    interval: float | None
    workloads: dict[str, WorkloadDef]
    groups: list[GroupDef]
    slurm: object = None  # SlurmOptions of the `slurm:` block (where a Slurm sweep runs; not in any hash)
    pack: object = None  # PackOptions of schedule: pack / max_slowdown / pack: (how jobs share GPUs; not in any hash)
    device_mode: str = "pool"  # pool: each variant once, on the next free device(s); each: on every device
    gpus_per_variant: int = 1  # devices a pooled variant takes
    devices_line: str | None = None  # without `devices:`, the devices chosen and why ("devices: 0, 1 (...)")


def one_line(text: str) -> str:
    """User text (a key with a newline) escaped so the message stays one line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class _Checker:
    def __init__(self, source: str):
        self.source = source
        self.cpu = "devices lists 'cpu'"  # why a GPU setting cannot apply, in its one line

    def fail(self, entry: str, what: str) -> SpecError:
        return SpecError(one_line(f"{self.source}: {entry}: {what}"))

    def mapping(self, value, entry: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(entry, f"expected a mapping (key: value), got {_kind(value)}")
        for k in value:
            if not isinstance(k, str):
                raise self.fail(entry, f"key {k!r} is not text")
        return value

    def str_list(self, value, entry: str, allow_scalar: bool = True) -> list[str]:
        if allow_scalar and isinstance(value, (str, int)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not value:
            raise self.fail(entry, f"expected a non-empty list, got {_kind(value)}")
        out = []
        for i, v in enumerate(value):
            if not isinstance(v, (str, int)) or isinstance(v, bool):
                raise self.fail(f"{entry}[{i}]", f"expected text, got {_kind(v)}")
            out.append(str(v))
        return out

    def scalar(self, value, entry: str) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float, str)):
            if isinstance(value, float) and not math.isfinite(value):
                raise self.fail(entry, f"{value} is not a finite number")
            return str(value)
        raise self.fail(entry, f"expected a number or text, got {_kind(value)}")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: f"text {value!r}", bool: f"{value}"}.get(
        type(value), f"{type(value).__name__} {value!r}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, but a key given twice in one mapping (a workload defined twice) is an error, not
    silently the last one."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:  # the keys written here; `<<: *x` merges may be overridden
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    twice = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class says so
                    continue
                if twice:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice in one mapping; give each key once",
                        key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path) -> str:
    """The file's text; a one-line SpecError when it cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: byte {exc.start}: not UTF-8 text; save the file as UTF-8") from None


def load(path: str | Path, local: bool = True) -> Sweep:
    """The spec in `path`, checked. local: its variants run on this machine (not a Slurm job each), so a spec
    without `devices:` takes this machine's GPUs, or cpu where it has none."""
    path = Path(path)
    text = read_text(path)
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "document"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}: {where}: not valid YAML ({problem})") from None
    return parse(data, source=str(path), default_name=path.stem, base=path.resolve().parent, local=local)


def parse(data: Any, source: str = "<spec>", default_name: str = "sweep", base: Path | None = None,
          local: bool = True) -> Sweep:
    c = _Checker(source)
    data = c.mapping(data, "top level")
    for key in data:
        if key not in TOP_KEYS:
            raise c.fail(key, f"unknown field; use one of {', '.join(sorted(TOP_KEYS))}")
    name = c.scalar(data.get("name", default_name), "name")
    if not NAME.match(name):
        raise c.fail("name", f"{name!r}: use letters, digits, '_', '-' or '.'")
    experiment = c.scalar(data.get("experiment", name), "experiment")
    if not experiment.strip():
        raise c.fail("experiment", "is empty; name an MLflow experiment, or leave it out to use the sweep's name")
    modes = c.str_list(data.get("modes", ["exclusive"]), "modes")
    for i, m in enumerate(modes):
        if m not in MODES:
            raise c.fail(f"modes[{i}]", f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    if "devices" in data:
        devices, devices_line = _devices(c, data["devices"]), None
    else:
        devices, devices_line = _default_devices(local)
        if devices == ["cpu"]:
            c.cpu = "devices is cpu (no GPU on this machine)"
    for i, d in enumerate(devices):
        if not d.strip():
            raise c.fail(f"devices[{i}]", "is empty; give a GPU index, GPU-<uuid> or cpu")
        if d in devices[:i]:
            raise c.fail(f"devices[{i}]", f"{d!r} is listed twice; list each device once")
    device_mode = c.scalar(data.get("device_mode", "pool"), "device_mode")
    if device_mode not in DEVICE_MODES:
        raise c.fail("device_mode", f"{device_mode!r}: use pool (each variant once, on the next free device) "
                                    "or each (every variant on every listed device)")
    gpus = data.get("gpus_per_variant", 1)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise c.fail("gpus_per_variant", f"expected a whole number 1 or more, got {_kind(gpus)}")
    if gpus > 1:
        if device_mode != "pool":
            raise c.fail("gpus_per_variant", "applies to device_mode pool; leave it out with device_mode each")
        if "cpu" in devices:
            raise c.fail("gpus_per_variant", f"{gpus} GPUs per variant, but {c.cpu}; list GPUs only")
        if gpus > len(devices):
            raise c.fail("gpus_per_variant", f"{gpus} GPUs per variant, but the pool has {len(devices)} "
                                             f"({', '.join(devices)}); list more devices or ask for fewer")
    repeats = data.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= 1000:
        raise c.fail("repeats", f"expected a whole number 1..1000, got {_kind(repeats)}")
    listeners = _opt_str(c, data, "listeners")
    child_listeners = _opt_str(c, data, "child_listeners")
    interval = data.get("interval")
    if interval is not None and (not isinstance(interval, (int, float)) or isinstance(interval, bool)
                                 or not 0.001 <= interval <= 3600):
        raise c.fail("interval", f"expected seconds between 0.001 and 3600, got {_kind(interval)}")
    if "workloads" not in data:
        raise c.fail("workloads", "missing; name at least one workload (recipe or command)")
    workloads = {}
    for wname, wdef in c.mapping(data["workloads"], "workloads").items():
        workloads[wname] = _workload(c, wname, wdef, base)
    if not workloads:
        raise c.fail("workloads", "empty; name at least one workload")
    grid = _grid(c, data.get("grid"), "grid")
    rand = _random(c, data.get("random"), "random")
    system = _system(c, data.get("system"), "system", devices)
    groups_raw = data.get("groups")
    if groups_raw is None:
        groups_raw = [[w] for w in workloads]
    if not isinstance(groups_raw, list) or not groups_raw:
        raise c.fail("groups", f"expected a non-empty list of groups, got {_kind(groups_raw)}")
    groups = []
    for gi, g in enumerate(groups_raw):
        entry = f"groups[{gi}]"
        if isinstance(g, (list, str)):
            g = {"workloads": g}
        g = c.mapping(g, entry)
        for key in g:
            if key not in GROUP_KEYS:
                raise c.fail(f"{entry}.{key}", f"unknown field; use one of {', '.join(sorted(GROUP_KEYS))}")
        members = c.str_list(g.get("workloads"), f"{entry}.workloads")
        for i, m in enumerate(members):
            if m not in workloads:
                raise c.fail(f"{entry}.workloads[{i}]", f"no workload named {m!r}; defined: {', '.join(workloads)}")
        gmodes = c.str_list(g["modes"], f"{entry}.modes") if "modes" in g else modes
        for i, m in enumerate(gmodes):
            if m not in MODES:
                raise c.fail(f"{entry}.modes[{i}]", f"unknown mode {m!r}; choose from {', '.join(MODES)}")
            if m in ("mps", "mig") and "cpu" in devices:
                raise c.fail(f"{entry}.modes[{i}]", f"mode {m} needs a GPU; {c.cpu}")
            if m in ("mps", "mig") and gpus > 1:
                raise c.fail(f"{entry}.modes[{i}]", f"mode {m} runs on one GPU; gpus_per_variant is {gpus}")
            if m == "mig":
                for w in members:
                    if not workloads[w].mig:
                        raise c.fail(f"workloads.{w}.mig", "mode mig needs a MIG profile (e.g. 3g.71gb) or MIG-<uuid>")
        ggrid = _grid(c, g["grid"], f"{entry}.grid") if "grid" in g else grid
        grand = _random(c, g["random"], f"{entry}.random") if "random" in g else rand
        declared = set().union(*(workloads[w].params for w in members))
        for key in list(ggrid) + list((grand or {}).get("params", {})):
            if key not in declared:
                where = f"{entry}.grid" if key in ggrid else f"{entry}.random"
                raise c.fail(f"{where}.{key}", f"no workload of this group declares param {key!r}; "
                                               "add it to the workload's params")
        measure_s = None
        if "measure_s" in g:
            measure_s = g["measure_s"]
            # the pair is read over all but the guard's first settling second, and 2 s at least (pairs.py)
            if isinstance(measure_s, bool) or not isinstance(measure_s, (int, float)) or not 3 <= measure_s <= 3600:
                raise c.fail(f"{entry}.measure_s", f"expected the seconds (3 or more) its workloads run side by side "
                                                   f"before they are stopped, e.g. 10; got {measure_s!r}")
            if len(members) > 1 and not set(gmodes) <= {"naive", "mps"}:
                raise c.fail(f"{entry}.measure_s", "measures one workload alone, or several side by side: give "
                                                   "a group of several modes naive or mps only")
            measure_s = float(measure_s)
        label = c.scalar(g.get("name", "+".join(members)), f"{entry}.name")
        systems, optional = _system(c, g["system"], f"{entry}.system", devices) if "system" in g else system
        groups.append(GroupDef(label, members, gmodes, _assignments(ggrid, grand), systems, optional, measure_s))
    slurm = None
    if data.get("slurm") is not None:
        from radt_ext.sweep import slurm_options

        slurm = slurm_options.parse(data["slurm"], source)
        if slurm.folder and base is not None:
            slurm.folder = str(base / slurm.folder)
    pack = _pack(data, groups, source)
    return Sweep(name, experiment, source, devices, repeats, listeners, child_listeners,
                 float(interval) if interval is not None else None, workloads, groups, slurm, pack=pack,
                 device_mode=device_mode, gpus_per_variant=gpus, devices_line=devices_line)


def _pack(data: dict, groups: list[GroupDef], source: str):
    if data.get("schedule") is None and data.get("pack") is None and "max_slowdown" not in data:
        return None
    measuring = next((i for i, g in enumerate(groups) if g.measure_s is not None), None)
    if measuring is not None:
        raise SpecError(f"{source}: groups[{measuring}].measure_s: a measurement of pairs is a sweep of its own; "
                        "run it without schedule: pack and name its experiment in pack.pairs_from")
    from radt_ext.sweep.schedulers import scheduler

    try:
        return scheduler("pack").parse(data, list(dict.fromkeys(m for g in groups for m in g.modes)), source)
    except UsageError as exc:
        raise SpecError(one_line(str(exc))) from None


def _devices(c: _Checker, value) -> list[str]:
    """`devices: all` is every GPU NVML lists here (so its variants hash as if the list were written)."""
    if value != "all":
        return c.str_list(value, "devices")
    from listeners import devices
    from listeners.base import ListenerError

    try:
        return devices.gpu_indices()
    except ListenerError as exc:
        raise c.fail("devices", f"all: {exc}; list the devices instead, e.g. [\"0\"] or [cpu]") from None


def _default_devices(local: bool) -> tuple[list[str], str | None]:
    """A spec without `devices:`: every GPU NVML lists here (as `devices: all`) or, where NVML does not start,
    every GPU `nvidia-smi -L` lists (as a device is checked), else cpu; and the line that says which. Run as a
    Slurm job each (not local): the job's first GPU, as the job's allocation decides."""
    if not local:
        return ["0"], None
    from listeners import devices, registry
    from listeners.base import ListenerError

    try:
        found = devices.gpu_indices()
    except ListenerError as exc:
        found = registry.smi_gpu_indices()
        if not found:
            return ["cpu"], f"devices: cpu (no GPU on this machine: {exc}; nvidia-smi lists none)"
    return found, f"devices: {', '.join(found)} (this machine's GPUs)"


def _opt_str(c: _Checker, data: dict, key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise c.fail(key, f"expected text such as nvml,gpm:0.05, got {_kind(value)}")
    from listeners import registry

    try:
        registry.parse_spec(value)
    except registry.SpecError as exc:
        raise c.fail(key, str(exc)) from None
    return value


def _workload(c: _Checker, name: str, wdef, base: Path | None) -> WorkloadDef:
    entry = f"workloads.{name}"
    if not NAME.match(name):
        raise c.fail(entry, "workload names use letters, digits, '_', '-' or '.'")
    wdef = c.mapping(wdef, entry)
    for key in wdef:
        if key not in WORKLOAD_KEYS:
            raise c.fail(f"{entry}.{key}", f"unknown field; use one of {', '.join(sorted(WORKLOAD_KEYS))}")
    if ("recipe" in wdef) == ("command" in wdef):
        raise c.fail(entry, "give exactly one of recipe (a recipes/NAME) or command")
    params = {k: c.scalar(v, f"{entry}.params.{k}") for k, v in c.mapping(wdef.get("params") or {}, f"{entry}.params").items()}
    recipe = argv = None
    if "recipe" in wdef:
        recipe = c.scalar(wdef["recipe"], f"{entry}.recipe")
        try:
            template, defaults = recipes.load(recipe, base)
        except recipes.RecipeError as exc:
            raise c.fail(f"{entry}.recipe", str(exc)) from None
        for k in params:
            if k not in defaults:
                raise c.fail(f"{entry}.params.{k}", f"recipe {recipe} has no parameter {k!r}; "
                                                    f"it has {', '.join(defaults)}")
        params = {**defaults, **params}
    else:
        command = wdef["command"]
        if isinstance(command, list):
            import shlex

            argv = [c.scalar(x, f"{entry}.command[{i}]") for i, x in enumerate(command)]
            template = " ".join(shlex.quote(x) for x in argv)
        else:
            template = c.scalar(command, f"{entry}.command")
        if not template.strip():
            raise c.fail(f"{entry}.command", "is empty")
        try:
            used = recipes.placeholders(template)
        except ValueError as exc:
            raise c.fail(f"{entry}.command", f"bad {{placeholder}}: {exc}") from None
        for k in used:
            if k not in params:
                raise c.fail(f"{entry}.command", f"uses {{{k}}} but params has no {k!r}")
    try:
        recipes.render_argv(argv, params) if argv is not None else recipes.render(template, params)
    except (ValueError, KeyError, IndexError, AttributeError) as exc:
        raise c.fail(f"{entry}.command", f"cannot be filled in: {exc}") from None
    mps = c.mapping(wdef.get("mps") or {}, f"{entry}.mps")
    for key in mps:
        if key not in ("thread_percentage", "pinned_mem_limit"):
            raise c.fail(f"{entry}.mps.{key}", "unknown field; use thread_percentage or pinned_mem_limit")
    tp = mps.get("thread_percentage")
    if tp is not None and (not isinstance(tp, int) or isinstance(tp, bool) or not 1 <= tp <= 100):
        raise c.fail(f"{entry}.mps.thread_percentage", f"expected a whole number 1..100, got {_kind(tp)}")
    limit = mps.get("pinned_mem_limit")
    if limit is not None and not re.match(r"^\d+(\.\d+)?[KMGT]?$", str(limit)):
        raise c.fail(f"{entry}.mps.pinned_mem_limit", f"{limit!r} is not a size like 20G")
    mig = wdef.get("mig")
    if mig is not None:
        mig = c.scalar(mig, f"{entry}.mig")
    env = {k: c.scalar(v, f"{entry}.env.{k}") for k, v in c.mapping(wdef.get("env") or {}, f"{entry}.env").items()}
    return WorkloadDef(name, template, params, recipe, tp, str(limit) if limit is not None else None, mig, env,
                       argv)


def _grid(c: _Checker, value, entry: str) -> dict[str, list[str]]:
    if value is None:
        return {}
    out = {}
    for k, values in c.mapping(value, entry).items():
        if not isinstance(values, list) or not values:
            raise c.fail(f"{entry}.{k}", f"expected a non-empty list of values, got {_kind(values)}")
        out[k] = [c.scalar(v, f"{entry}.{k}[{i}]") for i, v in enumerate(values)]
    return out


def _system(c: _Checker, value, entry: str, devices: list[str]) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """The `system:` block: each setting's values (a value alone is a list of one), swept like grid; env's
    variables each swept on their own; `optional`: the settings skipped where this host cannot apply them.
    Returns (every combination of the values as {key: canonical text}, the optional keys)."""
    import itertools

    from radt_ext import hostsettings

    if value is None:
        return [{}], ()
    value = c.mapping(value, entry)
    known = [*hostsettings.KINDS, "env", "optional"]
    axes: dict[str, list[str]] = {}
    for key, raw in value.items():
        if key not in known:
            raise c.fail(f"{entry}.{key}", f"unknown setting; use one of {', '.join(known)}")
        if key == "optional":
            continue
        if key == "env":
            for name, values in c.mapping(raw, f"{entry}.env").items():
                if not hostsettings.env.NAME.match(name):
                    raise c.fail(f"{entry}.env.{name}", "is not an environment variable's name (letters, digits, _)")
                axes[hostsettings.ENV_PREFIX + name] = _values(c, hostsettings.env, values, f"{entry}.env.{name}")
            continue
        axes[key] = _values(c, hostsettings.KINDS[key], raw, f"{entry}.{key}")
        if hostsettings.KINDS[key].SCOPE == "gpu" and "cpu" in devices:
            raise c.fail(f"{entry}.{key}", f"applies to a GPU, but {c.cpu}; list GPUs only")
    optional = c.str_list(value["optional"], f"{entry}.optional") if "optional" in value else []
    for i, key in enumerate(optional):
        if key not in hostsettings.OPTIONAL_KEYS:
            raise c.fail(f"{entry}.optional[{i}]", f"{key!r} cannot be optional; name one of "
                                                    f"{', '.join(hostsettings.OPTIONAL_KEYS)}")
        if key not in axes:
            raise c.fail(f"{entry}.optional[{i}]", f"{key!r} is not set in this system block; set it or drop it here")
    if not axes:
        raise c.fail(entry, "sets nothing; give a setting such as cpus: [2, 4], or leave the block out")
    combos = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    return combos, tuple(optional)


def _values(c: _Checker, kind, raw, entry: str) -> list[str]:
    """A setting's values: a list, or a value alone; each in its canonical text."""
    items = raw if isinstance(raw, list) else [raw]  # cpus: [[0, 1]] is one set of CPU ids, [1, 2] two counts
    if not items:
        raise c.fail(entry, "is an empty list; give at least one value")
    out = []
    for i, item in enumerate(items):
        try:
            text = kind.parse(item)
        except ValueError as exc:
            raise c.fail(f"{entry}[{i}]" if items is raw else entry, str(exc)) from None
        if text in out:
            raise c.fail(f"{entry}[{i}]", f"{text} is given twice; give each value once")
        out.append(text)
    return out


def _random(c: _Checker, value, entry: str) -> dict | None:
    if value is None:
        return None
    value = c.mapping(value, entry)
    for key in value:
        if key not in ("samples", "seed", "params"):
            raise c.fail(f"{entry}.{key}", "unknown field; use samples, seed and params")
    samples = value.get("samples")
    if not isinstance(samples, int) or isinstance(samples, bool) or not 1 <= samples <= 10000:
        raise c.fail(f"{entry}.samples", f"expected a whole number 1..10000, got {_kind(samples)}")
    seed = value.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise c.fail(f"{entry}.seed", f"expected a whole number, got {_kind(seed)}")
    params = {}
    for k, dist in c.mapping(value.get("params"), f"{entry}.params").items():
        e = f"{entry}.params.{k}"
        dist = c.mapping(dist, e)
        if len(dist) != 1 or next(iter(dist)) not in DISTRIBUTIONS:
            raise c.fail(e, f"give one of {', '.join(sorted(DISTRIBUTIONS))}, e.g. {{uniform: [0.1, 0.5]}}")
        kind, arg = next(iter(dist.items()))
        if kind == "choice":
            if not isinstance(arg, list) or not arg:
                raise c.fail(f"{e}.choice", f"expected a non-empty list, got {_kind(arg)}")
            arg = [c.scalar(v, f"{e}.choice[{i}]") for i, v in enumerate(arg)]
        else:
            ok = (isinstance(arg, list) and len(arg) == 2
                  and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in arg))
            if not ok or arg[0] > arg[1]:
                raise c.fail(f"{e}.{kind}", f"expected [low, high] with low <= high, got {_kind(arg)}")
            if kind == "loguniform" and arg[0] <= 0:
                raise c.fail(f"{e}.loguniform", "bounds must be above 0")
            if kind == "randint" and not all(isinstance(x, int) for x in arg):
                raise c.fail(f"{e}.randint", "bounds must be whole numbers")
        params[k] = (kind, arg)
    return {"samples": samples, "seed": seed, "params": params}


def _assignments(grid: dict[str, list[str]], rand: dict | None) -> list[dict[str, str]]:
    import itertools

    points = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())] if grid else [{}]
    if not rand:
        return points
    rng = random_mod.Random(rand["seed"])
    drawn = []
    for _ in range(rand["samples"]):
        values = {}
        for k, (kind, arg) in sorted(rand["params"].items()):
            if kind == "choice":
                values[k] = rng.choice(arg)
            elif kind == "randint":
                values[k] = str(rng.randint(arg[0], arg[1]))
            elif kind == "uniform":
                values[k] = f"{rng.uniform(arg[0], arg[1]):.6g}"
            else:
                values[k] = f"{math.exp(rng.uniform(math.log(arg[0]), math.log(arg[1]))):.6g}"
        drawn.append(values)
    out: list[dict[str, str]] = []
    for setting in ({**p, **d} for p in points for d in drawn):
        if setting not in out:  # a draw that repeats a setting would run the same variant twice
            out.append(setting)
    return out
