"""Claude extraction that never wastes a call, through the real SDK against the loopback
API: a strictly schema-following server, batching with per-section caching, repair only
when most of an answer is lost, remembered failures, the circuit breaker and the Message
Batches API. No test sleeps: clock and sleep are a FakeClock."""

from __future__ import annotations

import json

import polars as pl
import pytest

from packs.llm.costs import cost_usd
from tasks.extract.core import ExtractConfig, extract_sections, request_key
from tasks.extract.prompt import BATCH_TOOL_NAME, TOOL_NAME
from tasks.llm import failures as llm_failures
from tasks.llm import store as llm_store
from tasks.stages.extract import known_outputs, output_rows
from tests.anthropic_fake import FakeAnthropic, FakeClock, default_responder
from tests.loopback_site import free_port
from tests.test_extract import _check_integrity, corpus

BROKEN = "BROKEN-SECTION"


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def run(df, config, store=None, memory=None, fc=None):
    fc = fc or FakeClock()
    return extract_sections(df, config, store or llm_store.ResponseStore(), memory=memory,
                            clock=fc.clock, sleep=fc.sleep)


def remember(result, df, path):
    """Round-trip a run through the stage's Parquet output, as the next build reads it."""
    output_rows(df, result).write_parquet(path)
    return known_outputs([path])


def test_a_strictly_schema_following_api_gives_entities_for_every_section():
    """Issue 15's failure: every boundary value the schema allows must validate."""
    df = corpus(24, seed=5)
    for budget in (0, 2000):
        with FakeAnthropic(schema_mode="boundary") as fake:
            result = run(df, ExtractConfig(base_url=fake.base_url, batch_token_budget=budget))
            assert sorted(result.extracted) == sorted(df["id"]) and result.failures == []
            assert result.stats["repairs"] == 0 and result.stats["dropped_items"] == 0
            assert all(ex.entities for _, ex in result.extractions)
            assert fake.stats.requests == result.stats["calls"]
            assert result.stats["calls"] == 24 if budget == 0 else \
                result.stats["calls"] < 24 / 3
            # the answers really were boundary values: empty and maximal strings and lists
            entities = [e for _, ex in result.extractions for e in ex.entities]
            assert any(e.description == "" for e in entities)
            assert any(len(e.name) == 200 for e in entities)
            assert any(len(ex.entities) == 25 for _, ex in result.extractions)
            assert any(ex.relationships == [] for _, ex in result.extractions)
            _check_integrity(result)


def test_batched_answers_are_cached_per_section(tmp_path):
    df = corpus(20, seed=2)
    with FakeAnthropic(keep_bodies=True) as fake:
        config = ExtractConfig(base_url=fake.base_url)
        store = llm_store.ResponseStore()
        first = run(df, config, store)
        assert sorted(first.extracted) == sorted(df["id"])
        calls = fake.stats.requests
        assert calls == first.stats["batched_calls"] <= 20 / 3
        assert {b["tool_choice"]["name"] for b in fake.stats.bodies} == {BATCH_TOOL_NAME}
        # stored under each section's own key: the same key a single request would have
        assert set(store.new) == {request_key(r, config.model) for r in df.to_dicts()}

        again = run(df, config, llm_store.ResponseStore(store.new))
        assert fake.stats.requests == calls and again.stats["cache_hits"] == 20

        edited = df.with_columns(pl.when(pl.col("id") == "sec0007")
                                 .then(pl.col("content") + " Changed.")
                                 .otherwise(pl.col("content")).alias("content"))
        third = run(edited, config, llm_store.ResponseStore(store.new))
        assert fake.stats.requests == calls + 1 and third.stats["cache_misses"] == 1
        assert fake.stats.bodies[-1]["tool_choice"]["name"] == TOOL_NAME  # alone


def test_a_section_missing_from_a_batched_answer_is_asked_alone():
    def drop_second(request):
        answer = default_responder(request)
        answer.pop("section_2", None)
        return answer

    df = corpus(12, seed=4)
    with FakeAnthropic(responder=drop_second) as fake:
        result = run(df, ExtractConfig(base_url=fake.base_url))
        assert sorted(result.extracted) == sorted(df["id"]) and result.failures == []
        batches = result.stats["batched_calls"]
        assert result.stats["batch_split"] == batches  # one section per batch asked again
        assert fake.stats.requests == 2 * batches


def test_an_unusable_batched_answer_costs_its_sections_one_request_each():
    df = corpus(6, seed=4)
    with FakeAnthropic(script=["no_tool"]) as fake:
        result = run(df, ExtractConfig(base_url=fake.base_url))
        assert sorted(result.extracted) == sorted(df["id"])
        assert result.stats["batched_calls"] == 1 and result.stats["batch_split"] == 6
        assert fake.stats.requests == 7 and result.stats["repairs"] == 0


