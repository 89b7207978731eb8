import re

from tasks.sections import chunk_text, sections_from_markdown, split_markdown

PAGE = """---
ignored: front matter is removed by fetch, not here
---
# Pods

Pods are the smallest deployable units.

## Pod lifecycle

Pods follow a lifecycle.

### Restart policy

```bash
# not a heading: a shell comment
kubectl get pods
```

#### Details

##### Level five stays in the text

Body.

## Empty heading

## Networking
Pods share a network namespace.
"""


def test_sections_follow_headings_with_paths_and_order() -> None:
    secs = sections_from_markdown(PAGE.split("---\n", 2)[2], "Pods")
    assert [s.title for s in secs] == [
        "Pods", "Pod lifecycle", "Restart policy", "Details", "Empty heading", "Networking",
    ]
    assert [" > ".join(s.heading_path) for s in secs] == [
        "Pods",
        "Pods > Pod lifecycle",
        "Pods > Pod lifecycle > Restart policy",
        "Pods > Pod lifecycle > Restart policy > Details",
        "Pods > Empty heading",
        "Pods > Networking",
    ]
    assert secs[0].level == 1 and secs[0].body == "Pods are the smallest deployable units."
    assert "# not a heading" in secs[2].body
    assert "##### Level five stays in the text" in secs[3].body
    assert secs[4].body == ""


def test_a_top_heading_that_repeats_the_title_is_not_repeated_in_the_path() -> None:
    # Node.js's pages head their content "## Events" under the title "Events": its
    # sections read "Events > Error events", not "Events > Events > Error events".
    secs = sections_from_markdown(
        "Intro.\n\n## Events\n\nAbout events.\n\n### Error events\n\nErrors.\n\n"
        "## events\n\nAgain.\n\n### Deeper\n\nx\n\n## Other\n\ny\n", "Events")
    assert [" > ".join(s.heading_path) for s in secs] == [
        "Events", "Events", "Events > Error events", "Events", "Events > Deeper",
        "Events > Other"]
    assert [s.title for s in secs] == [
        "Events", "Events", "Error events", "events", "Deeper", "Other"]
    # its section number aside (texinfo: "1 Measuring Program Resource Use")
    numbered = sections_from_markdown("## 1 Measuring use\n\nx\n\n### 1.3 Output\n\ny\n",
                                      "Measuring use")
    assert [" > ".join(s.heading_path) for s in numbered] == [
        "Measuring use", "Measuring use > 1.3 Output"]
    # a navigation heading heads its own section, not those under it (npm's pages)
    npm = sections_from_markdown("## Table of contents\n\n- [Synopsis](#synopsis)\n\n"
                                 "### Synopsis\n\nx\n\n#### `omit`\n\ny\n", "npm-ci")
    assert [" > ".join(s.heading_path) for s in npm] == [
        "npm-ci > Table of contents", "npm-ci > Synopsis", "npm-ci > Synopsis > omit"]
    # only the top heading: a deeper one that happens to repeat the title stays
    deeper = sections_from_markdown("## Pods\n\n### Usage\n\n#### Pods\n\nx\n", "Pods")
    assert " > ".join(deeper[-1].heading_path) == "Pods > Usage > Pods"


def test_fence_with_tildes_and_longer_backticks() -> None:
    text = "intro\n\n~~~\n## not a heading\n~~~\n\n````\n```\n## still code\n```\n````\n## Real\nx\n"
    secs = sections_from_markdown(text, "T")
    assert [s.title for s in secs] == ["T", "Real"]
    assert "## still code" in secs[0].body


def test_every_heading_is_a_section_even_empty() -> None:
    chunks = split_markdown("## A\n## B\ntext\n", "Page")
    assert [(c.title, c.content) for c in chunks] == [("A", "A"), ("B", "text")]
    assert [c.position for c in chunks] == [0, 1]


def test_no_headings_gives_one_intro_section() -> None:
    chunks = split_markdown("just some text", "Title")
    assert len(chunks) == 1 and chunks[0].heading_path == "Title" and chunks[0].level == 1


