"""The host benchmark, the profiler's hold on its own threads, and the host-aware prediction."""
from __future__ import annotations

import math
import os
import threading

import pytest
import torch

from radt_ext.ops import host, predict


@pytest.fixture(scope="module")
def bench():
    return host.benchmark("cpu")


def test_benchmark_measures_this_hosts_costs(bench):
    for key in ("dispatch_us", "module_us", "autograd_us", "copy_us"):
        assert 0 < bench[key] < 1e5, key  # µs per call
    assert math.isnan(bench["launch_us"])  # no kernel launch on the CPU
    assert bench["autograd_us"] > bench["dispatch_us"]  # a forward and backward of two layers outweighs one add
    assert bench["cpu_model"] and bench["cpus"] >= 1 and bench["device"] == "cpu"
    assert host.cost(bench, "training") == pytest.approx(bench["autograd_us"])
    assert host.cost(bench, "inference") == pytest.approx(math.sqrt(bench["dispatch_us"] * bench["module_us"]))
    slower = {**bench, **{k: 1.2 * bench[k] for k in host.FIGURES if math.isfinite(bench[k])}}
    for phase in ("inference", "forward", "backward"):
        assert host.ratio(bench, slower, phase) == pytest.approx(1.2)
    assert math.isnan(host.ratio(bench, None, "forward"))
    gpu_host = {**slower, "launch_us": 3.0}  # a GPU machine's host has a launch figure the CPU's lacks
    assert host.ratio(bench, gpu_host, "inference") == pytest.approx(1.2)  # compared on the figures both have
    assert host.measured("cpu") is host.measured("cpu")  # once per process


def test_dataset_columns_carry_the_benchmark_both_ways(bench):
    cols = host.columns(bench)
    assert cols["host_autograd_us"] == bench["autograd_us"] and cols["host_cpu"] == bench["cpu_model"]
    import pandas as pd

    back = host.from_rows(pd.DataFrame([cols]))
    assert back["autograd_us"] == bench["autograd_us"]
    assert host.from_rows(pd.DataFrame([host.columns(None)])) is None  # a profile made before the host was recorded
    both = host.median_host([bench, {**bench, "autograd_us": 3 * bench["autograd_us"]}])
    assert both["autograd_us"] == pytest.approx(2 * bench["autograd_us"]) and both["machines"] == 2


def test_meter_thread_goes_to_another_core_than_the_launching_thread():
    assert host.choose_cpus({0}) is None
    launch, meter = host.choose_cpus({0, 1, 2, 3})
    assert launch == 3 and meter != launch and meter not in host._siblings(launch)
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs and CPU affinity")
    before = os.sched_getaffinity(0)
    with host.pinned(torch.device("cpu")) as placement:
        assert placement == {} and os.sched_getaffinity(0) == before  # a CPU profile uses every core it has
    seen = {}
    with host.pinned(torch.device("cuda", 0)) as placement:  # what a GPU profile does with the host's CPUs
        assert os.sched_getaffinity(0) == {placement["launch_cpu"]}

        def meter_thread():
            seen["inherited"] = os.sched_getaffinity(0)
            host.pin_meter_thread()
            seen["pinned"] = os.sched_getaffinity(0)
        t = threading.Thread(target=meter_thread)
        t.start()
        t.join()
    assert seen["inherited"] == {placement["launch_cpu"]} and seen["pinned"] == {placement["meter_cpu"]}
    assert os.sched_getaffinity(0) == before  # restored


def test_quiet_holds_the_garbage_collector_off_and_restores_it():
    import gc

    assert gc.isenabled()
    with host.quiet():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_thread_change_tells_cpu_share_and_switches():
    before = host.thread_state()
    sum(i * i for i in range(200_000))  # the thread busy on its CPU
    change = host.thread_change(before, host.thread_state())
    assert 0 < change["host_cpu_share"] <= 1.05
    assert change.get("host_preempted", 0) >= 0 and change.get("host_waits", 0) >= 0


# ---- the host-aware prediction, on a real profile of the H100 ----

def _vit(data, gpu="H100", mode="inference"):
    return data[(data.gpu == gpu) & (data.model == "vit") & (data.precision == "bf16") & (data["mode"] == mode)]


MACHINE = {"cpu_model": "Xeon", "cpus": 16, "launch_us": 2.0, "dispatch_us": 6.0, "module_us": 12.0,
           "autograd_us": 60.0, "copy_us": 20.0}


def _on_host(rows, issue_share: float, machine=MACHINE, idle_w=float("nan")):
    """The profile's rows as if its host had been benchmarked, its network taking `issue_share` of each step
    to issue."""
    rows = rows.assign(**host.columns(machine), idle_power_w=idle_w)
    net = rows.op == "network"
    rows.loc[net, "host_ms"] = rows.loc[net, "time_ms"] * issue_share
    return rows


def test_a_host_bound_step_moves_with_the_hosts_ratio(data, models):
    rows = _vit(data)
    blind = predict.predict(models, rows, "H100", "H200")
    slower = {**MACHINE, **{k: 1.25 * MACHINE[k] for k in host.FIGURES}}
    bound = _on_host(rows, 1.0, idle_w=90.0)
    p = predict.predict(models, bound, "H100", "H200", target_host=slower)
    measured = predict._net(rows)[0]
    assert p.time_ms == pytest.approx(1.25 * measured)  # the host issues every step 25 % slower: so does the step
    assert p.host_ratio == pytest.approx(1.25) and p.host_share == pytest.approx(1.0)
    assert p.energy_mj == pytest.approx(blind.energy_mj + 90.0 * (p.time_ms - blind.time_ms))  # waiting at idle power
    assert p.host_error == pytest.approx(predict.HOST_ERROR) and "Xeon" in p.host
    lo, hi = p.interval("time", across_machines=False)
    assert hi / p.time_ms - 1 == pytest.approx(p.spread + p.host_error, abs=1e-9)
    assert p.interval("time")[1] == pytest.approx(hi * (1 + p.machine_spread)) and p.machine_spread > 0  # host-bound
    same = predict.predict(models, bound, "H100", "H200", target_host=MACHINE)
    assert same.time_ms == pytest.approx(measured)  # the same host: a host-bound step gains nothing from the GPU
    assumed = predict.predict(models, bound, "H100", "H200")
    assert assumed.time_ms == pytest.approx(measured) and assumed.host_error == pytest.approx(predict.HOST_ASSUMED)
    assert "assumed" in assumed.host
    off = predict.predict(models, bound, "H100", "H200", target_host=slower, use_host=False)
    assert off.time_ms == pytest.approx(blind.time_ms) and off.energy_mj == pytest.approx(blind.energy_mj)


def test_a_gpu_bound_step_keeps_its_gpu_prediction(data, models):
    rows = _vit(data)
    blind = predict.predict(models, rows, "H100", "H200")
    light = _on_host(rows, 0.1)
    faster = {**MACHINE, **{k: 0.5 * MACHINE[k] for k in host.FIGURES}}
    for target in (MACHINE, faster, {**MACHINE, **{k: 1.5 * MACHINE[k] for k in host.FIGURES}}):
        p = predict.predict(models, light, "H100", "H200", target_host=target)
        assert p.time_ms == pytest.approx(blind.time_ms, rel=0.01)  # the host keeps ahead of the GPU either way
        assert p.host_share < 0.2
    # a profile made before the host was recorded: as before, and nothing added to the interval
    assert predict.predict(models, rows, "H100", "H200", target_host=faster).host_error == 0.0
