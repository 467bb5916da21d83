"""The dashboard's page in a real headless Chromium, fed by a scripted status source through
the real app (`make_app`, served by uvicorn on a free loopback port): what the page shows for
each status key, its tabs, the Setup form's first values (the server's defaults), requests and
the server's refusal shown verbatim, a crawl that fetched nothing said in the Setup tab, a
finished crawl (its history, its header, its graph statistics being computed), the worker
table at 100 workers, the slider, stop, the charts and the bounded log tail.

The log tail (/api/log, /events/log) and the history (/api/history) are the app's own, over
the scripted source's log ring and the hub's history. The control requests (POST /api/start,
/api/scale, /api/resume) are scripted here, in front of the app's own routes, with the request
and answer shapes of the contract (docs/dashboard.md): these tests check what the page sends
and shows, not what the server does with it. tests/e2e/test_dashboard_browser.py runs the page
against the real ones and real crawls."""

from __future__ import annotations

import contextlib
import copy
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gossamer.dashboard import make_app
from gossamer.dashboard._logtail import LogRing
from gossamer.dashboard._setup import form_defaults
from gossamer.testweb._browser import (
    Browser,
    wait_for,
    wait_for_element,
    wait_for_js,
    wait_for_text,
)

By_CSS = "css selector"
POSTS = ("/api/start", "/api/resume", "/api/scale")


