"""The settings in groups (issue 17): each setting declared once, in its group; every input of
the flat settings still works (keywords, GOSSAMER_* variables, TOML keys, `-s KEY=VALUE`, an old
crawl.json), and the nested forms too (group keywords, TOML tables, `-s group.key=value`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gossamer.config import (
    CrawlSettings,
    PolitenessSettings,
    SettingsError,
    load_settings,
    parse_set_options,
)
from gossamer.runner.manifest import load_manifest
from gossamer.runner.resume import DEFINITION, RUN_TIME

DATA = Path(__file__).parent / "data"
OLD_MANIFEST = DATA / "crawl_flat_main_4006114.json"  # written by the flat settings' code
SEED = "http://a.example/"
#: settings added after OLD_MANIFEST was written (main 4006114)
NEWER = frozenset(
    {
        "live_graph", "partition", "site_sizes", "phase_period", "phases", "epsilon",
        "heartbeat_ttl", "extract", "disk_margin", "replica_acks", "replica_ack_timeout",
        "near_dup_links", "near_dup_distance",
        "dedup_payloads", "stop_patience",
    }
)


@pytest.fixture(autouse=True)
def _no_gossamer_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.upper().startswith("GOSSAMER_"):
            monkeypatch.delenv(name)

def test_each_setting_has_one_flat_name_in_one_place() -> None:
    knobs = CrawlSettings.knob_fields()
    groups = {group for group, _ in knobs.values() if group is not None}
    assert groups == {"frontier", "fetch", "politeness", "links", "traps", "sinks", "cluster"}
    # the flat names are crawl.json's keys as the flat settings wrote them: none lost, and
    # the settings added since (NEWER: an old crawl.json takes their defaults)
    assert set(knobs) == set(json.loads(OLD_MANIFEST.read_text())) | NEWER
    assert set(knobs) == RUN_TIME | DEFINITION
    s = CrawlSettings()
    for name, (group, field) in knobs.items():
        holder = s if group is None else getattr(s, group)
        assert name in type(holder).model_fields  # declared in its group's model, only there
        assert s.knob(name) == getattr(holder, name)
        assert field.description, name


def test_flat_keywords_go_to_their_groups() -> None:
    s = CrawlSettings(delay=0, user_agent="ua/1", max_body=2048, seeds=[SEED], warc=False)
    assert (s.politeness.delay, s.fetch.user_agent, s.fetch.max_body) == (0, "ua/1", 2048)
    assert s.sinks.warc is False and s.seeds == [SEED]
    assert s.knobs_set() == {"delay", "user_agent", "max_body", "seeds", "warc"}


def test_nested_keywords_dotted_keys_and_group_models() -> None:
    s = CrawlSettings(politeness={"delay": 0.5, "per_ip": 2}, **{"fetch.user_agent": "ua/2"})
    assert (s.politeness.delay, s.politeness.per_ip, s.fetch.user_agent) == (0.5, 2, "ua/2")
    # a group model given with flat keywords of the same group: both count
    s = CrawlSettings(politeness=PolitenessSettings(delay=0.25), max_crawl_delay=5)
    assert (s.politeness.delay, s.politeness.max_crawl_delay) == (0.25, 5)
    assert s.knobs_set() == {"delay", "max_crawl_delay"}
    # the groups are frozen: a settings object is read, not changed
    with pytest.raises(ValueError, match="frozen"):
        s.politeness.delay = 3  # type: ignore[misc]


def test_flat_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOSSAMER_DELAY", "0.5")
    monkeypatch.setenv("gossamer_max_crawl_delay", "7")  # case does not matter, as before
    monkeypatch.setenv("GOSSAMER_MAX_PAGES", "12")
    monkeypatch.setenv("GOSSAMER_HOST_BUDGET", "none")
    monkeypatch.setenv("GOSSAMER_RESOLVE", "a.example:127.0.0.1 b.example:127.0.0.2")
    s = CrawlSettings()
    assert (s.politeness.delay, s.politeness.max_crawl_delay, s.max_pages) == (0.5, 7, 12)
    assert s.frontier.host_budget is None
    assert s.fetch.resolve == ["a.example:127.0.0.1", "b.example:127.0.0.2"]
    # keywords beat the environment, flat or nested; the group's other settings keep theirs
    assert CrawlSettings(delay=2).politeness.delay == 2
    nested = CrawlSettings(politeness={"delay": 3})
    assert (nested.politeness.delay, nested.politeness.max_crawl_delay) == (3, 7)
    given = PolitenessSettings(delay=4)
    assert CrawlSettings(politeness=given).politeness.max_crawl_delay == 7
    monkeypatch.setenv("GOSSAMER_DELAY", "-1")
    with pytest.raises(SettingsError, match=r"^GOSSAMER_DELAY=-1: must be at least 0$"):
        load_settings({})


def test_toml_flat_and_nested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flat = tmp_path / "flat.toml"
    flat.write_text('delay = 0.5\nuser_agent = "ua/3"\nmax_depth = "none"\n')
    nested = tmp_path / "nested.toml"
    nested.write_text(
        'max_depth = "none"\n[politeness]\ndelay = 0.5\n[fetch]\nuser_agent = "ua/3"\n'
    )
    under_crawl = tmp_path / "crawl.toml"
    under_crawl.write_text(
        '[crawl]\nmax_depth = "none"\n[crawl.politeness]\ndelay = 0.5\n'
        '[crawl.fetch]\nuser_agent = "ua/3"\n'
    )
    for path in (flat, nested, under_crawl):
        s = load_settings({}, config=path)
        assert (s.politeness.delay, s.fetch.user_agent, s.max_depth) == (0.5, "ua/3", None)
        assert s.knobs_set() == {"delay", "user_agent", "max_depth"}
    # the usual order over a nested file: environment > TOML, -s > environment, flag > -s
    monkeypatch.setenv("GOSSAMER_DELAY", "0.75")
    assert load_settings({}, config=nested).politeness.delay == 0.75
    s = load_settings({}, config=nested, overrides=parse_set_options(["user_agent=ua/4"]))
    assert s.fetch.user_agent == "ua/4"
    s = load_settings({"delay": 0.1}, config=nested, overrides={"politeness.delay": "0.2"})
    assert s.politeness.delay == 0.1


def test_set_options_flat_and_nested() -> None:
    items = ["politeness.delay=0.5", "user-agent=ua/5", "fetch.max-body=2048"]
    items.append("traps.max_query_shapes=none")
    s = load_settings({}, overrides=parse_set_options(items))
    assert (s.politeness.delay, s.fetch.user_agent, s.fetch.max_body) == (0.5, "ua/5", 2048)
    assert s.traps.max_query_shapes is None
    # both spellings of one setting: the later wins, as with two of the same
    later = parse_set_options(["delay=1", "politeness.delay=2"])
    assert load_settings({}, overrides=later).politeness.delay == 2


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ("nope=1", "no setting 'nope'"),
        ("politeness.nope=1", "no setting 'politeness.nope'"),
        ("politeness.user_agent=x", "no setting 'politeness.user_agent'"),  # fetch's
        ("nogroup.delay=1", "no setting 'nogroup.delay'"),
    ],
)
def test_an_unknown_set_key_is_one_error_naming_it(item: str, named: str) -> None:
    with pytest.raises(SettingsError) as err:
        parse_set_options([item])
    assert named in str(err.value) and "\n" not in str(err.value)


def test_close_names_are_suggested() -> None:
    with pytest.raises(SettingsError, match=r"did you mean .*politeness\.delay"):
        parse_set_options(["politeness.dealy=1"])
    with pytest.raises(SettingsError, match="did you mean delay"):
        parse_set_options(["dealy=1"])


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("nope = 1\n", "FILE: no setting 'nope'"),
        ("[politeness]\nnope = 1\n", "FILE: no setting 'politeness.nope'"),
        ("[politeness]\nuser_agent = 'x'\n", "FILE: no setting 'politeness.user_agent'"),
        ("[politeness]\ndelay = -1\n", "FILE: delay = -1: must be at least 0"),
        ("politeness = 3\n", "FILE: politeness = 3: expected a table of its settings"),
    ],
)
def test_a_bad_toml_key_or_value_is_one_error_line(tmp_path: Path, text: str, line: str) -> None:
    """One line naming the file and its key, in plain words (no pydantic wording)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    with pytest.raises(SettingsError) as err:
        load_settings({}, config=cfg)
    message = str(err.value)
    assert message.startswith(line.replace("FILE", str(cfg))) and "\n" not in message, message
    assert "Input should" not in message and "Extra inputs" not in message


