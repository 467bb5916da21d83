"""`gossamer report DIR`: what a crawl did, from its files alone.

A crawl may have been run several times (`--resume` after a stop or a kill): the totals are
over every run, computed from the files every run appends to — the crawl log (one line per
fetch) and the graph parts — since a killed run writes no statistics and `stats.json` holds the
last run's alone. `runs.jsonl` (written by `run_crawl`: a line when a run starts, one when it
ends) tells the runs apart. See docs/crawler/outputs.md ("Report").
"""

from __future__ import annotations

import json
import logging
import sys
import time
from array import array
from bisect import bisect_right
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import xxhash

from ..crawldir import (
    GRAPH_EDGE_FILES,
    GRAPH_NODE_FILES,
    MANIFEST,
    CrawlDir,
    flock_held,
    graph_part,
)
from ..engine.crawler import RETRY_STATUSES
from ..sinks import append_run_record, read_run_records, read_stats
from .progress import not_html_line

_log = logging.getLogger(__name__)

# ------------------------------------------------------------------ why a crawl ended

#: What ended a run: `stats.json`'s `ended` (docs/crawler/outputs.md, "Statistics").
#: "complete": the frontier has nothing left; "max-pages": the page limit was reached (a resume
#: with a higher --max-pages goes on); "SIGINT", "SIGTERM": stopped by that signal (resumable);
#: "error": the outputs could not be written or a worker process failed (resumable once fixed);
#: "stopped": a cluster worker asked to stop without a signal (`gossamer stop`, `workers
#: --scale` down) while the crawl had work left.
ENDED = ("complete", "max-pages", "SIGINT", "SIGTERM", "error", "stopped")

_ENDED_TEXT = {
    "complete": "complete: frontier exhausted",
    "max-pages": "max-pages: page limit reached",
    "SIGINT": "SIGINT: interrupted",
    "SIGTERM": "SIGTERM: terminated",
    "error": "error",
    "stopped": "stopped: asked to stop",
}


def end_reason(
    *,
    signal_name: str | None,
    failed: bool,
    queued: int,
    leased: int,
    done: int,
    max_pages: int | None,
    otherwise: str = "stopped",
) -> str:
    """Why a run ended (one of `ENDED`), from what stopped it and its frontier's counts at
    the end: a signal first, then a failure, then the frontier (nothing queued or leased:
    complete, even when the page limit was reached with it), else `otherwise` (the crawl
    ended with work left and no limit reached: a cluster worker asked to stop)."""
    if signal_name is not None:
        return signal_name
    if failed:
        return "error"
    if queued == 0 and leased == 0:
        return "complete"
    if max_pages is not None and done >= max_pages:
        return "max-pages"
    return otherwise


def stats_end_reason(stats: dict[str, Any] | None, max_pages: int | None) -> str | None:
    """The `ended` of a run's statistics; for statistics written before that key existed,
    derived from `finished`, `stopped_by` and the frontier's counts. None: unknown."""
    if not stats:
        return None
    ended = stats.get("ended")
    if ended in ENDED:
        return str(ended)
    stopped_by = stats.get("stopped_by")
    if stopped_by in ("SIGINT", "SIGTERM", "error"):
        return str(stopped_by)
    if not stats.get("finished"):
        return None
    # an old `finished: true` meant the run ended by itself: its frontier was exhausted, or
    # the page limit was reached with URLs left
    frontier = stats.get("frontier") or {}
    queued = int(frontier.get("queued") or 0)
    leased = int(frontier.get("leased") or 0)
    done = int(frontier.get("done") or 0)
    return end_reason(
        signal_name=None,
        failed=False,
        queued=queued,
        leased=leased,
        done=done,
        max_pages=max_pages,
        otherwise="max-pages" if max_pages is not None else "complete",
    )


