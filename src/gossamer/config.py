"""Typed crawl settings: flags > `-s KEY=VALUE` > `GOSSAMER_*` environment > TOML > defaults.

One composition root: `load_settings()` validates everything at start and raises
`SettingsError` with every problem in one readable message.

`CrawlSettings` holds the crawl's definition at top level and the rest in frozen groups
(`FrontierSettings` … `ClusterSettings`), each setting declared once, in its group. Every
setting also has one flat name, unique across the groups, which is what the command line, the
environment, `-s`, TOML and crawl.json used before the groups and still use: `_nest` and
`_flat` translate between the two forms, so `CrawlSettings(delay=0)` and
`CrawlSettings(politeness={"delay": 0})` are the same settings.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from .crawldir import MANIFEST, CrawlDir

if TYPE_CHECKING:
    from .frontier._options import FrontierKnobs

DEFAULT_USER_AGENT = "gossamer/0.1 (+https://gossamer.invalid/bot)"
NO_LIMIT = "none"  # the spelling that lifts a limit, in flags, environment and TOML
# settings that take NO_LIMIT (their None)
_LIMITS = (
    "max_pages",
    "max_depth",
    "host_budget",
    "max_path_segments",
    "calendar_years_back",
    "calendar_years_ahead",
    "max_queries_per_path",
    "max_query_shapes",
)


#: `--workers auto`: one worker process per core this process may run on (the default)
AUTO: Final = "auto"
#: The most worker processes a crawl runs on one machine: `--workers`, a pool scaled by
#: `gossamer workers --scale` or the dashboard, the local workers of `crawl --redis`. Every
#: worker is a process with its own SQLite connection to the one frontier, whose writes are
#: serialised: past a few per core they only wait for each other (docs/crawler.md, "Worker
#: processes").
MAX_WORKERS: Final = 64
#: the settings that are durations in seconds (their flags' metavar S, their messages)
SECONDS = frozenset(
    {
        "delay",
        "max_crawl_delay",
        "lease_ttl",
        "robots_ttl",
        "connect_timeout",
        "first_byte_timeout",
        "total_timeout",
        "low_speed_time",
        "heartbeat_ttl",
        "phase_period",
        "replica_ack_timeout",
        "stop_patience",
    }
)
#: a setting's flags where they are not `--<name with dashes>` (messages name the last)
FLAG_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "seeds_file": ("-i", "--seeds-file"),
    "use_sitemaps": ("--sitemaps",),
    "output": ("-o", "--output"),
    "headers": ("-H", "--header"),
}
#: settings whose value may hold a secret (a proxy's password, an Authorization header): a
#: message names where they were given, never the value (their own checks redact it)
_SECRET_VALUES = frozenset({"proxy", "headers"})


def flag_of(name: str) -> str:
    """The flag of setting `name` as messages spell it (`--delay`, `--seeds-file`; `SEED`)."""
    if name == "seeds":
        return "SEED"
    flags = FLAG_NAMES.get(name)
    return flags[-1] if flags else "--" + name.replace("_", "-")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def workers_problem(workers: int, *, none_ok: bool = False) -> str | None:
    """Why `workers` local worker processes cannot be started (None: they can). `none_ok`:
    0 (none here) is allowed, as for a cluster crawl, whose workers may join from anywhere."""
    if workers > MAX_WORKERS:
        return (
            f"at most {MAX_WORKERS} worker processes on one machine (they share one frontier: "
            f"past a few per core they only wait for each other); {AUTO}: one per core"
        )
    if workers == 0 and not none_ok:
        return (
            f"starts no worker; an embedded crawl needs 1 to {MAX_WORKERS}, or {AUTO} (one "
            "per core, the default); 0 is for --redis, whose workers may join from elsewhere"
        )
    if workers < 0:
        return f"expected a whole number from {0 if none_ok else 1} to {MAX_WORKERS}, or {AUTO}"
    return None


class SettingsError(ValueError):
    """Invalid settings; the message lists every problem, one per line."""


class SeedsFileError(Exception):
    """A seeds file cannot be read or holds a bad line. Not a ValueError, so pydantic does not
    wrap it: load_settings turns it into one SettingsError line naming FILE:LINE."""


# A list setting given as text (a GOSSAMER_* variable, `-s KEY=VALUE`): a JSON list, or items
# split by whitespace and by commas that start a new item. pydantic-settings would otherwise
# demand JSON (`GOSSAMER_SEEDS=http://a/` was a JSON parse error).
_URL_SPLIT = re.compile(r"\s+|,\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")  # a comma before a scheme


def _text_to_list(value: Any, split: str) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a valid JSON list: {exc}") from None
    if not text:
        return []
    if split == "one":  # a regex may hold spaces and commas: the whole text is one item
        return [text]
    pattern = _URL_SPLIT if split == "urls" else re.compile(r"[\s,]+")
    return [item for item in pattern.split(text) if item]


# list settings: how a text value splits (see _text_to_list)
_LIST_SPLIT = {"seeds": "urls", "allow": "one", "deny": "one", "resolve": "words"}
TextList = Annotated[list[str], NoDecode]


def read_seeds_file(path: Path) -> list[str]:
    """The seed URLs of a seeds file (`-` is standard input): one URL a line; blank lines and
    lines starting with `#` are skipped. The first bad line raises SeedsFileError naming
    FILE:LINE and the URL."""
    from .urls import URLError, canonicalize

    name = "<stdin>" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SeedsFileError(f"cannot read seeds file {name}: {reason}") from None
    seeds = []
    for number, line in enumerate(text.splitlines(), 1):
        url = line.strip()
        if not url or url.startswith("#"):
            continue
        try:
            seeds.append(canonicalize(url))
        except URLError as exc:
            raise SeedsFileError(
                f"{name}:{number}: {seed_problem(url, exc)}; fix or remove that line"
            ) from None
    return seeds


def seed_problem(text: str, exc: Exception) -> str:
    """Why `text` is no seed URL (`exc`: canonicalize's error), with the URL it probably
    means when only the scheme is missing (`127.0.0.1:8081` → `http://127.0.0.1:8081/`)."""
    from .urls import URLError, canonicalize

    reason = str(exc).removesuffix(f": {text!r}")  # the URL is named once, first
    if "://" not in text:
        try:
            meant = canonicalize("http://" + text.removeprefix("//"))
        except URLError:
            pass
        else:
            return f"invalid seed URL {text!r}: no http:// or https://; did you mean {meant} ?"
    return f"invalid seed URL {text!r}: {reason}"


def _limit_or_none(value: Any) -> Any:
    # `--max-depth none`, GOSSAMER_MAX_DEPTH=none, max_depth = "none" in TOML: no limit
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == NO_LIMIT:
            return None
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"expected a whole number or {NO_LIMIT}, got {value!r}") from None
    return value


def _list_from_text(value: Any, info: ValidationInfo) -> Any:
    return _text_to_list(value, _LIST_SPLIT[str(info.field_name)])


class _Group(BaseModel):
    """A group of settings (`settings.<group>.<name>`). Its names are also the settings' flat
    names (flags, GOSSAMER_*, TOML and `-s` keys): no two groups share one."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    #: the section of `gossamer crawl --help` that lists the group's flags
    section: ClassVar[str]


class FrontierSettings(_Group):
    """How the frontier hands out hosts' URLs."""

    section = "workers and the frontier"

    per_host: int = Field(20, ge=1, le=1000, description="URLs per host per lease (KSpider bucket)")
    lease_ttl: float = Field(
        120.0, gt=1, description="seconds a worker holds a host's URLs before they go back"
    )
    lease_order: Literal["largest-first", "ready"] = Field(
        "largest-first",
        description="which ready host is leased first: the one with most URLs queued "
        "(10 ms head start per URL, at most 30 s) or the one ready longest",
    )
    max_attempts: int = Field(3, ge=1, le=20, description="fetches of a URL before giving up")
    host_budget: int | None = Field(
        100_000, ge=1, description="URLs queued per host at most (none: no limit)"
    )

    @field_validator("host_budget", mode="before")
    @classmethod
    def _none_lifts_a_limit(cls, value: Any) -> Any:
        return _limit_or_none(value)

    def knobs(self, crawl: CrawlSettings) -> FrontierKnobs:
        """The frontier's limits and politeness from the crawl's settings: the keywords every
        backend (SqliteFrontier, RedisFrontier) takes, mapped once for both. The knobs are
        declared in `FrontierKnobs`; this maps the settings' names onto them."""
        from .frontier._options import DEFAULT_BACKLOG_LEAD

        return {
            "lease_ttl": self.lease_ttl,
            "max_pages": crawl.max_pages,
            "max_depth": crawl.max_depth,
            "host_budget": self.host_budget,
            "max_attempts": self.max_attempts,
            **crawl.politeness.knobs(),
            "backlog_lead": DEFAULT_BACKLOG_LEAD if self.lease_order == "largest-first" else 0.0,
        }


class FetchSettings(_Group):
    """How pages are fetched: identity, headers, proxy, addresses, time-outs, sizes."""

    section = "fetching"

    concurrency: int = Field(64, ge=1, le=10_000, description="hosts fetched at once per worker")
    user_agent: str = Field(DEFAULT_USER_AGENT, description="User-Agent header")
    # NoDecode: GOSSAMER_HEADERS is one header a line (or a JSON list), see _headers_valid
    headers: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="'Name: value' request headers sent with every request (docs/crawler/fetch.md)",
    )
    proxy: str = Field(
        "none",
        description="http(s)://[USER:PASSWORD@]HOST:PORT, env (http_proxy/https_proxy/no_proxy) "
        "or none",
    )
    resolve: TextList = Field(
        default_factory=list, description="HOST:IP, HOST:PORT:IP:PORT or *.domain:IP"
    )
    resolve_file: Path | None = Field(None, description="a file of --resolve entries, one a line")
    allow_private: bool = Field(False, description="allow loopback/private addresses")
    connect_timeout: float = Field(10.0, gt=0, description="seconds to connect")
    first_byte_timeout: float = Field(
        30.0, gt=0, description="seconds from the request to the response's first byte"
    )
    total_timeout: float = Field(120.0, gt=0, description="seconds a whole fetch may take")
    low_speed_limit: int = Field(
        100, ge=0, le=1 << 30, description="bytes/s under which a transfer is too slow (0: off)"
    )
    low_speed_time: int = Field(
        30, ge=1, le=3600, description="seconds under low_speed_limit before the cut"
    )
    max_body: int = Field(10 * 1024 * 1024, ge=1024, description="bytes kept per response")

    @field_validator("resolve", mode="before")
    @classmethod
    def _list_from_text(cls, value: Any, info: ValidationInfo) -> Any:
        return _list_from_text(value, info)

    @field_validator("resolve")
    @classmethod
    def _resolve_syntax(cls, entries: list[str]) -> list[str]:
        for e in entries:
            if e.count(":") not in (1, 3) or "" in e.split(":"):
                raise ValueError(f"expected HOST:IP or HOST:PORT:IP:PORT, not {e!r}")
        return entries

    @field_validator("headers", mode="before")
    @classmethod
    def _headers_text(cls, value: Any) -> Any:
        # GOSSAMER_HEADERS: a JSON list, or one header a line (a single header as it is)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except ValueError as exc:
                    raise ValueError(f"not a JSON list of 'Name: value' strings: {exc}") from None
            return [line for line in text.splitlines() if line.strip()]
        return value

    @field_validator("headers")
    @classmethod
    def _headers_valid(cls, entries: list[str]) -> list[str]:
        from .fetch.options import check_headers

        return [f"{n}: {v}" for n, v in check_headers(entries)]

    @field_validator("proxy")
    @classmethod
    def _proxy_valid(cls, value: str) -> str:
        from .fetch.options import check_proxy

        return check_proxy(value)

    @model_validator(mode="after")
    def _consistent(self) -> FetchSettings:
        if self.first_byte_timeout > self.total_timeout:
            raise ValueError("first_byte_timeout must not exceed total_timeout")
        if self.resolve_file is not None and not self.resolve_file.is_file():
            raise ValueError(f"resolve_file {self.resolve_file} is not a readable file")
        return self

    def options(self) -> dict[str, Any]:
        """The CurlFetcher keywords for the crawl-wide headers and the proxy."""
        from .fetch.options import PROXY_NONE, check_headers

        return {
            "headers": check_headers(self.headers),
            "proxy": None if self.proxy == PROXY_NONE else self.proxy,
        }


