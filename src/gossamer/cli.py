"""The `gossamer` command: one entry point for every subcommand."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from . import logs
from ._version import __version__
from .exitcodes import Exit

if TYPE_CHECKING:
    from .config import CrawlSettings

_log = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """argparse, with every mistake said in one line on stderr (no usage dump), exit
    Exit.USAGE: the flag and the value as given, what it takes (`--delay 1s: expected a
    number of seconds, e.g. 1 or 0.5`), the closest flag, choice or command for a misspelt
    one, under the subcommand that was given. No abbreviations: `--max-page` is refused
    (with `--max-pages` suggested), never silently taken as a prefix. Every subparser is one
    too (argparse makes them of their parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # argparse's own messages: "argument -o/--output: expected one argument"
        message = re.sub(r"^argument (\S+): ", r"\1: ", message)
        if message.startswith("the following arguments are required"):
            message += f" ({self.prog} --help)"
        _log.error(message)
        sys.exit(Exit.USAGE)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # what a subcommand's parser leaves is refused there, naming its flags (argparse
        # would hand it up to `gossamer`'s parser: "unrecognized arguments" and its usage)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self._refuse(extras)
        return parsed, extras

    def _refuse(self, extras: list[str]) -> NoReturn:
        import difflib

        for item in extras:
            if item.startswith("-") and len(item) > 1 and not _looks_negative(item):
                flag = item.partition("=")[0]
                options = [
                    o for a in self._actions if a.help != argparse.SUPPRESS
                    for o in a.option_strings
                ]  # fmt: skip
                close = difflib.get_close_matches(flag, options, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]}?" if close else f"{self.prog} --help lists them"
                self.error(f"{self.prog} has no flag {flag}; {hint}")
        self.error(
            f"unexpected argument {extras[0]!r} for {self.prog} ({self.prog} --help shows "
            "what it takes)"
        )

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as exc:
            if action.type is int:
                why = "expected a whole number"
            elif action.type is float:
                why = "expected a number"
            else:  # a type of ours says what it takes (ArgumentTypeError)
                why = exc.message
            raise argparse.ArgumentError(None, f"{_name(action)} {arg_string}: {why}") from None

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        import difflib

        if action.choices is None or value in action.choices:
            return
        if isinstance(action, argparse._SubParsersAction):  # listed ones: not crawl-worker
            names = [c.dest for c in action._choices_actions]
            close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]}?" if close else ""
            what = action.metavar.lower() if isinstance(action.metavar, str) else "command"
            raise argparse.ArgumentError(
                None, f"no {what} {value!r}{hint} ({self.prog} --help lists them)"
            )
        choices = [str(c) for c in action.choices]
        close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise argparse.ArgumentError(
            None, f"{_name(action)} {value}: expected one of {', '.join(choices)}{hint}"
        )


