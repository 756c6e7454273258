#!/usr/bin/env python3
"""The official `openai` Python SDK against the local run: `/v1/chat/completions`, `/v1/models` and `/v1/embeddings`
answer as OpenAI's API does, with API keys the local run issues (issue 40's "Tests and proof").

Run by tests/suites.py (its "openai" suite) with the venv's Python, which has the SDK (tools/requirements.txt),
against two local runs of its own:

    OPENAI_TEST_BASE_URL          the main run (default http://127.0.0.1:9090): ALLOWED_MODELS, EMBEDDING_MODELS,
                                  API_KEY_CACHE_SECONDS=1, no retrieval, no MCP servers, no per-user limits
    OPENAI_TEST_BEDROCK_URL       its local Bedrock server (default: the main run's port + 100), whose
                                  `GET /__local/requests` shows what reached the model
    OPENAI_TEST_LIMITED_BASE_URL  a run with RATE_LIMIT_PER_MINUTE=2, for the 429 and for a key's turns counted
                                  against its owner's limit (its tests are skipped when this is not set)
    OPENAI_TEST_MODEL, OPENAI_TEST_SECOND_MODEL, OPENAI_TEST_EMBEDDING_MODEL, OPENAI_TEST_COHERE_MODEL
                                  the model ids those runs allow (defaults: as tests/suites.py sets them)

    .tools/venv/bin/python tests/openai/test_openai.py -v     # against runs already started by hand

The local model's answers are deterministic (tests/local-bedrock/src/lib.rs): the answer to `T` is `Echo: T`,
`[[tool:NAME {json}]]` in the question makes it call an offered tool, a tool result is answered `NAME returned
TEXT`, reasoning starts `Reasoning (…)`, files are acknowledged ` Received: … SIZE bytes`. What only the issue
defines (e.g. the structured output's value) is asserted as the issue says it (parses, matches the schema).
"""

import base64
import json
import os
import struct
import sys
import time
import unittest
import urllib.error
import urllib.request

import openai
from openai import OpenAI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testkit  # noqa: E402  (tests/testkit.py)

BASE, BEDROCK = testkit.run_urls("OPENAI", 9090)
LIMITED_BASE = (os.environ.get("OPENAI_TEST_LIMITED_BASE_URL") or "").rstrip("/")
MODEL = testkit.OPENAI_MODEL
# Allowed too: a cross-Region inference profile of a model without Bedrock's structured output.
SECOND_MODEL = os.environ.get("OPENAI_TEST_SECOND_MODEL", "us.amazon.nova-pro-v1:0")
EMBEDDING_MODEL = os.environ.get("OPENAI_TEST_EMBEDDING_MODEL", "amazon.titan-embed-text-v2:0")
COHERE_MODEL = os.environ.get("OPENAI_TEST_COHERE_MODEL", "cohere.embed-english-v3")
# The main run's API_KEY_CACHE_SECONDS: a revoked key must stop working within it (plus a margin).
KEY_CACHE_SECONDS = float(os.environ.get("OPENAI_TEST_KEY_CACHE_SECONDS", "1"))
TIMEOUT = 60

# A 1×1 PNG and a one-page PDF, sent inline as OpenAI's clients send files.
PNG, PDF = testkit.PNG, testkit.PDF

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": testkit.string_parameters("city"),
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now in a time zone.",
        "parameters": testkit.string_parameters("zone"),
    },
}
CITY_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
    "additionalProperties": False,
}


# ------------------------------------------------------------------------------------------------ plain HTTP helpers
def http(method, url, body=None, key=None, headers=None):
    """(status, headers, parsed JSON or text) of one request, whatever its status."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if body is not None:
        request.add_header("content-type", "application/json")
    if key is not None:
        request.add_header("authorization", f"Bearer {key}")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            status, head, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        status, head, raw = e.code, e.headers, e.read()
    text = raw.decode("utf-8")
    try:
        return status, head, json.loads(text) if text else None
    except ValueError:
        return status, head, text


def create_key(base, name):
    """A new API key of the run's one user, through `POST /api-keys` (no Authorization: the local user): its id
    and its secret (shown this once)."""
    status, _, created = http("POST", f"{base}/api-keys", {"name": name})
    assert status in (200, 201), f"POST /api-keys answered {status}: {created}"
    # The secret's field: `key` (the issue: "a key is shown once"); the other spellings are tolerated so that this
    # helper fails on what matters (no secret at all) rather than on a name.
    secret = next((created[f] for f in ("key", "api_key", "secret") if isinstance(created.get(f), str)), None)
    assert secret and created.get("id"), f"POST /api-keys answered no id and secret: {created}"
    return created["id"], secret


def list_keys(base, key=None):
    status, _, body = http("GET", f"{base}/api-keys", key=key)
    assert status == 200, f"GET /api-keys answered {status}: {body}"
    if isinstance(body, dict):  # {"keys": [...]} or {"data": [...]}
        body = next(v for v in body.values() if isinstance(v, list))
    return body


def usage(base, key=None):
    status, _, body = http("GET", f"{base}/usage", key=key)
    assert status == 200, f"GET /usage answered {status}: {body}"
    return body


def model_requests():
    """The Converse requests the local Bedrock server received, oldest first."""
    status, _, body = http("GET", f"{BEDROCK}/__local/requests")
    assert status == 200, f"the local Bedrock server's /__local/requests answered {status}"
    return [r for r in body if r["operation"] in ("converse", "converse-stream")]


def last_model_request():
    requests = model_requests()
    assert requests, "the local Bedrock server received no Converse request"
    return requests[-1]["body"]


def client(key, base=BASE, **options):
    return OpenAI(base_url=f"{base}/v1", api_key=key, timeout=TIMEOUT, **options)


def user(text, *parts):
    """A user message: a plain string, or text followed by other content parts."""
    if not parts:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": text}, *parts]}


def reasoning_of(message_or_delta):
    """`reasoning_content`, OpenAI's SDK keeping it as an extra field of the message or delta."""
    return getattr(message_or_delta, "reasoning_content", None)


