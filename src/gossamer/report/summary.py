"""A worker's statistics (`worker_summary`: its stats.json, or stats-<part>.json in a pool)
and a pool's (`merge_stats`: its workers' parts added up, with why the crawl ended from the
parent's view)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from ..crawldir import CrawlDir, stats_part
from ..engine.crawler import Crawler
from .crawl import end_reason, iso_date

__all__ = ["merge_stats", "worker_summary"]


def merge_stats(
    out: Path,
    workers: int,
    started: float,
    stopped: list[int],
    frontier: Any,
    max_pages: int | None,
    codes: Sequence[int],
    *,
    retired: Collection[str] = (),
) -> dict[str, Any]:
    """A pool's stats.json: its workers' parts (`stats-wK.json`: every worker that ran,
    `workers` of them, those a scale-down retired too) added up, with why the crawl ended
    from the parent's view: a signal it received, else a worker that failed (a non-zero
    exit: 74, killed, …; its part may be missing), else the shared frontier's counts. The
    `retired` workers (ids) were stopped by a scale-down: their own SIGTERM is not the
    crawl's end."""
    parts = []
    named = []
    for path in sorted(CrawlDir(out).worker_stats_files(), key=lambda p: _part_number(p.stem)):
        try:
            parts.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        named.append(stats_part(path))
    now = time.time()
    elapsed = max(now - started, 1e-9)
    signal_name = signal.Signals(stopped[0]).name if stopped else None
    failed = any(code not in (0, 130, 143) for code in codes) or len(parts) != workers
    if signal_name is None and not failed:  # a worker stopped by a signal sent to it alone
        signal_name = next(
            (
                p["ended"]
                for p, name in zip(parts, named, strict=True)
                if p.get("ended") in ("SIGINT", "SIGTERM") and name not in retired
            ),
            None,
        )
    ended = end_reason(
        signal_name=signal_name,
        failed=failed,
        queued=frontier.queued,
        leased=frontier.leased,
        done=frontier.done,
        max_pages=max_pages,
        otherwise="error",  # no signal, no failure, work left below the limit: a lost worker
    )
    merged: dict[str, Any] = {
        "ended": ended,
        "ended_at": iso_date(now),
        "finished": ended == "complete",
        "stopped_by": signal_name or ("error" if ended == "error" else None),
        "elapsed_s": round(elapsed, 3),
        "workers": workers,
        "pages_per_worker": [p.get("pages", 0) for p in parts],
    }
    if retired:
        merged["workers_retired"] = sorted(retired, key=_part_number)
    for key in ("pages", "requests", "bytes"):
        merged[key] = sum(int(p.get(key, 0)) for p in parts)
    merged["pages_per_s"] = round(merged["pages"] / elapsed, 1)
    for key in ("statuses", "robots_sitemap_statuses", "errors", "dropped", "not_html"):
        total: dict[str, int] = {}
        for p in parts:
            for k, v in p.get(key, {}).items():
                total[k] = total.get(k, 0) + int(v)
        merged[key] = dict(sorted(total.items()))
    merged["frontier"] = _as_dict(frontier)
    return merged


def worker_summary(
    crawler: Crawler, stats: Any, started: float, stopped: list[int], *, failed: bool = False
) -> dict[str, Any]:
    """A worker's statistics (stats.json). `ended` says why it ended (report.ENDED);
    `finished` is true when the crawl is complete (its frontier has nothing left), not after
    a --max-pages stop; `stopped_by` is the signal or "error" that stopped it, else None.
    `stats` None: the frontier could not be read (a cluster worker that gave up on Redis):
    its `frontier` is null, and it ended by its signal or an error."""
    c = crawler.counters
    now = time.time()
    elapsed = max(now - started, 1e-9)
    failed = failed or stats is None
    ended = end_reason(
        signal_name=signal.Signals(stopped[0]).name if stopped else None,
        failed=failed,
        queued=stats.queued if stats is not None else 0,
        leased=stats.leased if stats is not None else 0,
        done=stats.done if stats is not None else 0,
        max_pages=crawler.settings.max_pages,
    )
    return {
        "ended": ended,
        "ended_at": iso_date(now),
        "finished": ended == "complete",
        "stopped_by": signal.Signals(stopped[0]).name if stopped else ("error" if failed else None),
        "elapsed_s": round(elapsed, 3),
        "pages": c.pages,
        "requests": c.requests,
        "bytes": c.bytes,
        "pages_per_s": round(c.pages / elapsed, 1),
        "statuses": {str(k): v for k, v in sorted(c.statuses.items())},
        "robots_sitemap_statuses": dict(sorted(c.robots_sitemap_statuses.items())),
        "errors": dict(sorted(c.errors.items())),
        "dropped": dict(sorted(c.dropped.items())),
        "not_html": {
            "bodies": c.not_html,
            "bytes_saved": c.not_html_saved,
            "unknown_length": c.not_html_unknown,
        },
        "frontier": _as_dict(stats) if stats is not None else None,
    }


def _part_number(name: str) -> int:
    """`w12` (or `stats-w12`) -> 12: parts in worker order (w10 after w9)."""
    try:
        return int(name.rpartition("w")[2])
    except ValueError:
        return -1


def _as_dict(obj: Any) -> dict[str, Any]:
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields:
        return {k: getattr(obj, k) for k in fields}
    return dict(obj) if isinstance(obj, dict) else {"value": str(obj)}
