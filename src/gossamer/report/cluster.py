"""`gossamer report DIR` of a cluster's output directory: every worker's directory summed.

A cluster crawl's workers on one machine write under one -o directory, a crawl directory each
(`ClusterDir`: `w1/`, `w2/`, …, each with its `worker.json`). The report reads each worker's
as `gossamer report` reads a crawl directory (report/crawl.py) and adds them up per crawl (a
directory may hold the workers of several crawls: grouped by the crawl id of their
`worker.json`): pages are the distinct page URLs over every worker's crawl log (a page two
workers fetched, after a lease was reclaimed, counts once), requests, bytes, statuses, errors
and the URLs dropped are sums, the time is the wall time from the first worker's start to the
last one's end, and the crawl's frontier is the shared one as the last worker to end saw it.
The crawl's totals as Redis holds them (workers on other machines included) are `gossamer
report --redis URL --crawl ID` (cluster/crawlreport.py). See docs/cluster.md, "Outputs and
`gossamer report`"."""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from ..crawldir import MANIFEST, ClusterDir, CrawlDir
from ..sinks.items import merge_items
from .crawl import (
    CLUSTER_EXAMPLES,
    distinct_pages,
    graph_counts,
    human_date,
    iso_date,
    print_report,
    read_crawl,
)

_log = logging.getLogger(__name__)


def is_cluster_dir(out: Path) -> bool:
    """Whether `out` is a cluster's output directory: no crawl directory itself, and at least
    one worker's directory (`w*/` with its `worker.json` and `crawl.json`) in it."""
    return not CrawlDir(out).manifest.exists() and bool(_worker_dirs(out))


def _worker_dirs(out: Path) -> list[CrawlDir]:
    return [
        w
        for w in ClusterDir(out).workers()
        if w.worker_record.is_file() and w.manifest.is_file()
    ]


def cluster_report(out: Path) -> dict[str, Any]:
    """The report of the cluster output directory `out`: per crawl, its workers' own figures
    and their totals (ValueError when `out` holds no worker's directory)."""
    workers = _worker_dirs(out)
    if not workers:
        raise ValueError(
            f"{out} is not a crawl directory (no {MANIFEST}) nor a cluster's (no worker's "
            "directory w1/, w2/, … in it)"
        )
    by_crawl: dict[str, list[tuple[dict[str, Any], dict[str, Any], bytes]]] = {}
    for wdir in workers:
        record = _worker_record(wdir)
        report, hashes = read_crawl(wdir.path)
        crawl_id = str(record.get("crawl") or "?")
        by_crawl.setdefault(crawl_id, []).append((record, report, hashes))
    crawls = [_crawl_of(crawl_id, found) for crawl_id, found in sorted(by_crawl.items())]
    for crawl in crawls:
        crawl["items"] = _merge_items(out, crawl)
    return {"directory": str(out), "crawls": crawls}


def _merge_items(out: Path, crawl: dict[str, Any]) -> dict[str, Any] | None:
    """The extractor's items of the crawl's workers here merged into
    `DIR/items-<crawl id>.jsonl`, each page's once (sinks/items.py): the file, its items
    and pages; None when its workers wrote none."""
    parts = [
        p for w in crawl["workers"] for p in CrawlDir(Path(w["directory"])).items_parts()
    ]
    if not parts:
        return None
    feed = ClusterDir(out).items(crawl["crawl"])
    items, pages = merge_items(parts, feed)
    return {"path": str(feed), "items": items, "pages": pages}


