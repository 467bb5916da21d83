"""Re-crawling from a finished crawl: conditional GETs from its stored validators.

`seed_recrawl` streams OLD_DIR's crawl log into the new frontier (every URL fetched with a 2xx
or 3xx, at its old depth, scope-checked by the new settings). `Recrawl.load(OLD_DIR)` gives a
worker the ETag / Last-Modified validators to send and, for a 304, the page's out-links from
OLD_DIR's link graph, routed as if parsed: the re-crawl still reaches everything. It keeps them
in sorted flat arrays keyed by URL fingerprint, never in dicts of Python objects, so a
10-million-page crawl fits in a worker (docs/crawler.md, "Re-crawling")."""

from __future__ import annotations

import json
import os
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from ..crawldir import CrawlDir
from ..frontier import Discovered, Frontier
from ..outdir import check_recrawl_dir, old_seeds
from ..urls import fingerprint, host_key

__all__ = [
    "NOT_MODIFIED_OUTCOME",
    "Recrawl",
    "check_recrawl_dir",
    "conditional_headers",
    "iter_refetch",
    "old_seeds",
    "seed_recrawl",
]

NOT_MODIFIED_OUTCOME: Final = "ok/not-modified"
_MASK: Final = (1 << 63) - 1  # graph node id = fingerprint with the top bit cleared
_KINDS: Final = ("link", "redirect", "canonical", "sitemap")
_KIND_CODE: Final = {k: i for i, k in enumerate(_KINDS)}
_SEP: Final = b"\x00"
_SEED_CHUNK: Final = 10_000


def _log_records(old: Path) -> Iterator[dict[str, Any]]:
    """The old crawl log's records (torn lines skipped); bytes-level filter first, as most
    of a big log is parsed for two or three fields."""
    with open(CrawlDir(old).crawl_log, "rb") as f:
        for raw in f:
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict):
                yield rec


def _is_page_fetch(rec: dict[str, Any]) -> bool:
    status, depth = rec.get("status"), rec.get("depth")
    return (
        type(status) is int
        and 200 <= status < 400
        and type(depth) is int
        and isinstance(rec.get("url"), str)
    )


def iter_refetch(old: Path) -> Iterator[tuple[str, int, str | None]]:
    """(url, depth, parent) of every page OLD_DIR fetched with a 2xx or 3xx status (robots.txt
    and sitemaps left out), in log order; a URL logged twice comes twice."""
    for rec in _log_records(old):
        if _is_page_fetch(rec):
            parent = rec.get("parent")
            yield rec["url"], rec["depth"], parent if isinstance(parent, str) else None


def seed_recrawl(frontier: Frontier, settings: Any) -> int:
    """Put every page OLD_DIR (`settings.recrawl`) fetched with a 2xx/3xx status in the
    frontier at its old depth, unless the new settings' scope or depth limit rejects it.
    Returns how many URLs the frontier took (it dedupes, the first depth seen winning)."""
    from ..scope import Scope
    from ..traps import calendar_window

    old = settings.recrawl
    if old is None:
        return 0
    scope = Scope(
        settings.seeds,
        scope=settings.scope,
        allow=settings.allow,
        deny=settings.deny,
        max_depth=settings.max_depth,
        html_only=settings.links.html_only,
        max_path_repeat=settings.traps.max_path_repeat,
        max_path_segments=settings.traps.max_path_segments,
        calendar=calendar_window(settings),
    )
    max_depth = settings.max_depth
    added = 0
    chunk: list[Discovered] = []
    seen: set[int] = set()  # fingerprints: a log holds each URL about once, so this is small
    for url, depth, parent in iter_refetch(Path(old)):
        if max_depth is not None and depth > max_depth:
            continue
        fp = fingerprint(url)
        if fp in seen:
            continue
        seen.add(fp)
        host = host_key(url)
        if scope.reject_url(url, host) is not None:
            continue
        chunk.append(Discovered(url, host, depth, fp, depth, parent))
        if len(chunk) >= _SEED_CHUNK:
            added += frontier.put_discovered(chunk)
            chunk = []
    if chunk:
        added += frontier.put_discovered(chunk)
    return added


