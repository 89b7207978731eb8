"""A reStructuredText page (a Sphinx project's sources, a README.rst) is read for its
section titles, literal and code blocks, admonitions and inline markup, not as one block of
plain text."""

from __future__ import annotations

from tasks.fetch.parse import classify, parse_document
from tasks.fetch.rst_source import rst_document, rst_to_markdown
from tasks.sections import split_markdown

# A hand-written page in the shapes Sphinx sources use.
PAGE = """=================
 Widget Handbook
=================

Widgets are the small parts a screen is built from. See `the toolkit
<https://example.org/toolkit>`_ and :doc:`Installing <install>` first.

.. toctree::
   :maxdepth: 2

   install

Installing
==========

Install the package with pip::

    pip install widgets

.. note::
   Widgets need Python 3.9 or newer.

Configuration
=============

The :envvar:`WIDGET_HOME` variable and the :func:`widgets.configure` function set where
widgets live. Use ``widgets.load()`` to read them back.

.. code-block:: python
   :linenos:

   import widgets
   widgets.configure(home="/srv/widgets")

Options
-------

- ``--verbose``: print each widget as it loads.

   A quoted block, which is no code.

.. versionadded:: 2.1
   The ``--dry-run`` option.

.. _hidden-target:

.. A comment
   over two lines.
"""


def test_sections_code_and_inline_markup_come_through():
    title, markdown, links = rst_document(PAGE, "https://example.org/docs/index.rst")
    assert title == "Widget Handbook"
    heads = [line for line in markdown.splitlines() if line.startswith("#")]
    assert heads == ["# Widget Handbook", "## Installing", "## Configuration", "### Options"]
    assert "Install the package with pip:\n\n```\npip install widgets\n```" in markdown
    assert '```python\nimport widgets\nwidgets.configure(home="/srv/widgets")\n```' in markdown
    assert "**Note:** Widgets need Python 3.9 or newer." in markdown
    assert "**New in version 2.1:** The `--dry-run` option." in markdown
    assert "The `WIDGET_HOME` variable and the `widgets.configure` function" in markdown
    assert "`widgets.load()`" in markdown and "- `--verbose`: print each widget" in markdown
    # an indented block that is no literal block is text, not a Markdown code block
    assert "\nA quoted block, which is no code." in markdown
    for gone in ("toctree", ":maxdepth:", ":linenos:", "hidden-target", "A comment", "====="):
        assert gone not in markdown, gone
    # a link whose text wraps onto the next line is still one link
    assert "See [the toolkit](https://example.org/toolkit) and Installing first." in markdown
    assert links == ["https://example.org/toolkit"]
    paths = [c.heading_path for c in split_markdown(markdown, title)]
    assert "Widget Handbook > Configuration > Options" in paths


def test_an_rst_page_is_read_as_rst_however_it_is_served():
    body = PAGE.encode()
    assert classify("text/plain; charset=utf-8", "/o/r/main/docs/index.rst", body)[0] == "rst"
    assert classify(None, "docs/index.rst", body)[0] == "rst"
    assert classify("text/x-rst", "/docs/index", body)[0] == "rst"
    assert classify("text/plain", "/notes.txt", body)[0] == "text"
    parsed = parse_document(body, "text/plain", "https://raw.example.org/docs/index.rst",
                            "/docs/index.rst")
    assert parsed.status == "ok" and parsed.title == "Widget Handbook"
    assert parsed.content_type == "text/x-rst"  # what it was read as
    assert "## Installing" in parsed.text


def test_the_fields_that_open_a_page_give_its_title():
    page = (":title: Widget Configuration\n:category: Widgets\n\nSome values are optional.\n\n"
            "Values\n======\n\n* ``max_widgets`` - The most widgets a screen holds.\n  "
            "Zero means no limit.\n")
    title, markdown, _ = rst_document(page, "https://example.org/docs/config.rst")
    assert title == "Widget Configuration"
    assert ":category:" not in markdown and markdown.startswith("Some values are optional.")
    assert "\n## Values\n" in markdown  # a section of the titled page
    assert "* `max_widgets` - The most widgets a screen holds.\nZero means no limit." in markdown


def test_a_title_that_opens_with_a_role_is_a_title_not_a_field():
    page = ":mod:`email` Package Architecture\n=================================\n\nText.\n"
    title, markdown, _ = rst_document(page, "https://example.org/email/architecture.rst")
    assert title == "`email` Package Architecture"


def test_odd_rst_never_raises():
    for text in ("", "::", "====\n", "Title\n===", ".. code-block::\n", "a ::\n\n",
                 ".. note::", "``unclosed", ":func:`x", "`a <b>`_ `c`_ `d`__"):
        rst_to_markdown(text)
