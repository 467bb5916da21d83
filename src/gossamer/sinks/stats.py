"""The final statistics file: one JSON object, written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["read_stats", "write_stats"]


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
