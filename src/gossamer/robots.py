"""robots.txt (RFC 9309): status handling, parsing, matching, and a per-host cache.

`RobotsPolicy.from_response` turns a fetch's final status, body and URL into a policy: 2xx
parsed; 3xx (after the engine's five redirects) and 4xx other than 429 allow all; 429, 5xx and
no answer disallow all, with a short expiry so it is retried soon. Matching is protego behind a
pre-processing pass and a URL transform that make it agree with Google's reference parser on
every conformance case (docs/crawler/urls-robots.md lists each fix); `allowed()` expects
canonical (percent-encoded) URLs. `RobotsCache` is one worker's cache; `gossamer.robots_store`
shares the answers between the workers of a crawl. Redirects are the engine's to follow, never
this module's."""

from __future__ import annotations

import codecs
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from protego import Protego

from .urls import LinkResolver, URLError, canonicalize, host_key

__all__ = [
    "ROBOTS_DISALLOWED",
    "ROBOTS_MAX_BYTES",
    "ROBOTS_UNREACHABLE",
    "UNAVAILABLE_TTL",
    "RobotsCache",
    "RobotsCacheStats",
    "RobotsPolicy",
    "product_token",
    "robots_url",
    "unreachable_key",
]

#: Bytes of a robots.txt that are parsed (RFC 9309 §2.5: at least 500 KiB); the rest is ignored.
ROBOTS_MAX_BYTES: Final = 500 * 1024
#: Seconds a "disallow all" verdict from an unreachable robots.txt is kept before a retry.
UNAVAILABLE_TTL: Final = 300.0
#: Seconds a fetched robots.txt is kept (RFC 9309 §2.4: SHOULD NOT be cached over 24 hours).
DEFAULT_TTL: Final = 86400.0
#: The key a URL that robots.txt's rules disallow is counted under (`dropped` in stats.json).
ROBOTS_DISALLOWED: Final = "robots/disallowed"
#: The prefix of the key a URL held back by an unreachable robots.txt is counted under, the
#: cause after it: `robots/unreachable/connect` (the last part of the fetch's error key,
#: `fetch/error/connect`), `robots/unreachable/http-503` (a 5xx or 429 answer).
ROBOTS_UNREACHABLE: Final = "robots/unreachable/"
#: Longest line read, in characters (Google's parser: a 2083 * 8 byte buffer with its NUL).
MAX_LINE_LENGTH: Final = 16663

_PLACEHOLDER: Final = "~other~"  # a User-agent value no product token can match ('~')
_TOKEN = re.compile(r"[A-Za-z_-]+")
_PCT_HEX = re.compile(r"%([0-9a-fA-F]{2})")
_EOL = re.compile(r"\r\n|\r|\n")

# record names (lower case) -> the name protego is given; typos protego also accepts
_USER_AGENT = "user-agent"
_RULES: Final = {"allow": "allow", "disallow": "disallow"}
_RECORDS: Final = {
    "user-agent": _USER_AGENT,
    "useragent": _USER_AGENT,
    "user agent": _USER_AGENT,
    "allow": "allow",
    "disallow": "disallow",
    "dissallow": "disallow",
    "dissalow": "disallow",
    "disalow": "disallow",
    "diasllow": "disallow",
    "disallaw": "disallow",
    "sitemap": "sitemap",
    "sitemaps": "sitemap",
    "site-map": "sitemap",
    "crawl-delay": "crawl-delay",
    "crawl delay": "crawl-delay",
    "request-rate": "request-rate",
    "request rate": "request-rate",
    "visit-time": "visit-time",
    "visit time": "visit-time",
}
# records of a group that are not rules: they must not split a run of User-agent lines
_GROUP_EXTENSIONS: Final = frozenset({"crawl-delay", "request-rate", "visit-time"})

