"""Where to connect for a host: resolver overrides, a DNS cache, and the private-address guard.

Overrides come from `--resolve` values and `--resolve-file` lines (`HOST:IP`, curl's
`HOST:PORT:IP` and `HOST:PORT:IP:PORT2`, wildcard hosts; the most specific rule wins). Every
other name is looked up with getaddrinfo in a thread (the event loop never blocks), cached for
`ttl` seconds, failures for `negative_ttl`, one query shared by concurrent lookups. Addresses
that are not globally routable are refused with `fetch/error/blocked-address` unless
`allow_private`, overrides included: the address checked is the one connected to
(docs/crawler/fetch.md, "Resolution")."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._types import ERROR_BLOCKED_ADDRESS, ERROR_DNS

GetAddrInfo = Callable[[str], Awaitable[Sequence[str]]]


@dataclass(frozen=True, slots=True)
class Address:
    """Where to connect: an IP literal (no brackets) and a port."""

    ip: str
    port: int


class ResolveError(Exception):
    """A host cannot be fetched: `key` is ERROR_DNS or ERROR_BLOCKED_ADDRESS."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key}: {detail}")
        self.key = key
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Override:
    """One resolver override rule (see the module docstring)."""

    host: str  # lower-case name, "*.suffix", or "*" for any name
    port: int | None  # None: any port
    ip: str
    to_port: int | None  # None: the same port

    def to_line(self) -> str:
        ip = f"[{self.ip}]" if ":" in self.ip else self.ip
        port = "" if self.port is None else str(self.port)
        to_port = "" if self.to_port is None else str(self.to_port)
        return f"{self.host}:{port}:{ip}:{to_port}"


@dataclass(frozen=True, slots=True)
class ResolverStats:
    overrides: int
    cached_names: int
    lookups: int
    failures: int
    blocked: int


def _split_fields(line: str) -> list[str]:
    """Split on ':' outside of [brackets]."""
    fields: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in line:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == ":" and depth == 0:
            fields.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    fields.append("".join(cur))
    return fields


def _parse_port(text: str, what: str, line: str) -> int | None:
    if text == "":
        return None
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"invalid {what} {text!r} in resolve rule {line!r}")
    return int(text)


def _parse_ip(text: str, line: str) -> str:
    text = text.split(",", 1)[0].strip()  # curl --resolve allows a list: the first is used
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(
            f"invalid resolve rule {line!r}: {text!r} is not an IP address "
            "(expected HOST:IP, HOST:PORT:IP or HOST:PORT:IP:PORT2)"
        ) from None


def _parse_host(text: str, line: str) -> str:
    host = text.strip().lower().rstrip(".")
    if host in ("", "*"):
        return "*"
    if host.startswith("[") and host.endswith("]"):
        return _parse_ip(host, line)
    bare = host[2:] if host.startswith("*.") else host
    if not bare or "*" in bare or any(c in bare for c in " /\\@[]"):
        raise ValueError(f"invalid host {text!r} in resolve rule {line!r}")
    return host


def parse_override(line: str) -> Override:
    """Parse one rule; raises ValueError with a message naming the rule."""
    text = line.strip()
    fields = _split_fields(text)
    if len(fields) == 2:
        host, ip = fields
        return Override(_parse_host(host, text), None, _parse_ip(ip, text), None)
    if len(fields) == 3:
        host, port, ip = fields
        return Override(
            _parse_host(host, text), _parse_port(port, "port", text), _parse_ip(ip, text), None
        )
    if len(fields) == 4:
        host, port, ip, to_port = fields
        return Override(
            _parse_host(host, text),
            _parse_port(port, "port", text),
            _parse_ip(ip, text),
            _parse_port(to_port, "target port", text),
        )
    raise ValueError(
        f"invalid resolve rule {line!r}: expected HOST:IP, HOST:PORT:IP or HOST:PORT:IP:PORT2"
    )


