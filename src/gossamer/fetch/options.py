"""The crawl-wide request headers (`-H`) and proxy (`--proxy`) settings: parsing and checks.

Both are checked once at start (config.py calls these; a ValueError is one line saying what
is wrong and how to fix it) and again by `CurlFetcher`, which takes the parsed values.
docs/crawler/fetch.md, "Request headers" and "Proxy", says why each rule is what it is.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

from ..urls import split_userinfo

# RFC 9110 §5.6.2: a field name is a token
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
# a field value as sent: visible ASCII, spaces and tabs inside (no CR, LF, NUL, no non-ASCII:
# request heads are latin-1 on the wire and in the WARC, and a UTF-8 value means another
# thing to every server)
_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?\Z")

# Names gossamer refuses in -H, with the reason given in the error.
_REFUSED: dict[str, str] = {
    "host": "gossamer sends each URL's own Host; use --resolve to send a host to another "
    "address",
    "content-length": "gossamer sends only GET requests, without a body",
    "transfer-encoding": "gossamer sends only GET requests, without a body",
    "expect": "gossamer sends only GET requests, without a body",
    "connection": "gossamer keeps connections alive itself (a hop-by-hop header)",
    "keep-alive": "gossamer keeps connections alive itself (a hop-by-hop header)",
    "te": "a hop-by-hop header gossamer does not handle",
    "trailer": "a hop-by-hop header gossamer does not handle",
    "upgrade": "gossamer speaks HTTP/1.1 only",
    "proxy-authorization": "put the proxy's user and password in the --proxy URL "
    "(http://USER:PASSWORD@host:port)",
    "proxy-connection": "a hop-by-hop header gossamer does not handle",
    "user-agent": "set it with --user-agent (robots.txt rules are matched against it)",
    "range": "every response would be a part of the page",
    "if-range": "every response would be a part of the page",
    "if-none-match": "every page would answer 304 Not Modified; use --recrawl OLD_DIR for "
    "conditional requests",
    "if-modified-since": "every page would answer 304 Not Modified; use --recrawl OLD_DIR for "
    "conditional requests",
    "if-match": "a precondition on every page",
    "if-unmodified-since": "a precondition on every page",
}
# the codings libcurl decodes here (ACCEPT_ENCODING ""): a response in any other would be
# stored and parsed undecoded
_DECODED_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "identity", "*"})

PROXY_FROM_ENV = "env"  # --proxy env: the http_proxy / https_proxy / no_proxy variables
PROXY_NONE = "none"  # --proxy none: no proxy (the default)
_PROXY_SCHEMES = ("http", "https")
DEFAULT_PROXY_PORT = 1080  # libcurl's (and curl's) when the proxy URL names none


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` → (name, value), with the value's outer spaces removed; ValueError
    (saying what is wrong) for anything gossamer would not send as given."""
    name, sep, value = text.partition(":")
    if not sep:
        raise ValueError(f"header {_shown(text)} has no colon; write it as 'Name: value'")
    return _checked(name, value, text)


def _checked(name: str, value: str, shown_as: str) -> tuple[str, str]:
    shown = _shown(shown_as)
    if not _TOKEN.match(name):
        raise ValueError(
            f"header {shown}: the name {_shown(name)} is not a valid header name (letters, "
            "digits and !#$%&'*+-.^_`|~; no spaces)"
        )
    value = value.strip(" \t")
    if not value:
        raise ValueError(f"header {shown} has an empty value")
    if not _VALUE.match(value):
        raise ValueError(
            f"header {shown}: the value holds a line break, a control or a non-ASCII "
            "character (only printable ASCII is sent)"
        )
    return name, value


def check_headers(entries: list[str]) -> list[tuple[str, str]]:
    """The crawl-wide headers (`Name: value` each) parsed and checked (`check_header_pairs`).
    ValueError names the first problem."""
    return check_header_pairs([parse_header(entry) for entry in entries])


