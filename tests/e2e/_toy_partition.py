"""A toy partition strategy, added the way a new one is: this module and its registration
(the last line). `contiguous`: the members, ordered by id, split the shards into contiguous
ranges of equal count (member i of M: shards [i·Q/M, (i+1)·Q/M)). Exclusive and complete
like `modulo`; any join or death moves shards at every range boundary."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from gossamer.partition import SHARDS, Member, PartitionError, register_strategy


@dataclass(frozen=True, slots=True)
class Contiguous:
    shards: int = SHARDS
    name: str = "contiguous"
    unrestricted: ClassVar[bool] = False

    def shards_for(
        self, member_id: str, members: Sequence[Member], now: float
    ) -> frozenset[int] | None:
        ids = sorted(m.id for m in members)
        if member_id not in ids:
            raise PartitionError(f"{member_id!r} is not a live member")
        i, m = ids.index(member_id), len(ids)
        return frozenset(range(i * self.shards // m, (i + 1) * self.shards // m))

    def valid_until(self, now: float) -> float:
        return math.inf


register_strategy("contiguous", Contiguous, summary="contiguous shard ranges (a test's toy)")
