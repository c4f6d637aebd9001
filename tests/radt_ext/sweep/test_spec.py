"""Spec parsing: expansion, hashing, and one-line errors naming file, entry and field."""
from __future__ import annotations

import textwrap

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from radt_ext.sweep import plan, plan_from_dict
from radt_ext.sweep.spec import SpecError, parse
from tests.radt_ext.helpers import radt

BASE = {
    "name": "s", "devices": ["0"], "modes": ["exclusive", "naive"],
    "workloads": {"toy": {"command": "python toy.py --bs {bs}", "params": {"bs": 8}},
                  "cnn": {"recipe": "cnn_baseline", "params": {"batch_size": 64, "epochs": 1}}},
    "groups": [["toy"], {"workloads": ["toy", "cnn"], "modes": ["naive", "mps"], "grid": {"bs": [8, 16]}}],
}


def test_expansion_order_params_and_hash():
    variants = plan_from_dict(BASE)
    # group 0: exclusive + naive; group 1: naive + mps x 2 grid points; exclusive first
    assert [(v.mode, v.label) for v in variants][:1] == [("exclusive", "toy")]
    assert len(variants) == 2 + 4
    mps = [v for v in variants if v.mode == "mps"]
    assert [v.setting for v in mps] == [{"bs": "8"}, {"bs": "16"}]
    toy, cnn = mps[1].workloads
    assert toy.command == ["python", "toy.py", "--bs", "16"]
    assert cnn.command[:3] == ["python", "-m", "radt_ext.workloads.torch_train"]
    assert "--batch-size" in cnn.command and cnn.command[cnn.command.index("--batch-size") + 1] == "64"
    assert cnn.params["epochs"] == "1" and cnn.params["lr"] == "0.001"  # recipe defaults filled in
    hashes = [v.hash for v in variants]
    assert len(set(hashes)) == len(hashes)
    assert hashes == [v.hash for v in plan_from_dict(BASE)]  # content hash: stable across parses
    changed = dict(BASE, workloads={**BASE["workloads"], "toy": {"command": "python toy.py --bs {bs} -v",
                                                                 "params": {"bs": 8}}})
    assert plan_from_dict(changed)[0].hash != hashes[0]


def test_a_measurement_group_hashes_apart_from_the_same_group_run_to_its_end():
    """measure_s goes into the variant's hash (a cut run is not the whole one) and onto its group; a sweep
    without it keeps its hashes."""
    full = {**BASE, "groups": [{"workloads": ["toy", "cnn"], "modes": ["mps"]}]}
    cut = {**BASE, "groups": [{"workloads": ["toy", "cnn"], "modes": ["mps"], "measure_s": 8}]}
    (a,), (b,) = plan_from_dict(full), plan_from_dict(cut)
    assert a.hash != b.hash and a.group().measure_s is None and b.group().measure_s == 8.0
    assert "measure_s" not in a._content() and b._content()["measure_s"] == 8.0


def test_repeated_workloads_get_their_own_names_and_random_is_seeded():
    spec = {"workloads": {"t": {"command": "run {lr}", "params": {"lr": 0.1}}},
            "groups": [{"workloads": ["t", "t"], "modes": ["naive"]}],
            "random": {"samples": 3, "seed": 7, "params": {"lr": {"loguniform": [1e-4, 1e-1]}}}}
    a, b = plan_from_dict(spec), plan_from_dict(spec)
    assert [w.name for w in a[0].workloads] == ["t_0", "t_1"]
    assert [v.setting for v in a] == [v.setting for v in b] and len({v.setting["lr"] for v in a}) == 3
    assert all(1e-4 <= float(v.setting["lr"]) <= 1e-1 for v in a)


