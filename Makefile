# The project's two commands (see README.md): `make run` and `make test`.
# Every tool they need is installed by `make tools` into .tools/ and tests/js/node_modules/ (ignored by git).

VENV      := .tools/venv
TOOLS     := $(VENV)/.installed
JS_TOOLS  := tests/js/node_modules/.installed
CODEX_TOOLS := tests/codex/node_modules/.installed
CLAUDE_CODE_TOOLS := tests/claude-code/node_modules/.installed
AI_SDK_TOOLS := tests/ai-sdk/node_modules/.installed
LANGCHAIN_JS_TOOLS := tests/langchain-js/node_modules/.installed
CLIENTS_VENV := .tools/clients-venv
CLIENTS_TOOLS := $(CLIENTS_VENV)/.installed
# cl100k_base's table where tiktoken looks for it (TIKTOKEN_CACHE_DIR, a file named by the SHA-1 of its address).
TIKTOKEN_TABLE := .tools/tiktoken/9b5ad71b2ce5302211f9c61530b329a4922fc6a4
BROWSER_TOOLS := tests/browser/node_modules/.installed
# cargo-bloat and inferno for `make bloat` and `make flamegraph` only, built from crates.io into .tools/cargo.
CARGO_TOOLS := .tools/cargo/bin/cargo-bloat .tools/cargo/bin/inferno-flamegraph
PYTHON    ?= python3

# SAM CLI: no usage reports.
export SAM_CLI_TELEMETRY := 0

.PHONY: run test tools lint unit suites clean-tools bench bloat flamegraph

## run: the whole backend on http://127.0.0.1:9000 (local Bedrock and DynamoDB), until Ctrl-C.
run: tools
	cargo run --quiet -p local-run

## test: every test, in sections: lint, unit (with the integration tests against moto and the local Bedrock
## server), then invoke, conformance, schemathesis, browser and retrieval against local runs (tests/suites.py).
test: tools
	@echo "==== lint: rustfmt, clippy, cfn-lint 1.51, sam validate --lint, the template's URL permissions and sign-up, the docs against the code, no module circles ===="
	@$(MAKE) --no-print-directory lint
	@echo "==== unit: the workspace's unit and integration tests ===="
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory suites

# `make test` builds the workspace whole, once: no incremental caches (over 3 GB that only an edit loop uses), so
# that it fits the disk a CI machine has (see docs/development-and-testing.md, "The two commands").
test lint unit suites: export CARGO_INCREMENTAL = 0