def read_resolve_file(path: str | Path) -> list[Override]:
    """Rules of a resolve file, one per line; raises ValueError naming the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read resolve file {p}: {exc.strerror or exc}") from None
    rules = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            rules.append(parse_override(line))
        except ValueError as exc:
            raise ValueError(f"{p}:{n}: {exc}") from None
    return rules


@functools.lru_cache(maxsize=65536)
def is_blocked_ip(ip: str) -> bool:
    """True for addresses a public crawler must not connect to: anything not globally
    routable (loopback, RFC 1918, link-local, CGNAT, documentation, ...) and multicast."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return True
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return not addr.is_global or addr.is_multicast


@functools.lru_cache(maxsize=4096)
def _ip_literal(host: str) -> str | None:
    h = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(h))
    except ValueError:
        return None


class _Entry:
    __slots__ = ("error", "expires", "ips")

    def __init__(self, expires: float, ips: tuple[str, ...], error: ResolveError | None) -> None:
        self.expires = expires
        self.ips = ips
        self.error = error


async def _system_getaddrinfo(host: str) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    v4 = [str(info[4][0]) for info in infos if info[0] == socket.AF_INET]
    v6 = [str(info[4][0]) for info in infos if info[0] == socket.AF_INET6]
    return list(dict.fromkeys(v4 + v6))  # IPv4 first: one address is used, no happy eyeballs


