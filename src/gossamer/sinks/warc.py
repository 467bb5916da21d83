"""WARC 1.1 output: request + response records, per-record gzip, size-based rotation,
crash-safe files.

A writer appends one gzip member per record to `….warc.gz.open`, hands each exchange to the OS
in one write, and on rotation or `close()` fsyncs and renames the file; a killed process leaves
at worst one partial member, which `recover(directory)` cuts off, and a failed write (disk
full) is rolled back to the last record boundary. A 304 to a conditional GET is a `revisit`
record (server-not-modified), and so is a payload identical to an earlier capture's
(identical-payload-digest, `identical_to`); a decoded body's headers are renamed so no replay
tool decodes it twice. Record fields, life cycle and compression: docs/crawler/outputs.md,
"WARC"."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import mmap
import os
import re
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from ..crawldir import CDX_PARTS
from ._isotime import iso_time
from .cdx import CdxPart, cdxj_line, http_status_and_mime

__all__ = [
    "OPEN_SUFFIX",
    "RecordLocation",
    "RecoveryReport",
    "WarcStats",
    "WarcWriter",
    "recover",
]

OPEN_SUFFIX: Final = ".open"
_CRLF: Final = b"\r\n"
_END: Final = b"\r\n\r\n"


def _compressor(level: int) -> Callable[[bytes], bytes]:
    """gzip member of `data`; `level` is a zlib level (0-9), mapped onto ISA-L's 0-3.
    ISA-L writes the same gzip format in a third of zlib's CPU time at level 1 on HTML."""
    if level > 0:
        try:
            from isal import isal_zlib
        except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
            pass
        else:
            isal_level = 1 if level <= 3 else 2 if level <= 6 else 3
            compress = isal_zlib.compress
            return lambda data: compress(data, isal_level, 31)
    zcompress = zlib.compress
    return lambda data: zcompress(data, level, 31)


