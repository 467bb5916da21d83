"""Export a simulated web as static files plus an nginx config (for benchmarks).

The output directory holds `nginx.conf`, `web.json` (the spec: the truth and the audit rebuild
the web from it), `export.json`, curl `resolve.txt` and `/etc/hosts` lines, `sites/<host>/`
and nginx's `logs/` (format `gossamer`, read by the audit). Every body is byte-identical to
what `respond()` gives for the same URL, with the same status and Content-Type. Only switches
whose effect lives entirely in static bytes are exportable; with `force=True` the rest is
skipped or degraded, and counted (docs/testweb.md, "Exporting the web for nginx")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._content import page_headers, respond
from ._model import SECTIONS, HostFlag, Kind, Link, PageFlag, Resource, WebModel, model_for
from ._spec import REALISM_FIELDS, Realism, WebSpec

# Switches whose whole effect is in bytes a static file server reproduces exactly: page bodies,
# robots.txt contents (and robots.txt answering 404), sitemaps, Content-Type charsets.
STATIC_SWITCHES = frozenset(
    {
        "robots_disallow",
        "robots_agent_block",
        "robots_crawl_delay",
        "robots_sitemap",
        "robots_404",
        "charset_host",
        "invalid_utf8",
        "malformed_html",
        "many_links",
        "base_href",
        "meta_robots",
        "nofollow_link",
        "link_forms",
        "junk_link",
    }
)
# Fields of Realism that are magnitudes of other switches, not switches themselves.
MAGNITUDES = frozenset(
    {
        "huge_page_bytes",
        "crawl_delays",
        "rate_limit_per_s",
        "slow_host_factor",
        "slow_first_byte_s",
        "trickle_s",
        "many_links_count",
        "redirect_max_hops",
    }
)

# Pages nginx cannot answer as the model does: skipped (never written) under force.
_SKIPPED_PAGE_FLAGS = (
    (PageFlag.HANG, "page hangs"),
    (PageFlag.RESET_ALWAYS, "page resets"),
    (PageFlag.RESET_ONCE, "page resets once"),
    (PageFlag.ERROR_500, "page answers 500"),
    (PageFlag.TRANSIENT_503, "page answers 503 once"),
    (PageFlag.SLOW_FIRST_BYTE, "page slow first byte"),
    (PageFlag.TRICKLE, "page trickles"),
    (PageFlag.BROKEN_GZIP, "page broken gzip"),
)
_SKIP_MASK = 0
for _flag, _ in _SKIPPED_PAGE_FLAGS:
    _SKIP_MASK |= _flag
# Host behaviours nginx drops (the pages are still written) under force.
_DEGRADED_HOST_FLAGS = (
    (HostFlag.RATE_LIMIT, "429 rate limit not served"),
    (HostFlag.GZIP, "gzip/deflate not served"),
    (HostFlag.CONDITIONAL, "ETag/Last-Modified/304 not served"),
    (HostFlag.SLOW, "slow host latency not served"),
    (HostFlag.TRAPS, "crawler traps not served (404)"),
)

NOT_FOUND_BODY = "<html><body>Not Found</body></html>\n"
ROBOTS_NOT_FOUND_BODY = "not found\n"
PARALLEL_MIN_PAGES = 4000  # below this, one process exports faster than a pool starts
_TASK_PAGES = 2000  # pages per task handed to a worker process

LOG_FORMAT = (
    "$msec\\t$request_time\\t$connection\\t$server_addr\\t$host\\t$request_method\\t"
    "$request_uri\\t$status\\t$bytes_sent\\t$http_user_agent\\t$http_if_modified_since\\t"
    "$http_if_none_match"
)


class ExportRefused(ValueError):
    """The web has switches on that a static file server cannot reproduce."""


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What `export_web` wrote, how fast, and what it left out."""

    out_dir: Path
    port: int
    hosts: int  # hosts with a directory under sites/
    pages: int  # page files written
    files: int  # all files under sites/ (pages, robots.txt, sitemaps)
    bytes: int  # bytes under sites/
    seconds: float  # wall time of the export
    ips: tuple[str, ...]  # addresses nginx listens on (127.0.0.1 first)
    access_log: Path | None
    nginx_command: tuple[str, ...]
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> resources not written
    degraded: dict[str, int] = field(default_factory=dict)  # reason -> written, behaviour lost

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "out_dir": str(self.out_dir),
            "port": self.port,
            "hosts": self.hosts,
            "pages": self.pages,
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "pages_per_s": round(self.pages_per_s, 1),
            "ips": list(self.ips),
            "access_log": str(self.access_log) if self.access_log else None,
            "nginx_command": list(self.nginx_command),
            "skipped": dict(sorted(self.skipped.items())),
            "degraded": dict(sorted(self.degraded.items())),
        }


