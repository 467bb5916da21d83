"""Per-IP gates: the limit, and that holders see waiters (in this process and in others); the
pool's broker: slots handed over without polling, and a killed worker's slots back at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gossamer.engine.ipgate import (
    FileIpGate,
    IpGateBroker,
    LocalIpGate,
    PoolIpGate,
    PoolIpGateClosed,
)

IP = "127.1.0.9"


WAIT_S = 30.0  # a bound for a state that comes in milliseconds, generous on a loaded machine


async def _wait_until(cond: Callable[[], bool]) -> None:
    """Poll `cond` until it holds, for at most WAIT_S (the gates have no event to wait on)."""
    deadline = time.monotonic() + WAIT_S
    while not cond():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {WAIT_S} s")
        await asyncio.sleep(0.002)


def _wait_until_sync(cond: Callable[[], bool]) -> None:
    """`_wait_until` outside an event loop: the broker's thread answers in its own time."""
    deadline = time.monotonic() + WAIT_S
    while not cond():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {WAIT_S} s")
        time.sleep(0.002)


def test_local_gate_limits_and_reports_waiters() -> None:
    async def main() -> None:
        gate = LocalIpGate(1)
        order: list[str] = []
        async with gate.hold(IP):
            assert not gate.waiting(IP)
            other = asyncio.create_task(_hold(gate, order, "b"))
            await _wait_until(lambda: gate.waiting(IP))
            assert not gate.waiting("127.1.0.10")
            order.append("a")
        await other
        assert order == ["a", "b"] and not gate.waiting(IP)

    asyncio.run(main())


async def _hold(gate: LocalIpGate | FileIpGate, order: list[str], name: str) -> None:
    async with gate.hold(IP):
        order.append(name)


def test_file_gate_sees_a_waiter_of_another_process(tmp_path: Path) -> None:
    """Two FileIpGate objects on one directory behave as two worker processes (flock locks
    belong to open files, not to processes)."""

    async def main() -> None:
        w0, w1 = FileIpGate(tmp_path, 1, poll=0.002), FileIpGate(tmp_path, 1, poll=0.002)
        order: list[str] = []
        async with w0.hold(IP):
            assert not w0.waiting(IP)
            other = asyncio.create_task(_hold(w1, order, "w1"))
            await _wait_until(lambda: w0.waiting(IP))  # w1 polls: w0 sees it
            order.append("w0")
        await asyncio.wait_for(other, 2.0)
        assert order == ["w0", "w1"]
        async with w1.hold(IP):
            assert not w1.waiting(IP)  # nobody waits any more
        async with w0.hold(IP), w1.hold("127.1.0.10"):  # different IPs do not wait
            assert not w0.waiting(IP) and not w1.waiting("127.1.0.10")

    asyncio.run(main())


# ------------------------------------------------------------- the pool's broker and gates
@contextlib.contextmanager
def _pool(workers: int, limit: int) -> Iterator[tuple[IpGateBroker, list[PoolIpGate]]]:
    """A broker and one PoolIpGate per worker, all in this process (each gate on its own
    socket: as workers on theirs)."""
    broker = IpGateBroker(workers, limit)
    gates = [PoolIpGate(broker.worker_socket(k), limit) for k in range(workers)]
    broker.start()
    try:
        yield broker, gates
    finally:
        for gate in gates:
            gate.close()
        broker.stop()


