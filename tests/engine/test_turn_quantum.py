"""When a host gives its IP's slot up to a host that waits for the same IP (engine.crawler
.turn_over): at once when its next request would wait for its delay, else after
TURN_QUANTUM_S of holding the slot."""

from __future__ import annotations

import pytest

from gossamer.engine.crawler import TURN_QUANTUM_S, turn_over


def test_nobody_waits_keeps_the_turn() -> None:
    assert not turn_over(False, 1.0, 100.0)
    assert not turn_over(False, 0.0, 100.0)


def test_a_host_with_a_delay_hands_over_after_each_response() -> None:
    assert turn_over(True, 0.5, 0.0)
    assert turn_over(True, 0.001, 0.0)


@pytest.mark.parametrize(
    ("held", "over"),
    [(0.0, False), (TURN_QUANTUM_S / 2, False), (TURN_QUANTUM_S, True), (10.0, True)],
)
def test_with_no_delay_the_turn_lasts_a_quantum(held: float, over: bool) -> None:
    assert turn_over(True, 0.0, held) is over
