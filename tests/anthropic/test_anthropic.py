#!/usr/bin/env python3
"""Anthropic's official Python SDK against the local run: `/v1/messages` (whole and streamed), a tool loop with
thinking whose signed block goes back to the local Bedrock server (which checks its signature as Bedrock does),
parallel tool use streamed, an image and a PDF, `count_tokens`, `/v1/models`, and each refusal as the SDK's typed
exception (issue 49's "Tests and proof").

Run by tests/suites.py (its "anthropic" suite) with the venv's Python, which has the SDK (tools/requirements.txt):

    ANTHROPIC_TEST_BASE_URL     the run (default http://127.0.0.1:9085), whose ALLOWED_MODELS holds SONNET
    ANTHROPIC_TEST_BEDROCK_URL  its local Bedrock server (default: the run's port + 100)

    .tools/venv/bin/python tests/anthropic/test_anthropic.py -v     # against a run already started by hand
"""

import base64
import os
import sys
import unittest
import uuid

import anthropic

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testkit  # noqa: E402  (tests/testkit.py)

BASE, BEDROCK = testkit.run_urls("ANTHROPIC", 9085)
# An allowed Claude that Anthropic's name `claude-sonnet-4-5` maps to (a budget thinker).
SONNET_NAME = "claude-sonnet-4-5"
ECHO = "local.echo-v1:0"
TIMEOUT = 60

PNG, PDF = testkit.PNG, testkit.PDF
WEATHER = [{
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}]


def create_key():
    """A new API key of the run's one user (`POST /api-keys`, no Authorization: the local user)."""
    return testkit.create_key(BASE, "anthropic-sdk")


KEY = None


def client(**options):
    return anthropic.Anthropic(base_url=BASE, api_key=KEY, timeout=TIMEOUT, max_retries=0, **options)


def user(*content):
    return {"role": "user", "content": list(content) if len(content) != 1 or not isinstance(content[0], str)
            else content[0]}


