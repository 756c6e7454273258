#!/usr/bin/env python3
"""Documents end to end against the local run (issue 41's first proof): uploads, their ingestion status, and who
finds them in answers, with several signed-in callers of one run.

alice uploads a PDF and a Markdown file and sees them go `pending` → `indexed`; she asks about them and gets answers
citing them; bob asks the same and gets neither name nor word of them, buffered (`/chat`, `/chat-ui/chat`), streamed
(`/chat/stream`), through the model's own `search_documents` tool, in a multi-agent round (and, with
OPENAI_RETRIEVAL=on, through `/v1/chat/completions`); bob's `GET`/`DELETE` of alice's document is a 404; dana (an
administrator) uploads a document for the group `leadership` and only lee (a member) finds it, and one for everyone
that bob finds; a Word file and a damaged PDF, which the local knowledge base cannot parse, end `failed` with a
reason a person can read; a delete removes the document from answers. It prints the seconds from upload to
`indexed`.

Run by tests/suites.py (its "documents" suite) with the venv's Python (`cryptography` signs the tokens), against a
local run of its own with retrieval on (the local knowledge base; `RETRIEVAL=both`, so the model also has
`search_documents`) in JWT mode whose keys this file wrote:

    .tools/venv/bin/python tests/documents/test_documents.py --write-keys DIR   # DIR/key.pem and DIR/jwks.json
    AUTH_MODE=jwt JWKS_FILE=DIR/jwks.json JWT_ISSUER=… JWT_AUDIENCE=… DOCUMENT_ADMIN_GROUP=doc-admins make run
    DOCS_TEST_BASE_URL=http://127.0.0.1:9000 DOCS_TEST_KEY_FILE=DIR/key.pem \\
        .tools/venv/bin/python tests/documents/test_documents.py -v

    DOCS_TEST_ISSUER, DOCS_TEST_AUDIENCE   the run's JWT_ISSUER and JWT_AUDIENCE (defaults: ISSUER and AUDIENCE below)
    DOCS_TEST_ADMIN_GROUP                  the run's DOCUMENT_ADMIN_GROUP (default doc-admins)
    DOCS_TEST_OPENAI_RETRIEVAL=on          the run has OPENAI_RETRIEVAL=on: /v1/chat/completions is checked too

The local model (tests/local-bedrock) answers a grounded question with each passage's first sentence followed by
` [citation]`, a tool result with `NAME returned TEXT`; the local knowledge base searches its passages by their
words (BM25) under the access filter the backend builds from the caller's token (`oid`, `groups`). So each document
here says a made-up word in its first sentence, which no question holds: an answer holding the word found the
document, and a response body (answer, data points, citations, thoughts) holding neither the word nor the file's name
shows nothing of it.
"""

import base64
import json
import os
import sys
import time
import unittest
import urllib.error
import urllib.request
import uuid

ISSUER = os.environ.get("DOCS_TEST_ISSUER", "https://issuer.documents-suite.test")
AUDIENCE = os.environ.get("DOCS_TEST_AUDIENCE", "chat-documents-suite")
ADMIN_GROUP = os.environ.get("DOCS_TEST_ADMIN_GROUP", "doc-admins")
BASE = os.environ.get("DOCS_TEST_BASE_URL", "http://127.0.0.1:9045").rstrip("/")
KEY_FILE = os.environ.get("DOCS_TEST_KEY_FILE", "")
# The run's model, and whether its OpenAI-compatible route is grounded too (OPENAI_RETRIEVAL=on).
MODEL = os.environ.get("DOCS_TEST_MODEL", "local.echo-v1:0")
OPENAI_RETRIEVAL = os.environ.get("DOCS_TEST_OPENAI_RETRIEVAL") == "on"
KID = "documents-suite-1"
TIMEOUT = 60
# How long an upload may take to settle before the test gives up on it (the local knowledge base takes ~0.1 s).
SETTLE_SECONDS = 60

# alice's documents: each one's first sentence holds a word no question and no other file holds.
MD_NAME, MD_WORD = "Rooftop_Apiary_Rota.md", "Vexmorrow"
MD_TEXT = (
    "# Rooftop apiary rota\n\n"
    f"The rooftop apiary hives are inspected every Thursday by the keeper {MD_WORD}. "
    "Smokers and veils are kept in the stairwell cupboard.\n\n"
    "Honey is extracted in September.\n"
)
PDF_NAME, PDF_WORD = "Observatory_Telescope_Log.pdf", "Zanthrope"
PDF_PAGES = [
    f"The observatory telescope is kept by the astronomer {PDF_WORD} on clear nights. The dome opens at dusk.",
    "Lens caps go back in the drawer after each session.",
]
QUESTION = "Who inspects the rooftop apiary hives, and who keeps the observatory telescope?"
TOOL_QUESTION = (
    '[[tool:search_documents {"query":"rooftop apiary hives keeper","top":1}]] '
    "Who inspects the rooftop apiary hives?"
)

