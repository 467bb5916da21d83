"""Headless Chromium for the dashboard's end-to-end tests, its screenshots and its benchmark.

    with start_browser(tmp_dir) as browser:
        browser.driver.get(url)
        wait_for_text(browser.driver, "#status", "running")
        screenshot(browser.driver, "docs/dashboard/status.png")

It is in the package because the dashboard's cost benchmark and the screenshots need the same
browser as the tests (tests/browser_fixtures.py wraps it in the `browser` fixture). selenium is
a dev dependency, so `gossamer.testweb` does not import this module. Debian's chromium and
chromedriver are given to selenium by path, so nothing is ever downloaded. Cleanup is
guaranteed: on exit every process of the browser's group, or naming its directory, is killed
and waited for (docs/dashboard.md, "Browser tests")."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver import ChromeOptions, Remote
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chromium.remote_connection import ChromiumRemoteConnection
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.client_config import ClientConfig
from selenium.webdriver.remote.webelement import WebElement

T = TypeVar("T")

# The real binary, not the /usr/bin/chromium wrapper: the wrapper sources /etc/chromium.d/*,
# which adds host-dependent flags (extensions, GPU rasterization) and, on this machine, fails
# its own /dev/shm test ("[: 24692547584: unexpected operator") — a browser test must not
# depend on the host's config files.
CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser")
CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver", "chromedriver")
WINDOW_SIZE = (1280, 800)  # the viewport: what the page (and a screenshot) is given
# Below this much free /dev/shm, Chromium writes its shared memory to /tmp instead
# (--disable-dev-shm-usage): renderers crash ("Aw, Snap!") when /dev/shm fills, and Docker's
# default /dev/shm is 64 MB. Debian's wrapper uses the same switch (at 3.8 GB); 512 MB is well
# above what one headless tab uses (≈ 10 MB of /dev/shm here) and keeps the faster /dev/shm on
# hosts that have it (24 GB free on the development machine).
MIN_DEV_SHM_FREE = 512 * 1024 * 1024
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class BrowserError(RuntimeError):
    """Chromium or chromedriver is missing, did not start, or left processes behind."""


class BrowserTimeout(AssertionError):
    """A `wait_for*` condition did not hold in time; the message says what was last seen."""


def _find(candidates: tuple[str, ...]) -> str | None:
    for candidate in candidates:
        path = candidate if os.path.isabs(candidate) else shutil.which(candidate)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def find_chromium() -> str:
    """The Chromium binary; raises BrowserError when there is none."""
    path = _find(CHROMIUM_CANDIDATES)
    if path is None:
        raise BrowserError("chromium not found: install it (scripts/setup.sh installs chromium)")
    return path


def find_chromedriver() -> str:
    """The chromedriver binary; raises BrowserError when there is none."""
    path = _find(CHROMEDRIVER_CANDIDATES)
    if path is None:
        raise BrowserError(
            "chromedriver not found: install it (scripts/setup.sh installs chromium-driver)"
        )
    return path


def missing_browser_reason() -> str | None:
    """Why no browser test can run here (chromium or chromedriver not installed), else None."""
    try:
        find_chromium()
        find_chromedriver()
    except BrowserError as exc:
        return str(exc)
    return None


@cache
def _major_versions(chromium: str, chromedriver: str) -> tuple[str, str]:
    def version(binary: str) -> str:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
        # "Chromium 156.0.8078.108 built on Debian ..." / "ChromeDriver 156.0.8078.108 (...)"
        words = [w for w in out.split() if w[:1].isdigit()]
        if not words:
            raise BrowserError(f"{binary} --version printed no version: {out.strip()!r}")
        return words[0].split(".")[0]

    return version(chromium), version(chromedriver)


def chromium_flags(profile_dir: Path, window: tuple[int, int] = WINDOW_SIZE) -> list[str]:
    """The command-line switches the tests' Chromium runs with (each one says why)."""
    flags = [
        # the new headless mode is the real browser (same rendering, same event loop as a
        # window); the old one is a separate implementation
        "--headless=new",
        # As root Chromium refuses to start without it ("Running as root without --no-sandbox
        # is not supported", measured here), and as another user Debian's Chromium needs
        # unprivileged user namespaces, which containers often forbid. The sandbox protects
        # against hostile pages; these tests load only their own pages from loopback.
        "--no-sandbox",
        f"--user-data-dir={profile_dir}",  # a fresh profile per browser: no state between tests
        f"--window-size={window[0]},{window[1]}",  # then grown to make this the viewport
        "--force-device-scale-factor=1",  # screenshots are window-size pixels on every host
        "--hide-scrollbars",  # and do not show a host-dependent scrollbar
        "--lang=en-US",
        "--no-proxy-server",  # the pages are on loopback; an http_proxy in the environment
        "--no-first-run",
        "--no-default-browser-check",
    ]
    with suppress(OSError):
        shm = os.statvfs("/dev/shm")
        if shm.f_bavail * shm.f_frsize < MIN_DEV_SHM_FREE:
            flags.append("--disable-dev-shm-usage")
    return flags


