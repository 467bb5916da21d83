"""What the graph tests share: `gossamer graph stats --json` run as a user runs it, and a
set-based graph that counts its `update` calls per page (for the event consumers' tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def graph_stats_json(source: Path) -> dict[str, Any]:
    """`gossamer graph stats SOURCE --json`, asserted to succeed: its object."""
    done = subprocess.run(
        [sys.executable, "-m", "gossamer", "graph", "stats", str(source), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


class CountingGraph:
    """A set-based graph that counts `update` calls per page (a second one is a double
    effect: the applier must never make it)."""

    def __init__(self) -> None:
        self.links: dict[str, set[str]] = {}
        self.updates: Counter[str] = Counter()

    def update(self, page: str, links: Iterable[str]) -> None:
        self.updates[page] += 1
        self.links.setdefault(page, set()).update(links)

    def crawled_edges(self) -> set[tuple[str, str]]:
        """Edges between crawled pages (those updated)."""
        return {(s, d) for s, ds in self.links.items() for d in ds if d in self.links}
