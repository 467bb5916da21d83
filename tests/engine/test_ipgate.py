"""Per-IP gates: the limit, and that holders see waiters (in this process and in others)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from gossamer.engine.ipgate import FileIpGate, LocalIpGate

IP = "127.1.0.9"


async def _wait_until(cond: Callable[[], bool]) -> None:
    """Poll `cond` for at most 2 s (the gates have no event to wait on)."""
    for _ in range(1000):
        if cond():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("not within 2 s")


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