def dynamic_switches(realism: Realism) -> list[str]:
    """`name=value` of every switch that is on and needs a live server (empty: exportable)."""
    out = []
    for name in REALISM_FIELDS:
        if name in STATIC_SWITCHES or name in MAGNITUDES:
            continue
        value = getattr(realism, name)
        if name == "latency_jitter" and realism.latency_ms <= 0:
            continue  # jitter of no latency
        if value:
            out.append(f"{name}={value:g}")
    return out


def nginx_command(out_dir: Path, nginx: str = "nginx") -> tuple[str, ...]:
    """The command line that runs an export's nginx in the foreground."""
    out = out_dir.resolve()
    return (nginx, "-c", str(out / "nginx.conf"), "-p", f"{out}/", "-g", "daemon off;")


def export_web(
    model: WebModel,
    out_dir: Path | str,
    *,
    port: int,
    epoch: int = 0,
    workers: int | str = "auto",
    access_log: bool = True,
    force: bool = False,
    jobs: int | None = None,
) -> ExportSummary:
    """Write `model` as static files and an nginx config into `out_dir`.

    `workers` is nginx's worker_processes; `jobs` the processes writing files (default: one per
    CPU for webs of PARALLEL_MIN_PAGES pages or more). Raises ExportRefused when switches that
    need a live server are on (unless `force`), ValueError when `out_dir` holds something that
    is not an export (an old export there is replaced).
    """
    started = time.perf_counter()
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be 1..65535, got {port}")
    if (isinstance(workers, int) and workers < 1) or (
        isinstance(workers, str) and workers != "auto"
    ):
        raise ValueError(f"workers must be >= 1 or 'auto', got {workers!r}")
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    dynamic = dynamic_switches(model.realism)
    if dynamic and not force:
        raise ExportRefused(
            f"nginx serves static files and cannot reproduce these switches of profile "
            f"{model.spec.profile!r}: {', '.join(dynamic)}. Export the clean profile (or turn "
            f"them off with --set SWITCH=0), or use --force to export anyway, skipping what "
            f"nginx cannot serve"
        )
    out = Path(out_dir).resolve()
    _prepare(out)
    sites = out / "sites"

    skipped: Counter[str] = Counter()
    degraded: Counter[str] = Counter()
    hosts = []
    for host in model.hosts:
        if host.flags & HostFlag.DEAD:
            skipped["dead host (all its URLs)"] += 1
            continue
        hosts.append(host.id)
        for flag, reason in _DEGRADED_HOST_FLAGS:
            if host.flags & flag:
                degraded[reason + " (hosts)"] += 1
        if host.latency_ms > 0 and not host.flags & HostFlag.SLOW:
            degraded["latency not served (hosts)"] += 1
    if model.realism.huge_pages:
        skipped["huge streamed page"] += model.realism.huge_pages
    _make_dirs(model, sites, hosts)

    tasks = list(_tasks(model, hosts))
    total_pages = sum(hi - lo for _, lo, hi in tasks)
    if jobs is None:
        jobs = (os.cpu_count() or 1) if total_pages >= PARALLEL_MIN_PAGES else 1
    if jobs <= 1 or len(tasks) <= 1:
        results = [_write_task(model, sites, t, epoch) for t in tasks]
    else:
        results = _write_in_parallel(model, sites, tasks, epoch, jobs)
    pages = files = nbytes = 0
    for r in results:
        pages += r.pages
        files += r.files
        nbytes += r.bytes
        skipped.update(r.skipped)
        degraded.update(r.degraded)

    ips = listen_ips(model)
    log_path = write_nginx_config(model, out, port=port, workers=workers, access_log=access_log)
    (out / "web.json").write_text(model.spec.to_json() + "\n")
    names = [(model.hosts[h].name, model.hosts[h].ip) for h in hosts]
    (out / "resolve.txt").write_text("".join(f"{n}:80:{ip}:{port}\n" for n, ip in names))
    (out / "hosts.txt").write_text("".join(f"{ip} {n}\n" for n, ip in names))
    summary = ExportSummary(
        out_dir=out,
        port=port,
        hosts=len(hosts),
        pages=pages,
        files=files,
        bytes=nbytes,
        seconds=time.perf_counter() - started,
        ips=ips,
        access_log=log_path,
        nginx_command=nginx_command(out, shutil.which("nginx") or "nginx"),
        skipped=dict(skipped),
        degraded=dict(degraded),
    )
    manifest = {"format": 1, "epoch": epoch, "profile": model.spec.profile, **summary.to_dict()}
    (out / "export.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return summary


def listen_ips(model: WebModel) -> tuple[str, ...]:
    """The addresses an export listens on: 127.0.0.1, then every IP of the web."""
    return ("127.0.0.1", *(ip for ip in model.ips() if ip != "127.0.0.1"))


def write_nginx_config(
    model: WebModel,
    out_dir: Path | str,
    *,
    port: int,
    workers: int | str = "auto",
    access_log: bool = True,
) -> Path | None:
    """(Re)write `out_dir`/nginx.conf, e.g. to change workers or the access log of an export
    without writing its files again; keeps export.json in step. Returns the access log path."""
    out = Path(out_dir).resolve()
    log_path = out / "logs" / "access.log" if access_log else None
    conf = nginx_config(
        model, out, port=port, ips=listen_ips(model), workers=workers, access_log=log_path
    )
    (out / "nginx.conf").write_text(conf)
    manifest_path = out / "export.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        manifest.update(port=port, access_log=str(log_path) if log_path else None)
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return log_path


def _prepare(out: Path) -> None:
    """An empty directory or a previous export (whose files are replaced)."""
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"{out} exists and is not a directory")
        entries = {p.name for p in out.iterdir()}
        if entries and "export.json" not in entries and "web.json" not in entries:
            raise ValueError(f"{out} is not empty and not a previous export; choose another DIR")
        for sub in ("sites", "tmp", "logs"):  # an old access log would mislead an audit
            shutil.rmtree(out / sub, ignore_errors=True)
    for sub in ("sites", "logs", "tmp"):
        (out / sub).mkdir(parents=True, exist_ok=True)


