"""An MCP server over one or more packs: `kpack mcp PACK_DIR [PACK_DIR ...]`.

Tools (official `mcp` SDK, MCPServer):
  list_packs()                          the packs served: name, description, build, counts
  pack_info(name)                       one pack's manifest summary
  search(question, pack?, max_tokens?)  the token-budgeted context with [n] citations, as
                                        Markdown for the agent; the cited sources and a
                                        citation per excerpt (packs/citations.py) as
                                        structured content
  search_packs(question, packs?, per_pack?, max_results?, max_tokens?)
                                        the same over several packs at once (packs.PackSet:
                                        per_pack keeps each pack's top N, max_results caps
                                        the total); each excerpt names its pack
  ask(question, pack?)                  the answer dict of `KnowledgePack.ask`, with its
                                        verified citations
  topics(pack?, limit?)                 the pack's map of topics (packs/topics.py): title,
                                        top entities and sections, a digest whose lines
                                        cite the sections they quote

`pack` may be left out when the server serves one pack; with several, search and ask say
which packs there are.

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
from packs.retrieval import gate

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

SERVER_NAME = "knowledge-packs"
MIN_CONTEXT_TOKENS = 200
MAX_CONTEXT_TOKENS = 32_000
MAX_PACK_NAME_CHARS = 128
DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"

MAX_RESULTS = 50
PackName = Annotated[str, Field(min_length=1, max_length=MAX_PACK_NAME_CHARS,
                                description="Pack name, as list_packs gives it.")]
OptionalPackName = Annotated[str | None, Field(
    min_length=1, max_length=MAX_PACK_NAME_CHARS,
    description="Pack name, as list_packs gives it; may be left out when one pack is served.")]
PackNames = Annotated[list[PackName] | None, Field(
    min_length=1, max_length=64,
    description="Packs to search (default: every pack served).")]
PerPack = Annotated[int | None, Field(
    ge=1, le=MAX_RESULTS, description="Keep the top N sections of each pack (diverse results).")]
MaxResults = Annotated[int | None, Field(
    ge=1, le=MAX_RESULTS, description="Keep the top N sections over all packs (default 10).")]
Question = Annotated[str, Field(min_length=1, max_length=MAX_QUESTION_CHARS,
                                description="The question, in natural language.")]
MaxTokens = Annotated[int | None, Field(
    ge=MIN_CONTEXT_TOKENS, le=MAX_CONTEXT_TOKENS,
    description="Token budget of the returned context (default: the pack's 6,000).")]


def open_packs(paths: Sequence[str | os.PathLike[str]], *,
               embedding_model: str | None = None, warm: bool = True, verify: bool = True,
               trust=None) -> dict[str, KnowledgePack]:
    """Open every pack folder, keyed by manifest name; `warm` loads the embedders now;
    `verify` and `trust` go to KnowledgePack.open.

    Raises PackFormatError for an unreadable pack or two packs with the same name
    (closing what it opened), EmbeddingModelError for a missing or mismatched model.
    """
    if not paths:
        raise PackFormatError("no pack given: pass at least one pack folder")
    opened: dict[str, KnowledgePack] = {}
    try:
        for path in paths:
            pack = KnowledgePack.open(path, embedding_model=embedding_model, verify=verify,
                                      trust=trust)
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


def search_text(pack_name: str, result: Any, several: Sequence[str] = ()) -> str:
    """The agent-facing search output: a one-line header, then the cited context.
    `several` names the packs of a search_packs call (then `pack_name` is unused)."""
    what = (f"packs {', '.join(repr(n) for n in several)}" if several
            else f"pack {pack_name!r}")
    if result.gated or not result.context:
        why = gate.reason(result) if result.gated else "no context was assembled"
        return (f"No section of {what} is relevant enough to this question ({why}). "
                "Answer without this pack, or rephrase the question with the pack's terms.")
    note = "; truncated to fit the budget" if result.truncated else ""
    header = (f"Context from {what} (build {result.build_id}, "
              f"~{result.context_tokens} tokens{note}). Cite sources as [n] with their URL.")
    return f"{header}\n\n{result.context}"


def _sources(result: Any) -> list[dict[str, Any]]:
    out = []
    for s in result.cited():
        src = {"n": s.citation, "url": s.url, "title": s.title, "heading_path": s.heading_path,
               "score": round(float(s.score), 4),  # 0-1 (packs/retrieval/scores.py)
               "fusion_score": round(float(s.fusion_score if s.fusion_score is not None
                                           else s.score), 6)}
        if s.pack is not None:
            src["pack"] = s.pack
        out.append(src)
    return out


def _structured(label: str, result: Any, pack_name: str | None) -> dict[str, Any]:
    """The structured content of a search: sources and a citation per [n] excerpt."""
    from packs.citations import excerpt_citations

    cited = [] if result.gated else result.cited()
    return {"pack": label, "build_id": result.build_id,
            "context_tokens": result.context_tokens, "truncated": result.truncated,
            "gated": result.gated, "sources": [] if result.gated else _sources(result),
            "citations": excerpt_citations(cited, pack_name)}


def _tool_error(message: str) -> Exception:
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(message)


class _Served:
    """The packs a server serves (name → open pack), and the checks its tools share."""

    def __init__(self, packs: Mapping[str, KnowledgePack]) -> None:
        self.packs = packs

    def known(self, name: str) -> KnowledgePack:
        pack = self.packs.get(name)
        if pack is None:
            names = ", ".join(sorted(self.packs)) or "none"
            raise _tool_error(f"unknown pack {name[:MAX_PACK_NAME_CHARS]!r}; this server "
                              f"serves: {names} (see list_packs)")
        return pack

    def chosen(self, name: str | None) -> tuple[str, KnowledgePack]:
        if name is not None:
            return name, self.known(name)
        if len(self.packs) == 1:
            return next(iter(self.packs.items()))
        raise _tool_error(f"this server serves {len(self.packs)} packs "
                          f"({', '.join(sorted(self.packs))}): pass `pack`, or call "
                          "search_packs to search them together")

    @staticmethod
    def checked(question: str) -> str:
        if not question.strip():
            raise _tool_error("the question is empty")
        return question

    @staticmethod
    def budget(max_tokens: int | None) -> dict[str, Any]:
        # Few-shot examples only feed answer synthesis; the context never shows them.
        overrides: dict[str, Any] = {"fewshot": False}
        if max_tokens is not None:
            # The whole budget goes to the context: no answer is written here.
            overrides.update(token_budget=max_tokens, answer_reserve=0)
        return overrides


def build_server(packs: Mapping[str, KnowledgePack], *, log_level: str = "WARNING"
                 ) -> "MCPServer":
    """An MCPServer whose six tools query `packs` (name → open pack). `log_level` is the
    SDK's logging on stderr (INFO also logs every refused tool call)."""
    from mcp.server.mcpserver import MCPServer

    names = ", ".join(sorted(packs))
    one = len(packs) == 1
    server: MCPServer = MCPServer(
        SERVER_NAME,
        instructions=(f"Knowledge packs served here: {names}. Call search(question"
                      f"{'' if one else ', pack'}) for cited documentation context to answer "
                      f"from, or ask(question{'' if one else ', pack'}) for a finished answer "
                      "with sources and verified citations"
                      + ("." if one else "; search_packs(question) searches every pack.")),
        log_level=log_level,  # type: ignore[arg-type]
    )
    served = _Served(packs)
    _add_info_tools(server, served)
    _add_search(server, served)
    _add_search_packs(server, served)
    _add_ask(server, served)
    _add_topics(server, served)
    return server


