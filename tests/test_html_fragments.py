"""A page served as an HTML fragment (no <html>, <head> or <body>; a front-matter comment
and a <style> block before its first <h2>, as some documentation sites keep their pages
for a template to wrap) keeps its headings and its title through fetch and split."""

from __future__ import annotations

from tasks.fetch.html_tree import as_document
from tasks.fetch.parse import html_to_markdown, parse_document
from tasks.sections import split_markdown

# A hand-written page in the shape of such a fragment; long enough that trafilatura takes
# it as an article (a few sentences per section).
FRAGMENT = """<!--{
\t"Title": "Writing Widgets",
\t"Template": true
}-->
<style>
.widget { color: red; }
h2 { margin-top: 2em; }
</style>

<h2 id="introduction">Introduction</h2>
<p>Widgets are the small parts a screen is built from. This page says how to write
them so that the people who read your code later can follow it without asking you.</p>
<p>Each rule below comes with the reason for it, because a rule without a reason is
forgotten the first time it is in the way.</p>

<h2 id="naming">Naming</h2>
<p>A widget's name is short and says what it shows. Use <code>MixedCaps</code> for
names made of several words, never underscores, in every package you write.</p>

<h3 id="getters">Getters</h3>
<p>A getter of the field <code>owner</code> is called <code>Owner</code>, not
<code>GetOwner</code>. The setter, if there is one, is called <code>SetOwner</code>.</p>

<h2 id="errors">Errors</h2>
<p>Errors are values that a function returns as its last result. Check each one where
it happens, and say in the message what the caller should do about it.</p>
<pre><code>if err := w.Draw(); err != nil {
    return fmt.Errorf("drawing %s: %w", w.Name, err)
}
</code></pre>
"""


def test_a_fragment_keeps_its_headings_and_front_matter_title() -> None:
    title, markdown, _ = html_to_markdown(FRAGMENT, "http://127.0.0.1/doc/widgets.html")
    assert title == "Writing Widgets"
    heads = [line for line in markdown.splitlines() if line.startswith("#")]
    assert heads == ["## Introduction", "## Naming", "### Getters", "## Errors"]
    assert "color: red" not in markdown and "Template" not in markdown
    paths = [c.heading_path for c in split_markdown(markdown, title)]
    assert paths == ["Writing Widgets > Introduction", "Writing Widgets > Naming",
                     "Writing Widgets > Naming > Getters", "Writing Widgets > Errors"]


def test_a_fragment_served_as_html_through_parse_document() -> None:
    parsed = parse_document(FRAGMENT.encode(), "text/html; charset=utf-8",
                            "http://127.0.0.1/doc/widgets.html", "/doc/widgets.html")
    assert parsed.status == "ok" and parsed.title == "Writing Widgets"
    assert "### Getters" in (parsed.text or "")


def test_a_document_is_left_as_it_is() -> None:
    page = "<!doctype html><html><head><title>T</title></head><body><p>x</p></body></html>"
    assert as_document(page) == page
    assert as_document("<HTML><BODY><h2>A</h2></BODY></HTML>").startswith("<HTML>")


def test_front_matter_that_is_not_json_gives_no_title() -> None:
    doc = as_document("<!--{ Title: not json }--><h2>A</h2><p>b</p>")
    assert "<title>" not in doc and "<main><h2>A</h2>" in doc
    doc = as_document('<!--{"Title": "A <b> & c"}--><p>x</p>')
    assert "<title>A &lt;b&gt; &amp; c</title>" in doc


# An Internet-Draft as the IETF's tools render it: one preformatted document whose
# headings are <span class="h2"> lines with a self-link on their number, laid out in pages.
DRAFT = """<html><head><title>draft-example-widgets-01</title></head><body>
<pre>
Network Working Group                                          A. Writer
Internet-Draft                                             Example Corp.

<span class="h1">The Widget Protocol</span>

Abstract

   This document describes a protocol by which a client stores widgets on a
   server, and how the server answers each kind of request it is sent.

<span class="h2"><a class="selflink" name="section-1" href="#section-1">1</a>.  Introduction</span>

   Widgets are small documents that a client keeps on a server it does not
   run itself. The protocol lets the client read and write them over HTTP.

<span class="h2"><a class="selflink" name="section-2" href="#section-2">2</a>.  Requests</span>

   A client sends GET to read a widget and PUT to store a new version of it.

Writer                                                          [Page 2]

Internet-Draft             The Widget Protocol                  May 2015

   The server answers 404 when the widget does not exist at that path.

<span class="h3"><a class="selflink" name="section-2.1" href="#section-2.1">2.1</a>.  Conditional requests</span>

   A PUT with an If-Match header stores the widget only when its current
   version is the one the client names; otherwise the server answers 412.
</pre>
</body></html>"""


def test_a_preformatted_internet_draft_keeps_its_section_headings() -> None:
    _, markdown, _ = html_to_markdown(DRAFT, "http://127.0.0.1/id/draft-example-widgets-01.html")
    heads = [line.strip() for line in markdown.splitlines() if line.lstrip().startswith("#")]
    assert "## 1.  Introduction" in heads and "## 2.  Requests" in heads
    assert "### 2.1.  Conditional requests" in heads
    paths = [c.heading_path for c in split_markdown(markdown, "The Widget Protocol")]
    assert paths[-1] == "The Widget Protocol > 2. Requests > 2.1. Conditional requests"
    assert "answers 412" in markdown
    # the page's footer and the next page's running header are no text of the section
    assert "[Page 2]" not in markdown and "May 2015" not in markdown


# A MediaWiki page (Wikipedia, ArchWiki): each heading carries its "[edit]" link.
WIKI = """<html><head><title>Widget - ExampleWiki</title></head><body>
<div id="content"><h1 id="firstHeading">Widget</h1>
<a class="mw-jump-link" href="#mw-head">Jump to navigation</a>
<a class="mw-jump-link" href="#searchInput">Jump to search</a>
<div id="mw-content-text"><div id="jump-to-nav" class="mw-jump">Jump to:
<a href="#column-one">navigation</a>, <a href="#searchInput">search</a></div>
<p>A widget is a small part a screen is built from. This article says where widgets came
from and how the people who draw screens use them today in every kind of program.</p>
<h2><span class="mw-headline" id="History">History</span><span class="mw-editsection">
<span class="mw-editsection-bracket">[</span><a href="/w/index.php?title=Widget&amp;action=edit&amp;section=1"
title="Edit section: History">edit</a><span class="mw-editsection-bracket">]</span></span></h2>
<p>The first widgets were drawn by hand on the screens of early workstations, long before
any toolkit named them, and each program kept its own set of them.</p>
<h3><span class="mw-headline" id="Toolkits">Toolkits</span><span class="mw-editsection">
<span class="mw-editsection-bracket">[</span><a href="/w/index.php?title=Widget&amp;action=edit&amp;section=2"
title="Edit section: Toolkits">edit</a><span class="mw-editsection-bracket">]</span></span></h3>
<p>Toolkits later collected the widgets into libraries, so that programs could share one
look and users could learn it once for all of them.</p>
</div></div></body></html>"""


def test_a_wiki_heading_loses_its_edit_link() -> None:
    _, markdown, _ = html_to_markdown(WIKI, "http://127.0.0.1/wiki/Widget")
    heads = [line for line in markdown.splitlines() if line.startswith("#")]
    assert heads == ["# Widget", "## History", "### Toolkits"], heads
    assert "[edit]" not in markdown and "action=edit" not in markdown
    # nor its "Jump to navigation" links (two generations of MediaWiki's markup)
    assert "Jump to" not in markdown and "searchInput" not in markdown
