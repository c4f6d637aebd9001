"""The count proof (benchmarks/progress/count_proof.sh) in its CPU dry mode: radt-ext's wheel built from this
checkout, installed with `pip install --target` and run from outside the checkout; four unmodified
scripts (tensor-fed training, a decoder stepping through its layers, a DataLoader training run, a
mixed-precision CNN) counted exactly as they count themselves, with the unit in each note."""
import json
import os
import subprocess
import sys

import pytest

from tests.wheel import REPO, build_wheel, clean_env

SCRIPTS = {"gru_train": "gru_train.py", "layer_decode": "layer_decode.py", "loader_train": "loader_train.py",
           "cnn_train": "cnn_train.py"}


def test_the_proofs_scripts_are_unmodified():
    from benchmarks.packing.pack_bound import instrumented

    folder = os.path.join(REPO, "examples", "unmodified")
    assert instrumented({name: {"script": script} for name, script in SCRIPTS.items()}, folder) == []


def test_the_own_count_is_the_first_on_the_last_line_that_states_one(tmp_path):
    from benchmarks.progress.count_proof import own_count

    log = tmp_path / "a.log"
    log.write_text("radt-ext: 3 samples of nothing\nlayer_decode: 25600 tokens (50 sequences x 128 tokens x batch 4) "
                   "in 4.1 s\nradt-ext: run FINISHED\n")
    assert own_count(str(log)) == (25600, "tokens")
    assert own_count(str(tmp_path / "missing.log")) == (None, None)


@pytest.mark.slow
def test_count_proof_dry_run_counts_each_script_as_it_counts_itself(tmp_path):
    (tmp_path / "wheel").mkdir()
    wheel = build_wheel(tmp_path / "wheel")
    results = tmp_path / "results"
    env = clean_env(DRY="1", WHEELS=str(wheel.parent), RESULTS=str(results), HOME=str(tmp_path),
                    PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(["bash", "benchmarks/progress/count_proof.sh"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["radt_ext_from_checkout"] is False and "/site/radt_ext/__init__.py" in summary["radt_ext_file"]
    runs = {r["script"]: r for r in summary["runs"]}
    assert sorted(runs) == sorted(SCRIPTS) and summary["all_finished"] and summary["all_equal"], summary
    assert runs["layer_decode"]["e2e_samples"] == 3 * 16 * 2  # tokens x batch: one count a step, not a layer's
    assert runs["gru_train"]["e2e_samples"] == 40 * 8 and runs["cnn_train"]["e2e_samples"] == 10 * 8
    assert runs["loader_train"]["e2e_samples"] == 8 * 16
    for name, r in runs.items():
        assert r["progress_source"] == "torch" and r["throughput_samples_per_s"] > 0, r
        assert r["energy_per_sample_j"] > 0, r  # NVML replayed: J/sample where there was none before
    for name in ("gru_train", "cnn_train"):
        assert "leading dimension of the input of the model the optimizer steps" in runs[name]["progress_note"]
    assert "first top-level module" in runs["layer_decode"]["progress_note"]
    table = (results / "count_proof.md").read_text()
    assert "| layer_decode (FINISHED) | 96 tokens | 96 |" in table
    assert sorted(p.name for p in results.glob("*.log")) == sorted(f"{n}.log" for n in SCRIPTS)
