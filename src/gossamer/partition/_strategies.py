"""The partition strategies (see the package docstring and docs/cluster.md)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, Final, Protocol

import xxhash

SHARDS: Final = 1024
#: `shards_for` answer meaning "no restriction": any ready host may be leased.
ANY: Final = None

_TWO64: Final = float(1 << 64)


class PartitionError(ValueError):
    """Members or options a strategy cannot work with (the message says why)."""


def shard_of(host: str, shards: int = SHARDS) -> int:
    """The logical shard of a host key (`urls.host_key`): xxh3-64 of it, mod `shards`."""
    return xxhash.xxh3_64_intdigest(host.encode("utf-8", "surrogatepass")) % shards


@dataclass(frozen=True, slots=True)
class Member:
    """A live worker: its registered id and its relative capacity (> 0, 1 by default)."""

    id: str
    capacity: float = 1.0

    def __post_init__(self) -> None:
        if not self.id:
            raise PartitionError("a member needs a non-empty id")
        if not (self.capacity > 0 and math.isfinite(self.capacity)):
            raise PartitionError(f"member {self.id!r}: capacity must be > 0, not {self.capacity}")


def _ordered(members: Sequence[Member]) -> tuple[Member, ...]:
    """Members by id (every worker computes the same order); duplicate ids refused."""
    ordered = tuple(sorted(members, key=lambda m: m.id))
    for a, b in itertools.pairwise(ordered):
        if a.id == b.id:
            raise PartitionError(f"two members share the id {a.id!r}")
    return ordered


def _index(member_id: str, ordered: tuple[Member, ...]) -> int:
    for i, m in enumerate(ordered):
        if m.id == member_id:
            return i
    raise PartitionError(f"{member_id!r} is not a live member")


class Strategy(Protocol):
    """Which shards a member may lease. Pure: same arguments, same answer, on every worker."""

    @property
    def name(self) -> str:
        """The `--partition` name."""
        ...

    @property
    def unrestricted(self) -> bool:
        """True when every live member may lease any host (`shards_for` answers ANY for each
        of them, at any time): a worker then skips `shards_for` and sizes its leases by its
        capacity (`capacity_lease_size`)."""
        ...

    def shards_for(
        self, member_id: str, members: Sequence[Member], now: float
    ) -> frozenset[int] | None:
        """The shards `member_id` may lease at `now` (server clock), or ANY (None)."""
        ...

    def valid_until(self, now: float) -> float:
        """When the answer may change with time alone (membership aside): a lease taken
        under it must end by then. `math.inf` for strategies that do not use the clock."""
        ...


@dataclass(frozen=True, slots=True)
class Dynamic:
    """Grid crawler, Algorithm 3.1: any worker leases any ready host (the frontier hands out
    the largest known sites first); joins and deaths need no rebalancing. A worker's lease
    size follows its capacity (`lease_size`)."""

    shards: int = SHARDS
    name: str = "dynamic"
    unrestricted: ClassVar[bool] = True

    def shards_for(
        self, member_id: str, members: Sequence[Member], now: float
    ) -> frozenset[int] | None:
        _index(member_id, _ordered(members))
        return ANY

    def valid_until(self, now: float) -> float:
        return math.inf

    @staticmethod
    def lease_size(per_host: int, member_id: str, members: Sequence[Member]) -> int:
        """See `capacity_lease_size`."""
        return capacity_lease_size(per_host, member_id, members)


def capacity_lease_size(per_host: int, member_id: str, members: Sequence[Member]) -> int:
    """Hosts to lease at once under an unrestricted strategy: `per_host` scaled by the
    member's capacity against the mean capacity (at least 1)."""
    ordered = _ordered(members)
    me = ordered[_index(member_id, ordered)]
    mean = sum(m.capacity for m in ordered) / len(ordered)
    return max(1, round(per_host * me.capacity / mean))


@dataclass(frozen=True, slots=True)
class Modulo:
    """Hash-URL scheduling: a host's shard mod the number of registered workers picks the
    worker (its index among the ids). Any join or death moves most shards."""

    shards: int = SHARDS
    name: str = "modulo"
    unrestricted: ClassVar[bool] = False

    def shards_for(
        self, member_id: str, members: Sequence[Member], now: float
    ) -> frozenset[int] | None:
        ordered = _ordered(members)
        i, m = _index(member_id, ordered), len(ordered)
        return frozenset(range(i, self.shards, m))

    def valid_until(self, now: float) -> float:
        return math.inf


@dataclass(frozen=True, slots=True)
class Consistent:
    """Design notes: weighted rendezvous (highest-random-weight) hashing of the Q shards over
    the members, with bounded loads — a member holds at most ⌈(1 + epsilon)·Q·capacity /
    total capacity⌉ shards, a shard over the bound going to its next-ranked member. A join
    moves about Q/M shards, nearly all to the new member; a death moves only the dead
    member's shards."""

    epsilon: float = 0.25
    shards: int = SHARDS
    name: str = "consistent"
    unrestricted: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not self.epsilon > 0:
            raise PartitionError(f"epsilon must be > 0, not {self.epsilon}")

    def shards_for(
        self, member_id: str, members: Sequence[Member], now: float
    ) -> frozenset[int] | None:
        ordered = _ordered(members)
        _index(member_id, ordered)
        owners = _rendezvous(ordered, self.shards, self.epsilon)
        return frozenset(s for s, owner in enumerate(owners) if owner == member_id)

    def valid_until(self, now: float) -> float:
        return math.inf


