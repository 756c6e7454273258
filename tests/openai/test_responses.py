#!/usr/bin/env python3
"""The official `openai` Python SDK's `responses` against the local run (issue 50's "Tests and proof"): a response
whole and streamed (every event type in order, `sequence_number` increasing, the SDK's own accumulation of the
stream), a function tool round trip with `store: false`, `previous_response_id` with `store: true`, and
`responses.retrieve`, `input_items.list` and `delete`.

Run by tests/suites.py (its "openai" suite) with the venv's Python, against the same local run as
tests/openai/test_openai.py (OPENAI_TEST_BASE_URL, default http://127.0.0.1:9090; OPENAI_TEST_MODEL):

    .tools/venv/bin/python tests/openai/test_responses.py -v     # against a run already started by hand
"""

import json
import os
import sys
import unittest

import openai
from openai import OpenAI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testkit  # noqa: E402  (tests/testkit.py)

BASE, BEDROCK = testkit.run_urls("OPENAI", 9090)
MODEL = testkit.OPENAI_MODEL
TIMEOUT = 60

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather now in a city.",
    "parameters": {**testkit.string_parameters("city"), "additionalProperties": False},
    "strict": True,
}


def create_key():
    """A new API key of the run's one user (no Authorization: the local user)."""
    return testkit.create_key(BASE, "responses")


CLIENT = None


def client():
    global CLIENT
    if CLIENT is None:
        CLIENT = OpenAI(base_url=f"{BASE}/v1", api_key=create_key(), timeout=TIMEOUT, max_retries=0)
    return CLIENT


class Whole(unittest.TestCase):
    def test_a_response_whole(self):
        response = client().responses.create(
            model=MODEL, input="What is the capital of France?", instructions="Be brief.", store=False,
            metadata={"ticket": "T-1"},
        )
        self.assertTrue(response.id.startswith("resp_"), response.id)
        self.assertEqual(response.status, "completed")
        self.assertEqual(response.output_text, "Echo: What is the capital of France?")
        self.assertEqual(response.output[0].type, "message")
        self.assertEqual(response.output[0].content[0].type, "output_text")
        self.assertGreater(response.usage.input_tokens, 0)
        self.assertGreater(response.usage.output_tokens, 0)
        self.assertEqual(response.usage.total_tokens, response.usage.input_tokens + response.usage.output_tokens)
        self.assertEqual(response.usage.input_tokens_details.cached_tokens, 0)
        self.assertEqual(response.usage.output_tokens_details.reasoning_tokens, 0)
        self.assertEqual(response.metadata, {"ticket": "T-1"})
        self.assertFalse(response.store)

    def test_an_unknown_field_is_a_bad_request_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            client().responses.create(model=MODEL, input="x", store=False, extra_body={"temprature": 0.5})
        self.assertEqual(raised.exception.body["param"], "temprature")


class Streamed(unittest.TestCase):
    def test_every_event_in_order_with_increasing_sequence_numbers(self):
        events = list(client().responses.create(model=MODEL, input="[[deltas:4]] go", store=False, stream=True))
        types = [e.type for e in events]
        self.assertEqual(types[:4], ["response.created", "response.in_progress", "response.output_item.added",
                                     "response.content_part.added"])
        self.assertEqual(types[-4:], ["response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"])
        self.assertEqual(types.count("response.output_text.delta"), 4)
        numbers = [e.sequence_number for e in events]
        self.assertEqual(numbers, list(range(len(events))))
        self.assertEqual("".join(e.delta for e in events if e.type == "response.output_text.delta"), "w1 w2 w3 w4")
        self.assertEqual(events[-1].response.output_text, "w1 w2 w3 w4")

    def test_the_sdks_stream_helper_accumulates_the_same_response(self):
        with client().responses.stream(model=MODEL, input="stream this", store=False) as stream:
            deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
            final = stream.get_final_response()
        self.assertEqual(deltas, "Echo: stream this")
        self.assertEqual(final.output_text, "Echo: stream this")
        self.assertEqual(final.status, "completed")


