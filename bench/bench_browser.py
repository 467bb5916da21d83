"""What a headless Chromium costs a browser test (gossamer.testweb._browser): start-up, memory,
and start plus stop, i.e. what each browser test adds to the suite's time.

Starts the browser `--runs` times one after another, each in a fresh temporary directory, and
prints per run: start-up (chromedriver start to a ready session with the viewport set), the
time to load a small page that keeps an event stream open, the proportional set size (PSS:
shared pages counted once) of all its processes with about:blank and with that page, their
count, the stop (quit, then the check that nothing is left), and the longest of 5 times
from an event sent on the stream to the page showing it (the page's Date.now() when its
handler ran, against the server's clock when it wrote the event). Then the medians.

    .venv/bin/python bench/bench_browser.py [--runs 10]
"""

from __future__ import annotations

import argparse
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gossamer.testweb._browser import (
    browser_processes,
    missing_browser_reason,
    start_browser,
    wait_for_text,
)

PAGE = b"""<!doctype html><p id="state">loading</p><p id="news"></p><script>
const events = new EventSource("/events");
events.onopen = () => { document.getElementById("state").textContent = "connected"; };
events.onmessage = (e) => {
  const news = document.getElementById("news");
  news.textContent = e.data;
  news.dataset.seenAt = String(Date.now());
};
</script>"""
EVENTS = 5  # sent per run, each once the previous one is shown


class Handler(BaseHTTPRequestHandler):
    timeout = 5

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        if self.path == "/events":
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b": open\n\n")
            self.wfile.flush()
            mine: queue.Queue[str] = queue.Queue()
            with streams_lock:
                streams.append(mine)
            try:
                while not stopping.is_set():  # the stream stays open while the page is measured
                    try:
                        text = mine.get(timeout=0.05)
                    except queue.Empty:
                        continue
                    self.wfile.write(f"data: {text}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # a previous run's page, gone
            finally:
                with streams_lock:
                    streams.remove(mine)
            return
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)


stopping = threading.Event()
streams: list[queue.Queue[str]] = []  # one per open event stream
streams_lock = threading.Lock()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    reason = missing_browser_reason()
    if reason:
        parser.exit(2, f"bench_browser: {reason}\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    rows = []
    try:
        print("run  start_s  load_s  pss_blank_MB  pss_page_MB  procs  stop_s  event_max_ms")
        for run in range(1, args.runs + 1):
            with tempfile.TemporaryDirectory() as root:
                with start_browser(root) as browser:
                    started = browser.startup_seconds
                    browser.driver.get("about:blank")
                    blank = browser.memory_pss()
                    begin = time.monotonic()
                    browser.driver.get(url)
                    wait_for_text(browser.driver, "#state", "connected")
                    load = time.monotonic() - begin
                    page = browser.memory_pss()
                    latency = 0.0
                    for n in range(EVENTS):
                        sent = time.time() * 1000
                        with streams_lock:
                            for stream in streams:
                                stream.put(f"event {run}.{n}")
                        news = wait_for_text(browser.driver, "#news", f"event {run}.{n}")
                        seen = int(news.get_attribute("data-seen-at") or 0)
                        latency = max(latency, (seen - sent) / 1000)
                    procs = len(browser.processes())
                    group, path = browser.process_group, browser.root
                    stop_begin = time.monotonic()
                stopped = time.monotonic() - stop_begin
                assert browser_processes(group, path) == []
            rows.append((started, load, blank / 2**20, page / 2**20, procs, stopped, latency))
            print(
                f"{run:3d}  {started:7.2f}  {load:6.2f}  {blank / 2**20:12.0f}  "
                f"{page / 2**20:11.0f}  {procs:5d}  {stopped:6.2f}  {latency * 1000:14.0f}"
            )
    finally:
        stopping.set()
        server.shutdown()
        thread.join(10)
        server.server_close()
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    print(
        f"median  start {med[0]:.2f} s, load {med[1]:.2f} s, PSS {med[2]:.0f} MB blank / "
        f"{med[3]:.0f} MB with the page, {med[4]:.0f} processes, stop {med[5]:.2f} s; "
        f"start + stop {med[0] + med[5]:.2f} s"
    )
    worst = max(row[6] for row in rows)
    print(f"event sent to shown on the page: at most {worst * 1000:.0f} ms ({EVENTS * args.runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
