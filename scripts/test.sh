#!/usr/bin/env bash
# The whole test suite: lint, types, then pytest (unit, contract, end-to-end), over
# GOSSAMER_TEST_PROCS pytest-xdist workers (default 1: serially in one process; 2 or more:
# one test file to a worker, `--dist loadfile`). Arguments go to pytest, after the
# default (a caller's --dist wins); a caller's own -n/--numprocesses or `-p no:xdist` replaces it.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check src tests bench
.venv/bin/mypy
procs=${GOSSAMER_TEST_PROCS:-1}
case $procs in
  ''|*[!0-9]*) echo "test.sh: GOSSAMER_TEST_PROCS must be a number, got '$procs'" >&2; exit 2 ;;
esac
parallel=(-n "$procs" --dist loadfile)
[ "$procs" -le 1 ] && parallel=()
prev=""
for arg in "$@"; do
  case $arg in
    -n*|--numprocesses|--numprocesses=*|-pno:xdist) parallel=() ;;
    no:xdist) [ "$prev" = "-p" ] && parallel=() ;;
  esac
  prev=$arg
done
exec .venv/bin/python -m pytest ${parallel[@]+"${parallel[@]}"} "$@"
