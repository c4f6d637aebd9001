"""Functional operations outside leaf modules (cat, add, bmm, indexing) captured, costed, measured and
logged; an operation's backward measured over independent copies in one autograd call."""
from __future__ import annotations

import math

import pytest
import torch
from mlflow.tracking import MlflowClient

from radt_ext.ops import backward, catalog, profiler, store
from radt_ext.ops.capture import capture

CPU = torch.device("cpu")


pytestmark = pytest.mark.usefixtures("one_thread")


def _functional(calls):
    return {c.op: c for c in calls if c.module is None}


def test_vit_class_token_cat_and_residual_adds_are_captured():
    net = catalog.build("vit", 2, "fp32", CPU, tiny=True)
    calls = capture(net.module.eval(), net.inputs, grad=False)
    fn = [c for c in calls if c.module is None]
    assert {c.op for c in fn} == {"cat", "add"}  # reshape, permute, expand and x[:, 0] are views: no kernel
    cat = next(c for c in fn if c.op == "cat")
    assert cat.input_shapes == "(2x1x256:float32:g,2x64x256:float32);dim=1"
    adds = {c.name: c for c in fn if c.op == "add"}
    assert adds["encoder.add"].count == 1  # the positional embedding
    assert adds["encoder.layers.encoder_layer_0.add"].count == 2 * 6  # two residual adds in each of 6 layers
    # nothing inside a leaf module or the attention block is counted twice
    assert sum(c.count for c in calls if c.op == "MultiheadAttention") == 6


def test_resnet_inplace_residual_add_is_captured_and_replayed_out_of_place():
    net = catalog.build("resnet18", 2, "fp32", CPU, tiny=True)
    calls = capture(net.module.train(), net.inputs, grad=True)
    adds = [c for c in calls if c.op == "add"]
    assert [c.name for c in adds] == ["layer1.0.add", "layer2.0.add", "layer3.0.add", "layer4.0.add"]
    assert all(c.count == 2 and c.needs_grad for c in adds)
    before = adds[0].args[0].clone()
    out = adds[0]()  # `out += identity` on a leaf that takes a gradient: only possible out of place
    assert torch.equal(adds[0].args[0], before) and out.shape == before.shape


def test_dlrm_interaction_is_profiled_with_flops_and_bytes():
    net = catalog.build("dlrm", 8, "fp32", CPU, tiny=True)
    prof = profiler.profile(net, "training", CPU, None, window_s=0.002, net_window_s=0.002)
    t = prof.table
    fn = t[t.op.isin(["stack", "bmm", "getitem", "cat"])].set_index(["op", "phase"])
    assert set(fn.index.get_level_values(0)) == {"stack", "bmm", "getitem", "cat"}
    n, d, pairs = catalog.TINY["dlrm"]["num_tables"] + 1, 64, 10
    assert fn.loc[("bmm", "forward"), "flops"] == 2 * 8 * n * n * d  # FlopCounterMode's count
    assert fn.loc[("bmm", "backward"), "flops"] == 2 * fn.loc[("bmm", "forward"), "flops"]  # both operands
    assert fn.loc[("stack", "forward"), "flops"] == 0
    assert fn.loc[("stack", "forward"), "bytes"] == 2 * 8 * n * d * 4  # read and written once
    # indexing reads the pairs it gathers and its two index vectors, not the whole 8×5×5 product
    assert fn.loc[("getitem", "forward"), "bytes"] == 2 * 8 * pairs * 4 + 2 * pairs * 8
    assert (fn.time_ms > 0).all()
    net_fwd = t[(t.op == "network") & (t.phase == "forward")].flops.iloc[0]
    ops = t[(t.op != "network") & (t.phase == "forward")]
    assert net_fwd == (ops.flops * ops["count"]).sum()  # functional FLOPs are part of the network's


def test_backward_runs_over_independent_copies(monkeypatch):
    monkeypatch.setattr(backward, "CALL_S", 1e9)  # as many copies as asked for
    net = catalog.build("small_cnn", 2, "fp32", CPU, tiny=True)
    conv = next(c for c in capture(net.module.train(), net.inputs, grad=True)
                if c.op == "Conv2d" and c.args[0].requires_grad)  # a hidden layer: input, weight, bias
    with torch.enable_grad():
        bwd, k, outs = backward.amortised(conv, lambda: None, copies=4)
        grads = bwd()
    assert k == 4
    # per copy: its own input and weight and bias gradients, none accumulated across copies
    assert len(grads) == 3 * k
    assert all(g is not None for g in grads)
    assert len({g.data_ptr() for g in grads}) == len(grads)
    assert conv.args[0].grad is None  # the captured inputs are left as they were


def test_backward_copies_fit_the_memory_budget(monkeypatch):
    net = catalog.build("small_cnn", 2, "fp32", CPU, tiny=True)
    conv = next(c for c in capture(net.module.train(), net.inputs, grad=True) if c.op == "Conv2d")
    monkeypatch.setattr(backward, "COPY_BUDGET_BYTES", 1)
    monkeypatch.setattr(backward, "CALL_S", 1e9)
    with torch.enable_grad():
        _, k, _ = backward.amortised(conv, lambda: None)
    assert k == 1


