"""An MCP server over one or more packs: `kpack mcp PACK_DIR [PACK_DIR ...]`.

Tools (official `mcp` SDK, MCPServer):
  list_packs()                          the packs served: name, description, build, counts
  pack_info(name)                       one pack's manifest summary
  search(pack, question, max_tokens?)   the token-budgeted context with [n] citations, as
                                        Markdown for the agent; the cited sources as
                                        structured content
  ask(pack, question)                   the answer dict of `KnowledgePack.ask`

Packs are opened once when the server starts and shared by every session; each pack's
question embedder is loaded up front, so a missing model fails the start, not the first
call. Inputs are checked before any work: the question length (`MAX_QUESTION_CHARS`; too
long is refused, not truncated, so an agent knows), known pack names only, and `max_tokens`
in MIN_CONTEXT_TOKENS..MAX_CONTEXT_TOKENS. Refusals come back as tool errors
(`isError: true`) with a message the calling model can act on.

`mcp` is imported inside the functions here and this module is not imported by
`packs/__init__`, so `import packs` stays free of it.
"""

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from packs.format import PackFormatError
from packs.options import MAX_QUESTION_CHARS, OptionsError
from packs.pack import KnowledgePack
from packs.pipeline import QuestionError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

SERVER_NAME = "knowledge-packs"
MIN_CONTEXT_TOKENS = 200
MAX_CONTEXT_TOKENS = 32_000
MAX_PACK_NAME_CHARS = 128
DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"

PackName = Annotated[str, Field(min_length=1, max_length=MAX_PACK_NAME_CHARS,
                                description="Pack name, as list_packs gives it.")]
Question = Annotated[str, Field(min_length=1, max_length=MAX_QUESTION_CHARS,
                                description="The question, in natural language.")]
MaxTokens = Annotated[int | None, Field(
    ge=MIN_CONTEXT_TOKENS, le=MAX_CONTEXT_TOKENS,
    description="Token budget of the returned context (default: the pack's 6,000).")]


def open_packs(paths: Sequence[str | os.PathLike[str]], *,
               embedding_model: str | None = None, warm: bool = True) -> dict[str, KnowledgePack]:
    """Open every pack folder, keyed by manifest name; `warm` loads the embedders now.

    Raises PackFormatError for an unreadable pack or two packs with the same name
    (closing what it opened), EmbeddingModelError for a missing or mismatched model.
    """
    if not paths:
        raise PackFormatError("no pack given: pass at least one pack folder")
    opened: dict[str, KnowledgePack] = {}
    try:
        for path in paths:
            pack = KnowledgePack.open(path, embedding_model=embedding_model)
            name = pack.manifest.name
            if name in opened:
                pack.close()
                raise PackFormatError(
                    f"two packs are named {name!r}: {opened[name].path} and {path}; serve "
                    "one of them, or rebuild one under another name")
            opened[name] = pack
            if warm:
                pack.embedder  # noqa: B018 (loads the model; a failure stops the start)
    except BaseException:
        close_packs(opened)
        raise
    return opened


def close_packs(packs: Mapping[str, KnowledgePack]) -> None:
    for pack in packs.values():
        pack.close()


def _summary(pack: KnowledgePack) -> dict[str, Any]:
    m = pack.manifest
    return {"name": m.name, "description": m.description, "build_id": m.build_id,
            "built_at": m.built_at, "counts": m.counts.model_dump(),
            "embedding_model": m.embedding.model}


def _info(pack: KnowledgePack) -> dict[str, Any]:
    m = pack.manifest
    ok = sum(s.status in ("ok", "not_modified") for s in m.sources)
    return {
        **_summary(pack),
        "format_version": m.format_version,
        "query_module_version": m.query_module_version,
        "partial": m.partial,
        "partial_reasons": m.partial_reasons,
        "embedding": m.embedding.model_dump(),
        "extractor": m.extractor.model_dump(),
        "sources": {"total": len(m.sources), "fetched": ok,
                    "failed": [{"url": s.url, "status": s.status, "error": s.error}
                               for s in m.sources if s.status not in ("ok", "not_modified")][:50]},
    }


def search_text(pack_name: str, result: Any) -> str:
    """The agent-facing search output: a one-line header, then the cited context."""
    if result.gated or not result.context:
        best = "none" if result.best_similarity is None else f"{result.best_similarity:.2f}"
        return (f"No section of pack {pack_name!r} is relevant enough to this question "
                f"(best similarity {best}, threshold {result.gate_threshold:.2f}). Answer "
                "without this pack, or rephrase the question with the pack's terms.")
    note = "; truncated to fit the budget" if result.truncated else ""
    header = (f"Context from pack {pack_name!r} (build {result.build_id}, "
              f"~{result.context_tokens} tokens{note}). Cite sources as [n] with their URL.")
    return f"{header}\n\n{result.context}"


