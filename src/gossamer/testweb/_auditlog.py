"""The simulated web's audit log (writer): one line per request the server answered or
abandoned, after a first line that carries the web's spec, so the audit needs nothing else.

Format v1, UTF-8, tab-separated: `start_us end_us conn ip host method target status bytes
outcome ua ims inm ae`; empty values are `-`, and backslash, tab, CR and LF are escaped. Each
field's meaning: docs/testweb.md, "The audit log"; the reader is testweb/_logread.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO

LOG_MAGIC = "#gossamer-testweb-log"
LOG_VERSION = "v1"
LOG_FIELDS = (
    "start_us",
    "end_us",
    "conn",
    "ip",
    "host",
    "method",
    "target",
    "status",
    "bytes",
    "outcome",
    "ua",
    "ims",
    "inm",
    "ae",
)
OUTCOMES = ("ok", "reset", "hang", "aborted")
FLUSH_INTERVAL_S = 0.5

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\r": "\\r", "\n": "\\n"})


def escape_field(value: str) -> str:
    """A log field: `-` when empty, backslash, tab, CR and LF escaped."""
    if not value:
        return "-"
    if "\\" in value or "\t" in value or "\r" in value or "\n" in value:
        return value.translate(_ESCAPES)
    return value


def header_line(spec_json: str) -> str:
    return f"{LOG_MAGIC}\t{LOG_VERSION}\t{spec_json}\n"


class AuditLogWriter:
    """Appends request lines to a log file, buffered.

    `write()` only appends to a list; the owner calls `maybe_flush()` often (the server does it
    on a 0.5 s timer) and `close()` at stop. Single-threaded: call it from the event loop only.
    """

    __slots__ = ("_buf", "_file", "_last_flush", "lines_written", "path")

    def __init__(self, path: str | Path, spec_json: str) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8", newline="\n")
        self._file.write(header_line(spec_json))
        self._file.flush()
        self._buf: list[str] = []
        self._last_flush = time.monotonic()
        self.lines_written = 0

    def write(
        self,
        start_us: int,
        end_us: int,
        conn: str,
        ip: str,
        host: str,
        method: str,
        target: str,
        status: int,
        nbytes: int,
        outcome: str,
        ua: str,
        ims: str,
        inm: str,
        ae: str,
    ) -> None:
        esc = escape_field
        self._buf.append(
            f"{start_us}\t{end_us}\t{conn}\t{ip}\t{esc(host)}\t{esc(method)}\t{esc(target)}\t"
            f"{status}\t{nbytes}\t{outcome}\t{esc(ua)}\t{esc(ims)}\t{esc(inm)}\t{esc(ae)}\n"
        )

    def maybe_flush(self) -> None:
        """Flush when the last flush is older than FLUSH_INTERVAL_S."""
        if time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        f = self._file
        if f is None:
            return
        if self._buf:
            f.write("".join(self._buf))
            self.lines_written += len(self._buf)
            self._buf.clear()
        f.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        if self._file is None:
            return
        self.flush()
        self._file.close()
        self._file = None

    @property
    def closed(self) -> bool:
        return self._file is None
