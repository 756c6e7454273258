#!/usr/bin/env python3
"""The suites of `make test` that need the running backend: invoke, conformance and schemathesis.

invoke        every file of events/ through `cargo lambda invoke --data-file` against a local run whose functions
              run under `cargo lambda watch` as Lambda runs them (`local-run --cargo-lambda-watch`) and know IAM
              callers as a deployment with AuthMode iam does (tests/local-run/tests/invoke.rs starts it);
schemathesis  openapi.yaml against the local run: generated requests for every operation, no 5xx, every answer
              valid against the document (tests/schemathesis.sh);
conformance   the official @microsoft/ai-chat-protocol client, raw HTTP of both dialects and both spellings, and
              the Chat UI's calls with their CORS preflights (tests/js/), then the Rust end-to-end checks
              (tests/local-run/tests/e2e.rs: streaming as the model produces, one SSE event per read, every one of
              a thousand requests for a long history list answered);
browser       a page making ChatUI's calls exactly as its source does, at its documented and its current revision,
              driven in headless Chromium against a local run with CHAT_UI_REPLY=spec and =messages
              (tests/browser/chatui.test.mjs);
page          the backend's own page at / in headless Chromium (tests/browser/page.test.mjs): a streamed answer with a
              [Parental_Leave.md] citation that opens its passage, history rename and delete, multi-agent, usage;
              then its app shell after some use (tests/browser/page-shell.test.mjs: 100 chats, 20 API keys and 50
              documents made first; at 1366×860 and 390×844 the window never scrolls, the sections are tabs, the chats
              page as they scroll, the phone's drawer, the question and the streaming answer in view; its screenshots
              written to docs/screenshots); against a local run of its own on port 9050 with retrieval on;
retrieval     answers grounded in the sample collection (samples/knowledge-base) through the local knowledge base:
              data_points, citations and search thoughts in every dialect, the retrieval overrides, the knowledge
              base's faults, the Chat UI's Metadata.Citations (tests/js/retrieval.test.mjs with CHAT_RETRIEVAL=on),
              against a local run of its own on port 9040 with retrieval on;
page (JWT)    the page at / in JWT mode signs in against a local OpenID Connect issuer (tests/browser/oidc-issuer.mjs,
              port 9081; code + PKCE), chats and renews its token (refresh token, or prompt=none without one), signs
              out (revocation, end of the issuer's session; Cognito's /logout), sends a question typed after its
              sign-in ended once signed in again, against a local run of its own on port 9080;
openai        the official `openai` Python SDK (tools/requirements.txt) against a local run of its own on port 9090
              (tests/openai/test_openai.py, test_responses.py), the Agents SDK (test_agents.py), the Codex CLI
              `codex exec` (tests/codex/test_codex.py), the AI SDK's openai(id) (tests/ai-sdk/), LangChain.js's
              ChatOpenAI (tests/langchain-js/), LangChain Python's OpenAIEmbeddings with its token ids and
              with_structured_output, and LiteLLM (tests/openai/test_python_clients.py): /v1/models,
              buffered and streamed completions and responses, kept responses, client tools, files,
              reasoning across a tool call, structured output, embeddings, each refusal as the SDK's typed error,
              API keys; with a second run on port 9095 limited to two requests a minute for the 429;
anthropic     Anthropic's official Python SDK (tools/requirements.txt) against a local run of its own on port 9085
              (tests/anthropic/test_anthropic.py): /v1/messages whole and streamed, a tool loop with thinking whose
              signed block the local Bedrock server checks, parallel tool use, an image and a PDF, cache control
              (cache tokens in the usage), count_tokens, /v1/models, each refusal as the SDK's typed exception; and Claude Code's `claude -p`
              (tests/claude-code/test_claude_code.py) answering a prompt and running the Bash command the local model
              asks for;
documents     uploads through the local knowledge base in JWT mode (tests/documents/test_documents.py, tokens signed
              with a key it writes, read by the run from JWKS_FILE): alice's PDF and Markdown go pending → indexed and
              her answers cite them, while bob's show neither name nor word of them (buffered, streamed, the
              search_documents tool, multi-agent, /v1/chat/completions with OPENAI_RETRIEVAL=on); bob's GET/DELETE of
              hers is a 404; an administrator's document for the group leadership is found by its members only;
              unparseable files end failed with a reason; a delete removes a document from answers; it prints the
              seconds from upload to indexed; alice's kept response (/v1/responses) is a NotFoundError to bob through
              OpenAI's SDK. Against a local run of its own on port 9045 with retrieval on;
docs          every shell example of README.md and docs/ that talks to the local run (tests/docs_examples.py), against
              a local run of its own on port 9070 with make run's defaults (retrieval on, the local MCP server).

Conformance and schemathesis share one local run (what `make run` starts) on LOCAL_PORT (9000), started here
and stopped when this script ends. It and the browser runs have retrieval off (`KNOWLEDGE_BASE_ID=` empty), so their
answers are the local model's bare echo; `make run` itself has retrieval on. Every suite runs even when an earlier one failed; the exit status is 1 if
any failed. Only the standard library is used: this runs before anything is known to work.
"""

