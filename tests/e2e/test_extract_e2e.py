"""Extractors (docs/python.md, "Extractors"): an extractor installed as a separate package
(its entry point in gossamer.extractors) run by `gossamer crawl --extract NAME` in every
worker of a 2-worker pool on a real nginx site of several hosts, SIGKILLed mid-crawl and
resumed: every crawled page's item exactly once in DIR/items.jsonl. Also MODULE:CALLABLE,
an extractor that decides which links to follow, and one that fails to load."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _plugin_dist import install_plugin, with_path
from test_real_site import free_port, write_nginx_conf

from gossamer.testweb._nginx import NginxError, find_nginx, run_nginx

ROOT = Path(__file__).resolve().parents[2]
HOSTS = [f"h{k}.example" for k in range(1, 5)]

PLUGIN = '''
def titles(page):
    """One item a page: its title and status."""
    yield {"title": page.title, "status": page.status, "depth": page.depth}


class EvenOnly:
    """Items with the page's number; follows only links to even-numbered pages."""

    def extract(self, page):
        return {"n": page.url.rsplit("/p", 1)[-1].removesuffix(".html")}

    def follow(self, page, link):
        name = link.url.rsplit("/", 1)[-1]
        return not name.startswith("p") or int(name[1:].removesuffix(".html")) % 2 == 0
