"""The LLM layer (cache → retry → rate limit → provider) through the real anthropic SDK
against the loopback fake. No test really sleeps: clock and sleep are a FakeClock."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from packs.llm.costs import PRICES, cost_usd, price_for
from packs.retry import retry_after_s
from tasks.extract.core import TOOL_NAME, build_request, dump_extraction, parse_extraction
from tasks.llm import failures as llm_failures
from tasks.llm import guards
from tasks.llm import layers as llm
from tasks.llm import store as llm_store
from tests.anthropic_fake import FakeAnthropic, FakeClock
from tests.loopback_site import free_port

SECTION = ("The Horizontal Pod Autoscaler (HPA) scales a `Deployment` based on CPU use. "
           "It reads `spec.replicas` through the autoscaling.v2 API.")


def make_llm(base_url: str, tmp_path, fc: FakeClock, *, concurrency=4, max_retries=4,
             cap=None, key="test-key"):
    provider = llm.AnthropicProvider(key, base_url=base_url, timeout_s=5)
    cache = llm_store.ResponseStore(ledger=tmp_path / "ledger.jsonl")
    return llm.LLM(provider, cache, model="claude-haiku-4-5", prompt_version="test-v1",
                   concurrency=concurrency, max_retries=max_retries, budget=guards.Budget(cap),
                   clock=fc.clock, sleep=fc.sleep, rng=random.Random(0), run_id="run-1",
                   base_url=base_url)


def call(client: llm.LLM, content: str = SECTION, *, estimate: float = 0.001):
    request = build_request("claude-haiku-4-5", "Autoscaling", "Concepts > HPA", content)
    return client.structured(request, tool_name=TOOL_NAME, parse=parse_extraction,
                             dump=dump_extraction, estimate_usd=estimate, item_id="s1")


@pytest.fixture
def fc():
    return FakeClock()


def test_tool_output_is_parsed_cached_and_ledgered(tmp_path, fc):
    with FakeAnthropic(keep_bodies=True) as fake:
        client = make_llm(fake.base_url, tmp_path, fc)
        out = call(client)
        assert not out.cached
        names = {e.name for e in out.value.entities}
        assert {"Horizontal Pod Autoscaler", "Deployment", "spec.replicas"} <= names
        again = call(client)
        assert again.cached and again.value == out.value
        assert fake.stats.requests == 1

        body = fake.stats.bodies[0]
        assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert "temperature" not in body
        assert "<section>\n" + SECTION in body["messages"][0]["content"]

        [row] = client.cache.ledger("run-1")
        assert row["status"] == "ok" and row["purpose"] == "extract"
        assert row["input_tokens"] == fake.stats.input_tokens
        assert row["output_tokens"] == fake.stats.output_tokens
        assert row["cache_creation_input_tokens"] == fake.stats.cache_creation_input_tokens
        assert row["cost_usd"] == pytest.approx(cost_usd(
            "claude-haiku-4-5", row["input_tokens"], row["output_tokens"],
            row["cache_read_input_tokens"], row["cache_creation_input_tokens"]))
    assert fc.sleeps == []


def test_malformed_output_is_repaired_with_the_validation_error(tmp_path, fc):
    with FakeAnthropic(script=["malformed", "ok"], keep_bodies=True) as fake:
        client = make_llm(fake.base_url, tmp_path, fc)
        out = call(client)
        assert out.value.entities and client.counters.repairs == 1
        assert fake.stats.requests == 2
        repair = fake.stats.bodies[1]["messages"]
        assert [m["role"] for m in repair] == ["user", "assistant", "user"]
        result = repair[2]["content"][0]
        assert result["type"] == "tool_result" and result["is_error"] is True
        assert "invalid" in result["content"]
        assert repair[1]["content"][0]["id"] == result["tool_use_id"]
        assert call(client).cached  # the repaired answer was cached


def test_output_still_invalid_after_repair_fails_and_is_never_cached(tmp_path, fc):
    with FakeAnthropic(script=["malformed", "no_tool", "ok"]) as fake:
        client = make_llm(fake.base_url, tmp_path, fc)
        with pytest.raises(llm_failures.ItemError, match="invalid output after one repair"):
            call(client)
        assert fake.stats.requests == 2
        out = call(client)  # not cached: the next call asks again
        assert not out.cached and fake.stats.requests == 3
        statuses = [r["status"] for r in client.cache.ledger("run-1")]
        assert statuses == ["ok", "ok", "ok"]  # billed calls, all in the ledger


def test_429_honours_retry_after(tmp_path, fc):
    with FakeAnthropic(script=["429", "ok"], retry_after="7") as fake:
        client = make_llm(fake.base_url, tmp_path, fc)
        assert call(client).value.entities
        assert fc.sleeps == [7.0]
        assert fake.stats.requests == 2
        ledger = client.cache.ledger("run-1")
        assert [r["status"] for r in ledger] == ["http_429", "ok"]
        assert ledger[0]["input_tokens"] == 0


def test_529_and_500_back_off_with_jitter(tmp_path, fc):
    with FakeAnthropic(script=["529", "500", "ok"]) as fake:
        client = make_llm(fake.base_url, tmp_path, fc)
        assert call(client).value.entities
        assert len(fc.sleeps) == 2
        assert 0.5 <= fc.sleeps[0] <= 1.0 and 1.0 <= fc.sleeps[1] <= 2.0
        assert client.counters.retries == 2


def test_retries_exhausted_fails_the_item_and_caches_nothing(tmp_path, fc):
    with FakeAnthropic(script=["529"] * 3 + ["ok"]) as fake:
        client = make_llm(fake.base_url, tmp_path, fc, max_retries=2)
        with pytest.raises(llm_failures.ItemError, match="gave up after 3 attempts: HTTP 529"):
            call(client)
        assert fake.stats.requests == 3 and len(fc.sleeps) == 2
        assert not call(client).cached


def test_401_fails_fast_and_poisons_later_calls(tmp_path, fc):
    with FakeAnthropic(api_key="the-real-key") as fake:
        client = make_llm(fake.base_url, tmp_path, fc, key="wrong-key")
        with pytest.raises(llm_failures.FatalError, match=r"ANTHROPIC_API_KEY was rejected \(401\)"):
            call(client)
        with pytest.raises(llm_failures.FatalError):
            call(client, "another section")
        assert fake.stats.requests == 1 and fc.sleeps == []


def test_400_fails_the_item_without_retrying(tmp_path, fc):
    with FakeAnthropic(script=["400"]) as fake:
        client = make_llm(fake.base_url, tmp_path, fc)
        with pytest.raises(llm_failures.ItemError, match="HTTP 400"):
            call(client)
        assert fake.stats.requests == 1 and fc.sleeps == []


def test_connection_errors_are_retried(tmp_path, fc):
    client = make_llm(f"http://127.0.0.1:{free_port()}", tmp_path, fc, max_retries=2)
    with pytest.raises(llm_failures.ItemError, match="gave up after 3 attempts: APIConnectionError"):
        call(client)
    assert len(fc.sleeps) == 2
    assert [r["status"] for r in client.cache.ledger()] == ["connection_error"] * 3


def test_budget_refuses_calls_that_could_pass_the_cap(tmp_path, fc):
    with FakeAnthropic() as fake:
        client = make_llm(fake.base_url, tmp_path, fc, cap=0.0005)
        with pytest.raises(llm_failures.BudgetExhausted, match="max_cost_usd"):
            call(client, estimate=0.001)
        assert fake.stats.requests == 0


def test_budget_accounting():
    budget = guards.Budget(1.0)
    budget.reserve(0.6)
    with pytest.raises(llm_failures.BudgetExhausted):
        budget.reserve(0.5)  # 0.6 in flight + 0.5 > 1.0
    budget.settle(0.6, 0.2)
    budget.reserve(0.5)
    assert budget.spent == pytest.approx(0.2)
    guards.Budget(None).reserve(1e9)  # no cap


def test_rate_limiter_pauses_every_worker(fc):
    limiter = guards.RateLimiter(2, clock=fc.clock, sleep=fc.sleep)
    limiter.pause_all(5.0)
    with limiter:
        pass
    assert fc.sleeps == [5.0]
    with limiter:
        pass
    assert fc.sleeps == [5.0]


def test_retry_after_header_forms():
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_s({}) is None
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= retry_after_s({"retry-after": when}) <= 31


def test_cache_key_ignores_nothing_but_secrets():
    a = build_request("claude-haiku-4-5", "T", "H", "text")
    assert llm_store.cache_key(a, "v1") == llm_store.cache_key(dict(a), "v1")
    assert llm_store.cache_key(a, "v1") != llm_store.cache_key(a, "v2")
    assert llm_store.cache_key(a, "v1") != llm_store.cache_key(build_request("claude-haiku-4-5", "T", "H2",
                                                                "text"), "v1")
    assert llm_store.cache_key(a, "v1") != llm_store.cache_key(build_request("claude-sonnet-4-5", "T", "H",
                                                                "text"), "v1")


def test_price_table():
    assert price_for("claude-haiku-4-5-20251001") == (PRICES["claude-haiku-4-5"], True)
    assert cost_usd("claude-haiku-4-5", 1_000_000, 1_000_000) == pytest.approx(6.0)
    assert cost_usd("claude-haiku-4-5", cache_read_input_tokens=1_000_000) == pytest.approx(0.1)
    assert cost_usd("claude-haiku-4-5", cache_creation_input_tokens=1_000_000) == \
        pytest.approx(1.25)
    price, known = price_for("claude-future-9")
    assert not known and price.output_per_mtok == max(p.output_per_mtok for p in PRICES.values())
