"""Plain HTTP clients for the server tests: http.client and raw sockets, nothing clever."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gossamer.testweb import RunningWeb, WebModel, WebSpec

TIMEOUT = 10.0


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    reason: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


def get(
    web: RunningWeb,
    host: str,
    target: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> Reply:
    """One request on a new connection to the host's intended IP (as a crawler would)."""
    ip, port = web.address_of(host)
    conn = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        conn.request(method, target, headers={"Host": host, **(headers or {})})
        resp = conn.getresponse()
        body = resp.read()
        return Reply(resp.status, resp.getheaders(), body, resp.reason)
    finally:
        conn.close()


def raw_exchange(ip: str, port: int, data: bytes, timeout: float = TIMEOUT) -> bytes:
    """Send `data`, read until the server closes the connection."""
    with socket.create_connection((ip, port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def assert_reset(web: RunningWeb, host: str, target: str) -> None:
    """The server answers `target` with a TCP reset (ECONNRESET), not an orderly close.
    (http.client cannot tell: its RemoteDisconnected is a ConnectionResetError too.)"""
    ip, port = web.address_of(host)
    with socket.create_connection((ip, port), timeout=TIMEOUT) as s:
        s.sendall(request_bytes(host, target))
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            return
    raise AssertionError(f"expected a reset, received {data[:60]!r}")


def parse_responses(data: bytes, head_only: tuple[bool, ...] = ()) -> list[Reply]:
    """Split a byte stream into HTTP/1.1 responses (Content-Length or chunked framing)."""
    out: list[Reply] = []
    pos = 0
    while pos < len(data):
        end = data.index(b"\r\n\r\n", pos)
        lines = data[pos:end].decode("latin-1").split("\r\n")
        version, status, *reason = lines[0].split(" ", 2)
        assert version.startswith("HTTP/1."), lines[0]
        headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:]]
        reply = Reply(int(status), headers, b"", reason[0] if reason else "")  # type: ignore[arg-type]
        pos = end + 4
        if len(out) < len(head_only) and head_only[len(out)]:
            pass
        elif reply.header("Transfer-Encoding") == "chunked":
            body = []
            while True:
                eol = data.index(b"\r\n", pos)
                size = int(data[pos:eol], 16)
                pos = eol + 2
                body.append(data[pos : pos + size])
                pos += size + 2
                if size == 0:
                    break
            reply.body = b"".join(body)
        elif reply.header("Content-Length") is not None:
            n = int(reply.header("Content-Length") or 0)
            reply.body = data[pos : pos + n]
            pos += n
        else:
            reply.body = data[pos:]
            pos = len(data)
        out.append(reply)
    return out


def request_bytes(host: str, target: str, *, method: str = "GET", extra: str = "") -> bytes:
    return f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()


def find_page(model: WebModel, flag: int, *, absent: int = 0, min_page: int = 1) -> tuple[int, int]:
    """The first (host, page) whose plan has `flag` set and none of `absent`."""
    for host in model.hosts:
        for i in range(min_page, host.pages):
            f = model.plan(host.id, i).flags
            if f & flag == flag and not f & absent:
                return host.id, i
    raise LookupError(f"no page with flags {flag:#x}")


def spec_with(hosts: int = 40, seed: int = 5, **switches: float) -> WebSpec:
    """A small clean web with some realism switches set."""
    return WebSpec(
        seed=seed, hosts=hosts, pages_mean=20, profile="clean", overrides=tuple(switches.items())
    )


def log_lines(web: RunningWeb) -> list[list[str]]:
    """The audit log's request lines (fields split, unescaped values left as written)."""
    web.flush_log()
    assert web.log_path is not None
    text = Path(web.log_path).read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("#gossamer-testweb-log\tv1\t")
    return [line.split("\t") for line in lines[1:]]


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> object:
    """Poll `predicate` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
