"""A forgotten flag or a wrong port does not burn the output directory: typed as a user types
them, against a real site on 127.0.0.1 (nginx). A crawl that fetched no page leaves a
directory the same command, its mistake fixed, crawls into (starting afresh: one run, the new
settings); `--resume DIR` with a run-time fix (`--allow-private`, `--proxy`, a time-out)
retries the URLs that failed for what it fixes instead of saying "nothing to resume"; the
same for `--recrawl`. A crawl that fetched pages, or a directory with other files beside a
failed crawl, is still refused and left as it was (docs/crawler.md, "The output directory",
"Resuming a crawl")."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _static_site import StaticSite, static_site
from test_real_site import free_port, installed_gossamer

from gossamer.testweb._nginx import run_nginx

NOTHING_FETCHED = 3  # gossamer.exitcodes.Exit (literals: the same tests run against old code)
USAGE = 2
#: the site's pages: / and its index.html, p1–p5 (static_site(…, 6))
PAGES = ["/", "/index.html", *(f"/p{k}.html" for k in range(1, 6))]


def gossamer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [installed_gossamer(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def crawl(*args: str) -> subprocess.CompletedProcess[str]:
    return gossamer("crawl", "-q", "--delay", "0", *args)


def served(site: StaticSite, since: int = 0) -> list[str]:
    """The pages nginx answered 200 after its first `since` log lines (robots.txt aside)."""
    lines = site.access_log.read_text().splitlines()[since:]
    return sorted(
        target
        for _, target, status in (line.split() for line in lines)
        if status == "200" and target != "/robots.txt"
    )


def log_length(site: StaticSite) -> int:
    return len(site.access_log.read_text().splitlines()) if site.access_log.exists() else 0


def runs(out: Path) -> list[dict[str, object]]:
    lines = (out / "runs.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "start"]


def crawled_everything(out: Path, site: StaticSite, since: int = 0) -> None:
    """The crawl in `out` has every page of the site, fetched by its last run."""
    stats = json.loads((out / "stats.json").read_text())
    assert stats["ended"] == "complete", stats
    assert stats["frontier"]["done"] == len(PAGES), stats["frontier"]
    assert served(site, since) == sorted(PAGES)
    report = json.loads(gossamer("report", str(out), "--json").stdout)
    assert report["totals"]["pages"] == len(PAGES)
    assert report["fetched_nothing"] is False


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    found: dict[str, tuple[bytes | None, int]] = {}
    for path in sorted(root.rglob("*")):
        data = None if path.is_dir() else path.read_bytes()
        found[str(path.relative_to(root))] = (data, path.stat().st_mtime_ns)
    return found


# ------------------------------------------------------------------ the same command, fixed


def test_a_forgotten_allow_private_then_the_same_command_with_it(tmp_path: Path) -> None:
    site = static_site(tmp_path, 6)
    out = tmp_path / "b5"
    with run_nginx(site.server):
        r = crawl(site.base, "-o", str(out))
        assert r.returncode == NOTHING_FETCHED, r.stderr
        assert "add --allow-private" in r.stderr
        report = json.loads(gossamer("report", str(out), "--json").stdout)
        assert report["fetched_nothing"] is True
        assert "reuses" in gossamer("report", str(out)).stdout
        r = crawl(site.base, "-o", str(out), "--allow-private")
        assert r.returncode == 0, r.stderr
        assert "starts afresh" in r.stderr
        crawled_everything(out, site)
        # afresh: one run, the settings of the command that crawled
        assert len(runs(out)) == 1
        assert json.loads((out / "crawl.json").read_text())["allow_private"] is True
        # a crawl that fetched pages is kept: the same command again is refused
        before = snapshot(out)
        r = crawl(site.base, "-o", str(out), "--allow-private")
        assert r.returncode == USAGE
        assert "already holds a crawl: use `gossamer crawl --resume" in r.stderr
        assert snapshot(out) == before


def test_a_wrong_port_then_the_right_one_in_a_pool(tmp_path: Path) -> None:
    site = static_site(tmp_path, 6)
    out = tmp_path / "b5"
    wrong = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    with run_nginx(site.server):
        r = crawl(wrong, "-o", str(out), "--allow-private", "--workers", "2")
        assert r.returncode == NOTHING_FETCHED, r.stderr
        assert "fetch/error/connect" in r.stderr
        r = crawl(site.base, "-o", str(out), "--allow-private", "--workers", "2")
        assert r.returncode == 0, r.stderr
        crawled_everything(out, site)
    assert json.loads((out / "crawl.json").read_text())["seeds"] == [site.base]
    assert len(runs(out)) == 1
    log = (out / "crawl.log.jsonl").read_text()
    assert wrong not in log  # nothing of the failed crawl is left to confuse the new one


def test_a_failed_crawl_beside_other_files_is_refused_and_kept(tmp_path: Path) -> None:
    site = static_site(tmp_path, 6)
    out = tmp_path / "b5"
    with run_nginx(site.server):
        assert crawl(site.base, "-o", str(out)).returncode == NOTHING_FETCHED
        (out / "notes.txt").write_text("mine\n")
        before = snapshot(out)
        r = crawl(site.base, "-o", str(out), "--allow-private")
        assert r.returncode == USAGE, r.stderr
        assert "other files (notes.txt)" in r.stderr and "nothing was removed" in r.stderr
        assert snapshot(out) == before


def test_a_recrawl_that_fetched_nothing_runs_again(tmp_path: Path) -> None:
    site = static_site(tmp_path, 6)
    old, new = tmp_path / "old", tmp_path / "new"
    with run_nginx(site.server):
        assert crawl(site.base, "-o", str(old), "--allow-private").returncode == 0
    # the server is down: the re-crawl fetches nothing
    r = crawl("--recrawl", str(old), "-o", str(new))
    assert r.returncode == NOTHING_FETCHED, r.stderr
    with run_nginx(site.server):
        since = log_length(site)
        r = crawl("--recrawl", str(old), "-o", str(new))
        assert r.returncode == 0, r.stderr
    stats = json.loads((new / "stats.json").read_text())
    assert stats["ended"] == "complete" and stats["frontier"]["done"] == len(PAGES)
    lines = site.access_log.read_text().splitlines()[since:]
    assert sorted(t for _, t, _ in map(str.split, lines) if t != "/robots.txt") == sorted(PAGES)
    assert len(runs(new)) == 1


# ------------------------------------------------------------------ --resume with a fix


def test_resume_with_allow_private_crawls_what_it_refused(tmp_path: Path) -> None:
    site = static_site(tmp_path, 6)
    out = tmp_path / "b5"
    with run_nginx(site.server):
        assert crawl(site.base, "-o", str(out)).returncode == NOTHING_FETCHED
        # nothing given that fixes it: nothing to resume, and it says what would
        r = gossamer("crawl", "--resume", str(out))
        assert r.returncode == 0 and "nothing to resume" in r.stderr
        assert "robots/unreachable/blocked-address ×1" in r.stderr
        r = gossamer("crawl", "--resume", str(out), "--allow-private", "--delay", "0")
        assert r.returncode == 0, r.stderr
        assert "nothing to resume" not in r.stderr
        assert "1 failed URL queued again (robots/unreachable/blocked-address ×1)" in r.stderr
        crawled_everything(out, site)
    assert len(runs(out)) == 2
    # a fix for failures the crawl does not have: nothing to resume, nothing touched
    before = snapshot(out)
    r = gossamer("crawl", "--resume", str(out), "--first-byte-timeout", "20")
    assert r.returncode == 0 and "nothing to resume" in r.stderr, r.stderr
    assert snapshot(out) == before


@contextmanager
def refusing_proxy() -> Iterator[str]:
    """An HTTP proxy on loopback that accepts connections and refuses every request (403)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        server.close()


