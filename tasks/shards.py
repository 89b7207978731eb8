"""Shards: the pages of a pack grouped by a stable hash of their canonical URL.

The build maps fetch, split, extract and embed over shards, so a pack of any size is a
bounded number of task runs, each over a bounded amount of work (pure functions, no I/O):

- `shard_count(pages, shard_pages, slots)`: the number of shards is the power of two at or
  above pages / shard_pages, capped at MAX_SHARDS; so a shard holds shard_pages / 2 to
  shard_pages pages on average, and a pack past MAX_SHARDS * shard_pages pages gets larger
  shards rather than more task runs. On a cluster with `slots` task slots (Dask workers'
  threads) there are at least SHARDS_PER_SLOT shards per slot, as long as a shard keeps
  MIN_SHARD_PAGES pages: few large shards on few slots pair up unevenly and leave workers
  idle at the end of a stage.
- `shard_of(url, count)`: the top bits of sha256(canonical URL). A page stays in its shard
  while the count stays; when the count doubles, shard i splits into 2i and 2i + 1
  (`lineage` maps a shard to the shards of an earlier layout that held its pages, so the
  per-section outputs of the last build are found again).

Power-of-two counts keep layouts stable: adding a page changes one shard's content, not
the assignment of every other page. `stable_count` adds hysteresis on top: a build keeps
the last build's count while its pages stay within LAYOUT_MARGIN (25 %) of that count's
range, so a few pages added to or dropped from a pack near a threshold (40 pages of 10 a
shard, then 41) do not double or halve the layout, and the shards and their task runs
stay comparable from one build to the next.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from packs.urls import canonical_url

DEFAULT_SHARD_PAGES = 200
# 512 shards x 4 mapped stages + the reduce steps keeps any build near 2,000 task runs.
MAX_SHARDS = 512
# With task slots to fill, enough shards that the last ones to finish are small next to a
# stage's work (8 per slot: the tail where one slot still works and another waits is about
# half a shard, a sixteenth of the stage), but not so many that a shard's own costs (its
# task runs, Parquet files, model calls per batch) come near its work.
SHARDS_PER_SLOT = 8
MIN_SHARD_PAGES = 16
# How far the page count may move past the edges of the current layout's range before the
# layout changes: it doubles once shards would average more than 1.25 x shard_pages, and
# halves once they would average under 0.4 x (instead of at 1 x and 0.5 x).
LAYOUT_MARGIN = 0.25


def shard_count(pages: int, shard_pages: int, slots: int = 0,
                max_shards: int = MAX_SHARDS) -> int:
    """The power of two >= pages / shard_pages (at least 1, at most `max_shards`); with
    `slots` task slots, raised towards SHARDS_PER_SLOT * slots while shards keep at least
    MIN_SHARD_PAGES pages."""
    if shard_pages < 1:
        raise ValueError(f"shard_pages must be at least 1, got {shard_pages}")
    want = math.ceil(max(pages, 1) / shard_pages)
    if slots > 0:
        want = max(want, min(SHARDS_PER_SLOT * slots, max(pages, 1) // MIN_SHARD_PAGES))
    count = 1
    while count < want and count < max_shards:
        count *= 2
    return count


def stable_count(pages: int, shard_pages: int, slots: int = 0, previous: int = 0,
                 max_shards: int = MAX_SHARDS) -> int:
    """The shard count of a rebuild: the last build's count (`previous`, 0 for none) while
    it is what `shard_count` gives for some page count within LAYOUT_MARGIN of `pages`
    (the same `slots` and cap), else what `shard_count` gives for `pages`.

    40 pages of 10 a shard make 4 shards; 41 pages would make 8 afresh but keep 4, and
    the layout doubles only at 52 pages (1.25 x 40, rounded down, is still 40 at 51);
    4 shards halve at 16 pages or fewer, 8 shards at 32 or fewer.
    Raises ValueError for shard_pages < 1."""
    natural = shard_count(pages, shard_pages, slots, max_shards)
    if previous < 1 or previous & (previous - 1) or previous == natural:
        return natural
    fewest = shard_count(math.floor(pages / (1 + LAYOUT_MARGIN)), shard_pages, slots, max_shards)
    most = shard_count(math.ceil(pages * (1 + LAYOUT_MARGIN)), shard_pages, slots, max_shards)
    return previous if fewest <= previous <= most else natural


def shard_of(url: str, count: int) -> int:
    """The shard (0 .. count-1) of a URL: the top log2(count) bits of its hash."""
    digest = hashlib.sha256(canonical_url(url).encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") * count) >> 64


def assign(urls: list[str], count: int) -> list[list[str]]:
    """The URLs of each shard, in their urls.txt order within a shard."""
    shards: list[list[str]] = [[] for _ in range(count)]
    for url in urls:
        shards[shard_of(url, count)].append(url)
    return shards


def lineage(index: int, count: int, previous_count: int) -> list[int]:
    """The shards of a layout with `previous_count` shards that held the pages of shard
    `index` of `count` (both powers of two): one parent when the count grew, the
    children when it shrank."""
    if previous_count <= 0:
        return []
    if previous_count <= count:
        return [index // (count // previous_count)]
    ratio = previous_count // count
    return list(range(index * ratio, (index + 1) * ratio))


@dataclass(frozen=True)
class Shard:
    """What a shard task needs to know about its shard: small and picklable.

    `previous` maps a stage to the outputs its shards wrote in the last completed build
    for these pages (see `lineage`); a stage reuses per-section results from them.
    """

    index: int
    count: int
    plan: str  # file with this shard's URLs, one per line
    previous: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def label(self) -> str:
        """`i/n`, counted from 1, as task run names show it."""
        return f"{self.index + 1}/{self.count}"

    def previous_outputs(self, stage: str) -> tuple[str, ...]:
        return dict(self.previous).get(stage, ())
