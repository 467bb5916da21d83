"""`gossamer dashboard`: the ASGI app and its server (docs/dashboard.md).

Starlette and uvicorn: a small ASGI toolkit with routing, streaming responses for server-sent
events and a test client is all the page needs. One `StatusHub` per app reads the source (off
the event loop, only while an event stream is open) and wakes every `/events` stream when the
status changed: the page never polls, and one read serves every open page.

Security: without a token (loopback only) every request must name a loopback Host; with one
(`--token`, required off loopback) every request carries it. The four state-changing requests
(POST /api/stop, /api/start, /api/resume and /api/scale) also need an Origin equal to their
Host and the page's per-server CSRF token in a header (docs/dashboard.md, "Security")."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..exitcodes import Exit
from ._control import ControlError, resume_crawl, scale_crawl, start_crawl
from ._history import History
from ._hub import PollingHub
from ._logtail import LAST_MAX, LEVELS, LogHub, skipped_record
from ._metrics import metrics_registry
from ._setup import FIELDS, form_defaults
from ._sources import ClusterSource, EmbeddedSource, SourceError, StatusSource

_log = logging.getLogger(__name__)

__all__ = [
    "HEARTBEAT_S",
    "PUSH_INTERVAL_S",
    "StatusHub",
    "dashboard_main",
    "make_app",
    "required_token",
]

#: the least time between two status events (and how often the source is read while a page
#: is open): events arrive within this plus one source read of a change
PUSH_INTERVAL_S = 0.5
#: the longest time without an event: a heartbeat comment keeps proxies and the page sure
#: the stream is alive
HEARTBEAT_S = 5.0
#: snapshot keys that change every read and alone are no change worth an event
_VOLATILE = frozenset({"time", "elapsed_s", "beat_age_s"})

TOKEN_COOKIE = "gossamer_dashboard_token"
TOKEN_HEADER = "x-gossamer-token"
CSRF_HEADER = "x-gossamer-csrf"


def _steady(value: Any) -> Any:
    """`value` without the keys that change at every read."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


