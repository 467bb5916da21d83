"""The final statistics file (one JSON object, written atomically) and the run history (one
JSON line per start and end of a run, appended)."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["append_run_record", "read_run_records", "read_stats", "write_stats"]


def _default(value: Any) -> Any:
    """JSON for what json cannot write itself: dataclasses (their fields), sets (sorted
    lists), paths (strings), Counters and other mappings (objects)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"cannot write {type(value).__name__} to the statistics JSON")


def write_stats(path: str | os.PathLike[str], stats: Mapping[str, Any]) -> None:
    """Write `stats` as indented JSON to `path`, atomically: a temporary file in the same
    directory, fsynced, then renamed over `path`, so a reader (or a crash) sees the old file
    or the new one, never a part. Raises TypeError for values JSON cannot hold."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(stats, indent=2, sort_keys=False, default=_default, ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_stats(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The statistics object written by `write_stats`."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def append_run_record(path: str | os.PathLike[str], record: Mapping[str, Any]) -> None:
    """Append `record` as one JSON line to the run history `path`, in one `write` on an
    `O_APPEND` descriptor: a kill leaves at most a torn last line, which `read_run_records`
    skips (and the next record starts on a line of its own). Raises TypeError for values JSON
    cannot hold, OSError when the file cannot be written."""
    line = json.dumps(record, default=_default, ensure_ascii=False, separators=(",", ":"))
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (("\n" if torn else "") + line + "\n").encode())
    finally:
        os.close(fd)


def read_run_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a run history, in file order; torn or foreign lines are skipped. An
    empty list when there is no such file (a crawl made before run histories were kept)."""
    try:
        with open(path, "rb") as f:
            raw_lines = f.readlines()
    except FileNotFoundError:
        return []
    records = []
    for raw in raw_lines:
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records
