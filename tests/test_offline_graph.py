"""The offline graph's rules (issue 48): stop-entities, identifier types, headings that name a
thing, whole-sentence facts, stated relations, and names resolved without their markup."""

from __future__ import annotations

from tasks.extract.assemble import assemble
from tasks.extract.entities import RawEntity, normalize_name, resolve_entities
from tasks.extract.names import rendered
from tasks.extract.offline import extract_offline
from tasks.extract.offline_names import bound_names, code_entity, heading_entity
from tasks.extract.offline_text import is_fact, stated_relations
from tasks.extract.schema import salvage


def test_stop_entities_are_left_out():
    for span in ("true", "false", "8080", "32Gi", '"ahoy"', "github.com",
                 "https://example.org/x", ".yaml", "Some(&element)", "s.len()",
                 "<name-of-pod>", "my-pod", "foo", "x", "Here", "data"):
        assert code_entity(span, "", "") is None, span


def test_identifier_types_are_inferred():
    section = "export KUBECONFIG=/tmp/k\n$ kubectl get pods\n"
    cases = {
        "--grace-period=30": ("--grace-period", "flag"),
        "KUBECONFIG": ("KUBECONFIG", "environment_variable"),
        ".spec.replicas": (".spec.replicas", "setting"),
        "privileged: true": ("privileged", "setting"),  # the setting, not its value
        "Rc::strong_count": ("Rc::strong_count", "function"),
        "drop()": ("drop", "function"),
        "Cargo.toml": ("Cargo.toml", "file"),
        "/etc/resolv.conf": ("/etc/resolv.conf", "file"),
        "kubectl get pods": ("kubectl get pods", "command"),
        "cargo test -- --ignored": ("cargo test", "command"),
        "Vec<T>": ("Vec<T>", "code"),
    }
    for span, expected in cases.items():
        assert code_entity(span, "Set the environment variable first.", section) == expected
    assert code_entity("v1.30", "This field was added in version v1.30.", "") == (
        "v1.30", "version")
    assert code_entity("v1.30", "Use image v1.30.", "") is None  # an illustration


def test_headings_are_entities_only_when_the_text_names_a_thing():
    text = "The stabilization window restricts flapping of the replica count."
    assert heading_entity("Stabilization window", text) == "Stabilization window"
    assert heading_entity("Creating a Deployment", "Creating a deployment is easy.") is None
    assert heading_entity("What Is Ownership?", "ownership") is None
    assert heading_entity("How it works", "how it works") is None
    assert heading_entity("Pod lifecycle", "nothing about it") is None  # never named
    assert heading_entity("Rolling updates", "Rolling updates replace Pods.") == "Rolling updates"


def test_facts_are_whole_sentences_that_read_on_their_own():
    assert is_fact("The kubelet restarts a container whose liveness probe fails.")
    for text in ("This page shows how to configure a probe for a container.",
                 "Run the following command to create the Pod.",
                 "It restarts the container when the probe fails.",
                 "Pass `--embedding-model` or set",
                 "We'll spin up ten threads and count to ten in them."):
        assert not is_fact(text), text


def test_facts_that_point_back_to_an_earlier_sentence_are_no_facts():
    for text in ("But the scheduler skips nodes that are marked unschedulable.",
                 "Claims that name no class bind only to volumes of that default.",
                 "The kubelet applies the grace period for that container.",
                 "If you don't, the API server rejects the request outright.",
                 "You get the same result by editing the manifest in place.",
                 "The pattern in the second arm matches every remaining variant."):
        assert not is_fact(text), text
    # "that <noun>" whose noun the sentence named before reads on its own, as does
    # "the same way as ...".
    for text in ("Each resource has a quota, and the kubelet caps usage of that resource.",
                 "A cron job retries failed runs the same way as a plain Job does."):
        assert is_fact(text), text