BAD = [
    ({"workloads": {"t": {"command": "x"}}, "modez": 1}, "s.yaml: modez: unknown field"),
    ({"workloads": {"t": {"command": "x"}}, "modes": ["solo"]}, "s.yaml: modes[0]: unknown mode 'solo'"),
    ({"workloads": {"t": {}}}, "s.yaml: workloads.t: give exactly one of recipe"),
    ({"workloads": {"t": {"command": "x {bs}"}}}, "s.yaml: workloads.t.command: uses {bs} but params has no 'bs'"),
    ({"workloads": {"t": {"recipe": "nope"}}}, "s.yaml: workloads.t.recipe: no recipe 'nope'"),
    ({"workloads": {"t": {"recipe": "cnn_baseline", "params": {"batchsize": 1}}}},
     "s.yaml: workloads.t.params.batchsize: recipe cnn_baseline has no parameter 'batchsize'"),
    ({"workloads": {"t": {"command": "x"}}, "groups": [["u"]]}, "s.yaml: groups[0].workloads[0]: no workload named 'u'"),
    ({"workloads": {"t": {"command": "x"}}, "grid": {"bs": [1]}}, "s.yaml: groups[0].grid.bs: no workload of this group"),
    ({"workloads": {"t": {"command": "x", "params": {"bs": 1}}}, "grid": {"bs": []}}, "s.yaml: grid.bs: expected a non-empty list"),
    ({"workloads": {"t": {"command": "x"}}, "repeats": 0}, "s.yaml: repeats: expected a whole number"),
    ({"workloads": {"t": {"command": "x"}}, "devices": ["0"], "modes": ["mig"]},
     "s.yaml: workloads.t.mig: mode mig needs a MIG profile"),
    ({"workloads": {"t": {"command": "x"}}, "devices": ["cpu"], "modes": ["mps"]}, "s.yaml: groups[0].modes[0]: mode mps needs a GPU"),
    ({"workloads": {"t": {"command": "x", "mps": {"thread_percentage": 150}}}},
     "s.yaml: workloads.t.mps.thread_percentage: expected a whole number 1..100"),
    ({"workloads": {"t": {"command": "x"}}, "listeners": "nvml,bogus"}, "s.yaml: listeners: unknown listener 'bogus'"),
    ({"workloads": {"t": {"command": "x", "params": {"lr": 1}}}, "random": {"samples": 2, "params": {"lr": {"normal": [0, 1]}}}},
     "s.yaml: random.params.lr: give one of"),
    ([1, 2], "s.yaml: top level: expected a mapping"),
    ({"workloads": {"t": {"command": "x"}, "u": {"command": "y"}}, "devices": ["0"],
      "groups": [{"workloads": ["t", "u"], "modes": ["mps"], "measure_s": 1}]},
     "s.yaml: groups[0].measure_s: expected the seconds (3 or more)"),
    ({"workloads": {"t": {"command": "x"}, "u": {"command": "y"}}, "devices": ["0"],
      "groups": [{"workloads": ["t", "u"], "modes": ["mps"], "measure_s": True}]},
     "s.yaml: groups[0].measure_s: expected the seconds (3 or more)"),
    ({"workloads": {"t": {"command": "x"}, "u": {"command": "y"}},
      "groups": [{"workloads": ["t", "u"], "modes": ["exclusive"], "measure_s": 10}]},
     "s.yaml: groups[0].measure_s: measures one workload alone, or several side by side"),
    ({"workloads": {"t": {"command": "x"}, "u": {"command": "y"}}, "schedule": "pack",
      "groups": [{"workloads": ["t", "u"], "modes": ["naive"], "measure_s": 10}]},
     "s.yaml: groups[0].measure_s: a measurement of pairs is a sweep of its own"),
]


@pytest.mark.parametrize("data, message", BAD, ids=[m.split(": ")[1] for _, m in BAD])
def test_malformed_specs_are_one_line(data, message):
    with pytest.raises(SpecError) as err:
        parse(data, source="s.yaml")
    text = str(err.value)
    assert text.startswith(message) and "\n" not in text


@pytest.mark.new_store
def test_cli_reports_bad_yaml_before_any_run(tracking_uri, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workloads:\n  t: {command: [x\n")
    done = radt("sweep", str(bad))
    assert done.returncode == 2 and "bad.yaml: line" in done.stderr and "not valid YAML" in done.stderr
    assert "Traceback" not in done.stderr
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(textwrap.dedent("""
        workloads:
          t: {command: "python -c pass", params: {bs: 1}}
        groups: [{workloads: [t], modes: [naive, teleport]}]
    """))
    done = radt("sweep", str(wrong))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "wrong.yaml: groups[0].modes[1]: unknown mode 'teleport'; choose from exclusive, naive, mps, mig")
    assert not (tmp_path / "mlflow.db").exists() and "Traceback" not in done.stderr


scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=6))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=12)
keys = st.sampled_from(sorted({"name", "modes", "devices", "repeats", "workloads", "groups", "grid", "random",
                               "listeners", "interval", "bogus"}))
workload = st.fixed_dictionaries({}, optional={"command": st.one_of(st.text(max_size=12), values),
                                               "recipe": st.one_of(st.just("cnn_baseline"), values),
                                               "params": values, "mps": values, "mig": values, "env": values})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys, values, max_size=5), st.dictionaries(st.sampled_from(["t", "u", "bad name"]), workload,
                                                                  max_size=2))
@example(top={"workloads": {"\n": None}}, workloads={})  # once put a raw newline in the message
@example(top={"workloads": {"ok\n": {"command": "true"}}}, workloads={})  # `$` let a trailing newline through
def test_fuzz_any_input_parses_or_fails_with_one_line(top, workloads):
    data = dict(top)
    if workloads:
        data["workloads"] = workloads
    try:
        parse(data, source="fuzz.yaml")
    except SpecError as exc:
        assert str(exc).startswith("fuzz.yaml: ") and "\n" not in str(exc)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80))
def test_fuzz_yaml_text(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("y") / "f.yaml"
    path.write_text(text)
    try:
        plan(path)
    except SpecError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)


def test_examples_are_valid():
    import glob

    for path in glob.glob("examples/sweeps/*.yaml"):
        assert plan(path), path
    with open("examples/sweeps/gpu_collocation.yaml") as fh:
        assert yaml.safe_load(fh)["devices"] == ["0"]
