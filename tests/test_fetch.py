"""Fetch stage: pure rules and parsing on tiny inputs, then end-to-end against a real HTTP
server on 127.0.0.1. No test sleeps: backoff and per-host delays go through an injected
sleep that records and returns; the only waits are the sub-second client timeouts of the
"never answers" case."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from packs.retrieval import extractive
from packs.retrieval.units import candidates
from packs.retry import RetryPolicy, backoff_s, is_retryable, retry_after_s
from tasks.fetch.markdown_source import split_front_matter, strip_shortcodes
from tasks.fetch.pages import (
    USER_AGENT,
    FetchConfig,
    Page,
    fetch_pages,
    html_to_markdown,
    markdown_document,
)
from tasks.fetch.parse import choose_charset, classify, parse_document, sniff_binary
from tasks.fetch.policy import (
    address_refusal,
    check_addresses,
    effective_allowed_hosts,
    format_size,
    github_rewrite,
    host_allowed,
)

try:
    from tests.loopback_site import LoopbackSite, Request
except ModuleNotFoundError:  # pytest run without the repo root on sys.path
    from loopback_site import LoopbackSite, Request

RAW = "https://raw.githubusercontent.com"
MB = 1024 * 1024

# --- fixtures: a small documentation site ------------------------------------------------

DOC_HTML = b"""<!doctype html>
<html><head><title>Widget Guide - Example Docs</title><meta charset="utf-8"></head>
<body>
<header><div class="logo">ExampleCorp</div>
  <nav><a href="/">Home</a> <a href="/blog/">Blog</a> <a href="/careers/">Careers at ExampleCorp</a></nav>
</header>
<aside class="sidebar"><ul>
  <li><a href="/docs/sidebar-one.html">Sidebar entry one</a></li>
  <li><a href="/docs/sidebar-two.html">Sidebar entry two</a></li>
</ul></aside>
<main><article>
<h1>Widget Guide</h1>
<p>The widget toolkit turns configuration files into running services. This guide walks
through installing it, checking the requirements, and running the first build on a laptop.
Read the <a href="../api/index.html">API reference</a> for every option.</p>
<h2 id="install">Installation<a class="headerlink" href="#install">\xc2\xb6</a></h2>
<p>Install the package from the registry with the command below; it pulls in the
runtime and the command-line tool in one step.</p>
<pre><code class="language-bash">pip install widget
widget --version</code></pre>
<h3>Requirements</h3>
<ul><li>Python 3.11 or newer</li><li>A C compiler for the native parts</li></ul>
<p>See <a href="requirements.html#python">the requirement notes</a> for details on each platform.</p>
<h4>Checking the install</h4>
<p>Run the self-test; it prints the version and the path of the configuration file it found.</p>
</article></main>
<footer><p>Copyright 2024 ExampleCorp. All rights reserved.</p><a href="/privacy">Privacy policy</a></footer>
</body></html>"""

DOC_MARKDOWN = """---
title: Pods
weight: 10
---
<!-- overview -->
_Pods_ are the smallest {{< glossary_tooltip text="deployable units" term_id="pod" >}} of computing.

{{< note >}}
A Pod runs one or more [containers](../containers/) on a
{{< glossary_tooltip text="node" term_id="node" >}}.
{{< /note >}}

{{% capture body %}}
## Using Pods

See <a href="https://example.org/pods">the upstream page</a>.
"""

README = "# Demo Repo\n\nA readme for the [demo](docs/guide.md).\n"
ROBOTS = b"User-agent: knowledge-packs\nDisallow: /private/\n"

LATIN1 = (
    "<html><head><title>Caf\u00e9 notes</title></head><body><article><h2>Men\u00fa</h2>"
    "<p>Un caf\u00e9 cr\u00e8me co\u00fbte deux euros \u00e0 la gare; le th\u00e9 est moins cher. "
    "Ce paragraphe est assez long pour que l'extracteur le garde comme contenu principal.</p>"
    "</article></body></html>"
)


def busy_then_ok(retry_after: str) -> object:
    def handler(req: Request) -> None:
        if req.site.hits[req.path] == 1:
            req.send(429, b"slow down", "text/plain", {"Retry-After": retry_after})
        else:
            req.send(200, b"Done after waiting, " * 20, "text/plain")

    return handler


def conditional(req: Request) -> None:
    if req.headers.get("if-none-match") == '"v1"':
        req.send(304, b"", None, {"ETag": '"v1"'})
    else:
        req.send(200, b"Version one of the page. " * 10, "text/plain", {"ETag": '"v1"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT"})


def huge(req: Request) -> None:
    chunk = b"x" * 65536  # one reused chunk: the server never holds 50 MB
    req.send(200, (chunk for _ in range(50 * MB // len(chunk))), "text/plain")


def huge_declared(req: Request) -> None:
    chunk = b"x" * 65536
    req.send(200, (chunk for _ in range(50 * MB // len(chunk))), "text/plain", length=50 * MB)


def never_answers(req: Request) -> None:
    req.site.stopping.wait(10)


def redirect(location: str, status: int = 302) -> object:
    return lambda req: req.send(status, b"", None, {"Location": location})


@pytest.fixture
def site():
    s = LoopbackSite()
    routes = {
        "/robots.txt": lambda r: r.send(200, ROBOTS, "text/plain"),
        "/docs/guide/intro.html": lambda r: r.send(200, DOC_HTML, "text/html; charset=utf-8"),
        "/docs/concepts/pods.md": lambda r: r.send(200, DOC_MARKDOWN.encode(), "text/plain; charset=utf-8"),
        "/busy": busy_then_ok("7"),
        "/very-busy": busy_then_ok("3600"),
        "/unavailable": lambda r: r.send(503, b"down", "text/plain"),
        "/loop-a": redirect("/loop-b"),
        "/loop-b": redirect("/loop-a", 301),
        "/huge": huge,
        "/huge-declared": huge_declared,
        "/image.html": lambda r: r.send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "text/html"),
        "/paper.pdf": lambda r: r.send(200, b"%PDF-1.7\n...", "application/pdf"),
        "/hang": never_answers,
        "/latin1": lambda r: r.send(200, LATIN1.encode("latin-1"), "text/html; charset=ISO-8859-1"),
        "/latin1-meta": lambda r: r.send(
            200, LATIN1.replace("<head>", '<head><meta charset="iso-8859-1">').encode("latin-1"), "text/html"
        ),
        "/bad-utf8": lambda r: r.send(200, b"Broken \xff\xfe bytes \xc3( here. " * 10, "text/plain; charset=utf-8"),
        "/private/secret.html": lambda r: r.send(200, DOC_HTML),
        "/to-metadata": redirect("http://169.254.169.254/latest/meta-data/"),
        "/to-outside": redirect("http://example.com/elsewhere"),
        "/to-file": redirect("file:///etc/passwd"),
        "/moved": redirect("/docs/guide/intro.html", 301),
        "/cond": conditional,
        "/raw/o/r/main/docs/guide.md": lambda r: r.send(200, README.encode(), "text/plain; charset=utf-8"),
        "/raw/o/r/HEAD/README.md": lambda r: r.send(200, README.encode(), "text/plain; charset=utf-8"),
    }
    for i in range(10):
        routes[f"/chain/{i}"] = redirect(f"/chain/{i + 1}")
    for path, handler in routes.items():
        s.route(path, handler)
    with s:
        yield s


class Sleeps:
    """The injected sleep: records each delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def local(site: LoopbackSite, **overrides: object) -> FetchConfig:
    """A config for the loopback site: private hosts allowed, short timeouts."""
    values: dict[str, object] = {
        "allow_private_hosts": True,
        "timeout_s": 2.0,
        "total_timeout_s": 5.0,
        "github_raw_base": site.url("/raw"),
    }
    values.update(overrides)
    return FetchConfig(**values)  # type: ignore[arg-type]


