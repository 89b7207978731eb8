"""Whether a host's sitemap <lastmod> can be trusted to skip its unchanged pages.

About a third of hosts serve a lastmod that follows their content; the rest leave it
stale, stamp every page with the sitemap's build time, or omit it. So trust is earned per
host, from what the build saw, and lost at the first lie.

**Observations.** Every page the fetch stage requested (200 or 304) whose lastmod it
knows from this build's sitemap and from the last build's, and whose text it has from the
last build, is one observation of its host: did the lastmod change, and did the text the
pack reads change (a 304 is unchanged)? Four kinds:

    same_same         lastmod unchanged, text unchanged      agrees
    changed_changed   lastmod changed, text changed          agrees
    eager             lastmod changed, text unchanged        harmless, says little
    lie               lastmod unchanged, text changed        the lastmod missed a change

**The rule** (`verdict`), over the host's last WINDOW_BUILDS builds that observed it:
trusted when there was no lie, at least MIN_OBSERVATIONS observations, at least
MIN_CHANGES of them with changed text (each came with a changed lastmod, else it would be
a lie), and at least MIN_PRECISION of the lastmod changes came with changed text (a host
that moves every lastmod on every build says nothing). One lie drops trust at once, and
it stays in the window for WINDOW_BUILDS builds.

While a host is trusted, the fetch stage still asks a random sample of its skippable
pages (a new sample each build) and every page not asked for `max_skip_days`: those
requests are the observations that catch a lastmod that stops telling the truth, and one
caught lie drops the trust for the next build. **The bound** (`recheck_rate`): each page
of a trusted host is re-checked with a probability p such that when at least a share
`lie_share` of the host's N pages listed with a lastmod changed while their lastmod did
not (L = ceil(lie_share x N) pages, at least 1), the sample asks one of them within
`within_builds` builds with probability at least `confidence`:

    P(no lying page asked in k builds) = (1 - p)^(L k) <= 1 - confidence
    p = 1 - (1 - confidence)^(1 / (L k))

Pages are picked independently (a hash of the page and the build's random salt), so this
holds exactly whatever the sample's size. Defaults (pack.toml [sitemap]): 20 % lying
pages are caught with probability 99 % within 2 builds (90 % in the next one), which costs
at most about 11.5 conditional requests per trusted host per build (-ln 0.01 / (0.2 x 2)):
9.2 of a host of 25 pages, 4.5 of one of 5; and never fewer than `recheck_share` (2 %) of
its pages (200 of 10,000).
`trust_lastmod = "never"` in pack.toml turns skipping off.

The state lives in the work dir (`<work>/<pack>/lastmod_trust.json`); the manifest of each
build records each host's verdict and its reason. Pure apart from `load` and `save`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

STATE_FILE = "lastmod_trust.json"
KINDS = ("same_same", "changed_changed", "eager", "lie")
WINDOW_BUILDS = 30
MIN_OBSERVATIONS = 20
MIN_CHANGES = 3
MIN_PRECISION = 0.5
MAX_EXAMPLES = 3  # lying URLs kept per build, for the reason
# The re-check bound's defaults (pack.toml [sitemap] recheck_lie_share, recheck_within_builds,
# recheck_confidence; see the module doc).
LIE_SHARE = 0.2
WITHIN_BUILDS = 2
CONFIDENCE = 0.99


def recheck_rate(pages: int, lie_share: float = LIE_SHARE, within_builds: int = WITHIN_BUILDS,
                 confidence: float = CONFIDENCE, floor: float = 0.0) -> float:
    """The probability with which each skippable page of a trusted host of `pages` pages
    (listed with a lastmod) is asked anyway this build (see the module doc); at least
    `floor` (pack.toml recheck_share). `confidence` 0 turns the bound off (`floor` alone)."""
    if pages <= 0 or confidence <= 0 or lie_share <= 0 or within_builds <= 0:
        return min(1.0, floor)
    if confidence >= 1:
        return 1.0
    lying = max(1, math.ceil(lie_share * pages - 1e-9))
    rate = 1.0 - (1.0 - confidence) ** (1.0 / (lying * within_builds))
    return min(1.0, max(rate, floor))


def recheck_rates(urls: Iterable[str], trusted: Iterable[str], **bound: float
                  ) -> tuple[tuple[str, float], ...]:
    """(host, recheck_rate) for each trusted host, from the build's pages listed with a
    lastmod (`urls`); `bound`: recheck_rate's keyword arguments."""
    hosts = set(trusted)
    counts: dict[str, int] = {}
    for url in urls:
        host = (urlsplit(url).hostname or "").lower()
        if host in hosts:
            counts[host] = counts.get(host, 0) + 1
    return tuple(sorted((h, recheck_rate(counts.get(h, 0), **bound)) for h in hosts))


