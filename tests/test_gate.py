"""The confidence gate's signals and decision (packs.retrieval.gate), on hand-made inputs,
and its parameters in the manifest."""

from __future__ import annotations

import math

import polars as pl
import pytest

from packs.manifest import EmbeddingInfo, ExtractorInfo, GateInfo, Manifest
from packs.retrieval import gate
from packs.text import TEXT_RULES_VERSION, stem

# Terms are stems (packs/text.py): "policy" is counted as "polici", "liveness" as "live".
VOCAB = gate.Vocabulary({stem(w): n for w, n in {
    "pod": 40, "restart": 5, "policy": 8, "container": 30, "kubelet": 2, "node": 50,
    "liveness": 3, "probe": 4}.items()}, 100,
    sorted({gate.pair_hash(stem("restart"), stem("policy")),
            gate.pair_hash(stem("liveness"), stem("probe"))}))
TOP = ["Pods > Restart policy\nThe restart policy of a pod applies to its containers.",
       "Probes\nThe kubelet runs the liveness probe."]


def test_terms_are_the_text_rules_stems_of_plain_tokens():
    # packs/text.py: plain tokens (a dash splits, an underscore does not), Porter stems,
    # short words and words with digits or underscores as they are
    assert gate.terms("Pods restart; configured class status is BUS kube-proxy max_surge "
                      "v1") == ["pod", "restart", "configur", "class", "statu", "is", "bus",
                                "kube", "proxi", "max_surge", "v1"]
    assert gate.question_terms("How do the pods restart a pod?") == ["pod", "restart"]


def test_specific_words_are_capitalised_acronym_or_code_like():
    words = gate.specific_words("How do I set GOMAXPROCS in a Nomad job with daemon.json "
                                "and max_procs, not a per-environment Pod?")
    assert words == ["GOMAXPROCS", "Nomad", "daemon.json", "max_procs", "Pod"]
    assert gate.specific_words("Pods restart") == []  # the first word is not "capitalised"


def test_numbers_and_measurements_are_not_specific_words():
    words = gate.specific_words("Does 40mg/day of 4-PBA for 15 days since 2015 change HbA1c "
                                "in v1.2 of x86_64 builds?")
    assert words == ["HbA1c", "v1.2", "x86_64"]


def test_name_runs_are_capitalised_words_side_by_side():
    q = ("Can Docker Swarm, the AWS Secrets Manager or Cnp1 N-tail run a Pod? "
         "Erlang BEAM. Python Threads")
    assert gate.name_runs(q) == ["Docker Swarm", "AWS Secrets Manager", "Erlang BEAM",
                                 "Python Threads"]
    # the first word, lone names, punctuation between words and code-like words end a run
    assert gate.name_runs("Docker Swarm vs a Pod, Nomad; Go. Rust and CD8 T cells") == []
    # a question in title case or capitals has no names to tell apart
    assert gate.name_runs("How To Configure Cargo Workspaces?") == []
    assert gate.name_runs("HOW DO I USE DOCKER SWARM") == []


def test_names_counts_multi_word_names_the_pack_never_writes():
    top = ["Restart policy\nThe liveness probe restarts containers."]

    def names(q: str) -> float:
        return gate.signals(q, [0.6], top, VOCAB, 0.42)["names"]

    # "Restart Policy" is written in the pack (its pair is there), "Liveness Probe" too
    assert names("Is the Restart Policy of a Liveness Probe set by the kubelet?") == 0.0
    assert names("How does Docker Swarm restart a container?") == 1.0
    # at most MAX_NAMES, and a pack without pair hashes never counts a name as unwritten
    assert names("Do Docker Swarm, Apache Mesos and Nomad Enterprise restart pods?") == 2.0
    assert gate.signals("How does Docker Swarm restart?", [0.6], top,
                        gate.Vocabulary(dict(VOCAB.df), 100), 0.42)["names"] == 0.0


