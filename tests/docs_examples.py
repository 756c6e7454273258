#!/usr/bin/env python3
"""The docs' shell examples, run: every ```sh block of README.md and docs/*.md that talks to the local run is run
against one, so an example that stops working fails `make test` (its "docs" section, tests/suites.py).

    python3 tests/docs_examples.py http://127.0.0.1:9070   # run them against the local run on that port
    python3 tests/docs_examples.py --list                  # which blocks are run, which are not, and why

A block talks to the local run when it names one of its addresses: 127.0.0.1 or localhost on port 9000 (the
functions), 9100 (the local Bedrock server), 9200 (moto), 9300 (the local knowledge base) or 9400 (the local MCP
server). Each is run on its own, from the repository's root, with `bash -euo pipefail`, its ports moved to the given
run's (9000 → its port, 9100 → its port + 100, …), and `curl` wrapped so that an HTTP status of 400 or more fails
the block (`curl --fail-with-body`). A marker comment on the line before the block changes that:

    <!-- example: expect 415 -->           every curl of the block must answer 415 (any status, given as a number)
    <!-- example: not run: <reason> -->    the block is not run (the reason is printed)

A block that needs an id gets it in shell from an earlier answer (python3 reads JSON; no jq on a fresh machine).
Only the standard library is used.
"""

import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL = re.compile(r"\b(127\.0\.0\.1|localhost):9([0-4])00\b")
MARKER = re.compile(r"<!--\s*example:\s*(.*?)\s*-->")
TIMEOUT_SECONDS = 120

PASS_CURL = 'curl() { command curl --fail-with-body "$@"; }\n'
EXPECT_CURL = r"""curl() {
  local out code
  out=$(command curl -w '\n%{http_code}' "$@") || return
  code=${out##*$'\n'}
  printf '%s\n' "${out%$'\n'*}"
  if [ "$code" != "EXPECTED" ]; then echo "docs example: expected HTTP EXPECTED, got $code" >&2; return 1; fi
}
"""


def pages():
    docs = os.path.join(ROOT, "docs")
    return ["README.md"] + [os.path.join("docs", n) for n in sorted(os.listdir(docs)) if n.endswith(".md")]


def blocks(page):
    """(line, info, marker, text) of every fenced block of a page; text without the fence's indentation."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)\s*([^\s`]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3)
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{fence}\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = MARKER.search(lines[before]) if before >= 0 else None
        yield start + 1, info, marker.group(1) if marker else None, "\n".join(body)


def examples():
    """(page, line, marker, text) of every shell block that talks to the local run."""
    for page in pages():
        for line, info, marker, text in blocks(page):
            if info in ("sh", "bash", "shell") and LOCAL.search(text):
                yield page, line, marker, text


def moved(text, port):
    return LOCAL.sub(lambda m: f"{m.group(1)}:{port + int(m.group(2)) * 100}", text)


def script(marker, text, port):
    expect = re.fullmatch(r"expect (\d{3})", marker or "")
    prelude = EXPECT_CURL.replace("EXPECTED", expect.group(1)) if expect else PASS_CURL
    return prelude + moved(text, port) + "\n"


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    listing = argv[0] == "--list"
    port = None
    if not listing:
        m = re.fullmatch(r"https?://(?:127\.0\.0\.1|localhost):(\d+)/?", argv[0])
        if not m:
            print(f"docs_examples: expected the local run's address, such as http://127.0.0.1:9070, got {argv[0]!r}")
            return 2
        port = int(m.group(1))
    found = list(examples())
    if not found:
        print("docs_examples: no shell example talks to the local run: the extraction is broken")
        return 1
    failed, ran, skipped = [], 0, 0
    for page, line, marker, text in found:
        where = f"{page}:{line}"
        if marker and marker.startswith("not run"):
            skipped += 1
            print(f"{where}: not run ({marker})")
            continue
        if marker and not re.fullmatch(r"expect \d{3}", marker):
            failed.append(where)
            print(f"{where}: FAILED: unknown marker <!-- example: {marker} -->")
            continue
        if listing:
            print(f"{where}: run{' (' + marker + ')' if marker else ''}")
            continue
        ran += 1
        started = time.monotonic()
        try:
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", script(marker, text, port)], cwd=ROOT,
                                    capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
            ok, output = result.returncode == 0, result.stdout + result.stderr
            status = f"exit {result.returncode}"
        except subprocess.TimeoutExpired as e:
            ok, output, status = False, f"{e.stdout or ''}{e.stderr or ''}", f"no end within {TIMEOUT_SECONDS} s"
        seconds = time.monotonic() - started
        if ok:
            print(f"{where}: passed ({seconds:.1f} s)")
        else:
            failed.append(where)
            print(f"{where}: FAILED ({status}, {seconds:.1f} s)\n--- the block, as run:\n{moved(text, port)}\n"
                  f"--- its output:\n{output[-4000:]}\n---")
    if listing:
        return 1 if failed else 0
    print(f"docs_examples: {ran} run, {ran - len(failed)} passed, {len(failed)} failed, {skipped} not run"
          + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
