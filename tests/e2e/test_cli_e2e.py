"""The real `gossamer` command in a subprocess (issue 16): seeds files, every setting reachable,
cluster-only flags without --redis, --help, a closed pipe, and bad input that changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gossamer.exitcodes import Exit
from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

UA = "gossamer-cli-test/0.1"
# refused at once without --allow-private, so a crawl that wrongly starts ends quickly
UNREACHABLE = "http://127.0.0.1:9/"


def gossamer(
    *args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gossamer: error: "), r.stderr
    return lines[0]


def test_bad_seeds_file_line_is_named_and_nothing_is_created(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# two good, one bad\nhttp://a.example/\n\nhttp://exa mple.org:99999/\n")
    before = snapshot(tmp_path)
    r = gossamer("crawl", "-i", str(seeds), "-o", "out", cwd=tmp_path)
    assert r.returncode == Exit.USAGE
    line = one_error_line(r)
    assert f"{seeds}:4: invalid seed URL 'http://exa mple.org:99999/'" in line
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()
    r = gossamer("crawl", "--seeds-file", "missing.txt", "-o", "out", cwd=tmp_path)
    assert r.returncode == Exit.USAGE
    assert "cannot read seeds file missing.txt" in one_error_line(r)
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_unknown_set_key_names_close_matches_and_changes_nothing(tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    r = gossamer("crawl", UNREACHABLE, "-s", "max_crawl_dealy=5", "-o", "out", cwd=tmp_path)
    assert r.returncode == Exit.USAGE
    assert "no setting 'max_crawl_dealy'; did you mean max_crawl_delay" in one_error_line(r)
    r = gossamer("crawl", UNREACHABLE, "-s", "connect_timeout=soon", "-o", "out", cwd=tmp_path)
    assert r.returncode == Exit.USAGE
    assert one_error_line(r).endswith(
        "-s connect_timeout=soon: expected a number of seconds above 0, e.g. 10 or 0.5"
    )
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_gossamer_seeds_is_a_list_of_urls_not_json(tmp_path: Path) -> None:
    """GOSSAMER_SEEDS=URL… is read as URLs (it was a pydantic JSON parse error): the second of
    two is checked, and named, as a seed URL."""
    env = {"GOSSAMER_SEEDS": "http://a.example/ ftp://b.example/"}
    r = gossamer("crawl", "-o", "out", cwd=tmp_path, env=env)
    assert r.returncode == Exit.USAGE
    assert "invalid seed URL 'ftp://b.example/'" in r.stderr and "JSON" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flag",
    [
        ["--partition", "modulo"],
        ["--site-sizes", "sizes.txt"],
        ["--phase-period", "5"],
        ["--phases", "2"],
        ["--epsilon", "0.3"],
        ["--heartbeat-ttl", "3"],
        ["--detach"],
        ["--seen-set", "exact"],
    ],
)
def test_cluster_only_flag_without_redis_is_an_error(tmp_path: Path, flag: list[str]) -> None:
    (tmp_path / "sizes.txt").write_text("a.example 10\n")
    before = snapshot(tmp_path)
    r = gossamer("crawl", UNREACHABLE, *flag, "--max-pages", "1", "-o", "out", cwd=tmp_path)
    assert r.returncode == Exit.USAGE, r.stderr
    assert f"{flag[0]} is for cluster crawls: add --redis URL" in one_error_line(r)
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_help_hides_internal_subcommands(tmp_path: Path) -> None:
    r = gossamer("--help", cwd=tmp_path)
    assert r.returncode == Exit.OK
    assert "crawl-worker" not in r.stdout and "SUPPRESS" not in r.stdout
    assert "crawl " in r.stdout and "testweb" in r.stdout


def test_output_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line, as with `| head -0`
    try:
        r = subprocess.run(
            [sys.executable, "-m", "gossamer", "testweb", "info"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )
    finally:
        os.close(write_end)
    assert r.returncode == Exit.OK and r.stderr == ""


def test_seeds_from_env_stdin_and_flags_for_every_kind_of_setting(tmp_path: Path) -> None:
    """GOSSAMER_SEEDS as plain URLs, `-i -` from stdin, dedicated flags and -s all reach the
    crawl's settings (crawl.json), and the crawl of the simulated web runs."""
    spec = WebSpec(seed=5, hosts=4, pages_mean=3, pages_max=6, outdegree_mean=4)
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        env_seeds = f"{web.url(0, 0)} {web.url(1, 0)}"
        r = gossamer(
            "crawl", "-i", "-", "-o", "out", "--resolve-file", str(resolve), "--allow-private",
            "--delay", "0", "--user-agent", UA, "-q",
            "--connect-timeout", "2", "--first-byte-timeout", "3", "--total-timeout", "4",
            "--max-crawl-delay", "0", "--max-body", "65536", "--max-attempts", "2",
            "-s", "per_ip=2", "-s", "low_speed_time=7", "--no-follow-canonical",
            cwd=tmp_path, stdin=f"# from stdin\n{web.url(2, 0)}\n",
            env={"GOSSAMER_SEEDS": env_seeds},
        )  # fmt: skip
    assert r.returncode == Exit.OK, r.stderr
    manifest = json.loads((tmp_path / "out" / "crawl.json").read_text())
    assert manifest["seeds"] == [web.url(0, 0), web.url(1, 0), web.url(2, 0)]
    assert manifest["seeds_file"] is None  # read once; a resume does not read stdin again
    expected = {
        "connect_timeout": 2.0,
        "first_byte_timeout": 3.0,
        "total_timeout": 4.0,
        "max_crawl_delay": 0.0,
        "max_body": 65536,
        "max_attempts": 2,
        "per_ip": 2,
        "low_speed_time": 7,
        "follow_canonical": False,
    }
    assert {k: manifest[k] for k in expected} == expected
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["pages"] > 0


def test_seeds_file_of_200_seeds_audits_full_coverage(tmp_path: Path) -> None:
    """The issue's "done": a crawl from a seeds file of 200 seeds of the simulated web (one
    per host, scope host) fetches every page a correct crawler must: coverage 1.000."""
    spec = WebSpec(seed=16, hosts=200, pages_mean=3, pages_max=8, outdegree_mean=5)
    log = tmp_path / "web.log"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seeds = [web.url(h, 0) for h in range(200)]
        (tmp_path / "seeds.txt").write_text(
            "# 200 seeds, one per host\n" + "\n".join(seeds) + "\n\n# end\n"
        )
        r = gossamer(
            "crawl", "--seeds-file", "seeds.txt", "-o", "out", "--resolve-file", str(resolve),
            "--allow-private", "--delay", "0", "--user-agent", UA, "--concurrency", "64",
            "--workers", "1", "--connect-timeout", "2", "--first-byte-timeout", "3",
            "--total-timeout", "5", "-q",
            cwd=tmp_path,
        )  # fmt: skip
        assert r.returncode == Exit.OK, r.stderr
        web.flush_log()
    manifest = json.loads((tmp_path / "out" / "crawl.json").read_text())
    assert manifest["seeds"] == seeds
    rules = TruthRules(seeds=tuple(seeds), scope="host", user_agent=UA)
    truth = compute_truth(web.model, rules)
    assert len({u.split("/")[2] for u in truth.required}) == 200
    report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    assert f"{report.coverage:.3f}" == "1.000", report.format_table()
    assert report.ok, report.format_table()
