"""The dashboard end to end in a real headless Chromium: a real `gossamer dashboard` process,
crawls started from its Setup form against the simulated web, the numbers and the charts seen
moving on the page, the workers scaled from 2 to 3 and back with the slider and the table seen
following, the crawl stopped with the button and seen ending — an embedded crawl (a crawl
directory) and a cluster crawl (a real redis-server, then resumed with the Setup form's
button and seen crawling again); a site on this machine (nginx on
127.0.0.1) started from the Setup form, refused for its private address with a message
saying which box to tick, then started again in the same directory; and a finished crawl of
two runs shown whole (its time, its workers' pages, its rate over time, its graph statistics
computed on demand). Every assertion is on what the page shows.

Screenshots of these pages go to docs/dashboard/*.png, but only when asked:

    GOSSAMER_SCREENSHOTS=docs/dashboard .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/e2e/test_dashboard_browser.py

(the normal suite does not rewrite tracked files).

The crawl the form starts gets the settings the form has no field for from the environment
the dashboard was started with, which `gossamer crawl` reads: the simulated web's
`GOSSAMER_RESOLVE_FILE` and `GOSSAMER_ALLOW_PRIVATE`, `GOSSAMER_CONCURRENCY` (4: with the
form's delay of 0.2 s the crawl of 15,000 pages outlasts the test) and
`GOSSAMER_LIVE_GRAPH` (the graph statistics and degree charts, refreshed every 0.5 s:
`GOSSAMER_LIVE_GRAPH_INTERVAL`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _static_site import static_site

from gossamer.config import CrawlSettings
from gossamer.dashboard._control import _error_line
from gossamer.dashboard._setup import form_words
from gossamer.report.crawl import crawl_report
from gossamer.testweb import WebSpec, serve_in_thread
from gossamer.testweb._browser import (
    Browser,
    screenshot,
    wait_for,
    wait_for_js,
    wait_for_text,
)
from gossamer.testweb._nginx import run_nginx

CSS = "css selector"

_BIG = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean")  # outlasts every test
SHOTS = os.environ.get("GOSSAMER_SCREENSHOTS")


def gossamer(*args: str) -> list[str]:
    return [sys.executable, "-m", "gossamer", *args]


def crawl_env(resolve: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOSSAMER_")}
    env.update(
        GOSSAMER_RESOLVE_FILE=str(resolve), GOSSAMER_ALLOW_PRIVATE="true",
        GOSSAMER_CONCURRENCY="4", GOSSAMER_LIVE_GRAPH="true",
        GOSSAMER_LIVE_GRAPH_CPU="1000",  # refreshes every interval, busy machine or not
        GOSSAMER_LIVE_GRAPH_INTERVAL="0.5",  # the first statistics 0.5 s in, not 5
        **more,
    )  # fmt: skip
    return env


@contextlib.contextmanager
def dashboard(args: list[str], env: dict[str, str], cwd: Path) -> Iterator[str]:
    """`gossamer dashboard ARGS --port 0` (in `cwd`, with `env`); its base URL. Stopped with
    SIGTERM at the end; a crawl it started runs in its own session and is stopped by the test."""
    log = (cwd / "dashboard.stderr").open("w+")
    proc = subprocess.Popen(
        gossamer("dashboard", "--port", "0", *args), stderr=log, env=env, cwd=cwd, text=True
    )
    try:
        def address() -> str | None:
            log.seek(0)
            printed = log.read()
            m = re.search(r"dashboard: (http://\S+?)/$", printed, re.M)
            assert m or proc.poll() is None, f"the dashboard exited: {printed}"
            return m.group(1) if m else None

        base = None
        for _ in range(1500):  # 30 s
            if (base := address()) is not None:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.02)
        assert base is not None, "the dashboard did not print its address in 30 s"
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()


def shot(browser: Browser, name: str, scroll_to: str | None = None) -> None:
    """A screenshot into $GOSSAMER_SCREENSHOTS/NAME, when that is set."""
    if not SHOTS:
        return
    d = browser.driver
    if scroll_to is None:
        d.execute_script("window.scrollTo(0, 0)")
    else:
        d.execute_script(f"document.querySelector({scroll_to!r}).scrollIntoView()")
    screenshot(d, Path(SHOTS) / name)


def number(browser: Browser, css: str) -> int:
    shown = browser.driver.find_element(CSS, css).text.replace(",", "")
    return int(shown) if shown.isdigit() else -1


#: a worker row's states while it works: an embedded pool's `running`, a cluster worker's own
LIVE = ("running", "starting", "crawling", "idle")


def rows(browser: Browser, state: str | None = None) -> int:
    """Rows of the worker table (in `state`; "live": in one of LIVE)."""
    states = LIVE if state == "live" else (state,) if state else ()
    css = ", ".join(f"#worker-table tbody tr.state-{s}" for s in states) or "#worker-table tbody tr"
    return len(browser.driver.find_elements(CSS, css))


def row_states(browser: Browser) -> str:
    return repr([e.get_attribute("class") for e in
                 browser.driver.find_elements(CSS, "#worker-table tbody tr")])  # fmt: skip


def chart_points(browser: Browser, chart: str) -> int:
    value = browser.driver.find_element(CSS, f"#chart-{chart}").get_attribute("data-points")
    return int(value or 0)


def set_field(browser: Browser, css: str, value: str) -> None:
    """Type `value` into a field of the form (whose first value is the crawl's default)."""
    field = browser.driver.find_element(CSS, css)
    field.clear()
    field.send_keys(value)


def api(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.load(r)


def fill_setup(browser: Browser, seed: str, workers: int, partition: str | None = None) -> None:
    d = browser.driver
    wait_for(d, lambda d: d.find_element(CSS, "#crawl-state").text != "connecting…" or None)
    d.find_element(CSS, "#tab-setup").click()
    wait_for(d, lambda d: d.find_element(CSS, "#start").is_enabled() or None)
    d.find_element(CSS, "#seeds").send_keys(seed)
    d.find_element(CSS, "#seed-add").click()
    assert [e.text for e in d.find_elements(CSS, "#seed-list li span")] == [seed]
    field = d.find_element(CSS, "#workers")
    field.clear()
    field.send_keys(str(workers))
    d.find_element(CSS, "#scope option[value='all']").click()
    set_field(browser, "#delay", "0.2")
    if partition is not None:
        d.find_element(CSS, f"#partition option[value='{partition}']").click()


def watch_it_move(
    browser: Browser, workers: int | None, graph: bool = True, log: str = r" INFO .* 200 ok http://"
) -> None:
    """The numbers, the worker table (`workers` rows live; None: at least one), the charts,
    the top hosts and the log tail (a line matching `log`) move."""
    d = browser.driver
    wait_for_text(d, "#crawl-state", "running", timeout=30)
    wait_for(d, lambda d: number(browser, "#pages") > 0 or None, timeout=30)
    first = number(browser, "#pages")
    wait_for(d, lambda d: number(browser, "#pages") > first or None, timeout=30)
    want = "at least 1" if workers is None else str(workers)

    def enough_rows(d: object) -> bool:
        live = rows(browser, "live")
        return live >= 1 if workers is None else live == workers

    wait_for(d, enough_rows, timeout=30, what=f"{want} live worker rows",
             seen=lambda: row_states(browser))  # fmt: skip
    points = chart_points(browser, "rate")
    wait_for(d, lambda d: chart_points(browser, "rate") > points + 2 or None, timeout=30)
    wait_for_js(d, "Number(document.querySelector('#chart-rate').dataset.last) > 0", timeout=30)
    assert d.find_elements(CSS, "#chart-rate canvas")
    if graph:  # the live graph's first statistics: the degree distributions are drawn
        wait_for(d, lambda d: chart_points(browser, "in-degree") > 2 or None, timeout=60)
        assert chart_points(browser, "out-degree") > 1
        assert d.find_elements(CSS, "#chart-in-degree canvas")
        wait_for(d, lambda d: number(browser, '#graph [data-field="nodes"]') > 0 or None)
    wait_for(d, lambda d: d.find_elements(CSS, "#top-hosts tbody tr[data-host]") or None,
             timeout=30)  # fmt: skip
    d.execute_script("document.querySelector('#log').scrollIntoView()")  # drawn when seen
    wait_for_log_line(browser, log)


def wait_for_log_line(browser: Browser, pattern: str) -> None:
    """Wait until the log pane (on the screen) shows a line matching `pattern`."""
    d = browser.driver
    wait_for(d, lambda d: re.search(pattern, d.find_element(CSS, "#log").text) or None,
             timeout=30, what=f"a log line matching {pattern!r}",
             seen=lambda: d.find_element(CSS, "#log").text)  # fmt: skip


def scale(browser: Browser, to: int) -> None:
    d = browser.driver
    slider = d.find_element(CSS, "#scale")
    wait_for(d, lambda d: slider.is_enabled() or None, timeout=30)
    now = int(slider.get_attribute("value") or 0)
    key = "\ue014" if to > now else "\ue012"  # ArrowRight / ArrowLeft
    for _ in range(abs(to - now)):
        slider.send_keys(key)
    assert d.find_element(CSS, "#scale-value").text == str(to)
    d.find_element(CSS, "#scale-apply").click()
    wait_for(d, lambda d: rows(browser, "live") == to or None, timeout=60,
             what=f"{to} live worker rows", seen=lambda: row_states(browser))


def stop(browser: Browser) -> None:
    d = browser.driver
    d.find_element(CSS, "#stop").click()
    d.switch_to.alert.accept()
    wait_for(d, lambda d: d.find_element(CSS, "#control-message").text or None, timeout=30)
    assert not d.find_element(CSS, "#control-message").text.startswith("refused"), (
        d.find_element(CSS, "#control-message").text
    )


def test_the_setup_form_shows_gossamer_crawls_refusal(tmp_path: Path, browser: Browser) -> None:
    bad_seed = "ftp://a.test/"
    (tmp_path / "resolve.txt").write_text("")
    env = crawl_env(tmp_path / "resolve.txt")  # the command line and the dashboard alike
    cli = subprocess.run(
        gossamer("crawl", bad_seed, "-o", str(tmp_path / "cli"), "--workers", "2", "--scope",
                 "all", "--delay", "0.2"),
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert cli.returncode == 2
    # the command's refusal, in the form's words: its label for the setting
    message = form_words(_error_line(cli.stderr))
    assert message.startswith("invalid seed URL 'ftp://a.test/': only http and https"), message
    out = tmp_path / "crawl"
    with dashboard([str(out)], env, tmp_path) as base:
        d = browser.driver
        d.get(base + "/")
        fill_setup(browser, bad_seed, 2)
        d.find_element(CSS, "#start").click()
        wait_for_text(d, "#setup-error", "invalid seed URL", timeout=30)
        assert d.find_element(CSS, "#setup-error").text == message
        assert d.find_element(CSS, "#tab-setup").get_attribute("aria-selected") == "true"
        assert d.find_element(CSS, "#crawl-state").text == "not started"
    assert not (out / "crawl.json").exists()


def test_embedded_crawl_from_setup_to_scaled_to_stopped(tmp_path: Path, browser: Browser) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(_BIG) as web:
        env = crawl_env(web.write_resolve_file(tmp_path / "resolve.txt"))
        with dashboard([str(out)], env, tmp_path) as base:
            d = browser.driver
            d.get(base + "/")
            wait_for_text(d, "#crawl-state", "not started", timeout=30)
            # a crawl not started: the page opens on Setup
            assert d.find_element(CSS, "#tab-setup").get_attribute("aria-selected") == "true"
            fill_setup(browser, web.url(0, 0), 2)
            shot(browser, "setup.png")
            d.find_element(CSS, "#start").click()
            wait_for(d, lambda d: d.find_element(CSS, "#tab-status").get_attribute(
                "aria-selected") == "true" or None, timeout=30)  # fmt: skip
            try:
                watch_it_move(browser, workers=2)
                shot(browser, "status.png")
                scale(browser, 3)
                assert d.find_element(CSS, "#scale-value").text == "3"
                shot(browser, "workers.png", scroll_to="#worker-summary")
                scale(browser, 2)
                stop(browser)
                wait_for_text(d, "#crawl-state", "ended", timeout=60)
                wait_for_text(d, '#coordinator [data-field="end_reason"]', "SIGTERM")
                assert d.find_element(CSS, '#coordinator [data-field="pid"]').text == "-"
                assert not d.find_element(CSS, "#stop").is_enabled()
                assert not d.find_element(CSS, "#scale-apply").is_enabled()
                # and the form offers to resume it
                d.find_element(CSS, "#tab-setup").click()
                wait_for(d, lambda d: d.find_element(CSS, "#resume").is_enabled() or None)
            finally:
                _kill_leftovers(tmp_path)


def no_gossamer_env() -> dict[str, str]:
    """The test's environment without any GOSSAMER_* setting: a crawl the dashboard starts
    gets the crawler's own defaults and what the form sends, nothing else."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GOSSAMER_")}


def shown(browser: Browser, css: str) -> str:
    return str(browser.driver.find_element(CSS, css).get_attribute("value"))


def test_a_site_on_this_machine_started_from_setup(tmp_path: Path, browser: Browser) -> None:
    """A static site on 127.0.0.1 (nginx) from the Setup tab: the form shows the settings a
    first crawl needs with the crawler's defaults; started as it is, the crawl is refused
    the site's private address and ends at once with no page — the Setup tab says so in one
    full line naming the box to tick, and offers to start again; ticked, the same directory
    is crawled whole."""
    site = static_site(tmp_path, 30)
    out = tmp_path / "crawl"
    defaults = CrawlSettings.model_validate({})  # the settings model's defaults
    with run_nginx(site.server), dashboard([str(out)], no_gossamer_env(), tmp_path) as base:
        d = browser.driver
        d.get(base + "/")
        wait_for_text(d, "#crawl-state", "not started", timeout=30)
        assert d.find_element(CSS, "#tab-setup").get_attribute("aria-selected") == "true"
        # every setting a first crawl needs, each showing the default the crawl gets
        assert d.find_element(CSS, "#allow-private").is_selected() is defaults.fetch.allow_private
        assert shown(browser, "#scope") == defaults.scope
        assert float(shown(browser, "#delay")) == defaults.politeness.delay
        assert shown(browser, "#max-depth") == str(defaults.max_depth)  # 20, not "no limit"
        assert defaults.max_pages is None and shown(browser, "#max-pages") == ""
        assert shown(browser, "#workers") == str(min(defaults.effective_workers(), 64))
        d.find_element(CSS, "#seeds").send_keys(site.base)
        d.find_element(CSS, "#seed-add").click()
        set_field(browser, "#delay", "0.1")
        d.find_element(CSS, "#start").click()
        # the crawl fetched nothing: one readable message in the Setup tab, in full
        wait_for_text(d, "#setup-error", "Allow private addresses", timeout=60)
        wait_for_text(d, "#crawl-state", "ended", timeout=30)
        status = api(base, "/api/status")
        problem = status["crawl"]["problem"]
        error = d.find_element(CSS, "#setup-error")
        assert error.text == problem["message"]
        assert "tick Allow private addresses" in error.text and "--allow" not in error.text
        assert d.execute_script("const e = arguments[0]; return e.scrollWidth <= e.clientWidth "
                                "&& e.scrollHeight <= e.clientHeight + 1", error)  # not cut
        assert d.find_element(CSS, "#tab-setup").get_attribute("aria-selected") == "true"
        assert "needs-change" in str(d.find_element(CSS, "#allow-private").get_attribute("class"))
        # … and the same directory can be started again from here
        wait_for(d, lambda d: d.find_element(CSS, "#start").is_enabled() or None)
        assert "nothing to start" not in d.find_element(CSS, "#setup-note").text
        assert [e.text for e in d.find_elements(CSS, "#seed-list li span")] == [site.base]
        shot(browser, "setup-refused.png")
        d.find_element(CSS, "#allow-private").click()
        d.find_element(CSS, "#start").click()
        wait_for(d, lambda d: d.find_element(CSS, "#tab-status").get_attribute(
            "aria-selected") == "true" or None, timeout=30)  # fmt: skip
        wait_for_text(d, '#coordinator [data-field="end_reason"]', "complete", timeout=60)
        wait_for_text(d, "#pages", "31", timeout=30)  # its 30 files, index.html also as /
        assert d.find_element(CSS, "#setup-error").text == ""
        assert d.find_element(CSS, "#crawl-problem").text == ""
        assert d.find_element(CSS, "#connection").text == "ended"
        wait_for(d, lambda d: number(browser, '#graph [data-field="nodes"]') == 31 or None,
                 timeout=60)  # fmt: skip
        links = wait_for(d, lambda d: d.find_elements(CSS, '#graph [data-field="top_page"] a')
                         or None)  # fmt: skip
        assert links[0].get_attribute("href").startswith(site.base)  # the top page, linked
        d.execute_script("document.querySelector('#log').scrollIntoView()")
        wait_for_log_line(browser, r" INFO .*200 ok http://127\.0\.0\.1")
        shot(browser, "local-site.png")
    settings = json.loads((out / "crawl.json").read_text())
    assert settings["allow_private"] is True and settings["delay"] == 0.1
    requested = Counter(line.split()[1] for line in site.access_log.read_text().splitlines()
                        if line.startswith("GET "))  # fmt: skip
    pages = [p for p in requested if p.endswith(".html") or p == "/"]
    assert len(pages) == 31 and set(requested.values()) == {1}, requested


def duration_text(s: float) -> str:
    """dashboard.js's duration()."""
    h, m, sec = int(s // 3600), int(s % 3600 // 60), int(s % 60)
    return (f"{h}h " if h else "") + (f"{m}m " if h or m else "") + f"{sec}s"


def test_a_finished_crawl_is_shown_whole(
    tmp_path: Path, browser: Browser, two_run_crawl: Callable[..., Path]
) -> None:
    """A crawl of two runs that ended, opened afterwards: the crawl's time over both runs
    (`gossamer report`'s), its pages by worker adding up to its pages, its rate over its
    whole history, a header that says it ended, and its web graph statistics computed on
    demand (`gossamer graph stats`'s figures)."""
    # (longer runs for the screenshot: a rate chart of more than a few seconds)
    out = two_run_crawl(tmp_path / "crawl", delay=0.25 if SHOTS else 0.02)
    report = crawl_report(out)["totals"]
    by_worker = Counter(
        rec["worker"] for rec in map(json.loads, (out / "crawl.log.jsonl").read_text().splitlines())
        if rec.get("depth") is not None and rec.get("status") is not None
    )  # fmt: skip
    assert sorted(by_worker) == ["w0", "w1"] and sum(by_worker.values()) == report["fetches"]
    graph = json.loads(subprocess.run(gossamer("graph", "stats", str(out), "--json"),
                                      capture_output=True, check=True, timeout=120).stdout)
    with dashboard([str(out)], no_gossamer_env(), tmp_path) as base:
        d = browser.driver
        d.get(base + "/")
        wait_for_text(d, "#crawl-state", "ended", timeout=30)
        assert d.find_element(CSS, "#tab-status").get_attribute("aria-selected") == "true"
        assert d.find_element(CSS, "#connection").text == "ended"  # not "live"
        status = api(base, "/api/status")
        assert status["crawl"]["runs"] == 2
        assert abs(status["crawl"]["elapsed_s"] - report["duration_s"]) <= 0.06, report
        assert d.find_element(CSS, '#coordinator [data-field="elapsed"]').text == duration_text(
            status["crawl"]["elapsed_s"])  # fmt: skip
        assert number(browser, "#pages") == report["fetches"]
        rows_shown = d.find_elements(CSS, "#worker-table tbody tr")
        table = {tr.get_attribute("data-worker"): int(tr.find_elements(CSS, "td")[5].text)
                 for tr in rows_shown}  # fmt: skip
        assert table == dict(by_worker)
        # the rate chart: the whole crawl from its log, not one dot
        history = api(base, "/api/history")
        assert len(history["t"]) >= 3 and history["pages"][-1] == report["fetches"]
        assert history["t"][0] <= report_start(out) + 1
        wait_for(d, lambda d: chart_points(browser, "rate") == len(history["t"]) or None)
        # the graph statistics, computed on demand: gossamer graph stats's figures
        wait_for_text(d, '#graph [data-field="updated"]', "computed", timeout=60)
        for key in ("nodes", "edges", "scc_count", "largest_scc", "dangling"):
            assert number(browser, f'#graph [data-field="{key}"]') == graph[key], key
        assert chart_points(browser, "in-degree") > 1
        shot(browser, "finished.png")
    assert (out / "graph" / "stats-on-demand.json").is_file()  # cached for the next look


def report_start(out: Path) -> float:
    return float(crawl_report(out)["runs"][0]["started"])


def _kill_leftovers(root: Path) -> None:
    """The crawl processes the dashboard started for this test (in their own sessions: not the
    test's children), if the test failed before they ended: every gossamer process whose
    command line names the test's directory gets SIGKILL."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"gossamer" in argv and any(str(root).encode() in a for a in argv):
                os.kill(int(entry.name), signal.SIGKILL)


def test_cluster_crawl_from_setup_to_scaled_to_stopped(
    tmp_path: Path, redis_url: str, browser: Browser
) -> None:
    with serve_in_thread(_BIG) as web:
        env = crawl_env(web.write_resolve_file(tmp_path / "resolve.txt"))
        with dashboard(["--redis", redis_url], env, tmp_path) as base:
            d = browser.driver
            d.get(base + "/")
            wait_for_text(d, "#source", "cluster redis://", timeout=30)
            assert d.find_element(CSS, "#partition").is_displayed()
            fill_setup(browser, web.url(0, 0), 2, partition="dynamic")
            d.find_element(CSS, "#start").click()
            try:
                # the live graph on (crawl_env): the dashboard starts `graph follow` beside
                # the detached crawl, so the degree charts are drawn for a cluster crawl too
                joined = r" INFO +w\d worker w\d .* joins"
                watch_it_move(browser, workers=2, graph=True, log=joined)
                shot(browser, "cluster.png")
                scale(browser, 3)
                scale(browser, 2)
                stop(browser)
                wait_for(d, lambda d: d.find_element(CSS, "#crawl-state").text in (
                    "stopping", "stopped") or None, timeout=30)  # fmt: skip
                wait_for_text(d, "#crawl-state", "stopped", timeout=60)
                wait_for(d, lambda d: rows(browser, "live") == 0 or None, timeout=60,
                         what="no live worker rows", seen=lambda: row_states(browser))
                # and the form resumes it (`crawl --resume --redis … --detach`): one local
                # worker crawls again, and the page turns to the Status tab
                d.find_element(CSS, "#tab-setup").click()
                wait_for(d, lambda d: d.find_element(CSS, "#resume").is_enabled() or None)
                d.find_element(CSS, "#resume").click()
                wait_for(d, lambda d: d.find_element(CSS, "#tab-status").get_attribute(
                    "aria-selected") == "true" or None, timeout=60)  # fmt: skip
                said = d.find_element(CSS, "#setup-message").get_attribute("textContent")
                assert (said or "").startswith("resumed crawl "), said  # (the tab is hidden)
                # the first run's graph consumer ended with the stop: a new one follows it
                assert "with 1 local worker and its live graph" in (said or ""), said
                wait_for_text(d, "#crawl-state", "running", timeout=30)
                wait_for(d, lambda d: rows(browser, "live") == 1 or None, timeout=60,
                         what="1 live worker row", seen=lambda: row_states(browser))
                assert not d.find_element(CSS, "#resume").is_enabled()
            finally:
                _kill_leftovers(tmp_path)


_CLI_FLAGS = ("--scope", "all", "--allow-private", "--delay", "0.2", "--concurrency", "4")


def test_watch_a_running_embedded_crawl_and_stop_it(tmp_path: Path, browser: Browser) -> None:
    """A crawl started on the command line (a pool of 2, the live graph on), watched: the
    numbers, charts, top hosts and log move; stopped with the button: it ends (SIGTERM)."""
    out = tmp_path / "crawl"
    with serve_in_thread(_BIG) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        env = crawl_env(resolve)
        with (tmp_path / "crawl.out").open("wb") as log:
            crawl = subprocess.Popen(
                gossamer("crawl", web.url(0, 0), "-o", str(out), "--resolve-file", str(resolve),
                         *_CLI_FLAGS, "--workers", "2", "--live-graph", "-q"),
                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env,
            )  # fmt: skip
        try:
            wait_for(None, lambda _: (out / "crawl.json").is_file() or crawl.poll() is not None,
                     timeout=30)  # fmt: skip
            with dashboard([str(out)], env, tmp_path) as base:
                d = browser.driver
                d.get(base + "/")
                watch_it_move(browser, workers=None)
                assert d.find_element(CSS, "#tab-status").get_attribute("aria-selected") == "true"
                assert d.find_element(CSS, '#coordinator [data-field="pid"]').text == str(crawl.pid)
                stop(browser)
                assert crawl.wait(timeout=60) == 143, (tmp_path / "crawl.out").read_text()
                wait_for_text(d, "#crawl-state", "ended", timeout=30)
                wait_for_text(d, '#coordinator [data-field="end_reason"]', "SIGTERM")
                assert not d.find_element(CSS, "#stop").is_enabled()
        finally:
            if crawl.poll() is None:
                crawl.kill()
            crawl.wait()


def test_watch_a_cluster_crawl_and_stop_it(
    tmp_path: Path, redis_url: str, browser: Browser
) -> None:
    """A cluster crawl on a real redis-server with two `gossamer worker`s, watched: both
    rows, the numbers, the rate chart, the top hosts and the log move (each worker's fetches
    in it too); stopped with the button: every worker leaves and the crawl is stopped."""
    with serve_in_thread(_BIG) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        env = crawl_env(resolve, GOSSAMER_REDIS=redis_url)
        created = subprocess.run(
            gossamer("crawl", "--redis", redis_url, web.url(0, 0), "--workers", "0",
                     "--resolve-file", str(resolve), *_CLI_FLAGS, "--no-live-graph"),
            capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        crawl_id = created.stdout.strip()
        worker = gossamer("worker", "--crawl", crawl_id, "-o", str(tmp_path / "out"), "-q")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        procs = [subprocess.Popen(worker, env=env, cwd=tmp_path, **quiet) for _ in range(2)]
        try:
            with dashboard(["--redis", redis_url, "--crawl", crawl_id], env, tmp_path) as base:
                d = browser.driver
                d.get(base + "/")
                wait_for_text(d, "#crawl-id", crawl_id, timeout=30)
                assert d.find_element(CSS, "#source").text.startswith("cluster redis://")
                joined = r" INFO +w\d worker w\d .* joins"
                watch_it_move(browser, workers=2, graph=False, log=joined)
                for w in ("w1", "w2"):  # a sample of each worker's fetches (its fetch stream)
                    wait_for_log_line(browser, rf" INFO +{w} 200 ok http://")
                stop(browser)
                wait_for(d, lambda d: d.find_element(CSS, "#crawl-state").text in (
                    "stopping", "stopped") or None, timeout=30)  # fmt: skip
                assert [p.wait(timeout=60) for p in procs] == [0, 0]
                wait_for_text(d, "#crawl-state", "stopped", timeout=30)
                wait_for(d, lambda d: rows(browser, "stopped") == 2 or None, timeout=30)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
