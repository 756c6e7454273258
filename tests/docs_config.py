#!/usr/bin/env python3
"""docs/configuration.md against the code (`make lint`): every environment variable the product code reads is a row
of the page, and every row of the page is read by the code. Fails naming the variables that differ.

The product code is the Rust of functions/ and shared/, without tests: no `tests/` folder, not shared/testing, and no
`#[cfg(test)]` module. The local run (tests/local-run) is not product code. A variable the code reads is found as
the code names it:

- a string literal shaped like an environment variable with an underscore (`"MAX_BODY_BYTES"`,
  `"AWS_LAMBDA_RUNTIME_API"`), which in this code is only ever a variable's name (not inside `env!`, which reads
  the build's environment);
- a one-word name passed to a reading function: `get("AGENTS")`, `lookup("PORT")`, `number(…)`, `whole(…)`,
  `dollars(…)`, `flag(…)`, `choices(…)`, `std::env::var(…)`, `var_os(…)`.

The page's rows: `| `NAME` | default | meaning |` in a table whose header is `| variable | default | meaning |` (the
variables the functions read: each must be read by the code), and `| `NAME` | set by | meaning |` in the table
headed `| variable | set by | meaning |` (set by Lambda, or read by the AWS SDK or OpenTelemetry themselves: each
must be read by the code or be one of LIBRARY_VARIABLES below). One variable a row. The one exception: a variable
of SET_BY_THE_TEMPLATE_FOR_CODE_TO_COME below may be a row that no code reads yet, if template.yaml sets it.

And the page's template parameters, against template.yaml: every parameter of its `Parameters` section is named
(`` `Name` ``) in the first cell of a row of the table headed `| parameter | default | becomes |`, and every name
there is a parameter. Only the standard library (the template's parameter names are read line by line).
"""

import os
import re
import sys

from routes import template_parameters  # tests/routes.py: template.yaml's parameter names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join("docs", "configuration.md")

# Set by Lambda or read by the libraries themselves (the AWS SDK, OpenTelemetry): they may be documented in the
# "set by" table without the product code reading them.
LIBRARY_VARIABLES = {
    "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_MAX_ATTEMPTS", "AWS_ENDPOINT_URL", "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_RUNTIME_API",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_LAMBDA_FUNCTION_VERSION", "AWS_LAMBDA_LOG_GROUP_NAME",
    "AWS_LAMBDA_LOG_STREAM_NAME", "AWS_LAMBDA_LOG_FORMAT", "AWS_LAMBDA_LOG_LEVEL", "AWS_LAMBDA_MAX_CONCURRENCY",
    "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
}
LIBRARY_PREFIXES = ("AWS_ENDPOINT_URL_",)  # the SDK's per-service endpoints

# Set by the template for code that is still to come: a row of the functions' tables that no code reads yet is
# allowed for these only, and only while template.yaml sets them (the documents routes of issue 41 will read them;
# once they do, the name can leave this list).
SET_BY_THE_TEMPLATE_FOR_CODE_TO_COME: set = set()

NAME_WITH_UNDERSCORE = re.compile(r'(?<!env!\()"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"')
READ_ONE_WORD = re.compile(
    r'\b(?:get|lookup|number|whole|dollars|flag|choices(?:::<[^>]*>)?|var|var_os)\(\s*"([A-Z][A-Z0-9]*)"')


def product_sources():
    for top in ["functions", "shared"]:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            relative = os.path.relpath(folder, ROOT)
            parts = relative.split(os.sep)
            dirs[:] = [d for d in dirs if d not in ("tests", "target", "benches", "examples")]
            if "tests" in parts or relative.startswith(os.path.join("shared", "testing")):
                continue
            for name in sorted(files):
                # A build script reads cargo's variables (OUT_DIR), not the product's.
                if name.endswith(".rs") and name != "build.rs":
                    yield os.path.join(relative, name)


def without_test_modules(text):
    """The file without its `#[cfg(test)]` modules: from the attribute to the module's closing brace, the first `}`
    at the margin after it (rustfmt indents everything inside)."""
    lines = text.split("\n")
    out, skipping = [], False
    for i, line in enumerate(lines):
        if not skipping and line.strip() == "#[cfg(test)]" and i + 1 < len(lines) \
                and re.match(r"(pub(\(crate\))? )?mod \w+ \{$", lines[i + 1].strip()) and not line.startswith(" "):
            skipping = True
            continue
        if skipping:
            if line == "}":
                skipping = False
            continue
        out.append(line)
    return "\n".join(out)


