"""A neighbour's start-up charged like any other sharing: each job's slowdown while another starts up
beside it, measured from progress files as workloads write them (collocation/pairs.py), kept on a group
run in a real SQLite store and read back (profiles.py), and what the chains make of it: the model's
figure where nothing is measured (none beside a light job paced by its kernels' launches), the measured
one where the store has it, none beside where it was measured beyond the bound."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import pairs
from radt_ext.collocation.guard import SETTLE_S
from radt_ext.packing import chains, model, profiles
from radt_ext.packing.planner import Job
from tests.radt_ext.collocation.test_pairs import T0, progress, window
from tests.radt_ext.packing.store import log_pair, log_profile

EXP = "queue"
BOUND = 1.5


def test_a_jobs_rate_while_its_neighbour_starts_up_is_measured_apart_from_their_active_phases_side_by_side(tmp_path):
    # a: 10/s alone, active from 0 to 20 s; at 5/s from 2 to 10 s while b starts up (b's process from 2 s,
    # its active phase from 10 s), then 8/s beside b's active phase
    a = progress(tmp_path, "a", [(0.0, 2.0, 10.0), (2.0, 10.0, 5.0), (10.0, 20.0, 8.0)])
    b = progress(tmp_path, "b", [(10.0, 20.0, 10.0)])
    items = [("a", a, window(0.0, 20.0), T0 - 1.0), ("b", b, window(10.0, 20.0), T0 + 2.0)]
    rates = {"a": (10.0, "samples"), "b": (20.0, "samples")}
    [boot] = pairs.measure_startups(items, rates, {})
    assert boot == {"active": "a", "starting": "b", "slowdown": pytest.approx(2.0), "span_s": pytest.approx(8.0)}
    # a's own first SETTLE_S are left out, and so are the seconds a third job was alive
    items[1] = ("b", b, window(10.0, 20.0), T0)
    [boot] = pairs.measure_startups(items, rates, {})
    assert boot["span_s"] == pytest.approx(10.0 - SETTLE_S)
    third = items + [("c", None, window(4.0, 6.0), T0 + 3.0)]
    [boot] = pairs.measure_startups(third, rates, {})
    assert boot["span_s"] == pytest.approx(4.0)  # [6, 10]: the longest part without c
    assert pairs.read_startups(pairs.text([boot])) == [boot] and pairs.read_startups("not json") == []
    # a start-up too short beside it measures nothing
    short = [("a", a, window(0.0, 20.0), T0), ("b", b, window(10.0, 20.0), T0 + 9.0)]
    assert pairs.measure_startups(short, rates, {}) == []


def light(uri: str, key: str) -> None:
    """A light job paced by its kernels' launches (SM active 8 %, the GPU busy 40 %): 5 s of start-up, 30 s
    of active phase, 1 s of wind-down."""
    log_profile(uri, EXP, key, (8.0, 2.0, 40.0, 2000.0, 150.0, 30.0), whole=(4.0, 1.0, 20.0, 2000.0, 120.0, 36.0),
                startup_s=5.0)


def chain_of(uri: str):
    k = profiles.read(MlflowClient(uri), EXP)
    jobs = [Job(n, n, profile=k.profiles[n]) for n in ("timed", "next")]
    return k, chains.ChainPlanner(k, "naive", BOUND, True, None).chain(jobs)


def test_a_light_job_gets_no_start_up_beside_it_until_the_store_measured_it_within_the_bound(tracking_uri):
    light(tracking_uri, "timed")
    light(tracking_uri, "next")
    k, c = chain_of(tracking_uri)
    assert model.boot_slowdown(k.profiles["timed"], "naive") == model.BOOT_LIGHT > BOUND
    link = c.links[1]
    assert link.basis == "start-up" and link.boot_s == 0.0 and link.boot_evidence == ""
    played = chains.ChainPlanner.play([chains.phases(j.profile) for j in c.jobs], c.starts, c.links)
    assert played.starts[1] >= played.active_to[0] - 1e-6  # its neighbour starts as its active phase ends
    assert c.slowdowns == pytest.approx([1.0, 1.0])
    # measured: its start-up beside costs "timed" 1.05 -> the whole start-up beside, charged at that
    run = log_pair(tracking_uri, EXP, "naive", [("timed-0", "timed", 0.0), ("next-1", "next", 0.0)],
                   startups=[{"active": "timed-0", "starting": "next-1", "slowdown": 1.05, "span_s": 4.0}])
    k, c = chain_of(tracking_uri)
    [boot] = k.boots
    assert (boot.active_key, boot.starting_key, boot.slowdown, boot.run_id) == ("timed", "next", 1.05, run)
    link = c.links[1]
    assert link.boot == 1.05 and link.boot_s is None and link.boot_evidence == run
    assert link.text() == f"its start-up beside the job before at 1.05 (run {run[:8]})"
    assert c.starts[1] == pytest.approx(35.0 - 5.0 / 1.05)
    assert c.slowdowns[0] == pytest.approx(1.0 + 5.0 * (1 - 1 / 1.05) / 36.0)
    # measured again, beyond the bound (a job that stops on time did 3.46x less work): not repeated
    log_pair(tracking_uri, EXP, "naive", [("timed-0", "timed", 0.0), ("next-1", "next", 0.0)],
             startups=[{"active": "timed-0", "starting": "next-1", "slowdown": 3.46, "span_s": 4.0}])
    k, c = chain_of(tracking_uri)
    assert c.links[1].boot == 3.46 and c.links[1].boot_s == 0.0
    assert "its start-up after the active phase of the job before (its start-up measured at 3.46" in c.links[1].text()
    # in MPS nothing was measured: the model's figure
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    assert chains.ChainPlanner(k, "mps", BOUND, True, None).boot(k.profiles["timed"], k.profiles["next"]) == \
        (model.BOOT_LIGHT, "")


def test_a_start_up_beside_is_charged_to_the_active_phase_it_shares():
    # b's 10 s start-up beside a's active phase at 2x: a does 5 s of its work in those 10 s
    ph = [chains.Phases(0.0, 20.0, 0.0), chains.Phases(10.0, 5.0, 0.0)]
    played = chains.simulate(ph, [0.0, 5.0], lambda k, o: 1.0, boot=lambda k, o: 2.0 if (k, o) == (0, 1) else 1.0)
    assert played.active_to[0] == pytest.approx(25.0)  # 5 s alone, 10 s at half rate, 10 s alone
    assert played.active_from[1] == pytest.approx(15.0)
    free = chains.simulate(ph, [0.0, 5.0], lambda k, o: 1.0)
    assert free.active_to[0] == pytest.approx(20.0)