def _worker_record(wdir: CrawlDir) -> dict[str, Any]:
    try:
        record = json.loads(wdir.worker_record.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _crawl_of(
    crawl_id: str, found: list[tuple[dict[str, Any], dict[str, Any], bytes]]
) -> dict[str, Any]:
    """One crawl's workers and totals."""
    workers = [_worker_of(record, report) for record, report, _ in found]
    statuses: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    for _, report, _ in found:
        totals = report["totals"]
        statuses.update(totals["statuses"])
        errors.update(totals["errors"])
        dropped.update(totals["dropped"])
    starts = [w["started"] for w in workers if w["started"] is not None]
    ends = [w["ended"] for w in workers if w["ended"] is not None]
    elapsed = round(max(ends) - min(starts), 3) if starts and ends else None
    pages = distinct_pages(b"".join(hashes for _, _, hashes in found))
    ended = [(w, report) for w, (_, report, _) in zip(workers, found, strict=True) if w["ended"]]
    last, last_report = max(ended, key=lambda pair: pair[0]["ended"], default=(None, None))
    warcs = [report["warc"] for _, report, _ in found]
    settings = found[0][1]["settings"]
    # near-duplicate clusters over the workers: a page's mark names the page it is near,
    # whichever worker crawled that (the workers share their fingerprints in Redis)
    merged: dict[str, dict[str, Any]] = {}
    duplicates: Counter[str] = Counter()
    for _, report, _ in found:
        duplicates.update(report.get("duplicates") or {})
        for c in report.get("near_duplicates") or ():
            into = merged.setdefault(
                c["representative"],
                {"size": 1, "representative": c["representative"], "examples": []},
            )
            into["size"] += c["size"] - 1
            into["examples"] = (into["examples"] + c["examples"])[:CLUSTER_EXAMPLES]
    return {
        "crawl": crawl_id,
        "seeds": settings.get("seeds", []),
        "workers": workers,
        "totals": {
            "workers": len(workers),
            "pages": pages,
            "fetches": sum(w["fetches"] for w in workers),
            "requests": sum(w["requests"] for w in workers),
            "bytes": sum(w["bytes"] for w in workers),
            "elapsed_s": elapsed,
            "pages_per_s": round(pages / elapsed, 1) if elapsed else None,
            "statuses": dict(sorted(statuses.items())),
            "errors": dict(sorted(errors.items())),
            "dropped": dict(sorted(dropped.items())),
        },
        "duplicates": dict(duplicates.most_common()),
        "near_duplicates": sorted(merged.values(), key=lambda c: -c["size"]),
        # the shared frontier, as the last worker to end saw it (its stats.json)
        "frontier": ((last_report or {}).get("stats") or {}).get("frontier"),
        "end_reason": last["end_reason"] if last else None,
        "ended_by": last["ended_by"] if last else None,
        "ended_at": iso_date(last["ended"]) if last else None,
        "last_worker": last["worker"] if last else None,
        "warc": {
            "files": sum(w["files"] for w in warcs),
            "bytes": sum(w["bytes"] for w in warcs),
        },
        "graph": graph_counts(*(CrawlDir(Path(r["directory"])).graph_dir for _, r, _ in found)),
    }


def _worker_of(record: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """One worker's figures from its directory's report."""
    totals = report["totals"]
    run = report["runs"][-1] if report["runs"] else None
    ended = _time(run["ended_iso"]) if run else None
    duration = run["duration_s"] if run else None
    started = run["started"] if run else None
    if ended is not None and duration is not None and run and not run["duration_estimated"]:
        started = ended - duration
    return {
        "worker": record.get("worker") or Path(report["directory"]).name,
        "directory": report["directory"],
        "machine": record.get("machine"),
        "pages": totals["pages"],
        "fetches": totals["fetches"],
        "requests": totals["requests"],
        "bytes": totals["bytes"],
        "errors": sum(totals["errors"].values()),
        "duration_s": duration,
        "started": started,
        "ended": ended,
        "started_iso": iso_date(started),
        "ended_iso": iso_date(ended),
        "end_reason": report["end_reason"],
        "ended_by": run["ended_by"] if run else None,
        "warc": report["warc"],
        "graph": {"nodes": report["graph"]["nodes"], "edges": report["graph"]["edges"]},
    }


def _time(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def print_directory_report(out: Path, *, as_json: bool = False) -> int:
    """`gossamer report DIR`: a crawl directory's report, or a cluster output directory's
    (every worker's summed). The exit status (2: neither)."""
    if not is_cluster_dir(out):
        return print_report(out, as_json=as_json)
    try:
        report = cluster_report(out)
    except (ValueError, OSError) as exc:
        _log.error(f"{exc}", extra={"path": str(out)})
        return 2
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    for k, crawl in enumerate(report["crawls"]):
        if k:
            print()
        _print_crawl(out, crawl)
    return 0


def _print_crawl(out: Path, crawl: dict[str, Any]) -> None:
    t = crawl["totals"]
    workers = crawl["workers"]
    print(f"cluster directory {out}: crawl {crawl['crawl']}, {len(workers)} worker(s) here")
    print(f"  seeds        {', '.join(crawl['seeds'])}")
    if crawl["last_worker"] is not None:
        when = human_date(_time(crawl["ended_at"]))
        print(
            f"  ended        {crawl['ended_by']} at {when} (its last worker here, "
            f"{crawl['last_worker']})"
        )
    else:
        print("  ended        unknown (no worker here wrote statistics)")
    print(f"  workers      {len(workers)}")
    width = max(len(str(w["worker"])) for w in workers)
    for w in workers:
        duration = "-" if w["duration_s"] is None else f"{w['duration_s']} s"
        print(
            f"    {w['worker']:<{width}}  {w['machine'] or '?'}  {w['pages']:,} pages "
            f"({w['fetches']:,} page fetches)  requests {w['requests']:,}  "
            f"body bytes {w['bytes']:,}  {duration}  {w['ended_by'] or '-'}"
        )
    print(
        f"  pages        {t['pages']:,} (distinct URLs over every worker; {t['fetches']:,} page "
        f"fetches)   requests {t['requests']:,}   body bytes {t['bytes']:,}"
    )
    elapsed = "-" if t["elapsed_s"] is None else f"{t['elapsed_s']} s"
    rate = "-" if t["pages_per_s"] is None else t["pages_per_s"]
    print(f"  elapsed      {elapsed} (first worker's start to last one's end)   pages/s {rate}")
    print(f"  statuses     {_kv(t['statuses'])} (every response, robots.txt's too)")
    print(f"  errors       {_kv(t['errors'])}")
    print(f"  dropped      {_kv(t['dropped'])}")
    frontier = crawl["frontier"] or {}
    shown = {k: v for k, v in frontier.items() if not k.endswith("_iso") and k != "next_ready_at"}
    last = crawl["last_worker"]
    print(f"  frontier     {_kv(shown)}" + (f"  (the crawl's, at {last}'s end)" if last else ""))
    print(f"  warc         {crawl['warc']['files']} files, {crawl['warc']['bytes']:,} bytes")
    g = crawl["graph"]
    print(f"  link files   {g['nodes']:,} URLs, {g['edges']:,} links (every worker's parts)")
    items = crawl.get("items")
    if items is not None:
        print(
            f"  items        {items['items']:,} of {items['pages']:,} pages in {items['path']} "
            "(every worker's, each page's once)"
        )


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"
