"""gossamer: a polite, fast, fault-tolerant web crawler."""

from ._version import __version__

__all__ = ["__version__"]
