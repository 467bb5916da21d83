"""The audit against synthetic request logs: page accounting, politeness, the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest
from _logfiles import write_log

from gossamer.cli import main
from gossamer.testweb import WebModel, WebSpec
from gossamer.testweb._audit import AuditReport, audit
from gossamer.testweb._logread import LogRecord
from gossamer.testweb._model import PageFlag
from gossamer.testweb._truth import Truth, TruthRules, compute_truth, split_url

SPEC = WebSpec(
    seed=11,
    hosts=40,
    pages_mean=12,
    overrides=(
        ("robots_disallow", 1.0),
        ("robots_crawl_delay", 0.3),
        ("nofollow_link", 0.1),
        ("nonhtml_link", 0.1),
        ("trap_host", 0.5),
        ("reset_once", 0.05),
        ("reset_always", 0.05),
    ),
)
START = 1_800_000_000_000_000  # µs


@pytest.fixture(scope="module")
def model() -> WebModel:
    return WebModel(SPEC)


@pytest.fixture(scope="module")
def truth(model: WebModel) -> Truth:
    return compute_truth(model, TruthRules(scope="all"))


class Client:
    """Builds log records as a sequential client would produce them."""

    def __init__(self, model: WebModel, *, gap_us: int = 10_000, took_us: int = 1_000) -> None:
        self.model = model
        self.t = START
        self.gap = gap_us
        self.took = took_us
        self.records: list[LogRecord] = []
        self.conn = 0

    def get(
        self,
        url: str,
        *,
        status: int = 200,
        outcome: str = "ok",
        at: int | None = None,
        took: int | None = None,
        ua: str = "gossamer/0.1",
        method: str = "GET",
        host: str | None = None,
        target: str | None = None,
    ) -> LogRecord:
        name, tgt = split_url(url)
        h = self.model.host_by_name(name)
        ip = h.ip if h is not None else "127.0.0.1"
        start = self.t + self.gap if at is None else at
        end = start + (self.took if took is None else took)
        self.conn += 1
        rec = LogRecord(
            start,
            end,
            f"1-{self.conn}",
            ip,
            name if host is None else host,
            method,
            tgt if target is None else target,
            status,
            100,
            outcome,
            ua,
        )
        self.records.append(rec)
        self.t = max(self.t, end)
        return rec

    def polite_crawl(self, urls: Iterable[str], truth: Truth) -> None:
        """robots.txt before each host's first page, crawl delays honoured (sequential, so
        one delay after the latest request is enough: the test web has few delays)."""
        seen: set[str] = set()
        for url in urls:
            name = split_url(url)[0]
            host = self.model.host_by_name(name)
            assert host is not None
            delay = int(truth.crawl_delay.get(name, 0.0) * 1e6)
            if name not in seen:
                seen.add(name)
                self.get(f"http://{name}/robots.txt")
            self.t += delay
            self.get(url, **self._answer(url))

    def _answer(self, url: str) -> dict[str, object]:
        name, target = split_url(url)
        h = self.model.by_name[name]
        res = self.model.resolve(h, target)
        if res.kind.name == "PAGE":
            flags = self.model.page_flags(h, res.a)
            if flags & PageFlag.RESET_ALWAYS:
                return {"status": 0, "outcome": "reset"}
        return {}


def run(
    model: WebModel, client: Client, rules: TruthRules | None = None, **kw: object
) -> AuditReport:
    return audit(model, client.records, rules or TruthRules(scope="all"), **kw)  # type: ignore[arg-type]


def plain_pages(model: WebModel, truth: Truth) -> list[str]:
    """Required non-home pages that answer 200 every time."""
    out = []
    for url in truth.order:
        name, target = split_url(url)
        res = model.resolve(model.by_name[name], target)
        if (
            res.kind.name == "PAGE"
            and res.a
            and not model.page_flags(res.host, res.a)
            & (PageFlag.RESET_ALWAYS | PageFlag.RESET_ONCE)
        ):
            out.append(url)
    return out


def first(truth: Truth, reason: str) -> str:
    return next(u for u, r in sorted(truth.excluded.items()) if r == reason)


# ------------------------------------------------------------------ page accounting
def test_a_correct_crawl_is_clean(model: WebModel, truth: Truth) -> None:
    c = Client(model)
    c.polite_crawl(truth.order, truth)
    rep = run(model, c, truth=truth)
    assert rep.coverage == 1.0
    assert rep.overlap == 0.0
    assert rep.fetched == rep.unique
    assert rep.missed == 0
    assert rep.ok, rep.format_table()
    assert rep.politeness_violations == 0
    assert rep.auxiliary_requests == len(truth.hosts)
    assert rep.not_counted.get("reset", 0) > 0  # reset-always pages: covered, not counted
    assert rep.page_requests == len(truth.order)


def test_overlap_is_exact(model: WebModel, truth: Truth) -> None:
    c = Client(model)
    c.polite_crawl(truth.order, truth)
    pages = plain_pages(model, truth)[:4]
    for url in pages[:3]:
        c.t += int(truth.crawl_delay.get(split_url(url)[0], 0) * 1e6)
        c.get(url)
    # the same page again through a session id and a non-canonical target
    name, target = split_url(pages[3])
    c.get(pages[3], target=target + "?sessionid=0123456789ab", at=c.t + 2_000_000)
    c.get(pages[3], target="/x/.." + target, host=name.upper(), at=c.t + 2_000_000)
    rep = run(model, c, truth=truth)
    assert rep.unique == len(truth.order) - rep.not_counted.get("reset", 0)
    assert rep.fetched == rep.unique + 5
    assert rep.overlap == pytest.approx(5 / rep.unique)
    assert rep.duplicated_urls == 4
    assert dict(rep.duplicates)[pages[3]] == 3
    assert rep.coverage == 1.0
    assert rep.ok  # duplicates are a measure, not a violation


def test_retries_are_not_duplicates(model: WebModel, truth: Truth) -> None:
    c = Client(model)
    url = truth.order[0]
    c.get(f"http://{split_url(url)[0]}/robots.txt")
    c.get(url, status=503)
    c.get(url, status=429)
    c.get(url, status=0, outcome="reset")
    c.get(url)
    rep = run(model, c, truth=truth)
    assert rep.fetched == 1 and rep.unique == 1 and rep.overlap == 0
    assert rep.not_counted == {"503": 1, "429": 1, "reset": 1}
    assert rep.page_requests == 4


def test_coverage_counts_conclusive_answers(model: WebModel, truth: Truth) -> None:
    def flagged(flag: int) -> str:
        for url in truth.order:
            name, target = split_url(url)
            res = model.resolve(model.by_name[name], target)
            if res.kind.name == "PAGE" and model.page_flags(res.host, res.a) & flag:
                return url
        raise AssertionError("no such page")

    once, always = flagged(PageFlag.RESET_ONCE), flagged(PageFlag.RESET_ALWAYS)
    c = Client(model)
    c.get(once, status=0, outcome="reset")
    c.get(always, status=0, outcome="reset")
    c.get(truth.order[0], status=503)
    rep = run(model, c, truth=truth, rules=TruthRules(scope="all", obey_robots=False))
    assert rep.covered == 1  # only the reset-always page: the others needed a retry
    assert rep.missed == len(truth.order) - 1
    assert once in rep.missed_sample or rep.missed > len(rep.missed_sample)


def test_pages_that_should_not_be_fetched(model: WebModel, truth: Truth) -> None:
    c = Client(model)
    c.polite_crawl(truth.order[:1], truth)
    wrong = {reason: first(truth, reason) for reason in ("robots", "nofollow", "non-html", "trap")}
    for url in wrong.values():
        c.get(url, at=c.t + 1_000_000)
    trap_url = next(iter(sorted(truth.trap)))
    name = split_url(trap_url)[0]
    c.get(f"http://{name}/calendar/1999/01/", at=c.t + 1_000_000)  # deeper in the trap
    c.get(f"http://{name}/no/such/page.html", at=c.t + 1_000_000)
    c.get("http://www.nowhere.example/", at=c.t + 1_000_000)
    rules = TruthRules(scope="all", obey_robots=True)
    rep = run(model, c, rules=rules, truth=truth)
    assert rep.unexpected["robots"] == 1
    assert rep.unexpected["nofollow"] == 1
    assert rep.unexpected["non-html"] == 1
    assert rep.unexpected["trap"] == 2
    assert rep.unexpected["unreachable"] == 1
    assert rep.unexpected["not-found-host"] == 1
    assert rep.unexpected_requests == 7
    assert rep.trap_requests == 2
    assert not rep.ok
    # scope: the same fetches with host scope
    host_rules = TruthRules(seeds=(truth.order[0],), scope="host")
    other = next(u for u in truth.order if split_url(u)[0] != split_url(truth.order[0])[0])
    c2 = Client(model)
    c2.get(f"http://{split_url(truth.order[0])[0]}/robots.txt")
    c2.get(truth.order[0])
    c2.get(f"http://{split_url(other)[0]}/robots.txt")
    c2.get(other)
    rep2 = run(model, c2, rules=host_rules)
    assert rep2.unexpected == {"scope": 1}


def test_max_pages_excess(model: WebModel, truth: Truth) -> None:
    c = Client(model)
    c.polite_crawl(truth.order[:12], truth)
    rep = run(model, c, rules=TruthRules(scope="all", max_pages=10))
    assert rep.expected == 10
    assert rep.excess_pages == 2
    assert rep.covered == 12
    assert rep.coverage == 1.0  # capped: the excess is reported as a violation instead
    assert not rep.ok
    ok = run(model, c, rules=TruthRules(scope="all", max_pages=12))
    assert ok.excess_pages == 0 and ok.ok
    half = run(model, c, rules=TruthRules(scope="all", max_pages=24))
    assert half.coverage == 0.5


# ------------------------------------------------------------------ politeness
def delayed_host(model: WebModel, truth: Truth) -> tuple[str, list[str]]:
    name = next(n for n in truth.hosts if n in truth.crawl_delay)
    return name, [u for u in truth.order if split_url(u)[0] == name]


def test_host_overlap_and_delay(model: WebModel, truth: Truth) -> None:
    name, urls = delayed_host(model, truth)
    delay = int(truth.crawl_delay[name] * 1e6)
    c = Client(model)
    c.get(f"http://{name}/robots.txt")
    c.t += delay
    a = c.get(urls[0], took=50_000)
    c.get(urls[1], at=a.start_us + 10_000)  # while the first is in flight
    c.t += delay // 2
    c.get(urls[2])  # too early
    c.t += delay + 1
    c.get(urls[3])  # fine
    rep = run(model, c, truth=truth)
    assert rep.politeness["host-overlap"] == 1
    assert rep.politeness["host-delay"] == 1
    assert rep.politeness["ip-concurrency"] == 1
    assert rep.max_in_flight[model.host_by_name(name).ip] == 2  # type: ignore[union-attr]
    kinds = [v.kind for v in rep.violations]
    assert kinds.count("host-overlap") == 1 and kinds.count("host-delay") == 1
    # max_crawl_delay caps the robots.txt delay: half the delay is then enough
    capped = run(model, c, truth=truth, max_crawl_delay=delay / 2e6)
    assert capped.politeness["host-delay"] == 0
    # robots ignored: no crawl delay applies (and no robots-first rule)
    ignored = run(model, c, rules=TruthRules(scope="all", obey_robots=False))
    assert ignored.politeness["host-delay"] == 0


def test_min_delay_and_tolerance(model: WebModel, truth: Truth) -> None:
    name = next(n for n in truth.hosts if n not in truth.crawl_delay)
    urls = [u for u in truth.order if split_url(u)[0] == name][:3]
    c = Client(model, gap_us=100_000)
    c.get(f"http://{name}/robots.txt")
    for url in urls:
        c.get(url)
    assert run(model, c, truth=truth, min_delay=0.1).politeness["host-delay"] == 0
    assert run(model, c, truth=truth, min_delay=0.2).politeness["host-delay"] == len(urls)
    assert run(model, c, truth=truth, min_delay=0.104).politeness["host-delay"] == 0
    assert run(model, c, truth=truth, min_delay=0.104, tolerance_s=0.001).politeness[
        "host-delay"
    ] == len(urls)


def test_per_ip_concurrency(model: WebModel, truth: Truth) -> None:
    shared = {}
    for name in truth.hosts:
        shared.setdefault(model.host_by_name(name).ip, []).append(name)  # type: ignore[union-attr]
    names = next(v for v in shared.values() if len(v) >= 2)
    c = Client(model)
    for name in names[:2]:
        c.get(f"http://{name}/robots.txt")
    t = c.t + 1_000_000
    c.get(f"http://{names[0]}/", at=t, took=100_000)
    c.get(f"http://{names[1]}/", at=t + 50_000, took=100_000)  # other host, same IP
    rep = run(model, c, truth=truth)
    assert rep.politeness["ip-concurrency"] == 1
    assert rep.politeness["host-overlap"] == 0
    assert run(model, c, truth=truth, per_ip_limit=2).politeness["ip-concurrency"] == 0


def test_robots_first_and_user_agent(model: WebModel, truth: Truth) -> None:
    name = truth.hosts[0]
    c = Client(model)
    c.get(truth.order[0])  # before robots.txt
    c.get(f"http://{name}/robots.txt", ua="curl/8")
    c.get(truth.order[1] if split_url(truth.order[1])[0] == name else truth.order[0])
    rep = run(model, c, truth=truth, user_agent="gossamer")
    assert rep.politeness["robots-first"] == 1
    assert rep.politeness["user-agent"] == 1
    no_robots = Client(model)
    no_robots.get(truth.order[0])
    assert run(model, no_robots, truth=truth).politeness["robots-first"] == 1
    assert (
        run(model, c, rules=TruthRules(scope="all", obey_robots=False)).politeness["robots-first"]
        == 0
    )


def test_report_outputs(model: WebModel, truth: Truth) -> None:
    c = Client(model)
    c.polite_crawl(truth.order[:5], truth)
    c.get(truth.order[1], at=c.t + 5_000_000, took=50_000)
    c.get(truth.order[1], at=c.records[-1].start_us + 10)
    rep = run(model, c, truth=truth)
    data = json.loads(rep.to_json())
    assert data["pages"]["fetched"] == rep.fetched
    assert data["politeness"]["violations"]["host-overlap"] == 1
    assert data["ok"] is False
    table = rep.format_table()
    assert "coverage" in table and "overlap (N-I)/I" in table
    assert "host-overlap" in table and "VIOLATION" in table


# ------------------------------------------------------------------ log files and CLI


def test_cli_audit(
    tmp_path: Path, model: WebModel, truth: Truth, capsys: pytest.CaptureFixture[str]
) -> None:
    c = Client(model)
    c.polite_crawl(truth.order, truth)
    log = write_log(tmp_path / "web.log", SPEC, c.records)
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "crawl.json").write_text(
        json.dumps(
            {
                "seeds": [truth.order[0]],
                "scope": "all",
                "max_depth": None,
                "max_pages": None,
                "user_agent": "gossamer",
                "obey_robots": True,
                "strip_session_ids": True,
                "workers": 4,
            }
        )
    )
    out = tmp_path / "report.json"
    code = main(
        [
            "testweb",
            "audit",
            "--log",
            str(log),
            "--crawl",
            str(crawl),
            "--json",
            str(out),
            "--fail-on-violation",
        ]
    )
    assert code == 0, capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["pages"]["coverage"] == 1.0
    assert report["rules"]["scope"] == "all"
    assert "verdict: OK" in capsys.readouterr().out
    # an explicit flag overrides crawl.json: host scope makes the other hosts' pages wrong
    code = main(
        [
            "testweb",
            "audit",
            "--log",
            str(log),
            "--crawl",
            str(crawl),
            "--scope",
            "host",
            "--fail-on-violation",
        ]
    )
    assert code == 1
    assert "scope" in capsys.readouterr().out
    # without --fail-on-violation the exit code stays 0
    assert main(["testweb", "audit", "--log", str(log), "--scope", "host", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_cli_audit_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nginx = tmp_path / "access.log"
    nginx.write_text(
        "1800000000.100\t0.004\t1\t127.1.0.1\twww.h0.example\tGET\t/\t200\t10\t-\t-\t-\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["testweb", "audit", "--log", str(nginx)])
    assert exc.value.code == 2
    assert "--web" in capsys.readouterr().err
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(SPEC.to_json())
    assert main(["testweb", "audit", "--log", str(nginx), "--web", str(spec_file)]) == 0
    with pytest.raises(SystemExit):
        main(["testweb", "audit", "--log", str(tmp_path / "missing.log")])


def test_cli_truth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "truth.json"
    args = ["testweb", "truth", "--hosts", "30", "--pages-mean", "8", "--seed", "4"]
    assert main([*args, "--scope", "all", "--max-depth", "3", "--out", str(out)]) == 0
    assert "required URLs" in capsys.readouterr().out
    data = json.loads(out.read_text())
    truth = compute_truth(
        WebModel(WebSpec(seed=4, hosts=30, pages_mean=8)), TruthRules(scope="all", max_depth=3)
    )
    assert data["order"] == list(truth.order)
    assert [tuple(e) for e in data["edge_list"]] == truth.edges
    flags = ["--json", "--ignore-robots", "--follow-nofollow", "--all-types", "--keep-session-ids"]
    assert main([*args, *flags, "--sitemaps", "--seeds", "http://www.h1.example/"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rules"]["seeds"] == ["http://www.h1.example/"]
    assert summary["rules"]["obey_robots"] is False
    with pytest.raises(SystemExit):
        main([*args, "--seeds", "ftp://x/"])


def test_robots_redirect_hops_are_held_to_the_crawls_delay_not_the_crawl_delay(
    model: WebModel, truth: Truth
) -> None:
    """The Crawl-delay is in the file at the end of a robots.txt redirect chain: the hops
    before it can only be held to the crawl's own delay (min_delay); the first page after the
    chain is held to the Crawl-delay."""
    name, urls = delayed_host(model, truth)
    delay = int(truth.crawl_delay[name] * 1e6)
    c = Client(model)
    c.get(f"http://{name}/robots.txt")
    c.get(f"http://{name}/robots-moved/0.txt")  # 10 ms after: < Crawl-delay, >= min_delay
    c.t += delay // 2
    c.get(urls[0])  # too early for the Crawl-delay
    rep = run(model, c, truth=truth, min_delay=0.01)
    assert rep.politeness["host-delay"] == 1
    assert [v.target for v in rep.violations] == [split_url(urls[0])[1]]
    # a hop quicker than the crawl's own delay is still a violation
    assert run(model, c, truth=truth, min_delay=0.02).politeness["host-delay"] == 2
