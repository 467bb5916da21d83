"""Per-IP politeness on one machine: at most `limit` hosts of one IP address fetched at once.

`LocalIpGate` counts in one process. A `--workers N` pool's workers share the parent's
`IpGateBroker`: each worker's `PoolIpGate` asks it for a slot over a socket pair made before the
fork and is answered when one is free; nobody polls. The broker hands slots out first come
first served and frees a worker's slots when its socket reaches end of file, so a dead worker
(SIGKILL included) never keeps one. `FileIpGate` (lock files under the crawl directory) is only
for a worker run by hand (`gossamer crawl-worker`), which has no broker. Why a broker and not
the lock files: docs/crawler.md, "Using every core"."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import itertools
import os
import selectors
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING


class LocalIpGate:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._locks: dict[str, asyncio.Semaphore] = {}
        self._waiting: dict[str, int] = {}

    def waiting(self, ip: str) -> bool:
        """Whether a host of this process waits for a slot of `ip` (a holder that could
        keep its slot longer should let it go instead)."""
        return self._waiting.get(ip, 0) > 0

    @asynccontextmanager
    async def hold(self, ip: str) -> AsyncIterator[None]:
        sem = self._locks.setdefault(ip, asyncio.Semaphore(self.limit))
        waiting = self._waiting
        waiting[ip] = waiting.get(ip, 0) + 1
        try:
            await sem.acquire()
        finally:
            if waiting[ip] == 1:
                del waiting[ip]
            else:
                waiting[ip] -= 1
        try:
            yield
        finally:
            sem.release()


class FileIpGate:
    """Cross-process gate: slot k of an IP is the lock file `<dir>/<ip>.<k>`.

    A process that finds every slot of an IP taken holds a shared lock on `<dir>/<ip>.want`
    while it polls, so holders in any process see that someone waits (`waiting`)."""

    def __init__(self, directory: Path, limit: int, poll: float = 0.005) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.limit = limit
        self.poll = poll
        self._local = LocalIpGate(limit)  # no busy-polling against our own holders
        self._want_fds: dict[str, int] = {}  # ip -> its want file, while this process holds it
        self._held: dict[str, int] = {}  # ip -> slots this process holds

    def waiting(self, ip: str) -> bool:
        """Whether a host of this or another process waits for a slot of `ip`."""
        if self._local.waiting(ip):
            return True
        fd = self._want_fds.get(ip)
        if fd is None:
            return False
        try:  # an exclusive lock is refused while any waiter holds its shared one
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    @asynccontextmanager
    async def hold(self, ip: str) -> AsyncIterator[None]:
        async with self._local.hold(ip):
            fd = await self._acquire(ip)
            held = self._held
            held[ip] = held.get(ip, 0) + 1
            if ip not in self._want_fds:
                self._want_fds[ip] = self._open_want(ip)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                held[ip] -= 1
                if not held[ip]:  # the last holder of this process closes the want file
                    del held[ip]
                    os.close(self._want_fds.pop(ip))

    def _name(self, ip: str) -> str:
        return ip.replace(":", "_").replace("/", "_")

    def _open_want(self, ip: str) -> int:
        return os.open(self.directory / f"{self._name(ip)}.want", os.O_RDWR | os.O_CREAT, 0o644)

    async def _acquire(self, ip: str) -> int:
        name = self._name(ip)
        want: int | None = None
        try:
            while True:
                for k in range(self.limit):
                    fd = os.open(self.directory / f"{name}.{k}", os.O_RDWR | os.O_CREAT, 0o644)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)
                        continue
                    return fd
                if want is None:  # every slot taken: say so while polling
                    want = self._open_want(ip)
                    fcntl.flock(want, fcntl.LOCK_SH)  # a holder's test lasts microseconds
                await asyncio.sleep(self.poll)
        finally:
            if want is not None:
                os.close(want)  # (drops its lock)



class IpGateBroker:
    """The slots of every IP for a pool's workers, run by the pool's parent on a thread.

    Make it before forking; in forked worker k call `in_worker(k)` (its end of its socket
    pair; closes every other end, so a dead worker's end reaches end of file), in the parent
    `start()` once every worker is forked, `stop()` at the end. A pool that grows while it
    runs (`gossamer workers --scale`) calls `add_worker()` before forking one more worker and
    `forked(k)` after.

    Lines on a socket (ASCII, one per message), worker to broker: `A <id> <ip>` (acquire),
    `R <id>` (release), `C <id>` (cancel: a pending acquire is dropped, a granted one
    released); broker to worker: `G <id>` (granted), `W <ip>` / `U <ip>` (some worker waits
    for the IP / none waits any more: holders hand the IP over, engine.crawler)."""

    def __init__(self, workers: int, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, not {limit}")
        self.limit = limit
        pairs = [socket.socketpair() for _ in range(workers)]
        self._ours = [a for a, _ in pairs]
        self._theirs: list[socket.socket | None] = [b for _, b in pairs]
        self._held: dict[str, int] = {}  # ip -> slots held
        self._queue: dict[str, collections.deque[tuple[int, int]]] = {}  # ip -> (worker, id)
        self._granted: dict[tuple[int, int], str] = {}  # (worker, id) -> ip
        self._pending: dict[tuple[int, int], str] = {}  # (worker, id) -> ip, queued
        self._inbox = [b""] * workers
        self._outbox = [bytearray() for _ in range(workers)]
        self._open = [True] * workers
        self._stop_r, self._stop_w = os.pipe()  # b"!": stop; b"+": a worker added
        self._sel: selectors.BaseSelector | None = None
        self._thread: threading.Thread | None = None
        self._served: set[int] = set()  # the workers the thread serves or served (thread's)

    def worker_socket(self, k: int) -> socket.socket:
        """Worker k's end for a gate in this process (a copy: `start()` closes the original,
        as in the parent of forked workers); call before `start()`."""
        sock = self._theirs[k]
        assert sock is not None, "closed: worker_socket() before start()"
        return sock.dup()

    def in_worker(self, k: int) -> socket.socket:
        """In forked worker k: close the ends that are not its own; its socket."""
        for j, sock in enumerate(self._theirs):
            if j != k and sock is not None:
                sock.close()
        for sock in self._ours:
            sock.close()
        os.close(self._stop_r)
        os.close(self._stop_w)
        sock = self._theirs[k]
        assert sock is not None
        return sock

    def start(self) -> None:
        """In the parent, once every worker is forked: close the workers' ends (a worker's
        death then reads as end of file) and serve on a thread."""
        for k, sock in enumerate(self._theirs):
            if sock is not None:
                sock.close()
                self._theirs[k] = None
        sel = self._sel = selectors.DefaultSelector()
        for k, sock in enumerate(self._ours):
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ, k)
            self._served.add(k)
        sel.register(self._stop_r, selectors.EVENT_READ, -1)
        self._thread = threading.Thread(target=self._serve, name="ip-gate-broker", daemon=True)
        self._thread.start()

    def add_worker(self) -> int:
        """After `start()`, before forking one more worker: its socket pair; its number k
        (the child calls `in_worker(k)`, the parent `forked(k)`). The thread serves it from
        `forked(k)` on; until then it sends it nothing (`_open[k]` is False), and the lists
        only grow, at their ends, so the thread's indexes stay valid."""
        ours, theirs = socket.socketpair()
        self._inbox.append(b"")
        self._outbox.append(bytearray())
        self._open.append(False)
        self._theirs.append(theirs)
        self._ours.append(ours)
        return len(self._ours) - 1

    def forked(self, k: int) -> None:
        """In the parent, worker k (from `add_worker`) forked: close its end here (its death
        then reads as end of file) and have the thread serve it."""
        sock = self._theirs[k]
        if sock is not None:
            sock.close()
            self._theirs[k] = None
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"+")

    def _serve_added(self) -> None:
        """(The thread) serve the workers `forked` since the last call, telling each which
        IPs others wait for now (as every worker was told when the wait began)."""
        sel = self._sel
        assert sel is not None
        for k, sock in enumerate(list(self._ours)):
            if k in self._served or self._theirs[k] is not None:
                continue  # served already, or not forked yet
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ, k)
            self._served.add(k)
            self._open[k] = True
            for ip in self._queue:
                self._send(k, f"W {ip}\n")

    def stop(self) -> None:
        """Stop serving and close everything (idempotent)."""
        if self._thread is not None:
            with contextlib.suppress(OSError):
                os.write(self._stop_w, b"!")
            self._thread.join()
            self._thread = None
        if self._sel is not None:
            self._sel.close()
            self._sel = None
        for sock in [*self._ours, *(s for s in self._theirs if s is not None)]:
            sock.close()
        for fd in (self._stop_r, self._stop_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._stop_r = self._stop_w = -1

    def held(self, ip: str) -> int:
        """Slots of `ip` held now (a snapshot, for tests)."""
        return self._held.get(ip, 0)

    # ------------------------------------------------------------------ the thread
    def _serve(self) -> None:
        sel = self._sel
        assert sel is not None
        try:
            while True:
                for key, events in sel.select():
                    k = key.data
                    if k == -1:
                        if b"!" in os.read(self._stop_r, 64):
                            return
                        self._serve_added()
                        continue
                    if not self._open[k]:  # gone earlier in this round
                        continue
                    if events & selectors.EVENT_WRITE:
                        self._flush(k)
                    if events & selectors.EVENT_READ and self._open[k]:
                        self._read(k)
        except BaseException:
            # a bug here must not leave workers waiting forever: they read end of file
            # and fail (PoolIpGateClosed)
            for sock in self._ours:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            raise

    def _read(self, k: int) -> None:
        try:
            data = self._ours[k].recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the worker exited (or was killed): its slots and waits go
            self._gone(k)
            return
        lines = (self._inbox[k] + data).split(b"\n")
        self._inbox[k] = lines.pop()
        for line in lines:
            self._handle(k, line.decode("ascii").split(" "))

    def _handle(self, k: int, msg: list[str]) -> None:
        op, rid = msg[0], int(msg[1])
        if op == "A":
            self._acquire(k, rid, msg[2])
        elif op == "R" or op == "C":
            ip = self._pending.pop((k, rid), None)
            if ip is not None:  # cancelled while queued
                queue = self._queue[ip]
                queue.remove((k, rid))
                if not queue:
                    del self._queue[ip]
                    self._broadcast(f"U {ip}\n")
            elif (k, rid) in self._granted:
                self._release(self._granted.pop((k, rid)))

    def _acquire(self, k: int, rid: int, ip: str) -> None:
        if self._held.get(ip, 0) < self.limit and ip not in self._queue:
            self._held[ip] = self._held.get(ip, 0) + 1
            self._granted[(k, rid)] = ip
            self._send(k, f"G {rid}\n")
            return
        queue = self._queue.get(ip)
        if queue is None:
            queue = self._queue[ip] = collections.deque()
            self._broadcast(f"W {ip}\n")
        queue.append((k, rid))
        self._pending[(k, rid)] = ip

    def _release(self, ip: str) -> None:
        held = self._held[ip] - 1
        queue = self._queue.get(ip)
        if queue:  # the slot goes straight to the first waiter
            k, rid = queue.popleft()
            del self._pending[(k, rid)]
            self._granted[(k, rid)] = ip
            self._send(k, f"G {rid}\n")
            held += 1
            if not queue:
                del self._queue[ip]
                self._broadcast(f"U {ip}\n")
        if held:
            self._held[ip] = held
        else:
            del self._held[ip]

    def _gone(self, k: int) -> None:
        self._open[k] = False
        self._outbox[k].clear()
        sel = self._sel
        assert sel is not None
        sel.unregister(self._ours[k])
        for key in [key for key in self._pending if key[0] == k]:
            self._handle(k, ["C", str(key[1])])
        for key in [key for key in self._granted if key[0] == k]:
            self._release(self._granted.pop(key))

    def _broadcast(self, line: str) -> None:
        for k, is_open in enumerate(self._open):
            if is_open:
                self._send(k, line)

    def _send(self, k: int, line: str) -> None:
        if not self._open[k]:
            return
        out = self._outbox[k]
        pending = bool(out)
        out += line.encode("ascii")
        if not pending:
            self._flush(k)

    def _flush(self, k: int) -> None:
        out = self._outbox[k]
        sel = self._sel
        assert sel is not None
        try:
            n = self._ours[k].send(out)
        except BlockingIOError:
            n = 0
        except OSError:  # the worker is gone: its end of file comes next
            n = len(out)
        del out[:n]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
        if sel.get_key(self._ours[k]).events != events:
            sel.modify(self._ours[k], events, k)


class PoolIpGateClosed(ConnectionError):
    """The pool's IP gate broker is gone (the parent exited)."""


class PoolIpGate:
    """A pool worker's gate: `LocalIpGate` for the hosts of this process, then a slot from
    the parent's `IpGateBroker` (see there), awaited on the event loop without polling: the
    socket is watched with `add_reader`."""

    def __init__(self, sock: socket.socket, limit: int) -> None:
        self.limit = limit
        self._sock = sock
        self._fd = sock.fileno()
        sock.setblocking(False)
        self._local = LocalIpGate(limit)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[None]] = {}
        self._wanted: set[str] = set()  # IPs some worker waits for (the broker's W/U)
        self._inbox = b""
        self._outbox = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False  # the loop watches the socket for room to write
        self._closed = False

    def waiting(self, ip: str) -> bool:
        """Whether a host of this process, or of any worker of the pool, waits for `ip`."""
        return self._local.waiting(ip) or ip in self._wanted

    @asynccontextmanager
    async def hold(self, ip: str) -> AsyncIterator[None]:
        async with self._local.hold(ip):
            rid = await self._acquire(ip)
            try:
                yield
            finally:
                self._send(f"R {rid}\n")

    def close(self) -> None:
        """Stop watching the socket and close it (the broker then frees what is held)."""
        if self._loop is not None and not self._loop.is_closed() and not self._closed:
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
        self._loop = None
        self._closed = True
        self._sock.close()

    async def _acquire(self, ip: str) -> int:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._watch(loop)
        if self._closed:
            raise PoolIpGateClosed("the pool's IP gate is gone (the parent process exited)")
        rid = next(self._ids)
        granted = loop.create_future()
        self._pending[rid] = granted
        self._send(f"A {rid} {ip}\n")
        try:
            await granted
        except BaseException:
            # cancelled (a stop): a queued request is dropped, a granted one released
            if self._pending.pop(rid, None) is not None or granted.done():
                self._send(f"C {rid}\n")
            raise
        return rid

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        self._loop = loop
        loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            data = self._sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._broker_gone()
            return
        lines = (self._inbox + data).split(b"\n")
        self._inbox = lines.pop()
        for line in lines:
            op, arg = line.decode("ascii").split(" ", 1)
            if op == "G":
                fut = self._pending.pop(int(arg), None)
                if fut is not None and not fut.done():
                    fut.set_result(None)
            elif op == "W":
                self._wanted.add(arg)
            else:
                self._wanted.discard(arg)

    def _broker_gone(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
        self._closed = True
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(
                    PoolIpGateClosed("the pool's IP gate is gone (the parent process exited)")
                )

    def _send(self, line: str) -> None:
        if self._closed:
            return  # (a release after the broker went: nothing to give back)
        pending = bool(self._outbox)
        self._outbox += line.encode("ascii")
        if not pending:
            self._flush()

    def _flush(self) -> None:
        out = self._outbox
        try:
            n = self._sock.send(out)
        except BlockingIOError:
            n = 0
        except OSError:
            self._broker_gone()
            return
        del out[:n]
        loop = self._loop
        if loop is None or bool(out) == self._writing:
            return
        self._writing = bool(out)
        if out:
            loop.add_writer(self._fd, self._flush)
        else:
            loop.remove_writer(self._fd)

if TYPE_CHECKING:
    from .seams import IpGate

    def _conforms(
        local: LocalIpGate, files: FileIpGate, pool: PoolIpGate
    ) -> tuple[IpGate, IpGate, IpGate]:
        return local, files, pool  # mypy checks that all are IpGates
