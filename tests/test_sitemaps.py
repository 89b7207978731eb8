"""Sitemap sources: `sitemap:` lines in urls.txt, reading a sitemap as a stream (XML, gzip,
text, an index), include / exclude, and the walk over a loopback site (index recursion to
a depth, conditional requests, failures kept to one line each, the address guard and
robots.txt, the previous entries kept for a sitemap that is down)."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.fetch.expand import expand, select
from tasks.fetch.sitemap import SitemapError, UrlFilter, normalise_lastmod, read_sitemap
from tasks.fetch.sitemap_walk import Previous, walk
from tasks.fetch.types import FetchConfig
from tasks.sources import SourceError, load_source, parse_urls
from tasks.stages.common import WorkDir
from tests.loopback_site import LoopbackSite

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
CONFIG = FetchConfig(allow_private_hosts=True, max_retries=0, timeout_s=5, total_timeout_s=10)


def urlset(urls: list[tuple[str, str | None]]) -> bytes:
    rows = "".join(f"<url><loc>{u}</loc>" + (f"<lastmod>{m}</lastmod>" if m else "") + "</url>"
                   for u, m in urls)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="{NS}">{rows}</urlset>'.encode()


def index(locs: list[str]) -> bytes:
    rows = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in locs)
    return f'<sitemapindex xmlns="{NS}">{rows}</sitemapindex>'.encode()


# --- urls.txt and pack.toml -------------------------------------------------------------


def test_sitemap_lines_are_told_apart_from_pages(tmp_path: Path) -> None:
    origin = tmp_path / "urls.txt"
    (tmp_path / "local.xml").write_text("<urlset/>")
    entries = parse_urls("https://a.org/page\nsitemap: https://a.org/sitemap.xml\n"
                         "Sitemap:https://a.org/s.xml.gz  # the docs\nsitemap: local.xml\n"
                         "https://a.org/sitemap.xml\n", origin)
    assert [(e.url, e.sitemap, e.line) for e in entries] == [
        ("https://a.org/page", False, 1), ("https://a.org/sitemap.xml", True, 2),
        ("https://a.org/s.xml.gz", True, 3), ((tmp_path / "local.xml").as_uri(), True, 4),
        ("https://a.org/sitemap.xml", False, 5)]  # the same URL as a page is another entry
    with pytest.raises(SourceError, match=r"urls.txt:1: 'sitemap:' names no URL"):
        parse_urls("sitemap:\n", origin)
    with pytest.raises(SourceError, match=r"urls.txt:1: unsupported scheme 'ftp'"):
        parse_urls("sitemap: ftp://a.org/s.xml\n", origin)


def test_a_source_of_sitemaps_alone_loads_and_its_table_is_checked(tmp_path: Path) -> None:
    (tmp_path / "urls.txt").write_text("sitemap: https://a.org/sitemap.xml\n")
    (tmp_path / "pack.toml").write_text('[sitemap]\ninclude = ["/docs/*"]\nmax_depth = 1\n')
    source = load_source(tmp_path)
    assert source.urls == () and [e.url for e in source.sitemaps] == [
        "https://a.org/sitemap.xml"]
    assert source.config.sitemap.include == ["/docs/*"] and source.config.sitemap.max_depth == 1
    (tmp_path / "pack.toml").write_text('name = "x"\n\n[sitemap]\nexclude = "/a/*"\nfoo = 1\n')
    with pytest.raises(SourceError) as err:
        load_source(tmp_path)
    text = str(err.value)
    assert 'pack.toml:4: sitemap.exclude: \'/a/*\' is not a list like ["a", "b"]' in text
    assert "pack.toml:5: sitemap.foo: unknown field; the fields are exclude, include" in text


# --- reading one file -------------------------------------------------------------------


def test_urlset_index_gzip_and_text_sitemaps_are_read() -> None:
    doc = urlset([("https://a.org/1", "2026-05-01"), ("https://a.org/2", None)])
    expected = [("page", "https://a.org/1", "2026-05-01T00:00:00+00:00"),
                ("page", "https://a.org/2", None)]
    for body in (doc, gzip.compress(doc), b"\xef\xbb\xbf" + doc):
        assert [(k, e.loc, e.lastmod) for k, e in read_sitemap(body)] == expected
    assert [(k, e.loc) for k, e in read_sitemap(index(["https://a.org/s1.xml.gz"]))] == [
        ("sitemap", "https://a.org/s1.xml.gz")]
    assert [e.loc for _, e in read_sitemap(b"https://a.org/1\r\n\nhttps://a.org/2")] == [
        "https://a.org/1", "https://a.org/2"]


@pytest.mark.parametrize(("body", "reason"), [
    (b"<!doctype html><html><body>Not found</body></html>", "not valid XML"),
    (b"<html><body>Not found</body></html>", "the document is <html>"),
    (b"<urlset><url><loc>https://a.org/1</loc>", "not valid XML"),
    (b"", "empty document"),
    (b"hello there", "neither XML nor a URL line"),
    (gzip.compress(b"<urlset/>", mtime=0)[:12], "gzip"),
])
def test_a_body_that_is_not_a_sitemap_says_why(body: bytes, reason: str) -> None:
    with pytest.raises(SitemapError, match=reason):
        list(read_sitemap(body))


def test_entities_are_not_expanded_and_a_gzip_bomb_stops_at_the_cap() -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">'
              b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
              b'<urlset><url><loc>https://a.org/&b;</loc></url></urlset>')
    assert all("aaaa" not in e.loc for _, e in read_sitemap(laughs))
    bomb = gzip.compress(b"<urlset>" + b" " * (8 * 1024 * 1024) + b"</urlset>")
    assert len(bomb) < 20_000
    with pytest.raises(SitemapError, match="inflates past 1 MB"):
        list(read_sitemap(bomb, max_bytes=1024 * 1024))


PEAK_SCRIPT = """
import gzip, json, sys, tracemalloc
from tasks.fetch.sitemap import read_sitemap

