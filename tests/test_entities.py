"""Entity resolution: normalisation, merging rules, and precision/recall on a labelled set."""

from __future__ import annotations

import random

import pytest

from packs.format import entity_id
from tasks.extract.entities import RawEntity, normalize_name, resolve_entities

# Thresholds for the labelled set below (50 pairs, 30 should merge). Measured: precision 1.00,
# recall 0.97 — the one miss is an alias no rule can derive ("K8s" for "Kubernetes") unless
# an extractor declares it.
MIN_PRECISION = 0.95
MIN_RECALL = 0.85


@pytest.mark.parametrize("raw, expected", [
    ("Horizontal Pod Autoscaler", "horizontal pod autoscaler"),
    ("horizontal  pod\tautoscalers", "horizontal pod autoscaler"),
    ("`ConfigMap`", "configmap"),
    ("**Policies**", "policy"),
    ("os.path.join()", "os.path.join"),
    ("Kubernetes", "kubernetes"),
    ("status", "status"),
    ("Classes", "class"),
    ("pod-autoscaler.", "pod autoscaler"),
    ("  ", ""),
])
def test_normalize_name(raw, expected):
    assert normalize_name(raw) == expected


# A small pack's worth of surface names, with the type an extractor gave them.
PACK = [
    ("Horizontal Pod Autoscaler", "concept"), ("HPA", "term"),
    ("horizontal pod autoscalers", "concept"), ("HorizontalPodAutoscaler", "api"),
    ("ConfigMap", "api"), ("config map", "concept"), ("ConfigMaps", "code"),
    ("`configmap`", "code"), ("Deployment", "api"), ("deployments", "concept"),
    ("Pod", "concept"), ("pods", "concept"), ("PodSpec", "api"),
    ("Persistent Volume Claim", "concept"), ("PVC", "term"), ("PersistentVolumeClaim", "api"),
    ("Kubernetes", "product"), ("K8s", "product"), ("kubectl", "tool"),
    ("kubectl get pods", "command"), ("Service", "api"), ("Services", "concept"),
    ("Service Account", "concept"), ("max_tokens", "config_option"),
    ("max tokens", "concept"), ("CPU", "term"), ("Central Processing Unit", "concept"),
    ("CRD", "term"), ("Custom Resource Definition", "concept"),
    ("API", "term"), ("Application Programming Interface", "concept"),
    ("SA", "term"), ("Storage Adapter", "concept"), ("Node", "concept"), ("Nodes", "concept"),
    ("NodePort", "api"), ("Node.js", "product"), ("Ingress", "api"),
    ("Ingress Controller", "concept"), ("RBAC", "term"), ("Role-Based Access Control", "concept"),
    ("Job", "api"), ("CronJob", "api"), ("cron job", "concept"), ("Secret", "api"),
    ("Secrets", "concept"), ("secret key", "concept"), ("Secret Manager", "product"),
    ("os.path.join", "code"), ("os.path.join()", "code"), ("os.path", "code"),
    ("Processes", "concept"), ("Process", "concept"), ("Policy", "concept"),
    ("policies", "concept"), ("DNS", "protocol"), ("Domain Name System", "protocol"),
    ("Pod Disruption Budget", "concept"), ("PDB", "term"), ("PodDisruptionBudgets", "api"),
    ("Cluster IP", "concept"), ("ClusterIP", "api"), ("CRI", "term"),
    ("Container Runtime Interface", "standard"), ("Container", "concept"),
    ("Containers", "concept"), ("Event", "api"), ("Events", "concept"), ("EventSource", "api"),
    ("CA", "term"), ("Certificate Authority", "concept"), ("Cluster Autoscaler", "tool"),
    ("Python", "product"), ("python3", "tool"),
]