def test_signals_by_hand():
    q = "How does the restart policy of a Nomad job work?"
    s = gate.signals(q, [0.62, 0.5, 0.4], TOP, VOCAB, base_similarity=0.42)
    idf = {t: math.log(101 / (VOCAB.df.get(stem(t), 0) + 0.5)) for t in ("restart", "policy",
                                                                  "nomad", "job", "work")}
    assert s["similarity"] == pytest.approx(0.2)
    assert s["margin"] == pytest.approx(0.62 - (0.62 + 0.5 + 0.4) / 3)
    assert s["coverage"] == pytest.approx((idf["restart"] + idf["policy"]) / sum(idf.values()))
    assert s["unknown"] == pytest.approx(
        (idf["nomad"] + idf["job"] + idf["work"]) / sum(idf.values()))
    assert s["specific"] == 1.0  # "Nomad" is not in the top sections
    # pairs (restart, policy), (policy, nomad), (nomad, job), (job, work): one is in the text
    assert s["pairs"] == pytest.approx(1 / 4)
    # both covered terms are in the first section alone
    assert s["section_coverage"] == pytest.approx(s["coverage"])
    # of the four pairs only (restart, policy) is one the pack uses, weighted by IDF
    pair_w = [idf["restart"] + idf["policy"], idf["policy"] + idf["nomad"],
              idf["nomad"] + idf["job"], idf["job"] + idf["work"]]
    assert s["pack_pairs"] == pytest.approx(pair_w[0] / sum(pair_w))


def test_section_coverage_is_the_best_single_section():
    q = "restart policy liveness probe"
    s = gate.signals(q, [0.6], TOP, VOCAB, 0.42)
    idf = {t: VOCAB.idf(stem(t)) for t in ("restart", "policy", "liveness", "probe")}
    assert s["coverage"] == pytest.approx(1.0)  # the two sections together cover everything
    assert s["section_coverage"] == pytest.approx(
        max(idf["restart"] + idf["policy"], idf["liveness"] + idf["probe"]) / sum(idf.values()))
    assert s["pack_pairs"] < 1.0  # (policy, liveness) is not a pair of the pack


def test_pair_hashes_round_trip_and_unknown_pairs_count_as_seen():
    hashes = gate.text_pairs("The restart policy; the liveness probe of pods")
    assert hashes == {gate.pair_hash("restart", "polici"), gate.pair_hash("polici", "live"),
                      gate.pair_hash("live", "probe"), gate.pair_hash("probe", "pod")}
    assert list(gate.decode_pairs(gate.encode_pairs(hashes | hashes))) == sorted(hashes)
    v = gate.Vocabulary({"restart": 1}, 1, gate.decode_pairs(gate.encode_pairs(hashes)))
    assert v.has_pair("live", "probe") and not v.has_pair("probe", "live")
    assert gate.Vocabulary({}, 1).has_pair("any", "pair")  # pairs unknown: never a penalty


def test_signals_without_candidates_or_terms():
    s = gate.signals("the of and", [], [], VOCAB, 0.42)
    assert s == {"similarity": -0.42, "margin": 0.0, "coverage": 0.0, "section_coverage": 0.0,
                 "unknown": 0.0, "specific": 0.0, "pairs": 1.0, "pack_pairs": 1.0,
                 "names": 0.0, "doc_specific": 0.0, "doc_rare_names": 0.0, "small": 0.0}


