"""The audit: a crawl's request log against the ground truth.

`audit(model, records, rules)` measures coverage and overlap of the pages fetched, lists the
pages that should not have been fetched (with the truth's reason), and checks politeness:
per-host overlaps and gaps against the required delay, per-IP concurrency, robots.txt before
pages, and the User-Agent, each with `tolerance_s` of slack. It reads logs only and never the
crawler, so it judges any client alike. Definitions of N, I, coverage, overlap and each
politeness check: docs/testweb.md, "The audit". `near_duplicate_scores(model, crawl log)`
scores a crawl's near-duplicate marks against the truth's groups (the `duplicates` profile)."""

from __future__ import annotations

import dataclasses
import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._logread import LogRecord
from ._model import TRAP_KINDS, Kind, PageFlag, WebModel
from ._truth import (
    RobotsOracle,
    Truth,
    TruthRules,
    compute_truth,
    near_duplicate_group,
    request_url,
    split_url,
)

VIOLATION_KINDS = ("host-overlap", "host-delay", "ip-concurrency", "robots-first", "user-agent")
_AUX_KINDS = frozenset({Kind.ROBOTS, Kind.ROBOTS_MOVED, Kind.SITEMAP, Kind.SITEMAP_PART})
_SAMPLE = 20
_VIOLATION_SAMPLE = 50