@dataclass
class Browser:
    """A running headless Chromium and its chromedriver."""

    driver: Remote
    root: Path  # the per-browser directory: profile, HOME, chromedriver's log
    process_group: int  # chromedriver's pid: Chromium and its helpers share the group
    startup_seconds: float  # chromedriver start to a ready session (about:blank)

    def processes(self) -> list[int]:
        """The pids of this browser's live processes (chromedriver, Chromium, its helpers)."""
        return browser_processes(self.process_group, self.root)

    def memory_pss(self) -> int:
        """Proportional set size of all its processes, bytes (shared pages counted once)."""
        return pss_bytes(self.processes())

    def log_tail(self, n: int = 2000) -> str:
        """The end of chromedriver's log (Chromium's stderr is in it too)."""
        try:
            return (self.root / "chromedriver.log").read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"


@contextmanager
def start_browser(
    root: Path | str,
    *,
    window: tuple[int, int] = WINDOW_SIZE,
    command_timeout: float = 30.0,
    page_load_timeout: float = 15.0,
    script_timeout: float = 10.0,
    stop_timeout: float = 10.0,
) -> Iterator[Browser]:
    """Start headless Chromium with a fresh profile in `root` (an empty directory) and a
    viewport of `window` pixels; always stop it and every process it started on exit, within
    `stop_timeout` seconds.

    `command_timeout` bounds each WebDriver command (selenium's default for Chrome is 120 s; a
    page load that hangs was measured to hold a test that long), `page_load_timeout` a `get`,
    `script_timeout` an `execute_async_script`. Raises BrowserError if it cannot start, or if a
    process survived SIGKILL (checked even when the body raised).
    """
    root = Path(root).resolve()
    chromium, chromedriver = find_chromium(), find_chromedriver()
    majors = _major_versions(chromium, chromedriver)
    if majors[0] != majors[1]:
        raise BrowserError(
            f"chromium {majors[0]} and chromedriver {majors[1]} differ: install both from the "
            "same source (scripts/setup.sh installs Debian's chromium and chromium-driver)"
        )
    profile = root / "profile"
    home = root / "home"
    profile.mkdir(parents=True, exist_ok=True)
    home.mkdir(exist_ok=True)
    options = ChromeOptions()
    options.binary_location = chromium
    for flag in chromium_flags(profile, window):
        options.add_argument(flag)
    env = dict(os.environ)
    # Chromium's crash handler writes to $HOME/.config/chromium/Crash Reports and runs outside
    # the process group (it daemonizes): with HOME here it writes nothing outside `root`, and
    # its command line names `root`, which is how the cleanup finds it.
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    env.update(XDG_CACHE_HOME=str(home / ".cache"))
    service = Service(
        executable_path=chromedriver,
        log_output=str(root / "chromedriver.log"),
        env=env,
        popen_kw={"start_new_session": True},
    )
    started = time.monotonic()
    try:
        service.start()  # bounded by selenium: ~30 s, then WebDriverException
    except WebDriverException as exc:
        raise BrowserError(f"chromedriver did not start: {exc.msg}") from exc
    process = service.process
    group = process.pid
    driver: Remote | None = None
    try:
        connection = ChromiumRemoteConnection(
            remote_server_addr=service.service_url,
            vendor_prefix="goog",
            browser_name="chrome",
            ignore_proxy=True,  # chromedriver is on loopback, never behind a proxy
            client_config=ClientConfig(
                remote_server_addr=service.service_url,
                keep_alive=True,
                timeout=int(command_timeout),
            ),
        )
        try:
            driver = Remote(command_executor=connection, options=options)
        except WebDriverException as exc:
            raise BrowserError(f"Chromium did not start: {exc.msg}") from exc
        driver.set_page_load_timeout(page_load_timeout)
        driver.set_script_timeout(script_timeout)
        _fit_viewport(driver, window)
        browser = Browser(driver, root, group, time.monotonic() - started)
        yield browser
    finally:
        _stop(driver, service, group, root, stop_timeout)


