"""The learned reader (packs/retrieval/reader.py, reader_features.py) on tiny hand-made
inputs: the shipped weights load and score, a fit beats a trivial model, identifiers meet
their split forms, a question about two things gets a unit for each, a value in a heading
is shown with the quote. No real data and no retraining on it."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from benchmarks import reader_fit
from packs.retrieval import asks, code_units, extractive, reader, unit_vectors, units
from packs.retrieval import reader_features as rf
from packs.retrieval.units import Unit
from packs.text import stem, terms


def test_the_shipped_weights_load_and_score():
    model = reader.load()
    assert model.version.startswith("reader-") and "/" in model.version
    # Every unit's similarity from the pack's unit vectors, and a plain model without it.
    assert model.first.features == (*rf.FEATURES, *unit_vectors.FEATURES) and model.reads_units
    assert model.plain is not None and model.plain.features == rf.FEATURES
    # The second model (unit similarity) ships only when cross-validation says it helps.
    assert model.second is None or model.second.features[-3:] == rf.SIM_FEATURES
    passages = [rf.Passage("Pods are the smallest deployable units. A pod holds containers.",
                           heading="Pods", title="Pods", similarity=0.6, rank=0)]
    units = extractive.units_of("What is a pod?", passages)
    ranked = reader.rank(model, rf.analyse("What is a pod?"), passages, units,
                         similarity=lambda idx, texts: np.full(len(texts), 0.5))
    assert ranked and all(np.isfinite(s.score) for s in ranked)
    assert len(ranked) == (min(len(units), model.limits.top_n) if model.second else len(units))
    with_sims = reader.rank(model, rf.analyse("What is a pod?"), passages, units,
                            unit_sims=np.linspace(0.1, 0.9, len(units)))
    assert len(with_sims) == len(ranked) and all(np.isfinite(s.score) for s in with_sims)


def test_weights_for_other_features_are_refused(tmp_path):
    raw = json.loads(reader.WEIGHTS_FILE.read_text())
    raw["features_version"] = "reader-features-v0"
    with pytest.raises(reader.ReaderWeightsError, match="retrain"):
        reader.parse(json.dumps(raw).encode())
    raw = json.loads(reader.WEIGHTS_FILE.read_text())
    raw["first"]["weights"] = raw["first"]["weights"][:-1]
    with pytest.raises(reader.ReaderWeightsError, match="other lengths"):
        reader.parse(json.dumps(raw).encode())
    with pytest.raises(reader.ReaderWeightsError, match="cannot read"):
        reader.load(tmp_path / "missing.json")


def test_a_fit_beats_a_trivial_model_on_a_tiny_fixture():
    # Twenty questions of eight units each; the unit that answers is the one with the
    # highest first feature, plus noise a trivial (all-zero) model cannot see through.
    rng = np.random.default_rng(0)
    names = ("signal", "noise")
    blocks, targets = [], []
    for _ in range(40):
        x = rng.normal(size=(8, 2))
        answer = int(np.argmax(x[:, 0] + 0.3 * rng.normal(size=8)))
        t = np.zeros(8)
        t[answer] = 1.0
        blocks.append(x)
        targets.append(t)
    fitted = reader_fit.fit_logit(blocks[:20], targets[:20], [1.0] * 20, 1.0, names)
    assert fitted.weights[0] > 1.0 > abs(fitted.weights[1])

    def top1(model: reader.Model) -> float:
        return float(np.mean([np.argmax(model.score(x)) == np.argmax(t)
                              for x, t in zip(blocks[20:], targets[20:])]))

    trivial = reader.Model(names, np.zeros(2), np.ones(2), np.zeros(2))
    assert top1(fitted) >= 0.6 > top1(trivial)


def test_a_missed_gold_group_is_placed_by_the_rank_of_the_best_unit_that_holds_it():
    from benchmarks.reader_data import Item
    n, col = 12, rf.FEATURES.index("weighted_coverage")
    x = np.zeros((n, len(rf.FEATURES)), dtype=np.float32)
    x[:, col] = np.arange(n, 0, -1)  # unit k is ranked k-th (from 0)
    weights = np.zeros(len(rf.FEATURES))
    weights[col] = 1.0
    model = reader.Reader("t", reader.Model(rf.FEATURES, np.zeros(len(rf.FEATURES)),
                                            np.ones(len(rf.FEATURES)), weights), None,
                          reader.Limits())
    golds = [["alpha"], ["beta"], ["gamma"], ["delta"], ["omega"]]
    hits = [[] for _ in range(n)]
    hits[1], hits[6], hits[11], hits[4] = [0], [1], [2], [1]  # beta: ranked 5th at best
    it = Item("q", "kubernetes", "page", "?", golds, "value", x, np.zeros(n), np.zeros(n),
              hits, [f"u{k}" for k in range(n)],
              [(0, Unit(10 * k, 10 * k + 5, "sentence", f"u{k}")) for k in range(n)])
    assert reader_fit.missed_places(model, it, "- omega [1]") == [
        "ranked 1-3", "ranked 4-10", "ranked below 10", "in no unit read"]
    assert reader_fit.missed_places(model, it, "- alpha beta gamma delta omega") == []


def test_of_two_units_that_hold_the_gold_the_fit_teaches_the_shorter_more():
    """reader_fit.cases: a gold-holding unit of n words is taught n^-concise as much, so
    the reader learns to prefer the short quote that says it (an answer has room for more
    of them); concise 0 teaches them alike, and a unit without the gold is taught nothing."""
    from benchmarks.reader_data import Item
    texts = ["The default is 10 seconds.",
             " ".join(["The probe runs every 10 seconds by default"] + ["and more"] * 20),
             "Probes have fields."]
    n = len(texts)
    units = [(0, Unit(100 * k, 100 * k + len(t), "sentence", t)) for k, t in enumerate(texts)]
    it = Item("q", "kubernetes", "page", "How often?", [["10 seconds"]], "number",
              np.zeros((n, len(rf.FEATURES)), dtype=np.float32), np.zeros(n),
              np.asarray([1.0, 1.0, 0.0]), [[0], [0], []], texts, units)
    (_, _, taught, _), = reader_fit.cases([it])
    assert taught[0] > taught[1] > 0 == taught[2]
    assert taught[0] / taught[1] == pytest.approx((5 / 48) ** -reader_fit.CONCISE)
    (_, _, alike, _), = reader_fit.cases([it], concise=0.0)
    assert list(alike) == [1.0, 1.0, 0.0]


def test_a_refit_can_keep_the_shipped_penalty_and_limits(tmp_path):
    from benchmarks import train_reader
    l2, limits, why = train_reader.kept_limits(reader.WEIGHTS_FILE)
    shipped = reader.load()
    assert limits == shipped.limits and l2 > 0 and why.startswith("kept from the weights")
    broken = tmp_path / "weights.json"
    broken.write_text('{"limits": {}}', encoding="utf-8")
    with pytest.raises(SystemExit, match="no penalty and limits to keep"):
        train_reader.kept_limits(broken)


@pytest.mark.parametrize("identifier, want", [
    ("FOO_BAR=x=1", ("foo_bar",)), ("--max-surge=25%", ("--max-surge",)),
    ("net.Dial", ("dial",)), ("Vec::new()", ("new", "vec::new")),
    ("pack.toml", ()), ("apps/v1", ()), ("maxSurge", ())])
def test_identifiers_and_their_split_forms(identifier, want):
    assert rf.forms(identifier) == want


def test_a_name_asked_with_its_value_meets_the_bare_name():
    question = "What does setting GODEBUG=http2client=0 do?"
    passages = [rf.Passage("The `GODEBUG` variable controls runtime debugging. Setting "
                           "`http2client=0` turns off HTTP/2 for clients.", rank=0)]
    q = rf.analyse(question)
    assert ("godebug=http2client=0", ("godebug",)) in q.idents
    units = extractive.units_of(question, passages)
    x = rf.features(q, passages, units)
    part = x[:, rf.FEATURES.index("ident_part")]
    assert part[0] > 0  # "The `GODEBUG` variable ..." writes the name without its value


def test_a_question_about_two_things_gets_a_unit_for_each():
    units = [(0, Unit(0, 1, "sentence", "A liveness probe restarts the container.")),
             (0, Unit(2, 3, "sentence", "A liveness probe runs every ten seconds.")),
             (1, Unit(0, 1, "sentence", "A readiness probe removes the pod from Services."))]
    weights = {stem("liveness"): 1.0, stem("readiness"): 1.0, "probe": 0.2}  # term weights
    ranked = [reader.Scored(0, 3.0), reader.Scored(1, 2.9), reader.Scored(2, 1.5)]
    no_cover = reader.Limits(margin=2.0, cover=0.0, max_units=2)
    assert [s.index for s in reader.pick(ranked, units, weights, no_cover)] == [0, 1]
    cover = reader.Limits(margin=2.0, cover=4.0, max_units=2)
    assert [s.index for s in reader.pick(ranked, units, weights, cover)] == [0, 2]


def test_a_value_in_the_heading_is_shown_with_the_quote():
    passage = rf.Passage("The feature became stable in this release.",
                         heading="Release notes > Kubernetes v1.31", title="Release notes")
    question = "In which version did the feature become stable?"
    unit = extractive.units_of(question, [passage])[0][1]
    text = extractive.bullet(question, unit, passage.content[unit.start:unit.end], passage)
    assert text == "*Release notes > Kubernetes v1.31*: The feature became stable in this release."
    # Not when the unit says it itself, nor when the question asks for no such value.
    said = rf.Passage("It became stable in v1.31.", heading=passage.heading)
    unit = extractive.units_of(question, [said])[0][1]
    assert not extractive.bullet(question, unit, said.content, said).startswith("*")
    assert extractive.heading_value("Why did it become stable?", unit, said.content,
                                    passage) is None
    # A heading in title case names no person or place: "where ..." shows none of it.
    titled = rf.Passage("Rust puts the keyword after the expression.",
                        heading="Futures and the Async Syntax > Our First Async Program")
    unit = extractive.units_of("Where does Rust put the await keyword?", [titled])[0][1]
    assert extractive.heading_value("Where does Rust put the await keyword?", unit,
                                    titled.content, titled) is None
    plain = rf.Passage("The team moved there in 1921.", heading="Later years in Paris")
    unit = extractive.units_of("Where did the team move?", [plain])[0][1]
    assert extractive.heading_value("Where did the team move?", unit, plain.content,
                                    plain) == "Later years in Paris"


def test_a_list_question_gets_the_list_in_place_of_one_of_its_items():
    text = ("The cluster starts with three namespaces:\n\n"
            "- `default`: where objects go when no namespace is given.\n"
            "- `kube-system`: for objects the system creates.\n"
            "- `kube-public`: readable by everyone.\n")
    passages = [rf.Passage(text, rank=0)]
    question = "Which namespaces does a cluster start with?"
    units = extractive.units_of(question, passages)
    lead = next(k for k, (_, u) in enumerate(units) if u.kind == "leadin")
    item = next(k for k, (_, u) in enumerate(units) if u.display.startswith("`default`"))
    ranked = [reader.Scored(item, 3.0), reader.Scored(lead, 2.5)]
    limits = reader.Limits(margin=2.0)
    assert [s.index for s in reader.pick(ranked, units, {}, limits)] == [item]
    assert [s.index for s in reader.pick(ranked, units, {}, limits, listing=True)] == [lead]


def test_a_list_whose_brief_cuts_the_picked_item_does_not_take_its_place():
    # A long list is read as its brief, each item cut to its head; the list in place of
    # the item picked would cut the value the item carries ("... are `3.4.22+` and ...").
    text = ("Key details include:\n\n"
            "- The minimum recommended etcd versions to run in production are `3.4.22+` and "
            "`3.5.6+`.\n"
            "- etcd is a leader-based distributed system. Ensure that the leader periodically "
            "sends heartbeats on time to all followers to keep the cluster stable.\n"
            "- You should run etcd as a cluster with an odd number of members, so that a "
            "majority of them can always agree on the state.\n"
            "- Keep the etcd data directory on a fast disk that no other process writes to "
            "heavily, since slow writes delay every request.\n")
    question = "What are the etcd versions recommended for production?"
    units = extractive.units_of(question, [rf.Passage(text, rank=0)])
    lead = next(k for k, (_, u) in enumerate(units) if u.kind == "leadin")
    item = next(k for k, (_, u) in enumerate(units) if "3.4.22+" in u.display)
    assert "3.4.22+" not in units[lead][1].display  # the brief: heads only
    ranked = [reader.Scored(item, 3.0), reader.Scored(lead, 2.5)]
    picked = reader.pick(ranked, units, {}, reader.Limits(margin=2.0), listing=True)
    assert [s.index for s in picked] == [item]


def test_program_output_and_urls_are_told_apart_from_commands():
    text = ("The output is similar to this:\n\n```\ndeployment.apps/nginx rolled back\n```\n\n"
            "Roll back to the previous revision with:\n\n"
            "```shell\nkubectl rollout undo deployment/nginx\n```\n")
    passages = [rf.Passage(text, rank=0)]
    units = extractive.units_of("How do I roll back a Deployment?", passages)
    x = rf.features(rf.analyse("How do I roll back a Deployment?"), passages, units)
    output = {u.display.split("\n")[0]: bool(v)
              for (_, u), v in zip(units, x[:, rf.FEATURES.index("output")])}
    assert output["deployment.apps/nginx rolled back"] is True
    assert output["kubectl rollout undo deployment/nginx"] is False
    assert output["Roll back to the previous revision with:"] is False
    # A how-to question: the command is marked as one, not the output it prints.
    command = {u.display.split("\n")[0]: bool(v)
               for (_, u), v in zip(units, x[:, rf.FEATURES.index("howto_command")])}
    assert command["kubectl rollout undo deployment/nginx"] is True
    assert command["deployment.apps/nginx rolled back"] is False
    what = rf.features(rf.analyse("What does a rollback print?"), passages, units)
    assert not what[:, rf.FEATURES.index("howto_command")].any()
    # Words of a URL are no words of the passage.
    cmd = Unit(0, 1, "code", "kubectl apply -f https://k8s.io/examples/memory-limit.yaml")
    assert rf.unit_terms_of(cmd) == terms("kubectl apply -f")
    assert "limit" in terms(cmd.display) and "limit" not in rf.unit_terms_of(cmd)


@pytest.mark.parametrize("code, want", [
    ("kubectl rollout undo deployment/x --to-revision=2", True),
    ("# on a control plane node\n$ kubectl drain <node> --ignore-daemonsets", True),
    ("cargo build --release", True),
    ("let x = 5;", False),
    ("fn main() {\n    println!(\"hi\");\n}", False),
    ("mod front_of_house {", False),
    ("effect: NoExecute", False),
    ("node/ip-10-0-0-1 cordoned", False),
    ("NAME    READY   STATUS", False),
])
def test_a_command_line_is_told_from_code_yaml_and_output(code, want):
    assert code_units.is_command(Unit(0, 1, "code", code)) is want
    lead = Unit(0, 1, "leadin", "Run:\n" + code, inner="code")
    assert code_units.is_command(lead) is want
    assert code_units.is_command(Unit(0, 1, "sentence", code)) is False


def test_the_same_command_on_several_pages_is_quoted_once():
    one = Unit(0, 9, "code", "# on a control plane node\nkubectl drain <node> --ignore-daemonsets")
    two = Unit(0, 9, "code", "kubectl drain <node>   --ignore-daemonsets")
    other = Unit(0, 9, "code", "kubectl uncordon <node>")
    units = [(0, one), (1, two), (2, other)]
    ranked = [reader.Scored(0, 3.0), reader.Scored(1, 2.9), reader.Scored(2, 2.8)]
    assert [s.index for s in reader.pick(ranked, units, {}, reader.Limits())] == [0, 2]


def test_a_unit_that_says_a_picked_one_and_more_takes_its_place():
    # "`OrderedReady` pod management is the default." was picked from one page; the same
    # sentence with the one that says what it does, from another section, is no repeat
    # to skip: it is quoted instead.
    short = Unit(0, 9, "sentence", "`OrderedReady` pod management is the default for StatefulSets.")
    whole = Unit(0, 9, "paragraph", "`OrderedReady` pod management is the default for "
                 "StatefulSets. It tells the controller to respect the ordering guarantees.")
    other = Unit(0, 9, "sentence", "`Parallel` pod management launches all Pods in parallel.")
    units = [(0, short), (1, other), (2, whole)]
    ranked = [reader.Scored(0, 3.0), reader.Scored(1, 2.9), reader.Scored(2, 2.8)]
    assert [s.index for s in reader.pick(ranked, units, {}, reader.Limits())] == [2, 1]


def test_a_what_happens_question_reads_the_conditions_of_units():
    text = ("A container may use memory up to its limit. If the container tries to allocate "
            "more memory than its limit, the kernel stops one of its processes. Limits "
            "are set per container.")
    passages = [rf.Passage(text, heading="Memory", title="Resources", similarity=0.6, rank=0)]
    q = "What happens when a pod goes over its memory limit?"
    units = extractive.units_of(q, passages)
    x = rf.features(rf.analyse(q), passages, units)
    col = {f: rf.FEATURES.index(f) for f in ("condition", "condition_asked")}
    by_text = {u.display: x[k] for k, (_, u) in enumerate(units)}
    conditional = next(v for d, v in by_text.items() if d.startswith("If the container"))
    plain = by_text["Limits are set per container."]
    assert conditional[col["condition"]] > 0.0 and plain[col["condition"]] == 0.0
    assert conditional[col["condition_asked"]] == conditional[col["condition"]]
    # Another kind of question has the condition but does not ask for a consequence.
    other = rf.features(rf.analyse("How much memory can a container use?"), passages, units)
    assert not other[:, col["condition_asked"]].any()


def test_what_happens_is_the_asking_not_a_term_to_match():
    # "If that happens, the final Pod will not be scheduleable." shares no term with what
    # the question is about; "happens" was its only match.
    q = rf.analyse("What happens when a pod goes over its memory limit?")
    assert q.happens and "happen" not in q.terms
    assert {"pod", "memori", "limit"} <= q.terms
    assert all("happen" not in pair for pair in q.pairs)
    # A question that does not ask what happens keeps the word.
    assert "happen" in rf.analyse("Which events happen during a rollout?").terms


def test_a_sentence_about_the_exercise_is_meta():
    passages = [rf.Passage("In this exercise, you create a Pod that uses too much memory. "
                           "The kernel kills the process.", similarity=0.5, rank=0)]
    q = "What happens when a pod uses too much memory?"
    units = extractive.units_of(q, passages)
    x = rf.features(rf.analyse(q), passages, units)
    meta = {u.display: x[k][rf.FEATURES.index("meta")] for k, (_, u) in enumerate(units)}
    assert meta["In this exercise, you create a Pod that uses too much memory."] == 1.0
    assert meta["The kernel kills the process."] == 0.0


def test_the_parts_of_a_difference_question_ask_what_each_thing_is():
    q = "What is the difference between a liveness and a readiness probe?"
    parts = asks.parts(q)
    assert len(parts) == 2
    assert parts == ["What is a liveness probe?", "What is a readiness probe?"]
    assert all(rf.analyse(p, q).what_is and rf.analyse(p).what_is for p in parts)
    # "How is A different from B?" and "How does A differ from B?" ask the same; a context
    # the pair shares ("in Rust") goes with both, and is no head noun of the first.
    assert asks.parts("How does a ReplicaSet differ from a ReplicationController?") == [
        "What is a ReplicaSet?", "What is a ReplicationController?"]
    assert asks.parts("How is an emptyDir volume different from a hostPath volume?") == [
        "What is an emptyDir volume?", "What is a hostPath volume?"]
    assert asks.parts("How is a const different from an immutable variable declared with "
                      "let?") == ["What is a const?",
                                  "What is an immutable variable declared with let?"]
    assert asks.parts("What's the difference between a statement and an expression in "
                      "Rust?") == ["What is a statement in Rust?", "What is an expression in Rust?"]
    # A difference with a second question after it is read by its clauses, not as a pair.
    assert "What is a Deployment" not in " ".join(asks.parts(
        "How does a DaemonSet differ from a Deployment, and when would I pick each?"))
    assert rf.analyse("What happens if I drop the receiver?").happens
    assert not rf.analyse("How do I drop the receiver?").happens


def test_a_part_is_ranked_on_what_it_asks_not_on_the_scene_set_before_it():
    q = ("Direct calls to the kubelet API and to etcd skip admission control. Which TCP port "
         "does the kubelet API listen on, and which etcd flags restrict its clients?")
    assert asks.parts(q) == ["Which TCP port does the kubelet API listen on",
                             "which etcd flags restrict its clients?"]
    # An imperative that names two things asks for each.
    q = ("How can a Windows Pod use the host network? Name the kubelet feature gate that "
         "allows it, and the minimum containerd version for HostProcess containers.")
    assert asks.parts(q)[1] == "the minimum containerd version for HostProcess containers."
    assert asks.parts("Name the Service types, and describe each.") == []


def test_a_question_in_two_sentences_or_with_a_clause_before_its_second_half_has_two_parts():
    # Two question sentences, the second opening with "And".
    q = ("Does the Cassandra StatefulSet start its Pods one after another? And in the Job "
         "expansion task, what does the `$ITEM` placeholder mean to Kubernetes?")
    assert asks.parts(q) == [
        "Does the Cassandra StatefulSet start its Pods one after another?",
        "in the Job expansion task, what does the `$ITEM` placeholder mean to Kubernetes?"]
    # ", and at which ...", and ", and <a clause>, which ...".
    assert asks.parts("Which port must the webhook Service expose, and at which path does the "
                      "API server serve its OpenAPI spec?")[1].startswith("at which path")
    assert asks.parts("Which ClusterConfiguration field passes extra flags to kube-apiserver, "
                      "and after the cluster exists, which ConfigMap holds that configuration?"
                      )[1].startswith("after the cluster exists, which ConfigMap")
    # A first half that asks about the scene before it keeps the scene.
    first = asks.parts("My gRPC probe on a named port doesn't work. Why not, and for an HTTP "
                       "probe, which response codes count as success?")[0]
    assert first == "My gRPC probe on a named port doesn't work. Why not"
    # "and" inside a thing, or a clause without a second question, splits nothing.
    assert asks.parts("In a namespace with a CPU and memory quota, what can happen to a Pod "
                      "that sets no limits?") == []
    assert asks.parts("How do I drain a node? I run kubectl 1.30.") == []


def test_program_output_is_marked_for_a_how_to_question():
    text = ("Roll back with this command:\n\n```shell\nkubectl rollout undo deployment/nginx\n```"
            "\n\nThe output is similar to this:\n\n```\ndeployment.apps/nginx rolled back\n```\n")
    passages = [rf.Passage(text, heading="Rolling back", title="Deployments", rank=0)]
    col = rf.FEATURES.index("howto_output")
    for q, want in (("How do I roll back a Deployment?", 1.0),
                    ("What does a rollback print?", 0.0)):
        units = extractive.units_of(q, passages)
        x = rf.features(rf.analyse(q), passages, units)
        got = {u.display: x[k][col] for k, (_, u) in enumerate(units) if u.kind == "code"}
        assert got == {"kubectl rollout undo deployment/nginx": 0.0,
                       "deployment.apps/nginx rolled back": want}, q


def test_emphasis_marks_no_word_of_a_unit():
    # "A _PersistentVolume_ (PV) is a piece of storage": the unit defines a PersistentVolume;
    # its word is not the token "_persistentvolume_". A code span keeps its underscores.
    assert rf.plain("A _PersistentVolume_ (PV) is a piece of storage") == (
        "A PersistentVolume (PV) is a piece of storage")
    assert rf.plain("a *bold* and **strong** word, snake_case kept") == (
        "a bold and strong word, snake_case kept")
    assert rf.plain("call `__init__` first") == "call `__init__` first"
    q = rf.analyse("What is a PersistentVolume?")
    assert rf._defines(q, rf.plain("A _PersistentVolume_ (PV) is a piece of storage."))


@pytest.mark.parametrize("question, nouns", [
    ("Which finalizer is holding it back?", {"finalizer"}),
    ("Which sysctl setting must be applied on each server?", {"sysctl", "setting"}),
    ("What is the minimum kernel version my nodes need?", {"minimum", "kernel", "version"}),
    ("Which directories does Cargo search?", {"directory"}),
    ("What happens when a pod goes over its memory limit?", set()),
    ("How do I drain a node?", set()),
])
def test_the_nouns_a_question_asks_for(question, nouns):
    assert rf.analyse(question).nouns == nouns


def test_code_that_names_or_has_the_form_of_what_is_asked():
    text = ("Kubernetes uses a finalizer to track this. The object lists "
            "`networking.k8s.io/service-cidr-finalizer` in its metadata. ZooKeeper keeps its "
            "configuration in a file named `zoo.cfg`. Run `kubectl get servicecidr` to see it.")
    passages = [rf.Passage(text, heading="Finalizers", title="Service CIDRs", similarity=0.6,
                           rank=0)]
    col = {f: rf.FEATURES.index(f) for f in ("noun_code", "noun_shape")}

    def by_text(question):
        units = extractive.units_of(question, passages)
        x = rf.features(rf.analyse(question), passages, units)
        return {u.display.split()[1]: x[k] for k, (_, u) in enumerate(units)
                if u.kind == "sentence"}

    finalizer = by_text("Which finalizer holds the ServiceCIDR back?")
    assert finalizer["object"][col["noun_code"]] == 1.0  # inside the code span
    assert finalizer["object"][col["noun_shape"]] == 1.0  # a/b: a finalizer's form
    assert finalizer["uses"][col["noun_code"]] == 0.0  # says "finalizer", writes no code
    assert finalizer["`kubectl"][col["noun_shape"]] == 0.0
    config = by_text("Which file holds ZooKeeper's configuration?")
    assert config["keeps"][col["noun_code"]] == 1.0  # "a file named `zoo.cfg`"
    assert config["keeps"][col["noun_shape"]] == 1.0
    assert config["object"][col["noun_code"]] == 0.0
    # A question that asks for no noun has neither.
    none = by_text("How do I see the ServiceCIDR?")
    assert not any(v[col["noun_code"]] or v[col["noun_shape"]] for v in none.values())


def test_a_block_of_configuration_or_output_is_not_the_field_or_version_asked():
    # Its keys name every field and its columns every version: only a command line and
    # code spans in prose are read for the noun a question asks for.
    config = "kind: Config\nleaderElection:\n  leaderElect: true\nprofiles: []"
    table = "NAME     STATUS   VERSION\nnode-1   Ready    v1.19.6"
    command = "kubectl get nodes --show-labels"
    passages = [rf.Passage(f"```\n{config}\n```\n\n```\n{table}\n```\n\n```\n{command}\n```\n",
                           similarity=0.5, rank=0)]
    col = [rf.FEATURES.index(f) for f in ("noun_code", "noun_shape")]
    for question in ("Which field must I set?", "Which version shipped it?",
                     "Which flag prints the labels?"):
        units = extractive.units_of(question, passages)
        x = rf.features(rf.analyse(question), passages, units)
        found = {u.display.split()[0]: bool(x[k, col].any()) for k, (_, u) in enumerate(units)}
        assert found["kind:"] is False and found["NAME"] is False, (question, found)
        assert found["kubectl"] is (question == "Which flag prints the labels?"), question


@pytest.mark.parametrize("question, asked", [
    ("What is the default restart policy?", True),
    ("What does maxSurge default to?", True),
    ("Which class is used by default?", True),
    ("Which URL lists the Pods in the default namespace?", False),
    ("If two classes are both marked as default, what happens to a claim?", False),
    ("My constraint doesn't set minDomains at all. What value is it treated as having?", True),
])
def test_a_default_is_asked_for_not_only_named(question, asked):
    assert ("default" in asks.question_types(question)) is asked


@pytest.mark.parametrize("said, tells", [
    ("The value defaults to 1.", True),
    ("When `minDomains` is not specified (nil), the constraint behaves as if it is 1.", True),
    ("If omitted, the Pod's namespace is used.", True),
    ("The constraint is not settled by the scheduler.", False),
])
def test_a_unit_tells_a_default_by_what_happens_when_nothing_is_given(said, tells):
    # "... doesn't set minDomains at all. What value ...?" is answered by the sentence that
    # says what happens when it "is not specified", without the word default.
    unit = next(u for u in units.candidates(said))
    assert asks.has("default", unit, said, set()) is tells


@pytest.mark.parametrize("question, asked", [
    ("Why is the port 7878?", True),
    ("After I turned on auditing, the server used more RAM. Why does that happen?", True),
    ("In the storage example, why would an admin set a minimum?", True),
    ("Which hashing function does HashMap use, and why?", True),
    ("What is the main reason to introduce a type synonym?", True),
    ("Which variable gives diagnostics about why Cargo is rebuilding?", False),
])
def test_why_is_asked_wherever_a_clause_opens_with_it(question, asked):
    assert ("why" in asks.question_types(question)) is asked


def test_a_reason_and_a_unit_that_asks_are_features_of_a_why_question():
    passages = [rf.Passage("Audit logging uses more memory, as context is stored per request. "
                           "Removing finalizers by hand can lead to issues. "
                           "What happened? The server logs the stages.",
                           similarity=0.5, rank=0)]
    q = "Auditing is on and the server takes more RAM. Why does that happen?"
    units = extractive.units_of(q, passages)
    x = rf.features(rf.analyse(q), passages, units)
    col = {f: rf.FEATURES.index(f) for f in ("type_why", "asks")}
    got = {u.display.split()[0]: (x[k][col["type_why"]], x[k][col["asks"]])
           for k, (_, u) in enumerate(units)}
    assert got == {"Audit": (1.0, 0.0), "Removing": (1.0, 0.0), "What": (0.0, 1.0),
                   "The": (0.0, 0.0)}


def test_a_why_answer_quotes_the_reason_that_follows_its_sentence():
    content = ("The CronJob may not be scheduled when startingDeadlineSeconds is below 10 "
               "seconds. This is because the controller checks things every 10 seconds. "
               "Jobs run Pods to completion. They stop when done.")
    passages = [rf.Passage(content, similarity=0.5, rank=0)]
    q = "Why is my CronJob not scheduled?"
    units = extractive.units_of(q, passages)
    first, jobs = (next(u for _, u in units if u.kind == "sentence"
                        and u.display.startswith(w)) for w in ("The CronJob", "Jobs run"))
    joined = extractive.with_reason(extractive.Pick(0, first, 1.0), units, passages, set())
    assert joined.unit.display == ("The CronJob may not be scheduled when "
                                   "startingDeadlineSeconds is below 10 seconds. This is "
                                   "because the controller checks things every 10 seconds.")
    assert content[joined.unit.start:joined.unit.end] == joined.unit.display
    # The reason already picked on its own, or a next sentence that gives none: unchanged.
    reason = next(u for _, u in units if u.display.startswith("This is because"))
    assert extractive.with_reason(extractive.Pick(0, first, 1.0), units, passages,
                                  {(0, reason.start)}).unit == first
    assert extractive.with_reason(extractive.Pick(0, jobs, 1.0), units, passages,
                                  set()).unit == jobs


def test_a_why_answer_never_joins_a_sentence_of_the_next_paragraph():
    """A blank line ends a paragraph: the next paragraph's first sentence is no reason for
    the one before it, even when it opens "This is because" (the lead quote too)."""
    content = ("The CronJob may not be scheduled when startingDeadlineSeconds is below 10 "
               "seconds.\n \nThis is because the controller checks things every 10 seconds.")
    passages = [rf.Passage(content, similarity=0.5, rank=0)]
    units = extractive.units_of("Why is my CronJob not scheduled?", passages)
    first = next(u for _, u in units if u.display.startswith("The CronJob"))
    for lead in (False, True):
        assert extractive.with_reason(extractive.Pick(0, first, 1.0), units, passages, set(),
                                      lead=lead).unit == first


def test_a_why_answers_first_quote_comes_with_the_short_sentence_after_it():
    """The answer's first quote takes the next sentence of its paragraph whatever that opens
    with (a book says "This way, ..." for its reason), the others only a stated reason, and
    a long next sentence is left."""
    content = ("We want to borrow the struct rather than take ownership of it. This way, "
               "main retains its ownership and can keep using it. " + "Long " * 45 + "end.")
    passages = [rf.Passage(content, similarity=0.5, rank=0)]
    units = extractive.units_of("Why does area borrow the struct?", passages)
    want, way = (next(u for _, u in units if u.kind == "sentence" and u.display.startswith(w))
                 for w in ("We want", "This way"))
    pick = extractive.Pick(0, want, 1.0)
    lead = extractive.with_reason(pick, units, passages, set(), lead=True)
    assert lead.unit.display == f"{want.display} {way.display}"
    assert content[lead.unit.start:lead.unit.end] == lead.unit.display
    assert extractive.with_reason(pick, units, passages, set()).unit == want
    # The next sentence runs over LEAD_NEXT_WORDS words: the first quote stays as it was.
    assert extractive.with_reason(extractive.Pick(0, way, 1.0), units, passages, set(),
                                  lead=True).unit == way


def test_equally_rare_terms_give_the_same_features_whatever_the_hash_seed():
    """Of two question terms as rare as each other, the question's first is the rarest
    (`rare_first`): a set's order changes with the process's hash seed, and the same
    question got other answers from one process to the next."""
    import subprocess
    import sys

    script = (
        "from packs.retrieval import extractive, reader_features as rf\n"
        "text = 'Iran gave an interview about the Shah. The Shah gave an interview on Iran.'\n"
        "p = [rf.Passage(text, rank=0)]\n"
        "q = 'Why did the Shah of Iran give an interview?'\n"
        "units = extractive.units_of(q, p)\n"
        "x = rf.features(rf.analyse(q), p, units)\n"
        "col = x[:, rf.FEATURES.index('rare_first')]\n"
        "print([(u.display[:9], float(v)) for (_, u), v in zip(units, col)])\n")
    seen = set()
    for seed in ("0", "1", "2", "3", "4", "5"):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True, timeout=120)
        seen.add(out.stdout.strip())
    assert len(seen) == 1, seen
    firsts = dict(eval(seen.pop()))  # noqa: S307 - the list of pairs printed above
    assert firsts["The Shah "] == 1.0 and firsts["Iran gave"] == 0.0


def test_a_quote_that_opens_with_this_comes_with_the_sentence_it_points_at():
    """Kubernetes' Cassandra tutorial: "This setting is for your safety ..." was quoted
    alone, without the sentence that says what the setting is."""
    content = ("Deleting or scaling a StatefulSet down does not delete the volumes associated "
               "with the StatefulSet. This setting is for your safety because your data is "
               "more valuable than automatically purging all related StatefulSet resources.\n\n"
               "This paragraph opens a new one. StatefulSets run stateful apps.")
    passages = [rf.Passage(content, similarity=0.5, rank=0)]
    units = extractive.units_of("Are the volumes of a StatefulSet deleted with it?", passages)
    safety, opens, run = (next(u for _, u in units if u.kind == "sentence"
                               and u.display.startswith(w))
                          for w in ("This setting", "This paragraph", "StatefulSets run"))
    joined = extractive.with_antecedent(extractive.Pick(0, safety, 1.0), units, passages, set())
    assert joined.unit.display.startswith("Deleting or scaling a StatefulSet down")
    assert joined.unit.display.endswith("related StatefulSet resources.")
    assert content[joined.unit.start:joined.unit.end] == joined.unit.display
    # The sentence before already picked, a paragraph's first sentence, or one that
    # points at nothing: unchanged.
    deleting = next(u for _, u in units if u.display.startswith("Deleting"))
    for unit, taken in ((safety, {(0, deleting.start)}), (opens, set()), (run, set())):
        pick = extractive.Pick(0, unit, 1.0)
        assert extractive.with_antecedent(pick, units, passages, taken).unit == unit
    # In an answer, only while the answer stays within its word budget.
    q = "Why is this setting for your safety?"
    one = [rf.Passage(content.split("\n\n")[0], similarity=0.5, rank=0)]
    wide, tight = (extractive.select(q, one, max_words=n)[0].unit.display for n in (110, 20))
    assert wide.startswith("Deleting or scaling") and tight.startswith("This setting")


def test_a_question_about_several_things_gives_its_quotes_the_same_budget_as_its_choice():
    """reader.budget decides the words once: a question about two things is chosen within
    `multi_words`, and a leaning quote may take the sentence before it within the same
    words (its room was counted from `max_words` alone)."""
    content = ("The controller keeps the claims when a set is scaled down to zero replicas. "
               "This setting is for your safety because your data is more valuable than "
               "automatically purging all related StatefulSet resources.\n\n"
               "Each Pod of a StatefulSet gets a stable network identity from its ordinal index.")
    q = ("Why is this setting for your safety, and what network identity does each Pod of a "
         "StatefulSet get?")
    shipped = reader.load()
    limits = dataclasses.replace(shipped.limits, margin=0.0, lead_depth=1, cover=0.0)
    several = reader.budget(dataclasses.replace(limits, max_words=20), several=True)
    assert several.max_words == limits.multi_words and several.max_units >= limits.multi_units
    assert reader.budget(limits, several=False) == limits
    one_each = dataclasses.replace(shipped, limits=limits)  # the best unit of each part alone
    picks = extractive.select(q, [rf.Passage(content, similarity=0.5, rank=0)], max_words=20,
                              weights=one_each)
    assert [p.unit.display.split(".")[0] for p in picks] == [
        "The controller keeps the claims when a set is scaled down to zero replicas",
        "Each Pod of a StatefulSet gets a stable network identity from its ordinal index"]
    assert "This setting is for your safety" in picks[0].unit.display


def test_a_bare_listing_file_caption_is_never_quoted():
    """mdBook's '<span class="filename">Filename: src/main.rs</span>' before a listing the
    page includes from a file it lacks was quoted as an answer's bullet."""
    content = ('Comments can also be placed at the end of lines of code.\n\n'
               '<span class="filename">Filename: src/main.rs</span>\n\n'
               'A comment at the end of a line starts with two slashes.')
    passages = [rf.Passage(content, similarity=0.5, rank=0)]
    picks = extractive.select("Where does the file src/main.rs put its comments?", passages)
    assert picks and not any(p.unit.display.startswith("Filename:") for p in picks)
    assert any(u.display == "Filename: src/main.rs"
               for _, u in extractive.units_of("src/main.rs", passages))  # a unit, unquoted


