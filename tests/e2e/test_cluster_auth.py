"""Cluster commands against a Redis that asks for a password (issue 16), end to end: the real
CLI in subprocesses, a real redis-server with `requirepass` and ACL users, the simulated web.

A wrong password, a missing one, an ACL user without rights: every subcommand that takes
--redis fails at once (no retry loop: measured ~0.35 s on the 2-core test machine, asserted
under 5 s) with its own message and exit 77, changes nothing, and never shows the password.
An unreachable Redis: exit 69, at once, except `worker`, which waits for it (saying so). The
right password: a cluster crawl works, and the password is nowhere in its outputs, its
workers' command lines or what it stored in Redis."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from test_cluster import UA, audit_web, gossamer, wait_for

from gossamer.testweb import WebSpec, serve_in_thread
from gossamer.testweb.redisd import RedisServer, _free_ports
from redis_fixtures import PASSWORD_SERVER_USERS

FAST = 5.0  # seconds: an answer "at once" (measured ~0.35 s: interpreter start + one connect)


def run(
    args: list[str], *, env: dict[str, str] | None = None, timeout: float = 90
) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    done = subprocess.run(
        gossamer(*args), capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    return done, time.monotonic() - t0


def files_under(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def stored_in_redis(client: redis.Redis) -> bytes:
    """Every key and value of the database, concatenated (to look for a secret in)."""
    chunks: list[bytes] = []
    for key in client.scan_iter(count=1000):
        chunks.append(key)
        kind = client.type(key)
        if kind == b"string":
            chunks.append(client.get(key) or b"")
        elif kind == b"hash":
            for k, v in client.hgetall(key).items():
                chunks += [k, v]
        elif kind == b"list":
            chunks += client.lrange(key, 0, -1)
        elif kind == b"set":
            chunks += list(client.smembers(key))
        elif kind == b"zset":
            chunks += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        else:
            chunks.append(client.dump(key) or b"")
    return b"\n".join(chunks)


def secret_forms(password: str) -> list[str]:
    """The password as given and as written in a URL (quoted)."""
    return sorted({password, quote(password, safe="")})


def assert_hidden(password: str, *texts: str | bytes) -> None:
    for form in secret_forms(password):
        for text in texts:
            blob = text if isinstance(text, bytes) else text.encode()
            assert form.encode() not in blob, f"the password {form!r} shows in {text[:2000]!r}"


def _commands(url: str | None, out: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Every subcommand that takes --redis: its arguments and environment for `url` (None:
    given in GOSSAMER_REDIS instead)."""
    redis_arg = ["--redis", url] if url is not None else []
    return {
        "crawl": (["crawl", *redis_arg, "http://127.0.0.1:9/", "--workers", "0", "-o",
                   str(out)], {}),
        "worker": (["worker", *redis_arg, "-o", str(out)], {}),
        "status": (["status", *redis_arg], {}),
        "stop": (["stop", *redis_arg], {}),
        "workers": (["workers", *redis_arg, "--scale", "1", "-o", str(out)], {}),
    }  # fmt: skip


SUBCOMMANDS = ["crawl", "worker", "status", "stop", "workers"]


