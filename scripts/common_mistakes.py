"""docs/cli.md's "Common mistakes", from real runs: a new user's mistakes against a static site
served by nginx on a free loopback port, each run through the real `gossamer` command in a
fresh directory, its stderr, exit status and what it left recorded in docs/cli-mistakes.json,
then docs/cli.md regenerated (`python -m gossamer._clidoc`, which renders that file).

    .venv/bin/python scripts/common_mistakes.py      # needs nginx (scripts/setup.sh)

Run it again when a message changes: tests/e2e/test_cli_mistakes.py replays the rows that need
no server and fails when one says something else than the table. In the table the site's port
is PORT, a port where nothing listens OTHER_PORT, the moment a crawl ended DATE."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gossamer._clidoc import MISTAKES_FILE, render  # noqa: E402
from gossamer.testweb._nginx import find_nginx  # noqa: E402

PAGES = 4  # the static site: index.html and p1.html … p3.html, linked both ways


@dataclass(frozen=True)
class Mistake:
    """One mistake: what the user meant, the command line after `gossamer` (PORT and
    OTHER_PORT stand for the ports), environment variables, files made first, and the command
    that fixes it (run after it, in the same directory), if the directory is to be reused."""

    what: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    fix: list[str] | None = None
    one_core: bool = False  # the command runs on one core (its CPU affinity)
    offline: bool = True  # needs no server: tests replay it


def someones_files(cwd: Path) -> None:
    """A directory of someone's files, photos/ (tests/e2e/test_cli_mistakes.py makes it too,
    to replay the rows that name it)."""
    (cwd / "photos").mkdir()
    (cwd / "photos" / "holiday.jpg").write_bytes(b"\xff\xd8 not really a photo")


SITE = "http://127.0.0.1:PORT/"
MISTAKES = [
    Mistake("a scope that does not exist", ["crawl", SITE, "-o", "site", "--scope", "hosts"]),
    Mistake("a delay with a unit", ["crawl", SITE, "-o", "site", "--delay", "1s"]),
    Mistake("a limit in words", ["crawl", SITE, "-o", "site", "--max-pages", "ten"]),
    Mistake("a misspelt flag", ["crawl", SITE, "-o", "site", "--max-pags", "3"]),
    Mistake("an abbreviated flag", ["crawl", SITE, "-o", "site", "--max-page", "3"]),
    Mistake("a misspelt -s key", ["crawl", SITE, "-o", "site", "-s", "max_pagez=3"]),
    Mistake("a limit below its least value", ["crawl", SITE, "-o", "site", "--max-pages", "0"]),
    Mistake("a seed without http://", ["crawl", "127.0.0.1:PORT", "-o", "site"]),
    Mistake("a bad GOSSAMER_* variable", ["crawl", SITE, "-o", "site"], {"GOSSAMER_DELAY": "abc"}),
    Mistake("no seed", ["crawl", "-o", "site"]),
    Mistake("a misspelt command", ["crwal", SITE, "-o", "site"]),
    Mistake("more workers than allowed", ["crawl", SITE, "-o", "site", "--workers", "100"]),
    Mistake("no worker for an embedded crawl", ["crawl", SITE, "-o", "site", "--workers", "0"]),
    Mistake(
        "more workers than cores (here: one)",
        ["crawl", SITE, "-o", "site", "--allow-private", "--workers", "2"],
        one_core=True,
        offline=False,
    ),
    Mistake(
        "a loopback site without --allow-private",
        ["crawl", SITE, "-o", "site"],
        fix=["crawl", "--resume", "site", "--allow-private"],
        offline=False,
    ),
    Mistake(
        "a wrong port",
        ["crawl", "http://127.0.0.1:OTHER_PORT/", "-o", "site", "--allow-private"],
        fix=["crawl", SITE, "-o", "site", "--allow-private"],
        offline=False,
    ),
    Mistake(
        "-o naming a directory of someone's files",
        ["crawl", SITE, "-o", "photos", "--allow-private"],
        setup=someones_files,
        offline=False,
    ),
    Mistake(
        "--resume of a directory that is not a crawl",
        ["crawl", "--resume", "photos"],
        setup=someones_files,
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def static_site(root: Path) -> Iterator[int]:
    """PAGES static pages served by nginx on 127.0.0.1 at a free port (yielded)."""
    www = root / "www"
    www.mkdir(parents=True)
    names = [f"p{k}.html" for k in range(1, PAGES)]
    links = "".join(f'<a href="{n}">{n}</a> ' for n in names)
    (www / "index.html").write_text(f"<html><body>{links}</body></html>\n")
    for n in names:
        (www / n).write_text(f'<html><body><a href="index.html">home</a> {n}</body></html>\n')
    (root / "logs").mkdir()
    port = free_port()
    user = "user root;\n" if os.geteuid() == 0 else ""
    (root / "nginx.conf").write_text(
        f"{user}worker_processes 1;\npid {root}/nginx.pid;\nerror_log {root}/logs/error.log;\n"
        "events { worker_connections 64; }\nhttp {\n    types { text/html html; }\n"
        f"    access_log {root}/logs/access.log;\n"
        + "".join(f"    {kind}_temp_path {root}/{kind};\n"
                  for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        + f"    server {{ listen 127.0.0.1:{port}; root {www}; }}\n}}\n"
    )  # fmt: skip
    proc = subprocess.Popen(
        [find_nginx(), "-p", str(root), "-c", str(root / "nginx.conf"), "-e",
         str(root / "logs" / "error.log"), "-g", "daemon off;"],
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not serve on port {port}") from None
                time.sleep(0.05)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGQUIT)
        proc.wait(timeout=15)


def run(
    args: list[str], cwd: Path, env: dict[str, str], one_core: bool = False
) -> subprocess.CompletedProcess[str]:
    """`gossamer ARGS` in `cwd`, without the caller's GOSSAMER_* variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GOSSAMER_")}
    clean["PYTHONPATH"] = str(ROOT / "src")

    def pin() -> None:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=pin if one_core else None,
    )