def test_small_counts_only_in_a_small_technical_pack():
    q = "How do I restart a pod?"

    def small(sections: int, code: int) -> float:
        vocab = gate.Vocabulary(dict(VOCAB.df), sections, VOCAB.pairs, code_sections=code)
        return gate.signals(q, [0.6], TOP, vocab, 0.42)["small"]

    assert small(500, 250) == pytest.approx(math.log(gate.SMALL_PACK / 500))
    assert small(500, 25) == pytest.approx(0.5 * math.log(gate.SMALL_PACK / 500))  # half code
    assert small(500, 0) == 0.0  # prose: XQuAD (312 sections) is calibrated as it is
    # below the smallest pack measured, no larger than there
    top = math.log(gate.SMALL_PACK / gate.SMALLEST_MEASURED)
    assert small(6, 6) == small(gate.SMALLEST_MEASURED, 100) == pytest.approx(top)
    assert small(gate.SMALL_PACK, gate.SMALL_PACK) == 0.0  # the calibration packs: unchanged
    assert small(50_000, 20_000) == 0.0
    assert gate.smallness(0) == 0.0
    # the shipped weight raises a small pack's confidence, never lowers it
    assert gate.params_for(gate.MINILM)["weights"]["small"] > 0


def test_the_shipped_small_weight_is_the_one_chosen_on_the_current_gates_signals():
    """`small`'s weight is chosen by benchmarks/gate_small_packs.py on the signals of the
    gate shipped: the weight in gate.CALIBRATED is the one its results file records as
    chosen on dev, and its provenance names the gate version it was chosen on (a refit
    that changes the signals must choose it again)."""
    import re
    from pathlib import Path

    results = (Path(__file__).resolve().parents[1] / "benchmarks" / "results"
               / "gate_small_packs.md").read_text(encoding="utf-8")
    chosen = re.search(r"weight of `small` chosen on dev: ([0-9.]+)", results)
    assert chosen, "benchmarks/results/gate_small_packs.md records no chosen weight"
    params = gate.params_for(gate.MINILM)
    assert params["weights"]["small"] == pytest.approx(float(chosen.group(1)))
    provenance = params["calibration"].split("small:", 1)[1]
    assert "gate_small_packs.py" in provenance and gate.GATE_VERSION in provenance


def test_technical_signals_count_only_in_a_pack_with_code():
    q = "Can HAProxy or Nomad restart a Pod with its Kubelet and Restart policy?"
    prose = gate.signals(q, [0.6], TOP, VOCAB, 0.42)
    # "HAProxy" is in 1 section of 100, "Kubelet" in 2 (rare, even though the top sections
    # write it), "Restart" in 5: rare; "Pod" in 40 is not, "Nomad" in none is `unknown`
    df = {**VOCAB.df, "haproxi": 1}
    assert gate.rare_names(q, gate.Vocabulary(df, 100)) == ["HAProxy", "Kubelet", "Restart"]
    assert prose["specific"] == 2.0  # HAProxy and Nomad are not in the top sections
    assert prose["doc_specific"] == prose["doc_rare_names"] == 0.0  # a prose pack
    half = gate.Vocabulary(df, 100, VOCAB.pairs, code_sections=5)
    full = gate.Vocabulary(df, 100, VOCAB.pairs, code_sections=60)
    assert (half.technical, full.technical) == (0.5, 1.0)
    assert gate.Vocabulary({}, 0).technical == 0.0
    assert gate.Vocabulary({}, 10, code_sections=-3).technical == 0.0  # a bad count: prose
    s = gate.signals(q, [0.6], TOP, full, 0.42)
    assert s["doc_specific"] == 2.0 and s["doc_rare_names"] == gate.MAX_NAMES
    assert gate.signals(q, [0.6], TOP, half, 0.42)["doc_specific"] == 1.0
    # a large pack's "few sections" grow with it: 0.1% of 50,000 is 50
    big = gate.Vocabulary({"haproxi": 40}, 50_000)
    assert gate.rare_names("Does HAProxy do it?", big) == ["HAProxy"]
    assert gate.rare_names("Does HAProxy do it?", gate.Vocabulary({"haproxi": 40}, 100)) == []
    # letters only: code-like and lower-case words are not names
    assert gate.rare_names("Is kubelet or GOMAXPROCS_2 or x86 rare?",
                           gate.Vocabulary({"kubelet": 1, "gomaxprocs_2": 1, "x86": 1}, 9)) == []