def iso_date(ts: float | None) -> str | None:
    """`ts` (Unix time) as an ISO 8601 date in local time with its UTC offset, to the second
    (`2026-11-25T22:14:03+00:00`); None for None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def human_date(ts: float | None) -> str:
    """`ts` (Unix time) as a local date a person reads: `2026-11-25 22:14:03 UTC`."""
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ts))


# ------------------------------------------------------------------ the run history


def start_run(
    out: Path, *, resume: bool, workers: int, changed: dict[str, Any] | None = None
) -> tuple[int, float]:
    """Append the start of a run to `out/runs.jsonl`: (its number, from 1; its start time).
    `changed`: the settings a resumed run took from its command line (docs/crawler.md,
    "Resuming"), recorded with their new values."""
    path = CrawlDir(out).runs
    number = 1 + sum(1 for r in read_run_records(path) if r.get("event") == "start")
    started = time.time()
    record: dict[str, Any] = {
        "event": "start",
        "run": number,
        "time": started,
        "resume": resume,
        "workers": workers,
    }
    if changed:
        record["changed"] = changed
    append_run_record(path, record)
    return number, started


def end_run(out: Path, number: int, started: float, exit_code: int) -> None:
    """Append the end of run `number` to `out/runs.jsonl`, with the statistics it wrote
    (`stats.json`, when it is newer than the run's start: a run that failed to write it
    leaves the previous run's)."""
    stats = None
    crawl = CrawlDir(out)
    path = crawl.stats
    try:
        if path.stat().st_mtime >= started:
            stats = read_stats(path)
    except (OSError, ValueError):
        pass
    append_run_record(
        crawl.runs,
        {"event": "end", "run": number, "time": time.time(), "exit": exit_code, "stats": stats},
    )


#: what a resume with a run-time fix does for a crawl's failed URLs (runner/resume.py RETRY_ON)
FIXES_HINT = (
    "--resume with a run-time fix (--allow-private, --proxy, --resolve, time-outs) retries "
    "the URLs that failed for what it fixes"
)


def fetched_nothing(out: Path) -> bool:
    """Whether the crawl in `out` ended having fetched no page: it has a run history, every
    run in it ended (no crawler runs in it, none was killed) and wrote statistics counting no
    page, and its frontier's count of pages done (every run's) is 0. Such a crawl — every seed
    refused, unreachable or held back by its robots.txt — leaves a directory a new crawl may
    start afresh in (runner/run.py `prepare_directory`)."""
    records = read_run_records(CrawlDir(out).runs)
    started = {r.get("run") for r in records if r.get("event") == "start"}
    ends = [r for r in records if r.get("event") == "end"]
    if not started or not records or records[-1].get("event") != "end":
        return False
    if started - {r.get("run") for r in ends}:
        return False
    for end in ends:
        stats = end.get("stats")
        if not isinstance(stats, dict) or stats.get("pages") != 0:
            return False
    frontier = ends[-1]["stats"].get("frontier")
    return isinstance(frontier, dict) and frontier.get("done") == 0


# ------------------------------------------------------------------ reading a crawl


def crawl_report(out: Path) -> dict[str, Any]:
    """Statistics of the crawl in `out` (raises ValueError when it is not a crawl dir)."""
    return read_crawl(out)[0]


def read_crawl(out: Path) -> tuple[dict[str, Any], bytes]:
    """`crawl_report(out)`, and the 128-bit hashes of the page URLs its crawl log has fetched
    (16 bytes each, repeats included): what a cluster's report counts distinct pages over
    every worker with (report/cluster.py)."""
    crawl = CrawlDir(out)
    manifest = crawl.manifest
    if not manifest.is_file():
        raise ValueError(f"{out} is not a crawl directory (no {MANIFEST})")
    report: dict[str, Any] = {"directory": str(out)}
    report["settings"] = json.loads(manifest.read_text())
    if isinstance(report["settings"].get("proxy"), str):  # crawl.json keeps its password
        from ..fetch.options import redact_proxy

        report["settings"]["proxy"] = redact_proxy(report["settings"]["proxy"])
    stats = crawl.stats
    last_stats = json.loads(stats.read_text()) if stats.is_file() else None
    report["stats"] = last_stats  # the last run's own statistics, as it wrote them
    runs = _runs(read_run_records(crawl.runs))
    log = _scan_log(crawl.crawl_log, runs)
    per_run = log["per_run"]
    if not runs or log["before_history"]:
        # a crawl made before run histories were kept, a cluster worker's directory (written
        # by `run_engine` alone), or runs before the history began: one unrecorded run
        worker = _cluster_worker(out) if not runs else None
        runs.insert(0, _unrecorded_run(log, last_stats if worker else None, worker))
        per_run = [log["before_history"] or (0, 0, None), *per_run]
    _finish_runs(runs, per_run, report["settings"].get("max_pages"))
    report["runs"] = runs
    report["fetched_nothing"] = fetched_nothing(out)
    last = runs[-1] if runs else None
    # why the crawl stopped (its last run), and when: stats.json's `ended` and `ended_at`
    report["end_reason"] = last["end_reason"] if last else None
    report["ended_at"] = last["ended_iso"] if last else None
    if last_stats is not None and isinstance(last_stats.get("frontier"), dict):
        # the report's copy of stats.json: the frontier's next ready time as a date too
        frontier = last_stats["frontier"]
        if isinstance(frontier.get("next_ready_at"), int | float):
            frontier["next_ready_at_iso"] = iso_date(frontier["next_ready_at"])
    report["totals"] = _totals(runs, log)
    report["log"] = {
        "lines": log["lines"],
        "outcomes": dict(log["outcomes"].most_common()),
        "statuses": dict(log["statuses"].most_common()),
    }
    report["duplicates"] = dict(log["dups"].most_common())
    report["near_duplicates"] = near_duplicate_clusters(log["near_of"])
    warc_dir = crawl.warc_dir
    warcs = sorted(warc_dir.glob("*.warc.gz")) if warc_dir.is_dir() else []
    report["warc"] = {"files": len(warcs), "bytes": sum(p.stat().st_size for p in warcs)}
    report["graph"] = graph_counts(crawl.graph_dir)
    report["graph_stats"] = live_graph_stats(crawl.live_graph_stats)
    return report, log["page_hashes"]


#: URLs a near-duplicate cluster of the report names besides its representative
CLUSTER_EXAMPLES = 5


def near_duplicate_clusters(near_of: dict[str, str]) -> list[dict[str, Any]]:
    """The crawl log's near-duplicate marks (page URL -> the URL of the page crawled before
    that it is near) as clusters, largest first: `size` (pages, the representative
    included), `representative` (the page the others were found near: the first crawled)
    and up to CLUSTER_EXAMPLES `examples` of the others, in log order."""
    members: dict[str, list[str]] = {}
    for url, like in near_of.items():
        seen = {url}
        while like in near_of and like not in seen:  # (a representative is never marked
            seen.add(like)  # near, but two workers racing may chain)
            like = near_of[like]
        if url != like:
            members.setdefault(like, []).append(url)
    ranked = sorted(members.items(), key=lambda item: -len(item[1]))
    return [
        {"size": len(urls) + 1, "representative": rep, "examples": urls[:CLUSTER_EXAMPLES]}
        for rep, urls in ranked
    ]


def live_graph_finishing(out: Path) -> bool:
    """Whether the live graph's final statistics of the crawl in `out` are being computed: its
    last run has ended (runs.jsonl) and the live graph's process still holds
    `graph/follow.lock`. (A crawl that runs holds it too, and a killed crawl's child exits
    without writing: neither is waited for.)"""
    runs = read_run_records(CrawlDir(out).runs)
    return bool(runs) and runs[-1].get("event") == "end" and live_graph_locked(out)


def live_graph_locked(out: Path) -> bool:
    """Whether a live graph's process (a running crawl's child, or the fork writing an ended
    crawl's final statistics) holds `out/graph/follow.lock`."""
    return flock_held(CrawlDir(out).follow_lock)


def wait_live_graph(out: Path, timeout: float) -> bool:
    """Wait (at most `timeout` s) until the live graph's final statistics of the ended crawl
    in `out` are written, when they are being computed; whether they are (or were never
    being computed)."""
    deadline = time.monotonic() + timeout
    while live_graph_finishing(out):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def live_graph_stats(path: Path) -> dict[str, Any] | None:
    """The live graph's statistics (docs/graph.md, "The live graph"), None when the crawl
    kept none (or the file cannot be read)."""
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stats if isinstance(stats, dict) else None


def graph_stats_line(g: dict[str, Any]) -> str:
    """One line of the live graph's main figures (the report, `gossamer status`)."""

    def num(key: str) -> str:
        value = g.get(key)
        if value is None:
            return "-"
        if isinstance(value, float):
            if (g.get("exact") or {}).get(key):
                return f"{value:.2f}"
            error = (g.get("error") or {}).get(f"{key}_standard_error")
            return f"{value:.2f} ± {error:.2f}" if isinstance(error, float) else f"~{value:.2f}"
        return f"{value:,}"

    diameter = num("diameter") if g.get("diameter") is not None else (
        f"≥{num('diameter_lower_bound')}" if g.get("diameter_lower_bound") is not None else "-"
    )  # fmt: skip
    state = "final" if g.get("final") else f"live, {g.get('updated_at', '?')}"
    return (
        f"{num('nodes')} nodes, {num('edges')} edges, {num('pending')} pending; "
        f"{num('scc_count')} SCCs (largest {num('largest_scc')}), {num('dangling')} dangling; "
        f"average distance {num('average_distance')}, diameter {diameter} ({state})"
    )


def _runs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per recorded run, in start order, with its end record's facts if any."""
    ends = {r.get("run"): r for r in records if r.get("event") == "end"}
    runs: list[dict[str, Any]] = []
    for r in records:
        if r.get("event") != "start" or not isinstance(r.get("time"), int | float):
            continue
        end = ends.get(r.get("run"))
        runs.append(
            {
                "run": r.get("run"),
                "started": float(r["time"]),
                "resume": bool(r.get("resume")),
                "workers": r.get("workers"),
                "changed": r.get("changed") or {},
                "ended": float(end["time"]) if end else None,
                "exit": end.get("exit") if end else None,
                "stats": end.get("stats") if end else None,
                "recorded": True,
                "cluster_worker": None,
            }
        )
    runs.sort(key=lambda run: run["started"])
    return runs


def _cluster_worker(out: Path) -> str | None:
    """The worker id of a cluster worker's directory (`worker.json`), else None. Such a
    directory is one run by construction: worker ids are never reused (docs/cluster.md)."""
    try:
        worker = json.loads(CrawlDir(out).worker_record.read_text()).get("worker")
    except (OSError, ValueError, AttributeError):
        return None
    return str(worker) if worker is not None else None


def _unrecorded_run(
    log: dict[str, Any], stats: dict[str, Any] | None, worker: str | None
) -> dict[str, Any]:
    """The run(s) a crawl log holds lines of but the run history does not: those of a crawl
    begun before histories were kept (run 0: how many, and how long each, is unknown: its
    stats.json is the last run's alone), or a cluster worker's one run (run 1: its
    stats.json is that run's; a worker's directory is written by `run_engine` alone, with
    no run history, and its worker id is never reused)."""
    return {
        "run": 0 if worker is None else 1,
        "cluster_worker": worker,
        "started": log["first_time"],
        "resume": None,
        "workers": (stats or {}).get("workers"),
        "changed": {},
        "ended": None,
        "exit": None,
        "stats": stats,
        "recorded": False,
    }


def _scan_log(path: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One pass over the crawl log: the totals, and per run (by the time of each line against
    the runs' start times) its lines, page fetches and last activity."""
    starts = [run["started"] for run in runs]
    n = len(runs) + 1  # bucket 0: lines before the first recorded start
    per_lines, per_pages = [0] * n, [0] * n
    per_last: list[float | None] = [None] * n
    outcomes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    pages = bytearray()  # 128-bit hashes of the page URLs fetched, for the distinct count
    near_of: dict[str, str] = {}  # a near-duplicate page's URL -> the URL it is near
    dups: Counter[str] = Counter()  # page fetches by their duplicate status
    lines = fetches = body_bytes = 0
    first_time: float | None = None
    if path.is_file():
        with path.open("rb") as f:
            for raw in f:
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue  # a torn line of a killed run
                if not isinstance(rec, dict):
                    continue
                lines += 1
                t = _timestamp(rec.get("time"))
                bucket = bisect_right(starts, t) if t is not None else n - 1
                per_lines[bucket] += 1
                if t is not None:
                    first_time = t if first_time is None else min(first_time, t)
                    end = t + float(rec.get("duration") or 0.0)
                    last = per_last[bucket]
                    per_last[bucket] = end if last is None else max(last, end)
                body_bytes += int(rec.get("bytes") or 0)
                if count_log_record(rec, outcomes, statuses, errors):
                    fetches += 1
                    per_pages[bucket] += 1
                    url = str(rec.get("url"))
                    pages += xxhash.xxh3_128_intdigest(url.encode()).to_bytes(16, "little")
                    dup = rec.get("dup")
                    if dup is not None:
                        dups[str(dup)] += 1
                        if dup == "near" and isinstance(rec.get("dup_of"), str):
                            near_of[url] = rec["dup_of"]
    return {
        "lines": lines,
        "fetches": fetches,
        "pages": _distinct(bytes(pages), 16),
        "page_hashes": bytes(pages),
        "bytes": body_bytes,
        "outcomes": outcomes,
        "statuses": statuses,
        "errors": errors,
        "first_time": first_time,
        "near_of": near_of,
        "dups": dups,
        "per_run": list(zip(per_lines[1:], per_pages[1:], per_last[1:], strict=True)),
        "before_history": (per_lines[0], per_pages[0], per_last[0]) if per_lines[0] else None,
    }


_UNKNOWN = "fetch/error/unknown"


def count_log_record(
    rec: dict[str, Any],
    outcomes: Counter[str],
    statuses: Counter[str],
    errors: Counter[str],
) -> bool:
    """Count one crawl log record's outcome, status and error (errors as the crawler counts
    them: Crawler._record, _record_aux); whether it is a page fetch (a page's final answer,
    not a robots.txt or a status the crawler retries). The report and the dashboard's tail
    of a running crawl's log count alike."""
    outcome, status = str(rec.get("outcome")), rec.get("status")
    outcomes[outcome] += 1
    statuses[str(status)] += 1
    is_page = rec.get("depth") is not None
    if status is None:
        errors[outcome if is_page else f"{outcome}/{rec.get('error') or _UNKNOWN}"] += 1
    elif is_page and rec.get("error"):
        errors[str(rec["error"])] += 1
    return is_page and status is not None and status not in RETRY_STATUSES


def _timestamp(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


def _finish_runs(
    runs: list[dict[str, Any]],
    per_run: list[tuple[int, int, float | None]],
    max_pages: int | None,
) -> None:
    """Each run's log facts, duration (from its end record, else estimated from its last
    logged fetch), how it ended (`end_reason`: one of ENDED or None, `ended_by`: in words)
    and its times as ISO 8601 dates (`started_iso`, `ended_iso`)."""
    for run, (lines, fetches, last) in zip(runs, per_run, strict=True):
        run["log_lines"], run["fetches"] = lines, fetches
        stats = run["stats"] or {}
        if not run["recorded"] and "elapsed_s" in stats:
            run["duration_s"], run["duration_estimated"] = float(stats["elapsed_s"]), False
        elif run["ended"] is not None:
            run["duration_s"], run["duration_estimated"] = run["ended"] - run["started"], False
        else:
            start = run["started"]
            span = (last - start) if last is not None and start is not None else 0.0
            run["duration_s"], run["duration_estimated"] = max(span, 0.0), True
        run["duration_s"] = round(run["duration_s"], 3)
        run["end_reason"] = stats_end_reason(run["stats"], max_pages)
        run["ended_by"] = _ended_by(run)
        run["started_iso"] = iso_date(run["started"])
        ended = run["ended"]
        if ended is None and not run["recorded"] and "ended_at" in stats:
            ended = _timestamp(stats["ended_at"])  # a cluster worker's: its stats.json's
        run["ended_iso"] = iso_date(ended)


def _ended_by(run: dict[str, Any]) -> str:
    stats = run["stats"] or {}
    if run["recorded"] and run["ended"] is None:
        return "killed or crashed (no end recorded)"
    if not run["recorded"] and not stats:
        if run["cluster_worker"]:
            return "killed or crashed (no statistics)"
        return "unrecorded (no run history)"
    reason = run["end_reason"]
    if reason == "error" and run["exit"] is not None:
        return f"error (exit {run['exit']})"
    if reason is not None:
        return _ENDED_TEXT[reason]
    return f"exit {run['exit']}" if run["exit"] is not None else "ended (reason unknown)"


def _totals(runs: list[dict[str, Any]], log: dict[str, Any]) -> dict[str, Any]:
    with_stats = [run["stats"] for run in runs if run["stats"]]
    dropped: Counter[str] = Counter()
    not_html: Counter[str] = Counter()
    for stats in with_stats:
        dropped.update({str(k): int(v) for k, v in (stats.get("dropped") or {}).items()})
        not_html.update({str(k): int(v) for k, v in (stats.get("not_html") or {}).items()})
    duration = round(sum(run["duration_s"] for run in runs), 3)
    return {
        "runs": len(runs),
        "pages": log["pages"],
        "fetches": log["fetches"],
        "requests": log["lines"],
        "bytes": log["bytes"],
        "duration_s": duration,
        "duration_estimated": any(run["duration_estimated"] for run in runs),
        "pages_per_s": round(log["pages"] / duration, 1) if duration > 0 else None,
        # HTTP statuses received, as the crawler counts them (no response is no status)
        "statuses": {k: v for k, v in sorted(log["statuses"].items()) if k != "None"},
        "errors": dict(sorted(log["errors"].items())),
        "dropped": dict(sorted(dropped.items())),
        "dropped_runs": len(with_stats),
        # --html-only: bodies stopped after their head, summed like `dropped`
        "not_html": dict(sorted(not_html.items())),
    }


def graph_counts(gdir: Path, *more: Path) -> dict[str, Any]:
    """Nodes and edges of the link graph in `gdir`, over every part file (`nodes.tsv`,
    `nodes-w0.tsv`, …): nodes are the distinct node ids (a URL's id is the same in every
    part, so a URL two workers both met is one node), edges the distinct (source, target,
    kind) triples (an edge recorded again after a crash, or by two workers, is one edge).
    Header lines and torn last lines are not counted. Memory: 8 bytes a node line, 16 an
    edge line (numpy arrays, not Python sets: ~60 bytes an element). `more`: other graph
    directories counted with it (a cluster's workers': parts of one graph)."""
    ids: array[int] = array("Q")
    by_kind: dict[bytes, array[int]] = {}
    parts: set[str] = set()
    for directory in (gdir, *more):
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob(GRAPH_NODE_FILES)):
            parts.add(graph_part(path))
            with path.open("rb") as f:
                for line in f:
                    nid, tab, _url = line.partition(b"\t")
                    if tab and nid.isdigit() and line.endswith(b"\n"):
                        ids.append(int(nid))
        for path in sorted(directory.glob(GRAPH_EDGE_FILES)):
            parts.add(graph_part(path))
            with path.open("rb") as f:
                for line in f:
                    fields = line.split(b"\t")
                    if len(fields) != 3 or not line.endswith(b"\n"):
                        continue
                    src, dst, kind = fields
                    if src.isdigit() and dst.isdigit():
                        pairs = by_kind.setdefault(kind.rstrip(b"\n"), array("Q"))
                        pairs.append(int(src))
                        pairs.append(int(dst))
    edges = {kind.decode(): _distinct(pairs.tobytes(), 16) for kind, pairs in by_kind.items()}
    return {
        "nodes": _distinct(ids.tobytes(), 8),
        "edges": sum(edges.values()),
        "edges_by_kind": dict(sorted(edges.items())),
        "parts": sorted(parts),
    }


def distinct_pages(hashes: bytes) -> int:
    """How many distinct page URLs `hashes` (`read_crawl`'s, of one or more crawl logs) name."""
    return _distinct(hashes, 16)


def _distinct(packed: bytes, width: int) -> int:
    """How many distinct `width`-byte values `packed` holds."""
    # imported here, not with the module: run.py imports this module for the run history,
    # and importing numpy starts OpenBLAS threads with SIGTERM unblocked, so a stop that
    # `hold_stop_signals` holds in the main thread was delivered to one of them and killed
    # the crawl by the default action (test_crawl_kill's SIGTERM at 0 s: exit -15, 2 in 9)
    import numpy as np

    return int(np.unique(np.frombuffer(packed, dtype=f"V{width}")).size)


# ------------------------------------------------------------------ printing


#: the longest `gossamer report` waits for the live graph's final statistics of a crawl
#: that has just ended (computed after the crawl's exit: docs/graph.md, "The live graph")
REPORT_GRAPH_WAIT_S = 300.0


def print_report(out: Path, *, as_json: bool = False) -> int:
    if live_graph_finishing(out):
        print("gossamer: waiting for the live graph's final statistics", file=sys.stderr)
        wait_live_graph(out, REPORT_GRAPH_WAIT_S)
    try:
        report = crawl_report(out)
    except (ValueError, OSError) as exc:
        _log.error(f"{exc}", extra={"path": str(out)})
        return 2
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    s = report["stats"] or {}
    t = report["totals"]
    settings = report["settings"]
    runs = report["runs"]
    print(f"crawl {out}")
    print(f"  seeds        {', '.join(settings.get('seeds', []))}")
    print(f"  ended        {_last_ending(out, runs, settings, report['fetched_nothing'])}")
    print(f"  runs         {t['runs']}")
    for run in runs:
        when = human_date(run["started"])
        approx = "~" if run["duration_estimated"] else ""
        changed = "".join(
            f", --{k.replace('_', '-')} {'none' if v is None else v}"
            for k, v in run["changed"].items()
        )
        worker = f"  (cluster worker {run['cluster_worker']})" if run["cluster_worker"] else ""
        print(
            f"    run {run['run']}  {when}  {approx}{run['duration_s']} s  "
            f"{run['fetches']:,} page fetches  {run['ended_by']}"
            + (f"  (resumed with {changed[2:]})" if changed else "")
            + worker
        )
    print(
        f"  pages        {t['pages']:,} (distinct URLs; {t['fetches']:,} page fetches)   "
        f"requests {t['requests']:,}   body bytes {t['bytes']:,}"
    )
    approx = "~" if t["duration_estimated"] else ""
    print(
        f"  elapsed      {approx}{t['duration_s']} s over {t['runs']} run(s)   "
        f"pages/s {t['pages_per_s'] if t['pages_per_s'] is not None else '-'}"
    )
    print(f"  statuses     {_kv(t['statuses'])} (every response, robots.txt's too)")
    print(f"  errors       {_kv(t['errors'])}")
    print(f"  dropped      {_kv(t['dropped'])}{_of_runs(t['dropped_runs'], t['runs'])}")
    not_html = not_html_line({"not_html": t["not_html"]})
    if not_html:
        print(f"  not HTML     {not_html}{_of_runs(t['dropped_runs'], t['runs'])}")
    shared = "  (the crawl's, at this worker's end)" if runs and runs[-1]["cluster_worker"] else ""
    print(f"  frontier     {_kv(_dated(s.get('frontier') or {}))}{shared}")
    clusters = report["near_duplicates"]
    if clusters or report["duplicates"]:
        dup_pages = sum(c["size"] for c in clusters)
        print(
            f"  duplicates   near-duplicates: {len(clusters):,} cluster"
            f"{'' if len(clusters) == 1 else 's'}, {dup_pages:,} pages; "
            f"pages marked {_kv(report['duplicates'])}"
        )
        for c in clusters[:CLUSTER_EXAMPLES]:
            print(f"    {c['size']:>6,}  {c['representative']}")
    log = report["log"]
    print(f"  crawl log    {log['lines']} lines; outcomes {_kv(log['outcomes'])}")
    print(f"  warc         {report['warc']['files']} files, {report['warc']['bytes']:,} bytes")
    g = report["graph"]
    # two graphs: the link files name every URL met (crawled or not), the web graph's nodes
    # are the pages crawled with 2xx/3xx (docs/graph.md, "What a node is")
    print(
        f"  link files   {g['nodes']:,} URLs, {g['edges']:,} links "
        f"({len(g['parts'])} part(s): {', '.join(p or 'single' for p in g['parts']) or '-'})"
    )
    if report.get("graph_stats"):
        print(f"  web graph    {graph_stats_line(report['graph_stats'])}")
    return 0


def _of_runs(with_stats: int, runs: int) -> str:
    if with_stats == runs:
        return ""
    return f"   (from the {with_stats} of {runs} runs that wrote statistics)"


def _last_ending(
    out: Path, runs: list[dict[str, Any]], settings: dict[str, Any], nothing: bool
) -> str:
    """Why and when the crawl's last run ended, and what to do to go on (`nothing`: the
    crawl fetched no page, `fetched_nothing`)."""
    if not runs:
        return "unknown (no run recorded)"
    last = runs[-1]
    reason = last["end_reason"]
    when = human_date(_timestamp(last["ended_iso"])) if last["ended_iso"] else None
    text = f"{last['ended_by']}{f' at {when}' if when else ''} (last run)"
    if last["cluster_worker"]:
        return text  # a cluster worker's directory: the crawl lives in Redis
    resume = f"gossamer crawl --resume {out}"
    if reason == "max-pages":
        frontier = (last["stats"] or {}).get("frontier") or {}
        done = frontier.get("done", settings.get("max_pages"))
        return f"{text}; to go on: {resume} --max-pages N (N > {done})"
    if nothing:
        return (
            f"{text}; no page fetched: the crawl command, its mistake fixed, reuses {out} "
            f"(starting afresh), and {FIXES_HINT}"
        )
    if reason != "complete":
        return f"{text}; to go on: {resume}"
    return text


def _dated(values: dict[str, Any]) -> dict[str, Any]:
    """`values` (a frontier's counts) with its Unix times as dates, for a person."""
    shown = {k: v for k, v in values.items() if not k.endswith("_iso")}
    if isinstance(shown.get("next_ready_at"), int | float):
        shown["next_ready_at"] = human_date(shown["next_ready_at"])
    return shown


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"


# ------------------------------------------------------------------ the CDX index


def write_report_cdx(out: Path) -> int:
    """`gossamer report DIR --cdx`: write `DIR/warc/index.cdxj` (`write_crawl_index`) and say
    so on stderr (stdout stays the report's). The exit status: USAGE when DIR is not a crawl
    directory or a crawler is running in it (it writes the index when it ends), IOERR when
    the index cannot be written."""
    from ..crawldir import CrawlError, dir_lock
    from ..exitcodes import Exit
    from ..sinks.cdx import write_crawl_index

    crawl = CrawlDir(out)
    if not crawl.manifest.is_file():
        _log.error(
            f"{out} is not a crawl directory (no {MANIFEST}); "
            "give the -o directory of a crawl",
            extra={"path": str(out)},
        )
        return Exit.USAGE
    try:
        with dir_lock(out):
            index = write_crawl_index(crawl.warc_dir)
    except CrawlError:
        _log.error(
            f"a crawler is running in {out}; it writes the CDX index when it "
            "ends (run `gossamer report --cdx` after it)",
            extra={"path": str(out)},
        )
        return Exit.USAGE
    except OSError as exc:
        _log.error(
            f"cannot write the CDX index in {crawl.warc_dir}: "
            f"{exc.strerror or exc}; free space or fix permissions and run it again",
            extra={"path": str(out)},
        )
        return Exit.IOERR
    if index.path is None:
        print(f"cdx: no WARC file in {crawl.warc_dir}: no index written", file=sys.stderr)
    else:
        again = len(index.indexed_by_library)
        library = f", {again} indexed by cdxj-indexer" if again else ""
        print(
            f"cdx: {index.path}: {index.lines:,} records of {index.warcs} WARC files{library}",
            file=sys.stderr,
        )
    return Exit.OK
