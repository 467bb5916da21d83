"""Start a simulated web from Python: in a background thread or as a subprocess.

Both context managers always stop the server on exit (exceptions included) and leave a
complete audit log behind:

    with serve_in_thread(WebSpec(hosts=50), log_path=tmp / "web.log") as web:
        web.write_resolve_file(tmp / "resolve.txt")   # curl --connect-to lines
        urllib... / pycurl ... fetch web.url(0, 0) through web.connect_to_lines()

Page URLs never carry the port (`http://www.h1.example/…`): a crawler maps `host:80` to the
host's intended `IP:port` (the resolve file), exactly like curl's `--connect-to`.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ._auditlog import FLUSH_INTERVAL_S
from ._model import WebModel, model_for
from ._server import WebServer, new_event_loop
from ._spec import WebSpec

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

T = TypeVar("T")


class _Control(Protocol):
    """How a RunningWeb reaches its server."""

    def set_epoch(self, epoch: int) -> None: ...
    def flush_log(self) -> None: ...
    def status(self) -> dict[str, Any]: ...
    def stop(self) -> None: ...


class RunningWeb:
    """A simulated web being served on loopback: where it is and how to reach its hosts."""

    def __init__(
        self,
        spec: WebSpec,
        port: int,
        log_path: Path | None,
        control: _Control,
        bind_ip: str = "127.0.0.1",
        pid: int | None = None,
    ) -> None:
        self.spec = spec
        self.port = port
        self.log_path = log_path
        self.bind_ip = bind_ip
        self.pid = pid if pid is not None else os.getpid()
        self._control = control
        self._model: WebModel | None = None

    @property
    def model(self) -> WebModel:
        if self._model is None:
            self._model = model_for(self.spec)
        return self._model

    @property
    def control_url(self) -> str:
        """The index and `/_testweb/*` control endpoints."""
        return f"http://{self.bind_ip}:{self.port}/"

    def url(self, h: int, i: int) -> str:
        """Canonical URL of page i of host h (no port: map it with the resolve file)."""
        return self.model.page_url(h, i)

    def address_of(self, host_name: str) -> tuple[str, int]:
        """(IP, port) where `host_name` is served; raises KeyError for unknown names."""
        host = self.model.host_by_name(host_name)
        if host is None:
            raise KeyError(host_name)
        return host.ip, self.port

    def connect_to_lines(self) -> list[str]:
        """`HOST:80:IP:PORT` per host: curl `--connect-to` syntax, also pycurl CONNECT_TO."""
        return [f"{h.name}:80:{h.ip}:{self.port}" for h in self.model.hosts]

    def write_resolve_file(self, path: str | Path) -> Path:
        return _write_lines(path, self.connect_to_lines())

    def hosts_file_lines(self) -> list[str]:
        """`/etc/hosts` syntax: one line per IP with every name served there."""
        by_ip: dict[str, list[str]] = {}
        for h in self.model.hosts:
            by_ip.setdefault(h.ip, []).append(h.name)
        return [f"{ip} {' '.join(names)}" for ip, names in by_ip.items()]

    def write_hosts_file(self, path: str | Path) -> Path:
        return _write_lines(path, self.hosts_file_lines())

    def set_epoch(self, epoch: int) -> None:
        """Fix the content epoch (pages flagged `changing` change with it)."""
        self._control.set_epoch(epoch)

    def flush_log(self) -> None:
        """Write buffered audit lines now (the server does so every 0.5 s and at stop)."""
        self._control.flush_log()

    def status(self) -> dict[str, Any]:
        return self._control.status()

    def stop(self) -> None:
        """Stop serving, flush and close the log. Idempotent."""
        self._control.stop()


def _write_lines(path: str | Path, lines: Sequence[str]) -> Path:
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.replace(p)
    return p


# ---------------------------------------------------------------- in a thread
class _ThreadControl:
    """A WebServer on its own event loop in a daemon thread."""

    def __init__(self, server: WebServer) -> None:
        self.server = server
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="gossamer-testweb", daemon=True)

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise TimeoutError(f"the simulated web did not start within {timeout} s")
        if self._error is not None:
            self._thread.join(timeout)
            raise self._error

    def _main(self) -> None:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await self.server.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.server.stop()

    def _call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        loop = self._loop
        if loop is None or not self._thread.is_alive():
            raise RuntimeError("the simulated web is not running")

        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout)

    def set_epoch(self, epoch: int) -> None:
        self._call(lambda: self.server.set_epoch(epoch))

    def flush_log(self) -> None:
        self._call(self.server.flush_log)

    def status(self) -> dict[str, Any]:
        return self._call(self.server.status)

    def stop(self, timeout: float = STOP_TIMEOUT_S * 3) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop.set)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError("the simulated web did not stop in time")


def start_in_thread(
    spec: WebSpec,
    *,
    log_path: str | Path | None = None,
    port: int = 0,
    epoch: int = 0,
    change_period: float = 0.0,
    bind_ip: str = "127.0.0.1",
) -> RunningWeb:
    """Serve `spec` from a background thread; the caller must call `.stop()`.
    Prefer the `serve_in_thread` context manager."""
    server = WebServer(
        spec,
        port=port,
        bind_ip=bind_ip,
        log_path=log_path,
        epoch=epoch,
        change_period=change_period,
    )
    control = _ThreadControl(server)
    control.start()
    web = RunningWeb(spec, server.port, server.log_path, control, bind_ip)
    web._model = server.model
    return web


@contextlib.contextmanager
def serve_in_thread(
    spec: WebSpec,
    *,
    log_path: str | Path | None = None,
    port: int = 0,
    epoch: int = 0,
    change_period: float = 0.0,
    bind_ip: str = "127.0.0.1",
) -> Iterator[RunningWeb]:
    """Serve `spec` on loopback from a background thread for the `with` block."""
    web = start_in_thread(
        spec,
        log_path=log_path,
        port=port,
        epoch=epoch,
        change_period=change_period,
        bind_ip=bind_ip,
    )
    try:
        yield web
    finally:
        web.stop()


# ---------------------------------------------------------------- in a subprocess
class _ProcessControl:
    """`python -m gossamer testweb serve` in a child process, reached over HTTP."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        port: int,
        bind_ip: str,
        workdir: Path,
        processes: int = 1,
    ) -> None:
        self.proc = proc
        self.port = port
        self.bind_ip = bind_ip
        self.workdir = workdir
        self.processes = processes

    def _get(self, path: str) -> dict[str, Any]:
        conn = http.client.HTTPConnection(self.bind_ip, self.port, timeout=10)
        try:
            conn.request("GET", path, headers={"Host": "localhost"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise RuntimeError(f"control request {path} answered {resp.status}")
        result: dict[str, Any] = json.loads(body)
        return result

    def set_epoch(self, epoch: int) -> None:
        self._get(f"/_testweb/epoch?set={int(epoch)}")

    def flush_log(self) -> None:
        self._get("/_testweb/flush")
        if self.processes > 1:
            # the endpoint flushed one process; every process flushes on its own timer
            time.sleep(FLUSH_INTERVAL_S * 1.5)

    def status(self) -> dict[str, Any]:
        return self._get("/_testweb/status")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        try:
            _terminate(self.proc, timeout)
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def _output_tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


@contextlib.contextmanager
def serve_subprocess(
    spec: WebSpec,
    *,
    log_path: str | Path | None = None,
    port: int = 0,
    epoch: int = 0,
    change_period: float = 0.0,
    processes: int = 1,
    bind_ip: str = "127.0.0.1",
    ready_timeout: float = READY_TIMEOUT_S,
    stop_timeout: float = STOP_TIMEOUT_S,
    extra_args: Sequence[str] = (),
) -> Iterator[RunningWeb]:
    """Serve `spec` from `python -m gossamer testweb serve` for the `with` block.

    Waits (at most `ready_timeout` s) for the child's ready file; on exit sends SIGTERM and
    SIGKILL after `stop_timeout` s. With `processes` > 1 the log is split into
    `<log_path>.<k>` files, one per server process."""
    workdir = Path(tempfile.mkdtemp(prefix="gossamer-testweb-"))
    spec_file = workdir / "spec.json"
    spec_file.write_text(spec.to_json())
    ready_file = workdir / "ready.json"
    output = workdir / "output.txt"
    cmd = [
        sys.executable,
        "-m",
        "gossamer",
        "testweb",
        "serve",
        "--web",
        str(spec_file),
        "--port",
        str(port),
        "--bind-ip",
        bind_ip,
        "--ready-file",
        str(ready_file),
        "--epoch",
        str(epoch),
        "--change-period",
        str(change_period),
        "--processes",
        str(processes),
    ]
    if log_path is not None:
        cmd += ["--log", str(log_path)]
    cmd += list(extra_args)
    with output.open("wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        info = _wait_ready(proc, ready_file, output, ready_timeout)
    except BaseException:
        _terminate(proc, stop_timeout)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    control = _ProcessControl(proc, int(info["port"]), bind_ip, workdir, processes)
    web = RunningWeb(
        spec,
        int(info["port"]),
        Path(log_path) if log_path is not None else None,
        control,
        bind_ip,
        pid=proc.pid,
    )
    try:
        yield web
    finally:
        control.stop(stop_timeout)


def _wait_ready(
    proc: subprocess.Popen[bytes], ready_file: Path, output: Path, timeout: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready_file.exists():
            info: dict[str, Any] = json.loads(ready_file.read_text())
            return info
        if proc.poll() is not None:
            raise RuntimeError(
                f"testweb serve exited with {proc.returncode} before it was ready:\n"
                + _output_tail(output)
            )
        time.sleep(0.02)
    raise TimeoutError(f"testweb serve was not ready within {timeout} s:\n" + _output_tail(output))