@dataclass(frozen=True, slots=True)
class Violation:
    """One politeness violation, at the start of the offending request."""

    kind: str  # one of VIOLATION_KINDS
    start_us: int
    host: str
    ip: str
    conn: str
    method: str
    target: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "start_us": self.start_us,
            "host": self.host,
            "ip": self.ip,
            "conn": self.conn,
            "method": self.method,
            "target": self.target,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class AuditReport:
    """Everything the audit found. `violation_count` > 0 means the crawl misbehaved:
    politeness violations, requests for URLs a correct crawler never requests, or pages
    beyond max_pages. Coverage and overlap are measurements, not violations."""

    rules: Mapping[str, Any]
    settings: Mapping[str, Any]
    log_files: tuple[str, ...]
    log_records: int
    log_malformed: int
    first_start_us: int
    last_end_us: int
    required: int
    expected: int
    page_requests: int
    fetched: int
    unique: int
    covered: int
    coverage: float
    overlap: float
    not_counted: Mapping[str, int]
    auxiliary_requests: int
    other_requests: int
    duplicated_urls: int
    duplicates: tuple[tuple[str, int], ...]
    unexpected: Mapping[str, int]  # reason -> distinct URLs requested
    unexpected_requests: int
    unexpected_sample: tuple[tuple[str, str], ...]
    trap_requests: int
    missed: int
    missed_sample: tuple[str, ...]
    excess_pages: int
    hosts: int
    ips: int
    politeness: Mapping[str, int]  # kind -> count
    max_in_flight: Mapping[str, int]  # ip -> most requests in flight at once
    violations: tuple[Violation, ...] = field(default=())  # the first ones, by time

    @property
    def politeness_violations(self) -> int:
        return sum(self.politeness.values())

    @property
    def violation_count(self) -> int:
        return self.politeness_violations + self.unexpected_requests + self.excess_pages

    @property
    def ok(self) -> bool:
        return self.violation_count == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "violation_count": self.violation_count,
            "rules": dict(self.rules),
            "settings": dict(self.settings),
            "log": {
                "files": list(self.log_files),
                "records": self.log_records,
                "malformed_lines": self.log_malformed,
                "first_start_us": self.first_start_us,
                "last_end_us": self.last_end_us,
            },
            "pages": {
                "required": self.required,
                "expected": self.expected,
                "page_requests": self.page_requests,
                "fetched": self.fetched,
                "unique": self.unique,
                "covered": self.covered,
                "coverage": self.coverage,
                "overlap": self.overlap,
                "not_counted": dict(self.not_counted),
                "auxiliary_requests": self.auxiliary_requests,
                "other_requests": self.other_requests,
                "duplicated_urls": self.duplicated_urls,
                "duplicates": [list(d) for d in self.duplicates],
                "unexpected": dict(self.unexpected),
                "unexpected_requests": self.unexpected_requests,
                "unexpected_sample": [list(u) for u in self.unexpected_sample],
                "trap_requests": self.trap_requests,
                "missed": self.missed,
                "missed_sample": list(self.missed_sample),
                "excess_pages": self.excess_pages,
            },
            "politeness": {
                "hosts": self.hosts,
                "ips": self.ips,
                "violations": dict(self.politeness),
                "max_in_flight": dict(self.max_in_flight),
                "sample": [v.to_dict() for v in self.violations],
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=2)

    def format_table(self) -> str:
        """A human summary: one line per figure, then the first violations."""
        rows: list[tuple[str, str]] = []
        r = self.rules
        seeds = ", ".join(r.get("seeds", [])) or "-"
        lines = [
            f"gossamer testweb audit: {len(self.log_files)} log file(s), "
            f"{self.log_records} requests over {_dur(self.last_end_us - self.first_start_us)}"
            + (f", {self.log_malformed} malformed lines" if self.log_malformed else ""),
            f"rules: seeds {seeds}; scope {r.get('scope')}; max_depth {_dash(r.get('max_depth'))}"
            f"; max_pages {_dash(r.get('max_pages'))}; robots "
            f"{'obeyed' if r.get('obey_robots') else 'ignored'}; user agent {r.get('user_agent')}",
            "",
            "Pages",
        ]
        rows += [
            ("required URLs (truth)", str(self.required)),
            ("expected pages", str(self.expected)),
            ("page requests", str(self.page_requests)),
            ("fetched N (counted)", str(self.fetched)),
            ("unique I", str(self.unique)),
            ("coverage", f"{self.coverage:.2%}  ({self.covered}/{self.expected})"),
            ("overlap (N-I)/I", f"{self.overlap:.4f}"),
            ("not counted (retries)", _kv(self.not_counted)),
            ("robots.txt + sitemaps", str(self.auxiliary_requests)),
            ("other requests", str(self.other_requests)),
            ("duplicated URLs", str(self.duplicated_urls)),
            ("missed required URLs", str(self.missed)),
            ("should not be fetched", f"{self.unexpected_requests}  {_kv(self.unexpected)}"),
            ("trap requests", str(self.trap_requests)),
            ("pages beyond max_pages", str(self.excess_pages)),
        ]
        lines += _table(rows)
        s = self.settings
        lines += [
            "",
            f"Politeness (min_delay {s['min_delay']}s, max_crawl_delay {s['max_crawl_delay']}s, "
            f"per_ip_limit {s['per_ip_limit']}, tolerance {s['tolerance_s']}s)",
        ]
        worst = max(self.max_in_flight.values(), default=0)
        lines += _table(
            [
                ("hosts / IPs", f"{self.hosts} / {self.ips}"),
                ("host overlap", str(self.politeness["host-overlap"])),
                ("host delay", str(self.politeness["host-delay"])),
                ("per-IP concurrency", f"{self.politeness['ip-concurrency']}  (max {worst})"),
                ("robots.txt first", str(self.politeness["robots-first"])),
                (
                    "user agent",
                    str(self.politeness["user-agent"]) if s.get("user_agent") else "not checked",
                ),
            ]
        )
        if self.duplicates:
            lines += ["", "Most duplicated URLs"]
            lines += [f"  {n:>5}x  {url}" for url, n in self.duplicates[:10]]
        if self.unexpected_sample:
            lines += ["", "Fetched but should not have been (sample)"]
            lines += [f"  {reason:<18} {url}" for url, reason in self.unexpected_sample]
        if self.missed_sample:
            lines += ["", "Missed required URLs (sample)"]
            lines += [f"  {url}" for url in self.missed_sample[:10]]
        if self.violations:
            total = self.politeness_violations
            lines += ["", f"Politeness violations (first {len(self.violations)} of {total})"]
            for v in self.violations:
                t = (v.start_us - self.first_start_us) / 1e6
                lines.append(
                    f"  +{t:9.3f}s  {v.kind:<14} {v.host or '-'} ({v.ip})  "
                    f"{v.method} {v.target}  {v.detail}"
                )
        verdict = "OK" if self.ok else f"{self.violation_count} VIOLATION(S)"
        lines += ["", f"verdict: {verdict}"]
        return "\n".join(lines)


def _dash(v: object) -> str:
    return "-" if v is None else str(v)


def _kv(d: Mapping[str, int]) -> str:
    items = [f"{k}: {v}" for k, v in d.items() if v]
    return ", ".join(items) if items else "-"


def _dur(us: int) -> str:
    return f"{max(0, us) / 1e6:.3f}s"


def _table(rows: list[tuple[str, str]]) -> list[str]:
    return [f"  {k:<26} {v}" for k, v in rows]