@lru_cache(maxsize=64)
def _rendezvous(members: tuple[Member, ...], shards: int, epsilon: float) -> tuple[str, ...]:
    """The owner id of every shard (cached per membership: workers ask on every lease)."""
    total = sum(m.capacity for m in members)
    cap = {m.id: math.ceil((1 + epsilon) * shards * m.capacity / total) for m in members}
    load = dict.fromkeys(cap, 0)
    owners = []
    for s in range(shards):
        ranked = sorted(members, key=lambda m: _score(m, s), reverse=True)
        owner = next(m.id for m in ranked if load[m.id] < cap[m.id])  # Σ cap > shards
        load[owner] += 1
        owners.append(owner)
    return tuple(owners)


def _score(member: Member, shard: int) -> float:
    """Weighted rendezvous score: -capacity / ln(u), u uniform in (0, 1) from the hash."""
    h = xxhash.xxh3_64_intdigest(f"{member.id}\x00{shard}".encode("utf-8", "surrogatepass"))
    return -member.capacity / math.log((h + 0.5) / _TWO64)


@dataclass(frozen=True, slots=True)
class Phase:
    """KSpider's phase swapping: shards fall into P phases (shard mod P); worker i (by id)
    works phase (i + ⌊t / T⌋) mod P on the shared (Redis server) clock, so two workers never
    work one phase and a web server never sees two workers at once. Every T seconds each
    worker moves on to the next phase: a lease must end by `valid_until(now)` (the phase's
    end), or the next worker of that phase could overlap it. P defaults to the number of
    members; fewer phases than members is refused."""

    period: float = 60.0
    phases: int | None = None
    shards: int = SHARDS
    name: str = "phase"
    unrestricted: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not (self.period > 0 and math.isfinite(self.period)):
            raise PartitionError(f"the phase period must be > 0 s, not {self.period}")
        if self.phases is not None and not 1 <= self.phases <= self.shards:
            raise PartitionError(f"phases must be 1..{self.shards}, not {self.phases}")

    def phase_count(self, members: Sequence[Member]) -> int:
        """P: `phases`, or one per member; fewer phases than members is refused."""
        p = len(members) if self.phases is None else self.phases
        if p < len(members):
            raise PartitionError(
                f"{p} phases for {len(members)} workers: two workers would share a phase"
            )
        return p

    def phase_of(self, member_id: str, members: Sequence[Member], now: float) -> int:
        i = _index(member_id, _ordered(members))
        return (i + math.floor(now / self.period)) % self.phase_count(members)

    def shards_for(
        self, member_id: str, members: Sequence[Member], now: float
    ) -> frozenset[int] | None:
        phase = self.phase_of(member_id, members, now)
        return frozenset(range(phase, self.shards, self.phase_count(members)))

    def valid_until(self, now: float) -> float:
        return (math.floor(now / self.period) + 1) * self.period


@dataclass(frozen=True, slots=True)
class Sized:
    """Grid crawler's Static-Size: shards placed up front by their known sizes — e.g. the
    pages a previous crawl found on the shard's sites — largest first, each to the member
    with the least load per capacity (LPT greedy; ties: fewest shards, then member order).
    Shards without a known size (weight 0: sites not seen before) are then dealt to the
    members with the fewest shards per capacity, so they spread by count. `weights` holds
    (shard, size) pairs, other shards weigh 0. A join or a death places everything again
    (like `modulo`, most shards move)."""

    weights: tuple[tuple[int, float], ...] = ()
    shards: int = SHARDS
    name: str = "sized"
    unrestricted: ClassVar[bool] = False

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for shard, weight in self.weights:
            if not 0 <= shard < self.shards:
                raise PartitionError(f"shard {shard} is not in 0..{self.shards - 1}")
            if shard in seen:
                raise PartitionError(f"shard {shard} has two weights")
            if not (weight >= 0 and math.isfinite(weight)):
                raise PartitionError(f"shard {shard}: weight must be >= 0, not {weight}")
            seen.add(shard)

    def shards_for(
        self, member_id: str, members: Sequence[Member], now: float
    ) -> frozenset[int] | None:
        ordered = _ordered(members)
        i = _index(member_id, ordered)
        owners = _largest_first(ordered, self.shards, self.weights)
        return frozenset(s for s, owner in enumerate(owners) if owner == i)

    def valid_until(self, now: float) -> float:
        return math.inf


@lru_cache(maxsize=64)
def _largest_first(
    members: tuple[Member, ...], shards: int, weights: tuple[tuple[int, float], ...]
) -> tuple[int, ...]:
    """The owner (index into `members`) of every shard under `Sized` (cached per
    membership: workers ask on every lease)."""
    weight = {s: w for s, w in weights if w > 0}
    caps = [m.capacity for m in members]
    load = [0.0] * len(members)
    count = [0] * len(members)
    owners = [0] * shards
    for s in sorted(weight, key=lambda s: (-weight[s], s)):
        i = min(range(len(members)), key=lambda k: (load[k] / caps[k], count[k], k))
        owners[s] = i
        load[i] += weight[s]
        count[i] += 1
    for s in range(shards):
        if s not in weight:
            i = min(range(len(members)), key=lambda k: (count[k] / caps[k], k))
            owners[s] = i
            count[i] += 1
    return tuple(owners)


def assignment(
    strategy: Strategy, members: Sequence[Member], now: float
) -> dict[str, frozenset[int] | None]:
    """Every member's shards at `now` (for status displays and tests)."""
    return {m.id: strategy.shards_for(m.id, members, now) for m in _ordered(members)}
