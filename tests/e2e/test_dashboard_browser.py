"""The dashboard end to end in a real headless Chromium: a real `gossamer dashboard` process,
crawls started from its Setup form against the simulated web, the numbers and the charts seen
moving on the page, the workers scaled from 2 to 3 and back with the slider and the table seen
following, the crawl stopped with the button and seen ending — an embedded crawl (a crawl
directory) and a cluster crawl (a real redis-server). Every assertion is on what the page
shows.

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
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from gossamer.testweb import WebSpec, serve_in_thread
from gossamer.testweb._browser import (
    Browser,
    screenshot,
    wait_for,
    wait_for_js,
    wait_for_text,
)

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
    d.find_element(CSS, "#delay").send_keys("0.2")
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
    message = cli.stderr.strip().splitlines()[-1].removeprefix("gossamer: error: ")
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
