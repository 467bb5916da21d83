"""A worker whose output disk would fill stops taking hosts, says so in one line, and leaves
whole WARCs: a real 20 MB tmpfs as one worker's output directory (mounted by the test: root
only, else skipped), a static site of big incompressible pages on nginx (four ports), a
real redis-server and two `gossamer worker` processes of a crawl with `--disk-margin 12`.
The worker on the tmpfs stops (exit 74) once less than 12 MB are free, with the line; its
WARC files are all closed and every record in them reads whole, one a page of its crawl log;
the other worker (on the ordinary disk) finishes the crawl with every page fetched. The
status records carry what each worker costs its machine, and the stopped one's `disk_low`."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cluster_sentinel import SERVED_FORMAT, _free_ports, served
from test_real_site import write_nginx_conf

from gossamer.testweb._nginx import NginxError, find_nginx, run_nginx

pytestmark = pytest.mark.slow

PORTS = 4
PAGES = 40  # a port; ~240 kB each (~180 kB gzipped): ~29 MB of WARC in all
MARGIN_MB = 12
TMPFS_MB = 20


def gossamer(*args: str) -> list[str]:
    return [sys.executable, "-m", "gossamer", *args]


def start(*args: str) -> subprocess.Popen[str]:
    pipe = subprocess.PIPE
    return subprocess.Popen(gossamer(*args), text=True, stdout=pipe, stderr=pipe)


@contextlib.contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30, check=False)


def build_site(root: Path, ports: list[int]) -> Path:
    rng = random.Random(7)
    www = root / "www"
    www.mkdir(parents=True)
    for i in range(PAGES):
        targets = ((i + 1) % PAGES, (3 * i) % PAGES)
        links = "".join(f'<a href="p{j}.html">p{j}</a>\n' for j in targets)
        noise = base64.b64encode(rng.randbytes(180_000)).decode()
        (www / f"p{i}.html").write_text(f"<html><body>{links}<p>{noise}</p></body></html>")
    return write_nginx_conf(root / "nginx", www, ports, access_format=SERVED_FORMAT)


def test_a_worker_stops_before_its_disk_fills(tmp_path: Path, redis_url: str) -> None:
    try:
        find_nginx()
    except NginxError as exc:
        pytest.skip(str(exc))
    small = tmp_path / "small"
    ports = _free_ports(PORTS)
    access_log = build_site(tmp_path / "site", ports)
    seeds = [f"http://127.0.0.1:{p}/p0.html" for p in ports]
    with tmpfs(small, TMPFS_MB), run_nginx(tmp_path / "site" / "nginx"):
        created = subprocess.run(
            gossamer("crawl", "--redis", redis_url, *seeds, "--workers", "0", "--allow-private",
                     "--delay", "0.02", "--per-ip", str(PORTS), "--disk-margin", str(MARGIN_MB),
                     "--heartbeat-ttl", "3", "--per-host", "5",
                     # (every port serves the same files: stored once, they would not fill it)
                     "--no-dedup-payloads"),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        crawl_id = created.stdout.split()[0]
        worker = ["worker", "--redis", redis_url, "--crawl", crawl_id]
        procs: list[subprocess.Popen[str]] = []
        try:
            procs.append(start(*worker, "-o", str(small)))
            deadline = time.monotonic() + 30
            while not (small / "w1" / "worker.json").exists():
                assert procs[0].poll() is None, procs[0].communicate()
                assert time.monotonic() < deadline, "w1 did not start"
                time.sleep(0.05)
            procs.append(start(*worker, "-o", str(tmp_path / "big")))
            _, err1 = procs[0].communicate(timeout=120)
            free_after = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
            _, err2 = procs[1].communicate(timeout=120)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        warcs = sorted((small / "w1" / "warc").glob("*.warc*"))
        from warcio.archiveiterator import ArchiveIterator

        responses = 0
        for path in warcs:
            assert not path.name.endswith(".open"), path
            with path.open("rb") as f:
                for record in ArchiveIterator(f):
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    if record.rec_type == "response" and not uri.endswith("/robots.txt"):
                        body = record.content_stream().read()
                        assert body.endswith(b"</p></body></html>"), path
                        responses += 1
        log_pages = [
            json.loads(line) for line in (small / "w1" / "crawl.log.jsonl").read_text().splitlines()
        ]
        w1_pages = [r for r in log_pages if not r["url"].endswith("/robots.txt")]
        status = json.loads(subprocess.run(
            gossamer("status", "--redis", redis_url, "--crawl", crawl_id, "--json"),
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout)  # fmt: skip
    line = f"under the margin of {MARGIN_MB} MB (--disk-margin): it takes no more hosts"
    assert procs[0].returncode == 74, err1
    assert err1.count(line) == 1, err1
    assert procs[1].returncode == 0, err2
    assert free_after > 0, "the tmpfs filled up"
    assert w1_pages, "the small worker fetched nothing before it stopped"
    assert responses == len([r for r in w1_pages if r.get("status") == 200])
    assert status["crawl"]["state"] == "finished"
    pages = {(port, path) for _, port, path, _ in served(access_log) if path != "/robots.txt"}
    assert pages == {(p, f"/p{i}.html") for p in ports for i in range(PAGES)}
    by_id = {w["id"]: w for w in status["workers"]}
    assert by_id["w1"]["disk_low"] is True
    assert by_id["w2"]["disk_low"] is False
    for w in by_id.values():
        assert w["rss_bytes"] > 10 * 1024 * 1024, w
        assert w["disk_free_bytes"] is not None, w
    print("\n" + next(x for x in err1.splitlines() if line in x))
    print(
        f"w1 stopped with {free_after / 2**20:.1f} MB free of {TMPFS_MB} MB after "
        f"{len(w1_pages)} pages in {len(warcs)} WARC file(s); w2 fetched the rest"
    )


def test_an_embedded_crawl_stops_before_its_disk_fills_and_resumes(tmp_path: Path) -> None:
    """The same guard in an embedded crawl: exit 74, `ended` `error`, the line once, its WARC
    whole; resumed into a roomier margin (`--disk-margin 1`) the crawl completes."""
    try:
        find_nginx()
    except NginxError as exc:
        pytest.skip(str(exc))
    small = tmp_path / "small"
    ports = _free_ports(1)
    access_log = build_site(tmp_path / "site", ports)
    with tmpfs(small, TMPFS_MB), run_nginx(tmp_path / "site" / "nginx"):
        out = small / "crawl"
        first = subprocess.run(
            # (--delay 0.05: 20 pages a second, ~5 MB/s, so the guard's reading every 0.1 s
            # sees the margin crossed; at full speed the 40 pages came within two readings)
            gossamer("crawl", f"http://127.0.0.1:{ports[0]}/p0.html", "-o", str(out),
                     "--allow-private", "--delay", "0.05", "--workers", "1", "-q",
                     "--disk-margin", str(TMPFS_MB - 4)),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        stats = json.loads((out / "stats.json").read_text())
        leftover = list((out / "warc").glob("*.open"))
        second = subprocess.run(
            gossamer("crawl", "--resume", str(out), "-q", "--disk-margin", "1"),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        done = json.loads((out / "stats.json").read_text())
    line = f"under the margin of {TMPFS_MB - 4} MB (--disk-margin): it takes no more hosts"
    assert first.returncode == 74, first.stderr
    assert first.stderr.count(line) == 1, first.stderr
    assert stats["ended"] == "error"
    assert not leftover
    assert second.returncode == 0, second.stderr
    assert done["ended"] == "complete", done
    pages = {path for _, _, path, _ in served(access_log) if path != "/robots.txt"}
    assert pages == {f"/p{i}.html" for i in range(PAGES)}
