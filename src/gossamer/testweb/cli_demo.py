"""`gossamer testweb demo`: serve a simulated web, crawl it with the reference client, audit.

The crawl here is the minimal sequential reference client (`_refclient.py`), not gossamer's
crawler: the demo shows the simulated web, its ground truth and its audit working together.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..exitcodes import Exit
from ..outdir import new_directory_problem
from ._api import serve_subprocess
from ._audit import audit
from ._logread import read_logs
from ._model import TRAP_KINDS, HostFlag, Kind, WebModel
from ._refclient import ReferenceClient
from ._spec import WebSpec
from ._truth import Truth, TruthRules, compute_truth

_log = logging.getLogger(__name__)

USER_AGENT = "gossamer-refclient/0.1"

# The demo's web: the clean profile with the content switches a crawler must get right turned
# on, and none that only cost waiting time (latency, time-outs, crawl delays).
DEMO_OVERRIDES: tuple[tuple[str, float], ...] = (
    ("robots_disallow", 0.3),
    ("robots_agent_block", 0.05),
    ("robots_404", 0.2),
    ("robots_500", 0.05),
    ("robots_redirect", 0.1),
    ("gzip_host", 0.5),
    ("charset_host", 0.1),
    ("query_url_host", 0.15),
    ("transient_503", 0.01),
    ("reset_once", 0.01),
    ("error_500", 0.01),
    ("invalid_utf8", 0.02),
    ("malformed_html", 0.1),
    ("base_href", 0.05),
    ("meta_robots", 0.03),
    ("x_robots_tag", 0.02),
    ("redirect_link", 0.03),
    ("redirect_loop", 0.005),
    ("dead_link", 0.02),
    ("nonhtml_link", 0.05),
    ("nofollow_link", 0.05),
    ("link_forms", 0.6),
    ("session_link", 0.02),
    ("junk_link", 0.02),
)


# what a URL a complete crawl fetches is, in words: most are not the web's HTML pages
_URL_GROUPS: tuple[tuple[str, frozenset[Kind]], ...] = (
    ("redirects", frozenset({Kind.REDIRECT, Kind.LOOP})),
    ("dead links (404, 410)", frozenset({Kind.MISSING, Kind.GONE, Kind.NOT_FOUND})),
    ("non-HTML files", frozenset({Kind.PDF, Kind.IMAGE, Kind.MEDIA, Kind.LYING_HTML})),
    ("trap pages", TRAP_KINDS),
)
_HTML_KINDS = frozenset({Kind.PAGE, Kind.LYING_PDF, Kind.HUGE})


def web_line(model: WebModel, port: int) -> str:
    """The demos' first line: the simulated web's hosts, HTML pages, IPs and port."""
    return (
        f"simulated web: {len(model.hosts)} hosts, {model.total_pages:,} HTML pages, "
        f"{len(model.ips())} loopback IPs, port {port}"
    )


def truth_line(model: WebModel, truth: Truth, *, counted_as: str = "") -> str:
    """What a complete crawl fetches, by what the URLs are, so that the crawl's counts
    (every URL fetched, redirects and dead links included) and the web's HTML pages do not
    read as a contradiction. `counted_as`: what the crawl's own output calls these URLs."""
    kinds: Counter[Kind] = Counter()
    for url in truth.required:
        parts = urlsplit(url)
        host = model.host_by_name(parts.hostname or "")
        if host is not None:
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            kinds[model.resolve(host.id, target).kind] += 1
    html = sum(kinds[k] for k in _HTML_KINDS)
    rest = model.total_pages - html
    parts_said = [
        f"{html:,} of the {model.total_pages:,} HTML pages"
        + (f" (the other {rest:,} forbidden by robots.txt or out of reach)" if rest > 0 else "")
    ]
    for words, group in _URL_GROUPS:
        n = sum(kinds[k] for k in group)
        if n:
            parts_said.append(f"{n:,} {words}")
    said = f" ({counted_as})" if counted_as else ""
    hosts = [h for name in truth.hosts if (h := model.host_by_name(name)) is not None]
    hops = sum(h.robots_hops for h in hosts if h.flags & HostFlag.ROBOTS_REDIRECT)
    robots = f"{len(truth.hosts) + hops:,} robots.txt requests ({len(truth.hosts):,} hosts"
    robots += f", {hops:,} redirect hops)" if hops else ")"
    return (
        f"a complete crawl from {truth.rules.seeds[0]} fetches {len(truth.required):,} "
        f"URLs{said}: {', '.join(parts_said)}; and {robots}"
    )


def register(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="serve a simulated web, crawl it with a reference client, audit the crawl",
        description="Start a simulated web on loopback, crawl it politely with a minimal "
        "reference client (not gossamer's crawler), then print the audit against the truth.",
    )
    demo.add_argument("--hosts", type=int, default=100, help="hosts in the web (default 100)")
    demo.add_argument("--pages-mean", type=float, default=25.0, help="mean pages per host")
    demo.add_argument("--seed", type=int, default=1, help="web seed (default 1)")
    demo.add_argument("-o", "--out", type=Path, help="keep the log, spec and audit JSON here")
    demo.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    spec = WebSpec(
        seed=args.seed, hosts=args.hosts, pages_mean=args.pages_mean, overrides=DEMO_OVERRIDES
    )
    if args.out is not None:
        # web.log, web.json, resolve.txt and audit.json go there: never over someone's files
        problem = new_directory_problem(args.out)
        if problem is not None:
            _log.error(problem, extra={"path": str(args.out)})
            return int(Exit.USAGE)
    out = args.out or Path(tempfile.mkdtemp(prefix="gossamer-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    log = out / "web.log"
    (out / "web.json").write_text(spec.to_json() + "\n")
    tty = sys.stdout.isatty()
    with serve_subprocess(spec, log_path=log) as web:
        web.write_resolve_file(out / "resolve.txt")
        model = web.model
        rules = TruthRules(seeds=(model.page_url(0, 0),), scope="all", user_agent=USER_AGENT)
        truth = compute_truth(model, rules)
        print(f"{web_line(model, web.port)}; log {log}")
        print(truth_line(model, truth))
        print(f"crawling from {rules.seeds[0]} with the reference client (sequential, polite)")
        start = time.monotonic()
        last = [0.0]

        def progress(url: str, status: int) -> None:
            now = time.monotonic()
            if tty and now - last[0] > 0.2:
                last[0] = now
                n = client.stats.fetched
                rate = n / max(now - start, 1e-9)
                print(f"\r  {n} URLs, {rate:,.0f} URLs/s  {url[:60]:<60}", end="", flush=True)

        client = ReferenceClient(web.address_of, user_agent=USER_AGENT, on_page=progress)
        stats = client.crawl(list(rules.seeds))
        if tty:
            print()
        print(
            f"  fetched {stats.fetched:,} URLs (and {stats.robots_fetched:,} robots.txt "
            f"requests) in {stats.seconds:.1f} s"
        )
        web.flush_log()
    logs = read_logs([log])
    report = audit(
        model, logs.records, rules, truth=truth, user_agent=USER_AGENT, log_files=(str(log),)
    )
    (out / "audit.json").write_text(report.to_json() + "\n")
    print(report.format_table())
    print(f"files: {out}/ (web.log, web.json, resolve.txt, audit.json)")
    return 0 if report.ok else 1
