"""`gossamer crawl --resume DIR`: which settings given with it a resumed crawl takes, and
whether the crawl has anything left to do (docs/crawler.md, "Resuming a crawl").

A resume takes from its command line (flags, `GOSSAMER_*` variables, `--config`) only the
settings of `RUN_TIME`: how the crawl runs, not what it fetches (`max_pages` included, so a
crawl that stopped at its limit can go on). A `DEFINITION` setting given with another value
than the stored one is refused, each named, before anything in the directory is touched: one
crawl never gets two definitions. A crawl whose last run ended "complete", or "max-pages"
without a higher limit, has nothing to resume: `plan_resume` says so and nothing changes —
unless a run-time setting given may fix why some of its URLs failed (`RETRY_ON`: a private
address now allowed, another proxy, longer time-outs): those URLs are queued again
(`requeue_failures`) and the crawl goes on."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import CrawlSettings, SettingsError
from ..crawldir import CrawlDir, CrawlError
from ..fetch import (
    ERROR_BLOCKED_ADDRESS,
    ERROR_CONNECT,
    ERROR_DNS,
    ERROR_EMPTY_REPLY,
    ERROR_NETWORK,
    ERROR_PARTIAL,
    ERROR_PROXY,
    ERROR_RESET,
    ERROR_TIMEOUT,
    ERROR_TLS,
    ERROR_TOO_SLOW,
)
from ..frontier import Failures
from ..frontier.sqlite import read_failures
from ..report.crawl import FIXES_HINT, fetched_nothing, human_date, stats_end_reason
from ..robots import unreachable_key
from ..robots_store import SqliteRobotsStore
from ..sinks import read_run_records, read_stats
from . import build
from .manifest import load_manifest

#: Settings a resume takes from its command line: how the crawl runs (processes, speed,
#: politeness, time-outs, how hosts are reached), not which URLs it fetches. Stored in
#: crawl.json, so the next resume keeps them.
RUN_TIME = frozenset(
    {
        "max_pages",
        "workers",
        "concurrency",
        "per_host",
        "per_ip",
        "delay",
        "max_crawl_delay",
        "adaptive_delay",
        "lease_order",
        "lease_ttl",
        "max_attempts",
        "resolve",
        "resolve_file",
        "allow_private",
        "connect_timeout",
        "first_byte_timeout",
        "total_timeout",
        "low_speed_limit",
        "low_speed_time",
        "max_body",
        "robots_ttl",
        "warc_max_bytes",
        "dedup_payloads",
        "disk_margin",
        "live_graph",
        "extract",
        "proxy",
    }
)

#: Settings that define the crawl: what it fetches, how it identifies itself (robots.txt
#: rules are matched against the user agent) and what it writes; and the cluster group's,
#: which an embedded crawl keeps at their defaults. A resume refuses a new value.
DEFINITION = frozenset(
    {
        "seeds",
        "output",
        "max_depth",
        "scope",
        "allow",
        "deny",
        "user_agent",
        "obey_robots",
        "follow_nofollow",
        "html_only",
        "strip_session_ids",
        "follow_canonical",
        "use_sitemaps",
        "host_budget",
        "max_path_repeat",
        "max_path_segments",
        "calendar_years_back",
        "calendar_years_ahead",
        "max_queries_per_path",
        "max_query_shapes",
        "near_dup_links",
        "near_dup_distance",
        "seen_set",
        "partition",
        "site_sizes",
        "phase_period",
        "phases",
        "epsilon",
        "heartbeat_ttl",
        "replica_acks",
        "replica_ack_timeout",
        "stop_patience",
        "warc",
        "recrawl",
        "seeds_file",
        "headers",
    }
)

#: Failures a proxy may route around: not reaching the server or the proxy, or no whole answer
#: (names are resolved and the private-address guard applied before the proxy, as without one)
_REACHING = (
    ERROR_PROXY,
    ERROR_CONNECT,
    ERROR_TIMEOUT,
    ERROR_TOO_SLOW,
    ERROR_RESET,
    ERROR_EMPTY_REPLY,
    ERROR_PARTIAL,
    ERROR_NETWORK,
    ERROR_TLS,
)

#: The run-time settings that may fix why URLs failed, and the fetch errors each may fix: a
#: resume that changes one queues again the crawl's failed URLs of those errors — the fetch's
#: own (`fetch/error/<cause>`), or robots.txt's (`robots/unreachable/<cause>`: the URLs an
#: unreachable robots.txt held back) — and its hosts' failed robots.txt answers are
#: forgotten. `allow_private` only when turned on. (docs/crawler.md, "Resuming a crawl")
RETRY_ON: dict[str, tuple[str, ...]] = {
    "allow_private": (ERROR_BLOCKED_ADDRESS,),
    "proxy": _REACHING,
    "resolve": (ERROR_DNS, ERROR_CONNECT, ERROR_TIMEOUT, ERROR_BLOCKED_ADDRESS),
    "resolve_file": (ERROR_DNS, ERROR_CONNECT, ERROR_TIMEOUT, ERROR_BLOCKED_ADDRESS),
    "connect_timeout": (ERROR_CONNECT, ERROR_TIMEOUT),
    "first_byte_timeout": (ERROR_TIMEOUT,),
    "total_timeout": (ERROR_TIMEOUT,),
    "low_speed_limit": (ERROR_TOO_SLOW,),
    "low_speed_time": (ERROR_TOO_SLOW,),
}

#: every fetch error a run-time setting may fix
_FIXABLE = tuple(sorted({error for errors in RETRY_ON.values() for error in errors}))

# how a setting is spelled on the command line where it is not `--<name with dashes>`
_FLAG = {
    "seeds": "SEED",
    "obey_robots": "--ignore-robots",
    "use_sitemaps": "--sitemaps",
    "warc": "--no-warc",
}


class ResumeRefused(SettingsError):
    """A resume given settings it does not take; the message names each one."""


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """What `gossamer crawl --resume DIR` does: run with `settings` (the stored ones with
    the run-time settings given, `changed`: name → new value as stored in crawl.json), or
    nothing when `nothing_to_do` (the message that says why) is set. `retry`: the fetch
    errors the changed settings may fix (`RETRY_ON`), when the crawl has failed URLs of
    them: `requeue_failures` queues those again before the run."""

    settings: CrawlSettings
    changed: dict[str, Any] = field(default_factory=dict)
    nothing_to_do: str | None = None
    retry: tuple[str, ...] = ()


def retry_errors(changed: dict[str, Any]) -> tuple[str, ...]:
    """The fetch errors the run-time settings `changed` (name → new value) may fix
    (`RETRY_ON`), sorted."""
    errors: set[str] = set()
    for name, value in changed.items():
        if name == "allow_private" and not value:
            continue  # refusing private addresses again fixes nothing
        errors.update(RETRY_ON.get(name, ()))
    return tuple(sorted(errors))


def failure_keys(errors: tuple[str, ...]) -> list[str]:
    """The keys failed URLs are recorded under for the fetch errors `errors`: the fetch's
    own, and robots.txt's (`robots/unreachable/<cause>`)."""
    return sorted({*errors, *(unreachable_key(e) for e in errors)})


