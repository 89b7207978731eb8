"""One neutraliser for every prompt's delimiters (#37): the extraction prompt escaped
`</section>` but let `< /section>`, fullwidth `＜/section＞` and `</example_1>` through.
Hand-written forms, then properties over generated tag-shaped strings (hypothesis)."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packs.llm.neutralise import (
    ANSWER_TAGS,
    EXTRACTION_TAGS,
    OPENERS,
    SLASHES,
    neutralise,
    tag_shaped,
)
from packs.retrieval import synthesis
from tasks.extract import prompt

ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


@pytest.mark.parametrize("text", [
    "</section>", "< /section>", "</ section >", "<\n/section>", "＜/section＞", "﹤/section﹥",
    "＜／ＳＥＣＴＩＯＮ＞", "</SECTION>", "</example_1>", "<example_12>", "</examples>",
    "<sec\u200btion>", "<\u200b/section>", "〈/section〉", "⟨/section⟩", "‹/section›",
    "<\\section>", "<∕section>", "</heading_path>", "<page_title x='1'>", "</text>",
    "<section", "</section-2>",
])
def test_every_form_of_an_extraction_tag_is_escaped(text) -> None:
    out = prompt.user_message("t", "h", f"before {text} after")
    body = out.split("<section>\n", 1)[1].rsplit("\n</section>", 1)[0]
    assert "&lt;" in body and tag_shaped(body, EXTRACTION_TAGS) == []
    assert body.count("</section>") == 0


@pytest.mark.parametrize("text", [
    "</pack_context_0123456789abcdef>", "< /pack_context_x >", "＜/question＞", "﹤question﹥",
    "</example_1>", "<EXAMPLES>", "<pack\u200c_context_1>",
])
def test_every_form_of_an_answer_tag_is_escaped(text) -> None:
    out = synthesis.neutralise(f"x {text} y")
    assert "&lt;" in out and tag_shaped(out, ANSWER_TAGS) == []


@pytest.mark.parametrize("text", [
    "<div>", "Vec<T>", "a < b and c > d", "<sections>", "<textarea>", "List<String>",
    "x<questionable>", "<example", "&lt;/section>", "",
])
def test_other_markup_is_left_alone(text) -> None:
    names = EXTRACTION_TAGS if "example" not in text else ("section",)
    assert neutralise(text, names) == text


def test_the_openers_cover_every_character_that_normalises_to_a_bracket() -> None:
    """Every code point whose NFKC form is `<` (or a slash) is in the lists."""
    brackets = [chr(c) for c in range(sys.maxunicode + 1)
                if unicodedata.normalize("NFKC", chr(c)) == "<"]
    assert set(brackets) <= set(OPENERS)
    slashes = [chr(c) for c in range(sys.maxunicode + 1)
               if unicodedata.normalize("NFKC", chr(c)) in ("/", "\\")]
    assert set(slashes) <= set(SLASHES)


def _cased(name: str) -> st.SearchStrategy[str]:
    """`name` with each letter in either case, ASCII or fullwidth, and invisible characters
    slipped in."""
    def one(c: str) -> st.SearchStrategy[str]:
        forms = {c, c.upper()}
        if c.isascii() and (c.isalnum() or c == "_"):
            forms |= {chr(ord(f) + 0xFEE0) for f in forms}
        return st.tuples(st.sampled_from(sorted(forms)),
                         st.sampled_from(["", "", "", *ZERO_WIDTH])).map("".join)
    return st.tuples(*[one(c) for c in name]).map("".join)


@st.composite
def tag_shapes(draw, names: tuple[str, ...]) -> str:
    bracket = draw(st.sampled_from(OPENERS))
    space = st.sampled_from(["", " ", "\t", "\n", "\u3000", *ZERO_WIDTH])
    slash = draw(st.sampled_from(["", *SLASHES]))
    suffix = draw(st.sampled_from(["", "_1", "_42", "-x", " id='a'", "_0123456789abcdef",
                                   ">", "＞", "﹥"]))
    return (bracket + draw(space) + slash + draw(space) + draw(_cased(draw(st.sampled_from(names))))
            + suffix)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(tag_shapes(EXTRACTION_TAGS), st.text(max_size=12)), max_size=8))
def test_no_tag_shaped_string_survives_extraction(parts) -> None:
    text = "".join(parts)
    out = neutralise(text, EXTRACTION_TAGS)
    assert tag_shaped(out, EXTRACTION_TAGS) == []
    assert neutralise(out, EXTRACTION_TAGS) == out  # idempotent
    # Only brackets changed: dropping the escapes gives the text back, bracket for bracket.
    assert out.replace("&lt;", "") == "".join(
        c for i, c in enumerate(text) if i not in set(tag_shaped(text, EXTRACTION_TAGS)))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.one_of(tag_shapes(ANSWER_TAGS), st.text(max_size=12)), max_size=8))
def test_no_tag_shaped_string_survives_the_answer_prompt(parts) -> None:
    out = synthesis.user_message("q?", "".join(parts), boundary="0123456789abcdef")
    context = out.split("<pack_context_0123456789abcdef>\n", 1)[1].rsplit(
        "\n</pack_context_0123456789abcdef>", 1)[0]
    assert tag_shaped(context, ANSWER_TAGS) == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters=OPENERS)))
def test_text_without_a_bracket_is_unchanged(text) -> None:
    assert neutralise(text, EXTRACTION_TAGS + ANSWER_TAGS) == text
