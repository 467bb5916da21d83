"""Settings: flags > GOSSAMER_* environment > TOML file > defaults, validated at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from gossamer.config import CrawlSettings, SettingsError, load_settings


def test_defaults_and_flags() -> None:
    s = load_settings({"seeds": ["HTTP://Example.ORG:80/a/../b#x"], "max_pages": 10})
    assert s.seeds == ["http://example.org/b"]
    assert s.max_pages == 10 and s.per_host == 20 and s.obey_robots
    assert s.effective_workers() >= 1


def test_precedence_flags_env_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[crawl]\nseeds = ["http://a.example/"]\nmax_pages = 5\ndelay = 2.5\n')
    s = load_settings({}, config=cfg)
    assert (s.max_pages, s.delay, s.seeds) == (5, 2.5, ["http://a.example/"])
    monkeypatch.setenv("GOSSAMER_MAX_PAGES", "7")
    assert load_settings({}, config=cfg).max_pages == 7  # env beats the file
    assert load_settings({"max_pages": 9}, config=cfg).max_pages == 9  # flags beat env


def test_top_level_toml_keys(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('seeds = ["http://a.example/"]\nscope = "domain"\n')
    assert load_settings({}, config=cfg).scope == "domain"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"seeds": ["not a url"]}, "invalid seed URL"),
        ({"seeds": ["ftp://example.org/"]}, "invalid seed URL"),
        ({"max_pages": 0}, "max_pages"),
        ({"scope": "planet"}, "scope"),
        ({"allow": ["(unclosed"]}, "invalid regex"),
        ({"resolve": ["nocolon"]}, "--resolve expects"),
        ({"first_byte_timeout": 100, "total_timeout": 10}, "first_byte_timeout"),
        ({"bogus_key": 1}, "bogus_key"),
    ],
)
def test_invalid_settings_say_what_is_wrong(flags: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(flags)
    assert message in str(info.value)
    assert str(info.value).startswith("invalid settings:")


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
