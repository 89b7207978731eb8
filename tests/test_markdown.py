"""packs.markdown: the one reader of fences, headings and list items, and the behaviours
that changed when the five fence parsers were folded into it."""

import re

from packs import filters
from packs import markdown as md
from packs.citations import markers
from packs.retrieval.extractive import segment
from tasks.extract.offline import extract_offline
from tasks.fetch.markdown_source import markdown_document
from tasks.sections import code_fraction, split_markdown
from tasks.vectors import key_phrases


def kinds(text: str) -> list[str]:
    return [kind for _, kind, _ in md.line_kinds(text.splitlines())]


def test_fence_closes_only_with_same_char_and_at_least_its_length():
    text = "````md\n```\n~~~\n```` x\n`````\nafter"
    assert kinds(text) == ["open", "code", "code", "code", "close", "text"]


def test_unclosed_fence_runs_to_the_end():
    assert kinds("a\n~~~\ncode\n# not a heading") == ["text", "open", "code", "code"]
    assert md.fence_spans("a\n```\nb") == [(2, 7)]


def test_backticks_in_the_info_string_make_a_code_span_not_a_fence():
    assert md.opening_fence("```ls```") is None
    assert kinds("```ls```\n## Heading") == ["text", "text"]
    assert md.opening_fence("~~~ a`b").info == "a`b"  # tildes allow them


def test_info_string_language_is_its_first_word():
    assert md.opening_fence("```yaml title=a.yaml").language == "yaml"
    assert md.opening_fence("``` {.python}").language == "python"
    assert md.opening_fence("~~~").language == ""
    assert md.fence_languages("```py\n```sh\n```\n~~~ rust\n~~~") == ["py", "rust"]


def test_fences_nested_in_list_items_are_fences():
    text = "1. Step\n\n    ```shell\n    # a comment\n    ```\n"
    assert kinds(text) == ["text", "text", "open", "code", "close"]


def test_fences_in_blockquotes_are_fences():
    # was: the offline extractor and key phrases skipped them, split and filters did not
    assert kinds("> ```rust,ignore\n> let x = 1;\n> ```\nafter") == ["open", "code", "close", "text"]
    assert md.opening_fence("> ```rust,ignore").language == "rust"


def test_replace_fences_keeps_offsets_or_substitutes():
    text = "a\n```\nx\n```\nb"
    assert md.replace_fences(text) == "a\n" + " " * 9 + "\nb"
    assert md.replace_fences(text, "|") == "a\n|\nb"


def test_headings_follow_commonmark():
    assert md.heading("## C#") == md.Heading(2, "C#")
    assert md.heading("### Pods ###") == md.Heading(3, "Pods")
    assert md.heading("##") == md.Heading(2, "")
    assert md.heading("#5 bolts") is None and md.heading("####### x") is None
    assert md.heading("    # indented code") is None


def test_list_markers():
    assert md.list_marker("  - item").end() == 4
    assert md.list_marker("10) ten").end() == 4
    assert md.list_marker("-not a list") is None
    assert md.list_marker("1234567890. too long") is None


def test_one_fence_pattern_for_the_database():
    pattern = re.compile(md.fence_opener_pattern("py|python"), re.M)
    assert pattern.search("x\n  ```python\n") and pattern.search("~~~ {.py}\n")
    assert not pattern.search("```pyyaml\n")
    assert pattern.search("> ```python\n")


# --- behaviours that changed (each was a disagreement between the old parsers) ------------

def test_offline_extractor_skips_tilde_fences():
    # was: only ``` fences were skipped, so identifiers in ~~~ code became entities
    content = "Use the scheduler.\n\n~~~python\nmy_secret_helper = build_thing()\n~~~\n"
    names = {e["name"] for e in extract_offline("Page", "Page > Section", content)["entities"]}
    assert "my_secret_helper" not in names


def test_split_sees_indented_fences_and_keeps_a_hash_in_headings():
    # was: a fence indented 4+ spaces (inside a list item) was prose, "## C#" was "C", and
    # a "```ls```" line opened a fence that ran to the end
    text = "Intro.\n\n1. Run:\n\n    ```shell\n    ## not a heading\n    ```\n\n## C#\n\nText."
    chunks = split_markdown(text, "Page")
    assert [c.title for c in chunks] == ["Page", "C#"]
    assert code_fraction("1. Run:\n\n    ```shell\n    kubectl get pods -A\n    ```") > 0.5
    assert code_fraction("```ls```\nprose words here") == 0.0


def test_fence_languages_ignore_fence_lines_inside_code():
    # was: a "```yaml" line shown inside a ~~~ block counted as a yaml fence
    assert filters.fence_languages("~~~markdown\n```yaml\na: 1\n```\n~~~") == ["markdown"]


def test_extractive_units_close_a_fence_only_with_a_closing_line():
    # was: any line starting with the fence run closed it ("```python" inside ```)
    text = "```\n```python is not a close\nx = 1\n```\nA sentence here."
    kinds_ = [u.kind for u in segment(text)]
    assert kinds_.count("code") == 1 and kinds_[-1] == "sentence"


