"""docs/cli.md, generated from the code: `python -m gossamer._clidoc > docs/cli.md`.

Every subcommand and flag (from the argparse parser), every crawl setting (from CrawlSettings)
and the exit codes (from gossamer.exitcodes.MEANINGS). tests/test_cli_docs.py fails when the file
differs from what this prints, so the reference cannot drift from the code."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .cli import build_parser
from .config import _LIMITS, _LIST_SPLIT, AUTO, NO_LIMIT, CrawlSettings
from .crawldir import MANIFEST
from .exitcodes import MEANINGS, Exit

REGENERATE = "python -m gossamer._clidoc > docs/cli.md"
#: the rows of "Common mistakes", recorded from real runs by scripts/common_mistakes.py
MISTAKES_FILE = Path(__file__).resolve().parents[2] / "docs" / "cli-mistakes.json"

_PREAMBLE = f"""\
# The `gossamer` command line

Every subcommand, flag, crawl setting and exit code, in one place. **Generated from the code**
by `.venv/bin/{REGENERATE}` (src/gossamer/_clidoc.py); tests/test_cli_docs.py fails when this
file differs from what the code generates, so do not edit it by hand: change the code's help
texts and regenerate. How the crawler works is in [crawler.md](crawler.md), cluster mode in
[cluster.md](cluster.md), the simulated web in [testweb.md](testweb.md).
"""

_SETTINGS_INTRO = f"""\
## Crawl settings

Every setting of `gossamer crawl` can be given four ways; the first one found wins:

1. its flag (below, and under `gossamer crawl`);
2. `-s KEY=VALUE` / `--set KEY=VALUE` (repeatable), KEY being the TOML key (`-` may stand for
   `_`), VALUE read as the environment variable's would be; an unknown KEY is an error that
   names the closest settings;
3. the environment variable `GOSSAMER_<KEY>`;
4. the TOML file of `--config FILE` (keys at top level or under `[crawl]`);