def _make_dirs(model: WebModel, sites: Path, hosts: Iterable[int]) -> None:
    """Every directory the pages need, created once, before any file is written."""
    for h in hosts:
        host = model.hosts[h]
        base = sites / host.name
        base.mkdir()
        if host.flags & HostFlag.QUERY_URLS:
            continue
        if host.pages > 200:
            sections = set(SECTIONS)
            if host.flags & HostFlag.DISALLOW:
                sections.add("private")
        else:
            sections = {model.section(host, i) for i in range(1, host.pages)}
        for sec in sections:
            (base / sec).mkdir()


def _tasks(model: WebModel, hosts: Iterable[int]) -> Iterable[tuple[int, int, int]]:
    """(host, first page, end page) slices of at most _TASK_PAGES pages."""
    for h in hosts:
        n = model.hosts[h].pages
        for lo in range(0, n, _TASK_PAGES):
            yield h, lo, min(n, lo + _TASK_PAGES)


@dataclass(slots=True)
class _Written:
    pages: int = 0
    files: int = 0
    bytes: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    degraded: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, object]:
        return {
            "pages": self.pages,
            "files": self.files,
            "bytes": self.bytes,
            "skipped": dict(self.skipped),
            "degraded": dict(self.degraded),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> _Written:
        return cls(
            int(d["pages"]),
            int(d["files"]),
            int(d["bytes"]),
            Counter(d["skipped"]),
            Counter(d["degraded"]),
        )


_WORKER_CODE = "from gossamer.testweb._export import _worker_main; _worker_main()"


def _write_in_parallel(
    model: WebModel, sites: Path, tasks: list[tuple[int, int, int]], epoch: int, jobs: int
) -> list[_Written]:
    """Share the tasks among `jobs` processes: this one and jobs-1 children.

    Children are plain `python -c` processes given a JSON job file (not multiprocessing, which
    would re-import the caller's __main__ module); each rebuilds the model from the spec."""
    groups: list[list[tuple[int, int, int]]] = [[] for _ in range(jobs)]
    loads = [0] * jobs
    for t in sorted(tasks, key=lambda t: t[1] - t[2]):  # largest first, onto the least loaded
        k = loads.index(min(loads))
        groups[k].append(t)
        loads[k] += t[2] - t[1]
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])  # the gossamer being run here
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    children: list[subprocess.Popen[bytes]] = []
    try:
        for k, group in enumerate(groups[1:]):
            job = {"spec": model.spec.to_json(), "sites": str(sites), "epoch": epoch}
            job["tasks"] = group
            job_file = sites.parent / "tmp" / f"export-job-{k}.json"
            job_file.write_text(json.dumps(job))
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", _WORKER_CODE, str(job_file)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                )
            )
        results = [_write_task(model, sites, t, epoch) for t in groups[0]]
        timeout = 120 + 0.01 * max(loads)  # generous: a slow disk writes ~2000 files/s
        for child in children:
            out, err = child.communicate(timeout=timeout)
            if child.returncode != 0:
                raise RuntimeError(
                    f"export worker failed ({child.returncode}): {err.decode(errors='replace')}"
                )
            results += [_Written.from_json(json.loads(out))]
        return results
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def _worker_main() -> None:
    """A child of `_write_in_parallel`: a JSON job file in argv, the JSON result on stdout."""
    job = json.loads(Path(sys.argv[1]).read_text())
    model = model_for(WebSpec.from_json(job["spec"]))
    total = _Written()
    for h, lo, hi in job["tasks"]:
        w = _write_task(model, Path(job["sites"]), (h, lo, hi), int(job["epoch"]))
        total.pages += w.pages
        total.files += w.files
        total.bytes += w.bytes
        total.skipped.update(w.skipped)
        total.degraded.update(w.degraded)
    sys.stdout.write(json.dumps(total.to_json()))


