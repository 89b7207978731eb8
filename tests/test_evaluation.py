"""packs.evaluation: metrics against hand-computed values, gold matching, the questions file,
few-shot leak refusal, the runner and `kpack eval` on the small Kestrel pack, and Claude
grading through the real SDK against the loopback Messages API."""

from __future__ import annotations

import json
import math
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import typer
from answer_fake import cited_answer
from query_fixtures import FEWSHOT, embedder, pack_dir, url_of  # noqa: F401 (fixtures)
from typer.testing import CliRunner

from packs import KnowledgePack
from packs.cli.evaluate import register
from packs.eval_judge import RUBRIC, judge_answer
from packs.eval_metrics import (
    Source,
    credit,
    distinct_sources,
    ndcg_at,
    recall_at,
    reciprocal_rank,
    score_ranking,
)
from packs.eval_questions import (
    EvalLeakError,
    QuestionsFileError,
    check_no_leak,
    load_questions,
    matches,
    parse_gold,
)
from packs.evaluation import evaluate
from packs.layout import latest_eval_report
from packs.result import RankedSection
from packs.urls import canonical_url
from tests.anthropic_fake import FakeAnthropic

# --- metrics -------------------------------------------------------------------------


def test_recall_and_reciprocal_rank_by_hand():
    credited = [None, 0, None, 1]  # golds 0 and 1 found at ranks 2 and 4, of 3 golds
    assert recall_at(credited, 3, 1) == 0
    assert recall_at(credited, 3, 2) == pytest.approx(1 / 3)
    assert recall_at(credited, 3, 10) == pytest.approx(2 / 3)
    assert reciprocal_rank(credited) == 0.5
    assert reciprocal_rank([None, None]) == 0.0
    assert recall_at([], 0, 5) == 0.0


def test_ndcg_binary_and_graded_by_hand():
    # binary: relevant at ranks 1 and 3, two golds → (1 + 1/log2 4) / (1 + 1/log2 3)
    got = ndcg_at([0, None, 1], [1.0, 1.0])
    assert got == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    # graded: grade-1 gold first, grade-2 gold second; ideal puts the 2 first
    graded = ndcg_at([1, 0], [2.0, 1.0])
    assert graded == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ndcg_at([1, 0], [2.0, 1.0], binary=True) == pytest.approx(1.0)
    assert ndcg_at([0], [1.0]) == 1.0
    assert ndcg_at([None] * 10 + [0], [1.0]) == 0.0  # found only past the cut-off
    assert ndcg_at([], []) == 0.0


def test_score_ranking_counts_each_gold_once():
    gold = [parse_gold("https://x.test/a"), parse_gold("https://x.test/b")]
    ranked = [Source("https://x.test/a", "A", "A"), Source("https://x.test/a/", "A", "A > B"),
              Source("https://x.test/b.html", "B", "B")]
    assert credit(ranked, gold) == [0, None, 1]
    m = score_ranking(ranked, gold, ks=(1, 2))
    assert m["recall@1"] == 0.5 and m["recall@2"] == 0.5 and m["mrr"] == 1.0
    assert m["ndcg@10"] == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))


# --- gold sources and matching -----------------------------------------------------------


def test_canonical_url_folds_the_usual_variants():
    for u in ("HTTP://Docs.Test:80/a/b/", "http://docs.test/a/b.html#frag",
              "http://docs.test/a/b/index.html", "http://docs.test//a/b.md"):
        assert canonical_url(u) == "http://docs.test/a/b"
    assert canonical_url("http://docs.test:8080/a") != canonical_url("http://docs.test/a")


def test_section_matching_by_title_or_heading_path_suffix():
    url, path = "https://g.test/tomatoes.md", "Growing tomatoes > Pruning > Suckers"
    for gold in ("https://g.test/tomatoes#Suckers", "https://g.test/tomatoes.md#suckers",
                 "https://g.test/tomatoes/#Pruning > Suckers", "https://g.test/tomatoes",
                 "https://g.test/tomatoes#growing-tomatoes > pruning > suckers"):
        assert matches(url, "Suckers", path, parse_gold(gold)), gold
    for gold in ("https://g.test/tomatoes#Pruning", "https://g.test/bees#Suckers",
                 "https://g.test/tomatoes#Feeding > Suckers"):
        assert not matches(url, "Suckers", path, parse_gold(gold)), gold
    # the intro section is titled with the page title
    assert matches(url, "Growing tomatoes", "Growing tomatoes",
                   parse_gold("https://g.test/tomatoes#Growing tomatoes"))