import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = int(os.environ.get("LOCAL_PORT", "9000"))
BASE = f"http://127.0.0.1:{PORT}"


def section(title):
    print(f"\n==== {title} " + "=" * max(0, 100 - len(title)), flush=True)


def run(command, env=None, cwd=ROOT):
    print("$ " + " ".join(command), flush=True)
    return subprocess.call(command, cwd=cwd, env={**os.environ, **(env or {})}) == 0


class LocalRun:
    """`make run`'s local run on `port` (moto, the local Bedrock server and, with retrieval, the local knowledge
    base on port + 200, + 100 and + 300), with `env` added (a value of None removes the variable), stopped by
    closing its standard input. Retrieval is off (`KNOWLEDGE_BASE_ID` empty) unless `retrieval` is true: then the
    local run starts its local knowledge base over samples/knowledge-base and the functions search it."""

    def __init__(self, port=PORT, name="suites", env=None, retrieval=False):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.kb_base = f"http://127.0.0.1:{port + 300}"
        self.name = name
        # By default the local model answers at once (no pacing): these suites send thousands of requests.
        # KNOWLEDGE_BASE_ID unset makes the local run start its local knowledge base; empty turns retrieval off.
        self.env = {
            "LOCAL_MODEL_PACE_MS": "0",
            "KNOWLEDGE_BASE_ID": None if retrieval else "",
            **(env or {}),
        }

    def __enter__(self):
        # The log lives outside the workspace, as nothing a test writes belongs in the work tree.
        self.log_path = os.path.join(tempfile.gettempdir(), f"chat-backend-{self.name}-local-run.log")
        log = open(self.log_path, "w")
        env = {
            **os.environ,
            "LOCAL_PORT": str(self.port),
            "LOCAL_BEDROCK_PORT": str(self.port + 100),
            "LOCAL_DYNAMODB_PORT": str(self.port + 200),
            "LOCAL_KB_PORT": str(self.port + 300),
            **self.env,
        }
        env = {k: v for k, v in env.items() if v is not None}
        self.process = subprocess.Popen(
            ["cargo", "run", "--quiet", "-p", "local-run", "--", "--exit-with-stdin"],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
        )
        started = time.monotonic()
        while True:
            with open(self.log_path) as f:
                text = f.read()
            if f"local-run: ready on {self.base}" in text:
                print(f"local run ready on {self.base} after {time.monotonic() - started:.0f} s (log: {self.log_path})")
                return self
            if self.process.poll() is not None or time.monotonic() - started > 900:
                raise RuntimeError(f"the local run did not come up:\n{text}")
            time.sleep(0.5)

    def __exit__(self, *exc):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def main():
    results = []

    def suite(name, steps):
        started = time.monotonic()
        ok = all([step() for step in steps])  # every step runs, even after a failure
        results.append((name, ok, time.monotonic() - started))

    # Build first, so that no suite's time is compile time and cargo lambda watch (the invoke suite's) finds the
    # functions built.
    section("build: the local run and its end-to-end tests")
    # The functions apart from the local run: cargo unifies features over the packages of one build, and
    # cargo lambda watch builds each function on its own, which then finds it built.
    if not run(["cargo", "test", "--quiet", "-p", "local-run", "--no-run"]) or not run(
        ["cargo", "build", "--quiet", "-p", "local-run"]
    ) or not all(run(["cargo", "build", "--quiet", "-p", function]) for function in ["chat", "chat-stream", "history"]):
        return 1

    # Each a cargo test of the local-run package, against local runs of its own.
    local_run_tests = [
        ("invoke", "invoke",
         "invoke: every events/ file through cargo lambda invoke --data-file (AUTH_MODE=iam, JSON logs)"),
        # Operations: a local run of its own (port 9050, started by the test) with per-user limits, JWT callers and
        # JSON logs at TRACE: quotas, the rate limit, GET /usage, the EMF records and the logs' silence about
        # conversations.
        ("operations", "operations",
         "operations: quotas, rate limit, GET /usage, EMF records, TRACE logs (tests/local-run/tests/operations.rs)"),
        # Upload quotas: a local run of its own (port 9777) with documents on and QUOTA_UPLOADED_DOCUMENTS_PER_DAY=2,
        # as the composition root wires them from the environment.
        ("upload-quota", "upload_quota",
         "upload quotas: the third document of the day is a 429, GET /usage (tests/local-run/tests/upload_quota.rs)"),
        # Tools: a local run of its own (port 9060) searching the local knowledge base as the model's tool, a local MCP
        # server started by the test and one that is down, the round and time bounds.
        ("tools", "tools",
         "tools: search_documents, MCP tools, thoughts as they happen, bounds (tests/local-run/tests/tools.rs)"),
    ]
    for name, test, title in local_run_tests:
        section(title)
        suite(name, [lambda test=test: run(["cargo", "test", "--quiet", "-p", "local-run", "--test", test,
                                            "--", "--nocapture"])])

    try:
        # An embedding model allowed, so that schemathesis's /v1/embeddings examples reach the local Bedrock server.
        with LocalRun(env={"EMBEDDING_MODELS": "amazon.titan-embed-text-v2:0"}):
            # Conformance first: schemathesis leaves hundreds of chats behind, which would make the history lists
            # the Chat UI's calls read long and slow (moto reads a long list slowly).
            section(f"conformance: official JS client, raw HTTP, Chat UI calls against {BASE}")
            suite("conformance", [
                lambda: run(["node", "--test"], env={"CHAT_BASE_URL": BASE}, cwd=os.path.join(ROOT, "tests/js")),
                lambda: run(["cargo", "test", "--quiet", "-p", "local-run", "--test", "e2e", "--", "--nocapture"],
                            env={"LOCAL_RUN_URL": BASE}),
            ])

            section(f"schemathesis: openapi.yaml against {BASE}")
            suite("schemathesis", [lambda: run(["bash", "tests/schemathesis.sh", BASE])])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("local run", False, 0.0))

    # The browser test drives a page that calls the backend exactly as the ChatUI front end does, in headless
    # Chromium, at both of its revisions: each against a local run with the setting it needs, and the local model
    # pacing its words as `make run` does (the documented revision's stream reader needs events apart).
    section("browser: ChatUI's calls from a page in headless Chromium, both revisions")
    screenshots = os.path.join(ROOT, "tests/browser/screenshots")
    for revision, reply, port in [("documented", "spec", 9020), ("current", "messages", 9030)]:
        try:
            with LocalRun(port, f"browser-{revision}", {"CHAT_UI_REPLY": reply, "LOCAL_MODEL_PACE_MS": "30"}) as backend:
                suite(f"browser {revision}", [lambda: run(
                    ["node", "--test", "tests/browser/chatui.test.mjs"],
                    env={"CHAT_BASE_URL": backend.base, "CHATUI_REVISION": revision, "SCREENSHOT_DIR": screenshots},
                )])
        except RuntimeError as e:
            print(e, file=sys.stderr)
            results.append((f"browser {revision}", False, 0.0))

    # Retrieval: a local run of its own with the local knowledge base (LOCALKB001 over samples/knowledge-base) on
    # port + 300. The local user is alice, whom the sample collection's access lists name, so the oid security
    # filter has a document to find; the knowledge base's timeout is short so the timeout test is quick.
    # schemathesis is not run again here: the retrieval overrides are in openapi.yaml, so the run above already
    # generates them (valid and invalid) against a backend without a knowledge base.
    section("retrieval: grounded answers through the local knowledge base (tests/js/retrieval.test.mjs)")
    kb_timeout_ms = "5000"
    try:
        with LocalRun(9040, "retrieval", {"LOCAL_USER": "alice", "KNOWLEDGE_BASE_TIMEOUT_MS": kb_timeout_ms},
                      retrieval=True) as backend:
            suite("retrieval", [lambda: run(
                ["node", "--test", "retrieval.test.mjs"],
                env={"CHAT_BASE_URL": backend.base, "CHAT_RETRIEVAL": "on", "CHAT_KB_URL": backend.kb_base,
                     "CHAT_LOCAL_USER": "alice", "CHAT_KB_TIMEOUT_MS": kb_timeout_ms},
                cwd=os.path.join(ROOT, "tests/js"),
            )])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("retrieval", False, 0.0))

    # The backend's own page (web/index.html at /) as a person uses it, in headless Chromium: the question needs the
    # local knowledge base (retrieval on) for its cited answer, and the local model paces its words so that the answer
    # is seen to stream.
    section("page: the backend's own page at / in headless Chromium (tests/browser/page.test.mjs)")
    try:
        with LocalRun(9050, "page", {"LOCAL_MODEL_PACE_MS": "30"}, retrieval=True) as backend:
            suite("page", [
                lambda: run(["node", "--test", "tests/browser/page.test.mjs"], env={"CHAT_BASE_URL": backend.base}),
                # The shell after some use (100 chats, 20 keys, 50 documents made first), after page.test.mjs (which
                # makes a key of its own: 20 at most): its screenshots are the docs' (docs/screenshots/page-shell-*).
                lambda: run(["node", "--test", "tests/browser/page-shell.test.mjs"],
                            env={"CHAT_BASE_URL": backend.base,
                                 "PAGE_SCREENSHOT_DIR": os.path.join(ROOT, "docs", "screenshots")}),
            ])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("page", False, 0.0))

    # Sign-in: the page in JWT mode against the local OpenID Connect issuer (tests/browser/oidc-issuer.mjs), which each
    # test file starts in turn on port 9081 with one signing key (the backend keeps the keys it fetched): first the
    # issuer's own checks and the backend's acceptance of its tokens, then the page at / signs in as alice (code +
    # PKCE), chats, renews its short-lived token before it expires (silently with prompt=none when the issuer gives no
    # refresh token), signs out at the issuer, and keeps a question sent after its sign-in ended.
    section("page (JWT): the page signs in against a local OpenID Connect issuer and chats (tests/browser/)")
    issuer = "http://127.0.0.1:9081"
    jwt = {"AUTH_MODE": "jwt", "JWT_ISSUER": issuer, "JWT_AUDIENCE": "chat-page", "JWKS_URL": f"{issuer}/jwks",
           "PAGE_OIDC_CLIENT_ID": "chat-page", "LOCAL_MODEL_PACE_MS": "30"}
    try:
        with tempfile.TemporaryDirectory() as keys, LocalRun(9080, "page-jwt", jwt) as backend:
            env = {"CHAT_AUTH": "jwt", "CHAT_BASE_URL": backend.base, "OIDC_PORT": "9081",
                   "OIDC_CLIENT_ID": "chat-page", "OIDC_KEY_FILE": os.path.join(keys, "issuer.pem")}
            suite("page (JWT)", [
                lambda: run(["node", "--test", "tests/browser/oidc-issuer.test.mjs"], env=env),
                lambda: run(["node", "--test", "tests/browser/page-jwt.test.mjs"], env=env),
            ])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("page (JWT)", False, 0.0))

    # OpenAI's SDK: a local run of its own (port 9090) allowing a second model (a cross-Region profile without
    # structured output) and two embedding models, with a short key cache so that a revoked key stops at once, and
    # no server-side grounding or MCP tools (the OpenAI routes' defaults); and a run limited to two requests a
    # minute (port 9095) for the 429 and a key's turns counted against its owner's limit. The test runs with the
    # venv's Python, which has the SDK.
    section("openai: the official openai Python SDK against /v1 (tests/openai/test_openai.py)")
    second_model, embedding_model, cohere_model = ("us.amazon.nova-pro-v1:0", "amazon.titan-embed-text-v2:0",
                                                   "cohere.embed-english-v3")
    openai_env = {"ALLOWED_MODELS": second_model, "EMBEDDING_MODELS": f"{embedding_model},{cohere_model}",
                  "API_KEY_CACHE_SECONDS": "1", "MCP_SERVERS": "", "LOCAL_MODEL_PACE_MS": "0"}
    try:
        with LocalRun(9090, "openai", openai_env) as backend, \
                LocalRun(9095, "openai-limited", {**openai_env, "RATE_LIMIT_PER_MINUTE": "2"}) as limited:
            suite("openai", [lambda: run(
                [os.path.join(ROOT, ".tools/venv/bin/python"), "tests/openai/test_openai.py", "-v"],
                env={"OPENAI_TEST_BASE_URL": backend.base, "OPENAI_TEST_BEDROCK_URL": "http://127.0.0.1:9190",
                     "OPENAI_TEST_LIMITED_BASE_URL": limited.base, "OPENAI_TEST_MODEL": "local.echo-v1:0",
                     "OPENAI_TEST_SECOND_MODEL": second_model, "OPENAI_TEST_EMBEDDING_MODEL": embedding_model,
                     "OPENAI_TEST_COHERE_MODEL": cohere_model, "OPENAI_TEST_KEY_CACHE_SECONDS": "1"},
            ), lambda: run(
                # The Responses API (/v1/responses) through the same SDK and run.
                [os.path.join(ROOT, ".tools/venv/bin/python"), "tests/openai/test_responses.py", "-v"],
                env={"OPENAI_TEST_BASE_URL": backend.base, "OPENAI_TEST_MODEL": "local.echo-v1:0"},
            ), lambda: run(
                # The OpenAI Agents SDK's default model class (the Responses API) through the same run.
                [os.path.join(ROOT, ".tools/venv/bin/python"), "tests/openai/test_agents.py", "-v"],
                env={"OPENAI_TEST_BASE_URL": backend.base, "OPENAI_TEST_MODEL": "local.echo-v1:0"},
            ), lambda: run(
                # The Codex CLI (tests/codex/, installed by make tools) through the same run.
                [os.path.join(ROOT, ".tools/venv/bin/python"), "tests/codex/test_codex.py", "-v"],
                env={"OPENAI_TEST_BASE_URL": backend.base, "OPENAI_TEST_MODEL": "local.echo-v1:0"},
            ), lambda: run(
                # The AI SDK's openai(id) (tests/ai-sdk/, installed by make tools) through the same run.
                ["node", "--test"], cwd=os.path.join(ROOT, "tests/ai-sdk"),
                env={"OPENAI_TEST_BASE_URL": backend.base, "OPENAI_TEST_MODEL": "local.echo-v1:0"},
            ), lambda: run(
                # LangChain.js's ChatOpenAI (tests/langchain-js/, installed by make tools) through the same run.
                ["node", "--test"], cwd=os.path.join(ROOT, "tests/langchain-js"),
                env={"OPENAI_TEST_BASE_URL": backend.base, "OPENAI_TEST_MODEL": "local.echo-v1:0"},
            ), lambda: run(
                # LangChain Python and LiteLLM, in their own venv; tiktoken's table from .tools/tiktoken.
                [os.path.join(ROOT, ".tools/clients-venv/bin/python"), "tests/openai/test_python_clients.py", "-v"],
                env={"OPENAI_TEST_BASE_URL": backend.base, "OPENAI_TEST_MODEL": "local.echo-v1:0",
                     "OPENAI_TEST_EMBEDDING_MODEL": embedding_model,
                     "TIKTOKEN_CACHE_DIR": os.path.join(ROOT, ".tools/tiktoken")},
            )])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("openai", False, 0.0))

    # Anthropic's SDK and Claude Code: a local run of its own (port 9085) allowing a Claude that thinks within a
    # budget, which Anthropic's name claude-sonnet-4-5 maps to.
    section("anthropic: Anthropic's Python SDK and Claude Code against /v1/messages (tests/anthropic/, claude-code/)")
    # Claude Code's default model (claude-opus-5-5) is answered by that Claude too (ANTHROPIC_MODEL_NAMES).
    anthropic_env = {"ALLOWED_MODELS": "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "MCP_SERVERS": "",
                     "LOCAL_MODEL_PACE_MS": "0",
                     "ANTHROPIC_MODEL_NAMES": "claude-opus-5=global.anthropic.claude-sonnet-4-5-20250929-v1:0"}
    try:
        with LocalRun(9085, "anthropic", anthropic_env) as backend:
            suite("anthropic", [lambda: run(
                [os.path.join(ROOT, ".tools/venv/bin/python"), "tests/anthropic/test_anthropic.py", "-v"],
                env={"ANTHROPIC_TEST_BASE_URL": backend.base, "ANTHROPIC_TEST_BEDROCK_URL": "http://127.0.0.1:9185"},
            ), lambda: run(
                # Claude Code's `claude -p` (tests/claude-code/, installed by make tools) through the same run.
                [os.path.join(ROOT, ".tools/venv/bin/python"), "tests/claude-code/test_claude_code.py", "-v"],
                env={"ANTHROPIC_TEST_BASE_URL": backend.base, "ANTHROPIC_TEST_BEDROCK_URL": "http://127.0.0.1:9185"},
            )])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("anthropic", False, 0.0))

    # Documents: a local run of its own (port 9045) with retrieval on (the local knowledge base and its data source
    # in moto's S3) in JWT mode, so that alice, bob, an administrator and a member of leadership call one run; the
    # test writes the signing key and the JWKS file the run reads (JWKS_FILE) before the run starts, and runs with the
    # venv's Python, whose `cryptography` signs the tokens. No MCP servers: the model's one tool is search_documents.
    # The OpenAI-compatible route is grounded too (OPENAI_RETRIEVAL=on), as one more way to ask.
    section("documents: uploads, status, access in answers (tests/documents/test_documents.py)")
    venv_python = os.path.join(ROOT, ".tools/venv/bin/python")
    documents_test = "tests/documents/test_documents.py"
    documents_jwt = {"AUTH_MODE": "jwt", "JWT_ISSUER": "https://issuer.documents-suite.test",
                     "JWT_AUDIENCE": "chat-documents-suite", "DOCUMENT_ADMIN_GROUP": "doc-admins",
                     "MCP_SERVERS": "", "OPENAI_RETRIEVAL": "on"}
    try:
        with tempfile.TemporaryDirectory() as keys:
            if not run([venv_python, documents_test, "--write-keys", keys]):
                raise RuntimeError("the documents suite's keys could not be written")
            with LocalRun(9045, "documents", {**documents_jwt, "JWKS_FILE": os.path.join(keys, "jwks.json")},
                          retrieval=True) as backend:
                suite("documents", [lambda: run(
                    [venv_python, documents_test, "-v"],
                    env={"DOCS_TEST_BASE_URL": backend.base, "DOCS_TEST_KEY_FILE": os.path.join(keys, "key.pem"),
                         "DOCS_TEST_ISSUER": documents_jwt["JWT_ISSUER"],
                         "DOCS_TEST_AUDIENCE": documents_jwt["JWT_AUDIENCE"],
                         "DOCS_TEST_ADMIN_GROUP": documents_jwt["DOCUMENT_ADMIN_GROUP"],
                         "DOCS_TEST_OPENAI_RETRIEVAL": "on"},
                )])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("documents", False, 0.0))

    # Docs: every shell example of README.md and docs/ that talks to the local run, run against a local run of its
    # own (port 9070) with make run's defaults: retrieval on and the local MCP server (tests/docs_examples.py).
    section("docs: the shell examples of README.md and docs/ against a local run (tests/docs_examples.py)")
    try:
        with LocalRun(9070, "docs", {}, retrieval=True) as backend:
            suite("docs", [lambda: run([sys.executable, "tests/docs_examples.py", backend.base])])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        results.append(("docs", False, 0.0))

    section("summary")
    for name, ok, seconds in results:
        print(f"{name:<20} {'passed' if ok else 'FAILED'}  ({seconds:.0f} s)")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
