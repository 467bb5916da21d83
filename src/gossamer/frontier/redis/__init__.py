"""The cluster frontier: the `Frontier` contract on Redis (one server or Redis Cluster).

`RedisFrontier` (`_frontier`) runs the Lua scripts of lua/*.lua (`_scripts` loads them)
over the key layout that `_keys` describes and encodes; `connect` / `disconnect`
(`_connect`) make and close its client; `read_hosts` (`_reads`) reads a crawl's hosts, as
`RedisFrontier.top_hosts` does, for a display that holds a client and the crawl's id but no
frontier. docs/cluster.md has the full story.
"""

from ._connect import RedisClient, connect, disconnect
from ._frontier import DeadOwners, Partition, RedisFrontier, Share
from ._keys import token_owner
from ._reads import read_hosts

__all__ = [
    "DeadOwners",
    "Partition",
    "RedisClient",
    "RedisFrontier",
    "Share",
    "connect",
    "disconnect",
    "read_hosts",
    "token_owner",
]
