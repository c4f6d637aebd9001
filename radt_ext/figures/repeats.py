"""Repeats of one setting: their mean, a 95 % Student-t interval, and whether a difference from a
baseline lies within the noise.

    est = estimate([412.0, 405.5, 409.1])        # Estimate(n=3, mean=408.9, half=8.1 …)
    noise(base, est)                              # True: the 95 % interval of the difference holds 0

A difference is within the noise when the 95 % interval of the difference of the two means holds
zero: Welch's interval when both sides have repeats; when only one side has, the other's single value
is taken to scatter as much as the repeated side (the interval of a new observation); with no repeat
on either side nothing can be said (None).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEVEL = 0.95


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return h


def _beta_inc(a: float, b: float, x: float, y: float) -> float:
    """The regularized incomplete beta function I_x(a, b), y = 1 - x given as precisely as x."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, y) / b


def t_quantile(df: float, level: float = LEVEL) -> float:
    """The two-sided Student-t quantile for `level` with `df` degrees of freedom (SciPy's t.ppf(0.5 + level / 2,
    df), computed here: importing SciPy took a second at a sweep's end). Beyond t the two tails hold
    I_x(df/2, 1/2) at x = df / (df + t²), which falls as t grows: t is found by bisection on log t."""
    if df > 1e5:  # the normal quantile and its first corrections (Cornish-Fisher): within 1e-15 here
        z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
        return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
    tail, lo, hi = 1.0 - level, math.log(1e-12), math.log(1e12)
    while hi - lo > 1e-15:
        mid = (lo + hi) / 2
        t2 = math.exp(2 * mid)
        if _beta_inc(df / 2, 0.5, df / (df + t2), t2 / (df + t2)) > tail:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


@dataclass(frozen=True)
class Estimate:
    n: int
    mean: float
    sd: float | None = None  # the sample standard deviation; None below two values
    half: float | None = None  # half-width of the 95 % interval of the mean; None below two values

    @property
    def low(self) -> float | None:
        return None if self.half is None else self.mean - self.half

    @property
    def high(self) -> float | None:
        return None if self.half is None else self.mean + self.half


def estimate(values) -> Estimate | None:
    """The mean of the finite values and, from two on, its 95 % Student-t interval; None for none."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return None
    mean = math.fsum(vals) / len(vals)
    if len(vals) < 2:
        return Estimate(1, mean)
    sd = statistics.stdev(vals)
    return Estimate(len(vals), mean, sd, t_quantile(len(vals) - 1) * sd / math.sqrt(len(vals)))


def difference(base: Estimate, other: Estimate) -> tuple[float, float | None]:
    """(other − base, half-width of its 95 % interval); the half-width is None when neither has repeats."""
    diff = other.mean - base.mean
    if base.sd is not None and other.sd is not None:
        va, vb = base.sd ** 2 / base.n, other.sd ** 2 / other.n
        if va + vb == 0:
            return diff, 0.0
        df = (va + vb) ** 2 / (va ** 2 / (base.n - 1) + vb ** 2 / (other.n - 1))  # Welch–Satterthwaite
        return diff, t_quantile(df) * math.sqrt(va + vb)
    repeated, single = (other, base) if other.sd is not None else (base, other) if base.sd is not None else (None, None)
    if repeated is None:
        return diff, None
    # the side without repeats scatters as the repeated side does
    return diff, t_quantile(repeated.n - 1) * repeated.sd * math.sqrt(1 / repeated.n + 1 / single.n)


def noise(base: Estimate | None, other: Estimate | None) -> bool | None:
    """True when other differs from base by no more than the noise; None when it cannot be told."""
    if base is None or other is None:
        return None
    diff, half = difference(base, other)
    return None if half is None else abs(diff) <= half
