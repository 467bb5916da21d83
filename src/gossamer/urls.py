"""URLs: WHATWG parsing, crawler canonicalisation, fingerprints, host keys, registrable domains.

Every URL the crawler stores, dedupes, partitions or compares is canonical (`canonicalize`):
the WHATWG serialisation of an absolute http(s) URL without its fragment, with normalised
percent-escapes, session-id parameters and an empty query removed and no trailing dot on the
host. Nothing else changes: the query's order, repeated slashes and the path's case can change
what a server answers. `host_key` is "the same host" everywhere (politeness, scope, partitions,
robots.txt): the host name plus a non-default port, never the scheme; `host_of` is only the
name to resolve. `canonicalize` and the other single-URL functions raise `URLError` (a
`ValueError`); `LinkResolver.resolve` never raises. The canonical form, which key serves what,
and the parsers (can_ada, ada_url where it refuses): docs/crawler/urls-robots.md."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from functools import lru_cache
from typing import Final, Protocol

import ada_url
import can_ada
import xxhash
from publicsuffixlist import PublicSuffixList

__all__ = [
    "NON_HTML_EXTENSIONS",
    "SESSION_PARAMS",
    "LinkResolver",
    "URLError",
    "canonicalize",
    "fingerprint",
    "has_non_html_extension",
    "host_key",
    "host_of",
    "registrable_domain",
    "split_host_key",
    "strip_session_params",
    "whatwg_href",
]

#: Query parameter names (lower case) removed by `strip_session_ids`. The same list as the
#: simulated web's (`gossamer.testweb._model.SESSION_PARAMS`; a test keeps them equal).
SESSION_PARAMS: Final = ("sessionid", "jsessionid", "phpsessid", "sid")

#: Path extensions (lower case, with the dot) of resources that are not HTML: a crawler with
#: `html_only` does not request them. The same set as the simulated web's truth uses.
NON_HTML_EXTENSIONS: Final = frozenset(
    {
        ".pdf", ".ps", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".rtf",
        ".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".svg", ".ico", ".tif", ".tiff",
        ".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".7z", ".rar",
        ".mp3", ".mp4", ".m4a", ".avi", ".mov", ".mkv", ".webm", ".wav", ".ogg", ".flac",
        ".exe", ".dmg", ".iso", ".bin", ".apk", ".msi", ".deb", ".rpm",
        ".css", ".js", ".woff", ".woff2", ".ttf", ".eot",
    }
)  # fmt: skip

_HTTP_PROTOCOLS: Final = frozenset({"http:", "https:"})
_HTTP_PREFIXES: Final = ("http://", "https://")

# every session parameter name contains one of these: a cheap test before splitting a query
assert all("sess" in p or "sid" in p for p in SESSION_PARAMS)

_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT_TRIPLET = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")


class URLError(ValueError):
    """A URL that cannot be parsed, or that is not an absolute http/https URL."""


# ------------------------------------------------------------------------- canonical form
def _pct_fix(match: re.Match[str]) -> str:
    hexpair = match.group(1)
    char = chr(int(hexpair, 16))
    return char if char in _UNRESERVED else "%" + hexpair.upper()


def _upper_hex(match: re.Match[str]) -> str:
    return "%" + match.group(1).upper()


def _normalise_percent(url: str) -> str:
    """Decode %xx of unreserved characters, upper-case the other escapes (RFC 3986 6.2.2).

    Safe on a whole WHATWG serialisation: a host never contains '%', and decoding cannot
    create a new dot segment (ada already treats '%2e' segments as dot segments). When a '%'
    starts no escape (WHATWG keeps it raw), escapes are only upper-cased: decoding could join
    that '%' and decoded hex digits into a new escape ('%%36%31' would become '%61'), and the
    result would not be idempotent."""
    if _STRAY_PCT.search(url) is not None:
        return _PCT_TRIPLET.sub(_upper_hex, url)
    return _PCT_TRIPLET.sub(_pct_fix, url)


def strip_session_params(query: str) -> str:
    """`query` (without '?') minus parameters named in SESSION_PARAMS (any case), order kept."""
    lowered = query.lower()
    if "sess" not in lowered and "sid" not in lowered:
        return query
    params = query.split("&")
    kept = [p for p in params if p.partition("=")[0].lower() not in SESSION_PARAMS]
    return query if len(kept) == len(params) else "&".join(kept)


def _strip_host_dots(href: str) -> str | None:
    """`href` with trailing dots of its host removed; None when no host would be left."""
    url = _parse_any(href)
    hostname = url.hostname
    if not hostname.endswith("."):
        return href
    hostname = hostname.rstrip(".")
    if not hostname:
        return None
    url.hostname = hostname
    return str(url.href)


def _finish(href: str, strip_session_ids: bool) -> str | None:
    """Steps 1-5 of the canonical form on an http(s) WHATWG serialisation `href`.

    The first '#' of a WHATWG serialisation starts the fragment and the first '?' the query:
    both are percent-encoded everywhere before them. The authority ends at the first '/' from
    index 8 (special URLs always have a path, and a host is never empty)."""
    if "#" in href:
        href = href[: href.index("#")]
    if "%" in href:
        href = _normalise_percent(href)
    q = href.find("?")
    if q >= 0:
        if q == len(href) - 1:
            href = href[:q]
        elif strip_session_ids:
            query = href[q + 1 :]
            stripped = strip_session_params(query)
            if stripped is not query:
                href = f"{href[:q]}?{stripped}" if stripped else href[:q]
    slash = href.find("/", 8)
    if href[slash - 1] == "." or href.find(".:", 0, slash) >= 0:
        return _strip_host_dots(href)
    return href


def canonicalize(url: str, *, strip_session_ids: bool = True) -> str:
    """The canonical form (module docstring) of the absolute http/https URL `url`.

    Raises URLError when `url` is not a valid absolute URL or its scheme is not http/https.
    Idempotent: canonicalize(canonicalize(u)) == canonicalize(u)."""
    href = whatwg_href(url)
    protocol = href[: href.find(":")]
    if protocol not in ("http", "https"):
        raise URLError(f"only http and https URLs can be crawled, not {protocol!r}: {url!r}")
    result = _finish(href, strip_session_ids)
    if result is None:
        raise URLError(f"URL has no host name: {url!r}")
    return result


class _URLLike(Protocol):
    """What both bindings' URL objects offer."""

    href: str
    host: str
    hostname: str
    port: str
    protocol: str


