"""What a rebuild does with each page, and what came of it: pure rules, used by the fetch
stage (tasks/stages/fetch.py).

Layers, cheapest first: a page whose sitemap <lastmod> is the one the last build saw is
**skipped** without a request when its host's lastmod is trusted (tasks.fetch.lastmod_trust),
unless it is in this build's random re-check sample (sized by the bound in
tasks.fetch.lastmod_trust) or was last asked more than `max_skip_days` ago; any other
page the last build had is asked **conditionally** (ETag / Last-Modified: a 304 keeps its
text); a page that comes back in full is compared by its
**text**, so a page whose bytes changed but whose text did not is "unchanged" (its
sections keep their ids and cached results).

Outcomes, one per page of a build (the manifest, history, report and `kpack inspect`
count them):

    skipped_lastmod   not requested: lastmod unchanged on a trusted host
    not_modified      asked conditionally, answered 304
    unchanged         fetched in full, same text as the last build
    changed           fetched in full, other text than the last build
    new               fetched, and not in the last build (newly listed, or failed then)
    failed            not usable this build (error, refused, unsupported)
    removed           in the last build, no longer listed (counted at publish)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from tasks.fetch.lastmod_trust import KINDS, MAX_EXAMPLES, observe

OUTCOMES = ("skipped_lastmod", "not_modified", "unchanged", "changed", "new", "removed",
            "failed")


@dataclass(frozen=True)
class SkipPolicy:
    """What lets a build skip pages by lastmod: the hosts trusted for it (none by
    default: every page the last build had is asked conditionally), the share of each
    trusted host's skippable pages asked anyway (`recheck`: (host, rate) pairs from
    tasks.fetch.lastmod_trust.recheck_rates; a host not listed gets pack.toml's
    [sitemap] recheck_share), the build's random `salt` that picks the sample (empty: the
    build id), and max_skip_days."""

    trusted: tuple[str, ...] = ()
    recheck_share: float = 0.02
    max_skip_days: float = 30.0
    recheck: tuple[tuple[str, float], ...] = ()
    salt: str = ""

    def rate(self, host: str) -> float:
        """The share of `host`'s skippable pages this build asks anyway."""
        return dict(self.recheck).get(host, self.recheck_share)


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def in_sample(url: str, salt: str, share: float) -> bool:
    """Whether `url` is in the re-check sample drawn with `salt` (a build's random salt, or
    its id): a hash of both, so each page is picked with probability `share`, independently
    of the others, a new sample each build, the same ones in a rerun of a shard."""
    if share <= 0:
        return False
    if share >= 1:
        return True
    digest = hashlib.sha256(f"{salt}\n{url}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


def should_skip(url: str, lastmod: str | None, previous: dict | None, policy: SkipPolicy,
                *, build_id: str, now: datetime) -> bool:
    """True when the page need not be requested: its sitemap lastmod equals the one the
    last build recorded, the last build has its text, its host is trusted, it is not in
    this build's re-check sample, and it was requested within `max_skip_days` of `now`
    (`previous["fetched_at"]`, ISO-8601 with zone; unreadable means "ask")."""
    if not lastmod or not previous or previous.get("text") is None:
        return False
    if previous.get("lastmod") != lastmod or host_of(url) not in policy.trusted:
        return False
    if in_sample(url, policy.salt or build_id, policy.rate(host_of(url))):
        return False
    try:
        asked = datetime.fromisoformat(str(previous.get("fetched_at")))
    except ValueError:
        return False
    if asked.tzinfo is None:
        return False
    return now - asked <= timedelta(days=policy.max_skip_days)


def outcome(status: str, text: str | None, previous: dict | None) -> str:
    """The outcome of a page that was requested (see the module docstring)."""
    if status == "not_modified":
        return "not_modified" if previous else "new"
    if text is None:
        return "failed"
    if not previous or previous.get("text") is None:
        return "new"
    return "unchanged" if previous["text"] == text else "changed"


class Evidence:
    """The lastmod observations of one shard, per host (tasks.fetch.lastmod_trust)."""

    def __init__(self) -> None:
        self.hosts: dict[str, dict] = {}

    def add(self, url: str, lastmod: str | None, previous: dict | None, result: str) -> None:
        """One requested page: counted when both lastmods and the last text are known
        and it was answered (`result` one of not_modified, unchanged, changed)."""
        if not lastmod or not previous or not previous.get("lastmod"):
            return
        if result not in ("not_modified", "unchanged", "changed"):
            return
        kind = observe(previous["lastmod"] != lastmod, result == "changed")
        tally = self.hosts.setdefault(host_of(url), {k: 0 for k in KINDS} | {"examples": []})
        tally[kind] += 1
        if kind == "lie" and len(tally["examples"]) < MAX_EXAMPLES:
            tally["examples"].append(url)


def merge_evidence(parts: list[dict]) -> dict[str, dict]:
    """The shards' evidence ({host: tally}) summed per host."""
    out: dict[str, dict] = {}
    for part in parts:
        for host, tally in (part or {}).items():
            into = out.setdefault(host, {k: 0 for k in KINDS} | {"examples": []})
            for k in KINDS:
                into[k] += int(tally.get(k, 0))
            room = MAX_EXAMPLES - len(into["examples"])
            into["examples"].extend(list(tally.get("examples", []))[:max(room, 0)])
    return out