else the default. A setting of a group (the table's group column) may also be given in it: a
TOML table (`[politeness]` then `delay = 0`, or `[crawl.politeness]`) or a dotted key
(`-s politeness.delay=0`); its flag, variable and `{MANIFEST}` key stay the flat name
(`--delay`, `GOSSAMER_DELAY`, `delay`), and code reads `settings.politeness.delay`.

Values as text (`-s`, environment): numbers as written; booleans `true`,
`false`, `1`, `0`, `yes`, `no`, `on`, `off`; `{NO_LIMIT}` lifts a limit; a list is a JSON list
(`["a", "b"]`) or, for `seeds` and `resolve`, items split by whitespace or commas
(`GOSSAMER_SEEDS="http://a.example/ http://b.example/"`); for `allow` and `deny` the text is one
regex. Seeds are the SEED arguments (or the `seeds` setting) followed by the URLs of
`--seeds-file`; the file is read once, at start: `{MANIFEST}` keeps the resolved list and a
`--resume` does not read the file again.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _visible_subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, Any, str]]:
    """(name, parser, help) of each listed subcommand: hidden ones have no help entry."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield choice.dest, action.choices[choice.dest], choice.help or ""


def _invocation(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return formatter._format_action_invocation(action)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return str(parser._get_formatter()._expand_help(action))


def _command(lines: list[str], path: str, parser: argparse.ArgumentParser, summary: str) -> None:
    lines += ["", f"### `{path}`", ""]
    lines.append(parser.description or summary)
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help != argparse.SUPPRESS
            and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        ]
        if not actions:
            continue
        title = {"options": "options", "positional arguments": "arguments"}.get(
            group.title or "", group.title or ""
        )
        lines += ["", f"{title}:" if not group.description else f"{title}: {group.description}"]
        lines += ["", "| flag | meaning |", "|---|---|"]
        for a in actions:
            lines.append(f"| `{_cell(_invocation(parser, a))}` | {_cell(_help(parser, a))} |")
    for name, child, text in _visible_subcommands(parser):
        _command(lines, f"{path} {name}", child, text)


def _default(name: str, field: Any) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None and name == "workers":
        return AUTO
    if value is None:
        return NO_LIMIT if name in _LIMITS else "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[]" if not value else repr(value)
    return str(value)


def _settings(lines: list[str], crawl: argparse.ArgumentParser) -> None:
    lines += ["", _SETTINGS_INTRO.rstrip()]
    lines += [
        "",
        "| TOML key | group | flag | environment | default | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for name, (group, field) in CrawlSettings.knob_fields().items():
        flags = [
            "`" + _cell(_invocation(crawl, a)) + "`"
            for a in crawl._actions
            if a.dest == name and a.option_strings
        ]
        if name == "seeds":
            flags = ["`SEED ...`"]
        meaning = field.description or ""
        if name in _LIST_SPLIT:
            meaning += " (a list)"
        lines.append(
            f"| `{name}` | {'`' + group + '`' if group else '—'} | "
            f"{', '.join(flags) or '`-s ' + name + '=…`'} | "
            f"`GOSSAMER_{name.upper()}` | `{_cell(_default(name, field))}` | {_cell(meaning)} |"
        )


def _command_line(args: list[str], env: dict[str, str] | None = None) -> str:
    words = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    return " ".join([*words, "gossamer", *map(shlex.quote, args)])


def _code(text: str) -> str:
    """`text` as inline code in a table cell (backticks inside it doubled around)."""
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{_cell(text)}{pad}{fence}"


def _mistakes(lines: list[str]) -> None:
    """The "Common mistakes" table from MISTAKES_FILE (none: no section)."""
    if not MISTAKES_FILE.is_file():
        return
    rows = json.loads(MISTAKES_FILE.read_text())
    lines += [
        "",
        "## Common mistakes",
        "",
        "What a new user's mistakes get, recorded from real runs against a static site served "
        "by nginx on a free loopback port (PORT; OTHER_PORT: a port where nothing listens), "
        "each in a fresh directory, by `scripts/common_mistakes.py`, which rewrites this "
        "table; tests/e2e/test_cli_mistakes.py replays the rows that need no server. A crawl "
        "that ran also prints its end summary (\"+ summary\", left out here). *Afterwards*: "
        "what the directory holds, and the fix run next in it.",
        "",
        "| mistake | command | stderr | exit | afterwards |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        said = "<br>".join(_code(line) for line in row["stderr"]) or "(nothing)"
        if row["summary"]:
            said += " + summary"
        after = row["after"]
        if row.get("one_core"):
            after += " (run on one core)"
        if "fix" in row:
            fix = row["fix"]
            told = "<br>".join(_code(line) for line in fix["stderr"])
            after += f"; then {_code(_command_line(fix['args']))}: exit {fix['exit']}"
            after += f" {told}" if told else ""
        lines.append(
            f"| {_cell(row['what'])} | {_code(_command_line(row['args'], row['env']))} | "
            f"{said} | {row['exit']} `{Exit(row['exit']).name}` | {after} |"
        )


def render() -> str:
    """docs/cli.md's text."""
    parser = build_parser()
    lines = [_PREAMBLE.rstrip(), "", "## Exit codes", ""]
    lines.append(
        "The same table for every subcommand (src/gossamer/exitcodes.py). Output into a pipe "
        "whose reader has gone (`gossamer testweb info | head`) ends quietly, status 0."
    )
    lines += ["", "| status | name | meaning |", "|---|---|---|"]
    for code in sorted(MEANINGS):
        lines.append(f"| {code} | `{Exit(code).name}` | {_cell(MEANINGS[code])} |")
    _mistakes(lines)
    commands = dict((n, p) for n, p, _ in _visible_subcommands(parser))
    _settings(lines, commands["crawl"])
    lines += ["", "## Commands", "", "`gossamer --help` lists them; `gossamer COMMAND --help`"]
    lines[-1] += " shows one."
    for name, child, text in _visible_subcommands(parser):
        _command(lines, f"gossamer {name}", child, text)
    return "\n".join(lines) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