def test_pool_gates_share_the_limit_and_hand_slots_over_in_order() -> None:
    """Two workers' gates on one broker: never more than `limit` holders of an IP in all,
    every hold gets its turn, and the waiters of another worker are seen by the holders."""

    async def main() -> tuple[int, int, list[bool]]:
        inside = most = done = 0
        seen: list[bool] = []
        with _pool(2, 3) as (broker, (w0, w1)):

            async def one(gate: PoolIpGate) -> None:
                nonlocal inside, most, done
                for _ in range(5):
                    async with gate.hold(IP):
                        inside += 1
                        most = max(most, inside)
                        await asyncio.sleep(0.002)
                        inside -= 1
                done += 1

            async with asyncio.TaskGroup() as tg:
                for k in range(8):
                    tg.create_task(one(w0 if k % 2 else w1))
            await _wait_until(lambda: broker.held(IP) == 0)
            # waiting() across workers: w1 waits for the IP w0 holds, and w0 sees it
            gate1 = asyncio.Event()
            async with w0.hold(IP), w0.hold(IP), w0.hold(IP):
                seen.append(w0.waiting(IP))  # nobody waits
                late = asyncio.create_task(_hold_until(w1, gate1))
                await _wait_until(lambda: w0.waiting(IP))
                seen.append(w1.waiting(IP))  # (the waiter's worker is told too)
                seen.append(w0.waiting("127.1.0.10"))  # another IP: nobody
            await _wait_until(lambda: broker.held(IP) == 1)  # w1 got the slot w0 let go
            gate1.set()
            await late
            await _wait_until(lambda: not w0.waiting(IP) and broker.held(IP) == 0)
        return most, done, seen

    assert asyncio.run(main()) == (3, 8, [False, True, False])


async def _hold_until(gate: PoolIpGate, release: asyncio.Event) -> None:
    async with gate.hold(IP):
        await release.wait()


def test_pool_gate_a_cancelled_wait_takes_no_slot_away() -> None:
    """A hold cancelled while it waits (a stop) leaves nothing held at the broker, nor
    a grant that races the cancel (the broker takes "C" for a release then)."""

    async def main() -> list[int]:
        held = []
        with _pool(2, 1) as (broker, (w0, w1)):
            release = asyncio.Event()
            holder = asyncio.create_task(_hold_until(w0, release))
            await _wait_until(lambda: broker.held(IP) == 1)
            waiter = asyncio.create_task(_hold_until(w1, asyncio.Event()))
            await _wait_until(lambda: w0.waiting(IP))
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            await _wait_until(lambda: not w0.waiting(IP))  # the broker dropped the wait
            release.set()
            await holder
            await _wait_until(lambda: broker.held(IP) == 0)
            held.append(broker.held(IP))
            # cancelled in the same loop turn as its grant arrives: released, not leaked
            for _ in range(20):
                task = asyncio.create_task(_hold_until(w1, asyncio.Event()))
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await _wait_until(lambda: broker.held(IP) == 0)
            async with asyncio.timeout(2), w0.hold(IP):
                held.append(broker.held(IP))
        return held

    assert asyncio.run(main()) == [0, 1]


def _child_holds(broker: IpGateBroker, ready: int) -> None:
    """A forked worker: hold a slot of IP, say so on `ready`, then wait to be killed."""
    sock = broker.in_worker(0)

    async def main() -> None:
        gate = PoolIpGate(sock, broker.limit)
        async with gate.hold(IP):
            os.write(ready, b"!")
            await asyncio.sleep(60)

    asyncio.run(main())
    os._exit(0)


def test_a_sigkilled_worker_s_slot_comes_back_at_once() -> None:
    """A worker killed by SIGKILL while it holds the IP's only slot: its socket reaches end
    of file at the broker, which gives the slot to the waiter in another worker (the lock
    files had this from the kernel; a count in shared memory would have kept it forever)."""
    broker = IpGateBroker(2, 1)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            _child_holds(broker, ready_w)
        finally:
            os._exit(1)
    try:
        os.close(ready_w)
        gate = PoolIpGate(broker.worker_socket(1), 1)
        broker.start()
        assert os.read(ready_r, 1) == b"!"  # the child holds the slot

        async def main() -> bool:
            waiter = asyncio.create_task(_hold_until(gate, asyncio.Event()))
            await _wait_until(lambda: gate.waiting(IP))
            assert not waiter.done()  # the slot is the child's
            os.kill(pid, signal.SIGKILL)
            await _wait_until(lambda: broker.held(IP) == 1 and not gate.waiting(IP))
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            return True

        assert asyncio.run(main())
        gate.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_r)
        broker.stop()


