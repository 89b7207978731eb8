"""The candidate gate signals of benchmarks/gate_experiments.py: each experiment takes a
pack and its kept searches (question, vector similarities, the texts of the best fused
sections) and returns one dict of extra signals per search; `EXPERIMENTS` names them and
the sets of their signals tried (see that script's docstring for what each one measures).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable

# --- experiments: (pack, its searches) -> one dict of extra signals per search -------------


def masked(pack, rows: list[dict]) -> list[dict]:
    from packs.retrieval import gate

    out = []
    for r in rows:
        words = gate.specific_words(r["question"])
        if not words:
            out.append({"mask_drop": 0.0})
            continue
        q = r["question"]
        for w in words:
            q = re.sub(r"(?<![\w.-])" + re.escape(w) + r"(?![\w-])", " ", q)
        res = pack.search(" ".join(q.split()), gate_threshold=-1.0, use_enhancements=False,
                          use_cache=False)
        out.append({"mask_drop": (r["sims"][0] if r["sims"] else 0.0)
                    - (res.best_similarity or 0.0)})
    return out


def entities(pack, rows: list[dict]) -> list[dict]:
    from packs.retrieval import analysis, gate, gate_signals

    index = analysis.build_entity_index(pack.db.entity_names())
    vocab = pack.vocabulary()
    out = []
    for r in rows:
        words = gate.specific_words(r["question"])
        named = [" ".join(analysis.tokenize(w)) in index for w in words]
        found = analysis.match_known_entities(r["question"], index)
        multi = [m for m in found if len(analysis.tokenize(m)) >= 2]
        phrases = gate_signals._phrase(" ".join(r["top"][:gate.TOP_SECTIONS]))
        idf = {t: vocab.idf(t) for t in gate.question_terms(r["question"])}
        covered = {t for m in found for t in gate.terms(m)}
        out.append({
            "entity_share": sum(named) / len(named) if named else 1.0,
            "not_entities": float(min(3, len(named) - sum(named))),
            "multiword_entities": float(min(2, len(multi))),
            "multiword_in_top": float(min(2, sum(gate_signals._phrase(m) in phrases
                                                 for m in multi))),
            "entity_coverage": (sum(v for t, v in idf.items() if t in covered)
                                / (sum(idf.values()) or 1.0)),
        })
    return out


def frequency(pack, rows: list[dict]) -> list[dict]:
    import wordfreq  # optional: pip install wordfreq

    from packs import text as text_rules
    from packs.retrieval import gate
    from packs.retrieval.quality import STOP_WORDS

    vocab = pack.vocabulary()
    n = vocab.sections
    out = []
    for r in rows:
        zipf = {text_rules.stem(t): wordfreq.zipf_frequency(t, "en")  # stem → log10 per 1e9 words
                for t in text_rules.tokens(r["question"])
                if t not in STOP_WORDS and len(t) > 1 and not t[0].isdigit()}
        top = set().union(*(set(gate.terms(t)) for t in r["top"][:gate.TOP_SECTIONS]))
        rare = [s for s, z in zipf.items() if z < 2.5]
        llr = [math.log((vocab.df.get(s, 0) + 0.5) / (n + 1)) - math.log(10 ** (max(z, 1.0) - 9))
               for s, z in zipf.items()]
        out.append({
            "rare_unknown": float(min(3, sum(not vocab.df.get(s) for s in rare))),
            "rare_passing": float(min(3, sum(0 < vocab.df.get(s, 0) <= max(2, 0.002 * n)
                                             for s in rare))),
            "rare_not_top": float(min(3, sum(s not in top for s in rare))),
            "rare_min_df": min((math.log1p(vocab.df.get(s, 0)) / math.log(n + 1)
                                for s in rare), default=1.0),
            "llr_min": min(llr, default=0.0) / 10,
        })
    return out


def joint(pack, rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        passage = r["top"][0] if r["top"] else ""
        q, p = pack.embed_query(r["question"]), pack.embed_query(passage)
        qp = pack.embed_query(f"{r['question']} {passage}")
        out.append({"joint_vs_section": float(qp @ p), "joint_vs_question": float(qp @ q)})
    return out


def focus(pack, rows: list[dict]) -> list[dict]:
    from collections import Counter

    from packs.retrieval import gate

    vocab = pack.vocabulary()
    out = []
    for r in rows:
        rare = sorted((t for t in gate.question_terms(r["question"]) if vocab.df.get(t)),
                      key=vocab.idf, reverse=True)[:2]
        top = r["top"][:gate.TOP_SECTIONS]
        if not rare or not top:
            out.append({"focus_count": 0.0, "focus_heading": 0.0, "rarest_df": 0.0})
            continue
        counts = [Counter(gate.terms(text)) for text in top]
        heads = [set(gate.terms(text.split("\n", 1)[0])) for text in top]
        out.append({
            "focus_count": sum(max(min(c[t], 4) for c in counts) / 4 for t in rare) / len(rare),
            "focus_heading": sum(any(t in h for h in heads) for t in rare) / len(rare),
            "rarest_df": math.log1p(vocab.df[rare[0]]) / math.log1p(vocab.sections)})
    return out


def neighbours(pack, rows: list[dict]) -> list[dict]:
    from packs.retrieval import gate

    vocab = pack.vocabulary()
    out = []
    for r in rows:
        words = gate.words_in_order(r["question"])
        alone = 0
        for name in gate.specific_words(r["question"]):
            t = gate.terms(name)
            if len(t) != 1 or not vocab.df.get(t[0]):
                continue
            pairs = [p for p in zip(words, words[1:]) if t[0] in p]
            alone += bool(pairs) and not any(vocab.has_pair(a, b) for a, b in pairs)
        out.append({"lone_names": float(min(2, alone))})
    return out


def technical(pack, rows: list[dict]) -> list[dict]:
    """Variants of the technical-pack switch (gate.Vocabulary.technical): the switch alone
    as a bias, other signals switched by it, rare names at another limit, and rare names
    in every pack."""
    from packs import text as text_rules
    from packs.retrieval import gate

    vocab = pack.vocabulary()
    switch = vocab.technical
    lone = neighbours(pack, rows)
    out = []
    for r, alone in zip(rows, lone):
        s = r["signals"]
        rare = gate.rare_names(r["question"], vocab)
        in_two = [w for w in rare if vocab.df[text_rules.stem(w.lower())] <= 2]
        out.append({"technical": switch, "doc_unknown": switch * s["unknown"],
                    "doc_names": switch * s["names"],
                    "doc_lone_names": switch * alone["lone_names"],
                    "doc_rare_in_two": switch * min(gate.MAX_NAMES, len(in_two)),
                    "rare_names_any_pack": float(min(gate.MAX_NAMES, len(rare)))})
    return out


def agreement(pack, rows: list[dict]) -> list[dict]:
    """The vector and the BM25 top 20 of each question, as the pipeline runs them, compared
    by page."""
    from packs.db import QueryLog, fts_query_text
    from packs.filters import Filters
    from packs.retrieval import analysis

    index = pack.entity_index()
    out = []
    for r in rows:
        qvec = pack.embed_query(r["question"])
        vec = [x.article_id for x in pack.db.vector_candidates(qvec, 20, Filters(), 0.0,
                                                               QueryLog())]
        text = fts_query_text(list(analysis.analyse(r["question"], index).terms))
        bm = [x[1] for x in pack.db.fts_raw(text, 20, QueryLog(), Filters())]
        v5, b5 = list(dict.fromkeys(vec))[:5], list(dict.fromkeys(bm))[:5]
        out.append({"agree_first": float(bool(vec and bm and vec[0] == bm[0])),
                    "agree_top3": float(bool(vec and vec[0] in bm[:3])),
                    "overlap5": len(set(v5) & set(b5)) / 5})
    return out


def _content_runs(question: str) -> list[str]:
    """Runs of the question's words, split at stop words and single characters."""
    from packs import text as text_rules
    from packs.retrieval.quality import STOP_WORDS

    runs: list[list[str]] = [[]]
    for m in text_rules.raw_word_spans(question):
        word = m.group(0)
        if word.lower() in STOP_WORDS or len(word) < 2:
            runs.append([])
        else:
            runs[-1].append(word)
    return [" ".join(run) for run in runs if run]


