"""HTML as DocBook and gtk-doc write it (C library manuals: libxslt, libtasn1, Valgrind)
keeps its text, headings and signatures, and a code block in a list item (the Cargo book's
and npm's examples) stays a code block. Each page is a small copy of the generator's markup,
as Debian and the toolchains install those manuals."""

from __future__ import annotations

from packs.markdown import line_kinds
from tasks.fetch.parse import html_to_markdown

DESCRIPTION = ("<p>{0} handles the specificities of attribute and attribute groups processing, "
               "as the module's documentation explains at some length for its readers.</p>")

# gtk-doc's libxml2 stylesheet: an XML declaration, a navigation table, then the module's
# headings straight in <body> or in <div class="refsect2">, each function a <pre
# class="programlisting"> whose types are links and whose lines break with <br/>.
GTK_DOC = """<?xml version="1.0" encoding="UTF-8"?>
<html><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8"/>
<title>attributes: interface for the XSLT attribute handling</title></head>
<body bgcolor="white">
<table class="navigation" width="100%"><tr><td><a href="general.html">Up</a></td>
<td><a href="index.html">Home</a></td><th width="100%">libxslt Reference Manual</th></tr>
</table>
<h2><span class="refentrytitle">attributes</span></h2>
<p>attributes - interface for the XSLT attribute handling</p>
""" + DESCRIPTION.format("This module") + """
<div class="refsynopsisdiv"><h2>Synopsis</h2><pre class="synopsis">#define XSLT_ATTR_LOOKUP;
void	<a href="#xsltApplyAttributeSet">xsltApplyAttributeSet</a>	(<a href="x.html#Ctxt">xsltTransformContextPtr</a> ctxt, <br/>					 xmlNodePtr node);
</pre></div>
<div class="refsect1"><h2>Details</h2><div class="refsect2">
{functions}
</div></div></body></html>"""
FUNCTION = """<div class="refsect2"><h3><a name="{0}"/>{0} ()</h3><pre class="programlisting">void	{0}	(<a href="x.html#Ctxt">xsltTransformContextPtr</a> ctxt, <br/>					 const xmlChar * attrSets)<br/>
</pre><p>Apply the attribute sets named by {0}, so that the element carries each attribute its set defines.</p>
<div class="variablelist"><table border="0"><tbody><tr><td><span class="term"><i><tt>ctxt</tt></i>:</span></td><td>the XSLT stylesheet</td></tr></tbody></table></div></div><hr/>"""
NAMES = ("xsltApplyAttributeSet", "xsltFreeAttributeSets", "xsltParseAttributeSet",
         "xsltResolveAttributeSet")


def _text_headings(markdown: str) -> list[str]:
    return [line for line, kind, _ in line_kinds(markdown.splitlines())
            if kind == "text" and line.startswith("#")]


def _code_blocks(markdown: str) -> list[str]:
    blocks, current = [], None
    for line, kind, _ in line_kinds(markdown.splitlines()):
        if kind == "open":
            current = []
        elif kind == "close":
            blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_an_xhtml_page_with_an_xml_declaration_is_read() -> None:
    page = GTK_DOC.format(functions=FUNCTION.format(NAMES[0]))
    for raw in (page, page.encode()):  # served as text or as bytes
        title, markdown, _ = html_to_markdown(raw, "http://127.0.0.1/doc/attributes.html")
        assert title == "attributes: interface for the XSLT attribute handling"
        assert "specificities of attribute" in markdown


def test_a_gtk_doc_page_keeps_its_headings_and_signatures() -> None:
    page = GTK_DOC.format(functions="".join(FUNCTION.format(n) for n in NAMES))
    _, markdown, _ = html_to_markdown(page, "http://127.0.0.1/doc/attributes.html")
    heads = _text_headings(markdown)
    assert "## Synopsis" in heads and "## Details" in heads
    assert all(f"### {n} ()" in heads for n in NAMES)
    assert not any("define" in h for h in heads)  # "#define" is code, not a heading
    blocks = _code_blocks(markdown)
    # each signature is one code block, its linked types shown as text, a line per <br/>
    signature = next(b for b in blocks if "xsltFreeAttributeSets\t(" in b)
    assert signature.splitlines() == [
        "void\txsltFreeAttributeSets\t(xsltTransformContextPtr ctxt, ",
        "\t\t\t\t\t const xmlChar * attrSets)"]
    synopsis = next(b for b in blocks if b.startswith("#define XSLT_ATTR_LOOKUP;"))
    assert "](" not in synopsis and "xmlNodePtr node);" in synopsis
    # each function's text under its own heading
    section = markdown.split("### xsltParseAttributeSet ()")[1].split("### ")[0]
    assert "named by xsltParseAttributeSet" in section


