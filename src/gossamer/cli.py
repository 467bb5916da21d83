"""The `gossamer` command: one entry point for every subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gossamer", description="A polite, fast, fault-tolerant web crawler."
    )
    parser.add_argument("--version", action="version", version=f"gossamer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    testweb = sub.add_parser(
        "testweb",
        help="the simulated web: serve, truth, audit, export, info",
        description="A deterministic simulated web on loopback that knows the right answer.",
    )
    tw_sub = testweb.add_subparsers(dest="testweb_command", required=True, metavar="ACTION")
    from .testing import cli_demo, cli_export, cli_serve, cli_truth

    cli_serve.register(tw_sub)
    cli_truth.register(tw_sub)
    cli_export.register(tw_sub)
    cli_demo.register(tw_sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
