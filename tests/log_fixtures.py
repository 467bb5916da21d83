"""The `human_logs` fixture: library diagnostics on stderr as the `gossamer` command shows them.

Library code logs (gossamer.logs) and only the command configures where the records go; a test
that calls library code directly and reads its stderr lines (capsys) configures the same human
format first, and hands logging back afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gossamer import logs


@pytest.fixture
def human_logs() -> Iterator[None]:
    logs.configure("human", "info")
    try:
        yield
    finally:
        logs.unconfigure()