def check_header_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Crawl-wide (name, value) headers checked: valid names and values, the names gossamer
    sets itself or that would break the crawl refused, each name once, Accept-Encoding only
    codings gossamer decodes. ValueError names the first problem."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, value in pairs:
        name, value = _checked(name, value, f"{name}: {value}")
        lower = name.lower()
        reason = _REFUSED.get(lower)
        if reason is not None:
            raise ValueError(f"header {name} cannot be set with -H: {reason}")
        if lower in seen:
            raise ValueError(f"header {name} is given twice; give each header once")
        if lower == "accept-encoding":
            codings = {c.split(";")[0].strip().lower() for c in value.split(",")}
            unknown = sorted(codings - _DECODED_CODINGS)
            if unknown:
                raise ValueError(
                    f"header Accept-Encoding: gossamer cannot decode {', '.join(unknown)}; "
                    "use gzip, deflate, br or identity"
                )
        seen.add(lower)
        out.append((name, value))
    return out


def _shown(text: str) -> str:
    """`text` quoted for an error line, cut short."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def check_proxy(text: str) -> str:
    """A proxy setting as used: a proxy URL `http(s)://[USER:PASSWORD@]HOST[:PORT]` (the
    port defaulting to 1080, as in curl), `env` or `none`. ValueError otherwise; its message
    never shows the password."""
    text = text.strip()
    if text.lower() in (PROXY_FROM_ENV, PROXY_NONE):
        return text.lower()
    shown = redact_proxy(text)
    if any(c in text for c in "\r\n\t\0 "):
        raise ValueError(f"proxy {shown} holds a space or a control character")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError(
            f"proxy {shown} is not a valid URL (a bad port?); expected "
            "http://[USER:PASSWORD@]HOST:PORT, env or none"
        ) from None
    if parts.scheme.lower() not in _PROXY_SCHEMES:
        raise ValueError(
            f"proxy {shown}: expected an http:// or https:// URL "
            "(http://[USER:PASSWORD@]HOST:PORT), env or none"
        )
    if not parts.hostname:
        raise ValueError(f"proxy {shown} names no host; expected http://HOST:PORT")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"proxy {shown}: a proxy URL has no path or query; expected "
                         "http://HOST:PORT")  # fmt: skip
    if port == 0:
        raise ValueError(f"proxy {shown}: port 0 is not a port")
    return text


def redact_proxy(url: str | None) -> str | None:
    """`url` with its password (if any) replaced by `****`: what may be printed or logged.
    Anything before the last `@` counts as user:password, even in a malformed URL."""
    parts = None if url is None else split_userinfo(url)
    if parts is None:
        return url
    scheme, user, password, hostport = parts
    return f"{scheme}{user}{':****' if password is not None else ''}@{hostport}"


def proxy_address(url: str) -> tuple[str, int]:
    """(host, port) of a proxy URL that `check_proxy` accepted."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    return parts.hostname, parts.port or DEFAULT_PROXY_PORT


def proxy_credentials(url: str) -> tuple[str, str] | None:
    """(user, password), percent-decoded, of a proxy URL, or None."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    return unquote(parts.username), unquote(parts.password or "")


def probe_proxy(url: str, timeout: float) -> str | None:
    """None when a TCP connection to the proxy opens within `timeout` seconds, else what
    went wrong, for the error line (a dead proxy fails the crawl at start, not every fetch)."""
    host, port = proxy_address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as exc:
        return f"its host {host} does not resolve ({exc.strerror})"
    except TimeoutError:
        return f"{host}:{port} did not accept a connection within {timeout:g} s"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"


def dead_proxy(proxy: str, timeout: float) -> str | None:
    """The error line to print when the crawl's proxy (a value `check_proxy` accepted)
    accepts no connection, else None: checked once at start, since a dead proxy would fail
    every fetch of the crawl. `none` and `env` are not probed."""
    if proxy in (PROXY_NONE, PROXY_FROM_ENV):
        return None
    problem = probe_proxy(proxy, timeout)
    if problem is None:
        return None
    return (
        f"the proxy {redact_proxy(proxy)} cannot be reached: {problem}; check --proxy "
        f"(or run without it)"
    )
