"""`python -m gossamer`: the same entry point as the `gossamer` command."""

import sys

from .cli import main

sys.exit(main())
