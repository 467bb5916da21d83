"""gossamer: a polite, fast, fault-tolerant web crawler."""

__version__ = "0.1.0"
