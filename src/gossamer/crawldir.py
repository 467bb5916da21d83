"""The crawl directory: the names of the files a crawl keeps in it, and its lock.

Every module that reads or writes a crawl directory takes the names from here; none spells
them itself. Imports nothing of gossamer, so every package may use it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = ["LOCK", "MANIFEST", "CrawlError", "dir_lock"]

#: the crawl's settings (also the `testweb audit --crawl` contract)
MANIFEST: Final = "crawl.json"
#: held (flock) while a crawler runs in the directory
LOCK: Final = "lock"


class CrawlError(RuntimeError):
    """A crawl could not start or continue; the message says why. Nothing is lost."""


@contextmanager
def dir_lock(out: Path) -> Iterator[None]:
    """Hold the crawl directory's lock, writing this process's pid into it; CrawlError when
    another process holds it."""
    path = out / LOCK
    fh = path.open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise CrawlError(f"another crawler is running in {out} (lock held)") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()
