"""Formulas in an HTML page as text, before trafilatura reads the page (tasks/fetch/parse.py).

trafilatura keeps no MathML, and a formula's rendering (Wikipedia's fallback image, KaTeX's
and MathJax's spans) is no text either: "A square matrix A is Hermitian if and only if ..."
came out as "A square matrix  is Hermitian if and only if", a sentence that quotes nothing.
Each formula becomes the text its MathML says, read linearly:

    <msup><mi>x</mi><mn>2</mn></msup>            x^2
    <msub><mi>a</mi><mrow>ij</mrow></msub>       a_(ij)
    <mfrac><mn>1</mn><mi>n</mi></mfrac>          1/n
    <msqrt><mi>x</mi></msqrt>                    √(x)

A formula of one or two letters or digits ("A", "n", "2π") is plain text in its sentence; a
longer one is a code span, so that Markdown reads none of its `*` or `_` as emphasis. A
formula's box (Wikipedia's `mwe-math-element`, KaTeX's `katex`, MathJax 3's `mjx-container`)
goes with it: the box also holds the formula drawn once more, as spans or an image, which
would otherwise leave stray glyphs. A <math> with no MathML inside (only `alttext`) gives its
TeX.
"""

from __future__ import annotations

import re

import lxml.html
from lxml import etree

_BOXES = ("//span[contains(concat(' ', normalize-space(@class), ' '), ' mwe-math-element ')]"
          " | //span[contains(concat(' ', normalize-space(@class), ' '), ' katex ')]"
          " | //*[local-name()='mjx-container']")
_MATH = ".//*[local-name()='math']"
_DISPLAYSTYLE = re.compile(r"^\{\\displaystyle\s*(.*)\}$", re.S)
_SKIPPED = frozenset({"annotation", "annotation-xml", "mphantom", "none", "mprescripts"})
_ACCENTS = frozenset("¯‾^ˆ˙¨~˜→⃗")
_SPACED = frozenset("=≠<>≤≥≈≡⟺⇔→←⇒∈∉⊂⊆∪∩+−-±×·")


def math_as_text(tree: lxml.html.HtmlElement) -> None:
    """Each formula of `tree` (a box holding a <math>, or a bare <math>) as text, in place."""
    for box in list(tree.xpath(_BOXES)):
        found = box.xpath(_MATH)
        if box.getparent() is not None and found:
            _replace(box, _formula(found[0]))
    for math in list(tree.xpath("//*[local-name()='math']")):
        if math.getparent() is not None:
            _replace(math, _formula(math))


def _formula(math: etree._Element) -> str:
    text = " ".join(_linear(math).split())
    if text:
        return text
    tex = math.get("alttext") or ""
    m = _DISPLAYSTYLE.match(tex.strip())
    return (m.group(1) if m else tex).strip()


def _replace(element: etree._Element, text: str) -> None:
    """`element` replaced by `text`: plain when it is one symbol, else a code span."""
    tail = re.sub(r"^\s+", " ", element.tail) if element.tail else element.tail
    parent = element.getparent()
    if len(text) <= 2 and text.isalnum():
        previous = element.getprevious()
        joined = text + (tail or "")
        if previous is not None:
            previous.tail = (previous.tail or "") + joined
        else:
            parent.text = (parent.text or "") + joined
        parent.remove(element)
        return
    code = lxml.html.Element("code")
    code.text = text
    code.tail = tail
    parent.replace(element, code)


def _linear(el: etree._Element) -> str:
    """The formula under `el` as one line of text (the module docstring)."""
    tag = etree.QName(el).localname if isinstance(el.tag, str) else ""
    if tag in _SKIPPED:
        return ""
    kids = [k for k in el if isinstance(k.tag, str)]
    parts = [_linear(k) for k in kids]
    if tag in ("mi", "mn", "ms"):
        return " ".join(el.text_content().split())
    if tag in ("mtext", "mspace"):  # words between symbols keep their spaces
        text = " ".join(el.text_content().split())
        return f" {text} " if text else " "
    if tag == "mo":
        op = el.text_content().strip()
        return f" {op} " if op in _SPACED else op
    if tag in ("msup", "msub") and len(parts) == 2:
        return f"{parts[0]}{'^' if tag == 'msup' else '_'}{_group(parts[1])}"
    if tag in ("msubsup", "munderover") and len(parts) == 3:
        return f"{parts[0]}_{_group(parts[1])}^{_group(parts[2])}"
    if tag == "mover" and len(parts) == 2 and parts[1].strip() in _ACCENTS:
        return f"{_group(parts[0])}{parts[1].strip()}"  # a bar, dot or arrow over it
    if tag in ("munder", "mover") and len(parts) == 2:
        return f"{parts[0]}{'_' if tag == 'munder' else '^'}{_group(parts[1])}"
    if tag == "mfrac" and len(parts) == 2:
        return f"{_group(parts[0])}/{_group(parts[1])}"
    if tag == "msqrt":
        return f"√({''.join(parts).strip()})"
    if tag == "mroot" and len(parts) == 2:
        return f"root({parts[1].strip()})({parts[0].strip()})"
    if tag == "mfenced":
        return (el.get("open", "(") + el.get("separators", ",")[:1].join(parts)
                + el.get("close", ")"))
    if tag == "mtr":
        return ", ".join(p.strip() for p in parts)
    if tag == "mtable":
        return "[" + "; ".join(p.strip() for p in parts) + "]"
    return "".join(parts) if kids else " ".join((el.text or "").split())


def _group(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 1 else f"({text})"