def conditional_headers(etag: str | None, last_modified: str | None) -> tuple[tuple[str, str], ...]:
    """The request headers of a conditional GET with these validators (RFC 9110 §13.1)."""
    headers: list[tuple[str, str]] = []
    if etag:
        headers.append(("If-None-Match", etag))
    if last_modified:
        headers.append(("If-Modified-Since", last_modified))
    return tuple(headers)


class _SortedTable:
    """uint64 key -> bytes, built by appending (later entries of one key win), then frozen
    into sorted arrays: keys, value offsets, one blob."""

    __slots__ = ("_blob", "_keys", "_offs")

    def __init__(self) -> None:
        self._keys = array("Q")
        self._offs = array("Q", [0])
        self._blob = bytearray()

    def append(self, key: int, value: bytes) -> None:
        self._keys.append(key)
        self._blob += value
        self._offs.append(len(self._blob))

    def freeze(self) -> _SortedTable:
        keys, offs, blob = self._keys, self._offs, self._blob
        order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: log order kept
        new_keys, new_offs, new_blob = array("Q"), array("Q", [0]), bytearray()
        n = len(order)
        for j, i in enumerate(order):
            key = keys[i]
            if j + 1 < n and keys[order[j + 1]] == key:
                continue  # a later entry of the same key wins
            new_keys.append(key)
            new_blob += blob[offs[i] : offs[i + 1]]
            new_offs.append(len(new_blob))
        out = _SortedTable()
        out._keys, out._offs, out._blob = new_keys, new_offs, new_blob
        return out

    def get(self, key: int) -> bytes | None:
        keys = self._keys
        i = bisect_left(keys, key)
        if i == len(keys) or keys[i] != key:
            return None
        return bytes(self._blob[self._offs[i] : self._offs[i + 1]])

    def __contains__(self, key: int) -> bool:
        keys = self._keys
        i = bisect_left(keys, key)
        return i < len(keys) and keys[i] == key

    def __len__(self) -> int:
        return len(self._keys)

    def keys(self) -> array[int]:
        return self._keys


class Recrawl:
    """What a worker of a re-crawl needs from OLD_DIR: validators per URL, and the old
    out-edges of the pages that may answer 304. Read-only once loaded."""

    def __init__(self, old: Path, validators: _SortedTable, edges: _EdgeTable) -> None:
        self.old = old
        self._validators = validators
        self._edges = edges

    @classmethod
    def load(cls, old: str | os.PathLike[str]) -> Recrawl:
        """Read OLD_DIR's crawl log (validators of 2xx and 304 responses; a URL's last line
        wins) and the out-edges of those pages from its graph (every part)."""
        path = Path(old)
        table = _SortedTable()
        for rec in _log_records(path):
            status = rec.get("status")
            if type(status) is not int or not (200 <= status < 300 or status == 304):
                continue
            etag, lm = rec.get("etag"), rec.get("last_modified")
            if not isinstance(etag, str):
                etag = None
            if not isinstance(lm, str):
                lm = None
            url = rec.get("url")
            if (etag is None and lm is None) or not isinstance(url, str):
                continue
            stamp = rec.get("time")
            value = _SEP.join(
                (s or "").encode("utf-8", "surrogateescape")
                for s in (etag, lm, stamp if isinstance(stamp, str) else None)
            )
            table.append(fingerprint(url), value)
        validators = table.freeze()
        edges = _EdgeTable.read(CrawlDir(path), validators.keys())
        return cls(path, validators, edges)

    def validators(self, fp: int) -> tuple[str | None, str | None, str | None]:
        """(ETag, Last-Modified, old fetch time) stored for the URL with fingerprint `fp`;
        None for each one missing."""
        raw = self._validators.get(fp)
        if raw is None:
            return None, None, None
        etag, lm, stamp = (p.decode("utf-8", "surrogateescape") or None for p in raw.split(_SEP))
        return etag, lm, stamp

    def headers(self, fp: int) -> tuple[tuple[str, str], ...]:
        """The conditional request headers for the URL with fingerprint `fp` (none when it
        has no stored validator)."""
        etag, lm, _ = self.validators(fp)
        return conditional_headers(etag, lm)

    def links(self, url: str) -> list[tuple[str, str]]:
        """The old out-edges of `url` as (target URL, kind), in the order first recorded."""
        return self._edges.out(fingerprint(url) & _MASK)

    def __len__(self) -> int:
        """Pages with stored validators."""
        return len(self._validators)

    @property
    def edge_count(self) -> int:
        return len(self._edges)


