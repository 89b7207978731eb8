"""Confidence gate: does the pack hold the answer, or should the question be answered
without its context (`query_type: "confidence_gated_fallback"`)?

The signals a search gives the gate (similarity, coverage, unknown words, word pairs,
names, ...) are computed in packs/retrieval/gate_signals.py, with the words of
packs/text.py; this module turns them into a verdict: a logistic model,
p = sigmoid(bias + Σ weight · signal), passes when p >= cut. The weights (but `small`'s),
bias and cut are calibrated per embedding model on dev questions by
benchmarks/gate_calibration.py and written into each manifest at build time
(manifest.gate, see `gate_info`, which also names the TEXT_RULES_VERSION they were fitted
on); a model never calibrated gets the MiniLM weights, which only see similarity through
its offset from the model's own base threshold. The manifest only holds that data: a
search reads it through `params_of`, which decides whether it still fits this gate.

An explicit `gate_threshold` option replaces all this by the plain rule "best similarity
>= threshold" (tests and benchmarks switch the gate off with -1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from packs import text as text_rules
from packs.manifest import GateInfo, Manifest
from packs.retrieval.asks import parts
from packs.retrieval.gate_signals import (
    FITTED_SIGNALS,
    MAX_NAMES,
    MAX_SPECIFIC,
    RARE_SECTIONS,
    SIGNALS,
    SMALL_PACK,
    SMALLEST_MEASURED,
    TECHNICAL_SHARE,
    TOP_SECTIONS,
    Vocabulary,
    count_vocabulary,
    decode_pairs,
    encode_pairs,
    has_code,
    name_runs,
    pair_hash,
    question_terms,
    rare_names,
    signals,
    smallness,
    specific_words,
    terms,
    text_pairs,
    words_in_order,
)
from packs.retrieval.question_kinds import question_kind

# The signals' names and helpers are read through this module by the pack, the build and
# the benchmarks (gate.Vocabulary, gate.terms, ...): one front for the gate.
__all__ = ["CALIBRATED", "DEFAULT_THRESHOLD", "FITTED_SIGNALS", "GATE_VERSION", "MAX_NAMES",
           "MAX_PARTS", "MAX_SPECIFIC", "MINILM", "PARTS_CUT", "RARE_SECTIONS", "SIGNALS",
           "SMALLEST_MEASURED", "SMALL_PACK", "TECHNICAL_SHARE", "TOP_SECTIONS", "Vocabulary",
           "asked_parts", "count_vocabulary", "decide", "decode_pairs", "encode_pairs", "gate_info",
           "has_code", "name_runs", "pair_hash", "params_for", "params_of", "parts_to_search",
           "passes", "probability", "question_terms", "rare_names", "reason", "signals",
           "smallness", "specific_words", "terms", "text_pairs", "threshold", "with_parts",
           "words_in_order"]

DEFAULT_THRESHOLD = 0.5
# gate-v8: the words of packs/text.py (Porter stems instead of a plural fold), refitted.
GATE_VERSION = "gate-v8"


def threshold(option: float | None, manifest_value: float | None) -> float:
    """The similarity threshold of the plain rule: the option, else the manifest's."""
    if option is not None:
        return float(option)
    if manifest_value is not None:
        return float(manifest_value)
    return DEFAULT_THRESHOLD


def passes(best_similarity: float | None, limit: float) -> bool:
    """The plain rule: True when the best similarity reaches `limit`."""
    return best_similarity is not None and best_similarity >= limit


def probability(values: Mapping[str, float], weights: Mapping[str, float], bias: float) -> float:
    """sigmoid(bias + Σ weight · signal); signals without a weight count 0."""
    z = bias + sum(w * values.get(name, 0.0) for name, w in weights.items())
    return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))


# --- calibration ------------------------------------------------------------------------------

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# Fitted by benchmarks/gate_calibration.py on the dev questions of four packs; see
# BENCHMARKS.md for the test-split abstention rates.
CALIBRATED: dict[str, dict[str, object]] = {
    MINILM: {"version": GATE_VERSION, "text_rules": text_rules.TEXT_RULES_VERSION,
             "weights": {"similarity": 11.278, "margin": 4.065, "coverage": 1.442,
                         "section_coverage": 1.806, "unknown": -2.014, "specific": 0.089,
                         "pairs": 1.6, "pack_pairs": 1.856, "names": -2.136,
                         "doc_specific": -1.944, "doc_rare_names": -2.048, "small": 0.75},
             "bias": -2.573, "cut": 0.46,
             "calibration": "dev questions of the Kubernetes docs, the Rust book, SciFact "
                            "and XQuAD, text-v1 words (benchmarks/gate_calibration.py, "
                            "2026-11-27); small: dev questions of 8 small packs cut from the "
                            "first two (benchmarks/gate_small_packs.py, 2026-11-27, gate-v8)"},
}


