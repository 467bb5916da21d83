"""CDXJ index of a crawl's WARC files, line for line as `cdxj-indexer` writes it and pywb reads
it, so an archive can be replayed without re-indexing.

`WarcWriter(cdx=True)` writes each WARC file's lines as it writes its records (`CdxPart`,
sorted once the WARC is closed), and `write_crawl_index` merges them into `index.cdxj`; a WARC
without its own index (recovered after a kill, or not written by gossamer) is indexed by the
library itself. So the index always covers every closed WARC of the directory and equals what
cdxj-indexer writes for the same files (docs/crawler/outputs.md, "CDX index"; the cost of each
way: bench/README.md, `bench_cdx.py`)."""

from __future__ import annotations

import contextlib
import gc
import heapq
import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from ..crawldir import CDX_INDEX, CDX_PARTS

__all__ = [
    "CdxPart",
    "IndexReport",
    "cdxj_line",
    "index_warc",
    "write_crawl_index",
]

PART_SUFFIX: Final = ".cdxj"
OPEN_SUFFIX: Final = ".open"
_WARC_NAME: Final = re.compile(r".+\.warc(\.gz)?$")
_MIME_END: Final = re.compile(r"[;\s]")  # cdxj-indexer's RE_SPACE: the type without parameters


# The SURT keys of plain URLs, worked out here: `surt.surt` costs ~10 µs a URL (its handyurl
# parse and both canonicalizers) of the ~13 µs a line took, and importing it (tldextract,
# requests) ~40 ms at every start. A plain URL is http(s), a host of ASCII letters, digits and
# hyphens whose last label is letters only (no IP address in any notation), no port, user,
# query or fragment, and a path of segments that start with a letter, digit, `_`, `~` or
# `-` and hold only those and dots (no escapes, `;`, `(`, empty, `.` or `..` segments): for
# these both canonicalizers only lowercase the host and the path, drop a leading `www`,
# `www2`… label and a trailing slash (not the root's). Anything else goes to `surt.surt`.
# tests/sinks/test_sink_cdx.py checks the two agree, on generated URLs of both kinds.
_PLAIN_URL: Final = re.compile(
    r"https?://((?:[A-Za-z0-9-]+\.)*[A-Za-z]+)((?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*/?)", re.A
).fullmatch
_WWW: Final = re.compile(r"www\d*\.", re.A).match
_NON_DIGITS: Final = re.compile(r"[^0-9]+").sub
# what json.dumps writes as is (ensure_ascii): printable ASCII but the quote and backslash
_JSON_PLAIN: Final = re.compile(r'[ !#-\[\]-~]*').fullmatch


def surt_key(url: str) -> str:
    """The SURT key of `url` as cdxj-indexer makes it (`surt.surt`; the URL itself when surt
    cannot parse it)."""
    m = _PLAIN_URL(url)
    if m is not None:
        host, path = m.groups()
        host = host.lower()
        www = _WWW(host)
        if www is not None:
            host = host[www.end() :]
        if len(path) > 1 and path[-1] == "/":
            path = path[:-1]
        return ",".join(reversed(host.split("."))) + ")" + (path.lower() or "/")
    import surt  # (here: see _PLAIN_URL)

    try:
        return surt.surt(url)  # type: ignore[no-any-return]
    except Exception:  # cdxj-indexer keys the URL itself when surt cannot parse it
        return url


def cdxj_line(
    url: str,
    warc_date: str,
    mime: str | None,
    status: str | None,
    digest: str | None,
    length: int,
    offset: int,
    filename: str,
) -> str:
    """One index line, with its newline, as cdxj-indexer writes it: `warc_date` is the
    record's WARC-Date text (its first 14 digits make the timestamp)."""
    fields: dict[str, str] = {"url": url}
    if mime is not None:
        fields["mime"] = mime
    if status is not None:
        fields["status"] = status
    if digest is not None:
        fields["digest"] = digest
    fields["length"] = str(length)
    fields["offset"] = str(offset)
    fields["filename"] = filename
    date = warc_date[:19]
    stamp = _NON_DIGITS("", date) if date.isascii() else "".join(filter(str.isdigit, date))
    key = surt_key(url)
    if _JSON_PLAIN("".join(fields.values())):  # json.dumps's text, built at a third of its cost
        data = ", ".join(f'"{k}": "{v}"' for k, v in fields.items())
        return f"{key} {stamp} {{{data}}}\n"
    return f"{key} {stamp} {json.dumps(fields)}\n"