def _parse_any(url: str) -> _URLLike:
    """A URL object: can_ada's, or ada_url's where can_ada refuses. Raises ValueError."""
    try:
        parsed: _URLLike = can_ada.parse(url)
    except ValueError:
        parsed = ada_url.URL(url)
    return parsed


def whatwg_href(url: str, base: str | None = None) -> str:
    """The WHATWG URL Standard serialisation of `url` (resolved against `base` when given),
    for every scheme. Raises URLError when the standard says parsing fails.

    can_ada answers for http/https results; other results and can_ada's failures are
    re-parsed with ada_url, which passes the whole urltestdata suite."""
    try:
        parsed = can_ada.parse(url) if base is None else can_ada.parse(base) + url
        if parsed.protocol in _HTTP_PROTOCOLS:
            return str(parsed.href)
    except ValueError:
        pass
    try:
        if base is None:
            return str(ada_url.URL(url).href)
        return str(ada_url.join_url(base, url))
    except ValueError:
        raise URLError(
            f"not a valid URL: {url!r}" + (f" (base {base!r})" if base else "")
        ) from None


class LinkResolver:
    """Resolves the links of one page to canonical absolute URLs (the per-link hot path).

    Built once per page from the page's URL and, when the page has one, the `<base href>`
    value (resolved against the page URL; ignored when it does not resolve to an http/https
    URL, as browsers fall back to the document URL). `resolve(href)` returns the canonical
    URL, or None for empty, unparseable and non-http(s) links (javascript:, mailto:, tel:,
    data:, ftp:...). A fragment-only href ("#top") resolves to the page itself.
    """

    __slots__ = ("_base", "_strip", "base_url")

    def __init__(
        self, page_url: str, base_href: str | None = None, *, strip_session_ids: bool = True
    ) -> None:
        try:
            base = can_ada.parse(page_url)
        except ValueError:
            raise URLError(f"page URL is not a valid absolute URL: {page_url!r}") from None
        if base.protocol not in _HTTP_PROTOCOLS:
            raise URLError(f"page URL is not an http/https URL: {page_url!r}")
        if base_href is not None and base_href.strip():
            try:
                joined = base + base_href
            except ValueError:
                pass
            else:
                if joined.protocol in _HTTP_PROTOCOLS:
                    base = joined
        self._base = base
        self._strip = strip_session_ids
        #: the URL links are resolved against (WHATWG serialisation, fragment kept)
        self.base_url: str = base.href

    def resolve(self, href: str) -> str | None:
        """The canonical absolute URL `href` points to, or None (see the class docstring)."""
        # The per-link hot path: the common link (no fragment, escape or query, host without a
        # trailing dot) costs one join, one serialisation and a few C-level string scans.
        if not href or (href[0] <= " " and not href.strip()):
            return None
        try:
            url = (self._base + href).href
        except ValueError:
            return self._resolve_slow(href)
        if not url.startswith(_HTTP_PREFIXES):
            return None
        if "#" in url or "%" in url or "?" in url:
            return _finish(url, self._strip)
        slash = url.find("/", 8)
        if url[slash - 1] == "." or url.find(".:", 0, slash) >= 0:
            return _strip_host_dots(url)
        return url

    def _resolve_slow(self, href: str) -> str | None:
        """`href` that can_ada refused, resolved by ada_url (the current standard)."""
        try:
            joined = str(ada_url.join_url(self.base_url, href))
        except ValueError:
            return None
        if not joined.startswith(_HTTP_PREFIXES):
            return None
        return _finish(joined, self._strip)


