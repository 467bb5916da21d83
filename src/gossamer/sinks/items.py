"""An extractor's items: one JSON line per item, appended by each worker to its part, and
the parts merged into the crawl's feed (docs/python.md, "Items").

Each line is `{"url": PAGE, "fetched_at": T, "item": {...}}`: the page the item came from
and when that fetch began. A worker buffers a page's lines and hands them to the OS on
`flush()` — which the engine calls before the frontier counts the page done, as for the
crawl log — in one `write` of whole lines (a torn tail, left by a kill in mid-write, is cut
when the part is opened again). A page whose worker was killed after the flush and before
the frontier counted it done is fetched again by the next run, and its items written again
under another `fetched_at`: `merge_items` keeps, for each page, the lines of its first fetch
only, so the feed holds each crawled page's items exactly once."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

__all__ = ["ItemsWriter", "merge_items", "read_items"]

_FLUSH_BYTES: Final = 64 * 1024
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class ItemsWriter:
    """Appends item lines to the part file `path` (parent directories created)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = _open_append(self.path)
        self._buffer: list[bytes] = []
        self._buffered = 0
        self.items = 0

    def write(self, url: str, fetched_at: float, items: Iterable[Any]) -> int:
        """Buffer the JSON lines of a page's items (each JSON-serialisable: TypeError
        otherwise, nothing of the page buffered); how many."""
        head = f'{{"url":{_ENCODE(url)},"fetched_at":{round(fetched_at, 6)!r},"item":'
        lines = [(head + _ENCODE(item) + "}\n").encode("utf-8", "surrogatepass") for item in items]
        self._buffer.extend(lines)
        self._buffered += sum(map(len, lines))
        self.items += len(lines)
        if self._buffered >= _FLUSH_BYTES:
            self.flush()
        return len(lines)

    def flush(self) -> None:
        """Hand the buffered lines to the OS in one write."""
        if not self._buffer or self._fd is None:
            return
        data = b"".join(self._buffer)
        self._buffer.clear()
        self._buffered = 0
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _open_append(path: Path) -> int:
    """Open for appending; cut a torn last line."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    size = os.fstat(fd).st_size
    if size:
        with open(path, "rb") as f:
            f.seek(max(0, size - 65536))
            tail = f.read()
        if not tail.endswith(b"\n"):
            cut = tail.rfind(b"\n")
            os.ftruncate(fd, size - len(tail) + cut + 1 if cut >= 0 else 0)
    return fd


def read_items(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The lines of an items file (a part or the feed), those that do not parse skipped."""
    with open(path, "rb") as f:
        for raw in f:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and isinstance(line.get("url"), str):
                yield line


def merge_items(parts: Iterable[Path], feed: Path) -> tuple[int, int]:
    """Write `feed` (atomically: a temporary file renamed) from the item `parts`, each
    page's items once: those of its first fetch (the earliest `fetched_at`), in the order
    they were written. (items, pages)."""
    parts = list(parts)
    first: dict[str, float] = {}
    for part in parts:
        for line in read_items(part):
            at = line.get("fetched_at")
            if isinstance(at, int | float):
                url = line["url"]
                if at < first.get(url, float("inf")):
                    first[url] = at
    chosen: list[bytes] = []
    for part in parts:
        for line in read_items(part):
            if first.get(line["url"]) == line.get("fetched_at"):
                text = json.dumps(line, ensure_ascii=False, separators=(",", ":"))
                chosen.append(text.encode("utf-8", "surrogatepass") + b"\n")
    tmp = feed.with_name(feed.name + ".tmp")
    tmp.write_bytes(b"".join(chosen))
    os.replace(tmp, feed)
    return len(chosen), len(first)
