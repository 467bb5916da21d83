"""The scripts of examples/ (docs/python.md) run as a user runs them, against a site served
by nginx: the broken-link checker, the title/meta extractor and the tutorial's extractors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _python_site import python_site

from gossamer.testweb._nginx import run_nginx

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _env(*dirs: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [*map(str, dirs), str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env or _env(),
        timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip


def test_the_broken_link_checker(tmp_path: Path) -> None:
    site = python_site(tmp_path, 6, broken=2)
    with run_nginx(site.server):
        r = _run(str(EXAMPLES / "broken_links.py"), site.base, "--allow-private", "--delay", "0")
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        f"404 {site.base}gone-1.html",
        f"    linked from {site.base}p1.html",
        f"404 {site.base}gone-2.html",
        f"    linked from {site.base}p2.html",
    ]
    assert "2 broken link(s)" in r.stderr


def test_the_title_and_meta_extractor(tmp_path: Path) -> None:
    site = python_site(tmp_path, 4)
    out = tmp_path / "out"
    with run_nginx(site.server):
        r = _run(
            str(EXAMPLES / "titles_meta.py"), site.base, str(out), "--allow-private",
            "--delay", "0",
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    items = {i["url"]: i for i in map(json.loads, r.stdout.splitlines())}
    assert set(items) == {site.base, *(f"{site.base}p{k}.html" for k in range(1, 4))}
    assert items[site.base]["title"] == "Home" and items[site.base]["h1"] == "Home"
    assert items[site.base]["description"] == "the home page"
    assert items[f"{site.base}p2.html"]["description"] == "page number 2"
    assert "4 pages crawled, 4 items" in r.stderr
    # the same extractor from the command line, by MODULE:CALLABLE
    again = tmp_path / "again"
    with run_nginx(site.server):
        r = _run(
            "-m", "gossamer", "crawl", site.base, "-o", str(again), "--allow-private",
            "--delay", "0", "--extract", "titles_meta:extract", "-q", env=_env(EXAMPLES),
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = (again / "items.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["item"]["title"] for line in lines) == [
        "Home", "Page 1", "Page 2", "Page 3",
    ]  # fmt: skip


def test_the_tutorial_s_price_extractor(tmp_path: Path) -> None:
    site = python_site(tmp_path, 4)
    out = tmp_path / "shop"
    with run_nginx(site.server):
        r = _run(
            "-m", "gossamer", "crawl", site.base, "-o", str(out), "--allow-private",
            "--delay", "0", "--workers", "2", "--extract", "shop:prices", "-q",
            env=_env(EXAMPLES),
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert sorted((x["item"]["title"], x["item"]["price"]) for x in lines) == [
        ("Page 1", 1.99), ("Page 2", 2.99), ("Page 3", 3.99),
    ]  # fmt: skip


def test_the_examples_type_check_against_the_public_api() -> None:
    """mypy --strict on examples/: the API's names are typed as a user's code sees them."""
    env = _env()
    env["MYPYPATH"] = str(ROOT / "src")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(EXAMPLES)],
        capture_output=True, text=True, env=env, timeout=300, check=False, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_systemd_unit_of_a_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/systemd/ (docs/deploy.md, "A worker as a service"): systemd-analyze verify
    finds nothing to say of the unit (its ExecStart pointed at this venv's gossamer); its
    command line is one `gossamer worker` accepts with the environment file's variables;
    the file's URL is one redis-py reads (TLS, the CA file), its password in REDISCLI_AUTH."""
    import shlex
    import shutil

    import redis.connection

    from gossamer.cli import build_parser

    unit = (EXAMPLES / "systemd" / "gossamer-worker.service").read_text()
    env = dict(
        line.split("=", 1)
        for line in (EXAMPLES / "systemd" / "worker.env.example").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert set(env) == {"GOSSAMER_REDIS", "REDISCLI_AUTH"}
    kwargs = redis.connection.parse_url(env["GOSSAMER_REDIS"])
    assert kwargs["connection_class"] is redis.connection.SSLConnection
    assert kwargs["ssl_ca_certs"] == "/etc/gossamer/redis-ca.crt" and "password" not in kwargs
    service = dict(
        line.split("=", 1) for line in unit.splitlines() if "=" in line and line[0] != "#"
    )
    assert service["EnvironmentFile"] == "/etc/gossamer/worker.env"
    assert service["Restart"] == "always"
    binary, *args = shlex.split(service["ExecStart"])
    assert binary.endswith("/bin/gossamer") and args[0] == "worker"
    monkeypatch.setenv("GOSSAMER_REDIS", env["GOSSAMER_REDIS"])
    parsed = build_parser().parse_args(args)
    assert parsed.redis == env["GOSSAMER_REDIS"] and str(parsed.output) == "/srv/gossamer"
    here = shutil.which("gossamer", path=str(Path(sys.executable).parent))
    verify = shutil.which("systemd-analyze")
    if here is None or verify is None:
        pytest.skip("systemd-analyze, or a gossamer script beside this Python, is missing")
    copy = tmp_path / "gossamer-worker.service"
    copy.write_text(unit.replace(binary, here))
    done = subprocess.run([verify, "verify", str(copy)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stderr
