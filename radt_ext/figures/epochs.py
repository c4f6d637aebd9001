"""Per-epoch figures of a training run, from the epochs the workload's progress marks: how many, the
mean time and GPU energy of an epoch from the 2nd on (the first pays for warm-up, compilation and
caches, so radT's studies report the epochs after it), and the first epoch's beside them."""
from __future__ import annotations


def figures(summaries, epochs: list[tuple[float, float]], start: float, end: float) -> dict[str, float]:
    """`summary/*` epoch figures (names without the prefix) of the epochs within [start, end]."""
    inside = [(a, b) for a, b in epochs if a >= start - 1e-6 and b <= end + 1e-6]
    if not inside:
        return {}
    out = {"epochs": float(len(inside))}
    energies = [summaries.figures(a, b).get("gpu_total_energy_j") for a, b in inside]
    a, b = inside[0]
    out["first_epoch_time_s"] = b - a
    if energies[0] is not None:
        out["first_epoch_energy_j"] = energies[0]
    later = inside[1:]
    if later:
        out["epoch_time_s"] = sum(b - a for a, b in later) / len(later)
        joules = [j for j in energies[1:] if j is not None]
        if len(joules) == len(later):
            out["epoch_energy_j"] = sum(joules) / len(joules)
    return out
