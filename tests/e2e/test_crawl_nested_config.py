"""The nested settings through the real command line (issue 17): a crawl configured by a TOML
file of group tables and `-s group.key=value`, and a crawl directory whose crawl.json the flat
settings wrote (tests/data/crawl_flat_main_4006114.json) resumed by this code, pool workers
included. Each crawl is audited against the simulated web's truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gossamer.testweb import TruthRules, WebSpec, audit, read_logs, serve_in_thread

DATA = Path(__file__).parents[1] / "data"
OLD_MANIFEST = DATA / "crawl_flat_main_4006114.json"
UA = "gossamer-nested-test/0.1"


def gossamer(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GOSSAMER_")}
    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )


def stats(out: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / "stats.json").read_text())
    return data


def test_a_crawl_configured_by_group_tables(tmp_path: Path) -> None:
    spec = WebSpec(seed=23, hosts=8, pages_mean=10, profile="clean")
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as running:
        resolve = running.write_resolve_file(tmp_path / "resolve.txt")
        config = tmp_path / "gossamer.toml"
        config.write_text(
            f'scope = "all"\nworkers = 1\n\n'
            f'[politeness]\ndelay = 0\nper_ip = 2\n\n'
            f'[fetch]\nuser_agent = "{UA}"\nresolve_file = "{resolve}"\nallow_private = true\n'
            f"concurrency = 8\ntotal_timeout = 5.0\nfirst_byte_timeout = 3.0\n\n"
            f'[sinks]\nwarc = false\n\n[traps]\nmax_query_shapes = "none"\n'
        )
        r = gossamer(
            "crawl", running.url(0, 0), "-o", str(out), "--config", str(config),
            "-s", "frontier.max_attempts=2", "-s", "links.follow_canonical=false", "-q",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        running.flush_log()
    manifest = json.loads((out / "crawl.json").read_text())
    assert (manifest["user_agent"], manifest["delay"], manifest["per_ip"]) == (UA, 0, 2)
    assert (manifest["max_attempts"], manifest["follow_canonical"]) == (2, False)
    assert manifest["warc"] is False and manifest["max_query_shapes"] is None
    assert not (out / "warc").exists()  # [sinks] warc = false reached the recorder
    assert stats(out)["ended"] == "complete"
    rules = TruthRules(seeds=(running.url(0, 0),), scope="all", user_agent=UA)
    truth = audit(running.model, read_logs([log]).records, rules)
    # every request carried the [fetch] table's user agent, every page was fetched once
    assert truth.coverage == 1.0 and truth.overlap == 0.0, truth.format_table()
    assert truth.politeness_violations == 0, truth.format_table()


def test_an_unknown_nested_key_is_one_error_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[politeness]\ndelya = 0\n")
    for args in (["--config", str(config)], ["-s", "politeness.delya=0"]):
        r = gossamer("crawl", "http://127.0.0.1:9/", "-o", str(tmp_path / "out"), *args)
        assert r.returncode == 2, r.stderr
        (line,) = r.stderr.splitlines()
        assert line.startswith("gossamer: error: ") and "politeness.delya" in line, line
        assert not (tmp_path / "out").exists()


def test_a_crawl_json_of_the_flat_settings_resumes(tmp_path: Path) -> None:
    # the web the stored crawl.json was written for: its seed is www.h0.example
    spec = WebSpec(seed=22, hosts=6, pages_mean=8, profile="clean")
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as running:
        resolve = running.write_resolve_file(tmp_path / "resolve.txt")
        seed = running.url(0, 0)
        old = json.loads(OLD_MANIFEST.read_text())
        assert old["seeds"] == [seed] and old["max_pages"] == 10
        # a first run of 10 pages, then its crawl.json replaced by the flat one, the paths of
        # this machine put in (the file and the directory it names are the test's)
        r = gossamer(
            "crawl", seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve),
            "--allow-private", "--delay", "0", "--user-agent", old["user_agent"],
            "--max-pages", "10", "--concurrency", "8", "--workers", "1", "-q",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        old.update(output=str(out), resolve_file=str(resolve))
        (out / "crawl.json").write_text(json.dumps(old, indent=2) + "\n")

        r = gossamer("crawl", "--resume", str(out), "-q")  # at its limit: nothing to do
        assert r.returncode == 0, r.stderr
        assert "the crawl stopped at its page limit (--max-pages 10)" in r.stderr
        # on to the end, in two pool workers, each of which loads crawl.json
        r = gossamer("crawl", "--resume", str(out), "--max-pages", "none", "--workers", "2", "-q")
        assert r.returncode == 0, r.stderr
        running.flush_log()
    assert stats(out)["ended"] == "complete" and stats(out)["workers"] == 2
    manifest = json.loads((out / "crawl.json").read_text())
    newer = {"live_graph", "partition", "site_sizes", "phase_period", "phases", "epsilon",
             "heartbeat_ttl", "extract", "disk_margin", "replica_acks", "replica_ack_timeout",
             "near_dup_links", "near_dup_distance", "dedup_payloads", "stop_patience"}
    assert set(manifest) == set(old) | newer  # flat: its keys, newer too
    assert (manifest["max_pages"], manifest["workers"]) == (None, 2)
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=old["user_agent"])
    truth = audit(running.model, read_logs([log]).records, rules)
    assert truth.coverage == 1.0 and truth.overlap == 0.0, truth.format_table()
    assert truth.politeness_violations == 0, truth.format_table()
