"""`gossamer demo`: start the simulated web on loopback, crawl it, print the report and audit."""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

from ..config import load_settings
from ..exitcodes import Exit
from ..outdir import new_directory_problem
from ..report.crawl import print_report
from ..testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_subprocess
from ..testweb.cli_demo import DEMO_OVERRIDES, truth_line, web_line
from .run import run_crawl

_log = logging.getLogger(__name__)


def run_demo(
    *,
    hosts: int = 200,
    pages_mean: float = 25.0,
    seed: int = 1,
    out: Path | None = None,
    workers: int | None = None,
) -> int:
    if out is not None:
        # the demo writes web.log, resolve.txt and crawl/ into `out`: never over someone's
        problem = new_directory_problem(out)
        if problem is not None:
            _log.error(problem, extra={"path": str(out)})
            return int(Exit.USAGE)
    out = out or Path(tempfile.mkdtemp(prefix="gossamer-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    spec = WebSpec(seed=seed, hosts=hosts, pages_mean=pages_mean, overrides=DEMO_OVERRIDES)
    log = out / "web.log"
    with serve_subprocess(spec, log_path=log) as web:
        resolve = web.write_resolve_file(out / "resolve.txt")
        model = web.model
        seed_url = model.page_url(0, 0)
        settings = load_settings(
            {
                "seeds": [seed_url],
                "output": out / "crawl",
                "scope": "all",
                "resolve_file": resolve,
                "allow_private": True,
                "delay": 0.0,
                "workers": workers,
            }
        )
        # the rules the crawl runs with (its crawl.json): depth limit and trap filters included
        rules = TruthRules.from_dict(settings.manifest())
        truth = compute_truth(model, rules)
        print(web_line(model, web.port))
        # the crawl counts each URL it fetches as a page, redirects and dead links too
        print(truth_line(model, truth, counted_as="the crawl's pages below"))
        print(
            f"gossamer crawl {seed_url} --scope all -o {out / 'crawl'}  "
            "(delay 0: the simulated web asks for no politeness delay)"
        )
        code = run_crawl(settings, progress=sys.stderr)
        print(file=sys.stderr)
        web.flush_log()
    print_report(out / "crawl")
    report = audit(model, read_logs([log]).records, rules, truth=truth, log_files=(str(log),))
    print(report.format_table())
    print(f"files: {out}/ (crawl/, web.log, resolve.txt)")
    return code or (0 if report.ok else 1)
