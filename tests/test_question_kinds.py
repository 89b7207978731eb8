"""The learned question-kind model (packs/retrieval/question_kinds.py): its features, its
weights file, and the shipped model on questions of each kind."""

import json
import math

import pytest

from packs.retrieval import question_kinds as qk


def _weights(tmp_path, **changes):
    d = {"version": "t", "features_version": qk.FEATURES_VERSION,
         "classes": ["list", "none"], "intercept": [-1.0, 0.5],
         "weights": {"p0:give": [3.0, -1.0], "rule:list": [1.0, 0.0]}}
    d.update(changes)
    path = tmp_path / "kinds.json"
    path.write_text(json.dumps(d))
    return path


def test_features_read_the_asking_sentence_with_identifiers_as_code():
    f = qk.features("I run two clusters. Give me the `kubectl` flags (all of them) like "
                    "--v=2 that PodDisruptionBudget objects use?", "list")
    assert f["p0:give"] == 1 and f["p01:give me"] == 1 and f["last:use"] == 1
    assert f["w:<code>"] == 1 and "w:kubectl" not in f and "w:poddisruptionbudget" not in f
    assert f["ctx"] == 1.0  # a scene set first
    assert "w:all" not in f  # the aside in parentheses is left out
    assert f["rule:list"] == 1
    assert f["plurals"] == 0.5  # flags, objects
    assert qk.features("What is a Pod?", None)["rule:none"] == 1
    assert f["head:none"] == 1  # "Give me ..." asks with no which/what noun


@pytest.mark.parametrize(("sentence", "number"), [
    ("Which guide does the book point me to for those implementation details?", "singular"),
    ("Which family of standard library methods does that?", "singular"),
    ("Which kubelet settings control container log rotation?", "plural"),
    ("Which feature gates does the kubelet read?", "plural"),  # the gates, not a feature
    ("What kinds of volume can a Pod mount?", "plural"),
    ("What is a Pod?", "none"),
])
def test_the_number_of_the_noun_a_question_asks_for(sentence, number):
    assert qk.features(sentence, None)["head:" + number] == 1
    assert sum(k.startswith("head:") for k in qk.features(sentence, None)) == 1


def test_probabilities_are_the_softmax_of_the_weights(tmp_path):
    model = qk.load(_weights(tmp_path))
    probs = model.probabilities("Give me every flag.")
    # rule_kind reads "Give me every flag." as a list: p0:give and rule:list both count
    list_score, none_score = -1.0 + 3.0 + 1.0, 0.5 - 1.0
    expected = math.exp(list_score) / (math.exp(list_score) + math.exp(none_score))
    assert probs["list"] == pytest.approx(expected)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert model.version.startswith("t/") and len(model.version) == 14


@pytest.mark.parametrize("changes, message", [
    ({"features_version": "kinds-0"}, "retrain"),
    ({"classes": ["list", "across"]}, "one weight per class"),
    ({"weights": {"w:x": [1.0]}}, "one weight per class"),
    ({"intercept": "x"}, "unreadable"),
])
def test_bad_weights_say_what_is_wrong(tmp_path, changes, message):
    with pytest.raises(qk.KindWeightsError, match=message):
        qk.load(_weights(tmp_path, **changes))


def test_missing_weights_name_the_file(tmp_path):
    with pytest.raises(qk.KindWeightsError, match="nothing.json"):
        qk.load(tmp_path / "nothing.json")


def test_shipped_model_reads_each_kind():
    # single-passage questions keep the single-passage answer
    for single in ("What is a Pod?", "How do I drain a node?",
                   "Which flag sets the grace period?",
                   "I want to understand how a growable vector is laid out in memory under the "
                   "hood. Which guide does the book point me to for those implementation "
                   "details?", "Why does a restarted Pod get a "
                   "different IP address?", "How many replicas does the example Deployment run?"):
        assert qk.question_kind(single) is None, single
    assert qk.question_kind("List all the feature gates the docs mention.") == "list"
    assert qk.question_kind("Which kubectl subcommands do the debugging pages use?") == "list"
    assert qk.question_kind("What does the chapter on closures cover?") == "overview"
    assert qk.question_kind("Give me an outline of the ownership chapter.") == "overview"
    assert qk.question_kind("How do I write an outline of my crate docs?") is None
    # a question about the pack itself is an overview whatever the model's words say
    assert qk.question_kind("What is this pack about?") == "overview"
    assert qk.question_kind("Compare what the docs say about liveness probes from page to "
                            "page.") == "across"


