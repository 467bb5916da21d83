"""write_stats: JSON content, non-JSON values, atomic replacement."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

import pytest

from gossamer.sinks import read_stats, write_stats


@dataclasses.dataclass(frozen=True)
class Snapshot:
    pages: int
    hosts: frozenset[str]


def test_writes_json_with_dataclasses_sets_paths_and_counters(tmp_path: Path) -> None:
    path = tmp_path / "out" / "stats.json"
    write_stats(
        path,
        {
            "pages": 10,
            "pages_per_s": 1234.5,
            "frontier": Snapshot(pages=3, hosts=frozenset({"b", "a"})),
            "errors": Counter({"fetch/error/timeout": 2}),
            "output": tmp_path,
            "hosts": {"z", "y"},
        },
    )
    data = read_stats(path)
    assert data["pages"] == 10 and data["pages_per_s"] == 1234.5
    assert data["frontier"] == {"pages": 3, "hosts": ["a", "b"]}
    assert data["errors"] == {"fetch/error/timeout": 2}
    assert data["output"] == str(tmp_path) and data["hosts"] == ["y", "z"]


def test_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    write_stats(path, {"run": 1})
    inode = path.stat().st_ino
    write_stats(path, {"run": 2})
    assert read_stats(path) == {"run": 2}
    assert path.stat().st_ino != inode  # a new file renamed over the old one
    assert os.listdir(tmp_path) == ["stats.json"]


def test_unserialisable_value_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    write_stats(path, {"run": 1})
    with pytest.raises(TypeError, match="object"):
        write_stats(path, {"run": 2, "bad": object()})
    assert read_stats(path) == {"run": 1}
    assert os.listdir(tmp_path) == ["stats.json"]


def test_read_stats_requires_an_object(tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_stats(path)
