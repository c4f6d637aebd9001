"""The profiler on the CPU: operations found and deduplicated, both phases measured, FLOPs as PyTorch counts them."""
from __future__ import annotations

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from radt_ext.errors import UsageError
from radt_ext.ops import catalog, cost, profiler
from radt_ext.ops.capture import capture, out_of_place, tensors

CPU = torch.device("cpu")


pytestmark = pytest.mark.usefixtures("one_thread")


def test_mlp_training_profile_dedupes_and_measures_both_phases():
    net = catalog.build("mlp", 4, "fp32", CPU, tiny=True)
    prof = profiler.profile(net, "training", CPU, None, window_s=0.002, net_window_s=0.002)
    t = prof.table
    ops = t[t.op != "network"]
    # Flatten, 4 Linear (two of them hidden→hidden, the same call) and 3 identical ReLUs
    assert prof.meta["ops_total"] == 7 and prof.meta["ops_distinct"] == 4
    counts = ops[ops.phase == "forward"].groupby("op")["count"].sum().to_dict()
    assert counts == {"Linear": 4, "ReLU": 3}
    assert set(ops.phase) == {"forward", "backward"}
    assert set(t[t.op == "network"].phase) == {"forward", "backward"}
    assert (t.time_ms > 0).all() and (t.reps >= 5).all() and (t.window_s > 0).all()
    assert t.energy_mj.isna().all()  # no meter on the CPU
    hidden = ops[(ops.op == "Linear") & (ops["count"] == 2) & (ops.phase == "forward")].iloc[0]
    assert hidden.flops == 2 * 4 * 1024 * 1024 + 4 * 1024  # 2·B·in·out + bias
    first = ops[(ops.op == "Linear") & (ops.order == 0)]
    # the first layer's input takes no gradient: its backward is the weight gradient alone
    assert first[first.phase == "backward"].flops.iloc[0] == first[first.phase == "forward"].flops.iloc[0]
    net_rows = t[t.op == "network"].set_index("phase")
    assert net_rows.loc["forward", "flops"] == (ops[ops.phase == "forward"].flops * ops[ops.phase == "forward"]["count"]).sum()
    assert prof.network() == pytest.approx(net_rows.time_ms.sum())


def test_inference_profile_has_one_phase_and_keeps_inplace_relu():
    net = catalog.build("resnet18", 2, "fp32", CPU, tiny=True)
    relu = net.module.relu
    prof = profiler.profile(net, "inference", CPU, None, window_s=0.002, net_window_s=0.002)
    assert set(prof.table.phase) == {"inference"}
    assert relu.inplace  # replayed out of place, restored afterwards
    assert {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "AdaptiveAvgPool2d", "Linear"} <= set(prof.table.op)


@pytest.mark.parametrize("name", ["resnet18", "vit", "small_cnn"])
def test_analytic_flops_agree_with_pytorchs_counter(name):
    net = catalog.build(name, 2, "fp32", CPU, tiny=True)
    calls = capture(net.module.train(), net.inputs, grad=True)
    checked = 0
    for call in calls:
        if call.op not in ("Conv2d", "Linear", "MultiheadAttention"):
            continue
        fwd = lambda c=call: c.module(*c.args, **c.kwargs)  # noqa: E731
        # the math attention kernel, whose matmuls the counter sees (it skips the fused CPU kernel)
        with out_of_place(call.module), sdpa_kernel(SDPBackend.MATH):
            out = tensors(fwd())
            analytic = cost.forward_flops(call, out)
            counted = cost.counted_flops(fwd)
        bias = sum(t.numel() for t in out) if getattr(call.module, "bias", None) is not None else 0
        if call.op == "MultiheadAttention":  # counted like the counter: projections and matmuls, no biases
            bias = 0
        assert counted == pytest.approx(analytic - bias, rel=1e-6), call.name
        checked += 1
    assert checked >= 3


def test_backward_flops_agree_with_pytorchs_counter():
    net = catalog.build("small_cnn", 2, "fp32", CPU, tiny=True)
    calls = [c for c in capture(net.module.train(), net.inputs, grad=True) if c.op == "Conv2d"]
    for call in calls:
        out = tensors(call.module(*call.args))
        wrt = [t for t in call.args if t.requires_grad] + [call.module.weight]
        grad = torch.randn_like(out[0])
        counted = cost.counted_flops(lambda: torch.autograd.grad(out, wrt, [grad], retain_graph=True))
        fwd = cost.forward_flops(call, out) - out[0].numel()  # without the bias
        assert counted == pytest.approx(cost.backward_flops(call, fwd), rel=1e-6), call.name


