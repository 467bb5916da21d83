"""`gossamer report DIR`: what a crawl did, from its files alone."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def crawl_report(out: Path) -> dict[str, Any]:
    """Statistics of the crawl in `out` (raises ValueError when it is not a crawl dir)."""
    manifest = out / "crawl.json"
    if not manifest.is_file():
        raise ValueError(f"{out} is not a crawl directory (no crawl.json)")
    report: dict[str, Any] = {"directory": str(out)}
    report["settings"] = json.loads(manifest.read_text())
    stats = out / "stats.json"
    report["stats"] = json.loads(stats.read_text()) if stats.is_file() else None
    outcomes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    lines = 0
    log = out / "crawl.log.jsonl"
    if log.is_file():
        with log.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a torn last line of a killed crawl
                lines += 1
                outcomes[str(rec.get("outcome"))] += 1
                statuses[str(rec.get("status"))] += 1
    report["log"] = {
        "lines": lines,
        "outcomes": dict(outcomes.most_common()),
        "statuses": dict(statuses.most_common()),
    }
    warcs = sorted((out / "warc").glob("*.warc.gz")) if (out / "warc").is_dir() else []
    report["warc"] = {"files": len(warcs), "bytes": sum(p.stat().st_size for p in warcs)}
    graph = out / "graph"
    report["graph"] = {name: _count_lines(graph / f"{name}.tsv") for name in ("nodes", "edges")}
    return report


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as f:
        return sum(1 for _ in f)


def print_report(out: Path, *, as_json: bool = False) -> int:
    try:
        report = crawl_report(out)
    except (ValueError, OSError) as exc:
        print(f"gossamer: error: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    s = report["stats"] or {}
    settings = report["settings"]
    print(f"crawl {out}")
    print(f"  seeds        {', '.join(settings.get('seeds', []))}")
    print(f"  finished     {s.get('finished', 'unknown (no stats.json: interrupted?)')}")
    print(
        f"  pages        {s.get('pages', '-')}   requests {s.get('requests', '-')}   "
        f"bytes {s.get('bytes', '-')}"
    )
    print(f"  elapsed      {s.get('elapsed_s', '-')} s   pages/s {s.get('pages_per_s', '-')}")
    print(f"  statuses     {_kv(s.get('statuses', {}))}")
    print(f"  errors       {_kv(s.get('errors', {}))}")
    print(f"  dropped      {_kv(s.get('dropped', {}))}")
    print(f"  frontier     {_kv(s.get('frontier', {}))}")
    log = report["log"]
    print(f"  crawl log    {log['lines']} lines; outcomes {_kv(log['outcomes'])}")
    print(f"  warc         {report['warc']['files']} files, {report['warc']['bytes']:,} bytes")
    print(f"  graph        {report['graph']['nodes']} nodes, {report['graph']['edges']} edges")
    return 0


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"