def test_a_unit_reads_how_much_of_the_question_its_whole_section_covers():
    # Another section of a cited page: only its whole text says it is the one about the
    # question (eviction and its grace period), though no one sentence has every term.
    q = "How long is the grace period when a node evicts a pod for memory pressure?"
    passages = [
        rf.Passage("Pods run on nodes. Each pod gets memory from its node.",
                   heading="Nodes", title="Scheduling", similarity=0.7, rank=0),
        rf.Passage("The kubelet evicts a pod under memory pressure. The grace period is "
                   "set by a flag.", heading="Pressure", title="Scheduling"),
    ]
    units = extractive.units_of(q, passages)
    x = rf.features(rf.analyse(q), passages, units)
    cov, rel = (x[:, rf.FEATURES.index(f)] for f in ("sec_cov", "sec_cov_rel"))
    first = [k for k, (i, _) in enumerate(units) if i == 0]
    second = [k for k, (i, _) in enumerate(units) if i == 1]
    assert first and second
    # every unit of a section has the section's figure, whatever its own words
    assert len({round(float(cov[k]), 6) for k in second}) == 1
    assert cov[second[0]] > cov[first[0]] > 0.0
    assert rel[second[0]] == 0.0 and rel[first[0]] < 0.0
    assert float(cov[second[0]]) <= 1.0
