"""Reading request logs: the simulated web's own audit log and nginx access logs.

Both become `LogRecord`s: the server's log (its first line names the web), and nginx access
logs written with the `gossamer` log format (start = `$msec − $request_time`, status 499 is
`aborted`). A multi-process server writes `<log>.<k>` beside `<log>`: `expand_log_paths` finds
them and `read_logs` merges every file by request start time; unreadable lines (a killed
server's torn last line) are skipped and counted. Formats: docs/testweb.md, "Logs"."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._auditlog import LOG_MAGIC, LOG_VERSION, OUTCOMES, escape_field
from ._spec import WebSpec


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One request as the server saw it. Times are wall-clock microseconds."""

    start_us: int  # request head fully received
    end_us: int  # last byte written (or reset / close)
    conn: str  # client connection id, unique within the log
    ip: str  # local address the client connected to
    host: str  # Host header, lower case, no port; "" when missing
    method: str
    target: str  # request target as received
    status: int  # 0: no status line was sent
    bytes: int
    outcome: str  # ok | reset | hang | aborted
    ua: str = ""
    ims: str = ""
    inm: str = ""
    ae: str = ""

    @property
    def start(self) -> float:
        return self.start_us / 1e6

    @property
    def end(self) -> float:
        return self.end_us / 1e6


@dataclass(frozen=True, slots=True)
class LogSet:
    """Records of one or more log files, sorted by (start, end, file order)."""

    spec: WebSpec | None  # from the server log header; None for nginx logs
    records: tuple[LogRecord, ...]
    files: tuple[str, ...]
    malformed: int  # lines that could not be read (e.g. a torn last line)
    formats: tuple[str, ...]  # "server" or "nginx", per file


def _unescape_server(value: str) -> str:
    if value == "-":
        return ""
    if "\\" not in value:
        return value
    out = []
    i = 0
    n = len(value)
    while i < n:
        c = value[i]
        if c == "\\" and i + 1 < n:
            nxt = value[i + 1]
            out.append({"\\": "\\", "t": "\t", "r": "\r", "n": "\n"}.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


_NGINX_HEX = re.compile(r"\\x([0-9A-Fa-f]{2})")


def _unescape_nginx(value: str) -> str:
    if value == "-":
        return ""
    if "\\x" not in value:
        return value
    raw = _NGINX_HEX.sub(lambda m: chr(int(m.group(1), 16)), value)
    # nginx escapes bytes, so multi-byte UTF-8 arrives as several \xHH: rebuild the bytes
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def format_record(r: LogRecord) -> str:
    """The server-log line of a record (without the newline)."""
    fields = [
        str(r.start_us),
        str(r.end_us),
        escape_field(r.conn),
        escape_field(r.ip),
        escape_field(r.host),
        escape_field(r.method),
        escape_field(r.target),
        str(r.status),
        str(r.bytes),
        r.outcome,
        escape_field(r.ua),
        escape_field(r.ims),
        escape_field(r.inm),
        escape_field(r.ae),
    ]
    return "\t".join(fields)


def _parse_server(line: str) -> LogRecord | None:
    f = line.split("\t")
    if len(f) != 14:
        return None
    try:
        start, end, status, size = int(f[0]), int(f[1]), int(f[7]), int(f[8])
    except ValueError:
        return None
    if f[9] not in OUTCOMES:
        return None
    u = _unescape_server
    return LogRecord(
        start,
        end,
        u(f[2]),
        u(f[3]),
        u(f[4]).lower(),
        u(f[5]),
        u(f[6]),
        status,
        size,
        f[9],
        u(f[10]),
        u(f[11]),
        u(f[12]),
        u(f[13]),
    )


def _parse_nginx(line: str) -> LogRecord | None:
    f = line.split("\t")
    if len(f) != 12:
        return None
    try:
        end = round(float(f[0]) * 1_000_000)
        took = round(float(f[1]) * 1_000_000)
        status = int(f[7])
        size = int(f[8])
    except ValueError:
        return None
    u = _unescape_nginx
    return LogRecord(
        end - took,
        end,
        f"nginx-{f[2]}",
        u(f[3]),
        u(f[4]).lower().rstrip("."),
        u(f[5]),
        u(f[6]),
        status,
        size,
        "aborted" if status == 499 else "ok",
        u(f[9]),
        u(f[10]),
        u(f[11]),
        "",
    )


def read_log(path: str | Path) -> tuple[WebSpec | None, list[LogRecord], int, str]:
    """(spec from the header or None, records in file order, malformed lines, format)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read log {path}: {exc.strerror}") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    spec: WebSpec | None = None
    fmt = "nginx"
    parse = _parse_nginx
    if lines and lines[0].startswith(LOG_MAGIC):
        fmt = "server"
        parse = _parse_server
        head = lines.pop(0).split("\t", 2)
        if len(head) != 3 or head[1] != LOG_VERSION:
            raise ValueError(f"{path}: unsupported log header (expected {LOG_VERSION})")
        try:
            spec = WebSpec.from_json(head[2])
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}: bad web spec in the log header: {exc}") from exc
    records = []
    malformed = 0
    for line in lines:
        line = line.rstrip("\r") if fmt == "nginx" else line
        if not line:
            continue
        rec = parse(line)
        if rec is None:
            malformed += 1
        else:
            records.append(rec)
    return spec, records, malformed, fmt


_PART = re.compile(r"\.(\d+)$")


def expand_log_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Each path, plus its `<path>.<k>` siblings (files of a multi-process server), in
    order, without duplicates. A path that does not exist but has siblings is fine."""
    out: dict[Path, None] = {}
    for p in map(Path, paths):
        parent = p.parent if str(p.parent) else Path(".")
        parts = []
        if parent.is_dir():
            parts = [
                q
                for q in parent.iterdir()
                if q.name.startswith(p.name + ".") and _PART.fullmatch(q.name[len(p.name) :])
            ]
        parts.sort(key=lambda q: int(q.name[len(p.name) + 1 :]))
        if p.exists() or not parts:
            out[p] = None
        for q in parts:
            out[q] = None
    return list(out)


def read_logs(paths: Sequence[str | Path], *, expand: bool = True) -> LogSet:
    """Read and merge logs (server or nginx format, detected per file) by start time.

    Raises ValueError when a file cannot be read or two server logs name different webs."""
    files = expand_log_paths(paths) if expand else [Path(p) for p in paths]
    if not files:
        raise ValueError("no log files given")
    spec: WebSpec | None = None
    keyed: list[tuple[int, int, int, int, LogRecord]] = []
    malformed = 0
    formats = []
    for fi, path in enumerate(files):
        file_spec, records, bad, fmt = read_log(path)
        formats.append(fmt)
        malformed += bad
        if file_spec is not None:
            if spec is not None and file_spec != spec:
                raise ValueError(f"{path}: its web spec differs from the other logs'")
            spec = file_spec
        keyed.extend((r.start_us, r.end_us, fi, n, r) for n, r in enumerate(records))
    keyed.sort(key=lambda k: k[:4])
    return LogSet(
        spec,
        tuple(k[4] for k in keyed),
        tuple(str(f) for f in files),
        malformed,
        tuple(formats),
    )