def test_long_section_is_chunked_with_overlap() -> None:
    paragraphs = [" ".join(f"p{i}w{j}" for j in range(30)) for i in range(10)]
    body = "\n\n".join(paragraphs)
    chunks = chunk_text(body, max_words=100, overlap_words=30)
    assert len(chunks) > 1
    for c in chunks:
        assert len(c.split()) <= 100
    # each chunk after the first starts with the last paragraph of the previous one
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.split("\n\n")[0] == prev.split("\n\n")[-1]
    # nothing is lost
    joined = set(" ".join(chunks).split())
    assert joined == set(body.split())


def test_huge_single_paragraph_is_cut_by_words() -> None:
    body = " ".join(f"w{i}" for i in range(250))
    chunks = chunk_text(body, max_words=100, overlap_words=10)
    assert len(chunks) > 1 and all(len(c.split()) <= 100 for c in chunks)
    assert set(" ".join(chunks).split()) == set(body.split())



def test_long_paragraph_is_cut_at_sentence_ends_with_sentence_overlap() -> None:
    sentences = [f"Sentence {i} " + " ".join(f"s{i}w{j}" for j in range(18)) + "."
                 for i in range(12)]  # 20 words each, one line
    chunks = chunk_text(" ".join(sentences), max_words=64, overlap_words=25)
    assert len(chunks) > 1 and all(len(c.split()) <= 64 for c in chunks)
    for c in chunks:  # every chunk is whole sentences
        assert c.startswith("Sentence ") and c.endswith(".")
    as_sentences = [re.split(r"(?<=\.) ", c) for c in chunks]
    assert all(len(ss) > 1 and "\n" not in c for ss, c in zip(as_sentences, chunks))
    for prev, nxt in zip(as_sentences, as_sentences[1:]):  # the previous one's last first
        assert nxt[0] == prev[-1]
    assert set(" ".join(chunks).split()) == set(" ".join(sentences).split())

def test_a_long_line_is_cut_at_packs_text_sentence_ends() -> None:
    # split-v8: the build cuts where packs/text.py ends a sentence: never after "e.g." or
    # "i.e.", nor inside a code span; a closing quote stays with its sentence.
    filler = " ".join(f"w{j}" for j in range(20))
    sentences = [f"Tools exist, e.g. Helm and Kustomize, for {filler}.",
                 f"Set it in `pod.spec. Containers` as {filler}.",
                 f'The docs say "use probes." Then {filler}.',
                 f"Nodes report i.e. Ready or NotReady {filler}."] * 2
    chunks = chunk_text(" ".join(sentences), max_words=40, overlap_words=0)
    joined = " ".join(chunks)
    assert all(s in joined for s in sentences[:4])  # no sentence is cut inside
    assert all(c.startswith(("Tools", "Set", "The", "Nodes")) for c in chunks), chunks


def test_a_hard_wrapped_paragraph_is_cut_between_sentences_not_at_a_wrap() -> None:
    # A Markdown paragraph wrapped at ~70 characters, longer than the window: before, its
    # chunks ended at a line break ("Listing 19-13 behaves in the same").
    sentences = [f"Sentence {i} says " + " ".join(f"s{i}w{j}" for j in range(15)) + "."
                 for i in range(12)]
    words = " ".join(sentences).split()
    lines = [" ".join(words[i:i + 11]) for i in range(0, len(words), 11)]
    assert not all(line.endswith(".") for line in lines)  # wraps fall inside sentences
    chunks = chunk_text("\n".join(lines), max_words=64, overlap_words=25)
    assert len(chunks) > 2 and all(len(c.split()) <= 64 for c in chunks)
    for c in chunks:
        assert c.startswith("Sentence ") and c.endswith("."), c
        assert "\n" in c  # the page's wraps are kept inside the chunk
    assert " ".join(" ".join(chunks).split()).count("Sentence 11 says") >= 1
    assert set(" ".join(chunks).split()) == set(words)