def _breaking(share: float):
    """A responder that empties the names of the first `share` of the entities."""
    def respond(request):
        answer = default_responder(request)
        n = int(len(answer["entities"]) * share)
        for e in answer["entities"][:n]:
            e["name"] = ""
        answer["relationships"], answer["facts"] = [], answer["facts"][:1]
        return answer
    return respond


def test_a_few_invalid_items_are_dropped_and_counted_without_a_repair():
    df = corpus(1, seed=7)
    with FakeAnthropic(responder=_breaking(0.25)) as fake:
        result = run(df, ExtractConfig(base_url=fake.base_url))
        assert fake.stats.requests == 1 and result.stats["repairs"] == 0
        dropped = result.stats["dropped"]
        assert dropped == {"entities.name: empty": result.stats["dropped_items"]} and dropped
        assert result.dropped["sec0000"] == dropped
        assert result.extractions[0][1].entities


def test_an_answer_that_lost_most_items_is_repaired_once():
    df = corpus(1, seed=7)
    with FakeAnthropic(responder=_breaking(0.9), keep_bodies=True) as fake:
        result = run(df, ExtractConfig(base_url=fake.base_url))
        assert fake.stats.requests == 2 and result.stats["repairs"] == 1
        repair = fake.stats.bodies[1]["messages"][-1]["content"][0]
        assert repair["type"] == "tool_result" and repair["is_error"] is True
        assert "most items" in repair["content"]
        # the repair was no better: the first salvage is kept, never a failure
        assert result.extracted == ["sec0000"] and result.failures == []


def _unusable_when_marked(request):
    text = json.dumps(request["messages"])
    return {"entities": "unusable"} if BROKEN in text else default_responder(request)


def test_a_deterministic_failure_is_remembered_and_retried_a_bounded_number_of_times(tmp_path):
    df = corpus(4, seed=1).with_columns(
        pl.when(pl.col("id") == "sec0002").then(pl.lit(f"{BROKEN} text"))
        .otherwise(pl.col("content")).alias("content"))
    with FakeAnthropic(responder=_unusable_when_marked) as fake:
        config = ExtractConfig(base_url=fake.base_url, batch_token_budget=0)
        first = run(df, config)
        [failure] = first.failures
        assert failure["kind"] == "deterministic" and failure["attempts"] == 1
        assert "invalid output after one repair" in failure["reason"]
        assert fake.stats.requests == 4 + 1  # the broken one was repaired once
        known, memory = remember(first, df, tmp_path / "one.parquet")
        assert len(known) == 3 and len(memory.failures) == 1

        calls = fake.stats.requests
        second = run(df, config, llm_store.ResponseStore(known), memory)  # retry 1 of 1
        assert fake.stats.requests - calls == 2 and second.failures[0]["attempts"] == 2
        known, memory = remember(second, df, tmp_path / "two.parquet")

        calls = fake.stats.requests
        third = run(df, config, llm_store.ResponseStore(known), memory)  # used up: no call
        assert fake.stats.requests == calls and third.stats["calls"] == 0
        assert third.failures[0]["remembered"] and third.failures[0]["reason"] == \
            failure["reason"]
        assert third.stats["failed_remembered"] == 1 and third.stats["estimate_usd"] == 0

        forced = run(df, ExtractConfig(base_url=fake.base_url, batch_token_budget=0,
                                       retry_failed=True), llm_store.ResponseStore(known), memory)
        assert forced.stats["calls"] == 2 and forced.failures[0]["attempts"] == 3

        other_model = run(df, ExtractConfig(base_url=fake.base_url, batch_token_budget=0,
                                            model="claude-haiku-4-5-20251001"),
                          llm_store.ResponseStore(known), memory)
        assert other_model.stats["cache_misses"] == 4  # a new model: new keys, new memory


def test_transient_failures_are_asked_again_on_every_build(tmp_path):
    df = corpus(2, seed=1)
    with FakeAnthropic(script=["529"] * 4) as fake:
        config = ExtractConfig(base_url=fake.base_url, batch_token_budget=0, max_retries=1,
                               concurrency=1, failure_retries=0)
        first = run(df, config)
        assert [f["kind"] for f in first.failures] == ["transient", "transient"]
        known, memory = remember(first, df, tmp_path / "one.parquet")
        second = run(df, config, llm_store.ResponseStore(known), memory)
        assert second.failures == [] and sorted(second.extracted) == sorted(df["id"])


def test_a_dead_api_stops_the_stage_after_a_few_calls():
    port = free_port()
    df = corpus(69, seed=1)
    fc = FakeClock()
    config = ExtractConfig(base_url=f"http://127.0.0.1:{port}", concurrency=4,
                           batch_token_budget=0)
    store = llm_store.ResponseStore()
    with pytest.raises(llm_failures.CircuitOpen, match=r"5 calls in a row .* failed .*reachable") as info:
        run(df, config, store, fc=fc)
    assert "\n" not in str(info.value)
    attempts = len(store.ledger())
    assert 5 <= attempts <= 5 + config.concurrency  # not 5 tries for each of 69 sections
    assert len(fc.sleeps) < 5  # backoffs end when the breaker opens


