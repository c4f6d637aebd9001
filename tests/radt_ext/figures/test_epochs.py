"""Epoch figures: the mean over epochs from the 2nd, the first epoch's beside them, each epoch's GPU
energy the counter's rise over its span."""
import pytest

from radt_ext.figures.epochs import figures
from radt_ext.figures.summaries import Summaries


def _summaries():
    s = Summaries()
    for i in range(0, 201):  # 100 W for 20 s: the counter rises 10 J every 0.1 s
        t = 1000.0 + i * 0.1
        s.add_all(t, (("gpu0_energy_j", 10.0 * i), ("gpu0_power_w", 100.0)))
    return s


def test_mean_from_the_second_epoch_and_the_first_beside_it():
    out = figures(_summaries(), [(1000.0, 1006.0), (1006.0, 1010.0), (1010.0, 1016.0)], 1000.0, 1020.0)
    assert out["epochs"] == 3
    assert out["first_epoch_time_s"] == pytest.approx(6.0)
    assert out["epoch_time_s"] == pytest.approx(5.0)
    assert out["first_epoch_energy_j"] == pytest.approx(600.0)
    assert out["epoch_energy_j"] == pytest.approx(500.0)


def test_one_epoch_has_no_mean_and_epochs_outside_the_run_do_not_count():
    out = figures(_summaries(), [(1001.0, 1004.0), (1030.0, 1040.0)], 1000.0, 1020.0)
    assert out == {"epochs": 1.0, "first_epoch_time_s": pytest.approx(3.0), "first_epoch_energy_j": pytest.approx(300.0)}
    assert figures(_summaries(), [], 1000.0, 1020.0) == {}
