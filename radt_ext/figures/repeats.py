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


def t_quantile(df: float, level: float = LEVEL) -> float:
    """The two-sided Student-t quantile for `level` with `df` degrees of freedom."""
    from scipy.stats import t  # imported when repeats are there to summarise

    return float(t.ppf(0.5 + level / 2, df))


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