'''


def _env(*dirs: Path) -> dict[str, str]:
    return with_path(dict(os.environ), ROOT / "src", *dirs)


def _site(tmp_path: Path, pages: int) -> tuple[Path, int]:
    """`pages` pages on each of HOSTS (one nginx serves them all: the Host is not looked
    at): /index.html links p1 … and every host's index; each p links back."""
    try:
        find_nginx()
    except NginxError:
        pytest.skip("nginx is not installed")
    docroot = tmp_path / "www"
    docroot.mkdir()
    others = "".join(f'<a href="http://{h}/">{h}</a>' for h in HOSTS)
    names = [f"p{k}.html" for k in range(1, pages)]
    (docroot / "index.html").write_text(
        "<html><head><title>Index</title></head><body>"
        + "".join(f'<a href="{n}">{n}</a>' for n in names)
        + others
        + "</body></html>"
    )
    for k, n in enumerate(names, start=1):
        (docroot / n).write_text(
            f'<html><head><title>Page {k}</title></head><body><a href="/">home</a></body></html>'
        )
    port = free_port()
    write_nginx_conf(tmp_path / "nginx", docroot, port)
    return tmp_path / "nginx", port


def _resolve(port: int) -> list[str]:
    return [a for h in HOSTS for a in ("--resolve", f"{h}:80:127.0.0.1:{port}")]


#: every host serves the same pages (mirrors of one another): with near-duplicate detection
#: the other hosts' indexes are near-duplicates of the first's, their links not followed
MIRRORS = ("--near-dup-links", "off")


def _plugin(tmp_path: Path) -> Path:
    return install_plugin(
        tmp_path / "site",
        "gossamer-titles",
        "0.3.1",
        {"titles_plugin/__init__.py": PLUGIN},
        {"gossamer.extractors": {"titles": "titles_plugin:titles"}},
    )


def _crawled_pages(out: Path) -> set[str]:
    """The pages the crawl log says were crawled (every run, every worker)."""
    urls = set()
    for log in out.glob("crawl*.log.jsonl"):
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("depth") is not None and rec.get("outcome") == "ok":
                urls.add(rec["url"])
    return urls


def _feed(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]


def test_an_installed_extractor_in_a_pool_killed_and_resumed(tmp_path: Path) -> None:
    server, port = _site(tmp_path, 40)
    env = _env(_plugin(tmp_path))
    out = tmp_path / "crawl"
    crawl = [sys.executable, "-m", "gossamer", "crawl"]
    with run_nginx(server):
        proc = subprocess.Popen(
            [
                *crawl, "http://h1.example/", "-o", str(out), "--scope", "all",
                *_resolve(port), *MIRRORS, "--allow-private", "--delay", "0.05", "--workers", "2",
                "--extract", "titles", "-q",
            ],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        # SIGKILL the pool (parent and workers) once both workers have written items
        deadline = time.monotonic() + 60
        parts: list[Path] = []
        while proc.poll() is None and time.monotonic() < deadline:
            parts = sorted((out / "items").glob("items-w*.jsonl"))
            if len(parts) == 2 and all(p.stat().st_size > 0 for p in parts):
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the crawl ended before the kill"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert not (out / "items.jsonl").exists()  # killed: not merged yet
        killed_at = sum(len(p.read_text().splitlines()) for p in parts)
        r = subprocess.run(
            [*crawl, "--resume", str(out), "-q"],
            env=env, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    pages = _crawled_pages(out)
    assert len(pages) == 4 * 40
    feed = _feed(out)
    urls = [line["url"] for line in feed]
    assert sorted(urls) == sorted(pages)  # every page's item, exactly once
    assert all(isinstance(line["item"], dict) for line in feed)
    by_url = {line["url"]: line["item"] for line in feed}
    assert by_url["http://h2.example/p7.html"] == {"title": "Page 7", "status": 200, "depth": 2}
    assert 0 < killed_at < len(feed)
    assert {p.name for p in (out / "items").iterdir()} == {"items-w0.jsonl", "items-w1.jsonl"}


def test_module_callable_and_links_followed_by_the_extractor(tmp_path: Path) -> None:
    server, port = _site(tmp_path, 10)
    env = _env(_plugin(tmp_path))
    out = tmp_path / "crawl"
    with run_nginx(server):
        r = subprocess.run(
            [
                sys.executable, "-m", "gossamer", "crawl", "http://h1.example/", "-o", str(out),
                *_resolve(port), *MIRRORS, "--allow-private", "--delay", "0",
                "-s", "extract=titles_plugin:EvenOnly", "-q",
            ],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    numbers = sorted(str(line["item"]["n"]) for line in _feed(out))  # type: ignore[index]
    assert numbers == sorted(["http://h1.example/", "2", "4", "6", "8"])


def test_an_extractor_that_fails_to_load_is_one_line_and_exit_2(tmp_path: Path) -> None:
    site = install_plugin(
        tmp_path / "site",
        "gossamer-broken",
        "1.0",
        {"broken_plugin.py": "import no_such_module_anywhere\n"},
        {"gossamer.extractors": {"broken": "broken_plugin:extract"}},
    )
    out = tmp_path / "crawl"
    for spec, said in [
        ("broken", "plugin gossamer.extractors broken = broken_plugin:extract from "
         "gossamer-broken 1.0 failed to load: ModuleNotFoundError"),
        ("nothing", "no plugin 'nothing' in gossamer.extractors (installed: broken"),
        ("json:nope", "json:nope: json has no nope"),
    ]:  # fmt: skip
        r = subprocess.run(
            [
                sys.executable, "-m", "gossamer", "crawl", "http://127.0.0.1:1/", "-o", str(out),
                "--extract", spec,
            ],
            env=_env(site), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert said in r.stderr
        assert not out.exists()


def test_an_installed_extractor_in_a_two_worker_cluster_one_killed(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `gossamer worker` processes on a real redis-server import the crawl's extractor
    by its entry point's name; one is SIGKILLed once both have written items, a third
    joins, and the crawl ends (the dead worker's leases reclaimed after their 3 s TTL).
    `gossamer report DIR` merges every worker's items: each crawled page's exactly once."""
    server, port = _site(tmp_path, 40)
    env = _env(_plugin(tmp_path))
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])  # the workers' too
    out = tmp_path / "out"
    config = tmp_path / "crawl.toml"
    config.write_text("lease_ttl = 3.0\n")
    gossamer = [sys.executable, "-m", "gossamer"]
    with run_nginx(server):
        r = subprocess.run(
            [
                *gossamer, "crawl", "--redis", redis_url, "http://h1.example/", "--workers", "0",
                "--scope", "all", *_resolve(port), *MIRRORS, "--allow-private", "--delay", "0.05",
                "--per-host", "5", "--heartbeat-ttl", "2", "--config", str(config),
                "--extract", "titles",
            ],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        crawl_id = r.stdout.strip()
        out.mkdir()
        worker = [*gossamer, "worker", "--redis", redis_url, "--crawl", crawl_id, "-o", str(out)]
        procs = [
            subprocess.Popen(worker, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                parts = list(out.glob("w*/items/items-main.jsonl"))
                if len(parts) == 2 and all(p.stat().st_size for p in parts):
                    break
                time.sleep(0.02)
            assert all(p.poll() is None for p in procs), "the crawl ended before the kill"
            procs[0].kill()  # SIGKILL: its leased batches come back after their TTL
            procs.append(
                subprocess.Popen(worker, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            codes = [p.wait(timeout=180) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    assert codes == [-signal.SIGKILL, 0, 0]
    r = subprocess.run(
        [*gossamer, "report", str(out), "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    (crawl,) = json.loads(r.stdout)["crawls"]
    assert crawl["items"]["pages"] == crawl["totals"]["pages"] == 4 * 40
    feed = [json.loads(line) for line in Path(crawl["items"]["path"]).read_text().splitlines()]
    assert len(feed) == 4 * 40 == len({line["url"] for line in feed})  # each page once
    assert len(list(out.glob("w*/items/items-main.jsonl"))) == 3  # every worker ran it