def fetch_one(url: str, config: FetchConfig, sleeps: Sleeps | None = None, **kw: object) -> Page:
    [page] = fetch_pages([url], config, sleep=sleeps or Sleeps(), **kw)  # type: ignore[arg-type]
    return page


# --- pure: URL policy ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/o/r/blob/main/docs/a.md", f"{RAW}/o/r/main/docs/a.md"),
        ("https://github.com/o/r/raw/v1.2/README.rst", f"{RAW}/o/r/v1.2/README.rst"),
        ("https://github.com/o/r", f"{RAW}/o/r/HEAD/README.md"),
        ("https://github.com/o/r.git/", f"{RAW}/o/r/HEAD/README.md"),
        ("https://github.com/o/r/tree/main", f"{RAW}/o/r/main/README.md"),
        ("https://github.com/o/r/tree/main/docs/sub", f"{RAW}/o/r/main/docs/sub/README.md"),
        ("https://example.com/o/r/blob/main/a.md", "https://example.com/o/r/blob/main/a.md"),
    ],
)
def test_github_rewrite(url: str, expected: str) -> None:
    rewrite = github_rewrite(url)
    assert rewrite.url == expected and rewrite.unsupported is None


@pytest.mark.parametrize("url", ["https://github.com/o/r/issues/3", "https://github.com/o", "https://github.com/o/r/wiki"])
def test_github_other_pages_are_unsupported(url: str) -> None:
    assert "not supported" in (github_rewrite(url).unsupported or "")


def test_github_rewrite_uses_the_given_raw_base() -> None:
    assert github_rewrite("https://github.com/o/r", "http://127.0.0.1:9/raw/").url == "http://127.0.0.1:9/raw/o/r/HEAD/README.md"


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.0.0.5", "private"),
        ("192.168.1.1", "private"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.10.1", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "private"),  # reserved; Python files 240/4 under is_private too
        ("100.64.0.1", "non-global"),  # carrier-grade NAT
        ("::ffff:10.0.0.1", "private"),  # IPv4-mapped
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
    ],
)
def test_address_refusal(address: str, kind: str | None) -> None:
    assert address_refusal(address, allow_private=False) == kind


def test_metadata_is_refused_even_when_private_hosts_are_allowed() -> None:
    assert address_refusal("10.0.0.5", allow_private=True) is None
    assert address_refusal("169.254.169.254", allow_private=True) == "cloud metadata"
    assert address_refusal("::ffff:169.254.169.254", allow_private=True) == "cloud metadata"


def test_check_addresses_messages() -> None:
    assert check_addresses("docs.example", ["93.184.216.34", "10.0.0.5"], allow_private=False) == (
        "refused private address 10.0.0.5 for host docs.example "
        "(set allow_private_hosts = true in pack.toml or --allow-private-hosts)"
    )
    assert "cloud metadata address 169.254.169.254" in (
        check_addresses("evil.example", ["169.254.169.254"], allow_private=True) or ""
    )
    assert check_addresses("docs.example", ["93.184.216.34"], allow_private=False) is None


def test_host_allowed() -> None:
    assert host_allowed("anything.example", ())
    assert host_allowed("Docs.Example.com.", ("docs.example.com",))
    assert not host_allowed("evil.com", ("docs.example.com",))
    assert host_allowed("a.b.example.com", ("*.example.com",))
    assert host_allowed("example.com", (".example.com",))
    assert not host_allowed("badexample.com", ("*.example.com",))
    assert "raw.githubusercontent.com" in effective_allowed_hosts(("github.com",), RAW)
    assert effective_allowed_hosts(("docs.example.com",), RAW) == ("docs.example.com",)


def test_retry_after_in_seconds_milliseconds_or_an_http_date() -> None:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    assert retry_after_s({"retry-after": "120"}, now) == 120.0
    assert retry_after_s({"retry-after": "1.5"}, now) == 1.5
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}, now) == 1.5
    date = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert retry_after_s({"retry-after": date}, now) == 90.0
    past = format_datetime(now - timedelta(seconds=90), usegmt=True)
    assert retry_after_s({"retry-after": past}, now) == 0.0
    assert retry_after_s({"retry-after": "soon"}, now) is None
    assert retry_after_s({}, now) is None
    assert retry_after_s(None) is None