def _name(action: argparse.Action) -> str:
    """A flag as messages name it: its long form (`--output`), or a positional's metavar."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    metavar = action.metavar if isinstance(action.metavar, str) else None
    return metavar or action.dest.upper()


def _looks_negative(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_parser(with_testweb: bool = True) -> argparse.ArgumentParser:
    """The whole command line. Without `with_testweb` the simulated web's actions are left
    out: importing it costs ~0.2 s, which every crawl would otherwise pay at start."""
    parser = _Parser(prog="gossamer", description="A polite, fast, fault-tolerant web crawler.")
    parser.add_argument("--version", action="version", version=f"gossamer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_crawl(sub)
    _add_worker(sub)
    _add_cluster(sub)
    _add_report(sub)
    _add_gather(sub)
    _add_graph(sub)
    _add_graphbench(sub)
    _add_experiment(sub)
    _add_dashboard(sub)
    _add_plugins(sub)
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
    from .testweb import cli_demo, cli_export, cli_serve, cli_truth

    cli_serve.register(tw_sub)
    cli_truth.register(tw_sub)
    cli_export.register(tw_sub)
    cli_demo.register(tw_sub)
    return parser


# `gossamer crawl --help`'s sections, in order: (title, description). Which flags a section
# holds is declared with the settings (`CrawlSettings.section_of`: a group's `section`, a
# top-level setting's field); a setting in none still gets its flag, under "other settings".
_CRAWL_SECTIONS: tuple[tuple[str, str | None], ...] = (
    (
        "seeds and output",
        "Settings come from flags, then -s KEY=VALUE, then GOSSAMER_* environment variables, "
        "then --config FILE, then defaults (docs/cli.md lists every one).",
    ),
    ("scope and limits", None),
    ("links", None),
    ("politeness", None),
    ("fetching", None),
    ("workers and the frontier", None),
    (
        "trap limits",
        "The limits take a whole number or none (no limit); docs/crawler.md, Traps.",
    ),
    ("outputs", None),
    (
        "cluster mode",
        "With --redis URL the crawl is created in Redis and crawled by `gossamer worker` "
        "processes on any machine (docs/cluster.md); --workers N starts N of them here "
        "(default auto: one per core; 0: none, the crawl is only created) and waits for "
        "them. The flags of this group need --redis.",
    ),
)
_OTHER_GROUP = "other settings"
#: `--resume` given without DIR: a cluster crawl's resume (with --redis)
_RESUME_IN_REDIS: Any = object()
_METAVARS = {
    "allow": "REGEX",
    "deny": "REGEX",
    "resolve": "HOST:IP",
    "user_agent": "TEXT",
    "max_body": "BYTES",
    "warc_max_bytes": "BYTES",
    "disk_margin": "MB",
    "low_speed_limit": "BYTES",
    "adaptive_delay": "N",
    "site_sizes": "SOURCE",
    "extract": "NAME",
    "phase_period": "T",
    "phases": "P",
    "epsilon": "E",
}


def _add_crawl(sub: Any) -> None:
    from .partition import strategy_names

    p = sub.add_parser(
        "crawl",
        help="crawl from seed URLs into a directory (embedded mode, no server)",
        description="Crawl politely from SEEDS (and --seeds-file) into DIR: WARC, crawl log, "
        "link graph, stats. Every setting has a flag; -s KEY=VALUE sets any of them by its "
        "TOML key.",
    )
    groups = {title: p.add_argument_group(title, text) for title, text in _CRAWL_SECTIONS}
    g = groups["seeds and output"]
    g.add_argument("seeds", nargs="*", metavar="SEED", help="start URLs")
    g.add_argument(
        "-o", "--output", type=Path, metavar="DIR", help="crawl directory (default ./crawl)"
    )
    g.add_argument(
        "--resume",
        type=Path,
        nargs="?",
        const=_RESUME_IN_REDIS,
        metavar="DIR",
        help="continue the crawl in DIR; with --redis URL and no DIR: continue a stopped "
        "cluster crawl (--crawl ID), its settings the stored ones",
    )
    g.add_argument(
        "--recrawl",
        type=Path,
        metavar="OLD_DIR",
        help="re-crawl what the finished crawl OLD_DIR fetched, with conditional GETs "
        "(If-None-Match / If-Modified-Since); seeds default to OLD_DIR's",
    )
    g.add_argument("--config", type=Path, metavar="FILE", help="TOML settings file")
    g.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="set_options",
        help="set any setting by its TOML key, VALUE read as its GOSSAMER_* variable would be "
        "(repeatable; a flag for the same setting wins)",
    )
    g.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    _log_flags(g)
    c = groups["cluster mode"]
    c.add_argument(
        "--redis",
        metavar="URL",
        help="redis://host:port/db (or redis+sentinel://host:port,…/service/db): create a "
        "cluster crawl",
    )
    c.add_argument(
        "--crawl",
        metavar="ID",
        help="with --resume: the cluster crawl (default: the only stopped one)",
    )
    _add_fetch_option_flags(groups["fetching"])
    # the registered partition strategies are `--partition`'s choices (~6 ms to import)
    # and the installed strategy plugins' names, looked for only when needed (a name that is
    # not a built-in one, or the help): reading the installed packages takes tens of ms
    _setting_flags(p, groups, choices={"partition": _StrategyChoices(strategy_names())})
    c.add_argument(
        "--detach",
        action="store_true",
        default=None,
        help="start the local workers in the background and return at once",
    )
    _machine_flags(c)
    groups["politeness"].add_argument(
        "--ignore-robots",
        dest="obey_robots",
        action="store_const",
        const=False,
        help="do not obey robots.txt (the same as --no-obey-robots)",
    )
    p.set_defaults(func=_run_crawl)


def _machine_flags(c: Any) -> None:
    """--machines, --ssh and --remote-command (docs/deploy.md, "Machines"), their defaults
    from $GOSSAMER_MACHINES, $GOSSAMER_SSH and $GOSSAMER_REMOTE_COMMAND."""
    c.add_argument(
        "--machines",
        type=Path,
        metavar="FILE",
        help="start the workers on these machines over SSH, one `[user@]host[:port] "
        "[workers=N] [out=DIR]` a line (default: $GOSSAMER_MACHINES; docs/deploy.md); the "
        "list is kept with the crawl: scaling and resuming it without --machines use it",
    )
    c.add_argument(
        "--ssh",
        metavar="CMD",
        help="the ssh command and its options, e.g. \"ssh -F FILE\" (default: $GOSSAMER_SSH, "
        "else ssh; BatchMode=yes is always added)",
    )
    c.add_argument(
        "--remote-command",
        metavar="CMD",
        help="the gossamer command on the machines, a shell fragment (default: "
        "$GOSSAMER_REMOTE_COMMAND, else gossamer on their PATH)",
    )


def _machines_of(args: argparse.Namespace, *, the_crawls: bool = False) -> Any:
    """The machines of --machines (or $GOSSAMER_MACHINES) with the ssh and remote commands
    (cluster.control.Machines), None without; ValueError for a bad list. `the_crawls`
    (a command on an existing crawl): without a list, none with those commands, for the
    crawl's own machine list (`Machines.for_crawl`)."""
    from .runner.machines import (
        DEFAULT_REMOTE,
        DEFAULT_SSH,
        MACHINES_ENV,
        REMOTE_ENV,
        SSH_ENV,
        read_machines,
    )

    path = args.machines or (Path(env) if (env := os.environ.get(MACHINES_ENV)) else None)
    if path is None and not the_crawls:
        for name in ("ssh", "remote_command"):
            if getattr(args, name) is not None:
                raise ValueError(f"--{name.replace('_', '-')} is for --machines FILE")
        return None
    from .cluster.control import Machines

    return Machines(
        read_machines(path) if path is not None else (),
        ssh=args.ssh or os.environ.get(SSH_ENV) or DEFAULT_SSH,
        remote=args.remote_command or os.environ.get(REMOTE_ENV) or DEFAULT_REMOTE,
    )


def _setting_flags(
    p: argparse.ArgumentParser, groups: dict[str, Any], *, choices: dict[str, Collection[str]]
) -> None:
    """A flag for every setting (`CrawlSettings.knob_fields`) without a hand-written one, made
    from the field's type, description and default, so no setting is left reachable only by
    TOML or environment (a new field gets its flag without touching this file). `choices`:
    the values of a text setting known only at run time (a registry's names)."""
    from .config import FLAG_NAMES, CrawlSettings

    taken = {a.dest for a in p._actions} | {"seeds", "output"}
    for name, (_, field) in CrawlSettings.knob_fields().items():
        if name in taken:
            continue
        title = CrawlSettings.section_of(name) or _OTHER_GROUP
        if title not in groups:
            groups[title] = p.add_argument_group(title)
        flags = FLAG_NAMES.get(name, ("--" + name.replace("_", "-"),))
        kind = _flag_kind(name, field)
        if name in choices:  # (a lazy collection: its registered names in the metavar)
            names = choices[name]
            kind["choices"] = names
            kind["metavar"] = "{" + ",".join(getattr(names, "registered", names)) + "}"
        groups[title].add_argument(*flags, dest=name, **kind)


