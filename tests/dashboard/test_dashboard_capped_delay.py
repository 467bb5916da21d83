"""The top hosts show the delay the crawl applies: a real `gossamer crawl` of a site on
loopback whose robots.txt asks `Crawl-delay: 3600`, with the cap (`--max-crawl-delay`) at
30 s, watched through the dashboard's app over its crawl directory: the host's delay shows
30 s, not 3600 (while the crawl waits out those 30 s, and after it stopped)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from test_dashboard import LOCAL

from gossamer.dashboard import EmbeddedSource, make_app
from gossamer.frontier import FrontierOptions
from gossamer.frontier.sqlite import read_top_hosts

ROBOTS = b"User-agent: *\nCrawl-delay: 3600\n"
PAGE = b'<html><body><a href="/a">a</a> <a href="/b">b</a></body></html>'


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        robots = self.path == "/robots.txt"
        body = ROBOTS if robots else PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/plain" if robots else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.paths.append(self.path)  # type: ignore[attr-defined]

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    server.paths = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _top_host(out: Path) -> dict[str, Any] | None:
    """The first of the top hosts a new dashboard shows for the crawl directory `out`."""
    client = TestClient(make_app(EmbeddedSource(out)), base_url=LOCAL)
    top = client.get("/api/status").json()["top_hosts"]
    return top[0] if top else None


def test_a_crawl_delay_above_the_cap_shows_the_cap(
    site: ThreadingHTTPServer, tmp_path: Path
) -> None:
    out = tmp_path / "crawl"
    seed = f"http://127.0.0.1:{site.server_address[1]}/"
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        crawl = subprocess.Popen(
            [sys.executable, "-m", "gossamer", "crawl", seed, "-o", str(out), "--allow-private",
             "--workers", "1", "--delay", "0.5", "--max-crawl-delay", "30", "-q"],
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        # until the host's robots.txt is known to the frontier: its delay is no longer the
        # crawl's 0.5 s (the seed then waits 30 s: the crawl is still running)
        deadline = time.monotonic() + 60
        top = None
        while top is None or top["delay_s"] == 0.5:
            assert crawl.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, f"robots.txt not applied: {top}"
            time.sleep(0.2)
            top = _top_host(out) if (out / "crawl.json").is_file() else None
        assert top["delay_s"] == 30.0, top
        assert top["state"] == "leased" and site.paths == ["/robots.txt"]  # type: ignore[attr-defined]
        crawl.send_signal(signal.SIGTERM)  # a stop during the delay
        crawl.wait(timeout=60)
    finally:
        if crawl.poll() is None:
            crawl.kill()
        crawl.wait()
    # what the frontier holds: robots.txt's 3600 s, and the rest it applies, capped
    options = FrontierOptions.of(default_delay=0.5, max_crawl_delay=30.0)
    (view,) = read_top_hosts(out / "frontier.sqlite", 1, options) or []
    assert (view.crawl_delay, view.delay) == (3600.0, 30.0)
    top = _top_host(out)  # the stopped crawl: the same
    assert top is not None and top["delay_s"] == 30.0 and top["queued"] == 1
