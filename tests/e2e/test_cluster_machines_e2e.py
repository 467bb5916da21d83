"""Workers on other machines over SSH: `gossamer crawl --redis URL --machines FILE`
starts them through OpenSSH on two "machines" (an sshd of the test's on 127.0.0.2 and one on
127.0.0.3, each with its own home and output directory, key authentication only), one
machine is lost mid-crawl (its sshd and workers SIGKILLed) and the other takes its hosts
over; `gossamer gather` brings every machine's outputs into one directory and `gossamer
report` reads them. Also: an unreachable machine and one running another version are one
line each and the others go on. Real sshd, redis-server, nginx and processes."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _pywb import get, pywb_serving
from _sshd import Machines, remote_gossamer, ssh_machines
from _static_site import StaticSite, static_site
from test_cluster import wait_for

from gossamer._version import __version__
from gossamer.testweb._nginx import run_nginx

PAGES = 40  # a site's pages: /, index.html's links p1…p39 (and index.html itself)
SITES = 4


def gossamer(*args: str) -> list[str]:
    return [sys.executable, "-m", "gossamer", *args]


def _sites(tmp_path: Path) -> list[StaticSite]:
    sites = []
    for k in range(SITES):
        root = tmp_path / f"site{k}"
        root.mkdir()
        sites.append(static_site(root, PAGES))
    return sites


def _log_lines(out: Path) -> int:
    """The crawl log lines of every worker directory under `out`."""
    total = 0
    for log in out.glob("w*/crawl.log.jsonl"):
        with contextlib.suppress(OSError):
            total += log.read_bytes().count(b"\n")
    return total


def _fetches(sites: list[StaticSite]) -> Counter[tuple[int, str]]:
    """(site, path) -> GET requests with 200, robots.txt aside, from nginx's access logs."""
    seen: Counter[tuple[int, str]] = Counter()
    for k, site in enumerate(sites):
        for line in site.access_log.read_text().splitlines():
            method, target, status = line.split()
            if method == "GET" and status == "200" and target != "/robots.txt":
                seen[(k, target)] += 1
    return seen


def _crawl_args(redis_url: str, sites: list[StaticSite], machines: Machines, listing: Path,
                out: Path, *extra: str) -> list[str]:  # fmt: skip
    # (the sites are copies of one another, their index pages the same text: with
    # near-duplicate detection, the second and third index's links would not be followed)
    return gossamer(
        "crawl", "--redis", redis_url, *(s.base for s in sites), "-o", str(out),
        "--allow-private", "--machines", str(listing), "--ssh", machines.ssh,
        "--remote-command", remote_gossamer(), "-q", "--near-dup-links", "off", *extra,
    )  # fmt: skip


