"""A cluster crawl on Redis Sentinel survives its master's death: a real redis-server master
with a replica, three real redis-sentinel processes (quorum 2), a static site served by nginx
on four ports (four hosts), and `gossamer crawl --redis redis+sentinel://… --workers 2`. Once
the site has served a fair share of its pages the master is SIGKILLed; the sentinels promote
the replica, the workers reconnect to it, and the crawl ends complete: every page requested
(nginx's access log), the crawl `finished`, its frontier's done count every page. The stall
(the longest gap in nginx's log around the kill) and the pages fetched twice are printed
(docs/cluster.md, "Redis Sentinel")."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_real_site import write_nginx_conf

from gossamer.testweb._nginx import NginxError, find_nginx, run_nginx
from gossamer.testweb.redisd import RedisSentinels, RedisServerError, find_redis_server

pytestmark = pytest.mark.slow

PORTS = 4
PAGES = 90  # a port
TIMEOUT = 120.0


def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def build_site(root: Path, ports: list[int]) -> Path:
    """PAGES pages a chain (page i links to i+1 and to (7i+3) mod PAGES), the same files on
    every port; nginx.conf and export.json for `run_nginx`; the access log's path."""
    www = root / "www"
    www.mkdir(parents=True)
    for i in range(PAGES):
        links = {(i + 1) % PAGES, (7 * i + 3) % PAGES}
        body = "".join(f'<a href="p{j}.html">p{j}</a>\n' for j in sorted(links))
        (www / f"p{i}.html").write_text(f"<html><body><h1>page {i}</h1>{body}</body></html>")
    return write_nginx_conf(root / "nginx", www, ports, access_format=SERVED_FORMAT)


#: the access log's line: time, port, request target, status (`served`)
SERVED_FORMAT = "$msec $server_port $request_uri $status"


def served(access_log: Path) -> list[tuple[float, int, str, int]]:
    """(time, port, path, status) of every request nginx logged."""
    out = []
    for line in access_log.read_text().splitlines():
        t, port, path, status = line.split()
        out.append((float(t), int(port), path, int(status)))
    return out


@pytest.mark.parametrize(
    ("acks", "down_after_ms"),
    [(0, 1000), (1, 1000), (0, 4000)],
    ids=["no-wait", "replica-acks-1", "stall-over-ttl"],
)
def test_a_crawl_survives_the_sentinel_masters_death(
    tmp_path: Path, acks: int, down_after_ms: int
) -> None:
    """With `--replica-acks 1` every completion is on the replica before the worker goes
    on: the failover loses none, so no page is fetched twice but those in flight. A stall
    longer than the heartbeat TTL (3 s) counts no worker dead."""
    try:
        find_nginx()
        find_redis_server()
    except (NginxError, RedisServerError) as exc:
        pytest.skip(str(exc))
    ports = _free_ports(PORTS)
    access_log = build_site(tmp_path / "site", ports)
    seeds = [f"http://127.0.0.1:{p}/p0.html" for p in ports]
    # nginx first: the ports were only seen free, and the Redis servers and sentinels pick
    # free ports of their own as they start (one took an nginx port once: "Address already
    # in use")
    with (
        run_nginx(tmp_path / "site" / "nginx"),
        RedisSentinels(tmp_path / "redis", down_after_ms=down_after_ms) as group,
    ):
        args = [
            sys.executable, "-m", "gossamer", "crawl", "--redis", group.url, *seeds,
            "-o", str(tmp_path / "out"), "--workers", "2", "--allow-private",
            "--delay", "0.05", "--per-ip", str(PORTS), "--heartbeat-ttl", "3", "-q",
            "--replica-acks", str(acks),
        ]  # fmt: skip
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            try:
                deadline = time.monotonic() + 60
                while sum(1 for r in served(access_log) if r[3] == 200) < PAGES * PORTS // 3:
                    assert proc.poll() is None, proc.communicate()[1].decode()
                    assert time.monotonic() < deadline, "the crawl did not get going"
                    time.sleep(0.05)
                old = group.master
                killed_at = time.time()
                old.kill()
                new = group.wait_for_failover(old.port)
                promoted_at = time.time()
                stdout, stderr = proc.communicate(timeout=TIMEOUT)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        err = stderr.decode()
        assert proc.returncode == 0, err
        crawl_id = stdout.decode().split()[0]
        with new.client() as c:
            raw = c.hgetall(f"gs:{crawl_id}:{{m}}:meta")
            stored = json.loads(c.hget(f"gs:{crawl_id}:{{m}}:meta", "settings") or "{}")
        meta = {k.decode(): v.decode() for k, v in raw.items()}
        status = subprocess.run(  # a one-shot command through the sentinels, after the failover
            [sys.executable, "-m", "gossamer", "status", "--redis", group.url, "--crawl",
             crawl_id, "--json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["frontier"]["done"] == PAGES * PORTS
    assert stored.get("replica_acks", 0) == acks, stored
    assert meta["state"] == "finished", meta
    # a stall over the TTL: each worker's record expired, and it came back under a new
    # incarnation (its batches given back), none answered dead to the others
    expired = err.count("heartbeat record had expired")
    log = served(access_log)
    pages = [(port, path) for _, port, path, status in log if path != "/robots.txt"]
    want = {(p, f"/p{i}.html") for p in ports for i in range(PAGES)}
    assert set(pages) == want, sorted(want - set(pages))[:10]
    before = [t for t, *_ in log if t <= killed_at]
    after = [t for t, *_ in log if t > killed_at]
    assert before and after
    times = sorted(t for t, *_ in log)
    stall = max(b - a for a, b in itertools.pairwise(times) if b > killed_at)
    duplicates = len(pages) - len(set(pages))
    print(
        f"\nsentinel failover (replica_acks {acks}, down-after {down_after_ms} ms): promoted "
        f"{promoted_at - killed_at:.2f} s after the kill; "
        f"longest pause of the site's requests after it {stall:.2f} s; {len(before)} requests "
        f"before, {len(after)} after; pages fetched twice: {duplicates} of {len(want)}; "
        f"workers back after their record expired: {expired}"
    )
    # at least once, at most the in-flight batches twice: 2 workers x 16 hosts x 20 URLs
    assert duplicates <= 2 * PORTS * 20