def as_float32(values):
    return [struct.unpack("<f", struct.pack("<f", v))[0] for v in values]


def decode_base64_floats(text):
    raw = base64.b64decode(text)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


KEY_ID = KEY = OAI = None


def setUpModule():
    global KEY_ID, KEY, OAI
    KEY_ID, KEY = create_key(BASE, "openai-sdk-suite")
    OAI = client(KEY, max_retries=0)


# ------------------------------------------------------------------------------------------------ models
class Models(unittest.TestCase):
    def test_list_names_the_operators_models(self):
        models = list(OAI.models.list())
        ids = [m.id for m in models]
        self.assertIn(MODEL, ids)
        self.assertIn(SECOND_MODEL, ids)
        self.assertEqual(len(ids), len(set(ids)), ids)
        for m in models:
            self.assertEqual(m.object, "model")
            self.assertIsInstance(m.created, int)
            self.assertIsInstance(m.owned_by, str)

    def test_retrieve_one(self):
        for model_id in (MODEL, SECOND_MODEL):
            with self.subTest(model_id):
                m = OAI.models.retrieve(model_id)
                self.assertEqual(m.id, model_id)
                self.assertEqual(m.object, "model")

    def test_retrieve_unknown_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as caught:
            OAI.models.retrieve("anthropic.claude-v2-not-allowed")
        self.assertEqual(caught.exception.status_code, 404)
        self.assertEqual(caught.exception.code, "model_not_found")


