"""The Pareto front of (time, energy) points: lower is better in both."""
from __future__ import annotations


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates, sorted by the first.

    A point is dominated when another is <= in both and < in at least one; equal points
    are all kept.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front: list[int] = []
    best_y = float("inf")
    for i in order:
        x, y = points[i]
        if y < best_y:
            front.append(i)
            best_y = y
        elif y == best_y and front and tuple(points[front[-1]]) == (x, y):
            front.append(i)
    return front
