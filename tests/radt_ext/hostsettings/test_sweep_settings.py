"""A sweep's `system:` block end to end on this machine's CPUs (real affinity, real child processes, a real
SQLite store), its refusals before anything runs, cgroup v2 and cpufreq where this host allows them, and
the GPU power limit and clocks on the NVML replay layer, restored after a variant and after a SIGKILL."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from mlflow.tracking import MlflowClient

from listeners import nvml_backend
from listeners.replay import SETS_ENV, Replay
from radt_ext import sweep
from radt_ext.hostsettings import cpu_quota, governor
from radt_ext.hostsettings.base import Where
from radt_ext.sweep.spec import SpecError
from radt_ext.view import mlflow_format as fmt
from tests.radt_ext.helpers import parent_runs, radt
from tests.traces import settings_trace

PROBE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "sweep", "affinity_workload.py")
CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture
def hs_dir(tmp_path, monkeypatch):
    """The restore files' folder: the test's own."""
    folder = tmp_path / "hostsettings"
    monkeypatch.setenv("RADT_EXT_HOSTSETTINGS_DIR", str(folder))
    return folder


def write_spec(tmp_path, body: str, out: str, hold: float = 0, devices: str = "[cpu]") -> str:
    path = tmp_path / "s.yaml"
    command = f"{sys.executable} {PROBE} {out}" + (f" {hold}" if hold else "")
    path.write_text(textwrap.dedent(f"""
        name: host
        devices: {devices}
        interval: 0.2
        listeners: {"nvml" if devices != "[cpu]" else "top"}
        child_listeners: top
        workloads:
          probe: {{command: "{command}"}}
    """) + textwrap.dedent(body))
    return str(path)


def lines(path) -> list[dict]:
    with open(path) as fh:
        return [json.loads(x) for x in fh if x.strip()]



# -- the spec ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block, where, what", [
    ({"cpus": [0]}, "system.cpus[0]", "a count of 0 CPUs; give 1 or more, or CPU ids as a list in the list"),
    ({"cpus": "0-x"}, "system.cpus", "is not a CPU list such as 0-3,8"),
    ({"nice": 3}, "system.nice", "unknown setting; use one of cpus, cpu_quota_pct, governor"),
    ({"cpus": 2, "optional": ["governor"]}, "system.optional[0]", "'governor' is not set in this system block"),
    ({"env": {"OMP": [1]}, "optional": ["env"]}, "system.optional[0]", "'env' cannot be optional"),
    ({"env": {"1X": [1]}}, "system.env.1X", "is not an environment variable's name"),
    ({"governor": ["performance", "performance"]}, "system.governor[1]", "performance is given twice"),
    ({"cpu_quota_pct": [-5]}, "system.cpu_quota_pct[0]", "a number of percent of one CPU above 0"),
    ({"gpu_clocks_mhz": ["1600-1200"]}, "system.gpu_clocks_mhz[0]", "is not a clock range such as 1200-1600"),
    ({"gpu_power_limit_w": [300]}, "system.gpu_power_limit_w", "applies to a GPU, but devices lists 'cpu'"),
    ({}, "system", "sets nothing"),
])
def test_a_bad_system_block_is_one_line_naming_the_field(block, where, what):
    spec = {"devices": ["cpu"], "workloads": {"w": {"command": "true"}}, "system": block}
    with pytest.raises(SpecError) as err:
        sweep.plan_from_dict(spec)
    message = str(err.value)
    assert "\n" not in message and f"{where}: " in message and what in message, message


def test_settings_multiply_the_variants_like_grid_and_a_group_block_replaces_the_top_one():
    spec = {"devices": ["cpu"], "workloads": {"w": {"command": "echo {bs}", "params": {"bs": 1}}},
            "grid": {"bs": [1, 2]},
            "system": {"cpus": [1, [0, 1], "1"], "env": {"OMP_NUM_THREADS": [1, 4]}, "governor": "performance",
                       "optional": ["governor"]},
            "groups": [["w"], {"workloads": ["w"], "name": "half", "system": {"cpu_quota_pct": 50}}]}
    variants = sweep.plan_from_dict(spec)
    top = [v for v in variants if v.label == "w"]
    assert len(top) == 2 * 3 * 2  # bs × cpus × OMP_NUM_THREADS
    assert {v.system["cpus"] for v in top} == {"1", "[0-1]", "[1]"}
    assert {v.optional for v in top} == {("governor",)}
    assert len({v.hash for v in variants}) == len(variants)
    half = [v for v in variants if v.label == "half"]
    assert [v.system for v in half] == [{"cpu_quota_pct": "50"}] * 2 and half[0].optional == ()
    assert "cpu_quota_pct=50" in half[0].title
    plain = sweep.plan_from_dict({"devices": ["cpu"], "workloads": {"w": {"command": "true"}}})[0]
    assert "system" not in plain._content()  # sweeps without host settings keep their hashes


# -- real affinity -----------------------------------------------------------------------------------------

def test_each_variant_s_workload_tree_sees_the_cpus_it_was_given(tmp_path, tracking_uri, hs_dir):
    if len(CPUS) < 2:
        pytest.skip(f"this process may use {len(CPUS)} CPU; the test gives variants 1 and 2")
    out = tmp_path / "seen.jsonl"
    spec = write_spec(tmp_path, f"""
        system: {{cpus: [1, 2], env: {{OMP_NUM_THREADS: [3]}}}}
        groups:
          - [probe]
          - {{workloads: [probe], name: pinned, system: {{cpus: [[{CPUS[-1]}]]}}}}
    """, str(out))
    done = radt("sweep", spec, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = lines(out)
    assert sorted(len(s["cpus"]) for s in seen) == [1, 1, 2]
    for s in seen:
        assert s["grandchild"] == s["cpus"]  # its children's children inherited them
    assert [s["cpus"] for s in seen if s["omp"] is None] == [[CPUS[-1]]]  # the pinned group: its own block
    assert sorted(len(s["cpus"]) for s in seen if s["omp"] == "3") == [1, 2]
    runs = parent_runs(tracking_uri)
    tags = sorted(({k: v for k, v in r.data.tags.items() if k.startswith("system.")} for r in runs),
                  key=lambda t: t["system.cpus"])
    assert [t["system.cpus"] for t in tags] == ["1", "2", f"[{CPUS[-1]}]"]
    assert [len(t["system.cpus.host"].replace("-", ",").split(",")) for t in tags[:2]] == [1, 2]
    assert tags[2]["system.cpus.host"] == str(CPUS[-1]) and tags[2]["system.cpus.status"] == "applied: as listed"
    assert tags[0]["system.env.OMP_NUM_THREADS"] == "3"
    assert "cpus=1 OMP_NUM_THREADS=3" in done.stderr and "system" in done.stderr.split("sweep results")[1]
    client = MlflowClient(tracking_uri)
    _, _, view = fmt.decode(client.get_experiment(runs[0].info.experiment_id).tags["mlflow.sharedViewState.radt-ext"])
    assert {"tags.`system.cpus`", "tags.`system.cpus.host`", "tags.`system.env.OMP_NUM_THREADS`"} <= \
        set(view["selectedColumns"])
    assert not [p for p in hs_dir.iterdir()]  # every restore file and launcher report gone


# -- refused before anything runs, or skipped where optional --------------------------------------------------

def refusals() -> list:
    out = []
    for module, value in ((governor, "performance"), (cpu_quota, "50")):
        reason = module.check(value, Where(["cpu"]))
        out.append(pytest.param(module.KEY, value, reason, id=module.KEY, marks=[] if reason else pytest.mark.skip(
            reason=f"this host can apply {module.KEY}: the refusal is not what it shows")))
    return out


@pytest.mark.parametrize("key, value, reason", refusals())
@pytest.mark.new_store
def test_a_setting_this_host_cannot_apply_is_refused_before_anything_runs(tmp_path, tracking_uri, hs_dir,
                                                                          key, value, reason):
    out = tmp_path / "seen.jsonl"
    done = radt("sweep", write_spec(tmp_path, f"system: {{{key}: {value}, cpus: 1}}\n", str(out)), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"Error: system.{key}: {value}: {reason}; mark it optional (optional: [{key}]) to run without it"
    assert not out.exists() and not os.path.exists(tracking_uri[len("sqlite:///"):])  # nothing ran, no store


@pytest.mark.parametrize("key, value, reason", refusals())
def test_an_optional_setting_this_host_cannot_apply_is_skipped_and_recorded(tmp_path, tracking_uri, hs_dir,
                                                                            key, value, reason):
    out = tmp_path / "seen.jsonl"
    dry = radt("sweep", write_spec(tmp_path, f"system: {{{key}: {value}, optional: [{key}]}}\n", str(out)),
               "--dry-run", cwd=tmp_path)
    assert f"[0] system.{key}: {value}: skipped (optional) on this host: {reason}" in dry.stderr
    done = radt("sweep", str(tmp_path / "s.yaml"), timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"system.{key}: {value}: skipped where it runs (optional): {reason}" in done.stderr
    (run,) = parent_runs(tracking_uri)
    assert run.data.tags[f"system.{key}"] == value
    assert run.data.tags[f"system.{key}.status"] == f"skipped: {reason}"
    assert f"system.{key}.host" not in run.data.tags and len(lines(out)) == 1


# -- cgroup v2 and cpufreq, for real where this host allows them ------------------------------------------

def test_a_cgroup_quota_is_applied_to_the_workload_and_removed_after(tmp_path, tracking_uri, hs_dir):
    reason = cpu_quota.check("50", Where(["cpu"]))
    if reason:
        pytest.skip(f"cgroup v2 quota not writable here: {reason}")
    out = tmp_path / "seen.jsonl"
    spec = write_spec(tmp_path, "system: {cpu_quota_pct: 50}\n", str(out))
    done = radt("sweep", spec, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run,) = parent_runs(tracking_uri)
    assert run.data.tags["system.cpu_quota_pct.host"] == "50"
    made = run.data.tags["system.cpu_quota_pct.status"].split("cgroup ")[1].split(",")[0]
    assert not os.path.exists(made) and "removed" in run.data.tags["system.cpu_quota_pct.restored"]


def test_the_governor_is_set_for_the_variant_and_put_back(tmp_path, tracking_uri, hs_dir):
    files = governor.files()
    before = {str(p): p.read_text().strip() for p in files}
    other = next(iter(before.values()), "performance")
    reason = governor.check(other, Where(["cpu"]))
    if reason:
        pytest.skip(f"cpufreq not writable here: {reason}")
    out = tmp_path / "seen.jsonl"
    spec = write_spec(tmp_path, f"system: {{governor: {other}}}\n", str(out))
    done = radt("sweep", spec, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run,) = parent_runs(tracking_uri)
    assert run.data.tags["system.governor.host"] == other
    assert {str(p): p.read_text().strip() for p in files} == before


# -- GPU power limit and clocks on the replay layer ---------------------------------------------------------

@pytest.fixture
def gpu_replay(tmp_path, monkeypatch, tracking_uri, hs_dir):
    def use(permitted: bool = True) -> str:
        trace = settings_trace(tmp_path, permitted=permitted)
        monkeypatch.setenv(nvml_backend.REPLAY_ENV, trace)
        monkeypatch.setenv(SETS_ENV, str(tmp_path / "sets.jsonl"))
        nvml_backend.reset()
        return trace
    yield use
    nvml_backend.reset()


def setter_calls(trace) -> list[tuple]:
    return [(c["fn"][len("nvmlDevice"):], c["args"], c["pid"]) for c in Replay(trace).set_calls()]


def test_gpu_power_and_clocks_are_set_for_each_variant_and_restored_after_it(tmp_path, gpu_replay):
    trace = gpu_replay()
    spec = write_spec(tmp_path, "system: {gpu_power_limit_w: [250, 300], gpu_clocks_mhz: 1410}\n",
                      str(tmp_path / "seen.jsonl"), devices='["0"]')
    sweeper = subprocess.run([sys.executable, "-m", "radt_ext.cli", "sweep", spec], capture_output=True, text=True,
                             timeout=300, cwd=tmp_path)
    assert sweeper.returncode == 0, sweeper.stderr
    calls = [(fn, args) for fn, args, _ in setter_calls(trace)]
    changes = [c for c in calls if c != ("SetPowerManagementLimit", [700_000])]  # the checks: the limit set again
    assert changes == [("SetPowerManagementLimit", [250_000]), ("SetGpuLockedClocks", [1410, 1410]),
                       ("ResetGpuLockedClocks", []),
                       ("SetPowerManagementLimit", [300_000]), ("SetGpuLockedClocks", [1410, 1410]),
                       ("ResetGpuLockedClocks", [])]
    assert calls[-1] == ("SetPowerManagementLimit", [700_000])  # the last: the limit put back
    runs = sorted(parent_runs(os.environ["MLFLOW_TRACKING_URI"]), key=lambda r: r.data.tags["system.gpu_power_limit_w"])
    assert [r.data.tags["system.gpu_power_limit_w.host"] for r in runs] == ["250", "300"]
    assert all(r.data.tags["system.gpu_clocks_mhz.host"] == "1410" for r in runs)
    assert all(r.data.tags["system.gpu_power_limit_w.restored"].endswith(" 700 W") for r in runs)
    assert all(r.data.tags["system.gpu_clocks_mhz.restored"].startswith("clocks unlocked on GPU-") for r in runs)
    assert "host settings restored: gpu_clocks_mhz: clocks unlocked" in " ".join(sweeper.stderr.split())


def test_a_gpu_setting_nvml_does_not_permit_is_refused_before_anything_runs(tmp_path, gpu_replay):
    trace = gpu_replay(permitted=False)
    out = tmp_path / "seen.jsonl"
    spec = write_spec(tmp_path, "system: {gpu_power_limit_w: 300}\n", str(out), devices='["0"]')
    done = radt("sweep", spec, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: system.gpu_power_limit_w: 300: permission: NVML refused to set the power limit (it needs root, "
        "as nvidia-smi does); mark it optional (optional: [gpu_power_limit_w]) to run without it")
    assert not out.exists() and setter_calls(trace) == []


def test_a_sigkilled_sweep_s_watchdog_restores_the_gpu_and_ends_the_run(tmp_path, gpu_replay):
    trace = gpu_replay()
    out = tmp_path / "seen.jsonl"
    spec = write_spec(tmp_path, "system: {gpu_power_limit_w: 250, gpu_clocks_mhz: 1410, cpus: 1}\n", str(out),
                      hold=120, devices='["0"]')
    sweeper = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "sweep", spec], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not (out.exists() and out.read_text().strip()):
        assert sweeper.poll() is None and time.monotonic() < deadline, sweeper.stdout.read() if sweeper.poll() else ""
        time.sleep(0.2)
    assert lines(out)[0]["cpus"] == [1] == lines(out)[0]["grandchild"]  # the CPU near GPU 0, as NVML says
    assert setter_calls(trace)[-1][:2] == ("SetGpuLockedClocks", [1410, 1410])
    sweeper.send_signal(signal.SIGKILL)
    said = sweeper.communicate(timeout=60)[0]
    while not setter_calls(trace)[-1][:2] == ("SetPowerManagementLimit", [700_000]):
        assert time.monotonic() < deadline + 60, setter_calls(trace)
        time.sleep(0.2)
    calls = setter_calls(trace)
    restored = calls[-2:]
    assert [c[:2] for c in restored] == [("ResetGpuLockedClocks", []), ("SetPowerManagementLimit", [700_000])]
    assert all(pid != sweeper.pid for _, _, pid in restored)  # put back by another process: the watchdog
    (run,) = [r for r in parent_runs(os.environ["MLFLOW_TRACKING_URI"])]
    while "system.gpu_power_limit_w.restored" not in run.data.tags or run.info.status == "RUNNING":
        assert time.monotonic() < deadline + 90, (said, run.data.tags)
        time.sleep(0.2)
        (run,) = parent_runs(os.environ["MLFLOW_TRACKING_URI"])
    assert run.info.status == "KILLED"
    assert run.data.tags["system.gpu_power_limit_w.restored"].endswith(
        "700 W (by the watchdog after radt-ext was killed)")
    assert run.data.tags["system.gpu_clocks_mhz.host"] == "1410"
    while list((tmp_path / "hostsettings").glob("*")):  # the restore file and the launcher's report
        assert time.monotonic() < deadline + 90
        time.sleep(0.2)


def test_settings_left_by_a_radt_ext_killed_with_its_watchdog_are_restored_by_the_next_sweep(tmp_path, gpu_replay):
    trace = gpu_replay()
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, signal
        from radt_ext.hostsettings.around import HostSettings
        from radt_ext.hostsettings.base import Where
        settings = HostSettings({"gpu_power_limit_w": "250"}, where=Where(["0"]))
        settings.open()
        settings.apply()
        os.kill(os.getpid(), signal.SIGKILL)  # no watchdog: as when a whole control group is killed
    """)], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert setter_calls(trace)[-1][:2] == ("SetPowerManagementLimit", [250_000])
    spec = write_spec(tmp_path, "system: {cpus: 1}\n", str(tmp_path / "seen.jsonl"))
    done = radt("sweep", spec, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"host settings left by a killed radt-ext (pid {killed_pid(trace)}) restored: gpu_power_limit_w: " in said
    assert setter_calls(trace)[-1][:2] == ("SetPowerManagementLimit", [700_000])
    assert not list((tmp_path / "hostsettings").glob("*.json"))


def killed_pid(trace) -> int:
    return next(pid for fn, args, pid in setter_calls(trace) if args == [250_000])


def test_the_example_sweep_compares_cores_and_governor_in_a_dry_run(tmp_path, tracking_uri):
    example = os.path.join(os.path.dirname(PROBE), "..", "..", "..", "examples", "sweeps", "host_variants.yaml")
    done = radt("sweep", example, "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "8 variants, 8 to run, 0 done (dry run: nothing ran)" in done.stdout
    for title in ("cores on 0 cpus=2 OMP_NUM_THREADS=1", "cores on 0 cpus=8 OMP_NUM_THREADS=4",
                  "governor on 0 cpus=4 governor=performance", "governor on 0 cpus=4 governor=powersave"):
        assert title in done.stderr
    reason = governor.check("performance", Where(["0"]))
    if reason:  # optional: said, not refused
        assert f"[6] system.governor: performance: skipped (optional) on this host: {reason}" in done.stderr
    script = os.path.join(os.path.dirname(example), "..", "host_variants", "loader_train.py")
    assert "radt_ext" not in open(script).read()  # a user's script, unmodified


def test_the_view_shows_what_each_setting_asked_and_what_the_host_said():
    from radt_ext.view import content

    state = content.state(["bs", "system.cpus", "system.env.OMP_NUM_THREADS"])
    columns = state["selectedColumns"]
    assert {"tags.`system.cpus`", "tags.`system.cpus.host`", "tags.`system.env.OMP_NUM_THREADS`"} <= set(columns)
    assert "tags.`system.env.OMP_NUM_THREADS.host`" not in columns and "params.`system.cpus`" not in columns
    assert content.params_of(state) == ["bs", "system.cpus", "system.env.OMP_NUM_THREADS"]


def test_the_pack_scheduler_refuses_a_system_block_it_would_not_apply(tmp_path, tracking_uri):
    spec = write_spec(tmp_path, "system: {cpus: 1}\n", str(tmp_path / "seen.jsonl"))
    done = radt("sweep", spec, "--executor", "pack", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"Error: {spec}: system: the pack scheduler does not apply host settings; drop the system block or run "
        "the sweep without packing")