def test_distinct_sources_fold_pages_or_chunks():
    def sec(i, url, path):
        return RankedSection(id=str(i), article_id=url, url=url, title=path.split(" > ")[-1],
                             heading_path=path, content="", score=1.0)
    secs = [sec(1, "https://a.test/p", "P > One"), sec(2, "https://a.test/p", "P > One"),
            sec(3, "https://a.test/p", "P > Two"), sec(4, "https://a.test/q", "Q")]
    assert [s.heading_path for s in distinct_sources(secs, True)] == ["P > One", "P > Two", "Q"]
    assert [s.url for s in distinct_sources(secs, False)] == ["https://a.test/p",
                                                              "https://a.test/q"]


# --- the questions file ------------------------------------------------------------------


def test_load_questions_and_graded_golds(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({"id": 1, "question": " Why? ", "gold_sources": [
        "https://a.test/p#Intro", {"source": "https://a.test/q", "grade": 2}],
        "answer": "Because.", "kind": "why"}) + "\n\n")
    [q] = load_questions(f)
    assert (q.id, q.question, q.answer, q.kind, q.section_level) == ("1", "Why?", "Because.",
                                                                     "why", True)
    assert [g.grade for g in q.gold] == [1.0, 2.0] and q.gold[0].heading == ("intro",)


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", ":1: "),
    (json.dumps({"question": "q", "gold_sources": []}), "'id'"),
    (json.dumps({"id": "a", "question": "", "gold_sources": []}), "'question'"),
    (json.dumps({"id": "a", "question": "q", "gold_sources": "https://x"}), "gold_sources"),
    (json.dumps({"id": "a", "question": "q", "gold_sources": ["not a url"]}), "not a URL"),
    (json.dumps({"id": "a", "question": "q", "gold_sources": [
        {"source": "https://x.test", "grade": 0}]}), "grade"),
])
def test_bad_questions_files_name_the_line(tmp_path, line, message):
    f = tmp_path / "q.jsonl"
    f.write_text(line + "\n")
    with pytest.raises(QuestionsFileError, match=message) as exc:
        load_questions(f)
    assert str(f) in str(exc.value)


def test_duplicate_ids_and_empty_files_are_refused(tmp_path):
    f = tmp_path / "q.jsonl"
    row = json.dumps({"id": "a", "question": "q", "gold_sources": []})
    f.write_text(row + "\n" + row + "\n")
    with pytest.raises(QuestionsFileError, match=":2: duplicate id"):
        load_questions(f)
    f.write_text("\n")
    with pytest.raises(QuestionsFileError, match="no questions"):
        load_questions(f)


# --- the runner and the CLI on the Kestrel pack -------------------------------------------

QUESTIONS = [
    {"id": "retry", "question": "How many times is a failing job retried by default?",
     "gold_sources": [url_of("retries") + "#The RetryPolicy class"], "kind": "section"},
    {"id": "dlq", "question": "Where do jobs go after they exhaust their retries?",
     "gold_sources": [url_of("queues")], "kind": "page"},
    {"id": "pending", "question": "my jobs stay pending forever",
     "gold_sources": [url_of("troubleshooting") + "#Jobs stuck in pending"], "kind": "section",
     "answer": "No worker polls their queue; start one with the queue in --queues."},
]


def _write(tmp_path, rows):
    f = tmp_path / "questions.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def test_evaluate_scores_every_question_and_kind(pack_dir, tmp_path):
    qs = load_questions(_write(tmp_path, QUESTIONS))
    with KnowledgePack.open(pack_dir) as pack:
        report = evaluate(pack, qs, ks=(1, 5))
    assert report.questions == 3 and report.gated == 0 and report.judge_model is None
    assert set(report.overall) == {"recall@1", "recall@5", "mrr", "ndcg@10"}
    assert report.overall["recall@5"] == 1.0
    assert set(report.by_kind) == {"page", "section"}
    dlq = next(r for r in report.per_question if r.id == "dlq")
    assert dlq.metrics["recall@1"] == 1.0 and dlq.retrieved[0] == url_of("queues")
    assert len(set(dlq.retrieved)) == len(dlq.retrieved)  # pages, each once
    assert json.loads(json.dumps(report.to_dict(), default=str))["questions"] == 3


