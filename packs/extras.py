"""Install profiles, and the one-line message when a feature needs more than this install.

`pip install knowledge-packs` is the query runtime (`packs/`: kuzu, numpy, onnxruntime,
tokenizers, pydantic, anthropic, typer). The extras add the rest:

    [build]  kpack build / serve: Prefect, torch, sentence-transformers, trafilatura, ...
    [mcp]    kpack mcp: the Model Context Protocol SDK
    [explore] kpack explore: Starlette, Jinja2, uvicorn, markdown-it-py and nh3
    [offline] the packaged all-MiniLM-L6-v2 (demos, tests, CI)

The check uses `importlib.util.find_spec`, so it imports none of those packages.
"""

from __future__ import annotations

import importlib.util


def _install(extra: str) -> str:
    """The pip command for one extra. The package is not on PyPI yet, so the command says
    what to put in the name's place (README, "Install")."""
    return (f"pip install 'knowledge-packs[{extra}]' (not on PyPI yet: write the checkout's "
            f"path or the wheel from `make dist` in place of knowledge-packs)")


BUILD_INSTALL = _install("build")
MCP_INSTALL = _install("mcp")
EXPLORE_INSTALL = _install("explore")
OFFLINE_INSTALL = _install("offline")
# What `kpack explore` imports (import names) beyond the query runtime.
EXPLORE_MODULES = ("starlette", "jinja2", "uvicorn", "markdown_it", "nh3")
# One module per [build] requirement that `kpack build` imports (import names, not
# distribution names): enough to tell a runtime-only install from a build install.
BUILD_MODULES = ("prefect", "torch", "sentence_transformers", "trafilatura", "lxml_html_clean",
                 "polars")


class MissingExtraError(RuntimeError):
    """A command needs an install profile (extra) that this install lacks; the message
    is one line naming the pip command."""


def missing(modules: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that are not installed (none is imported)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def build_missing_message(command: str = "kpack build") -> str | None:
    """One line saying what to install when the build dependencies are absent, else None."""
    absent = missing(BUILD_MODULES)
    if not absent:
        return None
    return (f"{command} needs the build dependencies ({', '.join(absent)} not installed; "
            f"this is the query runtime): {BUILD_INSTALL}")