KIND_PARSED: Final = "parsed"
KIND_ALLOW_ALL: Final = "allow-all"
KIND_DISALLOW_ALL: Final = "disallow-all"


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent, lower case: its first word up to '/'
    (`gossamer/0.1 (+http://…)` → `gossamer`), as the simulated web's truth defines it. Groups
    apply when their User-agent value's token equals it (case-insensitive). Raises ValueError
    for an empty user agent. RFC 9309 allows only ``[A-Za-z_-]`` in a token
    (`is_valid_product_token`): a crawler named `AB42bot` never matches a group, since the
    group's `AB42bot` reads as `AB`, as in Google's parser."""
    words = user_agent.split(None, 1)
    token = words[0].split("/", 1)[0].lower() if words else ""
    if not token:
        raise ValueError(f"user agent {user_agent!r} has no product token")
    return token


def is_valid_product_token(token: str) -> bool:
    """True when `token` is a valid RFC 9309 product token (``[A-Za-z_-]+``, nothing else)."""
    return _TOKEN.fullmatch(token) is not None


def robots_url(url: str) -> str:
    """`scheme://host[:port]/robots.txt` for the host of the http/https `url` (default port
    omitted). Raises URLError for other URLs."""
    canonical = canonicalize(url)  # validates the URL
    scheme = "https" if canonical.startswith("https:") else "http"
    return f"{scheme}://{host_key(canonical)}/robots.txt"


def path_params_query(url: str) -> str:
    """The part of `url` robots.txt rules are matched against: path, params and query, no
    fragment, '/' when empty. A port of Google's GetPathParamsQuery: `url` may lack a scheme
    (`example.com/a` → `/a`) and a leading '//' is skipped."""
    search_start = 2 if url.startswith("//") else 0
    early_path = _first_of(url, search_start)
    protocol_end = url.find("://", search_start)
    if protocol_end < 0 or (0 <= early_path < protocol_end):
        protocol_end = search_start
    else:
        protocol_end += 3
    path_start = _first_of(url, protocol_end)
    if path_start < 0:
        return "/"
    hash_at = url.find("#", search_start)
    if 0 <= hash_at < path_start:
        return "/"
    path = url[path_start:hash_at] if hash_at >= 0 else url[path_start:]
    return path if path[0] == "/" else "/" + path


def _first_of(url: str, start: int) -> int:
    """Index of the first '/', '?' or ';' at or after `start`, or -1."""
    found = -1
    for char in "/?;":
        i = url.find(char, start)
        if i >= 0 and (found < 0 or i < found):
            found = i
    return found


def escape_pattern(pattern: str) -> str:
    """A rule's path with non-ASCII characters UTF-8 percent-encoded and existing escapes
    upper-cased (Google's MaybeEscapePattern)."""
    if "%" in pattern:
        pattern = _PCT_HEX.sub(lambda m: "%" + m.group(1).upper(), pattern)
    if not pattern.isascii():
        pattern = "".join(
            c if c.isascii() else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in pattern
        )
    return pattern


def _protect(text: str) -> str:
    # protego decodes escapes before comparing; an escaped '%' (%25) it keeps as it is
    return text.replace("%", "%25") if "%" in text else text


def decode_body(body: bytes) -> str:
    """The text of a robots.txt body: cut at ROBOTS_MAX_BYTES (a cut last line is dropped),
    a UTF-8 byte-order mark (or its first bytes) removed, UTF-8 decoded with replacement
    characters for invalid bytes; a body starting with a UTF-16 BOM is decoded as UTF-16."""
    truncated = len(body) > ROBOTS_MAX_BYTES
    if truncated:
        body = body[:ROBOTS_MAX_BYTES]
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = body.decode("utf-16", "replace")
    else:
        skip = 0  # a UTF-8 BOM, or the start of one, is skipped (as Google's parser does)
        while skip < 3 and body[skip : skip + 1] == codecs.BOM_UTF8[skip : skip + 1]:
            skip += 1
        text = body[skip:].decode("utf-8", "replace")
    text = text.lstrip("\ufeff")
    if truncated:
        cut = max(text.rfind("\n"), text.rfind("\r"))
        text = text[: cut + 1] if cut >= 0 else ""
    return text


def _split_record(line: str) -> tuple[str, str] | None:
    """(record name as protego knows it, value) of a line without comment, or None."""
    key, colon, value = line.partition(":")
    if colon:
        name = _RECORDS.get(key.strip().lower())
        if name is not None:
            return name, value.strip()
    words = line.split()
    for n in (2, 1):  # "User agent foo", "Disallow /path" (no colon)
        if len(words) > n:
            name = _RECORDS.get(" ".join(words[:n]).lower())
            if name is not None:
                return name, " ".join(words[n:])
    return None


def _agent_value(value: str, token: str) -> str:
    if value[:1] == "*" and (len(value) == 1 or value[1].isspace()):
        return "*"
    match = _TOKEN.match(value)
    if match is not None and match.group(0).lower() == token:
        return token
    return _PLACEHOLDER


def prepare(text: str, token: str) -> str:
    """The robots.txt `text` rewritten for protego and the product token `token` (fixes 1, 2 and
    4 of the module docstring; rule paths also get fix 3's pattern escaping)."""
    out: list[str] = []
    pending: list[str] = []  # group extensions met inside a run of User-agent lines
    in_agents = False
    for raw in _EOL.split(text):
        line = raw[:MAX_LINE_LENGTH]
        hash_at = line.find("#")
        if hash_at >= 0:
            line = line[:hash_at]
        line = line.strip()
        if not line:
            if pending:  # a blank line ends a run of User-agent lines and its extensions
                out.extend(pending)
                pending.clear()
                in_agents = False
            continue
        record = _split_record(line)
        if record is None:
            continue  # unknown record: ignored, and it does not end a group
        name, value = record
        if name == _USER_AGENT:
            in_agents = True
            out.append(f"user-agent: {_agent_value(value, token)}")
            continue
        if in_agents and name in _GROUP_EXTENSIONS:
            pending.append(f"{name}: {value}")
            continue
        if name == "sitemap":
            out.append(f"sitemap: {value}")
            continue
        if in_agents:
            in_agents = False
            out.extend(pending)
            pending.clear()
        if name in _RULES:
            value = _protect(escape_pattern(value))
        out.append(f"{name}: {value}")
    out.extend(pending)
    return "\n".join(out)


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """What one host's robots.txt says to one crawler (identified by its product token).

    kind: "parsed" (a file was read), "allow-all" (4xx, or too many redirects), or
    "disallow-all" (5xx, 429 or unreachable: temporary, `expires_at` is short; `error`: the
    fetch's error key when there was no answer). `allowed(url)` takes URLs of this host as
    the crawler has them (canonical form); `refusal()` says why one is not allowed."""

    kind: str
    fetched_at: float
    expires_at: float
    agent: str
    status: int | None = None
    crawl_delay: float | None = None
    sitemaps: tuple[str, ...] = ()
    _parser: Protego | None = field(default=None, repr=False, compare=False)
    error: str | None = None

    @classmethod
    def from_response(
        cls,
        status: int | None,
        body: bytes | None,
        *,
        user_agent: str,
        now: float,
        ttl: float = DEFAULT_TTL,
        unavailable_ttl: float = UNAVAILABLE_TTL,
        final_url: str | None = None,
        error: str | None = None,
    ) -> RobotsPolicy:
        """The policy from fetching robots.txt (after the engine followed ≤ 5 redirects).

        status: the final HTTP status, or None when there was no answer (refused, reset,
        time-out, DNS failure). 2xx → parse `body`; 3xx (redirect limit reached) and 4xx other
        than 429 → allow all (RFC 9309 §2.3.1.2-3); 429, 5xx, None and anything else → disallow
        all, expiring after `unavailable_ttl` (§2.3.1.4). `final_url` (the URL the body came
        from) resolves relative Sitemap URLs. `user_agent` may be a full User-Agent header.
        `error`: the fetch's error key (`fetch/error/dns`) when there was no answer."""
        agent = product_token(user_agent)
        if status is not None and 200 <= status < 300:
            return cls.parse(
                body or b"", user_agent=agent, now=now, ttl=ttl, final_url=final_url, status=status
            )
        if status is not None and (300 <= status < 400 or (400 <= status < 500 and status != 429)):
            return cls(KIND_ALLOW_ALL, now, now + ttl, agent, status)
        return cls(
            KIND_DISALLOW_ALL, now, now + unavailable_ttl, agent, status,
            error=error if status is None else None,
        )  # fmt: skip

    @classmethod
    def parse(
        cls,
        body: bytes | str,
        *,
        user_agent: str,
        now: float = 0.0,
        ttl: float = DEFAULT_TTL,
        final_url: str | None = None,
        status: int | None = 200,
    ) -> RobotsPolicy:
        """The policy of a robots.txt file's content (bytes as served, or text)."""
        agent = product_token(user_agent)
        text = decode_body(body) if isinstance(body, bytes) else body
        parser = Protego.parse(prepare(text, agent))
        delay = parser.crawl_delay(agent)
        crawl_delay = float(delay) if delay is not None and math.isfinite(delay) else None
        sitemaps: dict[str, None] = {}
        for value in parser.sitemaps:
            url = _sitemap_url(value, final_url)
            if url is not None:
                sitemaps[url] = None
        return cls(KIND_PARSED, now, now + ttl, agent, status, crawl_delay, tuple(sitemaps), parser)

    def allowed(self, url: str) -> bool:
        """May the crawler fetch `url` (a URL of this host)? Always False while disallow-all."""
        parser = self._parser
        if parser is None:
            return self.kind == KIND_ALLOW_ALL
        path = _protect(path_params_query(url))
        # a scheme and host in front keep a path starting with '//' a path for protego
        return bool(parser.can_fetch("http://h" + path, self.agent))

    def refusal(self) -> str:
        """The key a URL this policy does not allow is counted under: ROBOTS_DISALLOWED for
        the file's rules; for an unreachable robots.txt (disallow-all, RFC 9309 §2.3.1.4)
        ROBOTS_UNREACHABLE and its cause: the error (`robots/unreachable/dns`,
        `…/connect`, `…/blocked-address`), or the status (`robots/unreachable/http-503`)."""
        if self.kind != KIND_DISALLOW_ALL:
            return ROBOTS_DISALLOWED
        if self.status is not None:
            return f"{ROBOTS_UNREACHABLE}http-{self.status}"
        return unreachable_key(self.error)

    def expired(self, now: float) -> bool:
        """True once `now` reaches `expires_at` (fetch robots.txt again)."""
        return now >= self.expires_at


def _sitemap_url(value: str, base: str | None) -> str | None:
    value = value.strip()
    if not value:
        return None
    if base is not None:
        try:
            return LinkResolver(base, strip_session_ids=False).resolve(value)
        except URLError:
            pass
    try:
        return canonicalize(value, strip_session_ids=False)
    except URLError:
        return None


@dataclass(frozen=True, slots=True)
class RobotsCacheStats:
    """A snapshot of a RobotsCache."""

    size: int
    capacity: int
    hits: int
    misses: int
    expired: int
    evictions: int
    puts: int


class RobotsCache:
    """Policies by host key, least recently used evicted beyond `capacity`.

    `get` returns None when the host is absent or its policy has expired (the expired entry is
    dropped): the caller then fetches robots.txt again. Not thread-safe (one per event loop)."""

    __slots__ = ("_entries", "_evictions", "_expired", "_hits", "_misses", "_puts", "capacity")

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[str, RobotsPolicy] = OrderedDict()
        self._hits = self._misses = self._expired = self._evictions = self._puts = 0

    def get(self, host_key: str, now: float) -> RobotsPolicy | None:
        """The policy of `host_key` valid at `now`, or None (absent or expired)."""
        policy = self._entries.get(host_key)
        if policy is None:
            self._misses += 1
            return None
        if now >= policy.expires_at:
            del self._entries[host_key]
            self._expired += 1
            self._misses += 1
            return None
        self._entries.move_to_end(host_key)
        self._hits += 1
        return policy

    def put(self, host_key: str, policy: RobotsPolicy) -> None:
        """Store (or replace) the policy of `host_key`, evicting the least recently used."""
        self._puts += 1
        entries = self._entries
        entries[host_key] = policy
        entries.move_to_end(host_key)
        while len(entries) > self.capacity:
            entries.popitem(last=False)
            self._evictions += 1

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, host_key: object) -> bool:
        return host_key in self._entries

    def statistics(self) -> RobotsCacheStats:
        return RobotsCacheStats(
            len(self._entries),
            self.capacity,
            self._hits,
            self._misses,
            self._expired,
            self._evictions,
            self._puts,
        )


def unreachable_key(error: str | None) -> str:
    """The key the URLs of a host whose robots.txt fetch failed with `error` (a fetch error
    key, `fetch/error/<cause>`) are counted and failed under: `robots/unreachable/<cause>`."""
    cause = (error or "").rpartition("/")[2] or "no-answer"
    return ROBOTS_UNREACHABLE + cause