def _cluster_flags() -> dict[str, str]:
    """The flags that mean something only with --redis (dest: flag): the cluster group's
    settings, --detach and --crawl. Given without --redis they are an error."""
    from .config import ClusterSettings

    names = [*ClusterSettings.model_fields, "detach", "crawl", "machines", "ssh", "remote_command"]
    return {name: "--" + name.replace("_", "-") for name in names}


def _flag_kind(name: str, field: Any) -> dict[str, Any]:
    """argparse keywords for a setting's flag: its type, metavar, choices and help."""
    import typing

    from .config import _LIMITS, _LIST_SPLIT, AUTO, SECONDS

    text = field.description or name.replace("_", " ")
    annotation = field.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if args and typing.get_origin(annotation) is not Literal else annotation
    default = field.get_default(call_default_factory=True)
    if base is bool:
        state = "on" if default else "off"
        return {"action": argparse.BooleanOptionalAction, "help": f"{text} (default {state})"}
    shown = "none" if default is None and name in _LIMITS else default
    if name == "workers":
        shown = AUTO
    kw: dict[str, Any] = {"help": text if shown is None else f"{text} (default {shown})"}
    if name in _LIST_SPLIT or typing.get_origin(annotation) is list:
        kw.update(action="append", help=f"{text} (repeatable)")
    elif name == "workers":
        kw.update(type=_workers, metavar=f"N|{AUTO}")
    elif name in _LIMITS:
        kw.update(type=_typed(name, _limit), metavar="N|none")
    elif typing.get_origin(annotation) is Literal:
        kw["choices"] = typing.get_args(annotation)
    elif base is Path:
        kw["type"] = Path
        kw["metavar"] = "FILE"
    elif base in (int, float):
        kw["type"] = _typed(name, base)
        kw["metavar"] = "S" if name in SECONDS else "N"
    kw["metavar"] = _METAVARS.get(name, kw.get("metavar"))
    if kw["metavar"] is None:
        del kw["metavar"]
    return kw


def _add_fetch_option_flags(p: Any) -> None:
    p.add_argument(
        "-H", "--header", action="append", dest="headers", metavar="'NAME: VALUE'",
        help="send this header with every request, robots.txt and sitemaps included "
        "(repeatable; docs/crawler/fetch.md)",
    )  # fmt: skip
    p.add_argument(
        "--proxy",
        metavar="URL|env|none",
        help="fetch through this HTTP proxy, http://[USER:PASSWORD@]HOST:PORT; env: the one "
        "http_proxy/https_proxy name; none (default): no proxy, the variables ignored",
    )


def _check_proxy(settings: Any) -> int | None:
    """Exit.UNAVAILABLE, said on stderr, when a cluster crawl's proxy accepts no connection
    (an embedded crawl's is checked by run_crawl, once its settings are resolved)."""
    from .exitcodes import Exit
    from .fetch.options import dead_proxy

    problem = dead_proxy(settings.fetch.proxy, settings.fetch.connect_timeout)
    if problem is None:
        return None
    _log.error(problem)
    return Exit.UNAVAILABLE


def _limit(text: str) -> int | str:
    """A limit flag's value: a whole number, or `none` (no limit; the settings turn it into
    None, as they do for GOSSAMER_* variables and TOML values). ValueError otherwise."""
    from .config import NO_LIMIT

    if text.strip().lower() == NO_LIMIT:
        return NO_LIMIT
    return int(text)


def _typed(name: str, parse: Any) -> Any:
    """`parse` as the type of setting `name`'s flag: a value it refuses is said with what
    the setting takes (`expected a number of seconds, e.g. 1 or 0.5`)."""
    from .config import accepted

    def typed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {accepted(name)}") from None

    typed.__name__ = name
    return typed


def _workers(text: str) -> int | str:
    """--workers' value: a whole number (its range is checked where it is used: 0 means
    none, which only a cluster crawl takes) or `auto`."""
    from .config import AUTO, MAX_WORKERS

    if text.strip().lower() == AUTO:
        return AUTO
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MAX_WORKERS}, or {AUTO} (one per core; with "
            "--redis 0 is none)"
        )
    return value


def _check_workers(
    args: argparse.Namespace, settings: CrawlSettings, *, local: bool = True
) -> int | None:
    """The local worker processes to start (None: refused, said on stderr); above the cores
    this process may use, a warning says so (not for workers on other machines: `local`
    false). A cluster crawl's --workers (0: none) is checked here, an embedded crawl's by
    its settings."""
    from .config import AUTO, MAX_WORKERS, available_cores, workers_problem

    cores = available_cores()
    if args.redis:
        if args.workers in (None, AUTO):
            return min(cores, MAX_WORKERS)
        problem = workers_problem(args.workers, none_ok=True)
        if problem is not None:
            _usage_error(f"--workers {args.workers}: {problem}")
            return None
        n = int(args.workers)
    else:
        n = settings.effective_workers()
        if settings.workers is None:
            return n
    if n > cores and local:
        _log.warning(
            f"--workers {n}: more than the {cores} core{'s' * (cores != 1)} this crawl may "
            f"use; its workers will share them (fine while they wait on slow sites; {AUTO}: "
            "one per core)"
        )
    return n


def _usage_error(message: str) -> int:
    _log.error(message)
    return Exit.USAGE


