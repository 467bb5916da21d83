"""Settings: flags > GOSSAMER_* environment > TOML file > defaults, validated at start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gossamer.config import CrawlSettings, SettingsError, load_settings


def test_defaults_and_flags() -> None:
    s = load_settings({"seeds": ["HTTP://Example.ORG:80/a/../b#x"], "max_pages": 10})
    assert s.seeds == ["http://example.org/b"]
    assert s.max_pages == 10 and s.frontier.per_host == 20 and s.politeness.obey_robots
    assert s.effective_workers() >= 1


def test_precedence_flags_env_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[crawl]\nseeds = ["http://a.example/"]\nmax_pages = 5\ndelay = 2.5\n')
    s = load_settings({}, config=cfg)
    assert (s.max_pages, s.politeness.delay, s.seeds) == (5, 2.5, ["http://a.example/"])
    monkeypatch.setenv("GOSSAMER_MAX_PAGES", "7")
    assert load_settings({}, config=cfg).max_pages == 7  # env beats the file
    assert load_settings({"max_pages": 9}, config=cfg).max_pages == 9  # flags beat env


def test_lease_order_reaches_the_embedded_frontier(tmp_path: Path) -> None:
    from gossamer.runner.build import open_frontier

    for order, lead in (("largest-first", 0.01), ("ready", 0.0)):
        s = load_settings({"output": tmp_path / order, "lease_order": order})
        (tmp_path / order).mkdir()
        f = open_frontier(s)
        try:
            assert f.options.backlog_lead == lead
        finally:
            f.close()


def test_top_level_toml_keys(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('seeds = ["http://a.example/"]\nscope = "domain"\n')
    assert load_settings({}, config=cfg).scope == "domain"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"seeds": ["not a url"]}, "invalid seed URL"),
        ({"seeds": ["ftp://example.org/"]}, "invalid seed URL"),
        ({"max_pages": 0}, "--max-pages 0: must be at least 1, or none (no limit)"),
        ({"scope": "planet"}, "scope"),
        ({"allow": ["(unclosed"]}, "invalid regex"),
        ({"resolve": ["nocolon"]}, "resolve: expected HOST:IP"),
        ({"first_byte_timeout": 100, "total_timeout": 10}, "first_byte_timeout"),
        ({"bogus_key": 1}, "bogus_key"),
        ({"lease_order": "random"}, "--lease-order random: expected one of largest-first, ready"),
    ],
)
def test_invalid_settings_say_what_is_wrong(flags: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(flags)
    assert message in str(info.value)
    assert "\n" not in str(info.value) and "Input should" not in str(info.value)


def test_unreadable_and_invalid_config_files(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read config file"):
        load_settings({}, config=tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("seeds = [unterminated\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings({}, config=bad)


def test_manifest_round_trips() -> None:
    s = load_settings({"seeds": ["http://a.example/"], "deny": ["/private/"]})
    again = CrawlSettings(**s.manifest())
    assert again == s


def _finished_crawl(path: Path, seeds: str = '["http://old.example/"]') -> Path:
    path.mkdir()
    (path / "crawl.json").write_text(f'{{"seeds": {seeds}}}')
    (path / "crawl.log.jsonl").write_text("")
    (path / "stats.json").write_text('{"finished": true}')
    return path


def test_recrawl_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _finished_crawl(tmp_path / "old")
    monkeypatch.chdir(tmp_path)
    s = load_settings({"recrawl": Path("old"), "output": tmp_path / "new"})
    assert s.recrawl == old  # made absolute (a resume may run elsewhere)
    assert s.seeds == ["http://old.example/"]  # no seed given: the old crawl's
    s = load_settings({"recrawl": "old", "seeds": ["http://a.example/"], "output": "new"})
    assert s.seeds == ["http://a.example/"]
    assert CrawlSettings(**s.manifest()) == s
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[crawl]\nrecrawl = "{old}"\noutput = "n"\n')
    assert load_settings({}, config=cfg).recrawl == old
    monkeypatch.setenv("GOSSAMER_RECRAWL", str(old))
    assert load_settings({"output": "n2"}).recrawl == old
    assert load_settings({}).recrawl == old


def test_a_recrawl_takes_the_old_crawls_settings_unless_given_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How the old crawl reached its hosts and what it crawled come with `--recrawl`
    (RECRAWL_CARRIED); anything given now — a flag, GOSSAMER_*, a config file — wins; how
    fast and how much the run does are its own."""
    old = _finished_crawl(tmp_path / "old")
    stored = {
        "seeds": ["http://old.example/"], "allow_private": True, "scope": "domain",
        "resolve": ["old.example:127.0.0.1"], "user_agent": "oldbot/1", "max_depth": 4,
        "headers": ["X-Team: crawl"], "delay": 0.0, "max_pages": 10, "workers": 3,
    }  # fmt: skip
    (old / "crawl.json").write_text(json.dumps(stored))
    s = load_settings({"recrawl": old, "output": tmp_path / "n1"})
    assert (s.seeds, s.fetch.allow_private, s.scope) == (stored["seeds"], True, "domain")
    assert (s.fetch.resolve, s.fetch.user_agent) == (stored["resolve"], "oldbot/1")
    assert (s.max_depth, s.fetch.headers) == (4, ["X-Team: crawl"])
    assert (s.politeness.delay, s.max_pages, s.workers) == (1.0, None, None)  # not taken
    cfg = tmp_path / "c.toml"
    cfg.write_text("[crawl]\nmax_depth = 2\nallow_private = false\n")
    monkeypatch.setenv("GOSSAMER_USER_AGENT", "envbot/2")
    s = load_settings({"recrawl": old, "output": tmp_path / "n2", "scope": "host"}, config=cfg)
    assert (s.scope, s.fetch.user_agent, s.max_depth) == ("host", "envbot/2", 2)
    assert s.fetch.allow_private is False and s.fetch.resolve == stored["resolve"]
    # the new crawl's crawl.json holds them all: its resume and its workers read them there
    assert CrawlSettings(**s.manifest()) == s