lint: tools
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/cfn-lint template.yaml
	$(VENV)/bin/sam validate --lint --template template.yaml
	$(VENV)/bin/python tests/template_permissions.py
	$(VENV)/bin/python tests/sign_up_check.py
	bash -n deploy/create.sh && bash -n deploy/remove.sh && $(VENV)/bin/shellcheck deploy/*.sh
	$(PYTHON) tests/docs_config.py && $(PYTHON) tests/docs_links.py && $(PYTHON) tests/docs_routes.py
	$(PYTHON) tools/module_circles.py --through-reexports

# The local-run crate's tests are the suites' own: they run there, against the running backend.
# The executables of these tests (about 3 GB) are removed once they have passed: the suites build their own.
unit: tools
	cargo test --workspace --all-targets --exclude local-run
	$(PYTHON) tools/drop_test_executables.py --workspace --all-targets --exclude local-run

suites: tools
	$(PYTHON) tests/suites.py

## bench: the release functions measured, printing tables (tests/bench, see docs/benchmarks.md; bench/RESULTS.md
## holds a run's output): bootstrap sizes (arm64 too when its Rust target is installed), init, CPU per request, peak
## RSS, streamed lines' relay, added latency over a direct model call, DynamoDB calls and bytes per turn.
## BENCH_BEFORE=REV (`make bench BENCH_BEFORE=4151838`): the "before" columns are that commit's functions, built
## first (in a worktree under target/, sharing this target folder's dependencies) and kept in target/bench-before,
## instead of this build's under the bench-only switches.
bench: $(TOOLS)
	@if [ -n "$(BENCH_BEFORE)" ]; then \
		git worktree remove --force target/bench-before-src 2>/dev/null; git worktree prune; \
		git worktree add --quiet --detach target/bench-before-src "$(BENCH_BEFORE)" || exit 1; \
		target_dir="$${CARGO_TARGET_DIR:-$(CURDIR)/target}"; \
		(cd target/bench-before-src && CARGO_TARGET_DIR="$$target_dir" cargo build --release --quiet \
			-p chat -p chat-stream -p history) || exit 1; \
		mkdir -p target/bench-before && for f in chat chat-stream history; do \
			cp "$$target_dir/release/$$f" target/bench-before/ || exit 1; done; \
		git worktree remove --force target/bench-before-src; \
	fi
	cargo build --release --quiet -p chat -p chat-stream -p history
	@if rustup target list --installed 2>/dev/null | grep -q aarch64-unknown-linux-gnu; then \
		PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda build --release --arm64 --lambda-dir target/bench-lambda/arm64 \
			-p chat -p chat-stream -p history; \
	else \
		echo "bench: the Rust target aarch64-unknown-linux-gnu is not installed: no arm64 sizes (rustup target add it)"; \
	fi
	cargo build --release --quiet -p bench
	$(if $(BENCH_BEFORE),BENCH_BEFORE_DIR="$(CURDIR)/target/bench-before" BENCH_BEFORE_NAME="$(BENCH_BEFORE)") \
		cargo run --release --quiet -p bench

## bloat: where each function's bytes are, by crate (cargo-bloat on the `profiling` build: the release build with
## its symbols, and frame pointers as `make flamegraph` builds it, so that one build serves both), written to
## bench/bloat-<function>.txt.
PROFILING_FLAGS := -C force-frame-pointers=yes
bloat: $(CARGO_TOOLS)
	@for f in chat chat-stream history; do \
		RUSTFLAGS="$(PROFILING_FLAGS)" PATH="$(CURDIR)/.tools/cargo/bin:$$PATH" cargo bloat --profile profiling -p $$f --bin $$f --crates -n 40 \
			> bench/bloat-$$f.txt || exit 1; \
		echo "bench/bloat-$$f.txt"; head -n 4 bench/bloat-$$f.txt; \
	done

## flamegraph: where the functions' CPU goes under `make bench` (300 requests of each kind): `perf record` of the whole
## machine (999 Hz, frame pointers) over a bench run of the `profiling` build (release with symbols), each function's
## own samples (by its process name; the bench's "before" variant runs on tokio's worker threads, which are left
## out) folded by inferno into bench/flamegraph-<function>.svg.
flamegraph: $(TOOLS) $(CARGO_TOOLS)
	RUSTFLAGS="$(PROFILING_FLAGS)" cargo build --profile profiling --quiet -p chat -p chat-stream -p history
	cargo build --release --quiet -p bench
	mkdir -p target/perf
	BENCH_FUNCTIONS_DIR=target/profiling BENCH_REQUESTS=300 perf record --quiet -a -g -e cpu-clock -F 999 \
		-o target/perf/bench.data -- target/release/bench > /dev/null
	@for f in chat chat-stream history; do \
		perf script --comms $$f -i target/perf/bench.data 2>/dev/null | .tools/cargo/bin/inferno-collapse-perf \
			| .tools/cargo/bin/inferno-flamegraph --title "$$f: CPU under make bench" > bench/flamegraph-$$f.svg \
			|| exit 1; \
		echo "bench/flamegraph-$$f.svg"; \
	done

$(CARGO_TOOLS):
	cargo install --quiet --locked --root .tools/cargo cargo-bloat --version 0.12.1
	cargo install --quiet --locked --root .tools/cargo inferno --version 0.12.8

## tools: moto, cargo-lambda (with zig), cfn-lint, the openai and anthropic SDKs (tools/requirements.txt), the official JavaScript client of
## the protocol (tests/js/package-lock.json), the Codex CLI (tests/codex/package-lock.json), Claude Code
## (tests/claude-code/package-lock.json), the AI SDK (tests/ai-sdk/package-lock.json), LangChain.js
## (tests/langchain-js/package-lock.json), LangChain Python and LiteLLM (tools/clients-requirements.txt), and headless
## Chromium with puppeteer-core for the browser test (tests/browser/package-lock.json; Chromium unpacks itself into
## tests/browser/.chromium on first use).
tools: $(TOOLS) $(JS_TOOLS) $(BROWSER_TOOLS) $(CODEX_TOOLS) $(CLAUDE_CODE_TOOLS) $(AI_SDK_TOOLS) $(LANGCHAIN_JS_TOOLS) \
	$(CLIENTS_TOOLS) $(TIKTOKEN_TABLE)

$(TOOLS): tools/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

$(JS_TOOLS): tests/js/package-lock.json
	npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
	touch $@

## The OpenAI Codex CLI (tests/codex/package-lock.json), which tests/codex/test_codex.py runs against /v1/responses.
$(CODEX_TOOLS): tests/codex/package-lock.json
	npm ci --prefix tests/codex --no-audit --no-fund --loglevel=error
	touch $@

## Claude Code (tests/claude-code/package-lock.json), which tests/claude-code/test_claude_code.py runs against
## /v1/messages. Its npm package installs the native binary of this platform's optional dependency.
$(CLAUDE_CODE_TOOLS): tests/claude-code/package-lock.json
	npm ci --prefix tests/claude-code --no-audit --no-fund --loglevel=error
	touch $@

## The AI SDK with its OpenAI provider (tests/ai-sdk/package-lock.json), whose openai(id) calls /v1/responses.
$(AI_SDK_TOOLS): tests/ai-sdk/package-lock.json
	npm ci --prefix tests/ai-sdk --no-audit --no-fund --loglevel=error
	touch $@

## LangChain.js's ChatOpenAI (tests/langchain-js/package-lock.json), run by the openai suite.
$(LANGCHAIN_JS_TOOLS): tests/langchain-js/package-lock.json
	npm ci --prefix tests/langchain-js --no-audit --no-fund --loglevel=error
	touch $@

## LangChain Python and LiteLLM (tools/clients-requirements.txt) in a venv of their own, run by the openai suite.
$(CLIENTS_TOOLS): tools/clients-requirements.txt
	$(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/clients-requirements.txt
	touch $@

## LangChain's OpenAIEmbeddings counts tokens with tiktoken, which downloads cl100k_base's table on first use: the
## table is taken from the tokenizer crate the backend decodes token ids with (tiktoken-rs, in Cargo.lock) instead.
$(TIKTOKEN_TABLE): Cargo.lock
	cargo fetch --quiet
	mkdir -p $(dir $@)
	cp "$$(cargo metadata --format-version 1 --offline | $(PYTHON) -c 'import json, os, sys; \
		print(next(os.path.dirname(p["manifest_path"]) for p in json.load(sys.stdin)["packages"] \
		if p["name"] == "tiktoken-rs"))')/assets/cl100k_base.tiktoken" $@

$(BROWSER_TOOLS): tests/browser/package-lock.json
	npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error
	touch $@

clean-tools:
	rm -rf .tools tests/js/node_modules tests/codex/node_modules tests/claude-code/node_modules tests/ai-sdk/node_modules tests/langchain-js/node_modules tests/browser/node_modules tests/browser/.chromium