def said(stderr: str) -> tuple[list[str], bool]:
    """What the command said on stderr, without a crawl's end summary (`gossamer: crawl
    complete …`, `gossamer: crawl ended …` and the indented lines under it); and whether
    there was one."""
    lines, summary = [], False
    given = stderr.splitlines()
    for k, line in enumerate(given):
        head = line.startswith("gossamer: crawl ") and given[k + 1 : k + 2] != []
        if line.startswith("  ") or (head and given[k + 1].startswith("  ")):
            summary = True
            continue
        lines.append(line)
    return lines, summary


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def record(mistake: Mistake, port: int, other_port: int) -> dict[str, object]:
    """Run one mistake (and its fix) in a fresh directory: the row of the table."""

    def real(args: list[str]) -> list[str]:
        return [
            a.replace("OTHER_PORT", str(other_port)).replace("PORT", str(port)) for a in args
        ]

    def shown(text: str, cwd: Path) -> str:
        text = text.replace(f"{cwd}/", "").replace(str(cwd), ".")
        text = text.replace(f":{other_port}", ":OTHER_PORT").replace(f":{port}", ":PORT")
        return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "DATE", text)

    with tempfile.TemporaryDirectory(prefix="gossamer-mistake-") as tmp:
        cwd = Path(tmp)
        if mistake.setup is not None:
            mistake.setup(cwd)
        before = snapshot(cwd)
        done = run(real(mistake.args), cwd, mistake.env, mistake.one_core)
        lines, summary = said(shown(done.stderr, cwd))
        out = mistake.args[mistake.args.index("-o") + 1] if "-o" in mistake.args else None
        if snapshot(cwd) == before:
            after = "nothing written" if before == {} else "its files unchanged"
        elif out is not None and (cwd / out / "crawl.json").is_file():
            after = f"a crawl directory {out}/"
        else:
            after = "files written"
        row: dict[str, object] = {
            "what": mistake.what,
            "args": mistake.args,
            "env": mistake.env,
            "stderr": lines,
            "summary": summary,
            "exit": done.returncode,
            "after": after,
            "offline": mistake.offline,
        }
        if mistake.setup is not None:
            row["setup"] = mistake.setup.__name__
        if mistake.one_core:
            row["one_core"] = True
        if mistake.fix is not None:
            fixed = run(real(mistake.fix), cwd, {})
            row["fix"] = {
                "args": mistake.fix,
                "stderr": said(shown(fixed.stderr, cwd))[0],
                "exit": fixed.returncode,
            }
        return row


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gossamer-site-") as tmp, static_site(
        Path(tmp)
    ) as port:
        other_port = free_port()  # closed at once: nothing listens there
        rows = []
        for mistake in MISTAKES:
            row = record(mistake, port, other_port)
            print(f"{row['exit']:>3}  {mistake.what}: {' | '.join(row['stderr'])}")  # type: ignore[arg-type]
            rows.append(row)
    MISTAKES_FILE.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    (ROOT / "docs" / "cli.md").write_text(render())
    print(f"wrote {MISTAKES_FILE.relative_to(ROOT)} and docs/cli.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
