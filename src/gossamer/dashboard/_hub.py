"""What the dashboard's two hubs share (`StatusHub` in _app.py, `LogHub` in _logtail.py): a
source read every `interval` seconds, off the event loop, only while some stream is open,
and streams that wait on a condition the reads notify."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

_log = logging.getLogger(__name__)

__all__ = ["PollingHub"]


class PollingHub:
    """`poll` (a subclass's read, which notifies `_changed` when it brought something new)
    runs every `interval` s while `stream_open` is held by any stream; `wait_until` is a
    stream's wait. `what`: the thing read, for the warning a failed read logs."""

    what = "status"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._changed = asyncio.Condition()
        self._streams = 0
        self._has_streams = asyncio.Event()

    async def poll(self) -> object:
        raise NotImplementedError

    async def run(self) -> None:
        """(The app's lifespan owns it.) Poll while streams are open."""
        while True:
            await self._has_streams.wait()
            try:
                await self.poll()
            except Exception as exc:  # a source that fails now may answer next time
                _log.warning(f"dashboard: reading the crawl's {self.what} failed: {exc}")
            await asyncio.sleep(self.interval)

    async def wait_until(self, done: Callable[[], bool], within: float) -> bool:
        """Wait until `done()` holds (True) or `within` seconds passed (False)."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within):
                    await self._changed.wait_for(done)
            return done()

    @contextlib.contextmanager
    def stream_open(self) -> Iterator[None]:
        self._streams += 1
        self._has_streams.set()
        try:
            yield
        finally:
            self._streams -= 1
            if not self._streams:
                self._has_streams.clear()
