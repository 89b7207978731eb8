"""A question that asks how two things differ (packs/retrieval/compare.py): each thing's
answer opens with the unit that says what it is, ahead of the units that only mention it.
Hand-made sentences, the shipped reader."""

from __future__ import annotations

from packs.retrieval import compare, extractive
from packs.retrieval import reader_features as rf
from packs.retrieval.units import Unit


def _unit(text: str, kind: str = "sentence") -> Unit:
    return Unit(0, len(text), kind, text)


def test_the_two_things_of_a_difference_question():
    assert compare.things("What's the difference between a PersistentVolume and a "
                          "PersistentVolumeClaim?") == ("PersistentVolume", "PersistentVolumeClaim")
    # The first thing takes the second's kind; the context both share is no thing's word.
    assert compare.things("What is the difference between a liveness and a readiness "
                          "probe?") == ("liveness probe", "readiness probe")
    assert compare.things("How does a DaemonSet differ from a Deployment in Kubernetes?") == (
        "DaemonSet", "Deployment")
    assert compare.things("NodePort vs LoadBalancer: what's the difference?") == (
        "NodePort", "LoadBalancer")
    assert compare.things("How do I drain a node?") is None


def test_a_unit_says_what_a_thing_is_when_the_thing_is_its_subject():
    pv, pvc = "PersistentVolume", "PersistentVolumeClaim"
    says = compare.says_what
    assert says(pv, pvc, _unit("A _PersistentVolume_ (PV) is a piece of storage in the cluster."))
    assert says(pvc, pv, _unit("PersistentVolumeClaims are a way for users to claim storage."))
    # Mentioned, not defined: another subject, a passive, an example of something else.
    assert not says(pv, pvc, _unit("For dynamically provisioned PersistentVolumes, the default "
                                   "reclaim policy is Delete."))
    assert not says(pvc, pv, _unit("A `persistentVolumeClaim` volume is used to mount a "
                                   "PersistentVolume into a Pod."))
    assert not says("macro", "function", _unit("An example of a function-like macro is an "
                                               "`sql!` macro."))
    # The subject names the kind of thing too: "Liveness" alone is no liveness probe.
    assert not says("liveness probe", "readiness probe",
                    _unit("Liveness is a necessary, but not sufficient, condition for readiness."))
    assert says("liveness probe", "readiness probe",
                _unit("A liveness probe is a check that restarts the container when it fails."))
    # A label with its description; the words that tell the things apart suffice.
    node, lb = "NodePort Service", "LoadBalancer Service"
    assert says(node, lb, _unit("- [`NodePort`](#type-nodeport) : Exposes the Service on each "
                                "Node's IP at a static port.", "item"))
    assert not says(node, lb, _unit("The default for `--nodeport-addresses` is an empty list."))
    # ... or a dash between them, in a list of terms ("`Metadata` - log request metadata").
    level = _unit("- `Metadata` - log request metadata (requesting user, timestamp, resource, "
                  "verb, etc.) but not request or response body.", "item")
    assert says("Metadata", "RequestResponse", level)
    assert not says("RequestResponse", "Metadata", level)
    assert not says("Metadata", "RequestResponse", _unit(
        "Audit events carry the request's metadata - who asked, when - at every level."))
    assert not says("macro", "function", _unit("macro_rules! vec {\n    () => {};\n}", "code"))


def test_each_thing_of_a_difference_question_leads_with_what_it_is():
    question = "What's the difference between a PersistentVolume and a PersistentVolumeClaim?"
    passages = [
        rf.Passage("For dynamically provisioned PersistentVolumes, the default reclaim policy "
                   "is Delete. With the Retain policy, deleting a PersistentVolumeClaim keeps "
                   "the PersistentVolume.", heading="Reclaiming", rank=0, similarity=0.7),
        rf.Passage("When a PersistentVolumeClaim is created, a PersistentVolume is provisioned "
                   "from the StorageClass.", heading="Dynamic provisioning", rank=1,
                   similarity=0.68),
        rf.Passage("Managing storage is a distinct problem from managing compute. A "
                   "PersistentVolume (PV) is a piece of storage in the cluster. A "
                   "PersistentVolumeClaim (PVC) is a request for storage by a user.",
                   heading="Introduction", rank=4, similarity=0.55)]
    picked = [p.unit.display for p in extractive.select(question, passages)]
    assert picked[:2] == ["A PersistentVolume (PV) is a piece of storage in the cluster.",
                          "A PersistentVolumeClaim (PVC) is a request for storage by a user."]
    # Without the pair, the same passages lead with what the reader ranks first.
    alone = [p.unit.display for p in extractive.select(
        "What happens to a PersistentVolume when its PersistentVolumeClaim is deleted?",
        passages)]
    assert alone[0] != picked[0]


def test_without_a_definition_a_unit_that_says_what_the_thing_does_leads():
    live, ready = "liveness probe", "readiness probe"
    does = compare.says_what_it_does
    assert does(live, ready, _unit("Liveness probes determine when to restart a container."))
    # about both things, an auxiliary or a negation after the subject, another subject
    assert not does(live, ready, _unit("Liveness probes do not wait for readiness probes to "
                                       "succeed."))
    assert not does(ready, live, _unit("Readiness probes are configured similarly to liveness "
                                       "probes."))
    assert not does(live, ready, _unit("Liveness probes can be a powerful way to recover."))
    assert not does(live, ready, _unit("For example, liveness probes could catch a deadlock."))
    assert not does(live, ready, _unit("kubectl describe pod liveness-exec", "code"))
    ranked = [_unit("Liveness probes do not wait for readiness probes to succeed."),
              _unit("For example, liveness probes could catch a deadlock."),
              _unit("Liveness probes determine when to restart a container.")]
    assert compare.leader(live, ready, ranked) == 2
    # one that says what it is leads wherever it ranks; one that says what it does only
    # from the first DOES_DEPTH
    defined = _unit("A liveness probe is a check that restarts the container when it fails.")
    assert compare.leader(live, ready, [*ranked, defined]) == 3
    deep = [ranked[0]] * compare.DOES_DEPTH + [ranked[2]]
    assert compare.leader(live, ready, deep) is None


def test_a_kind_written_once_for_both_things_goes_with_the_first_whole():
    assert compare.things("What's the difference between the NoSchedule and NoExecute taint "
                          "effects?") == ("NoSchedule taint effects", "NoExecute taint effects")
    # "differ from" writes each thing whole: no words of the second join the first
    assert compare.things("How do init containers differ from sidecar containers?") == (
        "init containers", "sidecar containers")
    # ... and a shorter first thing is whole there, not given the second's last word
    assert compare.things("How are containers different from virtual machines?") == (
        "containers", "virtual machines")
    assert compare.things("How does a newtype differ from a type alias?") == (
        "newtype", "type alias")
    # "vs" and "and" may write the kind once for both
    assert compare.things("Static vs dynamic provisioning of volumes: how do they differ?") == (
        "Static provisioning", "dynamic provisioning")
