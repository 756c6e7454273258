"""What the client suites share (tests/openai, tests/codex, tests/anthropic, tests/claude-code): plain JSON requests
to a local run, a new API key of its one user, the Converse requests its local Bedrock server received (and the last
one's body), the files sent inline, and a CLI's test case in a home and working directory of its own.

A suite's script imports it with its own folder's parent on `sys.path`; only the standard library is used.
"""

import base64
import json
import os
import re
import tempfile
import unittest
import urllib.request

# The model the OpenAI clients' suites ask for (OPENAI_TEST_MODEL): the local Bedrock server's echo model by default.
OPENAI_MODEL = os.environ.get("OPENAI_TEST_MODEL", "local.echo-v1:0")

# A 1×1 PNG and a one-page PDF, sent inline as the clients send files.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
)


def run_urls(prefix, default_port):
    """The local run's base URL (`{prefix}_TEST_BASE_URL`, else 127.0.0.1:`default_port`) and its local Bedrock
    server's (`{prefix}_TEST_BEDROCK_URL`, else the run's port + 100)."""
    base = os.environ.get(f"{prefix}_TEST_BASE_URL", f"http://127.0.0.1:{default_port}").rstrip("/")
    bedrock = os.environ.get(
        f"{prefix}_TEST_BEDROCK_URL",
        re.sub(r":(\d+)$", lambda m: f":{int(m.group(1)) + 100}", base),
    ).rstrip("/")
    return base, bedrock


def http_json(method, url, body=None, key=None, timeout=60):
    """The JSON answer of one request (None for an empty body), bearing `key` when given; an error status raises."""
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        url, method=method, data=None if body is None else json.dumps(body).encode(), headers=headers,
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def create_key(base, name):
    """A new API key of the run's one user (`POST /api-keys`, no Authorization: the local user): its secret."""
    return http_json("POST", f"{base}/api-keys", {"name": name})["key"]


def model_requests(bedrock):
    """The Converse requests the local Bedrock server at `bedrock` has received, oldest first."""
    return [r for r in http_json("GET", f"{bedrock}/__local/requests")
            if r["operation"] in ("converse", "converse-stream")]


def last_model_request(bedrock):
    """The body of the last Converse request the local Bedrock server at `bedrock` received (there must be one)."""
    requests = model_requests(bedrock)
    assert requests, "the local Bedrock server received no Converse request"
    return requests[-1]["body"]


def string_parameters(name):
    """A tool's JSON schema of one required string, `name`."""
    return {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}


class CliTestCase(unittest.TestCase):
    """A CLI's tests: the CLI at `CLI` (skipped when it is not installed), a temporary home and working directory
    (`home`, `work`, named after `PREFIX`) and a new key named `KEY_NAME` of the run at `BASE` (`key`)."""

    CLI = PREFIX = KEY_NAME = BASE = MISSING = None

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(cls.CLI):
            raise unittest.SkipTest(cls.MISSING)
        cls.home = tempfile.TemporaryDirectory(prefix=f"{cls.PREFIX}-home-")
        cls.work = tempfile.TemporaryDirectory(prefix=f"{cls.PREFIX}-work-")
        cls.key = create_key(cls.BASE, cls.KEY_NAME)

    @classmethod
    def tearDownClass(cls):
        cls.home.cleanup()
        cls.work.cleanup()
