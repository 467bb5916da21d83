"""Command-line flags that describe a simulated web (shared by serve, truth, audit, export)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._spec import PROFILES, REALISM_FIELDS, WebSpec


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("simulated web")
    g.add_argument("--web", type=Path, help="a web spec JSON file (as written by serve --spec-out)")
    g.add_argument("--seed", type=int, help="generator seed (default 1)")
    g.add_argument("--hosts", type=int, help="number of host names, 1..100000 (default 100)")
    g.add_argument("--pages-mean", type=float, help="mean pages per host (default 50)")
    g.add_argument("--pages-alpha", type=float, help="Pareto shape of site sizes (default 1.5)")
    g.add_argument("--pages-max", type=int, help="largest site (default 1000000)")
    g.add_argument("--outdegree", type=float, help="mean links per page (default 30)")
    g.add_argument("--locality", type=float, help="fraction of same-host links (default 0.8)")
    g.add_argument("--page-bytes", type=int, help="mean HTML bytes per page (default 15000)")
    g.add_argument("--ip-share", type=float, help="fraction of domains sharing an IP (0.25)")
    g.add_argument("--max-ips", type=int, help="distinct loopback IPs at most (default 4096)")
    g.add_argument("--profile", choices=PROFILES, help="realism profile (default clean)")
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SWITCH=RATE",
        help="override one realism switch, e.g. --set trap_host=0.5 (repeatable)",
    )


_FLAG_TO_FIELD = {
    "seed": "seed",
    "hosts": "hosts",
    "pages_mean": "pages_mean",
    "pages_alpha": "pages_alpha",
    "pages_max": "pages_max",
    "outdegree": "outdegree_mean",
    "locality": "locality",
    "page_bytes": "page_bytes_mean",
    "ip_share": "ip_share",
    "max_ips": "max_ips",
    "profile": "profile",
}


def spec_from_args(args: argparse.Namespace) -> WebSpec:
    """The spec from --web (if given) with any explicit flags applied on top.

    Raises ValueError with a readable message on bad values."""
    base: dict[str, object] = {}
    if args.web is not None:
        try:
            base = WebSpec.from_json(Path(args.web).read_text()).to_dict()
        except OSError as exc:
            raise ValueError(f"cannot read web spec {args.web}: {exc.strerror}") from exc
    for flag, fieldname in _FLAG_TO_FIELD.items():
        value = getattr(args, flag, None)
        if value is not None:
            base[fieldname] = value
    overrides = [tuple(o) for o in base.get("overrides", [])]  # type: ignore[attr-defined]
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or name not in REALISM_FIELDS:
            raise ValueError(f"--set expects SWITCH=NUMBER with a known switch, got {item!r}")
        try:
            overrides.append((name, float(value)))
        except ValueError:
            raise ValueError(f"--set {name}: {value!r} is not a number") from None
    base["overrides"] = overrides
    return WebSpec.from_dict(base)