def requeue_failures(
    settings: CrawlSettings, errors: tuple[str, ...], backends: build.Backends = build.EMBEDDED
) -> dict[str, int]:
    """Queue again the failed URLs of the crawl in `settings.output` whose error is one of
    `errors` or held back by a robots.txt that failed so (`Failures.requeue_failed`, which
    revives their hosts), and forget those robots.txt answers, so that the run fetches them
    again. Made with the directory's lock held, before the run. What was queued again, by
    key (the failures as they were; a dead host's `frontier/dead-host` URLs come back with it
    and are not listed); empty when the backend keeps no failures."""
    keys = failure_keys(errors)
    frontier = build.open_frontier(settings, backends)
    try:
        if not isinstance(frontier, Failures):
            return {}
        before = frontier.failures()
        if not frontier.requeue_failed(keys):
            return {}
    finally:
        frontier.close()
    store = SqliteRobotsStore(CrawlDir(settings.output).robots)
    try:
        store.forget_unanswered(errors)
    finally:
        store.close()
    return {key: n for key, n in before.items() if key in keys}


def flag_of(name: str) -> str:
    """The command-line spelling of setting `name`."""
    return _FLAG.get(name, "--" + name.replace("_", "-"))


def plan_resume(requested: CrawlSettings) -> ResumePlan:
    """Decide what resuming the crawl in `requested.output` does, reading its files only
    (nothing is written, nor the lock file touched). `requested` holds the settings given
    with --resume: those set explicitly (`knobs_set()`: flags, environment, config
    file) are compared with the stored ones. Raises ResumeRefused (a definition setting
    given a new value, or a page limit already reached), CrawlError, SettingsError."""
    out = requested.output
    stored = load_manifest(out)
    old, new = stored.manifest(), requested.manifest()
    given = sorted(requested.knobs_set() - {"output"})
    differ = [name for name in given if not _same(old.get(name), new.get(name))]
    refused = [name for name in differ if name not in RUN_TIME]
    if refused:
        raise ResumeRefused(_refusal(out, refused, old, new))
    changed = {name: new[name] for name in differ}
    settings = stored
    if changed:
        try:
            settings = CrawlSettings(**{**old, **changed, "output": str(out)})
        except Exception as exc:
            raise SettingsError(f"invalid settings for the resumed crawl: {exc}") from None
    _check_not_running(out)
    retry = _retry(out, changed)
    ending = _last_ending(out, stored.max_pages)
    if ending is None:
        return ResumePlan(settings, changed, retry=retry)
    reason, stats, when = ending
    frontier = stats.get("frontier") or {}
    done = int(frontier.get("done") or 0)
    at = f" at {human_date(when)}" if when is not None else ""
    if reason == "complete" and not retry:
        failed = int(frontier.get("failed") or 0)
        if fetched_nothing(out):
            anew = f"it fetched no page: the crawl command, its mistake fixed, reuses {out}"
        else:
            anew = "a new crawl needs a new -o DIR"
        fixable = _failures(out, failure_keys(_FIXABLE)) or {}
        fixes = f"; failed: {count_keys(fixable)}: {FIXES_HINT}" if fixable else ""
        return ResumePlan(
            settings,
            changed,
            nothing_to_do=f"{out}: the crawl is complete: it ended{at} with {done:,} pages "
            f"done ({failed:,} given up) and nothing left in its frontier; nothing to resume "
            f"(`gossamer report {out}` tells more; {anew}){fixes}",
        )
    if reason == "max-pages":
        limit = settings.max_pages
        if limit is not None and limit <= done:
            queued = int(frontier.get("queued") or 0)
            if "max_pages" in changed:
                raise ResumeRefused(
                    f"--max-pages {limit}: the crawl in {out} already has {done:,} pages; "
                    f"give more than {done:,} to go on, or leave --max-pages out"
                )
            return ResumePlan(
                settings,
                changed,
                nothing_to_do=f"{out}: the crawl stopped at its page limit (--max-pages "
                f"{limit}){at} with {done:,} pages done and {queued:,} URLs still queued; "
                f"to go on, raise the limit: gossamer crawl --resume {out} --max-pages N "
                f"(N > {done:,}), or --max-pages none",
            )
    return ResumePlan(settings, changed, retry=retry)