def test_pool_gate_fails_its_waiters_when_the_broker_is_gone() -> None:
    """The parent gone (its end closed): a waiting hold fails at once with PoolIpGateClosed
    instead of waiting forever, and so does the next one."""

    async def main() -> list[str]:
        broker = IpGateBroker(2, 1)
        w0, w1 = (PoolIpGate(broker.worker_socket(k), 1) for k in range(2))
        broker.start()
        release = asyncio.Event()
        holder = asyncio.create_task(_hold_until(w0, release))
        await _wait_until(lambda: broker.held(IP) == 1)
        waiter = asyncio.create_task(_hold_until(w1, asyncio.Event()))
        await _wait_until(lambda: w1.waiting(IP))
        broker.stop()
        errors = [type(e).__name__ for e in await asyncio.gather(waiter, return_exceptions=True)]
        with pytest.raises(PoolIpGateClosed):
            async with w1.hold("127.1.0.10"):
                pass
        release.set()
        await holder  # the release after the broker went is dropped, not an error
        w0.close()
        w1.close()
        return errors

    assert asyncio.run(main()) == ["PoolIpGateClosed"]


def test_pool_gate_waits_without_polling() -> None:
    """A hold waiting 0.3 s for a slot sends one request and gets one grant: the broker
    reads 2 messages from the waiter in all (acquire, release), however long it waits.
    FileIpGate's wait opened and flocked the slot files every 5 ms (~60 tries here)."""

    async def main() -> int:
        with _pool(2, 1) as (broker, (w0, w1)):
            release = asyncio.Event()
            holder = asyncio.create_task(_hold_until(w0, release))
            await _wait_until(lambda: broker.held(IP) == 1)
            sent = []
            real_send = w1._send

            def counting(line: str) -> None:
                sent.append(line)
                real_send(line)

            w1._send = counting  # type: ignore[method-assign]
            waiter = asyncio.create_task(_hold_until(w1, asyncio.Event()))
            await asyncio.sleep(0.3)
            release.set()
            await holder
            await _wait_until(lambda: broker.held(IP) == 1 and not w0.waiting(IP))
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            return len(sent)

    assert asyncio.run(main()) == 2  # "A …" then "C …" (the cancel that releases)


def test_a_worker_that_does_not_read_never_blocks_the_broker() -> None:
    """A worker whose socket is full (it does not read: stopped, or busy) gets its lines
    queued at the broker, which goes on serving the others; once it reads, it gets them all
    in order."""
    broker = IpGateBroker(3, 1)
    w0, w1 = (PoolIpGate(broker.worker_socket(k), 1) for k in range(2))
    idle = broker.worker_socket(2)  # never read until the end
    broker._ours[2].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1024)  # full sooner
    broker.start()

    async def main() -> None:
        async def one(gate: PoolIpGate, n: int) -> None:
            for _ in range(n):
                async with gate.hold(IP):
                    await asyncio.sleep(0)

        # two workers contending for one slot: a W and a U to every worker at each turn
        await asyncio.gather(one(w0, 400), one(w1, 400))

    try:
        asyncio.run(main())
        assert broker._outbox[2]  # the idle worker's lines wait at the broker
        # every hold ended, but the last release may still be on its way to the broker's
        # thread (on a loaded machine it often is): wait for it, never a slot kept
        _wait_until_sync(lambda: broker.held(IP) == 0)
        idle.settimeout(WAIT_S)
        data = b""
        while broker._outbox[2]:  # reading makes room: the broker sends the rest
            data += idle.recv(65536)
        idle.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while chunk := idle.recv(65536):
                data += chunk
        lines = data.decode().splitlines()
        assert {line.split(" ")[0] for line in lines} == {"W", "U"}
        assert [line[0] for line in lines] == ["W", "U"] * (len(lines) // 2)
        assert len(lines) > 200
    finally:
        w0.close()
        w1.close()
        idle.close()
        broker.stop()


# ------------------------------------------- the broker's bookkeeping on the races it meets
class _RawWorker:
    """A worker's end of the broker's protocol, spoken by hand: what it sends and when it
    reads are the test's, so each race below happens in one chosen order."""

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(WAIT_S)
        self.sock = sock
        self._buf = b""

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode("ascii") + b"\n")

    def line(self) -> str:
        while b"\n" not in self._buf:
            data = self.sock.recv(4096)
            assert data, "the broker closed the socket"
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("ascii")

    def until(self, want: str) -> list[str]:
        """The lines read up to and including `want`."""
        seen = [self.line()]
        while seen[-1] != want:
            seen.append(self.line())
        return seen


