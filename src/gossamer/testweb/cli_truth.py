"""`gossamer testweb truth` and `gossamer testweb audit`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..crawldir import MANIFEST, CrawlDir
from ._audit import AuditReport, audit
from ._logread import read_logs
from ._model import model_for
from ._spec import WebSpec
from ._specargs import add_spec_arguments, spec_from_args
from ._truth import SCOPES, Truth, TruthRules, compute_truth


def register(sub: Any) -> None:
    """Add the `truth` and `audit` actions to the `gossamer testweb` subparsers `sub`."""
    truth = sub.add_parser(
        "truth",
        help="the exact set of URLs a correct crawler fetches (ground truth)",
        description="Compute the ground truth of a simulated web: the URLs a correct crawler "
        "fetches from the seeds under the rules, and the link graph between them.",
    )
    add_spec_arguments(truth)
    add_rule_arguments(truth, overridable=False)
    truth.add_argument("--json", action="store_true", help="print the summary as JSON")
    truth.add_argument(
        "--out", type=Path, metavar="FILE", help="write every URL, reason and edge as JSON"
    )
    truth.set_defaults(func=run_truth)

    aud = sub.add_parser(
        "audit",
        help="check a crawl's request log against the truth",
        description="Audit a crawl from the simulated web's request log (or nginx access "
        "logs): coverage, overlap, pages that should not have been fetched, politeness.",
    )
    aud.add_argument(
        "--log",
        nargs="+",
        required=True,
        type=Path,
        metavar="FILE",
        help="request logs (server or nginx format); FILE.<k> siblings are read too",
    )
    aud.add_argument(
        "--crawl", type=Path, metavar="DIR", help=f"a crawl directory holding {MANIFEST}"
    )
    aud.add_argument(
        "--web", type=Path, metavar="SPEC", help="web spec JSON (overrides the log header)"
    )
    add_rule_arguments(aud, overridable=True)
    aud.add_argument(
        "--min-delay",
        type=float,
        default=0.0,
        metavar="S",
        help="required gap between requests to a host without Crawl-delay (default 0)",
    )
    aud.add_argument(
        "--max-crawl-delay",
        type=float,
        default=30.0,
        metavar="S",
        help="cap on a robots.txt Crawl-delay (default 30)",
    )
    aud.add_argument(
        "--per-ip-limit",
        type=int,
        default=1,
        metavar="N",
        help="requests allowed in flight per IP (default 1)",
    )
    aud.add_argument(
        "--tolerance", type=float, default=0.005, metavar="S", help="slack (default 0.005)"
    )
    aud.add_argument(
        "--json", type=Path, metavar="FILE", help="write the report as JSON (- for stdout)"
    )
    aud.add_argument(
        "--fail-on-violation", action="store_true", help="exit 1 when violations are found"
    )
    aud.set_defaults(func=run_audit)


def add_rule_arguments(parser: argparse.ArgumentParser, *, overridable: bool) -> None:
    """The crawl rules. With `overridable` every flag defaults to None (not given), so that
    rules read from crawl.json apply unless a flag overrides them."""
    g = parser.add_argument_group("crawl rules")
    flag: dict[str, Any] = {"action": "store_true", "default": None if overridable else False}
    g.add_argument("--seeds", nargs="+", metavar="URL", help="seed URLs (default: host 0's /)")
    g.add_argument("--scope", choices=SCOPES, help="host (default), domain or all")
    g.add_argument("--allow", action="append", metavar="RE", help="URL regex to allow (repeat)")
    g.add_argument("--deny", action="append", metavar="RE", help="URL regex to deny (repeat)")
    g.add_argument("--max-depth", type=int, metavar="D", help="link depth limit (seeds are 0)")
    g.add_argument("--max-pages", type=int, metavar="N", help="page budget")
    g.add_argument("--user-agent", metavar="UA", help="robots.txt product token (gossamer)")
    g.add_argument("--ignore-robots", help="do not obey robots.txt", **flag)
    g.add_argument("--follow-nofollow", help="follow rel=nofollow and meta nofollow", **flag)
    g.add_argument("--all-types", help="also fetch URLs with non-HTML extensions", **flag)
    g.add_argument("--keep-session-ids", help="do not strip session-id parameters", **flag)
    g.add_argument("--ignore-canonical", help="do not follow rel=canonical", **flag)
    g.add_argument("--sitemaps", help="seed from sitemaps named in robots.txt", **flag)


def rules_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> TruthRules:
    """Rules from `base` (e.g. crawl.json) with the explicit flags applied on top."""
    d = TruthRules().to_dict()
    if base:
        d.update({k: v for k, v in base.items() if k in d})
    explicit: dict[str, Any] = {
        "seeds": args.seeds,
        "scope": args.scope,
        "allow": args.allow,
        "deny": args.deny,
        "max_depth": args.max_depth,
        "max_pages": args.max_pages,
        "user_agent": args.user_agent,
    }
    for key, value in explicit.items():
        if value is not None:
            d[key] = value
    for dest, key, when_set in (
        ("ignore_robots", "obey_robots", False),
        ("follow_nofollow", "follow_nofollow", True),
        ("all_types", "html_only", False),
        ("keep_session_ids", "strip_session_ids", False),
        ("ignore_canonical", "follow_canonical", False),
        ("sitemaps", "use_sitemaps", True),
    ):
        if getattr(args, dest):
            d[key] = when_set
    try:
        return TruthRules.from_dict(d)
    except TypeError as exc:
        raise ValueError(f"bad crawl rules: {exc}") from exc


def read_crawl_rules(crawl_dir: Path) -> dict[str, Any]:
    """The rules a crawler recorded in DIR/crawl.json (see docs: the crawl.json contract)."""
    path = CrawlDir(crawl_dir).manifest
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return data


# ------------------------------------------------------------------------- truth
def run_truth(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    model = model_for(spec)
    rules = rules_from_args(args).with_default_seeds(model)
    truth = compute_truth(model, rules)
    if args.out is not None:
        try:
            args.out.write_text(truth.to_json(edges=True))
        except OSError as exc:
            raise ValueError(f"cannot write {args.out}: {exc.strerror}") from exc
    if args.json:
        print(json.dumps(truth.summary(), sort_keys=True, indent=2))
    else:
        print(format_truth(truth))
    return 0


def format_truth(truth: Truth) -> str:
    s = truth.summary()
    r = truth.rules
    lines = [
        f"truth: {s['required']} required URLs on {s['hosts']} host(s), {s['edges']} edges, "
        f"depth up to {s['max_depth_reached']}",
        f"rules: seeds {', '.join(r.seeds)}; scope {r.scope}; max_depth "
        f"{'-' if r.max_depth is None else r.max_depth}; max_pages "
        f"{'-' if r.max_pages is None else r.max_pages}; robots "
        f"{'obeyed' if r.obey_robots else 'ignored'}",
    ]
    if truth.max_pages is not None:
        lines.append(f"expected pages (max_pages): {truth.expected_pages}")
    excluded = ", ".join(f"{k} {v}" for k, v in s["excluded"].items() if v) or "none"
    lines.append(f"excluded: {excluded}")
    lines.append(f"traps met: {s['trap']} (permitted within max_depth: {s['permitted']})")
    robots = ", ".join(f"{k} {v}" for k, v in s["robots_status"].items()) or "none"
    lines.append(f"robots.txt: {robots}")
    if truth.crawl_delay:
        delays = ", ".join(f"{h} {d:g}s" for h, d in sorted(truth.crawl_delay.items()))
        lines.append(f"crawl delays: {delays}")
    if truth.sitemaps:
        lines.append(f"sitemap files: {len(truth.sitemaps)}")
    return "\n".join(lines)


# ------------------------------------------------------------------------- audit
def run_audit(args: argparse.Namespace) -> int:
    logs = read_logs(args.log)
    spec: WebSpec | None = logs.spec
    if args.web is not None:
        spec = spec_from_args(_web_only(args.web))
    if spec is None:
        raise ValueError("the logs carry no web spec (nginx logs): give --web SPEC")
    model = model_for(spec)
    base = read_crawl_rules(args.crawl) if args.crawl is not None else None
    rules = rules_from_args(args, base).with_default_seeds(model)
    ua_given = args.user_agent is not None or bool(base and base.get("user_agent"))
    report = audit(
        model,
        logs.records,
        rules,
        min_delay=args.min_delay,
        max_crawl_delay=args.max_crawl_delay,
        per_ip_limit=args.per_ip_limit,
        tolerance_s=args.tolerance,
        user_agent=rules.user_agent if ua_given else None,
        log_files=logs.files,
        log_malformed=logs.malformed,
    )
    if args.json is not None:
        _write_json(args.json, report)
    if args.json is None or str(args.json) != "-":
        print(report.format_table())
    return 1 if args.fail_on_violation and not report.ok else 0


def _web_only(path: Path) -> argparse.Namespace:
    return argparse.Namespace(web=path, set=[])


def _write_json(path: Path, report: AuditReport) -> None:
    if str(path) == "-":
        sys.stdout.write(report.to_json() + "\n")
        return
    try:
        path.write_text(report.to_json() + "\n")
    except OSError as exc:
        raise ValueError(f"cannot write {path}: {exc.strerror}") from exc
