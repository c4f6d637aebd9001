"""Pairs measured side by side (collocation/pairs.py): each pair of a group's workloads over the longest
span both were active and neither paused (the later one's first SETTLE_S left out), from progress files
as workloads write them; and a real group run (child processes, a SQLite store) whose parent carries the
pairs the packing planner reads back as measured."""
from __future__ import annotations

import json
import os
import sys

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload, pairs, run_group
from radt_ext.collocation.guard import SETTLE_S
from radt_ext.figures.active import Window
from radt_ext.packing import profiles
from radt_ext.workload_api.progress import read_marks

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "guard_job.py")
T0 = 1.7e9


def progress(tmp_path, name: str, pieces: list[tuple[float, float, float]]):
    """A workload's progress file: in each (start, end, samples/s) piece, from T0, a record every 0.1 s
    (a pause: a piece at 0/s); read back as the session reads it."""
    rows, n = [], 0.0
    for start, end, rate in pieces:
        for k in range(round((end - start) / 0.1)):
            rows.append({"pid": 1, "t": T0 + start + k * 0.1, "samples": n})
            n += rate * 0.1
    rows.append({"pid": 1, "t": T0 + pieces[-1][1], "samples": n})
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_marks(str(path))


def window(start: float, end: float) -> Window:
    return Window(T0 + start, T0 + end, "progress")


def test_a_pair_is_measured_over_the_longest_span_neither_was_paused(tmp_path):
    # a: 10/s alone, 5/s here from 0 to 12 s; b: 20/s alone, 16/s here, paused by the guard from 3 to 4 s
    a = progress(tmp_path, "a", [(0.0, 12.0, 5.0)])
    b = progress(tmp_path, "b", [(0.0, 3.0, 16.0), (3.0, 4.0, 0.0), (4.0, 12.0, 16.0)])
    items = [("a", a, window(0.0, 12.0)), ("b", b, window(0.0, 12.0))]
    rates = {"a": (10.0, "samples"), "b": (20.0, "samples")}
    [pair] = pairs.measure(items, rates, {"b": [(T0 + 3.0, T0 + 4.0)]})
    # from SETTLE_S on: [1, 3] and [4, 12] free of the pause; the longer one, 8 s
    assert pair == {"a": "a", "b": "b", "slowdowns": [pytest.approx(2.0), pytest.approx(1.25)],
                    "span_s": pytest.approx(8.0)}
    # without the pause left out, b's second at 0/s would count as a slower rate
    [whole] = pairs.measure(items, rates, {})
    assert whole["span_s"] == pytest.approx(12.0 - SETTLE_S) and whole["slowdowns"][1] > 1.25
    assert pairs.read(pairs.text([pair])) == [pair]


def test_the_later_ones_first_seconds_are_left_out_and_too_short_a_span_gives_nothing(tmp_path):
    a = progress(tmp_path, "a", [(0.0, 12.0, 5.0)])
    b = progress(tmp_path, "b", [(6.0, 12.0, 10.0)])
    rates = {"a": (10.0, "samples"), "b": (20.0, "samples")}
    [pair] = pairs.measure([("a", a, window(0.0, 12.0)), ("b", b, window(6.0, 12.0))], rates, {})
    assert pair["span_s"] == pytest.approx(12.0 - 6.0 - SETTLE_S) and pair["slowdowns"] == pytest.approx([2.0, 2.0])
    # side by side 2.5 s: less than SETTLE_S + MIN_S
    short = [("a", a, window(0.0, 12.0)), ("b", b, window(9.5, 12.0))]
    assert 12.0 - 9.5 < SETTLE_S + pairs.MIN_S and pairs.measure(short, rates, {}) == []
    # long enough side by side, but cut by pauses into pieces each shorter than MIN_S
    cut = {"a": [(T0 + 8.5, T0 + 9.0)], "b": [(T0 + 10.5, T0 + 11.0)]}
    assert pairs.measure([("a", a, window(0.0, 12.0)), ("b", b, window(6.0, 12.0))], rates, cut) == []
    # a workload without a rate alone (or without progress) is in no pair
    assert pairs.measure([("a", a, window(0.0, 12.0)), ("b", b, window(6.0, 12.0))], {"a": rates["a"]}, {}) == []
    assert pairs.measure([("a", a, window(0.0, 12.0)), ("b", None, window(6.0, 12.0))], rates, {}) == []


def test_each_pair_of_three_is_measured(tmp_path):
    marks = {n: progress(tmp_path, n, [(0.0, 10.0, r)]) for n, r in (("a", 5.0), ("b", 8.0), ("c", 4.0))}
    rates = {n: (10.0, "samples") for n in marks}
    found = pairs.measure([(n, marks[n], window(0.0, 10.0)) for n in "abc"], rates, {})
    assert [(p["a"], p["b"]) for p in found] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert found[1]["slowdowns"] == pytest.approx([2.0, 2.5])


def test_a_group_run_tags_its_pairs_and_the_next_plan_reads_them_as_measured(tracking_uri):
    client = MlflowClient(tracking_uri)
    exp = client.create_experiment("pairs")
    baselines = {}
    for name in ("a", "b"):  # each one's exclusive run: 100 steps/s over its active phase
        run_id = client.create_run(exp, tags={"collocation.mode": "exclusive"}).info.run_id
        for key, value in (("active_s", 3.0), ("throughput_samples_per_s", 100.0), ("e2e_duration_s", 3.5)):
            client.log_metric(run_id, f"summary/{key}", value)
        client.set_terminated(run_id, "FINISHED")
        baselines[name] = (run_id, 3.5)
    # two jobs on one CPU: each about half as fast as alone, side by side for seconds
    workloads = [Workload(n, [sys.executable, JOB, "--steps", "400"], device="cpu",
                          tags={"sweep.workload_hash": f"hash-{n}"}) for n in ("a", "b")]
    result = run_group(Group("naive", workloads, experiment_name="pairs", interval=0.2, baselines=baselines),
                       echo=lambda line: None)
    assert result.status == "FINISHED"
    parent = client.get_run(result.parent_run_id)
    [pair] = pairs.read(parent.data.tags[pairs.TAG])
    assert (pair["a"], pair["b"]) == ("a", "b") and pair["span_s"] >= pairs.MIN_S
    xa, xb = pair["slowdowns"]
    assert 0.7 < xa / xb < 1.4  # the same job beside the same job: much the same slowdown
    [g] = profiles.read(client, "pairs").groups
    assert g.run_id == result.parent_run_id and g.mode == "naive"
    assert g.slowdowns == {"hash-a": [xa], "hash-b": [xb]}