# ------------------------------------------------------------------------------------------------ completions
class Completions(unittest.TestCase):
    QUESTION = "What is the capital of France?"

    def test_buffered(self):
        r = OAI.chat.completions.create(model=MODEL, messages=[user(self.QUESTION)])
        self.assertEqual(r.object, "chat.completion")
        self.assertTrue(r.id)
        self.assertIsInstance(r.created, int)
        self.assertEqual(r.model, MODEL)
        self.assertEqual(len(r.choices), 1)
        choice = r.choices[0]
        self.assertEqual(choice.index, 0)
        self.assertEqual(choice.finish_reason, "stop")
        self.assertEqual(choice.message.role, "assistant")
        self.assertIn(f"Echo: {self.QUESTION}", choice.message.content)
        self.assertFalse(choice.message.tool_calls)
        u = r.usage
        self.assertGreater(u.prompt_tokens, 0)
        self.assertGreater(u.completion_tokens, 0)
        self.assertEqual(u.total_tokens, u.prompt_tokens + u.completion_tokens)
        self.assertIsInstance(u.prompt_tokens_details.cached_tokens, int)
        self.assertEqual(u.completion_tokens_details.reasoning_tokens, 0)

    def test_streamed_with_usage_equals_the_buffered_answer(self):
        buffered = OAI.chat.completions.create(model=MODEL, messages=[user(self.QUESTION)])
        chunks = list(OAI.chat.completions.create(
            model=MODEL, messages=[user(self.QUESTION)], stream=True, stream_options={"include_usage": True},
        ))
        self.assertGreater(len(chunks), 2)
        self.assertEqual({c.object for c in chunks}, {"chat.completion.chunk"})
        self.assertEqual(len({c.id for c in chunks}), 1, "every chunk of one answer has its id")
        self.assertEqual({c.model for c in chunks}, {MODEL})
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        self.assertGreater(len(pieces), 1, "the answer arrives in pieces as the model produces them")
        self.assertEqual("".join(pieces), buffered.choices[0].message.content)
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason],
                         ["stop"])
        last = chunks[-1]
        self.assertEqual(last.choices, [], "the usage chunk has no choices")
        self.assertIsNotNone(last.usage)
        self.assertEqual(last.usage.prompt_tokens, buffered.usage.prompt_tokens)
        self.assertEqual(last.usage.completion_tokens, buffered.usage.completion_tokens)
        self.assertEqual(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens)
        self.assertIsInstance(last.usage.prompt_tokens_details.cached_tokens, int)
        self.assertIsInstance(last.usage.completion_tokens_details.reasoning_tokens, int)
        self.assertTrue(all(c.usage is None for c in chunks[:-1]), "only the last chunk carries usage")

    def test_streamed_without_include_usage_has_no_usage(self):
        chunks = list(OAI.chat.completions.create(model=MODEL, messages=[user("no usage please")], stream=True))
        self.assertTrue(chunks)
        self.assertTrue(all(c.usage is None for c in chunks))
        self.assertIn("Echo: no usage please", "".join(
            c.choices[0].delta.content or "" for c in chunks if c.choices))

    def test_the_wire_is_server_sent_events_ending_done(self):
        request = urllib.request.Request(
            f"{BASE}/v1/chat/completions", method="POST",
            data=json.dumps({"model": MODEL, "messages": [user("raw events")], "stream": True}).encode(),
            headers={"content-type": "application/json", "authorization": f"Bearer {KEY}"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            self.assertEqual(response.status, 200)
            self.assertTrue(response.headers["content-type"].startswith("text/event-stream"))
            body = response.read().decode("utf-8")
        self.assertTrue(body.endswith("data: [DONE]\n\n"), body[-200:])
        events = body.split("\n\n")[:-1]
        self.assertGreater(len(events), 2)
        for event in events[:-1]:
            self.assertTrue(event.startswith("data: "), event)
            self.assertEqual(json.loads(event[len("data: "):])["object"], "chat.completion.chunk")

    def test_system_developer_and_inference_settings_reach_the_model(self):
        r = OAI.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": "You answer in French."},
                {"role": "developer", "content": "Keep it short."},
                user("Bonjour?"),
                {"role": "assistant", "content": "Echo: Bonjour?"},
                user("Encore?"),
            ],
            temperature=0.2, top_p=0.9, max_completion_tokens=200, stop=["ZZZ"],
            user="end-user-42", metadata={"purpose": "test"},
        )
        self.assertIn("Echo: Encore?", r.choices[0].message.content)
        sent = last_model_request()
        system = " ".join(b.get("text", "") for b in sent.get("system", []))
        self.assertIn("You answer in French.", system)
        self.assertIn("Keep it short.", system)
        self.assertEqual([m["role"] for m in sent["messages"]], ["user", "assistant", "user"])
        config = sent["inferenceConfig"]
        self.assertAlmostEqual(config["temperature"], 0.2, places=5)
        # The local model is Claude Sonnet 4.5 (BASE_MODEL_ID), which takes temperature or top_p: top_p is left out.
        self.assertNotIn("topP", config)
        self.assertEqual(config["maxTokens"], 200)
        self.assertEqual(config["stopSequences"], ["ZZZ"])
        # A model that takes both gets both.
        OAI.chat.completions.create(model=SECOND_MODEL, messages=[user("Bonjour?")], temperature=0.2, top_p=0.9)
        config = last_model_request()["inferenceConfig"]
        self.assertAlmostEqual(config["topP"], 0.9, places=5)
        self.assertAlmostEqual(config["temperature"], 0.2, places=5)

    def test_max_tokens_ends_with_length(self):
        r = OAI.chat.completions.create(model=MODEL, messages=[user("one two three four five six seven")],
                                        max_tokens=3)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 3)
        self.assertEqual(last_model_request()["inferenceConfig"]["maxTokens"], 3)

    def test_defaults_of_unsupported_fields_are_accepted(self):
        r = OAI.chat.completions.create(
            model=MODEL, messages=[user("defaults")], n=1, presence_penalty=0, frequency_penalty=0,
            logprobs=False, store=False, modalities=["text"], service_tier="auto",
        )
        self.assertIn("Echo: defaults", r.choices[0].message.content)

    def test_nothing_is_stored_in_history(self):
        status, _, before = http("GET", f"{BASE}/chat-history?mode=standard", key=KEY)
        self.assertEqual(status, 200, before)
        OAI.chat.completions.create(model=MODEL, messages=[user("stateless")])
        _, _, after = http("GET", f"{BASE}/chat-history?mode=standard", key=KEY)
        self.assertEqual(after, before)

    def test_the_second_model_answers_under_its_own_id(self):
        r = OAI.chat.completions.create(model=SECOND_MODEL, messages=[user("which model?")])
        self.assertEqual(r.model, SECOND_MODEL)
        self.assertEqual(model_requests()[-1]["modelId"], SECOND_MODEL)


# ------------------------------------------------------------------------------------------------ files
class Files(unittest.TestCase):
    def test_image_as_data_url(self):
        url = "data:image/png;base64," + base64.b64encode(PNG).decode()
        r = OAI.chat.completions.create(model=MODEL, messages=[
            user("What is in this picture?", {"type": "image_url", "image_url": {"url": url}})])
        content = r.choices[0].message.content
        # The model reads the question after the line naming the file (the backend's label), then the image whole.
        self.assertRegex(content, r"^Echo: \[file: image-1, image/png, \d+ bytes\] What is in this picture\?")
        self.assertRegex(content, rf"Received: image-1: image png {len(PNG)} bytes$")

    def test_pdf_as_file_data(self):
        data = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
        r = OAI.chat.completions.create(model=MODEL, messages=[
            user("Summarize the report.",
                 {"type": "file", "file": {"filename": "report.pdf", "file_data": data}})])
        content = r.choices[0].message.content
        self.assertRegex(content, r"^Echo: \[file: report\.pdf, application/pdf, \d+ bytes\] Summarize the report\.")
        self.assertRegex(content, rf"Received: report\.pdf: document .+ pdf {len(PDF)} bytes$")


