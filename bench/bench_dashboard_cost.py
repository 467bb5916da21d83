"""What watching a crawl costs it: the same crawl with and without the dashboard open.

    .venv/bin/python bench/bench_dashboard_cost.py                    # 5 rounds, ~4 minutes
    .venv/bin/python bench/bench_dashboard_cost.py --rounds 1 --hosts 60   # a quick look
    .venv/bin/python bench/bench_dashboard_cost.py --modes none,stream,browser,browser-log
    .venv/bin/python bench/bench_dashboard_cost.py --page 10         # the page alone, ~1 min

Issue 20's target: with the dashboard open, a crawl's pages/s drops by at most 2 %.

Each round crawls the same simulated web (bench_crawl.py's: exported as static files, served by
one nginx worker on loopback; `gossamer crawl SEED --scope all --delay 0`, WARC and graph on,
`--live-graph` so the dashboard has graph statistics to send) once per mode:

- `none`: the crawl alone (also the uncounted warm-up crawl first: the first crawl of a
  fresh export ran at half the speed of the next ones here);
- `stream`: `gossamer dashboard DIR` started on the directory the crawl is about to create,
  with one client reading its `/events` and `/events/log` streams as the page's EventSources
  do, ready (its first event read) before the crawl starts — the dashboard reads the crawl
  directory every 0.5 s while a stream is open, so this is the whole server-side cost;
- `browser`: the same, with a real headless Chromium showing the page instead of the client
  (its rendering and charts compete for the CPU too; needs chromium, see docs/dashboard.md),
  likewise showing its first event before the crawl starts; the page as it opens, its log
  pane below the fold (1280x800: log records wait, undrawn, until the pane is seen);
- `browser-log`: the same with the log pane scrolled onto the screen, every batch of fetch
  lines drawn (the page's worst case).

The order of the modes alternates between rounds (none, stream / stream, none, …) so a drift
of the machine's load does not favour one. Printed per run: pages, wall time, pages/s, the
dashboard process's CPU seconds and the events it sent; then per mode the median pages/s (over
the whole crawl, and from --skip s after its first request) and each mode's ratio to `none`.
Figures are printed, never asserted. Loopback only; every subprocess is bounded in time and
stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_crawl import CLK_TCK, SEED_URL, gossamer_cmd, run_measured  # noqa: E402
from bench_testweb import _workdir, free_port  # noqa: E402
from gossamer.testweb import WebSpec, model_for  # noqa: E402
from gossamer.testweb._export import export_web  # noqa: E402
from gossamer.testweb._nginx import run_nginx  # noqa: E402

MODES = ("none", "stream", "browser", "browser-log")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Watcher(threading.Thread):
    """Waits for the crawl directory, starts `gossamer dashboard` on it and keeps it watched
    (an event-stream client, or a browser on the page) until `finish()`."""

    def __init__(self, out: Path, mode: str, work: Path) -> None:
        super().__init__(daemon=True)
        self.out, self.mode, self.work = out, mode, work
        self.done = threading.Event()
        self.events = 0
        self.log_batches = 0  # stream: /events/log batches read
        self.log_lines = 0  # browser: log lines the page shows at the end
        self.browser_cpu_s: float | None = None  # browser: its processes' CPU while watching
        self.dashboard_cpu_s = float("nan")
        self.error: str | None = None
        self.ready_at: float | None = None  # Unix time the first event was shown/read
        self.ready = threading.Event()
        self._proc: subprocess.Popen[str] | None = None

    def run(self) -> None:
        try:
            self._watch()
        except Exception as exc:  # reported with the run's figures
            if not self.done.is_set():  # not the stream cut by finish()
                self.error = f"{type(exc).__name__}: {exc}"

    def _watch(self) -> None:
        # started on the directory the crawl is about to create: the page opens on "not
        # started" and follows the crawl from its first line, with every start-up cost of the
        # dashboard and the browser paid before the crawl begins
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "gossamer", "dashboard", str(self.out), "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self._proc.stderr is not None
        base = None
        for line in self._proc.stderr:
            if m := re.search(r"dashboard: (http://\S+?)/$", line.strip()):
                base = m.group(1)
                break
        if base is None:
            raise RuntimeError("the dashboard did not start")
        threading.Thread(target=self._drain, daemon=True).start()
        if self.mode.startswith("browser"):
            self._browse(base)
        else:
            threading.Thread(target=self._read_log, args=(base,), daemon=True).start()
            self._read_events(base)

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for _ in self._proc.stderr:
            pass

    def _read_events(self, base: str) -> None:
        import httpx2

        with (
            httpx2.Client(timeout=httpx2.Timeout(30.0)) as client,
            client.stream("GET", f"{base}/events") as r,
        ):
            for line in r.iter_lines():
                if line.startswith("data: "):
                    json.loads(line[6:])  # as the page does
                    self.events += 1
                    if self.ready_at is None:
                        self.ready_at = time.time()
                        self.ready.set()
                if self.done.is_set():
                    return

    def _read_log(self, base: str) -> None:
        import httpx2

        with (
            contextlib.suppress(Exception),
            httpx2.Client(timeout=None) as client,
            client.stream("GET", f"{base}/events/log?level=info") as r,
        ):
            if r.status_code != 200:
                return  # a dashboard without the log tail
            for line in r.iter_lines():
                if line.startswith("data: "):
                    json.loads(line[6:])
                    self.log_batches += 1
                if self.done.is_set():
                    return

    def _browse(self, base: str) -> None:
        from gossamer.testweb._browser import start_browser, wait_for_js

        with start_browser(Path(tempfile.mkdtemp(dir=self.work, prefix="browser-"))) as b:
            b.driver.get(base + "/")
            wait_for_js(b.driver, "window.gossamerPage.statusEvents > 0", timeout=30)
            # the crawl has not started: the page opened on Setup; show the Status tab
            b.driver.find_element("css selector", "#tab-status").click()
            if self.mode == "browser-log":  # the log pane on the screen: drawn as it comes
                b.driver.execute_script("document.querySelector('#log').scrollIntoView()")
            self.ready_at = time.time()
            cpu0 = sum(_cpu_s(p) for p in b.processes())
            self.ready.set()
            while not self.done.wait(0.5):
                pass
            self.browser_cpu_s = sum(_cpu_s(p) for p in b.processes()) - cpu0
            self.events = int(b.driver.execute_script("return window.gossamerPage.statusEvents"))
            self.log_lines = int(b.driver.execute_script("return window.gossamerPage.logLines"))

    def finish(self) -> None:
        self.done.set()
        if self._proc is not None:
            self.dashboard_cpu_s = _cpu_s(self._proc.pid)
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self.join(timeout=30)


def steady_rate(log: Path, skip: float) -> float:
    """pages/s from `skip` s after the crawl's first request to its last, from the crawl's own
    log: the crawl's start (imports, opening its directory, the first robots.txt fetches) is
    the same in every mode and only blurs the comparison."""
    times = []
    with log.open("rb") as f:
        for line in f:
            rec = json.loads(line)
            if not rec["url"].endswith("/robots.txt"):
                times.append(datetime.fromisoformat(rec["time"]).timestamp())
    times.sort()
    start = times[0] + skip
    window = [t for t in times if t >= start]
    if len(window) < 2 or window[-1] <= start:
        raise SystemExit(f"the crawl lasted less than --skip {skip} s: crawl a larger web")
    return len(window) / (window[-1] - start)


def crawl_once(
    work: Path, export: Path, args: argparse.Namespace, name: str, mode: str
) -> dict[str, Any]:
    out = work / name
    watcher = Watcher(out, mode, work) if mode != "none" else None
    if watcher is not None:
        watcher.start()
        # the dashboard answers and the client (or the page) has its first event before the
        # crawl starts
        while not watcher.ready.wait(0.1):
            if not watcher.is_alive():
                raise SystemExit(f"the dashboard did not start: {watcher.error}")
    cmd = [
        sys.executable, "-m", "gossamer",
        *gossamer_cmd(out, export / "resolve.txt", args, args.workers, "--live-graph"),
    ]  # fmt: skip
    try:
        m = run_measured(cmd, log=work / f"{name}.console", timeout=args.timeout)
    finally:
        if watcher is not None:
            watcher.finish()
    stats = json.loads((out / "stats.json").read_text())
    pages = int(stats["pages"])
    steady = steady_rate(out / "crawl.log.jsonl", args.skip)
    return {
        "mode": mode, "pages": pages, "wall_s": m.wall_s, "pages_per_s": pages / m.wall_s,
        "steady": steady,
        "crawl_cpu_s": m.cpu_s, "exit": m.returncode,
        "dashboard_cpu_s": watcher.dashboard_cpu_s if watcher else None,
        "events": watcher.events if watcher else None,
        "log_batches": watcher.log_batches if watcher else None,
        "log_lines": watcher.log_lines if watcher else None,
        "browser_cpu_s": watcher.browser_cpu_s if watcher else None,
        "error": watcher.error if watcher else None,
    }  # fmt: skip


def page_cost(seconds: float) -> None:
    """What the page costs the browser by itself: a scripted status source through the real
    app (tests/e2e/test_dashboard_browser_page.py's), a status event and 200 fetch log lines
    every 0.5 s, Chromium's CPU (all its processes) over `seconds`, for the page on its Setup
    tab, on Status with no log records, with the log pane below the fold, and on the screen."""
    sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))
    from test_dashboard_browser_page import ScriptedSource, serve, status

    from gossamer.dashboard import make_app
    from gossamer.testweb._browser import start_browser, wait_for_js

    cases = (
        ("the Setup tab (nothing drawn)", "/#setup", True, False),
        ("Status, no log records", "/", False, False),
        ("Status, the log pane below the fold", "/", True, False),
        ("Status, the log pane on the screen", "/", True, True),
    )
    rounds = int(seconds / 0.5)
    print(f"\n| the page | Chromium CPU over {seconds:g} s | of one core |\n|---|---|---|")
    for name, path, log, on_screen in cases:
        source = ScriptedSource(status())
        with (
            tempfile.TemporaryDirectory() as tmp,
            serve(make_app(source)) as base,
            start_browser(Path(tmp)) as b,
        ):
            b.driver.get(base + path)
            wait_for_js(b.driver, "window.gossamerPage.statusEvents > 0", timeout=30)
            if on_screen:
                b.driver.execute_script("document.querySelector('#log').scrollIntoView()")
            time.sleep(1)  # the first drawing done
            cpu0 = sum(_cpu_s(p) for p in b.processes())
            t = time.time()
            for k in range(rounds):
                s = status(totals__pages=1000 + 500 * k, totals__pages_per_s=900.0 + k)
                if k % 6 == 0:  # the live graph's statistics change every few seconds
                    s["graph"]["nodes"] += k
                source.set(s)
                if log:
                    source.add_log([
                        {"time": t + k + i / 1000, "level": "info", "worker": "w0",
                         "kind": "fetch", "message": "", "status": 200, "outcome": "ok",
                         "url": f"http://www.h{i}.example/page-{k}-{i}.html"}
                        for i in range(200)
                    ])  # fmt: skip
                time.sleep(0.5)
            cpu = sum(_cpu_s(p) for p in b.processes()) - cpu0
        print(f"| {name} | {cpu:.2f} s | {100 * cpu / seconds:.1f} % |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="runs of each mode")
    p.add_argument("--modes", default="none,stream", help=f"of {','.join(MODES)}")
    p.add_argument("--seed", type=int, default=1, help="web seed")
    p.add_argument("--hosts", type=int, default=400, help="hosts (400: ~20,000 pages)")
    p.add_argument(
        "--skip", type=float, default=3.0, help="seconds of each crawl's start not in 'after'"
    )
    p.add_argument("--pages-mean", type=float, default=50.0)
    p.add_argument("--concurrency", type=int, default=64, help="requests in flight in all")
    p.add_argument("--workers", type=int, default=1, help="crawl --workers (0: its default)")
    p.add_argument("--warmup", type=int, default=1, help="uncounted crawls first (caches)")
    p.add_argument("--timeout", type=float, default=150.0, help="seconds per crawl at most")
    p.add_argument("--workdir", type=Path, help="keep everything here (default: a temp dir)")
    p.add_argument(
        "--page", type=float, metavar="S", help="only the page's own cost, over S seconds"
    )
    args = p.parse_args(argv)
    if args.page:
        page_cost(args.page)
        return 0
    modes = args.modes.split(",")
    if bad := [m for m in modes if m not in MODES]:
        p.error(f"--modes: unknown {','.join(bad)} (of {','.join(MODES)})")
    if "none" not in modes:
        p.error("--modes must include none: the other modes are compared with it")

    spec = WebSpec(seed=args.seed, hosts=args.hosts, pages_mean=args.pages_mean)
    model = model_for(spec)
    args.seeds, args.per_ip = [SEED_URL], 1  # bench_crawl.py's default web, as it crawls it
    print("# what an open dashboard costs a crawl")
    print(
        f"  machine {os.cpu_count()} CPUs, load {' '.join(f'{x:.2f}' for x in os.getloadavg())};"
        f" web {len(model.hosts)} hosts, {model.total_pages:,} pages; crawl --workers "
        f"{args.workers}, {args.concurrency} in flight, delay 0, --live-graph"
    )
    runs: list[dict[str, Any]] = []
    with _workdir(args.workdir) as work:
        export = work / "export"
        export_web(model, export, port=free_port(), workers=1)
        with run_nginx(export):
            for w in range(args.warmup):  # the first crawl pays for cold caches (2x slower here)
                crawl_once(work, export, args, f"warmup{w}", "none")
            for r in range(args.rounds):
                order = modes if r % 2 == 0 else list(reversed(modes))
                for mode in order:
                    run = crawl_once(work, export, args, f"r{r}-{mode}", mode)
                    runs.append(run)
                    logged = (
                        f"{run['log_lines']} log lines shown, Chromium "
                        f"{run['browser_cpu_s']:.2f} s CPU while the crawl ran"
                        if mode.startswith("browser")
                        else f"{run['log_batches']} log batches"
                    )  # fmt: skip
                    extra = (
                        f", dashboard {run['dashboard_cpu_s']:.2f} s CPU, {run['events']} "
                        f"events, {logged}" if mode != "none" else ""
                    )  # fmt: skip
                    error = f"  ERROR {run['error']}" if run["error"] else ""
                    print(
                        f"  round {r} {mode:8} {run['pages']:,} pages in {run['wall_s']:.2f} s "
                        f"({run['pages_per_s']:.1f} pages/s); after {args.skip:g} s: "
                        f"{run['steady']:.1f} pages/s (crawl CPU {run['crawl_cpu_s']:.1f} s"
                        f"){extra}{error}",
                        flush=True,
                    )
    median = {m: statistics.median(r["steady"] for r in runs if r["mode"] == m) for m in modes}
    whole = {
        m: statistics.median(r["pages_per_s"] for r in runs if r["mode"] == m) for m in modes
    }
    print(
        f"\n| mode | median pages/s after {args.skip:g} s | ratio to none | median pages/s, "
        "whole crawl (with start-up) | ratio |\n|---|---|---|---|---|"
    )
    for m in modes:
        print(
            f"| {m} | {median[m]:.1f} | {median[m] / median['none']:.4f} | {whole[m]:.1f} | "
            f"{whole[m] / whole['none']:.4f} |"
        )
    for m in modes:
        if m != "none":
            drop = 100 * (1 - median[m] / median["none"])
            print(f"{m}: pages/s drop against none {drop:+.2f} % (target: at most +2 %)")
    return 1 if any(r["error"] or r["exit"] != 0 for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