class PolitenessSettings(_Group):
    """How hard a host is asked: delays, robots.txt, IPs shared by hosts."""

    section = "politeness"

    delay: float = Field(1.0, ge=0, le=3600, description="seconds between requests to a host")
    max_crawl_delay: float = Field(30.0, ge=0, le=86400, description="cap on robots Crawl-delay")
    adaptive_delay: float = Field(
        0.0, ge=0, le=1000, description="rest a host N times its mean response time (0: off)"
    )
    per_ip: int = Field(1, ge=1, le=64, description="hosts of one IP fetched at once")
    obey_robots: bool = Field(True, description="obey robots.txt")
    robots_ttl: float = Field(
        86400.0, gt=0, le=86400, description="seconds a robots.txt is kept (RFC 9309: ≤ a day)"
    )

    def knobs(self) -> FrontierKnobs:
        """The frontier's politeness knobs (its `PolitenessPolicy`) from these settings."""
        return {
            "default_delay": self.delay,
            "max_crawl_delay": self.max_crawl_delay,
            "adaptive_factor": self.adaptive_delay,
        }


class LinksSettings(_Group):
    """Which of a page's links are followed, and how URLs are cleaned."""

    section = "links"

    follow_nofollow: bool = Field(False, description="follow rel=nofollow links too")
    html_only: bool = Field(
        True,
        description="skip URLs with non-HTML extensions (.pdf, .jpg, …) and stop a response "
        "that is not HTML after its head",
    )
    strip_session_ids: bool = Field(
        True, description="drop session-id query parameters from URLs"
    )
    follow_canonical: bool = Field(True, description="also queue a page's rel=canonical URL")
    use_sitemaps: bool = Field(
        False, description="also seed each host from the sitemaps robots.txt names"
    )