def http_status_and_mime(head: bytes) -> tuple[str | None, str | None]:
    """(status, mime) of an HTTP response head as cdxj-indexer (warcio) reads them: the status
    code of the status line; the first Content-Type's type without parameters."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(None, 2)
    status = parts[1].decode("latin-1") if len(parts) > 1 else None
    mime = None
    for line in lines[1:]:
        if not line:
            break
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-type":
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:
                text = value.decode("latin-1")
            text = text.strip()
            mime = _MIME_END.split(text, maxsplit=1)[0].strip() if text else text
            break
    return status, mime


class CdxPart:
    """The index lines of one WARC file while it is written: appended (buffered) to
    `<cdx_dir>/<warc_name>.cdxj.open`; `finish()` sorts them into `<warc_name>.cdxj` (write to
    a temporary file, rename). A write that fails marks the part broken: `finish()` then
    deletes it, and the WARC is indexed by the library instead. Not thread-safe.

    `finish()` sorts in memory: for a full 1 GiB WARC file (~170,000 exchanges of the
    simulated web) 0.2 s and ~50 MB, once per file, beside the file's fsync."""

    def __init__(self, cdx_dir: Path, warc_name: str) -> None:
        cdx_dir.mkdir(parents=True, exist_ok=True)
        self.final = cdx_dir / (warc_name + PART_SUFFIX)
        self.path = cdx_dir / (warc_name + PART_SUFFIX + OPEN_SUFFIX)
        self._fh: IO[str] | None = self.path.open("w", encoding="utf-8")
        self.broken = False

    def add(self, line: str) -> None:
        if self._fh is None or self.broken:
            return
        try:
            self._fh.write(line)
        except OSError:
            self.broken = True

    def finish(self) -> None:
        """Write the sorted per-file index (or delete a broken part). Never raises OSError:
        a missing per-file index only means the library indexes that WARC later."""
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            fh.close()
        except OSError:
            self.broken = True
        if self.broken:
            with contextlib.suppress(OSError):
                self.path.unlink()
            return
        try:
            # as bytes: UTF-8's byte order is its code points' order, and no decoding (half
            # the time of a text sort: 17 against 32 ms for 20,000 lines)
            lines = sorted(set(self.path.read_bytes().splitlines(True)))
            tmp = self.final.with_name(self.final.name + ".tmp")
            tmp.write_bytes(b"".join(lines))
            os.replace(tmp, self.final)
        except OSError:
            with contextlib.suppress(OSError):
                self.final.with_name(self.final.name + ".tmp").unlink()
        with contextlib.suppress(OSError):
            self.path.unlink()


def index_warc(warc: Path, out: Path) -> None:
    """Index one WARC file with cdxj-indexer (its default records and fields, sorted) into
    `out` (through a temporary file and a rename, so `out` is whole or absent)."""
    from cdxj_indexer.main import CDXJIndexer

    tmp = out.with_name(out.name + ".tmp")
    # warcio leaves a SpooledTemporaryFile unclosed for each revisit record it reads (a
    # ResourceWarning when it is freed): freed here, with that warning silenced
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        indexer = CDXJIndexer(output=str(tmp), inputs=[str(warc)], sort=True)
        indexer.process_all()
        del indexer
        gc.collect()
    os.replace(tmp, out)


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What `write_crawl_index` did: the index written (None: no WARC file), the WARC files it
    covers, those indexed by the library (no per-file index from the writer), its lines."""

    path: Path | None
    warcs: int
    indexed_by_library: tuple[str, ...]
    lines: int


def write_crawl_index(warc_dir: Path) -> IndexReport:
    """Write `<warc_dir>/index.cdxj`: the sorted CDXJ index of every closed WARC file in
    `warc_dir` (`*.warc.gz`, `*.warc`), merged from the per-file indexes in `<warc_dir>/cdx/`;
    a WARC without one is indexed by cdxj-indexer first. Call it when no writer is using the
    directory (stale `.open` parts of a killed writer are removed). Raises OSError."""
    warc_dir = Path(warc_dir)
    if not warc_dir.is_dir():
        return IndexReport(None, 0, (), 0)
    warcs = sorted(p for p in warc_dir.iterdir() if _WARC_NAME.fullmatch(p.name) and p.is_file())
    cdx_dir = warc_dir / CDX_PARTS
    if cdx_dir.is_dir():
        for stale in cdx_dir.glob("*" + PART_SUFFIX + OPEN_SUFFIX):
            stale.unlink()  # a killed writer's: its WARC was recovered (or is to be)
    by_library: list[str] = []
    parts: list[Path] = []
    for warc in warcs:
        part = cdx_dir / (warc.name + PART_SUFFIX)
        if not part.is_file():
            cdx_dir.mkdir(exist_ok=True)
            index_warc(warc, part)
            by_library.append(warc.name)
        parts.append(part)
    if not warcs:
        return IndexReport(None, 0, (), 0)
    index = warc_dir / CDX_INDEX
    tmp = index.with_name(f"{CDX_INDEX}.{os.getpid()}.tmp")
    lines = 0
    with contextlib.ExitStack() as stack:
        # bytes, as the parts are sorted (`CdxPart.finish`): the same order, nothing decoded
        sources = [stack.enter_context(p.open("rb")) for p in parts]
        try:
            with tmp.open("wb") as out:
                last = None
                for line in heapq.merge(*sources):
                    if line != last:  # the same record indexed twice: once (as --sort)
                        out.write(line)
                        lines += 1
                    last = line
            os.replace(tmp, index)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
    return IndexReport(index, len(warcs), tuple(by_library), lines)