def test_a_long_list_paragraph_is_cut_between_items() -> None:
    items = [f"- item {i} " + " ".join(f"i{i}w{j}" for j in range(12)) for i in range(10)]
    chunks = chunk_text("Some options:\n" + "\n".join(items), max_words=60, overlap_words=0)
    assert len(chunks) > 1
    for c in chunks[1:]:
        assert c.startswith("- item "), c  # an item is never split from its own words


def test_a_lead_in_opens_the_chunk_of_the_list_it_introduces() -> None:
    # The Cargo book's "to express strategies such as:" ended one chunk and its list began
    # the next: the answer quoted the lead-in alone and no chunk held both.
    intro = " ".join(f"a{j}" for j in range(50)) + "."
    lead = "Cargo can replace one source with another to express strategies such as:"
    items = "\n".join(f"- strategy {i} " + " ".join(f"s{i}w{j}" for j in range(12))
                      for i in range(3))
    after = " ".join(f"b{j}" for j in range(20)) + "."
    body = "\n\n".join([intro, lead, items, after])
    chunks = chunk_text(body, max_words=64, overlap_words=10)
    assert not any(c.endswith(":") for c in chunks)
    assert chunks[1].startswith(lead + "\n\n- strategy 0")
    assert set(" ".join(chunks).split()) == set(body.split())


def test_a_lead_in_that_opens_a_section_stays_with_a_long_code_block() -> None:
    lead = "The full set of available keys are:"
    code = "```\n" + "\n".join(f"key{i} = {i}  # what key {i} does here" for i in range(20)) + "\n```"
    chunks = chunk_text(f"{lead}\n\n{code}\n\nAfter the listing.", max_words=64,
                        overlap_words=10)
    assert chunks[0].startswith(lead + "\n\n```\nkey0")
    assert all(len(c.split()) <= 64 for c in chunks)  # the code cut to fit beside it


def test_a_lead_in_before_a_paragraph_stays_in_its_chunk() -> None:
    # The Rust book: "we can use `cargo test -- --ignored`:" introduced a listing the
    # source includes by a directive; the paragraph after it is no part of it, and moving
    # the sentence would take it from the section's first chunk, where a search finds it.
    first = " ".join(f"a{j}" for j in range(40)) + "."
    lead = "If we want to run only the ignored tests, we can use `cargo test -- --ignored`:"
    after = " ".join(f"b{j}" for j in range(40)) + "."
    chunks = chunk_text("\n\n".join([first, lead, after]), max_words=64, overlap_words=0)
    assert chunks[0].endswith(lead) and chunks[1] == after


def test_a_lead_in_and_the_caption_of_its_listing_open_the_chunk_of_the_code() -> None:
    # The Rust book's Raw Identifiers: "... the raw identifier syntax, like this:" and the
    # listing's '<span class="filename">' ended one chunk, the code (`r#match`) opened
    # the next, and the answer quoted the lead-in alone.
    intro = " ".join(f"a{j}" for j in range(40)) + "."
    lead = "To use `match` as a function name, you need the raw identifier syntax, like this:"
    caption = '<span class="filename">Filename: src/main.rs</span>'
    code = "```rust\n" + "\n".join(f"fn r#match{i}(needle: &str) -> bool {{ true }}"
                                    for i in range(3)) + "\n```"
    body = "\n\n".join([intro, lead, caption, code, "This code will compile."])
    chunks = chunk_text(body, max_words=64, overlap_words=10)
    assert chunks[0] == intro
    assert chunks[1].startswith(f"{lead}\n\n{caption}\n\n```rust\nfn r#match0")
    assert set(" ".join(chunks).split()) == set(body.split())
    # A caption before prose (its listing was included by a directive) stays where it is.
    short = " ".join(f"a{j}" for j in range(30)) + "."
    gone = chunk_text("\n\n".join([short, lead, caption, "b " * 40]), 64, 0)
    assert gone[0].endswith(caption) and gone[1].startswith("b b")


