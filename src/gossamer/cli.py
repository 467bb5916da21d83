"""The `gossamer` command: one entry point for every subcommand."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__


def build_parser(with_testweb: bool = True) -> argparse.ArgumentParser:
    """The whole command line. Without `with_testweb` the simulated web's actions are left
    out: importing it costs ~0.2 s, which every crawl would otherwise pay at start."""
    parser = argparse.ArgumentParser(
        prog="gossamer", description="A polite, fast, fault-tolerant web crawler."
    )
    parser.add_argument("--version", action="version", version=f"gossamer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_crawl(sub)
    _add_worker(sub)
    _add_cluster(sub)
    _add_report(sub)
    _add_experiment(sub)
    demo = sub.add_parser(
        "demo",
        help="start the simulated web on loopback, crawl it, print the report and the audit",
    )
    demo.add_argument("--hosts", type=int, default=200, help="hosts (default 200)")
    demo.add_argument("--pages-mean", type=float, default=25.0, help="mean pages per host")
    demo.add_argument("-o", "--out", type=Path, help="keep everything here")
    demo.set_defaults(func=_run_demo)
    testweb = sub.add_parser(
        "testweb",
        help="the simulated web: serve, truth, audit, export, info",
        description="A deterministic simulated web on loopback that knows the right answer.",
    )
    tw_sub = testweb.add_subparsers(dest="testweb_command", required=True, metavar="ACTION")
    if not with_testweb:
        return parser
    from .testing import cli_demo, cli_export, cli_serve, cli_truth

    cli_serve.register(tw_sub)
    cli_truth.register(tw_sub)
    cli_export.register(tw_sub)
    cli_demo.register(tw_sub)
    return parser


def _add_crawl(sub: Any) -> None:
    p = sub.add_parser(
        "crawl",
        help="crawl from seed URLs into a directory (embedded mode, no server)",
        description="Crawl politely from SEEDS into DIR: WARC, crawl log, link graph, stats. "
        "Settings come from flags, then GOSSAMER_* environment variables, then --config.",
    )
    p.add_argument("seeds", nargs="*", metavar="SEED", help="start URLs")
    p.add_argument("-o", "--output", type=Path, help="crawl directory (default ./crawl)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="continue the crawl in DIR")
    p.add_argument(
        "--recrawl",
        type=Path,
        metavar="OLD_DIR",
        help="re-crawl what the finished crawl OLD_DIR fetched, with conditional GETs "
        "(If-None-Match / If-Modified-Since); seeds default to OLD_DIR's",
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML settings file")
    p.add_argument(
        "--max-pages",
        type=_limit,
        metavar="N|none",
        help="stop after N pages (default none; with --resume: raise it to go on)",
    )
    p.add_argument(
        "--max-depth",
        type=_limit,
        metavar="N|none",
        help="link hops from the seeds, which are depth 0 (default 20; none: no limit)",
    )
    p.add_argument("--scope", choices=("host", "domain", "all"), help="default: host")
    p.add_argument("--allow", action="append", metavar="REGEX", help="keep URLs matching")
    p.add_argument("--deny", action="append", metavar="REGEX", help="drop URLs matching")
    p.add_argument("--workers", type=int, help="worker processes (0 = one per core, the default)")
    p.add_argument("--concurrency", type=int, help="hosts fetched at once per worker")
    p.add_argument("--per-host", type=int, help="URLs per host per lease (default 20)")
    p.add_argument(
        "--per-ip", type=int, help="hosts of one IP address fetched at once (default 1)"
    )
    p.add_argument("--delay", type=float, help="seconds between requests to a host (1.0)")
    p.add_argument(
        "--lease-order",
        choices=("largest-first", "ready"),
        help="which ready host goes first: most URLs queued (default) or ready longest",
    )
    p.add_argument(
        "--low-speed-limit",
        type=int,
        metavar="BYTES",
        help="a transfer under BYTES/s for --low-speed-time is cut (default 100; 0: off)",
    )
    p.add_argument(
        "--low-speed-time", type=int, metavar="S", help="seconds under the limit (default 30)"
    )
    p.add_argument("--user-agent", help="User-Agent header")
    p.add_argument(
        "--resolve", action="append", metavar="HOST:IP",
        help="HOST:IP, HOST:PORT:IP:PORT or *.domain:IP (repeatable)",
    )  # fmt: skip
    p.add_argument("--resolve-file", type=Path, metavar="FILE", help="one --resolve per line")
    p.add_argument(
        "--allow-private",
        action="store_true",
        default=None,
        help="allow loopback/private addresses (the simulated web needs it)",
    )
    p.add_argument("--ignore-robots", action="store_true", help="do not obey robots.txt")
    p.add_argument(
        "--sitemaps",
        action="store_true",
        help="also seed each host from the sitemaps robots.txt names",
    )
    p.add_argument("--no-warc", action="store_true", help="do not write WARC files")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    _add_trap_flags(p)
    c = p.add_argument_group(
        "cluster mode",
        "With --redis URL the crawl is created in Redis and crawled by `gossamer worker` "
        "processes on any machine (docs/cluster.md); --workers N starts N of them here "
        "(default: one per core; 0: none) and waits for them.",
    )
    c.add_argument("--redis", metavar="URL", help="redis://host:port/db: create a cluster crawl")
    c.add_argument(
        "--partition",
        choices=("dynamic", "modulo", "consistent", "phase", "sized"),
        default="dynamic",
        help="which hosts each worker may lease (default dynamic)",
    )
    c.add_argument(
        "--site-sizes",
        type=Path,
        metavar="SOURCE",
        help="sized: a previous crawl's directory or a file of HOST PAGES lines; sites are "
        "placed on workers largest first",
    )
    c.add_argument(
        "--seen-set",
        choices=("exact", "bloom"),
        help="with --redis: exact (~9 B a URL) or a Bloom filter (~2.5 B, a few new URLs "
        "per mille taken as seen and never fetched)",
    )
    c.add_argument("--phase-period", type=float, metavar="T", help="phase: seconds a phase lasts")
    c.add_argument("--phases", type=int, metavar="P", help="phase: phases (default: workers)")
    c.add_argument("--epsilon", type=float, metavar="E", help="consistent: load bound (0.25)")
    c.add_argument(
        "--heartbeat-ttl",
        type=float,
        default=5.0,
        metavar="S",
        help="a worker silent this long is dead, its IP slots free (default 5)",
    )
    c.add_argument(
        "--detach",
        action="store_true",
        help="start the local workers in the background and return at once",
    )
    p.set_defaults(func=_run_crawl)


def _limit(text: str) -> int | str:
    """A limit flag's value: a whole number, or `none` (no limit; the settings turn it into
    None, as they do for GOSSAMER_* variables and TOML values)."""
    from .config import NO_LIMIT

    if text.strip().lower() == NO_LIMIT:
        return NO_LIMIT
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or {NO_LIMIT}, got {text!r}"
        ) from None


# trap limits: (flag, setting, help); docs/crawler.md, "Traps"
_TRAP_FLAGS = (
    ("--host-budget", "host_budget", "URLs accepted per host at most (default 100000)"),
    ("--max-path-segments", "max_path_segments", "more path segments: a trap (default 20)"),
    (
        "--calendar-years-back",
        "calendar_years_back",
        "a date-only URL more years back is a calendar trap (default 30)",
    ),
    (
        "--calendar-years-ahead",
        "calendar_years_ahead",
        "a date-only URL more years ahead is a calendar trap (default 5)",
    ),
    (
        "--max-queries-per-path",
        "max_queries_per_path",
        "distinct query strings per path, per worker (default 10000)",
    ),
    (
        "--max-query-shapes",
        "max_query_shapes",
        "distinct parameter-name sequences per path, per worker (default 50)",
    ),
)


def _add_trap_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "trap limits", "Each takes a whole number or none (no limit); docs/crawler.md, Traps."
    )
    for flag, _setting, text in _TRAP_FLAGS:
        g.add_argument(flag, type=_limit, metavar="N|none", help=text)


def _trap_flags(args: argparse.Namespace) -> dict[str, Any]:
    return {setting: getattr(args, setting) for _flag, setting, _text in _TRAP_FLAGS}


def _run_crawl(args: argparse.Namespace) -> int:
    from .config import SettingsError, load_settings
    from .engine.run import CrawlError, run_crawl

    if args.redis:
        if args.resume or args.recrawl:
            print(
                "gossamer: error: --resume and --recrawl are for embedded crawls: a cluster "
                "crawl lives in Redis (start `gossamer worker` again to go on)",
                file=sys.stderr,
            )
            return 2
        args.output = args.output or Path("gossamer-worker")
    elif args.resume and args.output and args.output.resolve() != args.resume.resolve():
        print(
            f"gossamer: error: --resume {args.resume} goes on in that directory; "
            f"-o {args.output} names another: leave -o out",
            file=sys.stderr,
        )
        return 2
    flags = {
        "seeds": args.seeds or None,
        "output": args.resume or args.output,
        "max_pages": args.max_pages,
        "max_depth": args.max_depth,
        "scope": args.scope,
        "allow": args.allow,
        "deny": args.deny,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "per_host": args.per_host,
        "per_ip": args.per_ip,
        "delay": args.delay,
        "low_speed_limit": args.low_speed_limit,
        "low_speed_time": args.low_speed_time,
        "lease_order": args.lease_order,
        "user_agent": args.user_agent,
        "resolve": args.resolve,
        "resolve_file": args.resolve_file,
        "allow_private": args.allow_private,
        "obey_robots": False if args.ignore_robots else None,
        "use_sitemaps": True if args.sitemaps else None,
        "warc": False if args.no_warc else None,
        "recrawl": args.recrawl,
        "seen_set": args.seen_set,
        **_trap_flags(args),
    }
    if args.redis:
        flags["workers"] = None  # local worker processes, not a setting of the crawl
    try:
        settings = load_settings(flags, config=args.config)
        if settings.seen_set != "exact" and not args.redis:
            raise SettingsError("seen_set: a Bloom seen-set is for cluster crawls (--redis)")
        if (args.partition == "sized") != (args.site_sizes is not None):
            raise SettingsError("--partition sized and --site-sizes SOURCE go together")
        if args.redis:
            from .cluster.control import run_cluster_crawl

            weights = None
            if args.site_sizes is not None:
                from .cluster.sizes import SiteSizesError, read_site_sizes, shard_weights

                try:
                    weights = shard_weights(read_site_sizes(args.site_sizes))
                except SiteSizesError as exc:
                    raise SettingsError(str(exc)) from None
            return run_cluster_crawl(
                args.redis,
                settings,
                partition=args.partition,
                epsilon=args.epsilon,
                period=args.phase_period,
                phases=args.phases,
                weights=weights,
                heartbeat_ttl=args.heartbeat_ttl,
                workers=args.workers,
                detach=args.detach,
                progress=None if args.quiet else sys.stderr,
            )
        return run_crawl(
            settings, resume=args.resume is not None, progress=None if args.quiet else sys.stderr
        )
    except (SettingsError, CrawlError) as exc:
        print(f"gossamer: error: {exc}", file=sys.stderr)
        return 2


def _run_demo(args: argparse.Namespace) -> int:
    from .engine.demo import run_demo

    return run_demo(hosts=args.hosts, pages_mean=args.pages_mean, out=args.out)


def _add_worker(sub: Any) -> None:
    p = sub.add_parser("crawl-worker", help=argparse.SUPPRESS)
    p.add_argument("dir", type=Path)
    p.add_argument("--part", required=True)
    p.set_defaults(func=_run_worker)


def _run_worker(args: argparse.Namespace) -> int:
    from .engine.run import run_worker

    return run_worker(args.dir, args.part)


def _redis_arguments(p: argparse.ArgumentParser) -> None:
    env = os.environ.get("GOSSAMER_REDIS")
    p.add_argument(
        "--redis",
        metavar="URL",
        default=env,
        required=env is None,
        help="redis://host:port/db of the cluster (default: $GOSSAMER_REDIS)",
    )
    p.add_argument("--crawl", metavar="ID", help="the crawl (default: the only running one)")


def _add_cluster(sub: Any) -> None:
    p = sub.add_parser(
        "worker",
        help="join a cluster crawl in Redis as a worker (from any machine)",
        description="Join a crawl created with `gossamer crawl --redis` and crawl until it "
        "finishes or is stopped. Outputs (WARC, crawl log, graph, stats) go to DIR/<worker id>/.",
    )
    _redis_arguments(p)
    p.add_argument("--capacity", type=float, default=1.0, help="relative capacity (default 1)")
    p.add_argument(
        "-o", "--output", type=Path, default=Path("gossamer-worker"), metavar="DIR",
        help="outputs go to DIR/<worker id>/ (default ./gossamer-worker)",
    )  # fmt: skip
    p.add_argument("--concurrency", type=int, help="hosts fetched at once (default: the crawl's)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_run_cluster_worker)

    p = sub.add_parser("status", help="a cluster crawl's workers and totals")
    _redis_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_run_status)

    p = sub.add_parser(
        "stop", help="stop a cluster crawl: every worker finishes its batches and exits"
    )
    _redis_arguments(p)
    p.add_argument("--wait", type=float, metavar="S", help="wait up to S seconds for the workers")
    p.set_defaults(func=_run_stop)

    p = sub.add_parser(
        "workers", help="start or stop local workers of a cluster crawl to reach --scale N"
    )
    _redis_arguments(p)
    p.add_argument("--scale", type=int, required=True, metavar="N", help="workers on this machine")
    p.add_argument(
        "-o", "--output", type=Path, default=Path("gossamer-worker"), metavar="DIR",
        help="outputs of started workers (default ./gossamer-worker)",
    )  # fmt: skip
    p.set_defaults(func=_run_scale)


def _run_cluster_worker(args: argparse.Namespace) -> int:
    from .cluster.worker import worker_main

    return worker_main(
        args.redis,
        args.crawl,
        capacity=args.capacity,
        out=args.output,
        concurrency=args.concurrency,
        progress=None if args.quiet else sys.stderr,
    )


def _run_status(args: argparse.Namespace) -> int:
    from .cluster.control import status_main

    return status_main(args.redis, args.crawl, as_json=args.json)


def _run_stop(args: argparse.Namespace) -> int:
    from .cluster.control import stop_main

    return stop_main(args.redis, args.crawl, wait=args.wait)


def _run_scale(args: argparse.Namespace) -> int:
    from .cluster.control import workers_main

    return workers_main(args.redis, args.crawl, args.scale, out=args.output)


def _add_report(sub: Any) -> None:
    p = sub.add_parser("report", help="summarise a crawl directory")
    p.add_argument("dir", type=Path, metavar="DIR")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(func=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from .engine.report import print_report

    return print_report(args.dir, as_json=args.json)


def _add_experiment(sub: Any) -> None:
    from .experiments import EXPERIMENTS

    names = ", ".join(e.name for e in EXPERIMENTS)
    p = sub.add_parser(
        "experiment",
        help="reproduce the seeds' experiments: tables (JSON, Markdown) and PNG plots",
        description="Run an experiment of docs/experiments.md (or all of them) and write its "
        "JSON, Markdown tables and PNG plots into DIR. Experiments: "
        + "; ".join(f"{e.name} ({e.title})" for e in EXPERIMENTS)
        + ".",
    )
    p.add_argument(
        "names",
        nargs="+",
        choices=[*(e.name for e in EXPERIMENTS), "all"],
        metavar="NAME",
        help=f"{names} or all (several names run in turn)",
    )
    p.add_argument("-o", "--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument("--quick", action="store_true", help="a small size (seconds; for the tests)")
    p.add_argument("--seed", type=int, default=1, help="seed of the simulated web (default 1)")
    p.set_defaults(func=_run_experiment)


def _run_experiment(args: argparse.Namespace) -> int:
    from .experiments import run_experiments
    from .experiments._framework import RunOptions

    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"-o {args.out}: exists and is not a directory")
    options = RunOptions(out=args.out, quick=args.quick, seed=args.seed)
    for result in run_experiments(args.names, options):
        print(f"{result.name}: {result.seconds:.1f} s")
        for key, value in result.headline.items():
            print(f"  {key}: {value}")
        for path in result.files:
            print(f"  wrote {path}")
    return 0


# commands that never need the simulated web's parser (see build_parser)
_LIGHT_COMMANDS = frozenset(
    {"crawl", "crawl-worker", "report", "worker", "status", "stop", "workers", "experiment"}
)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(with_testweb=command not in _LIGHT_COMMANDS)
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except ValueError as exc:
        parser.exit(2, f"gossamer: error: {exc}\n")
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
