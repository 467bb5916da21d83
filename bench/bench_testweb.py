"""How fast the simulated web serves pages: gossamer's own server and nginx on an export.

    .venv/bin/python bench/bench_testweb.py                 # everything, about 2 minutes
    .venv/bin/python bench/bench_testweb.py --only render,export
    .venv/bin/python bench/bench_testweb.py --duration 20 --connections 128

Load: wrk over loopback with bench/wrk_rotate.lua, which rotates through every page of a
clean web (>= 20k distinct (Host, path) pairs, shuffled), so every request really generates a
page (the model's plan cache holds 8192 pages) and nginx really opens a different file each
time. Prints requests/s, MB/s, latency, and the CPU seconds the server itself used, so that
"server alone" capacity (pages per server CPU-second) can be read apart from wrk's share of
the two cores. Also: µs/page of plan and render_page, and the export's pages/s.
Figures are printed, never asserted; bench/README.md records them.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gossamer.testweb import WebModel, WebSpec, model_for
from gossamer.testweb._content import render_page, respond
from gossamer.testweb._export import export_web, write_nginx_config
from gossamer.testweb._model import Kind, Resource
from gossamer.testweb._nginx import find_nginx, run_nginx

HERE = Path(__file__).resolve().parent
LUA = HERE / "wrk_rotate.lua"


# ---------------------------------------------------------------------------- machine


def machine() -> dict[str, str]:
    """nproc, CPU model, RAM, OS, Python, nginx and wrk versions."""
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = "unknown"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        ram = f"{kb / 1024 / 1024:.1f} GiB"
    osname = platform.platform()
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                osname = line.split("=", 1)[1].strip('"') + f" (kernel {platform.release()})"
    nginx = subprocess.run([find_nginx(), "-v"], capture_output=True, text=True).stderr.strip()
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "ram": ram,
        "os": osname,
        "python": platform.python_version(),
        "nginx": nginx.removeprefix("nginx version: "),
        "wrk": wrk.split(" [")[0],
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


# ---------------------------------------------------------------------------- load


@dataclass(frozen=True, slots=True)
class Run:
    target: str
    config: str
    requests: int
    seconds: float
    bytes: int
    errors: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    server_cpu_s: float | None  # CPU seconds used by the server's processes during the run

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def mbps(self) -> float:
        return self.bytes / self.seconds / 1e6

    @property
    def per_cpu_s(self) -> float | None:
        """Pages per CPU-second of the server: what it does when it has the machine alone."""
        if not self.server_cpu_s:
            return None
        return self.requests / self.server_cpu_s


def write_targets(model: WebModel, path: Path, seed: int = 1) -> int:
    """Every page of the web as `host<TAB>target` lines, shuffled; returns the count."""
    pairs = [
        f"{h.name}\t{model.page_target(h.id, i)}\n" for h in model.hosts for i in range(h.pages)
    ]
    random.Random(seed).shuffle(pairs)
    path.write_text("".join(pairs))
    return len(pairs)


def _children_cpu_seconds() -> float | None:
    """utime+stime of every live descendant of this process (from /proc), in seconds.

    Read just before and just after wrk runs (wrk itself is not alive then), the difference
    is the CPU the server under test (nginx, or gossamer's server processes) used."""
    me = os.getpid()
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    try:
        entries = [d for d in Path("/proc").iterdir() if d.name.isdigit()]
    except OSError:
        return None
    for d in entries:
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (d / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            parent[int(d.name)] = int(fields[1])
            ticks[int(d.name)] = int(fields[11]) + int(fields[12])
    family = {me}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in family and pid not in family:
                family.add(pid)
                grew = True
    family.discard(me)
    return sum(ticks.get(p, 0) for p in family) / os.sysconf("SC_CLK_TCK")


def run_wrk(
    port: int,
    targets: Path,
    *,
    duration: float,
    connections: int,
    threads: int,
    target: str,
    config: str,
) -> Run:
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration:g}s",
        "--timeout",
        "10s",
        "--latency",
        "-s",
        str(LUA),
        f"http://127.0.0.1:{port}/",
        "--",
        str(targets),
    ]
    cpu0 = _children_cpu_seconds()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    cpu1 = _children_cpu_seconds()
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr.strip()}")
    v = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^GOSSAMER (\w+) ([\d.]+)$", proc.stdout, re.M)
    }
    errors = sum(int(v[k]) for k in v if k.startswith("errors_"))
    return Run(
        target=target,
        config=config,
        requests=int(v["requests"]),
        seconds=v["duration_us"] / 1e6,
        bytes=int(v["bytes"]),
        errors=errors,
        p50_ms=v["latency_p50_us"] / 1000,
        p99_ms=v["latency_p99_us"] / 1000,
        mean_ms=v["latency_mean_us"] / 1000,
        server_cpu_s=(cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------- parts


def bench_render(model: WebModel, pages: int) -> None:
    """µs/page of the model's plan, render_page, and the whole respond()."""
    pairs = [(h.id, i) for h in model.hosts for i in range(h.pages)][:pages]
    t0 = time.perf_counter()
    plans = [model._plan(h, i) for h, i in pairs]
    t1 = time.perf_counter()
    size = sum(len(render_page(model, p)) for p in plans)
    t2 = time.perf_counter()
    model.plan.cache_clear()
    for h, i in pairs:
        respond(model, Resource(Kind.PAGE, h, i))
    t3 = time.perf_counter()
    n = len(pairs)
    print(f"\n## plan + render (one Python process, {n} distinct pages)")
    print(f"  plan         {(t1 - t0) / n * 1e6:7.1f} µs/page")
    print(f"  render_page  {(t2 - t1) / n * 1e6:7.1f} µs/page   (mean {size / n / 1000:.1f} KB)")
    print(
        f"  respond      {(t3 - t2) / n * 1e6:7.1f} µs/page   "
        f"= {n / (t3 - t2):,.0f} pages/s per core, before any HTTP"
    )


def bench_export(model: WebModel, out: Path, port: int) -> None:
    s = export_web(model, out, port=port)
    print(f"\n## export ({os.cpu_count()} processes)")
    print(
        f"  {s.pages} pages, {s.files} files, {s.bytes / 1e6:.0f} MB in {s.seconds:.2f}s "
        f"= {s.pages_per_s:,.0f} pages/s"
    )


def bench_nginx(
    model: WebModel, out: Path, port: int, targets: Path, args: argparse.Namespace
) -> list[Run]:
    runs = []
    for log in (True, False):
        write_nginx_config(model, out, port=port, workers=args.nginx_workers, access_log=log)
        with run_nginx(out) as ng:
            config = f"{args.nginx_workers} workers, access log {'on' if log else 'off'}"
            runs.append(load(ng.port, targets, args, "nginx (export)", config))
    return runs


def load(port: int, targets: Path, args: argparse.Namespace, target: str, config: str) -> Run:
    """wrk against `port`, `args.repeat` times; the best run (others disturb a shared host)."""
    best: Run | None = None
    for _ in range(args.repeat):
        run = run_wrk(
            port,
            targets,
            duration=args.duration,
            connections=args.connections,
            threads=args.threads,
            target=target,
            config=config,
        )
        _print_run(run)
        if best is None or run.rps > best.rps:
            best = run
    assert best is not None
    return best


def _serve_subprocess() -> Callable[..., Any] | None:
    try:
        from gossamer.testweb import _api
    except ImportError:
        return None
    fn: Callable[..., Any] | None = getattr(_api, "serve_subprocess", None)
    return fn


def bench_server(spec: WebSpec, tmp: Path, targets: Path, args: argparse.Namespace) -> list[Run]:
    serve = _serve_subprocess()
    if serve is None:
        print("\n## gossamer server: gossamer.testweb._api.serve_subprocess not found; skipped")
        return []
    params = inspect.signature(serve).parameters
    process_counts = args.processes if "processes" in params else [1]
    runs = []
    for processes in process_counts:
        for log in (True, False):
            kwargs: dict[str, Any] = {"port": 0}
            if "processes" in params:
                kwargs["processes"] = processes
            log_path = tmp / f"audit-{processes}.log"
            if log:
                kwargs["log_path"] = log_path
            elif "log_path" in params and params["log_path"].default is inspect.Parameter.empty:
                continue  # the audit log cannot be turned off
            config = (
                f"{processes} process{'es' if processes > 1 else ''}, "
                f"audit log {'on' if log else 'off'}"
            )
            with serve(spec, **kwargs) as server:
                runs.append(load(server.port, targets, args, "gossamer server", config))
            with contextlib.suppress(OSError):
                log_path.unlink()
    return runs


# ---------------------------------------------------------------------------- output


def _print_run(r: Run) -> None:
    cpu = f", server CPU {r.server_cpu_s:.1f}s" if r.server_cpu_s is not None else ""
    print(
        f"  {r.target}, {r.config}: {r.rps:,.0f} req/s, {r.mbps:,.0f} MB/s, "
        f"p50 {r.p50_ms:.2f} ms, p99 {r.p99_ms:.2f} ms, errors {r.errors}{cpu}",
        flush=True,
    )


def print_table(runs: list[Run]) -> None:
    print("\n## summary (markdown)\n")
    print(
        "| server | configuration | pages/s | MB/s | p50 ms | p99 ms | errors "
        "| pages per server CPU-s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        per_cpu = f"{r.per_cpu_s:,.0f}" if r.per_cpu_s else "n/a"
        print(
            f"| {r.target} | {r.config} | {r.rps:,.0f} | {r.mbps:,.0f} | {r.p50_ms:.2f} "
            f"| {r.p99_ms:.2f} | {r.errors} | {per_cpu} |"
        )


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    # tmpfs when there is room: creating files on this machine's disk costs ~0.45 ms each
    shm = Path("/dev/shm")
    base = None
    with contextlib.suppress(OSError):
        if shm.is_dir() and shutil.disk_usage(shm).free > 4 * 1024**3:
            base = str(shm)
    d = Path(tempfile.mkdtemp(prefix="gossamer-bench-", dir=base))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--hosts", type=int, default=400, help="hosts of the clean web (400: ~21k pages)"
    )
    p.add_argument("--pages-mean", type=float, default=50.0)
    p.add_argument("--duration", type=float, default=10.0, help="seconds per load run")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument("--repeat", type=int, default=1, help="load runs per setting; best is kept")
    p.add_argument("--nginx-workers", default="2")
    p.add_argument("--processes", default="1,2", help="gossamer server process counts")
    p.add_argument("--only", default="render,export,nginx,server")
    p.add_argument("--render-pages", type=int, default=5000)
    p.add_argument("--workdir", type=Path, help="keep the export here (default: a temp dir)")
    args = p.parse_args(argv)
    args.processes = [int(x) for x in args.processes.split(",")]
    parts = set(args.only.split(","))
    if shutil.which("wrk") is None and parts & {"nginx", "server"}:
        print("wrk not found: install it (scripts/setup.sh)", file=sys.stderr)
        return 2

    spec = WebSpec(seed=args.seed, hosts=args.hosts, pages_mean=args.pages_mean)
    model = model_for(spec)
    print("# gossamer testweb benchmark")
    for k, v in machine().items():
        print(f"  {k:7s} {v}")
    print(
        f"  web     seed {spec.seed}, {len(model.hosts)} hosts, {model.total_pages} pages, "
        f"clean profile; wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s, "
        f"best of {args.repeat}"
    )
    if os.getloadavg()[0] > 0.5:
        print("  warning: the machine is busy (load above 0.5): figures will be low")

    runs: list[Run] = []
    with _workdir(args.workdir) as work:
        print(f"  workdir {work}")
        targets = work / "targets.txt"
        n = write_targets(model, targets, seed=args.seed)
        print(f"  targets {n} distinct (Host, path) pairs, shuffled")
        if "render" in parts:
            bench_render(model, args.render_pages)
        export_dir = work / "export"
        port = free_port()
        if "export" in parts or "nginx" in parts:
            bench_export(model, export_dir, port)
        if "server" in parts:
            print("\n## gossamer server (gossamer testweb serve)")
            runs += bench_server(spec, work, targets, args)
        if "nginx" in parts:
            print("\n## nginx serving the export")
            runs += bench_nginx(model, export_dir, port, targets, args)
    if runs:
        print_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