# (a, b, should they be one entity?)
LABELLED = [
    ("Horizontal Pod Autoscaler", "HPA", True),
    ("Horizontal Pod Autoscaler", "horizontal pod autoscalers", True),
    ("HPA", "HorizontalPodAutoscaler", True),
    ("ConfigMap", "config map", True),
    ("ConfigMap", "ConfigMaps", True),
    ("`configmap`", "ConfigMap", True),
    ("Deployment", "deployments", True),
    ("Pod", "pods", True),
    ("Persistent Volume Claim", "PVC", True),
    ("PVC", "PersistentVolumeClaim", True),
    ("Kubernetes", "K8s", True),
    ("Service", "Services", True),
    ("max_tokens", "max tokens", True),
    ("CPU", "Central Processing Unit", True),
    ("CRD", "Custom Resource Definition", True),
    ("API", "Application Programming Interface", True),
    ("Node", "Nodes", True),
    ("RBAC", "Role-Based Access Control", True),
    ("CronJob", "cron job", True),
    ("Secret", "Secrets", True),
    ("os.path.join", "os.path.join()", True),
    ("Processes", "Process", True),
    ("Policy", "policies", True),
    ("DNS", "Domain Name System", True),
    ("Pod Disruption Budget", "PDB", True),
    ("PDB", "PodDisruptionBudgets", True),
    ("Cluster IP", "ClusterIP", True),
    ("CRI", "Container Runtime Interface", True),
    ("Container", "Containers", True),
    ("Event", "Events", True),
    ("Pod", "PodSpec", False),
    ("kubectl", "kubectl get pods", False),
    ("Service", "Service Account", False),
    ("SA", "Service Account", False),
    ("SA", "Storage Adapter", False),
    ("Node", "NodePort", False),
    ("Node", "Node.js", False),
    ("Ingress", "Ingress Controller", False),
    ("Job", "CronJob", False),
    ("Secret", "secret key", False),
    ("Secret", "Secret Manager", False),
    ("os.path.join", "os.path", False),
    ("Event", "EventSource", False),
    ("CA", "Certificate Authority", False),
    ("CA", "Cluster Autoscaler", False),
    ("Python", "python3", False),
    ("Container", "Container Runtime Interface", False),
    ("Horizontal Pod Autoscaler", "Pod", False),
    ("Persistent Volume Claim", "Pod", False),
    ("CPU", "CRI", False),
]


def _raws(names=PACK):
    return [RawEntity(name, etype, f"about {name}", (), f"s{i % 7}")
            for i, (name, etype) in enumerate(names)]


def merge_scores() -> tuple[float, float]:
    res = resolve_entities(_raws())
    tp = fp = fn = 0
    for a, b, same in LABELLED:
        ia, ib = res.lookup(a), res.lookup(b)
        assert ia is not None and ib is not None, (a, b)
        merged = ia == ib
        tp += merged and same
        fp += merged and not same
        fn += (not merged) and same
    return tp / (tp + fp), tp / (tp + fn)


def test_merge_precision_and_recall_on_labelled_set():
    precision, recall = merge_scores()
    assert precision >= MIN_PRECISION, precision
    assert recall >= MIN_RECALL, recall


def test_resolution_is_independent_of_input_order():
    a = resolve_entities(_raws())
    shuffled = list(PACK)
    random.Random(7).shuffle(shuffled)
    b = resolve_entities(_raws(shuffled))
    assert [(e.id, e.name, e.type, sorted(e.aliases)) for e in a.entities] == \
           [(e.id, e.name, e.type, sorted(e.aliases)) for e in b.entities]


def test_canonical_name_type_and_id():
    res = resolve_entities([
        RawEntity("HPA", "term", "short"),
        RawEntity("HPA", "term"),
        RawEntity("Horizontal Pod Autoscaler", "concept", "scales pods on load"),
        RawEntity("horizontal pod autoscalers", "concept"),
        RawEntity("HorizontalPodAutoscaler", "api", "the API object"),
        RawEntity("Horizontal Pod Autoscaler", "concept"),
    ])
    [e] = res.entities
    assert e.name == "Horizontal Pod Autoscaler"  # a long form beats a more frequent acronym
    assert e.type == "concept"  # most frequent type among mentions
    assert e.id == entity_id("horizontal pod autoscaler", "concept")
    assert set(e.aliases) == {"HPA", "horizontal pod autoscalers", "HorizontalPodAutoscaler"}
    assert e.description == "scales pods on load"  # the longest description


def test_type_ties_prefer_the_specific_type():
    res = resolve_entities([RawEntity("Deployment", "concept"), RawEntity("deployments", "api")])
    [e] = res.entities
    assert e.type == "api"


def test_declared_aliases_merge_and_ambiguous_acronyms_do_not():
    res = resolve_entities([
        RawEntity("Kubernetes", "product", aliases=("K8s",)),
        RawEntity("K8s", "product"),
        RawEntity("CA", "term"),
        RawEntity("Certificate Authority", "concept"),
        RawEntity("Cluster Autoscaler", "tool"),
    ])
    assert res.lookup("k8s") == res.lookup("Kubernetes")
    assert len({res.lookup("CA"), res.lookup("Certificate Authority"),
                res.lookup("Cluster Autoscaler")}) == 3


def test_empty_names_are_dropped():
    res = resolve_entities([RawEntity("``", "code"), RawEntity("  ", "other")])
    assert res.entities == []
    assert res.lookup("anything") is None