@contextlib.contextmanager
def _raw_pool(workers: int) -> Iterator[tuple[IpGateBroker, list[_RawWorker]]]:
    broker = IpGateBroker(workers, 1)
    raw = [_RawWorker(broker.worker_socket(k)) for k in range(workers)]
    broker.start()
    try:
        yield broker, raw
    finally:
        for w in raw:
            w.sock.close()
        broker.stop()


def _granted_in_flight(w0: _RawWorker, w1: _RawWorker, w2: _RawWorker) -> None:
    """w0 holds IP's only slot, w1 waits for it, w0 lets it go: the broker has sent w1 its
    grant ("U" reaches w2 after it), which w1 has not read."""
    w0.send(f"A 1 {IP}")
    assert w0.line() == "G 1"
    w1.send(f"A 1 {IP}")
    assert w2.line() == f"W {IP}"
    w0.send("R 1")
    assert w2.line() == f"U {IP}"


def test_broker_frees_a_grant_in_flight_to_a_worker_that_is_gone() -> None:
    """A worker whose socket closes while its grant is on the way (it died, or closed its
    gate, as the slot came free) never keeps the slot: the next asker gets it."""
    with _raw_pool(3) as (broker, (w0, w1, w2)):
        _granted_in_flight(w0, w1, w2)
        w1.sock.close()
        w2.send(f"A 1 {IP}")
        assert w2.until("G 1")[-1] == "G 1"  # (a "W", "U" first if it asked before the EOF)
        w2.send("R 1")
        _wait_until_sync(lambda: broker.held(IP) == 0)


def test_broker_takes_a_cancel_after_its_grant_for_a_release() -> None:
    """A wait cancelled while its grant is on the way ("C" crosses "G"): the broker takes
    the cancel for a release; the stale grant the worker then reads holds nothing."""
    with _raw_pool(3) as (broker, (w0, w1, w2)):
        _granted_in_flight(w0, w1, w2)
        w1.send("C 1")
        w2.send(f"A 1 {IP}")
        assert w2.until("G 1")[-1] == "G 1"
        assert w1.until("G 1") == [f"W {IP}", "G 1"]  # the stale grant
        w2.send("R 1")
        _wait_until_sync(lambda: broker.held(IP) == 0)


def test_broker_drops_the_wait_of_a_worker_that_is_gone() -> None:
    """A worker gone while it waits: its wait is dropped (the others are told nobody waits)
    and the slot, let go, is free for the next asker rather than granted to the dead."""
    with _raw_pool(3) as (broker, (w0, w1, w2)):
        w0.send(f"A 1 {IP}")
        assert w0.line() == "G 1"
        w1.send(f"A 1 {IP}")
        assert w2.line() == f"W {IP}"
        w1.sock.close()
        assert w2.line() == f"U {IP}"
        w0.send("R 1")
        _wait_until_sync(lambda: broker.held(IP) == 0)
        w2.send(f"A 1 {IP}")
        assert w2.line() == "G 1"