def _write(path: str, body: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)


def _write_task(model: WebModel, sites: Path, task: tuple[int, int, int], epoch: int) -> _Written:
    """Write pages lo..hi-1 of host h (and its robots.txt and sitemaps with page 0)."""
    h, lo, hi = task
    host = model.hosts[h]
    base = f"{sites}/{host.name}"
    w = _Written()
    query_urls = host.flags & HostFlag.QUERY_URLS
    r = model.realism
    check_links = any(
        (r.redirect_link, r.redirect_loop, r.dead_link, r.nonhtml_link, r.session_link)
    )
    plan_of = model.plan  # cached: respond() below asks for the same plan again
    for i in range(lo, hi):
        if i and query_urls:
            w.skipped["query-string page URL"] += 1
            continue
        plan = plan_of(h, i)
        flags = plan.flags
        if flags & _SKIP_MASK:
            for flag, reason in _SKIPPED_PAGE_FLAGS:
                if flags & flag:
                    w.skipped[reason] += 1
                    break
            continue
        resp = respond(model, Resource(Kind.PAGE, h, i, session=False), epoch=epoch)
        if resp.status != 200 or resp.action != "send" or resp.stream_size:
            w.skipped[f"page answers {resp.status or resp.action}"] += 1
            continue
        if flags & (PageFlag.XROBOTS_NOFOLLOW | PageFlag.XROBOTS_NOINDEX):
            w.degraded["X-Robots-Tag header dropped (pages)"] += 1
        if check_links:
            _count_dynamic_links(plan.links, w.degraded)
        if flags & PageFlag.CHANGING and epoch:
            w.degraded[f"changing page: snapshot of epoch {epoch} (pages)"] += 1
        path = f"{base}/index.html" if i == 0 else f"{base}{model.page_target(h, i)}"
        _write(path, resp.body)
        w.pages += 1
        w.files += 1
        w.bytes += len(resp.body)
    if lo == 0:
        _write_host_files(model, h, base, w)
    return w


# Link targets a static export answers 404 (or a page without its canonical link) for.
_DYNAMIC_LINK_MARKS = (
    ("/go/", "redirect links answer 404 (links)"),
    ("/loop/", "redirect loop links answer 404 (links)"),
    ("/gone/", "410 links answer 404 (links)"),
    ("/files/", "non-HTML links answer 404 (links)"),
    ("/img/", "non-HTML links answer 404 (links)"),
    ("/media/", "non-HTML links answer 404 (links)"),
    ("/docs/manual-", "non-HTML links answer 404 (links)"),
    ("sessionid=", "session-id links answer 404 (links)"),
)


def _count_dynamic_links(links: Iterable[Link], counts: Counter[str]) -> None:
    for link in links:
        url = link.url
        for mark, reason in _DYNAMIC_LINK_MARKS:
            if mark in url:
                counts[reason] += 1
                break


def _write_host_files(model: WebModel, h: int, base: str, w: _Written) -> None:
    """robots.txt (when it answers 200 directly) and the sitemaps."""
    status = model.robots_status(h)
    if status == "ok":
        resp = respond(model, Resource(Kind.ROBOTS, h))
        _write(f"{base}/robots.txt", resp.body)
        w.files += 1
        w.bytes += len(resp.body)
    elif status != "404":  # 404: nginx answers the model's 404 itself
        w.skipped[f"robots.txt answers {status}"] += 1
    if model.hosts[h].flags & HostFlag.SITEMAP:
        resources = [("sitemap.xml", Resource(Kind.SITEMAP, h))]
        resources += [
            (f"sitemap-{k}.xml.gz", Resource(Kind.SITEMAP_PART, h, k))
            for k in range(model.sitemap_parts(h))
        ]
        for name, res in resources:
            body = respond(model, res).body
            _write(f"{base}/{name}", body)
            w.files += 1
            w.bytes += len(body)


