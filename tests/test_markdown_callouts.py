"""Callouts and tabs of MkDocs Material, Docusaurus and VitePress Markdown are read as plain
Markdown: their markers ('!!! note "Before you start"', '=== "pip"', ':::tip') were words
of the answer, and what was indented under them was no paragraph, list or code block."""

from __future__ import annotations

from packs.retrieval.units import candidates
from tasks.fetch.markdown_blocks import plain_callouts
from tasks.fetch.markdown_source import markdown_document
from tasks.fetch.parse import parse_document
from tasks.sections import split_markdown

PAGE = '''# Installation

!!! note "Before you start"
    You need Python 3.11 or newer.

    - a virtual environment
    - pip 23 or newer

## With pip

=== "Latest"

    ``` sh
    pip install mkdocs-material
    ```

=== "9.x"

    ``` sh
    pip install mkdocs-material=="9.*"
    ```

:::warning Docusaurus style
Never run the build as root.
:::

```text
!!! note "inside a fence"
    stays as written
:::tip
:::
```
'''


def test_callouts_and_tabs_become_plain_markdown() -> None:
    out = plain_callouts(PAGE)
    assert '**Note: Before you start**\n\nYou need Python 3.11 or newer.' in out
    assert "\n- a virtual environment\n- pip 23 or newer" in out  # a list again
    assert '**Latest**\n\n``` sh\npip install mkdocs-material\n```' in out
    assert '**Warning: Docusaurus style**\n\nNever run the build as root.' in out
    assert '!!! note "inside a fence"\n    stays as written\n:::tip\n:::' in out
    assert "=== " not in out and "!!! note \"Before" not in out


def test_a_tab_leads_into_its_code_and_a_note_reads_as_sentences() -> None:
    title, markdown, _ = markdown_document(PAGE, "http://127.0.0.1/docs/install.md")
    units = [u for c in split_markdown(markdown, title) for u in candidates(c.content)]
    shown = [u.display for u in units]
    assert "**Latest**\npip install mkdocs-material" in shown  # a lead-in with its code
    assert "You need Python 3.11 or newer." in shown
    prose = [u.display for u in units if u.kind != "code"]
    assert not any("!!!" in s or "===" in s or ":::" in s for s in prose)


def test_no_closing_line_and_empty_titles() -> None:
    assert plain_callouts(":::tip\nNo end here.") == ":::tip\nNo end here."
    assert plain_callouts('!!! note ""\n    Untitled.') == "Untitled."
    assert plain_callouts("??? question\n    Why?\n\nAfter.") == (
        "**Question**\n\nWhy?\n\nAfter.")


def test_an_mdx_page_is_markdown_without_its_imports() -> None:
    page = ("import Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n\n"
            "# Install\n\nexport const version = '3.1';\n\nRun the installer for your "
            "platform.\n\n```js\nimport x from 'y';\n```\n")
    parsed = parse_document(page.encode(), "text/plain; charset=utf-8",
                            "http://127.0.0.1/docs/install.mdx", "/docs/install.mdx")
    assert parsed.status == "ok" and parsed.title == "Install"
    assert "@theme" not in parsed.text and "export const" not in parsed.text
    assert "```js\nimport x from 'y';\n```" in parsed.text  # code stays as written
