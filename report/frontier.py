"""The cost/accuracy value frontier (Pareto) and how it moved as models were released.

A model is on the frontier iff no other model costs at most as much and scores at least as well,
with one of the two strictly better. Models with identical cost and accuracy do not dominate each
other, so ties stay on together. A model without a known cost (or score) is not placed at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class Point:
    name: str
    cost: float | None
    accuracy: float | None
    released: date | None = None


def placeable(points: Sequence[Point]) -> list[Point]:
    return [p for p in points if p.cost is not None and p.accuracy is not None]


def dominates(a: Point, b: Point) -> bool:
    return a.cost <= b.cost and a.accuracy >= b.accuracy and (a.cost < b.cost or a.accuracy > b.accuracy)


def pareto(points: Sequence[Point]) -> list[Point]:
    """The non-dominated points, cheapest first (ties by name, for a stable order)."""
    pts = placeable(points)
    front = [p for p in pts if not any(dominates(q, p) for q in pts)]
    return sorted(front, key=lambda p: (p.cost, -p.accuracy, p.name))


@dataclass(frozen=True)
class Snapshot:
    when: date
    frontier: list[Point]
    new: list[str]
    """Frontier members released at `when` (why this snapshot exists)."""


def over_time(points: Sequence[Point]) -> list[Snapshot]:
    """The frontier as it stood on each release date at which it changed.

    At date d only models released on or before d count. Models without a release date are left out
    (they cannot be placed in time); the last snapshot can therefore differ from the full frontier.
    """
    pts = [p for p in placeable(points) if p.released is not None]
    out: list[Snapshot] = []
    prev: set[str] = set()
    for d in sorted({p.released for p in pts}):
        front = pareto([p for p in pts if p.released <= d])
        names = {p.name for p in front}
        if names != prev:
            out.append(Snapshot(when=d, frontier=front, new=sorted(p.name for p in front if p.released == d)))
            prev = names
    return out


def at_dates(points: Sequence[Point], dates: Sequence[date]) -> list[Snapshot]:
    """The frontier as it stood on each of the given dates (a paper's fixed snapshots: VRB's Fig. 7 right),
    counting the models released on or before it; a date before any release has no snapshot."""
    pts = [p for p in placeable(points) if p.released is not None]
    out: list[Snapshot] = []
    prev: set[str] = set()
    for d in sorted(dates):
        front = pareto([p for p in pts if p.released <= d])
        if front:
            out.append(Snapshot(when=d, frontier=front, new=sorted(p.name for p in front if p.name not in prev)))
            prev = {p.name for p in front}
    return out


def pick_snapshots(snaps: Sequence[Snapshot], k: int = 6) -> list[Snapshot]:
    """At most k snapshots for a plot, evenly spread, always the first and the last."""
    if len(snaps) <= k:
        return list(snaps)
    idx = sorted({round(i * (len(snaps) - 1) / (k - 1)) for i in range(k)})
    return [snaps[i] for i in idx]
