"""Formulas in HTML pages come out as text: trafilatura keeps no MathML, so "A square matrix A
is Hermitian if and only if ..." lost its "A" and every formula of the page."""

from __future__ import annotations

import lxml.html

from tasks.fetch.html_math import math_as_text
from tasks.fetch.parse import html_to_markdown

MATHML = "http://www.w3.org/1998/Math/MathML"
FILLER = ("<p>The rest of this page explains the idea at some length, so that it reads as an "
          "article and not as a list of links, with the reasons for each step.</p>")


def _wiki(mathml: str, tex: str) -> str:
    """A formula as Wikipedia serves it: hidden MathML (with its TeX) beside an image."""
    return (f'<span class="mwe-math-element"><span class="mwe-math-mathml-inline" '
            f'style="display: none;"><math xmlns="{MATHML}" alttext="{{\\displaystyle {tex}}}">'
            f'<semantics>{mathml}<annotation encoding="application/x-tex">{{\\displaystyle {tex}}}'
            f'</annotation></semantics></math></span><img src="x.svg" alt="{{\\displaystyle {tex}}}"'
            ' class="mwe-math-fallback-image-inline"></span>')


def _text(html: str) -> str:
    tree = lxml.html.document_fromstring(f"<html><body><p>{html}</p></body></html>")
    math_as_text(tree)
    return lxml.html.tostring(tree.find("body/p"), encoding="unicode")


def test_one_symbol_is_plain_text_and_a_formula_a_code_span() -> None:
    assert _text("A matrix " + _wiki("<mi>A</mi>", "A") + " is square.") == (
        "<p>A matrix A is square.</p>")
    power = "<msup><mi>x</mi><mn>2</mn></msup><mo>+</mo><mn>1</mn>"
    assert _text("Take " + _wiki(power, "x^2+1") + ", then") == (
        "<p>Take <code>x^2 + 1</code>, then</p>")


def test_mathml_is_read_linearly() -> None:
    cases = {
        "<msub><mi>a</mi><mrow><mi>i</mi><mi>j</mi></mrow></msub>": "a_(ij)",
        "<mfrac><mn>1</mn><mi>n</mi></mfrac>": "1/n",
        "<msqrt><mi>x</mi><mo>+</mo><mn>1</mn></msqrt>": "√(x + 1)",
        "<mover><mi>a</mi><mo>¯</mo></mover>": "a¯",
        "<mi>A</mi><mtext> Hermitian</mtext><mo>⟺</mo><mi>A</mi><mo>=</mo>"
        "<msup><mi>A</mi><mi>H</mi></msup>": "A Hermitian ⟺ A = A^H",
    }
    for mathml, shown in cases.items():
        html = f'<math xmlns="{MATHML}">{mathml}</math>'
        assert _text(html) == f"<p><code>{shown}</code></p>", mathml


def test_katex_and_mathjax_boxes_leave_no_drawn_glyphs() -> None:
    katex = (f'<span class="katex"><span class="katex-mathml"><math xmlns="{MATHML}"><semantics>'
             '<mrow><msup><mi>e</mi><mi>x</mi></msup></mrow><annotation encoding='
             '"application/x-tex">e^x</annotation></semantics></math></span>'
             '<span class="katex-html" aria-hidden="true"><span class="mord">e</span>'
             '<span class="msupsub">x</span></span></span>')
    assert _text("Growth is " + katex + ".") == "<p>Growth is <code>e^x</code>.</p>"
    mathjax = (f'<mjx-container class="MathJax"><mjx-math aria-hidden="true"><mjx-c></mjx-c>'
               f'</mjx-math><mjx-assistive-mml><math xmlns="{MATHML}"><mi>a</mi><mo>≠</mo>'
               '<mn>0</mn></math></mjx-assistive-mml></mjx-container>')
    assert _text("When " + mathjax + ", there are two") == (
        "<p>When <code>a ≠ 0</code>, there are two</p>")
    assert _text(f'<math xmlns="{MATHML}" alttext="\\pi r^2"></math>') == (
        "<p><code>\\pi r^2</code></p>")  # no MathML inside: its TeX


def test_a_page_with_formulas_keeps_them_in_its_markdown() -> None:
    page = ("<html><head><title>Hermitian matrix</title></head><body><article>"
            "<h1>Hermitian matrix</h1><p>A square matrix " + _wiki("<mi>A</mi>", "A")
            + " is Hermitian when it equals its conjugate transpose, that is, when "
            + _wiki("<mi>A</mi><mo>=</mo><msup><mi>A</mi><mi>H</mi></msup>", "A=A^{H}")
            + " holds for it.</p>" + FILLER * 3 + "</article></body></html>")
    _, markdown, _ = html_to_markdown(page, "http://127.0.0.1/wiki/Hermitian_matrix")
    assert "A square matrix A is Hermitian" in markdown
    assert "`A = A^H` holds for it" in markdown
    assert "displaystyle" not in markdown