def _fails_at_once(
    tmp_path: Path,
    server: RedisServer,
    command: str,
    url: str,
    *,
    via_env: bool,
    expect: str,
    code: int,
) -> str:
    """Run `command` with `url` (on the command line or in GOSSAMER_REDIS): it fails with
    `code` within FAST seconds, one error line matching `expect`, no file and no key
    written. Its stderr."""
    out = tmp_path / "out"
    args, env = _commands(None if via_env else url, out)[command]
    if via_env:
        env = {**env, "GOSSAMER_REDIS": url}
    before = tree(tmp_path)
    done, took = run(args, env=env)
    assert done.returncode == code, (done.returncode, done.stderr)
    assert re.search(expect, done.stderr), done.stderr
    assert done.stderr.startswith("gossamer: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert took < FAST, f"{command} took {took:.1f} s"
    assert tree(tmp_path) == before  # nothing written (no -o directory made)
    with server.client() as client:
        assert client.dbsize() == 0  # and nothing in Redis
    return done.stderr


@pytest.mark.parametrize(
    ("command", "via_env"),
    [(c, False) for c in SUBCOMMANDS]
    # crawl takes --redis only: GOSSAMER_REDIS is the other commands' default
    + [(c, True) for c in SUBCOMMANDS if c != "crawl"],
)
def test_a_wrong_password_fails_at_once_with_its_own_message(
    tmp_path: Path, redis_password_server: RedisServer, command: str, via_env: bool
) -> None:
    server = redis_password_server
    with server.client() as client:
        client.flushall()
    wrong = f"wrong-{server.password}"
    url = f"redis://:{quote(wrong, safe='')}@127.0.0.1:{server.port}/0"
    err = _fails_at_once(
        tmp_path, server, command, url, via_env=via_env, code=77,
        expect=rf"Redis at redis://:\*\*\*@127\.0\.0\.1:{server.port}/0 refused the password "
        r"\(invalid username-password pair",
    )  # fmt: skip
    assert_hidden(wrong, err)
    assert "unreachable" not in err and "retrying" not in err


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_a_missing_password_says_where_to_put_it(
    tmp_path: Path, redis_password_server: RedisServer, command: str
) -> None:
    server = redis_password_server
    with server.client() as client:
        client.flushall()
    _fails_at_once(
        tmp_path, server, command, server.url_without_password, via_env=False, code=77,
        expect=r"Redis at redis://127\.0\.0\.1:\d+/0 asks for a password: put it in the URL "
        r"\(redis://:PASSWORD@host:port/db, or redis://USER:PASSWORD@host:port/db for an ACL",
    )  # fmt: skip


@pytest.mark.parametrize("command", ["crawl", "worker", "status"])
def test_acl_users_wrong_password_missing_password_and_missing_rights(
    tmp_path: Path, redis_password_server: RedisServer, command: str
) -> None:
    server = redis_password_server
    with server.client() as client:
        client.flushall()
    port = server.port
    crawler, reader = PASSWORD_SERVER_USERS["crawler"], PASSWORD_SERVER_USERS["reader"]
    err = _fails_at_once(
        tmp_path, server, command, f"redis://crawler:not-{crawler}@127.0.0.1:{port}/0",
        via_env=False, code=77,
        expect=rf"Redis at redis://crawler:\*\*\*@127\.0\.0\.1:{port}/0 refused the user and "
        "password",
    )  # fmt: skip
    assert_hidden(f"not-{crawler}", err)
    _fails_at_once(
        tmp_path, server, command, f"redis://crawler@127.0.0.1:{port}/0", via_env=False,
        code=77, expect=r"asks for a password: put it in the URL "
        r"\(redis://crawler:PASSWORD@host:port/db\)",
    )  # fmt: skip
    # the right password, but a user allowed PING and INFO only: refused on its first command
    err = _fails_at_once(
        tmp_path, server, command, f"redis://reader:{reader}@127.0.0.1:{port}/0",
        via_env=False, code=77,
        expect=r"does not allow user 'reader' what gossamer needs \(.*no permissions",
    )  # fmt: skip
    assert_hidden(reader, err)


@pytest.mark.parametrize("command", ["crawl", "status", "stop", "workers"])
def test_an_unreachable_redis_exits_69_at_once(tmp_path: Path, command: str) -> None:
    secret = "s3cret-unreachable"
    url = f"redis://:{secret}@127.0.0.1:{_free_ports(1)[0]}/0"  # nothing listens there
    out = tmp_path / "out"
    args, env = _commands(url, out)[command]
    done, took = run(args, env=env)
    assert done.returncode == 69, done.stderr
    assert re.search(
        r"^gossamer: error: cannot reach Redis at redis://:\*\*\*@127\.0\.0\.1:\d+/0: "
        r".*Connection refused; is it running",
        done.stderr,
    ), done.stderr
    assert took < FAST and not out.exists()
    assert_hidden(secret, done.stderr, done.stdout)


def test_a_worker_waits_for_redis_to_come_up_and_says_so(tmp_path: Path) -> None:
    """`worker` started before Redis answers: it says it waits (without the password),
    joins once Redis is back (restarted from its AOF, the crawl in it) and crawls the
    simulated web to the end."""
    password = "pw-waiting/for#redis"
    spec = WebSpec(seed=4, hosts=20, pages_mean=6)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    out.mkdir()
    with (
        RedisServer(tmp_path / "redis", password=password) as server,
        serve_in_thread(spec, log_path=log) as web,
    ):
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        done, _ = run(["crawl", "--redis", server.url, seed, "--workers", "0", "--scope", "all",
                       "--resolve-file", str(resolve), "--allow-private", "--delay", "0",
                       "--user-agent", UA])  # fmt: skip
        assert done.returncode == 0, done.stderr
        crawl_id = done.stdout.strip()
        server.stop()
        err_path = tmp_path / "worker.err"
        with err_path.open("wb") as err:
            worker = subprocess.Popen(
                gossamer("worker", "--redis", server.url, "--crawl", crawl_id, "-o", str(out),
                         "-q"),
                stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        try:
            wait_for("the worker to say it waits",
                     lambda: "waiting up to 30 s" in err_path.read_text(), 20,
                     show=err_path.read_text)  # fmt: skip
            assert worker.poll() is None
            server.restart()
            code = worker.wait(timeout=90)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        stderr = err_path.read_text()
        assert code == 0, stderr
        _, report = audit_web(web, log, seed)
    assert re.search(r"Redis at redis://:\*\*\*@127\.0\.0\.1:\d+/0 does not answer \(.*Connection "
                     r"refused\); waiting up to 30 s", stderr), stderr  # fmt: skip
    assert "answers" in stderr and "joins crawl" in stderr
    assert report.coverage == 1.0, report.format_table()
    assert_hidden(password, stderr, *files_under(out).values())


@pytest.mark.slow
def test_a_cluster_crawl_with_a_password_works_and_keeps_it_secret(
    tmp_path: Path, redis_password_server: RedisServer
) -> None:
    """`crawl --redis redis://crawler:PW@… --workers 2` (an ACL user) crawls the simulated
    web completely; `status` with the default user's password (in GOSSAMER_REDIS) reads it;
    neither password is in any output, file, or value stored in Redis."""
    server = redis_password_server
    assert server.password is not None
    with server.client() as client:
        client.flushall()
    crawler = PASSWORD_SERVER_USERS["crawler"]
    url = f"redis://crawler:{crawler}@127.0.0.1:{server.port}/0"
    spec = WebSpec(seed=5, hosts=30, pages_mean=10)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        done, _ = run(["crawl", "--redis", url, seed, "--workers", "2", "-o", str(out),
                       "--scope", "all", "--resolve-file", str(resolve), "--allow-private",
                       "--delay", "0", "--user-agent", UA])  # fmt: skip
        assert done.returncode == 0, done.stderr
        crawl_id = done.stdout.strip()
        _, report = audit_web(web, log, seed)
    assert report.coverage == 1.0 and report.overlap == 0.0, report.format_table()
    st, _ = run(["status", "--crawl", crawl_id], env={"GOSSAMER_REDIS": server.url})
    assert st.returncode == 0, st.stderr
    assert f"crawl {crawl_id}  finished" in st.stdout
    worker_json = (out / "w1" / "worker.json").read_text()
    assert f'"redis": "redis://crawler:***@127.0.0.1:{server.port}/0"' in worker_json
    with server.client() as client:
        stored = stored_in_redis(client)
    assert crawl_id.encode() in stored  # the look is real
    for secret in (crawler, server.password):
        assert_hidden(secret, done.stdout, done.stderr, st.stdout, st.stderr, stored,
                      *files_under(out).values())  # fmt: skip


@pytest.mark.slow
def test_detached_workers_get_the_password_outside_their_command_line(
    tmp_path: Path, redis_password_server: RedisServer
) -> None:
    """`crawl --redis URL --detach` and `workers --scale`: the workers' command lines (what
    `ps` shows every user) and logs hold no password; `stop --wait` ends them."""
    server = redis_password_server
    assert server.password is not None
    with server.client() as client:
        client.flushall()
    spec = WebSpec(seed=9, hosts=60, pages_mean=100, profile="clean")  # outlasts the test
    out = tmp_path / "out"
    pids: list[int] = []
    with serve_in_thread(spec, log_path=tmp_path / "web.log") as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        done, _ = run(["crawl", "--redis", server.url, web.url(0, 0), "--workers", "1",
                       "--detach", "-o", str(out), "--scope", "all", "--resolve-file",
                       str(resolve), "--allow-private", "--delay", "0.2", "--user-agent",
                       UA])  # fmt: skip
        assert done.returncode == 0, done.stderr
        crawl_id = done.stdout.strip()
        try:
            pids += [int(p) for p in re.findall(r"\d+", done.stderr.split("pids ")[1])[:1]]
            scale, _ = run(["workers", "--redis", server.url, "--crawl", crawl_id, "--scale",
                            "2", "-o", str(out)])  # fmt: skip
            assert scale.returncode == 0, scale.stderr
            pids += [int(p) for p in re.findall(r"pids ([\d, ]+)", scale.stderr)[0].split(", ")]
            assert len(pids) == 2
            cmdlines = []
            for pid in pids:
                with contextlib.suppress(FileNotFoundError):  # read while it runs
                    cmdlines.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            assert cmdlines and all(b"worker" in c for c in cmdlines), cmdlines
            stop, _ = run(["stop", "--redis", server.url, "--crawl", crawl_id, "--wait", "60"])
            assert stop.returncode == 0, stop.stderr
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    logs = [p.read_text() for p in (out / "logs").glob("*.log")]
    assert len(logs) == 2 and all("joins crawl" in text for text in logs), logs
    assert_hidden(server.password, *cmdlines, *logs, done.stderr, *files_under(out).values())



def test_a_password_changed_under_a_running_worker_ends_it_with_77(tmp_path: Path) -> None:
    """Redis's password changes while a worker crawls (CONFIG SET requirepass, its
    connections closed): the worker's reconnections are refused; it stops (its batches'
    outcomes may be lost: their leases expire and the URLs are leased again) and exits 77
    saying why, instead of waiting for Redis forever."""
    old, new = "old-pw-under-worker", "new-pw-under-worker"
    spec = WebSpec(seed=9, hosts=40, pages_mean=100, profile="clean")  # outlasts the test
    out = tmp_path / "out"
    out.mkdir()
    with (
        RedisServer(tmp_path / "redis", password=old) as server,
        serve_in_thread(spec, log_path=tmp_path / "web.log") as web,
    ):
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        done, _ = run(["crawl", "--redis", server.url, web.url(0, 0), "--workers", "0",
                       "--scope", "all", "--resolve-file", str(resolve), "--allow-private",
                       "--delay", "0.2", "--user-agent", UA])  # fmt: skip
        assert done.returncode == 0, done.stderr
        err_path = tmp_path / "worker.err"
        with err_path.open("wb") as err:
            worker = subprocess.Popen(
                gossamer("worker", "--redis", server.url, "-o", str(out), "-q"),
                stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        try:
            log = out / "w1" / "crawl.log.jsonl"
            wait_for("the worker's first pages", lambda: log.exists() and log.stat().st_size > 0,
                     30)  # fmt: skip
            with server.client() as client:
                client.config_set("requirepass", new)
                client.client_kill_filter(_type="normal", skipme=True)
            t0 = time.monotonic()
            code = worker.wait(timeout=60)
            took = time.monotonic() - t0
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    stderr = err_path.read_text()
    assert code == 77, stderr
    assert re.search(r"gossamer: error: Redis at redis://:\*\*\*@127\.0\.0\.1:\d+/0 refused the "
                     r"password \(invalid username-password pair", stderr), stderr  # fmt: skip
    assert "Traceback" not in stderr
    assert took < 30, took
    for secret in (old, new):
        assert_hidden(secret, stderr, *files_under(out).values())


def test_rediss_tls_with_a_wrong_then_the_right_password(tmp_path: Path) -> None:
    """`rediss://` (TLS; a self-signed certificate made with openssl): a wrong password
    fails at once with 77, the right one creates a crawl and `status` reads it; the
    password shows nowhere."""
    openssl = shutil.which("openssl")
    assert openssl, "this test needs the openssl command (Debian package openssl)"
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    password = "tls-pw-secret"
    tls_port = _free_ports(1)[0]
    tls = (f"tls-port {tls_port}", f"tls-cert-file {cert}", f"tls-key-file {key}",
           f"tls-ca-cert-file {cert}", "tls-auth-clients no")  # fmt: skip
    with RedisServer(tmp_path / "redis", password=password, extra=tls) as server:
        base = f"127.0.0.1:{tls_port}/0?ssl_cert_reqs=none"
        out = tmp_path / "out"
        wrong, took = run(["crawl", "--redis", f"rediss://:not-{password}@{base}",
                           "http://127.0.0.1:9/", "--workers", "0", "-o", str(out)])  # fmt: skip
        assert wrong.returncode == 77, wrong.stderr
        assert f"Redis at rediss://:***@{base} refused the password" in wrong.stderr
        assert took < FAST and not out.exists()
        url = f"rediss://:{password}@{base}"
        done, _ = run(["crawl", "--redis", url, "http://127.0.0.1:9/", "--workers", "0",
                       "-o", str(out)])  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"gossamer worker --redis rediss://:***@{base}" in done.stderr
        st, _ = run(["status", "--crawl", done.stdout.strip()], env={"GOSSAMER_REDIS": url})
        assert st.returncode == 0 and "running" in st.stdout, st.stderr
        with server.client() as client:
            stored = stored_in_redis(client)
    assert_hidden(password, wrong.stderr, done.stderr, st.stdout, st.stderr, stored)
