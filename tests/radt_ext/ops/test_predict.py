"""The predictor on a slice of the real H100/H200 dataset: fit, move a profile, validate, rank."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from radt_ext.errors import UsageError
from radt_ext.ops import predict
from radt_ext.ops.gpus import lookup


def _profile(data, gpu, model="vit", precision="bf16", mode="training"):
    rows = data[(data.gpu == gpu) & (data.model == model) & (data.precision == precision) & (data["mode"] == mode)]
    assert not rows.empty
    return rows


def test_slice_is_real_profiles_from_two_gpus(data):
    assert set(data.gpu) == {"H100", "H200"}
    assert set(data.model) == {"mlp", "small_cnn", "dlrm", "vit"}
    assert (data[data.op == "network"].time_ms > 0).all()


def test_move_a_profile_to_the_other_gpu(data, models):
    rows = _profile(data, "H100")
    same = predict.predict(models, rows, "H100", "H100")
    assert same.measured and same.time_ms == pytest.approx(rows[rows.op == "network"].time_ms.sum())
    moved = predict.predict(models, rows, "H100", "H200")
    assert not moved.measured and moved.gpu == "H200"
    assert math.isfinite(moved.time_ms) and moved.time_ms > 0
    assert math.isfinite(moved.energy_mj) and moved.energy_mj > 0
    # the operations' ratios are what moves the network: no ratio is wild
    ops = predict.operation_rows(rows)
    ratios = models.time_ratio(ops, lookup("H100"), lookup("H200"))
    assert np.all((ratios > 0.2) & (ratios < 5))


def test_leave_one_model_out_reports_every_case(data):
    res = predict.validate(data)
    # 4 models x 2 precisions x 2 modes at one batch size, each moved both ways
    assert len(res) == 4 * 2 * 2 * 2
    assert set(res.source) == {"H100", "H200"} and (res.source != res.target).all()
    s = predict.summary(res)
    for m in ("time", "energy"):
        assert 0 <= s[m]["median_error"] <= s[m]["worst_error"]
        assert s[m]["worst_case"]
    for by in predict.METRICS:
        b = s["best_gpu"][by]
        assert b["cases"] == len(res) and 0 <= b["right"] <= b["cases"]


def test_rank_marks_ties_within_the_tolerance():
    preds = [predict.Prediction("A", 10.0, 5.0), predict.Prediction("B", 10.5, 4.0), predict.Prediction("C", 20.0, 1.0)]
    ranked = predict.rank(preds, "time", 0.1)
    assert [(r, p.gpu, note) for r, p, note in ranked] == [(1, "A", "tie"), (1, "B", "tie"), (3, "C", "")]
    assert [p.gpu for _, p, _ in predict.rank(preds, "energy", 0.1)] == ["C", "B", "A"]
    assert [p.gpu for _, p, _ in predict.rank(preds, "edp", 0.1)] == ["C", "B", "A"]
    with pytest.raises(UsageError, match="unknown ranking"):
        predict.rank(preds, "cost", 0.1)


def test_best_gpu_scoring():
    res = pd.DataFrame([
        # source measured 10; target predicted 8, measured 8: right
        dict(source_time_ms=10, pred_time_ms=8, time_ms=8, source_energy_mj=1, pred_energy_mj=1, energy_mj=1),
        # predicted faster, measured slower by far: wrong
        dict(source_time_ms=10, pred_time_ms=8, time_ms=13, source_energy_mj=1, pred_energy_mj=1, energy_mj=1),
        # predicted a tie, measured much faster: wrong
        dict(source_time_ms=10, pred_time_ms=9.9, time_ms=5, source_energy_mj=1, pred_energy_mj=1, energy_mj=1),
        # measured within the tolerance: either answer is right
        dict(source_time_ms=10, pred_time_ms=5, time_ms=10.2, source_energy_mj=1, pred_energy_mj=1, energy_mj=1),
    ])
    acc = predict.best_gpu_accuracy(res, "time", 0.05)
    assert acc["right"] == 2 and acc["predicted_ties"] == 1 and acc["cases"] == 4


def test_unknown_gpu_is_one_line(data, models):
    with pytest.raises(UsageError, match=r"unknown GPU 'cpu': no specification") as exc:
        predict.predict(models, _profile(data, "H100"), "cpu", "H200")
    assert "\n" not in str(exc.value)
    with pytest.raises(UsageError, match="at least two GPUs"):
        predict.validate(data[data.gpu == "H100"])


def _op(time_ms, flops, nbytes, precision="bf16"):
    return {"op": "x", "phase": "forward", "precision": precision, "time_ms": time_ms, "flops": flops,
            "bytes": nbytes, "energy_mj": time_ms * 500, "count": 1}


def test_roofline_ratio_moves_only_the_bound_share_of_an_operation():
    h100, h200 = lookup("H100"), lookup("H200")
    rows = pd.DataFrame([
        _op(1.0, 0, 3.352e9),  # 1 ms moving 3.35 GB: all of it at the H100's bandwidth
        _op(1.0, 0, 1.676e9),  # half of its time at the bandwidth, half something else
        _op(1.0, 989.4e9, 1e6),  # all of it at the bf16 peak, which both GPUs share
        _op(1.0, 1e3, 1e3),  # a launch: neither bytes nor FLOPs explain it
    ])
    r = predict.roofline_ratio(rows, h100, h200)
    assert r[0] == pytest.approx(3352 / 4800)
    assert r[1] == pytest.approx(0.5 + 0.5 * 3352 / 4800)
    assert r[2] == pytest.approx(1.0) and r[3] == pytest.approx(1.0, abs=1e-6)
    back = predict.roofline_ratio(rows.assign(time_ms=rows.time_ms * r), h200, h100)
    assert back[0] == pytest.approx(4800 / 3352)  # the same operation moved back


def test_roofline_fits_one_power_factor_per_pair_of_gpus(data):
    models = predict.fit(data)
    assert models.method == "roofline" and not models.time
    up, down = models.power[("H100", "H200")], models.power[("H200", "H100")]
    assert 0.8 < up < 1.0 < down < 1.25  # the H200 draws a little less for the same operation
    fitted = predict.fit(data, method="fitted")
    assert fitted.method == "fitted" and "*" in fitted.time
    with pytest.raises(UsageError, match="unknown prediction method 'magic'"):
        predict.fit(data, method="magic")


def test_a_prediction_carries_the_profiles_spread_and_the_predictors_error(data, models):
    rows = _profile(data, "H100")
    spread = predict.spread(rows)
    net = rows[rows.op == "network"]
    assert spread == pytest.approx((net.spread * net.time_ms).sum() / net.time_ms.sum())
    moved = predict.predict(models, rows, "H100", "H200", error=(0.05, 0.08))
    lo, hi = moved.interval("time")
    assert lo == pytest.approx(moved.time_ms * (1 - spread - 0.05))
    assert hi == pytest.approx(moved.time_ms * (1 + spread + 0.05))
    e_lo, e_hi = moved.interval("energy")
    assert e_hi == pytest.approx(moved.energy_mj * (1 + spread + 0.08))
    assert moved.interval("edp") == pytest.approx((lo * e_lo, hi * e_hi))
    measured = predict.predict(models, rows, "H100", "H100", error=(0.05, 0.08))
    assert measured.measured and measured.interval("time")[1] == pytest.approx(measured.time_ms * (1 + spread))
    # with the rounds' energy spread recorded, the energy interval is that one's
    noisy = rows.copy()
    noisy.loc[noisy.op == "network", "energy_spread"] = 0.2
    e = predict.predict(models, noisy, "H100", "H200", error=(0.05, 0.08))
    assert e.energy_spread == pytest.approx(0.2)
    assert e.interval("energy")[1] == pytest.approx(e.energy_mj * (1 + 0.2 + 0.08))
    assert e.interval("time") == pytest.approx(moved.interval("time"))
    # a profile older than the spread column: the predictor's error alone
    old = rows.assign(spread=float("nan"))
    assert predict.predict(models, old, "H100", "H200", error=(0.05, 0.08)).interval("time")[0] == pytest.approx(
        moved.time_ms * 0.95)


def test_the_network_time_beyond_its_operations_carries_over(data):
    rows = _profile(data, "H100", mode="inference")
    ops = predict.operation_rows(rows)
    summed = (ops.time_ms * ops["count"]).sum()
    models = predict.fit(data)
    on_h200 = (ops.time_ms * ops["count"] * models.time_ratio(ops, lookup("H100"), lookup("H200"))).sum()
    gap = rows.copy()
    gap.loc[gap.op == "network", "time_ms"] = summed + 5.0  # 5 ms of host time the operations do not have
    moved = predict.predict(models, gap, "H100", "H200")
    assert moved.time_ms == pytest.approx(on_h200 + 5.0)
    assert on_h200 < summed  # the operations themselves do get faster


def test_leave_one_family_out(data):
    assert predict.family("resnet18") == predict.family("resnet50") == "resnet" and predict.family("vit") == "vit"
    res = predict.validate(data, hold_out="family")
    assert set(res.held_out) == {"mlp", "small_cnn", "dlrm", "vit"} and len(res) == 32
    assert res.source_spread.notna().all() and res.target_spread.notna().all()
    with pytest.raises(UsageError, match="unknown hold-out 'layer'"):
        predict.validate(data, hold_out="layer")