class Messages(unittest.TestCase):
    def test_whole(self):
        message = client().messages.create(model=ECHO, max_tokens=256, system="Be brief.",
                                           messages=[user("Hello there")])
        self.assertEqual(message.type, "message")
        self.assertEqual(message.content[0].text, "Echo: Hello there")
        self.assertEqual(message.stop_reason, "end_turn")
        self.assertGreater(message.usage.input_tokens, 0)
        self.assertGreater(message.usage.output_tokens, 0)

    def test_bearer_token_as_claude_code_sends_it(self):
        bearer = anthropic.Anthropic(base_url=BASE, auth_token=KEY, timeout=TIMEOUT, max_retries=0)
        message = bearer.messages.create(model=ECHO, max_tokens=64, messages=[user("Hi")])
        self.assertEqual(message.content[0].text, "Echo: Hi")

    def test_streamed_equals_whole(self):
        with client().messages.stream(model=ECHO, max_tokens=256, messages=[user("[[deltas:4]]")]) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        self.assertEqual(text, "w1 w2 w3 w4")
        self.assertEqual(final.content[0].text, text)
        self.assertEqual(final.stop_reason, "end_turn")
        self.assertGreater(final.usage.output_tokens, 0)

    def test_tool_loop_with_thinking_gives_the_signed_block_back(self):
        question = 'Weather? [[tool:get_weather {"city":"Paris"}]]'
        thinking = {"type": "enabled", "budget_tokens": 2048}
        with client().messages.stream(model=SONNET_NAME, max_tokens=8000, thinking=thinking, tools=WEATHER,
                                      messages=[user(question)]) as stream:
            first = stream.get_final_message()
        self.assertEqual(first.stop_reason, "tool_use")
        kinds = [block.type for block in first.content]
        self.assertEqual(kinds, ["thinking", "text", "tool_use"])
        self.assertTrue(first.content[0].signature.startswith("local-signature-"))
        call = first.content[2]
        self.assertEqual(call.input, {"city": "Paris"})
        second = client().messages.create(
            model=SONNET_NAME, max_tokens=8000, thinking=thinking, tools=WEATHER,
            messages=[user(question), {"role": "assistant", "content": first.content},
                      user({"type": "tool_result", "tool_use_id": call.id, "content": "18 C and sunny"})])
        self.assertEqual(second.stop_reason, "end_turn")
        self.assertIn("get_weather returned 18 C and sunny", second.content[-1].text)
        sent = testkit.last_model_request(BEDROCK)["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]
        self.assertEqual(sent, {"text": first.content[0].thinking, "signature": first.content[0].signature})

    def test_parallel_tool_use_streamed_each_in_its_block(self):
        question = 'Both? [[tool:get_weather {"city":"Paris"}]] [[tool:get_weather {"city":"Rome"}]]'
        with client().messages.stream(model=ECHO, max_tokens=256, tools=WEATHER,
                                      messages=[user(question)]) as stream:
            final = stream.get_final_message()
        calls = [block for block in final.content if block.type == "tool_use"]
        self.assertEqual([c.input for c in calls], [{"city": "Paris"}, {"city": "Rome"}])
        self.assertEqual(len({c.id for c in calls}), 2)

    def test_image_and_pdf_reach_the_model_whole(self):
        message = client().messages.create(model=ECHO, max_tokens=256, messages=[user(
            {"type": "text", "text": "What are these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(PNG).decode()}},
            {"type": "document", "title": "memo", "source": {"type": "base64", "media_type": "application/pdf",
                                                              "data": base64.b64encode(PDF).decode()}},
        )])
        text = message.content[0].text
        self.assertIn(f"image png {len(PNG)} bytes", text)
        self.assertIn(f"pdf {len(PDF)} bytes", text)

    def test_count_tokens(self):
        counted = client().messages.count_tokens(model=ECHO, messages=[user("one two three four")])
        self.assertGreater(counted.input_tokens, 0)

    def test_models_in_anthropics_shape(self):
        ids = [model.id for model in client().models.list()]
        self.assertIn(ECHO, ids)

    def test_cache_control_reads_the_cached_prompt_and_says_so_in_usage(self):
        # A system prompt long enough to cache, marked as Anthropic's clients mark it: written to the cache the first
        # time, read from it the second, each counted in the usage as Bedrock counts it.
        # Its own words each run, so that a run the suite reuses holds nothing of it in its cache yet.
        fresh = uuid.uuid4().hex
        system = [{"type": "text", "text": " ".join(f"rule{i}-{fresh}" for i in range(400)),
                   "cache_control": {"type": "ephemeral"}}]
        first = client().messages.create(model=ECHO, max_tokens=64, system=system, messages=[user("Cache one")])
        second = client().messages.create(model=ECHO, max_tokens=64, system=system, messages=[user("Cache two")])
        self.assertGreater(first.usage.cache_creation_input_tokens, 0, first.usage)
        self.assertGreater(second.usage.cache_read_input_tokens, 0, second.usage)
        self.assertEqual(second.usage.cache_read_input_tokens, first.usage.cache_creation_input_tokens)


class Refusals(unittest.TestCase):
    def test_unknown_model_is_not_found(self):
        with self.assertRaises(anthropic.NotFoundError):
            client().messages.create(model="claude-opus-9", max_tokens=64, messages=[user("Hi")])

    def test_unknown_field_is_bad_request_naming_it(self):
        with self.assertRaises(anthropic.BadRequestError) as caught:
            client().messages.create(model=ECHO, max_tokens=64, messages=[user("Hi")],
                                     extra_body={"frobnicate": 1})
        self.assertIn("frobnicate", str(caught.exception))

    def test_bad_key_is_authentication_error(self):
        bad = anthropic.Anthropic(base_url=BASE, api_key="cbk_not-a-key", timeout=TIMEOUT, max_retries=0)
        with self.assertRaises(anthropic.AuthenticationError):
            bad.messages.create(model=ECHO, max_tokens=64, messages=[user("Hi")])

    def test_a_body_over_the_limit_is_content_too_large(self):
        with self.assertRaises(anthropic.APIStatusError) as caught:
            client().messages.create(model=ECHO, max_tokens=64, messages=[user("x" * (7 * 1024 * 1024))])
        self.assertEqual(caught.exception.status_code, 413)
        self.assertEqual(caught.exception.body["error"]["type"], "request_too_large", caught.exception.body)

    def test_throttled_model_is_overloaded(self):
        with self.assertRaises(anthropic.APIStatusError) as caught:
            client().messages.create(model=ECHO, max_tokens=64, messages=[user("Hi [[fault:throttle]]")])
        self.assertEqual(caught.exception.status_code, 529)


if __name__ == "__main__":
    KEY = create_key()
    unittest.main()
