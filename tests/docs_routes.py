#!/usr/bin/env python3
"""The docs' route tables and parameter groups against the code (`make lint`): fails naming what is missing or
stale.

The routes are what the three functions' routers declare (shared/app/src, read by tests/routes.py, as
tests/template_permissions.py reads them), each path with its methods (`/v1/models/{*id}` is written
`/v1/models/{id}`; the catch-alls that only answer "no such route" are no routes). Each of them must be:

- a row of the route table of README.md and of docs/routes-and-dialects.md (the table whose header starts
  `| route |`; `HEAD` beside `GET` left out), whose first cell names it in backticks: `` `GET /usage` ``, `` `GET`, `DELETE /v1/responses/{id}` ``
  (methods before a path are that path's), a query string (`?mode=`) aside; and every route such a row names must
  be declared (no stale row);
- an operation of openapi.yaml (`paths:` → the path → the method), and every operation there declared;
- sent to a function that declares it by docs/deploy.md's table of the distribution's paths (the table whose header
  starts `| path | function |`: its patterns in order, first match wins, the last row naming "anything else" the
  default), and that table must be the template's Distribution: the same patterns, in the same order, to the same
  functions.

And every parameter of template.yaml's `Parameters` is named (`` `Name` ``) in docs/deploy.md's table of the
parameters' groups (header `| group | parameters |`), every name there is a parameter, and the table's groups are
the template's (`AWS::CloudFormation::Interface`, what `sam deploy --guided` and the console ask in): the same labels
in the same order, each with the same parameters.

And docs/architecture.svg is what docs/architecture.py draws from the routers and the crates now.

Only the standard library. Prints `N passed, N failed` (tests/checks.py); exit status 1 on any failure.
"""

import os
import re
import sys

import checks  # tests/checks.py: the runner of the test_* functions
from routes import ROOT, router_routes, template_parameters

METHOD = r"(GET|POST|PUT|PATCH|DELETE|HEAD)"


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def declared():
    """{(method, path)} the routers declare, paths written as the docs write them."""
    routes = set()
    for path, route in router_routes().items():
        written = re.sub(r"\{\*(\w+)\}", r"{\1}", path)
        routes.update((method, written) for method in route["methods"])
    return routes


def functions_of():
    """{path as the docs write it: the functions that declare it}."""
    return {re.sub(r"\{\*(\w+)\}", r"{\1}", p): r["functions"] for p, r in router_routes().items()}


def tables(text, header):
    """The rows (lists of cells) of each Markdown table of `text` whose header row starts with `header`."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not re.match(r"\|\s*" + re.escape(header) + r"\s*\|", line):
            continue
        rows = []
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]
            rows.append(cells)
        found.append(rows)
    return found


def named_routes(cell):
    """The (method, path) pairs a table cell names: `GET /a`, or `GET`, `DELETE /b` (both methods /b's)."""
    routes = []
    pending = []
    for span in re.findall(r"`([^`]+)`", cell):
        m = re.fullmatch(METHOD + r"(?:\s+(/\S*))?", span.strip())
        if not m:
            pending = []
            continue
        method, path = m.groups()
        pending.append(method)
        if path:
            path = path.split("?")[0].replace("\\|", "|")
            routes.extend((p, path) for p in pending)
            pending = []
    return routes


def route_table(page):
    """The routes the route table of `page` names, with the row each came from."""
    found = tables(read(page), "route")
    assert found, f"{page} has no route table (a table whose header starts `| route |`)"
    return {route: row[0] for rows in found for row in rows for route in named_routes(row[0])}


def check_route_table(page):
    documented = route_table(page)
    routes = {(method, path) for method, path in declared() if method != "HEAD"}  # a table names GET, not HEAD
    missing = sorted(routes - documented.keys())
    stale = sorted(documented.keys() - routes)
    assert not missing, f"{page}: routes the routers declare but its route table does not name: {missing}"
    assert not stale, f"{page}: rows of its route table that no router declares: {stale}"


def test_the_readme_names_every_route():
    check_route_table("README.md")


def test_routes_and_dialects_names_every_route():
    check_route_table(os.path.join("docs", "routes-and-dialects.md"))


def openapi_operations():
    """{(METHOD, path)} of openapi.yaml's `paths`."""
    operations = set()
    path = None
    in_paths = False
    for line in read("openapi.yaml").splitlines():
        if re.match(r"^\S", line):
            in_paths = line.startswith("paths:")
            continue
        if not in_paths:
            continue
        m = re.match(r"^  (/[^:]*):\s*$", line) or re.match(r"^  '(/[^']*)':\s*$", line) or re.match(r'^  "(/[^"]*)":\s*$', line)
        if m:
            path = m.group(1)
            continue
        m = re.match(r"^    (get|post|put|patch|delete|head):\s*$", line)
        if m and path:
            operations.add((m.group(1).upper(), path))
    return operations


def test_openapi_has_every_route():
    operations = openapi_operations()
    assert len(operations) >= 20, operations
    routes = declared()
    missing = sorted(routes - operations)
    stale = sorted(operations - routes)
    assert not missing, f"openapi.yaml: routes the routers declare that it has no operation for: {missing}"
    assert not stale, f"openapi.yaml: operations no router declares: {stale}"


def distribution():
    """The template's Distribution: [(PathPattern, function)] in order, and the default behaviour's function."""
    text = read("template.yaml")
    start = text.index("  Distribution:\n")
    end = re.search(r"^  \w+:\n", text[start + 20:], re.M).start() + start + 20
    config = text[start:end]
    default = re.search(r"DefaultCacheBehavior:\s*\n\s*TargetOriginId: ([\w-]+)", config).group(1)
    patterns = re.findall(r"- PathPattern: (\S+)\s*\n\s*TargetOriginId: ([\w-]+)", config)
    return patterns, default


def deploy_distribution_table():
    """deploy.md's table of the distribution's paths: [(pattern, function)] in order, and the default's function."""
    found = tables(read(os.path.join("docs", "deploy.md")), "path")
    rows = [r for t in found for r in t if len(r) >= 2 and r[1] in ("chat", "chat-stream", "history")]
    assert rows, "docs/deploy.md has no table of the distribution's paths (`| path | function |`)"
    patterns = []
    default = None
    for cell, function, *_ in rows:
        # Patterns are the backticked spans ending in `*` or written as a pattern; `(…)` holds examples, not patterns.
        head = re.sub(r"\([^)]*\)", "", cell)
        for span in re.findall(r"`([^`]+)`", head):
            if span != "/":
                patterns.append((span, function))
        if "anything else" in cell:
            default = function
    return patterns, default


def matches(pattern, path):
    """CloudFront's path pattern (`*` any characters) against a path."""
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), path) is not None


