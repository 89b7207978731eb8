"""An AsciiDoc page (.adoc) is read for its section titles, listing blocks, admonitions,
lists and links, not refused or read as one block of plain text."""

from __future__ import annotations

from tasks.fetch.asciidoc_source import asciidoc_document, asciidoc_to_markdown
from tasks.fetch.parse import classify, parse_document
from tasks.sections import split_markdown

# A hand-written page in the shapes Asciidoctor sources use.
PAGE = """= Widget Handbook
:toc: left
:icons: font

// A comment the reader never sees.

Widgets are the small parts a screen is built from. See https://example.org/toolkit[the
toolkit] and <<installing,Installing>> first.

[[installing]]
== Installing

Install the package with the `widgets` tool:

[source,bash]
----
widgets install --all
----

NOTE: Widgets need a screen of 800 pixels or more.

== Configuration

.Settings
* `home`: where widgets live.
** `home.cache`: where their pictures are kept.
. Run +widgets check+ after each change.

[TIP]
====
Keep the settings in version control.
====

=== Limits

....
max_widgets = 64
....

////
A comment block.
////

include::partials/footer.adoc[]
"""


def test_sections_code_admonitions_and_links_come_through():
    title, markdown, links = asciidoc_document(PAGE, "https://example.org/docs/handbook.adoc")
    assert title == "Widget Handbook"
    heads = [line for line in markdown.splitlines() if line.startswith("#")]
    assert heads == ["# Widget Handbook", "## Installing", "## Configuration", "### Limits"]
    assert "```bash\nwidgets install --all\n```" in markdown
    assert "```\nmax_widgets = 64\n```" in markdown
    assert "**Note:** Widgets need a screen of 800 pixels or more." in markdown
    assert "**Tip:** Keep the settings in version control." in markdown
    assert "- `home`: where widgets live.\n- `home.cache`: where their pictures" in markdown
    assert "1. Run `widgets check` after each change." in markdown
    # a link whose text wraps onto the next line is still one link
    assert "[the\ntoolkit](https://example.org/toolkit)" in markdown
    assert links == ["https://example.org/toolkit"]
    assert "and Installing first." in markdown
    for gone in (":toc:", "A comment", "include::", "[[installing]]", "[source", "////"):
        assert gone not in markdown, gone
    paths = [c.heading_path for c in split_markdown(markdown, title)]
    assert "Widget Handbook > Configuration > Limits" in paths


def test_an_adoc_page_is_read_as_asciidoc_however_it_is_served():
    body = PAGE.encode()
    assert classify("text/plain", "/o/r/main/docs/handbook.adoc", body)[0] == "asciidoc"
    assert classify(None, "docs/handbook.adoc", body)[0] == "asciidoc"  # a local file
    assert classify("text/asciidoc", "/docs/handbook", body)[0] == "asciidoc"
    parsed = parse_document(body, None, "file:///docs/handbook.adoc", "docs/handbook.adoc")
    assert parsed.status == "ok" and parsed.title == "Widget Handbook"
    assert "## Configuration" in parsed.text


def test_odd_asciidoc_never_raises():
    for text in ("", "----", "= ", "[source,python]\n----\nx", "NOTE:", "* ", ". ", "|===",
                 "link:[x]", "<<>>", "++", "====\n"):
        asciidoc_to_markdown(text)
