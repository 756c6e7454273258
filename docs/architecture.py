#!/usr/bin/env python3
"""Draws docs/architecture.svg (the README's first picture) from the code as it is: each function's routes as its
router declares them (tests/routes.py reads shared/app/src), and the product crates with the workspace crates each
depends on (their Cargo.toml). Run it after a route or a crate changes:

    python3 docs/architecture.py            # writes docs/architecture.svg
    python3 docs/architecture.py --check    # exit status 1 when docs/architecture.svg is not what it would write

`make lint` runs the check (tests/docs_routes.py). Only the standard library; no layout tool.
"""

import os
import sys
import tomllib
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
from routes import router_routes  # noqa: E402 - tests/routes.py, found through the path above

OUT = os.path.join(HERE, "architecture.svg")
FUNCTIONS = [
    ("chat", "buffered: each answer whole"),
    ("chat-stream", "RESPONSE_STREAM: written as the model writes"),
    ("history", "buffered: the page, history, keys, documents"),
]
# The product crates, in the order they are drawn: a crate depends only on crates drawn after it.
CRATES = ["functions/chat", "functions/chat-stream", "functions/history", "shared/app", "shared/runtime",
          "shared/aws", "shared/mcp", "shared/edge", "shared/protocol", "shared/core"]
INK, MUTED, LINE = "#1b1c1f", "#44546a", "#44546a"
LH = 15  # one line of route text


def routes_of(function):
    """The function's routes, one line each: `GET, POST /chat-history` (HEAD beside GET left out)."""
    lines = []
    for path, route in sorted(router_routes().items(), key=lambda r: r[0]):
        if function in route["functions"]:
            methods = [m for m in ("GET", "POST", "PUT", "PATCH", "DELETE") if m in route["methods"]]
            lines.append(f"{', '.join(methods)} {path.replace('{*', '{')}")
    return lines


def crates():
    """[(path, name, [workspace crates it depends on])], in CRATES' order."""
    out = []
    names = {}
    manifests = {}
    for path in CRATES:
        with open(os.path.join(ROOT, path, "Cargo.toml"), "rb") as f:
            manifest = tomllib.load(f)
        names[path] = manifest["package"]["name"]
        manifests[path] = manifest
    for path in CRATES:
        deps = [d for d in manifests[path].get("dependencies", {}) if d in names.values()]
        out.append((path, names[path], sorted(deps)))
    return out


class Svg:
    def __init__(self):
        self.parts = []

    def add(self, text):
        self.parts.append(text)

    def box(self, x, y, w, h, fill, stroke, dashed=False):
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        self.add(f'  <rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" stroke="{stroke}"{dash}/>')

    def text(self, x, y, s, size=13, weight=None, fill=INK, anchor="start", mono=False):
        attrs = f' font-size="{size}"' if size != 13 else ""
        attrs += f' font-weight="{weight}"' if weight else ""
        attrs += f' fill="{fill}"' if fill != INK else ""
        attrs += f' text-anchor="{anchor}"' if anchor != "start" else ""
        attrs += ' font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"' if mono else ""
        self.add(f'  <text x="{x}" y="{y}"{attrs}>{escape(s)}</text>')

    def arrow(self, x1, y1, x2, y2, dashed=False):
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        self.add(f'  <line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{LINE}" stroke-width="1.4"{dash} '
                 'marker-end="url(#arrow)"/>')


