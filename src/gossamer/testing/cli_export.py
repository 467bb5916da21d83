"""Placeholder: filled in by its owner (see docs/testweb.md)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add this module's `gossamer testweb` actions to the subparsers `sub`."""
    _ = argparse