def test_answers_that_keep_failing_stop_the_stage():
    df = corpus(30, seed=1)
    with FakeAnthropic(responder=lambda request: {"entities": "unusable"}) as fake:
        with pytest.raises(llm_failures.CircuitOpen, match="last 5 answers were all unusable"):
            run(df, ExtractConfig(base_url=fake.base_url, batch_token_budget=0,
                                  concurrency=2))
        assert fake.stats.requests <= 2 * (5 + 2)


def test_rate_limits_do_not_open_the_breaker():
    df = corpus(3, seed=1)
    with FakeAnthropic(script=["429"] * 4, retry_after="1") as fake:
        result = run(df, ExtractConfig(base_url=fake.base_url, batch_token_budget=0,
                                       concurrency=1, breaker_threshold=2))
        assert sorted(result.extracted) == sorted(df["id"]) and fake.stats.errors["429"] == 4


# --- the Message Batches API ------------------------------------------------------------


def test_batch_mode_uses_the_message_batches_api_at_half_price():
    df = corpus(10, seed=3)
    fc = FakeClock()
    with FakeAnthropic(batch_polls=2, cache_min_tokens=4096) as fake:
        config = ExtractConfig(base_url=fake.base_url, mode="batch", batch_poll_s=30)
        store = llm_store.ResponseStore()
        result = run(df, config, store, fc=fc)
        assert sorted(result.extracted) == sorted(df["id"]) and result.failures == []
        assert fake.stats.batches == 1 and fake.stats.requests == 0  # no direct call
        assert fc.sleeps == [30, 30]
        ledger = store.ledger()
        assert {r["purpose"] for r in ledger} == {"batch"}
        for r in ledger:
            full = cost_usd("claude-haiku-4-5", r["input_tokens"], r["output_tokens"],
                            r["cache_read_input_tokens"], r["cache_creation_input_tokens"])
            assert r["cost_usd"] == pytest.approx(full / 2)
        batch = result.stats["batch_api"]
        assert batch["requests"] == fake.stats.batch_items == batch["returned"]
        assert batch["sent_directly"] == 0 and batch["reason"] is None
        # the estimate prices the batch discount too
        assert result.stats["estimate_usd"] == pytest.approx(
            result.stats["cost_usd"], rel=0.5)


def test_a_batch_that_does_not_end_in_time_falls_back_to_direct_calls():
    df = corpus(10, seed=3)
    fc = FakeClock()
    with FakeAnthropic(batch_never_ends=True) as fake:
        config = ExtractConfig(base_url=fake.base_url, mode="batch", batch_poll_s=60,
                               batch_timeout_s=300)
        result = run(df, config, fc=fc)
        assert sorted(result.extracted) == sorted(df["id"])
        assert sum(fc.sleeps) == 300 and fake.stats.batches == 1
        batch = result.stats["batch_api"]
        assert "did not end within 300 s" in batch["reason"] and batch["returned"] == 0
        assert fake.stats.requests == batch["requests"]  # each unit once, directly


@pytest.mark.parametrize("error", ["500", "404"])
def test_a_refused_batch_falls_back_to_direct_calls(error):
    df = corpus(5, seed=3)
    with FakeAnthropic(batch_create_error=error) as fake:
        result = run(df, ExtractConfig(base_url=fake.base_url, mode="batch"))
        assert sorted(result.extracted) == sorted(df["id"]) and fake.stats.batches == 0
        assert "refused the batch" in result.stats["batch_api"]["reason"]
        assert fake.stats.requests == result.stats["batch_api"]["requests"]


def test_batch_items_that_error_are_retried_directly_or_failed():
    df = corpus(3, seed=3)
    with FakeAnthropic(script=["529", "400", "ok"]) as fake:
        config = ExtractConfig(base_url=fake.base_url, mode="batch", batch_token_budget=0,
                               concurrency=1)
        result = run(df, config)
        # 529: a transient item error, asked again directly; 400: refused for good
        [failure] = result.failures
        assert failure["kind"] == "deterministic" and "invalid_request_error" in \
            failure["reason"]
        assert len(result.extracted) == 2 and fake.stats.requests == 1


def test_a_rejected_key_stops_batch_mode_too(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong")
    with FakeAnthropic(api_key="right") as fake:
        with pytest.raises(llm_failures.FatalError, match="401"):
            run(corpus(3), ExtractConfig(base_url=fake.base_url, mode="batch"))
        assert fake.stats.batches == 0 and fake.stats.requests == 0