def test_code_sections_are_those_with_a_fence():
    assert gate.has_code("Install\n\n```shell\nkubectl apply\n```")
    assert gate.has_code("Steps\n  ~~~\ncode\n  ~~~")
    assert not gate.has_code("Use `kubectl` inline, or write ``` in a sentence.")
    assert gate.count_vocabulary(["a\n```\nx\n```", "b", "c\n~~~\ny"]).code_sections == 2


def test_vocabulary_counts_each_term_once_per_section(tmp_path):
    v = gate.count_vocabulary(["Pods and pods", "Pod restart", "node"])
    assert v.sections == 3 and v.df == {"pod": 2, "and": 1, "restart": 1, "node": 1}
    assert list(v.pairs) == sorted({gate.pair_hash("pod", "pod"),
                                    gate.pair_hash("pod", "restart")})
    # the build counts with polars; it must agree with the reader's pure-Python count
    import json

    from tasks.publish.tables import write_terms

    texts = ["Pods and pods", "Pod restart\nclasses of status", "node\n```\nrun\n```"]
    pl.DataFrame({"heading_path": ["", "", ""], "content": texts}).write_parquet(
        tmp_path / "sections.parquet")
    raw = json.loads(write_terms(tmp_path / "sections.parquet", tmp_path / "t.json").read_text())
    counted = gate.count_vocabulary(f"\n{t}" for t in texts)
    assert raw["sections"] == 3 and raw["terms"] == counted.df
    assert raw["code_sections"] == counted.code_sections == 1
    assert list(gate.decode_pairs(raw["pairs"])) == list(counted.pairs)
    # "of" is a stop word; "classes" and "status" are Porter stems "class" and "statu"
    assert raw["text_rules"] == TEXT_RULES_VERSION
    assert list(counted.pairs) == sorted(gate.pair_hash(a, b) for a, b in (
        ("pod", "pod"), ("pod", "restart"), ("restart", "class"), ("class", "statu"),
    ("node", "run")))


PARAMS = GateInfo(version=gate.GATE_VERSION, bias=-1.0, cut=0.5,
                  weights={"similarity": 10.0, "coverage": 2.0})


def test_decide_uses_the_calibrated_model_unless_a_threshold_is_given():
    q = "How does the restart policy work?"
    verdict = gate.decide(q, [0.62], TOP, lambda: VOCAB, PARAMS, None, 0.42)
    z = -1.0 + 10 * 0.2 + 2 * verdict["signals"]["coverage"]
    assert verdict["rule"] == "calibrated" and verdict["passed"]
    assert verdict["confidence"] == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-4)
    low = gate.decide(q, [0.2], TOP, lambda: VOCAB, PARAMS, None, 0.42)
    assert not low["passed"] and not low["calibrated_passed"]
    # an explicit threshold: the plain similarity rule decides, the verdict is still there
    forced = gate.decide(q, [0.2], TOP, lambda: VOCAB, PARAMS, -1.0, 0.42)
    assert forced["rule"] == "similarity" and forced["passed"]
    assert not forced["calibrated_passed"]
    assert not gate.decide(q, [], [], lambda: VOCAB, PARAMS, -1.0, 0.42)["passed"]


def test_a_question_about_the_whole_pack_passes_at_a_lower_cut():
    """A list question's items are spread over the pack, so no one section is close to it:
    it passes at WHOLE_PACK_CUT of the cut, a question about one thing at the cut."""
    flat = GateInfo(version=gate.GATE_VERSION, bias=-0.2, cut=0.5, weights={})  # p = 0.45
    one = gate.decide("How does the restart policy work?", [0.3], TOP, lambda: VOCAB, flat,
                      None, 0.42)
    listed = gate.decide("Which restart policies do the docs name?", [0.3], TOP,
                         lambda: VOCAB, flat, None, 0.42)
    assert one["confidence"] == listed["confidence"] == pytest.approx(0.4502, abs=1e-4)
    assert not one["passed"] and one["cut"] == 0.5
    assert listed["passed"] and listed["cut"] == pytest.approx(0.5 * gate.WHOLE_PACK_CUT)


