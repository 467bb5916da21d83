"""What a batch's outcomes do to its URLs, and the error key each failed one keeps: pure
functions shared by every backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._protocol import DEAD_HOST, Outcome, Verdict

__all__ = ["Settlement", "death_cause", "failure_errors", "settle"]


@dataclass(frozen=True, slots=True)
class Settlement:
    """The fate of every leased URL of a batch (by fp).

    `requeued` maps a RETRY-ed fp to its new attempt count; `unfinished` are leased URLs without
    an outcome (back to the queue, attempts unchanged). `retried` counts RETRY requeues.
    """

    done: tuple[int, ...]
    failed: tuple[int, ...]
    requeued: tuple[tuple[int, int], ...]
    unfinished: tuple[int, ...]

    @property
    def retried(self) -> int:
        return len(self.requeued)


def settle(leased: Mapping[int, int], outcomes: Sequence[Outcome], max_attempts: int) -> Settlement:
    """Apply `outcomes` to the batch's URLs `leased` (fp → attempts so far).

    Raises ValueError when an outcome's fp is not in the batch or appears twice.
    """
    done: list[int] = []
    failed: list[int] = []
    requeued: list[tuple[int, int]] = []
    seen: set[int] = set()
    for o in outcomes:
        fp = o.fp
        if fp not in leased:
            raise ValueError(f"outcome for a URL not in this batch: {o.url!r} (fp {fp})")
        if fp in seen:
            raise ValueError(f"two outcomes for one URL: {o.url!r} (fp {fp})")
        seen.add(fp)
        if o.verdict is Verdict.DONE:
            done.append(fp)
        elif o.verdict is Verdict.FAILED:
            failed.append(fp)
        else:
            attempts = leased[fp] + 1
            if attempts >= max_attempts:
                failed.append(fp)
            else:
                requeued.append((fp, attempts))
    unfinished = tuple(fp for fp in leased if fp not in seen)
    return Settlement(tuple(done), tuple(failed), tuple(requeued), unfinished)


def failure_errors(outcomes: Sequence[Outcome]) -> dict[int, str]:
    """The error key each outcome would fail its URL under (fp → key; "" when it has none):
    what a backend records with a URL `settle` fails (`Failures.failures`)."""
    return {o.fp: o.error or "" for o in outcomes if o.verdict is not Verdict.DONE}


def death_cause(outcomes: Sequence[Outcome]) -> str:
    """The error key a host given up after `outcomes` fails the URLs it still has under: the
    batch's last network error (the one that killed it), else `DEAD_HOST`."""
    for o in reversed(outcomes):
        if o.network_error and o.error:
            return o.error
    return DEAD_HOST
