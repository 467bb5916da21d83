"""Exit statuses of every `gossamer` subcommand: one table (docs/cli.md, "Exit codes").

The numbers follow BSD sysexits(3) where one fits, and the shell's 128+N for a signal, so a
script can tell "fix your input" from "try again later" from "interrupted"."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """What a `gossamer` process's exit status means."""

    OK = 0  # done: the crawl ended (its frontier empty, or a limit such as --max-pages reached)
    FAILURE = 1  # an unexpected error (a bug: please report it with the traceback)
    USAGE = 2  # bad input: flags, settings, seed URLs, a seed file, an unusable -o directory
    NOTHING_FETCHED = 3  # the crawl ran but no page was fetched (every fetch failed)
    UNAVAILABLE = 69  # EX_UNAVAILABLE: a service the command needs (Redis) cannot be reached
    IOERR = 74  # EX_IOERR: the outputs cannot be written (disk full, …); nothing is lost
    TEMPFAIL = 75  # EX_TEMPFAIL: not done yet, try again (`stop --wait S`: workers still running;
    # a cluster worker stopped while its Redis was down: its leases expire, their URLs go back)
    NOPERM = 77  # EX_NOPERM: Redis refused the password (or asks for one), or is not trusted
    INTERRUPTED = 130  # stopped by SIGINT (Ctrl-C); resumable
    TERMINATED = 143  # stopped by SIGTERM; resumable


MEANINGS: dict[int, str] = {
    Exit.OK: "done: the crawl ended (frontier empty, or a limit such as --max-pages reached)",
    Exit.FAILURE: "an unexpected error (a bug: report it with the traceback)",
    Exit.USAGE: "bad input: flags, settings, seed URLs or file, an unusable -o directory",
    Exit.NOTHING_FETCHED: "the crawl ran but fetched no page (every fetch failed)",
    Exit.UNAVAILABLE: "Redis (or another needed service) cannot be reached",
    Exit.IOERR: "the outputs cannot be written (disk full, or under --disk-margin, …); "
    "nothing is lost, resume later",
    Exit.TEMPFAIL: "not done yet: `gossamer stop --wait S` found workers still running after S "
    "s; or a worker stopped while Redis was unreachable gave up on it (--stop-patience): the "
    "URLs it held are fetched again once their leases expire",
    Exit.NOPERM: "Redis refused the password, or asks for one that was not given; or its TLS "
    "certificate is not trusted",
    Exit.INTERRUPTED: "stopped by SIGINT (Ctrl-C); resume to go on",
    Exit.TERMINATED: "stopped by SIGTERM; resume to go on",
}