def test_a_question_that_asks_two_things_passes_at_a_lower_cut():
    """Two things asked are often answered on two pages, each holding half the question's
    terms: such a question passes at PARTS_CUT of the cut; the same words asked as one
    question, or a second clause that asks nothing, keep the cut."""
    flat = GateInfo(version=gate.GATE_VERSION, bias=-0.2, cut=0.5, weights={})  # p = 0.45

    def verdict(question):
        return gate.decide(question, [0.3], TOP, lambda: VOCAB, flat, None, 0.42)

    two = verdict("How does the restart policy work, and which node runs the pod?")
    one = verdict("How does the restart policy work on the node that runs the pod?")
    assert two["confidence"] == one["confidence"]
    assert two["passed"] and two["cut"] == pytest.approx(0.5 * gate.PARTS_CUT)
    assert not one["passed"] and one["cut"] == 0.5
    # below the lower cut it is refused all the same
    low = GateInfo(version=gate.GATE_VERSION, bias=-1.5, cut=0.5, weights={})  # p = 0.18
    assert not gate.decide("How does the restart policy work, and which node runs the pod?",
                           [0.3], TOP, lambda: VOCAB, low, None, 0.42)["passed"]


def test_a_whole_pack_question_the_pack_writes_the_words_of_passes_whatever_its_confidence():
    """A list's items are spread thin, so no section comes close to the question: it passes
    when the pack writes every term of it and some of its word pairs, not when a term is
    unknown to the pack or its words are never written together; a question about one
    thing never passes this way."""
    listed = "List every restart policy a pod container can have."
    one = "How does the restart policy of a pod container work?"
    known = {t: 3 for q in (listed, one) for t in gate.question_terms(q)}
    paired = gate.Vocabulary(known, 100, [gate.pair_hash(stem("restart"), stem("policy"))])
    unpaired = gate.Vocabulary(known, 100, [])
    low = GateInfo(version=gate.GATE_VERSION, bias=-5.0, cut=0.5, weights={})  # p = 0.0067

    def verdict(question, vocab):
        return gate.decide(question, [0.3], TOP, lambda: vocab, low, None, 0.42)

    passed = verdict(listed, paired)
    assert passed["passed"] and passed["writes_subject"]
    assert passed["confidence"] < passed["cut"]  # it passed on the pack's words
    assert not verdict(listed, unpaired)["passed"]  # no pair of its words in the pack
    absent = verdict(listed.replace("pod", "Nomad"), paired)  # a word the pack lacks
    assert absent["signals"]["unknown"] > 0 and not absent["passed"]
    single = verdict(one, paired)
    assert not single["passed"] and not single["writes_subject"]
    assert not gate.decide(listed, [], [], lambda: paired, low, None, 0.42)["passed"]


def test_a_whole_pack_question_with_a_plain_word_the_pack_lacks_passes_but_not_a_name():
    """A user's own word ("rundown") is not the pack's: the question still passes when most
    of its pairs are in the pack; a name the pack lacks ("Nomad") is another subject."""
    listed = "List every restart policy a pod container can have."
    plain = "List every restart policy a pod container can have, in a rundown."
    named = listed.replace("pod", "Nomad")
    known = {t: 3 for t in gate.question_terms(listed)}
    pairs = [gate.pair_hash(stem(a), stem(b)) for a, b in
             (("restart", "policy"), ("policy", "pod"), ("pod", "container"))]
    vocab = gate.Vocabulary(known, 100, pairs)
    low = GateInfo(version=gate.GATE_VERSION, bias=-5.0, cut=0.5, weights={})

    def verdict(question):
        return gate.decide(question, [0.3], TOP, lambda: vocab, low, None, 0.42)

    mended = verdict(plain)
    assert 0 < mended["signals"]["unknown"] <= gate.WHOLE_PACK_UNKNOWN
    assert mended["passed"] and mended["writes_subject"]
    other = verdict(named)
    assert 0 < other["signals"]["unknown"] <= gate.WHOLE_PACK_UNKNOWN
    assert not other["passed"]


