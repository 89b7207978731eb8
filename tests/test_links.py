from packs.format import article_id
from tasks.link_graph import canonical_url, degree_centrality, links_in_markdown, resolve_links


def test_canonical_url_folds_equivalent_forms() -> None:
    same = [
        "HTTP://Example.org:80/docs/pods/",
        "http://example.org/docs/pods",
        "http://example.org/docs/pods/index.html",
        "http://example.org/docs/pods.md#lifecycle",
        "http://example.org/docs/pods/_index.md",
    ]
    assert {canonical_url(u) for u in same} == {"http://example.org/docs/pods"}
    assert canonical_url("https://example.org:8443/a/") == "https://example.org:8443/a"
    assert canonical_url("http://example.org/a?x=1#f") == "http://example.org/a?x=1"


def test_markdown_links_resolve_relative_and_skip_anchors() -> None:
    text = "See [pods](../pods/) and [top](#top), [mail](mailto:a@b), [ext](https://x.org/y \"t\")."
    assert links_in_markdown(text, "http://h/docs/concepts/nodes.md") == [
        "http://h/docs/pods/",
        "https://x.org/y",
    ]


def test_resolve_links_exact_suffix_and_self() -> None:
    pages = [
        {"url": "http://127.0.0.1:8000/concepts/workloads/pods/_index.md", "links": [
            "http://127.0.0.1:8000/docs/concepts/services/#dns",  # published path → suffix
            "http://127.0.0.1:8000/concepts/workloads/pods/",  # itself
        ]},
        {"url": "http://127.0.0.1:8000/concepts/services.md", "links": [
            "http://127.0.0.1:8000/concepts/workloads/pods.md",  # exact after canonicalisation
            "https://elsewhere.org/concepts/services",  # other host: never a suffix match
            "http://127.0.0.1:8000/missing/page",
        ]},
    ]
    pods = article_id(canonical_url(pages[0]["url"]))
    services = article_id(canonical_url(pages[1]["url"]))
    assert resolve_links(pages) == sorted([(pods, services), (services, pods)])


def test_ambiguous_suffix_is_not_linked() -> None:
    pages = [
        {"url": "http://h/a/x/intro.md", "links": []},
        {"url": "http://h/b/x/intro.md", "links": []},
        {"url": "http://h/c.md", "links": ["http://h/docs/x/intro/"]},
    ]
    assert resolve_links(pages) == []


def test_degree_centrality_hand_computed() -> None:
    cent = degree_centrality(["a", "b", "c"], [("a", "b"), ("a", "c"), ("b", "a")])
    assert cent == {"a": 3 / 2, "b": 2 / 2, "c": 1 / 2}
