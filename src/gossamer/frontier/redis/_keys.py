"""Where the Redis frontier keeps what, and how its values are written.

Layout (docs/cluster.md has the full story). Every host maps to one of Q = 1024 logical
shards (`gossamer.partition.shard_of`); all of a shard's keys carry the shard as a hash tag,
`gs:<crawl>:{<shard>}:…`, so a Lua call (lua/*.lua) dedupes, enqueues, leases, completes
and reclaims a shard atomically, on one Redis and on Redis Cluster alike (on Redis Cluster a
call works on one shard; on one Redis, put and lease take all the shards they touch at once):

    c          counters (queued, leased, done, failed, retries, hosts, dead, dropped, dups, ver)
               and `hs`, the best host's score when the hint was last computed, packed in one
               string (doubles: one GET and one SET a call, not a hash's per-field lookups)
    n          the Bloom seen-set's state (filters, their sizes, expected false positives)
    s:<b>      the seen-set: fingerprints in compact integer sets (intsets) of ~200-400,
               addressed by linear hashing (the level and split pointer are in `c`)
    h:<host>   host state: next fetch, lease order, Crawl-delay, adaptive delay, back-off,
               consecutive errors, dead, URLs accepted (kept under a host budget), lease
               token / expiry / leased URLs (how many it has queued is counted from its
               lists when needed, so put costs one RPUSH for a host with URLs queued)
    q:<pr>:<host>  the host's queue at priority pr (a list, FIFO): entries fp, attempts,
               depth, parent, URL (a done URL leaves nothing but its seen-set entry)
    p:<host>   the priorities whose lists hold URLs (a sorted set, lowest first)
    r, w       ready hosts by lease order; resting hosts by next-fetch time
    t, e       lease token -> host; lease token -> expiry
    dp, pk, ch, dc  only with a max_depth (lua/depth.lua): URL depths (the truth), parked URLs,
               recorded children per parent (packed: `_EDGE`), the parked/lowered counters
    uq, lw     only with a max_depth: the steps of a relaxation not confirmed yet (a URL
               accepted, not known queued; a URL lowered, its children not known relaxed),
               so that a worker killed between two calls loses nothing: the offers its
               pages make again when they are fetched again redo those steps

A crawl-wide index in one more slot, `gs:<crawl>:{g}:` (lua/global.lua), tells which shard
holds the best ready host (`hint`: one entry per shard, versioned so that late updates never
overwrite newer ones), which shards were ever used (`act`), when leases expire (`exp`) and,
with max pages, the published count (`pub`: done + leased, reserved before a lease). Shard
calls and index updates are separate calls (Redis Cluster cannot run one script over two
slots): the shard's state is the truth and the index a hint that a periodic sweep rebuilds
from the shards, so a worker dying between the two calls loses nothing (see docs/cluster.md
for the one thing it can cost: a few max-pages slots).

Here: the key prefixes the Python side builds (the Lua scripts build the keys below them,
lua/shard.lua and lua/global.lua), the layout's version, and the encodings both sides share:
fingerprints as signed 64-bit decimals, the exact seen-set's member, numbers, a recorded edge,
a host's timing fields, lease tokens.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import Any, Final

from ...partition import SHARDS
from .._politeness import HostTiming

__all__ = ["crawl_prefix", "index_prefix", "shard_prefix", "token_owner"]

_OWNER: Final = re.compile(r"[A-Za-z0-9]+")
_TOKEN_OWNER: Final = re.compile(r"\d+-([A-Za-z0-9]+)_(\d+)\.")

_SIGN: Final = 1 << 63
_WRAP: Final = 1 << 64
#: a recorded edge in lua/depth.lua's `ch`: the child's fingerprint, its shard, the delta
#: (11 bytes: as text, with the child's host, an edge took ~45 and a page's edges ~930 B)
_EDGE: Final = struct.Struct("<QHB")
#: the frontier's key layout; 3: a shard's counters packed in one string, no queued count a
#: host (2: a hash of counters; 1: one sorted set a host, not lists per priority)
_LAYOUT: Final = "3"
# KEYS[1]: any key of the crawl-wide slot {g}; the crawl's layout, recorded by its first
# frontier (a crawl that has a seen-set kind but no layout was written by layout 1)
_LAYOUT_CHECK: Final = """
local g = string.sub(KEYS[1], 1, -2)
if redis.call('EXISTS', g .. 'layout') == 0 and redis.call('EXISTS', g .. 'seen') == 1 then
  return '1'
end
redis.call('SET', g .. 'layout', ARGV[1], 'NX')
return redis.call('GET', g .. 'layout')
"""


def crawl_prefix(crawl: str) -> str:
    """The prefix of every key of crawl `crawl`."""
    return f"gs:{crawl}:"


def shard_prefix(crawl: str, shard: int) -> str:
    """The prefix of the keys of one shard of crawl `crawl` (the shard is their hash tag)."""
    return f"gs:{crawl}:{{{shard}}}:"


def index_prefix(crawl: str) -> str:
    """The prefix of the keys of crawl `crawl`'s crawl-wide index (lua/global.lua)."""
    return f"gs:{crawl}:{{g}}:"


def token_owner(token: str) -> tuple[str, int] | None:
    """The owner and its incarnation named by a lease token (None: a token without one)."""
    m = _TOKEN_OWNER.match(token)
    return None if m is None else (m[1], int(m[2]))


def _to_redis(fp: int) -> str:
    return str(fp - _WRAP if fp >= _SIGN else fp)


_REV8: Final = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


def _seen_member(fp: int) -> str:
    """The exact seen-set's integer for fingerprint `fp` (unsigned 64-bit), signed decimal: its
    16 low bits reversed on top (bit k of fp is bit 63-k), its 48 high bits below. A bucket's
    members then share their top bits, and a split decides by comparing with one threshold
    (put.lua)."""
    low = fp & 0xFFFF
    return _to_redis((_REV8[low & 0xFF] << 8 | _REV8[low >> 8]) << 48 | fp >> 16)


def _from_redis(s: bytes | str) -> int:
    return int(s) % _WRAP


def _s(b: Any) -> str:
    return b.decode("utf-8", "surrogateescape") if isinstance(b, bytes) else str(b)


def _num(x: float) -> str:
    return repr(float(x))


#: the timing fields of a host's state (`h:<host>`), in `_timing`'s order
TIMING_FIELDS: Final = ("nx", "cd", "ad", "bo", "er", "dd")


def _timing(raw: Sequence[Any]) -> HostTiming:
    nx, cd, ad, bo, er, dd = raw
    return HostTiming(
        next_fetch_at=float(nx),
        crawl_delay=float(cd) if cd not in (None, b"") else None,
        adaptive_delay=float(ad or 0),
        backoff=float(bo or 0),
        errors=int(er or 0),
        dead=dd == b"1",
    )


def _bitmap(shards: frozenset[int]) -> str:
    cells = ["0"] * SHARDS
    for s in shards:
        cells[s] = "1"
    return "".join(cells)
