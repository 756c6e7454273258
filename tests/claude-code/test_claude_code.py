#!/usr/bin/env python3
"""Claude Code (`claude -p`, the npm package tests/claude-code/package.json pins, installed by `make tools`) against
the local run's Messages API, configured as docs/anthropic-messages-api.md says (`ANTHROPIC_BASE_URL`, a key of the
backend's, an Anthropic model name the run maps to an allowed Claude): it answers a prompt, and in a second run it
runs the Bash command the local model asks for (`[[tool:Bash {…}]]`) and finishes with its output.

Run by tests/suites.py (its "anthropic" suite) against the same local run as tests/anthropic/
(ANTHROPIC_TEST_BASE_URL, default http://127.0.0.1:9085, whose ALLOWED_MODELS holds a Claude that `claude-sonnet-4-5`
maps to; ANTHROPIC_TEST_BEDROCK_URL, its local Bedrock server, default the run's port + 100):

    python3 tests/claude-code/test_claude_code.py -v     # against a run already started by hand

Claude Code runs with a home and configuration directory of its own (temporary), with nothing of the caller's
ANTHROPIC_* or CLAUDE_* environment, and with its nonessential traffic, telemetry, auto-updater and error reports off,
so it talks to nothing but the run. Only the standard library is used.
"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testkit  # noqa: E402  (tests/testkit.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLAUDE = os.path.join(ROOT, "tests/claude-code/node_modules/.bin/claude")
BASE, BEDROCK = testkit.run_urls("ANTHROPIC", 9085)
# An Anthropic name the run maps to its allowed Claude (tests/suites.py's ALLOWED_MODELS for the anthropic run).
MODEL = os.environ.get("ANTHROPIC_TEST_MODEL", "claude-sonnet-4-5")
TIMEOUT = 180


def http(method, url, body=None, key=None):
    return testkit.http_json(method, url, body, key)


def model_requests():
    """The Converse requests the local Bedrock server has received, oldest first."""
    return testkit.model_requests(BEDROCK)


class ClaudeCode(testkit.CliTestCase):
    CLI, PREFIX, KEY_NAME, BASE = CLAUDE, "claude-code", "claude-code", BASE
    MISSING = "Claude Code is not installed: run `make tools`"

    def claude(self, prompt, *options, model=MODEL):
        """`claude -p PROMPT --output-format json`'s result object, failing on a non-zero exit or an error result;
        `model=None` leaves Claude Code on its own default model."""
        home = self.home.name
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "XDG_"))}
        env.update({
            "HOME": home,
            "CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"),
            "ANTHROPIC_BASE_URL": BASE,
            "ANTHROPIC_API_KEY": self.key,
            "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "NO_PROXY": "127.0.0.1,localhost",
        })
        if model:
            env["ANTHROPIC_MODEL"] = model
        chosen = ["--model", model] if model else []
        done = subprocess.run(
            [CLAUDE, "-p", prompt, "--output-format", "json", *chosen, *options],
            cwd=self.work.name, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT, env=env,
        )
        self.assertEqual(done.returncode, 0, f"{done.stdout}\n{done.stderr}")
        result = json.loads(done.stdout)
        self.assertEqual((result["type"], result["subtype"], result["is_error"]), ("result", "success", False), result)
        return result

    def test_it_answers_a_prompt_through_v1_messages(self):
        before = len(model_requests())
        usage_before = self.usage()
        result = self.claude("Say hello")
        # The local model echoes the last user turn: Claude Code's system reminders, then the prompt.
        self.assertTrue(result["result"].startswith("Echo:"), result["result"])
        self.assertTrue(result["result"].rstrip().endswith("Say hello"), result["result"])
        self.assertEqual(result["num_turns"], 1, result)
        # The answer came through the backend: the local Bedrock server got the turn for the mapped Claude, with
        # Claude Code's tools, and the key's owner was charged the one turn.
        sent = model_requests()[before:]
        self.assertEqual(len(sent), 1, "one Converse request for Claude Code's one /v1/messages")
        self.assertIn("claude-sonnet-4-5", sent[0]["modelId"])
        self.assertIn("Bash", [t["toolSpec"]["name"] for t in sent[0]["body"]["toolConfig"]["tools"]])
        usage = self.usage()
        self.assertEqual(usage["turns"], usage_before["turns"] + 1)
        self.assertGreater(usage["input_tokens"], usage_before["input_tokens"])

    def test_its_default_model_and_the_system_message_it_sends_are_answered(self):
        # Claude Code's own default model (the run maps its family to the allowed Claude), for which it sends its
        # environment as a message of role "system" after the question: read as the user's turn, where it stands.
        before = len(model_requests())
        result = self.claude("Say hello", model=None)
        self.assertTrue(result["result"].startswith("Echo:"), result["result"])
        sent = model_requests()[before:]
        self.assertEqual(len(sent), 1, "one Converse request")
        messages = sent[0]["body"]["messages"]
        self.assertEqual({m["role"] for m in messages}, {"user"}, messages)
        self.assertIn("Say hello", json.dumps(messages))

    def test_it_runs_the_command_the_model_asks_for_and_finishes_with_its_output(self):
        before = len(model_requests())
        result = self.claude(
            '[[tool:Bash {"command":"echo claude-code-ran-this","description":"Print a word"}]] Run it',
            "--allowedTools", "Bash(echo:*)",
        )
        # Two turns: the model's call of Bash, then its answer to the tool result, which holds the command's output.
        self.assertEqual(result["num_turns"], 2, result)
        self.assertEqual(result["permission_denials"], [], result)
        self.assertIn("Bash returned", result["result"])
        self.assertIn("claude-code-ran-this", result["result"])
        # The second turn gave the first turn's signed thinking back with its call (the local Bedrock server refuses
        # a changed one), and the command's output as the call's result.
        sent = model_requests()[before:]
        self.assertEqual(len(sent), 2, "one Converse request for each of Claude Code's two /v1/messages")
        called = sent[1]["body"]["messages"][-2]
        self.assertEqual([next(iter(block)) for block in called["content"]], ["reasoningContent", "text", "toolUse"])
        self.assertTrue(called["content"][0]["reasoningContent"]["reasoningText"]["signature"])
        self.assertEqual(called["content"][2]["toolUse"]["name"], "Bash")
        answered = sent[1]["body"]["messages"][-1]["content"][0]["toolResult"]
        self.assertIn("claude-code-ran-this", json.dumps(answered["content"]))

    def usage(self):
        """What the key's owner has used today (`GET /usage` with the key)."""
        return http("GET", f"{BASE}/usage", key=self.key)["today"]


if __name__ == "__main__":
    unittest.main()
