"""The simulated web's HTTP server: protocol behaviour, control endpoints, the audit log.

A real server on loopback, reached with http.client and raw sockets.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from _testweb_http import (
    get,
    log_lines,
    parse_responses,
    raw_exchange,
    request_bytes,
    spec_with,
    wait_for,
)

from gossamer.testweb import RunningWeb, WebSpec, serve_in_thread
from gossamer.testweb._auditlog import LOG_FIELDS, AuditLogWriter, escape_field
from gossamer.testweb._server import normalise_host

SPEC = WebSpec(seed=3, hosts=60, pages_mean=20)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWeb]:
    log = tmp_path_factory.mktemp("web") / "web.log"
    with serve_in_thread(SPEC, log_path=log) as running:
        yield running


def home(web: RunningWeb, h: int = 0) -> tuple[str, str]:
    return web.model.hosts[h].name, "/"


def test_get_page_by_host_header(web: RunningWeb) -> None:
    name = web.model.hosts[1].name
    r = get(web, name, "/")
    assert r.status == 200
    assert f"<title>{name} page 0</title>".encode() in r.body
    assert r.header("Server") == "gossamer-testweb"
    assert r.header("Date")
    assert r.header("Content-Length") == str(len(r.body))
    assert r.header("Connection") == "keep-alive"


def test_keep_alive_serves_several_requests_on_one_connection(web: RunningWeb) -> None:
    host = web.model.hosts[2]
    conn = http.client.HTTPConnection(host.ip, web.port, timeout=10)
    try:
        bodies = []
        for i in range(min(host.pages, 5)):
            conn.request("GET", web.model.page_target(host.id, i), headers={"Host": host.name})
            resp = conn.getresponse()
            bodies.append(resp.read())
            assert resp.status == 200
        sock = conn.sock
        assert sock is not None  # http.client keeps the same socket: no reconnects
    finally:
        conn.close()
    assert len(set(bodies)) == len(bodies)
    lines = log_lines(web)
    conns = {f[2] for f in lines if f[4] == host.name}
    assert len(conns) == 1


def test_pipelined_requests_are_answered_in_order(web: RunningWeb) -> None:
    host = web.model.hosts[3]
    targets = [web.model.page_target(host.id, i) for i in range(min(host.pages, 4))]
    targets += ["/robots.txt", "/no-such-page"]
    data = b"".join(request_bytes(host.name, t) for t in targets)
    data += request_bytes(host.name, "/", extra="Connection: close\r\n")
    replies = parse_responses(raw_exchange(host.ip, web.port, data))
    assert len(replies) == len(targets) + 1
    for t, reply in zip([*targets, "/"], replies, strict=True):
        single = get(web, host.name, t)
        assert (reply.status, reply.body) == (single.status, single.body)
    assert replies[-1].header("Connection") == "close"


def test_head_sends_headers_only(web: RunningWeb) -> None:
    name, target = home(web, 4)
    full = get(web, name, target)
    data = request_bytes(name, target, method="HEAD", extra="Connection: close\r\n")
    raw = raw_exchange(web.model.hosts[4].ip, web.port, data)
    replies = parse_responses(raw, head_only=(True,))
    assert len(replies) == 1
    assert replies[0].status == 200
    assert replies[0].header("Content-Length") == str(len(full.body))
    assert raw.endswith(b"\r\n\r\n")  # nothing after the head


def test_other_methods_get_405(web: RunningWeb) -> None:
    host = web.model.hosts[0]
    data = request_bytes(host.name, "/", method="POST", extra="Content-Length: 3\r\n") + b"abc"
    data += request_bytes(host.name, "/", method="DELETE", extra="Connection: close\r\n")
    replies = parse_responses(raw_exchange(host.ip, web.port, data))
    assert [r.status for r in replies] == [405, 405]
    assert replies[0].header("Allow") == "GET, HEAD"


def test_garbage_gets_400_and_close(web: RunningWeb) -> None:
    raw = raw_exchange("127.0.0.1", web.port, b"NOT HTTP AT ALL\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 400 ")
    assert b"Connection: close" in raw


def test_missing_host_on_http11_gets_400(web: RunningWeb) -> None:
    raw = raw_exchange("127.0.0.1", web.port, b"GET / HTTP/1.1\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 400 ")


def test_oversized_head_gets_431(web: RunningWeb) -> None:
    name, _ = home(web)
    big = "X-Filler: " + "a" * (70 * 1024) + "\r\n"
    raw = raw_exchange("127.0.0.1", web.port, request_bytes(name, "/", extra=big))
    assert raw.startswith(b"HTTP/1.1 431 ")


def test_unknown_host_is_404_and_logged(web: RunningWeb) -> None:
    r = get(web, web.model.hosts[0].name, "/", headers={"Host": "www.nowhere.example"})
    assert r.status == 404
    assert any(f[4] == "www.nowhere.example" and f[7] == "404" for f in log_lines(web))


def test_host_header_case_port_and_trailing_dot(web: RunningWeb) -> None:
    host = web.model.hosts[5]
    expected = get(web, host.name, "/").body
    for variant in (host.name.upper(), f"{host.name}:80", f"{host.name}.", f"{host.name}.:8080"):
        r = get(web, host.name, "/", headers={"Host": variant})
        assert (r.status, r.body) == (200, expected), variant


def test_absolute_form_target(web: RunningWeb) -> None:
    host = web.model.hosts[6]
    data = f"GET http://{host.name}/ HTTP/1.1\r\nHost: ignored.example\r\nConnection: close\r\n\r\n"
    [reply] = parse_responses(raw_exchange(host.ip, web.port, data.encode()))
    assert reply.status == 200
    assert reply.body == get(web, host.name, "/").body


def test_http10_closes_unless_keep_alive(web: RunningWeb) -> None:
    host = web.model.hosts[0]
    raw = raw_exchange(host.ip, web.port, f"GET / HTTP/1.0\r\nHost: {host.name}\r\n\r\n".encode())
    assert raw.startswith(b"HTTP/1.0 200 ")
    assert b"Connection: close" in raw.split(b"\r\n\r\n")[0]
    with socket.create_connection((host.ip, web.port), timeout=10) as s:
        req = f"GET / HTTP/1.0\r\nHost: {host.name}\r\nConnection: keep-alive\r\n\r\n".encode()
        s.sendall(req + req)  # two requests, one connection: both answered
        data = b""
        while data.count(b"HTTP/1.0 200") < 2 or not data.endswith(b"</html>\n"):
            chunk = s.recv(65536)
            assert chunk
            data += chunk
    assert data.count(b"Connection: keep-alive") == 2


def test_every_host_is_served_at_its_intended_ip(web: RunningWeb) -> None:
    for host in web.model.hosts[:20]:
        assert get(web, host.name, "/robots.txt").status == 200
    by_ip = {h.name: h.ip for h in web.model.hosts}
    lines = [f for f in log_lines(web) if f[6] == "/robots.txt" and f[4] in by_ip]
    assert lines
    assert all(f[3] == by_ip[f[4]] for f in lines)
    ips = set(web.model.ips())
    assert len(ips) > 10
    outside = "127.2.0.1"  # a loopback address that is not part of the web
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((outside, web.port), timeout=5).close()


def test_control_endpoints_are_not_logged(web: RunningWeb) -> None:
    before = len(log_lines(web))
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    try:
        conn.request("GET", "/")
        index = conn.getresponse().read()
        conn.request("GET", "/_testweb/status")
        status = json.loads(conn.getresponse().read())
        conn.request("GET", "/_testweb/epoch?set=4")
        assert json.loads(conn.getresponse().read()) == {"epoch": 4}
        conn.request("GET", "/_testweb/epoch?set=0")
        assert json.loads(conn.getresponse().read()) == {"epoch": 0}
        conn.request("GET", "/_testweb/flush")
        assert "lines" in json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert web.model.hosts[0].name.encode() in index
    assert status["port"] == web.port
    assert status["spec"] == SPEC.to_dict()
    assert status["requests"] >= 1
    assert len(log_lines(web)) == before
    assert web.status()["pid"] == os.getpid()


def test_audit_log_lines_carry_the_request(web: RunningWeb) -> None:
    host = web.model.hosts[7]
    headers = {
        "User-Agent": "tester/1.0 (audit)",
        "If-Modified-Since": "Thu, 01 Jan 2026 00:00:00 GMT",
        "If-None-Match": '"abc"',
        "Accept-Encoding": "gzip",
    }
    r = get(web, host.name, "/robots.txt", headers={"Host": host.name.upper() + ":80", **headers})
    assert r.status == 200

    def mine() -> list[list[str]]:
        return [f for f in log_lines(web) if f[10] == "tester/1.0 (audit)"]

    [line] = wait_for(mine)  # type: ignore[misc]
    assert len(line) == len(LOG_FIELDS) == 14
    rec = dict(zip(LOG_FIELDS, line, strict=True))
    assert int(rec["start_us"]) <= int(rec["end_us"])
    pid, _, n = rec["conn"].partition("-")
    assert pid == str(os.getpid()) and n.isdigit()
    assert rec["ip"] == host.ip
    assert rec["host"] == host.name
    assert (rec["method"], rec["target"]) == ("GET", "/robots.txt")
    assert (rec["status"], rec["bytes"], rec["outcome"]) == ("200", str(len(r.body)), "ok")
    assert rec["ims"] == headers["If-Modified-Since"]
    assert rec["inm"] == '"abc"'
    assert rec["ae"] == "gzip"
    plain = get(web, host.name, "/robots.txt", headers={"User-Agent": "", "Accept-Encoding": ""})
    assert plain.status == 200
    last = [f for f in log_lines(web) if f[4] == host.name][-1]
    assert last[10:] == ["-", "-", "-", "-"]


def test_log_escaping(tmp_path: Path) -> None:
    assert escape_field("") == "-"
    assert escape_field("a\tb\\c\r\nd") == "a\\tb\\\\c\\r\\nd"
    w = AuditLogWriter(tmp_path / "x.log", '{"seed": 1}')
    w.write(1, 2, "9-1", "127.1.0.1", "h", "GET", "/a\tb", 200, 5, "ok", "ua\n", "", "", "")
    w.close()
    lines = (tmp_path / "x.log").read_text().splitlines()
    assert lines[0] == '#gossamer-testweb-log\tv1\t{"seed": 1}'
    assert lines[1].split("\t") == [
        "1",
        "2",
        "9-1",
        "127.1.0.1",
        "h",
        "GET",
        "/a\\tb",
        "200",
        "5",
        "ok",
        "ua\\n",
        "-",
        "-",
        "-",
    ]


def test_normalise_host() -> None:
    assert normalise_host("WWW.H1.Example:8080") == "www.h1.example"
    assert normalise_host("www.h1.example.") == "www.h1.example"
    assert normalise_host("[::1]:80") == "[::1]"


def test_serve_in_thread_stops_on_exit_even_after_an_error(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    with pytest.raises(RuntimeError, match="boom"), serve_in_thread(spec_with(), log_path=log) as w:
        port, ip = w.port, w.model.hosts[0].ip
        assert get(w, w.model.hosts[0].name, "/").status == 200
        raise RuntimeError("boom")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((ip, port), timeout=5).close()
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and lines[1].split("\t")[7] == "200"  # flushed at stop


def test_resolve_and_hosts_files(web: RunningWeb, tmp_path: Path) -> None:
    resolve = web.write_resolve_file(tmp_path / "resolve.txt").read_text().splitlines()
    assert len(resolve) == len(web.model.hosts)
    h = web.model.hosts[9]
    assert f"{h.name}:80:{h.ip}:{web.port}" in resolve
    hosts = web.write_hosts_file(tmp_path / "hosts").read_text().splitlines()
    assert len(hosts) == len(web.model.ips())
    assert any(line.split()[0] == h.ip and h.name in line.split()[1:] for line in hosts)
    assert web.url(h.id, 0) == f"http://{h.name}/"


def test_pycurl_reaches_pages_by_their_canonical_urls(web: RunningWeb) -> None:
    """The resolve lines are curl's --connect-to syntax: pycurl fetches portless URLs."""
    from io import BytesIO

    import pycurl

    c = pycurl.Curl()
    try:
        c.setopt(pycurl.CONNECT_TO, web.connect_to_lines())
        for h in (0, 11, 23):
            buf = BytesIO()
            c.setopt(pycurl.URL, web.url(h, 0))
            c.setopt(pycurl.WRITEDATA, buf)
            c.perform()
            assert c.getinfo(pycurl.RESPONSE_CODE) == 200
            assert c.getinfo(pycurl.PRIMARY_IP) == web.model.hosts[h].ip
            assert buf.getvalue() == get(web, web.model.hosts[h].name, "/").body
    finally:
        c.close()


def test_upgrade_request_is_answered_then_closed(web: RunningWeb) -> None:
    host = web.model.hosts[0]
    extra = "Connection: Upgrade\r\nUpgrade: websocket\r\n"
    raw = raw_exchange(host.ip, web.port, request_bytes(host.name, "/robots.txt", extra=extra))
    [reply] = parse_responses(raw)
    assert reply.status == 200