NS, peaks = sys.argv[1], []
for entries in map(int, sys.argv[2:]):
    rows = "".join(f"<url><loc>https://a.org/docs/p{i}</loc><lastmod>2026-01-02</lastmod></url>"
                   for i in range(entries))
    doc = gzip.compress(f'<urlset xmlns="{NS}">{rows}</urlset>'.encode())
    tracemalloc.start()
    count = sum(1 for _ in read_sitemap(doc))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == entries, (count, entries)
    peaks.append(peak)
print(json.dumps(peaks))
"""


def _peaks_reading(*entries: int) -> list[int]:
    """The peak of Python allocations while reading a sitemap of each size, measured in
    a process of its own: tracemalloc counts every thread's allocations, and in the test
    process the background threads of earlier tests (Prefect's log and event workers)
    allocate too (once, under load: 646,242 vs 987,788 bytes for the same reader)."""
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, NS, *map(str, entries)], cwd=repo,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_reading_a_large_sitemap_does_not_hold_it() -> None:
    """Reading 40,000 entries (3.2 MB of XML inflated) peaks where reading 5,000 does:
    the body is inflated and parsed in chunks, and entries leave the tree as read."""
    small, large = _peaks_reading(5_000, 40_000)
    assert large < 1.5 * small and large < 1_000_000, (small, large)


def test_lastmod_is_normalised_to_utc_seconds() -> None:
    assert normalise_lastmod("2026-05-01T12:00:00+02:00") == "2026-05-01T10:00:00+00:00"
    assert normalise_lastmod("2026-05-01T10:00Z") == normalise_lastmod("2026-05-01T10:00:00+00:00")
    assert normalise_lastmod("2026-05") is None and normalise_lastmod(" ") is None


def test_include_and_exclude_globs() -> None:
    keep = UrlFilter(["/docs/*", "https://b.org/*"], ["/docs/old/*", "*?print=1"])
    assert [keep.keeps(u) for u in (
        "https://a.org/docs/x", "https://a.org/blog/x", "https://a.org/docs/old/y",
        "https://a.org/docs/x?print=1", "https://b.org/anything")] == [
        True, False, False, False, True]
    assert UrlFilter().keeps("https://a.org/anything")


def test_select_keeps_direct_urls_first_and_each_page_once() -> None:
    from tasks.fetch.sitemap_walk import Listed

    pages = [(Listed(u, m, "page", "s"), "s") for u, m in (
        ("https://a.org/docs/1", "2026-01-01T00:00:00+00:00"), ("https://a.org/docs/1#top", None),
        ("https://a.org/blog/2", None), ("https://a.org/docs/3", None),
        ("https://a.org/docs/4", None))]
    got = select(["https://a.org/direct"], pages, UrlFilter(["/docs/*"]), max_urls=2)
    assert got.urls == ["https://a.org/direct", "https://a.org/docs/1", "https://a.org/docs/3"]
    assert got.lastmod == {"https://a.org/docs/1": "2026-01-01T00:00:00+00:00"}
    assert got.report == {"listed": 5, "filtered_out": 1, "duplicates": 1, "over_cap": 1,
                          "pages": 2}


# --- the walk over a loopback site --------------------------------------------------------


@pytest.fixture()
def site():
    with LoopbackSite() as s:
        yield s


def _xml(body: bytes, ctype: str = "application/xml"):
    return lambda req: req.send(200, body, ctype)


def test_an_index_of_plain_and_gzip_sitemaps_to_a_depth_with_one_bad_file(site) -> None:
    site.route("/sitemap.xml", _xml(index([site.url("/a.xml"), site.url("/b.xml.gz"),
                                           site.url("/missing.xml"), site.url("/nested.xml")])))
    site.route("/a.xml", _xml(urlset([(site.url("/p1"), "2026-01-01"), ("/p2", None),
                                       ("http://[::1/bad", None), ("http://a b/", None)])))
    site.route("/b.xml.gz", _xml(gzip.compress(urlset([(site.url("/p3"), None)])),
                                 "application/x-gzip"))
    site.route("/nested.xml", _xml(index([site.url("/deep.xml"), site.url("/sitemap.xml")])))
    site.route("/deep.xml", _xml(urlset([(site.url("/p4"), None)])))

    result = asyncio.run(walk([site.url("/sitemap.xml")], CONFIG, 1, Previous()))
    pages = [e.url for e, _ in result.pages([site.url("/sitemap.xml")])]
    # /p2 made absolute; locations that are not URLs dropped
    assert pages == [site.url("/p1"), site.url("/p2"), site.url("/p3")]
    by_url = {f.url.rsplit("/", 1)[-1]: f for f in result.files}
    assert by_url["missing.xml"].status == "failed"
    assert by_url["missing.xml"].error == "HTTP 404 Not Found"
    assert "nested deeper than max_depth = 1" in by_url["nested.xml"].error
    assert "deep.xml" not in by_url and site.hits["/deep.xml"] == 0
    deeper = asyncio.run(walk([site.url("/sitemap.xml")], CONFIG, 2, Previous()))
    assert site.url("/p4") in [e.url for e, _ in deeper.pages([site.url("/sitemap.xml")])]
    assert site.hits["/sitemap.xml"] == 2  # named again by nested.xml: read once per walk


def test_sitemaps_obey_the_address_guard_and_robots(site) -> None:
    site.route("/robots.txt", lambda r: r.send(200, b"User-agent: *\nDisallow: /private/\n",
                                               "text/plain"))
    site.route("/private/sitemap.xml", _xml(urlset([(site.url("/p1"), None)])))
    guarded = FetchConfig(max_retries=0, timeout_s=5)  # private hosts refused
    result = asyncio.run(walk([site.url("/s.xml")], guarded, 2, Previous()))
    assert "refused private address 127.0.0.1" in result.files[0].error
    result = asyncio.run(walk([site.url("/private/sitemap.xml")], CONFIG, 2, Previous()))
    assert result.files[0].status == "failed" and "disallowed by" in result.files[0].error
    assert site.hits["/private/sitemap.xml"] == 0


def test_a_sitemap_over_the_size_cap_is_refused(site) -> None:
    site.route("/big.xml", _xml(urlset([(site.url(f"/p{i}"), None) for i in range(2000)])))
    small = FetchConfig(allow_private_hosts=True, max_retries=0, max_bytes=10_000)
    result = asyncio.run(walk([site.url("/big.xml")], small, 2, Previous()))
    assert result.files[0].error.startswith("larger than 9.8 KB cap")


def _source(tmp_path: Path, lines: str, toml: str = "") -> object:
    folder = tmp_path / "src"
    folder.mkdir(exist_ok=True)
    (folder / "urls.txt").write_text(lines)
    (folder / "pack.toml").write_text("allow_private_hosts = true\n" + toml)
    return load_source(folder)


def test_expand_asks_conditionally_and_keeps_a_failed_sitemaps_entries(site, tmp_path) -> None:
    """The second expansion asks with the ETag (a 304 keeps the entries); the third
    finds the sitemap down: one failure with its reason, its entries from the last build
    stand in, and the pages urls.txt lists directly come first."""
    state = {"down": False}
    body = urlset([(site.url(f"/docs/p{i}"), "2026-02-0" + str(i + 1)) for i in range(3)]
                  + [(site.url("/blog/x"), None)])

    def sitemap(req):
        if state["down"]:
            req.send(503, b"down", "text/plain")
        elif req.headers.get("if-none-match") == '"v1"':
            req.send(304, b"", None, {"ETag": '"v1"'})
        else:
            req.send(200, body, "application/xml", {"ETag": '"v1"'})

    site.route("/sitemap.xml", sitemap)
    source = _source(tmp_path, f"{site.url('/direct')}\nsitemap: {site.url('/sitemap.xml')}\n",
                     '[sitemap]\nexclude = ["/blog/*"]\n')
    work = WorkDir(tmp_path / "work", "src")
    first = expand(work, source, CONFIG)
    assert first.urls == [site.url("/direct")] + [site.url(f"/docs/p{i}") for i in range(3)]
    assert first.lastmod[site.url("/docs/p0")] == "2026-02-01T00:00:00+00:00"
    assert (first.report["files"], first.report["ok"], first.report["filtered_out"]) == (1, 1, 1)

    second = expand(work, source, CONFIG)
    assert site.headers_for("/sitemap.xml")[-1]["if-none-match"] == '"v1"'
    assert second.report["not_modified"] == 1 and second.urls == first.urls
    assert second.lastmod == first.lastmod

    state["down"] = True
    third = expand(work, source, FetchConfig(allow_private_hosts=True, max_retries=0))
    assert third.urls == first.urls
    assert third.report["failed"] == 1 and third.report["failures"] == [{
        "url": site.url("/sitemap.xml"),
        "error": "HTTP 503 Service Unavailable; its 4 entries from the last build are kept"}]
    assert len(list((tmp_path / "work" / "src" / "sitemaps").glob("*.parquet"))) == 2


def test_the_walk_holds_a_bounded_number_of_entries(site, monkeypatch) -> None:
    """Past ENTRIES_PER_KEPT_PAGE x max_urls entries (or MIN_ENTRIES), further files are
    not read, each saying why: an index of huge sitemaps cannot fill the memory."""
    from tasks.fetch import sitemap_walk

    monkeypatch.setattr(sitemap_walk, "MIN_ENTRIES", 0)
    site.route("/sitemap.xml", _xml(index([site.url(f"/s{i}.xml") for i in range(3)])))
    for i in range(3):
        site.route(f"/s{i}.xml", _xml(urlset([(site.url(f"/p{i}-{j}"), None)
                                              for j in range(5)])))
    result = asyncio.run(walk([site.url("/sitemap.xml")], CONFIG, 2, Previous(), max_urls=2))
    held = sum(len(v) for v in result.entries.values())
    assert held == 2 * sitemap_walk.ENTRIES_PER_KEPT_PAGE  # the index's 3, then 5 pages
    notes = [f.error for f in result.files if f.error]
    assert notes and all("raise [sitemap] max_urls to read more" in n for n in notes)