def test_bf16_profile_moves_half_the_bytes():
    rows = {}
    for precision in ("fp32", "bf16"):
        net = catalog.build("mlp", 4, precision, CPU, tiny=True)
        t = profiler.profile(net, "inference", CPU, None, window_s=0.002, net_window_s=0.002).table
        rows[precision] = t[t.op == "Linear"].sort_values("order")
    assert (rows["fp32"]["bytes"].to_numpy() == 2 * rows["bf16"]["bytes"].to_numpy()).all()
    assert (rows["fp32"].flops.to_numpy() == rows["bf16"].flops.to_numpy()).all()


def test_embedding_moves_the_rows_it_gathers():
    net = catalog.build("dlrm", 8, "fp32", CPU, tiny=True)
    t = profiler.profile(net, "inference", CPU, None, window_s=0.002, net_window_s=0.002).table
    emb = t[t.op == "Embedding"].iloc[0]
    assert emb["count"] == catalog.TINY["dlrm"]["num_tables"]
    assert emb.flops == 0
    assert emb["bytes"] == 8 * 8 + 8 * 64 * 4 + 8 * 64 * 4  # indices, gathered rows, output


def test_users_module_profiles_and_bad_modules_are_one_line():
    net = catalog.build("tests.radt_ext.ops.modules:TwoLayer", 3, "fp32", CPU, input_shape=(7,))
    prof = profiler.profile(net, "training", CPU, None, window_s=0.002, net_window_s=0.002)
    assert set(prof.table.op) == {"network", "Linear", "GELU"}
    gelu = prof.table[(prof.table.op == "GELU") & (prof.table.phase == "forward")].iloc[0]
    assert gelu.flops == 8 * 3 * 16

    wrong = catalog.build("tests.radt_ext.ops.modules:TwoLayer", 3, "fp32", CPU, input_shape=(5,))
    with pytest.raises(UsageError, match=r"does not run on these inputs: RuntimeError: mat1 and mat2") as exc:
        profiler.profile(wrong, "inference", CPU, None, window_s=0.002, net_window_s=0.002)
    assert "\n" not in str(exc.value)
    for spec, message in [("nosuch", "unknown model 'nosuch'"),
                          ("tests.radt_ext.ops.nosuch:X", "cannot load tests.radt_ext.ops.nosuch:X"),
                          ("tests.radt_ext.ops.modules:NOT_A_MODULE", "is a int, not a torch.nn.Module"),
                          ("tests.radt_ext.ops.modules:TwoLayer", r"example_inputs\(batch\) method .* --input-shape")]:
        with pytest.raises(UsageError, match=message):
            catalog.build(spec, 2, "fp32", CPU)
    with pytest.raises(UsageError, match="unknown precision 'fp8'"):
        catalog.build("mlp", 2, "fp8", CPU)
    with pytest.raises(UsageError, match="unknown mode"):
        profiler.profile(net, "serving", CPU, None)


def test_users_module_with_several_inputs_profiles_as_it_is():
    net = catalog.build("tests.radt_ext.ops.modules:TokensAndMask", 3, "bf16", CPU)
    assert net.inputs == () and set(net.kwargs) == {"input_ids", "attention_mask"}
    assert net.kwargs["input_ids"].dtype == torch.int64 and net.kwargs["attention_mask"].dtype == torch.bfloat16
    prof = profiler.profile(net, "training", CPU, None, window_s=0.002, net_window_s=0.002, net_rounds=4)
    net_rows = prof.table[prof.table.op == "network"]
    assert list(net_rows.phase) == ["forward", "backward"]
    assert net_rows.input_shapes.iloc[0] == "input_ids=3x6;attention_mask=3x6"
    assert {"Embedding", "Linear", "mul", "sum"} <= set(prof.table.op)
    assert (prof.table.time_ms > 0).all()
    rounds = prof.meta["round_details"]
    assert [(r["phase"], r["round"]) for r in rounds[:2]] == [("forward", 0), ("backward", 0)] and len(rounds) == 8
    assert prof.meta["net_rounds"] == 4 and prof.meta["warmup_s"] > 0

    pair = catalog.build("tests.radt_ext.ops.modules:pair_of_inputs", 2, "fp32", CPU)  # the factory's inputs
    assert [tuple(t.shape) for t in pair.inputs] == [(2, 4), (2, 5)]
    prof = profiler.profile(pair, "inference", CPU, None, window_s=0.002, net_window_s=0.002)
    assert {"Linear", "add"} <= set(prof.table.op)
    shaped = catalog.build("tests.radt_ext.ops.modules:TokensAndMask", 2, "fp32", CPU, input_shape=(7,))
    assert shaped.kwargs == {} and tuple(shaped.inputs[0].shape) == (2, 7)  # --input-shape wins
    with pytest.raises(UsageError, match="at least 2"):
        profiler.profile(pair, "inference", CPU, None, net_rounds=1)


