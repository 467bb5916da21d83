"""The browser harness (gossamer.testweb._browser, the `browser` fixture) against a real page:
a small server on loopback (a thread) whose page updates itself from server-sent events, takes
a form POST, and is screenshotted — and no Chromium or chromedriver process outlives a test,
even one that fails or whose chromedriver dies. The dashboard's browser tests build on these.
"""

from __future__ import annotations

import html
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from PIL import Image  # matplotlib's dependency

from browser_fixtures import require_browser
from gossamer.testweb._browser import (
    Browser,
    browser_processes,
    find_chromium,
    png_size,
    screenshot,
    start_browser,
    wait_for_element,
    wait_for_js,
    wait_for_text,
    wait_for_url,
)

pytestmark = pytest.mark.timeout(60)

TESTS = Path(__file__).resolve().parents[1]

NEWS_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>news</title></head>
<body style="margin:0">
<p id="state">loading</p>
<p id="news">nothing yet</p>
<p id="count">0</p>
<div id="block" style="position:absolute;left:0;top:200px;width:300px;height:100px;
 background:rgb(255,0,0)"></div>
<script>
window.pageId = Math.random();
let count = 0;
const events = new EventSource("/events");
events.onopen = () => { document.getElementById("state").textContent = "connected"; };
events.onmessage = (e) => {
  const news = document.getElementById("news");
  news.textContent = e.data;
  news.dataset.seenAt = String(Date.now());
  document.getElementById("count").textContent = String(++count);
};
</script>
</body></html>
"""

FORM_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>form</title></head><body>
<form method="post" action="/submit">
<input id="seed" name="seed" type="text"> <input id="workers" name="workers" type="number">
<button id="go" type="submit">Start</button>
</form></body></html>
"""


class PageServer(ThreadingHTTPServer):
    """The test's web server: /news (a page fed by /events), /form, POST /submit."""

    daemon_threads = False  # server_close() joins the handlers (the event streams end on stop)

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), PageHandler)
        self.stopping = threading.Event()
        self.changed = threading.Condition()
        self.streams: list[queue.Queue[str]] = []
        self.posts: list[tuple[str, dict[str, list[str]]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def publish(self, text: str) -> float:
        """Send `text` as an event to every open stream; returns when, in ms since the epoch
        (the clock the page's Date.now() reads)."""
        with self.changed:
            sent = time.time() * 1000
            for stream in self.streams:
                stream.put(text)
        return sent

    def wait_for_streams(self, n: int, timeout: float = 10.0) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.streams) >= n, timeout):
                raise AssertionError(f"{len(self.streams)} event streams open, not {n}")


