"""Every transport-level realism switch, seen by a plain HTTP client on a real server.

Each test forces one switch on (`overrides`) in a small web with short magnitudes, then checks
what http.client / a raw socket sees, and what the audit log recorded.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import socket
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _testweb_http import (
    assert_reset,
    find_page,
    get,
    log_lines,
    parse_responses,
    raw_exchange,
    request_bytes,
    spec_with,
    wait_for,
)

from gossamer.testweb import HostFlag, Kind, PageFlag, RunningWeb, WebSpec, serve_in_thread


@contextmanager
def web_with(tmp_path: Path, **switches: float) -> Iterator[RunningWeb]:
    with serve_in_thread(spec_with(**switches), log_path=tmp_path / "web.log") as web:
        yield web


def page(web: RunningWeb, flag: int, absent: int = 0) -> tuple[str, str]:
    h, i = find_page(web.model, flag, absent=absent)
    return web.model.hosts[h].name, web.model.page_target(h, i)


def outcomes(web: RunningWeb, host: str, target: str) -> list[tuple[str, str]]:
    return [(f[7], f[9]) for f in log_lines(web) if f[4] == host and f[6] == target]


def test_reset_always(tmp_path: Path) -> None:
    with web_with(tmp_path, reset_always=1.0) as web:
        host, target = page(web, PageFlag.RESET_ALWAYS)
        assert_reset(web, host, target)
        with pytest.raises(ConnectionResetError):
            get(web, host, target)
        assert wait_for(lambda: outcomes(web, host, target) == [("0", "reset")] * 2)


def test_reset_once_then_fine(tmp_path: Path) -> None:
    with web_with(tmp_path, reset_once=1.0) as web:
        host, target = page(web, PageFlag.RESET_ONCE)
        assert_reset(web, host, target)
        assert get(web, host, target).status == 200
        assert get(web, host, target).status == 200
        assert outcomes(web, host, target) == [("0", "reset"), ("200", "ok"), ("200", "ok")]


def test_reset_after_earlier_responses_on_the_connection(tmp_path: Path) -> None:
    """Pipelined: the responses before the reset still arrive, then the RST."""
    with web_with(tmp_path, reset_always=1.0) as web:
        h, i = find_page(web.model, PageFlag.RESET_ALWAYS)
        host = web.model.hosts[h]
        data = request_bytes(host.name, "/robots.txt") + request_bytes(
            host.name, web.model.page_target(h, i)
        )
        received = b""
        with socket.create_connection((host.ip, web.port), timeout=10) as s:
            s.sendall(data)
            with pytest.raises(ConnectionResetError):
                while chunk := s.recv(65536):
                    received += chunk
                raise AssertionError("orderly close instead of a reset")
        assert received.startswith(b"HTTP/1.1 200 OK")


@pytest.mark.parametrize("with_retry_after", [True, False])
def test_transient_503_then_200(tmp_path: Path, with_retry_after: bool) -> None:
    with web_with(tmp_path, transient_503=1.0) as web:
        flag, absent = PageFlag.TRANSIENT_503, 0
        if with_retry_after:
            flag |= PageFlag.RETRY_AFTER
        else:
            absent = PageFlag.RETRY_AFTER
        host, target = page(web, flag, absent)
        first = get(web, host, target)
        assert first.status == 503
        assert first.header("Retry-After") == ("1" if with_retry_after else None)
        assert get(web, host, target).status == 200


def test_rate_limited_host_answers_429_to_bursts(tmp_path: Path) -> None:
    with web_with(tmp_path, rate_limit_host=1.0, rate_limit_per_s=3) as web:
        host = web.model.hosts[0]
        assert host.flags & HostFlag.RATE_LIMIT
        data = b"".join(request_bytes(host.name, "/robots.txt") for _ in range(8))
        data += request_bytes(host.name, "/robots.txt", extra="Connection: close\r\n")
        replies = parse_responses(raw_exchange(host.ip, web.port, data))
        statuses = [r.status for r in replies]
        assert statuses[:3] == [200, 200, 200]
        assert 429 in statuses
        limited = replies[statuses.index(429)]
        assert limited.header("Retry-After") == "2"


def test_hanging_page_never_answers_and_is_logged_as_hang(tmp_path: Path) -> None:
    with web_with(tmp_path, hang_page=1.0) as web:
        host, target = page(web, PageFlag.HANG)
        with pytest.raises(TimeoutError):
            get(web, host, target, timeout=0.5)
        assert wait_for(lambda: outcomes(web, host, target) == [("0", "hang")])


def test_hang_is_logged_at_stop_when_the_client_stays(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    with serve_in_thread(spec_with(hang_page=1.0), log_path=log) as web:
        host, target = page(web, PageFlag.HANG)
        ip, port = web.address_of(host)
        client = socket.create_connection((ip, port), timeout=10)
        client.sendall(request_bytes(host, target))
        wait_for(lambda: web.status()["connections_open"] >= 1)
        time.sleep(0.1)
    client.close()
    fields = log.read_text().splitlines()[1].split("\t")
    assert (fields[6], fields[7], fields[9]) == (target, "0", "hang")


def test_dead_host_accepts_but_never_answers(tmp_path: Path) -> None:
    with web_with(tmp_path, dead_host=1.0) as web:
        host = web.model.hosts[0]
        assert host.flags & HostFlag.DEAD
        for target in ("/", "/robots.txt"):
            with pytest.raises(TimeoutError):
                get(web, host.name, target, timeout=0.3)


def test_slow_first_byte(tmp_path: Path) -> None:
    with web_with(tmp_path, slow_first_byte=1.0, slow_first_byte_s=0.4) as web:
        host, target = page(web, PageFlag.SLOW_FIRST_BYTE)
        with pytest.raises(TimeoutError):
            get(web, host, target, timeout=0.1)
        started = time.monotonic()
        r = get(web, host, target)
        assert r.status == 200
        assert time.monotonic() - started >= 0.35  # a lower bound: the server waited


def test_trickle_sends_the_body_in_slices(tmp_path: Path) -> None:
    with web_with(tmp_path, trickle=1.0, trickle_s=0.5) as web:
        h, i = find_page(web.model, PageFlag.TRICKLE)
        host = web.model.hosts[h]
        target = web.model.page_target(h, i)
        reads = 0
        data = b""
        started = time.monotonic()
        with socket.create_connection((host.ip, web.port), timeout=10) as s:
            s.sendall(request_bytes(host.name, target, extra="Connection: close\r\n"))
            while chunk := s.recv(1 << 20):
                data += chunk
                reads += 1
        elapsed = time.monotonic() - started
        [reply] = parse_responses(data)
        assert reply.status == 200
        assert reply.body == get(web, host.name, target).body
        assert reads >= 3
        assert elapsed >= 0.4


@pytest.mark.slow
@pytest.mark.parametrize("k", [0, 1], ids=["content-length", "chunked"])
def test_huge_page_is_streamed_with_flat_memory(tmp_path: Path, k: int) -> None:
    from gossamer.testweb import serve_subprocess

    size = 50_000_000
    spec = spec_with(huge_pages=2, huge_page_bytes=size)
    with serve_subprocess(spec) as web:
        host = web.model.hosts[(k * 7919 + 13) % len(web.model.hosts)]
        target = f"/big/huge-{k}.html"
        assert web.model.resolve(host.id, target).kind is Kind.HUGE
        get(web, host.name, "/")  # warm up: the server has answered a normal page
        rss_before = _peak_rss_kb(web.pid)
        conn = http.client.HTTPConnection(host.ip, web.port, timeout=30)
        with contextlib.closing(conn):
            conn.request("GET", target, headers={"Host": host.name})
            resp = conn.getresponse()
            assert resp.status == 200
            if k == 1:
                assert resp.getheader("Transfer-Encoding") == "chunked"
            else:
                assert resp.getheader("Content-Length") == str(size)
            head = resp.read(4096)
            total = len(head)
            time.sleep(0.3)  # a slow reader: the server must wait for it, not run ahead
            handed_over = web.status()["body_bytes"]
            assert handed_over < size * 0.7, "the server ignored flow control"
            last = b""
            while chunk := resp.read(1 << 20):
                total += len(chunk)
                last = chunk
        assert total == size
        assert head.startswith(b"<!DOCTYPE html>")
        assert last.endswith(b"</body></html>\n")
        grown_kb = _peak_rss_kb(web.pid) - rss_before
        assert grown_kb < 20_000, f"server peak RSS grew by {grown_kb} kB"


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_gzip_and_deflate_when_accepted(tmp_path: Path) -> None:
    with web_with(tmp_path, gzip_host=1.0) as web:
        host = web.model.hosts[1].name
        plain = get(web, host, "/")
        assert plain.header("Content-Encoding") is None
        gz = get(web, host, "/", headers={"Accept-Encoding": "gzip"})
        assert gz.header("Content-Encoding") == "gzip"
        assert gzip.decompress(gz.body) == plain.body
        df = get(web, host, "/", headers={"Accept-Encoding": "deflate"})
        assert df.header("Content-Encoding") == "deflate"
        assert zlib.decompress(df.body) == plain.body


def test_conditional_requests_get_304(tmp_path: Path) -> None:
    with web_with(tmp_path, conditional_host=1.0) as web:
        host = web.model.hosts[2].name
        first = get(web, host, "/")
        etag, lm = first.header("ETag"), first.header("Last-Modified")
        assert etag and lm
        by_etag = get(web, host, "/", headers={"If-None-Match": etag})
        assert (by_etag.status, by_etag.body) == (304, b"")
        assert by_etag.header("ETag") == etag
        by_date = get(web, host, "/", headers={"If-Modified-Since": lm})
        assert by_date.status == 304
        older = get(web, host, "/", headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"})
        assert older.status == 200 and older.body == first.body
        other = get(web, host, "/", headers={"If-None-Match": '"nope"'})
        assert other.status == 200


def test_changing_pages_follow_the_epoch(tmp_path: Path) -> None:
    with web_with(tmp_path, changing=1.0, conditional_host=1.0) as web:
        host, target = page(web, PageFlag.CHANGING)
        v0 = get(web, host, target)
        web.set_epoch(3)
        v3 = get(web, host, target)
        assert v3.body != v0.body
        assert b"Revision 3" in v3.body
        assert v3.header("ETag") != v0.header("ETag")
        assert get(
            web, host, target, headers={"If-None-Match": v0.header("ETag") or ""}
        ).status == (200)
        web.set_epoch(0)
        assert get(web, host, target).body == v0.body


def test_change_period_advances_the_epoch(tmp_path: Path) -> None:
    spec = spec_with(changing=1.0)
    with serve_in_thread(spec, change_period=0.2) as web:
        host, target = page(web, PageFlag.CHANGING)
        first = get(web, host, target).body
        time.sleep(0.5)
        assert get(web, host, target).body != first
        assert web.status()["epoch"] >= 2


def test_robots_404_and_500(tmp_path: Path) -> None:
    with web_with(tmp_path, robots_404=1.0) as web:
        assert get(web, web.model.hosts[0].name, "/robots.txt").status == 404
    with web_with(tmp_path, robots_500=1.0) as web:
        assert get(web, web.model.hosts[0].name, "/robots.txt").status == 500


def test_robots_timeout(tmp_path: Path) -> None:
    with web_with(tmp_path, robots_timeout=1.0) as web:
        host = web.model.hosts[0].name
        with pytest.raises(TimeoutError):
            get(web, host, "/robots.txt", timeout=0.3)
        assert get(web, host, "/").status == 200


def test_robots_redirect_chain(tmp_path: Path) -> None:
    with web_with(tmp_path, robots_redirect=1.0) as web:
        h = web.model.hosts[0]
        target, hops = "/robots.txt", 0
        while True:
            r = get(web, h.name, target)
            if r.status != 301:
                break
            hops += 1
            location = r.header("Location") or ""
            assert location.startswith(f"http://{h.name}/")
            target = location[len(f"http://{h.name}") :]
            assert hops <= 5
        assert r.status == 200
        assert hops == h.robots_hops
        assert r.body.decode() == web.model.robots_txt(h.id)


def test_latency_delays_every_answer(tmp_path: Path) -> None:
    with web_with(tmp_path, latency_ms=200.0) as web:
        host = web.model.hosts[0]
        assert host.latency_ms >= 50
        started = time.monotonic()
        assert get(web, host.name, "/robots.txt").status == 200
        assert time.monotonic() - started >= host.latency_ms / 1000 * 0.9


def test_processes_share_the_port_and_split_the_log(tmp_path: Path) -> None:
    from gossamer.testweb import serve_subprocess

    log = tmp_path / "web.log"
    spec = WebSpec(seed=2, hosts=30, pages_mean=10)
    with serve_subprocess(spec, log_path=log, processes=2) as web:
        for host in web.model.hosts:
            assert get(web, host.name, "/").status == 200
        web.set_epoch(2)
        assert web.status()["epoch"] == 2
    lines = []
    for k in (0, 1):
        text = Path(f"{log}.{k}").read_text().splitlines()
        assert text[0].startswith("#gossamer-testweb-log\tv1\t")
        lines += text[1:]
    assert len(lines) == len(web.model.hosts)


def test_client_abort_mid_body_is_logged_as_aborted(tmp_path: Path) -> None:
    with web_with(tmp_path, trickle=1.0, trickle_s=2.0) as web:
        h, i = find_page(web.model, PageFlag.TRICKLE)
        host = web.model.hosts[h]
        target = web.model.page_target(h, i)
        with socket.create_connection((host.ip, web.port), timeout=10) as s:
            s.sendall(request_bytes(host.name, target))
            assert s.recv(65536).startswith(b"HTTP/1.1 200 OK")
        [(status, outcome)] = wait_for(lambda: outcomes(web, host.name, target))  # type: ignore[misc]
        assert (status, outcome) == ("200", "aborted")
        line = next(f for f in log_lines(web) if f[6] == target)
        assert 0 <= int(line[8]) < len(get(web, host.name, target, timeout=5).body)


@pytest.mark.slow
def test_every_request_of_a_hostile_mix_is_logged_once(tmp_path: Path) -> None:
    """Many concurrent clients against every switch at once: one log line per request, no
    server errors, and the server still answers afterwards."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    spec = WebSpec(
        seed=21,
        hosts=60,
        pages_mean=20,
        profile="hostile",
        overrides=(
            ("latency_ms", 5.0),
            ("slow_first_byte_s", 0.2),
            ("trickle_s", 0.2),
            ("huge_page_bytes", 2_000_000),
            ("rate_limit_per_s", 50.0),
        ),
    )
    log = tmp_path / "web.log"
    rng = random.Random(3)
    with serve_in_thread(spec, log_path=log) as web:
        model = web.model
        jobs = []
        for _ in range(300):
            h = rng.randrange(len(model.hosts))
            plan = model.plan(h, rng.randrange(model.hosts[h].pages))
            links = [lk.url for lk in plan.links if lk.url.startswith("http://")]
            url = (
                rng.choice(links) if links and rng.random() < 0.5 else model.page_url(h, plan.page)
            )
            host, _, rest = url[len("http://") :].partition("/")
            jobs.append((host, "/" + rest))

        def fetch(job: tuple[str, str]) -> str:
            try:
                return str(get(web, job[0], job[1], timeout=1.0).status)
            except (OSError, http.client.HTTPException) as exc:
                return type(exc).__name__

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(fetch, jobs))
        status = web.status()
        assert status["errors"] == []
        assert get(web, model.hosts[0].name, "/robots.txt").status in (200, 404, 500, 301, 429)
    lines = log.read_text().splitlines()[1:]
    assert len(lines) == len(jobs) + 1
    assert {line.split("\t")[9] for line in lines} <= {"ok", "reset", "hang", "aborted"}
    assert len(set(results)) > 3  # a real mix: 200, 404, resets, timeouts, …
