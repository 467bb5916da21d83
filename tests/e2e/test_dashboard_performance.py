"""Issue 33's done means, in a real headless Chromium: a crawl with no live-graph flag (the
live graph is on by default) of a static site served by nginx on 127.0.0.1, watched by a real
`gossamer dashboard`: the Performance tab draws pages/s, bytes/s, errors/s, the queue and each
worker's CPU and memory over the crawl; the coordinator shows the progress against
`--max-pages`; the crawl writes `DIR/graph/stats.json` and the graph pane shows its figures
and top pages (by PageRank and by in-degree) with links to them.

Screenshots of the Performance tab and the graph pane go to docs/dashboard/*.png when asked
(`GOSSAMER_SCREENSHOTS=docs/dashboard`; the crawl then waits longer between two requests, so
that the charts span more than a few seconds)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from _static_site import static_site
from test_dashboard_browser import (
    CSS,
    SHOTS,
    dashboard,
    gossamer,
    no_gossamer_env,
    number,
    shot,
)

from gossamer.report.crawl import wait_live_graph
from gossamer.testweb._browser import Browser, wait_for, wait_for_js, wait_for_text
from gossamer.testweb._nginx import run_nginx

_PAGES, _MAX = 30, 24  # the site's files, and the crawl's --max-pages


def test_a_default_crawl_shows_its_performance_and_live_graph(
    tmp_path: Path, browser: Browser
) -> None:
    site = static_site(tmp_path, _PAGES)
    out = tmp_path / "crawl"
    env = no_gossamer_env()  # the crawler's own defaults: the live graph on
    delay = "0.6" if SHOTS else "0.15"  # ~4 s of crawl (~14 s for the screenshots)
    with run_nginx(site.server), dashboard([str(out)], env, tmp_path) as base:
        d = browser.driver
        d.get(base + "/")
        wait_for_text(d, "#crawl-state", "not started", timeout=30)
        crawl = subprocess.Popen(
            gossamer("crawl", site.base, "-o", str(out), "--allow-private", "--delay", delay,
                     "--max-pages", str(_MAX), "-q"),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            wait_for_text(d, "#crawl-state", "running", timeout=60)
            d.find_element(CSS, "#tab-performance").click()
            panel = "document.querySelector('#panel-performance').dataset"
            points = 10 if SHOTS else 3  # (a screenshot's charts: ten seconds of the crawl)
            wait_for_js(d, f"Number({panel}.points) >= {points} && Number({panel}.workers) >= 1",
                        timeout=60)  # fmt: skip
            for chart in ("rate", "errors", "cpu", "rss"):
                assert d.find_elements(CSS, f"#chart-perf-{chart} canvas"), chart
            # each worker a series of its own in the CPU and memory charts' legends
            legend = d.find_element(CSS, "#chart-perf-cpu .u-legend").text
            assert "worker" in legend, legend
            progress = d.find_element(CSS, '#coordinator [data-field="progress"]')
            assert progress.get_attribute("textContent").endswith(" %")
            shot(browser, "performance.png")
            _, err = crawl.communicate(timeout=120)
            assert crawl.returncode == 0, err
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.wait()
        # the live graph's final statistics, in the crawl's directory ...
        assert wait_live_graph(out, 60)
        stats = json.loads((out / "graph" / "stats.json").read_text())
        assert stats["final"] is True and stats["nodes"] == _MAX
        assert stats["top_pages"][0]["url"].startswith(site.base)
        # ... and on the page: the figures, the progress and the top pages, linked
        d.find_element(CSS, "#tab-status").click()
        wait_for_text(d, '#coordinator [data-field="progress"]', "100.0 %", timeout=30)
        wait_for(d, lambda d: number(browser, '#graph [data-field="nodes"]') == _MAX or None,
                 timeout=60)  # fmt: skip
        assert number(browser, '#graph [data-field="edges"]') == stats["edges"]
        for css, key in (("#top-by-pagerank", "top_pages"),
                         ("#top-by-in-degree", "top_pages_by_in_degree")):  # fmt: skip
            links = wait_for(d, lambda d, css=css: d.find_elements(CSS, f"{css} li a") or None)
            assert links[0].get_attribute("href") == stats[key][0]["url"]
        assert d.find_element(CSS, '#graph [data-field="slow_age"]').text != "-"
        shot(browser, "graph-pane.png", scroll_to="#graph")