class Tools(unittest.TestCase):
    def test_a_function_tool_round_trip_without_storing(self):
        question = 'Weather in Paris? [[tool:get_weather {"city":"Paris"}]]'
        first = client().responses.create(model=MODEL, input=question, tools=[WEATHER], store=False)
        calls = [item for item in first.output if item.type == "function_call"]
        self.assertEqual(len(calls), 1, first.output)
        call = calls[0]
        self.assertEqual(call.name, "get_weather")
        self.assertEqual(json.loads(call.arguments), {"city": "Paris"})
        items = [{"role": "user", "content": question}]
        items += [item.model_dump(exclude_none=True) for item in first.output]
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": "18 C and sunny"})
        second = client().responses.create(model=MODEL, input=items, tools=[WEATHER], store=False)
        self.assertIn("get_weather returned 18 C and sunny", second.output_text)

    def test_encrypted_reasoning_goes_back_with_the_calls_and_reaches_the_model_unchanged(self):
        # What Codex sends: nothing kept here, the signed reasoning kept by the client, sealed.
        options = dict(model=MODEL, tools=[WEATHER], store=False, include=["reasoning.encrypted_content"],
                       reasoning={"effort": "low", "summary": "auto"})
        question = 'Weather in Rome? [[tool:get_weather {"city":"Rome"}]]'
        first = client().responses.create(input=question, **options)
        reasoning = [item for item in first.output if item.type == "reasoning"]
        self.assertEqual(len(reasoning), 1, first.output)
        summary = reasoning[0].summary[0].text
        sealed = reasoning[0].encrypted_content
        self.assertTrue(sealed)
        self.assertNotIn(summary, sealed)
        call = next(item for item in first.output if item.type == "function_call")
        items = [{"role": "user", "content": question}]
        items += [item.model_dump(exclude_none=True) for item in first.output]
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": "18 C"})
        second = client().responses.create(input=items, **options)
        self.assertIn("get_weather returned 18 C", second.output_text)
        # The local Bedrock server got the reasoning back before the call, text and signature as it signed them
        # (it refuses Claude's tool use without its reasoning, and a changed signature).
        sent = testkit.last_model_request(BEDROCK)
        assistant = next(m for m in sent["messages"] if m["role"] == "assistant")
        block = assistant["content"][0]["reasoningContent"]["reasoningText"]
        self.assertEqual(block["text"], summary)
        self.assertTrue(block["signature"].startswith("local-signature-"), block)
        # Changed by a byte: refused, naming it.
        items[1]["encrypted_content"] = ("B" if sealed[5] == "A" else "A").join([sealed[:5], sealed[6:]])
        with self.assertRaises(openai.BadRequestError) as caught:
            client().responses.create(input=items, **options)
        self.assertEqual(caught.exception.param, "input[1].encrypted_content")

    def test_streamed_arguments_arrive_as_events(self):
        events = list(client().responses.create(
            model=MODEL, input='[[tool:get_weather {"city":"Oslo"}]] Weather?', tools=[WEATHER], store=False,
            stream=True,
        ))
        types = [e.type for e in events]
        self.assertIn("response.function_call_arguments.delta", types)
        done = next(e for e in events if e.type == "response.function_call_arguments.done")
        self.assertEqual(json.loads(done.arguments), {"city": "Oslo"})


class Kept(unittest.TestCase):
    def test_previous_response_id_retrieve_input_items_and_delete(self):
        first = client().responses.create(model=MODEL, input="My name is Ada.")
        self.assertTrue(first.store)
        again = client().responses.retrieve(first.id)
        self.assertEqual(again.id, first.id)
        self.assertEqual(again.output_text, "Echo: My name is Ada.")
        items = client().responses.input_items.list(first.id)
        self.assertEqual(len(items.data), 1)
        second = client().responses.create(model=MODEL, input="What is my name?", previous_response_id=first.id)
        self.assertEqual(second.previous_response_id, first.id)
        self.assertEqual(second.output_text, "Echo: What is my name?")
        client().responses.delete(first.id)
        with self.assertRaises(openai.NotFoundError):
            client().responses.retrieve(first.id)
        with self.assertRaises(openai.NotFoundError):
            client().responses.create(model=MODEL, input="x", previous_response_id=first.id)


if __name__ == "__main__":
    unittest.main()
