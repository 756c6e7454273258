"""The routes the functions' routers declare, read from their Rust source (shared/app/src): what
tests/template_permissions.py checks the distribution and the alarms against, and tests/docs_routes.py the docs.
Only the standard library.

`router_routes()` gives each route as the routers spell it (`/chat-history/{id}`, `/v1/models/{*id}`) with the
functions that declare it and its methods; catch-alls that only answer "no such route" (`any(unknown)`:
`/v1/{*rest}`, `/v1/messages/{*rest}`) are left out unless asked for. `template_parameters()` gives template.yaml's
parameter names, which tests/docs_config.py and tests/docs_routes.py check the docs against.
"""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP = os.path.join(ROOT, "shared", "app", "src")

# Routers both chat functions merge (chat/mod.rs): their paths are either's, except where they depend on whether the
# function streams (`if serving.streams { <chat-stream's> } else { <chat's> }`).
# Each is a module of shared/app/src/chat/ that declares routes (all but mod.rs, read apart below): found, so that a
# new dialect's module is read without being named here.
CHAT_SOURCES = tuple(
    f"chat/{name}"
    for name in sorted(os.listdir(os.path.join(APP, "chat")))
    if name.endswith(".rs")
    and name != "mod.rs"
    and ".route(" in open(os.path.join(APP, "chat", name), encoding="utf-8").read()
)
METHODS = re.compile(r'"((?:GET|POST|PUT|PATCH|DELETE|HEAD)(?:, (?:GET|POST|PUT|PATCH|DELETE|HEAD))*)"')


def block(text, start):
    """The text between the brace that opens at or after `start` and the one that closes it, and where it ends."""
    opening = text.index("{", start)
    depth = 0
    for i in range(opening, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[opening + 1:i], i + 1
    raise AssertionError(f"unclosed block at {start}")


def parens(text, start):
    """The text inside the parenthesis that opens at `start`."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    raise AssertionError(f"unclosed parenthesis at {start}")


def read(source):
    """The source, a route named by a constant (`.route(ROUTE, …)`) spelled out."""
    with open(os.path.join(APP, source)) as f:
        text = f.read()
    for name, path in re.findall(r'const ([A-Z_]+): &str = "(/[^"]*)";', text):
        text = re.sub(r'(\.route\(\s*)' + name + r'\b', lambda m: m.group(1) + f'"{path}"', text)
    return text


def calls(text):
    """Each `.route(…)` of `text`: its paths (a literal; or a variable bound by `let name = if serving.streams { "…" }
    else { "…" }`: the streaming function's path, then the buffered one's) and its methods (None for a catch-all that
    only answers "no such route")."""
    for m in re.finditer(r"\.route\((?!\))", text):
        args = parens(text, m.end() - 1)
        first = args.split(",", 1)[0].strip()
        if first.startswith('"'):
            paths = (first.strip('"'),)
        else:
            bound = re.search(r"let " + re.escape(first) + r" = if serving\.streams \{\s*\"([^\"]+)\"\s*\} else \{\s*\"([^\"]+)\"", text)
            assert bound, f"a route whose path is neither a literal nor bound by `if serving.streams`: {first}"
            paths = bound.groups()  # (the streaming function's, the buffered function's)
        methods = METHODS.search(args)
        if methods:
            methods = set(methods.group(1).split(", "))
        elif "page.route()" in args or "icon_route()" in args:
            methods = {"GET", "HEAD"}  # the page and its icon (history/page.rs)
        elif re.search(r"\bany\(", args):
            methods = None  # a catch-all
        else:
            raise AssertionError(f"no methods found for the route {paths}: {args}")
        yield paths, methods


def router_routes(catch_alls=False):
    """{path as the router spells it: {"functions": {...}, "methods": {...}}} for every route of the three
    functions' routers; a path two functions declare (the bare /multi-agent-chat, OpenAI's routes) may go to either.
    With `catch_alls`, the catch-alls too (with no methods)."""
    declared = {}

    def add(paths, methods, *functions):
        if methods is None:
            if not catch_alls:
                return
            methods = set()
        for path in paths:
            entry = declared.setdefault(path, {"functions": set(), "methods": set()})
            entry["functions"].update(functions)
            entry["methods"].update(methods)

    chat = ("chat", "chat-stream")
    for source in CHAT_SOURCES:
        text = read(source)
        at = text.find("if serving.streams")
        if at >= 0 and ".route(" in text[at:at + 400]:
            streamed, end = block(text, at)
            assert text[end:].lstrip().startswith("else"), source
            buffered, end = block(text, end)
            for paths, methods in calls(streamed):
                add(paths, methods, "chat-stream")
            for paths, methods in calls(buffered):
                add(paths, methods, "chat")
            text = text[:at] + text[end:]
        for paths, methods in calls(text):
            if len(paths) == 2:  # bound by `if serving.streams`
                add(paths[:1], methods, "chat-stream")
                add(paths[1:], methods, "chat")
            else:
                add(paths, methods, *chat)
    # The routes one chat function adds of its own (chat/mod.rs).
    text = read("chat/mod.rs")
    for name, function in (("Buffered", "chat"), ("Streamed", "chat-stream")):
        body, _ = block(text, text.index(f"impl ChatFunction for {name}"))
        for paths, methods in calls(body):
            add(paths, methods, function)
    for paths, methods in calls(read("history/mod.rs")):
        add(paths, methods, "history")
    return declared


def template_parameters():
    """The names of template.yaml's parameters: the keys indented two spaces under its top-level `Parameters:`."""
    names, inside = [], False
    with open(os.path.join(ROOT, "template.yaml"), encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if re.match(r"^[A-Za-z]", line):
                inside = line.rstrip() == "Parameters:"
                continue
            m = re.match(r"^  ([A-Za-z][A-Za-z0-9]*):\s*$", line)
            if inside and m:
                names.append(m.group(1))
    return names