def test_chunks_with_lead_ins_keep_the_window_and_lose_nothing() -> None:
    import random

    rng = random.Random(7)
    for trial in range(300):
        blocks, k = [], 0
        for _ in range(rng.randint(2, 12)):
            kind, n = rng.choice(["prose", "lead", "list", "code"]), rng.randint(1, 90)
            words = [f"t{trial}w{(k := k + 1)}" for _ in range(n)]
            if kind == "lead":  # a lead-in of 1-19 words, then what it introduces
                blocks.append(" ".join(words[:rng.randint(1, 19)]) + " such as:")
                kind, words = rng.choice(["list", "code"]), words[19:] or ["x"]
                n = len(words)
            if kind == "list":
                blocks.append("\n".join("- " + " ".join(words[i:i + 9])
                                        for i in range(0, n, 9)))
            elif kind == "code":
                blocks.append("```\n" + "\n".join(" ".join(words[i:i + 6])
                                                   for i in range(0, n, 6)) + "\n```")
            else:
                blocks.append(" ".join(words) + ".")
        body = "\n\n".join(blocks)
        chunks = chunk_text(body, max_words=64, overlap_words=16)
        assert all(len(c.split()) <= 64 for c in chunks), trial
        assert set(" ".join(chunks).split()) == set(body.split()), trial
        assert not any(c.endswith("such as:") for c in chunks[:-1]), trial


def test_a_long_paragraph_ending_in_a_colon_is_no_lead_in_to_carry() -> None:
    long_lead = " ".join(f"w{j}" for j in range(30)) + " as follows:"
    body = "\n\n".join(["x " * 40, long_lead, "- " + "y " * 40])
    chunks = chunk_text(body, max_words=64, overlap_words=0)
    assert all(len(c.split()) <= 64 for c in chunks)


def test_code_sections_are_flagged() -> None:
    chunks = split_markdown("## Code\n```\na b c d e f g h\n```\nshort\n## Prose\nwords only here\n", "P")
    assert [c.is_code for c in chunks] == [True, False]


def test_a_page_without_title_takes_its_leading_heading():
    import polars as pl

    from tasks.sections import split_pages

    pages = pl.DataFrame({
        "url": ["https://book.test/ch03-01-variables.html", "https://book.test/notes.md",
                "https://book.test/pods"],
        "title": [None, None, "Pods"],
        "text": ["\n## Variables and Mutability\n\nVariables are immutable by default.\n\n"
                 "### Shadowing\n\nA new let shadows the old binding.\n",
                 "Just text, no heading at all.\n",
                 "## Pod lifecycle\n\nPods follow a lifecycle.\n"],
    })
    rows = split_pages(pages, 300, 40)
    paths = dict(zip(rows["heading_path"], rows["page_title"]))
    # The mdBook chapter's leading `##` is its title: no file name, no doubled heading.
    assert paths == {
        "Variables and Mutability": "Variables and Mutability",
        "Variables and Mutability > Shadowing": "Variables and Mutability",
        "notes.md": "notes.md",  # neither title nor heading: the URL's last segment
        "Pods > Pod lifecycle": "Pods",  # a page with a title keeps its leading heading
    }
    first = rows.row(0, named=True)
    assert first["content"] == "Variables are immutable by default." and first["level"] == 1


RELEASE_NOTES = """## Introduction to Tern 1.20

Tern 1.20 arrives six months after Tern 1.19.

## Ports &amp; platforms

### **Experimental:** WASI

An experimental port.

## Standard library

### Minor changes to the library

#### [crypto/tls](/pkg/crypto/tls/)

The [`Config.MinVersion`](/pkg/crypto/tls/#Config) field now defaults to TLS 1.2.

#### [`**kwargs`](/pkg/kw/) &mdash; [net/http][http]

Keyword arguments.

#### [Unreleased]

Nothing yet.

# A `#` heading inside the page: [text](/x) stays text

[http]: /pkg/net/http/
[unreleased]: /compare/
"""


