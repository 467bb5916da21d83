"""`gossamer gather DIR --machines FILE`: every machine's worker directories (`w1/`, `w2/`, …
of the workers' -o directory there: WARCs, crawl logs, graph parts, stats) copied into DIR
over SSH, checked, indexed as one CDXJ, and reported.

Per machine: the files of its `w*/` directories are listed over SSH (`find`, with their
sizes); those DIR lacks or holds with another size are copied — by rsync when it is on this
machine (and the other), else by tar over the same SSH — and each copied file's SHA-256 is
checked against the machine's (`sha256sum` there). A second run copies only what is new or
grew. Worker ids are never reused within a crawl, so the machines' directories never
collide in DIR. A WARC file still open there (`….warc.gz.open`: its worker is writing it,
or was killed) is copied and checked by its size, then recovered here (its complete
records; `sinks.warc.recover`). Then every worker's WARC index is written
(`sinks.cdx.write_crawl_index`) and merged into `DIR/index.cdxj`, its `filename`s
relative to DIR (`w3/warc/…`), and `gossamer report DIR` is printed.

A machine that cannot be reached, or whose directory is missing, is one line; the others
are gathered. Exit: 0; 74 when a copy failed its check; 69 when no machine answered.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..crawldir import ClusterDir
from ..exitcodes import Exit
from ..report.cluster import print_directory_report
from ..sinks.cdx import write_crawl_index
from ..sinks.warc import OPEN_SUFFIX, recover
from .machines import Machine, remote_shell, ssh_argv

__all__ = ["GatherResult", "gather", "gather_main", "merge_index"]

_log = logging.getLogger(__name__)

#: seconds one SSH command of the gathering may take (a copy of many GB takes its time)
GATHER_TIMEOUT_S = 3600.0


@dataclass(frozen=True, slots=True)
class GatherResult:
    """What gathering one machine did: files listed there, copied, their bytes, `problem`
    (one line) when it could not be gathered or a copy failed its check."""

    machine: Machine
    listed: int = 0
    copied: int = 0
    bytes: int = 0
    problem: str | None = None
    bad_copy: bool = False


def _run(argv: Sequence[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        argv, input=data, capture_output=True, timeout=GATHER_TIMEOUT_S,
        stdin=None if data is not None else subprocess.DEVNULL,
    )  # fmt: skip


def _said(done: subprocess.CompletedProcess[bytes]) -> str:
    lines = [x.strip() for x in done.stderr.decode("utf-8", "replace").splitlines() if x.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def _listing(machine: Machine, ssh: str, out: str) -> dict[str, int] | str:
    """The files of the machine's worker directories, path (relative to `out`) -> size; or
    the line saying why they cannot be listed."""
    line = (
        f"cd {shlex.quote(out)} && for d in w*/; do [ -d \"$d\" ] && "
        "find \"${d%/}\" -type f ! -name '*.tmp' ! -name '*.cdxj.open' -printf '%s %p\\n'; "
        "done; true"
    )
    done = _run(ssh_argv(ssh, machine, line))
    if done.returncode == 255:
        return f"machine {machine.name}: cannot be reached over SSH: {_said(done)}"
    if done.returncode != 0:
        return f"machine {machine.name}: cannot list {out}: {_said(done)}"
    files: dict[str, int] = {}
    for row in done.stdout.decode("utf-8", "surrogateescape").splitlines():
        size, _, path = row.partition(" ")
        if path and size.isdigit():
            files[path] = int(size)
    return files


def _copy(
    machine: Machine, ssh: str, out: str, paths: Sequence[str], into: Path, via: str
) -> str | None:
    """Copy `paths` (relative to `out` there) into `into`: rsync or tar over ssh; None, or
    the line saying why not."""
    listed = "".join(p + "\n" for p in paths).encode("utf-8", "surrogateescape")
    if via == "rsync":
        src = f"{machine.destination}:{out.rstrip('/')}/"
        done = _run(
            ["rsync", "-a", "--files-from=-", "-e", remote_shell(ssh, machine), src, f"{into}/"],
            listed,
        )
        return None if done.returncode == 0 else f"machine {machine.name}: rsync: {_said(done)}"
    send = subprocess.Popen(
        ssh_argv(ssh, machine, f"cd {shlex.quote(out)} && tar -cf - -T -"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    take = subprocess.Popen(
        ["tar", "-xf", "-", "-C", str(into)], stdin=send.stdout, stderr=subprocess.PIPE
    )
    assert send.stdin is not None and send.stdout is not None
    send.stdout.close()  # tar reads it now
    send.stdin.write(listed)
    send.stdin.close()
    _, take_err = take.communicate(timeout=GATHER_TIMEOUT_S)
    send_err = send.stderr.read() if send.stderr is not None else b""
    send.wait(timeout=GATHER_TIMEOUT_S)
    if send.returncode != 0 or take.returncode != 0:
        said = (send_err or take_err).decode("utf-8", "replace").strip().splitlines()
        return f"machine {machine.name}: tar over SSH: {said[-1] if said else 'failed'}"
    return None


def _check(machine: Machine, ssh: str, out: str, paths: Sequence[str], into: Path) -> str | None:
    """Compare each copied file's SHA-256 with the machine's; None, or the line naming the
    first that differs."""
    listed = "".join(p + "\n" for p in paths).encode("utf-8", "surrogateescape")
    line = f"cd {shlex.quote(out)} && xargs -d '\\n' sha256sum"
    done = _run(ssh_argv(ssh, machine, line), listed)
    if done.returncode != 0:
        return f"machine {machine.name}: sha256sum: {_said(done)}"
    for row in done.stdout.decode("utf-8", "surrogateescape").splitlines():
        digest, _, path = row.partition("  ")
        h = hashlib.sha256()
        with (into / path).open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        if h.hexdigest() != digest:
            return f"machine {machine.name}: {path} differs from the machine's copy (SHA-256)"
    return None


def gather_machine(machine: Machine, ssh: str, out: str, into: Path, via: str) -> GatherResult:
    """Gather one machine's worker directories (`out` there) into `into`."""
    files = _listing(machine, ssh, out)
    if isinstance(files, str):
        return GatherResult(machine, problem=files)
    new = sorted(p for p, size in files.items() if _wanted(into, p, size))
    if new:
        if (problem := _copy(machine, ssh, out, new, into, via)) is not None:
            return GatherResult(machine, len(files), problem=problem, bad_copy=True)
        # a WARC file still open there may grow while it is copied: its size is checked
        growing = [p for p in new if p.endswith(OPEN_SUFFIX)]
        short = [p for p in growing if (into / p).stat().st_size < files[p]]
        if short:
            problem = f"machine {machine.name}: {short[0]} is shorter than the machine's"
            return GatherResult(machine, len(files), problem=problem, bad_copy=True)
        closed = [p for p in new if not p.endswith(OPEN_SUFFIX)]
        if closed and (problem := _check(machine, ssh, out, closed, into)) is not None:
            return GatherResult(machine, len(files), problem=problem, bad_copy=True)
    return GatherResult(machine, len(files), len(new), sum(files[p] for p in new))


