"""Trap detectors: calendars, path segments, query strings per path (docs/crawler.md, Traps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gossamer.config import load_settings
from gossamer.scope import Scope
from gossamer.testweb import TruthRules, WebSpec, compute_truth
from gossamer.testweb._model import TRAP_KINDS, HostFlag, Kind, model_for
from gossamer.traps import (
    CalendarWindow,
    QueryTraps,
    calendar_window,
    date_only_years,
    path_segments,
)
from gossamer.urls import host_key

NOW = 2026
WINDOW = CalendarWindow(years_back=30, years_ahead=5, now_year=NOW)


@pytest.mark.parametrize(
    "url",
    [
        "http://www.a.example/calendar/3787/12/",  # the run of the issue
        "http://www.a.example/calendar/3787/12",
        "http://www.a.example/calendar/3787/12/25/",
        "http://www.a.example/calendar/3787/12/index.html",
        "http://www.a.example/events/3787-12/",
        "http://www.a.example/events/day/3787-12-25",
        "http://www.a.example/calendar/1900/01/",  # walked backwards
        "http://www.a.example/cal.php?year=3787&month=1",
        "http://www.a.example/cal.php?month=1&YEAR=1899",
        "http://www.a.example/index.php?y=2040&m=3",
        "http://www.a.example/agenda?date=2100-01-31",
        "http://www.a.example/agenda?from=2026-01&to=2099-01",  # one year far out is enough
        "http://www.a.example/2032/01/",  # six years ahead
    ],
)
def test_calendar_urls_far_from_now_are_traps(url: str) -> None:
    assert WINDOW.is_trap(url), date_only_years(url)
    scope = Scope([], scope="all", calendar=WINDOW)
    assert scope.reject_url(url, host_key(url)) == "scope/trap-calendar"


@pytest.mark.parametrize(
    "url",
    [
        # blogs and news: a date followed by a slug is an article, whatever its year
        "http://blog.a.example/2024/05/article-title",
        "http://blog.a.example/2024/05/article-title/",
        "http://blog.a.example/2024/05/17/article-title.html",
        "http://news.a.example/1923/05/12/archives/old-story.html",
        "http://news.a.example/2031/05/12/future-looking-essay",
        # date-only pages within the window: monthly and daily archives, this year's calendar
        "http://blog.a.example/2024/05/",
        "http://blog.a.example/2024/05/17/",
        "http://blog.a.example/archive/1998/03/",
        "http://www.a.example/calendar/2026/11/",  # the simulated web's calendar entry
        "http://www.a.example/calendar/2031/11/",  # five years ahead: still inside
        "http://www.a.example/events/2027-06-01",
        "http://www.a.example/cal.php?year=2027&month=1",
        # numbers that are not dates
        "http://www.a.example/go/3787/5/2",  # ids: an unpadded "month"
        "http://www.a.example/product/3787",
        "http://www.a.example/item/3787/",
        "http://www.a.example/p/1234/99/",  # 99 is no month
        "http://www.a.example/map.cgi?x=1024&y=1024",  # image-map coordinates
        "http://www.a.example/view.php?cat=news&id=3787",
        "http://www.a.example/search?q=1984",
        "http://www.a.example/",
        "http://www.a.example",
    ],
)
def test_dated_and_numbered_urls_that_are_not_calendar_traps(url: str) -> None:
    assert not WINDOW.is_trap(url), date_only_years(url)


def test_calendar_window_sides_and_settings() -> None:
    assert CalendarWindow(years_back=None, years_ahead=5, now_year=NOW).is_trap(
        "http://a.example/c/2032/01/"
    )
    assert not CalendarWindow(years_back=None, years_ahead=5, now_year=NOW).is_trap(
        "http://a.example/c/1000/01/"
    )
    assert CalendarWindow(years_back=0, years_ahead=None, now_year=NOW).is_trap(
        "http://a.example/c/2025/12/"
    )
    assert not CalendarWindow(years_back=0, years_ahead=None, now_year=NOW).is_trap(
        "http://a.example/c/9999/12/"
    )
    assert calendar_window(load_settings({})) is not None
    assert calendar_window(load_settings({"calendar_years_ahead": "none"})) is not None
    both = {"calendar_years_back": "none", "calendar_years_ahead": "none"}
    assert calendar_window(load_settings(both)) is None
    assert CalendarWindow().now_year >= 2025  # this year, from the clock


@pytest.mark.parametrize(
    ("url", "count"),
    [
        ("http://a.example/", 0),
        ("http://a.example", 0),
        ("http://a.example/a/b/", 2),
        ("http://a.example/a//b/c.html?x=/y/z", 3),
    ],
)
def test_path_segments(url: str, count: int) -> None:
    assert path_segments(url) == count


def test_too_many_path_segments() -> None:
    scope = Scope([], scope="all", max_path_segments=20, max_path_repeat=0)
    deep = "http://a.example/" + "/".join(f"s{i}" for i in range(21)) + "/"
    ok = "http://a.example/" + "/".join(f"s{i}" for i in range(20)) + "/"
    assert scope.reject_url(deep, "a.example") == "scope/trap-segments"
    assert scope.reject_url(ok, "a.example") is None
    # slashes in the query are not path segments
    assert scope.reject_url(ok + "?next=" + "/x" * 30, "a.example") is None
    assert Scope([], scope="all", max_path_repeat=0).reject_url(deep, "a.example") is None


def test_query_traps_cap_distinct_query_strings_per_path() -> None:
    traps = QueryTraps(max_queries=3, max_shapes=None)
    urls = [f"http://a.example/search.php?q=shoes&page={i}" for i in range(1, 6)]
    assert [traps.admit(u) for u in urls] == [None, None, None] + ["scope/trap-query"] * 2
    assert traps.admit(urls[0]) is None  # admitted once, admitted for good
    assert traps.admit("http://a.example/other.php?page=9") is None  # another path
    assert traps.admit("http://b.example/search.php?page=9") is None  # another host
    assert traps.admit("http://a.example/search.php") is None  # no query: not counted


def test_query_traps_cap_parameter_name_sequences_per_path() -> None:
    traps = QueryTraps(max_queries=None, max_shapes=2)
    assert traps.admit("http://a.example/s?q=a&sort=price&page=1") is None
    assert traps.admit("http://a.example/s?page=2&sort=price&q=a") is None  # a 2nd order
    assert traps.admit("http://a.example/s?q=b&sort=name&page=7") is None  # a known order
    assert traps.admit("http://a.example/s?sort=price&q=a&page=1") == "scope/trap-params"
    assert traps.admit("http://a.example/s?color=red") == "scope/trap-params"
    assert traps.admit("http://a.example/t?sort=price&q=a&page=1") is None


def test_query_traps_id_enumeration_is_one_shape() -> None:
    # a catalogue (/view.php?cat=…&id=N) is one parameter-name sequence however big
    traps = QueryTraps(max_queries=None, max_shapes=1)
    assert all(
        traps.admit(f"http://a.example/view.php?cat=news&id={i}") is None for i in range(5000)
    )


def test_query_traps_memory_is_bounded() -> None:
    traps = QueryTraps(max_queries=10, max_shapes=None, max_tracked=25)
    for i in range(10):
        assert traps.admit(f"http://a.example/s?page={i}") is None
    assert traps.admit("http://a.example/s?page=10") == "scope/trap-query"
    for i in range(20):  # other paths fill the table: everything is forgotten
        traps.admit(f"http://a.example/p{i}?x=1")
    assert traps.admit("http://a.example/s?page=10") is None  # approximate, never too strict
    assert not QueryTraps(None, None).enabled


@pytest.mark.parametrize("profile", ["realistic", "hostile"])
def test_default_detectors_never_drop_a_required_page(profile: str) -> None:
    """Every URL the truth requires (no max_depth) passes the default trap rules, and the
    calendar URLs outside the window are caught: so the truth needs no knowledge of the
    detectors to stay exact, and they drop trap pages only."""
    # 150 hosts: the 18 forms of URL the truth holds (kind and path/query shape, digits
    # aside) are those of 400 hosts, whose 88,000 (hostile) URLs only took 8-15 s more; the
    # largest path's 34-54 queries and 1 query shape are far below the thresholds either way
    spec = WebSpec(seed=3, hosts=150, pages_mean=20, profile=profile)
    model = model_for(spec)
    truth = compute_truth(model, TruthRules(scope="all"))
    settings = load_settings({"seeds": [model.page_url(0, 0)], "scope": "all"})
    scope = Scope(
        settings.seeds,
        scope="all",
        max_path_repeat=settings.traps.max_path_repeat,
        max_path_segments=settings.traps.max_path_segments,
        calendar=CalendarWindow(
            years_back=settings.traps.calendar_years_back,
            years_ahead=settings.traps.calendar_years_ahead,
            now_year=NOW,
        ),
    )
    queries = QueryTraps(settings.traps.max_queries_per_path, settings.traps.max_query_shapes)
    assert len(truth.order) > 5000
    wrong = [
        (u, r)
        for u in truth.order
        if (r := scope.reject_url(u, host_key(u)) or queries.admit(u)) is not None
    ]
    assert not wrong, wrong[:5]
    # the trap URLs met: the calendar entries are near now, so kept; far ones are caught
    calendar = [u for u in truth.trap if "/calendar/" in u]
    assert calendar and not any(WINDOW.is_trap(u) for u in calendar)
    host = next(h for h in model.hosts if h.flags & HostFlag.TRAPS)
    far = model.url_of(host.id, "/calendar/3787/12/")
    assert model.resolve(host.id, "/calendar/3787/12/").kind is Kind.TRAP_CALENDAR
    assert Kind.TRAP_CALENDAR in TRAP_KINDS
    assert scope.reject_url(far, host.name) == "scope/trap-calendar"


def test_the_truth_applies_the_crawlers_per_url_trap_filters() -> None:
    """Rules read from a crawl.json carry the crawler's trap filters: the truth permits no trap
    page the crawler would drop (so fetching one is a fault), and stays small with a depth
    limit: without the path-repetition filter /deep/a/b/…/ is permitted 2^depth times."""
    model = model_for(WebSpec(seed=2, hosts=6, pages_mean=5, overrides=(("trap_host", 1.0),)))
    seed = model.page_url(0, 0)
    manifest = load_settings({"seeds": [seed], "scope": "all", "max_depth": 12}).manifest()
    rules = TruthRules.from_dict({**manifest, "calendar_now_year": NOW})
    assert (rules.max_path_repeat, rules.max_path_segments) == (3, 20)
    assert (rules.calendar_years_back, rules.calendar_years_ahead) == (30, 5)
    truth = compute_truth(model, rules)
    unfiltered = compute_truth(model, TruthRules(seeds=(seed,), scope="all", max_depth=12))
    assert truth.required == unfiltered.required  # no required page is a trap
    deep = [u for u in truth.permitted if "/deep/" in u]
    assert deep and len(deep) <= 68 * len(model.hosts)  # a and b, each at most 3 times
    assert len([u for u in unfiltered.permitted if "/deep/" in u]) > 10 * len(deep)
    scope = Scope([], scope="all", max_path_repeat=3, max_path_segments=20, calendar=WINDOW)
    assert all(scope.reject_url(u, host_key(u)) is None for u in truth.permitted)
    assert any(truth.excluded.get(u) == "trap" for u in unfiltered.permitted)
    # a narrow calendar window, a deep limit: the window bounds the calendar
    narrow = TruthRules.from_dict(
        {**rules.to_dict(), "max_depth": 60, "calendar_years_back": 1, "calendar_years_ahead": 1}
    )
    years = {
        int(u.split("/calendar/")[1][:4])
        for u in compute_truth(model, narrow).permitted
        if "/calendar/" in u
    }
    assert years == {NOW - 1, NOW, NOW + 1}


def test_limits_are_lifted_with_none_in_flags_environment_and_toml(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gossamer.cli import build_parser, crawl_settings

    defaults = load_settings({})
    traps = defaults.traps
    assert (defaults.max_depth, defaults.frontier.host_budget, traps.max_path_segments) == (
        20,
        100_000,
        20,
    )
    assert (defaults.traps.calendar_years_back, defaults.traps.calendar_years_ahead) == (30, 5)
    assert (defaults.traps.max_queries_per_path, defaults.traps.max_query_shapes) == (10_000, 50)
    argv = "crawl http://a.example/ --max-depth None --host-budget 7 --max-path-segments none"
    argv += " --calendar-years-back 0 --calendar-years-ahead none --max-queries-per-path 9"
    argv += " --max-query-shapes NONE"
    args = build_parser(with_testweb=False).parse_args(argv.split())
    s = crawl_settings(args)
    assert (s.max_depth, s.frontier.host_budget, s.traps.max_path_segments) == (None, 7, None)
    assert (s.traps.calendar_years_back, s.traps.calendar_years_ahead) == (0, None)
    assert (s.traps.max_queries_per_path, s.traps.max_query_shapes) == (9, None)
    assert load_settings({"max_depth": 0}).max_depth == 0  # seeds only, as before
    monkeypatch.setenv("GOSSAMER_MAX_DEPTH", "none")
    monkeypatch.setenv("GOSSAMER_MAX_QUERY_SHAPES", "3")
    assert load_settings({}).max_depth is None
    assert load_settings({}).traps.max_query_shapes == 3
    monkeypatch.delenv("GOSSAMER_MAX_DEPTH")
    toml = tmp_path / "crawl.toml"
    toml.write_text('[crawl]\nmax_depth = "none"\nhost_budget = "none"\n')
    s = load_settings(config=toml)
    assert (s.max_depth, s.frontier.host_budget) == (None, None)
    assert load_settings({}, config=toml).manifest()["max_depth"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-depth", "lots"], "--max-depth lots: expected a whole number of at least 0, or"),
        (["--max-depth", "-1"], "--max-depth -1: must be at least 0, or none (no limit)"),
        (["--max-query-shapes", "0"], "--max-query-shapes 0: must be at least 1, or none"),
    ],
)
def test_bad_limits_are_one_clear_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from gossamer.cli import main

    with pytest.raises(SystemExit) as exc:
        code = main(["crawl", "http://a.example/", "-o", str(tmp_path / "c"), *argv])
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not (tmp_path / "c").exists()


def test_bad_limit_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from gossamer.config import SettingsError

    monkeypatch.setenv("GOSSAMER_HOST_BUDGET", "unlimited")
    with pytest.raises(SettingsError, match=r"^GOSSAMER_HOST_BUDGET=unlimited: expected a whole"):
        load_settings({})
