"""The browser harness's helpers that need no browser: the PNG check of `screenshot` and the
/proc scan the cleanup relies on (gossamer.testweb._browser)."""

from __future__ import annotations

import io
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from PIL import Image  # matplotlib's dependency

import gossamer.testweb._browser as browser_module
from browser_fixtures import require_browser
from gossamer.testweb._browser import BrowserError, browser_processes, chromium_flags, png_size


def png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def test_png_size_of_a_valid_png() -> None:
    assert png_size(png(37, 11)) == (37, 11)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b"GIF89a" + b[6:], "bad signature"),
        (lambda b: b[:-1], "truncated PNG chunk"),
        (lambda b: b[:40], "truncated PNG chunk"),
        (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], "bad CRC"),  # IHDR's width
        (lambda b: b[: len(b) - 12], "out of order or missing"),  # IEND cut off
    ],
)
def test_png_size_refuses_a_damaged_png(damage: object, message: str) -> None:
    assert callable(damage)
    with pytest.raises(BrowserError, match=message):
        png_size(damage(png(8, 8)))


def test_png_size_refuses_a_png_without_image_data() -> None:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body).to_bytes(4, "big")
        return len(body).to_bytes(4, "big") + kind + body + crc

    header = (4).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")
    with pytest.raises(BrowserError, match="out of order or missing"):
        png_size(data)


def test_browser_processes_finds_the_group_and_the_directory(tmp_path: Path) -> None:
    """A process group's members and an outsider naming the directory are found; once they
    are dead (zombies included, until reaped) they are not."""
    sleeper = [sys.executable, "-c", "import time, sys; time.sleep(60)"]
    leader = subprocess.Popen([*sleeper, "leader"], start_new_session=True)
    outsider = subprocess.Popen([*sleeper, str(tmp_path / "home")], start_new_session=True)
    try:
        # Popen returns once exec has begun; the kernel sets the new command line a moment
        # later (seen: the outsider missing from one scan in 15)
        both = sorted([leader.pid, outsider.pid])
        deadline = time.monotonic() + 10
        while browser_processes(leader.pid, tmp_path) != both and time.monotonic() < deadline:
            time.sleep(0.01)
        assert browser_processes(leader.pid, tmp_path) == both
        leader.kill()
        outsider.kill()
        # not waited for: zombies once SIGKILL lands, which count as dead
        deadline = time.monotonic() + 10
        while browser_processes(leader.pid, tmp_path) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert browser_processes(leader.pid, tmp_path) == []
    finally:
        for proc in (leader, outsider):
            proc.kill()
            proc.wait(10)


def test_browser_processes_does_not_match_a_longer_directory(tmp_path: Path) -> None:
    """`root` browser1 is not a prefix match for browser10's processes."""
    other = tmp_path / "browser10"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(other / "profile")],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10  # until its command line is set (see above)
        while browser_processes(-1, other) != [proc.pid] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert browser_processes(-1, other) == [proc.pid]
        assert browser_processes(-1, tmp_path / "browser1") == []
    finally:
        proc.kill()
        proc.wait(10)


def test_chromium_flags(tmp_path: Path) -> None:
    flags = chromium_flags(tmp_path / "profile", (640, 480))
    assert "--headless=new" in flags and "--no-sandbox" in flags
    assert f"--user-data-dir={tmp_path / 'profile'}" in flags
    assert "--window-size=640,480" in flags


def test_no_chromium_skips_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser_module, "CHROMIUM_CANDIDATES", ("/nonexistent/chromium",))
    reason = browser_module.missing_browser_reason()
    assert reason == "chromium not found: install it (scripts/setup.sh installs chromium)"
    monkeypatch.delenv("GOSSAMER_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="browser tests need a browser: chromium"):
        require_browser()
    monkeypatch.setenv("GOSSAMER_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="browser tests need a browser: chromium"):
        require_browser()


def test_no_chromedriver_skips_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser_module, "CHROMEDRIVER_CANDIDATES", ("/nonexistent/chromedriver",))
    reason = browser_module.missing_browser_reason()
    assert reason is not None and reason.startswith("chromedriver not found")