def test_the_manifest_stays_flat_and_round_trips() -> None:
    s = CrawlSettings(seeds=[SEED], delay=0, headers=["From: a@b.org"], host_budget=None)
    manifest = s.manifest()
    assert list(manifest) == list(CrawlSettings.knob_fields())
    assert manifest["delay"] == 0 and manifest["headers"] == ["From: a@b.org"]
    assert CrawlSettings(**manifest) == s
    assert CrawlSettings.model_validate(manifest) == s
    assert CrawlSettings.model_validate(s.model_dump()) == s  # the nested dump too


def test_an_old_flat_crawl_json_loads(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    out.mkdir()
    shutil.copy(OLD_MANIFEST, out / "crawl.json")
    (tmp_path / "resolve.txt").write_text("www.h0.example:127.0.0.1\n")
    stored = json.loads(OLD_MANIFEST.read_text())
    stored["resolve_file"] = str(tmp_path / "resolve.txt")  # the file named must exist
    (out / "crawl.json").write_text(json.dumps(stored))
    s = load_manifest(out)
    assert s.seeds == ["http://www.h0.example/"] and s.output == out and s.max_pages == 10
    assert (s.politeness.delay, s.fetch.concurrency) == (0, 8)
    assert s.fetch.user_agent == "gossamer-test/0.1"
    assert (s.fetch.first_byte_timeout, s.fetch.total_timeout) == (3, 5)
    assert s.fetch.allow_private and s.scope == "all" and s.frontier.lease_ttl == 120
    assert stored["workers"] == 0 and s.workers is None  # 0 was one per core: now auto
    skip = ("output", "resolve_file", "workers", *NEWER)
    assert {k: v for k, v in s.manifest().items() if k not in skip} == {
        k: v for k, v in stored.items() if k not in skip
    }
    assert s.sinks.live_graph is True  # a setting newer than the file: its default (on)
    assert s.sinks.extract is None


def test_frontier_knobs_come_from_the_groups() -> None:
    s = CrawlSettings(
        delay=0.5, max_crawl_delay=9, adaptive_delay=2, lease_order="ready",
        host_budget=7, max_attempts=4, lease_ttl=30, max_pages=5, max_depth=3,
    )  # fmt: skip
    assert s.frontier_knobs() == {
        "lease_ttl": 30,
        "max_pages": 5,
        "max_depth": 3,
        "host_budget": 7,
        "max_attempts": 4,
        "default_delay": 0.5,
        "max_crawl_delay": 9,
        "adaptive_factor": 2,
        "backlog_lead": 0.0,
    }