def _manifest(model: str, **extra) -> Manifest:
    return Manifest(name="p", build_id="b", built_at="2026-01-01T00:00:00Z",
                    embedding=EmbeddingInfo(model=model, dim=4),
                    extractor=ExtractorInfo(kind="offline"), kuzu_version="0.11.3",
                    query_module_version="0", **extra)


def test_the_manifest_carries_its_models_gate(tmp_path):
    """The manifest holds the gate's parameters as data; retrieval (gate.params_of) decides
    whether they still fit this gate, else uses the current calibration of the model."""
    m = _manifest(gate.MINILM, gate=gate.gate_info(gate.MINILM))  # as the build writes it
    assert m.gate.weights == gate.CALIBRATED[gate.MINILM]["weights"]
    assert gate.params_of(m) == m.gate
    other = gate.gate_info("BAAI/bge-base-en-v1.5")
    assert other.weights == m.gate.weights and "not calibrated" in other.calibration
    m.write(tmp_path)
    from packs.manifest import read_manifest

    assert read_manifest(tmp_path).gate == m.gate
    custom = _manifest(gate.MINILM, gate=PARAMS)  # a manifest's own values win
    assert gate.params_of(custom) == PARAMS
    # ... unless they were fitted to another gate version's signals, or there are none (a
    # pack from before format 3): the model's current calibration replaces them
    older = _manifest(gate.MINILM, gate=PARAMS.model_copy(update={"version": "gate-v2"}))
    assert older.gate.version == "gate-v2"  # reading keeps the data as written
    assert gate.params_of(older) == gate.gate_info(gate.MINILM)
    assert _manifest(gate.MINILM).gate is None
    assert gate.params_of(_manifest(gate.MINILM)).version == gate.GATE_VERSION


def test_a_tiny_technical_pack_gets_a_bounded_lift(tmp_path):
    """The six-section garden pack (with code) answers its own question and still gates
    one none of whose words it uses: its `small` lift is the 130-section one, not ln(1000/6)."""
    from packs import KnowledgePack
    from packs.embedding import Embedder
    from tests.test_packset import GARDEN, build_small_pack

    folder = build_small_pack(tmp_path, "garden", "https://garden.test", GARDEN,
                              Embedder("all-MiniLM-L6-v2"))
    with KnowledgePack.open(folder) as pack:
        own = pack.search("How often should I water tomatoes?")
        other = pack.search("How long do I knead bread dough?")
    top = math.log(gate.SMALL_PACK / gate.SMALLEST_MEASURED)
    assert own.gate["signals"]["small"] == other.gate["signals"]["small"] == pytest.approx(
        top, abs=1e-4)
    assert own.gate["passed"] and not other.gate["passed"]