def test_deploy_distribution_table_is_the_templates_and_sends_every_route_to_its_function():
    patterns, default = deploy_distribution_table()
    template_patterns, template_default = distribution()
    assert patterns == template_patterns, (
        "docs/deploy.md's distribution table differs from template.yaml's Distribution (patterns in order):\n"
        f"  docs:     {patterns}\n  template: {template_patterns}")
    assert default == template_default, f"the default: docs say {default}, the template {template_default}"
    wrong = {}
    for path, functions in functions_of().items():
        concrete = path.replace("{id}", "3f2a9c")
        to = next((f for p, f in patterns if matches(p, concrete)), default)
        if to not in functions:
            wrong[path] = (to, sorted(functions))
    assert not wrong, f"docs/deploy.md's table sends these routes to a function that does not declare them: {wrong}"


def template_groups():
    """[(label, [parameter, …])] of the template's `AWS::CloudFormation::Interface` ParameterGroups, in order."""
    text = read("template.yaml")
    meta = text[text.index("ParameterGroups:"):text.index("\nParameters:")]
    return [(m.group(1).strip().strip('"'), re.findall(r"- (\w+)", m.group(2)))
            for m in re.finditer(r"- Label:\s*\n\s*default: (.+)\n\s*Parameters:\n((?:\s*- \w+\n)+)", meta)]


def test_deploy_parameter_groups_are_the_templates():
    found = tables(read(os.path.join("docs", "deploy.md")), "group")
    assert found, "docs/deploy.md has no table of the parameters' groups (`| group | parameters |`)"
    documented = [(row[0], re.findall(r"`([A-Z][A-Za-z0-9]+)`", re.sub(r"\[[^\]]*\]\([^)]*\)", "", row[1])))
                  for rows in found for row in rows]
    template = template_groups()
    assert len(template) >= 10, template
    assert [label for label, _ in documented] == [label for label, _ in template], (
        f"docs/deploy.md's groups are not the template's, in order:\n  docs:     {[g for g, _ in documented]}\n"
        f"  template: {[g for g, _ in template]}")
    differ = {label: {"docs only": sorted(set(d) - set(t)), "template only": sorted(set(t) - set(d))}
              for (label, d), (_, t) in zip(documented, template) if set(d) != set(t)}
    assert not differ, f"docs/deploy.md's groups hold other parameters than the template's: {differ}"


def test_deploy_parameter_groups_name_every_parameter():
    params = set(template_parameters())
    assert len(params) >= 50, params
    found = tables(read(os.path.join("docs", "deploy.md")), "group")
    assert found, "docs/deploy.md has no table of the parameters' groups (`| group | parameters |`)"
    named = set()
    for rows in found:
        for row in rows:
            # The parameters of a row: its backticked names, links' text aside.
            named.update(re.findall(r"`([A-Z][A-Za-z0-9]+)`", re.sub(r"\[[^\]]*\]\([^)]*\)", "", row[1])))
    missing = sorted(params - named)
    stale = sorted(named - params)
    assert not missing, f"docs/deploy.md's parameter groups lack these template parameters: {missing}"
    assert not stale, f"docs/deploy.md's parameter groups name what is no template parameter: {stale}"


def test_the_architecture_picture_is_drawn_from_the_code():
    """docs/architecture.svg (the README's first picture) is what docs/architecture.py draws from the routers and the
    crates' manifests now."""
    sys.path.insert(0, os.path.join(ROOT, "docs"))
    import architecture  # docs/architecture.py

    with open(architecture.OUT) as f:
        assert f.read() == architecture.draw(), (
            "docs/architecture.svg is not what docs/architecture.py draws from the code: run `python3 docs/architecture.py`")


if __name__ == "__main__":
    sys.exit(checks.run(globals()))
