#!/usr/bin/env bash
# Checks a running backend against openapi.yaml with schemathesis (installed by `make tools`).
#
#   tests/schemathesis.sh [BASE_URL]      BASE_URL defaults to http://127.0.0.1:9000 (`make run`)
#
# Every operation gets generated requests (the document's examples, boundary values, then random valid and invalid
# bodies and parameters), and a stateful phase follows the document's links (create a chat, read, replace and
# delete it; read the history of a chat a turn just made). Each response must: not be a 5xx, have a documented
# status, content type and headers, and match its schema (JSON Lines and server-sent events are read item by
# item); invalid requests must be refused; methods the document does not list must be a 405 with `Allow`; a chat
# just created must be readable and a deleted one gone.
#
# Environment:
#   SCHEMATHESIS_MAX_EXAMPLES   cases per operation and phase (default 50)
#   SCHEMATHESIS_SEED           the seed (default 20241122, so that CI runs the same cases every time;
#                               `random` lets schemathesis pick one, and prints it to reproduce a failure)
#   SCHEMATHESIS_WORKERS        concurrent workers (default 1: two raced inside schemathesis's own generator)
#   SCHEMATHESIS_REPORTS        report formats, comma-separated (default junit; e.g. junit,ndjson,har)
#   SCHEMATHESIS_OUT            where reports go (default a new folder under ${TMPDIR:-/tmp}); nothing is written
#                               inside the work tree
#
# Exits non-zero when any check fails. The reports are kept when a run fails (or SCHEMATHESIS_OUT is set).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

base_url="${1:-http://127.0.0.1:9000}"
st=.tools/venv/bin/schemathesis
if [[ ! -x "$st" ]]; then
    echo "schemathesis.sh: $st is missing; run \`make tools\` first" >&2
    exit 2
fi

# A route that answers only POST: any answer at all (a 405) means the backend is up.
if ! .tools/venv/bin/python - "$base_url/chat" <<'PY'
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=120)
except urllib.error.HTTPError:
    pass  # any status will do
except Exception:
    sys.exit(1)
PY
then
    echo "schemathesis.sh: nothing answers at $base_url; start the backend first (\`make run\`)" >&2
    exit 2
fi

max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-50}"
seed="${SCHEMATHESIS_SEED:-20241122}"
workers="${SCHEMATHESIS_WORKERS:-1}"
reports="${SCHEMATHESIS_REPORTS:-junit}"
out="${SCHEMATHESIS_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/schemathesis.XXXXXX")}"
mkdir -p "$out"

# Hypothesis keeps nothing in the work tree either.
export HYPOTHESIS_STORAGE_DIRECTORY="$out/hypothesis"

# Schemathesis keeps its crash cache in ./.schemathesis unless told otherwise; keep it (and the rest) in "$out". Let
# the chat id of `sessionState` show in reproductions (it names a chat, it is no credential).
cat > "$out/schemathesis.toml" <<TOML
[cache]
directory = "$out/cache"

[output.sanitization]
sensitive-markers = ["token", "key", "secret", "password", "auth", "passwd", "credential"]

# schemathesis's defaults, and 413: an invalid body (a message over its length limit) can also be over the body limit.
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
TOML

# Hooks, loaded by schemathesis from SCHEMATHESIS_HOOKS. JSON Lines: schemathesis reads JSON and server-sent events
# by itself; this teaches it JSON Lines, so that the `application/jsonl` and `application/json-lines` answers are
# checked against their schemas (the array of their lines) instead of being skipped. A body whose last line has no
# `\n`, or with a line that is not JSON, fails. Every generated case is sent as it is: non-UTF-8 bodies, header
# values that are not ASCII, long lists and long multi-agent inputs all reach the functions' own code.
cat > "$out/hooks.py" <<'PY'
import json

import schemathesis


@schemathesis.deserializer("application/jsonl", "application/json-lines")
def json_lines(ctx, response):
    text = response.content.decode("utf-8")
    if text and not text.endswith("\n"):
        raise ValueError("the last JSON line does not end with a newline")
    lines = text.split("\n")[:-1]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise ValueError(f"line {number} is empty")
    return [json.loads(line) for line in lines]
PY
export SCHEMATHESIS_HOOKS="$out/hooks.py"

seed_args=()
if [[ "$seed" != random ]]; then
    seed_args=(--seed "$seed")
fi

checks=not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection,unsupported_method,allow_header_conformance,use_after_free,ensure_resource_availability

common=(
    --url "$base_url"
    --checks "$checks"
    --max-examples "$max_examples"
    ${seed_args[@]+"${seed_args[@]}"}
    --workers "$workers"
    --request-timeout 60
    --generation-database none
    --no-color
)

status=0

echo "== schemathesis: every operation of openapi.yaml against $base_url"
"$st" --config-file "$out/schemathesis.toml" run openapi.yaml "${common[@]}" \
    --report "$reports" --report-dir "$out/all-operations" || status=1

# The Chat UI asks /multi-agent-chat/batch for server-sent events with `Accept: text/event-stream`; OpenAPI cannot
# make a generator send that header, so the event form of the answer gets a pass of its own.
echo
echo "== schemathesis: /multi-agent-chat/batch with Accept: text/event-stream"
"$st" --config-file "$out/schemathesis.toml" run openapi.yaml "${common[@]}" \
    --include-operation-id multiAgentBatch \
    --phases examples,coverage,fuzzing \
    --header 'Accept: text/event-stream' \
    --report "$reports" --report-dir "$out/batch-events" || status=1

if [[ $status -eq 0 ]]; then
    [[ -n "${SCHEMATHESIS_OUT:-}" ]] || rm -rf "$out"
    echo
    echo "schemathesis.sh: every check passed"
else
    echo
    echo "schemathesis.sh: checks failed; reports in $out" >&2
fi
exit $status