def test_key_phrases_and_citations_skip_the_same_fences():
    # was: key phrases closed a ```` block at the ``` line inside it
    text = "Pods run containers.\n````\n```\nsecret phrase words\n````\n"
    assert not any("secret" in p for p in key_phrases(text))
    assert markers("Answer [1].\n````\n```\n[2]\n````\n") == [1]


def test_fetch_keeps_fenced_markdown_as_is():
    # HTML comments go outside fences only; a `# ` line inside a ~~~ fence is no title
    title, text, _ = markdown_document(
        "~~~\n# Not a title\n<!-- kept -->\n~~~\n\n# Real title\n<!-- gone -->\n",
        "https://x.test/a")
    assert title == "Real title"
    assert "<!-- kept -->" in text and "gone" not in text


def test_empty_anchors_go_so_the_first_heading_can_be_the_title():
    """An mdBook chapter keeps link targets for its old headings before its first one."""
    from tasks.sections import page_title

    source = ('<!-- Old headings. Do not remove or links may break. -->\n\n'
              '<a id="writing-error-messages"></a>\n<A NAME=\'old\' ></A>\n\n'
              '## Redirecting Errors to Standard Error\n\nSee <a href="#x">this</a> and '
              '<span id="y"></span>the rest.\n\n```html\n<a id="kept"></a>\n```\n')
    title, text, _ = markdown_document(source, "file:///book/src/ch12-06-stderr.md")
    assert title is None  # no front matter, no `# ` heading
    assert text.startswith("## Redirecting Errors to Standard Error")
    assert '<a href="#x">this</a>' in text and "</span>" not in text
    assert '<a id="kept"></a>' in text  # code is kept as written
    assert page_title(title, "file:///book/src/ch12-06-stderr.md", text)[0] == (
        "Redirecting Errors to Standard Error")


# --- inline text: what a reader sees of a heading, a title, a name ------------------------


def test_inline_text_shows_link_text_without_its_target():
    assert md.inline_text("[crypto/tls](/pkg/crypto/tls/)") == "crypto/tls"
    assert md.inline_text("[`sync`](/pkg/sync/ \"Package sync\")") == "sync"
    assert md.inline_text("[net/http](/pkg/net/http/) &amp; [net/url](<a b>)") == (
        "net/http & net/url")
    assert md.inline_text("[Vet][vet] and [encoding/json][]") == "Vet and encoding/json"
    assert md.inline_text("![status](badge.svg) Build <https://ci.example/x>") == (
        "status Build https://ci.example/x")
    assert md.inline_text("[a [nested] b](u)") == "a [nested] b"


def test_inline_text_drops_emphasis_tags_and_escapes_and_resolves_entities():
    assert md.inline_text("**Experimental:** _WASI_ ~~old~~ port") == (
        "Experimental: WASI old port")
    assert md.inline_text("***both*** and __bold text__") == "both and bold text"
    assert md.inline_text("The __init__ method") == "The __init__ method"  # a name
    assert md.inline_text("<code>Vec</code> <em>of</em> Vec<T>") == "Vec of Vec<T>"
    assert md.inline_text("Ports &amp; platforms &mdash; &#39;x&#x27; &nosuch;") == (
        "Ports & platforms — 'x' &nosuch;")
    assert md.inline_text(r"\*nix only, not \[a link\](x)") == "*nix only, not [a link](x)"


def test_inline_text_keeps_what_is_not_markup():
    for plain in ("snake_case_name and _private", "2 * 3 * 4", "*.txt and *.md", "C# and F#",
                  "x ` y", "a=1&para=2", "Box<dyn Error>", "[1.2.0] - 2024-01-02"):
        assert md.inline_text(plain) == plain


def test_a_code_span_is_kept_exactly_as_written():
    # Nothing inside a code span is markup: stars, links, entities, tags stay as they are.
    assert md.inline_text("`**kwargs` and `*args`") == "**kwargs and *args"
    assert md.inline_text("`[a](b)` is a link") == "[a](b) is a link"
    assert md.inline_text("Using `Vec<T>` with `&amp;` and `<br>`") == (
        "Using Vec<T> with &amp; and <br>")
    assert md.inline_text("a ``b`c`` d, `` `x` ``") == "a b`c d, `x`"
    assert md.inline_text("[`__init__`](#init)") == "__init__"


def test_a_shortcut_reference_is_a_link_only_when_the_page_defines_it():
    page = "## [Unreleased]\n\n## [1.2.0] - 2024\n\n[unreleased]: https://x/compare\n"
    labels = md.reference_labels(page)
    assert labels == {"unreleased"}
    assert md.inline_text("[Unreleased]", labels) == "Unreleased"
    assert md.inline_text("[1.2.0] - 2024", labels) == "[1.2.0] - 2024"
    assert md.reference_labels("```\n[a]: b\n```\n") == frozenset()
