"""The settings torch_train and tf_train share: the options that mean the same in both, the checks
made before a framework loads, and the params the settings are logged as.

Imports neither framework, so bad input fails in one line before one loads.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import click

_SHARED_OPTIONS = (
    click.option("--data", "data_dir", default="", help="an image folder (one sub-folder per class); overrides --dataset"),
    click.option("--image-size", type=int, default=224, help="image side for --data folders"),
    click.option("--batch-size", type=click.IntRange(1), default=64),
    click.option("--epochs", type=click.IntRange(0), default=2),
    click.option("--lr", type=float, default=1e-3),
    click.option("--seed", type=int, default=0),
    click.option("--val-samples", type=click.IntRange(1), default=512),
    click.option("--sparsity", type=click.FloatRange(0, 1, max_open=True), default=0.5),
    click.option("--finetune-epochs", type=click.IntRange(0), default=1),
    click.option("--calibration-batches", type=click.IntRange(1), default=16),
    click.option("--patience", type=click.IntRange(0), default=0, help="early stopping on val loss (0: off)"),
    click.option("--min-delta", type=float, default=0.0),
    click.option("--infer-iters", type=click.IntRange(1), default=30),
    click.option("--baseline-run-id", default="", help="run to compare with (tag baseline_run_id)"),
    click.option("--width", type=click.IntRange(1), default=32, help="small_cnn channels / mlp hidden units / 32"),
)


def shared_options(command: Callable) -> Callable:
    """Add the options every trainer takes; --help lists them after the trainer's own."""
    for option in reversed(_SHARED_OPTIONS):
        command = option(command)
    return command


@dataclass(frozen=True)
class Family:
    """A trainer's recipe family: the prefix of its recipe names and the variants that change defaults."""

    prefix: str  # the recipe tag defaults to <prefix>_<variant>
    half_variant: str  # trains in bf16 unless --precision says fp16
    compile_variant: str
    compile_mode: str  # the compile variant's default --compile-mode


def settle(opts: dict, family: Family, choices: Mapping[str, Sequence[str]],
           checks: Callable[[dict], list[tuple[bool, str]]]) -> dict:
    """Fill the variant defaults, then reject bad or contradictory settings with one line:
    `checks(cfg)` (the trainer's own) first, then a value outside its `choices` (setting -> allowed)."""
    cfg = dict(opts)
    v = cfg["variant"]
    cfg["recipe"] = cfg["recipe"] or f"{family.prefix}_{v}"
    cfg["precision"] = cfg["precision"] or ("bf16" if v == family.half_variant else "fp32")
    cfg["compile_mode"] = cfg["compile_mode"] or (family.compile_mode if v == family.compile_variant else "none")
    common = [
        (cfg[key] in allowed, f"unknown {key.removesuffix('_name')} {cfg[key]!r}; choose one of {', '.join(allowed)}")
        for key, allowed in choices.items()
    ]
    common += [
        (v != family.half_variant or cfg["precision"] in ("bf16", "fp16"),
         f"variant={v} trains in bf16 or fp16; set precision=bf16 or fp16"),
        (not cfg["data_dir"] or os.path.isdir(cfg["data_dir"]),
         f"data={cfg['data_dir']!r} is not a folder; pass a folder with one sub-folder of images per class"),
    ]
    for ok, message in [*checks(cfg), *common]:
        if not ok:
            raise click.ClickException(message)
    return cfg


def run_params(cfg: dict) -> dict:
    """The params every trainer logs from its settings; options its variant does not use read as off."""
    pruned, quantized = cfg["variant"] == "pruned", cfg["variant"] == "quantized"
    return {
        "model": cfg["model_name"], "data": cfg["data_dir"], "batch_size": cfg["batch_size"],
        "epochs": cfg["epochs"], "lr": cfg["lr"], "seed": cfg["seed"], "precision": cfg["precision"],
        "compile_mode": cfg["compile_mode"], "patience": cfg["patience"],
        "sparsity": cfg["sparsity"] if pruned else 0.0,
        "prune_method": cfg["prune_method"] if pruned else "none",
        "finetune_epochs": cfg["finetune_epochs"] if pruned else 0,
        "quant_scheme": cfg["quant_scheme"] if quantized else "none",
    }
