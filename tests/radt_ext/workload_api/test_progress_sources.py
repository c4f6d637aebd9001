"""Which progress source counts: the script's own log_progress first, then the framework the start-up
hook counted in, then the script's own metric steps; each hook source's counters read as the totals
log_progress would have written, epochs across ranks, and the note saying why nothing counted."""
import json

from radt_ext.workload_api.progress import log_progress, read_marks  # noqa: F401 (the module under test)


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _torch_training(pid, t0, dataset=10, epochs=2, src="torch"):
    """What the hook writes for a training loop: a 2-batch sanity validation, then `epochs` passes."""
    out = [{"pid": pid, "t": t0, "src": src, "hooked": True},
           {"pid": pid, "t": t0 + 0.1, "src": src, "eval_batches": 2, "eval_samples": 8}]
    t = t0 + 1.0
    for n in range(1, epochs + 1):
        out.append({"pid": pid, "t": t, "src": src, "epoch": n, "event": "start"})
        t += 2.0
        out.append({"pid": pid, "t": t, "src": src, "steps": 3 * n, "train_batches": 3 * n,
                    "train_samples": dataset * n, "eval_batches": 2, "eval_samples": 8, "epochs": n})
        out.append({"pid": pid, "t": t, "src": src, "epoch": n, "event": "end"})
        t += 0.5
    return out


def test_training_counts_the_training_passes_only(tmp_path):
    marks = read_marks(_write(tmp_path / "p.jsonl", _torch_training(7, 100.0, dataset=10, epochs=3)))
    assert marks.source == "torch"
    assert marks.totals()["samples"] == 30 and marks.totals()["steps"] == 9
    assert marks.epochs == [(101.0, 103.0), (103.5, 105.5), (106.0, 108.0)]
    # the sanity validation before the first step is not the active phase's start
    assert marks.progress_times()[0] == 103.0
    assert "optimizer steps" in marks.note


def test_log_progress_alone_counts_when_the_script_calls_it(tmp_path):
    records = _torch_training(7, 100.0) + [{"pid": 7, "t": 101.5, "samples": 64.0, "steps": 1.0},
                                           {"pid": 7, "t": 104.0, "samples": 128.0, "steps": 2.0}]
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    assert marks.source == "log_progress"
    assert marks.totals()["samples"] == 128 and marks.epochs == []


def test_ranks_add_up_and_share_their_epochs(tmp_path):
    records = _torch_training(1, 100.0, dataset=5, epochs=2) + _torch_training(2, 100.2, dataset=5, epochs=2)
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    assert marks.totals()["samples"] == 20 and marks.totals()["steps"] == 12
    assert marks.epochs == [(101.0, 103.2), (103.5, 105.7)]


def test_inference_without_loader_counts_model_calls(tmp_path):
    records = [{"pid": 3, "t": 10.0, "src": "torch", "forwards": 1, "forward_samples": 8},
               {"pid": 3, "t": 12.0, "src": "torch", "forwards": 500, "forward_samples": 4000}]
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    assert (marks.source, marks.totals()["samples"], marks.totals()["steps"]) == ("torch", 4000, 500)
    assert "outermost model" in marks.note


def test_training_without_a_loader_counts_the_stepped_models_input(tmp_path):
    records = [{"pid": 3, "t": 10.0, "src": "torch", "steps": 1, "forwards": 1, "forward_samples": 8, "step_samples": 8},
               {"pid": 3, "t": 11.0, "src": "torch", "steps": 40, "forwards": 41, "forward_samples": 328,
                "step_samples": 320}]
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    assert (marks.source, marks.totals()["samples"], marks.totals()["steps"]) == ("torch", 320, 40)
    assert "leading dimension of the input of the model the optimizer steps" in marks.note
    records[1]["unsized_steps"] = 2
    assert "at 2 steps its input held no tensor to size" in read_marks(_write(tmp_path / "u.jsonl", records)).note


def test_steps_without_a_sized_model_input_leave_samples_unknown(tmp_path):
    records = [{"pid": 3, "t": 10.0, "src": "torch", "steps": 1, "unsized_steps": 1},
               {"pid": 3, "t": 11.0, "src": "torch", "steps": 40, "unsized_steps": 40}]
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    assert marks.totals()["steps"] == 40 and "samples" not in marks.totals()
    assert "samples are unknown" in marks.note