def _spread_masks() -> tuple[tuple[int, int, int], ...]:
    """Masks that move the 32 5-bit groups of a 160-bit number into the low bits of 32
    bytes, in five halving steps (160 bits in 256, 80 in 128, 40 in 64, 20 in 32, 10 in 16)."""
    steps = []
    group, slot = 160, 256
    while group > 5:
        half, half_slot = group // 2, slot // 2
        low = sum(((1 << half) - 1) << (k * slot) for k in range(256 // slot))
        steps.append((low, low << half, half_slot - half))
        group, slot = half, half_slot
    return tuple(steps)


(_S0, _S1, _S2, _S3, _S4) = _spread_masks()
_B32_TABLE: Final = bytes.maketrans(bytes(range(32)), b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


def _b32(digest: bytes) -> bytes:
    """RFC 4648 base32 of a 20-byte digest: 2 µs (base64.b32encode is pure Python in 3.11:
    7 µs; 16 table lookups of 10-bit pairs: 4)."""
    x = int.from_bytes(digest, "big")
    x = (x & _S0[0]) | ((x & _S0[1]) << _S0[2])
    x = (x & _S1[0]) | ((x & _S1[1]) << _S1[2])
    x = (x & _S2[0]) | ((x & _S2[1]) << _S2[2])
    x = (x & _S3[0]) | ((x & _S3[1]) << _S3[2])
    x = (x & _S4[0]) | ((x & _S4[1]) << _S4[2])
    return x.to_bytes(32, "big").translate(_B32_TABLE)


def _digest(*parts: bytes) -> bytes:
    """`sha1:` + base32 of the SHA-1 of the parts."""
    h = hashlib.sha1()
    for p in parts:
        h.update(p)
    return b"sha1:" + _b32(h.digest())


_EMPTY_DIGEST: Final = _digest(b"")


def _warc_date(ts: float) -> bytes:
    return iso_time(ts).encode("ascii")


_IDS_PER_DRAW: Final = 256
_ID_TEMPLATE: Final = b"<urn:uuid:00000000-0000-4000-8000-000000000000>"
_ID_LEN: Final = len(_ID_TEMPLATE)
# where the 32 hex digits go in the template (the version and variant digits included: the
# masks below already set those bits)
_ID_DIGITS: Final = [i for i in range(10, _ID_LEN - 1) if _ID_TEMPLATE[i] != ord("-")]
_ID_CLEAR: Final = int.from_bytes(
    bytes.fromhex("ffffffffffff0fff3fffffffffffffff") * _IDS_PER_DRAW, "big"
)
_ID_SET: Final = int.from_bytes(
    bytes.fromhex("00000000000040008000000000000000") * _IDS_PER_DRAW, "big"
)


def _record_ids(count: int = _IDS_PER_DRAW) -> list[bytes]:
    """`count` (≤ 256) random version-4 UUID record ids (`<urn:uuid:…>`) from one urandom
    call, built with 32 strided copies instead of per-id formatting: 0.6 µs an id
    (uuid.uuid4() costs ~8 µs, formatting each id ~1.7 µs)."""
    n = _IDS_PER_DRAW
    bits = (int.from_bytes(os.urandom(16 * n), "big") & _ID_CLEAR) | _ID_SET
    digits = bits.to_bytes(16 * n, "big").hex().encode("ascii")
    out = bytearray(_ID_TEMPLATE * n)
    for k, pos in enumerate(_ID_DIGITS):
        out[pos::_ID_LEN] = digits[k::32]
    data = bytes(out)
    return [data[k : k + _ID_LEN] for k in range(0, _ID_LEN * min(count, n), _ID_LEN)]


def _header_safe(value: str) -> bytes:
    """A free-text WARC header value: CR and LF (which could forge headers) become spaces."""
    if "\r" in value or "\n" in value:
        value = value.replace("\r", " ").replace("\n", " ")
    return value.encode("utf-8")


_URI_UNSAFE = re.compile(r"[\x00-\x20\x7f]")


def _uri_safe(url: str) -> bytes:
    """WARC-Target-URI: controls and spaces percent-encoded (canonical URLs have none)."""
    if _URI_UNSAFE.search(url):
        url = _URI_UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", url)
    return url.encode("utf-8")


_HOP_HEADERS: Final = {
    b"content-encoding": b"X-Crawler-Content-Encoding",
    b"transfer-encoding": b"X-Crawler-Transfer-Encoding",
    b"content-length": b"X-Crawler-Content-Length",
}


def _normalise_head(head: bytes) -> bytes:
    """A message head with CRLF line ends (bare LF ends repaired), ending with exactly one
    empty line."""
    head = head.rstrip(b"\r\n")
    if head.count(b"\n") != head.count(b"\r\n"):
        head = b"\r\n".join(line.rstrip(b"\r") for line in head.split(b"\n"))
    return head + _END


_WS: Final = rb"[ \t\x0b\x0c\r]*"  # what bytes.strip() removes, within one line
_ENCODING_LINE: Final = re.compile(
    rb"(?<=\r\n)" + _WS + rb"(?:content|transfer)-encoding" + _WS + rb":([^\n]*)", re.I
)
_HOP_LINE: Final = re.compile(
    rb"(?<=\r\n)" + _WS + rb"(content-encoding|transfer-encoding|content-length)" + _WS + b":",
    re.I,
)


def _hop_rename(m: re.Match[bytes]) -> bytes:
    return _HOP_HEADERS[m[1].lower()] + b":"


def _rewrite_decoded(head: bytes, body_len: int) -> bytes:
    """Rename Content-Encoding / Transfer-Encoding / Content-Length when the stored body is
    decoded and they would misdescribe it; add the stored body's Content-Length. `head` is
    normalised (CRLF line ends, one empty line at the end)."""
    if b"encoding" not in head.lower():  # the usual head: no line the regex could match, and
        return head  # scanning it costs ~4 µs (its look-behind is tried at every byte)
    for m in _ENCODING_LINE.finditer(head):
        value = m[1].strip().lower()
        if value and value != b"identity":
            break
    else:
        return head
    return _HOP_LINE.sub(_hop_rename, head)[:-2] + b"Content-Length: %d\r\n\r\n" % body_len


class RecordLocation(NamedTuple):
    """Where a response record was written: file name (final, without `.open`), offset and
    length of its gzip member (or of the record, uncompressed)."""

    filename: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class WarcStats:
    """A snapshot of a writer: files started, records written, bytes written (compressed)."""

    files: int
    records: int
    exchanges: int
    bytes: int
    current_file: str | None


_NAME = re.compile(r"^(?P<prefix>.+)-(?P<ts>\d{17})-(?P<seq>\d{5,})\.warc(?:\.gz)?(?:\.open)?$")

_RESPONSE_HEAD: Final = (
    b"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: %b\r\n%bWARC-Concurrent-To: %b\r\n"
    b"WARC-Payload-Digest: sha1:%b\r\n%bWARC-Block-Digest: sha1:%b\r\n"
    b"Content-Type: application/http;msgtype=response\r\nContent-Length: %d\r\n\r\n"
)
_REQUEST_HEAD: Final = (
    b"WARC/1.1\r\nWARC-Type: request\r\nWARC-Record-ID: %b\r\n%bWARC-Concurrent-To: %b\r\n"
    b"WARC-Payload-Digest: " + _EMPTY_DIGEST + b"\r\nWARC-Block-Digest: sha1:%b\r\n"
    b"Content-Type: application/http;msgtype=request\r\nContent-Length: %d\r\n\r\n"
)
_REVISIT_HEAD: Final = (
    b"WARC/1.1\r\nWARC-Type: revisit\r\nWARC-Record-ID: %b\r\n%bWARC-Concurrent-To: %b\r\n"
    b"WARC-Profile: http://netpreserve.org/warc/1.1/revisit/server-not-modified\r\n"
    b"WARC-Refers-To-Target-URI: %b\r\n%bWARC-Block-Digest: sha1:%b\r\n"
    b"Content-Type: application/http;msgtype=response\r\nContent-Length: %d\r\n\r\n"
)
#: WARC 1.1 §6.7.2: a payload identical (by its digest) to an earlier capture's; the block is
#: the HTTP head alone
_IDENTICAL_HEAD: Final = (
    b"WARC/1.1\r\nWARC-Type: revisit\r\nWARC-Record-ID: %b\r\n%bWARC-Concurrent-To: %b\r\n"
    b"WARC-Profile: http://netpreserve.org/warc/1.1/revisit/identical-payload-digest\r\n"
    b"WARC-Refers-To-Target-URI: %b\r\nWARC-Refers-To-Date: %b\r\n"
    b"WARC-Payload-Digest: sha1:%b\r\nWARC-Block-Digest: sha1:%b\r\n"
    b"Content-Type: application/http;msgtype=response\r\nContent-Length: %d\r\n\r\n"
)
_COMMON: Final = b"WARC-Date: %b\r\nWARC-Warcinfo-ID: %b\r\nWARC-Target-URI: %b\r\n%b"


class WarcWriter:
    """Writes exchanges as WARC 1.1 into `directory` (created if missing).

    - `prefix` names the files; give each process its own (e.g. `gossamer-w1`) when several
      write into one directory. Sequence numbers continue after the highest existing file of
      the same prefix.
    - `max_bytes`: a file is closed and a new one started once it reaches this size.
    - `gzip`: per-record gzip members (`.warc.gz`), else plain `.warc`.
    - `warcinfo`: fields for the warcinfo record that starts every file (software, format and
      conformsTo are added).
    - `compresslevel`: zlib level, 1 by default (ISA-L level 1: about zlib 1's ratio).
    - `cdx`: also write each file's CDXJ index, `cdx/<file>.cdxj`, sorted once the file is
      closed (`gossamer.sinks.cdx`: ~23 µs a record, where re-reading the file costs ~170).

    Not thread-safe: use it from one thread at a time (it may be a worker thread: compression
    and hashing release the GIL).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        prefix: str = "gossamer",
        max_bytes: int = 1 << 30,
        gzip: bool = True,
        warcinfo: Mapping[str, str] | None = None,
        compresslevel: int = 1,
        software: str = "gossamer",
        cdx: bool = False,
    ) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        if not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
            raise ValueError(f"prefix must be letters, digits, '.', '_' or '-': {prefix!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.gzip = gzip
        self._compress = _compressor(compresslevel) if gzip else None
        self._info_fields = dict(warcinfo or {})
        self._software = software
        self._seq = self._next_seq()
        self._fd: int | None = None
        self._path: Path | None = None  # the .open path
        self._name = ""  # its final name
        self._size = 0
        self._warcinfo_id = b""
        self._ids: list[bytes] = []
        self._files = self._records = self._exchanges = self._bytes = 0
        self._closed = False
        self._cdx = cdx
        self._cdx_part: CdxPart | None = None

    # ------------------------------------------------------------------ files
    def _next_seq(self) -> int:
        top = -1
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m and m["prefix"] == self.prefix:
                top = max(top, int(m["seq"]))
        return top + 1

    def _final_name(self) -> str:
        now = dt.datetime.now(dt.UTC)
        stamp = now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"
        ext = ".warc.gz" if self.gzip else ".warc"
        return f"{self.prefix}-{stamp}-{self._seq:05d}{ext}"

    def _record_id(self) -> bytes:
        ids = self._ids
        if not ids:
            ids.extend(_record_ids())
        return ids.pop()

    def _open_next(self) -> None:
        name = self._final_name()
        self._seq += 1
        path = self.directory / (name + OPEN_SUFFIX)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._fd, self._path, self._name, self._size = fd, path, name, 0
        if self._cdx:
            try:
                self._cdx_part = CdxPart(self.directory / CDX_PARTS, name)
            except OSError:  # no per-file index: the crawl's index re-reads this file
                self._cdx_part = None
        self._warcinfo_id = self._record_id()
        fields = {
            "software": self._software,
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
            "warc-format/warc-1.1/",
            **self._info_fields,
        }
        block = b"".join(
            _header_safe(k) + b": " + _header_safe(str(v)) + _CRLF for k, v in fields.items()
        )
        record = self._record(
            b"warcinfo",
            self._warcinfo_id,
            _warc_date(time.time()),
            [(b"WARC-Filename", name.encode())],
            b"application/warc-fields",
            block,
            link_warcinfo=False,
        )
        try:
            self._write(self._member(record))
        except BaseException:
            # no file without its warcinfo: the next exchange starts a new one
            self._fd = self._path = None
            if self._cdx_part is not None:
                self._cdx_part.broken = True
                self._cdx_part.finish()
                self._cdx_part = None
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        self._files += 1
        self._records += 1

    def _finish_file(self) -> None:
        fd, path = self._fd, self._path
        if fd is None or path is None:
            return
        self._fd = self._path = None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(path, path.with_name(path.name[: -len(OPEN_SUFFIX)]))
        part, self._cdx_part = self._cdx_part, None
        if part is not None:  # after the rename: an index is only ever of a closed file
            part.finish()

    def _write(self, data: bytes) -> int:
        """Append `data` to the open file; on failure, cut the file back to where it was."""
        fd = self._fd
        assert fd is not None
        start = self._size
        try:
            n = os.write(fd, data)
            if n < len(data):
                view = memoryview(data)[n:]
                while view:
                    view = view[os.write(fd, view) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise
        self._size = start + len(data)
        self._bytes += len(data)
        return start

    # ------------------------------------------------------------------ records
    def _member(self, record: bytes) -> bytes:
        return self._compress(record) if self._compress is not None else record

    def _record(
        self,
        warc_type: bytes,
        record_id: bytes,
        date: bytes,
        extra: list[tuple[bytes, bytes]],
        content_type: bytes,
        block: bytes,
        *,
        link_warcinfo: bool = True,
        block_digest: bytes | None = None,
    ) -> bytes:
        lines = [
            b"WARC/1.1",
            b"WARC-Type: " + warc_type,
            b"WARC-Record-ID: " + record_id,
            b"WARC-Date: " + date,
        ]
        if link_warcinfo:
            lines.append(b"WARC-Warcinfo-ID: " + self._warcinfo_id)
        lines.extend(k + b": " + v for k, v in extra)
        if block_digest is not None:
            lines.append(b"WARC-Block-Digest: " + block_digest)
        lines.append(b"Content-Type: " + content_type)
        lines.append(b"Content-Length: " + str(len(block)).encode("ascii"))
        return _CRLF.join(lines) + _END + block + _END

    def write_exchange(
        self,
        url: str,
        ip: str | None,
        request_head: bytes,
        response_head: bytes,
        body: bytes,
        fetched_at: float,
        truncated: bool | str = False,
        *,
        decoded: bool = True,
        revisit: bool = False,
        refers_to_date: str | None = None,
        payload_sha1: bytes | None = None,
        identical_to: tuple[str, float] | None = None,
    ) -> RecordLocation:
        """Write a response record and its request record; returns where the response went.

        `request_head` / `response_head`: the request and status line + headers as sent and
        received; `body`: the payload (decoded unless `decoded=False`, see the module
        docstring); `fetched_at`: time.time() of the request; `truncated`: True (the size
        limit: `length`) or a WARC-Truncated reason (`time`, `disconnect`, ...); `revisit`:
        write the response as a server-not-modified `revisit` record (a 304), referring to
        the capture made at `refers_to_date` (a WARC-Date text) when given.
        `payload_sha1`: the body's SHA-1 (20 bytes), when the caller has it already;
        `identical_to`: (URI, time.time() of its fetch) of an earlier capture of the same
        payload: the response is written as an identical-payload-digest `revisit` record,
        its HTTP head kept, its payload left out."""
        if self._closed:
            raise ValueError("write to a closed WarcWriter")
        ip_line = b"WARC-IP-Address: %b\r\n" % ip.encode("ascii", "replace") if ip else b""
        if truncated:
            reason = truncated if isinstance(truncated, str) else "length"
            trunc_line = b"WARC-Truncated: %b\r\n" % reason.encode("ascii")
        else:
            trunc_line = b""
        target = _uri_safe(url)
        if self._fd is None:
            self._open_next()
        resp_head = _normalise_head(response_head)
        if decoded:
            resp_head = _rewrite_decoded(resp_head, len(body))
        req_head = _normalise_head(request_head)
        resp_id, req_id = self._record_id(), self._record_id()
        warc_date = _warc_date(fetched_at)
        common = _COMMON % (warc_date, self._warcinfo_id, target, ip_line)
        block = hashlib.sha1(resp_head)
        payload_b32 = b""
        if identical_to is not None:
            if payload_sha1 is None:
                payload_sha1 = hashlib.sha1(body).digest()
            payload_b32 = _b32(payload_sha1)
            head = _IDENTICAL_HEAD % (
                resp_id,
                common,
                req_id,
                _uri_safe(identical_to[0]),
                _warc_date(identical_to[1]),
                payload_b32,
                _b32(block.digest()),
                len(resp_head),
            )
            body = b""
        elif revisit:
            block.update(body)
            date = refers_to_date.encode("ascii", "replace") if refers_to_date else b""
            head = _REVISIT_HEAD % (
                resp_id,
                common,
                req_id,
                target,
                b"WARC-Refers-To-Date: %b\r\n" % date if date else b"",
                _b32(block.digest()),
                len(resp_head) + len(body),
            )
        else:
            block.update(body)
            if payload_sha1 is None:
                payload_sha1 = hashlib.sha1(body).digest()
            payload_b32 = _b32(payload_sha1)
            head = _RESPONSE_HEAD % (
                resp_id,
                common,
                req_id,
                payload_b32,
                trunc_line,
                _b32(block.digest()),
                len(resp_head) + len(body),
            )
        response = b"".join((head, resp_head, body, _END))
        request = (
            _REQUEST_HEAD
            % (req_id, common, resp_id, _b32(hashlib.sha1(req_head).digest()), len(req_head))
            + req_head
            + _END
        )
        compress = self._compress
        if compress is not None:
            response, request = compress(response), compress(request)
        start = self._write(response + request)
        part = self._cdx_part
        if part is not None:
            status, mime = http_status_and_mime(resp_head)
            digest = None
            if revisit or identical_to is not None:  # cdxj-indexer: this mime
                mime = "warc/revisit"
            if payload_b32:  # (a 304's revisit has no payload digest)
                digest = "sha1:" + payload_b32.decode("ascii")
            part.add(
                cdxj_line(
                    target.decode("utf-8"),
                    warc_date.decode("ascii"),
                    mime,
                    status,
                    digest,
                    # warcio's length of a plain record leaves out its closing CRLFCRLF
                    len(response) if compress is not None else len(response) - len(_END),
                    start,
                    self._name,
                )
            )
        self._records += 2
        self._exchanges += 1
        location = RecordLocation(self._name, start, len(response))
        if self._size >= self.max_bytes:
            self._finish_file()
        return location

    # ------------------------------------------------------------------ control
    def flush(self) -> None:
        """Make everything written durable (fsync); records are handed to the OS at once
        anyway, so this is only needed against power loss."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Finish the current file (fsync, rename from `.open`). Idempotent."""
        self._closed = True
        self._finish_file()

    def statistics(self) -> WarcStats:
        return WarcStats(
            files=self._files,
            records=self._records,
            exchanges=self._exchanges,
            bytes=self._bytes,
            current_file=self._name if self._path is not None else None,
        )

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------- recovery
@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What `recover` did: files renamed, files deleted (no complete record), records kept,
    bytes cut off."""

    recovered: tuple[str, ...]
    deleted: tuple[str, ...]
    records: int
    bytes_dropped: int


def _record_complete(data: bytes) -> bool:
    """True when `data` is exactly one whole WARC record (header, block, CRLFCRLF)."""
    head_end = data.find(_END)
    if not data.startswith(b"WARC/") or head_end < 0:
        return False
    m = re.search(rb"\r\nContent-Length:[ \t]*(\d+)", data[: head_end + 2], re.I)
    if m is None:
        return False
    return len(data) == head_end + 4 + int(m.group(1)) + 4 and data.endswith(_END)


def _is_warcinfo(data: bytes) -> bool:
    return b"\r\nWARC-Type: warcinfo\r\n" in data[: data.find(_END) + 2]


_CHUNK: Final = 1 << 16


def _scan_gzip(data: memoryview) -> tuple[int, int, int]:
    """(end of the last complete record, records, non-warcinfo records) of gzip members.
    Streams each member in chunks, so a 1 GiB file is read once, not copied per record."""
    n = len(data)
    good = records = payload = 0
    pos = 0
    while pos < n:
        d = zlib.decompressobj(wbits=31)
        parts: list[bytes] = []
        p = pos
        try:
            while not d.eof and p < n:
                chunk = data[p : p + _CHUNK]
                parts.append(d.decompress(chunk))
                p += len(chunk)
        except zlib.error:
            break
        record = b"".join(parts)
        if not d.eof or not _record_complete(record):
            break
        pos = good = p - len(d.unused_data)
        records += 1
        payload += not _is_warcinfo(record)
    return good, records, payload


def _scan_plain(data: memoryview) -> tuple[int, int, int]:
    raw = data.obj
    assert isinstance(raw, mmap.mmap)
    n = len(data)
    good = records = payload = pos = 0
    while pos < n:
        head_end = raw.find(_END, pos)
        if head_end < 0:
            break
        m = re.search(rb"\r\nContent-Length:[ \t]*(\d+)", bytes(data[pos : head_end + 2]), re.I)
        if m is None:
            break
        end = head_end + 4 + int(m.group(1)) + 4
        record = bytes(data[pos:end])
        if end > n or not _record_complete(record):
            break
        payload += not _is_warcinfo(record)
        pos = good = end
        records += 1
    return good, records, payload


def _scan(path: Path) -> tuple[int, int, int]:
    if path.stat().st_size == 0:
        return 0, 0, 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            if path.name.endswith(".gz" + OPEN_SUFFIX):
                return _scan_gzip(view)
            return _scan_plain(view)
        finally:
            view.release()


def recover(directory: str | os.PathLike[str]) -> RecoveryReport:
    """Repair the `.open` WARC files a killed writer left in `directory`: cut each after its
    last complete record, fsync it and rename it to its final name; delete it when it holds no
    record besides its warcinfo. Call it when no writer is using the directory (before a
    resume). Files already closed are not touched."""
    recovered: list[str] = []
    deleted: list[str] = []
    kept = dropped = 0
    for path in sorted(Path(directory).glob("*.warc*" + OPEN_SUFFIX)):
        good, records, payload = _scan(path)
        size = path.stat().st_size
        if payload == 0:
            path.unlink()
            deleted.append(path.name)
            dropped += size
            continue
        with open(path, "r+b") as f:
            f.truncate(good)
            f.flush()
            os.fsync(f.fileno())
        final = path.with_name(path.name[: -len(OPEN_SUFFIX)])
        os.replace(path, final)
        recovered.append(final.name)
        kept += records
        dropped += size - good
    return RecoveryReport(tuple(recovered), tuple(deleted), kept, dropped)
