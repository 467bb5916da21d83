"""pywb (the Webrecorder replay tool) serving crawls on loopback, to check that it reads their
CDX indexes and replays every record.

pywb 2.10 pins redis==2.10.6, which gossamer's redis>=5 excludes, so it cannot share .venv:
./scripts/setup.sh installs it into its own virtualenv, `.venv-pywb`, and the tests run its
`wayback` command."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WAYBACK = ROOT / ".venv-pywb" / "bin" / "wayback"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def pywb_serving(
    conf_dir: Path, indexes: Sequence[Path], archives: Sequence[Path], coll: str = "crawl"
) -> Iterator[str]:
    """Run `wayback` on a free loopback port with one collection `coll`, whose index is the
    CDXJ files `indexes` (copied into one directory, which pywb reads as one index) and whose
    WARCs are in the directories `archives`; yields `http://127.0.0.1:PORT/<coll>/`."""
    if not WAYBACK.exists():
        pytest.fail(f"pywb is not installed ({WAYBACK} missing): run ./scripts/setup.sh")
    index_dir = conf_dir / "indexes"
    index_dir.mkdir(parents=True)
    for k, index in enumerate(indexes):
        (index_dir / f"{k}-{index.name}").write_bytes(index.read_bytes())
    lines = [f"collections:\n  {coll}:\n    index_paths: {index_dir}/\n    archive_paths:\n"]
    lines += [f"      - {a.resolve()}/\n" for a in archives]
    (conf_dir / "config.yaml").write_text("".join(lines))
    port = _free_port()
    log = (conf_dir / "wayback.log").open("wb")
    proc = subprocess.Popen(
        [str(WAYBACK), "-p", str(port), "-b", "127.0.0.1", "-d", str(conf_dir)],
        cwd=conf_dir,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # until it answers (its start-up imports gevent, jinja2, …)
            assert proc.poll() is None, (conf_dir / "wayback.log").read_text()
            assert time.monotonic() < deadline, "pywb did not start within 60 s"
            try:
                get(f"http://127.0.0.1:{port}/")
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/{coll}/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()


def get(url: str, timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """GET `url` without following redirects: (status, headers, body)."""
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    conn = http.client.HTTPConnection(host, int(port or 80), timeout=timeout)
    try:
        conn.request("GET", "/" + path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()
