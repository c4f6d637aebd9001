"""`radt-ext ops`: profile networks op by op, build the dataset, check it, validate and use the predictor."""
from __future__ import annotations

import json
import math
from pathlib import Path

import click

from radt_ext.errors import UsageError
from radt_ext.ops import NET_WINDOW_S, WINDOW_S

DATASET = "docs/ops/dataset.csv.gz"
VALIDATION = "docs/ops/validation.json"
HELDOUT = "docs/ops/heldout/lofo.json"
INTERVAL_ERROR = (0.15, 0.15)  # without the file: the goal's 90th percentile


@click.group()
def ops():
    """Per-operation time and energy: profile, dataset, prediction, best GPU."""


def _shape(value: str | None) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        raise UsageError(f"--input-shape {value!r} is not a list of integers; write e.g. 3,32,32") from None


def _client(experiment_name: str | None):
    from radt_ext.store.client import connect, experiment_id_for, tracking_uri

    client = connect(tracking_uri())
    return client, experiment_id_for(client, experiment_name)


@ops.command()
@click.argument("model")
@click.option("--batch", type=int, default=32, show_default=True)
@click.option("--precision", default="fp32", show_default=True, help="fp32, bf16 or fp16 (weights and activations)")
@click.option("--mode", default="training", show_default=True, help="training or inference")
@click.option("--device", default=None, help="cuda:N or cpu (default: cuda:0 when there is a GPU)")
@click.option("--window-s", type=float, default=WINDOW_S, show_default=True,
              help="least length of an operation's measurement window")
@click.option("--net-window-s", type=float, default=NET_WINDOW_S, show_default=True,
              help="least length of each of the network's measurement rounds")
