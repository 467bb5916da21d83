"""Near-duplicate detection's parts: the SimHash of a page's text (parse/simhash.py), the block
index that finds fingerprints within k bits without scanning (neardup.py), and the crawl's
shared log of fingerprints in SQLite and in Redis, exchanged between two workers."""

from __future__ import annotations

import random
import sys
import tracemalloc
from pathlib import Path

import redis

from gossamer.neardup import NearDupIndex, NearDups, RedisNearDupStore, SqliteNearDupStore
from gossamer.parse import ParseOptions, hamming, parse_html, simhash_text

_WORDS = (
    "river", "mountain", "garden", "kitchen", "window", "morning", "evening", "summer",
    "winter", "letter"
)


def _text(seed: int, words: int = 1500) -> str:
    rng = random.Random(seed)
    vocabulary = [*_WORDS, *(f"w{k}" for k in range(40))]
    return " ".join(rng.choice(vocabulary) for _ in range(words))


def test_a_date_changed_is_a_few_bits_and_other_texts_are_far() -> None:
    body = _text(1)
    day = [simhash_text(f"Events on 2026-07-{d:02d} {body}") for d in range(1, 29)]
    assert all(fp is not None for fp in day)
    assert max(hamming(day[0], fp) for fp in day if fp is not None) <= 3  # type: ignore[arg-type]
    others = [simhash_text(_text(seed)) for seed in range(2, 40)]
    far = [hamming(a, b) for i, a in enumerate(others) for b in others[i + 1 :]]  # type: ignore[arg-type]
    assert min(far) > 3 and 24 < sum(far) / len(far) < 40
    # past the bottom-k sample (SAMPLE of ~1,500 shingles above, of ~20,000 here): the same
    long = _text(4, 20_000)
    a, b = simhash_text(f"Updated 2026-07-01 {long}"), simhash_text(f"Updated 2026-08-14 {long}")
    assert a is not None and b is not None and hamming(a, b) <= 3
    assert hamming(a, simhash_text(_text(5, 20_000)) or 0) > 3
    assert simhash_text("too short") is None
    assert simhash_text(body) == simhash_text(body)  # a pure function (no salted hash)


def test_markup_is_ignored() -> None:
    text = _text(3, 400)
    plain = f"<html><body><p>{text}</p></body></html>".encode()
    printable = (
        f"<html><head><title>print</title><style>p{{color:red}}</style></head><body>"
        f"<div class='article'><p>{text}</p></div></body></html>"
    ).encode()
    options = ParseOptions(fingerprint=True)
    a = parse_html(plain, "http://a.example/x", None, options).simhash
    b = parse_html(printable, "http://b.example/print/x", None, options).simhash
    assert a is not None and a == b
    assert parse_html(plain, "http://a.example/x", None, ParseOptions()).simhash is None


def test_the_block_index_finds_what_a_scan_finds() -> None:
    rng = random.Random(7)
    index = NearDupIndex(3)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    for k, fp in enumerate(fps):
        index.add(fp, f"u{k}")
    for _ in range(300):
        base = rng.choice(range(len(fps)))
        probe = fps[base]
        for bit in rng.sample(range(64), rng.randrange(0, 6)):
            probe ^= 1 << bit
        scan = next((f"u{k}" for k, fp in enumerate(fps) if hamming(fp, probe) <= 3), None)
        assert index.find(probe) == scan


def test_memory_a_page(tmp_path: Path) -> None:
    """The bound docs/crawler.md states: ~50 bytes a page in a worker besides its URL string
    (k=3), once the index's fixed tables are made (1 MB compiled, 2 MB in Python)."""
    rng = random.Random(1)
    urls = [f"http://host{k % 97}.example/page/{k}.html" for k in range(8_000)]
    index = NearDupIndex(3)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for url in urls:
        index.add(rng.getrandbits(64), url)
    per_page = (tracemalloc.get_traced_memory()[0] - before) / len(urls)
    tracemalloc.stop()
    url_bytes = sum(sys.getsizeof(u) for u in urls) / len(urls)
    print(f"near-dup index: {per_page:.0f} bytes a page besides its URL ({url_bytes:.0f})")
    assert per_page < 64


def _two_workers(store_a: object, store_b: object) -> None:
    clock = [0.0]
    a = NearDups(store_a, 3, clock=lambda: clock[0])  # type: ignore[arg-type]
    b = NearDups(store_b, 3, clock=lambda: clock[0])  # type: ignore[arg-type]
    fp = 0x0123_4567_89AB_CDEF
    assert a.match(fp, "http://x.example/1") is None
    assert a.sync_due()
    a.absorb(*a.exchange(*a.take()))
    assert b.match(fp ^ 0b101, "http://x.example/2") is None  # not seen by b yet: an original
    b.absorb(*b.exchange(*b.take()))  # b sends /2, reads /1
    assert len(b.index) == 2  # its /2, then /1 read from the store
    assert b.match(fp ^ 0b1, "http://x.example/3") == "http://x.example/2"  # first in b's
    assert b.match(fp ^ 0b1000, "http://x.example/5") == "http://x.example/2"
    clock[0] += 1
    a.absorb(*a.exchange(*a.take()))  # a reads /2 (its own /1 not twice)
    assert len(a.index) == 2 and a.match(fp ^ 0b100, "http://x.example/4") == "http://x.example/1"
    assert a.match(fp, "http://x.example/1") is None  # the page itself again: no duplicate
    a.close()
    b.close()


def test_two_workers_share_fingerprints_in_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "neardup.sqlite"
    _two_workers(SqliteNearDupStore(path), SqliteNearDupStore(path))


def test_two_workers_share_fingerprints_in_redis(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        _two_workers(RedisNearDupStore(client, "c1"), RedisNearDupStore(client, "c1"))
        assert client.llen("gs:c1:nd") == 2
    finally:
        client.close()