class StatusHub(PollingHub):
    """The last status read and its version; `run` (owned by the app's lifespan) reads the
    source while streams are open and wakes them on a change."""

    def __init__(self, source: StatusSource, interval: float = PUSH_INTERVAL_S) -> None:
        super().__init__(interval)
        self.source = source
        self.version = 0
        self.data: dict[str, Any] | None = None
        self._steady: Any = None
        self.history = History()  # the charts' samples (GET /api/history)

    async def read(self) -> dict[str, Any]:
        """Read the source now (off the loop); wake the streams if it changed."""
        data = await asyncio.to_thread(self.source.snapshot)
        self.history.add(data)
        steady = _steady(data)
        async with self._changed:
            self.data = data
            if steady != self._steady:
                self._steady = steady
                self.version += 1
                self._changed.notify_all()
        return data

    async def poll(self) -> dict[str, Any]:
        return await self.read()

    async def wait_change(self, seen: int, within: float) -> bool:
        """Wait until the version is past `seen` (True) or `within` seconds passed (False)."""
        return await self.wait_until(lambda: self.version > seen, within)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """The name of a Host header: without its port, an IPv6 address without brackets."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if ":" in host else host


def make_app(source: StatusSource, *, token: str | None = None) -> Starlette:
    """The dashboard app over `source`. `token`: required on every request (None: none,
    and then only loopback Host names are answered)."""
    hub = StatusHub(source)
    csrf = secrets.token_urlsafe(24)
    registry = metrics_registry(source.snapshot)
    page = resources.files(__package__).joinpath("static/index.html").read_text("utf-8")
    # the Setup form's first values, from the settings model (and the dashboard's GOSSAMER_*
    # environment, which a started crawl inherits), and its labels: the page's own JSON
    setup = json.dumps({**form_defaults(), "labels": FIELDS}).replace("<", "\\u003c")
    script = resources.files(__package__).joinpath("static/dashboard.js").read_bytes()

    def refused(request: Request) -> Response | None:
        host = _host_name(request.headers.get("host") or "")
        if token is None:
            if not _is_loopback(host):
                return JSONResponse({"error": "unknown Host"}, status_code=403)
            return None
        given = (
            request.headers.get(TOKEN_HEADER)
            or request.cookies.get(TOKEN_COOKIE)
            or request.query_params.get("token")
            or ""
        )
        if not hmac.compare_digest(given.encode(), token.encode()):
            return JSONResponse({"error": "a valid token is required"}, status_code=401)
        return None

    async def index(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        response = HTMLResponse(page.replace("{{csrf}}", csrf).replace("{{setup}}", setup))
        response.headers["Cache-Control"] = "no-store"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"
        )
        response.headers["X-Frame-Options"] = "DENY"
        if token is not None and request.query_params.get("token"):
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return response

    async def js(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        return Response(script, media_type="text/javascript")

    async def status(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        try:
            data = await hub.read()
        except Exception as exc:
            return JSONResponse({"error": f"cannot read the crawl: {exc}"}, status_code=503)
        return JSONResponse(data)

    async def events(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no

        async def stream() -> AsyncIterator[str]:
            with hub.stream_open():
                seen = -1
                if hub.data is None:
                    with contextlib.suppress(Exception):
                        await hub.read()
                while True:
                    if hub.version > seen and hub.data is not None:
                        seen = hub.version
                        yield f"event: status\ndata: {json.dumps(hub.data)}\n\n"
                    elif not await hub.wait_change(seen, HEARTBEAT_S):
                        yield ": heartbeat\n\n"

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def metrics(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        body = await asyncio.to_thread(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    def post_refused(request: Request) -> Response | None:
        """Why a state-changing POST is refused (None: it is not): the token or loopback
        check, then an Origin equal to the Host and the page's CSRF token in a header."""
        if (no := refused(request)) is not None:
            return no
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        if origin is None or host is None or origin not in (f"http://{host}", f"https://{host}"):
            return JSONResponse({"error": "cross-site request refused"}, status_code=403)
        given = request.headers.get(CSRF_HEADER) or ""
        if not hmac.compare_digest(given.encode(), csrf.encode()):
            return JSONResponse({"error": "missing or wrong CSRF token"}, status_code=403)
        return None

    async def stop(request: Request) -> Response:
        if (no := post_refused(request)) is not None:
            return no
        try:
            done = await asyncio.to_thread(source.stop)
        except SourceError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        _log.info(f"dashboard: stop: {done}")
        return JSONResponse({"ok": True, "message": done})

    # --- the log tail and the history (docs/dashboard.md, "Log tail", "History")
    log_hub = LogHub(source, PUSH_INTERVAL_S)

    def log_query(request: Request) -> tuple[str, str | None, int | None] | Response:
        """(level, worker, n) of a log request, or its 400 answer."""
        q = request.query_params
        level = q.get("level") or "debug"
        if level not in LEVELS:
            return JSONResponse(
                {"error": f"level: {level!r} is not one of {', '.join(LEVELS)}"}, status_code=400
            )
        n: int | None = None
        if "n" in q:
            try:
                n = int(q["n"])
            except ValueError:
                n = 0
            if not 1 <= n <= LAST_MAX:
                return JSONResponse(
                    {"error": f"n: {q['n']!r} is not a whole number from 1 to {LAST_MAX}"},
                    status_code=400,
                )
        return level, q.get("worker") or None, n

    async def log_last(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        query = log_query(request)
        if isinstance(query, Response):
            return query
        level, worker, n = query
        try:
            await log_hub.refresh()
        except Exception as exc:
            return JSONResponse({"error": f"cannot read the crawl's log: {exc}"}, status_code=503)
        return JSONResponse({"records": log_hub.ring.last(n or 200, level, worker)})

    async def log_events(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        query = log_query(request)
        if isinstance(query, Response):
            return query
        level, worker, n = query

        async def stream() -> AsyncIterator[str]:
            with log_hub.stream_open():
                with contextlib.suppress(Exception):
                    await log_hub.refresh()
                cursor = log_hub.ring.cursor
                # the first event, always: the last n records (n=, default none: []); a
                # client that has it knows the stream is open and every later record is in
                # its later events
                first = log_hub.ring.last(n or 0, level, worker)
                yield f"event: log\ndata: {json.dumps(first)}\n\n"
                while True:
                    if not await log_hub.wait_new(cursor, HEARTBEAT_S):
                        yield ": heartbeat\n\n"
                        continue
                    records, skipped, cursor = log_hub.ring.since(cursor, level, worker)
                    if skipped:
                        records.insert(0, skipped_record(skipped, time.time()))
                    if records:
                        yield f"event: log\ndata: {json.dumps(records)}\n\n"
                        await asyncio.sleep(PUSH_INTERVAL_S)  # a batch at most this often

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def history(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        # a crawl that does not run has its whole history in its files (a source may tell
        # it: EmbeddedSource.crawl_history); else what the hub saw
        whole = getattr(source, "crawl_history", None)
        if whole is not None:
            try:
                data = await asyncio.to_thread(whole)
            except Exception as exc:
                return JSONResponse(
                    {"error": f"cannot read the crawl's history: {exc}"}, status_code=503
                )
            if data is not None:
                return JSONResponse(data)
        return JSONResponse(hub.history.as_json())

    # Setup and control: start, resume, scale (_control.py; docs/dashboard.md)
    async def control_post(
        request: Request, action: Callable[[StatusSource, dict[str, Any]], str]
    ) -> Response:
        if (no := post_refused(request)) is not None:
            return no
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
        try:
            done = await asyncio.to_thread(action, source, body)
        except ControlError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        _log.info(f"dashboard: {request.url.path}: {done}")
        with contextlib.suppress(Exception):
            await hub.read()  # the open pages see the change now
        return JSONResponse({"ok": True, "message": done})

    async def start(request: Request) -> Response:
        return await control_post(request, start_crawl)

    async def resume(request: Request) -> Response:
        return await control_post(request, resume_crawl)

    async def scale(request: Request) -> Response:
        return await control_post(request, scale_crawl)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with asyncio.TaskGroup() as tg:
            poller = tg.create_task(hub.run())
            log_poller = tg.create_task(log_hub.run())
            try:
                yield
            finally:
                poller.cancel()
                log_poller.cancel()

    # the page's other static files: its CSS and the vendored chart library (static/vendor/)
    static_files = {
        "/dashboard.css": "text/css",
        "/vendor/uPlot.iife.min.js": "text/javascript",
        "/vendor/uPlot.min.css": "text/css",
    }
    static_bodies = {
        path: resources.files(__package__).joinpath("static" + path).read_bytes()
        for path in static_files
    }

    async def static(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        path = request.url.path
        return Response(static_bodies[path], media_type=static_files[path])

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/dashboard.js", js),
            Route("/api/status", status),
            Route("/events", events),
            Route("/metrics", metrics),
            Route("/api/log", log_last),
            Route("/events/log", log_events),
            Route("/api/history", history),
            Route("/api/stop", stop, methods=["POST"]),
            Route("/api/start", start, methods=["POST"]),
            Route("/api/resume", resume, methods=["POST"]),
            Route("/api/scale", scale, methods=["POST"]),
            *(Route(path, static) for path in static_files),
        ],
        lifespan=lifespan,
    )
    app.state.hub = hub
    app.state.log_hub = log_hub
    app.state.csrf = csrf
    return app


def required_token(host: str, token: str | None) -> tuple[str | None, bool]:
    """The token every request must carry when listening on `host` (None: none needed) and
    whether it was generated: `token` as given; on an address other than loopback, a new
    random one when none was given."""
    if token is None and not _is_loopback(host):
        return secrets.token_urlsafe(24), True
    return token, False


def open_source(directory: Path | None, redis: str | None, crawl: str | None) -> StatusSource:
    """The source the command line names (SourceError: none, both, or one that fails)."""
    if (directory is None) == (redis is None):
        raise SourceError("give a crawl directory DIR or --redis URL (one of them)")
    if redis is not None:
        return ClusterSource(redis, crawl)
    assert directory is not None
    if crawl is not None:
        raise SourceError("--crawl ID is for a cluster crawl (--redis URL)")
    return EmbeddedSource(directory)


def dashboard_main(
    directory: Path | None,
    *,
    redis: str | None,
    crawl: str | None,
    host: str,
    port: int,
    token: str | None,
) -> int:
    """Serve the dashboard until SIGINT/SIGTERM. A token is generated and printed when the
    address is not loopback and none was given."""
    import uvicorn

    if token is not None and not token:
        _log.error("--token must not be empty")
        return Exit.USAGE
    token, generated = required_token(host, token)
    if generated:
        print(f"dashboard token: {token}", file=sys.stderr, flush=True)
    try:
        source = open_source(directory, redis, crawl)
    except SourceError as exc:
        _log.error(f"{exc}")
        return getattr(exc.__cause__, "exit", Exit.USAGE)
    try:
        app = make_app(source, token=token)
        shown = f"[{host}]" if ":" in host else host
        query = f"/?token={token}" if token else "/"
        try:  # bound here, not by uvicorn: a busy port is one error line and exit USAGE
            sock = socket.create_server(
                (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET
            )
        except OSError as exc:
            _log.error(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
            return Exit.USAGE
        port = sock.getsockname()[1]
        print(f"dashboard: http://{shown}:{port}{query}", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
        with sock:
            uvicorn.Server(config).run(sockets=[sock])
        return Exit.OK
    finally:
        source.close()
