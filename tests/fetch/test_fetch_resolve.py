"""The resolver: override rules, the DNS cache (fake getaddrinfo, injected clock), the guard."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from _fetch_helpers import run

from gossamer.fetch import (
    ERROR_BLOCKED_ADDRESS,
    ERROR_DNS,
    Address,
    Override,
    ResolveError,
    Resolver,
    is_blocked_ip,
    parse_override,
    read_resolve_file,
)


class FakeDNS:
    """getaddrinfo stand-in: a table, a call log, optional delay or failure."""

    def __init__(self, table: dict[str, list[str]], delay: float = 0.0) -> None:
        self.table = table
        self.delay = delay
        self.calls: list[str] = []

    async def __call__(self, host: str) -> Sequence[str]:
        self.calls.append(host)
        if self.delay:
            await asyncio.sleep(self.delay)
        if host not in self.table:
            raise OSError(-2, "Name or service not known")
        return self.table[host]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("www.a.example:127.0.0.1", Override("www.a.example", None, "127.0.0.1", None)),
        ("WWW.A.example.:80:10.0.0.1", Override("www.a.example", 80, "10.0.0.1", None)),
        ("h:80:127.1.0.13:41234", Override("h", 80, "127.1.0.13", 41234)),
        ("*.example:127.0.0.1", Override("*.example", None, "127.0.0.1", None)),
        ("::127.0.0.2:", Override("*", None, "127.0.0.2", None)),
        ("*:443:[::1]:8443", Override("*", 443, "::1", 8443)),
        ("h:[2001:db8::1]", Override("h", None, "2001:db8::1", None)),
        ("h:80:1.2.3.4,5.6.7.8", Override("h", 80, "1.2.3.4", None)),
    ],
)
def test_parse_override(line: str, rule: Override) -> None:
    assert parse_override(line) == rule
    assert parse_override(rule.to_line()) == rule


@pytest.mark.parametrize(
    "line",
    ["h", "h:not-an-ip", "h:80:host.example:81", "h:99999:1.2.3.4", "h:x:1.2.3.4", "a:b:c:d:e",
     "a*b:1.2.3.4", "h:80:1.2.3.4:0", "h:80:1.2.3.4:x"],
)  # fmt: skip
def test_bad_override_is_a_clear_error(line: str) -> None:
    with pytest.raises(ValueError, match=r"resolve rule|host|port"):
        parse_override(line)


def test_most_specific_rule_wins() -> None:
    r = Resolver(
        [
            "*:127.0.0.9",
            "*.example:127.0.0.8",
            "*.b.example:127.0.0.7",
            "*.b.example:8080:127.0.0.6:9090",
            "www.b.example:127.0.0.5",
            "www.b.example:443:127.0.0.4:4443",
        ],
        allow_private=True,
    )
    assert r.lookup("www.b.example", 80) == Address("127.0.0.5", 80)
    assert r.lookup("www.b.example", 443) == Address("127.0.0.4", 4443)
    assert r.lookup("x.b.example", 80) == Address("127.0.0.7", 80)
    assert r.lookup("x.b.example", 8080) == Address("127.0.0.6", 9090)
    assert r.lookup("b.example", 80) == Address("127.0.0.8", 80)  # *.example, not *.b.example
    assert r.lookup("elsewhere.test", 80) == Address("127.0.0.9", 80)
    assert r.ip_of("WWW.B.EXAMPLE") == "127.0.0.5"


def test_resolve_file_and_flags(tmp_path: Path) -> None:
    f = tmp_path / "resolve.txt"
    f.write_text(
        "# the simulated web\nwww.h0.example:80:127.1.0.1:4000\n\n  blog.h0.example:127.1.0.1 # x\n"
    )
    assert read_resolve_file(f) == [
        Override("www.h0.example", 80, "127.1.0.1", 4000),
        Override("blog.h0.example", None, "127.1.0.1", None),
    ]
    r = Resolver.from_settings(["www.h0.example:80:127.1.0.2:5000"], f, allow_private=True)
    assert r.lookup("www.h0.example") == Address("127.1.0.2", 5000)  # the flag wins
    assert r.lookup("blog.h0.example") == Address("127.1.0.1", 80)
    bad = tmp_path / "bad.txt"
    bad.write_text("ok.example:127.0.0.1\nnot a rule\n")
    with pytest.raises(ValueError, match=r"bad.txt:2"):
        read_resolve_file(bad)
    with pytest.raises(ValueError, match="cannot read"):
        read_resolve_file(tmp_path / "missing.txt")


@pytest.mark.parametrize(
    ("ip", "blocked"),
    [("127.0.0.1", True), ("127.1.0.13", True), ("10.1.2.3", True), ("192.168.0.1", True),
     ("172.16.5.4", True), ("169.254.1.1", True), ("100.64.0.1", True), ("0.0.0.0", True),
     ("224.0.0.1", True), ("::1", True), ("fe80::1", True), ("fc00::1", True),
     ("::ffff:127.0.0.1", True), ("8.8.8.8", False), ("93.184.216.34", False),
     ("2606:4700::1111", False), ("nonsense", True)],
)  # fmt: skip
def test_blocked_addresses(ip: str, blocked: bool) -> None:
    assert is_blocked_ip(ip) is blocked


def test_overrides_are_guarded_too() -> None:
    r = Resolver(["h.example:127.0.0.1", "pub.example:8.8.8.8"])
    with pytest.raises(ResolveError) as err:
        r.lookup("h.example")
    assert err.value.key == ERROR_BLOCKED_ADDRESS
    assert r.ip_of("h.example") is None  # never raises
    assert r.lookup("pub.example") == Address("8.8.8.8", 80)
    assert r.statistics().blocked == 2  # each refusal counts


def test_ip_literal_hosts() -> None:
    r = Resolver(allow_private=False)
    assert r.lookup("8.8.4.4", 8080) == Address("8.8.4.4", 8080)
    assert r.lookup("[2606:4700::1111]") == Address("2606:4700::1111", 80)
    with pytest.raises(ResolveError):
        r.lookup("192.168.1.1")


def test_dns_cache_ttl_and_coalescing() -> None:
    dns = FakeDNS({"a.example": ["93.184.216.34", "93.184.216.35"]}, delay=0.05)
    clock = Clock()
    r = Resolver(ttl=60, negative_ttl=5, getaddrinfo=dns, clock=clock)

    async def go() -> None:
        assert r.ip_of("a.example") is None  # not known before a lookup
        addrs = await asyncio.gather(*(r.resolve("a.example", 80) for _ in range(10)))
        assert set(addrs) == {Address("93.184.216.34", 80)}
        assert dns.calls == ["a.example"]  # ten callers, one query
        assert r.ip_of("a.example") == "93.184.216.34"
        assert await r.resolve("a.example", 8080) == Address("93.184.216.34", 8080)
        clock.now += 59
        await r.resolve("a.example")
        assert len(dns.calls) == 1  # still cached
        clock.now += 2
        assert r.ip_of("a.example") is None  # expired
        await r.resolve("a.example")
        assert len(dns.calls) == 2
        # failures are cached for negative_ttl
        for _ in range(3):
            with pytest.raises(ResolveError) as err:
                await r.resolve("nx.example")
            assert err.value.key == ERROR_DNS
        assert dns.calls.count("nx.example") == 1
        clock.now += 6
        with pytest.raises(ResolveError):
            await r.resolve("nx.example")
        assert dns.calls.count("nx.example") == 2
        st = r.statistics()
        assert (st.lookups, st.failures) == (4, 2)

    run(go())


def test_dns_private_answers_are_skipped_or_blocked() -> None:
    dns = FakeDNS({"mixed.example": ["10.0.0.1", "93.184.216.34"], "lan.example": ["10.0.0.2"]})
    r = Resolver(getaddrinfo=dns)

    async def go() -> None:
        assert await r.resolve("mixed.example") == Address("93.184.216.34", 80)
        with pytest.raises(ResolveError) as err:
            await r.resolve("lan.example")
        assert err.value.key == ERROR_BLOCKED_ADDRESS
        allowing = Resolver(getaddrinfo=dns, allow_private=True)
        assert await allowing.resolve("lan.example") == Address("10.0.0.2", 80)

    run(go())


def test_dns_timeout_and_cancelled_caller() -> None:
    slow = FakeDNS({"slow.example": ["93.184.216.34"]}, delay=0.3)
    r = Resolver(getaddrinfo=slow, lookup_timeout=0.05)

    async def go() -> None:
        with pytest.raises(ResolveError, match="timed out"):
            await r.resolve("slow.example")
        # a caller cancelled while waiting does not cancel the lookup for the others
        r2 = Resolver(getaddrinfo=slow)
        first = asyncio.create_task(r2.resolve("slow.example"))
        second = asyncio.create_task(r2.resolve("slow.example"))
        await asyncio.sleep(0.05)
        first.cancel()
        assert await second == Address("93.184.216.34", 80)
        with pytest.raises(asyncio.CancelledError):
            await first
        await r2.aclose()

    run(go())


def test_real_getaddrinfo_for_localhost() -> None:
    async def go() -> Address:
        return await Resolver(allow_private=True).resolve("localhost", 8080)

    addr = run(go())
    assert addr.ip in ("127.0.0.1", "::1") and addr.port == 8080
