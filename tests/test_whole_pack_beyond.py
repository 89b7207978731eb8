"""A list question's items that the pages write beside the noun it asks for, anywhere in a
real pack (packs/retrieval/whole_pack_beyond.py)."""

from __future__ import annotations

import pytest
from query_fixtures import ARTICLES, build_pack, embedder  # noqa: F401 (fixtures)

from packs import KnowledgePack
from packs.retrieval import whole_pack_beyond as beyond
from packs.retrieval.whole_pack_items import Sec
from packs.text import terms

PLUGIN_PAGES = [
    ("storage", "Result storage", [
        ("Result storage > Backends",
         "Results are kept by a storage plugin. The `kestrel-s3` plugin writes them to S3, "
         "and the Redis plugin keeps them in memory."),
    ]),
    ("alerts", "Alerts", [
        ("Alerts > Sending alerts",
         "Kestrel sends alerts through plugins such as Sentry, PagerDuty and Slack. Install "
         "the `kestrel-s3` plugin first, so that alerts can link to results."),
    ]),
    ("history", "History", [
        ("History > Removed", "The `kestrel-legacy` plugin was removed in 2.0. Turn on the "
         "`kestrel-otel` [plugin](/docs/plugins/) for traces; the [plugin](/docs/plugins/) "
         "`kestrel-csv` writes files."),
    ]),
    ("tuning", "Tuning", [
        ("Tuning > Experimental switches", "Batch polling is off until you turn on the "
         "`BatchPoll` feature switch; the `QuickAck` switch acknowledges jobs early."),
    ]),
]
QUESTION = "Which plugins can a Kestrel deployment use?"


@pytest.fixture(scope="module")
def plugin_pack(tmp_path_factory, embedder):  # noqa: F811 (the fixture)
    folder = build_pack(tmp_path_factory.mktemp("plugins"), embedder,
                        pages=[*ARTICLES, *PLUGIN_PAGES])
    with KnowledgePack.open(folder) as pack:
        yield pack


def test_the_noun_a_list_question_asks_for_in_both_numbers():
    assert beyond.head_forms(QUESTION) == {"plugins", "plugin"}
    assert beyond.head_forms("Which policies does the scheduler apply?") == {
        "policies", "policy"}
    assert beyond.head_forms("Which kubectl subcommands change a Deployment?") >= {
        "subcommands", "subcommand"}
    assert beyond.head_forms("How do I restart a worker?") == set()


def test_names_written_beside_the_noun_are_read_from_every_page(plugin_pack):
    found = beyond.typed_names(plugin_pack, QUESTION)
    # The noun may be a link's text: "`kestrel-otel` [plugin](/docs/plugins/)".
    assert set(found) == {"kestrel-s3", "redis", "sentry", "pagerduty", "slack",
                          "kestrel-legacy", "kestrel-otel", "kestrel-csv"}
    assert found["sentry"][0] == "Sentry"  # as the page writes it
    assert len(found["kestrel-s3"][1]) == 2  # two sections write it so
    # A word of the noun's sentence that is no name ("The") is never one.
    assert "the" not in found and "results" not in found


def test_a_name_written_so_once_elsewhere_is_no_candidate(plugin_pack):
    by_id: dict[str, Sec] = {}
    typed, extra = beyond.typed_candidates(plugin_pack, by_id, QUESTION, set(),
                                           terms(QUESTION), 100, 0.3)
    assert "kestrel-legacy" in typed  # read, and marked where another source gives it
    assert [x[1] for x in extra] == ["kestrel-s3"]  # two sections write it so
    assert extra[0][3] == "typed" and extra[0][4] == 2  # two pages
    assert all(s.weight == 0.3 for s in extra[0][2])  # both outside the region

    # A section the search ranks high makes the names it writes so candidates.
    alerts = next(r for r in plugin_pack.db.read(
        "MATCH (s:Section) WHERE s.content CONTAINS 'PagerDuty' RETURN s.article_id, s.id, "
        "s.url, s.title, s.heading_path, s.content, s.position", {}))
    region = {alerts[1]: Sec(*alerts, weight=1.0)}
    _, extra = beyond.typed_candidates(plugin_pack, region, QUESTION, {"slack"},
                                       terms(QUESTION), 100, 0.3)
    names = sorted(x[1] for x in extra)
    assert names == ["PagerDuty", "Sentry", "kestrel-s3"]  # Slack is known already


def test_a_name_written_once_beside_the_whole_noun_of_two_words_is_a_candidate(plugin_pack):
    """"Which feature switches ...": the page writes "the `BatchPoll` feature switch" once;
    beside the whole noun that is an item, though a name written once beside the last word
    alone ("the `QuickAck` switch") is not kept (more often noise than an item)."""
    question = "Which feature switches can a Kestrel deployment turn on?"
    assert beyond.modifier(question) == "feature"
    found = beyond.typed_names(plugin_pack, question)
    assert found["batchpoll"][2] and not found["quickack"][2]
    _, extra = beyond.typed_candidates(plugin_pack, {}, question, set(), terms(question),
                                       100, 0.3)
    assert [x[1] for x in extra] == ["BatchPoll"]
    # A noun of one word has no word before it to require.
    assert beyond.modifier(QUESTION) is None
