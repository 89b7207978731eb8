"""A loopback HTTP server speaking enough of the Anthropic Messages API for the real SDK.

Use it at the real boundary: point `anthropic.Anthropic(base_url=fake.base_url)` (or
`ExtractConfig(base_url=...)`) at it.

    with FakeAnthropic(api_key="test-key") as fake:
        ...  # POST {fake.base_url}/v1/messages
        fake.stats.requests, fake.stats.max_in_flight, fake.stats.input_tokens ...

What it does for POST /v1/messages:
- checks the key (`Authorization: Bearer <key>` or `x-api-key`): 401 otherwise;
- answers a forced tool call (`tool_choice: {"type": "tool", "name": ...}`) with a tool_use
  block whose input is a deterministic extraction of the text between <section> and
  </section> in the first user message (by default `tasks.extract.offline`; pass `responder`
  for anything else) — or plain text when no tool is forced;
- reports realistic `usage`: tokens are counted as words and punctuation runs (close to a
  BPE tokenizer on English and JSON), plus TOOL_USE_OVERHEAD tokens for a forced tool;
  a prefix marked with `cache_control` is billed as cache creation the first time and as a
  cache read afterwards, the way the API reports it;
- injects faults: `script` (a list consumed one per request: "ok", "429", "529", "500",
  "401", "400", "malformed", "no_tool") takes precedence; otherwise `fault_rates`
  ({"429": 0.1, "529": 0.05, "malformed": 0.05, ...}) are drawn from an RNG seeded with
  `seed`, the request body and how often that body was seen (deterministic under threads).
  429 carries `retry-after: <retry_after>`.

Answers (additive, for the query side): `text_responder(request) -> str` gives the text of
a reply when no tool is forced; a request with `"stream": true` gets the same message as
server-sent events (text deltas, or the tool input as input_json deltas in small pieces);
the fault "500-no-retry" is a 500 that tells the SDK not to retry (`x-should-retry: false`),
so a test sees the failure without the SDK's back-off.

`stats` counts requests by outcome, the maximum number in flight, and the token totals of
the 200 responses (malformed ones included: the API bills those too).

Added for extraction (issue 15), all off by default:
- `schema_mode="boundary"`: a strictly schema-following server. The tool input is a
  boundary value of the forced tool's `input_schema` (`tests.schema_boundary`: empty
  strings, empty arrays, missing optional keys, extra keys, long strings, awkward
  characters), seeded by the request, instead of an answer to the text;
- batched extraction requests (a tool whose schema has `section_N` keys) are answered per
  `<section id="section_N">` block by the default responder;
- `cache_min_tokens`: a prefix shorter than this is not cached (as the real API does below
  a model's minimum cacheable length);
- the Message Batches API: POST /v1/messages/batches, GET /v1/messages/batches/{id},
  GET .../{id}/results (JSON lines), POST .../{id}/cancel. Each item is answered like a
  Messages call (faults included: an error becomes an "errored" result) when the batch is
  created; it reports "in_progress" for `batch_polls` retrieves, or forever with
  `batch_never_ends`; `batch_create_error` ("500", "404", ...) refuses the create.
  `stats.batches` counts batches created, `stats.batch_items` their requests.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL_USE_OVERHEAD = 346
_TOKEN = re.compile(r"\w+|[^\w\s]+")
_SECTION = re.compile(r"<section>\n?(.*?)\n?</section>", re.S)
_TITLE = re.compile(r"<page_title>(.*?)</page_title>", re.S)
_HEADING = re.compile(r"<heading_path>(.*?)</heading_path>", re.S)

ERRORS = {
    "400": (400, "invalid_request_error", "bad request (scripted)"),
    "401": (401, "authentication_error", "invalid x-api-key"),
    "429": (429, "rate_limit_error", "rate limited (scripted)"),
    "500": (500, "api_error", "internal error (scripted)"),
    "500-no-retry": (500, "api_error", "internal error (scripted, not retryable)"),
    "529": (529, "overloaded_error", "Overloaded"),
}


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


_BATCH_SECTION = re.compile(
    r'<section id="(section_\d+)">\n<page_title>(.*?)</page_title>\n'
    r"<heading_path>(.*?)</heading_path>\n<text>\n(.*?)\n</text>\n</section>", re.S)


def forced_tool_schema(request: dict) -> dict:
    """The input_schema of the tool the request forces ({} when none)."""
    name = (request.get("tool_choice") or {}).get("name")
    for tool in request.get("tools") or []:
        if tool.get("name") == name:
            return tool.get("input_schema") or {}
    return {}


def default_responder(request: dict) -> dict:
    """A valid extraction of the request's section, via the offline extractor, trimmed to
    the size a model answering the extraction prompt gives (a dozen entities, short
    descriptions and evidence). A batched request gets one such answer per section id."""
    text = _first_user_text(request)
    keys = [k for k in forced_tool_schema(request).get("properties", {})
            if k.startswith("section_")]
    if keys:
        found = {m.group(1): m.groups()[1:] for m in _BATCH_SECTION.finditer(text)}
        return {k: _answer(*found[k]) for k in keys if k in found}
    section = _SECTION.search(text)
    title = _TITLE.search(text)
    heading = _HEADING.search(text)
    return _answer(title.group(1) if title else "", heading.group(1) if heading else "",
                   section.group(1) if section else text)


def boundary_responder(request: dict) -> dict:
    """A boundary value of the forced tool's schema (a strictly schema-following API),
    seeded by the request so that equal requests get equal answers."""
    from tests.schema_boundary import PROFILES, instance

    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
    rng = random.Random(digest)
    return instance(forced_tool_schema(request), rng, PROFILES[int(digest[:8], 16) % 3])


def _answer(title: str, heading: str, section: str) -> dict:
    from tasks.extract.offline import extract_offline

    out = extract_offline(title, heading, section)
    found = list(out["entities"])
    # A model also names the multi-word terms the heuristics leave to it, and always the
    # section's topic (the schema asks for at least one entity).
    seen = {e["name"].lower() for e in found}
    topic = re.split(r"\s+>\s+", heading or title)[-1].strip()
    if topic and topic.lower() not in seen:
        seen.add(topic.lower())
        found.insert(0, {"name": topic, "type": "concept", "description": "", "aliases": []})
    for m in re.finditer(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+){1,3}\b", section):
        if m.group(0).lower() not in seen:
            seen.add(m.group(0).lower())
            found.append({"name": m.group(0), "type": "concept", "description": "",
                          "aliases": []})
    entities = [{**e, "description": e["description"][:160]} for e in found[:12]]
    # A model relates what a sentence names together and states a few sentences as facts,
    # more freely than the offline heuristics do.
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", section) if len(s.strip()) > 20]
    relationships, facts = [], []
    for sentence in sentences:
        named = [e["name"] for e in entities if e["name"].lower() in sentence.lower()]
        for a, b in zip(named, named[1:]):
            relationships.append({"source": a, "relation": "RELATED_TO", "target": b,
                                  "evidence": sentence[:160]})
        if named and len(facts) < 5:
            facts.append({"text": sentence[:300], "entity": named[0]})
    return {"entities": entities, "relationships": relationships[:10], "facts": facts}


def malformed(tool_input: dict, rng: random.Random) -> dict:
    """A wrong version of a valid tool input: missing keys or wrong types."""
    choice = rng.randrange(3)
    if choice == 0:
        return {"entities": tool_input.get("entities", [])}  # no relationships, no facts
    if choice == 1:
        return {**tool_input, "entities": "Horizontal Pod Autoscaler, Deployment"}
    return {**tool_input, "entities": [{"type": "concept", "description": 7}]}


@dataclass
class FakeStats:
    requests: int = 0
    ok: int = 0
    malformed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    bodies: list[dict] = field(default_factory=list)
    batches: int = 0
    batch_items: int = 0

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens + self.output_tokens + self.cache_read_input_tokens
                + self.cache_creation_input_tokens)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_use":
            parts.append(json.dumps(block.get("input", {})))
        elif kind == "tool_result":
            parts.append(_text_of(block.get("content", "")))
    return "\n".join(parts)


def _first_user_text(request: dict) -> str:
    for message in request.get("messages", []):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _has_cache_control(blocks: object) -> bool:
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and b.get("cache_control") for b in blocks)


class FakeAnthropic:
    def __init__(self, *, api_key: str = "test-key", seed: int = 0,
                 fault_rates: dict[str, float] | None = None, script: list[str] | None = None,
                 retry_after: str = "2", responder: Callable[[dict], dict] | None = None,
                 delay_s: float = 0.0, keep_bodies: bool = False,
                 text_responder: Callable[[dict], str] | None = None,
                 schema_mode: str = "answer", cache_min_tokens: int | None = None,
                 batch_polls: int = 0, batch_never_ends: bool = False,
                 batch_create_error: str | None = None) -> None:
        self.api_key = api_key
        self.seed = seed
        self._seen: dict[str, int] = {}
        self.fault_rates = dict(fault_rates or {})
        self.script = list(script or [])
        self.retry_after = retry_after
        if schema_mode not in ("answer", "boundary"):
            raise ValueError(f"schema_mode {schema_mode!r}: use answer or boundary")
        self.responder = responder or (boundary_responder if schema_mode == "boundary"
                                       else default_responder)
        self.cache_min_tokens = cache_min_tokens
        self.batch_polls = batch_polls
        self.batch_never_ends = batch_never_ends
        self.batch_create_error = batch_create_error
        self._batches: dict[str, dict] = {}
        self.delay_s = delay_s  # server-side latency, so concurrency becomes observable
        self.keep_bodies = keep_bodies
        self.text_responder = text_responder
        self.stats = FakeStats()
        self._lock = threading.Lock()
        self._cached_prefixes: set[str] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---
    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeAnthropic:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else headers + body meet delayed ACKs (40 ms)

            def log_message(self, *args: object) -> None:  # keep test output quiet
                return

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path.startswith("/v1/messages/batches"):
                    self._send(*fake.batches("POST", self.path, dict(self.headers.items()), raw))
                    return
                status, headers, body = fake.handle(self.path, dict(self.headers.items()), raw)
                if status == 200 and _wants_stream(raw):
                    self._stream(body)
                    return
                self._send(status, headers, body)

            def do_GET(self) -> None:  # noqa: N802
                self._send(*fake.batches("GET", self.path, dict(self.headers.items()), b""))

            def _send(self, status: int, headers: dict, body: object) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", headers.pop("content-type", None)
                                 or "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_fake")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message: dict) -> None:
                data = "".join(f"event: {name}\ndata: {json.dumps(event)}\n\n"
                               for name, event in sse_events(message)).encode("utf-8")
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_fake")
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,),
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the API ---
    def _next_fault(self, raw: bytes) -> tuple[str, random.Random]:
        """The scripted fault, else a draw that depends only on the seed, the request body and
        how often that body was seen, so faults do not depend on thread scheduling."""
        digest = hashlib.sha256(raw).hexdigest()
        with self._lock:
            seen = self._seen.get(digest, 0)
            self._seen[digest] = seen + 1
            rng = random.Random(f"{self.seed}:{digest}:{seen}")
            if self.script:
                return self.script.pop(0), rng
        draw = rng.random()
        for name, rate in sorted(self.fault_rates.items()):
            if draw < rate:
                return name, rng
            draw -= rate
        return "ok", rng

    def handle(self, path: str, headers: dict, raw: bytes) -> tuple[int, dict, dict]:
        with self._lock:
            self.stats.requests += 1
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            return self._respond(path, headers, raw)
        finally:
            with self._lock:
                self.stats.in_flight -= 1

    def _error(self, name: str) -> tuple[int, dict, dict]:
        status, etype, message = ERRORS[name]
        with self._lock:
            self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
        headers = {"retry-after": self.retry_after} if status == 429 else {}
        if status >= 500:
            headers["x-should-retry"] = "false" if name.endswith("-no-retry") else "true"
        return status, headers, {"type": "error", "error": {"type": etype, "message": message}}

    def _respond(self, path: str, headers: dict, raw: bytes) -> tuple[int, dict, dict]:
        lower = {k.lower(): v for k, v in headers.items()}
        key = lower.get("x-api-key") or lower.get("authorization", "").removeprefix("Bearer ")
        if path.rstrip("/") != "/v1/messages":
            return 404, {}, {"type": "error",
                             "error": {"type": "not_found_error", "message": path}}
        if key != self.api_key:
            return self._error("401")
        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            return self._error("400")
        if not all(k in request for k in ("model", "max_tokens", "messages")):
            return self._error("400")
        if self.keep_bodies:
            with self._lock:
                self.stats.bodies.append(request)
        fault, rng = self._next_fault(raw)
        if fault in ERRORS:
            return self._error(fault)
        return 200, {}, self._message(request, fault, rng)

    def _message(self, request: dict, fault: str, rng: random.Random) -> dict:
        system = request.get("system", "")
        system_text = system if isinstance(system, str) else _text_of(system)
        tools = request.get("tools") or []
        prefix = json.dumps(tools) + system_text
        rest = "\n".join(_text_of(m.get("content")) for m in request["messages"])
        forced = (request.get("tool_choice") or {}).get("type") == "tool"
        prefix_tokens = count_tokens(prefix) + (TOOL_USE_OVERHEAD if forced else 0)
        rest_tokens = count_tokens(rest)

        cache_read = cache_creation = 0
        big_enough = self.cache_min_tokens is None or prefix_tokens >= self.cache_min_tokens
        if big_enough and (_has_cache_control(tools) or _has_cache_control(system)):
            digest = hashlib.sha256((request["model"] + prefix).encode()).hexdigest()
            with self._lock:
                seen = digest in self._cached_prefixes
                self._cached_prefixes.add(digest)
            if seen:
                cache_read = prefix_tokens
            else:
                cache_creation = prefix_tokens
            input_tokens = rest_tokens
        else:
            input_tokens = prefix_tokens + rest_tokens

        if forced and fault != "no_tool":
            name = request["tool_choice"]["name"]
            tool_input = self.responder(request)
            if fault == "malformed":
                tool_input = malformed(tool_input, rng)
            text_out = json.dumps(tool_input)
            digest = hashlib.sha256(text_out.encode()).hexdigest()[:24]
            content = [{"type": "tool_use", "id": f"toolu_{digest}", "name": name,
                        "input": tool_input}]
            stop_reason = "tool_use"
        else:
            text_out = (self.text_responder(request) if self.text_responder and not forced
                        else "I cannot call a tool for this.")
            content = [{"type": "text", "text": text_out}]
            stop_reason = "end_turn"
        output_tokens = count_tokens(text_out) + 10
        with self._lock:
            self.stats.ok += 1
            self.stats.malformed += fault in ("malformed", "no_tool")
            self.stats.input_tokens += input_tokens
            self.stats.output_tokens += output_tokens
            self.stats.cache_read_input_tokens += cache_read
            self.stats.cache_creation_input_tokens += cache_creation
        return {
            "id": "msg_" + hashlib.sha256(json.dumps(request).encode()).hexdigest()[:24],
            "type": "message", "role": "assistant", "model": request["model"],
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": cache_creation},
        }


    # --- the Message Batches API ---
    def batches(self, method: str, path: str, headers: dict, raw: bytes
                ) -> tuple[int, dict, object]:
        """POST /v1/messages/batches, GET .../{id}, GET .../{id}/results, POST .../{id}/cancel."""
        lower = {k.lower(): v for k, v in headers.items()}
        key = lower.get("x-api-key") or lower.get("authorization", "").removeprefix("Bearer ")
        if key != self.api_key:
            return self._error("401")
        parts = path.split("?", 1)[0].rstrip("/").split("/")[4:]  # after /v1/messages/batches
        if method == "POST" and not parts:
            if self.batch_create_error:
                return self._error(self.batch_create_error) if self.batch_create_error in \
                    ERRORS else (404, {}, {"type": "error", "error": {
                        "type": "not_found_error", "message": "no batches here"}})
            return 200, {}, self._create_batch(json.loads(raw))
        batch = self._batches.get(parts[0]) if parts else None
        if batch is None:
            return 404, {}, {"type": "error", "error": {"type": "not_found_error",
                                                        "message": path}}
        if method == "POST" and parts[1:] == ["cancel"]:
            with self._lock:
                batch["canceled"] = True
            return 200, {}, self._batch_object(batch)
        if method == "GET" and parts[1:] == ["results"]:
            if not self._ended(batch, poll=False):
                return 404, {}, {"type": "error", "error": {"type": "not_found_error",
                                                            "message": "not ended"}}
            lines = batch["results"]
            if batch.get("canceled") and self.batch_never_ends:
                lines = [{"custom_id": r["custom_id"], "result": {"type": "canceled"}}
                         for r in lines]
            body = "".join(json.dumps(r) + "\n" for r in lines).encode("utf-8")
            return 200, {"content-type": "application/binary"}, body
        if method == "GET" and len(parts) == 1:
            self._ended(batch, poll=True)
            return 200, {}, self._batch_object(batch)
        return 404, {}, {"type": "error", "error": {"type": "not_found_error", "message": path}}

    def _create_batch(self, body: dict) -> dict:
        results = []
        for item in body.get("requests", []):
            params = item["params"]
            fault, rng = self._next_fault(json.dumps(params, sort_keys=True).encode())
            if fault in ERRORS:
                status, etype, message = ERRORS[fault]
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": etype, "message": message}}}
            else:
                result = {"type": "succeeded", "message": self._message(params, fault, rng)}
            results.append({"custom_id": item["custom_id"], "result": result})
        with self._lock:
            self.stats.batches += 1
            self.stats.batch_items += len(results)
            batch_id = f"msgbatch_{len(self._batches) + 1:04d}"
            batch = {"id": batch_id, "results": results, "polls_left": self.batch_polls,
                     "canceled": False}
            self._batches[batch_id] = batch
        return self._batch_object(batch)

    def _ended(self, batch: dict, *, poll: bool) -> bool:
        with self._lock:
            if batch.get("canceled"):
                return True
            if self.batch_never_ends:
                return False
            if batch["polls_left"] > 0:
                if poll:
                    batch["polls_left"] -= 1
                return False
            return True

    def _batch_object(self, batch: dict) -> dict:
        now = datetime.now(UTC)
        ended = self._ended(batch, poll=False)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for r in batch["results"]:
                kind = "canceled" if batch.get("canceled") and self.batch_never_ends \
                    else r["result"]["type"]
                counts[kind] += 1
        else:
            counts["processing"] = len(batch["results"])
        return {"id": batch["id"], "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "created_at": now.isoformat(),
                "expires_at": (now + timedelta(hours=24)).isoformat(),
                "ended_at": now.isoformat() if ended else None, "archived_at": None,
                "cancel_initiated_at": now.isoformat() if batch.get("canceled") else None,
                "results_url": (f"{self.base_url}/v1/messages/batches/{batch['id']}/results"
                                if ended else None)}


def _wants_stream(raw: bytes) -> bool:
    try:
        return bool(json.loads(raw).get("stream"))
    except (json.JSONDecodeError, AttributeError):
        return False


def sse_events(message: dict, piece: int = 7) -> list[tuple[str, dict]]:
    """A message as the Messages API streams it: message_start, one content block at a time
    (text in word deltas, tool input as JSON in `piece`-character deltas), message_delta
    with the output tokens, message_stop."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict]] = [("message_start", {"type": "message_start",
                                                         "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty, words = {"type": "text", "text": ""}, block["text"].split(" ")
            deltas = [{"type": "text_delta", "text": w if j == 0 else " " + w}
                      for j, w in enumerate(words)]
        else:
            empty = {**block, "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": raw[j:j + piece]}
                      for j in range(0, len(raw), piece)]
        events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": empty}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"],
                                               "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class FakeClock:
    """An injectable clock + sleep: `sleep` records the delay and advances `now` at once.

    Pass `clock=fc.clock, sleep=fc.sleep` wherever code would otherwise really wait.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def clock(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += max(0.0, seconds)