class TrapsSettings(_Group):
    """The trap detectors (docs/crawler.md, "Traps"); none turns one off."""

    section = "trap limits"

    max_path_repeat: int = Field(3, ge=1, description="a path segment repeated more is a trap")
    max_path_segments: int | None = Field(
        20, ge=1, description="a URL with more path segments is a trap"
    )
    calendar_years_back: int | None = Field(
        30, ge=0, description="a date-only URL more years before this year is a calendar trap"
    )
    calendar_years_ahead: int | None = Field(
        5, ge=0, description="a date-only URL more years after this year is a calendar trap"
    )
    max_queries_per_path: int | None = Field(
        10_000, ge=1, description="distinct query strings one path may have (per worker)"
    )
    max_query_shapes: int | None = Field(
        50, ge=1, description="distinct parameter-name sequences one path may have (per worker)"
    )
    near_dup_links: Literal["skip", "follow", "off"] = Field(
        "skip",
        description="the links of a page whose text is a near-duplicate of a page crawled "
        "before: skip (not followed, as BUbiNG does: the default), follow (followed, the page "
        "marked), or off (no near-duplicate detection; docs/crawler.md, \"Near-duplicates\")",
    )
    near_dup_distance: int = Field(
        3, ge=0, le=7, description="fingerprints this many bits apart (of 64) are near-duplicates"
    )

    @field_validator(
        "max_path_segments",
        "calendar_years_back",
        "calendar_years_ahead",
        "max_queries_per_path",
        "max_query_shapes",
        mode="before",
    )
    @classmethod
    def _none_lifts_a_limit(cls, value: Any) -> Any:
        return _limit_or_none(value)