def _fit_viewport(driver: Remote, viewport: tuple[int, int]) -> None:
    """Resize the window so the page's viewport (what a screenshot shows) is `viewport`: new
    headless keeps room for a window's toolbars (--window-size=1280,800 gives a 1280x657
    viewport here), and that room differs between Chromium versions."""
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    outer = driver.get_window_size()
    width = outer["width"] + viewport[0] - int(inner[0])
    height = outer["height"] + viewport[1] - int(inner[1])
    if (width, height) != (outer["width"], outer["height"]):
        driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    if (int(inner[0]), int(inner[1])) != viewport:
        raise BrowserError(f"viewport is {inner[0]}x{inner[1]}, not {viewport[0]}x{viewport[1]}")


def _stop(driver: Remote | None, service: Service, group: int, root: Path, timeout: float) -> None:
    """Quit the session (Chromium closes cleanly), stop chromedriver, then SIGKILL whatever is
    left of the group or names `root`, and wait until none of it is alive."""
    if driver is not None:
        with suppress(Exception):  # a dead chromedriver: the kill below cleans up
            driver.quit()
    with suppress(Exception):
        service.stop()
    deadline = time.monotonic() + timeout
    survivors = browser_processes(group, root)
    while survivors:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        for pid in survivors:  # the crash handler, outside the group
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise BrowserError(f"browser processes survived SIGKILL: {survivors}")
        time.sleep(0.02)
        survivors = browser_processes(group, root)
    with suppress(OSError, subprocess.TimeoutExpired):
        service.process.wait(1)  # chromedriver is our child: reap it


def _stat_fields(pid: str) -> tuple[str, int] | None:
    """(state, process group) of a process, None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
    return fields[0], int(fields[2])


def browser_processes(group: int, root: Path) -> list[int]:
    """Live processes (zombies are dead) in process group `group` or whose command line
    contains `root` — a browser's processes, found in /proc."""
    # with the separator: /tmp/t/browser1 must not match /tmp/t/browser10's processes (every
    # process of ours names a path inside root: root/profile, root/home/...)
    marker = os.path.join(root, "").encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat_fields(entry)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        if stat[1] != group:
            try:
                if marker not in Path(f"/proc/{entry}/cmdline").read_bytes():
                    continue
            except OSError:
                continue
        found.append(int(entry))
    return sorted(found)


def pss_bytes(pids: list[int]) -> int:
    """Sum of the processes' proportional set sizes (/proc/PID/smaps_rollup), bytes."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError):
            continue  # gone meanwhile
    return total


# --- waiting for states -------------------------------------------------------------------
# Each helper polls every 20 ms until its condition holds (a page's state, never a fixed time)
# and fails with what it last saw. 20 ms: one poll is a WebDriver round trip (~2-5 ms here).

POLL_SECONDS = 0.02


def wait_for(
    driver: Remote,
    condition: Callable[[Remote], T | None],
    timeout: float = 20.0,
    *,
    what: str = "condition",
    seen: Callable[[], str] | None = None,
) -> T:
    """Call `condition(driver)` until it returns something other than None/False; return it.
    Raises BrowserTimeout after `timeout` seconds, naming `what` and `seen()`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition(driver)
        except (NoSuchElementException, StaleElementReferenceException):
            result = None  # the page is still changing: try again
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            last = f"; last saw {seen()}" if seen is not None else ""
            raise BrowserTimeout(f"waited {timeout:g}s for {what}{last}")
        time.sleep(POLL_SECONDS)


