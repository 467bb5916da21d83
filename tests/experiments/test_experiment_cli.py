"""`gossamer experiment … --quick` through the real command: outputs exist, PNGs are valid,
partition functions are total and disjoint, and every figure agrees with the loads it came
from."""

from __future__ import annotations

import json
import math
import statistics
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

GOSSAMER = str(Path(sys.executable).parent / "gossamer")
FILES = {
    "kspider": [
        "kspider.json",
        "kspider.md",
        "kspider-fig9-nodes.png",
        "kspider-fig10-phases.png",
        "kspider-cv.png",
        "kspider-sum-range.png",
    ],
    "hash-url": ["hash-url.json", "hash-url.md", "hash-url-std.png"],
}


def _gossamer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GOSSAMER, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `experiment kspider hash-url --quick` run shared by the module's tests (the
    crawl experiments have their own tests: test_crawl_experiments.py)."""
    d = tmp_path_factory.mktemp("experiments")
    done = _gossamer("experiment", *FILES, "--quick", "-o", str(d))
    assert done.returncode == 0, done.stderr
    for name in FILES:
        assert f"{name}: " in done.stdout
    return d


def _load(out: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"{name}.json").read_text())
    return data


def assert_valid_png(path: Path) -> None:
    """PNG signature, an IHDR first, every chunk's CRC right, IEND last."""
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, kinds = 8, []
    while pos < len(blob):
        (length,) = struct.unpack(">I", blob[pos : pos + 4])
        kind = blob[pos + 4 : pos + 8]
        body = blob[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", blob[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"{path}: bad CRC in {kind!r}"
        kinds.append(kind)
        pos += 12 + length
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds, path
    width, height = struct.unpack(">II", blob[16:24])
    assert width > 100 and height > 100


def assert_stats_match(entry: dict[str, Any]) -> None:
    """Recorded statistics are those of the recorded loads."""
    loads = entry["loads"]
    mean = sum(loads) / len(loads)
    assert entry["total"] == sum(loads)
    assert entry["max"] == max(loads) and entry["min"] == min(loads)
    assert math.isclose(entry["mean"], mean)
    assert math.isclose(entry["max_over_mean"], max(loads) / mean)
    assert math.isclose(entry["std"], statistics.pstdev(loads), abs_tol=1e-9)
    assert math.isclose(entry["cv"], statistics.pstdev(loads) / mean, abs_tol=1e-12)


def test_every_output_exists_and_pngs_are_valid(out: Path) -> None:
    for files in FILES.values():
        for f in files:
            assert (out / f).stat().st_size > 0, f
            if f.endswith(".png"):
                assert_valid_png(out / f)
            if f.endswith(".md"):
                assert "|---|" in (out / f).read_text()  # it has tables


def test_kspider_nodes_are_total_disjoint_and_consistent(out: Path) -> None:
    data = _load(out, "kspider")
    urls, hosts = data["corpus"]["urls"], data["corpus"]["hosts"]
    assert data["quick"] is True and urls >= 20_000
    nodes = data["nodes"]
    assert nodes["sizes"] == list(range(2, 11))
    for key, method in nodes["methods"].items():
        for n in nodes["sizes"]:
            e = method["per_n"][str(n)]
            assert len(e["loads"]) == n
            assert_stats_match(e)
            assert e["total"] == urls, (key, n)
            check = e["check"]
            assert check["total_and_disjoint"], (key, n, check)
            assert check["urls_assigned"] == check["urls_total"] == urls
            if key != "url-sum":
                assert check["size"] == hosts
            if "shard_check" in e:
                assert e["shard_check"]["total_and_disjoint"] and e["shard_check"]["size"] == 1024
                assert e["shards"]["total"] == 1024
    # a URL partition balances far better than any host partition on heavy-tailed sites
    ten = {k: m["per_n"]["10"]["cv"] for k, m in nodes["methods"].items()}
    assert ten["url-sum"] < min(ten["host-sum"], ten["xxh3-modulo"], ten["consistent"]) / 3
    for n in nodes["sizes"]:
        b = nodes["bounds"][str(n)]
        for key in ("host-sum", "xxh3-modulo", "consistent"):
            assert nodes["methods"][key]["per_n"][str(n)]["max_over_mean"] >= (
                b["host_partition_floor_max_over_mean"] - 1e-12
            )
        s = b["salted_xxh3_modulo_cv"]
        assert s["min"] <= s["p10"] <= s["mean"] <= s["max"] and s["p10"] <= s["p90"]


def test_kspider_phases_and_figure3_agree_with_the_node_loads(out: Path) -> None:
    data = _load(out, "kspider")
    urls, hosts = data["corpus"]["urls"], data["corpus"]["hosts"]
    phases = data["phases"]
    for key, method in phases["methods"].items():
        for p in phases["sizes"]:
            e = method["per_p"][str(p)]
            assert_stats_match(e["urls"])
            assert_stats_match(e["hosts"])
            assert e["urls"]["total"] == urls and e["hosts"]["total"] == hosts
            assert e["check"]["total_and_disjoint"], (key, p)
    nodes = data["nodes"]["methods"]
    # eq. 2 over P phases is the host sum at N = P; gossamer's phases are its modulo shards
    for p in phases["sizes"]:
        assert (
            phases["methods"]["host-sum"]["per_p"][str(p)]["urls"]["loads"]
            == (nodes["host-sum"]["per_n"][str(p)]["loads"])
        )
        assert (
            phases["methods"]["gossamer-phase"]["per_p"][str(p)]["urls"]["loads"]
            == (nodes["xxh3-modulo"]["per_n"][str(p)]["loads"])
        )
    f3 = data["figure3"]["urls"]
    assert sum(map(sum, f3)) == urls
    assert [sum(row) for row in f3] == nodes["url-sum"]["per_n"]["5"]["loads"]
    columns = [sum(col) for col in zip(*f3, strict=True)]
    assert columns == phases["methods"]["host-sum"]["per_p"]["6"]["urls"]["loads"]


def test_kspider_weaknesses(out: Path) -> None:
    weak = _load(out, "kspider")["weaknesses"]
    hosts = weak["hosts"]
    assert hosts["distinct_xxh3_64"] == hosts["hosts"]
    assert hosts["distinct_char_sums"] < hosts["hosts"] / 2
    assert hosts["hosts_with_an_anagram"] > 0
    a = weak["constructed_anagrams"]
    assert a["equal_char_sum"] == a["pairs"] == a["pairs_with_different_names"]
    assert a["same_node_share"]["10"]["char_sum"] == 1.0
    assert a["same_node_share"]["10"]["xxh3_modulo"] < 0.2
    u = weak["urls"]
    assert u["distinct_xxh3_64"] == u["urls"]
    assert u["value_range_bits"] < 16 < u["xxh3_64_range_bits"]
    assert u["distinct_char_sums"] <= u["char_sum_max"] - u["char_sum_min"] + 1


def test_hash_url_formula_2_and_error_searching(out: Path) -> None:
    data = _load(out, "hash-url")
    urls = data["corpus"]["urls"]
    assert set(data["crawlers"]) == {"5", "20"}
    for n, table in data["crawlers"].items():
        for key, e in table.items():
            assert len(e["loads"]) == int(n)
            assert_stats_match(e)
            assert e["total"] == urls, (n, key)
            errors = e["error_searching"]
            assert errors["duplicated"] == 0 and errors["extra"] == 0, (n, key)
            assert errors["distinct"] == errors["fetches"] == urls
            assert e["unassigned_urls"] == 0
            if key == "url-sum":
                assert e["hosts_split"] > 0  # a URL partition splits hosts over crawlers
            else:
                assert e["hosts_split"] == 0 and e["host_check"]["total_and_disjoint"]
                assert_stats_match(e["hosts"])
                assert e["hosts"]["total"] == data["corpus"]["hosts"]
        # one phase window with P = n is the modulo partition, crawlers renamed
        assert Counter(table["phase"]["loads"]) == Counter(table["modulo"]["loads"])
    assert "not a partition" in data["dynamic"]


def test_one_experiment_alone_and_bad_names(tmp_path: Path) -> None:
    done = _gossamer("experiment", "hash-url", "--quick", "--seed", "2", "-o", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES["hash-url"])
    assert json.loads((tmp_path / "hash-url.json").read_text())["corpus"]["spec"]["seed"] == 2
    bad = _gossamer("experiment", "nope", "-o", str(tmp_path))
    assert bad.returncode == 2 and "NAME nope: expected one of kspider" in bad.stderr
    missing = _gossamer("experiment", "all")
    assert missing.returncode == 2 and "-o/--out" in missing.stderr
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    not_dir = _gossamer("experiment", "kspider", "--quick", "-o", str(a_file))
    assert not_dir.returncode == 2 and "not a directory" in not_dir.stderr
    assert a_file.read_text() == "keep me\n"
