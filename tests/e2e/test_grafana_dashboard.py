"""docs/grafana/gossamer.json: a Grafana dashboard (its JSON model: schemaVersion, panels
with PromQL targets on a Prometheus datasource chosen by a variable) whose every metric is
one a real `gossamer dashboard` exports — scraped from /metrics while it watches a real
crawl of the simulated web with a live graph."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
from prometheus_client.parser import text_string_to_metric_families
from test_dashboard_e2e import _CRAWL_FLAGS, dashboard, gossamer

from gossamer.testweb import WebSpec, serve_in_thread

GRAFANA = Path(__file__).parents[2] / "docs" / "grafana" / "gossamer.json"
_METRIC = re.compile(r"\bgossamer_[a-z0-9_]+\b")
#: more than 2,000 pages: the live graph's diameter goes from exact to a lower bound
_WEB = WebSpec(seed=4, hosts=80, pages_mean=80, profile="clean", overrides=(("dead_link", 0.05),))


def _model() -> dict[str, Any]:
    model = json.loads(GRAFANA.read_text())
    assert isinstance(model, dict)
    return model


def used_metrics(model: dict[str, Any]) -> set[str]:
    """Every metric name the dashboard's PromQL names (panels and variables)."""
    exprs = [t["expr"] for p in model["panels"] for t in p["targets"]]
    exprs += [v.get("definition", "") for v in model["templating"]["list"]]
    return {m for e in exprs for m in _METRIC.findall(e)}


def test_it_is_a_grafana_dashboard_on_a_prometheus_variable() -> None:
    model = _model()
    assert isinstance(model["schemaVersion"], int) and model["schemaVersion"] >= 36
    assert model["title"] and model["uid"]
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = model["panels"]
    assert len(panels) >= 9
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids)
    for p in panels:
        assert p["type"] in ("timeseries", "stat", "bargauge"), p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]) and p["gridPos"]["w"] <= 24
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs)
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and _METRIC.search(t["expr"])
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
    titles = " ".join(p["title"].lower() for p in panels)
    for what in ("pages/s", "pages", "errors by outcome", "queue", "workers", "per-worker",
                 "bytes/s", "scc", "dangling", "diameter"):  # fmt: skip
        assert what in titles, what


def test_every_metric_it_reads_is_one_a_real_dashboard_exports(tmp_path: Path) -> None:
    wanted = used_metrics(_model())
    assert len(wanted) >= 15
    out = tmp_path / "crawl"
    env = {**os.environ, "GOSSAMER_LIVE_GRAPH_INTERVAL": "0.5", "GOSSAMER_LIVE_GRAPH_CPU": "1000"}
    with serve_in_thread(_WEB) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        crawl = subprocess.Popen(
            gossamer("crawl", web.url(0, 0), "-o", str(out), "--resolve-file", str(resolve),
                     *_CRAWL_FLAGS, "--live-graph", "--max-pages", "100000", "-q"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while not (out / "crawl.json").is_file():
                assert crawl.poll() is None and time.monotonic() < deadline, "no crawl"
                time.sleep(0.05)
            with dashboard(str(out)) as base:
                # every name exported at some time of the crawl: the graph's exact diameter
                # while it has at most 2,000 nodes, a lower bound beyond (docs/graph.md)
                exported: set[str] = set()
                deadline = time.monotonic() + 90
                while not wanted <= exported and time.monotonic() < deadline:
                    text = httpx2.get(f"{base}/metrics", timeout=10).text
                    exported |= {
                        s.name for f in text_string_to_metric_families(text) for s in f.samples
                    }
                    time.sleep(0.2)  # (a scrape's pace: the live graph needs a refresh)
                assert wanted <= exported, sorted(wanted - exported)
        finally:
            crawl.kill()
            crawl.wait()
