"""Site sizes for the `sized` partition (`--partition sized --site-sizes SOURCE`): the grid
crawler's Static-Size places sites by what a previous crawl found on them.

SOURCE is a crawl directory (every `crawl.log.jsonl` under it: a site's size is its distinct
pages fetched with an HTTP status) or a text file of `HOST PAGES` lines, HOST a host key as
`gossamer.urls.host_key` gives it. `shard_weights` turns the sizes into the strategy's
(shard, size) pairs (docs/cluster.md, "Partition strategies")."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from ..crawldir import CRAWL_LOG
from ..partition import SHARDS, shard_of
from ..sinks import read_crawl_log
from ..urls import URLError, host_key


class SiteSizesError(ValueError):
    """SOURCE cannot be read as site sizes; the message says where and why."""


def read_site_sizes(source: str | os.PathLike[str]) -> dict[str, int]:
    """Pages per host key from a crawl directory or a `HOST PAGES` file (module docstring)."""
    path = Path(source)
    if path.is_dir():
        return _from_crawl_logs(path)
    if path.is_file():
        return _from_text(path)
    raise SiteSizesError(f"site sizes: {path} is neither a crawl directory nor a file")


def _from_crawl_logs(root: Path) -> dict[str, int]:
    logs = sorted(root.rglob(CRAWL_LOG))
    if not logs:
        raise SiteSizesError(f"site sizes: no {CRAWL_LOG} under {root}")
    pages: dict[str, set[str]] = {}
    for log in logs:
        for record in read_crawl_log(log):
            url, depth, status = record.get("url"), record.get("depth"), record.get("status")
            if not isinstance(url, str) or not isinstance(depth, int) or depth < 0:
                continue
            if status is None:
                continue
            try:
                host = host_key(url)
            except URLError:
                continue
            pages.setdefault(host, set()).add(url)
    if not pages:
        raise SiteSizesError(f"site sizes: the crawl logs under {root} record no page")
    return {host: len(urls) for host, urls in pages.items()}


def _from_text(path: Path) -> dict[str, int]:
    sizes: Counter[str] = Counter()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SiteSizesError(f"site sizes: cannot read {path}: {exc}") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.replace(",", " ").split()
        where = f"site sizes: {path}:{number}"
        if len(fields) != 2:
            raise SiteSizesError(f"{where}: expected HOST PAGES, got {line!r}")
        host, count = fields
        try:
            pages = int(count)
        except ValueError:
            raise SiteSizesError(f"{where}: {count!r} is not a page count") from None
        if pages < 0:
            raise SiteSizesError(f"{where}: a page count is >= 0, not {pages}")
        try:
            if any(c in host for c in "/?#@\\"):
                raise URLError(host)
            key = host_key(f"http://{host}/")
        except URLError:
            raise SiteSizesError(f"{where}: {host!r} is not a host name") from None
        sizes[key] += pages
    if not sizes:
        raise SiteSizesError(f"site sizes: {path} names no site")
    return dict(sizes)


def shard_weights(
    sizes: Mapping[str, int], *, equal: bool = False, shards: int = SHARDS
) -> tuple[tuple[int, float], ...]:
    """The `sized` strategy's (shard, weight) pairs: per shard, the sum of its sites' sizes
    (or, `equal`, its number of sites — the grid crawler's Static-Random)."""
    w: Counter[int] = Counter()
    for host, pages in sizes.items():
        w[shard_of(host, shards)] += 1 if equal else pages
    return tuple(sorted((s, float(v)) for s, v in w.items()))
