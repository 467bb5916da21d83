"""Bad input gets a clear error and an exit code, and loses nothing."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

UA = "gossamer-badinput/0.1"


def gossamer(*args: str, limit_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # a file-size limit: writes past it fail like a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        preexec_fn=limit,
    )


def test_invalid_seed_url(tmp_path: Path) -> None:
    r = gossamer("crawl", "http://exa mple.org:99999/", "-o", str(tmp_path / "c"))
    assert r.returncode == 2
    assert "invalid seed URL" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "c").exists()


def test_no_seed_and_unreadable_config(tmp_path: Path) -> None:
    r = gossamer("crawl", "-o", str(tmp_path / "c"))
    assert r.returncode == 2 and "seed" in r.stderr
    r = gossamer("crawl", "http://a.example/", "--config", str(tmp_path / "nope.toml"))
    assert r.returncode == 2 and "cannot read config file" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("max_pages = 'many'\n")
    r = gossamer("crawl", "http://a.example/", "--config", str(bad))
    assert r.returncode == 2 and "max_pages" in r.stderr and "Traceback" not in r.stderr


def test_resume_of_something_that_is_not_a_crawl(tmp_path: Path) -> None:
    r = gossamer("crawl", "--resume", str(tmp_path))
    assert r.returncode == 2 and "not a crawl directory" in r.stderr


@pytest.mark.slow
def test_full_disk_stops_cleanly_and_resume_loses_nothing(tmp_path: Path) -> None:
    spec = WebSpec(seed=12, hosts=30, pages_mean=20)
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        args = [
            "crawl", seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve),
            "--allow-private", "--delay", "0", "--user-agent", UA, "-q",
        ]  # fmt: skip
        full = gossamer(*args, limit_bytes=2 * 1024 * 1024)
        assert full.returncode == 74, full.stderr
        assert "error" in full.stderr and "Traceback" not in full.stderr
        assert "--resume" in full.stderr
        stats = json.loads((out / "stats.json").read_text())  # small: written under the limit
        assert (stats["ended"], stats["stopped_by"], stats["finished"]) == ("error", "error", False)
        again = gossamer("crawl", "--resume", str(out), "-q")
        assert again.returncode == 0, again.stderr
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=UA)
    truth = compute_truth(web.model, rules)
    report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    assert report.politeness_violations == 0
    assert json.loads((out / "stats.json").read_text())["finished"]