def test_backoff_is_jittered_exponential_and_capped() -> None:
    assert [backoff_s(n, 0.0) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert backoff_s(3, 0.999) < 4.0
    assert backoff_s(20, 0.5, cap=30.0) <= 30.0
    policy = RetryPolicy(max_retry_after_s=30.0)
    assert policy.delay(1, 7.0, 0.5) == 7.0
    assert policy.delay(1, 3600.0, 0.5) == 30.0
    assert policy.delay(2, None, 0.0) == 1.0


def test_one_list_of_retryable_statuses() -> None:
    assert [s for s in (200, 304, 400, 401, 404, 408, 409, 429, 500, 501, 503, 529)
            if is_retryable(s)] == [408, 409, 429, 500, 503, 529]


class _Flaky(Exception):
    def __init__(self, wait: float | None = None) -> None:
        super().__init__("flaky")
        self.wait = wait


def test_the_one_retry_loop_waits_as_the_policy_says_with_an_injected_sleep() -> None:
    from packs import retry

    def failing(times: int, then: object, exc: Exception):
        calls = []

        def fn():
            calls.append(1)
            if len(calls) <= times:
                raise exc
            return then
        return fn, calls

    waits: list[float] = []
    draws: list[float] = []
    policy = RetryPolicy(max_retries=3, backoff_base_s=1.0, backoff_cap_s=30.0)

    def rand() -> float:
        draws.append(0.0)
        return 0.0

    fn, calls = failing(2, "ok", _Flaky())
    assert retry.call(fn, policy, transient=lambda e: isinstance(e, _Flaky),
                      sleep=waits.append, rand=rand) == "ok"
    assert len(calls) == 3 and waits == [0.5, 1.0] and len(draws) == 2
    # the server's wait, capped; the last failure re-raised, no wait after it
    waits.clear()
    fn, calls = failing(9, "ok", _Flaky(wait=99.0))
    seen: list[tuple[int, float]] = []
    with pytest.raises(_Flaky):
        retry.call(fn, policy, transient=lambda e: isinstance(e, _Flaky),
                   retry_after=lambda e: e.wait, sleep=waits.append, rand=rand,
                   before_sleep=lambda n, e, w: seen.append((n, w)))
    assert len(calls) == 4 and waits == [30.0] * 3 and seen == [(1, 30.0), (2, 30.0), (3, 30.0)]
    # an error it does not retry is raised at once
    fn, calls = failing(1, "ok", KeyError("no"))
    with pytest.raises(KeyError):
        retry.call(fn, policy, transient=lambda e: isinstance(e, _Flaky), sleep=waits.append)
    assert len(calls) == 1


def test_format_size() -> None:
    assert format_size(10 * MB) == "10 MB"
    assert format_size(1536) == "1.5 KB"
    assert format_size(12) == "12 bytes"


def test_config_validation_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        FetchConfig(timeout_s=0)
    with pytest.raises(ValueError, match="tuple of host names"):
        FetchConfig(allowed_hosts="docs.example.com")  # type: ignore[arg-type]


def test_config_from_pack() -> None:
    from tasks.sources import PackConfig

    config = FetchConfig.from_pack(PackConfig(allowed_hosts=["a.example"], fetch_timeout_s=5), per_host_delay_s=1.0)
    assert config.allowed_hosts == ("a.example",) and config.timeout_s == 5 and config.per_host_delay_s == 1.0
    assert config.user_agent == USER_AGENT and USER_AGENT.startswith("knowledge-packs/0.1.0")


# --- pure: content ------------------------------------------------------------------------


def test_choose_charset() -> None:
    latin = "Caf\u00e9 cr\u00e8me".encode("latin-1")
    assert choose_charset("text/html; charset=ISO-8859-1", latin, html=True) == "cp1252"
    assert choose_charset("text/html; charset=bogus-charset", "\u00e9".encode(), html=True) == "utf-8"
    assert choose_charset("text/html", b'<meta charset="windows-1252"><p>\xe9', html=True) == "cp1252"
    # A page saved as UTF-8 that keeps the <meta> it was written with (readability's qq
    # page: gb2312 declared, UTF-8 bytes) reads as UTF-8; one written in gb2312 reads so.
    chinese = "<meta charset=gb2312><title>\u4eba\u5de5\u667a\u80fd</title>"
    assert choose_charset(None, chinese.encode(), html=True) == "utf-8"
    assert choose_charset(None, chinese.encode("gb2312"), html=True) == "gb2312"
    assert choose_charset("text/html; charset=gb2312", chinese.encode(), html=True) == "gb2312"
    assert choose_charset(None, b"<meta charset=gb2312><p>ascii", html=True) == "gb2312"
    assert choose_charset(None, "d\u00e9j\u00e0".encode(), html=False) == "utf-8"
    assert choose_charset(None, b"\xef\xbb\xbfhello", html=False) == "utf-8-sig"
    # No label, not UTF-8: detection must still give a codec that decodes it.
    guessed = choose_charset(None, ("Fran\u00e7ais et caf\u00e9 " * 20).encode("latin-1"), html=False)
    assert ("Fran\u00e7ais" * 1) in ("Fran\u00e7ais et caf\u00e9 " * 20).encode("latin-1").decode(guessed)


def test_sniff_and_classify() -> None:
    assert sniff_binary(b"\x89PNG\r\n\x1a\nrest") == "PNG image"
    assert sniff_binary(b"%PDF-1.4") == "PDF document"
    assert sniff_binary(b"<html>\x00</html>") == "binary data"
    assert sniff_binary("<p>hi</p>".encode("utf-16")) is None
    assert classify("text/html", "/x.html", b"PK\x03\x04...") == ("unsupported", "binary content (ZIP archive) served as text/html")
    assert classify("text/plain", "/README.md", b"# hi") == ("markdown", None)
    assert classify("application/octet-stream", "/notes.markdown", b"# hi") == ("markdown", None)
    assert classify("text/x-markdown", "/x", b"# hi") == ("markdown", None)
    assert classify("application/xhtml+xml", "/x", b"<html/>") == ("html", None)
    assert classify(None, "page.htm", b"<p>x</p>") == ("html", None)
    # no type, no extension: a document is sniffed, after an XML declaration or comments
    # (XHTML as DocBook writes it), not a text that merely mentions <html>
    xhtml = b'<?xml version="1.0" encoding="UTF-8"?>\n<!-- made by xsltproc -->\n<html><p>x'
    assert classify(None, "/doc/intro", xhtml) == ("html", None)
    assert classify(None, "/doc/notes", b"hello <html>") == (
        "unsupported", "unknown content type for /doc/notes")
    assert classify("text/plain", "/notes.txt", b"hello") == ("text", None)
    assert classify("application/pdf", "/a.pdf", b"%PDF-1.7") == ("unsupported", "unsupported content type application/pdf")
    assert classify("application/octet-stream", "/a.md", b"%PDF-1.7") == (
        "unsupported",
        "binary content (PDF document) served as application/octet-stream",
    )
    assert classify("application/json", "/a", b"{}") == ("unsupported", "unsupported content type application/json")


def test_strip_shortcodes() -> None:
    text = (
        'A {{< glossary_tooltip text="Pod" term_id="pod" >}} here. {{< note >}}Kept note.{{< /note >}} '
        '{{% capture overview %}}Body{{% /capture %}} {{< param "version" >}}!'
    )
    assert strip_shortcodes(text) == "A Pod here. Kept note. Body !"


def test_front_matter() -> None:
    assert split_front_matter("+++\ntitle = 'T'\n+++\nbody") == ({"title": "T"}, "body")
    assert split_front_matter("---\ntitle: Y\n---\nbody\n") == ({"title": "Y"}, "body\n")
    assert split_front_matter("---\ntitle: [unclosed\n---\nbody") == ({}, "body")
    assert split_front_matter("no front matter\n---\n") == ({}, "no front matter\n---\n")


def test_markdown_document() -> None:
    title, text, links = markdown_document(DOC_MARKDOWN, "https://k8s.example/docs/concepts/pods/")
    assert title == "Pods"
    assert "smallest deployable units of computing" in text
    assert "A Pod runs one or more [containers](../containers/) on a\nnode." in text
    assert "{{" not in text and "<!--" not in text and "title:" not in text
    assert text.startswith("_Pods_") and "## Using Pods" in text
    assert links == ["https://k8s.example/docs/concepts/containers/", "https://example.org/pods"]


def test_markdown_title_falls_back_to_first_h1_outside_code() -> None:
    doc = "```sh\n# not a title\n```\n\n# Real Title\n\ntext [x](#frag) [y](https://a.example/y)"
    title, _, links = markdown_document(doc, "https://a.example/page")
    assert title == "Real Title"
    assert links == ["https://a.example/y"]  # a link to the page itself is not a link out


def test_html_to_markdown_keeps_article_structure_and_drops_chrome() -> None:
    title, text, links = html_to_markdown(DOC_HTML, "https://docs.example/docs/guide/intro.html")
    assert title == "Widget Guide"
    lines = text.splitlines()
    assert "## Installation" in lines  # the ¶ permalink is gone
    assert "### Requirements" in lines and "#### Checking the install" in lines
    assert "- Python 3.11 or newer" in lines
    assert "```\npip install widget\nwidget --version\n```\n\n" in text
    for chrome in ("Careers at ExampleCorp", "Sidebar entry", "Copyright 2024", "Privacy policy"):
        assert chrome not in text
    assert links == [
        "https://docs.example/docs/api/index.html",
        "https://docs.example/docs/guide/requirements.html#python",
    ]
    assert "[API reference](https://docs.example/docs/api/index.html)" in text


def test_bare_pre_becomes_a_fence() -> None:
    html = (
        "<html><body><article><p>Use the tool as shown here, with the two flags that matter.</p>"
        "<pre>tool --one\n  --two</pre><p>That is all there is to it for today.</p></article></body></html>"
    )
    _, text, _ = html_to_markdown(html, "https://a.example/")
    assert "```\ntool --one\n  --two\n```" in text


@pytest.mark.parametrize("table", [
    # Pygments "table" line numbers (Sphinx, Hugo)
    '<div class="highlight"><table class="highlighttable"><tr><td class="linenos"><div>'
    '<pre><span>1</span>\n<span>2</span></pre></div></td><td class="code"><div><pre>'
    '<span></span>let a = 1;\nlet b = 2;\n</pre></div></td></tr></table></div>',
    # Jekyll's Rouge
    '<table class="rouge-table"><tbody><tr><td class="gutter gl"><pre class="lineno">1\n2\n'
    '</pre></td><td class="code"><pre>let a = 1;\nlet b = 2;\n</pre></td></tr></tbody></table>',
])
def test_code_with_line_numbers_becomes_one_fence(table: str) -> None:
    html = ("<html><body><article><p>Two bindings, one after the other, as the example below "
            f"shows in full.</p>{table}<p>That is all the example needs to show today.</p>"
            "<table><tr><td><pre>x</pre></td><td><pre>y</pre></td></tr></table>"
            "</article></body></html>")
    _, text, _ = html_to_markdown(html, "https://a.example/")
    assert "```\nlet a = 1;\nlet b = 2;\n```" in text
    assert "1 2" not in text and "| `x` | `y` |" in text  # a table of two code cells stays


SPHINX_OPTIONS = (
    '<html><body><div role="main"><section><h1>Command line</h1>'
    "<p>The options of the spam tool, each with what it changes and its default.</p>"
    '<dl class="std option"><dt class="sig sig-object std" id="cmdoption-timeout">'
    '<span class="sig-name descname"><span class="pre">--timeout</span></span>'
    '<span class="sig-prename descclassname"> <span class="pre">SECONDS</span></span>'
    '<a class="headerlink" href="#cmdoption-timeout">¶</a></dt>'
    "<dd><p>How long to wait for a reply. The default is 30 seconds.</p>"
    "<p>Set it to 0 to wait forever.</p></dd></dl>"
    '<dl class="glossary simple"><dt>term one</dt><dd>first meaning, with <code>x</code></dd>'
    "<dt>term two</dt><dt>term 2</dt><dd><p>second meaning</p></dd><dd>and a third</dd></dl>"
    "<p>That is every option the tool has in this release of it.</p></section></div></body></html>"
)


def test_definition_lists_keep_each_term_with_its_definition() -> None:
    # trafilatura alone writes "- --timeout SECONDS" and "- How long to wait..." as two
    # bullets: a passage quoting the definition cannot say what it defines.
    _, text, _ = html_to_markdown(SPHINX_OPTIONS, "https://a.example/cmd.html")
    assert "- `--timeout SECONDS`: How long to wait for a reply. The default is 30 seconds." in text
    assert "Set it to 0 to wait forever." in text and "¶" not in text
    assert "- **term one**: first meaning, with `x`" in text
    assert "- **term two, term 2**: second meaning" in text and "and a third" in text
    units = [u.display for u in candidates(text)]
    assert any(u.startswith("`--timeout SECONDS`: How long to wait") for u in units)
    # So the offline answer names the option it quotes.
    best = extractive.select("Which option sets how long to wait for a reply?", [text])[0]
    assert "--timeout" in best.unit.display


def test_an_mdbook_page_is_titled_by_its_own_heading() -> None:
    # mdBook puts a hidden help box ("Keyboard shortcuts", an h2) and the book's name (an
    # h1 in the menu bar) before the content; trafilatura titled every page by the first.
    html = ('<html><head><title>Configuration - The Cargo Book</title></head><body>'
            '<div id="mdbook-help-container"><div id="mdbook-help-popup"><h2 class="'
            'mdbook-help-title">Keyboard shortcuts</h2><p>Press S to search.</p></div></div>'
            '<div class="menu-bar"><h1 class="menu-title">The Cargo Book</h1></div>'
            '<main><h1 id="configuration"><a class="header" href="#configuration">'
            "Configuration</a></h1><p>This document explains how the configuration system "
            'works, and which keys there are.</p><h3 id="alias"><a class="header" href="#alias">'
            "<code>[alias]</code></a></h3><p>The alias table defines command aliases, one "
            "per key, with the command each runs.</p></main></body></html>")
    title, text, _ = html_to_markdown(html, "https://a.example/reference/config.html")
    assert title == "Configuration"
    assert "### `[alias]`" in text and "(#alias)" not in text
    # A content heading the <title> does not name ("cargo-build(1)"): the <title>, less
    # the site's name.
    page = html.replace("Configuration - The", "cargo build - The")
    assert html_to_markdown(page, "https://a.example/c.html")[0] == "cargo build"
    # A one-word page name keeps to its part too ("FAQ - The Cargo Book": "FAQ").
    faq = html.replace("Configuration - The", "FAQ - The")
    assert html_to_markdown(faq, "https://a.example/faq.html")[0] == "FAQ"


def test_html_pages_are_parsed_one_at_a_time() -> None:
    # lxml and trafilatura on several fetch threads at once corrupted the heap now and then
    # (glibc aborted the build; benchmarks/html_parse_threads.py): parsing takes a lock.
    from tasks.fetch import parse

    done = threading.Event()
    html = "<html><body><article><p>One page of text, long enough to be kept.</p></article></body></html>"
    with parse._HTML_LOCK:
        worker = threading.Thread(target=lambda: (html_to_markdown(html, "https://a.example/"),
                                                  done.set()))
        worker.start()
        assert not done.wait(0.5)  # waits for the lock
    assert done.wait(30)
    worker.join()


def test_an_empty_anchor_does_not_bracket_its_paragraph() -> None:
    # An index-term anchor (<a id=...></a>, no text, no href) made trafilatura write the
    # rest of the paragraph as "[The four golden signals ...]".
    html = ('<html><body><article><h1>Signals</h1><p><a data-type="indexterm" id="i1"></a>'
            "The four golden signals of monitoring are latency, traffic, errors, and "
            "saturation, and they come first.</p><p>Measure them all the time, "
            'as the <a href="/book">book</a> says.</p></article></body></html>')
    _, text, _ = html_to_markdown(html, "https://a.example/")
    assert "\nThe four golden signals of monitoring are latency" in "\n" + text
    assert "[The four" not in text and "[book](https://a.example/book)" in text


def test_parse_document_never_crashes_on_garbage() -> None:
    page = parse_document(b"\xff\xfe\xfa<html>\xc3(<p>" * 50, "text/html; charset=utf-8", "https://a.example/", "/")
    assert page.status in ("ok", "failed")
    assert parse_document(b"   ", "text/html", "https://a.example/", "/").error == "no readable content in this html page"


# --- end to end on the loopback site ----------------------------------------------------------


def test_doc_page_end_to_end(site: LoopbackSite) -> None:
    url = site.url("/docs/guide/intro.html")
    page = fetch_one(url, local(site))
    assert (page.status, page.http_status, page.final_url) == ("ok", 200, url)
    assert page.content_type == "text/html" and page.title == "Widget Guide"
    assert page.text and "### Requirements" in page.text and "Careers at ExampleCorp" not in page.text
    assert page.links == [site.url("/docs/api/index.html"), site.url("/docs/guide/requirements.html#python")]
    assert page.content_hash and len(page.content_hash) == 64
    assert datetime.fromisoformat(page.fetched_at).tzinfo is not None
    assert site.headers_for("/docs/guide/intro.html")[0]["user-agent"] == USER_AGENT


def test_markdown_page_end_to_end(site: LoopbackSite) -> None:
    page = fetch_one(site.url("/docs/concepts/pods.md"), local(site))
    assert (page.status, page.title, page.content_type) == ("ok", "Pods", "text/markdown")
    assert page.text and "{{" not in page.text
    assert site.url("/docs/containers/") in page.links


def test_429_with_retry_after_then_success(site: LoopbackSite) -> None:
    sleeps = Sleeps()
    pages = fetch_pages([site.url("/busy"), site.url("/very-busy")], local(site), sleep=sleeps)
    assert [p.status for p in pages] == ["ok", "ok"]
    assert sorted(sleeps.delays) == [7.0, 30.0]  # Retry-After honoured, 3600 capped at 30
    assert site.hits["/busy"] == 2


def test_503_gives_up_after_max_retries_with_backoff(site: LoopbackSite) -> None:
    sleeps = Sleeps()
    page = fetch_one(site.url("/unavailable"), local(site, max_retries=3), sleeps)
    assert page.status == "failed" and page.http_status == 503
    assert page.error == "HTTP 503 Service Unavailable (after 4 attempts)"
    assert site.hits["/unavailable"] == 4
    assert len(sleeps.delays) == 3
    for n, delay in enumerate(sleeps.delays, start=1):
        assert 0.5 * 2 ** (n - 1) <= delay < 2 ** (n - 1)


def test_404_is_recorded_at_once_without_retries(site: LoopbackSite) -> None:
    sleeps = Sleeps()
    page = fetch_one(site.url("/missing"), local(site), sleeps)
    assert (page.status, page.http_status, page.error) == ("failed", 404, "HTTP 404 Not Found")
    assert site.hits["/missing"] == 1 and sleeps.delays == []


def test_redirects(site: LoopbackSite) -> None:
    urls = [site.url("/loop-a"), site.url("/chain/0"), site.url("/moved"), site.url("/to-file")]
    loop, chain, moved, to_file = fetch_pages(urls, local(site), sleep=Sleeps())
    assert loop.status == "failed" and loop.error == f"redirect loop: {site.url('/loop-a')} was already visited"
    assert chain.status == "failed" and chain.error == "too many redirects (more than 5)"
    assert site.hits["/chain/5"] == 1 and site.hits["/chain/6"] == 0
    assert moved.status == "ok" and moved.final_url == site.url("/docs/guide/intro.html")
    assert to_file.status == "failed" and to_file.error.startswith("refused file URL")


def test_size_cap_streamed_and_declared(site: LoopbackSite) -> None:
    config = local(site, max_bytes=1 * MB)
    started = time.monotonic()
    streamed, declared = fetch_pages([site.url("/huge"), site.url("/huge-declared")], config, sleep=Sleeps())
    assert (streamed.status, streamed.error) == ("failed", "larger than 1 MB cap")
    assert (declared.status, declared.error) == ("failed", "larger than 1 MB cap")
    assert time.monotonic() - started < 5


def test_binary_and_pdf_are_unsupported(site: LoopbackSite) -> None:
    image, pdf = fetch_pages([site.url("/image.html"), site.url("/paper.pdf")], local(site), sleep=Sleeps())
    assert (image.status, image.error) == ("unsupported", "binary content (PNG image) served as text/html")
    assert (pdf.status, pdf.error) == ("unsupported", "unsupported content type application/pdf")
    assert (image.content_type, pdf.content_type) == ("text/html", "application/pdf")
    assert image.text is None and pdf.text is None


def test_a_page_that_never_answers_times_out(site: LoopbackSite) -> None:
    sleeps = Sleeps()
    config = local(site, timeout_s=0.5, total_timeout_s=1.0, respect_robots=False)
    started = time.monotonic()
    # Retries would go on (the injected sleep returns at once) but the 1 s total cap stops them.
    capped, capped_too = fetch_pages([site.url("/hang"), site.url("/hang?again")], config, sleep=sleeps)
    assert (capped.status, capped.error) == ("failed", "timed out after 1 s")
    assert (capped_too.status, capped_too.error) == ("failed", "timed out after 1 s")
    assert time.monotonic() - started < 2
    single = fetch_one(site.url("/hang"), local(site, timeout_s=0.5, max_retries=0, respect_robots=False))
    assert (single.status, single.error) == ("failed", "read timed out after 0.5 s")
    assert time.monotonic() - started < 3


def test_charsets(site: LoopbackSite) -> None:
    urls = [site.url("/latin1"), site.url("/latin1-meta"), site.url("/bad-utf8")]
    latin, meta, bad = fetch_pages(urls, local(site), sleep=Sleeps())
    for page in (latin, meta):
        assert page.status == "ok" and page.title == "Caf\u00e9 notes"
        assert "Un caf\u00e9 cr\u00e8me co\u00fbte" in (page.text or "") and "## Men\u00fa" in (page.text or "")
    assert bad.status == "ok" and "\ufffd" in (bad.text or "") and "Broken" in (bad.text or "")


def test_robots_disallowed_path_is_not_fetched(site: LoopbackSite) -> None:
    blocked, allowed = fetch_pages(
        [site.url("/private/secret.html"), site.url("/docs/guide/intro.html")], local(site), sleep=Sleeps()
    )
    assert blocked.status == "disallowed" and "robots.txt" in (blocked.error or "")
    assert allowed.status == "ok"
    assert site.hits["/private/secret.html"] == 0
    assert site.hits["/robots.txt"] == 1  # fetched once per host per run
    ignoring = fetch_one(site.url("/private/secret.html"), local(site, respect_robots=False))
    assert ignoring.status == "ok"


def test_robots_shared_by_the_fetches_of_one_build(site: LoopbackSite, tmp_path: Path) -> None:
    # Fetch shards run in other processes: they share robots.txt through the build's folder.
    shared = str(tmp_path / "robots")
    Path(shared).mkdir()
    for _ in range(3):
        blocked = fetch_one(site.url("/private/secret.html"), local(site, robots_cache=shared))
        assert blocked.status == "disallowed"
    assert site.hits["/robots.txt"] == 1 and site.hits["/private/secret.html"] == 0
    # A torn entry is asked again, not trusted; a fetch without the folder asks on its own.
    [entry] = Path(shared).iterdir()
    entry.write_text('{"origin": ')
    assert fetch_one(site.url("/private/secret.html"), local(site, robots_cache=shared)).status == "disallowed"
    assert fetch_one(site.url("/private/secret.html"), local(site)).status == "disallowed"
    assert site.hits["/robots.txt"] == 3


def test_robots_allow_all_is_shared_too(tmp_path: Path) -> None:
    # A missing robots.txt is remembered for the build as "allow all", not asked per shard.
    with LoopbackSite() as other:
        other.route("/page.txt", lambda r: r.send(200, b"Some plain words. " * 10, "text/plain"))
        for _ in range(2):
            page = fetch_one(other.url("/page.txt"), local(other, robots_cache=str(tmp_path)))
            assert page.status == "ok"
        assert other.hits["/robots.txt"] == 1


def test_robots_folders_of_old_builds_are_removed(tmp_path: Path) -> None:
    from tasks.fetch import robots_cache
    from tasks.workdir import WorkDir

    work = WorkDir(tmp_path, "pack")
    old, recent = Path(robots_cache.folder(work, "b1")), Path(robots_cache.folder(work, "b2"))
    aged = time.time() - robots_cache.MAX_AGE_S - 60
    os.utime(old, (aged, aged))
    current = Path(robots_cache.folder(work, "b3"))
    assert current.is_dir() and recent.is_dir() and not old.exists()


@pytest.mark.parametrize("robots_status", [404, 500])
def test_robots_missing_or_broken_allows_all(robots_status: int, caplog: pytest.LogCaptureFixture) -> None:
    with LoopbackSite() as other:
        other.route("/robots.txt", lambda r: r.send(robots_status, b"nope", "text/plain"))
        other.route("/page.txt", lambda r: r.send(200, b"Some plain words. " * 10, "text/plain"))
        page = fetch_one(other.url("/page.txt"), local(other))
    assert page.status == "ok" and other.hits["/robots.txt"] == 1  # a broken robots.txt is not retried
    warned = any("robots.txt" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
    assert warned == (robots_status == 500)  # a 404 is normal, a 5xx is worth a warning


def test_private_address_guard_end_to_end(site: LoopbackSite) -> None:
    # With private hosts refused, the loopback site itself is off limits, by IP or by name.
    by_ip, by_name = fetch_pages(
        [site.url("/docs/guide/intro.html"), site.url("/docs/guide/intro.html", host="localhost")],
        local(site, allow_private_hosts=False),
        sleep=Sleeps(),
    )
    assert by_ip.status == "failed" and by_ip.error.startswith("refused private address 127.0.0.1 for host 127.0.0.1")
    assert "allow_private_hosts = true" in by_ip.error
    assert by_name.status == "failed" and "for host localhost" in by_name.error
    assert sum(site.hits.values()) == 0  # nothing reached the server, not even robots.txt


def test_redirect_to_metadata_is_refused_even_with_private_hosts_allowed(site: LoopbackSite) -> None:
    page = fetch_one(site.url("/to-metadata"), local(site))
    assert page.status == "failed"
    assert page.error == "refused cloud metadata address 169.254.169.254 for host 169.254.169.254 (never fetched)"
    assert page.final_url == "http://169.254.169.254/latest/meta-data/"


def test_redirect_outside_allowed_hosts_is_refused(site: LoopbackSite) -> None:
    page = fetch_one(site.url("/to-outside"), local(site, allowed_hosts=("127.0.0.1",)))
    assert page.status == "failed" and page.error.startswith("host example.com is not in allowed_hosts (127.0.0.1)")


def test_conditional_get(site: LoopbackSite) -> None:
    url = site.url("/cond")
    first = fetch_one(url, local(site))
    assert first.status == "ok" and first.etag == '"v1"' and first.last_modified
    previous = {url: {"etag": first.etag, "last_modified": first.last_modified, "content_hash": first.content_hash}}
    second = fetch_one(url, local(site), previous=previous)
    assert (second.status, second.http_status, second.text) == ("not_modified", 304, None)
    assert second.content_hash == first.content_hash and second.etag == '"v1"'
    sent = site.headers_for("/cond")[-1]
    assert sent["if-none-match"] == '"v1"' and sent["if-modified-since"] == first.last_modified


def test_github_urls_through_a_loopback_raw_host(site: LoopbackSite) -> None:
    urls = ["https://github.com/o/r/blob/main/docs/guide.md", "https://github.com/o/r", "https://github.com/o/r/pulls"]
    blob, repo, pulls = fetch_pages(urls, local(site, allowed_hosts=("github.com",)), sleep=Sleeps())
    assert blob.status == "ok" and blob.url == urls[0]
    assert blob.final_url == site.url("/raw/o/r/main/docs/guide.md")
    assert blob.title == "Demo Repo" and blob.links == [site.url("/raw/o/r/main/docs/docs/guide.md")]
    assert repo.status == "ok" and repo.final_url == site.url("/raw/o/r/HEAD/README.md")
    assert pulls.status == "unsupported" and "not supported" in (pulls.error or "")


def test_local_files(tmp_path) -> None:
    note = tmp_path / "note.md"
    note.write_text("---\ntitle: Local note\n---\nSee [the other](other.md).\n", encoding="utf-8")
    page_html = tmp_path / "page.html"
    page_html.write_bytes(DOC_HTML)
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * 8193)
    urls = [note.as_uri(), page_html.as_uri(), (tmp_path / "gone.md").as_uri(), big.as_uri()]
    md, html, gone, too_big = fetch_pages(urls, FetchConfig(max_bytes=8192), sleep=Sleeps())
    assert (md.status, md.title, md.content_type) == ("ok", "Local note", "text/markdown")
    assert md.links == [(tmp_path / "other.md").as_uri()]
    assert html.status == "ok" and "## Installation" in (html.text or "")
    assert gone.status == "failed" and gone.error == f"file not found: {tmp_path / 'gone.md'}"
    assert too_big.status == "failed" and too_big.error == "larger than 8 KB cap"


def test_order_progress_and_unsupported_schemes(site: LoopbackSite) -> None:
    seen: list[tuple[int, int, str]] = []
    urls = ["ftp://example.com/x", site.url("/docs/guide/intro.html"), site.url("/missing")]
    pages = fetch_pages(urls, local(site), sleep=Sleeps(), progress=lambda d, t, p: seen.append((d, t, p.url)))
    assert [p.url for p in pages] == urls
    assert pages[0].status == "failed" and "only http(s) and file://" in (pages[0].error or "")
    assert sorted(d for d, _, _ in seen) == [1, 2, 3] and {t for _, t, _ in seen} == {3}


def test_works_inside_a_running_event_loop(site: LoopbackSite) -> None:
    async def caller() -> list[Page]:
        return fetch_pages([site.url("/docs/guide/intro.html")], local(site), sleep=Sleeps())

    [page] = asyncio.run(caller())
    assert page.status == "ok"


# --- limits, with an in-memory transport (no server needed, fully deterministic) ---------


class CountingTransport(httpx.AsyncBaseTransport):
    """Answers every request with a small text page, tracking requests in flight."""

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.total_peak = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        self.in_flight[host] = self.in_flight.get(host, 0) + 1
        self.peak[host] = max(self.peak.get(host, 0), self.in_flight[host])
        self.total_peak = max(self.total_peak, sum(self.in_flight.values()))
        for _ in range(5):
            await asyncio.sleep(0)  # yield so other requests can start
        self.in_flight[host] -= 1
        return httpx.Response(200, text="plain words " * 10, headers={"Content-Type": "text/plain"})


def test_global_and_per_host_concurrency_are_bounded() -> None:
    transport = CountingTransport()
    hosts = ["93.184.216.34", "93.184.216.35", "93.184.216.36"]  # public IP literals: no DNS
    urls = [f"http://{h}/page/{i}" for h in hosts for i in range(6)]
    config = FetchConfig(concurrency=4, per_host_concurrency=2, respect_robots=False)
    pages = fetch_pages(urls, config, sleep=Sleeps(), transport=transport)
    assert all(p.status == "ok" for p in pages)
    assert max(transport.peak.values()) <= 2 and transport.total_peak <= 4
    assert transport.total_peak >= 2  # it did run concurrently


def test_per_host_delay_spaces_requests() -> None:
    sleeps = Sleeps()
    urls = [f"http://93.184.216.34/page/{i}" for i in range(3)]
    config = FetchConfig(per_host_concurrency=1, per_host_delay_s=0.5, respect_robots=False)
    pages = fetch_pages(urls, config, sleep=sleeps, transport=CountingTransport())
    assert all(p.status == "ok" for p in pages)
    assert len(sleeps.delays) == 2 and all(d > 0 for d in sleeps.delays)


def test_front_matter_only_markdown_keeps_description_or_title() -> None:
    from tasks.fetch.pages import markdown_document

    title, text, _ = markdown_document(
        '---\ntitle: "Configuration"\ndescription: >\n  Resources for configuring Pods.\n---\n',
        "http://h/c/_index.md",
    )
    assert (title, text) == ("Configuration", "Resources for configuring Pods.")
    assert markdown_document("---\ntitle: Best practices\n---\n", "http://h/b.md")[:2] == (
        "Best practices", "Best practices")


def test_threads_writing_the_same_file_at_once_all_succeed(tmp_path) -> None:
    # Fetch shards run on threads of one process and each keeps its origin's robots.txt:
    # with a temp name per process only, one thread's rename found the other's temp file
    # gone ("could not keep robots.txt ... No such file or directory").
    import threading

    from tasks.workdir import write_text

    target, errors = tmp_path / "robots.json", []
    start = threading.Barrier(8)

    def write(k: int) -> None:
        start.wait()
        for j in range(200):
            try:
                write_text(target, f"{k} {j}")
            except OSError as e:
                errors.append(e)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert target.read_text().split()[1] == "199"
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_heading_that_links_to_a_page_counts_among_the_links() -> None:
    html = ("<html><head><title>Tern 1.19 Release Notes</title></head><body><main>"
            "<h1>Tern 1.19 Release Notes</h1><h3 id='minor'>Minor changes to the library</h3>"
            "<p>There are various minor changes and updates to the library this release.</p>"
            "<h4 id='crypto/tls'><a href='/pkg/crypto/tls/'>crypto/tls</a>"
            "<a class='anchor' href='#crypto/tls'>¶</a></h4>"
            "<p>The tls10default setting, which enabled TLS 1.0 for clients, was removed.</p>"
            "<h4 id='net'><a href='#net'>net</a></h4>"
            "<p>The resolver now honours the options of the system configuration file.</p>"
            "</main></body></html>")
    _, text, links = html_to_markdown(html, "https://tern.test/doc/go1.19")
    assert "#### [crypto/tls](https://tern.test/pkg/crypto/tls/)" in text.splitlines()
    assert "#### net" in text.splitlines()  # a link to its own anchor is its text
    assert links == ["https://tern.test/pkg/crypto/tls/"]
    # Markdown: every definition of a block counts (each other one was taken as a title).
    _, _, links = markdown_document("#### [tls][]\n\n#### [http][h]\n\n[tls]: /pkg/tls/\n"
                                    "[h]: /pkg/http/ \"HTTP\"\n[x]: /pkg/x/\n", "https://t.test/d")
    assert links == ["https://t.test/pkg/tls/", "https://t.test/pkg/http/", "https://t.test/pkg/x/"]


def test_a_heading_whose_permalink_is_an_icon_keeps_its_text() -> None:
    # A permalink that shows only an icon, before the heading's text (GitHub's rendered
    # Markdown, many static site generators) or beside the heading in its wrapper (GitHub
    # since 2023), made trafilatura drop the heading: "##" alone, or nothing.
    body = "<p>" + "An opening paragraph long enough to be the page's content. " * 3 + "</p>"
    after = "<p>" + "What the section says, long enough to be kept as content too. " * 3 + "</p>"
    icon = '<svg class="octicon" aria-hidden="true"><path d="M4 9h1v1H4"></path></svg>'
    headings = [
        f'<h2 id="install"><a class="anchor" href="#install">{icon}</a>Install the tool</h2>',
        f'<div class="markdown-heading"><h2 class="heading-element">Install the tool</h2>'
        f'<a id="user-content-install" class="anchor" href="#install">{icon}</a></div>',
        '<h2 id="install"><a href="#install" class="anchor"><i class="fa fa-link"></i></a>'
        "Install the <code>tool</code></h2>",
    ]
    for h in headings:
        html = f"<html><head><title>T</title></head><body><article>{body}{h}{after}</article></body></html>"
        _, text, _ = html_to_markdown(html, "https://docs.example/guide.html")
        lines = [line for line in text.splitlines() if line.startswith("#")]
        assert lines in (["## Install the tool"], ["## Install the `tool`"]), (h, text)
        assert "What the section says" in text


def test_a_code_block_whose_lines_are_anchors_is_kept() -> None:
    # MkDocs Material numbers a code block's lines with empty links to themselves; trafilatura
    # dropped such a block whole, so an answer could not quote the command.
    body = "<p>" + "An opening paragraph long enough to be the page's content. " * 3 + "</p>"
    code = ('<div class="language-bash highlight"><pre><span></span><code>'
            '<span id="__span-0-1"><a id="__codelineno-0-1" name="__codelineno-0-1" '
            'href="#__codelineno-0-1"></a><span class="nb">export</span> WIDGET_TIMEOUT=60\n'
            '</span><span id="__span-0-2"><a id="__codelineno-0-2" name="__codelineno-0-2" '
            'href="#__codelineno-0-2"></a>widget run --verbose\n</span></code></pre></div>')
    html = (f"<html><head><title>T</title></head><body><article>{body}<h2>Run it</h2>"
            f"{code}{body}</article></body></html>")
    _, text, _ = html_to_markdown(html, "https://docs.example/run/")
    assert "```\nexport WIDGET_TIMEOUT=60\nwidget run --verbose\n```" in text, text
