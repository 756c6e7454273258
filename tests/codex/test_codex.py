#!/usr/bin/env python3
"""The OpenAI Codex CLI (`codex exec`, the npm package tests/codex/package.json pins, installed by `make tools`)
against the local run's Responses API, configured as docs/responses-api.md says (a custom model provider, its key's
environment variable, `wire_api = "responses"`, WebSockets off): it answers a prompt, and in a second run it runs the
shell command the local model asks for (`[[tool:exec_command {…}]]`) and finishes with its output.

Run by tests/suites.py (its "openai" suite) against the same local run as tests/openai/ (OPENAI_TEST_BASE_URL,
default http://127.0.0.1:9090; OPENAI_TEST_MODEL):

    python3 tests/codex/test_codex.py -v     # against a run already started by hand

Only the standard library is used. Codex's home and working directory are temporary directories of their own.
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testkit  # noqa: E402  (tests/testkit.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODEX = os.path.join(ROOT, "tests/codex/node_modules/.bin/codex")
BASE, _ = testkit.run_urls("OPENAI", 9090)
MODEL = testkit.OPENAI_MODEL
TIMEOUT = 180

CONFIG = """model = "{model}"
model_provider = "chat-backend"

[model_providers.chat-backend]
name = "Chat backend"
base_url = "{base}/v1"
env_key = "CHAT_BACKEND_API_KEY"
wire_api = "responses"
supports_websockets = false
"""


class Codex(testkit.CliTestCase):
    CLI, PREFIX, KEY_NAME, BASE = CODEX, "codex", "codex", BASE
    MISSING = "the Codex CLI is not installed: run `make tools`"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with open(os.path.join(cls.home.name, "config.toml"), "w") as f:
            f.write(CONFIG.format(model=MODEL, base=BASE))

    def codex_exec(self, prompt):
        """`codex exec PROMPT`'s standard output (its last message), failing on a non-zero exit."""
        done = subprocess.run(
            [CODEX, "exec", "--skip-git-repo-check", prompt],
            cwd=self.work.name, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT,
            env={**os.environ, "CODEX_HOME": self.home.name, "CHAT_BACKEND_API_KEY": self.key},
        )
        self.assertEqual(done.returncode, 0, f"{done.stdout}\n{done.stderr}")
        return done.stdout, done.stderr

    def test_it_answers_a_prompt(self):
        out, _ = self.codex_exec("Say hello")
        # The local model echoes the last user turn: Codex's environment context, then the prompt.
        self.assertTrue(out.strip().startswith("Echo:"), out)
        self.assertTrue(out.strip().endswith("Say hello"), out)

    def test_it_runs_the_shell_command_the_model_asks_for_and_finishes_with_its_output(self):
        out, err = self.codex_exec('[[tool:exec_command {"cmd":"echo codex-ran-this"}]] Run it')
        # Codex ran the command (its log on standard error), and the model's last answer holds its output.
        self.assertIn("echo codex-ran-this", err)
        self.assertIn("exec_command returned", out)
        self.assertIn("codex-ran-this", out)


if __name__ == "__main__":
    unittest.main()
