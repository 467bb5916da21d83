"""The rule for a directory a command writes new outputs into (`crawl -o`, `demo -o`, a
cluster worker's `DIR/<worker id>/`): it must not exist yet, or be an empty directory.

A directory that holds other files is refused before anything is written, so a command never
overwrites or mixes with files it did not write (`gossamer crawl -o` into a directory with a
`stats.json` once replaced it). Imports nothing of gossamer: the simulated web's commands use
it too.
"""

from __future__ import annotations

from pathlib import Path


def new_directory_problem(
    out: Path,
    *,
    what: str | None = None,
    holds: str = "",
    fix: str = "give a new or empty directory",
) -> str | None:
    """Why `out` cannot take a command's new outputs (None when it can): the error line's
    text, naming the directory (`what`, default `-o OUT`), what is in it (then `holds`,
    e.g. ", not a gossamer crawl") and what to do (`fix`)."""
    what = what or f"-o {out}"
    try:
        if not out.exists():
            return None
        if not out.is_dir():
            return f"{what}: exists and is not a directory; {fix}"
        entries = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        return f"{what}: cannot read it ({exc.strerror or exc}); {fix}"
    if not entries:
        return None
    more = len(entries) - 3
    shown = ", ".join(entries[:3]) + (f" and {more} more" if more > 0 else "")
    return f"{what}: the directory holds other files ({shown}){holds}; nothing was written: {fix}"
