"""`gossamer testweb serve` and `gossamer testweb info`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

from ._api import RunningWeb
from ._model import HostFlag, WebModel, flag_names, model_for
from ._server import EpochSource, WebServer, bind_sockets, new_event_loop
from ._spec import WebSpec
from ._specargs import add_spec_arguments, spec_from_args

DEFAULT_PORT = 8080
CHILD_READY_TIMEOUT_S = 60.0
CHILD_STOP_TIMEOUT_S = 10.0


def register(sub: Any) -> None:
    """Add `serve` and `info` to the `gossamer testweb` subparsers `sub`."""
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="serve a simulated web on loopback",
        description=(
            "Serve a deterministic simulated web on one loopback port. Every host has an "
            "intended IP (127.1.x.y); the server listens on all of them plus the control "
            "address, and the Host header selects the site. Page URLs carry no port: map "
            "HOST:80 to IP:PORT (see --resolve-out, curl --connect-to)."
        ),
    )
    add_spec_arguments(p)
    g = p.add_argument_group("server")
    g.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: any free one)")
    g.add_argument(
        "--bind-ip", default="127.0.0.1", help="address of the index and control endpoints"
    )
    g.add_argument("--log", type=Path, help="audit log file (one line per request)")
    g.add_argument("--spec-out", type=Path, help="write the web spec JSON here")
    g.add_argument("--resolve-out", type=Path, help="write HOST:80:IP:PORT lines here")
    g.add_argument("--hosts-out", type=Path, help="write /etc/hosts-style lines here")
    g.add_argument("--ready-file", type=Path, help="write {port, pid} JSON here once listening")
    g.add_argument("--epoch", type=int, default=0, help="content epoch of changing pages")
    g.add_argument(
        "--change-period",
        type=float,
        default=0.0,
        metavar="S",
        help="advance the epoch every S seconds (0: fixed)",
    )
    g.add_argument(
        "--processes",
        type=int,
        default=1,
        help="server processes sharing the port (SO_REUSEPORT); logs go to LOG.<k>",
    )
    g.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    g.add_argument("--quiet", action="store_true", help="no banner")
    p.set_defaults(func=run_serve)

    info = sub.add_parser(
        "info",
        help="describe a simulated web (hosts, pages, IPs, flags)",
        description="Describe the web a spec generates, without serving it.",
    )
    add_spec_arguments(info)
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=run_info)


# ---------------------------------------------------------------- info
def describe(model: WebModel) -> dict[str, Any]:
    """Hosts, pages, site-size quantiles, IPs and host-flag counts of a web."""
    sizes = sorted(h.pages for h in model.hosts)
    n = len(sizes)

    def q(p: float) -> int:
        return sizes[min(n - 1, int(p * n))]

    per_ip: dict[str, int] = {}
    for h in model.hosts:
        per_ip[h.ip] = per_ip.get(h.ip, 0) + 1
    flags: dict[str, int] = {}
    for name in flag_names(HostFlag, -1):
        bit = getattr(HostFlag, name)
        flags[name] = sum(1 for h in model.hosts if h.flags & bit)
    return {
        "spec": model.spec.to_dict(),
        "hosts": n,
        "pages": sum(sizes),
        "site_pages": {
            "min": sizes[0],
            "p50": q(0.5),
            "p90": q(0.9),
            "p99": q(0.99),
            "max": sizes[-1],
            "mean": round(sum(sizes) / n, 1),
        },
        "ips": len(per_ip),
        "hosts_sharing_an_ip": sum(c for c in per_ip.values() if c > 1),
        "max_hosts_per_ip": max(per_ip.values()),
        "crawl_delay_hosts": sum(1 for h in model.hosts if h.crawl_delay > 0),
        "host_flags": flags,
    }


def run_info(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    d = describe(model_for(spec))
    if args.json:
        print(json.dumps(d, indent=1, sort_keys=True))
        return 0
    s = d["site_pages"]
    print(f"profile {spec.profile}, seed {spec.seed}")
    print(f"hosts {d['hosts']}, pages {d['pages']}")
    print(
        f"pages per host: min {s['min']}, median {s['p50']}, p90 {s['p90']}, "
        f"p99 {s['p99']}, max {s['max']}, mean {s['mean']}"
    )
    print(
        f"IPs {d['ips']} (hosts sharing an IP: {d['hosts_sharing_an_ip']}, "
        f"at most {d['max_hosts_per_ip']} per IP)"
    )
    print("hosts per flag:")
    for name, count in d["host_flags"].items():
        print(f"  {name:<16} {count}")
    return 0


# ---------------------------------------------------------------- serve
def run_serve(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    if args.processes < 1:
        raise ValueError(f"--processes must be >= 1, got {args.processes}")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be 0..65535, got {args.port}")
    if args.change_period < 0:
        raise ValueError("--change-period must be >= 0")
    if args.duration is not None and args.duration < 0:
        raise ValueError("--duration must be >= 0")
    try:
        socket.inet_aton(args.bind_ip)
    except OSError:
        raise ValueError(f"--bind-ip must be an IPv4 address, got {args.bind_ip!r}") from None
    if args.processes > 1:
        return _serve_processes(spec, args)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(_serve_one(spec, args))


async def _serve_one(spec: WebSpec, args: argparse.Namespace) -> int:
    server = WebServer(
        spec,
        port=args.port,
        bind_ip=args.bind_ip,
        log_path=args.log,
        epoch=args.epoch,
        change_period=args.change_period,
    )
    try:
        await server.start()
    except OSError as exc:
        raise ValueError(f"cannot listen on port {args.port}: {exc.strerror or exc}") from exc
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        _announce(spec, server.model, server.port, args, len(server.ips))
        if args.duration is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), args.duration)
        else:
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await server.stop()
    if not args.quiet:
        s = server.stats()
        print(f"stopped: {s.requests} requests on {s.connections_total} connections", flush=True)
    return 0


def _announce(
    spec: WebSpec, model: WebModel, port: int, args: argparse.Namespace, nips: int
) -> None:
    """Write the requested side files, the banner and, last, the ready file."""
    web = RunningWeb(spec, port, args.log, _NoControl(), args.bind_ip)
    web._model = model
    try:
        if args.spec_out:
            Path(args.spec_out).write_text(spec.to_json() + "\n")
        if args.resolve_out:
            web.write_resolve_file(args.resolve_out)
        if args.hosts_out:
            web.write_hosts_file(args.hosts_out)
    except OSError as exc:
        raise ValueError(f"cannot write {exc.filename}: {exc.strerror}") from exc
    if not args.quiet:
        first = model.hosts[0]
        logs = str(args.log) if args.log else "off (--log FILE)"
        if args.log and args.processes > 1:
            logs = f"{args.log}.0 … {args.log}.{args.processes - 1}"
        print(
            f"gossamer testweb: {len(model.hosts)} hosts, {model.total_pages} pages, "
            f"profile {spec.profile}, seed {spec.seed}\n"
            f"listening on port {port} at {nips} loopback IPs "
            f"({args.processes} process{'es' if args.processes > 1 else ''}); "
            f"index and status: http://{args.bind_ip}:{port}/\n"
            f"audit log: {logs}\n"
            f"try: curl --connect-to {first.name}:80:{first.ip}:{port} http://{first.name}/\n"
            "stop with Ctrl-C",
            flush=True,
        )
    if args.ready_file:
        tmp = Path(str(args.ready_file) + ".tmp")
        tmp.write_text(json.dumps({"port": port, "pid": os.getpid()}))
        tmp.replace(args.ready_file)


class _NoControl:
    def set_epoch(self, epoch: int) -> None:
        raise RuntimeError("not available")

    def flush_log(self) -> None:
        raise RuntimeError("not available")

    def status(self) -> dict[str, Any]:
        raise RuntimeError("not available")

    def stop(self) -> None:
        pass


# ---------------------------------------------------------------- several processes
def _serve_processes(spec: WebSpec, args: argparse.Namespace) -> int:
    """N forked server processes on the same sockets' addresses (SO_REUSEPORT).

    The parent binds (without listening) to pick and hold the port, forks the children, which
    bind and listen themselves, then only supervises. Per-process state (attempt counters,
    rate-limit windows, statistics) is not shared; the epoch is (shared memory)."""
    model = model_for(spec)  # built once, inherited by the children
    ips = model.ips()
    if args.bind_ip not in ips:
        ips.append(args.bind_ip)
    try:
        reserved = bind_sockets(ips, args.port, reuse_port=True, listen=False)
    except OSError as exc:
        raise ValueError(f"cannot bind port {args.port}: {exc.strerror or exc}") from exc
    port = reserved[0].getsockname()[1]
    ctx = multiprocessing.get_context("fork")
    cells = ctx.RawArray("d", [float(args.epoch), float(args.change_period), time.time()])
    ready: Queue[tuple[int, str]] = ctx.Queue()
    children = []
    for k in range(args.processes):
        log = Path(f"{args.log}.{k}") if args.log else None
        proc = ctx.Process(
            target=_child_main,
            args=(k, spec, port, args.bind_ip, log, cells, ready),
            name=f"gossamer-testweb-{k}",
        )
        proc.start()
        children.append(proc)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        for _ in children:
            try:
                k, problem = ready.get(timeout=CHILD_READY_TIMEOUT_S)
            except queue.Empty:
                raise ValueError(
                    f"server processes did not start within {CHILD_READY_TIMEOUT_S:g} s"
                ) from None
            if problem:
                raise ValueError(f"server process {k} failed to start: {problem}")
        for s in reserved:
            s.close()
        _announce(spec, model, port, args, len(ips))
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while not stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            if any(not c.is_alive() for c in children):
                print("a server process died; stopping", file=sys.stderr, flush=True)
                code = 1
                break
            stop.wait(0.2)
    finally:
        for s in reserved:
            s.close()
        for c in children:
            if c.is_alive() and c.pid is not None:
                os.kill(c.pid, signal.SIGTERM)
        for c in children:
            c.join(CHILD_STOP_TIMEOUT_S)
            if c.is_alive():
                c.kill()
                c.join(CHILD_STOP_TIMEOUT_S)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        ready.close()
    if not args.quiet:
        print(f"stopped {len(children)} server processes", flush=True)
    return code


def _child_main(
    k: int,
    spec: WebSpec,
    port: int,
    bind_ip: str,
    log: Path | None,
    cells: Sequence[float],
    ready: Queue[tuple[int, str]],
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; SIGTERM stops us
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(_child_serve(k, spec, port, bind_ip, log, cells, ready))


async def _child_serve(
    k: int,
    spec: WebSpec,
    port: int,
    bind_ip: str,
    log: Path | None,
    cells: Any,
    ready: Queue[tuple[int, str]],
) -> None:
    server = WebServer(
        spec,
        port=port,
        bind_ip=bind_ip,
        log_path=log,
        epoch_source=EpochSource(cells),
        reuse_port=True,
    )
    try:
        await server.start()
    except OSError as exc:
        ready.put((k, str(exc)))
        return
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    ready.put((k, ""))
    try:
        await stop.wait()
    finally:
        await server.stop()