def test_a_preformatted_document_with_links_stays_as_it_was() -> None:
    # A <pre> with links and no code class is a preformatted document (an RFC's pages),
    # not code: its links stay links.
    page = ("<html><body><main><h1>RFC 9110</h1>" + DESCRIPTION.format("The RFC") +
            '<pre>See <a href="https://example.org/rfc9111">RFC 9111</a> for caching, and '
            "the sections after it for the rest of the protocol's semantics.</pre>"
            + DESCRIPTION.format("Its text") + "</main></body></html>")
    _, markdown, links = html_to_markdown(page, "http://127.0.0.1/rfc9110.html")
    assert "https://example.org/rfc9111" in links
    assert not _code_blocks(markdown)


def test_a_news_page_with_headings_in_its_menus_is_not_read_again() -> None:
    # Headings straight in the <body>'s blocks but in menus and teasers: trafilatura's
    # first reading (the story, no heading) stands; the second would bring back one of six
    # headings and the chrome around it.
    story = "".join(
        f"<p>Paragraph {i} of the story tells what the city's council decided about the "
        f"river's bridge, and what the people living beside it said about that.</p>"
        for i in range(8))
    menu = "".join(f"<div class='menu'><h3>Section {i}</h3><a href='/s{i}'>More</a></div>"
                   for i in range(5))
    page = (f"<html><head><title>The bridge</title></head><body>{menu}<div><h3>You are "
            f"at:</h3><a href='/'>Home</a></div><div>{story}</div></body></html>")
    _, markdown, _ = html_to_markdown(page, "http://127.0.0.1/news/bridge.html")
    assert "Paragraph 7 of the story" in markdown
    assert not _text_headings(markdown)


PROSE = ("<p>Some prose that explains the steps below at length, so that the page reads as "
         "an article for the extractor and keeps its parts.</p>")


def test_a_code_block_in_a_list_item_is_fenced_apart() -> None:
    # trafilatura wrote "1. Build the package: ```", the code, then a fence alone on a line
    # that, read as Markdown, opened a block holding the rest of the page (the Cargo book's
    # and npm's EXAMPLES sections).
    page = ("<html><body><article><h1>cargo build</h1>" + PROSE +
            "<ol><li><p>Build the local package:</p><pre><code>cargo build\n</code></pre></li>"
            "<li><p>Build with optimizations:</p><pre><code>cargo build --release\n</code>"
            "</pre></li></ol><h2>See also</h2>"
            "<p>The <a href='cargo-run.html'>run command</a> builds and runs it.</p>"
            + PROSE + "</article></body></html>")
    _, markdown, links = html_to_markdown(page, "http://127.0.0.1/commands/cargo-build.html")
    assert _code_blocks(markdown) == ["cargo build", "cargo build --release"]
    assert "## See also" in _text_headings(markdown)
    assert "http://127.0.0.1/commands/cargo-run.html" in links
    assert markdown.count("```") == 4  # no stray fence left open at the end


def test_inline_code_broken_across_lines_stays_inline() -> None:
    # DocBook breaks a long <code class="computeroutput"> across source lines; it came out
    # as a fence opened after "identical to", and the headings after it read as code.
    page = ("<html><body><article><h1>Callgrind</h1>" + PROSE +
            "<p>It runs at a slowdown of around factor 2 (identical to <code class="
            "'computeroutput'>valgrind\n    --tool=none</code>).</p><h2>Options</h2>" + PROSE
            + "</article></body></html>")
    _, markdown, _ = html_to_markdown(page, "http://127.0.0.1/cl-manual.html")
    assert "(identical to `valgrind --tool=none`)." in markdown
    assert "## Options" in _text_headings(markdown)
    assert not _code_blocks(markdown)