class _StrategyChoices:
    """`--partition`'s choices: the registered strategies, then the installed strategy
    plugins' names (plugins.py), read only when a name is not a registered one or the
    choices are listed (help, a mistake's message)."""

    def __init__(self, registered: tuple[str, ...]) -> None:
        self.registered = registered

    def _all(self) -> list[str]:
        from .partition._registry import plugin_strategy_names

        return [*self.registered, *plugin_strategy_names()]

    def __contains__(self, name: object) -> bool:
        return name in self.registered or name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def _add_plugins(sub: Any) -> None:
    p = sub.add_parser(
        "plugins",
        help="the installed plugins: extractors, sinks, frontiers, fetchers, strategies",
        description="Every entry point of gossamer's groups (gossamer.extractors, "
        "gossamer.sinks, gossamer.frontiers, gossamer.fetchers, gossamer.strategies) that "
        "an installed package declares, one a line: group, name, value, distribution and "
        "version; each is loaded to check it. A plugin that fails to load is one error line "
        "naming it, and the exit status is 2 (docs/python.md, Plugins).",
    )
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.add_argument("--no-load", action="store_true", help="list them without importing them")
    _log_flags(p)
    p.set_defaults(func=_run_plugins)


def _run_plugins(args: argparse.Namespace) -> int:
    import json

    from .plugins import PluginError, installed

    rows = []
    failed = 0
    for plugin in installed():
        error = None
        if not args.no_load:
            try:
                plugin.load()
            except PluginError as exc:
                error = str(exc)
                failed += 1
                _log.error(error)
        rows.append((plugin, error))
    if args.json:
        print(json.dumps([
            {
                "group": p.group, "name": p.name, "value": p.value,
                "distribution": p.distribution, "version": p.version,
                "loaded": None if args.no_load else error is None, "error": error,
            }
            for p, error in rows
        ], indent=2))  # fmt: skip
    elif not rows:
        print("no gossamer plugin installed")
    else:
        for p, error in rows:
            state = "-" if args.no_load else ("ok" if error is None else "FAILED")
            dist = f"{p.distribution} {p.version}" if p.distribution else "?"
            print(f"{p.group}\t{p.name}\t{p.value}\t{dist}\t{state}")
    return Exit.USAGE if failed else Exit.OK


def _log_flags(p: Any) -> None:
    """--log-format and --log-level, on each command that says things on stderr."""
    p.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        help=f"diagnostics on stderr: human lines (default) or one JSON object a line, with "
        f"no progress display (default: ${logs.FORMAT_ENV})",
    )
    p.add_argument(
        "--log-level",
        choices=logs.LEVELS,
        help=f"the least severe diagnostics shown (default info, or ${logs.LEVEL_ENV})",
    )


def _progress(args: argparse.Namespace) -> Any:
    """Where a crawl shows its progress: stderr, unless -q or JSON logs (stderr is then the
    log records' alone, one JSON object a line)."""
    quiet = args.quiet or getattr(args, "log_format", None) == "json"
    return None if quiet else sys.stderr


def crawl_settings(args: argparse.Namespace) -> CrawlSettings:
    """The settings of a parsed `gossamer crawl` command line: its flags (None: not given)
    over its -s KEY=VALUE over GOSSAMER_* over --config FILE. Raises SettingsError."""
    from .config import AUTO, CrawlSettings, load_settings, parse_set_options

    flags = {name: getattr(args, name, None) for name in CrawlSettings.knob_fields()}
    flags["seeds"] = args.seeds or None
    flags["output"] = args.resume or args.output
    if args.redis:
        # local worker processes (`_check_workers`), not a setting of the crawl: neither the
        # flag nor GOSSAMER_WORKERS is one here
        flags["workers"] = AUTO
    overrides = parse_set_options(args.set_options)
    return load_settings(flags, config=args.config, overrides=overrides)


def _run_crawl(args: argparse.Namespace) -> int:
    from .config import SettingsError
    from .crawldir import CrawlError
    from .runner.run import run_crawl

    if args.redis:
        if args.recrawl:
            return _usage_error("--recrawl is for embedded crawls")
        args.output = args.output or Path("gossamer-worker")
        if args.resume is not None:
            return _resume_cluster_crawl(args)
        if args.crawl is not None:
            return _usage_error("--crawl ID is for --resume: a new crawl gets a new id")
    elif args.resume is _RESUME_IN_REDIS:
        return _usage_error(
            "--resume needs DIR, the crawl directory (or --redis URL: a cluster crawl)"
        )
    else:
        given = [flag for dest, flag in _cluster_flags().items() if getattr(args, dest) is not None]
        if given:
            return _usage_error(
                f"{given[0]} is for cluster crawls: add --redis URL, or leave {given[0]} out"
            )
        if args.resume and args.output and args.output.resolve() != args.resume.resolve():
            return _usage_error(
                f"--resume {args.resume} goes on in that directory; "
                f"-o {args.output} names another: leave -o out"
            )
    try:
        settings = crawl_settings(args)
        if args.redis:
            try:
                machines = _machines_of(args)
            except ValueError as exc:
                return _usage_error(str(exc))
            if (workers := _check_workers(args, settings, local=machines is None)) is None:
                return Exit.USAGE
            if (proxy_status := _check_proxy(settings)) is not None:
                return proxy_status
            from .cluster.control import run_cluster_crawl
            from .config import AUTO

            if machines is not None and args.workers in (None, AUTO):
                workers = None  # each machine's cores, or its workers=N
            return run_cluster_crawl(
                args.redis,
                settings,
                workers=workers,
                detach=bool(args.detach),
                progress=_progress(args),
                machines=machines,
            )
        if changed := settings.cluster.changed():  # from GOSSAMER_*, -s or --config
            name = changed[0]
            value = settings.knob(name)
            raise SettingsError(f"{name}: {value} is for cluster crawls (--redis)")
        if args.resume is None and not settings.seeds:
            return _usage_error(
                "no seed URL: give one or more, `gossamer crawl URL …` (or --seeds-file FILE)"
            )
        _check_workers(args, settings)
        return run_crawl(settings, resume=args.resume is not None, progress=_progress(args))
    except (SettingsError, CrawlError) as exc:
        return _usage_error(str(exc))