def test_a_question_from_the_fewshot_pool_is_refused(pack_dir, tmp_path):
    leaked = {"id": "leak", "question": "  what port does the SCHEDULER listen on? ",
              "gold_sources": [url_of("overview")]}
    qs = load_questions(_write(tmp_path, [*QUESTIONS, leaked]))
    with KnowledgePack.open(pack_dir) as pack:
        with pytest.raises(EvalLeakError, match="leak"):
            evaluate(pack, qs)
        check_no_leak(pack.path, qs[:3])  # the clean ones pass
    assert FEWSHOT[0]["question"].lower().startswith("what port")


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("noop")(lambda: None)  # keep `eval` a named subcommand, as in kpack
    register(app)
    return app


def test_cli_table_json_and_exit_codes(pack_dir, tmp_path):
    runner = CliRunner()
    qfile = _write(tmp_path, QUESTIONS)
    res = runner.invoke(_app(), ["eval", str(pack_dir), "--questions", str(qfile),
                                 "--per-question"])
    assert res.exit_code == 0, res.output
    assert "overall" in res.output and "recall@5" in res.output and "pending:" in res.output
    res = runner.invoke(_app(), ["eval", str(pack_dir), "-q", str(qfile), "--json",
                                 "--k", "3", "--no-gate"])
    data = json.loads(res.output)
    assert data["ks"] == [3] and "recall@3" in data["overall"]
    # The scorecard is kept beside the pack, not in its checksummed build folder.
    saved = Path(data["saved_to"])
    assert saved == Path(pack_dir) / "eval" / f"{data['build_id']}.json"
    kept = json.loads(saved.read_text())
    assert kept["overall"] == data["overall"] and kept["questions_file"] == str(qfile)
    assert latest_eval_report(Path(pack_dir), data["build_id"])[1]["overall"] == data["overall"]
    res = runner.invoke(_app(), ["eval", str(pack_dir), "-q", str(qfile), "--no-save"])
    assert res.exit_code == 0 and "scorecard saved" not in res.output
    assert data["options"]["gate_threshold"] == -1.0
    bad = _write(tmp_path, [{"id": "x"}])
    res = runner.invoke(_app(), ["eval", str(pack_dir), "-q", str(bad)])
    assert res.exit_code == 2 and "error:" in res.output
    res = runner.invoke(_app(), ["eval", str(tmp_path / "nope"), "-q", str(qfile)])
    assert res.exit_code == 2
    leak = _write(tmp_path, [{"id": "l", "question": FEWSHOT[1]["question"],
                              "gold_sources": []}])
    res = runner.invoke(_app(), ["eval", str(pack_dir), "-q", str(leak)])
    assert res.exit_code == 2 and "few-shot" in res.output


# --- grading through the real SDK ------------------------------------------------------------


def _grader(score):
    def respond(request: dict) -> dict:
        if request["tool_choice"]["name"] == "answer":  # ask(): the synthesis call
            return cited_answer(request, misquote={2: "Jobs are never retried."})
        assert request["system"] == RUBRIC
        assert "<reference>" in request["messages"][0]["content"]
        return {"score": score, "reason": "matches the reference"}
    return respond


def test_judge_answer_through_the_real_sdk(monkeypatch):
    import anthropic

    with FakeAnthropic(responder=_grader(2)) as fake:
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        j = judge_answer(client, "q?", "ref", "answer")
        assert (j.score, j.error) == (1.0, None) and j.reason
    with FakeAnthropic(responder=_grader(7)) as fake:  # out of the rubric's range
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        assert judge_answer(client, "q?", "ref", "a").score is None
    with FakeAnthropic(script=["529"]) as fake:  # transient: reported, not raised
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        j = judge_answer(client, "q?", "ref", "a")
        assert j.score is None and j.error
    with FakeAnthropic(api_key="other") as fake:  # terminal: raised
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            judge_answer(client, "q?", "ref", "a")


def test_judge_answer_records_what_the_grading_cost():
    import anthropic

    sonnet = 3.0, 15.0  # $/Mtok in, out: claude-sonnet-4-6's list price
    with FakeAnthropic(responder=_grader(2)) as fake:
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        j = judge_answer(client, "q?", "ref", "answer", "claude-sonnet-4-6")
        served = fake.stats.input_tokens, fake.stats.output_tokens
    assert served[0] > 0 and served[1] > 0
    assert (j.usage["input_tokens"], j.usage["output_tokens"], j.usage["api_calls"]) == (
        *served, 1)
    expected = (served[0] * sonnet[0] + served[1] * sonnet[1]) / 1e6
    assert j.usage["cost_usd"] == pytest.approx(expected, abs=1e-8)
    with FakeAnthropic(responder=_grader(7)) as fake:  # unusable, but the reply is paid for
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        j = judge_answer(client, "q?", "ref", "a")
        assert j.score is None and j.usage["api_calls"] == 1
        assert j.usage["output_tokens"] == fake.stats.output_tokens > 0
    with FakeAnthropic(script=["529"]) as fake:  # no reply: nothing spent
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        j = judge_answer(client, "q?", "ref", "a")
        assert j.error and j.usage == {"input_tokens": 0, "output_tokens": 0,
                                       "api_calls": 0, "cost_usd": 0.0}


