"""No single URL sinks a fetch (#37): whatever goes wrong with one URL is that URL's
failure with its reason, and the per-URL deadline runs only while the URL is being
fetched, not while it waits for one of its host's connection slots. A real loopback
server; timeouts injected short, so nothing here waits more than a few seconds."""

from __future__ import annotations

import time

import httpx
import pytest

from tasks.fetch.pages import FetchConfig, fetch_pages
from tasks.fetch.policy import legacy_ipv4
from tests.loopback_site import LoopbackSite, Request

PAGE = b"# Slow page\n\nIt answers late, but it answers: the fetch must keep it.\n"


def _slow(req: Request) -> None:
    time.sleep(0.3)  # the server thread's delay (a slow page), not the test's
    req.send(200, PAGE, "text/markdown")


def _hang(req: Request) -> None:
    req.site.stopping.wait(10)  # never answers while the test runs


def test_valid_slow_pages_behind_hanging_urls_of_one_host_are_all_kept() -> None:
    """6 hanging URLs and 4 slow valid pages on one host with 2 connection slots: the
    hanging ones take the slots first and hold each for its read timeout. The valid pages
    used to time out while queueing ("timed out after 1 s") although the server answered
    each in 0.3 s."""
    site = LoopbackSite()
    for i in range(6):
        site.route(f"/hang/{i}", _hang)
    for i in range(4):
        site.route(f"/slow/{i}", _slow)
    urls = [site.url(f"/hang/{i}") for i in range(6)] + [site.url(f"/slow/{i}") for i in range(4)]
    config = FetchConfig(allow_private_hosts=True, respect_robots=False, timeout_s=0.5,
                         total_timeout_s=1.0, per_host_concurrency=2, concurrency=8,
                         max_retries=0)
    with site:
        pages = fetch_pages(urls, config)
    statuses = {p.url.rsplit("/", 2)[-2] + "/" + p.url.rsplit("/", 1)[-1]: p.status
                for p in pages}
    assert [statuses[f"slow/{i}"] for i in range(4)] == ["ok"] * 4, [
        (p.url, p.error) for p in pages]
    assert all(statuses[f"hang/{i}"] == "failed" for i in range(6))
    assert all("read timed out" in p.error for p in pages if "/hang/" in p.url)


def test_the_deadline_still_caps_a_url_that_holds_a_slot() -> None:
    """Pausing the clock while queueing does not lift the cap on the fetch itself."""
    site = LoopbackSite()
    site.route("/hang", _hang)
    config = FetchConfig(allow_private_hosts=True, respect_robots=False, timeout_s=5.0,
                         total_timeout_s=0.5, max_retries=0)
    started = time.monotonic()
    with site:
        (page,) = fetch_pages([site.url("/hang")], config)
    assert page.status == "failed" and page.error == "timed out after 0.5 s"
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(("host", "canonical"), [
    ("0177.0.0.1", "127.0.0.1"), ("2130706433", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"), ("127.0.0.1", None), ("docs.example.com", None),
    ("1e100.net", None), ("08.0.0.1", "a valid dotted-decimal address"),
])
def test_legacy_ipv4_forms_are_recognised(host, canonical) -> None:
    assert legacy_ipv4(host) == canonical


def test_an_octal_address_is_one_urls_failure_not_the_shards() -> None:
    """`http://0177.0.0.1:PORT/` with private hosts allowed raised httpx.InvalidURL out of
    the fetch and failed its whole shard (the build exited 1)."""
    site = LoopbackSite()
    site.route("/ok", lambda r: r.send(200, PAGE, "text/markdown"))
    config = FetchConfig(allow_private_hosts=True, respect_robots=False)
    with site:
        pages = fetch_pages([site.url("/ok", host="0177.0.0.1"), site.url("/ok")], config)
    assert [p.status for p in pages] == ["failed", "ok"]
    assert "legacy form" in pages[0].error and "127.0.0.1" in pages[0].error


def test_any_unexpected_error_is_that_urls_failure_with_its_reason() -> None:
    """A transport (the network boundary) that raises what no rule foresaw, for one URL."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/boom":
            raise ValueError("something nobody expected")
        return httpx.Response(200, content=PAGE, headers={"content-type": "text/markdown"})

    config = FetchConfig(respect_robots=False, allow_private_hosts=True)
    pages = fetch_pages(["http://127.0.0.1:9/boom", "http://127.0.0.1:9/fine"], config,
                        transport=httpx.MockTransport(handler))
    assert [p.status for p in pages] == ["failed", "ok"]
    assert pages[0].error == "unexpected error: ValueError: something nobody expected"