def _resume_cluster_crawl(args: argparse.Namespace) -> int:
    """`crawl --resume --redis URL [--crawl ID] [--workers N] [-o DIR] [--detach]`: the
    crawl goes on with the settings stored with it; a flag for one of them is refused."""
    from .config import AUTO, FLAG_NAMES, CrawlSettings

    if args.resume is not _RESUME_IN_REDIS:
        return _usage_error(
            f"--resume {args.resume}: a cluster crawl is resumed by its id, not a directory: "
            "--resume --redis URL --crawl ID"
        )
    given = [
        FLAG_NAMES.get(name, ("--" + name.replace("_", "-"),))[-1]
        for name in CrawlSettings.knob_fields()
        if name not in ("workers", "seeds", "output") and getattr(args, name, None) is not None
    ]
    given += ["SEED"] * bool(args.seeds) + ["--config"] * bool(args.config)
    given += ["-s"] * bool(args.set_options)
    if given:
        return _usage_error(
            f"{given[0]}: a resumed cluster crawl goes on with the settings stored with it; "
            f"leave {given[0]} out"
        )
    from .cluster.control import resume_cluster_crawl

    try:
        machines = _machines_of(args, the_crawls=True)
    except ValueError as exc:
        return _usage_error(str(exc))
    workers = args.workers
    if machines is not None and workers == AUTO:
        workers = None  # each machine's cores, or its workers=N
    return resume_cluster_crawl(
        args.redis,
        args.crawl,
        out=args.output,
        workers=workers,
        detach=bool(args.detach),
        progress=_progress(args),
        machines=machines,
    )


def _run_demo(args: argparse.Namespace) -> int:
    from .runner.demo import run_demo

    return run_demo(hosts=args.hosts, pages_mean=args.pages_mean, out=args.out)


def _add_worker(sub: Any) -> None:
    # internal (a pool's worker process): no help= keyword, so `gossamer --help` does not list
    # it (help=argparse.SUPPRESS still printed "crawl-worker ==SUPPRESS==")
    p = sub.add_parser("crawl-worker")
    p.add_argument("dir", type=Path)
    p.add_argument("--part", required=True)
    p.set_defaults(func=_run_worker)


def _run_worker(args: argparse.Namespace) -> int:
    from .runner.worker import run_worker

    return run_worker(args.dir, args.part)


def _redis_arguments(
    p: argparse.ArgumentParser, *, required: bool = True, stdin_url: bool = False
) -> None:
    env = os.environ.get("GOSSAMER_REDIS")
    p.add_argument(
        "--redis",
        metavar="URL",
        default=env,
        required=required and env is None,
        help="redis://host:port/db (or redis+sentinel://host:port,…/service/db) of the "
        "cluster (default: $GOSSAMER_REDIS)"
        + (
            "; `-`: the first line of standard input (the second: the password of a URL "
            "without one, or empty), which then stays open: a `stop` line or its end stops "
            "the worker (how `crawl --machines` starts workers over SSH)"
            if stdin_url else ""
        ),
    )
    p.add_argument("--crawl", metavar="ID", help="the crawl (default: the only running one)")