def _sources(result: Any) -> list[dict[str, Any]]:
    return [{"n": s.citation, "url": s.url, "title": s.title, "heading_path": s.heading_path,
             "score": round(float(s.score), 6)} for s in result.cited()]


def build_server(packs: Mapping[str, KnowledgePack], *, log_level: str = "WARNING"
                 ) -> "MCPServer":
    """An MCPServer whose four tools query `packs` (name → open pack). `log_level` is the
    SDK's logging on stderr (INFO also logs every refused tool call)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent

    def known(name: str) -> KnowledgePack:
        pack = packs.get(name)
        if pack is None:
            names = ", ".join(sorted(packs)) or "none"
            raise ToolError(f"unknown pack {name[:MAX_PACK_NAME_CHARS]!r}; this server "
                            f"serves: {names} (see list_packs)")
        return pack

    def checked(question: str) -> str:
        if not question.strip():
            raise ToolError("the question is empty")
        return question

    names = ", ".join(sorted(packs))
    server: MCPServer = MCPServer(
        SERVER_NAME,
        instructions=(f"Knowledge packs served here: {names}. Call search(pack, question) "
                      "for cited documentation context to answer from, or ask(pack, "
                      "question) for a finished answer with sources."),
        log_level=log_level,  # type: ignore[arg-type]
    )

    @server.tool(description="List the knowledge packs this server serves.")
    def list_packs() -> list[dict[str, Any]]:
        return [_summary(p) for _, p in sorted(packs.items())]

    @server.tool(description="Describe one pack: build, counts, embedding model, sources.")
    def pack_info(name: PackName) -> dict[str, Any]:
        return _info(known(name))

    @server.tool(
        description=("Search a pack and return the most relevant documentation sections as "
                     "Markdown context with numbered citations [n] and URLs, fitted to a "
                     "token budget. Use it to ground an answer; cite [n]."),
        structured_output=False,
    )
    def search(pack: PackName, question: Question, max_tokens: MaxTokens = None
               ) -> CallToolResult:
        kp = known(pack)
        # Few-shot examples only feed answer synthesis; the context never shows them.
        overrides: dict[str, Any] = {"fewshot": False}
        if max_tokens is not None:
            # The whole budget goes to the context: no answer is written here.
            overrides.update(token_budget=max_tokens, answer_reserve=0)
        try:
            result = kp.search(checked(question), **overrides)
        except (QuestionError, OptionsError) as exc:
            raise ToolError(str(exc)) from exc
        text = search_text(pack, result)
        structured = {"pack": pack, "build_id": result.build_id,
                      "context_tokens": result.context_tokens, "truncated": result.truncated,
                      "gated": result.gated, "sources": [] if result.gated else _sources(result)}
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content=structured)

    @server.tool(description=("Answer a question from a pack. Returns answer (citing [n]), "
                              "sources, entities, facts, cypher_query, query_type and "
                              "token_usage."))
    def ask(pack: PackName, question: Question) -> dict[str, Any]:
        from packs.claude import SynthesisError

        kp = known(pack)
        try:
            answer = kp.ask(checked(question))
        except (QuestionError, OptionsError, SynthesisError) as exc:
            raise ToolError(str(exc)) from exc
        assert isinstance(answer, dict)  # stream=False
        return answer

    return server


def serve(paths: Sequence[str | os.PathLike[str]], *, http: bool = False,
          port: int = DEFAULT_PORT, embedding_model: str | None = None) -> None:
    """Open the packs and run the server until the client (stdio) or Ctrl-C (HTTP) ends it.

    HTTP listens on 127.0.0.1 only (streamable HTTP at /mcp): the server has no auth.
    MissingExtraError (one line: what to install) when the MCP SDK is not installed.
    """
    from packs.extras import MCP_INSTALL, MissingExtraError, missing

    if missing(("mcp",)):
        raise MissingExtraError(f"kpack mcp needs the MCP SDK, which this install lacks: "
                                f"{MCP_INSTALL}")
    packs = open_packs(paths, embedding_model=embedding_model)
    try:
        server = build_server(packs, log_level="INFO" if http else "WARNING")
        if http:
            print(f"serving {', '.join(sorted(packs))} at http://{LOOPBACK}:{port}/mcp",
                  file=sys.stderr, flush=True)
            server.run("streamable-http", host=LOOPBACK, port=port)
        else:
            server.run("stdio")
    finally:
        close_packs(packs)