def test_a_pack_reads_its_pair_hashes_and_counts_them_when_missing(tmp_path):
    """The vocabulary a built pack serves equals the one counted from its sections, whether
    tables/terms.json carries the pair hashes or predates them."""
    import json

    from packs import KnowledgePack
    from packs import format as fmt
    from packs.embedding import Embedder
    from tests.test_packset import GARDEN, build_small_pack

    folder = build_small_pack(tmp_path, "garden", "https://garden.test", GARDEN,
                              Embedder("all-MiniLM-L6-v2"))
    build = folder / fmt.BUILDS_DIR / "b0001"
    with KnowledgePack.open(folder) as pack:
        stored = pack.vocabulary()
        counted = gate.count_vocabulary(pack.db.section_texts())
    assert stored.df == counted.df and list(stored.pairs) == list(counted.pairs)
    assert stored.code_sections == counted.code_sections >= 2  # two pages show code
    assert len(stored.pairs) > 20
    terms_file = build / fmt.TABLES_DIR / fmt.TERMS_FILE
    raw = json.loads(terms_file.read_text())
    del raw["code_sections"]  # a format-3 pack written before the code count
    _rewrite(build, terms_file, raw)
    with KnowledgePack.open(folder) as pack:
        assert pack.vocabulary().code_sections == counted.code_sections
    del raw["pairs"]  # ... and before the pair hashes
    _rewrite(build, terms_file, raw)
    with KnowledgePack.open(folder) as pack:
        assert list(pack.vocabulary().pairs) == list(counted.pairs)


def _rewrite(build, terms_file, raw: dict) -> None:
    """Write an older pack's terms.json, and its manifest's checksums with it."""
    import json

    from packs import format as fmt
    terms_file.write_text(json.dumps(raw))
    from packs import integrity  # that older pack's manifest lists this terms.json

    manifest_file = build / fmt.MANIFEST_FILE
    manifest = json.loads(manifest_file.read_text())
    manifest["checksums"] = integrity.checksums(build)
    manifest_file.write_text(json.dumps(manifest))


def test_words_that_name_the_corpus_itself_are_no_terms_of_the_question():
    # "the book", "the docs" and the verb after them are about the pack: the pack's sections
    # never hold them, and a list question phrased so was refused.
    keys = ("coverage", "unknown", "pairs")
    for asked, plain in (
            ("Which restart policy does the book say a pod uses?",
             "Which restart policy does a pod use?"),
            ("According to the docs, which restart policy does a pod use?",
             "Which restart policy does a pod use?"),
            ("Which restart policy does the documentation describe for a pod?",
             "Which restart policy for a pod?")):
        said = gate.signals(asked, [0.6], TOP, VOCAB, 0.42)
        bare = gate.signals(plain, [0.6], TOP, VOCAB, 0.42)
        assert {k: said[k] for k in keys} == {k: bare[k] for k in keys}, asked
    # Without the corpus named, the same words count.
    book = gate.signals("Which book covers a pod restart policy?", [0.6], TOP, VOCAB, 0.42)
    assert book["unknown"] > 0


def test_a_refused_question_asking_two_things_is_searched_part_by_part():
    """parts_to_search: the parts of a refused question that asks two things, not of one
    that passed, asks one thing or is read as whole-pack; with_parts: it passes when every
    part does, and an explicit threshold's verdict stays that rule's."""
    refused = {"rule": "calibrated", "passed": False, "calibrated_passed": False}
    two = "Which port does the scheduler use, and which command lists the dead jobs?"
    assert gate.parts_to_search(two, refused) == ["Which port does the scheduler use",
                                                  "which command lists the dead jobs?"]
    assert gate.parts_to_search(two, {**refused, "calibrated_passed": True}) == []
    assert gate.parts_to_search("Which port does the scheduler use?", refused) == []
    assert gate.parts_to_search("Which restart policies do the docs name?", refused) == []
    ok, no = ({"confidence": c, "cut": 0.46, "calibrated_passed": c >= 0.46} for c in (0.9, 0.1))
    both = gate.with_parts(refused, [ok, ok])
    assert both["passed"] and both["calibrated_passed"] and len(both["parts"]) == 2
    assert gate.parts_to_search(two, both) == []  # searched once
    half = gate.with_parts(refused, [ok, no])
    assert not half["passed"] and not half["calibrated_passed"]
    assert [p["passed"] for p in half["parts"]] == [True, False]
    plain = gate.with_parts({**refused, "rule": "similarity"}, [ok, ok])
    assert plain["calibrated_passed"] and not plain["passed"]