def test_relations_beyond_co_occurrence():
    names = ["EndpointSlice", "Endpoints", "replicas", "HorizontalPodAutoscaler",
             "SidecarContainers", "v1.29"]
    found = set()
    for sentence in ("EndpointSlice replaces Endpoints for large clusters.",
                     "The replicas field is set by the HorizontalPodAutoscaler.",
                     "SidecarContainers was added in v1.29."):
        found |= set(stated_relations(sentence, names))
    assert found == {("EndpointSlice", "REPLACES", "Endpoints"),
                     ("replicas", "SET_BY", "HorizontalPodAutoscaler"),
                     ("SidecarContainers", "ADDED_IN", "v1.29")}
    # Listed together, nothing is said about how they relate.
    assert stated_relations("Use Pods, Services and Deployments.",
                            ["Pods", "Services", "Deployments"]) == []


def test_linked_emphasised_and_plain_names_are_one_entity():
    assert rendered("[crypto/tls](/pkg/crypto/tls/)") == "crypto/tls"
    assert rendered("**Pod** &amp; _main.rs_") == "Pod & main.rs"
    assert rendered("[`Vec<T>`](std/vec)") == "Vec<T>"
    assert normalize_name("[crypto/tls](/pkg/crypto/tls/)") == normalize_name("crypto/tls")
    res = resolve_entities([RawEntity("[crypto/tls](/pkg/crypto/tls/)", "code"),
                            RawEntity("crypto/tls", "code")])
    assert [e.name for e in res.entities] == ["crypto/tls"]


def test_examples_own_names_are_left_out_pack_wide():
    code = "metadata:\n  name: pod-e\nlet mut guess = String::new();\n"
    assert {"pod-e", "guess"} <= bound_names(code)
    ex = salvage(extract_offline("T", "Disruptions", "The Deployment creates `pod-e` to "
                                 "replace `pod-b` when a node drains.")).extraction
    names = set(assemble([("s1", ex)], {"pod-e"})["entities"]["name"])
    assert "pod-e" not in names and "pod-b" in names


def test_a_small_pack_keeps_the_rules_entities_unjudged():
    """The entity model reads page reach: in a 3-page pack, where every name is on one
    page, it rejected entities a reader would keep (here ConfigMap)."""
    from tasks.extract.assemble import assemble_judged
    from tasks.extract.judge import PackText

    sections = [
        ("https://d/p1", "Managing Secrets", "Run `kubectl create secret generic db-user-pass`"
         " to create a Secret. The Secret holds credentials for a Pod."),
        ("https://d/p2", "Hello Minikube", "Start a cluster with `minikube start`. The "
         "Deployment runs a Pod on a Node."),
        ("https://d/p3", "ConfigMaps", "A ConfigMap stores configuration; a Pod reads it as "
         "environment variables through `envFrom`.")]
    extractions = [(f"s{i}", salvage(extract_offline(h, h, c)).extraction)
                   for i, (_, h, c) in enumerate(sections)]
    tables, rejected = assemble_judged(extractions, set(), PackText(sections))
    plain = assemble(extractions, set())
    assert "ConfigMap" in set(plain["entities"]["name"])
    assert rejected == [] and tables["entities"].equals(plain["entities"])


def test_a_number_in_bold_is_no_term():
    # A reference list writes a journal's volume in bold ("**95** (15): 9047-52."); it had
    # come out as the term "95". A version stays a version.
    refs = ("References on the history of the project follow.\n\n"
            "- Smith, J. \"Browsers\". *Research Policy*. **95** (15): 9047-52.\n"
            "- Jones, K. \"Mail\". *Science*. **33** (4): 617-630.\n\n"
            "**Gecko** is the layout engine the browser uses.\n\n"
            "Kubernetes v1.29 adds sidecar containers.")
    names = {e["name"] for e in extract_offline("Mozilla", "Mozilla > History", refs)["entities"]}
    assert not names & {"95", "33"}, names
    assert "Gecko" in names