# dana's document, for the group leadership.
LEAD_NAME, LEAD_WORD = "Summit_Retreat_Plan.md", "Glimmerholt"
LEAD_TEXT = f"The leadership summit retreat is hosted at the {LEAD_WORD} lodge in the hills. Bring boots.\n"
LEAD_QUESTION = "Where is the leadership summit retreat hosted?"
# And one for everyone.
ALL_NAME, ALL_WORD = "Canteen_Menu.md", "Plumbleberry"
ALL_TEXT = f"The canteen menu this week offers {ALL_WORD} pie on Fridays. Soup is served daily.\n"
ALL_QUESTION = "What pie does the canteen menu offer on Fridays?"

# What the local knowledge base cannot parse: a Word file (it does not parse Word) and a damaged PDF.
DOCX_NAME = "Quarterly_Notes.docx"
DOCX_BYTES = b"PK\x03\x04" + b"\x14\x00\x00\x00\x08\x00" + b"not really a word document" * 4
BROKEN_PDF_NAME = "Damaged_Scan.pdf"
BROKEN_PDF_BYTES = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog /Pag" + b"\x00" * 64


# ---------------------------------------------------------------------------------------------------------------
# Tokens: RS256 JWTs signed with a key this file made, whose public half the run reads from its JWKS file.

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def write_keys(directory):
    """Writes an RSA key (key.pem) and its JWKS (jwks.json, the public key) into `directory`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "key.pem"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    numbers = key.public_key().public_numbers()

    def whole(n):
        return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))

    jwks = {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": KID, "n": whole(numbers.n),
                      "e": whole(numbers.e)}]}
    with open(os.path.join(directory, "jwks.json"), "w") as f:
        json.dump(jwks, f)


def token(sub, groups=()):
    """An access token for `sub` (also its `oid`, as the sample collection's access lists name people) in `groups`."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    with open(KEY_FILE, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": KID}
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "oid": sub, "groups": list(groups), "iat": now,
              "nbf": now - 5, "exp": now + 3600}
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


# ---------------------------------------------------------------------------------------------------------------
# Files.