def _add_info_tools(server: "MCPServer", served: _Served) -> None:
    @server.tool(description="List the knowledge packs this server serves.")
    def list_packs() -> list[dict[str, Any]]:
        return [_summary(p) for _, p in sorted(served.packs.items())]

    @server.tool(description="Describe one pack: build, counts, embedding model, sources.")
    def pack_info(name: PackName) -> dict[str, Any]:
        return _info(served.known(name))


def _add_search(server: "MCPServer", served: _Served) -> None:
    from mcp.types import CallToolResult, TextContent

    @server.tool(
        description=("Search a pack and return the most relevant documentation sections as "
                     "Markdown context with numbered citations [n] and URLs, fitted to a "
                     "token budget. Use it to ground an answer; cite [n]. `pack` may be left "
                     "out when the server serves one pack."),
        structured_output=False,
    )
    def search(question: Question, pack: OptionalPackName = None,
               max_tokens: MaxTokens = None) -> CallToolResult:
        label, kp = served.chosen(pack)
        try:
            result = kp.search(served.checked(question), **served.budget(max_tokens))
        except (QuestionError, OptionsError) as exc:
            raise _tool_error(str(exc)) from exc
        return CallToolResult(content=[TextContent(type="text", text=search_text(label, result))],
                              structured_content=_structured(label, result, label))


