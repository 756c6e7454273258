#!/usr/bin/env python3
"""The docs' links and tables of contents, checked (`make lint`): every relative link of README.md, docs/*.md and
the project's other Markdown files names a file that exists and, with `#anchor`, a heading of that file (GitHub's
anchors); every page of docs/ (and README.md) has a table of contents between `<!-- toc -->` and `<!-- /toc -->`
that lists its `##` and `###` headings as they are (docs/README.md, the index, is a table of contents itself).

`python3 tests/docs_links.py --write` rewrites the tables of contents from the headings. Only the standard library.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOC_START, TOC_END = "<!-- toc -->", "<!-- /toc -->"


def pages():
    """Every Markdown file that is checked, relative to the root."""
    found = [name for name in sorted(os.listdir(ROOT)) if name.endswith(".md")]
    found += [os.path.join("docs", name) for name in sorted(os.listdir(os.path.join(ROOT, "docs")))
              if name.endswith(".md")]
    for extra in ["bench/RESULTS.md", "samples/knowledge-base/README.md"]:
        if os.path.exists(os.path.join(ROOT, extra)):
            found.append(extra)
    return found


def with_toc():
    """The pages that must have a table of contents (docs/README.md is one: the index)."""
    return ["README.md"] + [p for p in pages() if p.startswith("docs/") and p != "docs/README.md"]


def prose_lines(text):
    """The lines outside fenced code blocks, with their numbers."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip()
        m = re.match(r"(```+|~~~+)", stripped)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not stripped[len(m.group(1)):].strip():
                fence = None
            continue
        if fence is None:
            yield number, line


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped (not `-` or `_`), spaces as hyphens."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def headings(text):
    """(level, title, anchor) of every heading, anchors made unique as GitHub makes them (`-1`, `-2`, …)."""
    seen = {}
    out = []
    for _, line in prose_lines(text):
        m = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append((len(m.group(1)), m.group(2), base if n == 0 else f"{base}-{n}"))
    return out


def toc(text):
    """The table of contents the page's headings make: `##` at the margin, `###` under them."""
    items = []
    for level, title, anchor in headings(text):
        if level in (2, 3):
            label = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
            items.append(f"{'  ' * (level - 2)}- [{label}](#{anchor})")
    return "\n".join(items)


def toc_block(text):
    start, end = text.find(TOC_START), text.find(TOC_END)
    if start < 0 or end < start:
        return None
    return text[start + len(TOC_START): end].strip("\n")


def write_tocs():
    for page in with_toc():
        path = os.path.join(ROOT, page)
        text = open(path, encoding="utf-8").read()
        if toc_block(text) is None:
            print(f"{page}: no {TOC_START} … {TOC_END} markers; add them where the contents go")
            continue
        start, end = text.find(TOC_START), text.find(TOC_END)
        new = text[: start + len(TOC_START)] + "\n" + toc(text) + "\n" + text[end:]
        if new != text:
            open(path, "w", encoding="utf-8").write(new)
            print(f"{page}: contents rewritten")


def check():
    problems = []
    anchors = {}

    def anchors_of(path):
        if path not in anchors:
            text = open(path, encoding="utf-8").read()
            found = {a for _, _, a in headings(text)}
            # Explicit anchors (<a id="…"> / name="…") count too.
            found |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
            anchors[path] = found
        return anchors[path]

    for page in pages():
        path = os.path.join(ROOT, page)
        text = open(path, encoding="utf-8").read()
        for number, line in prose_lines(text):
            line = re.sub(r"`[^`]*`", "", line)  # links inside inline code are examples, not links
            for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
                    continue
                file_part, _, anchor = target.partition("#")
                linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(linked):
                    problems.append(f"{page}:{number}: {target}: no such file")
                    continue
                if anchor and linked.endswith(".md") and anchor not in anchors_of(linked):
                    problems.append(f"{page}:{number}: {target}: no heading with the anchor #{anchor}")
    for page in with_toc():
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        block = toc_block(text)
        if block is None:
            problems.append(f"{page}: no table of contents ({TOC_START} … {TOC_END})")
        elif block.strip() != toc(text).strip():
            problems.append(f"{page}: the table of contents does not match the headings "
                            "(python3 tests/docs_links.py --write rewrites it)")
    return problems


def main():
    if "--write" in sys.argv[1:]:
        write_tocs()
    problems = check()
    for p in problems:
        print(p)
    print(f"docs_links: {len(pages())} pages, {'%d problems' % len(problems) if problems else 'every link and table of contents holds'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