_WORKER_CONNECTIONS = 4096


def _nofile_limit() -> int:
    """File descriptors a worker may have: the hard limit (nginx raises the soft one to it),
    at most 65536."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 1024
    return 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)


def _fd_lines(listeners: int) -> str:
    """worker_rlimit_nofile and an open_file_cache sized to fit in it.

    A cache larger than the descriptors left makes opens fail with EMFILE, which try_files
    would turn into wrong 404s: the cache gets what listeners and connections leave."""
    nofile = _nofile_limit()
    room = nofile - listeners - _WORKER_CONNECTIONS - 1024
    lines = f"worker_rlimit_nofile {nofile};\n"
    if room >= 1000:
        lines += (
            f"    open_file_cache max={min(room, 200_000)} inactive=120s;\n"
            "    open_file_cache_valid 300s;\n"
        )
    return lines


def host_charset(model: WebModel, h: int) -> str:
    """The charset nginx must add to a host's text/html Content-Type ('': none)."""
    ctype = page_headers(model, model.plan(h, 0))[0][1]
    return ctype.partition("charset=")[2].strip()


def nginx_config(
    model: WebModel,
    out: Path,
    *,
    port: int,
    ips: Sequence[str],
    workers: int | str = "auto",
    access_log: Path | None = None,
) -> str:
    """nginx.conf serving out/sites/<host> on every IP of the web at `port`.

    Everything nginx writes stays inside `out`; nginx adds no ETag or Last-Modified and never
    answers 304 (the model's clean pages have no validators), and its 404s carry the model's
    bodies and Content-Types."""
    charsets = []
    for h in range(len(model.hosts)):
        cs = host_charset(model, h)
        if cs:
            charsets.append(f"        {model.hosts[h].name} {cs};\n")
    listens = "".join(f"        listen {ip}:{port} backlog=4096;\n" for ip in ips)
    user = "user root;\n" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    log = f"access_log {access_log} gossamer;" if access_log else "access_log off;"
    fd_lines = _fd_lines(len(ips)).split("\n", 1)
    not_found = NOT_FOUND_BODY.replace("\n", "\\n")
    robots_not_found = ROBOTS_NOT_FOUND_BODY.replace("\n", "\\n")
    charset_map = "".join(charsets)
    return f"""\
# nginx config written by `gossamer testweb export` (seed {model.spec.seed}, \
{len(model.hosts)} hosts, profile {model.spec.profile}).
# Run in the foreground: nginx -c {out}/nginx.conf -p {out}/ -g 'daemon off;'
{user}worker_processes {workers};
{fd_lines[0]}
pid {out}/nginx.pid;
error_log {out}/logs/error.log warn;

events {{
    worker_connections {_WORKER_CONNECTIONS};
    multi_accept on;
}}

http {{
    types {{
        text/html html;
        text/plain txt;
        application/xml xml;
        application/gzip gz;
    }}
    default_type application/octet-stream;
    charset_types text/plain;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 100000;
    server_tokens off;
    etag off;
    if_modified_since off;
    log_not_found off;
{fd_lines[1]}    client_body_temp_path {out}/tmp/body;
    proxy_temp_path {out}/tmp/proxy;
    fastcgi_temp_path {out}/tmp/fastcgi;
    uwsgi_temp_path {out}/tmp/uwsgi;
    scgi_temp_path {out}/tmp/scgi;
    log_format gossamer '{LOG_FORMAT}';
    {log}
    map_hash_max_size 262144;
    map_hash_bucket_size 128;

    # text/html charset per host, as the model's Content-Type says
    map $host $gs_charset {{
        default "";
{charset_map}    }}

    server {{
{listens}        server_name _;
        root {out}/sites/$host;
        charset $gs_charset;
        add_header Last-Modified "";
        error_page 403 404 = @gs_not_found;
        if ($args) {{
            return 404;  # the model has no query-string URLs on a static web
        }}

        location / {{
            try_files $uri =404;
        }}
        location = / {{
            try_files /index.html =404;
        }}
        location = /robots.txt {{
            charset utf-8;
            add_header Last-Modified "";
            try_files $uri @gs_robots_not_found;
        }}
        location @gs_not_found {{
            types {{ }}
            default_type text/html;
            charset off;
            return 404 "{not_found}";
        }}
        location @gs_robots_not_found {{
            types {{ }}
            default_type text/plain;
            charset utf-8;
            return 404 "{robots_not_found}";
        }}
    }}
}}
"""
