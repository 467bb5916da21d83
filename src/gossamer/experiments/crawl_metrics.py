"""Figures computed from real cluster crawls (`cluster_run.ClusterCrawl`).

- `workload`: the grid crawler's normalised workload — each worker's download time (the sum
  of the `duration` of every request in its crawl log: pages, robots.txt, errors) over the
  sum across workers — with busy time (the union of its request intervals) beside it;
- `pagerank` and `quality`: Cho & Garcia-Molina's quality |A_N ∩ P_N| / |P_N| of the first N
  pages a crawl fetched, importance = PageRank on the simulated web's true link graph;
- `communication`: URLs handed between workers through the shared frontier (L) per page;
- `phase_exclusivity`: KSpider's property, distinct workers per web host per phase window;
- `timing`: a crawl's wall time, its fetch span and pages per second over that span.

Definitions are repeated in docs/experiments.md next to the figures.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .cluster_run import ClusterCrawl, Fetch, busy_time, phase_windows

# ---------------------------------------------------------------------------- workload


def workload(crawl: ClusterCrawl) -> dict[str, Any]:
    """Per worker: requests, pages, download time (Σ request durations), busy time (union
    of request intervals), and the normalised workload (download time / the sum over the
    workers) with its standard deviation — the grid crawler's Table 1. `stdev` is the
    sample standard deviation (n − 1), as the paper's (its Table 1 figures are the n − 1
    deviation of its printed workloads); `pstdev` the population one (n)."""
    ids = crawl.worker_ids
    download: dict[str, float] = dict.fromkeys(ids, 0.0)
    intervals: dict[str, list[tuple[float, float]]] = {w: [] for w in ids}
    requests: dict[str, int] = dict.fromkeys(ids, 0)
    pages: dict[str, int] = dict.fromkeys(ids, 0)
    for f in crawl.fetches:
        download[f.worker] = download.get(f.worker, 0.0) + f.duration
        intervals.setdefault(f.worker, []).append((f.start, f.start + f.duration))
        requests[f.worker] = requests.get(f.worker, 0) + 1
        if f.is_page:
            pages[f.worker] = pages.get(f.worker, 0) + 1
    total = sum(download.values())
    busy = {w: busy_time(iv) for w, iv in intervals.items()}
    norm = {w: (d / total if total else 0.0) for w, d in download.items()}
    busy_total = sum(busy.values())
    norm_busy = {w: (b / busy_total if busy_total else 0.0) for w, b in busy.items()}
    page_total = sum(pages.values())
    return {
        "workers": sorted(download),
        "requests": requests,
        "pages": pages,
        "download_s": {w: round(v, 4) for w, v in download.items()},
        "busy_s": {w: round(v, 4) for w, v in busy.items()},
        "normalised": norm,
        "stdev": statistics.stdev(norm.values()) if len(norm) > 1 else 0.0,
        "pstdev": statistics.pstdev(norm.values()) if len(norm) > 1 else 0.0,
        "normalised_busy": norm_busy,
        "stdev_busy": statistics.stdev(norm_busy.values()) if len(norm_busy) > 1 else 0.0,
        "normalised_pages": {w: (p / page_total if page_total else 0.0) for w, p in pages.items()},
        "max_over_mean": max(norm.values()) * len(norm) if norm else 1.0,
    }


def timing(crawl: ClusterCrawl, pages: int) -> dict[str, float]:
    """`wall_s` (first worker started to last one exited), `fetch_span_s` (first request's
    start to last request's end) and `pages_per_s`: `pages` over the fetch span."""
    span = crawl.fetch_span
    return {
        "wall_s": round(crawl.wall, 3),
        "fetch_span_s": round(span, 3),
        "pages_per_s": round(pages / span, 1) if span else 0.0,
    }


def site_download_times(crawl: ClusterCrawl) -> dict[str, float]:
    """Σ request durations per web host over all workers (what a site costs to download)."""
    out: dict[str, float] = defaultdict(float)
    for f in crawl.fetches:
        out[f.host] += f.duration
    return dict(out)


# ---------------------------------------------------------------------------- quality


def pagerank(
    nodes: Sequence[str],
    edges: Iterable[tuple[str, str]],
    *,
    damping: float = 0.85,
    tol: float = 1e-12,
    max_iter: int = 200,
) -> dict[str, float]:
    """PageRank by power iteration (numpy): uniform teleport, a dangling page's rank spread
    uniformly, edges between `nodes` only (others ignored), duplicate edges counted once.
    Ranks sum to 1."""
    import numpy as np

    index = {u: i for i, u in enumerate(nodes)}
    pairs = {(index[s], index[d]) for s, d in edges if s in index and d in index and s != d}
    n = len(nodes)
    if n == 0:
        return {}
    src = np.fromiter((s for s, _ in pairs), dtype=np.int64, count=len(pairs))
    dst = np.fromiter((d for _, d in pairs), dtype=np.int64, count=len(pairs))
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    dangling = outdeg == 0
    rank = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        share = np.where(dangling, 0.0, rank / np.where(dangling, 1.0, outdeg))
        new = np.bincount(dst, weights=share[src], minlength=n)
        new = damping * (new + rank[dangling].sum() / n) + (1.0 - damping) / n
        done = float(np.abs(new - rank).sum()) < tol
        rank = new
        if done:
            break
    return {u: float(rank[i]) for u, i in index.items()}


def top_n(rank: Mapping[str, float], n: int) -> set[str]:
    """The n most important URLs (ties broken by URL, so the set is deterministic)."""
    return {u for u, _ in sorted(rank.items(), key=lambda kv: (-kv[1], kv[0]))[:n]}


def crawl_order(crawl: ClusterCrawl) -> list[str]:
    """Distinct page URLs in the order the crawl first fetched them (all workers merged by
    request start time; a page fetched twice counts at its first fetch)."""
    seen: dict[str, None] = {}
    for f in crawl.fetches:  # sorted by start
        if f.is_page and f.url in crawl.truth.required:
            seen.setdefault(f.url, None)
    return list(seen)


def rate_until(crawl: ClusterCrawl, fraction: float) -> float:
    """Pages per second from the crawl's first request until `fraction` of the pages to
    crawl had been fetched (distinct pages; the tail of the crawl left out)."""
    if not crawl.fetches:
        return 0.0
    need = max(1, round(fraction * len(crawl.truth.required)))
    seen: set[str] = set()
    for f in crawl.fetches:  # sorted by start
        if f.is_page and f.url in crawl.truth.required and f.url not in seen:
            seen.add(f.url)
            if len(seen) >= need:
                took = f.start + f.duration - crawl.fetches[0].start
                return need / took if took > 0 else 0.0
    return 0.0


def quality(
    order: Sequence[str], rank: Mapping[str, float], fractions: Sequence[float]
) -> dict[str, float]:
    """|A_N ∩ P_N| / |P_N| for N = fraction × |rank|: A_N the first N URLs of `order`, P_N
    the N most important (PageRank). Keys are the fractions as strings."""
    u = len(rank)
    ordered = sorted(rank.items(), key=lambda kv: (-kv[1], kv[0]))
    out = {}
    for frac in fractions:
        n = max(1, round(frac * u))
        best = {url for url, _ in ordered[:n]}
        out[f"{frac:g}"] = len(best & set(order[:n])) / n
    return out


# ---------------------------------------------------------------------------- communication


def communication(crawl: ClusterCrawl) -> dict[str, Any]:
    """URLs exchanged between workers, from the true link graph and who fetched what.

    For a worker A: D(A) = the distinct required URLs linked from the pages A fetched (what
    A's link routing sends to the shared frontier: it remembers what it sent, so once per
    URL) and F(A) = the pages A fetched.
    - `handed` L = Σ_A |D(A) ∖ F(A) ∩ F(others)|: URLs A discovered that another worker
      fetched — handed from one worker to another through the frontier (Cho's exchanged
      inter-partition URLs, each sent once per sender). Overhead L / N, N = pages fetched.
    - `cross_links`: link occurrences (one per page and target) from a page fetched by one
      worker to a page fetched by another: what an exchange without a per-worker memory of
      sent URLs would send.
    - `frontier_sends`: Σ_A |D(A)|: every URL the workers send to the shared frontier
      (the shared-frontier design's whole traffic, whoever fetches the URL)."""
    fetched = crawl.pages_by_worker()
    who: dict[str, set[str]] = defaultdict(set)
    for w, urls in fetched.items():
        for u in urls:
            who[u].add(w)
    out_links: dict[str, list[str]] = defaultdict(list)
    for src, dst, kind in crawl.truth.iter_edges():
        if kind == "link":
            out_links[src].append(dst)
    handed = cross = sends = 0
    for w, urls in fetched.items():
        discovered: set[str] = set()
        for u in urls:
            for d in out_links.get(u, ()):
                discovered.add(d)
                if who[d] and w not in who[d]:
                    cross += 1
        sends += len(discovered)
        handed += sum(1 for d in discovered if who[d] and w not in who[d])
    n = sum(len(v) for v in fetched.values())
    return {
        "pages_fetched": n,
        "handed": handed,
        "handed_per_page": handed / n if n else 0.0,
        "cross_links": cross,
        "cross_links_per_page": cross / n if n else 0.0,
        "frontier_sends": sends,
        "frontier_sends_per_page": sends / n if n else 0.0,
    }


# ---------------------------------------------------------------------------- phases


def workers_settled(
    fetches: Iterable[Fetch],
    worker_ids: Iterable[str],
    beat_interval: float,
    *,
    default: float = -math.inf,
) -> float:
    """When every worker of `worker_ids` had fetched and the others could know it: the
    latest of their first requests in `fetches`, plus one heartbeat interval. The member
    list (and what follows it: phase indices, `sized` and `consistent` placements) is
    stable from then on; while workers register it changes. A worker without a fetch is
    left out; when none has one, `default` + `beat_interval`."""
    wanted = set(worker_ids)
    firsts: dict[str, float] = {}
    for f in fetches:
        if f.worker in wanted and f.start < firsts.get(f.worker, math.inf):
            firsts[f.worker] = f.start
    return max(firsts.values(), default=default) + beat_interval


def stable_since(crawl: ClusterCrawl, beat_interval: float) -> float:
    """When every worker had fetched and the others could know it (its first request plus
    one heartbeat interval, `workers_settled`; the crawl's start plus one interval when no
    worker fetched): the phase indices hold from then on (they follow the member list,
    which changes while workers register)."""
    return workers_settled(crawl.fetches, crawl.worker_ids, beat_interval, default=crawl.started)


def phase_exclusivity(crawl: ClusterCrawl, period: float, since: float) -> dict[str, Any]:
    """Distinct workers per (phase window, web host) from the web's request log, windows
    [k·T, (k+1)·T) on the server clock from `since` on: the maximum must be 1."""
    windows = phase_windows(crawl.records, crawl.owner, period, since)
    counts = [len(ws) for ws in windows.values()]
    shared = sorted((k, host) for (k, host), ws in windows.items() if len(ws) > 1)
    early = phase_windows(crawl.records, crawl.owner, period, -math.inf)
    early_shared = sum(1 for (k, _), ws in early.items() if len(ws) > 1 and k * period < since)
    per_host: dict[str, set[str]] = defaultdict(set)
    for (_, host), ws in windows.items():
        per_host[host] |= ws
    ks = sorted({k for k, _ in windows})
    matched = sum(1 for r in crawl.records if r.conn in crawl.owner)
    return {
        "period": period,
        "since": since,
        "windows": len(ks),
        "host_windows": len(windows),
        "max_workers_per_host_window": max(counts, default=0),
        "host_windows_with_2_or_more": len(shared),
        "examples": [list(x) for x in shared[:10]],
        "startup_host_windows_with_2_or_more": early_shared,
        "hosts_seen_by_several_workers_over_the_crawl": sum(
            1 for ws in per_host.values() if len(ws) > 1
        ),
        "requests": len(crawl.records),
        "requests_matched_to_a_worker": matched,
    }
