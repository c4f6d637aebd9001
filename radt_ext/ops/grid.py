"""Profile a grid of models × batch sizes × precisions × modes inside a time budget.

The minimum grid (every model at three batch sizes, both precisions, both modes) is planned
first, middle batch size first (`--batches resnet50=256,dlrm=65536` gives a model batch sizes of
your own, one or more), so what finishes is the most useful part; extra models follow
only while time is left. Each profile is written (`<model>_b<batch>_<precision>_<mode>.csv`
and `.json`) the moment it completes, so a run cut short keeps every finished profile.
A profile whose estimated time does not fit in what is left is skipped, not started. A profile
already written in `--out` is kept, so running the same command again goes on where the last one stopped.
A user's module (`package.module:attribute`, with `example_inputs(batch)`) is profiled at the batch sizes
`--batches` gives it.

    python -m radt_ext.ops.grid --out DIR --budget-s 450
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from radt_ext.errors import UsageError
from radt_ext.ops import NET_WINDOW_S, WINDOW_S, catalog, profiler, store
from radt_ext.ops.device import open_meter
from radt_ext.ops.network import ROUNDS

MINIMUM = ("small_cnn", "mlp", "resnet18", "resnet50", "vit", "dlrm")
EXTRA = ("mobilenet_v2",)
TINY_BATCHES = (2, 4, 8)


def plan(models, extra, precisions, modes, tiny: bool, batches: dict[str, tuple[int, ...]] | None = None
         ) -> list[tuple[str, int, str, str, bool]]:
    """(model, batch, precision, mode, is_extra) in the order they run: the middle batch size of each
    model first, then the smallest, then the largest (and any further ones of `batches`)."""
    batches = batches or {}
    items = []
    for group, is_extra in ((models, False), (extra, True)):
        sizes = {}
        for m in group:
            own = batches.get(m) or (TINY_BATCHES if tiny else catalog.MODELS[m][2])
            sizes[m] = [own[i] for i in (1, 0, *range(2, len(own)))] if len(own) > 1 else list(own)
        for r in range(max((len(b) for b in sizes.values()), default=0)):
            for precision in precisions:
                for model in group:
                    if r < len(sizes[model]):
                        for mode in modes:
                            items.append((model, sizes[model][r], precision, mode, is_extra))
    return items


def parse_batches(text: str) -> dict[str, tuple[int, ...]]:
    """`resnet50=256,dlrm=65536:131072` -> {"resnet50": (256,), "dlrm": (65536, 131072)}."""
    out: dict[str, tuple[int, ...]] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        model, _, sizes = part.partition("=")
        try:
            values = tuple(int(v) for v in sizes.split(":"))
        except ValueError:
            values = ()
        if not model or not values or min(values) < 1:
            raise UsageError(f"--batches {part!r}: give MODEL=N or MODEL=N:N:N with whole numbers ≥ 1, "
                             "e.g. resnet50=256,dlrm=65536")
        out[model] = tuple(sorted(set(values), key=values.index))
    return out


def profile_name(model: str, batch: int, precision: str, mode: str) -> str:
    return f"{model.replace(':', '.')}_b{batch}_{precision}_{mode}"


def _estimate(done: dict, model: str, mode: str, batch: int, tiny: bool, guess_s: float | None = None) -> float:
    """Seconds a profile should take: the same model and mode at another batch, scaled; else `guess_s` (by
    default 25 s, 2 s with tiny inputs)."""
    same = [(b, s) for (m, md, b), s in done.items() if m == model and md == mode]
    if same:
        b, s = max(same, key=lambda bs: bs[0])
        return s * max(1.0, (batch / b) ** 0.3)
    if guess_s is not None:
        return guess_s
    return 2.0 if tiny else 25.0


def run(args) -> int:
    started = time.monotonic()
    deadline = started + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device or ("cuda:0" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu" and args.tiny:
        torch.set_num_threads(1)  # a dry run on a shared machine: one thread times more steadily
    meter, facts, reason = open_meter(device, energy=not args.no_energy)
    print(f"ops grid on {facts.get('gpu_name', 'cpu')}: energy {'on' if meter else 'off (' + reason + ')'}", flush=True)
    items = plan(args.models.split(","), [e for e in args.extra.split(",") if e], args.precisions.split(","),
                 args.modes.split(","), args.tiny, args.batch_sizes)
    done: dict = {}
    log = open(out / "grid.jsonl", "a")
    counts = {"done": 0, "failed": 0, "skipped": 0, "kept": 0}
    for model, batch, precision, mode, is_extra in items:
        name = profile_name(model, batch, precision, mode)
        left = deadline - time.monotonic()
        need = _estimate(done, model, mode, batch, args.tiny, args.guess_s)
        entry = {"profile": name, "extra": is_extra}
        if (out / f"{name}.json").exists():
            entry.update(status="kept")
            counts["kept"] += 1
        elif need > left:
            entry.update(status="skipped", why=f"needs ~{need:.0f} s, {left:.0f} s left")
            counts["skipped"] += 1
        else:
            t0 = time.monotonic()
            try:
                net = catalog.build(model, batch, precision, device, tiny=args.tiny)
                prof = profiler.profile(net, mode, device, meter, window_s=args.window_s, net_window_s=args.net_window_s,
                                        net_rounds=args.net_rounds, pin=not args.no_pin)
                prof.meta.update(facts, batch=batch, precision=precision, energy_unavailable=reason,
                                 command="python -m radt_ext.ops.grid " + " ".join(sys.argv[1:]))
                store.write(out, name, prof)
                seconds = time.monotonic() - t0
                done[(model, mode, batch)] = seconds
                entry.update(status="done", seconds=round(seconds, 2),
                             net_ms=round(prof.network(), 4), ops_ms=round(prof.ops_sum(), 4))
                counts["done"] += 1
            except (UsageError, RuntimeError, torch.OutOfMemoryError) as exc:
                entry.update(status="failed", why=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                counts["failed"] += 1
                done[(model, mode, batch)] = time.monotonic() - t0
            finally:
                net = prof = None  # noqa: F841
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        log.write(json.dumps(entry) + "\n")
        log.flush()
        print(" ".join(f"{k}={v}" for k, v in entry.items()), flush=True)
    log.close()
    print(f"ops grid: {counts['done']} done, {counts['kept']} kept from before, {counts['failed']} failed, "
          f"{counts['skipped']} skipped in {time.monotonic() - started:.0f} s", flush=True)
    if meter is not None:
        meter.close()
    return 0 if counts["done"] or counts["kept"] else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=450.0)
    p.add_argument("--models", default=",".join(MINIMUM))
    p.add_argument("--extra", default=",".join(EXTRA), help="models profiled only while time is left")
    p.add_argument("--batches", default="", help="batch sizes of your own per model: MODEL=N[:N...],...")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--modes", default="training,inference")
    p.add_argument("--window-s", type=float, default=WINDOW_S, help="least length of one measurement window")
    p.add_argument("--net-window-s", type=float, default=NET_WINDOW_S,
                   help="least length of each of the network's measurement rounds")
    p.add_argument("--net-rounds", type=int, default=ROUNDS, help="rounds of the network's windows per profile")
    p.add_argument("--guess-s", type=float, default=None,
                   help="seconds a profile of a model and mode not yet profiled is expected to take (default 25)")
    p.add_argument("--device", default=None)
    p.add_argument("--tiny", action="store_true", help="small inputs and batches (a dry run on the CPU)")
    p.add_argument("--no-energy", action="store_true")
    p.add_argument("--no-pin", action="store_true",
                   help="leave the launching and meter threads where the OS puts them (on a GPU they are pinned)")
    args = p.parse_args(argv)
    named = args.models.split(",") + [e for e in args.extra.split(",") if e]
    try:
        args.batch_sizes = parse_batches(args.batches)
    except UsageError as exc:
        p.error(str(exc))
    for m in named:
        if ":" in m and m not in args.batch_sizes:
            p.error(f"{m} is your own module: give its batch sizes with --batches {m}=N")
        if ":" not in m and m not in catalog.MODELS:
            p.error(f"unknown model {m!r}; choose from {', '.join(catalog.MODELS)} or give package.module:attribute")
    if args.net_rounds < 2:
        p.error(f"--net-rounds {args.net_rounds}: give at least 2")
    for m in set(args.batch_sizes) - set(named):
        p.error(f"--batches names {m!r}, which is not among --models or --extra")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
