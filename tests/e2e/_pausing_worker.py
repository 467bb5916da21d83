"""`gossamer worker` that SIGSTOPs the crawl's redis-server (pid in GOSSAMER_TEST_REDIS_PID)
at one precise point of its life (GOSSAMER_TEST_PAUSE_AT), so that a test can hold Redis
paused exactly there — a pause from outside the worker could not be timed to a point
milliseconds long. Nothing else changes: the real worker runs, against the real server.

  join    right after the worker got its id (`Membership.new_id`), before its event loop
          starts: its first beat and the opening of its frontier meet a paused Redis
  leave   as the crawl ends (`JoinedWorker._leave`, before marking the crawl finished): leaving,
          the final statistics and closing the frontier meet a paused Redis

Usage: python _pausing_worker.py WORKER-ARGS…  (the arguments of `gossamer worker`)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from gossamer.cli import main
from gossamer.cluster import joined, members

REDIS_PID = int(os.environ["GOSSAMER_TEST_REDIS_PID"])
AT = os.environ["GOSSAMER_TEST_PAUSE_AT"]


def _pause() -> None:
    os.kill(REDIS_PID, signal.SIGSTOP)


if AT == "join":
    new_id = members.Membership.new_id

    def _new_id_then_pause(self: Any) -> str:
        got = new_id(self)
        _pause()
        return got

    members.Membership.new_id = _new_id_then_pause  # type: ignore[method-assign]
elif AT == "leave":
    leave = joined.JoinedWorker._leave

    def _pause_then_leave(self: Any) -> None:
        _pause()
        leave(self)

    joined.JoinedWorker._leave = _pause_then_leave  # type: ignore[method-assign]
else:
    raise SystemExit(f"GOSSAMER_TEST_PAUSE_AT: join or leave, not {AT!r}")

sys.exit(main(["worker", *sys.argv[1:]]))
