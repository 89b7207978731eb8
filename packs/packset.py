"""Several packs queried as one: `PackSet`.

    with PackSet.open(["out/go-docs", "out/k8s-docs"]) as packs:
        result = packs.search("how do I drain a node?")          # SearchResult, labelled
        answer = packs.ask("how do I drain a node?")             # the same dict as ask()

How a search runs (FAN_OUT: the stages below, then the TAIL every search ends with):
1. Each pack runs its own full pipeline (packs.pipeline.search) in a thread of its own,
   with its own embedding model: packs built with different models are each searched with
   theirs. The gate is switched off inside the per-pack searches; it applies to the set.
2. Confidence gate on the fused result: each pack's own calibrated gate decides whether it
   contributes (packs.retrieval.gate: similarity and term coverage, parameters per model
   in its manifest); with an explicit `gate_threshold`, each pack's best similarity is
   compared with it instead. A pack that does not pass contributes nothing; when no pack
   passes, the whole result is gated (`gated=True`, `query_type:
   "confidence_gated_fallback"` from ask()).
3. Fusion by RRF (k = `rrf_k`) of two kinds of rankings: each pack's own ranking, and one
   ranking across packs by each section's similarity margin over its pack's threshold
   (the only cross-model comparable score we have). Without the second ranking every
   pack's first section would tie.
4. Caps: `pack_mode="general"`: one ranking, `max_results` sections in total (default 10);
   `pack_mode="per_pack"`: each pack keeps its top `per_pack_results` (default 3), all of
   them in fused order. `max_articles` applies per pack.
5. Related sections and graph facts of every contributing pack are merged; the TAIL
   (packs/retrieval/finish.py) keeps each section once, gives it a readable score against
   its own pack's gate confidence, and assembles the context under one token budget.
   Every section carries `pack` (its label: the manifest name, made unique with "#2",
   "#3"); context headings and `ask()` sources name it, so synthesis cites pack and page.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from packs import pipeline
from packs.llm.usage import add_query_usage, zero_query_usage
from packs.options import SearchOptions
from packs.pack import KnowledgePack
from packs.result import Facts, RankedSection, SearchResult
from packs.retrieval import finish, gate, hybrid
from packs.retrieval.state import QueryState

# Gate threshold passed to the per-pack searches so that none of them gates itself.
_NO_GATE = -1.0  # the lowest cosine similarity: every pack passes


class PackSet:
    """Open packs queried together. Thread-safe for queries; close() (or `with`) when done."""

    def __init__(self, packs: Sequence[KnowledgePack]) -> None:
        if not packs:
            raise ValueError("a PackSet needs at least one pack")
        self.packs = list(packs)
        self.labels = _labels([p.manifest.name for p in self.packs])

    @classmethod
    def open(cls, paths: Sequence[str | os.PathLike[str]], *,
             embedding_models: Mapping[str, str] | None = None, verify: bool = True,
             trust=None) -> PackSet:
        """Open every pack read-only (see KnowledgePack.open, which `verify` and `trust`
        are passed to).

        `embedding_models` maps a model id a pack was built with to where to load it from
        (a local folder), for models that are neither packaged nor in the hub cache. A pack
        that fails to open closes the ones already opened and raises its error.
        """
        models = dict(embedding_models or {})
        opened: list[KnowledgePack] = []
        checks = {"verify": verify, "trust": trust}
        try:
            for path in paths:
                build = KnowledgePack.open(path, **checks)
                model = models.get(build.manifest.embedding.model)
                if model is not None:
                    build.close()
                    build = KnowledgePack.open(path, embedding_model=model, **checks)
                opened.append(build)
        except BaseException:
            for p in opened:
                p.close()
            raise
        return cls(opened)

    def close(self) -> None:
        for p in self.packs:
            p.close()

    def __enter__(self) -> PackSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PackSet({self.labels})"

    # --- queries --------------------------------------------------------------------------
    def search(self, question: str, options: SearchOptions | None = None,
               **overrides: object) -> SearchResult:
        """Search every pack in parallel and fuse (see the module docstring): the stages
        of FAN_OUT, ending with the TAIL every search ends with.

        Same options as KnowledgePack.search, plus `pack_mode` and `per_pack_results`.
        Raises QuestionError / OptionsError like it; a pack whose search fails raises.
        """
        opts = SearchOptions.build(options, **overrides)
        st = SetState(pipeline.clean_question(question), opts, usage=zero_query_usage())
        pipeline.run(st, self, FAN_OUT)
        ctx = st.context if st.context is not None else finish.empty_context()
        results, best = st.results, st.best_entry
        usage = zero_query_usage()
        for res in results:
            add_query_usage(usage, res.token_usage)
        return SearchResult(
            question=st.question, sections=st.primary, related=st.related, facts=st.facts,
            context=ctx.text, context_tokens=ctx.tokens, truncated=ctx.truncated,
            gated=st.gated, best_similarity=best["best_similarity"],
            gate_threshold=best["gate_threshold"], analysis=results[0].analysis,
            cypher_query=";\n".join(f"-- pack {label}\n{res.cypher_query}"
                                    for label, res in zip(self.labels, results)),
            fallback_full_articles=any(r.fallback_full_articles for _, _, r in st.passing),
            fewshot=[] if st.gated else next((r.fewshot for _, _, r in st.passing
                                              if r.fewshot), []),
            timings_ms=dict(st.timer.ms),
            warnings=[f"{label}: {w}" for label, res in zip(self.labels, results)
                      for w in res.warnings],
            build_id="+".join(p.manifest.build_id for p in self.packs),
            token_usage=usage, filters=results[0].filters, packs=st.per_pack,
            # each pack's own encoder's vector of the question (the offline answer reads
            # the cited pages and embeds its best passages with each pack's model)
            question_vector={label: res.question_vector
                             for label, res in zip(self.labels, results)},
        )

    def ask(self, question: str, options: SearchOptions | None = None, *,
            stream: bool = False, **overrides: object
            ) -> dict[str, object] | Iterator[str | dict[str, object]]:
        """Answer from all packs: the same dict as KnowledgePack.ask, each source with its
        `pack` label. Claude when ANTHROPIC_API_KEY is set, else extractive."""
        opts = SearchOptions.build(options, **overrides)
        result = self.search(question, opts)
        if stream:
            return pipeline.ask_stream(self, result, opts)
        answer, _ = pipeline.ask(self, result, opts)
        return answer


@dataclasses.dataclass
class SetState(QueryState):
    """A search of several packs: each pack's result, their gate verdicts, the fused
    sections (QueryState's primary, related and facts, which the TAIL finishes)."""

    results: list[SearchResult] = dataclasses.field(default_factory=list)
    per_pack: list[dict[str, object]] = dataclasses.field(default_factory=list)
    passing: list[tuple[str, float, SearchResult]] = dataclasses.field(default_factory=list)
    best_entry: dict[str, object] = dataclasses.field(default_factory=dict)


def _fan_out(st: SetState, packs: PackSet) -> None:
    """Every pack's own search, in parallel, none gating itself."""
    opts = st.opts
    cap = opts.per_pack_results if opts.pack_mode == "per_pack" else opts.max_results
    inner = dataclasses.replace(opts, gate_threshold=_NO_GATE, max_results=cap)
    with ThreadPoolExecutor(max_workers=len(packs.packs)) as pool:
        st.results = list(pool.map(lambda p: p.search(st.question, inner), packs.packs))


def _gates(st: SetState, packs: PackSet) -> None:
    """Each pack's own calibrated verdict (or the similarity threshold, when one is
    given): the packs that contribute; none gates the whole search."""
    opts = st.opts
    for label, pack, res in zip(packs.labels, packs.packs, st.results):
        limit = gate.threshold(opts.gate_threshold, pack.manifest.embedding.gate_threshold)
        ok = (gate.passes(res.best_similarity, limit) if opts.gate_threshold is not None
              else bool(res.gate.get("calibrated_passed")))
        st.per_pack.append({"pack": label, "path": str(pack.path), "name": pack.manifest.name,
                            "model": pack.manifest.embedding.model,
                            "best_similarity": res.best_similarity, "gate_threshold": limit,
                            "passed": ok, "sections": len(res.sections) if ok else 0})
        if ok:
            st.passing.append((label, limit, res))
    st.best_entry = max(st.per_pack, key=lambda e: _margin(e["best_similarity"],
                                                           e["gate_threshold"]))
    st.gated = not st.passing
    confidence = {label: res.gate.get("confidence") for label, _, res in st.passing}
    st.confidence = lambda s: confidence.get(s.pack)


def _fusion(st: SetState, packs: PackSet) -> None:
    """The contributing packs' sections fused into one ranking; their related sections
    and graph facts merged."""
    opts = st.opts
    cap = opts.per_pack_results if opts.pack_mode == "per_pack" else opts.max_results
    st.primary = _fuse(st.passing, opts, cap * len(st.passing) if opts.pack_mode == "per_pack"
                       else opts.max_results)
    st.related = [_labelled(s, label) for label, _, res in st.passing for s in res.related]
    st.facts = _merge_facts([res.facts for _, _, res in st.passing], opts.max_facts)


# A search of several packs: the fan-out, the packs' gates and the fusion, then the tail
# every search ends with (each section once, readable scores, the context).
FAN_OUT: tuple[pipeline.Stage, ...] = (
    pipeline.Stage("packs", _fan_out),
    pipeline.Stage("gate", _gates),
    pipeline.Stage("fusion", _fusion),
    *pipeline.TAIL,
)


def _labels(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _margin(similarity: float | None, limit: float) -> float:
    return float("-inf") if similarity is None else similarity - limit


def _labelled(section: RankedSection, label: str) -> RankedSection:
    return dataclasses.replace(section, pack=label, stages=list(section.stages))


def _fuse(passing: list[tuple[str, float, SearchResult]], opts: SearchOptions,
          cap: int) -> list[RankedSection]:
    """RRF of each pack's ranking and the cross-pack ranking by similarity margin."""
    by_key: dict[tuple[str, str], RankedSection] = {}
    rankings: list[list[tuple[str, str]]] = []
    margins: dict[tuple[str, str], float] = {}
    for label, limit, res in passing:
        ranking = []
        for s in res.sections:
            key = (label, s.id)
            by_key[key] = _labelled(s, label)
            margins[key] = _margin(s.similarity, limit)
            ranking.append(key)
        rankings.append(ranking)
    across = sorted(margins, key=lambda k: -margins[k])
    scores = hybrid.rrf([*rankings, across], k=opts.rrf_k)
    out = []
    for key in hybrid.ranked(scores)[:cap]:
        section = by_key[key]
        section.score = section.fusion_score = scores[key]
        section.stages.append("pack_fusion")
        out.append(section)
    return out


def _merge_facts(all_facts: list[Facts], cap: int) -> Facts:
    entities = list({e["name"]: e for f in all_facts for e in f.entities}.values())
    facts = list(dict.fromkeys(x for f in all_facts for x in f.facts))[:cap]
    triples = list(dict.fromkeys(t for f in all_facts for t in f.triples))
    return Facts(entities=entities, facts=facts, triples=triples[: max(cap - len(facts), 0)])