def test_the_fact_model_reads_each_fact_in_its_section():
    """Facts are judged where they sit: a list item under a lead-in ("...:") reads on its
    own less often than a section's first sentence, and a model that weighs that leaves
    the item out and keeps the first sentence."""
    from tasks.extract.assemble import assemble_judged
    from tasks.extract.judge import PackText
    from tasks.extract.judge_facts import fact_features

    lead = "The `kube-scheduler` places every new Pod on a node with enough free capacity."
    item_text = "The `Filter` phase removes nodes that cannot run the Pod at all."
    content = (f"{lead}\n\n"
               "Scheduling a Pod runs in two phases:\n\n"
               f"- {item_text}\n")
    pages = [("https://d/sched", "Scheduling framework > Extension points", content)] + [
        (f"https://d/p{i}", f"Page {i}", f"Page {i} describes topic number {i} in depth.")
        for i in range(24)]
    text = PackText(pages)
    first = fact_features(lead, "Scheduling framework > Extension points", content, text)
    item = fact_features(item_text, "Scheduling framework > Extension points", content, text)
    assert first["first_in_section"] == 1.0 and first["named_start"] == 0.0
    assert item["list_item"] == 1.0 and item["after_colon"] == 1.0
    assert item["first_in_section"] == 0.0

    keep_all = {"features": [], "mean": [], "scale": [], "weights": [], "bias": 5.0,
                "threshold": 0.0}
    model = {"entity": keep_all,
             "fact": {"features": ["after_colon"], "mean": [0.0], "scale": [1.0],
                      "weights": [-10.0], "bias": 5.0, "threshold": 0.5}}
    extractions = [(f"s{i}", salvage(extract_offline(h, h, c)).extraction)
                   for i, (_, h, c) in enumerate(pages)]
    sections = {f"s{i}": (h, c) for i, (_, h, c) in enumerate(pages)}
    plain = set(assemble(extractions, set())["facts"]["text"])
    assert {lead, item_text} <= plain
    tables, _ = assemble_judged(extractions, set(), text, model, sections)
    judged = set(tables["facts"]["text"])
    assert lead in judged and item_text not in judged


def test_placeholder_parts_prepositional_headings_and_macros():
    # A path or key with a placeholder part, or a value compared, names no one thing.
    for name in ("count/<resource>", "/mnt/<SUBMOUNT>", "<identifier>.available",
                 "memory.available<500Mi"):
        assert code_entity(name, f"Use `{name}` here.", "") is None, name
    assert code_entity("Vec<T>", "A `Vec<T>` grows.", "") == ("Vec<T>", "code")
    # A macro is code, not a function.
    assert code_entity("println!", "Call `println!` to print.", "") == ("println!", "code")
    # A heading that opens with a capitalised preposition is a phrase; a keyword is not.
    assert heading_entity("In Struct Definitions", "in struct definitions we use") is None
    assert heading_entity("Using Trait Objects", "using trait objects helps") is None
    assert heading_entity("for Loops", "for loops run") == "for Loops"


def test_entity_features_do_not_depend_on_the_order_of_the_sections():
    """A published pack lists its sections in another order than the build's split stage,
    and the features read the first sections that hold a name: the model fitted on one
    and applied to the other judged the same entity differently."""
    from tasks.extract.judge import PackText, entity_features

    pages = [(f"https://d/p{i % 7}", f"Page {i % 7} > Part {i}",
              (f"Set `replicas` to {i} in the example.\n\n```yaml\nreplicas: {i}\n```"
               if i >= 30 else f"The `replicas` field says how many Pods run (part {i})."))
             for i in range(90)]  # more sections hold the name than the features read
    forward = entity_features("replicas", "setting", PackText(pages))
    assert forward == entity_features("replicas", "setting", PackText(pages[::-1]))
    assert forward == entity_features("replicas", "setting", PackText(pages[45:] + pages[:45]))


