"""Which of a workload's progress sources counts, and what its counters mean.

A workload's progress file can hold records of several sources (the `src` of a record; none: written by
`radt_ext.log_progress`, i.e. `log_progress`): the script's own `log_progress` calls, and the counts the
start-up hook takes in an unmodified script (radt_ext.workload_api.autoprogress): `torch`, `keras` and
`mlflow-steps`. Exactly one source counts for a run, the best that counted anything:

1. `log_progress`: the script reports its own work; the hooks' counts are then left out (never twice);
2. `torch` or `keras`: the framework's own units, by what the script did (`mode`):
   - training (optimizer steps seen): samples and batches of the training passes over its data
     loaders, steps = optimizer steps, epochs = completed training passes; without a loader, the
     samples of each step from the input of the model the optimizer steps (steps only where that model
     was never called with a tensor to size);
   - evaluation or inference over a loader (no optimizer step): its batches and their samples;
   - calls of the model, the first outermost module the script called (no loader, no optimizer): its
     calls and the samples in them, one count a step however many top-level modules the step calls;
3. `mlflow-steps`: the highest step of the metrics the script logs itself (steps only).

The start-up hook's own records (source `hook`) say that it loaded in a process, or why it could not;
they count nothing and tell the note's reasons apart: the hook missing from the install, loaded in no
process (not Python), or loaded with no framework imported.

The result is the ordinary `samples` / `steps` totals the figures, the guard and the planner read, with
`source` (the run's tag `radt_ext.progress_source`) and `note` (what was counted, or why nothing was).
"""
from __future__ import annotations

LOG_PROGRESS = "log_progress"
FRAMEWORKS = ("torch", "keras")
MLFLOW_STEPS = "mlflow-steps"
HOOK_SRC = "hook"  # the start-up hook's own records: loaded, or why not
OFF_ENV = "RADT_EXT_NO_PROGRESS"


def counting_off(environ) -> bool:
    """RADT_EXT_NO_PROGRESS turns the start-up hook's counting off (any value but empty, 0, false, no)."""
    return environ.get(OFF_ENV, "").strip().lower() not in ("", "0", "false", "no")

# mode -> (samples counter, steps counter, what the note says)
MODES = {
    "training": ("train_samples", "steps", "optimizer steps and the samples of the training passes over its data loaders"),
    "tensor_training": ("step_samples", "steps", "optimizer steps, no data loader; samples: the leading "
                        "dimension of the input of the model the optimizer steps, added up over each step's calls"),
    "steps_only": (None, "steps", "optimizer steps; no data loader, and no call of the model the optimizer steps "
                   "with a tensor to size was seen, so samples are unknown"),
    "loader": ("eval_samples", "eval_batches", "batches and samples of its data loaders (no optimizer step)"),
    "forward": ("forward_samples", "forwards", "calls of its outermost model (the first top-level module it called) "
                "and the samples in them: the leading dimension of its input"),
    "forward_unsized": (None, "forwards", "calls of its outermost model (the first top-level module it called); its input "
                        "held no tensor to size, so samples are unknown"),
    "keras_training": ("train_samples", "steps", "training batches and samples of fit"),
    "keras_eval": ("eval_samples", "eval_batches", "batches and samples of evaluate and predict"),
    "mlflow": (None, "steps", "the highest step of the metrics it logs itself; samples unknown"),
}
TRAINING_MODES = frozenset({"training", "keras_training"})  # modes whose records count epochs


def last_totals(series: dict[int, list]) -> dict[str, float]:
    """Every process's last totals added up."""
    out: dict[str, float] = {}
    for points in series.values():
        if points:
            for key, value in points[-1][1].items():
                out[key] = out.get(key, 0.0) + value
    return out


def _mode(src: str, totals: dict[str, float]) -> str | None:
    if src == MLFLOW_STEPS:
        return "mlflow" if totals.get("steps", 0) > 0 else None
    keras = src == "keras"
    if totals.get("steps", 0) > 0:
        if keras:
            return "keras_training"
        if totals.get("train_batches", 0) > 0:
            return "training"
        return "tensor_training" if totals.get("step_samples", 0) > 0 else "steps_only"
    if totals.get("eval_batches", 0) > 0:
        return "keras_eval" if keras else "loader"
    if totals.get("forwards", 0) > 0:
        return "forward" if totals.get("forward_samples", 0) > 0 else "forward_unsized"
    return None


def choose(by_source: dict[str, dict[int, list]]) -> tuple[str, str | None]:
    """(source, mode) of the source that counts; ("none", None) when none counted anything."""
    if any(by_source.get(LOG_PROGRESS, {}).values()):
        return LOG_PROGRESS, None
    for src in (*FRAMEWORKS, MLFLOW_STEPS):
        mode = _mode(src, last_totals(by_source.get(src, {})))
        if mode is not None:
            return src, mode
    return "none", None


def standard(raw: dict[str, float], mode: str) -> dict[str, float]:
    """A record's counters of a hooked source as the totals log_progress would have written."""
    samples_key, steps_key, _ = MODES[mode]
    out = {"steps": raw.get(steps_key, 0.0)}
    if samples_key is not None:
        out["samples"] = raw.get(samples_key, 0.0)
    if mode in TRAINING_MODES:
        out["epochs"] = raw.get("epochs", 0.0)
    return out


def note(source: str, mode: str | None, totals: dict[str, float], hooked: set[str], errors: list[str],
         off: bool, loaded: bool = False, missing: str | None = None) -> str:
    """What was counted, or why nothing was: the run's tag `radt_ext.progress_note`. loaded: the start-up
    hook loaded in some process of the workload; missing: why it could not (autoprogress.hook_missing)."""
    if source == LOG_PROGRESS:
        return "the script's own radt_ext.log_progress calls"
    if source != "none":
        text = MODES[mode][2]
        unsized = totals.get("unsized_batches", 0)
        if unsized and MODES[mode][0] in ("train_samples", "eval_samples"):
            text += f"; {unsized:.0f} batches held no tensor to size, so samples are a lower bound"
        unsized = totals.get("unsized_steps", 0)
        if unsized and mode == "tensor_training":
            text += f"; at {unsized:.0f} steps its input held no tensor to size, so samples are a lower bound"
        others = totals.get("other_models", 0)
        if others and mode in ("forward", "forward_unsized"):
            calls = totals.get("other_calls", 0)  # counted only once an optimizer exists (torch_forward.py)
            text += (f"; {others:.0f} other top-level modules were called"
                     f"{f' ({calls:.0f} calls while an optimizer existed)' if calls else ''}: one step is one call "
                     "of the model, whatever else it calls")
        return text
    if off:
        return "progress counting is off (--no-progress or RADT_EXT_NO_PROGRESS)"
    if missing:
        return missing
    if errors:
        return f"the progress hook failed: {errors[0]}"
    if hooked:
        return (f"{', '.join(sorted(hooked))} loaded, but no optimizer step, data-loader batch, model call "
                "or logged metric step was seen")
    if loaded:
        return "the start-up hook loaded, but the workload imported no PyTorch, Keras or MLflow"
    return ("the start-up hook loaded in no process of the workload (not a Python workload, or Python started "
            "with -S, -I or a PYTHONPATH of its own)")