class _EdgeTable:
    """Out-edges of chosen sources: sorted source ids, offsets into a target id array and a
    kind code string; the targets' URLs in a `_SortedTable`."""

    __slots__ = ("_dsts", "_kinds", "_offs", "_srcs", "_urls")

    def __init__(self) -> None:
        self._srcs = array("Q")
        self._offs = array("Q", [0])
        self._dsts = array("Q")
        self._kinds = bytearray()
        self._urls = _SortedTable()

    @classmethod
    def read(cls, crawl: CrawlDir, fps: array[int]) -> _EdgeTable:
        """The edges of `crawl`'s graph (all parts; headers, torn lines and repeats skipped) whose
        source is one of the URLs with fingerprints `fps` (sorted)."""
        wanted = array("Q", sorted({fp & _MASK for fp in fps}))
        srcs, dsts, kinds = array("Q"), array("Q"), bytearray()
        for path in crawl.graph_edge_files():
            with open(path, "rb") as f:
                for line in f:
                    parts = line.split(b"\t")
                    if len(parts) != 3 or not line.endswith(b"\n") or not parts[0].isdigit():
                        continue
                    src = int(parts[0])
                    i = bisect_left(wanted, src)
                    if i == len(wanted) or wanted[i] != src or not parts[1].isdigit():
                        continue
                    code = _KIND_CODE.get(parts[2].rstrip(b"\r\n").decode("ascii", "replace"))
                    if code is None:
                        continue
                    srcs.append(src)
                    dsts.append(int(parts[1]))
                    kinds.append(code)
        table = cls()
        order = sorted(range(len(srcs)), key=srcs.__getitem__)  # stable: file order kept
        seen: set[tuple[int, int]] = set()
        for i in order:
            src = srcs[i]
            if not table._srcs or table._srcs[-1] != src:
                if table._srcs:
                    table._offs.append(len(table._dsts))
                table._srcs.append(src)
                seen.clear()
            edge = (dsts[i], kinds[i])
            if edge in seen:
                continue
            seen.add(edge)
            table._dsts.append(edge[0])
            table._kinds.append(edge[1])
        if table._srcs:
            table._offs.append(len(table._dsts))
        del srcs, dsts, kinds, order, seen
        targets = array("Q", sorted(set(table._dsts)))
        urls = _SortedTable()
        for path in crawl.graph_node_files():
            with open(path, "rb") as f:
                for line in f:
                    nid, tab, url = line.rstrip(b"\n").partition(b"\t")
                    if not tab or not nid.isdigit() or not line.endswith(b"\n"):
                        continue
                    key = int(nid)
                    i = bisect_left(targets, key)
                    if i < len(targets) and targets[i] == key:
                        urls.append(key, url)
        table._urls = urls.freeze()
        return table

    def out(self, src: int) -> list[tuple[str, str]]:
        srcs = self._srcs
        i = bisect_left(srcs, src)
        if i == len(srcs) or srcs[i] != src:
            return []
        out = []
        urls = self._urls
        for j in range(self._offs[i], self._offs[i + 1]):
            raw = urls.get(self._dsts[j])
            if raw is not None:  # a node no nodes file lists: its edge is dropped
                out.append((raw.decode("utf-8", "surrogateescape"), _KINDS[self._kinds[j]]))
        return out

    def __len__(self) -> int:
        return len(self._dsts)