# ------------------------------------------------------------------------------------------------ tools
class Tools(unittest.TestCase):
    def test_tool_call_round_trip(self):
        messages = [user('What is the weather in Paris? [[tool:get_weather {"city": "Paris"}]]')]
        first = OAI.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME])
        choice = first.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertEqual(len(choice.message.tool_calls), 1)
        call = choice.message.tool_calls[0]
        self.assertTrue(call.id)
        self.assertEqual(call.type, "function")
        self.assertEqual(call.function.name, "get_weather")
        self.assertIsInstance(call.function.arguments, str, "arguments are a JSON string")
        self.assertEqual(json.loads(call.function.arguments), {"city": "Paris"})
        offered = last_model_request()["toolConfig"]["tools"]
        self.assertEqual([t["toolSpec"]["name"] for t in offered], ["get_weather", "get_time"])
        self.assertEqual(offered[0]["toolSpec"]["inputSchema"]["json"], WEATHER["function"]["parameters"])

        # The client runs the function and sends its result back.
        result = json.dumps({"temperature_c": 21, "sky": "clear"})
        messages += [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": result}]
        second = OAI.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME])
        answer = second.choices[0]
        self.assertEqual(answer.finish_reason, "stop")
        self.assertFalse(answer.message.tool_calls)
        self.assertIn("get_weather returned", answer.message.content)
        self.assertIn("21", answer.message.content)
        self.assertIn("clear", answer.message.content)
        sent = last_model_request()["messages"]
        self.assertEqual(sent[-2]["content"][-1]["toolUse"]["toolUseId"], call.id)
        self.assertEqual(sent[-1]["content"][0]["toolResult"]["toolUseId"], call.id)

    def test_streamed_tool_call_arrives_as_argument_fragments(self):
        chunks = list(OAI.chat.completions.create(
            model=MODEL, messages=[user('Weather? [[tool:get_weather {"city": "Lisbon"}]]')], tools=[WEATHER],
            stream=True, stream_options={"include_usage": True}))
        calls = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
        self.assertTrue(calls)
        self.assertEqual({t.index for t in calls}, {0})
        self.assertTrue(calls[0].id)
        self.assertEqual(calls[0].type, "function")
        self.assertEqual(calls[0].function.name, "get_weather")
        arguments = "".join(t.function.arguments or "" for t in calls if t.function)
        self.assertEqual(json.loads(arguments), {"city": "Lisbon"})
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason],
                         ["tool_calls"])
        self.assertIsNotNone(chunks[-1].usage)

    def test_parallel_tool_calls(self):
        messages = [user('Weather and time in Tokyo? [[tool:get_weather {"city": "Tokyo"}]] '
                         '[[tool:get_time {"zone": "Asia/Tokyo"}]]')]
        first = OAI.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME],
                                            parallel_tool_calls=True)
        calls = first.choices[0].message.tool_calls
        self.assertEqual(first.choices[0].finish_reason, "tool_calls")
        self.assertEqual([c.function.name for c in calls], ["get_weather", "get_time"])
        self.assertEqual(json.loads(calls[1].function.arguments), {"zone": "Asia/Tokyo"})
        self.assertEqual(len({c.id for c in calls}), 2)

        streamed = list(OAI.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME],
                                                    stream=True))
        fragments = [t for c in streamed if c.choices for t in (c.choices[0].delta.tool_calls or [])]
        self.assertEqual(sorted({t.index for t in fragments}), [0, 1])
        for index, name in [(0, "get_weather"), (1, "get_time")]:
            mine = [t for t in fragments if t.index == index]
            self.assertEqual(mine[0].function.name, name)
            json.loads("".join(t.function.arguments or "" for t in mine if t.function))

        results = {"get_weather": "rain, 14 degrees", "get_time": "09:30 JST"}
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages += [{"role": "tool", "tool_call_id": c.id, "content": results[c.function.name]} for c in calls]
        answer = OAI.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME])
        content = answer.choices[0].message.content
        self.assertEqual(answer.choices[0].finish_reason, "stop")
        self.assertIn("get_weather returned rain, 14 degrees", content)
        self.assertIn("get_time returned 09:30 JST", content)
        # Converse takes a turn's tool results in one user message: the two `tool` messages became one.
        results_sent = last_model_request()["messages"][-1]["content"]
        self.assertEqual([b["toolResult"]["toolUseId"] for b in results_sent if "toolResult" in b],
                         [c.id for c in calls])

    def test_tool_choice_reaches_the_model(self):
        cases = [
            ("required", {"any": {}}),
            ({"type": "function", "function": {"name": "get_time"}}, {"tool": {"name": "get_time"}}),
            ("auto", {"auto": {}}),
        ]
        for choice, converse in cases:
            with self.subTest(choice):
                OAI.chat.completions.create(model=MODEL, messages=[user('[[tool:get_time {"zone": "UTC"}]]')],
                                            tools=[WEATHER, TIME], tool_choice=choice)
                sent = last_model_request()["toolConfig"]
                # `auto` is Converse's default: sent as {"auto": {}} or left out.
                self.assertEqual(sent.get("toolChoice", {"auto": {}}), converse)

    def test_tool_choice_none_offers_no_tool(self):
        r = OAI.chat.completions.create(model=MODEL, messages=[user('[[tool:get_weather {"city": "Rome"}]] hi')],
                                        tools=[WEATHER], tool_choice="none")
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertFalse(r.choices[0].message.tool_calls)
        self.assertFalse(last_model_request().get("toolConfig", {}).get("tools"))


