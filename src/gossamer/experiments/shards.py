"""Gossamer's own partition, evaluated the way a worker evaluates it.

A host goes to logical shard `shard_of(host)` (xxh3-64 mod Q = 1024); a strategy tells each
member which shards it may lease (`Strategy.shards_for`). Here every member of a synthetic
membership `w00, w01, …` asks the real strategy for its shards, and a host is *accepted* by a
member when its shard is among them: nothing is computed on the members' behalf, so a strategy
that gave a shard to two members or to none would show up in `check_partition`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..partition import SHARDS, Member, PartitionError, Strategy, shard_of


def members(n: int) -> tuple[Member, ...]:
    """`n` equal-capacity members; ids sort in index order (w00 < w01 < …)."""
    return tuple(Member(f"w{i:02d}") for i in range(n))


def member_shards(strategy: Strategy, n: int, now: float = 0.0) -> list[frozenset[int]]:
    """Each of `n` members' shards at `now`, in member order. Refuses strategies without a
    static answer (`Dynamic` answers ANY: any worker may lease any host)."""
    group = members(n)
    out = []
    for m in group:
        shards = strategy.shards_for(m.id, group, now)
        if shards is None:
            raise PartitionError(f"{strategy.name} assigns no shards: it is not a partition")
        out.append(shards)
    return out


def host_shards(hosts: Sequence[str], shards: int = SHARDS) -> list[int]:
    """The logical shard of every host (gossamer's xxh3 host hash)."""
    return [shard_of(h, shards) for h in hosts]


def accepted_hosts(
    shard_sets: Sequence[frozenset[int]], host_shard: Sequence[int]
) -> list[list[int]]:
    """For each member, the hosts (indices) whose shard it holds."""
    return [[h for h, s in enumerate(host_shard) if s in mine] for mine in shard_sets]


def loads_of(accepted: Sequence[Sequence[int]], pages: Sequence[int]) -> list[int]:
    """URLs per member: the pages of the hosts it accepted."""
    return [sum(pages[h] for h in hosts) for hosts in accepted]