class PageHandler(BaseHTTPRequestHandler):
    server: PageServer
    # A connection Chromium opened ahead (preconnect) and never used would hold its handler in
    # readline, and server_close() would wait for it: bounded by this socket timeout. (The
    # tests ask for `pages` before `browser`, so the browser is gone before the server stops.)
    timeout = 5

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet

    def _send(self, body: str, status: int = 200) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/news":
            self._send(NEWS_PAGE)
        elif self.path == "/form":
            self._send(FORM_PAGE)
        elif self.path == "/events":
            self._stream()
        else:
            self._send("not found", 404)

    def do_POST(self) -> None:
        if self.path != "/submit":
            self._send("not found", 404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        fields = parse_qs(body, keep_blank_values=True)
        self.server.posts.append((self.headers.get("Content-Type", ""), fields))
        shown = ", ".join(f"{k}={v[0]}" for k, v in sorted(fields.items()))
        self._send(f'<!doctype html><p id="result">received: {html.escape(shown)}</p>')

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(b": open\n\n")
        self.wfile.flush()
        mine: queue.Queue[str] = queue.Queue()
        with self.server.changed:
            self.server.streams.append(mine)
            self.server.changed.notify_all()
        try:
            while not self.server.stopping.is_set():
                try:
                    text = mine.get(timeout=0.05)
                except queue.Empty:
                    continue
                self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page went away
        finally:
            with self.server.changed:
                self.server.streams.remove(mine)


@pytest.fixture
def pages() -> Iterator[PageServer]:
    server = PageServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        thread.join(10)
        server.server_close()


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def names(pids: list[int]) -> set[str]:
    out = set()
    for pid in pids:
        try:
            out.add(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    return out


def test_page_follows_server_sent_events_within_a_second(
    pages: PageServer, browser: Browser
) -> None:
    driver = browser.driver
    driver.get(f"{pages.url}/news")
    wait_for_text(driver, "#state", "connected")
    pages.wait_for_streams(1)
    page_id = driver.execute_script("return window.pageId;")
    for n in range(1, 4):
        sent = pages.publish(f"event {n} from the server")
        news = wait_for_text(driver, "#news", f"event {n} from the server", timeout=5)
        seen = int(news.get_attribute("data-seen-at") or 0)
        # the page's own clock when the event arrived, not when this test noticed: polling
        # does not count
        assert -5 <= seen - sent < 1000, f"event {n} shown {seen - sent:.0f} ms after it was sent"
        wait_for_text(driver, "#count", str(n))
    assert driver.execute_script("return window.pageId;") == page_id  # events, not reloads


def test_form_post_round_trip(pages: PageServer, browser: Browser) -> None:
    driver = browser.driver
    driver.get(f"{pages.url}/form")
    seed = "https://example.test/a?b=1&c=2 ü"
    wait_for_element(driver, "#seed").send_keys(seed)
    wait_for_element(driver, "#workers").send_keys("3")
    wait_for_element(driver, "#go").click()
    wait_for_url(driver, "/submit")
    wait_for_text(driver, "#result", f"received: seed={seed}, workers=3")
    assert pages.posts == [
        ("application/x-www-form-urlencoded", {"seed": [seed], "workers": ["3"]})
    ]


def test_screenshot_is_a_png_of_the_page(
    pages: PageServer, browser: Browser, tmp_path: Path
) -> None:
    driver = browser.driver
    driver.get(f"{pages.url}/news")
    wait_for_text(driver, "#state", "connected")
    pages.wait_for_streams(1)
    pages.publish("shown in the screenshot")
    wait_for_text(driver, "#news", "shown in the screenshot")
    path = tmp_path / "shots" / "news.png"
    assert screenshot(driver, path) == (1280, 800)  # the fixed viewport
    assert png_size(path.read_bytes()) == (1280, 800)
    with Image.open(path) as image:
        rgb = image.convert("RGB")
        assert rgb.getpixel((150, 250)) == (255, 0, 0)  # inside the red block
        assert rgb.getpixel((150, 350)) == (255, 255, 255)  # below it
        assert rgb.getpixel((600, 250)) == (255, 255, 255)  # right of it


def test_no_process_left_when_the_body_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_browser()
    # and Selenium Manager is never run (it would download a driver): here it would fail
    monkeypatch.setenv("SE_MANAGER_PATH", "/bin/false")
    with pytest.raises(RuntimeError, match="the test failed"), start_browser(tmp_path) as running:
        running.driver.get("about:blank")
        pids = running.processes()
        group = running.process_group
        assert {"chromedriver", "chromium"} <= names(pids)
        assert len(pids) >= 4  # driver, browser, zygote, renderer, ...
        # Debian's Chromium, the real binary, launched by the chromedriver found
        assert f"Launching chrome: {find_chromium()} " in running.log_tail(10**6)
        raise RuntimeError("the test failed")
    assert [pid for pid in pids if alive(pid)] == []
    assert browser_processes(group, tmp_path.resolve()) == []


def test_no_process_left_when_chromedriver_dies(tmp_path: Path) -> None:
    """chromedriver killed: Chromium is orphaned, and the cleanup still finds and kills it."""
    require_browser()
    with start_browser(tmp_path, stop_timeout=10) as running:
        running.driver.get("about:blank")
        pids = running.processes()
        group = running.process_group
        os.kill(group, signal.SIGKILL)  # chromedriver's pid is the group's id
        orphans = [pid for pid in pids if pid != group and alive(pid)]
        assert "chromium" in names(orphans)  # Chromium outlived its driver: must be killed
    assert [pid for pid in pids if alive(pid)] == []
    assert browser_processes(group, tmp_path.resolve()) == []


INNER_TEST = '''
import json, os
from pathlib import Path

def test_fails_with_a_browser(browser):
    browser.driver.get("about:blank")
    Path(os.environ["RECORD"]).write_text(json.dumps(
        {"group": browser.process_group, "root": str(browser.root), "pids": browser.processes()}
    ))
    assert False, "this test fails on purpose"
'''


def test_fixture_cleans_up_after_a_failing_test(tmp_path: Path) -> None:
    """A pytest run whose test fails while using `browser`: no process of it is left."""
    require_browser()
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["browser_fixtures"]\n')
    record = tmp_path / "record.json"
    env = {**os.environ, "RECORD": str(record), "PYTHONPATH": str(TESTS)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
         "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "tmp"), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=50, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in proc.stdout and "this test fails on purpose" in proc.stdout
    seen = json.loads(record.read_text())
    assert len(seen["pids"]) >= 4
    assert [pid for pid in seen["pids"] if alive(pid)] == []
    assert browser_processes(seen["group"], Path(seen["root"])) == []


def test_wait_for_text_says_what_it_saw(pages: PageServer, browser: Browser) -> None:
    driver = browser.driver
    driver.get(f"{pages.url}/news")
    wait_for_js(driver, "document.getElementById('state').textContent === 'connected'")
    with pytest.raises(AssertionError, match=r"'never' in '#news'; last saw 'nothing yet'"):
        wait_for_text(driver, "#news", "never", timeout=0.3)