# ------------------------------------------------------------------------------------------------ reasoning
class Reasoning(unittest.TestCase):
    def test_reasoning_across_a_tool_call(self):
        question = 'Should I take an umbrella in Oslo? [[tool:get_weather {"city": "Oslo"}]]'
        messages = [user(question)]
        first = OAI.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER],
                                            reasoning_effort="low")
        message = first.choices[0].message
        self.assertEqual(first.choices[0].finish_reason, "tool_calls")
        self.assertTrue(reasoning_of(message), "the reasoning is in the message's reasoning_content")
        self.assertTrue(reasoning_of(message).startswith("Reasoning ("), reasoning_of(message))
        self.assertIn("Should I take an umbrella in Oslo?", reasoning_of(message))
        self.assertNotIn("Reasoning (", message.content or "", "reasoning is not part of the content")
        self.assertIn("thinking", json.dumps(last_model_request().get("additionalModelRequestFields", {})))
        call = message.tool_calls[0]

        # The client sends the assistant message back as the SDK gave it, then the tool's result.
        messages += [message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "heavy rain all day"}]
        second = OAI.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER],
                                             reasoning_effort="low")
        answer = second.choices[0].message
        self.assertEqual(second.choices[0].finish_reason, "stop")
        self.assertIn("get_weather returned heavy rain all day", answer.content)
        self.assertTrue(reasoning_of(answer), "the call after the tool result still reasons")
        # Bedrock needs the reasoning (with its signature) back at the start of the assistant turn that called the
        # tool: it was kept across the tool call.
        sent = last_model_request()["messages"]
        assistant = sent[-2]
        self.assertEqual(assistant["role"], "assistant")
        kept = assistant["content"][0].get("reasoningContent", {}).get("reasoningText", {})
        self.assertEqual(kept.get("text"), reasoning_of(message))
        self.assertTrue(kept.get("signature", "").startswith("local-signature-"), assistant["content"][0])

    def test_streamed_reasoning_deltas_come_before_the_answer(self):
        chunks = list(OAI.chat.completions.create(model=MODEL, messages=[user("Why is the sky blue?")],
                                                  reasoning_effort="medium", stream=True,
                                                  stream_options={"include_usage": True}))
        kinds = []
        reasoning, content = [], []
        for c in chunks:
            if not c.choices:
                continue
            delta = c.choices[0].delta
            if reasoning_of(delta):
                reasoning.append(reasoning_of(delta))
                kinds.append("reasoning")
            if delta.content:
                content.append(delta.content)
                kinds.append("content")
        self.assertGreater(len(reasoning), 1, "reasoning arrives in deltas")
        self.assertTrue("".join(reasoning).startswith("Reasoning ("))
        self.assertIn("Echo: Why is the sky blue?", "".join(content))
        self.assertEqual(kinds, sorted(kinds, key=lambda k: k != "reasoning"), "all reasoning precedes the text")
        self.assertIsNotNone(chunks[-1].usage, "include_usage: the last chunk has the usage")
        self.assertIsInstance(chunks[-1].usage.completion_tokens_details.reasoning_tokens, int)


# ------------------------------------------------------------------------------------------------ structured output
def check_city(test, value):
    test.assertIsInstance(value, dict)
    test.assertEqual(set(value), {"name", "population"}, "required keys, no others")
    test.assertIsInstance(value["name"], str)
    test.assertIsInstance(value["population"], int)
    test.assertNotIsInstance(value["population"], bool)


class StructuredOutput(unittest.TestCase):
    FORMAT = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": True}}

    def test_json_schema_answer_parses_and_matches(self):
        r = OAI.chat.completions.create(model=MODEL, messages=[user("Describe Paris as JSON.")],
                                        response_format=self.FORMAT)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        check_city(self, json.loads(r.choices[0].message.content))
        # Through Bedrock's own structured output: the schema goes to the model as Converse's outputConfig.
        text_format = last_model_request()["outputConfig"]["textFormat"]
        self.assertEqual(text_format["type"], "json_schema")
        self.assertEqual(json.loads(text_format["structure"]["jsonSchema"]["schema"]), CITY_SCHEMA)
        self.assertEqual(text_format["structure"]["jsonSchema"]["name"], "city")

    def test_json_schema_streamed(self):
        chunks = OAI.chat.completions.create(model=MODEL, messages=[user("Describe Lyon as JSON.")],
                                             response_format=self.FORMAT, stream=True)
        check_city(self, json.loads("".join(c.choices[0].delta.content or "" for c in chunks if c.choices)))

    def test_json_object(self):
        r = OAI.chat.completions.create(model=MODEL, messages=[user("Any JSON object, please.")],
                                        response_format={"type": "json_object"})
        self.assertIsInstance(json.loads(r.choices[0].message.content), dict)

    def test_a_model_without_structured_output_is_refused(self):
        with self.assertRaises(openai.BadRequestError) as caught:
            OAI.chat.completions.create(model=SECOND_MODEL, messages=[user("JSON?")], response_format=self.FORMAT)
        self.assertEqual(caught.exception.param, "response_format")