def _eval_cli(pack_dir, tmp_path, *flags):
    """`eval PACK -q <QUESTIONS written to tmp_path> FLAGS...` through the CLI."""
    return CliRunner().invoke(_app(), ["eval", str(pack_dir), "-q",
                                       str(_write(tmp_path, QUESTIONS)), *flags])


@contextmanager
def _claude(monkeypatch, responder):
    """The loopback Messages API with a key set, as the CLI finds them in the environment."""
    with FakeAnthropic(responder=responder) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        yield fake


def test_cli_reports_the_claude_cost_of_answers_and_grading(pack_dir, tmp_path, monkeypatch):
    with _claude(monkeypatch, _grader(1)) as fake:
        res = _eval_cli(pack_dir, tmp_path, "--json")
        assert res.exit_code == 0, res.output
        served = fake.stats.input_tokens, fake.stats.output_tokens
    data = json.loads(res.output)
    answers, judge = data["answer_usage"], data["judge_usage"]
    # one question has a reference answer: one synthesis call, one grading call
    assert answers["api_calls"] == 1 and judge["api_calls"] == 1
    assert judge["cost_usd"] > 0 and answers["cost_usd"] > 0
    assert judge == data["per_question"][2]["judgement"]["usage"]
    # every token the API served is accounted for, once
    assert (answers["input_tokens"] + judge["input_tokens"],
            answers["output_tokens"] + judge["output_tokens"]) == served


def test_cli_grades_answers_when_a_key_is_set(pack_dir, tmp_path, monkeypatch):
    with _claude(monkeypatch, _grader(1)):
        res = _eval_cli(pack_dir, tmp_path, "--json")
        assert res.exit_code == 0, res.output
        data = json.loads(res.output)
        text = _eval_cli(pack_dir, tmp_path).output
    # the text report says what Claude cost, answers and grading apart
    for label, usage in (("answers", data["answer_usage"]), ("grading", data["judge_usage"])):
        assert (f"Claude for {label}: 1 calls, {usage['input_tokens']:,} tokens in, "
                f"{usage['output_tokens']:,} out, ${usage['cost_usd']:.4f}") in text
    # one question has a reference answer: ask() (synthesis) + one grading call
    assert data["judged"] == 1 and data["judge_failures"] == 0
    assert data["overall"]["answer_score"] == 0.5
    graded = [q for q in data["per_question"] if q["judgement"]]
    assert graded[0]["id"] == "pending" and graded[0]["judgement"]["score"] == 0.5
    # The answer asked for grading has its citations checked: [2]'s quote is not in [2].
    assert (data["answered"], data["citations"], data["citations_verified"]) == (1, 2, 1)
    assert data["citation_precision"] == 0.5 == graded[0]["metrics"]["citation_precision"]


def test_cli_reports_citation_precision_of_offline_answers(pack_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    res = _eval_cli(pack_dir, tmp_path, "--answers")
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("citation precision"))
    assert re.fullmatch(r"citation precision: 1\.000 \((\d+)/\1 citations verified in 3 "
                        r"answers\)", line), line
    plain = _eval_cli(pack_dir, tmp_path)
    assert "citation precision" not in plain.output  # no answers asked, nothing to report


def test_eval_reports_how_often_the_context_did_not_answer(pack_dir, tmp_path, monkeypatch):
    from answer_fake import unanswerable

    def respond(request: dict) -> dict:
        text = request["messages"][0]["content"]
        asked = text.rsplit("<question>", 1)[-1]
        return unanswerable(request) if "exhaust their retries" in asked else cited_answer(request)

    with _claude(monkeypatch, respond):
        res = _eval_cli(pack_dir, tmp_path, "--answers", "--json")
        assert res.exit_code == 0, res.output
        text = _eval_cli(pack_dir, tmp_path, "--answers").output
    data = json.loads(res.output)
    assert (data["answered"], data["insufficient_context"]) == (3, 1)
    assert data["insufficient_rate"] == pytest.approx(1 / 3)
    assert "insufficient context: 1 of 3 answers (33.3%)" in text