def test_model_calls_count_once_a_step_and_say_what_else_was_called(tmp_path):
    records = [{"pid": 3, "t": 10.0, "src": "torch", "forwards": 1, "forward_samples": 4, "other_models": 37,
                "other_calls": 37},
               {"pid": 3, "t": 12.0, "src": "torch", "forwards": 6400, "forward_samples": 25600, "other_models": 37,
                "other_calls": 236800}]
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    assert (marks.totals()["samples"], marks.totals()["steps"]) == (25600, 6400)
    assert "first top-level module" in marks.note and "37 other top-level modules" in marks.note
    unsized = read_marks(_write(tmp_path / "u.jsonl", [{"pid": 3, "t": 10.0, "src": "torch", "forwards": 9}]))
    assert unsized.totals()["steps"] == 9 and "samples" not in unsized.totals()
    assert "samples are unknown" in unsized.note


def test_mlflow_steps_count_where_no_framework_did(tmp_path):
    records = [{"pid": 3, "t": 10.0, "src": "torch", "hooked": True},
               {"pid": 3, "t": 10.5, "src": "mlflow-steps", "steps": 1},
               {"pid": 3, "t": 19.5, "src": "mlflow-steps", "steps": 10}]
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    assert marks.source == "mlflow-steps" and marks.totals()["steps"] == 10
    assert marks.progress_times() == [10.5, 19.5]


def test_nothing_counted_says_why(tmp_path):
    hooked = read_marks(_write(tmp_path / "a.jsonl", [{"pid": 3, "t": 1.0, "src": "torch", "hooked": True}]))
    assert hooked.source == "none" and "torch loaded" in hooked.note
    failed = read_marks(_write(tmp_path / "b.jsonl", [{"pid": 3, "t": 1.0, "src": "torch", "error": "ValueError: x"}]))
    assert failed.source == "none" and "failed" in failed.note and "ValueError: x" in failed.note
    off = read_marks(str(tmp_path / "missing.jsonl"), off=True)
    assert off.source == "none" and "--no-progress" in off.note
    nothing = read_marks(str(tmp_path / "missing.jsonl"))
    assert nothing.note.startswith("the start-up hook loaded in no process of the workload (not a Python workload")
    loaded = read_marks(_write(tmp_path / "c.jsonl", [{"pid": 3, "t": 1.0, "src": "hook", "loaded": True}]))
    assert (loaded.source, loaded.note) == (
        "none", "the start-up hook loaded, but the workload imported no PyTorch, Keras or MLflow")
    broken = read_marks(_write(tmp_path / "d.jsonl", [{"pid": 3, "t": 1.0, "src": "hook", "error": "ImportError: x"}]))
    assert broken.note == "the progress hook failed: hook: ImportError: x"
    missing = read_marks(str(tmp_path / "missing.jsonl"), missing="the hook is missing; reinstall")
    assert missing.note == "the hook is missing; reinstall"


def test_an_install_without_the_hook_says_so_and_how_to_fix_it(monkeypatch, tmp_path):
    from radt_ext.workload_api import autoprogress

    assert autoprogress.hook_missing() is None  # this checkout holds it
    monkeypatch.setattr(autoprogress, "SITE_DIR", str(tmp_path / "site"))
    line = autoprogress.hook_missing()
    assert "start-up hook" in line and "missing from this install" in line and "pip install" in line


def test_a_job_without_samples_has_a_rate_of_steps_for_the_guard_and_the_planner(tmp_path):
    from radt_ext.collocation.group import work_rate
    from radt_ext.figures.active import counts
    from radt_ext.figures.summaries import counts_per_s

    records = [{"pid": 3, "t": 10.0, "src": "torch", "steps": 1},
               {"pid": 3, "t": 14.0, "src": "torch", "steps": 41}]
    marks = read_marks(_write(tmp_path / "p.jsonl", records))
    out = {}
    counts_per_s(out, counts(marks, 10.0, 14.0), 4.0)
    assert out == {"throughput_steps_per_s": 10.0}  # no samples, so no samples/s and no J/sample
    assert work_rate({f"summary/{k}": v for k, v in out.items()}) == (10.0, "steps")
    assert work_rate({"summary/throughput_samples_per_s": 640.0, "summary/throughput_steps_per_s": 10.0}) == (640.0, "samples")
    assert work_rate({}) is None
