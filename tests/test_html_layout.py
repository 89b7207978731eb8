"""A page without a content frame (plain <div>s, or laid out in a table) keeps its headings:
trafilatura's recovery path, taken when no element looks like an article to it, keeps the
paragraphs and drops every heading, so such a page was one section however many headings
it showed (LWN's weekly edition: 9 headings, none kept). A table that lays the page out
is read as blocks, a data table as a table."""

from __future__ import annotations

import lxml.html

from tasks.fetch.html_blocks import heading_frame, unwrap_layout
from tasks.fetch.parse import html_to_markdown
from tasks.sections import split_markdown

PARA = ("<p>{0} is described here at some length, so that the page reads as an article and "
        "not as a list of links: what it does, when you would use it, and what it costs you "
        "when you get it wrong, with the reasons for each of those.</p>")

# LWN's shape: a table with a column of links beside a column of articles, each article an
# <h2> that links to it, its parts <h4>s, and a data table among its paragraphs.
LAYOUT = """<!doctype html><html><head><title>Weekly Edition for March 26</title></head><body>
<table class="Page"><tr>
<td class="LeftColumn"><a href="/a">Front page</a><br><a href="/b">Security</a><br>
<a href="/c">Kernel</a><br><a href="/d">Archives</a></td>
<td class="MidColumn">
<h1>Weekly Edition for March 26</h1>
<h2 class="SummaryHL"><a href="/Articles/1/">A trademark battle</a></h2>
""" + PARA.format("The trademark dispute") + PARA.format("The older company") + """
<h4>Who owns the name</h4>
""" + PARA.format("The registration") + """
<table class="OddEven"><tr><th>Release</th><th>Date</th></tr>
<tr><td>2.8</td><td>March 2</td></tr><tr><td>2.6</td><td>October 31</td></tr></table>
<h2 class="SummaryHL"><a href="/Articles/2/">Mapping with QGIS</a></h2>
""" + PARA.format("The new release") + PARA.format("The query builder") + """
<h4>Maps in, maps out</h4>
""" + PARA.format("The map composer") + """
</td></tr></table></body></html>"""

# Daring Fireball's shape: nested <div>s with ids no extractor knows, a short opening.
PLAIN = """<!doctype html><html><head><title>Colophon</title></head><body>
<div id="Box"><div id="Main">
<p>Some long paragraph text about things and stuff that goes on for a while, really quite a
while indeed.</p>
<h2>Server software</h2>
""" + PARA.format("The web server") + """
<h2>Web standards</h2>
""" + PARA.format("The markup") + """
</div></div></body></html>"""


def _headings(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("#")]


def test_a_page_laid_out_in_a_table_keeps_its_headings_and_its_data_table() -> None:
    title, markdown, _ = html_to_markdown(LAYOUT, "http://127.0.0.1/lwn/bigpage.html")
    assert _headings(markdown) == [
        "# Weekly Edition for March 26",
        "## [A trademark battle](http://127.0.0.1/Articles/1/)",
        "#### Who owns the name",
        "## [Mapping with QGIS](http://127.0.0.1/Articles/2/)",
        "#### Maps in, maps out"]
    assert "| 2.8 | March 2 |" in markdown  # the data table stays a table
    assert "Front page" not in markdown  # the column of links stays out
    paths = [c.heading_path for c in split_markdown(markdown, title)]
    assert "Weekly Edition for March 26 > A trademark battle > Who owns the name" in paths
    assert "Weekly Edition for March 26 > Mapping with QGIS > Maps in, maps out" in paths


def test_a_page_of_plain_divs_keeps_its_headings() -> None:
    title, markdown, _ = html_to_markdown(PLAIN, "http://127.0.0.1/colophon.html")
    assert _headings(markdown) == ["## Server software", "## Web standards"]
    assert "The web server is described here" in markdown
    assert [c.heading_path for c in split_markdown(markdown, title)][-2:] == [
        "Colophon > Server software", "Colophon > Web standards"]


def test_a_table_holding_a_heading_becomes_blocks_and_a_data_table_stays() -> None:
    tree = lxml.html.document_fromstring(LAYOUT)
    unwrap_layout(tree)
    tables = tree.xpath("//table")
    assert [t.get("class") for t in tables] == ["OddEven"]
    assert len(tables[0].xpath("./tr/td")) == 4  # its cells are cells still
    assert tree.xpath("//div[@class='MidColumn']/h4")  # the layout cell is a block
    shown = lxml.html.document_fromstring(
        "<html><body><table role='presentation'><tr><td><p>x</p></td></tr></table>"
        "<table><tr><td>1</td><td>2</td></tr></table></body></html>")
    unwrap_layout(shown)
    assert len(shown.xpath("//table")) == 1 and not shown.xpath("//table[@role]")


def test_the_headings_frame_is_the_element_holding_the_headings_and_most_paragraphs() -> None:
    tree = lxml.html.document_fromstring(PLAIN)
    assert heading_frame(tree).get("id") == "Main"
    # one heading, or headings whose nearest common element is the body: no frame
    assert heading_frame(lxml.html.document_fromstring(
        "<html><body><div><h2>A</h2>" + PARA.format("A") + "</div></body></html>")) is None
    assert heading_frame(lxml.html.document_fromstring(
        "<html><body><div><h2>A</h2>" + PARA.format("A") + "</div><div><h2>B</h2>"
        + PARA.format("B") + "</div></body></html>")) is None
    # headings in a sidebar beside the article's paragraphs: not the article's frame
    assert heading_frame(lxml.html.document_fromstring(
        "<html><body><div id='side'><h3>Links</h3><h3>Tags</h3></div><div>"
        + PARA.format("A") * 3 + "</div></body></html>")) is None
