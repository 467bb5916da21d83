"""The actions of `gossamer graphbench` (docs/graphbench.md); cli.py holds their flags.

Bad input (an unknown algorithm, an unreadable graph, a bad spec) raises ValueError, which
`gossamer` prints as one error line with exit status 2 (Exit.USAGE). A run whose answer differs
from the reference, or whose algorithm raised, exits 1 (Exit.FAILURE) after printing every
result; a timeout is a result, not a failure (exit 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ...exitcodes import Exit
from ._api import APSD, FAMILIES, SCC, Family
from ._graphs import CONVERT_FORMATS, graph_source, write_graph_file
from ._harness import SHOW_MAX_N, RunResult, format_answer, run_all

__all__ = ["convert_command", "list_command", "list_markdown", "reproduce_command", "run_command"]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.6f}"


def _report_line(result: RunResult, width: int = 16) -> str:
    memory = "-" if result.memory is None else f"{result.memory / 2**20:.1f} MiB"
    validation = {None: "not validated", True: "passed", False: "FAILED"}[result.validated]
    status = result.status if result.status != "failed" else "wrong answer"
    line = (
        f"{result.algorithm:<{width}} {result.graph:<24} n={result.n:<6} m={result.m:<8} "
        f"trials={len(result.trials):<2} min={_seconds(result.min)} "
        f"mean={_seconds(result.mean)} stdev={_seconds(result.stdev)} memory={memory} "
        f"{status}, {validation}"
    )
    if result.error:
        line += f"\n  {result.error}"
    if result.difference:
        line += f"\n  validation FAILED: {result.difference}"
    return line


def run_command(args: argparse.Namespace) -> int:
    family: Family = args.family
    seq = graph_source(args.graph)
    if args.show and seq.n > SHOW_MAX_N:
        raise ValueError(
            f"--show prints an n × n result: {seq.name} has {seq.n} vertices, more than "
            f"{SHOW_MAX_N} (leave out --show)"
        )
    try:
        results = run_all(
            family, list(args.algorithm), seq, trials=args.trials, timeout=args.timeout,
            threshold=args.threshold, validate=args.validate, keep_answer=args.show,
        )  # fmt: skip
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None
    if args.json:
        print(json.dumps([r.as_json() for r in results]))
    else:
        print(f"graph {seq.name}: {seq.n} vertices, {seq.m} edges, density {seq.density:.2%}")
        width = max(16, *(len(r.algorithm) for r in results))
        for result in results:
            print(_report_line(result, width))
            if args.show and result.answer is not None:
                print(format_answer(family, result.answer))
    bad = [r for r in results if r.status in ("failed", "error")]
    for result in bad:
        what = "wrong answer" if result.status == "failed" else "error"
        print(f"gossamer: {result.algorithm}: {what} on {seq.name}", file=sys.stderr)
    return Exit.FAILURE if bad else Exit.OK


def convert_command(args: argparse.Namespace) -> int:
    if args.to not in CONVERT_FORMATS:
        raise ValueError(f"--to must be one of {', '.join(CONVERT_FORMATS)}, not {args.to!r}")
    if args.out.exists() and not args.force:  # before reading a large input
        raise ValueError(f"{args.out}: exists (give --force to overwrite it)")
    seq = graph_source(str(args.source))
    try:
        write_graph_file(seq, args.out, args.to, force=args.force)
    except OSError as exc:
        print(f"gossamer: {args.out}: cannot write: {exc}", file=sys.stderr)
        return Exit.IOERR
    print(f"wrote {args.out}: {seq.n} vertices, {seq.m} edges ({args.to})")
    return Exit.OK


def list_markdown() -> str:
    """The registered algorithms as a markdown table (docs/graphbench.md embeds it)."""
    lines = ["| family | algorithm | batch | max n | what it is |", "|---|---|---|---|---|"]
    for family, table in (("apsd", APSD), ("scc", SCC)):
        for name, (info, _) in table.items():
            batch = "yes" if info.batch else "no"
            max_n = "-" if info.max_n is None else str(info.max_n)
            lines.append(f"| {family} | `{name}` | {batch} | {max_n} | {info.summary} |")
    return "\n".join(lines)


def list_command(args: argparse.Namespace) -> int:
    if args.markdown:
        print(list_markdown())
        return Exit.OK
    width = max(16, *(len(name) for name in [*APSD, *SCC]))
    for family in FAMILIES:
        table = APSD if family == "apsd" else SCC
        print(f"{family}: {len(table)} algorithm(s)")
        for name, (info, _) in table.items():
            flags = (" [batch]" if info.batch else "") + (
                f" [n <= {info.max_n}]" if info.max_n is not None else ""
            )
            print(f"  {name:<{width}} {info.summary}{flags}")
    return Exit.OK


def reproduce_command(args: argparse.Namespace) -> int:
    from ._reproduce import ReproduceOptions, reproduce

    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise ValueError(f"-o {out}: exists and is not a directory")
    if args.timeout is not None and args.timeout <= 0:
        raise ValueError(f"--timeout must be positive, not {args.timeout}")
    only = tuple(args.algorithm) if args.algorithm else None
    if only is not None:
        unknown = [a for a in only if a not in APSD and a not in SCC]
        if unknown:
            known = ", ".join(dict.fromkeys([*APSD, *SCC])) or "none"
            raise ValueError(f"no algorithm {unknown[0]!r} in any family (known: {known})")
    options = ReproduceOptions(out=out, quick=args.quick, timeout=args.timeout, algorithms=only)
    try:
        result = reproduce(options, progress=lambda line: print(line, flush=True))
    except OSError as exc:
        print(f"gossamer: {out}: cannot write: {exc}", file=sys.stderr)
        return Exit.IOERR
    for path in result.files:
        print(f"wrote {path}")
    print(f"reproduce: {result.seconds:.1f} s")
    for what in result.wrong:
        print(f"gossamer: wrong answer: {what}", file=sys.stderr)
    return Exit.FAILURE if result.wrong else Exit.OK
