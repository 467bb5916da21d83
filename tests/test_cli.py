"""The command line's parsing: seeds files, -s KEY=VALUE, a flag for every setting, list
settings as text (issue 16). The real CLI in a subprocess: tests/e2e/test_cli_e2e.py."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from gossamer.cli import _CRAWL_SECTIONS, build_parser, crawl_settings
from gossamer.config import (
    CrawlSettings,
    SeedsFileError,
    SettingsError,
    load_settings,
    parse_set_options,
    read_seeds_file,
)


def crawl_parser() -> argparse.ArgumentParser:
    parser = build_parser(with_testweb=False)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    crawl: argparse.ArgumentParser = sub.choices["crawl"]
    return crawl


def settings_of(*argv: str) -> CrawlSettings:
    return crawl_settings(build_parser(with_testweb=False).parse_args(["crawl", *argv]))


def test_seeds_file_comments_blanks_and_canonical_urls(tmp_path: Path) -> None:
    f = tmp_path / "seeds.txt"
    f.write_text("# my seeds\n\nHTTP://A.example/x/../y\n  http://b.example/  \n#http://c/\n")
    assert read_seeds_file(f) == ["http://a.example/y", "http://b.example/"]


def test_seeds_file_bad_line_names_file_line_and_url(tmp_path: Path) -> None:
    f = tmp_path / "seeds.txt"
    f.write_text("http://a.example/\n# fine\nftp://b.example/\n")
    with pytest.raises(SeedsFileError, match=r"seeds\.txt:3: invalid seed URL 'ftp://b\.example/'"):
        read_seeds_file(f)
    with pytest.raises(SeedsFileError, match=r"cannot read seeds file .*missing"):
        read_seeds_file(tmp_path / "missing")


def test_seeds_file_dash_is_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("http://a.example/\n# c\nhttp://b.example/\n"))
    s = settings_of("http://z.example/", "-i", "-")
    assert s.seeds == ["http://z.example/", "http://a.example/", "http://b.example/"]


def test_seeds_file_joins_seed_arguments_once_and_is_not_read_again(tmp_path: Path) -> None:
    f = tmp_path / "seeds.txt"
    f.write_text("http://b.example/\nhttp://a.example/\n")
    s = settings_of("http://a.example/", "--seeds-file", str(f))
    assert s.seeds == ["http://a.example/", "http://b.example/"]  # a duplicate is dropped
    manifest = s.manifest()
    assert manifest["seeds_file"] is None and manifest["seeds"] == s.seeds
    f.unlink()  # crawl.json round-trips (a resume, a pool worker) without the file
    assert CrawlSettings(**manifest).seeds == s.seeds


def test_seeds_file_as_setting_env_and_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "seeds.txt"
    f.write_text("http://a.example/\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'seeds_file = "{f}"\n')
    assert load_settings({}, config=cfg).seeds == ["http://a.example/"]
    monkeypatch.setenv("GOSSAMER_SEEDS_FILE", str(f))
    assert load_settings({}).seeds == ["http://a.example/"]
    f.write_text("mailto:x@example.org\n")
    with pytest.raises(SettingsError, match=r"seeds\.txt:1: invalid seed URL 'mailto"):
        load_settings({})


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("http://a.example/", ["http://a.example/"]),
        ("http://a.example/ http://b.example/", ["http://a.example/", "http://b.example/"]),
        ("http://a.example/,http://b.example/", ["http://a.example/", "http://b.example/"]),
        ("http://a.example/a,b\nhttp://b.example/", ["http://a.example/a,b", "http://b.example/"]),
        ('["http://a.example/"]', ["http://a.example/"]),
    ],
)
def test_gossamer_seeds_env_takes_urls_or_json(
    monkeypatch: pytest.MonkeyPatch, text: str, seeds: list[str]
) -> None:
    monkeypatch.setenv("GOSSAMER_SEEDS", text)
    assert load_settings({}).seeds == seeds


def test_list_settings_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOSSAMER_ALLOW", r"/a{1,3}/ b")  # one regex: commas and spaces are its own
    monkeypatch.setenv("GOSSAMER_RESOLVE", "a.example:127.0.0.1, b.example:127.0.0.2")
    s = load_settings({})
    assert s.allow == [r"/a{1,3}/ b"]
    assert s.fetch.resolve == ["a.example:127.0.0.1", "b.example:127.0.0.2"]
    monkeypatch.setenv("GOSSAMER_DENY", '["x", "y"]')
    assert load_settings({}).deny == ["x", "y"]
    monkeypatch.setenv("GOSSAMER_DENY", '["x", ')
    with pytest.raises(SettingsError, match=r"GOSSAMER_DENY='.*': not a valid JSON list"):
        load_settings({})


def test_set_option_parses_like_the_environment() -> None:
    s = settings_of(
        "http://a.example/",
        "-s", "max_body=4096",
        "--set", "obey-robots=false",
        "-s", "max_depth=none",
        "-s", "seeds=http://b.example/ http://c.example/",
        "-s", "per_ip=3",
        "-s", "per_ip=4",  # the later one wins
    )  # fmt: skip
    assert (s.fetch.max_body, s.politeness.obey_robots) == (4096, False)
    assert (s.max_depth, s.politeness.per_ip) == (None, 4)
    assert s.seeds == ["http://a.example/"]  # the SEED argument beats -s seeds=


def test_set_option_errors_name_close_matches() -> None:
    with pytest.raises(SettingsError, match="no setting 'max_bdy'; did you mean max_body"):
        parse_set_options(["max_bdy=1"])
    with pytest.raises(SettingsError, match=r"no setting 'zzz'; see docs/cli\.md"):
        parse_set_options(["zzz=1"])
    with pytest.raises(SettingsError, match="expected KEY=VALUE"):
        parse_set_options(["max_body"])
    with pytest.raises(SettingsError, match="max_body"):
        settings_of("http://a.example/", "-s", "max_body=12")  # below its minimum


def test_precedence_flag_over_set_over_env_over_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[crawl]\ndelay = 1.5\nper_ip = 2\nmax_attempts = 5\nmax_body = 2048\n")
    base = ("http://a.example/", "--config", str(cfg))
    monkeypatch.setenv("GOSSAMER_PER_IP", "3")
    monkeypatch.setenv("GOSSAMER_MAX_ATTEMPTS", "6")
    monkeypatch.setenv("GOSSAMER_MAX_BODY", "4096")
    s = settings_of(*base, "-s", "max_attempts=7", "-s", "max_body=8192", "--max-body", "16384")
    assert s.politeness.delay == 1.5  # TOML
    assert s.politeness.per_ip == 3  # env over TOML
    assert s.frontier.max_attempts == 7  # -s over env
    assert s.fetch.max_body == 16384  # flag over -s


def test_every_setting_has_a_flag_in_a_named_group() -> None:
    crawl = crawl_parser()
    dests = {a.dest for a in crawl._actions}
    assert not [n for n in CrawlSettings.knob_fields() if n not in dests]
    titles = {title for title, _text in _CRAWL_SECTIONS}
    loose = [n for n in CrawlSettings.knob_fields() if CrawlSettings.section_of(n) not in titles]
    assert not loose, f"give {loose} a section of gossamer.cli._CRAWL_SECTIONS"
    # each flag is listed in its setting's section
    for group in crawl._action_groups:
        for action in group._group_actions:
            if action.dest in CrawlSettings.knob_fields() and action.dest != "output":
                assert group.title == CrawlSettings.section_of(action.dest), action.dest


def test_dedicated_flags_reach_the_settings() -> None:
    s = settings_of(
        "http://a.example/",
        "--connect-timeout", "2", "--first-byte-timeout", "3", "--total-timeout", "4",
        "--max-crawl-delay", "5", "--max-body", "4096", "--max-attempts", "2",
        "--robots-ttl", "60", "--lease-ttl", "30", "--warc-max-bytes", "2097152",
        "--max-path-repeat", "4", "--adaptive-delay", "1.5",
        "--no-obey-robots", "--follow-nofollow", "--no-html-only", "--no-strip-session-ids",
        "--no-follow-canonical", "--no-warc", "--sitemaps", "--max-pages", "none",
    )  # fmt: skip
    assert (s.fetch.connect_timeout, s.fetch.first_byte_timeout, s.fetch.total_timeout) == (2, 3, 4)
    assert (s.politeness.max_crawl_delay, s.fetch.max_body) == (5, 4096)
    assert (s.frontier.max_attempts, s.politeness.robots_ttl) == (2, 60)
    assert (s.frontier.lease_ttl, s.sinks.warc_max_bytes) == (30, 2097152)
    assert s.traps.max_path_repeat == 4
    assert s.politeness.adaptive_delay == 1.5 and s.max_pages is None
    assert not (s.politeness.obey_robots or s.links.html_only)
    assert not (s.links.strip_session_ids or s.links.follow_canonical)
    assert s.links.follow_nofollow and s.links.use_sitemaps and not s.sinks.warc
    assert not settings_of("http://a.example/", "--ignore-robots").politeness.obey_robots
    defaults = settings_of("http://a.example/")
    assert defaults.politeness.obey_robots and defaults.sinks.warc
    assert defaults.fetch.max_body == 10 * 1024 * 1024


def test_crawl_help_groups_its_flags() -> None:
    text = crawl_parser().format_help()
    positions = [text.index(f"\n{title}:") for title, _text in _CRAWL_SECTIONS]
    assert positions == sorted(positions)
    assert "--connect-timeout S" in text and "--max-crawl-delay S" in text
    assert "other settings:" not in text


def test_partition_default_is_applied_later() -> None:
    args = build_parser(with_testweb=False).parse_args(["crawl", "http://a.example/"])
    assert args.partition is None and args.heartbeat_ttl is None and args.detach is None


def test_a_broken_pipe_other_than_stdout_is_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a closed standard output ends quietly (tests/e2e/test_cli_e2e.py); a broken pipe
    elsewhere (a worker's, a socket) is a real failure and propagates."""
    import gossamer.cli

    def broken(_args: argparse.Namespace) -> int:
        raise BrokenPipeError("a worker's pipe")

    monkeypatch.setattr(gossamer.cli, "_run_report", broken)
    with (tmp_path / "out").open("w") as out:  # a file: poll never reports an error on it
        monkeypatch.setattr("sys.stdout", out)
        with pytest.raises(BrokenPipeError, match="a worker's pipe"):
            gossamer.cli.main(["report", str(tmp_path)])


def test_version_answers_as_the_parser_does(capsys: pytest.CaptureFixture[str]) -> None:
    """`gossamer --version` alone answers before the parser is built (what a machine of a
    machine list is asked: runner/machines.probe reads `gossamer VERSION`), as argparse's
    own --version action does."""
    from gossamer import __version__
    from gossamer.cli import main

    assert main(["--version"]) == 0
    fast = capsys.readouterr().out
    assert fast == f"gossamer {__version__}\n"
    with pytest.raises(SystemExit) as done:
        build_parser(with_testweb=False).parse_args(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == fast
