#!/usr/bin/env bash
# The whole test suite: lint, types, then pytest (unit, contract, end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check src tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