def _wanted(into: Path, path: str, size: int) -> bool:
    """Whether the machine's file `path` of `size` bytes is to be copied: DIR lacks it or
    holds it with another size. A WARC file a killed worker left open (`….warc.gz.open`)
    that DIR holds recovered (`merge_index`: without `.open`) is not copied again."""
    local = into / path
    if local.is_file():
        return local.stat().st_size != size
    if path.endswith(OPEN_SUFFIX):
        return not (into / path.removesuffix(OPEN_SUFFIX)).is_file()
    return True


def merge_index(into: Path) -> tuple[Path | None, int]:
    """Write every worker directory's WARC index and merge them into `into/index.cdxj`, the
    `filename` of each line relative to `into` (`w3/warc/…`: pywb's archive directory is
    `into`); (its path, its lines), (None, 0) without a WARC."""
    lines: list[bytes] = []
    for worker in ClusterDir(into).workers():
        if worker.warc_dir.is_dir():
            recover(worker.warc_dir)  # a killed worker's open WARC: its complete records
        report = write_crawl_index(worker.warc_dir)
        if report.path is None:
            continue
        prefix = worker.warc_dir.relative_to(into).as_posix() + "/"
        with report.path.open("rb") as f:
            for raw in f:
                key, _, rest = raw.partition(b" ")
                stamp, _, fields = rest.partition(b" ")
                data = json.loads(fields)
                if "filename" in data:
                    data["filename"] = prefix + data["filename"]
                lines.append(key + b" " + stamp + b" " + json.dumps(data).encode() + b"\n")
    if not lines:
        return None, 0
    lines.sort()
    index = ClusterDir(into).merged_index
    tmp = index.with_name(index.name + ".tmp")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(index)
    return index, len(lines)


def gather(
    machines: Sequence[Machine], into: Path, *, ssh: str, out: str, via: str | None = None
) -> list[GatherResult]:
    """Gather every machine (one after the other) into `into`; `out`: the workers' -o there
    for a machine without `out=`; `via`: "rsync" or "tar" (None: rsync when installed)."""
    into.mkdir(parents=True, exist_ok=True)
    how = via or ("rsync" if shutil.which("rsync") else "tar")
    return [gather_machine(m, ssh, m.out or out, into, how) for m in machines]


def gather_main(
    machines: Sequence[Machine],
    into: Path,
    *,
    ssh: str,
    out: str,
    via: str | None = None,
    as_json: bool = False,
) -> int:
    """`gossamer gather DIR`: gather, one line a machine, the merged index, the report."""
    results = gather(machines, into, ssh=ssh, out=out, via=via)
    for r in results:
        if r.problem is not None:
            _log.error(r.problem, extra={"machine": r.machine.name})
        else:
            _log.info(
                f"machine {r.machine.name}: {r.listed} files, {r.copied} copied "
                f"({r.bytes:,} bytes), checked",
                extra={"machine": r.machine.name, "copied": r.copied, "bytes": r.bytes},
            )
    if all(r.problem is not None and not r.bad_copy for r in results):
        _log.error("no machine could be gathered")
        return Exit.UNAVAILABLE
    try:
        index, lines = merge_index(into)
    except (OSError, ValueError) as exc:
        _log.error(f"cannot write the merged index in {into}: {exc}")
        return Exit.IOERR
    if index is not None:
        _log.info(f"{index}: {lines:,} records of every worker's WARCs", extra={"path": str(index)})
    code = print_directory_report(into, as_json=as_json)
    if any(r.bad_copy for r in results):
        return Exit.IOERR
    return code