def _add_cluster(sub: Any) -> None:
    p = sub.add_parser(
        "worker",
        help="join a cluster crawl in Redis as a worker (from any machine)",
        description="Join a crawl created with `gossamer crawl --redis` and crawl until it "
        "finishes or is stopped. Outputs (WARC, crawl log, graph, stats) go to DIR/<worker id>/.",
    )
    _redis_arguments(p, stdin_url=True)
    p.add_argument("--capacity", type=float, default=1.0, help="relative capacity (default 1)")
    p.add_argument(
        "-o", "--output", type=Path, default=Path("gossamer-worker"), metavar="DIR",
        help="outputs go to DIR/<worker id>/ (default ./gossamer-worker)",
    )  # fmt: skip
    p.add_argument("--concurrency", type=int, help="hosts fetched at once (default: the crawl's)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    _log_flags(p)
    p.set_defaults(func=_run_cluster_worker)

    p = sub.add_parser("status", help="a cluster crawl's workers and totals")
    _redis_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    _log_flags(p)
    p.set_defaults(func=_run_status)

    p = sub.add_parser(
        "stop", help="stop a cluster crawl: every worker finishes its batches and exits"
    )
    _redis_arguments(p)
    p.add_argument("--wait", type=float, metavar="S", help="wait up to S seconds for the workers")
    _log_flags(p)
    p.set_defaults(func=_run_stop)

    p = sub.add_parser(
        "workers",
        help="scale a running crawl to --scale N workers: an embedded pool (DIR) or the "
        "local workers of a cluster crawl (--redis)",
        description="With DIR: the worker pool of the crawl running in DIR (`gossamer crawl "
        "--workers N`) grows or shrinks to N (1 to 64; docs/crawler.md). With --redis URL: "
        "local workers of a cluster crawl are started or stopped so that N run on this "
        "machine (docs/cluster.md); with --machines FILE too, or for a crawl started with "
        "a machine list (kept with it), so that N run across those machines, started over "
        "SSH (docs/deploy.md).",
    )
    p.add_argument("dir", type=Path, nargs="?", metavar="DIR", help="an embedded crawl's directory")
    _redis_arguments(p, required=False)
    p.add_argument(
        "--scale", type=int, required=True, metavar="N",
        help="workers on this machine (with a machine list: across its machines)",
    )  # fmt: skip
    p.add_argument(
        "-o", "--output", type=Path, default=Path("gossamer-worker"), metavar="DIR",
        help="outputs of started workers (default ./gossamer-worker; with --machines: on a "
        "machine whose line has no out=DIR, relative to its home)",
    )  # fmt: skip
    _machine_flags(p)
    _log_flags(p)
    p.set_defaults(func=_run_scale)


def _run_cluster_worker(args: argparse.Namespace) -> int:
    from .cluster.worker import worker_main

    url = args.redis
    if url == "-":  # a worker started over SSH (runner/machines.py): stdin is its channel
        from .runner.machines import read_url, watch_control

        url = read_url(sys.stdin)
        if not url:
            return _usage_error("--redis -: the first line of standard input is empty")
        watch_control(sys.stdin)
    return worker_main(
        url,
        args.crawl,
        capacity=args.capacity,
        out=args.output,
        concurrency=args.concurrency,
        progress=_progress(args),
    )


def _run_status(args: argparse.Namespace) -> int:
    from .cluster.control import status_main

    return status_main(args.redis, args.crawl, as_json=args.json)


def _run_stop(args: argparse.Namespace) -> int:
    from .cluster.control import stop_main

    return stop_main(args.redis, args.crawl, wait=args.wait)


def _run_scale(args: argparse.Namespace) -> int:
    if args.dir is not None:
        if args.crawl is not None:
            return _usage_error("--crawl ID is for a cluster crawl (--redis URL), not DIR")
        from .runner.pool import ScaleError, request_scale

        try:
            _log.info(request_scale(args.dir, args.scale))
        except ScaleError as exc:
            return _usage_error(str(exc))
        return Exit.OK
    if not args.redis:
        return _usage_error("give a crawl directory DIR or --redis URL (or $GOSSAMER_REDIS)")
    from .config import workers_problem

    if (problem := workers_problem(args.scale, none_ok=True)) is not None:
        return _usage_error(f"--scale {args.scale}: {problem}")
    from .cluster.control import workers_main

    try:
        machines = _machines_of(args, the_crawls=True)
    except ValueError as exc:
        return _usage_error(str(exc))
    return workers_main(args.redis, args.crawl, args.scale, out=args.output, machines=machines)


def _add_graph_follow(actions: Any) -> None:
    p = actions.add_parser(
        "follow",
        help="consume a cluster crawl's page events into its graph until the crawl ends",
        description="Read the crawl's page events from its Redis stream as the consumer group "
        "`graph` and apply them to the graph until the crawl ends (docs/cluster.md, \"The page "
        "events stream\"). Killed and started again (here or on another machine given the "
        "same --state), it goes on where it stopped.",
    )
    _redis_arguments(p)
    p.add_argument(
        "--state", type=Path, default=Path("gossamer-graph"), metavar="DIR",
        help="the consumer's journal goes to DIR/<crawl id>/ (default ./gossamer-graph)",
    )  # fmt: skip
    p.add_argument(
        "--consumer", default="graph", metavar="NAME",
        help="the consumer's name in the group (default graph)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _log_flags(p)
    p.set_defaults(func=_run_graph_follow)


def _run_graph_follow(args: argparse.Namespace) -> int:
    from .cluster.stream import follow_main

    return follow_main(
        args.redis, args.crawl, args.state, consumer=args.consumer, as_json=args.json
    )


def _add_gather(sub: Any) -> None:
    from .crawldir import ClusterDir

    p = sub.add_parser(
        "gather",
        help="copy every machine's worker directories into DIR over SSH, check, index, report",
        description="Copy the worker directories (w1/, w2/, …: WARCs, crawl logs, graph parts, "
        "stats) of every machine of --machines FILE into DIR over SSH (rsync when installed, "
        "else tar), only what DIR lacks or what grew; check each copied file's SHA-256 against "
        f"the machine's; write {ClusterDir(Path('DIR')).merged_index}, the merged CDXJ index "
        "of every worker's WARCs; "
        "then print `gossamer report DIR` (docs/deploy.md, \"Gathering the outputs\").",
    )
    p.add_argument("dir", type=Path, metavar="DIR", help="where the outputs go")
    p.add_argument(
        "--machines",
        type=Path,
        metavar="FILE",
        help="the machine list (default: $GOSSAMER_MACHINES)",
    )
    p.add_argument(
        "--ssh",
        metavar="CMD",
        help="the ssh command and its options (default: $GOSSAMER_SSH, else ssh)",
    )
    p.add_argument(
        "--remote-out",
        metavar="DIR",
        default="gossamer-worker",
        help="the workers' -o DIR on a machine whose line has no out=DIR (default "
        "gossamer-worker, relative to the remote home)",
    )
    p.add_argument(
        "--via",
        choices=("rsync", "tar"),
        help="how files are copied (default: rsync when installed, else tar over SSH)",
    )
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=_run_gather)


def _run_gather(args: argparse.Namespace) -> int:
    from .runner.gather import gather_main
    from .runner.machines import DEFAULT_SSH, MACHINES_ENV, SSH_ENV, read_machines

    path = args.machines or (Path(env) if (env := os.environ.get(MACHINES_ENV)) else None)
    if path is None:
        return _usage_error("give the machine list: --machines FILE (or $GOSSAMER_MACHINES)")
    try:
        machines = read_machines(path)
    except ValueError as exc:
        return _usage_error(str(exc))
    return gather_main(
        machines,
        args.dir,
        ssh=args.ssh or os.environ.get(SSH_ENV) or DEFAULT_SSH,
        out=args.remote_out,
        via=args.via,
        as_json=args.json,
    )


def _add_report(sub: Any) -> None:
    from .crawldir import CrawlDir

    p = sub.add_parser(
        "report",
        help="summarise a crawl directory, a cluster's output directory or a cluster crawl",
        description="DIR: a crawl directory, or a cluster's output directory (every worker's "
        "w1/, w2/, … summed). --redis URL instead: a cluster crawl's totals from Redis, "
        "workers on every machine included (docs/cluster.md, \"Outputs and `gossamer "
        "report`\").",
    )
    p.add_argument("dir", type=Path, nargs="?", metavar="DIR")
    p.add_argument(
        "--redis",
        metavar="URL",
        help="a cluster crawl's Redis, instead of DIR (default without DIR: $GOSSAMER_REDIS)",
    )
    p.add_argument("--crawl", metavar="ID", help="the cluster crawl (default: the only one)")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument(
        "--cdx",
        action="store_true",
        help=f"first (re)write {CrawlDir(Path('DIR')).cdx_index}, the CDXJ index of every "
        "WARC file (for pywb)",
    )
    _log_flags(p)
    p.set_defaults(func=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    redis = args.redis or (os.environ.get("GOSSAMER_REDIS") if args.dir is None else None)
    if args.dir is not None and args.redis:
        return _usage_error("give DIR or --redis URL, not both")
    if args.dir is None:
        if not redis:
            return _usage_error("give a crawl directory DIR or --redis URL (or $GOSSAMER_REDIS)")
        if args.cdx:
            return _usage_error("--cdx is for a crawl directory DIR")
        from .cluster.crawlreport import report_main

        return report_main(redis, args.crawl, as_json=args.json)
    if args.crawl is not None:
        return _usage_error("--crawl ID is for a cluster crawl (--redis URL), not DIR")
    from .report.cluster import print_directory_report
    from .report.crawl import write_report_cdx

    if args.cdx and (code := write_report_cdx(args.dir)):
        return code
    return print_directory_report(args.dir, as_json=args.json)


def _add_dashboard(sub: Any) -> None:
    p = sub.add_parser(
        "dashboard",
        help="watch and stop a crawl from a browser; /api/status, /events, /metrics",
        description="Serve a web page, a JSON status, server-sent events and Prometheus "
        "metrics for the crawl in DIR (an embedded crawl) or the cluster crawl in --redis "
        "(docs/dashboard.md).",
    )
    p.add_argument("dir", type=Path, nargs="?", metavar="DIR", help="a crawl directory")
    p.add_argument(
        "--redis",
        metavar="URL",
        help="a cluster crawl's Redis, instead of DIR (default without DIR: $GOSSAMER_REDIS)",
    )
    p.add_argument("--crawl", metavar="ID", help="the cluster crawl (default: the only one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8700, help="port to listen on (default 8700)")
    p.add_argument(
        "--token",
        help="required on every request (default: none on loopback; generated and printed "
        "for any other --host)",
    )
    _log_flags(p)
    p.set_defaults(func=_run_dashboard)


def _run_dashboard(args: argparse.Namespace) -> int:
    from .dashboard import dashboard_main

    redis = args.redis
    if redis is None and args.dir is None:
        redis = os.environ.get("GOSSAMER_REDIS")
    return dashboard_main(
        args.dir, redis=redis, crawl=args.crawl, host=args.host, port=args.port,
        token=args.token,
    )  # fmt: skip


def _add_graph(sub: Any) -> None:
    p = sub.add_parser(
        "graph",
        help="statistics and export of a crawled web graph (docs/graph.md)",
        description="SOURCE is a crawl directory (every worker's graph parts and crawl logs "
        "merged) or an edge list file (`src dst` per line, whitespace-separated, optional .gz, "
        "# or % comment lines, integer ids of any size), or a DIMACS file (`p sp N M`); "
        "`follow` consumes a cluster crawl's page events.",
    )
    g_sub = p.add_subparsers(dest="graph_command", required=True, metavar="ACTION")
    s = g_sub.add_parser(
        "stats", help="nodes, edges, components, degrees, distances, top pages by PageRank"
    )
    s.add_argument("source", type=Path, metavar="SOURCE", help="crawl directory or edge list")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    _log_flags(s)
    s.set_defaults(func=_run_graph_stats)
    e = g_sub.add_parser(
        "export",
        help="write the graph as GraphML, GEXF, Parquet, an edge list or DIMACS",
        description="GraphML, GEXF and Parquet carry each node's URL, host, status, depth, "
        "content type, in- and out-degree and PageRank, and each edge's kind "
        "(docs/graph.md, \"Exporting\").",
    )
    e.add_argument("source", type=Path, metavar="SOURCE", help="crawl directory or edge list")
    e.add_argument(
        "out", type=Path, nargs="?", metavar="OUT", help="the file to write (or give -o)"
    )
    e.add_argument(
        "-o", "--output", type=Path, metavar="OUT",
        help="the file to write (a directory for parquet)",
    )  # fmt: skip
    e.add_argument(
        "--format",
        required=True,
        metavar="FORMAT",
        help="graphml (Gephi, networkx), gexf (Gephi), parquet (a directory: nodes.parquet "
        "and edges.parquet, for pandas, DuckDB, polars), edgelist (src<TAB>dst) or dimacs "
        "(p sp N M / a U V 1, 1-based, as GraphBench reads it)",
    )
    e.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    _log_flags(e)
    e.set_defaults(func=_run_graph_export)
    _add_graph_follow(g_sub)


def _run_graph_stats(args: argparse.Namespace) -> int:
    import json

    from .graph import format_table, load_graph, statistics_of

    graph = load_graph(args.source)
    stats = statistics_of(graph.adj, pending=graph.pending, ids=graph.ids, urls=graph.urls)
    print(json.dumps(stats) if args.json else format_table(stats))
    return Exit.OK


def _run_graph_export(args: argparse.Namespace) -> int:
    from .graph import EXPORT_FORMATS, load_graph, write_graph

    if args.format not in EXPORT_FORMATS:  # checked here, not by argparse: one error line
        choices = ", ".join(EXPORT_FORMATS)
        raise ValueError(f"--format must be one of {choices}, not {args.format!r}")
    if (args.out is None) == (args.output is None):
        raise ValueError("give the file to write once: -o OUT (or OUT after SOURCE)")
    args.out = args.out or args.output
    if args.out.exists() and not args.force:  # before the (long) load
        raise ValueError(f"{args.out}: exists (give --force to overwrite it)")
    graph = load_graph(args.source)
    try:
        write_graph(graph, args.out, args.format, force=args.force)
    except OSError as exc:
        _log.error(f"{args.out}: cannot write: {exc}")
        return Exit.IOERR
    return Exit.OK


def _add_graphbench(sub: Any) -> None:
    p = sub.add_parser(
        "graphbench",
        help="benchmark and validate dynamic APSD and SCC algorithms (docs/graphbench.md)",
        description="SPAWC's GraphBench: feed edge insertion sequences to the dynamic "
        "all-pairs shortest distance (apsd) and strongly connected components (scc) "
        "algorithms, time them over trials with a timeout, validate them against scipy. A "
        "graph SOURCE is a DIMACS .gr file, an edge list, or a generator spec: complete:N, "
        "sparse:N[:M][:seed=S], dense:N[:DENSITY][:seed=S], ausiello:N, road:N[:seed=S], "
        "web:N[:FILE], sanity:1|2|3.",
    )
    b_sub = p.add_subparsers(dest="graphbench_command", required=True, metavar="ACTION")
    r = b_sub.add_parser("run", help="run algorithms on a graph: trials, timeout, validation")
    r.add_argument("--family", required=True, choices=("apsd", "scc"), help="apsd or scc")
    r.add_argument(
        "--algorithm", required=True, nargs="+", metavar="NAME",
        help="one or more registered algorithms (`gossamer graphbench list`), or all",
    )  # fmt: skip
    r.add_argument("--graph", required=True, metavar="SOURCE", help="file or generator spec")
    r.add_argument("--trials", type=int, default=3, metavar="N", help="runs each (default 3)")
    r.add_argument(
        "--timeout", type=float, default=60.0, metavar="S",
        help="stop a trial after S seconds and report it as timeout (default 60)",
    )  # fmt: skip
    r.add_argument(
        "--threshold", type=int, default=1, metavar="T",
        help="a batch algorithm's flush() every T edges (SPAWC's batch threshold; default 1)",
    )  # fmt: skip
    r.add_argument(
        "--validate", action="store_true",
        help="compare the final answer with scipy's; a difference exits 1 and names it",
    )  # fmt: skip
    r.add_argument("--show", action="store_true", help="print the final answer (n <= 30)")
    r.add_argument("--json", action="store_true", help="print one JSON list of the results")
    r.set_defaults(func=_run_graphbench, action="run")
    c = b_sub.add_parser("convert", help="convert a graph to DIMACS or an edge list")
    c.add_argument("source", metavar="IN", help="file or generator spec")
    c.add_argument("out", type=Path, metavar="OUT", help="the file to write")
    c.add_argument("--to", required=True, metavar="FORMAT", help="dimacs or edgelist")
    c.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    c.set_defaults(func=_run_graphbench, action="convert")
    s = b_sub.add_parser("list", help="the registered algorithms of each family")
    s.add_argument("--markdown", action="store_true", help="as a markdown table")
    s.set_defaults(func=_run_graphbench, action="list")
    e = b_sub.add_parser(
        "reproduce", help="SPAWC's Figures 9 and 15 again: markdown tables and PNG plots"
    )
    e.add_argument("-o", "--out", type=Path, required=True, metavar="DIR", help="output directory")
    e.add_argument("--quick", action="store_true", help="tiny sizes, 2 s timeout (for the tests)")
    e.add_argument(
        "--timeout", type=float, default=None, metavar="S",
        help="per trial (default 5, or 2 with --quick)",
    )  # fmt: skip
    e.add_argument(
        "--algorithm", nargs="+", metavar="NAME",
        help="run these (in each family that has them) instead of SPAWC's figures' algorithms",
    )  # fmt: skip
    e.set_defaults(func=_run_graphbench, action="reproduce")


def _run_graphbench(args: argparse.Namespace) -> int:
    from .graph.bench import _commands

    action = getattr(_commands, f"{args.action}_command")
    code: int = action(args)
    return code


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
    {
        "crawl", "crawl-worker", "report", "worker", "status", "stop", "workers", "experiment",
        "graph", "graphbench", "dashboard", "gather",
    }
)


def _stdout_is_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (poll says POLLERR)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poller.poll(0))
    except (OSError, ValueError):  # no stdout, or one without a file descriptor
        return False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # without building the parser (~1 s of imports): what a
        print(f"gossamer {__version__}")  # machine is asked before it takes workers
        return Exit.OK
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(with_testweb=command not in _LIGHT_COMMANDS)
    logs.configure()  # until the flags are read: an error meanwhile still says "gossamer: error:"
    try:
        args = parser.parse_args(argv)
        try:
            args.log_format, args.log_level = logs.check(
                getattr(args, "log_format", None), getattr(args, "log_level", None), os.environ
            )
        except ValueError:  # a bad GOSSAMER_LOG_*: said in the default format (below)
            logs.configure()
            raise
        logs.configure(args.log_format, args.log_level)
        result: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
    except BrokenPipeError:
        if not _stdout_is_closed():
            raise  # another pipe or socket (a worker's, Redis's): a real failure, not `| head`
        # the reader went away (`gossamer testweb info | head`): stop quietly. Python's recipe
        # (docs of the signal module, "Note on SIGPIPE"): point stdout at devnull so the flush
        # at exit does not raise again. Exit 0: the output was cut short on purpose.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return Exit.OK
    except ValueError as exc:
        _log.error(f"{exc}")
        parser.exit(Exit.USAGE)
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    return result


if __name__ == "__main__":
    sys.exit(main())