def test_release_notes_with_headings_in_the_body_keep_every_section() -> None:
    # GCC's release notes: <h2> and <ul> straight in <body>. trafilatura's recovery path
    # dropped every heading and half of the items; the page read again keeps both.
    item = ("<li>The {0} front end now accepts the option <code>-f{0}</code>, which changes "
            "how {0} programs are compiled, and the manual describes it at length.</li>")
    names = ("Caveats", "Ada", "Fortran", "Go", "Rust", "Modula-2", "D", "Objective-C")
    sections = "".join(f"<h2>{n}</h2><ul>" + "".join(item.format(f"{n}{i}") for i in range(4))
                       + "</ul>" for n in names)
    page = ("<html><head><title>GCC 12 Release Series - GNU Project</title></head><body>"
            "<h1>GCC 12 Release Series<br/>Changes</h1><p>This page is a brief summary of the "
            f"improvements in GCC 12, with links to the manual.</p>{sections}</body></html>")
    _, markdown, _ = html_to_markdown(page, "http://127.0.0.1/gcc-12/changes.html")
    assert [h for h in _text_headings(markdown) if h.startswith("## ")] == [
        f"## {n}" for n in names]
    assert all(f"`-f{n}{i}`" in markdown for n in names for i in range(4))


def test_a_code_block_boxed_in_a_table_cell_stays_a_code_block() -> None:
    # Older DocBook stylesheets box each program listing in a one-cell table; a <pre> in a
    # cell came out as inline code in a Markdown row.
    listing = ("<table border='0' bgcolor='#E0E0E0' width='100%'><tr><td><pre "
               "class='programlisting'>  family   String  Font family names\n"
               "  style    String  Font style</pre></td></tr></table>")
    page = ("<html><body><article><h1>Fonts</h1>" + PROSE + "<h2>Font Properties</h2>"
            + PROSE + listing + PROSE + "</article></body></html>")
    _, markdown, _ = html_to_markdown(page, "http://127.0.0.1/fontconfig-user.html")
    assert _code_blocks(markdown) == [
        "  family   String  Font family names\n  style    String  Font style"]
    assert "| " not in markdown


def test_a_texinfo_example_with_inline_markup_is_one_code_block() -> None:
    # texinfo marks metasyntactic words in an example with <var> and brackets with <span
    # class="roman">; trafilatura made those inline code and broke the block apart.
    example = ('<div class="example"><pre class="example">time <span class="roman">[</span>'
               'option&hellip;<span class="roman">]</span> <var>command</var> <span class='
               '"roman">[</span><var>arg</var>&hellip;<span class="roman">]</span>\n</pre></div>')
    page = ("<html><body><article><h1>GNU time</h1>" + PROSE + "<p>The format of the "
            "<code>time</code> command is:</p>" + example + PROSE + "</article></body></html>")
    _, markdown, _ = html_to_markdown(page, "http://127.0.0.1/time.html")
    assert _code_blocks(markdown) == ["time [option…] command [arg…]"]


def test_a_heading_broken_across_lines_is_one_heading() -> None:
    # DocBook breaks a chapter's title after its number ("3. \nProgramming with <code>
    # libbzip2</code>"), GCC's notes break theirs with <br/>: the heading was "3." with
    # its words in the body below it.
    page = ('<html><body><article><h1 class="title">GCC 12 Release Series<br/>Changes, New '
            'Features, and Fixes</h1>' + PROSE + '<h2 class="title"><a name="libprog"></a>3. '
            '\nProgramming with <code class="computeroutput">libbzip2</code>\n</h2>' + PROSE
            + "</article></body></html>")
    title, markdown, _ = html_to_markdown(page, "http://127.0.0.1/manual.html")
    assert _text_headings(markdown) == [
        "# GCC 12 Release Series Changes, New Features, and Fixes",
        "## 3. Programming with `libbzip2`"]
