#!/usr/bin/env python3
"""Lists the circles between a crate's modules: a module that imports (maybe through others) from one that
imports back from it.

Reads every crate's module tree (lib.rs or main.rs, and each `mod x;`), the paths its code names (`crate::…`,
`super::…`, `self::…`, a child module's name; in `use` lines, their `{…}` groups expanded, and inline), resolves
each to a module, and lifts every edge to the two siblings under the modules' lowest common ancestor. A parent
naming its child, or a child its ancestor, is structure, not a circle. Test modules (`#[cfg(test)] mod …`) are left
out. A name the crate re-exports (`crate::Item`) counts as the module the path names (what the `use` lines read),
or, with `--through-reexports`, as the module that defines it.

Prints each circle (a strongly connected set of sibling modules) with the edges inside it and the names that make
them; exits 1 when there is one. Usage: `python3 tools/module_circles.py [--through-reexports] [path/src/lib.rs…]`
(every crate below the current folder by default).
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        # crude: drop // comments outside strings
        i = line.find("//")
        while i >= 0 and line[:i].count('"') % 2 == 1:
            i = line.find("//", i + 2)
        out.append(line if i < 0 else line[:i])
    return "\n".join(out)


def strip_strings(text):
    """Strings and character literals emptied, so that no brace or path inside them counts."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"'(?:\\.|[^'\\])'", "' '", text)


def block_end(text, start):
    """Index just past the `{…}` block that starts at or after `start` (or past `;`)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == ";" and depth == 0:
            return i + 1
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def drop_test_modules(text):
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text)
        if not m:
            return text
        text = text[: m.start()] + text[block_end(text, m.start()):]


class Module:
    def __init__(self, path, file, crate):
        self.path = path  # tuple of names from the crate root
        self.file = file
        self.crate = crate
        self.children = {}
        self.text = ""
        self.reexports = {}  # name -> absolute path tuple (module path + item)


def expand_use(tree):
    """`a::{b, c::{d, e as f}}` -> ['a::b', 'a::c::d', 'a::c::e']"""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def rec(prefix, s):
        items, depth, cur = [], 0, ""
        for c in s:
            if c == "," and depth == 0:
                items.append(cur)
                cur = ""
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            cur += c
        if cur:
            items.append(cur)
        for it in items:
            if it.startswith("{") and it.endswith("}"):
                rec(prefix, it[1:-1])
                continue
            m = re.match(r"^(.*?)::\{(.*)\}$", it)
            if m:
                rec(prefix + m.group(1) + "::", m.group(2))
            else:
                out.append(prefix + it)

    rec("", tree)
    return out


def load_crate(root_file):
    crate = root_file.parent.parent.name if root_file.parent.name == "src" else root_file.parent.name
    mods = {}

    def load(path, file, dir_for_children):
        m = Module(path, file, crate)
        raw = file.read_text()
        text = strip_strings(strip_comments(raw))
        text = drop_test_modules(text)
        m.text = text
        mods[path] = m
        for mm in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", text, re.M):
            name = mm.group(1)
            for cand in (dir_for_children / f"{name}.rs", dir_for_children / name / "mod.rs"):
                if cand.exists():
                    m.children[name] = path + (name,)
                    load(path + (name,), cand, dir_for_children / name)
                    break
        return m

    load((), root_file, root_file.parent)
    return crate, mods


def use_paths(text):
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        is_pub = bool(re.search(r"pub(\([^)]*\))?\s+use\s+" + re.escape(m.group(1)), text[max(0, m.start() - 20): m.end()]))
        for p in expand_use(m.group(1)):
            paths.append((p, is_pub))
    return paths


def resolve(mods, here, segs, seen=None):
    """The module that defines the item `segs` names from module `here`, or None (an outside crate)."""
    seen = seen or set()
    cur = here
    i = 0
    if segs and segs[0] == "crate":
        cur, i = (), 1
    while i < len(segs) and segs[i] in ("super", "self"):
        cur = cur[:-1] if segs[i] == "super" else cur
        i += 1
    if i == 0 and segs and segs[0] not in mods[here].children and here != ():
        return None  # an outside crate or a local item
    while i < len(segs) and cur in mods and segs[i] in mods[cur].children:
        cur = mods[cur].children[segs[i]]
        i += 1
    if i >= len(segs) or segs[i] in ("*",):
        return cur
    item = segs[i]
    key = (cur, item)
    if key in seen:
        return cur
    seen.add(key)
    target = mods[cur].reexports.get(item) if (cur in mods and FOLLOW) else None
    if target is not None:
        return resolve(mods, cur, target, seen)
    return cur


def main(roots):
    found = False
    for root_file in roots:
        crate, mods = load_crate(root_file)
        # re-exports: `pub use x::y::Item;` in a module
        for path, m in mods.items():
            for p, is_pub in use_paths(m.text):
                segs = [s for s in p.split("::") if s]
                if is_pub and segs and segs[-1] != "*":
                    m.reexports[segs[-1]] = segs
        edges = defaultdict(set)  # (from sibling, to sibling) -> names
        for path, m in mods.items():
            names = set()
            for p, _ in use_paths(m.text):
                names.add(p)
            body = re.sub(r"\buse\s+[^;]+;", "", m.text)
            for mm in re.finditer(r"(?<![A-Za-z0-9_:])((?:crate|super|self|" + "|".join(map(re.escape, m.children)) + r")(?:::" + IDENT + r")+)" if m.children else r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::" + IDENT + r")+)", body):
                names.add(mm.group(1))
            for p in names:
                segs = [s for s in p.split("::") if s]
                target = resolve(mods, path, segs)
                if target is None or target == path:
                    continue
                k = 0
                while k < min(len(path), len(target)) and path[k] == target[k]:
                    k += 1
                if k == len(path) or k == len(target):
                    continue  # ancestor and descendant
                a, b = path[: k + 1], target[: k + 1]
                edges[(a, b)].add(f"{'/'.join(path) or 'lib'} -> {p}")
        graph = defaultdict(set)
        for a, b in edges:
            graph[a].add(b)
        # strongly connected components (Tarjan)
        index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

        def strong(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in graph[v]:
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(comp)

        for v in list(graph):
            if v not in index:
                strong(v)
        for comp in sccs:
            found = True
            names = sorted("::".join(c) for c in comp)
            print(f"{crate}: circle {' ⇄ '.join(names)}")
            for a, b in sorted(edges):
                if a in comp and b in comp:
                    print(f"    {'::'.join(a)} -> {'::'.join(b)}: {', '.join(sorted(edges[(a, b)]))}")
    if not found:
        print("no circles")
    return found


FOLLOW = False

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--through-reexports" in args:
        args.remove("--through-reexports")
        FOLLOW = True
    if args:
        roots = [Path(a) for a in args]
    else:
        roots = sorted(p for p in Path(".").glob("**/src/lib.rs") if "target" not in p.parts and "node_modules" not in p.parts)
        roots += sorted(p for p in Path(".").glob("**/src/main.rs") if "target" not in p.parts and "node_modules" not in p.parts)
    sys.setrecursionlimit(10000)
    sys.exit(1 if main(roots) else 0)
