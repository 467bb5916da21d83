"""Partition strategies: which logical shards a crawl worker may lease from (docs/cluster.md).

Every host maps to one of `SHARDS` logical shards (Q = 1024, Q ≫ workers) by a stable hash of
its host key (`shard_of`), so a change of membership moves whole shards, never a host alone. A
strategy is a pure function of (a member, the live members with their capacities, a shared
clock) → the shards that member may lease now, or `ANY` (no restriction: leases alone keep a
host with one worker). Exclusivity holds in every strategy: at one moment no shard is given to
two members, so no host is leased by two workers at once.

| strategy | seed | a member's shards |
|---|---|---|
| `Dynamic` | grid crawler, Algorithm 3.1 | any (largest ready sites first); lease size ∝ capacity |
| `Modulo` | hash-URL scheduling | shard mod M = the member's index among registered ids |
| `Consistent` | design notes | weighted rendezvous hashing with bounded loads |
| `Phase` | KSpider | phase (index + ⌊t / T⌋) mod P of P ≥ M phases (shard mod P) |
| `Sized` | grid crawler, Static-Size | known shard sizes, largest first to the least loaded |

Strategies are found by name (`strategy_named`) in a registry (`register_strategy`): a new
strategy is a module defining it and one registration; `--partition`'s choices come from it.
"""

from ._registry import (
    STRATEGY_OPTIONS,
    StrategyEntry,
    register_strategy,
    strategy_entries,
    strategy_named,
    strategy_names,
)
from ._strategies import (
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
    capacity_lease_size,
    shard_of,
)

__all__ = [
    "ANY",
    "SHARDS",
    "STRATEGY_OPTIONS",
    "Consistent",
    "Dynamic",
    "Member",
    "Modulo",
    "PartitionError",
    "Phase",
    "Sized",
    "Strategy",
    "StrategyEntry",
    "assignment",
    "capacity_lease_size",
    "register_strategy",
    "shard_of",
    "strategy_entries",
    "strategy_named",
    "strategy_names",
]
