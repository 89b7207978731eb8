"""A build's freshness, composed around the fetch: before the shards are planned, the
source's sitemaps are expanded into the URL list and the lastmod trust of each host is
read (`prepare`); after the fetch, the shards' per-page outcomes are summed and the hosts'
lastmod evidence is recorded for the next build (`after_fetch`).

The rules live in tasks/fetch/ (sitemap.py, sitemap_walk.py, expand.py, freshness.py,
lastmod_trust.py); this module only calls them in order and shapes the result that the
manifest (`packs.manifest.Freshness`), the history, the build report and `kpack build`
show. Publish adds `removed` (pages of the last build no longer listed).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

from tasks.fetch import lastmod_trust, robots_cache
from tasks.fetch.expand import Expanded, expand
from tasks.fetch.freshness import OUTCOMES, SkipPolicy, merge_evidence
from tasks.sources import SourceConfig
from tasks.stages.common import BuildContext, Record

MAX_HOSTS = 50  # hosts a manifest lists with their lastmod verdict
_SYSTEM = random.SystemRandom()


class NoPagesError(RuntimeError):
    """The source's URL list came out empty: its sitemaps listed no page that was kept."""


def prepare(ctx: BuildContext, source: SourceConfig,
            rng: random.Random | None = None) -> tuple[BuildContext, Expanded]:
    """(the build context with its robots.txt cache and lastmod skip policy, the build's
    URL list). Expands the source's sitemaps (network; a failed sitemap is in the list's
    report, never an error). The re-check sample of the trusted hosts is drawn with a
    salt from `rng` (default: the system's randomness). Raises NoPagesError when no URL
    is left to build (its sitemaps failed, or listed nothing that include / exclude
    kept), OSError when the work dir cannot be written."""
    # One robots.txt per origin for the whole build: the sitemap walk and every fetch
    # shard share it (tasks/fetch/robots_cache.py).
    ctx = dataclasses.replace(ctx, fetch=dataclasses.replace(
        ctx.fetch, robots_cache=robots_cache.folder(ctx.work, ctx.build_id)))
    expanded = expand(ctx.work, source, ctx.fetch)
    if not expanded.urls:
        raise NoPagesError(f"{source.name}: {_why_empty(expanded.report)}; nothing was "
                           "published")
    opts = source.config.sitemap
    trusted: tuple[str, ...] = ()
    if opts.trust_lastmod == "auto" and expanded.lastmod:
        trusted = lastmod_trust.trusted_hosts(lastmod_trust.load(ctx.work.pack_dir))
    rates = lastmod_trust.recheck_rates(
        expanded.lastmod, trusted, lie_share=opts.recheck_lie_share,
        within_builds=opts.recheck_within_builds, confidence=opts.recheck_confidence,
        floor=opts.recheck_share)
    salt = f"{(rng or _SYSTEM).getrandbits(64):016x}"
    policy = SkipPolicy(trusted, opts.recheck_share, opts.max_skip_days, rates, salt)
    return dataclasses.replace(ctx, skip=policy), expanded


def _why_empty(report: dict) -> str:
    failures = report.get("failures") or []
    if failures:
        reasons = "; ".join(f"{f['url']}: {f['error']}" for f in failures[:3])
        return f"its sitemaps gave no pages ({reasons})"
    if report.get("filtered_out"):
        return (f"[sitemap] include / exclude in pack.toml kept none of the "
                f"{report['listed']} pages its sitemaps list")
    return "its sitemaps list no pages"


def outcome_counts(fetched: list[Record]) -> dict[str, int]:
    """The fetch shards' page outcomes summed, every outcome present (0 when none)."""
    total: Counter = Counter()
    for record in fetched:
        total.update(record.info.get("outcomes") or {})
    return {name: int(total.get(name, 0)) for name in OUTCOMES}


def after_fetch(ctx: BuildContext, source: SourceConfig, expanded: Expanded,
                fetched: list[Record]) -> dict:
    """Record this build's lastmod evidence for the next build (work dir) and return the
    build's freshness: {"pages": outcome counts, "sitemaps": the expansion's report or
    None, "trust_lastmod": the pack.toml mode, "lastmod_hosts": {host: {trusted,
    verdict, reason, observations}}}; `trusted` is whether this build skipped by the
    host's lastmod, `verdict` what the next build will do. Raises OSError when the work
    dir cannot be written."""
    evidence = merge_evidence([r.info.get("lastmod_evidence") or {} for r in fetched])
    state = lastmod_trust.load(ctx.work.pack_dir)
    if evidence:
        state = lastmod_trust.record(state, ctx.build_id, evidence)
        lastmod_trust.save(ctx.work.pack_dir, state)
    hosts = {}
    for host in sorted(set(state["hosts"]) | set(ctx.skip.trusted))[:MAX_HOSTS]:
        v = lastmod_trust.verdict(state["hosts"].get(host, []))
        hosts[host] = {"trusted": host in ctx.skip.trusted, "verdict": v.trusted,
                       "reason": v.reason, "observations": v.observations}
    return {"pages": outcome_counts(fetched),
            "sitemaps": expanded.report or None,
            "trust_lastmod": source.config.sitemap.trust_lastmod,
            "lastmod_hosts": hosts}