def chunks(pack, rows: list[dict]) -> list[dict]:
    """Each run of content words searched alone (HNSW top 3): the weakest run's best
    similarity and the mean, relative to the model's base threshold, and the question's
    own best similarity minus the weakest run's."""
    import statistics

    from packs.db import QueryLog
    from packs.filters import Filters

    out = []
    for r in rows:
        best = r["sims"][0] if r["sims"] else 0.0
        sims = [max((x.similarity or 0.0 for x in pack.db.vector_candidates(
                    pack.embed_query(run), 3, Filters(), 0.0, QueryLog())), default=0.0)
                for run in _content_runs(r["question"])] or [best]
        out.append({"chunk_min": min(sims) - r["base"],
                    "chunk_mean": statistics.fmean(sims) - r["base"],
                    "chunk_gap": best - min(sims)})
    return out


# A hyphenated lower-case word as written: "iptables-persistent", "cert-manager".
_COMPOUND = re.compile(r"(?<![A-Za-z0-9_.-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![A-Za-z0-9_-])")


def compounds(pack, rows: list[dict]) -> list[dict]:
    """Hyphenated compounds of the question that the pack never writes (one of their
    adjacent word pairs is in none of its sections), in every pack and in a technical one;
    and doc_rare_names counting only the rare names the best sections do not write."""
    from packs.retrieval import gate, gate_signals

    vocab = pack.vocabulary()
    out = []
    for r in rows:
        unwritten = [c for c in _COMPOUND.findall(r["question"])
                     if not gate_signals._pack_writes(c.replace("-", " "), vocab)]
        found = gate_signals._phrase(" ".join(r["top"][:gate.TOP_SECTIONS]))
        rare = [w for w in gate.rare_names(r["question"], vocab) if gate_signals._phrase(w) not in found]
        n = float(min(gate.MAX_NAMES, len(unwritten)))
        out.append({"compounds": n, "doc_compounds": vocab.technical * n,
                    "doc_rare_unfound": vocab.technical * min(gate.MAX_NAMES, len(rare))})
    return out


