"""The Python API's reference, generated from its docstrings with pdoc (docs/python.md,
"API reference"): the public names of `gossamer` and `gossamer.graph`, no internals.

    .venv/bin/python scripts/apidoc.py OUT_DIR      # then open OUT_DIR/index.html

Warnings are errors (a docstring pdoc cannot render, a name it cannot find): exit 1."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

#: what is documented: the package's top level and the graph helpers, not their submodules
MODULES = ("gossamer", r"!gossamer\..*", "gossamer.graph", r"!gossamer\.graph\..*")


def build(out: Path) -> None:
    import pdoc

    pdoc.render.configure(docformat="markdown", footer_text="gossamer's Python API")
    pdoc.pdoc(*MODULES, output_directory=out)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    warnings.simplefilter("error")
    build(Path(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