def degree(alpha: float, nodes: int) -> dict[str, Any]:
    bins = [{"min": 0, "max": 0, "count": 12}]
    k = 0
    while 2**k <= 512:
        lo, hi = 2**k, 2 ** (k + 1) - 1
        count = int(nodes * (lo ** (1 - alpha) - (hi + 1) ** (1 - alpha)))
        bins.append({"min": lo, "max": hi, "count": count})
        k += 1
    fit = {"alpha": alpha, "sigma": 0.03, "xmin": 2, "n_tail": nodes // 3, "ks": 0.02}
    return {"max": 700, "mean": 8.5, "histogram": bins, "power_law": fit}


def worker(i: int, pages: int, state: str = "running") -> dict[str, Any]:
    return {
        "id": f"w{i}", "machine": "m1", "pid": 1000 + i, "state": state,
        "hosts": [f"h{i}.test", f"h{i + 50}.test"], "pages": pages, "pages_per_s": pages / 10,
        "errors": i % 3, "last_heartbeat": time.time(), "beat_age_s": 0.4,
    }  # fmt: skip


def status(**changes: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "source": {"kind": "embedded", "directory": "/tmp/crawl"},
        "crawl": {
            "id": "crawl", "state": "running", "end_reason": None, "pid": 4242,
            "started": time.time() - 75, "elapsed_s": 75.0, "runs": 1, "max_pages": 5000,
            "seeds": ["http://h0.test/"],
        },
        "totals": {
            "pages": 1234, "pages_per_s": 48.5, "requests": 1300, "bytes": 21_000_000,
            "bytes_per_s": 820_000.0, "errors": 7, "statuses": {"200": 1234}, "outcomes": {},
            "workers": 2,
        },
        "frontier": {"queued": 900, "leased": 4, "done": 1234, "failed": 7, "hosts": 60},
        "workers": [worker(0, 600), worker(1, 634)],
        "graph": {
            "nodes": 2100, "edges": 31000, "scc_count": 12, "largest_scc": 1900, "dangling": 300,
            "diameter": None, "diameter_lower_bound": 9, "average_distance": 4.37,
            "in_degree": degree(2.1, 2000), "out_degree": degree(2.6, 2000), "final": False,
        },
        "top_hosts": [
            {"host": f"h{i}.test", "queued": 90 - i, "fetched": 20 + i, "errors": 0,
             "delay_s": 0.5, "state": "leased" if i < 2 else "waiting"}
            for i in range(20)
        ],
        "control": {
            "workers": 2, "can_start": False, "can_resume": False, "can_stop": True,
            "can_scale": True, "max_workers": 8,
        },
    }  # fmt: skip
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            s[section][field] = value
        else:
            s[section] = value
    return s


#: what may be asked of a crawl not started yet (or one that fetched no page): start it
STARTABLE = {"workers": None, "can_start": True, "can_resume": False, "can_stop": False,
             "can_scale": False, "max_workers": 8}  # fmt: skip


def not_started() -> dict[str, Any]:
    return status(crawl__state="not started", crawl__pid=None, workers=[], control=STARTABLE)


class ScriptedSource:
    """A StatusSource whose status the test sets; `stop` marks the crawl stopping; log records
    the test adds reach the ring at the next read, as a crawl's new log lines do."""

    def __init__(self, initial: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self._status = initial
        self.stops = 0
        self.log_ring = LogRing()
        self._new_log: list[dict[str, Any]] = []

    def add_log(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            self._new_log.extend(records)

    def read_log(self) -> None:
        with self._lock:
            new, self._new_log = self._new_log, []
        for record in new:
            self.log_ring.add(record)

    def set(self, new: dict[str, Any]) -> None:
        with self._lock:
            self._status = new

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            s = copy.deepcopy(self._status)
        s["time"] = time.time()
        return s

    def stop(self) -> str:
        with self._lock:
            self.stops += 1
            self._status["crawl"]["state"] = "stopping"
        return "sent SIGTERM to the crawl (pid 4242)"

    def close(self) -> None:
        pass


class Scripted:
    """The scripted control endpoints: answers the test sets, requests recorded."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.answers: dict[str, list[tuple[int, dict[str, Any]]]] = {}

    def answer(self, path: str, code: int, body: dict[str, Any]) -> None:
        self.answers.setdefault(path, []).append((code, body))

    def posted(self, path: str) -> list[Any]:
        return [body for p, body in self.requests if p == path]

    def routes(self) -> list[Route]:
        async def post(request: Request) -> Response:
            self.requests.append((request.url.path, await request.json()))
            queue = self.answers.get(request.url.path) or [(200, {"ok": True, "message": "ok"})]
            code, body = queue.pop(0) if len(queue) > 1 else queue[0]
            return JSONResponse(body, status_code=code)

        return [Route(p, post, methods=["POST"]) for p in POSTS]


@contextlib.contextmanager
def serve(app: Starlette) -> Iterator[str]:
    """`app` under uvicorn in a thread on a free loopback port; its base URL."""
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1, lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"


@pytest.fixture
def scripted() -> Scripted:
    return Scripted()


@pytest.fixture
def source() -> ScriptedSource:
    return ScriptedSource(status())


@pytest.fixture
def app(source: ScriptedSource, scripted: Scripted) -> Starlette:
    app = make_app(source)
    for route in reversed(scripted.routes()):  # in front of the app's own, when it has them
        app.router.routes.insert(0, route)
    return app


@pytest.fixture
def base(app: Starlette) -> Iterator[str]:
    with serve(app) as url:
        yield url


def texts(browser: Browser, css: str) -> list[str]:
    return [e.text for e in browser.driver.find_elements(By_CSS, css)]


def field(browser: Browser, root: str, name: str) -> str:
    return str(browser.driver.find_element(By_CSS, f'#{root} [data-field="{name}"]').text)


def test_status_tab_shows_the_coordinator_pane_graph_and_charts(
    base: str, source: ScriptedSource, browser: Browser
) -> None:
    d = browser.driver
    d.get(base + "/")
    wait_for_text(d, "#crawl-state", "running")
    assert d.find_element(By_CSS, "#tab-status").get_attribute("aria-selected") == "true"
    assert not d.find_element(By_CSS, "#panel-status").get_attribute("hidden")
    assert d.find_element(By_CSS, "#panel-setup").get_attribute("hidden") is not None
    assert d.find_element(By_CSS, "#pages").text == "1,234"
    assert d.find_element(By_CSS, "#workers-count").text == "2"
    shown = {
        name: field(browser, "coordinator", name)
        for name in ("pid", "elapsed", "pages_per_s", "bytes", "bytes_per_s", "max_pages",
                     "requests", "errors", "queued", "known", "hosts", "end_reason")
    }  # fmt: skip
    assert shown == {
        "pid": "4242", "elapsed": "1m 15s", "pages_per_s": "48.5", "bytes": "20.0 MiB",
        "bytes_per_s": "800.8 KiB/s", "max_pages": "5,000", "requests": "1,300", "errors": "7",
        "queued": "900", "known": "2,145", "hosts": "60", "end_reason": "-",
    }  # fmt: skip
    graph = {k: field(browser, "graph", k) for k in ("nodes", "scc_count", "dangling", "diameter",
                                                      "average_distance")}  # fmt: skip
    assert graph == {"nodes": "2,100", "scc_count": "12", "dangling": "300", "diameter": "≥9",
                     "average_distance": "4.37"}  # fmt: skip
    # the charts are drawn (uPlot canvases) with the histogram's positive bins (10) and a fit
    for chart in ("#chart-rate", "#chart-in-degree", "#chart-out-degree"):
        wait_for_element(d, f"{chart} canvas")
    assert d.find_element(By_CSS, "#chart-in-degree").get_attribute("data-points") == "10"
    assert "α = 2.10" in d.find_element(By_CSS, "#fit-in").text
    assert texts(browser, "#top-hosts tbody tr td:first-child")[:2] == ["h0.test", "h1.test"]
    assert len(texts(browser, "#top-hosts tbody tr")) == 20
    # a change is on the page within a second (the page's own clock when it rendered it; the
    # test's polling does not count): the median of 3, as test_dashboard_e2e measures the stream
    points = int(d.find_element(By_CSS, "#chart-rate").get_attribute("data-points"))
    delays = []
    for pages in (1400, 1450, 1500):
        t0 = time.time()
        source.set(status(totals__pages=pages, totals__pages_per_s=pages / 1000 * 40 + 1))
        wait_for_text(d, "#pages", f"{pages:,}")
        delays.append(d.execute_script("return window.gossamerPage.lastHandledAt") / 1000 - t0)
    assert statistics.median(delays) < 1.0, delays
    wait_for_js(d, f"Number(document.querySelector('#chart-rate').dataset.points) > {points}")
    assert d.find_element(By_CSS, "#chart-rate").get_attribute("data-last") == "61"  # 1500 pages
    # a crawl that ended: the state and reason, stop and the slider disabled
    ended = status(crawl__state="ended", crawl__end_reason="max-pages", crawl__pid=None)
    ended["control"].update(can_stop=False, can_scale=False)
    source.set(ended)
    wait_for_text(d, "#crawl-state", "ended")
    assert field(browser, "coordinator", "end_reason") == "max-pages"
    for button in ("#stop", "#scale", "#scale-apply"):
        assert not d.find_element(By_CSS, button).is_enabled(), button


def test_rate_chart_starts_from_the_history(app: Starlette, base: str, browser: Browser) -> None:
    now = time.time()
    for i in range(30):  # what the hub read before the page opened, a sample every 2 s
        sample = status(totals__pages_per_s=10.0 + i)
        app.state.hub.history.add({**sample, "time": now - 60 + 2 * i})
    browser.driver.get(base + "/")
    points = "Number(document.querySelector('#chart-rate').dataset.points)"
    wait_for_js(browser.driver, f"{points} >= 31")  # the history, then the page's own event


def test_worker_table_at_100_workers_scrolls_under_a_fixed_header_and_sorts(
    base: str, source: ScriptedSource, browser: Browser
) -> None:
    d = browser.driver
    source.set(status(workers=[worker(i, (i * 37) % 101) for i in range(100)], totals__workers=100))
    d.get(base + "/")
    wait_for(d, lambda d: len(d.find_elements(By_CSS, "#worker-table tbody tr")) == 100 or None)
    box = d.find_element(By_CSS, "#worker-table").find_element("xpath", "..")
    height = box.size["height"]
    assert 150 < height < 400, height  # the table scrolls in its box; the page stays short
    assert texts(browser, "#worker-table tbody tr td:first-child")[:3] == ["w0", "w1", "w2"]
    assert "100 · 100 running" in d.find_element(By_CSS, "#worker-summary").text
    d.execute_script("arguments[0].scrollTop = arguments[0].scrollHeight", box)
    header = d.find_element(By_CSS, "#worker-table thead th")
    assert abs(header.location["y"] - box.location["y"]) <= 2  # still at the box's top
    # sort by pages (most first), then fewest first
    d.find_element(By_CSS, '#worker-table th[data-key="pages"] button').click()
    pages = [int(t) for t in texts(browser, "#worker-table tbody tr td:nth-child(6)")]
    assert pages == sorted(pages, reverse=True) and pages[0] == 100
    d.find_element(By_CSS, '#worker-table th[data-key="pages"] button').click()
    pages = [int(t) for t in texts(browser, "#worker-table tbody tr td:nth-child(6)")]
    assert pages == sorted(pages)
    # the order holds across status events
    source.set(status(workers=[worker(i, (i * 37) % 101 + 1) for i in range(100)]))
    first_pages = "document.querySelector('#worker-table tbody td:nth-child(6)').textContent"
    wait_for_js(d, f"{first_pages} === '1'")


def test_setup_form_sends_the_seeds_and_settings_and_shows_the_refusal_verbatim(
    base: str, source: ScriptedSource, scripted: Scripted, browser: Browser
) -> None:
    d = browser.driver
    source.set(not_started())
    refusal = "--max-pages must be at least 1 (got 0)"
    scripted.answer("/api/start", 400, {"error": refusal})
    scripted.answer("/api/start", 200, {"ok": True, "message": "crawl started (pid 77)"})
    d.get(base + "/")
    # a crawl not started yet opens on Setup
    wait_for(d, lambda d: d.find_element(By_CSS, "#tab-setup").get_attribute("aria-selected")
             == "true" or None)  # fmt: skip
    assert not d.find_element(By_CSS, "#partition").is_displayed()  # cluster only
    assert not d.find_element(By_CSS, "#resume").is_enabled()
    seeds = d.find_element(By_CSS, "#seeds")
    seeds.send_keys("http://a.test/\nhttp://b.test/\nhttp://c.test/\nhttp://a.test/")
    d.find_element(By_CSS, "#seed-add").click()
    assert texts(browser, "#seed-list li span") == ["http://a.test/", "http://b.test/",
                                                     "http://c.test/"]  # fmt: skip
    d.find_element(By_CSS, "#seed-list li:nth-child(2) button").click()
    assert texts(browser, "#seed-list li span") == ["http://a.test/", "http://c.test/"]
    # the settings show the crawl's defaults, as the server gives them (never the page's own)
    values = form_defaults()["values"]
    assert d.find_element(By_CSS, "#allow-private").is_selected() is values["allow_private"]
    assert d.find_element(By_CSS, "#max-depth").get_attribute("value") == str(values["max_depth"])
    assert d.find_element(By_CSS, "#scope").get_attribute("value") == values["scope"]
    assert float(d.find_element(By_CSS, "#delay").get_attribute("value")) == values["delay"]
    assert d.find_element(By_CSS, "#workers").get_attribute("value") == str(values["workers"])
    d.find_element(By_CSS, "#max-pages").send_keys("0")
    for field, value in (("#workers", "3"), ("#delay", "0.25"), ("#max-depth", "")):
        box = d.find_element(By_CSS, field)
        box.clear()
        box.send_keys(value)
    d.find_element(By_CSS, "#scope option[value='all']").click()
    if not d.find_element(By_CSS, "#allow-private").is_selected():
        d.find_element(By_CSS, "#allow-private").click()
    d.find_element(By_CSS, "#start").click()
    wait_for_text(d, "#setup-error", refusal)
    assert d.find_element(By_CSS, "#setup-error").text == refusal
    assert scripted.posted("/api/start") == [{
        "seeds": ["http://a.test/", "http://c.test/"], "allow_private": True, "scope": "all",
        "delay": 0.25, "max_depth": "none", "max_pages": 0, "workers": 3, "partition": None,
        "machines": None,  # (the Machines field, empty: workers on this machine)
    }]  # fmt: skip
    assert d.find_element(By_CSS, "#tab-setup").get_attribute("aria-selected") == "true"
    # corrected: started, and the page turns to the Status tab
    max_pages = d.find_element(By_CSS, "#max-pages")
    max_pages.clear()
    max_pages.send_keys("100")
    d.find_element(By_CSS, "#start").click()
    wait_for(d, lambda d: d.find_element(By_CSS, "#tab-status").get_attribute("aria-selected")
             == "true" or None)  # fmt: skip
    assert scripted.posted("/api/start")[1]["max_pages"] == 100
    assert d.find_element(By_CSS, "#setup-error").text == ""


def test_setup_of_a_cluster_crawl_offers_the_partition(
    base: str, source: ScriptedSource, scripted: Scripted, browser: Browser
) -> None:
    d = browser.driver
    s = status(source={"kind": "cluster", "redis": "redis://:***@127.0.0.1:6379/0"})
    s["control"].update(can_start=True, can_resume=True)
    source.set(s)
    finished = "crawl c1 is finished: nothing to resume"  # (it finished meanwhile)
    scripted.answer("/api/resume", 409, {"error": finished})
    d.get(base + "/#setup")
    wait_for_text(d, "#source", "cluster redis://:***@")
    assert d.find_element(By_CSS, "#partition").is_displayed()
    d.find_element(By_CSS, "#seeds").send_keys("http://a.test/")
    d.find_element(By_CSS, "#partition option[value='consistent']").click()
    d.find_element(By_CSS, "#resume").click()
    wait_for_text(d, "#setup-error", finished)
    assert d.find_element(By_CSS, "#resume").is_enabled()  # refused: it may be clicked again
    assert scripted.posted("/api/resume") == [{}]
    d.find_element(By_CSS, "#start").click()  # the seed typed and not added is sent too
    wait_for(d, lambda d: scripted.posted("/api/start") or None)
    sent = scripted.posted("/api/start")[0]
    assert sent["seeds"] == ["http://a.test/"] and sent["partition"] == "consistent"


def test_slider_scales_and_stop_stops(
    base: str, source: ScriptedSource, scripted: Scripted, browser: Browser
) -> None:
    d = browser.driver
    d.get(base + "/")
    wait_for_text(d, "#scale-value", "2")
    scale = d.find_element(By_CSS, "#scale")
    assert scale.get_attribute("max") == "8" and scale.get_attribute("value") == "2"
    scale.send_keys("\ue014")  # ArrowRight: 3
    assert d.find_element(By_CSS, "#scale-value").text == "3"
    # a status event while the slider was moved and not applied leaves it where it is
    source.set(status(totals__pages=1300))
    wait_for_text(d, "#pages", "1,300")
    assert d.find_element(By_CSS, "#scale").get_attribute("value") == "3"
    d.find_element(By_CSS, "#scale-apply").click()
    wait_for(d, lambda d: scripted.posted("/api/scale") or None)
    assert scripted.posted("/api/scale") == [{"workers": 3}]
    wait_for_text(d, "#control-message", "ok")
    grown = status(workers=[worker(i, 100) for i in range(3)], totals__workers=3)
    grown["control"]["workers"] = 3
    source.set(grown)
    wait_for(d, lambda d: len(d.find_elements(By_CSS, "#worker-table tbody tr")) == 3 or None)
    scripted.answer("/api/scale", 409, {"error": "the crawl has ended"})
    d.find_element(By_CSS, "#scale-apply").click()
    wait_for_text(d, "#control-message", "refused: the crawl has ended")
    # stop: confirmed in the browser's dialog, sent to the app's real /api/stop
    d.find_element(By_CSS, "#stop").click()
    d.switch_to.alert.accept()
    wait_for_text(d, "#control-message", "sent SIGTERM to the crawl")
    wait_for_text(d, "#crawl-state", "stopping")
    assert source.stops == 1


def test_log_tail_is_filtered_streamed_and_bounded(
    base: str, source: ScriptedSource, browser: Browser
) -> None:
    d = browser.driver
    t = time.time()
    d.get(base + "/")
    # the pane scrolled well above the screen (so that no change of the layout above it, a
    # chart drawn late, brings it back): records wait until it is on the screen
    wait_for_text(d, "#crawl-state", "running")
    d.execute_script(
        "document.body.style.paddingBottom = '6000px';"
        "window.scrollTo(0, window.scrollY + document.querySelector('#log')"
        ".getBoundingClientRect().bottom + 2000)"
    )
    wait_for_js(d, "window.gossamerPage.logOnScreen === false")
    source.add_log([
        {"time": t - 2, "level": "info", "worker": None, "kind": "diagnostic",
         "message": "crawl started"},
        {"time": t - 1, "level": "warning", "worker": "w1", "kind": "fetch", "message": "",
         "url": "http://h1.test/missing", "status": 404, "outcome": "fetch/status/404"},
    ])  # fmt: skip
    wait_for_js(d, "window.gossamerPage.logWaiting === 2")
    assert not d.find_elements(By_CSS, "#log li")
    d.execute_script("document.querySelector('#log').scrollIntoView()")
    wait_for(d, lambda d: len(d.find_elements(By_CSS, "#log li")) == 2 or None)
    assert d.execute_script("return window.gossamerPage.logWaiting") == 0
    lines = texts(browser, "#log li")
    assert lines[0].endswith("INFO    crawl started")
    assert "WARNING w1 404 fetch/status/404 http://h1.test/missing" in lines[1]
    # streamed, in batches of at most 200 (BATCH_MAX); the page keeps the last 500 lines
    for k in range(4):
        source.add_log([
            {"time": t + 200 * k + i, "level": "info", "worker": "w0", "kind": "diagnostic",
             "message": f"line {200 * k + i}"} for i in range(200)
        ])  # fmt: skip
        wait_for_text(d, "#log li:last-child", f"line {200 * k + 199}")
    shown = texts(browser, "#log li")
    assert len(shown) == 500 and shown[0].endswith("line 300"), shown[0]
    # more than a batch at once: the server's "skipped" record is shown, then the newest
    source.add_log([
        {"time": t + 800 + i, "level": "info", "worker": "w0", "kind": "diagnostic",
         "message": f"burst {i}"} for i in range(250)
    ])  # fmt: skip
    wait_for_text(d, "#log li:last-child", "burst 249")
    assert "50 records skipped" in texts(browser, "#log li")[-201]
    # a level filter: the log is read again with it, and the stream follows it
    d.find_element(By_CSS, "#log-level option[value='warning']").click()
    wait_for(d, lambda d: texts(browser, "#log li") == [lines[1]] or None)
    source.add_log([
        {"time": t + 1100, "level": "error", "worker": "w0", "kind": "diagnostic",
         "message": "w0 failed"},
        {"time": t + 1101, "level": "info", "worker": "w1", "kind": "diagnostic",
         "message": "not shown"},
    ])  # fmt: skip
    wait_for_text(d, "#log li:last-child", "ERROR   w0 w0 failed")
    assert len(d.find_elements(By_CSS, "#log li")) == 2
    # a worker filter (the workers the status names): w1's warnings only
    d.find_element(By_CSS, "#log-worker option[value='w1']").click()
    wait_for(d, lambda d: texts(browser, "#log li") == [lines[1]] or None)
    # scrolled away (to the end of the padding, far below the pane), new records wait (not
    # drawn); back on the screen, they are
    d.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    wait_for_js(d, "window.gossamerPage.logOnScreen === false")
    source.add_log([{"time": t + 1200, "level": "error", "worker": "w1", "kind": "diagnostic",
                     "message": "w1 failed"}])  # fmt: skip
    wait_for_js(d, "window.gossamerPage.logWaiting === 1")
    assert len(d.find_elements(By_CSS, "#log li")) == 1
    d.execute_script("document.querySelector('#log').scrollIntoView()")
    wait_for_text(d, "#log li:last-child", "ERROR   w1 w1 failed")


def test_a_crawl_that_starts_turns_an_unchosen_setup_tab_to_status(
    base: str, source: ScriptedSource, browser: Browser
) -> None:
    d = browser.driver
    source.set(not_started())
    d.get(base + "/")
    selected = "return document.querySelector('#tab-{}').getAttribute('aria-selected')"
    wait_for_js(d, f"(() => {{ {selected.format('setup')} }})() === 'true'")
    source.set(status())  # started from the command line
    wait_for_text(d, "#crawl-state", "running")
    wait_for_js(d, f"(() => {{ {selected.format('status')} }})() === 'true'")
    # a tab the reader chose stays
    d.find_element(By_CSS, "#tab-setup").click()
    source.set(status(totals__pages=4321))
    wait_for(d, lambda d: d.find_element(By_CSS, "#pages").get_attribute("textContent") == "4,321"
             or None)  # fmt: skip
    assert d.execute_script(selected.format("setup")) == "true"


def test_a_crawl_that_fetched_nothing_is_said_in_the_setup_tab(
    base: str, source: ScriptedSource, scripted: Scripted, browser: Browser
) -> None:
    d = browser.driver
    source.set(not_started())
    d.get(base + "/")
    wait_for_text(d, "#crawl-state", "not started")
    d.find_element(By_CSS, "#seeds").send_keys("http://127.0.0.1:8083/")
    d.find_element(By_CSS, "#start").click()
    wait_for(d, lambda d: d.find_element(By_CSS, "#tab-status").get_attribute("aria-selected")
             == "true" or None)  # fmt: skip
    source.set(status())  # it runs …
    wait_for_text(d, "#crawl-state", "running")
    # … and ends at once with no page: the page goes back to Setup, with one message in full
    message = ("No page was fetched. The seeds resolve to loopback/private addresses, which "
               "are refused by default (fetch/error/blocked-address ×2): tick Allow private "
               "addresses and start again.")  # fmt: skip
    problem = {"message": message, "kind": "fetch/error/blocked-address",
               "field": "allow_private"}  # fmt: skip
    failed = status(crawl__state="ended", crawl__end_reason="complete", crawl__pid=None,
                    crawl__problem=problem, crawl__seeds=["http://127.0.0.1:8083/"],
                    totals__pages=0, control=STARTABLE)  # fmt: skip
    source.set(failed)
    wait_for_text(d, "#setup-error", "tick Allow private addresses")
    assert d.find_element(By_CSS, "#setup-error").text == message
    assert d.find_element(By_CSS, "#tab-setup").get_attribute("aria-selected") == "true"
    box = d.find_element(By_CSS, "#allow-private")
    assert "needs-change" in str(box.get_attribute("class"))
    assert d.switch_to.active_element == box
    assert d.find_element(By_CSS, "#start").is_enabled()
    assert "nothing to start" not in d.find_element(By_CSS, "#setup-note").text
    assert d.find_element(By_CSS, "#crawl-problem").get_attribute("textContent") == message
    # opened afresh on that crawl: Setup, its seeds, the message
    d.get(base + "/")
    wait_for_text(d, "#setup-error", "tick Allow private addresses")
    assert d.find_element(By_CSS, "#tab-setup").get_attribute("aria-selected") == "true"
    assert texts(browser, "#seed-list li span") == ["http://127.0.0.1:8083/"]
    box = d.find_element(By_CSS, "#allow-private")
    if not box.is_selected():
        box.click()
    d.find_element(By_CSS, "#start").click()
    wait_for(d, lambda d: len(scripted.posted("/api/start")) == 2 or None)
    assert scripted.posted("/api/start")[1]["allow_private"] is True
    assert scripted.posted("/api/start")[1]["seeds"] == ["http://127.0.0.1:8083/"]
    source.set(status())  # the new crawl runs: the message is gone
    wait_for_text(d, "#crawl-state", "running")
    wait_for_js(d, "document.querySelector('#setup-error').textContent === ''")


def test_a_finished_crawl_shows_its_history_not_live_and_its_graph_when_computed(
    app: Starlette, base: str, source: ScriptedSource, browser: Browser
) -> None:
    d = browser.driver
    d.get(base + "/")
    wait_for_text(d, "#crawl-state", "running")
    assert d.find_element(By_CSS, "#connection").text == "live"
    points = "Number(document.querySelector('#chart-rate').dataset.points)"
    # it ends: the crawl's whole history (its files: the source's) replaces the page's points
    now = time.time()
    whole = {"t": [now - 100 + k for k in range(50)], "pages": list(range(50)),
             "pages_per_s": [1.0] * 50, "bytes": [0] * 50, "bytes_per_s": [0] * 50}  # fmt: skip
    source.crawl_history = lambda: whole  # type: ignore[attr-defined]
    ended = status(crawl__state="ended", crawl__end_reason="complete", crawl__pid=None,
                   graph=None, graph_state="computing")  # fmt: skip
    ended["control"].update(can_stop=False, can_scale=False)
    source.set(ended)
    wait_for_text(d, "#connection", "ended")
    wait_for_js(d, f"{points} === 50")
    assert d.find_element(By_CSS, '#graph [data-field="updated"]').text == "computing…"
    assert "computing the crawl's graph statistics" in d.find_element(By_CSS, "#fit-in").text
    # a status event of an ended crawl adds no point
    source.set({**ended, "totals": {**ended["totals"], "pages": 1300}})
    wait_for_text(d, "#pages", "1,300")
    assert d.execute_script(f"return {points}") == 50
    graph = {**status()["graph"], "final": True, "computed": True,
             "updated_at": "2026-11-26T07:39:48+0000"}  # fmt: skip
    source.set({**ended, "graph": graph, "graph_state": "computed"})
    wait_for_text(d, '#graph [data-field="updated"]', "computed 07:39:48")
    assert field(browser, "graph", "nodes") == "2,100"
    wait_for_js(d, "Number(document.querySelector('#chart-in-degree').dataset.points) === 10")


def test_worker_table_shows_what_each_worker_costs_its_machine(
    base: str, source: ScriptedSource, browser: Browser
) -> None:
    """CPU, memory, free disk and bytes/s per worker; the Machines table per machine; a worker
    stopped by its disk margin marked."""
    d = browser.driver
    w0 = {**worker(0, 10), "cpu_percent": 42.0, "rss_bytes": 80 * 2**20,
          "disk_free_bytes": 5 * 2**20, "bytes_in_per_s": 2 * 2**20, "bytes_out_per_s": 2048,
          "disk_low": True}  # fmt: skip
    machines = [{"machine": "m1", "workers": 2, "cpu_percent": 60.0, "rss_bytes": 160 * 2**20,
                 "disk_free_bytes": 5 * 2**20, "bytes_in_per_s": 3 * 2**20,
                 "bytes_out_per_s": 4096, "disk_low": 1}]  # fmt: skip
    source.set(status(workers=[w0, worker(1, 20)], machines=machines))
    d.get(base + "/")
    wait_for(d, lambda d: d.find_elements(By_CSS, "#machine-table tbody tr") or None)
    row = texts(browser, '#worker-table tbody tr[data-worker="w0"] td')
    assert row[8:13] == ["42 %", "80.0 MiB", "5.0 MiB (low: stopped)", "2.0 MiB/s", "2.0 KiB/s"]
    assert texts(browser, '#worker-table tbody tr[data-worker="w1"] td')[8] == "-"
    assert texts(browser, "#machine-table tbody tr td") == [
        "m1", "2", "60 %", "160.0 MiB", "5.0 MiB (low: 1 stopped)", "3.0 MiB/s", "4.0 KiB/s",
    ]  # fmt: skip
    assert d.find_element(By_CSS, "#machines").is_displayed()