def test_resume_with_another_proxy_retries_what_the_proxy_refused(tmp_path: Path) -> None:
    site = static_site(tmp_path, 6)
    out = tmp_path / "b5"
    with run_nginx(site.server), refusing_proxy() as proxy:
        r = crawl(site.base, "-o", str(out), "--allow-private", "--proxy", proxy)
        assert r.returncode == NOTHING_FETCHED, r.stderr
        assert "fetch/error/proxy" in r.stderr
        r = gossamer("crawl", "--resume", str(out), "--proxy", "none")
        assert r.returncode == 0, r.stderr
        assert "queued again (robots/unreachable/proxy ×1): --proxy changed" in r.stderr
        crawled_everything(out, site)


class _SlowPages(BaseHTTPRequestHandler):
    """robots.txt at once (404), every page after SLOW_S."""

    SLOW_S = 1.0

    def do_GET(self) -> None:
        if self.path == "/robots.txt":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        time.sleep(self.SLOW_S)
        body = b'<html><body><a href="/a.html">a</a> <a href="/b.html">b</a></body></html>'
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_resume_with_a_longer_time_out_retries_what_timed_out(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowPages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    out = tmp_path / "slow"
    try:
        r = crawl(base, "-o", str(out), "--allow-private", "--first-byte-timeout", "0.3",
                  "--max-attempts", "1")  # fmt: skip
        assert r.returncode == NOTHING_FETCHED, r.stderr
        assert "fetch/error/timeout" in r.stderr
        r = gossamer("crawl", "--resume", str(out), "--first-byte-timeout", "10")
        assert r.returncode == 0, r.stderr
        assert "1 failed URL queued again (fetch/error/timeout ×1)" in r.stderr
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["ended"] == "complete" and stats["frontier"]["done"] == 3  # /, a, b
    assert stats["frontier"]["failed"] == 0