class SinksSettings(_Group):
    """What the crawl writes besides its log and link graph."""

    section = "outputs"

    warc: bool = Field(True, description="write WARC files")
    dedup_payloads: bool = Field(
        True,
        description="a page whose payload (its SHA-1) the crawl stored before, under any URL, "
        "is written as a WARC revisit record (identical-payload-digest) referring to that "
        "first capture, and its crawl log line says \"dup\": \"identical\"; "
        "--no-dedup-payloads stores every response whole",
    )
    warc_max_bytes: int = Field(1024**3, ge=1024 * 1024, description="bytes per WARC file")
    disk_margin: int = Field(
        256,
        ge=0,
        description="MB: when the output directory's disk has less free, the worker takes "
        "no more hosts and stops (exit 74) before a WARC could be cut short; 0: never",
    )
    live_graph: bool = Field(
        True,
        description="keep the crawled web graph live and write its statistics to "
        f"{CrawlDir(Path('DIR')).live_graph_stats} every few seconds and at the end, computed "
        "by a child process within a CPU budget (GOSSAMER_LIVE_GRAPH_CPU; docs/graph.md, "
        "\"What it costs\"); with --redis and local workers, `gossamer graph follow` runs "
        "beside them",
    )
    extract: str | None = Field(
        None,
        description="run an extractor on every page, in every worker: NAME, an entry point "
        "of the gossamer.extractors group (`gossamer plugins` lists them), or "
        f"MODULE:CALLABLE; its items go to {CrawlDir(Path('DIR')).items} (docs/python.md)",
    )


class ClusterSettings(_Group):
    """Cluster mode's settings of the crawl (docs/cluster.md): `gossamer crawl --redis`
    creates the crawl with them and stores them with it in Redis, where every worker reads
    them; an embedded crawl keeps their defaults (`changed()` names those it does not). The
    partition strategy's name and options are checked where the strategy is built
    (`partition.strategy_named`, as the crawl is created): a strategy may be registered
    after the settings' module is imported."""

    section = "cluster mode"

    partition: str = Field(
        "dynamic",
        description="which hosts each worker may lease (or an installed strategy plugin's "
        "name: `gossamer plugins`)",
    )
    site_sizes: Path | None = Field(
        None,
        description="sized: a previous crawl's directory or a file of HOST PAGES lines; sites "
        "are placed on workers largest first",
    )
    phase_period: float | None = Field(None, description="phase: seconds a phase lasts")
    phases: int | None = Field(None, description="phase: phases (default: workers)")
    epsilon: float | None = Field(None, description="consistent: load bound (0.25)")
    heartbeat_ttl: float = Field(
        5.0, gt=0.5, description="a worker silent this long is dead, its IP slots free"
    )
    seen_set: Literal["exact", "bloom"] = Field(
        "exact", description="cluster mode: the Redis frontier's seen-set (docs/cluster.md)"
    )
    replica_acks: int = Field(
        0,
        ge=0,
        description="Redis replicas that must acknowledge each batch's completion (WAIT) "
        "before the worker goes on; 0: none (docs/cluster.md, \"Redis Sentinel\")",
    )
    replica_ack_timeout: float = Field(
        1.0, gt=0, description="seconds a completion waits for --replica-acks replicas"
    )
    stop_patience: float = Field(
        30.0,
        ge=0,
        description="seconds a stopping worker waits for an unreachable Redis, then exits 75 "
        "(its leases expire: their URLs are fetched again); a second stop: none "
        "(docs/cluster.md, \"A stop while Redis is down\")",
    )

    def changed(self) -> list[str]:
        """The settings whose value is not their default, in declaration order."""
        return [
            name for name in type(self).model_fields
            if getattr(self, name) != getattr(CLUSTER_DEFAULTS, name)
        ]  # fmt: skip


#: the cluster group's defaults (frozen, so shared): the one place code reads one of them,
#: e.g. `CLUSTER_DEFAULTS.heartbeat_ttl`
CLUSTER_DEFAULTS: Final = ClusterSettings.model_validate({})


#: The settings a re-crawl (`--recrawl OLD_DIR`) takes from OLD_DIR's crawl.json when they
#: are not given now (by a flag, `-s`, GOSSAMER_* or --config): how its hosts were reached
#: and what it crawled, so the re-crawl fetches what the old crawl fetched, the same way. How
#: fast and how much this run does (workers, delays, time-outs, --max-pages) are its own;
#: seeds have their own rule (none given: OLD_DIR's). docs/crawler.md, "Re-crawling".
RECRAWL_CARRIED = frozenset(
    {
        "allow_private",
        "resolve",
        "resolve_file",
        "proxy",
        "user_agent",
        "headers",
        "obey_robots",
        "scope",
        "allow",
        "deny",
        "max_depth",
        "host_budget",
        "follow_nofollow",
        "html_only",
        "strip_session_ids",
        "follow_canonical",
        "use_sitemaps",
        "max_path_repeat",
        "max_path_segments",
        "calendar_years_back",
        "calendar_years_ahead",
        "max_queries_per_path",
        "max_query_shapes",
        "near_dup_links",
        "near_dup_distance",
        "warc",
    }
)

# a top-level setting's section of `gossamer crawl --help` (a group's: its `section`)
_SECTION: dict[str, dict[str, Any]] = {
    name: {"section": name}
    for name in ("seeds and output", "scope and limits", "workers and the frontier")
}


