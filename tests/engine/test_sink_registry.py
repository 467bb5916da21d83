"""Sinks by name: the built-in ones registered in order, a sink added as one module plus its
registration (tests/engine/_titles_sink.py), written by a crawl of the simulated web."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import _titles_sink
import pytest

from gossamer.config import CrawlSettings
from gossamer.engine.recorder import Recorder
from gossamer.engine.sink_registry import PageSink, register_sink, sink_names, unregister_sink
from gossamer.runner.run import run_crawl
from gossamer.sinks import read_crawl_log, read_graph
from gossamer.testweb import WebSpec, serve_in_thread

sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
from _crawl_helpers import crawl_settings

BUILT_IN = ["warc", "crawl-log", "graph"]


@pytest.fixture
def titles() -> Iterator[None]:
    _titles_sink.register()
    try:
        yield
    finally:
        unregister_sink(_titles_sink.NAME)


def test_the_built_in_sinks_are_registered_in_order() -> None:
    assert sink_names() == BUILT_IN


def test_a_name_is_registered_once_and_can_be_removed() -> None:
    with pytest.raises(ValueError, match="'graph' is registered already"):
        register_sink("graph", lambda ctx: None)
    register_sink("nothing", lambda ctx: None)
    try:
        assert sink_names() == [*BUILT_IN, "nothing"]
    finally:
        unregister_sink("nothing")
    assert sink_names() == BUILT_IN


def test_the_recorder_builds_what_the_settings_turn_on(tmp_path: Path, titles: None) -> None:
    on = Recorder(tmp_path / "a", CrawlSettings(seeds=["http://a.example/"]), version="t")
    off = Recorder(
        tmp_path / "b", CrawlSettings(seeds=["http://a.example/"], warc=False), version="t"
    )
    assert [name for name, _ in on.sinks] == [*BUILT_IN, "titles"]
    assert [name for name, _ in off.sinks] == ["crawl-log", "graph", "titles"]
    on.close()
    off.close()


def test_a_sink_gets_only_the_calls_it_implements(tmp_path: Path) -> None:
    calls: list[str] = []

    class Flushes(PageSink):
        def flush(self) -> None:
            calls.append("flush")

    register_sink("flushes", lambda ctx: Flushes())
    try:
        rec = Recorder(tmp_path, CrawlSettings(seeds=["http://a.example/"]), version="t")
    finally:
        unregister_sink("flushes")
    assert [f.__self__ for f in rec._flush][-1].__class__ is Flushes
    assert all(not isinstance(f.__self__, Flushes) for f in rec._log + rec._edges)
    rec.flush()
    rec.close()
    assert calls == ["flush"]


def test_a_crawl_of_the_simulated_web_writes_a_registered_sink(
    tmp_path: Path, titles: None
) -> None:
    """titles*.jsonl have one line for each HTML page the crawl log has with a 200, its
    title the simulated web's ("<host> page <n>"); the built-in outputs are all there."""
    spec = WebSpec(seed=5, hosts=4, pages_mean=12)
    out = tmp_path / "crawl"
    with serve_in_thread(spec) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(tmp_path, out, web.url(0, 0), concurrency=8)
        assert run_crawl(settings) == 0
    html_pages = {
        r["url"]
        for r in read_crawl_log(out / "crawl.log.jsonl")
        if r["status"] == 200 and "html" in (r.get("type") or "")
    }
    files = sorted(out.glob("titles*.jsonl"))  # one per worker (the pool's forks have it too)
    assert files
    lines = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert len(html_pages) > 10
    assert {t["url"] for t in lines} == html_pages and len(lines) == len(html_pages)
    for t in lines:
        host = t["url"].split("/")[2]
        assert t["title"].lower().startswith(f"{host} page ".lower()), t
    assert read_graph(out).edges and list((out / "warc").glob("*.warc.gz"))