def params_for(model: str) -> dict[str, object]:
    """The gate parameters for an embedding model: its calibration, else MiniLM's (whose
    similarity signal is relative to each model's own base threshold)."""
    if model in CALIBRATED:
        return dict(CALIBRATED[model])
    return {**CALIBRATED[MINILM],
            "calibration": f"{model} not calibrated: the weights of {MINILM}"}


def gate_info(model: str) -> GateInfo:
    """What the build writes into manifest.gate for a pack embedded with `model`."""
    return GateInfo(**params_for(model))


def params_of(manifest: Manifest) -> GateInfo:
    """The gate parameters a search of this pack uses: the manifest's own, unless it has
    none (a pack from before format 3) or they were fitted to another gate version's
    signals (weights only mean something for the signals they were fitted on); then the
    current calibration of the pack's model."""
    if manifest.gate is None or manifest.gate.version != GATE_VERSION:
        return gate_info(manifest.embedding.model)
    return manifest.gate


# A question about the whole pack (a list, across or overview question: packs/retrieval/
# question_kinds.py) passes at this share of the cut. The gate is calibrated on
# questions one passage answers; the items of a whole-pack question are spread over the
# pack, and its words ("Which ... do the docs name, and in what context?") find no one
# section close: of the 326 whole-pack questions of the dev sets and the spent blind rounds
# (MiniLM, cut 0.46), 21 were gated, 7 of them at a confidence of 0.35 to 0.45, which now
# pass; the absent and unrelated questions read as whole-pack questions (8 searches of
# about 560) scored 0.295 and under, but one that passes at any cut:
# benchmarks/results/issue48ak_gate.md.
WHOLE_PACK_CUT = 0.65
# ... or whatever its confidence, when the pack writes what it asks about: every term of
# it is in the pack's vocabulary (`unknown` 0), it names no multi-word name the pack lacks
# (`names` 0) and at least WHOLE_PACK_PAIRS of its word pairs (idf-weighted) are written
# together somewhere in the pack (`pack_pairs`). The confidence model reads how close the
# best sections come; a list's items are spread thin ("The usize type keeps turning up.
# What does the book say it is for and where does it use it?" 0.14). Of the whole-pack
# questions of the dev sets and spent rounds gated at 0.65 of the cut, 17 of 18
# (Kubernetes) and 21 of 40 (Rust book) pass this way; none of the absent or unrelated
# questions read as whole-pack does ("What are good names for a golden retriever puppy?":
# every word in the Rust book, no pair of them): benchmarks/results/issue48bc_whole_pack_gate.md.
WHOLE_PACK_PAIRS = 0.1
# A user's words are not all the pack's ("subsections", "mottos", "a rundown of"): a
# question passes too when the terms the pack lacks are plain words, not names
# (`_names_unknown`: "Nomad", "GOMAXPROCS", "ClusterIssuer"), at most WHOLE_PACK_UNKNOWN of its IDF
# weight, and at least WHOLE_PACK_UNKNOWN_PAIRS of its word pairs are in the pack. Of the
# whole-pack questions of the dev sets and spent rounds still refused, 12 of 31 (Rust
# book) pass this way, each lacking one word; of the 353 absent and unrelated questions of
# the two packs, none reads as whole-pack and meets it:
# benchmarks/results/issue48bq_gate_unknown.md.
WHOLE_PACK_UNKNOWN = 0.25
WHOLE_PACK_UNKNOWN_PAIRS = 0.15
# A question that asks two things (asks.py `parts`: "Which flag ..., and which container
# ...?") often finds them on two pages: the best sections hold half its terms each, and the
# confidence model, fitted mostly on questions about one thing, reads that as a weak match.
# Such a question passes at PARTS_CUT of the cut. Of the answer rows (dev and spent) asking
# two things, the gate refused 15 of 273 (Kubernetes) and 19 of 247 (Rust book), against 2
# % of those asking one; at 0.65 of the cut 8 and 11, while none of the 18 absent or
# unrelated questions asking two things passes that the full cut refused:
# benchmarks/results/issue47_gate_parts.md.
PARTS_CUT = 0.65
# ... and one still refused passes when every thing it asks (at most MAX_PARTS), searched
# alone, passes: of the answer rows asking two things still refused at PARTS_CUT, 6 of 8
# (Kubernetes) and 6 of 11 (Rust book) pass this way; of the 17 absent or unrelated
# questions asking two things refused, none has every part pass (each asks one thing the
# pack lacks): benchmarks/results/issue47_gate_parts.md.
MAX_PARTS = 3