class CrawlSettings(BaseSettings):
    """Everything a crawl needs: the crawl's definition at top level, the rest in groups
    (`settings.politeness.delay`). Every setting has one flat name, unique across groups: its
    flag (`--delay`), its environment variable (GOSSAMER_DELAY), its TOML and `-s` key
    (`delay`, or `politeness.delay` / a `[politeness]` table) and its crawl.json key."""

    model_config = SettingsConfigDict(env_prefix="GOSSAMER_", extra="forbid", validate_default=True)

    seeds: TextList = Field(
        default_factory=list, description="start URLs",
        json_schema_extra=_SECTION["seeds and output"],
    )
    seeds_file: Path | None = Field(
        None,
        description="more start URLs from FILE, one a line (# comments; - is stdin); read at "
        f"start into seeds ({MANIFEST} keeps the list)",
        json_schema_extra=_SECTION["seeds and output"],
    )
    output: Path = Field(
        Path("crawl"), description="crawl directory",
        json_schema_extra=_SECTION["seeds and output"],
    )
    max_pages: int | None = Field(
        None, ge=1, description="stop after this many pages (with --resume: raise it to go on)",
        json_schema_extra=_SECTION["scope and limits"],
    )
    max_depth: int | None = Field(
        20, ge=0, description="link hops from the seeds (seeds are depth 0; none: no limit)",
        json_schema_extra=_SECTION["scope and limits"],
    )
    scope: Literal["host", "domain", "all"] = Field(
        "host", description="host: the seeds' hosts; domain: their registrable domains; all",
        json_schema_extra=_SECTION["scope and limits"],
    )
    allow: TextList = Field(
        default_factory=list, description="regexes; one must match",
        json_schema_extra=_SECTION["scope and limits"],
    )
    deny: TextList = Field(
        default_factory=list, description="regexes; none may match",
        json_schema_extra=_SECTION["scope and limits"],
    )
    workers: int | None = Field(
        None,
        description=f"worker processes, 1 to {MAX_WORKERS}, or {AUTO}: one per core (with "
        "--redis: the local workers, 0: none)",
        json_schema_extra=_SECTION["workers and the frontier"],
    )
    recrawl: Path | None = Field(
        None, description="re-crawl this finished crawl directory with conditional GETs",
        json_schema_extra=_SECTION["seeds and output"],
    )
    # the groups' defaults: frozen, so one default instance is safely shared
    frontier: FrontierSettings = FrontierSettings.model_validate({})
    fetch: FetchSettings = FetchSettings.model_validate({})
    politeness: PolitenessSettings = PolitenessSettings.model_validate({})
    links: LinksSettings = LinksSettings.model_validate({})
    traps: TrapsSettings = TrapsSettings.model_validate({})
    sinks: SinksSettings = SinksSettings.model_validate({})
    cluster: ClusterSettings = CLUSTER_DEFAULTS

    def __init__(self, **values: Any) -> None:
        # flat names and `group.name` keys into their groups before pydantic-settings merges
        # these with the environment's (nested too), so the keywords win over GOSSAMER_*
        super().__init__(**_nest(values))

    @model_validator(mode="before")
    @classmethod
    def _nested(cls, values: Any) -> Any:
        # model_validate (no __init__): a flat mapping, e.g. an old crawl.json, nests too
        return _recrawl_defaults(_nest(values)) if isinstance(values, Mapping) else values

    def frontier_knobs(self) -> FrontierKnobs:
        """The frontier backends' keywords (`FrontierSettings.knobs`)."""
        return self.frontier.knobs(self)

    @field_validator("max_pages", "max_depth", mode="before")
    @classmethod
    def _none_lifts_a_limit(cls, value: Any) -> Any:
        return _limit_or_none(value)

    @field_validator("workers", mode="before")
    @classmethod
    def _auto_workers(cls, value: Any) -> Any:
        # `--workers auto`, GOSSAMER_WORKERS=auto, workers = "auto": one per core (None)
        if isinstance(value, str) and value.strip().lower() == AUTO:
            return None
        return value

    @field_validator("workers")
    @classmethod
    def _workers_startable(cls, value: int | None) -> int | None:
        problem = None if value is None else workers_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("seeds", "allow", "deny", mode="before")
    @classmethod
    def _list_from_text(cls, value: Any, info: ValidationInfo) -> Any:
        return _list_from_text(value, info)

    @field_validator("seeds")
    @classmethod
    def _seeds_are_http(cls, seeds: list[str]) -> list[str]:
        from .urls import URLError, canonicalize

        out = []
        for s in seeds:
            try:
                out.append(canonicalize(s.strip()))
            except URLError as exc:
                raise ValueError(seed_problem(s.strip(), exc)) from None
        return out

    @field_validator("allow", "deny")
    @classmethod
    def _regexes_compile(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"invalid regex {p!r}: {exc}") from None
        return patterns

    def fetch_options(self) -> dict[str, Any]:
        """The CurlFetcher keywords for the crawl-wide headers and the proxy."""
        return self.fetch.options()

    @field_validator("recrawl")
    @classmethod
    def _recrawl_absolute(cls, path: Path | None) -> Path | None:
        # stored absolute in crawl.json, so a resume from another directory finds it
        return None if path is None else path.expanduser().absolute()

    @model_validator(mode="after")
    def _consistent(self) -> CrawlSettings:
        if self.seeds_file is not None:
            # read once: crawl.json stores the resolved seeds and no file, so a resume (or a
            # pool worker loading crawl.json) never reads it again
            known = set(self.seeds)
            for url in read_seeds_file(self.seeds_file):
                if url not in known:
                    known.add(url)
                    self.seeds.append(url)
            self.seeds_file = None
        if self.recrawl is not None:
            from .outdir import check_recrawl_dir, old_seeds

            problem = check_recrawl_dir(self.recrawl, self.output)
            if problem is not None:
                raise ValueError(f"recrawl: {problem}")
            if not self.seeds:  # default: the re-crawled crawl's seeds
                self.seeds = old_seeds(self.recrawl)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # flags and -s (init) > environment (flat GOSSAMER_<NAME>) > TOML (passed as init
        # defaults by load_settings)
        return (init_settings, _FlatEnvironment(settings_cls))

    def effective_workers(self) -> int:
        """The worker processes the crawl runs: `workers`, or one per core (at most
        MAX_WORKERS)."""
        return self.workers or min(available_cores(), MAX_WORKERS)

    @classmethod
    def knob_fields(cls) -> dict[str, tuple[str | None, FieldInfo]]:
        """Every setting by its flat name: (its group, None at top level; its field)."""
        return dict(_knob_fields())

    @classmethod
    def section_of(cls, name: str) -> str | None:
        """The section of `gossamer crawl --help` for setting `name` (None: none declared)."""
        group, field = _knob_fields()[name]
        if group is not None:
            return _GROUPS[group].section
        extra = field.json_schema_extra
        section = extra.get("section") if isinstance(extra, dict) else None
        return section if isinstance(section, str) else None

    def knob(self, name: str) -> Any:
        """The value of the setting of flat name `name`."""
        group = _knob_fields()[name][0]
        return getattr(self if group is None else getattr(self, group), name)

    def knobs_set(self) -> set[str]:
        """The flat names of the settings given explicitly (keywords, environment, TOML)."""
        given = {name for name in self.model_fields_set if name not in _GROUPS}
        for group in _GROUPS:
            if group in self.model_fields_set:
                given |= getattr(self, group).model_fields_set
        return given

    def manifest(self) -> dict[str, Any]:
        """The crawl.json contract read by `gossamer testweb audit --crawl` and by --resume:
        flat, every setting by its flat name (as crawl.json always was)."""
        nested = self.model_dump(mode="json")
        return {
            name: nested[name] if group is None else nested[group][name]
            for name, (group, _) in _knob_fields().items()
        }


