"""sinks/items.py: item parts appended a page at a time, a torn tail cut on reopening, and
the merge keeping each page's items of its first fetch only."""

from __future__ import annotations

import json
from pathlib import Path

from gossamer.sinks.items import ItemsWriter, merge_items, read_items


def test_a_page_fetched_twice_keeps_the_items_of_its_first_fetch(tmp_path: Path) -> None:
    w0 = ItemsWriter(tmp_path / "items" / "items-w0.jsonl")
    w0.write("http://a/1", 10.0, [{"k": 1}, {"k": 2}])
    w0.write("http://a/2", 11.0, [{"k": 3}])
    w0.flush()  # killed here, before the frontier counted the pages done: both again
    w1 = ItemsWriter(tmp_path / "items" / "items-w1.jsonl")
    w1.write("http://a/1", 20.0, [{"k": 1}, {"k": 2}])
    w1.write("http://a/2", 21.0, [{"k": 3}])
    w1.write("http://a/3", 22.0, [])  # a page without items
    w1.write("http://a/4", 23.0, [{"k": 4}])
    w0.close(), w1.close()
    feed = tmp_path / "items.jsonl"
    parts = sorted((tmp_path / "items").glob("*.jsonl"))
    assert merge_items(reversed(parts), feed) == (4, 3)  # (the parts' order does not matter)
    lines = list(read_items(feed))
    assert sorted((x["url"], x["fetched_at"], x["item"]["k"]) for x in lines) == [
        ("http://a/1", 10.0, 1),
        ("http://a/1", 10.0, 2),
        ("http://a/2", 11.0, 3),
        ("http://a/4", 23.0, 4),
    ]


def test_a_torn_tail_is_cut_when_the_part_is_opened_again(tmp_path: Path) -> None:
    part = tmp_path / "items-main.jsonl"
    w = ItemsWriter(part)
    w.write("http://a/1", 1.0, [{"k": 1}])
    w.close()
    with part.open("ab") as f:
        f.write(b'{"url":"http://a/2","fetch')  # a kill in mid-write
    w = ItemsWriter(part)
    w.write("http://a/3", 3.0, [{"k": "é"}])
    w.close()
    rows = [json.loads(line) for line in part.read_text().splitlines()]
    assert [r["url"] for r in rows] == ["http://a/1", "http://a/3"]
    assert rows[1]["item"] == {"k": "é"}