@click.option("--input-shape", default=None, help="sample shape for your own module, e.g. 3,32,32")
@click.option("--no-energy", is_flag=True, help="time only (for a GPU without an energy counter)")
@click.option("--no-pin", is_flag=True, help="leave the launching and meter threads where the OS puts them")
@click.option("--experiment-name", default=None)
@click.option("--out", default=None, type=click.Path(file_okay=False), help="also write <name>.csv/.json here")
def profile(model, batch, precision, mode, device, window_s, net_window_s, input_shape, no_energy, no_pin,
            experiment_name, out):
    """Profile MODEL (a recipe model or package.module:attribute) and log it as one run."""
    import torch

    from radt_ext.ops import catalog, grid, profiler, store
    from radt_ext.ops.device import open_meter

    if mode not in profiler.MODES:
        raise UsageError(f"unknown mode {mode!r}; choose training or inference")
    dev = torch.device(device or ("cuda:0" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA GPU here; use --device cpu")
    net = catalog.build(model, batch, precision, dev, input_shape=_shape(input_shape))
    client, experiment_id = _client(experiment_name)
    meter, facts, reason = open_meter(dev, energy=not no_energy)
    if dev.type == "cuda" and meter is None and not no_energy:
        raise UsageError(f"{reason}")
    try:
        prof = profiler.profile(net, mode, dev, meter, window_s=window_s, net_window_s=net_window_s, pin=not no_pin)
    finally:
        if meter is not None:
            meter.close()
    prof.meta.update(facts, batch=batch, precision=precision, energy_unavailable=reason)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        store.write(Path(out), grid.profile_name(net.name.replace(":", "."), batch, precision, mode), prof)
    run_id = store.log(prof, client, experiment_id)
    click.echo(profile_line(run_id, net.name, prof, reason), err=True)


def profile_line(run_id: str, name: str, prof, reason: str | None) -> str:
    """What `ops profile` says of a finished profile: its size, network time and energy, and who sets its pace."""
    from radt_ext.ops import pace, store

    t = store.totals(prof)
    meta = prof.meta
    energy = f", {t['network_mj'] / 1e3:.4g} J" if "network_mj" in t else f" (energy unavailable: {reason})"
    told = pace.of(prof.table, str(meta.get("gpu_name", "cpu")))
    issued = [v for k, v in t.items() if k.startswith("network_") and k.endswith("_host_ms")]
    who = told.sentence() if told.known else f"the host issues a step in {sum(issued) if issued else math.nan:.3g} ms"
    return (f"radt-ext: ops profile run {run_id}: {name} b{meta.get('batch')} {meta.get('precision')} "
            f"{meta.get('mode')}: {meta.get('ops_distinct')} distinct of {meta.get('ops_total')} operations; "
            f"network {t['network_ms']:.4g} ms/step{energy}; operations sum to "
            f"{t.get('ops_over_network_ms', math.nan):.0%} of the network time; {who}")


@ops.command()
@click.option("--device", default=None, help="cuda:N or cpu (default: cuda:0 when there is a GPU)")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="write the benchmark here as JSON")
def host(device, out):
    """Measure this machine's host: its cost to launch and dispatch an operation (for `best-gpu --host`)."""
    import torch

    from radt_ext.ops import host as hosts

    dev = torch.device(device or ("cuda:0" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA GPU here; use --device cpu")
    bench = hosts.benchmark(dev)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(bench, indent=1) + "\n")
    figures = ", ".join(f"{k.removesuffix('_us')} {bench[k]:.2f} µs" for k in hosts.FIGURES
                        if math.isfinite(bench.get(k, math.nan)))
    click.echo(f"host of {dev}: {hosts.label(bench)}; per call: {figures}; batches within "
               f"{bench['spread']:.0%}" + (f"; written to {out}" if out else ""))


@ops.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--experiment-name", default=None)
def ingest(folders, experiment_name):
    """Log every profile in FOLDERS (<name>.csv with <name>.json, as the grid writes them) as runs."""
    from radt_ext.ops import store

    profiles = [p for f in folders for p in store.read_dir(f)]  # all read before the first run is made
    client, experiment_id = _client(experiment_name)
    for p in profiles:
        store.log(p, client, experiment_id)
    click.echo(f"radt-ext: {len(profiles)} ops profile runs logged to experiment {experiment_id}", err=True)


@ops.command()
@click.option("--from", "folders", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="a folder of profiles; repeatable")
@click.option("--experiment-name", default=None, help="read the profile runs of this experiment instead")
@click.option("--out", default=DATASET, show_default=True)
def dataset(folders, experiment_name, out):
    """Build the dataset file from profile folders or from the profile runs of an experiment."""
    from radt_ext.ops import dataset as ds, store

    if folders:
        profiles = [p for f in folders for p in store.read_dir(f)]
    else:
        client, experiment_id = _client(experiment_name)
        profiles = store.load_experiment(client, experiment_id)
    df = ds.from_profiles(profiles)
    ds.write(df, out)
    click.echo(f"{out}: {len(profiles)} profiles, {len(df)} rows, GPUs {', '.join(sorted(df.gpu.unique()))}")


@ops.command()
@click.option("--dataset", "path", default=DATASET, show_default=True)
def check(path):
    """Summed operations against the whole network, per model and mode (time and energy)."""
    from rich.console import Console
    from rich.table import Table

    from radt_ext.ops import dataset as ds

    res = ds.summed_vs_network(ds.load(path))
    agg = res.groupby(["gpu", "model", "mode"])[["time_ratio", "energy_ratio"]].median().reset_index()
    table = Table("gpu", "model", "mode", "ops/network time", "ops/network energy", title="median over batches and precisions")
    for _, r in agg.iterrows():
        table.add_row(r.gpu, r.model, r["mode"], f"{r.time_ratio:.2f}", f"{r.energy_ratio:.2f}")
    Console().print(table)


@ops.command()
@click.option("--dataset", "path", default=DATASET, show_default=True)
@click.option("--out", default=None, help="write the summary JSON here (and the cases as CSV beside it)")
@click.option("--hold-out", type=click.Choice(["model", "family"]), default="model", show_default=True,
              help="what each fit leaves out: one model, or its whole family (closer to a network never seen)")
@click.option("--method", type=click.Choice(["roofline", "fitted"]), default="roofline", show_default=True,
              help="how an operation moves between GPUs: from its measurement and the GPUs' specifications, "
                   "or by regressors fitted on the dataset")
def validate(path, out, hold_out, method):
    """Leave-one-model-out validation of the predictor: median and worst errors, best-GPU accuracy."""
    from radt_ext.ops import dataset as ds, predict

    res = predict.validate(ds.load(path), progress=lambda m: click.echo(f"  held out {m}", err=True),
                           hold_out=hold_out, method=method)
    summ = predict.summary(res)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(summ, indent=1) + "\n")
        res.to_csv(Path(out).with_suffix(".csv"), index=False, float_format="%.6g")
    for m in ("time", "energy"):
        s = summ[m]
        click.echo(f"{m}: median error {s['median_error']:.1%}, worst {s['worst_error']:.1%} ({s['worst_case']}); "
                   f"assuming no change: median {s['median_error_if_unchanged']:.1%}")
    for by, b in summ["best_gpu"].items():
        click.echo(f"best GPU by {by}: right in {b['right']}/{b['cases']} ({b['right_fraction']:.0%}; "
                   f"{b['predicted_ties']} predicted ties; direction alone {b['strict_fraction']:.0%})")


@ops.command(name="best-gpu")
@click.argument("profile")
@click.option("--by", type=click.Choice(["time", "energy", "edp"]), default="time", show_default=True)
@click.option("--gpus", default=None, help="comma-separated GPUs to rank (default: those in the dataset)")
@click.option("--dataset", "path", default=DATASET, show_default=True)
@click.option("--tolerance", type=float, default=None,
              help="relative gap counted as a tie (default: the validated median error)")
@click.option("--host", "host_choice", default="dataset", show_default=True,
              help="the host each predicted GPU runs on: 'dataset' (the machines the dataset measured that GPU "
                   "on), 'source' (the profile's own), a GPU of the dataset (the machines it was measured on), "
                   "or a JSON file from `radt-ext ops host --out`")
def best_gpu(profile, by, gpus, path, tolerance, host_choice):
    """Rank GPUs for the workload of PROFILE (a profile run id, or a <name>.csv from the grid)."""
    from rich.console import Console
    from rich.table import Table

    from radt_ext.ops import dataset as ds, pace, predict, store
    own = _own_host(host_choice)
    if Path(profile).suffix == ".csv":
        prof = store.read(profile)
    else:
        client, _ = _client(None)
        prof = store.load_run(client, profile)
    data = ds.load(path)
    measured = sorted(data.gpu.unique())
    source = _measured_gpu(str(prof.meta.get("gpu_name", "cpu")), measured, "the profile comes from")
    targets = [_measured_gpu(g, measured, "--gpus names") for g in gpus.split(",")] if gpus else measured
    if tolerance is None:
        tolerance = _tolerance(by)
    rows = prof.table.assign(precision=prof.meta.get("precision"), **ds.machine_columns(prof.meta))
    models = predict.fit(data)
    error = _interval_error()
    from radt_ext.ops import host as hosts

    def target_host(gpu: str) -> dict | None:
        if own is not None:
            return own
        if host_choice == "source":
            return hosts.from_rows(rows)
        return predict.machine_host(data, gpu if host_choice == "dataset" else named)

    named = None if own is not None or host_choice in ("dataset", "source") else \
        _measured_gpu(host_choice, measured, "--host names")
    preds = [predict.predict(models, rows, source, t, error=error, target_host=target_host(t))
             for t in dict.fromkeys([source, *targets])]
    table = Table("rank", "gpu", "time ms/step", "energy J/step", "EDP J·s", "",
                  title=f"{prof.meta.get('model')} b{prof.meta.get('batch')} {prof.meta.get('precision')} "
                        f"{prof.meta.get('mode')}, profiled on {source}; by {by}, tie within {tolerance:.0%}")

    def cell(p, by, scale):
        lo, hi = p.interval(by)
        return f"{p.value(by) / scale:.4g} ({lo / scale:.4g}–{hi / scale:.4g})"

    ranked = predict.rank(preds, by, tolerance)
    for r, p, note in ranked:
        table.add_row(str(r), p.gpu, cell(p, "time", 1), cell(p, "energy", 1e3), cell(p, "edp", 1e6),
                      " ".join(x for x in (note, "measured" if p.measured else "predicted") if x))
    Console(width=160).print(table)
    told = pace.of(rows, source)
    click.echo(f"on {source}: {told.sentence()}" + (" (the predicted intervals carry it)" if told.host_bound else ""))
    click.echo(f"intervals: the profile's measured spread ({preds[0].spread:.1%}) plus the predictor's error "
               f"on networks of families it was not fitted on (90th percentile: time {error[0]:.1%}, energy "
               f"{error[1]:.1%}) plus the host's share of the step times the host's error"
               + (f"; then, the host setting the pace, divided and multiplied by {1 + told.machine_spread:.2f}"
                  if told.host_bound else ""))
    for p in preds:
        if not p.measured:
            click.echo(f"host assumed for {p.gpu}: {p.host}; the host's part of the step {p.host_share:.0%}, "
                       f"moved by {p.host_ratio:.2f}x (interval + {p.host_error:.1%})")
    if len(ranked) > 1:
        lo_best, hi_best = ranked[0][1].interval(by)
        lo_next, _ = ranked[1][1].interval(by)
        if lo_next <= hi_best:
            click.echo(f"the intervals of {ranked[0][1].gpu} and {ranked[1][1].gpu} overlap: the ranking by {by} "
                       f"is not certain for this workload")


def _own_host(choice: str) -> dict | None:
    """A host benchmark from `radt-ext ops host --out FILE`; None for 'dataset', 'source' or a GPU's name."""
    path = Path(choice)
    if choice in ("dataset", "source") or (not path.suffix and not path.exists()):
        return None
    try:
        bench = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--host {choice}: give 'dataset', 'source' or a JSON file from `radt-ext ops host "
                         f"--out FILE` ({type(exc).__name__})") from None
    if not isinstance(bench, dict) or "dispatch_us" not in bench:
        raise UsageError(f"--host {choice}: not a host benchmark (no dispatch_us); make one with radt-ext ops host --out FILE")
    return bench


def _measured_gpu(name: str, measured: list[str], what: str) -> str:
    """The short name of a GPU the dataset has profiles from; one line otherwise."""
    from radt_ext.ops.gpus import lookup

    short = lookup(name).short
    if short not in measured:
        raise UsageError(f"{what} {short}, which the dataset has no profiles from: the predictor moves workloads "
                         f"only between GPUs it has measured ({', '.join(measured)}); profile on {short} first")
    return short


def _interval_error() -> tuple[float, float]:
    """The predictor's 90th-percentile error with the network's family held out (time, energy)."""
    path = Path(__file__).resolve().parents[2] / HELDOUT
    try:
        e = json.loads(path.read_text())["interval"]
        return float(e["time"]), float(e["energy"])
    except (OSError, KeyError, ValueError):
        return INTERVAL_ERROR


def _tolerance(by: str) -> float:
    path = Path(__file__).resolve().parents[2] / VALIDATION
    try:
        return float(json.loads(path.read_text())["tolerance"][by])
    except (OSError, KeyError, ValueError):
        return 0.1
