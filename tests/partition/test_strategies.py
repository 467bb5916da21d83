"""Partition strategies: exclusivity for every strategy and membership, balance, and what a
join or a death moves."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gossamer.partition import (
    ANY,
    SHARDS,
    Consistent,
    Dynamic,
    Member,
    Modulo,
    PartitionError,
    Phase,
    Sized,
    Strategy,
    assignment,
    shard_of,
    strategy_named,
)

members_st = st.lists(
    st.builds(
        Member,
        id=st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8),
        capacity=st.sampled_from([0.5, 1.0, 1.0, 2.0, 4.0]),
    ),
    min_size=1,
    max_size=9,
    unique_by=lambda m: m.id,
)


def owners(strategy: Strategy, members: list[Member], now: float = 0.0) -> dict[int, str]:
    """shard -> its member, asserting that no shard has two."""
    out: dict[int, str] = {}
    for member_id, shards in assignment(strategy, members, now).items():
        assert shards is not ANY
        for s in shards:
            assert s not in out, f"shard {s} given to {out[s]} and {member_id}"
            out[s] = member_id
    return out


def workers(n: int, capacity: float = 1.0) -> list[Member]:
    return [Member(f"w{i}", capacity) for i in range(n)]


# ---------------------------------------------------------------------- shards
def test_shard_of_is_stable_and_spread() -> None:
    # pinned: a shard's hosts are stored under it (Redis hash tags), so it must never change
    assert shard_of("www.example.com") == 741 and shard_of("www.h93.example") == 392
    counts = Counter(shard_of(f"www.h{i}.example") for i in range(200_000))
    assert set(counts) == set(range(SHARDS))
    mean = 200_000 / SHARDS
    assert max(counts.values()) < 1.4 * mean and min(counts.values()) > 0.6 * mean


# ---------------------------------------------------------------------- exclusivity
@settings(max_examples=60, deadline=None)
@given(members=members_st, now=st.floats(0, 1e6))
def test_no_shard_has_two_members_and_none_is_lost(members: list[Member], now: float) -> None:
    sized = Sized(weights=((0, 500.0), (7, 20.0), (SHARDS - 1, 3.0), (300, 0.0)))
    for strategy in (Modulo(), Consistent(), Phase(period=30.0), sized):
        got = owners(strategy, members, now)
        if isinstance(strategy, Phase):  # M of the P = M phases: every shard, once
            assert len(got) == SHARDS
        else:
            assert set(got) == set(range(SHARDS))


def test_dynamic_leaves_exclusivity_to_leases() -> None:
    ms = workers(3)
    assert all(v is ANY for v in assignment(Dynamic(), ms, 0.0).values())
    assert Dynamic.lease_size(20, "w0", [Member("w0", 1.0), Member("w1", 3.0)]) == 10
    assert Dynamic.lease_size(20, "w1", [Member("w0", 1.0), Member("w1", 3.0)]) == 30
    assert Dynamic.lease_size(1, "w0", [Member("w0", 0.1), Member("w1", 10.0)]) == 1


# ---------------------------------------------------------------------- modulo
def test_modulo_is_hash_mod_workers() -> None:
    got = owners(Modulo(), workers(3))
    assert all(got[s] == f"w{s % 3}" for s in range(SHARDS))
    # a join renumbers: most shards move (what the consistent strategy avoids)
    after = owners(Modulo(), workers(4))
    assert sum(got[s] != after[s] for s in range(SHARDS)) > SHARDS // 2


# ---------------------------------------------------------------------- consistent
@pytest.mark.parametrize("m", [2, 4, 8])
def test_consistent_join_moves_about_q_over_m_to_the_new_member(m: int) -> None:
    before = owners(Consistent(), workers(m))
    after = owners(Consistent(), workers(m + 1))
    moved = [s for s in range(SHARDS) if before[s] != after[s]]
    share = SHARDS / (m + 1)
    assert 0.6 * share <= len(moved) <= 1.3 * share
    assert sum(after[s] == f"w{m}" for s in moved) >= 0.9 * len(moved)


@pytest.mark.parametrize("m", [3, 4, 8])
def test_consistent_death_moves_only_the_dead_members_shards(m: int) -> None:
    ms = workers(m)
    before = owners(Consistent(), ms)
    for dead in (ms[0].id, ms[-1].id):
        after = owners(Consistent(), [x for x in ms if x.id != dead])
        moved = {s for s in range(SHARDS) if before[s] != after[s]}
        assert moved == {s for s in range(SHARDS) if before[s] == dead}


@settings(max_examples=40, deadline=None)
@given(members=members_st)
def test_consistent_loads_are_bounded_by_capacity(members: list[Member]) -> None:
    eps = 0.25
    loads = Counter(owners(Consistent(epsilon=eps), members).values())
    total = sum(m.capacity for m in members)
    for m in members:
        assert loads[m.id] <= math.ceil((1 + eps) * SHARDS * m.capacity / total)


def test_consistent_follows_capacity() -> None:
    ms = [Member("small", 1.0), Member("big", 3.0)]
    loads = Counter(owners(Consistent(), ms).values())
    assert 0.65 * SHARDS <= loads["big"] <= 0.82 * SHARDS


# ---------------------------------------------------------------------- phase
def test_phase_rotates_every_period_and_never_shares_a_phase() -> None:
    ms = workers(3)
    strategy = Phase(period=10.0, phases=4)
    seen: dict[str, set[int]] = {m.id: set() for m in ms}
    for t in range(0, 80, 5):
        phases = [strategy.phase_of(m.id, ms, float(t)) for m in ms]
        assert len(set(phases)) == 3  # no two workers in one phase
        for m, p in zip(ms, phases, strict=True):
            seen[m.id].add(p)
            assert strategy.shards_for(m.id, ms, float(t)) == frozenset(range(p, SHARDS, 4))
    assert all(s == {0, 1, 2, 3} for s in seen.values())  # every worker visits every phase
    assert strategy.phase_of("w0", ms, 19.9) != strategy.phase_of("w0", ms, 20.0)
    assert strategy.valid_until(19.9) == 20.0 and strategy.valid_until(20.0) == 30.0


def test_phase_refuses_fewer_phases_than_workers() -> None:
    with pytest.raises(PartitionError, match="share a phase"):
        Phase(phases=2).shards_for("w0", workers(3), 0.0)
    with pytest.raises(PartitionError):
        Phase(period=0)


# ---------------------------------------------------------------------- sized
def test_sized_places_known_sizes_largest_first_and_spreads_the_rest_by_count() -> None:
    sizes = {3: 90.0, 10: 50.0, 11: 40.0, 12: 30.0, 13: 20.0, 14: 10.0}
    got = owners(Sized(weights=tuple(sizes.items())), workers(3))
    assert set(got) == set(range(SHARDS))
    loads = Counter({m: 0.0 for m in ("w0", "w1", "w2")})
    for shard, size in sizes.items():
        loads[got[shard]] += size
    # largest first to the least loaded: 90 | 50+20+10 | 40+30 -> 90, 80, 70
    assert sorted(loads.values()) == [70.0, 80.0, 90.0]
    assert got[3] == "w0" and got[10] == "w1" and got[11] == "w2"
    counts = Counter(got.values())  # shards of unknown size even out the shard counts
    assert max(counts.values()) - min(counts.values()) <= 1


def test_sized_follows_capacity_and_equal_weights_deal_equal_counts() -> None:
    ms = [Member("small", 1.0), Member("big", 3.0)]
    heavy = tuple((s, 1.0) for s in range(0, 400))
    got = owners(Sized(weights=heavy), ms)
    big = sum(1 for s in range(400) if got[s] == "big")
    assert big == 300  # 3:1 of the known (equal) sizes
    assert Counter(got.values())["big"] == 768  # 3:1 of all shards
    with pytest.raises(PartitionError, match="two weights"):
        Sized(weights=((1, 1.0), (1, 2.0)))
    with pytest.raises(PartitionError, match=">= 0"):
        Sized(weights=((1, -1.0),))
    with pytest.raises(PartitionError, match="not in"):
        Sized(weights=((SHARDS, 1.0),))


# ---------------------------------------------------------------------- errors, names
def test_bad_members_are_refused() -> None:
    with pytest.raises(PartitionError, match="share the id"):
        Modulo().shards_for("a", [Member("a"), Member("a")], 0.0)
    with pytest.raises(PartitionError, match="not a live member"):
        Consistent().shards_for("ghost", workers(2), 0.0)
    with pytest.raises(PartitionError, match="capacity"):
        Member("a", 0.0)
    with pytest.raises(PartitionError):
        Member("")


def test_strategy_named() -> None:
    assert isinstance(strategy_named("dynamic"), Dynamic)
    assert isinstance(strategy_named("modulo"), Modulo)
    assert strategy_named("consistent", epsilon=0.5) == Consistent(epsilon=0.5)
    assert strategy_named("phase", period=5.0, phases=8) == Phase(period=5.0, phases=8)
    with pytest.raises(PartitionError, match="unknown"):
        strategy_named("random")
    with pytest.raises(PartitionError, match="takes no"):
        strategy_named("modulo", period=3.0)
    with pytest.raises(PartitionError, match="epsilon"):
        strategy_named("consistent", epsilon=0.0)
    assert strategy_named("sized", weights=[[4, 2], [9, 1.5]]) == Sized(
        weights=((4, 2.0), (9, 1.5))
    )
    with pytest.raises(PartitionError, match="needs weights"):
        strategy_named("sized")
    with pytest.raises(PartitionError, match="takes no"):
        strategy_named("modulo", weights=[[1, 1.0]])