def audit(
    model: WebModel,
    records: Iterable[LogRecord],
    rules: TruthRules,
    *,
    min_delay: float = 0.0,
    max_crawl_delay: float = 30.0,
    per_ip_limit: int = 1,
    tolerance_s: float = 0.005,
    user_agent: str | None = None,
    truth: Truth | None = None,
    log_files: tuple[str, ...] = (),
    log_malformed: int = 0,
) -> AuditReport:
    """Audit `records` (any order) against the truth of `rules` on `model`.

    `truth` may be passed when already computed for the same rules. `user_agent`, when given,
    must appear (case-insensitively) in every request's User-Agent."""
    if min_delay < 0 or max_crawl_delay < 0 or tolerance_s < 0:
        raise ValueError("min_delay, max_crawl_delay and tolerance_s must be >= 0")
    if per_ip_limit < 1:
        raise ValueError(f"per_ip_limit must be >= 1, got {per_ip_limit}")
    rules = rules.with_default_seeds(model)
    if truth is None:
        truth = compute_truth(model, rules)
    recs = sorted(map(_normalised, records), key=lambda r: (r.start_us, r.end_us))
    settings = {
        "min_delay": min_delay,
        "max_crawl_delay": max_crawl_delay,
        "per_ip_limit": per_ip_limit,
        "tolerance_s": tolerance_s,
        "user_agent": user_agent,
    }
    pages = _PageAccount(model, rules, truth)
    for r in recs:
        pages.add(r)
    oracle = RobotsOracle(model, rules.user_agent)
    checker = _Politeness(
        model, oracle, rules, min_delay, max_crawl_delay, per_ip_limit, tolerance_s, user_agent
    )
    checker.run(recs)
    return pages.report(
        truth,
        checker,
        settings=settings,
        log_files=log_files,
        log_records=len(recs),
        log_malformed=log_malformed,
        first_start_us=recs[0].start_us if recs else 0,
        last_end_us=max((r.end_us for r in recs), default=0),
    )


def _normalised(r: LogRecord) -> LogRecord:
    """The record with its Host as a host name: lower case, no port, no trailing dot."""
    host = r.host
    if host and (not host.islower() or ":" in host or host.endswith(".")):
        name = host.lower()
        if not name.startswith("["):
            name = name.partition(":")[0]
        return dataclasses.replace(r, host=name.rstrip("."))
    return r


