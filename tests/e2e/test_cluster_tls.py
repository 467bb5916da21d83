"""A cluster crawl over TLS with a password (docs/deploy.md, "Redis"): Debian's redis-server
(built with TLS) on a TLS port only, its certificate self-signed by `openssl` for 127.0.0.1;
`gossamer crawl --redis "rediss://HOST:PORT/0?ssl_ca_certs=CA"` with the password in
$REDISCLI_AUTH, one local worker, a static site on nginx: every page fetched; `gossamer
status` through a redis-sentinel on a TLS port (`rediss+sentinel://…?ssl_ca_certs=CA`)
finds the crawl. A client that does not trust the certificate is one line naming the
verification failure."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _static_site import static_site

from gossamer.testweb._nginx import run_nginx
from gossamer.testweb.redisd import find_redis_server

PAGES = 5


def gossamer(*args: str) -> list[str]:
    return [sys.executable, "-m", "gossamer", *args]


@contextlib.contextmanager
def tls_redis(root: Path, password: str) -> Iterator[tuple[int, Path]]:
    """redis-server on a TLS port of 127.0.0.1 (no plain port) asking for `password`: its
    port and the certificate clients must trust."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = root / "redis.crt", root / "redis.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    conf = root / "redis.conf"
    conf.write_text(
        "bind 127.0.0.1\nprotected-mode yes\nport 0\n"
        f"tls-port {port}\ntls-cert-file {cert}\ntls-key-file {key}\n"
        f"tls-ca-cert-file {cert}\ntls-auth-clients no\n"
        f"requirepass {password}\nsave \"\"\nappendonly no\ndir {root}\n"
    )
    proc = subprocess.Popen(
        [find_redis_server(), str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _listening(port, proc, "redis-server")
        yield port, cert
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _listening(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        assert proc.poll() is None, f"{what} exited {proc.returncode}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        assert time.monotonic() < deadline, f"{what} is not listening"
        time.sleep(0.05)


@contextlib.contextmanager
def tls_sentinel(root: Path, port: int, cert: Path, password: str) -> Iterator[int]:
    """One redis-sentinel on a TLS port monitoring the master on `port` (service `svc`,
    quorum 1), reaching it over TLS with its password: the sentinel's port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        sport = int(s.getsockname()[1])
    conf = root / "sentinel.conf"
    conf.write_text(
        f"bind 127.0.0.1\nport 0\ntls-port {sport}\ntls-cert-file {cert}\n"
        f"tls-key-file {cert.with_suffix('.key')}\ntls-ca-cert-file {cert}\n"
        f"tls-auth-clients no\ntls-replication yes\ndir {root}\n"
        f"sentinel monitor svc 127.0.0.1 {port} 1\nsentinel auth-pass svc {password}\n"
    )
    proc = subprocess.Popen([find_redis_server(), str(conf), "--sentinel"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _listening(sport, proc, "redis-sentinel")
        yield sport
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_crawl_over_tls_with_a_password(tmp_path: Path) -> None:
    password = "tls-secret-4d1f"
    (tmp_path / "site").mkdir()
    site = static_site(tmp_path / "site", PAGES)
    env = {**os.environ, "REDISCLI_AUTH": password}
    with tls_redis(tmp_path, password) as (port, cert), run_nginx(site.server):
        url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}"
        done = subprocess.run(
            gossamer("crawl", "--redis", url, site.base, "--allow-private", "--delay", "0",
                     "--workers", "1", "-o", str(tmp_path / "out"), "-q"),
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        # the same master through a sentinel, TLS to both (rediss+sentinel://, the CA given)
        with tls_sentinel(tmp_path, port, cert, password) as sport:
            via_sentinel = subprocess.run(
                gossamer("status", "--redis",
                         f"rediss+sentinel://127.0.0.1:{sport}/svc/0?ssl_ca_certs={cert}"),
                capture_output=True, text=True, timeout=60, env=env,
            )  # fmt: skip
        # a client that does not trust the certificate: one line saying why
        untrusted = subprocess.run(
            gossamer("status", "--redis", f"rediss://127.0.0.1:{port}/0"),
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert via_sentinel.returncode == 0, via_sentinel.stderr
    assert via_sentinel.stdout.startswith(f"crawl {done.stdout.strip()}  finished"), (
        via_sentinel.stdout
    )
    lines = (tmp_path / "out" / "w1" / "crawl.log.jsonl").read_text().splitlines()
    log = [json.loads(x) for x in lines]
    fetched = {r["url"].removeprefix(site.base.rstrip("/")) for r in log if r["status"] == 200}
    assert fetched == {"/", "/index.html", *(f"/p{k}.html" for k in range(1, PAGES))}, log
    assert password not in done.stderr + untrusted.stderr
    assert untrusted.returncode == 77, untrusted.stderr
    (line,) = untrusted.stderr.strip().splitlines()
    assert line.startswith(
        f"gossamer: error: cannot use Redis at rediss://127.0.0.1:{port}/0: Error 1 connecting "
        f"to 127.0.0.1:{port}. [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
        "self-signed certificate"
    ), line
    assert line.endswith("; give the CA certificate that signed its certificate: "
                         "rediss://HOST:PORT/DB?ssl_ca_certs=FILE (docs/deploy.md)"), line