def _text_of(driver: Remote, css: str) -> str | None:
    try:
        return driver.find_element(By.CSS_SELECTOR, css).text
    except (NoSuchElementException, StaleElementReferenceException):
        return None


def wait_for_element(driver: Remote, css: str, timeout: float = 20.0) -> WebElement:
    """The first element matching `css`, once there is one."""
    return wait_for(
        driver,
        lambda d: d.find_element(By.CSS_SELECTOR, css),
        timeout,
        what=f"an element {css!r}",
    )


def wait_for_gone(driver: Remote, css: str, timeout: float = 20.0) -> None:
    """Until no element matches `css`."""
    wait_for(
        driver,
        lambda d: not d.find_elements(By.CSS_SELECTOR, css),
        timeout,
        what=f"no element {css!r}",
    )


def wait_for_text(driver: Remote, css: str, text: str, timeout: float = 20.0) -> WebElement:
    """The element matching `css` once its visible text contains `text`."""

    def holds(d: Remote) -> WebElement | None:
        element = d.find_element(By.CSS_SELECTOR, css)
        return element if text in element.text else None

    return wait_for(
        driver,
        holds,
        timeout,
        what=f"{text!r} in {css!r}",
        seen=lambda: repr(_text_of(driver, css)),
    )


def wait_for_js(driver: Remote, expression: str, timeout: float = 20.0) -> object:
    """The value of the JavaScript `expression` once it is truthy (e.g. a count reached)."""
    return wait_for(
        driver,
        lambda d: d.execute_script(f"return ({expression});") or None,
        timeout,
        what=f"JavaScript {expression!r} to be truthy",
    )


def wait_for_url(driver: Remote, fragment: str, timeout: float = 20.0) -> str:
    """The page's URL once it contains `fragment` (after a navigation or a form post)."""
    return wait_for(
        driver,
        lambda d: d.current_url if fragment in d.current_url else None,
        timeout,
        what=f"a URL containing {fragment!r}",
        seen=lambda: repr(driver.current_url),
    )


# --- screenshots --------------------------------------------------------------------------


def screenshot(driver: Remote, path: Path | str) -> tuple[int, int]:
    """Save the viewport as a PNG at `path` (parents made); returns its (width, height) after
    checking the file is a whole, valid PNG. Raises BrowserError if it is not."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = driver.get_screenshot_as_png()
    size = png_size(data)  # before writing: a bad capture never replaces a good docs image
    path.write_bytes(data)
    return size


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, after checking its signature, every chunk's CRC, an IHDR
    first, at least one IDAT and an IEND last; raises BrowserError naming what is wrong."""
    if not data.startswith(PNG_SIGNATURE):
        raise BrowserError("not a PNG (bad signature)")
    pos, chunks, size = len(PNG_SIGNATURE), [], (0, 0)
    while pos < len(data):
        if pos + 12 > len(data):
            raise BrowserError("truncated PNG chunk header")
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if len(body) != length or pos + 12 + length > len(data):
            raise BrowserError(f"truncated PNG chunk {kind!r}")
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise BrowserError(f"PNG chunk {kind!r} has a bad CRC")
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        chunks.append(kind)
        pos += 12 + length
    if not chunks or chunks[0] != b"IHDR" or chunks[-1] != b"IEND" or b"IDAT" not in chunks:
        raise BrowserError(f"PNG chunks out of order or missing: {chunks[:5]}...")
    if size[0] <= 0 or size[1] <= 0:
        raise BrowserError(f"PNG of size {size}")
    return size