class Resolver:
    """Host → `Address`, with overrides, a DNS cache and the private-address guard.

    `lookup()` and `ip_of()` answer synchronously from overrides and the cache (the engine's
    per-IP politeness uses `ip_of` before fetching); `resolve()` also queries DNS. One
    resolver belongs to one event loop.
    """

    def __init__(
        self,
        overrides: Iterable[Override | str] = (),
        *,
        allow_private: bool = False,
        ttl: float = 300.0,
        negative_ttl: float = 30.0,
        lookup_timeout: float = 10.0,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        getaddrinfo: GetAddrInfo | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self.lookup_timeout = lookup_timeout
        self.max_entries = max_entries
        self._clock = clock
        self._getaddrinfo: GetAddrInfo = getaddrinfo or _system_getaddrinfo
        self._exact: dict[tuple[str, int | None], Override] = {}
        self._wild: list[Override] = []
        self.overrides: list[Override] = []
        for item in overrides:
            rule = parse_override(item) if isinstance(item, str) else item
            self.overrides.append(rule)
            if rule.host == "*" or rule.host.startswith("*."):
                self._wild.append(rule)
            else:
                self._exact.setdefault((rule.host, rule.port), rule)
        # most specific first: longer suffix, then a given port before any port
        self._wild.sort(key=lambda r: (-len(r.host), r.port is None))
        self._memo: dict[tuple[str, int], Address | None] = {}
        self._cache: dict[str, _Entry] = {}
        self._pending: dict[str, asyncio.Task[_Entry]] = {}
        self._lookups = 0
        self._failures = 0
        self._blocked = 0

    @classmethod
    def from_settings(
        cls,
        resolve: Sequence[str] = (),
        resolve_file: str | Path | None = None,
        *,
        allow_private: bool = False,
        **kwargs: object,
    ) -> Resolver:
        """From `--resolve` values and a `--resolve-file`; raises ValueError for bad rules.
        File rules come first; a `--resolve` rule for the same name and port wins."""
        rules: list[Override] = list(map(parse_override, reversed(resolve)))
        if resolve_file is not None:
            rules += read_resolve_file(resolve_file)
        return cls(rules, allow_private=allow_private, **kwargs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ overrides
    def _override(self, host: str, port: int) -> Address | None:
        key = (host, port)
        try:
            return self._memo[key]
        except KeyError:
            pass
        rule = self._exact.get(key) or self._exact.get((host, None))
        if rule is None:
            for w in self._wild:
                if (w.host == "*" or host.endswith(w.host[1:])) and w.port in (None, port):
                    rule = w
                    break
        addr = None if rule is None else Address(rule.ip, rule.to_port or port)
        if len(self._memo) >= self.max_entries:
            self._memo.clear()
        self._memo[key] = addr
        return addr

    def _check(self, host: str, addr: Address) -> Address:
        if not self.allow_private and is_blocked_ip(addr.ip):
            self._blocked += 1
            raise ResolveError(
                ERROR_BLOCKED_ADDRESS, f"{host} is at {addr.ip}, a non-public address"
            )
        return addr

    # ------------------------------------------------------------------ answers
    def lookup(self, host: str, port: int = 80) -> Address | None:
        """The address from overrides or the cache, None when DNS must be asked; raises
        ResolveError for a blocked address or a cached failure. `host` is lower-case."""
        addr = self._override(host, port)
        if addr is not None:
            return self._check(host, addr)
        literal = _ip_literal(host)
        if literal is not None:
            return self._check(host, Address(literal, port))
        entry = self._cache.get(host)
        if entry is None or entry.expires <= self._clock():
            return None
        if entry.error is not None:
            raise entry.error
        return self._pick(host, entry.ips, port)

    def _pick(self, host: str, ips: tuple[str, ...], port: int) -> Address:
        if self.allow_private:
            return Address(ips[0], port)
        for ip in ips:
            if not is_blocked_ip(ip):
                return Address(ip, port)
        self._blocked += 1
        raise ResolveError(
            ERROR_BLOCKED_ADDRESS, f"{host} resolves only to non-public addresses {list(ips)}"
        )

    async def resolve(self, host: str, port: int = 80) -> Address:
        """Where to connect for `host` (lower-case) on `port`; raises ResolveError."""
        addr = self.lookup(host, port)
        if addr is not None:
            return addr
        task = self._pending.get(host)
        if task is None:
            # one query per name, owned by the resolver: a cancelled caller does not cancel
            # it for the others (aclose() cancels what is left)
            task = asyncio.get_running_loop().create_task(self._query(host))
            self._pending[host] = task
            task.add_done_callback(functools.partial(self._forget, host))
        entry = await asyncio.shield(task)
        if entry.error is not None:
            raise entry.error
        return self._pick(host, entry.ips, port)

    def _forget(self, host: str, _task: asyncio.Task[_Entry]) -> None:
        self._pending.pop(host, None)

    async def _query(self, host: str) -> _Entry:
        self._lookups += 1
        try:
            async with asyncio.timeout(self.lookup_timeout):
                ips = tuple(await self._getaddrinfo(host))
            error = None if ips else ResolveError(ERROR_DNS, f"{host}: no address")
        except TimeoutError:
            ips, error = (), ResolveError(ERROR_DNS, f"{host}: lookup timed out")
        except (OSError, UnicodeError) as exc:
            ips, error = (), ResolveError(ERROR_DNS, f"{host}: {exc}")
        if error is not None:
            self._failures += 1
        ttl = self.negative_ttl if error else self.ttl
        if len(self._cache) >= self.max_entries:
            now = self._clock()
            self._cache = {h: e for h, e in self._cache.items() if e.expires > now}
            if len(self._cache) >= self.max_entries:
                self._cache.clear()
        entry = _Entry(self._clock() + ttl, ips, error)
        self._cache[host] = entry
        return entry

    def ip_of(self, host: str, port: int = 80) -> str | None:
        """The IP `host` will be fetched from, if known now (override or cached), else None.
        Never raises and never queries DNS (await `resolve()` for that)."""
        try:
            addr = self.lookup(host.lower(), port)
        except ResolveError:
            return None
        return None if addr is None else addr.ip

    async def aclose(self) -> None:
        """Cancel lookups still running. Idempotent."""
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def statistics(self) -> ResolverStats:
        return ResolverStats(
            overrides=len(self.overrides),
            cached_names=len(self._cache),
            lookups=self._lookups,
            failures=self._failures,
            blocked=self._blocked,
        )