#: The groups: CrawlSettings' fields that hold a group of settings.
_GROUPS: dict[str, type[_Group]] = {
    name: field.annotation
    for name, field in CrawlSettings.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, _Group)
}


@cache
def _knob_fields() -> dict[str, tuple[str | None, FieldInfo]]:
    knobs: dict[str, tuple[str | None, FieldInfo]] = {}
    for name, field in CrawlSettings.model_fields.items():
        group = _GROUPS.get(name)
        if group is None:
            knobs[name] = (None, field)
            continue
        for leaf, leaf_field in group.model_fields.items():
            if leaf in knobs:  # a flat name must say which setting it is
                raise TypeError(f"setting {leaf!r} declared twice ({name} and elsewhere)")
            knobs[leaf] = (name, leaf_field)
    return knobs


def _group_of(key: str) -> str | None:
    """The group that holds the setting `key` (flat `delay` or dotted `politeness.delay`),
    None for a top-level setting or an unknown key."""
    knob = _knob_fields().get(key)
    if knob is not None:
        return knob[0]
    group, dot, _ = key.partition(".")
    return group if dot and group in _GROUPS else None


def _nest(values: Mapping[str, Any]) -> dict[str, Any]:
    """Settings given flat (`delay`), dotted (`politeness.delay`) or by group (`politeness`:
    a mapping or a group model) as CrawlSettings' nested keywords. A key that is no setting
    stays where it names, for the `extra="forbid"` error to name it."""
    out: dict[str, Any] = {}

    def put(group: str, name: str, value: Any) -> None:
        table = out.setdefault(group, {})
        if isinstance(table, dict):
            table[name] = value

    for key, value in values.items():
        if key in _GROUPS and isinstance(value, Mapping | _Group):
            if isinstance(value, _Group):  # the settings it was given; the rest defaults
                value = {name: getattr(value, name) for name in value.model_fields_set}
            for name, item in value.items():
                put(key, name, item)
            continue
        group = _group_of(key)
        if group is None:
            out[key] = value
        else:
            put(group, key.rpartition(".")[2], value)
    return out


def _recrawl_defaults(values: dict[str, Any]) -> dict[str, Any]:
    """Nested settings `values` (every source merged) with, for a re-crawl, each setting of
    RECRAWL_CARRIED they do not give taken from OLD_DIR's crawl.json (an unreadable one
    gives none: the check of OLD_DIR says why)."""
    old = values.get("recrawl")
    if not isinstance(old, str | os.PathLike) or not str(old):
        return values
    from .outdir import old_settings

    stored = old_settings(Path(old).expanduser())
    for name in RECRAWL_CARRIED & stored.keys():
        group = _knob_fields()[name][0]
        table = values if group is None else values.setdefault(group, {})
        if isinstance(table, dict) and name not in table:
            table[name] = stored[name]
    return values