# ------------------------------------------------------------------------------------------------ clients (issue 48)
class Clients(unittest.TestCase):
    """What the SDK's helpers and other clients send beside OpenAI's defaults, answered."""

    def test_pydantic_function_tool_is_strict_and_parse_reads_its_call(self):
        from pydantic import BaseModel

        class GetWeather(BaseModel):
            city: str

        tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
        self.assertIs(tool["function"]["strict"], True)
        question = [user('Weather in Oslo? [[tool:get_weather {"city": "Oslo"}]]')]
        parsed = OAI.chat.completions.parse(model=MODEL, messages=question, tools=[tool])
        call = parsed.choices[0].message.tool_calls[0]
        self.assertEqual(parsed.choices[0].finish_reason, "tool_calls")
        self.assertEqual(call.function.parsed_arguments, GetWeather(city="Oslo"))
        # The local model is Claude Sonnet 4.5 (BASE_MODEL_ID): Bedrock's strict tool use.
        spec = last_model_request()["toolConfig"]["tools"][0]["toolSpec"]
        self.assertIs(spec["strict"], True)
        self.assertEqual(spec["inputSchema"]["json"]["required"], ["city"])
        # Nova Pro has none: the schema reaches it without the flag.
        OAI.chat.completions.parse(model=SECOND_MODEL, messages=question, tools=[tool])
        spec = last_model_request()["toolConfig"]["tools"][0]["toolSpec"]
        self.assertNotIn("strict", spec)
        self.assertEqual(spec["inputSchema"]["json"]["required"], ["city"])

    def test_vendor_parameters_are_taken_and_named_in_a_header(self):
        body = {"num_ctx": 4096, "keep_alive": "5m", "top_k": 40}
        raw = OAI.chat.completions.with_raw_response.create(model=MODEL, messages=[user("hi")], extra_body=body)
        self.assertEqual(raw.parse().choices[0].message.content, "Echo: hi")
        self.assertEqual(raw.headers["x-ignored-parameters"], "num_ctx, keep_alive")
        # The local model is Claude Sonnet 4.5 (BASE_MODEL_ID), which takes top_k; Nova Pro takes none.
        self.assertEqual(last_model_request()["additionalModelRequestFields"]["top_k"], 40)
        raw = OAI.chat.completions.with_raw_response.create(model=SECOND_MODEL, messages=[user("hi")],
                                                            extra_body=body)
        self.assertEqual(raw.headers["x-ignored-parameters"], "num_ctx, keep_alive, top_k")
        self.assertNotIn("additionalModelRequestFields", last_model_request())

    def test_models_are_marked_chat_or_embeddings_chat_first(self):
        models = list(OAI.models.list())
        kinds = [m.model_extra.get("type") for m in models]
        self.assertEqual(kinds, sorted(kinds, key=lambda k: k != "chat"), kinds)
        by_id = {m.id: m.model_extra for m in models}
        self.assertEqual(by_id[MODEL]["type"], "chat")
        self.assertEqual(by_id[EMBEDDING_MODEL]["type"], "embeddings")
        self.assertEqual(by_id[SECOND_MODEL]["max_output_tokens"], 10000, "Nova Pro's limit")

    def test_token_ids_are_embedded_as_the_text_they_spell(self):
        # cl100k_base: "hello" 15339, " world" 1917 (what LangChain's OpenAIEmbeddings sends by default).
        as_text = OAI.embeddings.create(model=EMBEDDING_MODEL, input="hello world", encoding_format="float")
        as_ids = OAI.embeddings.create(model=EMBEDDING_MODEL, input=[[15339, 1917]], encoding_format="float")
        self.assertEqual(as_float32(as_ids.data[0].embedding), as_float32(as_text.data[0].embedding))


