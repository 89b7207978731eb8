"""HTML as documentation generators write it keeps its headings, code blocks and titles:
rustdoc's methods and variants, Node.js's tabbed examples and site title, one-line code
blocks. Each page is a small copy of the generator's markup (found on the Rust and Node.js
documentation shipped with their toolchains)."""

from __future__ import annotations

from tasks.fetch.parse import html_to_markdown

PROSE = ("<p>{0} is described here at some length, so that the page reads as an article and "
         "not as a list of links, with the reasons for each of its parts.</p>")


def _page(body: str, title: str = "Option in std::option - Rust") -> str:
    return (f"<html><head><title>{title}</title></head><body><main>"
            f"<h1>Enum Option</h1>{PROSE.format('The type')}{body}{PROSE.format('The rest')}"
            "</main></body></html>")


def _headings(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("#")]


# rustdoc 1.95: a variant's permalink "§" beside its heading in a <section>; a method's
# heading inside the <summary> of its toggle, after its version and source link.
VARIANT = ('<h2 id="variants">Variants</h2><div class="variants"><section id="variant.None" '
           'class="variant"><a href="#variant.None" class="anchor">§</a><span class="since '
           'rightside">1.0.0</span><h3 class="code-header">None</h3></section><div class='
           '"docblock"><p>No value.</p></div></div>')
METHOD = ('<details class="toggle method-toggle" open><summary><section id="method.is_some" '
          'class="method"><span class="rightside"><span class="since">1.0.0</span> · <a '
          'class="src" href="../../src/core/option.rs.html#635">Source</a></span><h4 class='
          '"code-header">pub const fn <a href="#method.is_some" class="fn">is_some</a>(&amp;self)'
          ' -&gt; <a class="primitive" href="../primitive.bool.html">bool</a></h4></section>'
          '</summary><div class="docblock"><p>Returns <code>true</code> if the option is a '
          '<code>Some</code> value, and <code>false</code> when it holds nothing.</p></div>'
          '</details>')
TOGGLE = ('<details class="toggle top-doc" open><summary class="hideme"><span>Expand '
          'description</span></summary><div class="docblock"><p>The <code>Option</code> type '
          'is for a value that may be absent, as the module documentation explains.</p></div>'
          '</details>')


def test_a_rustdoc_variant_and_method_keep_their_headings_and_descriptions() -> None:
    _, markdown, _ = html_to_markdown(_page(TOGGLE + VARIANT + METHOD), "http://127.0.0.1/o")
    heads = _headings(markdown)
    assert "### None" in heads and "No value." in markdown
    assert r"#### pub const fn is\_some(&self) -> bool" in heads
    assert "Returns `true` if the option is a `Some` value" in markdown
    assert not any("Source" in h or "1.0.0" in h or "Expand" in h for h in heads)
    assert "The `Option` type is for a value that may be absent" in markdown


def test_a_heading_of_one_link_to_another_page_keeps_its_link() -> None:
    body = ("<h4 id='crypto/tls'><a href='/pkg/crypto/tls/'>crypto/tls</a>"
            "<a class='anchor' href='#crypto/tls'>¶</a></h4>" + PROSE.format("The package"))
    _, markdown, links = html_to_markdown(_page(body, "Go 1.22 Release Notes"),
                                          "https://tern.test/doc/go1.22")
    assert "#### [crypto/tls](https://tern.test/pkg/crypto/tls/)" in markdown.splitlines()
    assert "https://tern.test/pkg/crypto/tls/" in links


def test_a_one_line_code_block_stays_a_code_block() -> None:
    for block in ("<pre><code>npm install knowledge</code></pre>", "<pre>npm install knowledge</pre>",
                  '<div class="highlight"><pre><span></span>npm install knowledge</pre></div>'):
        body = "<p>Install it first:</p>" + block + PROSE.format("The package")
        _, markdown, _ = html_to_markdown(_page(body), "http://127.0.0.1/install")
        assert "```\nnpm install knowledge\n```" in markdown, block


def test_tabbed_examples_in_one_pre_become_one_code_block_each() -> None:
    body = ('<p>To use the promise-based APIs:</p><pre class="with-39-chars"><input class="js-'
            'flavor-toggle" type="checkbox" checked><code class="language-js mjs">import * as fs'
            " from 'node:fs/promises';</code><code class=\"language-js cjs\">const fs = require("
            "'node:fs/promises');</code></pre>" + PROSE.format("The module"))
    _, markdown, _ = html_to_markdown(_page(body), "http://127.0.0.1/fs.html")
    assert "```\nimport * as fs from 'node:fs/promises';\n```" in markdown
    assert "```\nconst fs = require('node:fs/promises');\n```" in markdown


def test_a_page_opening_with_the_site_name_is_titled_by_its_own_part() -> None:
    # Node.js's docs open every page with "Node.js v20 documentation" as their first heading.
    html = ("<html><head><title>File system | Node.js v20.20.2 Documentation</title></head>"
            "<body><main><h1>Node.js v20.20.2 documentation</h1><h2>File system</h2>"
            + PROSE.format("The fs module") * 2 + "</main></body></html>")
    assert html_to_markdown(html, "http://127.0.0.1/api/fs.html")[0] == "File system"
    path = html.replace("File system", "Path")
    assert html_to_markdown(path, "http://127.0.0.1/api/path.html")[0] == "Path"


def test_a_section_whose_id_names_its_heading_is_not_taken_for_navigation() -> None:
    # Sphinx: <section id="editing-and-navigation"><h2>Editing and Navigation</h2>: an id
    # with "navigation" or "menu" in it made trafilatura drop the chapter as chrome.
    body = ""
    for heading, slug in (("Menus", "menus"), ("Editing and Navigation",
                                               "editing-and-navigation")):
        body += (f'<section id="{slug}"><span id="label-{slug}"></span><h2>{heading}<a class='
                 f'"headerlink" href="#{slug}">¶</a></h2>' + PROSE.format(heading) * 2
                 + "</section>")
    _, markdown, _ = html_to_markdown(_page(body, "IDLE - Python documentation"),
                                      "http://127.0.0.1/library/idle.html")
    assert "## Menus" in _headings(markdown)
    assert "## Editing and Navigation" in _headings(markdown)
    assert "Editing and Navigation is described here" in markdown


def test_a_link_whose_text_is_code_is_resolved_and_counted() -> None:
    # API docs link their names as code ("[`map`](enum.Option.html#method.map)"): the link
    # was split at the code span, left relative in the text and missing from the links.
    body = ('<p>Use <a href="../iter/trait.Iterator.html"><code>Iterator</code></a> or '
            '<a href="enum.Option.html#method.map"><code>map</code></a>; <code>[a](b)</code> '
            "is code, not a link. " + "Long enough to be a paragraph of its own. " * 3 + "</p>")
    _, markdown, links = html_to_markdown(_page(body),
                                          "http://127.0.0.1/std/option/enum.Option.html")
    assert "[`Iterator`](http://127.0.0.1/std/iter/trait.Iterator.html)" in markdown
    assert "[`map`](http://127.0.0.1/std/option/enum.Option.html#method.map)" in markdown
    assert "`[a](b)`" in markdown
    assert "http://127.0.0.1/std/iter/trait.Iterator.html" in links