class _PageAccount:
    """Counts page requests by canonical URL."""

    def __init__(self, model: WebModel, rules: TruthRules, truth: Truth) -> None:
        self.model = model
        self.rules = rules
        self.truth = truth
        self.strip = rules.strip_session_ids
        self.requests = 0
        self.fetched = 0
        self.counted: dict[str, int] = {}
        self.attempted: dict[str, int] = {}
        self.covered: set[str] = set()
        self.not_counted: dict[str, int] = {}
        self.auxiliary = 0
        self.other = 0
        self.kinds: dict[str, tuple[int | None, Kind | None, int]] = {}

    def _kind(self, url: str) -> tuple[int | None, Kind | None, int]:
        """(host id, resource kind, page id or -1) of a canonical URL, memoised."""
        hit = self.kinds.get(url)
        if hit is None:
            name, target = split_url(url)
            host = self.model.host_by_name(name)
            if host is None:
                hit = (None, None, -1)
            else:
                res = self.model.resolve(host.id, target)
                hit = (host.id, res.kind, res.a if res.kind is Kind.PAGE else -1)
            self.kinds[url] = hit
        return hit

    def _retry_helps(self, url: str) -> bool:
        """A reset that a retry cures (the page resets on the first attempt only)."""
        hid, _kind, page = self._kind(url)
        if hid is None or page < 0:
            return False
        flags = self.model.page_flags(hid, page)  # builds the page plan: only for resets
        return bool(flags & PageFlag.RESET_ONCE and not flags & PageFlag.RESET_ALWAYS)

    def add(self, r: LogRecord) -> None:
        if r.method != "GET":
            self.other += 1
            return
        url = request_url(r.host, r.target, strip_session_ids=self.strip) if r.host else None
        if url is None:
            self.other += 1
            return
        if split_url(url)[1] == "/robots.txt":
            self.auxiliary += 1
            return
        kind = self._kind(url)[1]
        if kind in _AUX_KINDS:
            self.auxiliary += 1
            return
        self.requests += 1
        self.attempted[url] = self.attempted.get(url, 0) + 1
        if r.outcome == "ok" and r.status not in (0, 429, 503):
            self.fetched += 1
            self.counted[url] = self.counted.get(url, 0) + 1
            self.covered.add(url)
            return
        key = r.outcome if r.outcome != "ok" else ("no-status" if not r.status else str(r.status))
        self.not_counted[key] = self.not_counted.get(key, 0) + 1
        if r.outcome in ("hang", "aborted") or (
            r.outcome == "reset" and not self._retry_helps(url)
        ):
            self.covered.add(url)

    def report(self, truth: Truth, checker: _Politeness, **log: Any) -> AuditReport:
        required = truth.required
        unique = len(self.counted)
        expected = truth.expected_pages
        covered = sum(1 for u in self.covered if u in required)
        dups = sorted(
            ((u, n) for u, n in self.counted.items() if n > 1), key=lambda x: (-x[1], x[0])
        )
        unexpected: dict[str, int] = {}
        unexpected_requests = 0
        unexpected_urls: list[tuple[str, str]] = []
        trap_requests = 0
        for url, n in self.attempted.items():
            hid, kind, _page = self._kind(url)
            is_trap = url in truth.trap or kind in TRAP_KINDS
            if is_trap:
                trap_requests += n
            if url in required or url in truth.permitted:
                continue
            reason = truth.excluded.get(url)
            if reason is None:
                if hid is None:
                    reason = "not-found-host"
                elif is_trap:
                    reason = "trap"
                else:
                    reason = "unreachable"
            unexpected[reason] = unexpected.get(reason, 0) + 1
            unexpected_requests += n
            unexpected_urls.append((url, reason))
        unexpected_urls.sort(key=lambda x: (x[1], x[0]))
        missed = [u for u in truth.order if u not in self.covered]
        excess = 0
        if truth.max_pages is not None:
            excess = max(0, len(self.attempted) - truth.max_pages)
        return AuditReport(
            rules=truth.rules.to_dict(),
            required=len(required),
            expected=expected,
            page_requests=self.requests,
            fetched=self.fetched,
            unique=unique,
            covered=covered,
            coverage=min(1.0, covered / expected) if expected else 1.0,
            overlap=(self.fetched - unique) / unique if unique else 0.0,
            not_counted=dict(sorted(self.not_counted.items())),
            auxiliary_requests=self.auxiliary,
            other_requests=self.other,
            duplicated_urls=len(dups),
            duplicates=tuple(dups[:_SAMPLE]),
            unexpected=dict(sorted(unexpected.items())),
            unexpected_requests=unexpected_requests,
            unexpected_sample=tuple(unexpected_urls[:_SAMPLE]),
            trap_requests=trap_requests,
            missed=len(missed),
            missed_sample=tuple(missed[:_SAMPLE]),
            excess_pages=excess,
            hosts=checker.hosts,
            ips=len(checker.max_in_flight),
            politeness=dict(checker.counts),
            max_in_flight=dict(sorted(checker.max_in_flight.items())),
            violations=tuple(sorted(checker.sample, key=lambda v: (v.start_us, v.kind))),
            **log,
        )


def _robots_chain(r: LogRecord) -> bool:
    """robots.txt or one of the simulated web's redirect hops towards it."""
    return r.target == "/robots.txt" or r.target.startswith("/robots-moved/")


def _is_robots(r: LogRecord) -> bool:
    if r.target == "/robots.txt":
        return True
    if "robots.txt" not in r.target:
        return False
    url = request_url(r.host or "unknown.invalid", r.target)
    return url is not None and split_url(url)[1] == "/robots.txt"


