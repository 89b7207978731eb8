"""The publish guard: a new build never replaces the current one when it is clearly worse.

Measured before it existed: a rebuild whose Claude answers all failed validation, or
whose API was unreachable, exited 0 and published a pack with 0 entities over a good one.
A build is refused (`GuardError`, the current build stays) when

- extraction failed for more than `max_failed_share` of its sections (the API is dead or
  its answers are unusable); sections left out on purpose by a cost cap do not count;
- pages that the current build has, and that urls.txt still lists, could not be fetched,
  for more than `max_loss_share` of the current build's pages (the site is down);
- with the same pages as the current build (same URLs, same content), it has lost more
  than `max_loss_share` of the current build's sections or entities.

Each check is a pure function of counts; `kpack build --force` (or `force=True`) skips
the guard. Both shares are set in pack.toml (`guard_max_failed_share`,
`guard_max_loss_share`).
"""

from __future__ import annotations

from dataclasses import dataclass


class GuardError(RuntimeError):
    """The new build is clearly worse than the current one; nothing was published.
    `counts`: the refused build's (sources, failed_sources, sections, entities), for the
    refused alert; empty when the guard refused before counting."""

    def __init__(self, message: str, counts: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.counts = dict(counts or {})


@dataclass(frozen=True)
class BuildFacts:
    """What the guard compares, for the new build or the current one."""

    sections: int
    entities: int
    pages: dict[str, str | None]  # usable page URL → content hash
    failed_sections: int = 0  # extraction failed (not: skipped by the cost cap)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def check(new: BuildFacts, current: BuildFacts | None, listed: set[str], *,
          max_failed_share: float, max_loss_share: float) -> str | None:
    """Why `new` must not replace `current` (None: it may). `listed` holds the URLs in
    urls.txt now (a page removed from it is a change, not a loss)."""
    if new.sections and new.failed_sections / new.sections > max_failed_share:
        return (f"{new.failed_sections} of {new.sections} sections "
                f"({_pct(new.failed_sections / new.sections)}) failed extraction, more than "
                f"guard_max_failed_share = {_pct(max_failed_share)}: the API is unreachable "
                "or its answers are unusable")
    if current is None:
        return None
    lost = [u for u in current.pages if u in listed and u not in new.pages]
    if current.pages and len(lost) / len(current.pages) > max_loss_share:
        return (f"{len(lost)} of the current build's {len(current.pages)} pages "
                f"({_pct(len(lost) / len(current.pages))}) could not be fetched this time, "
                f"more than guard_max_loss_share = {_pct(max_loss_share)}")
    if new.pages != current.pages:
        return None  # the sources changed: fewer sections or entities may be right
    for what, before, after in (("sections", current.sections, new.sections),
                                ("entities", current.entities, new.entities)):
        if before and (before - after) / before > max_loss_share:
            return (f"the pages are unchanged but {what} fell from {before} to {after} "
                    f"(-{_pct((before - after) / before)}), more than guard_max_loss_share "
                    f"= {_pct(max_loss_share)}")
    return None
