"""Unit tests of the experiments' parts: the seeds' hash functions, the metrics (including the
error-searching hook for crawl experiments), gossamer's shard acceptance, the URL corpus and
the registry."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from gossamer.cluster.sizes import read_site_sizes
from gossamer.experiments import EXPERIMENTS, experiment_named, run_experiments
from gossamer.experiments._framework import RunOptions, markdown_document, markdown_table
from gossamer.experiments.cluster_run import read_fetches
from gossamer.experiments.corpus import url_corpus
from gossamer.experiments.grid import pages_per_site
from gossamer.experiments.hashes import (
    bucket_column,
    char_sum,
    crawler_key,
    host_phase,
    site_of,
    transfer_sum,
    url_node,
)
from gossamer.experiments.kspider import anagram
from gossamer.experiments.metrics import check_partition, error_searching, load_stats
from gossamer.experiments.shards import accepted_hosts, host_shards, member_shards
from gossamer.partition import Consistent, Dynamic, Modulo, PartitionError, Phase, shard_of

# ---------------------------------------------------------------- KSpider equations 1–3


def test_char_sum_is_the_sum_of_the_characters() -> None:
    assert char_sum("") == 0
    assert char_sum("abc") == 97 + 98 + 99 == 294
    assert char_sum("é") == 0xC3 + 0xA9  # a UTF-8 byte is one C char


def test_equation_1_url_node() -> None:
    # "http://a.b/": h t t p : / / a . b / = 104+116+116+112+58+47+47+97+46+98+47 = 888
    assert char_sum("http://a.b/") == 888
    assert url_node("http://a.b/", 5) == 888 % 5 == 3
    assert url_node("http://a.b/", 2) == 0
    assert all(0 <= url_node("http://a.b/x", n) < n for n in range(1, 12))


def test_equation_2_and_3_hash_the_host_only() -> None:
    # www.h1.example: 3·119 + 46 + 104 + 49 + 46 + (101+120+97+109+112+108+101) = 1350
    assert char_sum("www.h1.example") == 1350
    assert host_phase("www.h1.example", 6) == 1350 % 6 == 0
    assert bucket_column("www.h1.example") == 1350 % 1999 == 1350
    assert bucket_column("www.h1.example", 7) == 1350 % 7


def test_anagrams_collide_under_the_character_sum() -> None:
    a = anagram("www.h12.example")
    assert a == "www.21h.elpmaxe" and sorted(a) == sorted("www.h12.example")
    assert char_sum(a) == char_sum("www.h12.example")
    for n in range(2, 11):
        assert url_node("http://ab.example/", n) == url_node("http://ba.example/", n)
        assert host_phase("www.h12.example", n) == host_phase("www.h21.example", n)


# ---------------------------------------------------------------- hash-URL paper


def test_transfer_table_1() -> None:
    # Table 1: a → 1, b → 2, c → 3, d → 4
    assert [transfer_sum(c) for c in "abcd"] == [1, 2, 3, 4]
    assert transfer_sum("abcd") == 10
    assert transfer_sum("z") == 26 and transfer_sum("0") == 27 and transfer_sum("9") == 36
    assert transfer_sum("a-b.c:8") == 1 + 37 + 2 + 38 + 3 + 39 + 35
    # "suppose that there are 20 sub nodes, the key will only be … 0 to 19"
    assert crawler_key("abcd", 20) == 10
    assert crawler_key("www.hbut.edu.cn", 20) == transfer_sum("www.hbut.edu.cn") % 20
    assert {crawler_key(f"h{i}.example", 20) for i in range(500)} <= set(range(20))
    with pytest.raises(ValueError, match="transfer value"):
        transfer_sum("ex_ample")


def test_site_of_is_the_papers_host_function() -> None:
    # the paper: http://jsjxy.hbut.edu.cn gives http://www.hbut.edu.cn/ (the site)
    assert site_of("jsjxy.hbut.edu.cn") == "hbut.edu.cn" == site_of("www.hbut.edu.cn")
    assert site_of("shop.h12.example") == "h12.example"


# ---------------------------------------------------------------- metrics


def test_load_stats() -> None:
    s = load_stats([10, 20, 30, 40])
    assert (s.total, s.mean, s.max, s.min) == (100, 25.0, 40, 10)
    assert s.max_over_mean == 1.6
    assert math.isclose(s.std, math.sqrt((225 + 25 + 25 + 225) / 4))  # formula 2: 1/n
    assert math.isclose(s.cv, s.std / 25)
    assert load_stats([0, 0]).cv == 0.0
    assert load_stats([7]).std == 0.0
    with pytest.raises(ValueError):
        load_stats([])


def test_check_partition_finds_gaps_overlaps_and_strays() -> None:
    assert check_partition([[0, 2], [1, 3]], 4).ok
    gap = check_partition([[0], [1]], 3)
    assert (gap.unassigned, gap.multiply_assigned, gap.ok) == (1, 0, False)
    twice = check_partition([[0, 1], [1, 2]], 3)
    assert (twice.unassigned, twice.multiply_assigned) == (0, 1)
    stray = check_partition([[0, 1, 5]], 2)
    assert stray.multiply_assigned == 1 and not stray.ok


def test_error_searching_hook() -> None:
    e = error_searching(
        {
            "w0": ["http://a/", "http://a/1", "http://a/1"],  # its own retry: not an error
            "w1": ["http://b/", "http://a/1"],
            "w2": ["http://a/1", "http://b/", "http://c/"],
        }
    )
    assert (e.workers, e.fetches, e.distinct) == (3, 7, 4)
    assert e.duplicated == 2  # http://a/1 (3 crawlers) and http://b/ (2 crawlers)
    assert e.extra == 3
    assert math.isclose(e.overlap, 3 / 4)
    assert error_searching({"w0": ["x"], "w1": ["y"]}).duplicated == 0
    assert error_searching({}).overlap == 0.0


# ---------------------------------------------------------------- gossamer's shards


@pytest.mark.parametrize("strategy", [Modulo(), Consistent(), Phase(phases=7)])
def test_member_shards_partition_the_shards(strategy: Modulo | Consistent | Phase) -> None:
    sets = member_shards(strategy, 7)
    assert len(sets) == 7
    assert check_partition([sorted(s) for s in sets], 1024).ok


def test_accepted_hosts_follow_shard_of() -> None:
    hosts = [f"www.h{i}.example" for i in range(300)]
    shards = host_shards(hosts)
    assert shards == [shard_of(h) for h in hosts]
    sets = member_shards(Modulo(), 4)
    accepted = accepted_hosts(sets, shards)
    assert check_partition(accepted, len(hosts)).ok
    for member, mine in enumerate(accepted):
        assert all(shard_of(hosts[h]) % 4 == member for h in mine)


def test_dynamic_is_not_a_partition() -> None:
    with pytest.raises(PartitionError, match="not a partition"):
        member_shards(Dynamic(), 3)


def test_sites_are_keyed_as_site_sizes_keys_them(tmp_path: Path) -> None:
    """The grid experiment's pages per site, the workers' fetches and `--site-sizes DIR`
    name a site alike (`host_key`: lower case, the port unless the default one)."""
    urls = [
        "http://A.example/",
        "http://a.example:80/x",
        "http://a.example:8080/",
        "https://B.example:443/",
        "https://b.example:8443/y",
    ]
    want = {"a.example": 2, "a.example:8080": 1, "b.example": 1, "b.example:8443": 1}
    assert pages_per_site(urls) == want
    log = tmp_path / "w1" / "crawl.log.jsonl"
    log.parent.mkdir()
    lines = [
        {"time": "2024-05-01T12:00:00Z", "url": u, "depth": 0, "status": 200, "outcome": "ok"}
        for u in urls
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert read_site_sizes(tmp_path) == want
    assert Counter(f.host for f in read_fetches(tmp_path, strict=True)) == want


# ---------------------------------------------------------------- corpus, registry, writers


def test_url_corpus_is_deterministic_and_complete() -> None:
    c = url_corpus(3_000, seed=7)
    assert len(c.urls) >= 3_000
    assert len(set(c.urls)) == len(c.urls)
    assert c.offsets[0] == 0 and c.offsets[-1] == len(c.urls)
    assert sum(c.pages) == len(c.urls) and len(c.hosts) == len(c.pages) == len(c.offsets) - 1
    for h in (0, len(c.hosts) // 2, len(c.hosts) - 1):
        urls = c.host_urls(h)
        assert len(urls) == c.pages[h]
        assert urls[0] == f"http://{c.hosts[h]}/"
        assert all(u.startswith(f"http://{c.hosts[h]}/") for u in urls)
    again = url_corpus.__wrapped__(3_000, seed=7)
    assert again.urls == c.urls
    d = c.describe()
    assert d["urls"] == len(c.urls) and d["spec"]["seed"] == 7
    with pytest.raises(ValueError):
        url_corpus(0)


def test_registry() -> None:
    names = [e.name for e in EXPERIMENTS]
    assert names == ["kspider", "hash-url", "grid", "parallel", "phases"]
    assert len(set(names)) == len(names)
    for e in EXPERIMENTS:
        assert callable(e.load())
    assert experiment_named("kspider").name == "kspider"
    with pytest.raises(ValueError, match="choose one of kspider, hash-url, grid"):
        experiment_named("nope")
    with pytest.raises(ValueError):
        list(run_experiments(["kspider", "nope"], RunOptions(out=Path("."))))


def test_markdown_writers() -> None:
    table = markdown_table(["a", "b"], [[1, "x"]])
    assert table == "| a | b |\n|---|---|\n| 1 | x |\n"
    assert markdown_document(["# T\n", "\ntext\n", "", table]) == f"# T\n\ntext\n\n{table}"
