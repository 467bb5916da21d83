"""`gossamer report --redis URL --crawl ID`: a cluster crawl's totals, from Redis.

What `gossamer status` reads (`control.crawl_status`: the crawl's record, its shared
frontier's counts, every worker's last status record, on any machine) summed into the figures
`gossamer report` gives a crawl directory: pages (the frontier's done, and what the workers
count), requests, body bytes, statuses and outcomes, errors, the time from the crawl's
creation to its end and the rate. A cluster's output directory on one machine is reported
from its files instead (`gossamer report DIR`, report/cluster.py)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ..exitcodes import Exit
from ..report.crawl import graph_stats_line, human_date, iso_date
from ._redis import RedisClient
from .connect import with_client
from .control import CONTROL_READ_TIMEOUT, crawl_status
from .crawls import load_crawl, settle_stopped

__all__ = ["crawl_totals", "format_totals", "report_main"]

#: what the report shows of each worker's status record (`members.WorkerStatus`)
_WORKER_FIELDS = (
    "id", "machine", "pid", "state", "pages", "requests", "errors", "body_bytes", "out",
    "started_at", "last_beat",
)  # fmt: skip


def crawl_totals(status: dict[str, Any]) -> dict[str, Any]:
    """The report of a cluster crawl from its `crawl_status`: the crawl, its frontier, every
    worker's figures and their totals."""
    c, fr = status["crawl"], status["frontier"]
    workers = status["workers"]
    statuses: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for w in workers:
        statuses.update({str(k): int(v) for k, v in (w.get("statuses") or {}).items()})
        outcomes.update({str(k): int(v) for k, v in (w.get("outcomes") or {}).items()})
    end = c["ended"] if c["ended"] is not None else status["server_time"]
    elapsed = max(end - c["created"], 0.0)
    done = fr["done"] if fr is not None else None
    return {
        "crawl": {
            **c,
            "created_iso": iso_date(c["created"]),
            "ended_iso": iso_date(c["ended"]),
        },
        "frontier": fr,
        "frontier_error": status["frontier_error"],
        "totals": {
            "workers": len(workers),
            # the crawl's pages: done in its shared frontier (every worker's, on any machine)
            "pages": done,
            # … and as the workers count them in their status records
            "worker_pages": sum(int(w["pages"]) for w in workers),
            "requests": sum(int(w["requests"]) for w in workers),
            "errors": sum(int(w["errors"]) for w in workers),
            "bytes": sum(int(w.get("body_bytes") or 0) for w in workers),
            "statuses": dict(sorted(statuses.items())),
            "outcomes": dict(outcomes.most_common()),
            "elapsed_s": round(elapsed, 3),
            "pages_per_s": round(done / elapsed, 1) if done is not None and elapsed else None,
        },
        "workers": [{k: w.get(k) for k in _WORKER_FIELDS} for w in workers],
        "graph": status.get("graph"),
    }


def report_main(url: str, crawl_id: str | None, *, as_json: bool = False) -> int:
    """Print the report of cluster crawl `crawl_id` (the only one when None) in `url`'s
    Redis; the exit status."""

    def report(client: RedisClient) -> int:
        record = load_crawl(client, crawl_id)
        if record.state == "stopping" and settle_stopped(client, record):  # its workers died
            record = load_crawl(client, record.id)
        data = crawl_totals(crawl_status(client, record))
        print(json.dumps(data, indent=2) if as_json else format_totals(data))
        return Exit.OK

    return with_client(url, report, answer_within=CONTROL_READ_TIMEOUT)


def format_totals(data: dict[str, Any]) -> str:
    """The human form of `crawl_totals`."""
    c, fr, t = data["crawl"], data["frontier"], data["totals"]
    ended = f"   ended {human_date(c['ended'])}" if c["ended"] is not None else ""
    rate = "-" if t["pages_per_s"] is None else t["pages_per_s"]
    lines = [
        f"cluster crawl {c['id']}  {c['state']}",
        f"  seeds        {', '.join(c['seeds'])}",
        f"  created      {human_date(c['created'])}{ended}   elapsed {t['elapsed_s']} s",
        f"  workers      {t['workers']} (every machine's)",
    ]
    width = max((len(str(w["id"])) for w in data["workers"]), default=0)
    lines += [
        f"    {w['id']:<{width}}  {w['machine']}  pid {w['pid']}  {w['state']}  "
        f"{w['pages']:,} pages  requests {w['requests']:,}  errors {w['errors']:,}  "
        f"body bytes {w['body_bytes'] or 0:,}  {w['out'] or ''}".rstrip()
        for w in data["workers"]
    ]
    pages = "-" if t["pages"] is None else f"{t['pages']:,}"
    lines += [
        f"  pages        {pages} done in the crawl's frontier (the workers count "
        f"{t['worker_pages']:,})   requests {t['requests']:,}   body bytes {t['bytes']:,}   "
        f"pages/s {rate}",
        f"  statuses     {_kv(t['statuses'])} (every response, robots.txt's too)",
        f"  outcomes     {_kv(t['outcomes'])}",
        f"  errors       {t['errors']:,}",
    ]
    if fr is not None:
        shown = {k: fr[k] for k in ("queued", "leased", "done", "failed", "retries", "hosts")}
        lines.append(f"  frontier     {_kv(shown)}, dead_hosts {fr['dead_hosts']}")
    else:
        lines.append(f"  frontier     unavailable: {data['frontier_error']}")
    if data.get("graph"):
        lines.append(f"  web graph    {graph_stats_line(data['graph'])}")
    return "\n".join(lines)


def _kv(d: dict[str, Any]) -> str:
    shown = (f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in d.items())
    return ", ".join(shown) or "-"
