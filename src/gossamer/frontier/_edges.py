"""The order a lowered page's recorded children are relaxed in: a pure rule shared by the
backends that keep a page's edges as they were offered (SQLite's `links` rows, Redis's `ch`).

A page may reach one child by several edges: a link and a canonical or redirect to the same
URL, the same link offered again, an edge-only record after an offer. The relaxation counts
for one edge a page and child, the smallest delta (a longer edge is never on a shortest
path), and takes the children smallest delta first, then in the order that delta was first
recorded for them. Relaxing the longer edge first would lower the child twice (to depth + 1,
then to depth + 0) and `depth_lowered` would count a step the other backends do not take;
`MemoryFrontier`, the reference, keeps its edges this way (docs/crawler/frontier.md, "Depth
is the shortest path")."""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter

__all__ = ["relax_order"]

_DELTA = itemgetter(1)


def relax_order(edges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """`edges` (child fp, delta), in the order they were recorded (repeats allowed), as the
    relaxation takes them: one a child, with its smallest delta; smallest delta first, then
    by when that delta was first recorded for the child."""
    best: dict[int, int] = {}
    for child, delta in sorted(edges, key=_DELTA):  # stable: recorded order within a delta
        best.setdefault(child, delta)
    return list(best.items())