class _FlatEnvironment(PydanticBaseSettingsSource):
    """GOSSAMER_<NAME> for every setting by its flat name (GOSSAMER_DELAY, not a nested
    GOSSAMER_POLITENESS__DELAY), as the text the field's validators parse."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every setting at once

    def __call__(self) -> dict[str, Any]:
        env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith("GOSSAMER_")}
        found = {
            name: env[f"GOSSAMER_{name.upper()}"]
            for name in _knob_fields()
            if f"GOSSAMER_{name.upper()}" in env
        }
        return _nest(found)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from exc
    crawl = data.get("crawl", data)
    if not isinstance(crawl, dict):
        raise SettingsError(f"config file {path}: [crawl] must be a table")
    return _flat(crawl)


def _flat(values: Mapping[str, Any]) -> dict[str, Any]:
    """Settings given flat (`delay`), dotted (`politeness.delay`) or by group (a
    `[politeness]` TOML table) by their flat names, the one spelling a later source can
    override. A key that is no setting is kept (dotted within its group), for CrawlSettings
    to name it in its error."""
    knobs = _knob_fields()
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in _GROUPS and isinstance(value, Mapping):
            for name, item in value.items():
                out[name if knobs.get(name, (None,))[0] == key else f"{key}.{name}"] = item
            continue
        group, dot, name = key.partition(".")
        if dot and group in _GROUPS and knobs.get(name, (None,))[0] == group:
            key = name
        out[key] = value
    return out


def parse_set_options(items: list[str]) -> dict[str, str]:
    """`-s KEY=VALUE` options as {KEY: VALUE}. KEY is a setting (its TOML key, flat as
    `delay` or in its group as `politeness.delay`; `-` may stand for `_`); VALUE is text,
    parsed as its GOSSAMER_* variable would be. A later one wins."""
    import difflib

    knobs = _knob_fields()
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = _flat({key.strip().replace("-", "_"): None}).popitem()[0]
        if not eq or not key:
            raise SettingsError(f"-s {item!r}: expected KEY=VALUE, e.g. -s max_body=1048576")
        if key not in knobs:
            names = [*knobs, *(f"{g}.{n}" for n, (g, _) in knobs.items() if g is not None)]
            close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}?" if close else "see docs/cli.md, Settings"
            raise SettingsError(f"-s {item!r}: no setting {key!r}; {hint}")
        out[key] = value
    return out


def load_settings(
    flags: dict[str, Any] | None = None,
    *,
    config: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> CrawlSettings:
    """Settings from flags (None values ignored), `-s` overrides, `GOSSAMER_*` env vars and a
    TOML file, in that order of precedence.

    The TOML file may hold the keys at top level or under `[crawl]`, flat (`delay = 0`) or
    in their groups' tables (`[politeness]` `delay = 0`). Flags and overrides are keyed by
    the settings' flat names (overrides may be dotted, `politeness.delay`). A bad value's
    SettingsError names it as it was given: its flag, `-s KEY=VALUE`, GOSSAMER_* variable or
    the file's key."""
    values: dict[str, Any] = {}
    origins: dict[str, _Origin] = {}
    if config is not None:
        values.update(_read_toml(config))
        origins.update({key: ("toml", str(config)) for key in values})
    environment = {k.upper() for k in os.environ}
    env_keys = {name for name in _knob_fields() if f"GOSSAMER_{name.upper()}" in environment}
    for k in env_keys:
        values.pop(k, None)  # the environment beats the file
        origins[k] = ("env", f"GOSSAMER_{k.upper()}")
    set_values = _flat(overrides or {})
    values.update(set_values)  # -s KEY=VALUE beats the environment
    origins.update({key: ("set", "-s") for key in set_values})
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    values.update(given)
    origins.update({key: ("flag", flag_of(key)) for key in given})
    try:
        return CrawlSettings(**values)
    except ValidationError as exc:
        raise SettingsError(_format_errors(exc, origins)) from None
    except SeedsFileError as exc:
        raise SettingsError(str(exc)) from None


def keyword_settings(values: Mapping[str, Any]) -> CrawlSettings:
    """Settings given as Python keywords (`gossamer.crawl(..., delay=0)`): the names `-s
    KEY=VALUE` takes (flat `delay` or dotted `politeness.delay`), values as Python values or
    as the text a `GOSSAMER_*` variable holds; they win over `GOSSAMER_*` variables, as
    flags do. A name that is no setting is refused with the closest ones, a bad value in
    the words of the command's messages (SettingsError)."""
    import difflib

    knobs = _knob_fields()
    names = [*knobs, *(f"{g}.{n}" for n, (g, _) in knobs.items() if g is not None)]
    for key in values:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}?" if close else "see docs/cli.md, Settings"
            raise SettingsError(f"no setting {key!r}; {hint}")
    flat = _flat(values)
    origins: dict[str, _Origin] = {key: ("keyword", key) for key in flat}
    try:
        return CrawlSettings(**flat)
    except ValidationError as exc:
        raise SettingsError(_format_errors(exc, origins)) from None
    except SeedsFileError as exc:
        raise SettingsError(str(exc)) from None


#: where a setting's value came from: (kind, its spelling): ("flag", "--delay"),
#: ("set", "-s"), ("env", "GOSSAMER_DELAY"), ("toml", "FILE")
_Origin = tuple[str, str]


def accepted(name: str) -> str:
    """What setting `name` takes, in words, for a message: "a number of seconds from 0 to
    3600, e.g. 1 or 0.5", "one of host, domain, all", "a whole number of at least 1, or none
    (no limit)"."""
    import typing

    from annotated_types import Ge, Gt, Le, Lt

    if name == "workers":
        return f"a whole number from 1 to {MAX_WORKERS}, or {AUTO} (one per core)"
    field = _knob_fields()[name][1]
    annotation = field.annotation
    if typing.get_origin(annotation) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(annotation)))
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if args else annotation
    if base is bool:
        return "true or false (or 1/0, yes/no, on/off)"
    if base is Path:
        return "a path"
    if base not in (int, float):
        return "a list" if typing.get_origin(base) is list else "text"
    low: Any = next((m.ge for m in field.metadata if isinstance(m, Ge)), None)
    above: Any = next((m.gt for m in field.metadata if isinstance(m, Gt)), None)
    high: Any = next((m.le for m in field.metadata if isinstance(m, Le)), None)
    below: Any = next((m.lt for m in field.metadata if isinstance(m, Lt)), None)
    if low is not None and high is not None:
        bounds = f" from {_number(low)} to {_number(high)}"
    else:
        parts = [
            f"{word} {_number(value)}"
            for word, value in (
                ("at least", low), ("above", above), ("at most", high), ("below", below)
            )
            if value is not None
        ]  # fmt: skip
        bounds = (" of " if low is not None and len(parts) == 1 else " ") + " and ".join(parts)
        bounds = bounds.rstrip()
    if base is int:
        text = f"a whole number{bounds}"
        return f"{text}, or {NO_LIMIT} (no limit)" if name in _LIMITS else text
    unit = "a number of seconds" if name in SECONDS else "a number"
    default = field.get_default(call_default_factory=True)
    examples = [f"{default:g}"] if isinstance(default, int | float) else []

    def fits(x: float) -> bool:
        return all(
            (
                low is None or x >= low,
                above is None or x > above,
                high is None or x <= high,
                below is None or x < below,
            )
        )

    if fits(0.5) and "0.5" not in examples:
        examples.append("0.5")
    return f"{unit}{bounds}" + (f", e.g. {' or '.join(examples)}" if examples else "")