def _add_search_packs(server: "MCPServer", served: _Served) -> None:
    from mcp.types import CallToolResult, TextContent

    @server.tool(
        description=("Search several packs at once (default: all) and return one Markdown "
                     "context with numbered citations [n], each excerpt naming its pack. "
                     "per_pack keeps each pack's top N sections; max_results caps the total."),
        structured_output=False,
    )
    def search_packs(question: Question, packs: PackNames = None, per_pack: PerPack = None,
                     max_results: MaxResults = None, max_tokens: MaxTokens = None
                     ) -> CallToolResult:
        from packs.packset import PackSet

        if per_pack is not None and max_results is not None:
            raise _tool_error("pass per_pack (each pack's top N) or max_results (the top N "
                              "overall), not both")
        selected = list(dict.fromkeys(packs or sorted(served.packs)))
        overrides = served.budget(max_tokens)
        if per_pack is not None:
            overrides.update(pack_mode="per_pack", per_pack_results=per_pack)
        elif max_results is not None:
            overrides.update(max_results=max_results)
        # A PackSet over packs that are already open; it is not closed here (the server
        # owns the packs).
        packset = PackSet([served.known(name) for name in selected])
        try:
            result = packset.search(served.checked(question), **overrides)
        except (QuestionError, OptionsError) as exc:
            raise _tool_error(str(exc)) from exc
        structured = {**_structured(" + ".join(selected), result, None),
                      "packs": result.packs}
        text = search_text("", result, several=selected)
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content=structured)


def _add_ask(server: "MCPServer", served: _Served) -> None:
    @server.tool(description=("Answer a question from a pack. Returns answer (citing [n]), "
                              "sources, citations (one per [n]: pack, url, section_id, "
                              "heading_path, quote, start, end, verified), entities, facts, "
                              "cypher_query, query_type and token_usage (tokens, calls "
                              "and $ of Claude). "
                              "`pack` may be left "
                              "out when the server serves one pack."))
    def ask(question: Question, pack: OptionalPackName = None) -> dict[str, Any]:
        from packs.llm.errors import SynthesisError

        _, kp = served.chosen(pack)
        try:
            answer = kp.ask(served.checked(question))
        except (QuestionError, OptionsError, SynthesisError) as exc:
            raise _tool_error(str(exc)) from exc
        assert isinstance(answer, dict)  # stream=False
        return answer


def _add_topics(server: "MCPServer", served: _Served) -> None:
    @server.tool(description=("The map of a pack's topics, largest first: each topic's title, "
                              "size, top entities and sections (url, heading_path, "
                              "section_id), and a digest whose lines cite [n] a quote of a "
                              "section (citations with verified). Use it to see what a pack "
                              "covers. `pack` may be left out when one pack is served."))
    def topics(pack: OptionalPackName = None,
               limit: Annotated[int, Field(ge=1, le=200)] = 30) -> dict[str, Any]:
        from packs.topics import has_topics, pack_topics

        label, kp = served.chosen(pack)
        if not has_topics(kp.db):
            raise _tool_error(f"pack {label!r} has no topic map (built before topics); "
                              "rebuild it")
        return {"pack": label, "topics": [t.to_dict() for t in pack_topics(kp, limit)]}


def serve(paths: Sequence[str | os.PathLike[str]], *, http: bool = False,
          port: int = DEFAULT_PORT, embedding_model: str | None = None, verify: bool = True,
          trust=None) -> None:
    """Open the packs and run the server until the client (stdio) or Ctrl-C (HTTP) ends it;
    `verify` and `trust` go to KnowledgePack.open.

    HTTP listens on 127.0.0.1 only (streamable HTTP at /mcp): the server has no auth.
    MissingExtraError (one line: what to install) when the MCP SDK is not installed.
    """
    from packs.extras import MCP_INSTALL, MissingExtraError, missing

    if missing(("mcp",)):
        raise MissingExtraError(f"kpack mcp needs the MCP SDK, which this install lacks: "
                                f"{MCP_INSTALL}")
    packs = open_packs(paths, embedding_model=embedding_model, verify=verify, trust=trust)
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
