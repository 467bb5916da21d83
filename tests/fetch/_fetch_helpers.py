"""Helpers of the fetcher tests: event loops, a scripted raw HTTP server, page finders."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import uvloop

from gossamer.testweb import HostFlag, WebModel

T = TypeVar("T")

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def run(coro: Coroutine[Any, Any, T], loop: str = "uvloop", timeout: float = 60.0) -> T:
    """Run `coro` on a fresh event loop of the given kind, bounded in time."""

    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coro

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(bounded())


def find_page(
    model: WebModel, flag: int, *, absent: int = 0, host_absent: int = HostFlag.DEAD
) -> tuple[int, int]:
    """The first (host, page ≥ 1) whose plan has `flag` and none of `absent`, on a host with
    none of `host_absent` (dead hosts never answer anything)."""
    for host in model.hosts:
        if host.flags & host_absent:
            continue
        for i in range(1, host.pages):
            f = model.plan(host.id, i).flags
            if f & flag == flag and not f & absent:
                return host.id, i
    raise LookupError(f"no page with flags {flag:#x}")


def find_host(model: WebModel, flag: int, *, absent: int = 0, min_pages: int = 1) -> int:
    for host in model.hosts:
        if host.flags & flag == flag and not host.flags & absent and host.pages >= min_pages:
            return host.id
    raise LookupError(f"no host with flags {flag:#x}")


# ---------------------------------------------------------------------------- raw server
Action = bytes | float | str  # bytes to send, seconds to wait, "close" or "reset"


@dataclass
class RawServer:
    """A scripted HTTP/1.1 server on 127.0.0.1: `script(request_head) -> actions` answers
    each request; every request head received is recorded with its connection number."""

    script: Callable[[bytes], list[Action]]
    requests: list[tuple[int, bytes]] = field(default_factory=list)
    port: int = 0
    connections: int = 0
    closed: int = 0  # connections this server has closed (or seen closed)
    closed_event: asyncio.Event = field(default_factory=asyncio.Event)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.requests.append((conn, head))
                for action in self.script(head):
                    if isinstance(action, bytes):
                        writer.write(action)
                        try:
                            await writer.drain()
                        except ConnectionError:  # the client hung up (stopped the transfer)
                            return
                    elif isinstance(action, float):
                        await asyncio.sleep(action)
                    elif action == "close":
                        return
                    elif action == "reset":
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                        writer.transport.abort()
                        return
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            self.closed += 1
            self.closed_event.set()

    async def wait_closed_connections(self, n: int) -> None:
        """Wait until `n` connections have been closed."""
        while self.closed < n:
            self.closed_event.clear()
            await self.closed_event.wait()


@contextlib.asynccontextmanager
async def raw_server(script: Callable[[bytes], list[Action]]) -> AsyncIterator[RawServer]:
    srv = RawServer(script)
    server = await asyncio.start_server(srv._handle, "127.0.0.1", 0)
    srv.port = server.sockets[0].getsockname()[1]
    try:
        yield srv
    finally:
        server.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await server.wait_closed()


def response(
    status: int = 200,
    body: bytes = b"hello",
    headers: list[tuple[str, str]] | None = None,
    *,
    reason: str = "OK",
) -> bytes:
    hs = list(headers or [])
    if not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in hs):
        hs.append(("Content-Length", str(len(body))))
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hs) + "\r\n"
    return head.encode("latin-1") + body


async def gather_bounded(aws: list[Awaitable[T]]) -> list[T]:
    return list(await asyncio.gather(*aws))