def _number(value: Any) -> str:
    """A bound as a message says it: 3,600 and 0, not 3600.0 and 0.0."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int | float) else str(value)


def _shown(value: Any) -> str:
    """A value as a user wrote it on a command line."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return " ".join(map(_shown, value))
    return str(value)


def _where(name: str, value: Any, origin: _Origin | None) -> str:
    """Setting `name` given `value`, as the user gave it: `--delay 1s`, `-s delay=abc`,
    `GOSSAMER_DELAY=abc`, `crawl.toml: delay = "abc"`; else its flat name."""
    if origin is None:
        return name
    kind, spelling = origin
    if name in _SECRET_VALUES:
        return {"set": f"-s {name}", "toml": f"{spelling}: {name}"}.get(kind, spelling)
    if kind == "flag":
        if name == "seeds":  # SEED arguments: the message names the URL
            return ""
        if isinstance(value, list):  # a list's problem names its item
            return spelling
        return f"{spelling} {_shown(value)}"
    if kind == "set":
        return f"-s {name}={_shown(value)}"
    if kind == "keyword":
        return f"{name}={value!r}"
    if kind == "env":
        return f"{spelling}={shlex.quote(str(value))}"
    shown = json.dumps(value) if isinstance(value, str | int | float | bool | list) else value
    return f"{spelling}: {name} = {shown}"


def _plain(name: str | None, err: Any) -> str:
    """A pydantic error in plain words: what is wrong and what the setting takes."""
    kind, ctx = err["type"], err.get("ctx") or {}
    takes = accepted(name) if name in _knob_fields() else None

    def number(key: str) -> str:
        return _number(ctx.get(key))

    bounds = {
        "greater_than_equal": f"must be at least {number('ge')}",
        "greater_than": f"must be more than {number('gt')}",
        "less_than_equal": f"must be at most {number('le')}",
        "less_than": f"must be less than {number('lt')}",
    }
    if kind in bounds:
        text = bounds[kind]
        return f"{text}, or {NO_LIMIT} (no limit)" if name in _LIMITS else text
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return "no such setting"
    if takes is not None and kind != "missing":
        return f"expected {takes}"
    return str(err["msg"])


def _format_errors(exc: ValidationError, origins: Mapping[str, _Origin] | None = None) -> str:
    """One line per problem, each naming the value as it was given (its flag, `-s`,
    GOSSAMER_* variable or TOML key) and saying what it takes; several under a heading."""
    import difflib

    origins = origins or {}
    problems = []
    knobs = _knob_fields()
    for err in exc.errors():
        loc = err["loc"]
        if len(loc) > 1 and loc[0] in _GROUPS and knobs.get(str(loc[1]), (None,))[0] == loc[0]:
            loc = loc[1:]  # a setting by its flat name, as its flag and variable spell it
        if not loc:  # a model's own check: its message says it all
            problems.append(str(err["msg"]).removeprefix("Value error, "))
            continue
        key = ".".join(str(p) for p in loc)
        name = str(loc[0]) if str(loc[0]) in knobs else None
        if err["type"] == "extra_forbidden":
            leaf = key.rpartition(".")[2]
            if leaf in knobs:  # a setting in another group's table
                group = knobs[leaf][0]
                close = [leaf if group is None else f"{group}.{leaf}"]
            else:
                names = [*knobs, *(f"{g}.{n}" for n, (g, _) in knobs.items() if g is not None)]
                close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}?" if close else "see docs/cli.md, Settings"
            origin = origins.get(key) or origins.get(str(loc[0]))
            where = f"{origin[1]}: " if origin is not None and origin[0] == "toml" else ""
            problems.append(f"{where}no setting {key!r}; {hint}")
            continue
        if name is None and key in _GROUPS:  # a group given as something else than a table
            origin = origins.get(key)
            where = f"{origin[1]}: " if origin is not None and origin[0] == "toml" else ""
            problems.append(
                f"{where}{key} = {_shown(err['input'])}: expected a table of its settings, "
                f"[{key}] then one setting a line"
            )
            continue
        if name is None:
            problems.append(f"{key}: {_plain(None, err)}")
            continue
        where = _where(name, err["input"], origins.get(name))
        problems.append(f"{where}: {_plain(name, err)}" if where else _plain(name, err))
    if len(problems) == 1:  # the usual case: one line, `gossamer: error: …`
        return problems[0]
    return "\n  ".join(["invalid settings:", *problems])