def test_heading_paths_and_titles_are_the_text_a_reader_sees():
    import polars as pl

    from tasks.sections import split_pages

    pages = pl.DataFrame({"url": ["https://tern.test/doc/tern1.20", "https://tern.test/doc/x"],
                          "title": ["`Tern` 1.20 _Release_ Notes", None],
                          "text": [RELEASE_NOTES, "## [Linked](/doc/y) *title*\n\nBody.\n"]})
    rows = split_pages(pages, 300, 40)
    minor = "Tern 1.20 Release Notes > Standard library > Minor changes to the library"
    assert rows["heading_path"].to_list() == [
        "Tern 1.20 Release Notes > Introduction to Tern 1.20",
        "Tern 1.20 Release Notes > Ports & platforms",
        "Tern 1.20 Release Notes > Ports & platforms > Experimental: WASI",
        "Tern 1.20 Release Notes > Standard library",
        minor,
        f"{minor} > crypto/tls",
        f"{minor} > **kwargs — net/http",  # the code span's stars are code, kept
        f"{minor} > Unreleased",  # a shortcut reference the page defines
        "Linked title",  # a leading heading as the title, rendered too
    ]
    assert set(rows["title"]) >= {"crypto/tls", "**kwargs — net/http", "Experimental: WASI"}
    assert set(rows["page_title"]) == {"Tern 1.20 Release Notes", "Linked title"}
    # Section text is the page's text: only headings are rendered.
    tls = rows.filter(pl.col("title") == "crypto/tls")["content"][0]
    assert tls.startswith("The [`Config.MinVersion`](/pkg/crypto/tls/#Config) field")
    last = rows.filter(pl.col("title") == "Unreleased")["content"][0]
    assert "A # heading inside the page: text stays text" in last


def test_a_paragraph_ending_in_a_comma_leads_its_list_into_the_next_chunk() -> None:
    # Kubernetes' taints page: "... have the indicated effects on the pod. In particular,"
    # ended one chunk and the list of what NoSchedule and NoExecute do began the next.
    intro = " ".join(f"a{j}" for j in range(40)) + "."
    lead = "The remaining taints have the indicated effects on the pod. In particular,"
    items = "\n".join(f"- effect {i} " + " ".join(f"e{i}w{j}" for j in range(12))
                      for i in range(3))
    body = "\n\n".join([intro, lead, items])
    chunks = chunk_text(body, max_words=64, overlap_words=0)
    assert chunks[-1].startswith(lead + "\n\n- effect 0")
    assert not any(c.rstrip().endswith(",") for c in chunks)
    # A list whose last item ends in a comma is no lead-in of what follows it.
    listed = "\n".join(f"- item {i} l{i}w0 l{i}w1," for i in range(3))
    code = "```\n" + "\n".join(f"c{i} = {i}" for i in range(20)) + "\n```"
    short = " ".join(f"s{j}" for j in range(20)) + "."
    chunks = chunk_text("\n\n".join([short, listed, code]), max_words=64, overlap_words=0)
    assert chunks[0] == "\n\n".join([short, listed])


def test_a_long_paragraph_leaves_its_last_sentence_to_the_list_it_introduces() -> None:
    # The taints page's paragraph runs to 55 words and ends "... on the pod. In particular,":
    # too long to carry whole, its last sentence still opens the list's chunk.
    intro = " ".join(f"a{j}" for j in range(20)) + "."
    para = " ".join(f"p{j}" for j in range(30)) + ". In particular,"
    items = "\n".join(f"- effect {i} " + " ".join(f"e{i}w{j}" for j in range(12))
                      for i in range(3))
    body = "\n\n".join([intro, para, items])
    chunks = chunk_text(body, max_words=64, overlap_words=0)
    assert chunks[0].endswith("p29.")
    assert chunks[1].startswith("In particular,\n\n- effect 0")
    assert set(" ".join(chunks).split()) == set(body.split())