def writes_subject(values: Mapping[str, float], names_unknown: bool = False) -> bool:
    """Whether the pack writes every term of the question (or all but a few plain words:
    `names_unknown` says whether one it lacks is a name), no name it lacks, and enough of
    its word pairs (the gate's `unknown`, `names` and `pack_pairs` signals)."""
    if values["names"] != 0.0:
        return False
    if values["unknown"] == 0.0:
        return values["pack_pairs"] >= WHOLE_PACK_PAIRS
    return (not names_unknown and values["unknown"] <= WHOLE_PACK_UNKNOWN
            and values["pack_pairs"] >= WHOLE_PACK_UNKNOWN_PAIRS)


def _names_unknown(question: str, vocab: Vocabulary) -> bool:
    """Whether a term of the question the pack never uses is written as a name there
    (`specific_words`: capitalised after the first word, an acronym, code-like)."""
    named = {t for w in specific_words(question) for t in words_in_order(w)}
    return any(not vocab.df.get(t) for t in named)


def decide(question: str, similarities: Sequence[float], top_texts: Sequence[str],
           vocabulary_of, params, option: float | None,
           base_similarity: float) -> dict[str, object]:
    """The gate's verdict on one search, as reported in `SearchResult.gate`:

    {rule, passed, confidence, cut, calibrated_passed, writes_subject, signals}.
    `writes_subject`: the question is read as whole-pack and the pack writes its words, so
    it passes whatever its confidence (`writes_subject` above); the cut is WHOLE_PACK_CUT
    of the model's for a whole-pack question, PARTS_CUT for one that asks two things.
    `rule` is "calibrated" (the logistic model of `params`, a manifest GateInfo) unless
    `option` (an explicit similarity threshold) asks for the plain rule ("similarity");
    the calibrated verdict is computed either way (several packs searched together use
    it). `vocabulary_of` is called for the pack's Vocabulary (loaded once by the pack). No
    candidate at all never passes."""
    vocab = vocabulary_of()
    values = signals(question, similarities, top_texts, vocab, base_similarity)
    p = probability(values, params.weights, params.bias)
    best = similarities[0] if similarities else None
    whole = question_kind(question) is not None
    cut = params.cut * (WHOLE_PACK_CUT if whole else PARTS_CUT if len(parts(question)) > 1
                        else 1.0)
    written = whole and writes_subject(values, _names_unknown(question, vocab))
    calibrated = best is not None and (p >= cut or written)
    if option is not None:
        rule, passed = "similarity", passes(best, float(option))
    else:
        rule, passed = "calibrated", calibrated
    return {"rule": rule, "passed": passed, "confidence": round(p, 4), "cut": round(cut, 4),
            "calibrated_passed": calibrated, "writes_subject": written,
            "signals": {k: round(v, 4) for k, v in values.items()}}


def asked_parts(question: str) -> list[str]:
    """The things a question asks (asks.py `parts`) when it asks two to MAX_PARTS of them
    and is not a whole-pack question; else []."""
    asked = parts(question)
    if not 1 < len(asked) <= MAX_PARTS or question_kind(question) is not None:
        return []
    return asked


def parts_to_search(question: str, verdict: Mapping[str, object]) -> list[str]:
    """The things a question asks (`asked_parts`) to search alone when the calibrated
    gate refused it (`verdict`, of `decide`) though it found candidates; else []."""
    if verdict["calibrated_passed"] or "parts" in verdict:
        return []
    return asked_parts(question)


def with_parts(verdict: dict[str, object], alone: Sequence[Mapping[str, object]]
               ) -> dict[str, object]:
    """`verdict` once the things its question asks were searched `alone` (their verdicts,
    of `decide`): calibrated_passed when every one passed, and passed too when the
    calibrated rule decides; `parts` lists each thing's confidence and cut."""
    every = bool(alone) and all(v["calibrated_passed"] for v in alone)
    out = {**verdict, "parts": [{"confidence": v["confidence"], "cut": v["cut"],
                                 "passed": v["calibrated_passed"]} for v in alone]}
    if every:
        out["calibrated_passed"] = True
        out["passed"] = verdict["passed"] or verdict["rule"] == "calibrated"
    return out


def reason(result) -> str:
    """Why a SearchResult was gated, in a few words, for messages."""
    verdict = result.gate or {}
    best = result.best_similarity or 0.0
    if verdict.get("rule") == "calibrated":
        cover = verdict.get("signals", {}).get("coverage", 0.0)
        return (f"confidence {verdict['confidence']:.2f} < {verdict['cut']:.2f}: best "
                f"similarity {best:.2f}, {cover:.0%} of the question's terms in the best "
                "sections")
    return f"best similarity {best:.2f} < threshold {result.gate_threshold:.2f}"
