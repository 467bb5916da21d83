"""Diagnostics as `logging` records, and how the `gossamer` command shows them.

Library code logs to its module's logger (all under `gossamer`) and never configures logging:
importing gossamer installs no handler. Only the command (cli.py) calls `configure`: `human`
lines (`gossamer: error: MESSAGE`) or `json` objects, one a line, on stderr. A crawl also
appends its diagnostics to `DIR/gossamer.log.jsonl` (`CrawlDir.diagnostics`;
`diagnostics_file`) for the dashboard's
log tail. A command's output (report, status, `--json`, the progress display) is `print`, not
a diagnostic. Levels: error, the command (or part of its work) fails; warning, something is
wrong and worked around; info, progress worth a line (docs/crawler.md, "Diagnostics")."""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TextIO

from .crawldir import CrawlDir

FORMATS = ("human", "json")
LEVELS = ("debug", "info", "warning", "error")
FORMAT_ENV = "GOSSAMER_LOG_FORMAT"
LEVEL_ENV = "GOSSAMER_LOG_LEVEL"
ROOT = "gossamer"

# a record's own attributes: whatever else it carries came in `extra=`
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",  # Python 3.12+
}


def _utc(epoch: float) -> str:
    """ISO 8601 UTC with milliseconds and a Z, as the crawl log's `time` and progress's `ts`."""
    ms = int(epoch * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{ms:03d}Z"


class HumanFormatter(logging.Formatter):
    """`gossamer: error: MESSAGE` (ERROR and above) or `gossamer: MESSAGE`: the command's lines
    from before it logged, byte for byte (tests and docs quote them)."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = "gossamer: error: " if record.levelno >= logging.ERROR else "gossamer: "
        text = prefix + record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object: ts, level (lower case), logger, message, the `extra=` fields, and the
    traceback as `exception` when there is one. Values JSON cannot hold are written as str."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": _utc(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to `sys.stderr` as it is when a record comes (a test's capture, a stream the
    program swapped in), not the one there was when the handler was made."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # Handler.handle holds the handler's lock here
        super().emit(record)


_installed: _StderrHandler | None = None
_chosen: tuple[str, str] | None = None


def check(format: str | None, level: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """(format, level): the flags' values, else GOSSAMER_LOG_FORMAT / GOSSAMER_LOG_LEVEL, else
    human / info. Raises ValueError naming the bad value and where it came from."""

    def pick(given: str | None, var: str, default: str, allowed: tuple[str, ...]) -> str:
        source, value = ("", given) if given else (f"${var}: ", environ.get(var) or default)
        if value.strip().lower() not in allowed:
            raise ValueError(f"{source}{value!r} is not one of {', '.join(allowed)}")
        return value.strip().lower()

    return pick(format, FORMAT_ENV, "human", FORMATS), pick(level, LEVEL_ENV, "info", LEVELS)


def configure(format: str = "human", level: str = "info") -> None:
    """Show the `gossamer` loggers' records of `level` and above on standard error in `format`
    (see FORMATS). For the command's use: calling it again replaces the previous choice. A
    forked process (a pool's worker) keeps it; `child_env()` hands it to a subprocess."""
    global _installed, _chosen
    fmt, lvl = check(format, level, {})
    logger = logging.getLogger(ROOT)
    if _installed is not None:
        logger.removeHandler(_installed)
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else HumanFormatter())
    logger.addHandler(handler)
    logger.setLevel(lvl.upper())
    _installed, _chosen = handler, (fmt, lvl)


def child_env() -> dict[str, str]:
    """The environment variables that make a `gossamer` subprocess log as this process was
    configured to (nothing when `configure` was not called: the child then decides alone)."""
    if _chosen is None:
        return {}
    return {FORMAT_ENV: _chosen[0], LEVEL_ENV: _chosen[1]}


def unconfigure() -> None:
    """Remove what `configure` installed (the `gossamer` logger's handler and level): for a
    program or test that called `configure` and hands logging back."""
    global _installed, _chosen
    logger = logging.getLogger(ROOT)
    if _installed is not None:
        logger.removeHandler(_installed)
    logger.setLevel(logging.NOTSET)
    _installed, _chosen = None, None


def process_worker_id() -> str:
    """This process's worker id in an embedded crawl: a pool worker's process name (`w0`,
    `w1`, …: runner/pool.py names them so), `main` for the crawl's own process."""
    name = multiprocessing.current_process().name
    return "main" if name == "MainProcess" else name


class DiagnosticsFormatter(JsonFormatter):
    """The `json` format plus `time` (Unix seconds, for readers that sort and compare) and
    `worker`: the one given, else the record's `worker_id` extra, else `process_worker_id()`
    (taken when the record is written: a forked pool worker inherits the handler)."""

    def __init__(self, worker: str | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        entry = json.loads(super().format(record))
        entry["time"] = round(record.created, 6)
        entry["worker"] = (
            self.worker or getattr(record, "worker_id", None) or process_worker_id()
        )
        return json.dumps(entry, default=str, ensure_ascii=False)


@contextlib.contextmanager
def diagnostics_file(directory: Path, worker: str | None = None) -> Iterator[Path]:
    """While inside: the `gossamer` loggers' records (those the logger's level lets through)
    are also appended to the crawl directory's diagnostics file, one JSON object a line.
    Appended (O_APPEND): the processes of a pool, which inherit the handler when forked, add
    whole lines to the one file. A write that fails (disk full) is reported once by logging's
    handleError on stderr and does not stop the crawl."""
    path = CrawlDir(directory).diagnostics
    handler = logging.FileHandler(path, mode="a", encoding="utf-8", delay=True)
    handler.setFormatter(DiagnosticsFormatter(worker))
    logger = logging.getLogger(ROOT)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
