"""Experiment-only launcher: `gossamer worker` with the frontier's lease order changed.

    python -m gossamer.experiments._worker --backlog-lead 0 -- worker --redis URL --crawl ID …

Runs the unchanged `gossamer` command line (`gossamer.cli.main`) inside `lease_order(…)`, which
wraps the cluster worker's `open_frontier` so that the frontier it opens has `backlog_lead`
(and, if given, `max_backlog_lead`) set. Nothing else changes: same engine, same Redis
frontier, same scripts.

Why a launcher: the lease order among ready hosts — next fetch time minus a head start of
`backlog_lead` seconds per queued URL (`FrontierOptions`), so the largest sites go first — is
not a crawl setting (CrawlSettings has no such field and `RedisFrontier` takes no keyword
for it). The grid crawler's "Dynamic-Random" method (experiment `grid`) needs dynamic pull
*without* the largest-first order: `--backlog-lead 0` makes the order the hosts' ready times
(arrival order). The frontier reads the option on every `complete` call, so setting it on
the opened frontier is enough.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def lease_order(backlog_lead: float, max_backlog_lead: float | None = None) -> Iterator[None]:
    """While active, frontiers opened by the cluster worker get these lease-order options."""
    from ..cluster import worker

    changes: dict[str, float] = {"backlog_lead": backlog_lead}
    if max_backlog_lead is not None:
        changes["max_backlog_lead"] = max_backlog_lead
    opened: Callable[..., Any] = worker.open_frontier  # type: ignore[attr-defined]

    def open_frontier(*args: Any, **kwargs: Any) -> Any:
        frontier = opened(*args, **kwargs)
        frontier.options = dataclasses.replace(frontier.options, **changes)
        return frontier

    worker.open_frontier = open_frontier  # type: ignore[attr-defined]
    try:
        yield
    finally:
        worker.open_frontier = opened  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print(
            "usage: python -m gossamer.experiments._worker [options] -- GOSSAMER ARGS",
            file=sys.stderr,
        )
        return 2
    cut = args.index("--")
    p = argparse.ArgumentParser(prog="gossamer.experiments._worker")
    p.add_argument("--backlog-lead", type=float, required=True, metavar="S")
    p.add_argument("--max-backlog-lead", type=float, metavar="S")
    opts = p.parse_args(args[:cut])
    from ..cli import main as gossamer_main

    with lease_order(opts.backlog_lead, opts.max_backlog_lead):
        return gossamer_main(args[cut + 1 :])


if __name__ == "__main__":
    sys.exit(main())