INTERACTING = ("similarity", "coverage", "section_coverage", "pack_pairs", "unknown")
_PAIRS = list(itertools.combinations(INTERACTING, 2))
_SWITCHED_BY = (*INTERACTING, "margin", "pairs")  # the signals times the technical switch


def interactions(pack, rows: list[dict]) -> list[dict]:
    """Pairwise products of INTERACTING, the technical switch (0-1) and its product with
    each of INTERACTING plus margin and pairs, and similarity squared."""
    switch = pack.vocabulary().technical
    out = []
    for r in rows:
        s = r["signals"]
        e = {f"{a}*{b}": s[a] * s[b] for a, b in _PAIRS}
        e.update({f"tech*{a}": switch * s[a] for a in _SWITCHED_BY})
        e.update({"technical_switch": switch, "similarity^2": s["similarity"] ** 2})
        out.append(e)
    return out


_PAIRWISE = [f"{a}*{b}" for a, b in _PAIRS]
_SWITCHED = ["technical_switch", *(f"tech*{a}" for a in _SWITCHED_BY)]
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _one_edit(word: str) -> set[str]:
    cuts = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    return ({a + b[1:] for a, b in cuts if b}
            | {a + b[1] + b[0] + b[2:] for a, b in cuts if len(b) > 1}
            | {a + c + b[1:] for a, b in cuts if b for c in _LETTERS}
            | {a + c + b for a, b in cuts for c in _LETTERS})


def typos(pack, rows: list[dict]) -> list[dict]:
    """The shipped signals again, of the question with its unknown 5+ letter words read as
    the most frequent pack word one edit away (in at least 2 sections)."""
    from packs import text as text_rules
    from packs.retrieval import gate

    vocab = pack.vocabulary()

    def fix(match: re.Match) -> str:
        word = match.group(0).lower()
        if len(word) < 5 or vocab.df.get(text_rules.stem(word)):
            return match.group(0)
        near = [(vocab.df.get(text_rules.stem(e), 0), e) for e in _one_edit(word)]
        near = [c for c in near if c[0] >= 2]
        return max(near)[1] if near else match.group(0)

    return [{f"typo_{k}": v for k, v in gate.signals(
        re.sub(r"[A-Za-z]+", fix, r["question"]), r["sims"], r["top"], vocab,
        r["base"]).items()} for r in rows]


def stoplist(pack, rows: list[dict]) -> list[dict]:
    """The shipped signals again with scikit-learn's English stop words added to the gate's,
    the pack's pairs recounted from its sections with the same list."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from packs import text as text_rules
    from packs.retrieval import gate

    shipped = text_rules.STOP_WORDS
    text_rules.STOP_WORDS = frozenset(shipped | ENGLISH_STOP_WORDS)
    try:
        vocab = gate.count_vocabulary(pack.db.section_texts())
        return [{f"stop_{k}": v for k, v in gate.signals(
            r["question"], r["sims"], r["top"], vocab, r["base"]).items()} for r in rows]
    finally:
        text_rules.STOP_WORDS = shipped


EXPERIMENTS: dict[str, tuple[Callable, list[list[str]] | None]] = {
    # name → (extra signals, the sets of them tried: added to the shipped ones, or
    # replacing them when the names carry a prefix that stands for all of them)
    "masked": (masked, [["mask_drop"]]),
    "entities": (entities, [["entity_share"], ["not_entities"], ["multiword_entities"],
                            ["multiword_in_top"], ["entity_coverage"],
                            ["not_entities", "entity_coverage", "multiword_in_top"]]),
    "frequency": (frequency, [["rare_unknown"], ["rare_passing"], ["rare_not_top"],
                              ["rare_min_df"], ["llr_min"]]),
    "joint": (joint, [["joint_vs_section"], ["joint_vs_question"],
                      ["joint_vs_section", "joint_vs_question"]]),
    "typos": (typos, [["typo_"]]),
    "stoplist": (stoplist, [["stop_"]]),
    "focus": (focus, [["focus_count"], ["focus_heading"], ["rarest_df"],
                      ["focus_count", "focus_heading", "rarest_df"]]),
    "neighbours": (neighbours, [["lone_names"]]),
    "technical": (technical, [["technical"], ["doc_unknown"], ["doc_names"], ["doc_lone_names"],
                              ["doc_rare_in_two"], ["rare_names_any_pack"]]),
    "agreement": (agreement, [["agree_first"], ["agree_top3"], ["overlap5"],
                              ["agree_first", "agree_top3", "overlap5"]]),
    "chunks": (chunks, [["chunk_min"], ["chunk_mean"], ["chunk_gap"]]),
    "compounds": (compounds, [["compounds"], ["doc_compounds"], ["doc_rare_unfound"]]),
    "interactions": (interactions, [["similarity^2"], _PAIRWISE, _SWITCHED,
                                    [*_PAIRWISE, *_SWITCHED, "similarity^2"]]),
    "operating": (None, None),
}