def read_by_code():
    """{name: [file, …]} of every variable the product code reads."""
    found = {}
    for path in product_sources():
        text = without_test_modules(open(os.path.join(ROOT, path), encoding="utf-8").read())
        for name in NAME_WITH_UNDERSCORE.findall(text) + READ_ONE_WORD.findall(text):
            found.setdefault(name, []).append(path)
    return found


def documented():
    """({name: line} of the functions' tables, {name: line} of the set-by table, [problems])."""
    functions, library, problems = {}, {}, []
    kind = None
    for number, line in enumerate(open(os.path.join(ROOT, PAGE), encoding="utf-8").read().split("\n"), 1):
        if not line.startswith("|"):
            kind = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        header = [c.lower() for c in cells]
        if header == ["variable", "default", "meaning"]:
            kind = functions
            continue
        if header == ["variable", "set by", "meaning"]:
            kind = library
            continue
        if kind is None or set(line.replace("|", "").strip()) <= set("-: "):
            continue
        names = re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        if len(names) != 1 or cells[0] != f"`{names[0]}`":
            problems.append(f"{PAGE}:{number}: one variable a row, as `NAME`: {cells[0]}")
            continue
        name = names[0]
        if name in functions or name in library:
            problems.append(f"{PAGE}:{number}: {name} has two rows")
        kind[name] = number
    return functions, library, problems


def documented_parameters():
    """{name: line} of the names in the first cells of the parameters table."""
    found, inside = {}, False
    for number, line in enumerate(open(os.path.join(ROOT, PAGE), encoding="utf-8").read().split("\n"), 1):
        if not line.startswith("|"):
            inside = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if [c.lower() for c in cells] == ["parameter", "default", "becomes"]:
            inside = True
            continue
        if inside and not set(line.replace("|", "").strip()) <= set("-: "):
            for name in re.findall(r"`([A-Za-z][A-Za-z0-9]*)`", cells[0]):
                found.setdefault(name, number)
    return found


def parameter_problems():
    parameters, documented = template_parameters(), documented_parameters()
    problems = []
    if len(parameters) < 50 or len(documented) < 50:
        problems.append(f"only {len(parameters)} parameters found in template.yaml and {len(documented)} in the "
                        f"parameters table of {PAGE}: the reading of one of them is broken")
    for name in parameters:
        if name not in documented:
            problems.append(f"template parameter {name} is not in the parameters table of {PAGE}")
    for name, number in sorted(documented.items()):
        if name not in parameters:
            problems.append(f"{PAGE}:{number}: {name} is in the parameters table but not a parameter of template.yaml")
    return problems, len(parameters)


def known_to_libraries(name):
    return name in LIBRARY_VARIABLES or name.startswith(LIBRARY_PREFIXES)


def main():
    code = read_by_code()
    functions, library, problems = documented()
    if len(code) < 50 or len(functions) < 50:
        problems.append(f"only {len(code)} variables found in the code and {len(functions)} rows on the page: "
                        "the scan or the page's tables are broken")
    missing = sorted(set(code) - set(functions) - set(library))
    for name in missing:
        problems.append(f"read by the code but not a row of {PAGE}: {name} ({', '.join(sorted(set(code[name])))})")
    template = open(os.path.join(ROOT, "template.yaml"), encoding="utf-8").read()
    for name, number in sorted(functions.items()):
        if name in SET_BY_THE_TEMPLATE_FOR_CODE_TO_COME and name not in code:
            if not re.search(rf"^\s+{name}:", template, re.M):
                problems.append(f"{PAGE}:{number}: {name} is a row that no code reads yet, and template.yaml does "
                                "not set it either")
            continue
        if name not in code:
            problems.append(f"{PAGE}:{number}: {name} is a row but the code does not read it")
    for name, number in sorted(library.items()):
        if name not in code and not known_to_libraries(name):
            problems.append(f"{PAGE}:{number}: {name} is a row of the set-by table, but neither the code nor a "
                            "library this test knows reads it (LIBRARY_VARIABLES in tests/docs_config.py)")
    more, parameters = parameter_problems()
    problems += more
    for p in problems:
        print(p)
    print(f"docs_config: {len(code)} variables read by the code; {len(functions)} + {len(library)} rows on {PAGE}; "
          f"{parameters} template parameters: " + (f"{len(problems)} problems" if problems else "they match"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
