"""A URL set from the simulated web, without serving it.

`url_corpus(min_urls, seed)` builds a `WebModel` (the same deterministic web `gossamer testweb`
serves) and lists every page URL of every host: exactly the URLs the server answers 200 for
and the navigation links reach, built by string formatting, with no HTTP and no rendering. The
web has at most 100,000 hosts, so to reach `min_urls` the mean site size is raised: the size
distribution keeps its shape, only its scale changes (docs/experiments.md, "The URL set")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from ..testweb import WebModel, WebSpec

#: The full size of experiments 1 and 2: KSpider's "6 million URLs under 2 to 10 nodes".
FULL_URLS: Final = 6_000_000
#: The `--quick` size: seconds, for the test suite.
QUICK_URLS: Final = 20_000
#: Mean pages per host before scaling (the simulated web's default).
_PAGES_MEAN: Final = 50.0
_MAX_HOSTS: Final = 100_000


@dataclass(frozen=True, slots=True)
class UrlCorpus:
    """Every page URL of one simulated web, grouped by host: host h owns
    `urls[offsets[h]:offsets[h + 1]]`."""

    spec: WebSpec
    hosts: tuple[str, ...]
    domains: tuple[str, ...]
    pages: tuple[int, ...]
    offsets: tuple[int, ...]
    urls: tuple[str, ...]

    def host_urls(self, h: int) -> tuple[str, ...]:
        return self.urls[self.offsets[h] : self.offsets[h + 1]]

    def describe(self) -> dict[str, Any]:
        """The corpus in numbers: sizes, the heavy tail, the spec that regenerates it."""
        by_size = sorted(range(len(self.hosts)), key=lambda h: -self.pages[h])
        total = len(self.urls)
        top = max(1, len(self.hosts) // 100)
        return {
            "spec": self.spec.to_dict(),
            "urls": total,
            "hosts": len(self.hosts),
            "domains": len(set(self.domains)),
            "mean_pages_per_host": total / len(self.hosts),
            "median_pages_per_host": sorted(self.pages)[len(self.pages) // 2],
            "largest_hosts": [{"host": self.hosts[h], "pages": self.pages[h]} for h in by_size[:5]],
            "largest_host_share": self.pages[by_size[0]] / total,
            "top_1pct_hosts_share": sum(self.pages[h] for h in by_size[:top]) / total,
            "sum_of_squared_shares": sum((p / total) ** 2 for p in self.pages),
        }


@lru_cache(maxsize=2)
def url_corpus(min_urls: int, seed: int = 1) -> UrlCorpus:
    """At least `min_urls` page URLs of the simulated web of `seed` (realistic profile: some
    hosts use query URLs). Deterministic: same arguments, same corpus. Cached (experiments run
    one after another share it)."""
    if min_urls < 1:
        raise ValueError(f"min_urls must be >= 1, not {min_urls}")
    hosts = min(_MAX_HOSTS, max(50, math.ceil(min_urls / (_PAGES_MEAN * 0.8))))
    pages_mean = max(_PAGES_MEAN, min_urls / hosts)
    while True:
        spec = WebSpec(seed=seed, hosts=hosts, pages_mean=pages_mean, profile="realistic")
        model = WebModel(spec)
        total = model.total_pages
        if total >= min_urls:
            break
        pages_mean *= 1.02 * min_urls / total  # same shape, larger scale
    names = tuple(h.name for h in model.hosts)
    offsets = [0]
    urls: list[str] = []
    for h, host in enumerate(model.hosts):
        urls.extend(model.page_url(h, i) for i in range(host.pages))
        offsets.append(len(urls))
    return UrlCorpus(
        spec=spec,
        hosts=names,
        domains=tuple(h.domain for h in model.hosts),
        pages=tuple(h.pages for h in model.hosts),
        offsets=tuple(offsets),
        urls=tuple(urls),
    )