# ------------------------------------------------------------------------------------------------ embeddings
class Embeddings(unittest.TestCase):
    TEXT = "The quick brown fox jumps over the lazy dog."

    def test_floats_and_base64_are_the_same_vector(self):
        floats = OAI.embeddings.create(model=EMBEDDING_MODEL, input=self.TEXT, encoding_format="float")
        self.assertEqual(floats.object, "list")
        self.assertEqual(floats.model, EMBEDDING_MODEL)
        self.assertEqual(len(floats.data), 1)
        self.assertEqual(floats.data[0].object, "embedding")
        self.assertEqual(floats.data[0].index, 0)
        vector = floats.data[0].embedding
        self.assertEqual(len(vector), 1024, "Titan Text Embeddings V2's default dimensions")
        self.assertTrue(all(isinstance(v, float) for v in vector))
        self.assertGreater(floats.usage.prompt_tokens, 0)
        self.assertEqual(floats.usage.total_tokens, floats.usage.prompt_tokens)

        packed = OAI.embeddings.create(model=EMBEDDING_MODEL, input=self.TEXT, encoding_format="base64")
        text = packed.data[0].embedding
        self.assertIsInstance(text, str, "base64 is one string per vector")
        self.assertEqual(decode_base64_floats(text), as_float32(vector), "float32, little-endian")

        # Without encoding_format the SDK asks for base64 and decodes it itself.
        default = OAI.embeddings.create(model=EMBEDDING_MODEL, input=self.TEXT)
        self.assertEqual(as_float32(default.data[0].embedding), as_float32(vector))

    def test_a_list_in_order_and_dimensions(self):
        texts = ["alpha", "beta gamma", self.TEXT]
        batch = OAI.embeddings.create(model=EMBEDDING_MODEL, input=texts, dimensions=256, encoding_format="float")
        self.assertEqual([d.index for d in batch.data], [0, 1, 2])
        self.assertTrue(all(len(d.embedding) == 256 for d in batch.data))
        one = OAI.embeddings.create(model=EMBEDDING_MODEL, input=texts[1], dimensions=256, encoding_format="float")
        self.assertEqual(as_float32(batch.data[1].embedding), as_float32(one.data[0].embedding))
        self.assertNotEqual(batch.data[0].embedding, batch.data[1].embedding)

    def test_cohere_takes_a_list(self):
        texts = [f"passage {i}" for i in range(5)]
        r = OAI.embeddings.create(model=COHERE_MODEL, input=texts, encoding_format="float")
        self.assertEqual(r.model, COHERE_MODEL)
        self.assertEqual([d.index for d in r.data], list(range(5)))
        self.assertEqual(len({len(d.embedding) for d in r.data}), 1)
        self.assertGreater(len(r.data[0].embedding), 0)

    def test_usage_is_counted_like_chat(self):
        before = usage(BASE)["today"]
        r = OAI.embeddings.create(model=EMBEDDING_MODEL, input=["counted", "twice"], encoding_format="float")
        after = usage(BASE)["today"]
        self.assertEqual(after["input_tokens"] - before["input_tokens"], r.usage.prompt_tokens)

    def test_unknown_embedding_model_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as caught:
            OAI.embeddings.create(model="amazon.titan-embed-image-v1", input="x")
        self.assertEqual(caught.exception.code, "model_not_found")


# ------------------------------------------------------------------------------------------------ refusals
class Refusals(unittest.TestCase):
    def assert_openai_error(self, error, status, code=None, param=None):
        self.assertEqual(error.status_code, status)
        body = error.body
        self.assertIsInstance(body, dict, "OpenAI's error shape: {error: {message, type, param, code}}")
        self.assertTrue({"message", "type", "param", "code"} <= set(body), body)
        self.assertTrue(body["message"])
        if code is not None:
            self.assertEqual(error.code, code)
        if param is not None:
            self.assertEqual(error.param, param)

    def test_bad_key_is_authentication_error(self):
        for key in ["sk-not-a-key-this-run-issued", KEY + "x"]:
            with self.subTest(key=key[:8]), self.assertRaises(openai.AuthenticationError) as caught:
                client(key, max_retries=0).chat.completions.create(model=MODEL, messages=[user("hi")])
            self.assert_openai_error(caught.exception, 401, code="invalid_api_key")
        with self.assertRaises(openai.AuthenticationError):
            client("sk-not-a-key-this-run-issued", max_retries=0).models.list()

    def test_unknown_model_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as caught:
            OAI.chat.completions.create(model="gpt-4o", messages=[user("hi")])
        self.assert_openai_error(caught.exception, 404, code="model_not_found")

    def test_each_refused_field_is_named(self):
        image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
        cases = [
            ("frobnicate", dict(extra_body={"frobnicate": True})),
            ("n", dict(n=2)),
            ("seed", dict(seed=7)),
            ("logprobs", dict(logprobs=True)),
            ("top_logprobs", dict(top_logprobs=3)),
            ("logit_bias", dict(logit_bias={"50256": -100})),
            ("presence_penalty", dict(presence_penalty=0.5)),
            ("frequency_penalty", dict(frequency_penalty=-1)),
            ("audio", dict(audio={"voice": "alloy", "format": "mp3"})),
            ("modalities", dict(modalities=["text", "audio"])),
            ("prediction", dict(prediction={"type": "content", "content": "x"})),
            ("service_tier", dict(service_tier="flex")),
            ("store", dict(store=True)),
        ]
        for param, options in cases:
            with self.subTest(param), self.assertRaises(openai.BadRequestError) as caught:
                OAI.chat.completions.create(model=MODEL, messages=[user("hi")], **options)
            self.assert_openai_error(caught.exception, 400, param=param)
            self.assertEqual(caught.exception.type, "invalid_request_error")

        with self.subTest("http image URL"), self.assertRaises(openai.BadRequestError) as caught:
            OAI.chat.completions.create(model=MODEL, messages=[user("What is this?", image)])
        self.assert_openai_error(caught.exception, 400)
        self.assertTrue(caught.exception.param.startswith("messages"), caught.exception.param)
        self.assertIn("image_url", caught.exception.param)

        with self.subTest("no messages"), self.assertRaises(openai.BadRequestError) as caught:
            OAI.chat.completions.create(model=MODEL, messages=[])
        self.assert_openai_error(caught.exception, 400, param="messages")

        with self.subTest("embeddings: unknown field"), self.assertRaises(openai.BadRequestError) as caught:
            OAI.embeddings.create(model=EMBEDDING_MODEL, input="x", extra_body={"frobnicate": 1})
        self.assert_openai_error(caught.exception, 400, param="frobnicate")

    def test_a_refusal_reaches_no_model(self):
        count = len(model_requests())
        with self.assertRaises(openai.BadRequestError):
            OAI.chat.completions.create(model=MODEL, messages=[user("hi")], n=3)
        self.assertEqual(len(model_requests()), count)


