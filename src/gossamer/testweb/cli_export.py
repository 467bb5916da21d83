"""`gossamer testweb export DIR`: the web as static files plus an nginx config."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from ._export import export_web
from ._model import HostFlag, model_for
from ._specargs import add_spec_arguments, spec_from_args


def register(sub: Any) -> None:
    """Add `export` to the `gossamer testweb` subparsers `sub`."""
    p = sub.add_parser(
        "export",
        help="write the web as static files plus an nginx config (for benchmarks)",
        description=(
            "Write every resource of a clean web as static files under DIR/sites/<host>/ and "
            "an nginx config serving them on every IP of the web (and 127.0.0.1) at --port, "
            "with an access log the audit reads. Switches that need a live server (latency, "
            "resets, redirects, 304s, ...) are refused unless --force."
        ),
    )
    p.add_argument("dir", type=Path, metavar="DIR", help="output directory (empty or an export)")
    p.add_argument("--port", type=int, default=8080, help="port nginx listens on (default 8080)")
    p.add_argument(
        "--workers",
        default="auto",
        help="nginx worker_processes: a number or auto (default auto: one per CPU)",
    )
    p.add_argument("--epoch", type=int, default=0, help="content epoch of changing pages (0)")
    p.add_argument(
        "--no-access-log",
        action="store_true",
        help="no access log (pure speed benchmarks; nothing to audit)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="export a non-clean web anyway: skip what nginx cannot serve and report it",
    )
    p.add_argument("--jobs", type=int, help="processes writing files (default: one per CPU)")
    add_spec_arguments(p)
    p.set_defaults(func=run_export)


def _workers(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"--workers expects a number or auto, got {value!r}") from None
    if n < 1:
        raise ValueError(f"--workers must be >= 1, got {n}")
    return n


def run_export(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    model = model_for(spec)
    s = export_web(
        model,
        args.dir,
        port=args.port,
        epoch=args.epoch,
        workers=_workers(args.workers),
        access_log=not args.no_access_log,
        force=args.force,
        jobs=args.jobs,
    )
    mb = s.bytes / 1e6
    print(
        f"exported {s.pages} pages ({s.files} files, {mb:.1f} MB) of {s.hosts} hosts "
        f"to {s.out_dir}/sites in {s.seconds:.2f}s ({s.pages_per_s:,.0f} pages/s)"
    )
    for title, counts in (("skipped", s.skipped), ("degraded", s.degraded)):
        if counts:
            print(f"{title} (--force):")
            for reason, n in sorted(counts.items()):
                print(f"  {n:8d}  {reason}")
    print(f"listening on {len(s.ips)} addresses (127.0.0.1 and the web's IPs), port {s.port}")
    print(f"access log: {s.access_log if s.access_log else 'off'}")
    print("run nginx in the foreground (Ctrl-C or SIGQUIT stops it):")
    print("  " + shlex.join(s.nginx_command))
    some = next((h.name for h in model.hosts if not h.flags & HostFlag.DEAD), "www.h0.example")
    print("then, for example:")
    print(f"  curl --connect-to {some}:80:127.0.0.1:{s.port} http://{some}/")
    print(f"  (every host: {s.out_dir}/resolve.txt, /etc/hosts style: {s.out_dir}/hosts.txt)")
    return 0