def test_a_recrawl_carries_what_defines_a_crawl_and_how_its_hosts_were_reached() -> None:
    """RECRAWL_CARRIED: every setting a resume refuses to change (what the crawl is), but
    those the re-crawl has its own rule for, and the ways hosts were reached. A setting added
    to either list fails this test until it is placed."""
    from gossamer.config import RECRAWL_CARRIED
    from gossamer.runner.resume import DEFINITION

    # the cluster's settings are a cluster crawl's only: an embedded re-crawl has its defaults
    cluster = {"seen_set", "partition", "site_sizes", "phase_period", "phases", "epsilon",
               "replica_acks", "replica_ack_timeout", "stop_patience"}
    own = {"seeds", "seeds_file", "output", "recrawl", "heartbeat_ttl"} | cluster
    reach = {"allow_private", "resolve", "resolve_file", "proxy"}
    assert (DEFINITION - own) | reach == RECRAWL_CARRIED


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "is not a directory"),
        ("not-a-crawl", "not a gossamer crawl directory (no crawl.json)"),
        ("unfinished", "unfinished crawl (no stats.json)"),
        ("same", "must differ"),
    ],
)
def test_recrawl_validation(tmp_path: Path, setup: str, message: str) -> None:
    old = tmp_path / "old"
    if setup == "not-a-crawl":
        old.mkdir()
    elif setup != "missing":
        _finished_crawl(old)
    if setup == "unfinished":
        (old / "stats.json").unlink()
    out = old if setup == "same" else tmp_path / "new"
    with pytest.raises(SettingsError, match="recrawl") as exc:
        load_settings({"recrawl": old, "output": out, "seeds": ["http://a.example/"]})
    assert message in str(exc.value)


def test_config_imports_nothing_from_the_engine(tmp_path: Path) -> None:
    """Settings, a re-crawl's among them, load without importing gossamer.engine (the engine
    builds on the settings, never the other way round)."""
    old = _finished_crawl(tmp_path / "old")
    code = (
        "import sys\n"
        "from gossamer.config import load_settings\n"
        f"s = load_settings({{'recrawl': {str(old)!r}, 'output': {str(tmp_path / 'new')!r}}})\n"
        "assert s.seeds == ['http://old.example/'], s.seeds\n"
        "print(sorted(m for m in sys.modules if m.startswith('gossamer.engine')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
