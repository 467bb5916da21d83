"""A fetcher added the way the registry means it: this one module, a `Fetcher` and its
registration. "streams" speaks HTTP/1.0 over asyncio streams, one connection a request, at
the address the crawl's `Resolver` gives (so --resolve and the private-address guard hold as
with the built-in "curl"). It has no fast path (`start`/`poll`): the crawler drives it
through `fetch()` alone. Plain http:// only; the body is asked for uncompressed.
(tests/engine/test_build_registries.py registers it for one crawl.)"""

from __future__ import annotations

import asyncio
import time

from gossamer.config import CrawlSettings
from gossamer.fetch import (
    ERROR_CONNECT,
    ERROR_PROTOCOL,
    ERROR_TIMEOUT,
    FetchRequest,
    FetchResult,
    FetchStats,
    ResolveError,
    Resolver,
    split_url,
)
from gossamer.fetch._registry import register_fetcher

NAME = "streams"


class StreamsFetcher:
    """`Fetcher` over asyncio streams; `urls` lists every URL it was asked for."""

    def __init__(self, settings: CrawlSettings, resolver: Resolver) -> None:
        self.resolver = resolver
        self.user_agent = settings.fetch.user_agent
        self.total_timeout = settings.fetch.total_timeout
        self.max_body = settings.fetch.max_body
        self.urls: list[str] = []
        self.completed = 0
        self.errors: dict[str, int] = {}
        fetchers.append(self)

    async def fetch(self, req: FetchRequest) -> FetchResult:
        self.urls.append(req.url)
        started_at, t0 = time.time(), time.monotonic()
        parts = split_url(req.url)
        request_head = b""
        ip: str | None = None
        port: int | None = None

        def failed(error: str) -> FetchResult:
            return self._failed(req.url, error, started_at, t0, request_head, ip, port)

        if parts is None or not req.url.startswith("http://"):
            return failed(ERROR_PROTOCOL)
        host, port, target, host_header = parts
        head = [f"GET {target} HTTP/1.0", f"Host: {host_header}"]
        head += [f"User-Agent: {self.user_agent}", "Accept-Encoding: identity"]
        head += [f"{name}: {value}" for name, value in req.headers]
        request_head = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        try:
            addr = await self.resolver.resolve(host, port)
        except ResolveError as exc:
            port = None
            return failed(exc.key)
        ip, port = addr.ip, addr.port
        try:
            async with asyncio.timeout(self.total_timeout):
                reader, writer = await asyncio.open_connection(addr.ip, addr.port)
                try:
                    writer.write(request_head)
                    await writer.drain()
                    data = b""
                    while chunk := await reader.read(65536):  # HTTP/1.0: to the close
                        data += chunk
                        if len(data) > self.max_body + 65536:
                            break
                finally:
                    writer.close()
        except TimeoutError:
            return failed(ERROR_TIMEOUT)
        except OSError:
            return failed(ERROR_CONNECT)
        response_head, sep, body = data.partition(b"\r\n\r\n")
        lines = response_head.decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if not sep or len(status_line) < 2 or not status_line[1].isdigit():
            return failed(ERROR_PROTOCOL)
        headers = tuple(
            (name.strip(), value.strip())
            for name, _, value in (line.partition(":") for line in lines[1:])
        )
        self.completed += 1
        return FetchResult(
            url=req.url,
            status=int(status_line[1]),
            headers=headers,
            body=body[: self.max_body],
            raw_body_len=len(body),
            truncated=len(body) > self.max_body,
            error=None,
            ip=addr.ip,
            port=addr.port,
            started_at=started_at,
            elapsed=time.monotonic() - t0,
            request_head=request_head,
            response_head=response_head + sep,
            http_version=status_line[0].removeprefix("HTTP/"),
        )

    def _failed(
        self,
        url: str,
        error: str,
        started_at: float,
        t0: float,
        request_head: bytes,
        ip: str | None,
        port: int | None,
    ) -> FetchResult:
        self.completed += 1
        self.errors[error] = self.errors.get(error, 0) + 1
        return FetchResult(
            url=url,
            status=None,
            headers=(),
            body=b"",
            raw_body_len=0,
            truncated=False,
            error=error,
            ip=ip,
            port=port,
            started_at=started_at,
            elapsed=time.monotonic() - t0,
            request_head=request_head,
            response_head=b"",
            http_version="",
        )

    def statistics(self) -> FetchStats:
        return FetchStats(
            started=len(self.urls),
            completed=self.completed,
            in_flight=len(self.urls) - self.completed,
            responses=self.completed - sum(self.errors.values()),
            errors=dict(self.errors),
        )

    async def aclose(self) -> None:
        await self.resolver.aclose()


#: every StreamsFetcher built, for the test to look at (a crawl builds one per worker)
fetchers: list[StreamsFetcher] = []


def register() -> None:
    register_fetcher(NAME, StreamsFetcher, summary="HTTP/1.0 over asyncio streams (a test's)")