def test_a_bare_connective_takes_the_sentence_before_it_to_the_list() -> None:
    # "In particular," alone said nothing: a chunk of the taints page opened with it, and
    # the answer quoted the list without what it is a list of.
    intro = " ".join(f"a{j}" for j in range(20)) + "."
    before = "Then " + " ".join(f"q{j}" for j in range(11)) + "."
    para = " ".join(f"p{j}" for j in range(18)) + ". " + before + " In particular,"
    items = "\n".join(f"- effect {i} " + " ".join(f"e{i}w{j}" for j in range(12))
                      for i in range(3))
    body = "\n\n".join([intro, para, items])
    chunks = chunk_text(body, max_words=64, overlap_words=0)
    assert chunks[0].endswith("p17.")
    assert chunks[1].startswith(before + " In particular,\n\n- effect 0")
    assert set(" ".join(chunks).split()) == set(body.split())


def test_a_page_that_heads_its_sections_with_h1_keeps_them_as_sections() -> None:
    # An HTML page with an <h1> per section (Google's SRE book) comes out of trafilatura as
    # several "#" headings; each had been read as a line of the intro's text, so the page
    # was one run of sections under its title.
    text = ("# Monitoring Distributed Systems\n\nThe chapter's opening.\n\n# Definitions\n\n"
            "Monitoring: collecting numbers.\n\n## White-box monitoring\n\nInternals.\n\n"
            "# Why Monitor?\n\nTo alert.\n")
    secs = sections_from_markdown(text, "Monitoring Distributed Systems")
    assert [" > ".join(s.heading_path) for s in secs] == [
        "Monitoring Distributed Systems",
        "Monitoring Distributed Systems > Definitions",
        "Monitoring Distributed Systems > Definitions > White-box monitoring",
        "Monitoring Distributed Systems > Why Monitor?",
    ]
    assert secs[0].body == "The chapter's opening." and secs[1].level == 2
    # One "#" line after the title, or a run of "#" comment lines a fence did not hold (a
    # YAML listing inside a shortcode), is text, as before.
    one = "# T\n\nIntro.\n\n# Footnotes\n\nA note.\n\n## Real\n\nx\n"
    assert [s.title for s in sections_from_markdown(one, "T")] == ["T", "Real"]
    comments = ("# T\n\nIntro:\n\n# This manifest mounts /data on the host\n"
                "# The mount is read-only.\n\n# Another comment\n# and its second line\n\n"
                "## Real\n\nx\n")
    secs = sections_from_markdown(comments, "T")
    assert [s.title for s in secs] == ["T", "Real"]
    assert "This manifest mounts /data on the host\nThe mount is read-only." in secs[0].body


def test_a_sentence_wrapped_inside_a_quote_is_never_cut_at_its_wrap() -> None:
    # The Rust book's "Alternate File Paths" note is one long blockquote; each of its lines
    # was cut as a sentence of its own, so a chunk opened with "> module's code in:" and
    # the answer quoted "module's code in:" and "project can end up with many files ..."
    # as bullets.
    filler = "\n".join(f"> Filler sentence {i} says something plain." for i in range(12))
    body = ("> ### Alternate File Paths\n>\n" + filler + "\n>\n"
            "> For a module named `front_of_house` declared in the crate root, the\n"
            "> compiler will look for the module's code in:\n>\n"
            "> - _src/front_of_house.rs_ (what we covered)\n"
            "> - _src/front_of_house/mod.rs_ (older style, still supported path)\n>\n"
            "> The main downside to the style that uses files named _mod.rs_ is that your\n"
            "> project can end up with many files named _mod.rs_, which can get confusing.")
    chunks = chunk_text(body, max_words=40, overlap_words=0)
    assert len(chunks) > 2
    for c in chunks:  # every chunk opens where a sentence, item or heading of the quote does
        first = c.split("\n", 1)[0].lstrip("> ")
        assert first[:1].isupper() or first.startswith(("- ", "#")), c
    assert any("the\n> compiler will look for the module's code in:" in c for c in chunks)
    assert set(" ".join(chunks).split()) == set(body.split())