def simple_pdf(pages):
    """A small valid PDF, one page per text (Helvetica, uncompressed), its cross-reference table at the right
    offsets: what shared/testing's `simple_pdf` writes, which lopdf reads page by page."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               "<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages))),
                                                           len(pages)),
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"]
    for i, text in enumerate(pages):
        objects.append("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
                       f" /Contents {5 + 2 * i} 0 R >>")
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    out = "%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects):
        offsets.append(len(out))
        out += f"{i + 1} 0 obj\n{body}\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n"
    out += "".join(f"{o:010} 00000 n \n" for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return out.encode("latin-1")


def multipart(files, fields=()):
    """A multipart/form-data body: `files` as (name, bytes) parts named `files`, `fields` as (name, text) parts."""
    boundary = f"----documents-suite-{uuid.uuid4().hex}"
    body = b""
    for name, value in fields:
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").encode()
    for name, data in files:
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
                 "Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


# ---------------------------------------------------------------------------------------------------------------
# HTTP.

class Response:
    def __init__(self, status, text):
        self.status = status
        self.text = text

    def json(self):
        return json.loads(self.text)


class User:
    """A signed-in caller of the run."""

    def __init__(self, name, groups=()):
        self.name = name
        self.token = token(name, groups)

    def request(self, method, path, body=None, content_type="application/json", accept=None):
        headers = {"authorization": f"Bearer {self.token}"}
        if body is not None:
            headers["content-type"] = content_type
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
        if accept:
            headers["accept"] = accept
        request = urllib.request.Request(BASE + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
                return Response(r.status, r.read().decode())
        except urllib.error.HTTPError as e:
            return Response(e.code, e.read().decode())

    def upload(self, files, fields=()):
        body, content_type = multipart(files, fields)
        return self.request("POST", "/documents", body, content_type)

    def ask(self, path, question, accept=None):
        r = self.request("POST", path, {"messages": [{"role": "user", "content": question}]}, accept=accept)
        assert r.status == 200, f"{self.name} {path}: {r.status} {r.text}"
        return r


def streamed_text(body):
    """The answer's text of a `/chat/stream` body (JSON lines): its deltas' content joined."""
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    return "".join((line.get("delta") or {}).get("content") or "" for line in lines)


def agents_text(body):
    """What the agents of a `/multi-agent-chat/batch` round said, joined (the user's echoed message left out)."""
    return "\n".join(item.get("Text", "") for message in json.loads(body) if message.get("AuthorName")
                     for item in message.get("Items", []))


def citations_of(answer):
    """A `/chat` answer's `context.data_points.citations`."""
    return ((answer.get("context") or {}).get("data_points") or {}).get("citations") or []


STATUS_ORDER = {"pending": 0, "indexing": 1, "indexed": 2, "failed": 2}


def follow(user, uploaded, started):
    """Polls `GET /documents` until each of `uploaded` (the 201's documents) is settled: the statuses seen of each
    (by id, in order, the 201's first), each one settled as listed, and the seconds from `started` (the upload's
    start, `time.monotonic()`) until each was first seen settled."""
    seen = {d["id"]: [d["status"]] for d in uploaded}
    settled = {}
    seconds = {}
    while len(settled) < len(uploaded):
        assert time.monotonic() - started < SETTLE_SECONDS, f"not settled in {SETTLE_SECONDS} s: {seen}"
        r = user.request("GET", "/documents")
        assert r.status == 200, r.text
        listed = {d["id"]: d for d in r.json()}
        for id in seen:
            if id in settled:
                continue
            assert id in listed, f"{id} is not in {user.name}'s list: {r.text}"
            status = listed[id]["status"]
            if status != seen[id][-1]:
                seen[id].append(status)
            if status in ("indexed", "failed"):
                settled[id] = listed[id]
                seconds[id] = time.monotonic() - started
        time.sleep(0.02)
    return seen, settled, seconds


class Documents(unittest.TestCase):
    """One scenario in steps (unittest runs them in the order of their names): uploads, questions, the admin's
    document, failures, a delete."""

    @classmethod
    def setUpClass(cls):
        cls.alice = User("alice")
        cls.bob = User("bob")
        cls.dana = User("dana", [ADMIN_GROUP])
        cls.lee = User("lee", ["leadership"])
        cls.ids = {}

    # The documents' names and words are nowhere they could leak from but the documents themselves.
    def test_00_the_words_are_only_in_the_documents(self):
        for word in (MD_WORD, PDF_WORD, LEAD_WORD, ALL_WORD):
            for text in (QUESTION, TOOL_QUESTION, LEAD_QUESTION, ALL_QUESTION, MD_NAME, PDF_NAME, LEAD_NAME,
                         ALL_NAME):
                self.assertNotIn(word.lower(), text.lower())
        for name in (MD_NAME, PDF_NAME, LEAD_NAME):
            for text in (QUESTION, TOOL_QUESTION, LEAD_QUESTION):
                self.assertNotIn(name.split(".")[0].lower(), text.lower())

    def test_01_alice_uploads_a_pdf_and_markdown_and_sees_them_indexed(self):
        started = time.monotonic()
        r = self.alice.upload([(PDF_NAME, simple_pdf(PDF_PAGES)), (MD_NAME, MD_TEXT.encode())])
        answered = time.monotonic() - started
        self.assertEqual(r.status, 201, r.text)
        uploaded = r.json()
        self.assertEqual([d["name"] for d in uploaded], [PDF_NAME, MD_NAME], r.text)
        self.assertEqual([d["type"] for d in uploaded], ["pdf", "markdown"], r.text)
        for d in uploaded:
            # Hers alone: her oid, no group.
            self.assertEqual(d["access"], {"oids": ["alice"], "groups": []}, r.text)
            self.assertEqual(d["status"], "pending", r.text)
        seen, settled, seconds = follow(self.alice, uploaded, started)
        for d in uploaded:
            statuses = seen[d["id"]]
            self.assertEqual(statuses[0], "pending", statuses)
            self.assertEqual(statuses[-1], "indexed", f"{d['name']}: {statuses} {settled[d['id']]}")
            self.assertEqual(statuses, sorted(statuses, key=STATUS_ORDER.get), f"not in order: {statuses}")
            self.assertNotIn("reason", settled[d["id"]])
            one = self.alice.request("GET", f"/documents/{d['id']}")
            self.assertEqual(one.status, 200, one.text)
            self.assertEqual(one.json()["status"], "indexed", one.text)
        type(self).ids = {d["name"]: d["id"] for d in uploaded}
        print("\n  seconds from upload to indexed (one upload of two files, its 201 after "
              f"{answered:.2f} s, GET /documents every 20 ms): "
              + ", ".join(f"{d['name']} {seconds[d['id']]:.2f} s ({' → '.join(seen[d['id']])})" for d in uploaded),
              flush=True)

    def assertShowsNothingOf(self, text, names, words, where):
        for leak in [*names, *words]:
            at = text.lower().find(leak.lower())
            self.assertEqual(at, -1, f"{where} shows {leak}: …{text[max(0, at - 300):at + 300]}…")

    def test_02_alice_gets_answers_citing_them_and_bob_nothing_of_them_buffered(self):
        r = self.alice.ask("/chat", QUESTION)
        answer = r.json()
        content = answer["message"]["content"]
        citations = citations_of(answer)
        for name, word in ((MD_NAME, MD_WORD), (PDF_NAME, PDF_WORD)):
            self.assertTrue(any(c.split("#")[0] == name for c in citations), f"{name} not in {citations}")
            self.assertIn(word, content)
        self.assertIn(f"[{MD_NAME}]", content)
        self.assertIn(f"[{PDF_NAME}#page=1]", content)

        r = self.bob.ask("/chat", QUESTION)
        self.assertTrue(r.json()["message"]["content"], r.text)
        # His search runs and finds what he may read (the sample collection's public documents): only hers are out.
        self.assertTrue(citations_of(r.json()), r.text)
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD], "bob's /chat")
        # The Chat UI's standard chat is grounded the same way.
        r = self.bob.ask("/chat-ui/chat", QUESTION, accept="application/json")
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD], "bob's /chat-ui/chat")
        r = self.alice.ask("/chat-ui/chat", QUESTION, accept="application/json")
        self.assertIn(MD_WORD, r.text)

    def test_03_the_same_streamed(self):
        r = self.alice.ask("/chat/stream", QUESTION)
        text = streamed_text(r.text)
        for name, word in ((MD_NAME, MD_WORD), (PDF_NAME, PDF_WORD)):
            self.assertIn(name, text)
            self.assertIn(word, text)
        r = self.bob.ask("/chat/stream", QUESTION)
        self.assertTrue(streamed_text(r.text), r.text)
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD], "bob's /chat/stream")

    def test_04_the_same_through_the_models_search_documents_tool(self):
        def tool_said(answer):
            paragraphs = [p for p in answer["message"]["content"].split("\n\n")
                          if p.startswith("search_documents returned")]
            self.assertEqual(len(paragraphs), 1, answer["message"]["content"])
            return paragraphs[0]

        r = self.alice.ask("/chat", TOOL_QUESTION)
        said = tool_said(r.json())
        self.assertIn(f"[{MD_NAME}]", said)
        self.assertIn(MD_WORD, said)
        titles = [t.get("title") for t in r.json()["context"]["thoughts"]]
        self.assertIn("Tool result: search_documents", titles)

        r = self.bob.ask("/chat", TOOL_QUESTION)
        said = tool_said(r.json())
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD], "bob's search_documents")
        # Streamed too: the tool's thoughts come as lines of their own.
        r = self.bob.ask("/chat/stream", TOOL_QUESTION)
        self.assertIn("search_documents returned", streamed_text(r.text))
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD], "bob's streamed tool")

    def test_05_the_same_in_a_multi_agent_round(self):
        r = self.alice.ask("/multi-agent-chat/batch", QUESTION, accept="application/json")
        said = agents_text(r.text)
        self.assertIn(MD_WORD, said)
        self.assertIn(PDF_WORD, said)
        cited = [c for m in r.json() for c in (m.get("Metadata") or {}).get("Citations") or []]
        self.assertIn(MD_NAME, cited, r.text[:3000])

        r = self.bob.ask("/multi-agent-chat/batch", QUESTION, accept="application/json")
        self.assertTrue(agents_text(r.text), r.text)
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD], "bob's multi-agent round")
        # The streamed round as well.
        r = self.bob.ask("/multi-agent-chat/stream", QUESTION, accept="text/event-stream")
        self.assertIn("data: ", r.text)
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD], "bob's streamed round")

    @unittest.skipUnless(OPENAI_RETRIEVAL, "the run's OPENAI_RETRIEVAL is not on (DOCS_TEST_OPENAI_RETRIEVAL)")
    def test_05a_the_same_through_the_openai_compatible_route(self):
        for stream in (False, True):
            body = {"model": MODEL, "stream": stream, "messages": [{"role": "user", "content": QUESTION}]}
            r = self.alice.request("POST", "/v1/chat/completions", body)
            self.assertEqual(r.status, 200, r.text)
            for leak in (MD_NAME, MD_WORD, PDF_NAME, PDF_WORD):
                self.assertIn(leak, r.text)
            r = self.bob.request("POST", "/v1/chat/completions", body)
            self.assertEqual(r.status, 200, r.text)
            self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [MD_WORD, PDF_WORD],
                                      f"bob's /v1/chat/completions (stream {stream})")

    def test_06_bob_cannot_get_list_or_delete_alices_document(self):
        for id in self.ids.values():
            for method in ("GET", "DELETE"):
                r = self.bob.request(method, f"/documents/{id}")
                self.assertEqual(r.status, 404, f"bob {method} {id}: {r.text}")
                self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [], f"bob's {method}")
            # Still there for her.
            r = self.alice.request("GET", f"/documents/{id}")
            self.assertEqual(r.status, 200, r.text)
            self.assertEqual(r.json()["status"], "indexed", r.text)
        r = self.bob.request("GET", "/documents")
        self.assertEqual(r.status, 200, r.text)
        self.assertShowsNothingOf(r.text, [MD_NAME, PDF_NAME], [], "bob's list")
        # Nor everyone's (he is no administrator).
        r = self.bob.request("GET", "/documents?all=true")
        self.assertEqual(r.status, 403, r.text)

    def test_07_an_admins_document_for_leadership_is_found_by_its_members_only(self):
        # A non-administrator cannot share.
        r = self.bob.upload([(LEAD_NAME, LEAD_TEXT.encode())], [("groups", "leadership")])
        self.assertEqual(r.status, 403, r.text)

        started = time.monotonic()
        r = self.dana.upload([(LEAD_NAME, LEAD_TEXT.encode())], [("groups", "leadership")])
        answered = time.monotonic() - started
        self.assertEqual(r.status, 201, r.text)
        uploaded = r.json()
        self.assertEqual(uploaded[0]["access"], {"oids": [], "groups": ["leadership"]}, r.text)
        seen, settled, seconds = follow(self.dana, uploaded, started)
        self.assertEqual(settled[uploaded[0]["id"]]["status"], "indexed", seen)
        print(f"\n  seconds from upload to indexed (one file, its 201 after {answered:.2f} s): "
              f"{LEAD_NAME} {seconds[uploaded[0]['id']]:.2f} s ({' → '.join(seen[uploaded[0]['id']])})", flush=True)
        # The administrator sees it in everyone's list, with its owner.
        r = self.dana.request("GET", "/documents?all=true")
        self.assertEqual(r.status, 200, r.text)
        self.assertIn(LEAD_NAME, [d["name"] for d in r.json()], r.text)

        r = self.lee.ask("/chat", LEAD_QUESTION)
        answer = r.json()
        self.assertIn(LEAD_NAME, citations_of(answer), r.text)
        self.assertIn(LEAD_WORD, answer["message"]["content"])
        self.assertIn(LEAD_WORD, streamed_text(self.lee.ask("/chat/stream", LEAD_QUESTION).text))

        # Not a member: bob, alice, and dana herself (an administrator shares, she is not in the group).
        for user in (self.bob, self.alice, self.dana):
            for path in ("/chat", "/chat/stream"):
                r = user.ask(path, LEAD_QUESTION)
                self.assertShowsNothingOf(r.text, [LEAD_NAME], [LEAD_WORD], f"{user.name}'s {path}")
        # Nor may lee read or delete the record: it is dana's.
        for method in ("GET", "DELETE"):
            r = self.lee.request(method, f"/documents/{uploaded[0]['id']}")
            self.assertEqual(r.status, 404, r.text)

        # What she marks for everyone, bob finds too: his answers lack the others by their access lists alone.
        r = self.dana.upload([(ALL_NAME, ALL_TEXT.encode())], [("everyone", "true")])
        self.assertEqual(r.status, 201, r.text)
        self.assertEqual(r.json()[0]["access"], {"oids": [], "groups": ["everyone"]}, r.text)
        seen, settled, _ = follow(self.dana, r.json(), time.monotonic())
        self.assertEqual([d["status"] for d in settled.values()], ["indexed"], seen)
        r = self.bob.ask("/chat", ALL_QUESTION)
        self.assertIn(ALL_NAME, citations_of(r.json()), r.text)
        self.assertIn(ALL_WORD, r.json()["message"]["content"])

    def test_08_what_the_knowledge_base_cannot_parse_ends_failed_with_a_reason(self):
        r = self.alice.upload([(DOCX_NAME, DOCX_BYTES), (BROKEN_PDF_NAME, BROKEN_PDF_BYTES)])
        self.assertEqual(r.status, 201, r.text)
        uploaded = r.json()
        seen, settled, _ = follow(self.alice, uploaded, time.monotonic())
        for d in uploaded:
            got = settled[d["id"]]
            self.assertEqual(got["status"], "failed", f"{d['name']}: {seen[d['id']]} {got}")
            reason = got.get("reason") or ""
            # A sentence a person reads: words, naming the file, ending in a full stop; no stack or bare code.
            self.assertGreaterEqual(len(reason.split()), 6, reason)
            self.assertIn(d["name"], reason)
            self.assertTrue(reason.rstrip().endswith((".", ")")), reason)
            for code in ("Exception", "panicked", "backtrace", "Error {", "at src/"):
                self.assertNotIn(code, reason)
            print(f"\n  {d['name']}: {' → '.join(seen[d['id']])}: {reason}", flush=True)
        # A failed document shows in no answer.
        r = self.alice.ask("/chat", "What are the quarterly notes and the damaged scan about?")
        self.assertShowsNothingOf(r.text, [DOCX_NAME, BROKEN_PDF_NAME], [], "alice's answer")

    def test_09_a_delete_removes_the_document_from_answers(self):
        r = self.alice.request("DELETE", f"/documents/{self.ids[MD_NAME]}")
        self.assertEqual(r.status, 204, r.text)
        r = self.alice.request("GET", f"/documents/{self.ids[MD_NAME]}")
        self.assertEqual(r.status, 404, r.text)
        r = self.alice.request("GET", "/documents")
        self.assertNotIn(MD_NAME, [d["name"] for d in r.json()], r.text)
        for path in ("/chat", "/chat/stream"):
            r = self.alice.ask(path, QUESTION)
            self.assertShowsNothingOf(r.text, [MD_NAME], [MD_WORD], f"alice's {path} after the delete")
            # Her other document is still found.
            self.assertIn(PDF_WORD, r.text)
        r = self.alice.ask("/chat", TOOL_QUESTION)
        self.assertShowsNothingOf(r.text, [MD_NAME], [MD_WORD], "alice's search_documents after the delete")