def _retry(out: Path, changed: dict[str, Any]) -> tuple[str, ...]:
    """The fetch errors `changed` may fix of which the crawl in `out` has failed URLs (all
    of them when its frontier cannot be read here: the run opens it, and finds out)."""
    errors = retry_errors(changed)
    if not errors:
        return ()
    failures = _failures(out, failure_keys(errors))
    return errors if failures is None or failures else ()


def _failures(out: Path, keys: list[str]) -> dict[str, int] | None:
    """The crawl's failed URLs under `keys`, by key, its frontier file read as it is, the
    directory untouched; None when it cannot be read so (a write-ahead log holds part of it,
    or an error), {} without a file."""
    path = CrawlDir(out).frontier
    try:
        failures = read_failures(path, untouched=True)
    except sqlite3.Error:
        return None
    if failures is None:
        return None if path.exists() else {}
    return {key: n for key, n in failures.items() if key in keys and n}


def count_keys(counts: dict[str, int]) -> str:
    """`key ×n, …`: counts by key, for a person."""
    return ", ".join(f"{key} ×{n:,}" for key, n in counts.items())


def _same(a: Any, b: Any) -> bool:
    """Whether two stored values (crawl.json's JSON) are the same setting. Lists are
    compared as sets: the order of seeds, --allow or --resolve entries changes nothing."""
    if isinstance(a, list) and isinstance(b, list):
        try:
            return set(map(json.dumps, a)) == set(map(json.dumps, b))
        except TypeError:
            return a == b
    return bool(a == b)


def _refusal(out: Path, refused: list[str], old: dict[str, Any], new: dict[str, Any]) -> str:
    parts = []
    for name in refused:
        env = f"GOSSAMER_{name.upper()}"
        source = f" from {env}" if env in os.environ else ""
        parts.append(
            f"{flag_of(name)} {_show(new.get(name))}{source} (the crawl's: {_show(old.get(name))})"
        )
    return (
        f"--resume {out}: {', '.join(parts)} would change what the crawl is; leave "
        f"{'it' if len(parts) == 1 else 'them'} out to resume the crawl as it was defined, "
        "or start a new crawl with a new -o DIR"
    )


def _show(value: Any) -> str:
    if isinstance(value, list):
        if len(value) > 3:
            return f"{len(value)} values [{', '.join(map(str, value[:3]))}, …]"
        return "[" + ", ".join(map(str, value)) + "]"
    return "none" if value is None else str(value)


def _check_not_running(out: Path) -> None:
    """CrawlError when a crawler holds the directory's lock (its lock file neither created
    nor changed)."""
    if CrawlDir(out).locked():
        raise CrawlError(f"another crawler is running in {out} (lock held)")


def _last_ending(
    out: Path, max_pages: int | None
) -> tuple[str, dict[str, Any], float | None] | None:
    """How the crawl's last run ended: (reason, its statistics, when), or None when it was
    killed (no end recorded), wrote no statistics, or ended in a way a resume goes on from
    (a signal, an error)."""
    crawl = CrawlDir(out)
    records = read_run_records(crawl.runs)
    starts = [r for r in records if r.get("event") == "start"]
    stats: dict[str, Any] | None = None
    when: float | None = None
    if starts:
        last = starts[-1].get("run")
        end = next(
            (r for r in reversed(records) if r.get("event") == "end" and r.get("run") == last),
            None,
        )
        if end is None:
            return None  # killed or crashed, or running: resume it
        stats = end.get("stats") if isinstance(end.get("stats"), dict) else None
        when = float(end["time"]) if isinstance(end.get("time"), int | float) else None
    else:  # a crawl older than run histories: its stats.json is its last run's
        try:
            stats = read_stats(crawl.stats)
            when = crawl.stats.stat().st_mtime
        except (OSError, ValueError):
            return None
    reason = stats_end_reason(stats, max_pages)
    if stats is None or reason not in ("complete", "max-pages"):
        return None
    return reason, stats, when
