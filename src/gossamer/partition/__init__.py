"""Partition strategies: which logical shards a crawl worker may lease from (docs/cluster.md).

Every host maps to one of `SHARDS` logical shards (1024, far more than workers) by a stable
hash of its host key (`shard_of`), so a change of membership moves whole shards, never a host
alone. A strategy is a pure function of (a member, the live members with their capacities, a
shared clock) → the shards that member may lease now, or `ANY`. Every strategy promises
exclusivity: at one moment no shard is given to two members. Strategies are found by name
(`strategy_named`) in a registry (`register_strategy`), which `--partition`'s choices come
from; the built-in ones and their seeds: docs/cluster.md, "Partition strategies"."""

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