def test_profile_with_functional_ops_logs_to_mlflow(tracking_uri):
    net = catalog.build("vit", 2, "bf16", CPU, tiny=True)
    prof = profiler.profile(net, "training", CPU, None, window_s=0.002, net_window_s=0.002)
    prof.meta.update(batch=2, precision="bf16", gpu_name="cpu")
    client = MlflowClient(tracking_uri)
    run_id = store.log(prof, client, "0")
    back = store.load_run(client, run_id).table
    fn = back[back.op.isin(["cat", "add"])]
    assert set(fn.phase) == {"forward", "backward"}
    assert (fn.reps > 0).all() and (fn["bytes"] > 0).all() and fn.input_shapes.str.contains("bfloat16").all()
    adds = fn[(fn.op == "add") & (fn.phase == "forward")]
    assert (adds.flops == 2 * 65 * 256).all()  # one per output element


def test_network_is_measured_in_rounds_with_their_spread():
    from radt_ext.ops.network import ROUNDS

    net = catalog.build("resnet18", 2, "fp32", CPU, tiny=True)
    prof = profiler.profile(net, "training", CPU, None, window_s=0.002, net_window_s=0.002)
    t = prof.table
    net_rows = t[t.op == "network"]
    assert list(net_rows.phase) == ["forward", "backward"]
    assert (net_rows.spread >= 0).all() and t[t.op != "network"].spread.isna().all()
    assert (net_rows.window_s >= ROUNDS * 0.002).all()  # each round a window of its own
    assert prof.meta["net_rounds"] == ROUNDS and prof.meta["cudnn_benchmark"] is False


def test_a_networks_rounds_combine_as_the_fastest_one():
    from radt_ext.ops.measure import Window
    from radt_ext.ops.network import combined

    rounds = [Window(2.0, 1000.0, 500.0, 100, 0.3, busy=0.99), Window(4.0, 1600.0, 400.0, 50, 0.3, busy=0.98),
              Window(2.1, 1050.0, 500.0, 95, 0.3, busy=1.0)]
    row = combined(rounds)
    # the host held the second round back: its GPU idled (lower power, twice the time)
    assert row["time_ms"] == 2.0 and row["power_w"] == 500.0 and row["energy_mj"] == pytest.approx(1000.0)
    assert row["spread"] == pytest.approx((4.0 - 2.0) / 2.1) and row["reps"] == 245 and row["busy"] == 0.98
    assert row["window_s"] == pytest.approx(0.9)
    assert row["energy_spread"] == pytest.approx((1600.0 - 1000.0) / 1050.0)
    assert math.isnan(combined([Window(1.0, math.nan, math.nan, 10, 0.3)] * 2)["energy_spread"])  # no meter
    # a round at the fastest one's pace (within 3 %) shares in its energy: one round's power alone may be off
    paced = combined([*rounds, Window(2.05, 1100.0, 536.6, 97, 0.3, host_ms=1.2)])
    assert paced["time_ms"] == 2.0 and paced["energy_mj"] == pytest.approx(1050.0)
    assert paced["power_w"] == pytest.approx(518.3) and paced["host_ms"] == 1.2  # the host's fastest issue
    # the step's time: the fastest tenth of the chunks, wherever the host slowed part of a window
    chunked = combined([Window(2.0, 1000.0, 500.0, 100, 0.3, time_fast_ms=1.9), Window(2.4, 1100.0, 458.0, 90, 0.3,
                                                                                       time_fast_ms=1.85)])
    assert chunked["time_ms"] == 1.85 and chunked["spread"] == pytest.approx(0.4 / 2.2)


def test_cudnn_setting_is_restored_after_a_profile():
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        net = catalog.build("mlp", 2, "fp32", CPU, tiny=True)
        profiler.profile(net, "inference", CPU, None, window_s=0.002, net_window_s=0.002)
        assert torch.backends.cudnn.benchmark is True
    finally:
        torch.backends.cudnn.benchmark = before


def test_old_dataset_files_load_without_the_newer_columns(tmp_path):
    import pandas as pd

    from radt_ext.ops import dataset

    new = pd.read_csv("tests/radt_ext/ops/data/slice.csv.gz")
    net = new.op == "network"
    # the slice is of the current profiler: every network row has its rounds' spread, no operation row does
    assert new.loc[net, "spread"].notna().all() and new.loc[~net, "spread"].isna().all()
    # and every window's GPU timeline is covered by its chunks: the counter read never starves the GPU
    assert (new.busy > 0.9).all()
    old = tmp_path / "old.csv.gz"
    new.drop(columns=["spread", "busy"]).to_csv(old, index=False)
    df = dataset.load(old)
    assert {"spread", "busy"} <= set(df.columns) and df.spread.isna().all() and df.busy.isna().all()
    assert len(df) == len(new)