class _Politeness:
    def __init__(
        self,
        model: WebModel,
        oracle: RobotsOracle,
        rules: TruthRules,
        min_delay: float,
        max_crawl_delay: float,
        per_ip_limit: int,
        tolerance_s: float,
        user_agent: str | None,
    ) -> None:
        self.model = model
        self.oracle = oracle
        self.rules = rules
        self.min_delay_us = round(min_delay * 1e6)
        self.max_crawl_delay_us = round(max_crawl_delay * 1e6)
        self.limit = per_ip_limit
        self.tol = round(tolerance_s * 1e6)
        self.ua = user_agent.lower() if user_agent else None
        self.counts = dict.fromkeys(VIOLATION_KINDS, 0)
        self.sample: list[Violation] = []
        self.max_in_flight: dict[str, int] = {}
        self.hosts = 0

    def _flag(self, kind: str, r: LogRecord, detail: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= _VIOLATION_SAMPLE:
            self.sample.append(
                Violation(kind, r.start_us, r.host, r.ip, r.conn, r.method, r.target, detail)
            )

    def required_delay_us(self, host: str) -> int:
        h = self.model.host_by_name(host) if host else None
        if h is not None and self.rules.obey_robots:
            delay = self.oracle.crawl_delay(h.id)
            if delay is not None:
                return min(round(delay * 1e6), self.max_crawl_delay_us)
        return self.min_delay_us

    def run(self, recs: list[LogRecord]) -> None:
        by_host: dict[str, list[LogRecord]] = {}
        by_ip: dict[str, list[LogRecord]] = {}
        for r in recs:
            by_host.setdefault(r.host, []).append(r)
            by_ip.setdefault(r.ip, []).append(r)
            if self.ua is not None and self.ua not in r.ua.lower():
                self._flag("user-agent", r, f"User-Agent {r.ua!r} lacks {self.ua!r}")
        self.hosts = len(by_host)
        for host, hrecs in by_host.items():
            self._host(host, hrecs)
            if self.rules.obey_robots:
                self._robots_first(hrecs)
        for ip, irecs in by_ip.items():
            self._ip(ip, irecs)

    def _host(self, host: str, recs: list[LogRecord]) -> None:
        need_host = self.required_delay_us(host)
        tol = self.tol
        last_end: int | None = None
        for r in recs:
            # robots.txt and its redirect hops are held to the crawl's own delay: the host's
            # Crawl-delay is in the file at the end of the chain, unknown until it is read
            need = self.min_delay_us if _robots_chain(r) else need_host
            if last_end is not None:
                gap = r.start_us - last_end
                if gap < -tol:
                    self._flag(
                        "host-overlap", r, f"starts {-gap / 1e6:.3f}s before the previous ended"
                    )
                elif gap < need - tol:
                    self._flag(
                        "host-delay",
                        r,
                        f"gap {max(gap, 0) / 1e6:.3f}s < required {need / 1e6:.3f}s",
                    )
            last_end = r.end_us if last_end is None else max(last_end, r.end_us)

    def _robots_first(self, recs: list[LogRecord]) -> None:
        robots = [_is_robots(r) for r in recs]
        ends = [r.end_us for r, is_robots in zip(recs, robots, strict=True) if is_robots]
        robots_end = min(ends) if ends else None
        for r, is_robots in zip(recs, robots, strict=True):
            if is_robots:
                continue
            if robots_end is None:
                self._flag("robots-first", r, "robots.txt never requested")
            elif r.start_us < robots_end - self.tol:
                self._flag("robots-first", r, "requested before robots.txt was read")

    def _ip(self, ip: str, recs: list[LogRecord]) -> None:
        in_flight: list[int] = []  # end times (minus tolerance) of requests still running
        worst = 0
        for r in recs:
            while in_flight and in_flight[0] <= r.start_us:
                heapq.heappop(in_flight)
            n = len(in_flight) + 1
            worst = max(worst, n)
            if n > self.limit:
                self._flag("ip-concurrency", r, f"{n} requests in flight (limit {self.limit})")
            heapq.heappush(in_flight, max(r.start_us, r.end_us - self.tol))
        self.max_in_flight[ip] = worst


@dataclass(frozen=True, slots=True)
class NearDupScore:
    """How well a crawl's duplicate marks match the truth's near-duplicate groups
    (`near_duplicate_scores`): `marked` pages marked (`dup` in the crawl log), `correct` of
    them marked as a duplicate of a page of their own group, `expected` the marks a perfect
    detector makes (each group's distinct pages fetched, less one), and from them precision
    (correct / marked) and recall (correct / expected), 1.0 when there is nothing to count."""

    marked: int
    correct: int
    expected: int
    groups: int  # groups with two pages fetched or more

    @property
    def precision(self) -> float:
        return self.correct / self.marked if self.marked else 1.0

    @property
    def recall(self) -> float:
        return self.correct / self.expected if self.expected else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "marked": self.marked,
            "correct": self.correct,
            "expected": self.expected,
            "groups": self.groups,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
        }


def near_duplicate_scores(model: WebModel, records: Iterable[Mapping[str, Any]]) -> NearDupScore:
    """Score the `dup` marks of a crawl log's `records` (`sinks.read_crawl_log`) against the
    truth's near-duplicate groups (`_truth.near_duplicate_group`): a page fetched (200, a
    depth) marked `dup` with `dup_of` in its own group is correct; any other mark is not."""
    fetched: dict[tuple[str, int, int], set[str]] = {}
    marked = correct = 0
    for rec in records:
        if rec.get("depth") is None or rec.get("status") != 200:
            continue
        url = str(rec.get("url"))
        group = near_duplicate_group(model, url)
        if group is not None:
            fetched.setdefault(group, set()).add(url)
        if rec.get("dup") is not None:
            marked += 1
            like = rec.get("dup_of")
            if group is not None and isinstance(like, str):
                correct += near_duplicate_group(model, like) == group and like != url
    groups = [urls for urls in fetched.values() if len(urls) > 1]
    return NearDupScore(marked, correct, sum(len(g) - 1 for g in groups), len(groups))
