"""The `browser` fixture: a headless Chromium per test (a pytest plugin, registered by
tests/conftest.py). It is `gossamer.testweb._browser.start_browser` in the test's own temporary
directory: a fresh profile, a 1280x800 viewport, bounded timeouts, and every process it started
gone when the test ends, passed or failed (the teardown raises if one survived SIGKILL).

    def test_page(browser: Browser) -> None:
        browser.driver.get(url)
        wait_for_text(browser.driver, "#status", "running")

The tests skip, saying why, only when chromium or chromedriver is not installed (scripts/setup.sh
installs both: CI runs them). GOSSAMER_REQUIRE_BROWSER=1 makes that a failure instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from gossamer.testweb._browser import Browser

# gossamer.testweb._browser (and selenium: ~80 ms) is imported by the tests that use a browser
# only: this plugin is loaded by every pytest run, and by every pytest a test starts.


def require_browser() -> None:
    """Skip the test (or fail it, with GOSSAMER_REQUIRE_BROWSER=1) when there is no browser."""
    from gossamer.testweb._browser import missing_browser_reason

    reason = missing_browser_reason()
    if reason is None:
        return
    if os.environ.get("GOSSAMER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests need a browser: {reason}", pytrace=False)
    pytest.skip(f"browser tests need a browser: {reason}")


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """A headless Chromium for this test, stopped (all its processes) when the test ends."""
    from gossamer.testweb._browser import start_browser

    require_browser()
    with start_browser(tmp_path_factory.mktemp("browser")) as running:
        yield running
