# The project's two commands (see README.md): `make run` and `make test`.
# Every tool they need is installed by `make tools` into .tools/ and tests/js/node_modules/ (ignored by git).

VENV      := .tools/venv
TOOLS     := $(VENV)/.installed
JS_TOOLS  := tests/js/node_modules/.installed
PYTHON    ?= python3

.PHONY: run test tools lint clean-tools

## run: the whole backend on http://127.0.0.1:9000 (local Bedrock and DynamoDB), until Ctrl-C.
run: tools
	cargo run --quiet -p local-run

## test: formatting, lints, template lint, unit, integration and end-to-end tests.
test: tools lint
	cargo test --workspace --all-targets

lint: tools
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/cfn-lint template.yaml

## tools: moto, cargo-lambda (with zig) and cfn-lint (tools/requirements.txt), and the official JavaScript
## client of the protocol (tests/js/package-lock.json).
tools: $(TOOLS) $(JS_TOOLS)

$(TOOLS): tools/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

$(JS_TOOLS): tests/js/package-lock.json
	npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
	touch $@

clean-tools:
	rm -rf .tools tests/js/node_modules