def test_the_hand_rules_whole_pack_reading_stands_unless_the_model_is_sure(tmp_path):
    # a model that leans to "none" (0.57) but not past RULE_TRUST: the rules' list stands
    weak = qk.load(_weights(tmp_path, intercept=[0.0, 0.3], weights={}))
    assert weak.probabilities("List every flag.")["none"] < qk.RULE_TRUST
    assert weak.kind("List every flag.") == "list"
    sure = _weights(tmp_path, intercept=[0.0, 3.0], weights={})
    sure_model = qk.parse(sure.read_bytes())
    assert sure_model.kind("List every flag.") == "none"
    # a question the rules read as about one thing keeps the model's reading
    assert weak.kind("What is a Pod?") == "none"
    # the release-notes forms the labelled sets lack
    assert qk.question_kind("What changed in the scheduler from release to release?") == "across"


def test_a_list_of_documents_is_an_overview_of_the_part_named(tmp_path):
    # a model that reads every question as a list
    listing = qk.load(_weights(tmp_path, intercept=[3.0, 0.0], weights={}))
    assert listing.kind("Which guides does the Troubleshooting Applications part of the docs "
                        "offer?") == "overview"
    assert listing.kind("Which tutorials does the Stateful Applications section have?") == (
        "overview")
    # sections and topics as often name things: the list stands
    assert listing.kind("Which Cargo.toml sections appear in the book's examples?") == "list"
    assert listing.kind("Which flags does kubectl drain take?") == "list"


@pytest.mark.parametrize("question", [
    "Compare static dispatch and dynamic dispatch.",
    "Compare the Guaranteed and BestEffort QoS classes for Pods.",
    "internalTrafficPolicy: Local vs Cluster on a Service: which endpoints does kube-proxy "
    "route to in each case?",
    "In an HPA Object metric, the target can be of type Value or AverageValue. How is the "
    "metric checked against the target in each case?",
    "The example is built with trait objects and then with types. How do the two versions "
    "differ in what outside code knows?",
    "Inside a loop body, break or continue: what happens in each case?",
    "Scaling a Deployment up by hand or through an autoscaler: what changes in each case?",
])
def test_how_two_things_differ_is_one_answer_not_a_whole_pack_list(question):
    assert qk.two_things(question)
    assert qk.question_kind(question) is None


@pytest.mark.parametrize("question, kind", [
    ("Several pages show a way to force an operation. What are these forced operations "
     "across the docs, and what does forcing do in each case?", "across"),
    ("Which C or C++ tools does the book compare Rust with along the way?", "list"),
    ("Compare what the docs say about liveness probes from page to page.", "across"),
])
def test_comparing_across_the_pages_stays_a_whole_pack_question(question, kind):
    assert qk.question_kind(question) == kind


def test_a_question_that_opens_with_why_asks_for_one_reason(tmp_path):
    question = ("Why do the Kubernetes docs discourage keeping application data, end-user "
                "records or monitoring data inside custom resources?")
    # a model that reads it as a list (the shipped model once did) still answers one reason
    listing = qk.load(_weights(tmp_path, intercept=[2.0, 0.0], weights={}))
    probs = listing.probabilities(question, qk.rule_kind(question))
    assert max(probs, key=probs.__getitem__) == "list"
    assert listing.kind(question) == qk.NONE
    assert listing.kind("Which fields do the docs say control shutdown?") == "list"
    assert qk.question_kind(question) is None
    # Asked after what it lists, the why stays part of a whole-pack question.
    assert qk.question_kind("Which Pod and container fields control how a container is shut "
                            "down or how it reports why it terminated?") == "list"


