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


@pytest.mark.parametrize("per_round", [1, 4])
def test_at_most_a_round_of_holders(per_round: int) -> None:
    async def main() -> int:
        turns = Turns(per_round=per_round)
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

    assert asyncio.run(main()) == per_round


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


def test_pages_ready_in_one_iteration_are_processed_by_backlog() -> None:
    """Responses that arrive together are not processed first come first served: a turn
    ends on the next loop iteration, so they all queue and the biggest backlog goes first."""

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        turns = Turns(clock=Clock())
        order: list[str] = []
        arrived = [loop.create_future() for _ in range(3)]

        async def page(name: str, backlog: int, response: asyncio.Future[None]) -> None:
            await response
            await _holder(turns, name, backlog, order)

        tasks = [
            asyncio.create_task(page(n, b, f))
            for (n, b), f in zip((("small", 1), ("big", 5000), ("mid", 50)), arrived, strict=True)
        ]
        await asyncio.sleep(0)
        await turns.acquire(0)
        for f in arrived:  # all three responses come in while a page is being processed
            f.set_result(None)
        turns.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == ["big", "mid", "small"]
