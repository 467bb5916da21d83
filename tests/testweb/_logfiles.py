"""Writing request logs from `LogRecord`s, for the reader and audit tests."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gossamer.testweb import LogRecord, WebSpec
from gossamer.testweb._auditlog import AuditLogWriter


def write_log(path: Path, spec: WebSpec, records: Iterable[LogRecord]) -> Path:
    """A server-format log of `records` for the web `spec`, closed and complete."""
    w = AuditLogWriter(path, spec.to_json())
    for r in records:
        w.write(
            r.start_us, r.end_us, r.conn, r.ip, r.host, r.method, r.target, r.status, r.bytes,
            r.outcome, r.ua, r.ims, r.inm, r.ae,
        )  # fmt: skip
    w.close()
    return path
