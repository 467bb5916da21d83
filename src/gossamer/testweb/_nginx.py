"""Run nginx on an export (see `_export.py`) for tests and benchmarks, and always stop it.

    with run_nginx(out_dir) as ng:
        ...  # http://127.0.0.1:{ng.port}/ with a Host header of the web

nginx runs in the foreground (`daemon off`) in its own process group, so stopping it reaches
its workers too: SIGQUIT (graceful: the access log is flushed), then SIGKILL after a bound.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ._export import nginx_command


class NginxError(RuntimeError):
    """nginx is missing, refused its config, or did not start in time."""


@dataclass(frozen=True, slots=True)
class NginxProcess:
    """A running nginx serving an export."""

    pid: int
    port: int
    out_dir: Path
    access_log: Path | None
    ips: tuple[str, ...]


def find_nginx() -> str:
    """The nginx binary (PATH, then /usr/sbin/nginx); raises NginxError when there is none."""
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx", "/usr/local/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise NginxError("nginx not found: install it (scripts/setup.sh installs nginx-light)")


def check_config(out_dir: Path | str, *, timeout: float = 30.0) -> str:
    """`nginx -t` on an export's config; returns nginx's report (warnings included), raises
    NginxError if refused."""
    cmd = [*nginx_command(Path(out_dir), find_nginx())[:-2], "-t"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise NginxError(f"nginx -t refused {out_dir}/nginx.conf: {proc.stderr.strip()}")
    return proc.stderr


@contextmanager
def run_nginx(
    out_dir: Path | str, *, start_timeout: float = 15.0, stop_timeout: float = 10.0
) -> Iterator[NginxProcess]:
    """Start nginx on the export in `out_dir`, wait until it answers, stop it on exit."""
    out = Path(out_dir).resolve()
    try:
        manifest = json.loads((out / "export.json").read_text())
    except (OSError, ValueError) as exc:
        raise NginxError(f"{out} is not an export (no readable export.json): {exc}") from exc
    port = int(manifest["port"])
    log = manifest.get("access_log")
    pid_file = out / "nginx.pid"
    pid_file.unlink(missing_ok=True)
    stderr_path = out / "logs" / "nginx.stderr"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            list(nginx_command(out, find_nginx())),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,  # its own process group: stopping it reaches the workers
        )
    try:
        _wait_until_serving(proc, pid_file, port, start_timeout, stderr_path)
        yield NginxProcess(
            proc.pid, port, out, Path(log) if log else None, tuple(manifest.get("ips", ()))
        )
    finally:
        _stop(proc, stop_timeout)


def _wait_until_serving(
    proc: subprocess.Popen[bytes], pid_file: Path, port: int, timeout: float, stderr: Path
) -> None:
    """Until nginx wrote its pid file (its sockets are bound then) and 127.0.0.1 accepts."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise NginxError(f"nginx exited with {proc.returncode}: {_tail(stderr)}")
        if _pid_in(pid_file) == proc.pid and _accepts(port):
            return
        if time.monotonic() > deadline:
            raise NginxError(f"nginx did not answer on port {port} within {timeout:g}s")
        time.sleep(0.02)


def _pid_in(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-n:].strip() or "(no output)"
    except OSError:
        return "(no output)"


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGQUIT (graceful) to nginx's process group, SIGKILL to it after `timeout`."""
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGQUIT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)  # workers left behind by a dead master, if any
    if proc.poll() is None:
        proc.wait(timeout)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
