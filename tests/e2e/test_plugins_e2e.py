"""Plugins found by entry points (docs/python.md, "Plugins"): distributions installed into a
directory on PYTHONPATH as pip installs them; `gossamer plugins` lists them (a broken one:
one line, exit 2), a sink plugin writes its output in a real crawl of an nginx site, a
broken sink stops a crawl before it starts in one line, and the frontier, fetcher and
strategy registries find theirs by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _plugin_dist import install_plugin, with_path
from _python_site import python_site

from gossamer.testweb._nginx import run_nginx

ROOT = Path(__file__).resolve().parents[2]

SINK = '''
from pathlib import Path

from gossamer.engine.sink_registry import PageSink


class StatusSink(PageSink):
    """DIR/statuses.txt: each crawled page's status and URL."""

    def __init__(self, ctx):
        self.file = open(Path(ctx.out) / "statuses.txt", "a")

    def page(self, event):
        self.file.write(f"{event.status} {event.url}\\n")

    def flush(self):
        self.file.flush()

    def close(self):
        self.file.close()


def factory(ctx):
    return StatusSink(ctx)
'''

TOYS = '''
from gossamer.partition import Modulo


def fetcher(settings, resolver):
    raise NotImplementedError


def frontier(settings, place):
    raise NotImplementedError


class Toy(Modulo):
    pass
'''


def _env(*dirs: Path) -> dict[str, str]:
    return with_path(dict(os.environ), ROOT / "src", *dirs)


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def _good(site: Path) -> Path:
    return install_plugin(
        site,
        "gossamer-extras",
        "2.0.1",
        {"extras_sink.py": SINK, "extras_toys.py": TOYS},
        {
            "gossamer.sinks": {"statuses": "extras_sink:factory"},
            "gossamer.fetchers": {"toy": "extras_toys:fetcher"},
            "gossamer.frontiers": {"toy": "extras_toys:frontier"},
            "gossamer.strategies": {"toy": "extras_toys:Toy"},
            "gossamer.extractors": {"noop": "extras_toys:fetcher"},
        },
    )


def test_gossamer_plugins_lists_them_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    good = _good(tmp_path / "good")
    r = _run("plugins", "--json", env=_env(good))
    assert r.returncode == 0, r.stderr
    rows = {(p["group"], p["name"]): p for p in json.loads(r.stdout)}
    assert set(rows) == {
        ("gossamer.sinks", "statuses"),
        ("gossamer.fetchers", "toy"),
        ("gossamer.frontiers", "toy"),
        ("gossamer.strategies", "toy"),
        ("gossamer.extractors", "noop"),
    }
    assert rows["gossamer.sinks", "statuses"] == {
        "group": "gossamer.sinks", "name": "statuses", "value": "extras_sink:factory",
        "distribution": "gossamer-extras", "version": "2.0.1", "loaded": True, "error": None,
    }  # fmt: skip
    r = _run("plugins", env=_env(good))
    assert "gossamer.sinks\tstatuses\textras_sink:factory\tgossamer-extras 2.0.1\tok" in r.stdout
    bad = install_plugin(
        tmp_path / "bad", "gossamer-broken", "0.1",
        {"broken_ext.py": "raise RuntimeError('half-installed')\n"},
        {"gossamer.extractors": {"broken": "broken_ext:extract"}},
    )  # fmt: skip
    r = _run("plugins", env=_env(good, bad))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "gossamer: error: plugin gossamer.extractors broken = broken_ext:extract from "
        "gossamer-broken 0.1 failed to load: RuntimeError: half-installed"
    ]
    assert "broken_ext:extract\tgossamer-broken 0.1\tFAILED" in r.stdout
    r = _run("plugins", "--no-load", env=_env(good, bad))  # listed, nothing imported
    assert r.returncode == 0 and "broken_ext:extract\tgossamer-broken 0.1\t-" in r.stdout


def test_a_sink_plugin_writes_its_output_in_a_crawl(tmp_path: Path) -> None:
    env = _env(_good(tmp_path / "good"))
    site = python_site(tmp_path, 5)
    out = tmp_path / "crawl"
    with run_nginx(site.server):
        r = _run("crawl", site.base, "-o", str(out), "--allow-private", "--delay", "0",
                 "--workers", "2", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = (out / "statuses.txt").read_text().splitlines()
    assert sorted(lines) == sorted(f"200 {site.base}{p}" for p in
                                   ["", *(f"p{k}.html" for k in range(1, 5))])  # fmt: skip


def test_a_broken_sink_plugin_stops_the_crawl_before_it_starts(tmp_path: Path) -> None:
    bad = install_plugin(
        tmp_path / "bad", "gossamer-badsink", "3.0",
        {"bad_sink.py": "import definitely_not_installed_anywhere\n"},
        {"gossamer.sinks": {"bad": "bad_sink:factory"}},
    )  # fmt: skip
    out = tmp_path / "crawl"
    r = _run("crawl", "http://127.0.0.1:1/", "-o", str(out), "--allow-private", env=_env(bad))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "gossamer: error: plugin gossamer.sinks bad = bad_sink:factory from gossamer-badsink "
        "3.0 failed to load: ModuleNotFoundError: No module named "
        "'definitely_not_installed_anywhere'"
    ]
    assert not out.exists()


def test_the_registries_find_their_plugins_by_name(tmp_path: Path) -> None:
    code = (
        "from gossamer.fetch._registry import FETCHERS\n"
        "from gossamer.frontier._registry import FRONTIERS\n"
        "from gossamer.partition import strategy_named\n"
        "print(FETCHERS.factory('toy').__module__, FRONTIERS.factory('toy').__name__,\n"
        "      type(strategy_named('toy')).__name__)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env=_env(_good(tmp_path / "good")), timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["extras_toys", "frontier", "Toy"]
    code = (  # --partition takes the installed strategy's name
        "from gossamer.cli import build_parser\n"
        "print(build_parser().parse_args(['crawl', 'http://x/', '--partition', 'toy']).partition)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env=_env(_good(tmp_path / "again")), timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "toy", r.stderr