def test_users_module_is_built_with_the_same_weights_everywhere():
    a = catalog.build("tests.radt_ext.ops.modules:TokensAndMask", 2, "fp32", CPU)
    torch.rand(5)  # the caller's generator moved on: the module and its inputs do not change
    b = catalog.build("tests.radt_ext.ops.modules:TokensAndMask", 2, "fp32", CPU)
    assert torch.equal(a.module.head.weight, b.module.head.weight)
    assert torch.equal(a.kwargs["input_ids"], b.kwargs["input_ids"])


def test_window_is_long_enough_and_split_in_chunks():
    from radt_ext.ops.measure import Clock, measure

    x = torch.randn(64, 64)
    w = measure(lambda: x @ x, Clock(CPU), None, min_window_s=0.02, chunks=5)
    assert w.window_s >= 0.02  # extended with chunks when calibration guessed short
    assert w.reps >= 5 and w.time_ms > 0
    assert math.isnan(w.energy_mj) and math.isnan(w.power_w)
    assert 0 < w.host_ms and w.time_fast_ms <= w.time_ms * 1.0001  # on the CPU, issuing a call is running it


class TickingCounter:
    """An energy counter that moves every 20 ms, as Hopper's does every 100 ms (10 J a period)."""

    def __init__(self):
        import time

        self.t0, self.reads = time.perf_counter(), 0

    def read_j(self) -> float:
        import time

        self.reads += 1
        return 10.0 * ((time.perf_counter() - self.t0) // 0.02)


def test_meter_reads_only_near_the_counters_next_update():
    from radt_ext.ops.measure import METERING, Clock, Metering, measure, update_period_s

    x = torch.randn(32, 32)
    counter = TickingCounter()
    measure(lambda: x @ x, Clock(CPU), counter, min_window_s=0.15)  # learns the update period
    assert update_period_s(counter) == pytest.approx(0.02, rel=0.2)
    windows = {}
    for name, metering in (("always", Metering(quiet_share=0.0)), ("quiet", METERING)):
        before = counter.reads
        windows[name] = measure(lambda: x @ x, Clock(CPU), counter, min_window_s=0.1, metering=metering)
        windows[name].reads = counter.reads - before
    for w in windows.values():  # a span of whole periods and the counter's power either way
        assert 0.09 <= w.window_s <= 0.2 and w.power_w == pytest.approx(500, rel=0.3), w
    rate = {name: w.reads / w.window_s for name, w in windows.items()}
    assert rate["quiet"] < 0.6 * rate["always"], rate  # no reads for 80 % of each period


def test_network_rounds_record_the_host():
    from radt_ext.ops.measure import Clock
    from radt_ext.ops.network import NetworkRounds, at_pace

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    rounds = NetworkRounds(model, (torch.randn(8, 16),), "training", Clock(CPU), None, 0.01)
    rounds.round()
    rounds.round()
    [fwd, bwd] = rounds.rows()
    assert fwd["host_ms"] > 0 and bwd["host_ms"] > 0
    d = rounds.details[0]
    for key in ("host_ms", "time_fast_ms", "before_dispatch_us", "host_cpu_share"):
        assert key in d and d[key] >= 0, key
    # energy at the fastest pace: the median of the rounds within 3 % of the fastest one's time
    assert at_pace([1.0, 1.02, 1.5, 1.01], [10.0, 14.0, 13.0, 12.0]) == 12.0
    assert at_pace([1.0, 1.5], [10.0, 9.0]) == 10.0