def draw():
    svg = Svg()
    width = 1180
    # The functions: a box each, as tall as its routes.
    fx, fw, top = 372, 392, 56
    boxes = []
    y = top
    for name, how in FUNCTIONS:
        lines = routes_of(name)
        h = 46 + LH * len(lines) + 10
        boxes.append((name, how, lines, y, h))
        y += h + 16
    functions_bottom = y - 16
    crates_top = functions_bottom + 40
    crate_rows = crates()
    height = crates_top + 16 + 50 * ((len(crate_rows) + 4) // 5) + 10

    svg.add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            'font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="13">')
    svg.add("  <title>chat-backend architecture: clients reach three Lambda functions (chat, chat-stream, history) "
            "through their function URLs, optionally behind one CloudFront distribution; each function's routes as "
            "its router declares them; the functions use Amazon Bedrock, a knowledge base, MCP servers, one DynamoDB "
            "table and S3; below, the crates and what each depends on. Drawn by docs/architecture.py.</title>")
    svg.add('  <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{LINE}"/></marker></defs>')
    svg.add(f'  <rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>')
    svg.text(20, 30, "chat-backend: three functions behind their function URLs, one table", size=15, weight="bold")

    # Clients.
    cy, ch = top + 40, 250
    svg.box(16, cy, 190, ch, "#eef3fb", LINE)
    svg.text(111, cy + 24, "Clients", weight="bold", anchor="middle")
    for i, line in enumerate(["the backend's page (GET /)", "AI Chat Protocol clients", "the Chat UI",
                              "OpenAI SDKs, Open WebUI,", "LibreChat, Codex, AI SDK", "Claude Code, Anthropic SDKs",
                              "curl, scripts"]):
        svg.text(111, cy + 50 + 22 * i, line, size=12, anchor="middle")
    svg.text(111, cy + ch - 30, "who: IAM (SigV4), JWT", size=11, fill=MUTED, anchor="middle")
    svg.text(111, cy + ch - 14, "(sign-in) or an API key", size=11, fill=MUTED, anchor="middle")

    # CloudFront, optional.
    dx, dw = 230, 118
    svg.box(dx, top, dw, functions_bottom - top, "#f7f7f7", LINE, dashed=True)
    svg.text(dx + dw / 2, top + 24, "CloudFront", weight="bold", anchor="middle")
    for i, line in enumerate(["optional", "(CreateDistribution):", "one HTTPS origin,", "each path to the", "function that",
                              "declares it"]):
        svg.text(dx + dw / 2, top + 46 + 16 * i, line, size=11, fill=MUTED, anchor="middle")
    svg.arrow(206, cy + ch / 2, dx - 2, cy + ch / 2)

    # The functions and their routes.
    for name, how, lines, by, bh in boxes:
        svg.box(fx, by, fw, bh, "#fff4e5", "#c77700")
        svg.text(fx + 14, by + 22, name, weight="bold")
        svg.text(fx + fw - 14, by + 22, how, size=11, fill=MUTED, anchor="end")
        for i, line in enumerate(lines):
            svg.text(fx + 14, by + 44 + LH * i, line, size=11.5, mono=True)
        svg.arrow(dx + dw, by + bh / 2, fx - 2, by + bh / 2)

    # AWS services.
    sx, sw = 800, 360
    services = [
        ("Amazon Bedrock", ["Converse / ConverseStream, embeddings,", "CountTokens, guardrails"], "#eaf5ea", "#2e7d32"),
        ("Bedrock knowledge base (optional)", ["Retrieve; uploads ingested", "(documents bucket, S3 Vectors)"],
         "#eaf5ea", "#2e7d32"),
        ("MCP servers (optional)", ["the model's tools, streamable HTTP"], "#f3eefb", "#6a3fb5"),
        ("DynamoDB: one table", ["chats, messages, usage, API keys,", "documents' records; TTL"], "#e8f1fb", "#1f5fbf"),
        ("S3", ["the files of messages"], "#e8f1fb", "#1f5fbf"),
    ]
    y = top
    service_boxes = []
    for title, lines, fill, stroke in services:
        h = 30 + 16 * len(lines)
        svg.box(sx, y, sw, h, fill, stroke)
        svg.text(sx + 14, y + 20, title, weight="bold")
        for i, line in enumerate(lines):
            svg.text(sx + 14, y + 38 + 16 * i, line, size=11.5)
        service_boxes.append((y, h))
        y += h + 12
    # One arrow from the functions' column to the services' column, and one to each service.
    bus = fx + fw + 16
    ends = [sy + sh / 2 for sy, sh in service_boxes] + [by + bh / 2 for _, _, _, by, bh in boxes]
    svg.add(f'  <line x1="{bus}" y1="{min(ends)}" x2="{bus}" y2="{max(ends)}" stroke="{LINE}" stroke-width="1.4"/>')
    for _, _, _, by, bh in boxes:
        svg.add(f'  <line x1="{fx + fw}" y1="{by + bh / 2}" x2="{bus}" y2="{by + bh / 2}" stroke="{LINE}" '
                'stroke-width="1.4"/>')
    for sy, sh in service_boxes:
        svg.arrow(bus, sy + sh / 2, sx - 2, sy + sh / 2)

    # The crates: what each depends on (an arrow in the text: "depends on").
    svg.text(20, crates_top + 4, "Crates, each with the workspace crates it depends on (→ chat-…), only ever crates "
             "drawn after it:", weight="bold")
    cw, cgap = 222, 12
    for i, (path, name, deps) in enumerate(crate_rows):
        row, col = divmod(i, 5)
        x = 20 + col * (cw + cgap)
        y = crates_top + 16 + row * 50
        svg.box(x, y, cw, 42, "#f7f7f8", "#d6d8de")
        svg.text(x + 8, y + 17, path, size=11.5, weight="bold", mono=True)
        if name != os.path.basename(path):
            svg.text(x + cw - 8, y + 17, name, size=10.5, fill=MUTED, anchor="end")
        short = ", ".join(d.removeprefix("chat-") for d in deps)
        svg.text(x + 8, y + 34, f"→ {short}" if deps else "→ no crate of the workspace", size=10.5, fill=MUTED)
    svg.add("</svg>")
    return "\n".join(svg.parts) + "\n"


def main():
    drawn = draw()
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            if f.read() != drawn:
                print("docs/architecture.svg is not what docs/architecture.py draws from the code: run "
                      "`python3 docs/architecture.py`", file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w") as f:
        f.write(drawn)
    print(f"wrote {os.path.relpath(OUT, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
