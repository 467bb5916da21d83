"""engine.turns: one processing turn at a time, biggest backlog first, bounded waits."""

from __future__ import annotations

import asyncio

import pytest

from gossamer.engine.turns import Turns


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _holder(turns: Turns, name: str, backlog: int, order: list[str]) -> None:
    await turns.acquire(backlog)
    try:
        order.append(name)
    finally:
        turns.release()


def test_free_turn_is_taken_at_once_and_then_by_backlog() -> None:
    async def main() -> list[str]:
        clock = Clock()
        turns = Turns(per_url=0.001, max_lead=1.0, clock=clock)
        order: list[str] = []
        await turns.acquire(0)  # free: no waiting
        tasks = []
        for name, backlog in (("small", 5), ("big", 3000), ("mid", 300)):
            tasks.append(asyncio.create_task(_holder(turns, name, backlog, order)))
            clock.now += 0.01  # later arrivals
        await asyncio.sleep(0)
        assert turns.waiting == 3
        turns.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == ["big", "mid", "small"]


def test_head_start_is_bounded() -> None:
    async def main() -> list[str]:
        clock = Clock()
        turns = Turns(per_url=0.001, max_lead=1.0, clock=clock)
        order: list[str] = []
        await turns.acquire(0)
        early = asyncio.create_task(_holder(turns, "early", 0, order))
        await asyncio.sleep(0)
        clock.now += 2.0  # waited longer than any head start
        late = asyncio.create_task(_holder(turns, "late-big", 10**6, order))
        await asyncio.sleep(0)
        turns.release()
        await asyncio.gather(early, late)
        return order

    assert asyncio.run(main()) == ["early", "late-big"]


def test_one_holder_at_a_time() -> None:
    async def main() -> int:
        turns = Turns()
        inside = 0
        most = 0

        async def work(i: int) -> None:
            nonlocal inside, most
            await turns.acquire(i)
            try:
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0)  # a holder that yields still holds the turn
                inside -= 1
            finally:
                turns.release()

        await asyncio.gather(*(work(i) for i in range(50)))
        return most

    assert asyncio.run(main()) == 1


@pytest.mark.parametrize("when", ["waiting", "granted"])
def test_cancelled_waiter_does_not_block_the_others(when: str) -> None:
    async def main() -> list[str]:
        turns = Turns()
        order: list[str] = []
        await turns.acquire(0)
        victim = asyncio.create_task(_holder(turns, "victim", 10, order))
        other = asyncio.create_task(_holder(turns, "other", 0, order))
        await asyncio.sleep(0)
        if when == "granted":
            turns.release()  # the victim is granted the turn, then cancelled before it runs
            victim.cancel()
        else:
            victim.cancel()
            await asyncio.sleep(0)
            turns.release()
        await asyncio.wait_for(other, 5)
        with pytest.raises(asyncio.CancelledError):
            await victim
        return order

    assert asyncio.run(main()) == ["other"]
