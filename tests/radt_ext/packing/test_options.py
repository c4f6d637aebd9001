"""A packed sweep's options as the spec gives them: the fields that once were options and changed nothing
are one line naming what replaced them, through the sweep's own spec loader (real files)."""
from __future__ import annotations

import pytest

from radt_ext.errors import UsageError
from radt_ext.packing import options
from radt_ext.sweep.spec import load

SPEC = """name: queue
devices: [cpu]
schedule: pack
{pack}workloads:
  a: {{command: "python -c pass"}}
"""


def write(tmp_path, pack: str = "") -> str:
    path = tmp_path / "queue.yaml"
    path.write_text(SPEC.format(pack=pack))
    return str(path)


@pytest.mark.parametrize("field, value, named", [
    ("model", "true", "no group rests on the contention model alone"),
    ("model", "false", "pack.trials"),
    ("mps_thread_percentage", "auto", "mps: {thread_percentage: N}"),
    ("mps_thread_percentage", "40", "chains set no MPS thread cap"),
])
def test_a_field_that_changed_nothing_is_one_line_naming_what_replaced_it(tmp_path, field, value, named):
    with pytest.raises(UsageError) as err:
        load(write(tmp_path, f"pack: {{{field}: {value}}}\n"))
    line = str(err.value)
    assert line.startswith(f"{tmp_path / 'queue.yaml'}: pack.{field}: no longer an option (") and named in line
    assert line.endswith("; remove it") and "\n" not in line
    assert field not in options.KEYS and not hasattr(options.PackOptions(), field)


def test_the_options_that_act_are_read(tmp_path):
    sweep = load(write(tmp_path, "pack: {max_jobs_per_gpu: 2, guard: false, trials: false, cpu_sets: false}\n"))
    p = sweep.pack
    assert (p.max_jobs_per_gpu, p.guard, p.trials, p.cpu_sets, p.scheduled) == (2, False, False, False, True)
    with pytest.raises(UsageError, match=r"pack\.max_gpus: unknown field; use one of max_jobs_per_gpu, "):
        load(write(tmp_path, "pack: {max_gpus: 2}\n"))


@pytest.mark.parametrize("given, read", [("pack-pairs-b", ("pack-pairs-b",)), ("[a, ' b ']", ("a", "b"))])
def test_pairs_from_names_experiments(tmp_path, given, read):
    assert load(write(tmp_path, f"pack: {{pairs_from: {given}}}\n")).pack.pairs_from == read


@pytest.mark.parametrize("given", ["[]", "3", "[a, 3]", "['']"])
def test_pairs_from_that_names_no_experiment_is_one_line(tmp_path, given):
    with pytest.raises(UsageError) as err:
        load(write(tmp_path, f"pack: {{pairs_from: {given}}}\n"))
    assert "pack.pairs_from: expected experiment names, e.g. [pack-pairs-b]" in str(err.value)
    assert "\n" not in str(err.value)
