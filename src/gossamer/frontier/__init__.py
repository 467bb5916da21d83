"""The frontier: queues, dedupe, leases and host politeness of a crawl.

`Frontier` is the contract (see `_protocol`; `HostsView` the hosts' read a display makes;
`Failures` the failed URLs a resume may queue again);
`SqliteFrontier` the embedded backend; `MemoryFrontier` the in-memory reference;
`PolitenessPolicy`/`HostTiming` with `after_batch` and `host_delay` the pure politeness
rules. Documentation: docs/crawler/frontier.md.
"""

from ._memory import MemoryFrontier
from ._options import FrontierOptions
from ._politeness import (
    HostTiming,
    PolitenessPolicy,
    after_batch,
    after_reclaim,
    delay_of,
    host_delay,
)
from ._protocol import (
    DEAD_HOST,
    Discovered,
    Failures,
    Frontier,
    FrontierError,
    FrontierStats,
    FrontierStorageError,
    FrontierUnreachable,
    HostBatch,
    HostsView,
    HostView,
    LeasedURL,
    OffLoopFrontier,
    Outcome,
    Outlinks,
    ShareCappedFrontier,
    StaleLeaseError,
    Verdict,
)
from .sqlite import SqliteFrontier

__all__ = [
    "DEAD_HOST",
    "Discovered",
    "Failures",
    "Frontier",
    "FrontierError",
    "FrontierOptions",
    "FrontierStats",
    "FrontierStorageError",
    "FrontierUnreachable",
    "HostBatch",
    "HostTiming",
    "HostView",
    "HostsView",
    "LeasedURL",
    "MemoryFrontier",
    "OffLoopFrontier",
    "Outcome",
    "Outlinks",
    "PolitenessPolicy",
    "ShareCappedFrontier",
    "SqliteFrontier",
    "StaleLeaseError",
    "Verdict",
    "after_batch",
    "after_reclaim",
    "delay_of",
    "host_delay",
]