def test_facts_that_lean_on_their_neighbours_are_seen_by_the_fact_model():
    """Blind graph rounds 6 and 6b: the facts labelled wrong that the model kept leaned on
    the text before them through a definite noun the section already named ("The
    configuration is located ..."), "the same Secret", a supposition, or a bare step. The
    features see each, and the shipped model keeps a sentence that reads on its own."""
    from tasks.extract.judge import PackText, load_model, probability
    from tasks.extract.judge_facts import fact_features

    heading = "Secrets > Creating a Secret"
    whole = "A Secret is an object that contains a small amount of sensitive data such as a password."
    leaning = {
        "same": "If you want to skip the Base64 encoding step, you can create the same "
                "Secret using the `kubectl create secret` command.",
        "subject_back": "The configuration is located under the `data.ClusterConfiguration` key.",
        "setup": "Suppose a cluster runs a device plugin that advertises a resource on some nodes.",
        "imperative": "Annotate any DaemonSets and Deployments to trigger pod replacement.",
    }
    content = (f"{whole}\n\nThis example writes the configuration of the cluster to a file "
               "and encodes it.\n\n" + "\n\n".join(leaning.values()))
    pages = [("https://d/secret", heading, content)] + [
        (f"https://d/p{i}", f"Page {i}", f"Page {i} describes the topic number {i} in depth.")
        for i in range(24)]
    text = PackText(pages)
    fact = load_model()["fact"]
    own = fact_features(whole, heading, content, text)
    assert not any(own[k] for k in leaning)
    assert probability(own, fact) >= fact["threshold"]
    says_of_code = fact_features("The `or_insert` method returns a mutable reference to the "
                                 "value for the key.", heading, content, text)
    assert says_of_code["code_subject"] == 1.0 and own["code_subject"] == 0.0
    for feature, sentence in leaning.items():
        feats = fact_features(sentence, heading, content, text)
        assert feats[feature] > 0, feature
        assert probability(feats, fact) < probability(own, fact), feature


def test_a_name_typed_as_code_but_never_written_as_code_is_seen_by_the_entity_model():
    """Wrong types and generic phrases kept in blind round 6: a product name typed `code`
    that the pages never put in backticks or a code block ("AppArmor"), and a phrase that
    opens with a determiner ("the manifest")."""
    from tasks.extract.judge import PackText, entity_features

    pages = [("https://d/a", "Security > AppArmor",
              "AppArmor is a Linux kernel security module. Set `appArmorProfile` on a Pod.\n\n"
              "```shell\n# apply the manifest\nkubectl apply -f pod.yaml\n```")]
    text = PackText(pages)
    product = entity_features("AppArmor", "code", text)
    field_ = entity_features("appArmorProfile", "code", text)
    assert product["code_never_code"] == 1.0 and field_["code_never_code"] == 0.0
    assert entity_features("AppArmor", "concept", text)["code_never_code"] == 0.0
    assert entity_features("the manifest", "command", text)["determiner"] == 1.0
    assert entity_features("kubectl apply", "command", text)["determiner"] == 0.0


def test_a_fact_quoting_a_rejected_name_is_judged_by_the_fact_model_alone():
    """A fact about a kept name that also quotes a name the entity model leaves out was
    dropped with it; on the labelled facts those read on their own as often as the rest,
    so only the fact model judges them now (a fact about a left-out name still goes)."""
    from tasks.extract.assemble import assemble_judged
    from tasks.extract.judge import PackText

    fact = "A `Deployment` keeps running as many Pods as its `replicas` field says."
    pages = [("https://d/deploy", "Deployments > Scaling", f"{fact}\n")] + [
        (f"https://d/p{i}", f"Page {i}", f"Page {i} describes topic number {i} in depth.")
        for i in range(24)]
    extractions = [(f"s{i}", salvage(extract_offline(h, h, c)).extraction)
                   for i, (_, h, c) in enumerate(pages)]
    sections = {f"s{i}": (h, c) for i, (_, h, c) in enumerate(pages)}
    lower_out = {"features": ["lower_word"], "mean": [0.0], "scale": [1.0], "weights": [-10.0],
                 "bias": 5.0, "threshold": 0.5}  # rejects `replicas`, keeps `Deployment`
    keep_all = {"features": [], "mean": [], "scale": [], "weights": [], "bias": 5.0,
                "threshold": 0.5}
    tables, rejected = assemble_judged(extractions, set(), PackText(pages),
                                       {"entity": lower_out, "fact": keep_all}, sections)
    assert "replicas" in rejected and "Deployment" in set(tables["entities"]["name"])
    assert fact in set(tables["facts"]["text"])