@pytest.mark.slow
def test_two_machines_one_lost_then_gathered(tmp_path: Path, redis_url: str) -> None:
    sites = _sites(tmp_path)
    with ssh_machines(tmp_path) as machines, contextlib.ExitStack() as stack:
        for site in sites:
            stack.enter_context(run_nginx(site.server))
        listing = machines.write_list(tmp_path / "machines.txt")
        m1, m2 = machines.machines
        out = tmp_path / "coordinator"
        args = _crawl_args(redis_url, sites, machines, listing, out, "--workers", "4",
                           "--delay", "0.2", "--heartbeat-ttl", "3")  # fmt: skip
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            try:
                wait_for(
                    "pages from both machines",
                    lambda: _log_lines(m1.out) >= 8 and _log_lines(m2.out) >= 8,
                    60,
                    show=lambda: (_log_lines(m1.out), _log_lines(m2.out), proc.poll()),
                )
                m2.kill_all()  # the machine is lost: its sshd, sessions and workers
                at_kill = sum(_fetches(sites).values())
                stdout, stderr = proc.communicate(timeout=180)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        err = stderr.decode()
        assert proc.returncode == 0, err
        crawl_id = stdout.decode().strip()
        assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", crawl_id), stdout
        assert at_kill < SITES * PAGES - 20, "the crawl was nearly over at the kill"
        lost = f"machine {m2.host}:{m2.port}"
        assert err.count(f"{lost}: the worker over SSH (ssh pid ") == 2, err
        assert "was lost (its SSH session ended with 255" in err, err
        assert f"crawl {crawl_id} finished; the worker over SSH on {m2.host}:{m2.port}" in err
        assert "their hosts were taken over by the other workers" in err, err
        assert "cores" not in err, err  # no warning about this machine's cores
        # every page fetched; none more than twice, and those twice only the lost
        # machine's in-flight batches (two workers, ≤ 20 URLs a lease each)
        fetched = _fetches(sites)
        wanted = {(k, "/") for k in range(SITES)} | {
            (k, f"/p{n}.html") for k in range(SITES) for n in range(1, PAGES)
        } | {(k, "/index.html") for k in range(SITES)}  # fmt: skip
        assert wanted <= set(fetched), sorted(wanted - set(fetched))
        assert max(fetched.values()) <= 2, fetched.most_common(3)
        assert sum(1 for c in fetched.values() if c == 2) <= 2 * 20

        # the lost machine comes back: gather both machines' outputs, twice
        m2.start()
        gathered = tmp_path / "gathered"
        done = subprocess.run(
            gossamer("gather", str(gathered), "--machines", str(listing), "--ssh", machines.ssh,
                     "--json"),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"machine {m1.host}:{m1.port}: " in done.stderr, done.stderr
        assert f"{lost}: " in done.stderr and "checked" in done.stderr, done.stderr
        report = json.loads(done.stdout)
        (crawl,) = report["crawls"]
        assert crawl["crawl"] == crawl_id
        assert len(crawl["workers"]) == 4
        assert crawl["totals"]["pages"] == len(wanted), crawl["totals"]
        index = (gathered / "index.cdxj").read_text().splitlines()
        urls = {json.loads(line.split(" ", 2)[2])["url"] for line in index}
        pages = {f"{sites[k].base.rstrip('/')}{path}" for k, path in wanted}
        assert pages <= urls, sorted(pages - urls)[:5]
        captures: dict[str, str] = {}  # page URL -> a timestamp of a 200 capture
        for line in index:
            _, stamp, fields = line.split(" ", 2)
            record = json.loads(fields)
            assert (gathered / record["filename"]).is_file(), record
            if record.get("status") == "200":
                captures.setdefault(record["url"], stamp)
        # pywb, given the merged index and the gathered directory, replays every page
        with pywb_serving(tmp_path / "pywb", [gathered / "index.cdxj"], [gathered]) as base:
            for k, path in sorted(wanted):
                url = f"{sites[k].base.rstrip('/')}{path}"
                status, _, body = get(f"{base}{captures[url]}id_/{url}")
                name = "index.html" if path == "/" else path.lstrip("/")
                assert (status, body) == (200, (tmp_path / f"site{k}" / "www" / name).read_bytes())
        # a second run copies nothing
        again = subprocess.run(
            gossamer("gather", str(gathered), "--machines", str(listing), "--ssh", machines.ssh,
                     "--via", "tar"),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert again.stderr.count(" 0 copied (0 bytes), checked") == 2, again.stderr
        # and `gossamer report DIR` reads the gathered directory
        shown = subprocess.run(
            gossamer("report", str(gathered), "--json"), capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["crawls"][0]["totals"]["pages"] == len(wanted)


def test_an_unreachable_machine_is_one_line_and_the_others_go_on(
    tmp_path: Path, redis_url: str
) -> None:
    sites = _sites(tmp_path)[:1]
    with ssh_machines(tmp_path, hosts=("127.0.0.2",)) as machines, run_nginx(sites[0].server):
        with contextlib.closing(__import__("socket").socket()) as s:
            s.bind(("127.0.0.4", 0))
            dead_port = s.getsockname()[1]  # bound, not listening: connection refused
            listing = machines.write_list(tmp_path / "machines.txt", f"127.0.0.4:{dead_port}")
            done = subprocess.run(
                _crawl_args(redis_url, sites, machines, listing, tmp_path / "c", "--workers",
                            "2", "--delay", "0"),
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            # gathering: the unreachable machine is one line too, the other is gathered
            gathered = subprocess.run(
                gossamer("gather", str(tmp_path / "g"), "--machines", str(listing), "--ssh",
                         machines.ssh, "--json"),
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        assert gathered.returncode == 0, gathered.stderr
        (line,) = [x for x in gathered.stderr.splitlines() if "127.0.0.4" in x]
        assert line.startswith(f"gossamer: error: machine 127.0.0.4:{dead_port}: cannot be "
                               "reached over SSH: "), line  # fmt: skip
        m = machines.machines[0]
        assert f"machine {m.host}:{m.port}: " in gathered.stderr
        (crawl,) = json.loads(gathered.stdout)["crawls"]
        assert crawl["totals"]["pages"] == PAGES + 1  # /, index.html, p1…p39
        assert done.returncode == 0, done.stderr
        said = [line for line in done.stderr.splitlines() if "127.0.0.4" in line]
        assert len(said) == 1, done.stderr
        assert said[0].startswith(f"gossamer: error: machine 127.0.0.4:{dead_port}: cannot be "
                                  "reached over SSH: "), said  # fmt: skip
        assert "Connection refused" in said[0], said
        assert set(_fetches(sites)) >= {(0, f"/p{n}.html") for n in range(1, PAGES)}


def test_another_version_is_refused_in_one_line(tmp_path: Path, redis_url: str) -> None:
    fake = tmp_path / "old-gossamer"
    fake.write_text("#!/bin/sh\necho 'gossamer 0.0.1'\n")
    fake.chmod(0o755)
    with ssh_machines(tmp_path, hosts=("127.0.0.2",)) as machines:
        listing = machines.write_list(tmp_path / "machines.txt")
        done = subprocess.run(
            gossamer("crawl", "--redis", redis_url, "http://127.0.0.1:9/", "-o",
                     str(tmp_path / "c"), "--machines", str(listing), "--ssh", machines.ssh,
                     "--remote-command", str(fake)),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    m = machines.machines[0]
    assert done.returncode == 69, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == (
        f"gossamer: error: machine {m.host}:{m.port} runs gossamer 0.0.1, this is gossamer "
        f"{__version__}: refused (install the same version on both)"
    ), done.stderr
    assert "the crawl is not created" in lines[-1]
    assert done.stdout == ""


def _cmdlines() -> list[bytes]:
    """Every process's command line on this machine (the "machines" are this machine)."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                lines.append((entry / "cmdline").read_bytes())
    return lines


@pytest.mark.slow
def test_a_stop_reaches_the_remote_workers_and_no_password_is_on_a_command_line(
    tmp_path: Path, redis_password_url: str
) -> None:
    """A Redis with a password; two machines × 1 worker. While they crawl, no command line
    on the machine (ssh's, sshd's sessions', the remote workers') holds the password. Then
    SIGINT to the command: it sends each remote worker its stop line over SSH, each ends
    as on SIGTERM (its stats.json: `SIGTERM`) and the command exits 130 with nothing left
    running under either sshd."""
    import os
    import signal

    from _sshd import descendants

    from gossamer.urls import url_password, without_password

    password = url_password(redis_password_url)
    assert password is not None and len(password) >= 8
    secrets = (password.encode(), redis_password_url.split(":")[2].split("@")[0].encode())
    # the command gets it as a user should give it: in REDISCLI_AUTH, not on its command line
    env = {**os.environ, "REDISCLI_AUTH": password}
    sites = _sites(tmp_path)
    with ssh_machines(tmp_path) as machines, contextlib.ExitStack() as stack:
        for site in sites:
            stack.enter_context(run_nginx(site.server))
        listing = machines.write_list(tmp_path / "machines.txt")
        args = _crawl_args(without_password(redis_password_url), sites, machines, listing,
                           tmp_path / "c", "--workers", "2", "--delay", "0.3")  # fmt: skip
        with subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        ) as proc:
            try:
                wait_for(
                    "pages from both machines",
                    lambda: all(_log_lines(m.out) >= 3 for m in machines.machines),
                    60,
                    show=lambda: [_log_lines(m.out) for m in machines.machines],
                )
                shown = [c for c in _cmdlines() if any(s in c for s in secrets)]
                proc.send_signal(signal.SIGINT)
                _, stderr = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert shown == [], shown
        assert proc.returncode == 130, stderr.decode()
        for m in machines.machines:
            assert m.proc is not None
            wait_for(f"no session left on {m.host}", lambda m=m: not descendants(m.proc.pid), 20)
            (stats,) = m.out.glob("w*/stats.json")
            assert json.loads(stats.read_text())["ended"] == "SIGTERM"
        assert not any(s in stderr for s in secrets)


@pytest.mark.slow
def test_workers_scale_across_machines(tmp_path: Path, redis_url: str) -> None:
    """`crawl --machines FILE --workers 2` (one a machine), then `workers --scale 4
    --machines FILE`: two detached workers started over SSH, one on each machine (their
    outputs under each machine's own directory); `--scale 2` without --machines (the
    crawl's own machine list, kept with it): the newest worker of each machine asked to
    leave; `gossamer stop` ends them all and the command. (`--delay 1`: each site's 40
    pages take 40 s at least, so the crawl outlasts the scaling on a loaded machine.)"""
    import os
    import signal

    from test_cluster import status

    sites = _sites(tmp_path)
    with ssh_machines(tmp_path) as machines, contextlib.ExitStack() as stack:
        for site in sites:
            stack.enter_context(run_nginx(site.server))
        listing = machines.write_list(tmp_path / "machines.txt")
        m1, m2 = machines.machines
        args = _crawl_args(redis_url, sites, machines, listing, tmp_path / "c", "--workers",
                           "2", "--delay", "1")  # fmt: skip
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        crawl_id = ""
        try:
            assert proc.stdout is not None
            crawl_id = proc.stdout.readline().decode().strip()

            def live() -> dict[str, list[str]]:
                """Each machine's live workers (ids), by their output directories."""
                found: dict[str, list[str]] = {"m1": [], "m2": []}
                for w in status(redis_url, crawl_id)["workers"]:
                    if w["state"] in ("dead", "stopped", "stopping"):
                        continue
                    where = "m1" if w["out"].startswith(str(m1.out)) else "m2"
                    found[where].append(w["id"])
                return found

            wait_for("one worker a machine", lambda: list(map(len, live().values())) == [1, 1],
                     60, show=live)  # fmt: skip

            def scale(n: int, *listed: str) -> str:
                done = subprocess.run(
                    gossamer("workers", "--scale", str(n), "--redis", redis_url, "--crawl",
                             crawl_id, *listed, "--ssh", machines.ssh,
                             "--remote-command", remote_gossamer()),
                    capture_output=True, text=True, timeout=60,
                )  # fmt: skip
                assert done.returncode == 0, done.stderr
                return done.stderr

            said = scale(4, "--machines", str(listing))
            assert f"machine {m1.host}:{m1.port}: 1 -> 2 workers; started 1" in said, said
            assert f"machine {m2.host}:{m2.port}: 1 -> 2 workers; started 1" in said, said
            wait_for("two workers a machine", lambda: list(map(len, live().values())) == [2, 2],
                     60, show=live)  # fmt: skip
            before = live()
            said = scale(2)
            assert said.count("2 -> 1 workers; asked w") == 2, said
            wait_for("one worker a machine again",
                     lambda: list(map(len, live().values())) == [1, 1], 60, show=live)  # fmt: skip
            after = live()
            newest = {k: max(v, key=lambda i: int(i[1:])) for k, v in before.items()}
            assert all(newest[k] not in after[k] for k in after), (before, after)
            stopped = subprocess.run(
                gossamer("stop", "--redis", redis_url, "--crawl", crawl_id, "--wait", "60"),
                capture_output=True, text=True, timeout=90,
            )  # fmt: skip
            assert stopped.returncode == 0, stopped.stderr
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if crawl_id:  # the detached workers are no one's children: ended by their pids
                for w in status(redis_url, crawl_id)["workers"]:
                    if w["state"] not in ("dead", "stopped"):
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(w["pid"], signal.SIGKILL)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        logs = sorted(p.name for m in machines.machines for p in (m.out / "logs").glob("*.log"))
        assert len(logs) == 2 and all(n.startswith("worker-remote-") for n in logs), logs


def test_a_stopped_crawl_resumed_on_the_machines(tmp_path: Path, redis_url: str) -> None:
    """`crawl --redis … --workers 0` creates the crawl, `stop` stops it, and `crawl --resume
    --redis … --crawl ID --machines FILE --workers 2` finishes it on the two machines."""
    sites = _sites(tmp_path)[:2]
    with ssh_machines(tmp_path) as machines, contextlib.ExitStack() as stack:
        for site in sites:
            stack.enter_context(run_nginx(site.server))
        listing = machines.write_list(tmp_path / "machines.txt")
        created = subprocess.run(
            gossamer("crawl", "--redis", redis_url, *(s.base for s in sites), "--allow-private",
                     "--delay", "0", "--workers", "0", "-q", "--near-dup-links", "off"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        crawl_id = created.stdout.strip()
        stopped = subprocess.run(
            gossamer("stop", "--redis", redis_url, "--crawl", crawl_id, "--wait", "10"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert stopped.returncode == 0, stopped.stderr
        resumed = subprocess.run(
            gossamer("crawl", "--resume", "--redis", redis_url, "--crawl", crawl_id,
                     "--machines", str(listing), "--ssh", machines.ssh, "--remote-command",
                     remote_gossamer(), "--workers", "2", "-o", str(tmp_path / "c"), "-q"),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip() == crawl_id
        # the workers on the machines joined this crawl (one may find it already finished
        # by the other and leave before it writes its record: a small site)
        records = [r for m in machines.machines for r in m.out.glob("w*/worker.json")]
        assert records and all(json.loads(r.read_text())["crawl"] == crawl_id for r in records)
        fetched = _fetches(sites)
        assert {(k, f"/p{n}.html") for k in range(2) for n in range(1, PAGES)} <= set(fetched)