# ------------------------------------------------------------------------- keys
def fingerprint(url: str) -> int:
    """64-bit xxh3 of `url` (unsigned, 0 <= fp < 2**64). Pass canonical URLs: the string is
    hashed as given, so two spellings of one URL only share a fingerprint once canonicalised.

    Collisions (birthday bound, n URLs): about n**2 / 2**65, i.e. ~3e-6 for 10 million URLs
    and ~3 % for one billion; a collision makes the crawler skip one URL as already seen."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass"))


def _parse_http(url: str) -> _URLLike:
    try:
        parsed = _parse_any(url)
    except ValueError:
        raise URLError(f"not a valid absolute URL: {url!r}") from None
    if parsed.protocol not in _HTTP_PROTOCOLS:
        raise URLError(f"not an http/https URL: {url!r}")
    return parsed


def host_key(url: str) -> str:
    """The "same host" key of `url` (module docstring, "Keys"): lower-case IDNA host without
    trailing dots, IPv6 in brackets, plus ':port' when the port is not the scheme's default.
    `http://WWW.Example.com:80/x` → `www.example.com`, `https://example.com:8443/` →
    `example.com:8443`. Raises URLError for non-http(s) or invalid URLs."""
    parsed = _parse_http(url)
    host = parsed.host  # WHATWG: hostname, and ':port' unless it is the scheme's default
    if host.endswith(".") or ".:" in host:
        hostname, port = parsed.hostname.rstrip("."), parsed.port
        return f"{hostname}:{port}" if port else hostname
    return str(host)


def host_of(url: str) -> str:
    """The lower-case host name of `url` (IDNA, no port, no trailing dot; IPv6 in brackets):
    the name DNS resolves. Not a "same host" key (use `host_key`: the port tells servers
    apart). Raises URLError for non-http(s) or invalid URLs."""
    return str(_parse_http(url).hostname).rstrip(".")


def split_host_key(key: str) -> tuple[str, int | None]:
    """(name, port) of a `host_key`: `h:8080` → ('h', 8080), `[::1]:8080` → ('[::1]', 8080),
    `h` → ('h', None) (the scheme's default port, which the key does not say). Raises
    URLError when the port is not a number."""
    if key.startswith("["):
        close = key.find("]")
        name, rest = (key, "") if close < 0 else (key[: close + 1], key[close + 1 :])
        port = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port = key.partition(":")
    if not port:
        return name, None
    if not port.isdigit():
        raise URLError(f"not a host key: {key!r}")
    return name, int(port)


@lru_cache(maxsize=1)
def _psl() -> PublicSuffixList:
    # the list bundled with the publicsuffixlist package: no network, ever
    return PublicSuffixList(accept_unknown=True, accept_encoded_idn=True)


def _is_ip(host: str) -> bool:
    if host.startswith("["):
        return True
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=65536)
def registrable_domain(host: str) -> str:
    """The registrable domain ("eTLD+1") of `host` from the bundled Public Suffix List (ICANN and
    private sections): `www.bbc.co.uk` → `bbc.co.uk`, `foo.blogspot.com` → `foo.blogspot.com`,
    `www.h12.example` → `h12.example` (an unlisted TLD counts as a public suffix, the PSL's
    default `*` rule). IP addresses, single-label hosts and hosts that are themselves public
    suffixes are returned as they are. `host` may be a host key (`h:8080`, `[::1]:8080`): the
    port is dropped, so every port of a domain is the same site. The result is lower case, in
    IDNA (punycode) form."""
    name = host.strip().lower()
    if name.startswith("["):
        return name[: name.find("]") + 1] if "]" in name else name
    if name.count(":") == 1:
        name = name.partition(":")[0]
    name = name.rstrip(".")
    if not name.isascii():
        try:
            name = can_ada.idna_encode(name).decode("ascii")
        except (ValueError, UnicodeError):
            return name
    if "." not in name or _is_ip(name):
        return name
    private = _psl().privatesuffix(name)
    return private if private else name


def has_non_html_extension(url: str) -> bool:
    """True when the last path segment of `url` ends in one of NON_HTML_EXTENSIONS (case
    insensitive). Only the path counts: `/a.pdf?x=1` is, `/view?file=a.pdf` is not. `url` may
    be absolute or a path."""
    scheme = url.find("://")
    if scheme >= 0:
        slash = url.find("/", scheme + 3)
        if slash < 0:
            return False
        url = url[slash:]
    end = len(url)
    for sep in "?#":
        i = url.find(sep)
        if 0 <= i < end:
            end = i
    slash = url.rfind("/", 0, end)
    dot = url.rfind(".", slash + 1, end)
    return dot >= 0 and url[dot:end].lower() in NON_HTML_EXTENSIONS


def split_userinfo(url: str) -> tuple[str, str, str | None, str] | None:
    """`url` cut around its credentials: (the scheme with its "://", "" when it has none;
    the user; the password, None without a ":" in the userinfo; what follows the "@"), or
    None when it has no userinfo. The userinfo ends at the last "@", so that an unquoted
    "/", "#" or "@" in a password stays in the password: what hiding one needs (a URL parser
    would cut it there and the error it raises would show the tail)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, after = rest.rpartition("@")
    if not at:
        return None
    user, colon, password = userinfo.partition(":")
    return scheme + sep, user, password if colon else None, after


def url_password(url: str) -> str | None:
    """The password a URL carries (in its userinfo, or a `password=` query parameter as a
    Redis URL may), as redis-py reads it (unquoted); None when it has none."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # a malformed URL: whatever follows "user:" in its userinfo
        password = written_password(url)
    if password:
        return urllib.parse.unquote(password)
    for name, value in urllib.parse.parse_qsl(url.partition("?")[2]):
        if name == "password" and value:
            return value
    return None


def written_password(url: str) -> str | None:
    """The password of the userinfo of `url` as written (quoted, or not), None without one."""
    parts = split_userinfo(url) if "://" in url else None
    return (parts[2] or None) if parts is not None else None


def without_password(url: str) -> str:
    """`url` with its password taken out (the userinfo's and a `password=` query
    parameter's), for a command line: the password then goes in $REDISCLI_AUTH, which
    `ps` does not show (cluster.connect.connect_redis reads it; runner/spawn.py puts it
    there)."""
    parts = split_userinfo(url)
    if parts is not None and parts[2] is not None:
        scheme, user, _, after = parts
        url = f"{scheme}{user}@{after}" if user else f"{scheme}{after}"
    head, qmark, query = url.partition("?")
    if qmark:
        kept = [pair for pair in query.split("&") if pair.partition("=")[0] != "password"]
        url = f"{head}?{'&'.join(kept)}" if kept else head
    return url
