"""The dashboard starts a cluster crawl on two machines from its Setup tab and scales it
across them with the Workers slider, in a real headless Chromium: a real `gossamer dashboard
--redis` process (real redis-server), two "machines" that are OpenSSH sshd's of the test on
127.0.0.2 and 127.0.0.3 (tests/e2e/_sshd.py: key authentication only, each with its own
output directory), four static sites on nginx. The form's Machines field takes the machine
list (the format of `--machines FILE`); the crawl starts with one worker on each machine, the
slider takes it to 4 (two a machine, started over SSH) and back to 2 (the newest worker of
each machine asked to leave); stopped, then resumed from the form on the same machines.
Which machine a worker runs on is told by its output directory (both "machines" are this
host, so their workers share its host name).

Screenshots (docs/dashboard/machines-*.png), only when asked:

    GOSSAMER_SCREENSHOTS=docs/dashboard .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/e2e/test_dashboard_machines_browser.py
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from _sshd import remote_gossamer, ssh_machines
from _static_site import static_site
from test_cluster import status_now
from test_dashboard_browser import (
    CSS,
    _kill_leftovers,
    dashboard,
    fill_setup,
    row_states,
    rows,
    scale,
    shot,
    stop,
)

from gossamer.testweb._browser import Browser, wait_for, wait_for_text
from gossamer.testweb._nginx import run_nginx

SITES = 4
PAGES = 400  # a site: 400 pages at the form's delay of 0.2 s, 80 s at least: it outlasts the test


def answer(d: Any) -> str:
    """The control's answer to the slider (the table may follow before it is shown)."""
    wait_for(d, lambda d: not d.find_element(CSS, "#control-message").text.startswith(
        "scaling to") or None, timeout=60)  # fmt: skip
    return str(d.find_element(CSS, "#control-message").text)


def test_setup_starts_a_crawl_on_two_machines_and_the_slider_scales_it(
    tmp_path: Path, redis_url: str, browser: Browser
) -> None:
    sites = []
    for k in range(SITES):
        (tmp_path / f"site{k}").mkdir()
        sites.append(static_site(tmp_path / f"site{k}", PAGES))
    with ssh_machines(tmp_path) as machines, contextlib.ExitStack() as stack:
        for site in sites:
            stack.enter_context(run_nginx(site.server))
        m1, m2 = machines.machines
        # how the dashboard reaches the machines: its environment, as a user's would
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOSSAMER_")}
        env.update(GOSSAMER_SSH=machines.ssh, GOSSAMER_REMOTE_COMMAND=remote_gossamer(),
                   GOSSAMER_CONCURRENCY="4")  # fmt: skip
        crawl_id = ""

        def per_machine() -> list[int]:
            """Live workers (not asked to leave) on m1 and m2, by their output directories."""
            found = [0, 0]
            data = status_now(redis_url, crawl_id)
            for w in data["workers"]:
                if w["state"] not in ("dead", "stopped", "stopping"):
                    found[0 if w["out"].startswith(str(m1.out)) else 1] += 1
            return found

        with dashboard(["--redis", redis_url], env, tmp_path) as base:
            d = browser.driver
            try:
                d.get(base + "/")
                wait_for_text(d, "#source", "cluster redis://", timeout=30)
                fill_setup(browser, sites[0].base, 2)
                for site in sites[1:]:
                    d.find_element(CSS, "#seeds").send_keys(site.base + "\n")
                d.find_element(CSS, "#seed-add").click()
                d.find_element(CSS, "#allow-private").click()
                assert d.find_element(CSS, "#machine-list").is_displayed()
                d.find_element(CSS, "#machine-list").send_keys(f"{m1.line}\n{m2.line}\n")
                d.execute_script("document.querySelector('#machine-list').scrollTop = 0")
                shot(browser, "machines-setup.png")
                d.find_element(CSS, "#start").click()
                wait_for(d, lambda d: d.find_element(CSS, "#tab-status").get_attribute(
                    "aria-selected") == "true" or None, timeout=60,
                    seen=lambda: d.find_element(CSS, "#setup-error").text)  # fmt: skip
                said = d.find_element(CSS, "#setup-message").get_attribute("textContent") or ""
                assert said.startswith("started crawl "), said
                assert " with 2 workers over SSH on 2 machines" in said, said
                crawl_id = said.split()[2]
                wait_for_text(d, "#crawl-state", "running", timeout=30)
                wait_for(d, lambda d: rows(browser, "live") == 2 or None, timeout=60,
                         what="2 live worker rows", seen=lambda: row_states(browser))  # fmt: skip
                assert per_machine() == [1, 1]
                # the slider: 4 workers, two a machine, the new ones started over SSH
                scale(browser, 4)
                said = answer(d)
                for m in (m1, m2):
                    assert f"machine {m.host}:{m.port}: 1 -> 2 workers; started 1" in said, said
                assert per_machine() == [2, 2]
                wait_for(d, lambda d: int(d.find_element(CSS, "#scale-value").text) == 4 or None,
                         timeout=30)  # fmt: skip
                shot(browser, "machines-scaled.png", scroll_to=".controls")
                # … and back to 2: the newest worker of each machine asked to leave
                scale(browser, 2)
                said = answer(d)
                assert said.count("2 -> 1 workers; asked w") == 2, said
                assert per_machine() == [1, 1]
                stop(browser)
                wait_for_text(d, "#crawl-state", "stopped", timeout=60)
                # resumed from the form: on the crawl's machines (the list kept with it)
                d.find_element(CSS, "#tab-setup").click()
                wait_for(d, lambda d: d.find_element(CSS, "#resume").is_enabled() or None)
                d.find_element(CSS, "#resume").click()
                wait_for(d, lambda d: d.find_element(CSS, "#tab-status").get_attribute(
                    "aria-selected") == "true" or None, timeout=60,
                    seen=lambda: d.find_element(CSS, "#setup-error").text)  # fmt: skip
                said = d.find_element(CSS, "#setup-message").get_attribute("textContent") or ""
                assert said.startswith(f"resumed crawl {crawl_id} with 1 worker over SSH on 2 "
                                       "machines"), said  # fmt: skip
                wait_for(d, lambda d: rows(browser, "live") == 1 or None, timeout=60,
                         what="1 live worker row", seen=lambda: row_states(browser))  # fmt: skip
                assert per_machine() == [1, 0]
            finally:
                _kill_leftovers(tmp_path)
                if crawl_id:  # detached over SSH: no one's children, ended by their pids
                    for w in status_now(redis_url, crawl_id)["workers"]:
                        if w["state"] not in ("dead", "stopped"):
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(w["pid"], signal.SIGKILL)
        # each machine's workers wrote under its own directory; the list kept with the crawl
        for m, n in ((m1, 3), (m2, 2)):
            assert len(list(m.out.glob("w*/crawl.log.jsonl"))) == n, list(m.out.iterdir())
        listing = next((tmp_path / "gossamer-worker").glob("crawl-*.machines"))
        assert listing.read_text() == f"{m1.line}\n{m2.line}\n"
