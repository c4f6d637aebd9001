"""A setting's repeats: mean, 95 % Student-t interval, and a difference within the noise, checked against
SciPy's own t-tests."""
from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from radt_ext.figures.repeats import difference, estimate, noise


def test_the_interval_of_a_mean_is_scipys():
    values = [412.0, 405.5, 409.1, 399.8]
    est = estimate(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=statistics.mean(values), scale=stats.sem(values))
    assert est.n == 4 and est.mean == pytest.approx(statistics.mean(values))
    assert (est.low, est.high) == (pytest.approx(low), pytest.approx(high))


def test_one_value_has_no_interval_and_missing_values_are_left_out():
    assert estimate([3.0]).half is None and estimate([3.0]).mean == 3.0
    assert estimate([None, float("nan"), 2.0, 4.0]).n == 2
    assert estimate([]) is None and estimate([None]) is None


def test_welchs_interval_when_both_sides_have_repeats():
    a, b = [100.0, 102.0, 98.0, 101.0], [104.0, 107.0, 103.0]
    diff, half = difference(estimate(a), estimate(b))
    low, high = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert (diff - half, diff + half) == (pytest.approx(low), pytest.approx(high))
    assert noise(estimate(a), estimate(b)) is bool(low <= 0 <= high) is False  # 4.4 apart: beyond the noise


def test_a_single_value_against_repeats_scatters_as_they_do():
    a, b = [100.0, 102.0, 98.0], [101.0]
    diff, half = difference(estimate(a), estimate(b))
    sd = statistics.stdev(a)
    assert diff == pytest.approx(1.0)
    assert half == pytest.approx(stats.t.ppf(0.975, 2) * sd * math.sqrt(1 / 3 + 1))
    assert noise(estimate(a), estimate(b)) is True
    assert noise(estimate(a), estimate([150.0])) is False
    assert difference(estimate(b), estimate(a))[1] == pytest.approx(half)  # either side may be the single one


def test_without_repeats_nothing_can_be_said():
    assert noise(estimate([1.0]), estimate([2.0])) is None
    assert noise(None, estimate([1.0, 2.0])) is None
    assert noise(estimate([5.0, 5.0]), estimate([5.0, 5.0])) is True  # no scatter, no difference
    assert noise(estimate([5.0, 5.0]), estimate([6.0, 6.0])) is False


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_the_t_quantile_is_scipys(level):
    """Computed without SciPy (its import took a second at a sweep's end): the same quantile for whole and
    fractional degrees of freedom (Welch's), few to very many."""
    from radt_ext.figures.repeats import t_quantile

    for df in (1, 1.3, 2, 2.5, 3, 4, 7, 12.8, 29.7, 100, 1e3, 1e4, 99_999, 1e5 + 1, 1e6, 1e9):
        assert t_quantile(df, level) == pytest.approx(stats.t.ppf(0.5 + level / 2, df), rel=1e-9)


def test_repeats_are_summarised_without_importing_scipy():
    import subprocess
    import sys

    code = ("import sys\nfrom radt_ext.figures.repeats import estimate, noise\n"
            "assert noise(estimate([1.0, 2.0, 3.0]), estimate([2.0, 2.5])) is True\n"
            "print('scipy' in sys.modules)\n")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
