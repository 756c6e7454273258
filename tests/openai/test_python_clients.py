#!/usr/bin/env python3
"""LangChain Python (`langchain-openai`) and LiteLLM against the local run's OpenAI-compatible API, each as its
users configure it (issue 48): LangChain's `OpenAIEmbeddings` with its defaults, which send token ids (cl100k_base)
rather than text, and `ChatOpenAI.with_structured_output`; LiteLLM's `completion(model="openai/…")` whole, streamed
and with a tool round trip.

They run in a venv of their own (`.tools/clients-venv`, tools/clients-requirements.txt), as they pin versions of
httpx and boto3 the project's other tools do not take. tiktoken reads cl100k_base's table from TIKTOKEN_CACHE_DIR,
which `make tools` fills from the tokenizer crate the backend itself decodes with (tiktoken-rs): no download.

Run by tests/suites.py (its "openai" suite) against the same local run as tests/openai/test_openai.py
(OPENAI_TEST_BASE_URL, default http://127.0.0.1:9090; OPENAI_TEST_MODEL; OPENAI_TEST_EMBEDDING_MODEL):

    TIKTOKEN_CACHE_DIR=.tools/tiktoken .tools/clients-venv/bin/python tests/openai/test_python_clients.py -v
"""

import json
import os
import sys
import unittest
import warnings

# The clients' own deprecation and pydantic warnings are theirs, not this backend's: kept out of the output.
warnings.simplefilter("ignore")
# LiteLLM reads its model price map from GitHub at import unless told to use the copy it ships.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402
import litellm  # noqa: E402
from langchain_openai import ChatOpenAI, OpenAIEmbeddings  # noqa: E402
from openai import OpenAI  # noqa: E402
from pydantic import BaseModel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testkit  # noqa: E402  (tests/testkit.py)

BASE, _ = testkit.run_urls("OPENAI", 9090)
MODEL = testkit.OPENAI_MODEL
EMBEDDING_MODEL = os.environ.get("OPENAI_TEST_EMBEDDING_MODEL", "amazon.titan-embed-text-v2:0")
TIMEOUT = 60
KEY = testkit.create_key(BASE, "python-clients")


class Sent:
    """The JSON bodies a client sent, through an httpx event hook on the client it is given."""

    def __init__(self):
        self.bodies = []

    def client(self):
        def keep(request):
            if request.content:
                self.bodies.append(json.loads(request.content))
        return httpx.Client(event_hooks={"request": [keep]}, timeout=TIMEOUT)


class LangChain(unittest.TestCase):
    def test_embeddings_with_their_defaults_send_token_ids_and_get_the_texts_vectors(self):
        sent = Sent()
        embeddings = OpenAIEmbeddings(model=EMBEDDING_MODEL, base_url=f"{BASE}/v1", api_key=KEY,
                                      http_client=sent.client())
        texts = ["hello world", "The quick brown fox jumps over the lazy dog."]
        vectors = embeddings.embed_documents(texts)
        # LangChain's default: each text as cl100k_base token ids, not as text.
        inputs = sent.bodies[-1]["input"]
        self.assertEqual(len(inputs), 2, sent.bodies[-1])
        self.assertTrue(all(isinstance(t, int) for ids in inputs for t in ids), inputs)
        self.assertEqual(inputs[0], [15339, 1917])
        # The same vectors as the texts sent as text through OpenAI's SDK.
        as_text = OpenAI(base_url=f"{BASE}/v1", api_key=KEY, timeout=TIMEOUT).embeddings.create(
            model=EMBEDDING_MODEL, input=texts, encoding_format="float")
        self.assertEqual(len(vectors), 2)
        for mine, theirs in zip(vectors, as_text.data):
            self.assertEqual(len(mine), len(theirs.embedding))
            for a, b in zip(mine, theirs.embedding):
                self.assertAlmostEqual(a, b, places=6)
        self.assertNotEqual(vectors[0], vectors[1])
        self.assertEqual(len(embeddings.embed_query("hello world")), len(vectors[0]))

    def test_with_structured_output_answers_an_instance_of_the_schema(self):
        class City(BaseModel):
            """A city."""
            name: str
            country: str
            population: int

        sent = Sent()
        chat = ChatOpenAI(model=MODEL, base_url=f"{BASE}/v1", api_key=KEY, http_client=sent.client())
        city = chat.with_structured_output(City).invoke("Describe Paris as JSON.")
        self.assertIsInstance(city, City)
        self.assertTrue(city.name)
        self.assertIsInstance(city.population, int)
        # langchain-openai's default method: a strict json_schema response format.
        response_format = sent.bodies[-1]["response_format"]
        self.assertEqual(response_format["type"], "json_schema", response_format)
        self.assertEqual(response_format["json_schema"]["name"], "City")
        self.assertEqual(sorted(response_format["json_schema"]["schema"]["required"]),
                         ["country", "name", "population"])


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


class LiteLLM(unittest.TestCase):
    OPTIONS = {"model": f"openai/{MODEL}", "api_base": f"{BASE}/v1", "api_key": KEY, "timeout": TIMEOUT}

    def test_completion_whole(self):
        r = litellm.completion(messages=[{"role": "user", "content": "hi"}], **self.OPTIONS)
        self.assertEqual(r.choices[0].message.content, "Echo: hi")
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertGreater(r.usage.completion_tokens, 0)

    def test_completion_streamed(self):
        chunks = list(litellm.completion(messages=[{"role": "user", "content": "hello there"}], stream=True,
                                         stream_options={"include_usage": True}, **self.OPTIONS))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, "Echo: hello there")
        self.assertGreater(len(chunks), 2, "streamed in pieces")
        finished = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finished, ["stop"])

    def test_a_tool_round_trip(self):
        messages = [{"role": "user", "content": 'Weather? [[tool:get_weather {"city":"Oslo"}]]'}]
        asked = litellm.completion(messages=messages, tools=[WEATHER], **self.OPTIONS)
        self.assertEqual(asked.choices[0].finish_reason, "tool_calls")
        call = asked.choices[0].message.tool_calls[0]
        self.assertEqual(call.function.name, "get_weather")
        self.assertEqual(json.loads(call.function.arguments), {"city": "Oslo"})
        messages.append(asked.choices[0].message.model_dump(exclude_none=True))
        # LiteLLM's docs write the tool message with the function's `name`, as LangChain does.
        messages.append({"role": "tool", "tool_call_id": call.id, "name": "get_weather", "content": "18 C"})
        answered = litellm.completion(messages=messages, tools=[WEATHER], **self.OPTIONS)
        self.assertEqual(answered.choices[0].finish_reason, "stop")
        self.assertEqual(answered.choices[0].message.content, "get_weather returned 18 C")


if __name__ == "__main__":
    unittest.main()