def observe(lastmod_changed: bool, text_changed: bool) -> str:
    """The kind of one observation (see the module docstring)."""
    if lastmod_changed:
        return "changed_changed" if text_changed else "eager"
    return "lie" if text_changed else "same_same"


@dataclass(frozen=True)
class Verdict:
    trusted: bool
    reason: str
    observations: dict[str, int]


def verdict(builds: list[dict]) -> Verdict:
    """The verdict on a host from its per-build tallies ({kind: count, "examples":
    [lying urls], "build_id"}), oldest first; only the last WINDOW_BUILDS count."""
    window = builds[-WINDOW_BUILDS:]
    seen = {k: sum(int(b.get(k, 0)) for b in window) for k in KINDS}
    total = sum(seen.values())
    changes = seen["changed_changed"]
    moved = changes + seen["eager"]
    if seen["lie"]:
        liars = [u for b in window for u in b.get("examples", [])][:MAX_EXAMPLES]
        last = next((b.get("build_id") for b in reversed(window) if b.get("lie")), "?")
        return Verdict(False, f"{seen['lie']} pages changed while their lastmod stayed "
                              f"(last in build {last}: {', '.join(liars)})", seen)
    if total < MIN_OBSERVATIONS:
        return Verdict(False, f"{total} of the {MIN_OBSERVATIONS} observations needed", seen)
    if changes < MIN_CHANGES:
        return Verdict(False, f"{changes} of the {MIN_CHANGES} changed pages needed to see "
                              "lastmod follow a change", seen)
    if moved and changes / moved < MIN_PRECISION:
        return Verdict(False, f"lastmod moved on {moved} pages, only {changes} of which "
                              "changed: it does not follow the content", seen)
    return Verdict(True, f"lastmod followed the content on all {total} pages observed "
                         f"({changes} changed)", seen)


def load(pack_dir: Path) -> dict:
    """The pack's trust state ({"hosts": {host: [tally, ...]}}); empty when absent or
    unreadable (then no host is trusted: pages are asked conditionally, which is safe)."""
    try:
        state = json.loads((pack_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"hosts": {}}
    hosts = state.get("hosts") if isinstance(state, dict) else None
    return {"hosts": hosts if isinstance(hosts, dict) else {}}


def trusted_hosts(state: dict) -> tuple[str, ...]:
    """The hosts whose lastmod this build may skip pages by, sorted."""
    return tuple(sorted(h for h, builds in state["hosts"].items() if verdict(builds).trusted))


def record(state: dict, build_id: str, tallies: dict[str, dict]) -> dict:
    """`state` with this build's tallies ({host: {kind: n, "examples": [...]}}) added;
    a host keeps its last WINDOW_BUILDS tallies. Returns a new state; pure."""
    hosts = {h: list(b) for h, b in state["hosts"].items()}
    for host, tally in tallies.items():
        if not any(tally.get(k) for k in KINDS):
            continue
        entry = {"build_id": build_id, **{k: int(tally.get(k, 0)) for k in KINDS},
                 "examples": list(tally.get("examples", []))[:MAX_EXAMPLES]}
        builds = [b for b in hosts.get(host, []) if b.get("build_id") != build_id]
        hosts[host] = (builds + [entry])[-WINDOW_BUILDS:]
    return {"hosts": hosts}


def save(pack_dir: Path, state: dict) -> None:
    """Write the state through a temp file and a rename (a killed build leaves the old)."""
    pack_dir.mkdir(parents=True, exist_ok=True)
    tmp = pack_dir / f".{STATE_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    os.replace(tmp, pack_dir / STATE_FILE)