# ------------------------------------------------------------------------------------------------ API keys
class ApiKeys(unittest.TestCase):
    def test_created_used_listed_revoked(self):
        key_id, secret = create_key(BASE, "short-lived")
        own = client(secret, max_retries=0)
        self.assertIn(MODEL, [m.id for m in own.models.list()])
        r = own.chat.completions.create(model=MODEL, messages=[user("with my own key")])
        self.assertIn("Echo: with my own key", r.choices[0].message.content)

        listed = list_keys(BASE)
        mine = [k for k in listed if k.get("id") == key_id]
        self.assertEqual(len(mine), 1, listed)
        self.assertEqual(mine[0].get("name"), "short-lived")
        self.assertNotIn(secret, json.dumps(listed), "a key is shown once: never in the list")

        status, _, body = http("DELETE", f"{BASE}/api-keys/{key_id}")
        self.assertIn(status, (200, 204), body)
        self.assertNotIn(key_id, [k.get("id") for k in list_keys(BASE)])
        # A revoked key stops working within the keys' cache life (API_KEY_CACHE_SECONDS).
        deadline = time.monotonic() + KEY_CACHE_SECONDS + 5
        while True:
            try:
                own.models.list()
            except openai.AuthenticationError as e:
                self.assertEqual(e.code, "invalid_api_key")
                break
            self.assertLess(time.monotonic(), deadline, "the revoked key still works past the cache's life")
            time.sleep(0.25)
        with self.assertRaises(openai.AuthenticationError):
            own.chat.completions.create(model=MODEL, messages=[user("after revocation")])
        # The suite's own key still works.
        OAI.models.list()

    def test_a_keys_turns_count_for_its_owner(self):
        before = usage(BASE)
        r = OAI.chat.completions.create(model=MODEL, messages=[user("counted for my owner")])
        after = usage(BASE)
        self.assertEqual(after["today"]["turns"], before["today"]["turns"] + 1)
        self.assertEqual(after["today"]["total_tokens"] - before["today"]["total_tokens"], r.usage.total_tokens)
        # The key acts as its owner: GET /usage with the key is the owner's own report.
        self.assertEqual(usage(BASE, key=KEY)["today"]["turns"], after["today"]["turns"])


@unittest.skipUnless(LIMITED_BASE, "OPENAI_TEST_LIMITED_BASE_URL is not set (a run with RATE_LIMIT_PER_MINUTE=2)")
class RateLimit(unittest.TestCase):
    def test_over_the_owners_limit_is_rate_limit_error(self):
        # Two keys of the one local user share its limit of two requests a minute.
        _, first_key = create_key(LIMITED_BASE, "first")
        _, second_key = create_key(LIMITED_BASE, "second")
        # max_retries=0: the SDK would otherwise retry a 429 after its Retry-After (up to two minutes).
        first = client(first_key, LIMITED_BASE, max_retries=0)
        second = client(second_key, LIMITED_BASE, max_retries=0)
        first.chat.completions.create(model=MODEL, messages=[user("one")])
        second.chat.completions.create(model=MODEL, messages=[user("two")])
        with self.assertRaises(openai.RateLimitError) as caught:
            first.chat.completions.create(model=MODEL, messages=[user("three")])
        error = caught.exception
        self.assertEqual(error.status_code, 429)
        self.assertEqual(error.code, "rate_limit_exceeded")
        retry_after = int(error.response.headers["retry-after"])
        self.assertGreaterEqual(retry_after, 1)
        # The rate window is seven buckets of 10 s (the minute and the bucket under way): a full window's first
        # request leaves it at most 70 s from now.
        self.assertLessEqual(retry_after, 70)
        report = usage(LIMITED_BASE)
        self.assertEqual(report["today"]["turns"], 2, "both keys' turns are their owner's")
        self.assertEqual(report["this_minute"]["request_limit"], 2)
        with self.assertRaises(openai.RateLimitError):
            second.chat.completions.create(model=MODEL, messages=[user("four")])


if __name__ == "__main__":
    unittest.main()