@pytest.mark.parametrize("question", [
    "Why shouldn't I just create Pods directly? Gather what the different pages say about "
    "bare Pods that no controller manages.",
    "Is it OK to use hostPath volumes? Collect what the storage, security and task pages say "
    "about the risks and the safer alternatives.",
])
def test_a_request_to_gather_what_the_pages_say_is_across_them(tmp_path, question):
    # Read as one question (a why, a yes-or-no), these were answered from one passage, or
    # refused by the gate; what they ask for is what several pages say.
    sure_of_none = qk.load(_weights(tmp_path, intercept=[-5.0, 5.0], weights={}))
    assert qk.rule_kind(question) == "across"
    assert sure_of_none.kind(question) == "across"
    assert qk.question_kind(question) == "across"
    # Only a sentence that opens with the request is one: "that slower compile ... release
    # builds" (a Rust book answer row) asks for one reason.
    assert qk.question_kind("Building with --release takes longer. Why does the book "
                            "consider that slower compile a good trade for release "
                            "builds?") is None


@pytest.mark.parametrize("question, kind", [
    ("When do the setup pages have me restart the kubelet on a node? List the situations.",
     "list"),
    ("What does Rust give you for reusing code and avoiding duplication? Give the main parts.",
     "overview"),
    ("How is Rust itself developed and released? Summarize what the book says.", "overview"),
])
def test_a_list_or_summary_asked_for_in_a_sentence_of_its_own_is_one(tmp_path, question, kind):
    # asked after a question in so many words, whatever a model reads in that question
    sure_of_none = qk.load(_weights(tmp_path, intercept=[-5.0, 5.0], weights={}))
    assert sure_of_none.kind(question) == kind
    assert qk.question_kind(question) is not None


def test_a_list_asked_by_the_form_of_a_later_question_yields_to_a_sure_none(tmp_path):
    question = ("How do I tell Kubernetes how many of my Pods must stay up during "
                "disruptions? Which PodDisruptionBudget fields and values do the docs describe?")
    # No request in so many words: the second question's form ("Which ... fields ...?")
    # reads as a list, which stands unless the model is at least RULE_TRUST sure of "none".
    weak = qk.load(_weights(tmp_path, intercept=[0.0, 0.3], weights={}))
    assert weak.probabilities(question, "list")["none"] < qk.RULE_TRUST
    assert weak.kind(question) == "list"
    sure_of_none = qk.parse(_weights(tmp_path, intercept=[-5.0, 5.0], weights={}).read_bytes())
    assert sure_of_none.kind(question) == qk.NONE
    assert qk.question_kind(question) == "list"
    # A scene, then a question about one setting and one list the same page gives: the
    # shipped model is sure it is about one thing (a single-passage answer row).
    pvc = ("I want to grow a PVC by editing its size. Which StorageClass field has to be true "
           "for that to work, and which file systems can be resized on such a volume?")
    assert qk.requested(pvc) == "list" and qk.outright(pvc) is None
    assert qk.load().probabilities(pvc, "list")["none"] >= qk.RULE_TRUST
    assert qk.question_kind(pvc) is None


def test_naming_one_thing_is_no_request_for_a_list():
    assert qk.question_kind("I lost the discovery hash that kubeadm init printed. Name the "
                            "file on the control-plane node that holds the CA.") is None


def test_two_parts_that_open_alike_are_one_answer_not_an_across_list():
    """Two things side by side ("When do you use A, and when do you use B?") are one
    answer's two parts, even read as across the pack; read as a list they may ask for two
    lists, and stay one."""
    dot = ("In C and C++ there are two different operators for calling methods. When do "
           "you use the dot, and when do you use the arrow?")
    logging = "Compare a node-level logging agent with a sidecar container that runs its own logging agent."
    assert qk.parallel_parts(dot) and qk.parallel_parts(logging)
    assert qk.question_kind(dot) is None and qk.question_kind(logging) is None
    assert not qk.parallel_parts("Which flags does kubectl take, and what does each do?")
    assert not qk.parallel_parts("How do I drain a node?")
    lists = "Which flags does kubectl take, and which flags does kubeadm take?"
    assert qk.parallel_parts(lists) and qk.question_kind(lists) == "list"