class KeptResponses(unittest.TestCase):
    """The Responses API's kept responses through OpenAI's Python SDK, each signed-in caller's own (issue 50): bob's
    retrieve, input items, continuation and delete of alice's response are the SDK's NotFoundError, as for an id
    never kept, and alice's response is still hers after them."""

    def test_another_callers_response_is_not_found(self):
        from openai import NotFoundError, OpenAI

        def client(name):
            return OpenAI(base_url=f"{BASE}/v1", api_key=User(name).token, timeout=TIMEOUT, max_retries=0)

        alice, bob = client("alice"), client("bob")
        kept = alice.responses.create(model=MODEL, input="Keep this for me.", store=True)
        self.assertTrue(kept.store)
        self.assertEqual(alice.responses.retrieve(kept.id).id, kept.id)
        attempts = {
            "retrieve": lambda: bob.responses.retrieve(kept.id),
            "input_items": lambda: bob.responses.input_items.list(kept.id),
            "previous_response_id": lambda: bob.responses.create(
                model=MODEL, input="And then?", previous_response_id=kept.id),
            "delete": lambda: bob.responses.delete(kept.id),
        }
        for what, attempt in attempts.items():
            with self.subTest(what), self.assertRaises(NotFoundError):
                attempt()
        self.assertEqual(alice.responses.retrieve(kept.id).id, kept.id)
        alice.responses.delete(kept.id)
        with self.assertRaises(NotFoundError):
            alice.responses.retrieve(kept.id)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-keys"]:
        write_keys(sys.argv[2])
        sys.exit(0)
    if not KEY_FILE:
        sys.exit("DOCS_TEST_KEY_FILE: the key.pem written by --write-keys")
    unittest.main()
