"""Run real Redis servers for tests, benchmarks and demos, and always stop them.

    with RedisServer(tmp_dir) as srv:          # started: 127.0.0.1, a free port, AOF on
        r = srv.client()                       # a redis.Redis
        srv.kill()                             # a crash (SIGKILL) ...
        srv.restart()                          # ... then the same port and dir: the AOF comes back
    with RedisClusterServers(tmp_dir, masters=3) as cluster:
        rc = cluster.client()                  # a redis.cluster.RedisCluster

Each server is `redis-server` in the foreground, in its own session, with its files in its
directory, and dies with the thread that started it (Linux `PR_SET_PDEATHSIG`): start servers
from a thread that outlives them. A free port taken by another process first is retried.
Errors: `RedisServerError`, with the server log's tail (docs/testweb.md, "Redis servers for
tests")."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
import redis.cluster

__all__ = [
    "RedisClusterServers",
    "RedisSentinels",
    "RedisServer",
    "RedisServerError",
    "find_redis_cli",
    "find_redis_server",
]

HOST = "127.0.0.1"
_BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin")
_SETUP_HINT = "install it: ./scripts/setup.sh installs the Debian package redis-server"
_PORT_ATTEMPTS = 5


class RedisServerError(RuntimeError):
    """redis-server is missing, did not start or answer in time, or the cluster did not form."""


def _find(name: str) -> str:
    for candidate in (shutil.which(name), *(os.path.join(d, name) for d in _BIN_DIRS)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RedisServerError(f"{name} not found on PATH or in {', '.join(_BIN_DIRS)}: {_SETUP_HINT}")


def find_redis_server() -> str:
    """The redis-server binary (PATH, then /usr/bin, …); raises RedisServerError if missing."""
    return _find("redis-server")


def find_redis_cli() -> str:
    """The redis-cli binary (PATH, then /usr/bin, …); raises RedisServerError if missing."""
    return _find("redis-cli")


# ---------------------------------------------------------------------------- process plumbing


def _prctl() -> Callable[[int, int], int] | None:
    """libc's prctl, resolved in the parent: the child calls it between fork and exec, where
    loading a library (dlopen takes locks another thread may hold) is not safe."""
    try:
        fn: Callable[[int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: servers are still stopped by their owner
        return None
    return fn


_PRCTL = _prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent_fn() -> Callable[[], None] | None:
    """A preexec_fn: SIGKILL the server when the thread that started it dies (Linux)."""
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)

    return die_with_parent


def _free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports free right now (all bound at once, so never the same)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _command(*args: str) -> bytes:
    """A command in RESP (any bytes in its arguments, unlike an inline command)."""
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        raw = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


def _ping(port: int, timeout: float = 0.5, password: str | None = None) -> bytes | None:
    """The first line of the server's answer to PING (b"+PONG", b"-LOADING …"), after AUTH
    with `password` when given, or None when nothing answers. (A server with requirepass
    answers an unauthenticated PING with NOAUTH even while it loads its data.)"""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall((_command("AUTH", password) if password else b"") + _command("PING"))
            data = b""
            while data.count(b"\r\n") < (2 if password else 1):
                chunk = s.recv(256)
                if not chunk:
                    return None
                data += chunk
            lines = data.split(b"\r\n")
            if password and lines[0] != b"+OK":
                return lines[0]
            return lines[1 if password else 0]
    except OSError:
        return None


def _tail(path: Path, n: int = 3000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no output)"
    return text[-n:].strip() or "(no output)"


def _quote(value: str) -> str:
    """A redis.conf string argument (double quotes; backslash and quote escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------- one server


class RedisServer:
    """A running `redis-server` on 127.0.0.1 with its data in `directory` (started at once).

    `port` None picks a free port (kept across `restart`). `aof` turns on the append-only file
    (`appendfsync everysec`); RDB snapshots are off (`save ""`). `maxmemory` is a redis size
    ("256mb"). `password` sets `requirepass` (the default user's password: `url` and
    `client()` carry it). `extra` are more redis.conf lines, applied last (so they override):
    `("appendfsync always",)`, `("user alice on >pw ~* &* +@all",)` for an ACL user; a
    leading "--" is accepted ("--appendfsync always").

    Use as a context manager or call `stop()`. `kill()` simulates a crash; `restart()` starts
    it again on the same port and directory and returns once the data is loaded.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        port: int | None = None,
        aof: bool = True,
        maxmemory: str | None = None,
        password: str | None = None,
        extra: Sequence[str] = (),
        start_timeout: float = 10.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.aof = aof
        self.maxmemory = maxmemory
        self.password = password
        self.extra = tuple(line.removeprefix("--").strip() for line in extra)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._binary = find_redis_server()
        self._port = port
        self._fixed_port = port is not None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._start()

    # -- what it is
    @property
    def port(self) -> int:
        assert self._port is not None  # set by the first successful start
        return self._port

    @property
    def url(self) -> str:
        """redis://127.0.0.1:PORT/0, or redis://:PASSWORD@127.0.0.1:PORT/0 (quoted)"""
        if self.password is None:
            return f"redis://{HOST}:{self.port}/0"
        return f"redis://:{urllib.parse.quote(self.password, safe='')}@{HOST}:{self.port}/0"

    @property
    def url_without_password(self) -> str:
        """redis://127.0.0.1:PORT/0"""
        return f"redis://{HOST}:{self.port}/0"

    @property
    def pid(self) -> int:
        """The pid of the current (or last) redis-server process."""
        assert self._proc is not None
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def config_path(self) -> Path:
        return self.directory / "redis.conf"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    @property
    def output_path(self) -> Path:
        """redis-server's stdout and stderr (errors before the log is open, e.g. a bad config)."""
        return self.directory / "redis.out"

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new `redis.Redis` for db 0, with the password if any (keyword arguments go to
        its constructor)."""
        kwargs.setdefault("password", self.password)
        return redis.Redis(host=HOST, port=self.port, db=0, **kwargs)

    def info_memory(self) -> int:
        """`used_memory` in bytes (INFO memory)."""
        with self.client() as c:
            return int(c.info("memory")["used_memory"])

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<RedisServer {HOST}:{self._port} {state} dir={self.directory}>"

    # -- life cycle
    def restart(self, *, start_timeout: float | None = None) -> None:
        """Start again on the same port and directory (stopping it first if it runs); returns
        when it answers PING, i.e. once the AOF is loaded (allow more than the default 10 s
        with `start_timeout` for a large data set)."""
        with self._lock:
            if self.running:
                self._stop_locked(kill=False)
            self._start_locked(port_retry=False, timeout=start_timeout)

    def stop(self) -> None:
        """SIGTERM (redis flushes the AOF and exits), SIGKILL after `stop_timeout`; waits for
        the process to end. Idempotent."""
        with self._lock:
            self._stop_locked(kill=False)

    def kill(self) -> None:
        """SIGKILL, as a crash; waits for the process to end. Acknowledged writes survive in
        the AOF (Redis writes it before replying; only a machine crash loses the last second
        of `appendfsync everysec`)."""
        with self._lock:
            self._stop_locked(kill=True)

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals
    def _common_lines(self, port: int) -> list[str]:
        """The lines a server and a sentinel share: where it listens, its files."""
        return [
            f"port {port}",
            f"bind {HOST}",
            "daemonize no",
            "protected-mode no",
            f"dir {_quote(str(self.directory))}",
            f"logfile {_quote(str(self.log_path))}",
        ]

    def _config_lines(self, port: int) -> list[str]:
        lines = [
            *self._common_lines(port),
            'save ""',
            f"appendonly {'yes' if self.aof else 'no'}",
            "appendfsync everysec",
        ]
        if self.maxmemory is not None:
            lines.append(f"maxmemory {self.maxmemory}")
        if self.password is not None:
            lines.append(f"requirepass {_quote(self.password)}")
        return lines + list(self.extra)

    def _start(self) -> None:
        with self._lock:
            self._start_locked(port_retry=not self._fixed_port)

    def _start_locked(self, *, port_retry: bool, timeout: float | None = None) -> None:
        attempts = _PORT_ATTEMPTS if port_retry else 1
        for attempt in range(attempts):
            if self._port is None or (port_retry and attempt > 0):
                self._port = self._pick_ports()
            try:
                self._spawn_and_wait(self.start_timeout if timeout is None else timeout)
                return
            except _PortTaken:
                self._proc = None
                if attempt == attempts - 1:
                    raise RedisServerError(
                        f"redis-server could not bind {HOST}:{self._port} "
                        f"({attempts} attempt(s)): {_tail(self.log_path)}"
                    ) from None

    def _pick_ports(self) -> int:
        return _free_ports(1)[0]

    def _argv(self) -> list[str]:
        """The command that starts the server on its config file."""
        return [self._binary, str(self.config_path)]

    def _spawn_and_wait(self, timeout: float) -> None:
        port = self.port
        self.config_path.write_text("\n".join(self._config_lines(port)) + "\n")
        log_size = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.output_path.open("ab") as out:
            proc = subprocess.Popen(
                self._argv(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
                preexec_fn=_die_with_parent_fn(),
            )
        self._proc = proc
        try:
            self._wait_until_ready(proc, port, log_size, timeout)
        except BaseException:  # a start that failed (or was interrupted) leaves no server
            self._stop_locked(kill=True)
            raise

    def _wait_until_ready(
        self, proc: subprocess.Popen[bytes], port: int, log_size: int, timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        answer: bytes | None = None
        while True:
            if proc.poll() is not None:
                log = self._new_log(log_size)
                if "Address already in use" in log or "Could not create server TCP" in log:
                    raise _PortTaken()
                raise RedisServerError(
                    f"redis-server exited with status {proc.returncode} "
                    f"(config {self.config_path}):\n{log}\n{_tail(self.output_path, 1000)}"
                )
            answer = _ping(port, password=self.password)
            if answer == b"+PONG":
                return
            if time.monotonic() > deadline:
                raise RedisServerError(
                    f"redis-server on {HOST}:{port} did not answer PING within "
                    f"{timeout:g}s (last answer {answer!r}):\n{self._new_log(log_size)}"
                )
            time.sleep(0.01 if answer is None else 0.05)

    def _new_log(self, offset: int) -> str:
        """What the server logged since `offset` (its tail)."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                text = f.read().decode(errors="replace")
        except OSError:
            text = ""
        return text[-3000:].strip() or _tail(self.output_path)

    def _stop_locked(self, *, kill: bool) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if not kill:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
                return
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(self.stop_timeout)


class _PortTaken(Exception):
    """redis-server could not bind its port (another process took it first)."""


_CLUSTER_CONFIG = (
    "cluster-enabled yes",
    "cluster-config-file nodes.conf",  # in the node's directory
    "cluster-node-timeout 2000",
)


class _ClusterNode(RedisServer):
    """A server with `cluster-enabled yes`; its cluster bus on its own free port."""

    def __init__(self, directory: Path, *, aof: bool) -> None:
        self._bus_port: int | None = None
        super().__init__(directory, aof=aof, extra=_CLUSTER_CONFIG)

    def _pick_ports(self) -> int:
        port, self._bus_port = _free_ports(2)
        return port

    def _config_lines(self, port: int) -> list[str]:
        assert self._bus_port is not None
        return [*super()._config_lines(port), f"cluster-port {self._bus_port}"]


# ---------------------------------------------------------------------------- a cluster


class RedisClusterServers:
    """`masters` redis-server processes (no replicas) formed into one Redis Cluster.

    Each node lives in `directory/node-<i>` on its own free port (its bus on another), with
    `cluster-node-timeout 2000`. The cluster is formed with `redis-cli --cluster create` and
    is ready (`cluster_state:ok` on every node) when the constructor returns. `nodes` are the
    `RedisServer`s (kill/restart one to test failures). Stopping stops every node.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        masters: int = 3,
        *,
        aof: bool = True,
        form_timeout: float = 30.0,
    ) -> None:
        if masters < 3:
            raise ValueError(f"a Redis Cluster needs at least 3 masters, not {masters}")
        self.directory = Path(directory).resolve()
        self.form_timeout = form_timeout
        cli = find_redis_cli()
        nodes: list[RedisServer] = []
        try:
            # one at a time: the nodes started before a failure are in `nodes`, to stop
            nodes.extend(
                _ClusterNode(self.directory / f"node-{i}", aof=aof) for i in range(masters)
            )
            self.nodes: tuple[RedisServer, ...] = tuple(nodes)
            self._create(cli)
            self.wait_until_ok()
        except BaseException:
            for node in nodes:
                node.stop()
            raise

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(n.port for n in self.nodes)

    @property
    def url(self) -> str:
        """redis://127.0.0.1:PORT/0 of the first node (a cluster client finds the others)."""
        return self.nodes[0].url

    def client(self, **kwargs: Any) -> redis.cluster.RedisCluster:
        """A new `redis.cluster.RedisCluster` (keyword arguments go to its constructor)."""
        return redis.cluster.RedisCluster(host=HOST, port=self.nodes[0].port, **kwargs)

    def _create(self, cli: str) -> None:
        cmd = [
            cli,
            "--cluster",
            "create",
            *(f"{HOST}:{p}" for p in self.ports),
            "--cluster-replicas",
            "0",
            "--cluster-yes",
        ]
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.form_timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RedisServerError(
                f"redis-cli --cluster create took more than {self.form_timeout:g}s"
            ) from exc
        if proc.returncode != 0:
            raise RedisServerError(
                f"redis-cli --cluster create failed ({proc.returncode}):\n"
                f"{(proc.stdout + proc.stderr)[-3000:].strip()}"
            )

    def wait_until_ok(self, timeout: float | None = None) -> None:
        """Until CLUSTER INFO says `cluster_state:ok` on every node (bounded)."""
        limit = self.form_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        pending = list(self.nodes)
        last: object = None
        while pending:
            node = pending[0]
            try:
                with node.client(socket_timeout=2.0) as c:
                    info = c.cluster("INFO")  # parsed into a dict by redis-py
                last = info
                ok = isinstance(info, dict) and info.get("cluster_state") == "ok"
            except redis.RedisError as exc:
                last, ok = exc, False
            if ok:
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise RedisServerError(
                    f"the cluster is not ok on {HOST}:{node.port} after {limit:g}s: {last!r}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after a bound). Idempotent."""
        errors: list[BaseException] = []
        for node in self.nodes:
            try:
                node.stop()
            except Exception as exc:  # stop the others anyway
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> RedisClusterServers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# ---------------------------------------------------------------------------- Redis Sentinel


class _SentinelNode(RedisServer):
    """A `redis-server --sentinel` watching one master (quorum 2 of 3); its config file is
    its own (Sentinel rewrites it as it learns the replicas and the other sentinels)."""

    def __init__(
        self, directory: Path, *, service: str, master_port: int, down_after_ms: int
    ) -> None:
        self.service = service
        self.master_port = master_port
        self.down_after_ms = down_after_ms
        super().__init__(directory, aof=False)

    def _config_lines(self, port: int) -> list[str]:
        name = self.service
        return [
            *self._common_lines(port),
            f"sentinel monitor {name} {HOST} {self.master_port} 2",
            f"sentinel down-after-milliseconds {name} {self.down_after_ms}",
            f"sentinel failover-timeout {name} {max(3 * self.down_after_ms, 3000)}",
            f"sentinel parallel-syncs {name} 1",
        ]

    def _argv(self) -> list[str]:
        return [*super()._argv(), "--sentinel"]  # redis-server, in sentinel mode


class RedisSentinels:
    """A Redis Sentinel service on loopback: a master and `replicas` replicas (each a
    `RedisServer`, AOF on) watched by `sentinels` sentinels (quorum 2), every one on a free
    port under `directory`. Ready when the constructor returns: every replica in sync and
    every sentinel knowing the replicas and the other sentinels. `url` is the service's
    `redis+sentinel://` URL; `master` the current master's server (`kill()` it to make the
    sentinels promote a replica: `wait_for_failover`). Stopping stops every process.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        service: str = "gossamer",
        replicas: int = 1,
        sentinels: int = 3,
        down_after_ms: int = 1000,
        ready_timeout: float = 30.0,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.service = service
        self.servers: list[RedisServer] = []
        self.sentinels: list[RedisServer] = []
        try:
            self.servers.append(RedisServer(self.directory / "redis-0"))
            master_port = self.servers[0].port
            for i in range(replicas):
                self.servers.append(
                    RedisServer(
                        self.directory / f"redis-{i + 1}",
                        extra=(f"replicaof {HOST} {master_port}",),
                    )
                )
            for i in range(sentinels):
                self.sentinels.append(
                    _SentinelNode(
                        self.directory / f"sentinel-{i}",
                        service=service,
                        master_port=master_port,
                        down_after_ms=down_after_ms,
                    )
                )
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,…/SERVICE/0"""
        hosts = ",".join(f"{HOST}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def master_port(self) -> int:
        """The master's port as the first sentinel that answers says it."""
        for s in self.sentinels:
            if not s.running:
                continue
            try:
                with s.client(socket_timeout=2.0) as c:
                    addr = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
                return int(addr[1])
            except redis.RedisError:
                continue
        raise RedisServerError("no sentinel answers")

    @property
    def master(self) -> RedisServer:
        """The server the sentinels call master now."""
        port = self.master_port()
        return next(s for s in self.servers if s.port == port)

    def wait_for_failover(self, old_port: int, timeout: float = 30.0) -> RedisServer:
        """Until the sentinels name another master than `old_port` and it says it is a
        master; that server."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                port = self.master_port()
                if port != old_port:
                    server = next(s for s in self.servers if s.port == port)
                    with server.client(socket_timeout=2.0) as c:
                        if c.info("replication").get("role") == "master":
                            return server
            except (redis.RedisError, RedisServerError):
                pass
            if time.monotonic() > deadline:
                raise RedisServerError(f"no failover from port {old_port} within {timeout:g}s")
            time.sleep(0.05)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        want_replicas = len(self.servers) - 1
        want_peers = len(self.sentinels) - 1
        last: object = None
        while True:
            try:
                ok = True
                for r in self.servers[1:]:
                    with r.client(socket_timeout=2.0) as c:
                        info = c.info("replication")
                    ok &= info.get("master_link_status") == "up"
                for s in self.sentinels:
                    with s.client(socket_timeout=2.0) as c:
                        reps = c.execute_command("SENTINEL", "REPLICAS", self.service)
                        peers = c.execute_command("SENTINEL", "SENTINELS", self.service)
                    ok &= len(reps) >= want_replicas and len(peers) >= want_peers
                last = ok
                if ok:
                    return
            except redis.RedisError as exc:
                last = exc
            if time.monotonic() > deadline:
                raise RedisServerError(
                    f"the Sentinel service is not ready after {timeout:g}s: {last!r}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop every sentinel and server (SIGTERM, then SIGKILL after a bound). Idempotent."""
        for node in [*self.sentinels, *self.servers]:
            with contextlib.suppress(Exception):
                node.stop()

    def __enter__(self) -> RedisSentinels:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
