#!/usr/bin/env python3
"""The OpenAI Agents SDK (`openai-agents`, tools/requirements.txt) with its default model class
(`OpenAIResponsesModel`, which calls the Responses API) against the local run: an agent runs a function tool the
local model asks for and answers from its result.

The "openai" suite of tests/suites.py runs it with the venv's Python, against the local run of
tests/openai/test_openai.py (OPENAI_TEST_BASE_URL, default http://127.0.0.1:9090; OPENAI_TEST_MODEL):

    .tools/venv/bin/python tests/openai/test_agents.py -v     # against a run already started by hand
"""

import asyncio
import os
import sys
import unittest

from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testkit  # noqa: E402  (tests/testkit.py)

MODEL = testkit.OPENAI_MODEL
BASE, _ = testkit.run_urls("OPENAI", 9090)


def create_key():
    """A new API key of the run's one user (no Authorization: the local user)."""
    return testkit.create_key(BASE, "agents")


class Agents(unittest.TestCase):
    def test_an_agent_runs_a_function_tool_and_answers_from_its_result(self):
        # The SDK's traces go to OpenAI, not here: off.
        set_tracing_disabled(True)
        set_default_openai_client(AsyncOpenAI(base_url=f"{BASE}/v1", api_key=create_key()), use_for_tracing=False)
        cities = []

        @function_tool
        def get_weather(city: str) -> str:
            """The weather now in a city."""
            cities.append(city)
            return f"18 C in {city}"

        agent = Agent(name="Assistant", instructions="Be brief.", model=MODEL, tools=[get_weather])
        result = asyncio.run(Runner.run(agent, 'Weather? [[tool:get_weather {"city":"Paris"}]]'))
        self.assertEqual(cities, ["Paris"])
        self.assertEqual(result.final_output, "get_weather returned 18 C in Paris")


if __name__ == "__main__":
    unittest.main()
