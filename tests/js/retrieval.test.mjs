// Retrieval (answers grounded in a knowledge base) against the local run at CHAT_BASE_URL.
//
// With CHAT_RETRIEVAL=on (tests/suites.py's `retrieval` section: a local run whose local knowledge base serves
// samples/knowledge-base as LOCALKB001, with LOCAL_USER=alice and KNOWLEDGE_BASE_TIMEOUT_MS=5000), it checks the
// contract of README.md's "Grounding answers in your documents": `context.data_points` and the search thoughts in
// both protocol versions, buffered and streamed (the first line, before any text), the official client, every
// retrieval override and its validation, the knowledge base's faults as statuses, and the Chat UI's
// `Metadata.Citations`. CHAT_KB_URL (the local knowledge base's address) lets it also read what the knowledge base
// was asked (`GET /__local/requests`).
//
// Without it (the conformance section's run, retrieval off), it checks that nothing of retrieval shows: no
// `data_points`, no search thoughts, and the retrieval overrides still checked (valid ones accepted, invalid 400).
//
// The local model answers a grounded prompt with each passage's first sentence followed by ` [citation]`, and
// writes a search query as the question without its directives (it keeps `[[kb-…]]` ones, which are for the local
// knowledge base: `[[kb-fault:throttle]]`, `[[kb-delay-ms:N]]` …).
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { AIChatProtocolClient } from "@microsoft/ai-chat-protocol";

const base = (process.env.CHAT_BASE_URL ?? "http://127.0.0.1:9000").replace(/\/+$/, "");
const retrieval = process.env.CHAT_RETRIEVAL === "on";
const kbUrl = process.env.CHAT_KB_URL?.replace(/\/+$/, "");
const localUser = process.env.CHAT_LOCAL_USER ?? "alice";
const maxTop = Number(process.env.CHAT_MAX_TOP ?? "20");
/** KNOWLEDGE_BASE_TIMEOUT_MS of the run under test. */
const kbTimeoutMs = Number(process.env.CHAT_KB_TIMEOUT_MS ?? "5000");

const DENTAL = "What does the dental plan cover?";
/** The document of the sample collection that answers DENTAL (paged: its citations carry `#page=N`). */
const DENTAL_DOC = "Benefit_Options.md";
const GENERIC_ERROR = "The app encountered an error processing your request.";
const SEARCH_TITLES = ["Search using generated search query", "Search using user query"];

const user = (content) => ({ role: "user", content });
/** A word no other request uses, to find this request among what the knowledge base received. */
const marker = () => `zq${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;

async function post(path, body, headers = {}) {
  const response = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text };
}

function json(r) {
  try {
    return JSON.parse(r.text);
  } catch {
    assert.fail(`the body is not JSON (status ${r.status}): ${JSON.stringify(r.text.slice(0, 500))}`);
  }
}

/** A JSON-lines body as its objects (every line ends in `\n`). */
function lines(r) {
  assert.ok(r.text.endsWith("\n"), `the last line does not end in \\n: ${JSON.stringify(r.text.slice(-200))}`);
  return r.text.slice(0, -1).split("\n").map((line) => JSON.parse(line));
}

/** POST /chat, 2024-05-29, expecting 200: the parsed answer. */
async function chat(question, overrides, extra = {}) {
  const body = { messages: [user(question)], ...extra };
  if (overrides) body.context = { overrides };
  const r = await post("/chat", body);
  assert.equal(r.status, 200, r.text);
  return json(r);
}

/** `data_points` as a grounded answer must hold them: `text` entries `<citation>: <passage>`, each citation named. */
function checkDataPoints(dp, where) {
  assert.ok(dp && typeof dp === "object", `${where}: no context.data_points`);
  assert.ok(Array.isArray(dp.text), `${where}: data_points.text is not an array: ${JSON.stringify(dp)}`);
  assert.ok(Array.isArray(dp.citations), `${where}: data_points.citations is not an array: ${JSON.stringify(dp)}`);
  for (const citation of dp.citations) {
    assert.equal(typeof citation, "string");
    assert.match(citation, /^[^\s/]+\.(md|txt)(#page=\d+)?$/, `${where}: a citation is a file name (#page=N)`);
  }
  for (const entry of dp.text) {
    assert.ok(
      dp.citations.some((c) => entry.startsWith(`${c}: `)),
      `${where}: "${entry.slice(0, 80)}…" does not start with one of the citations ${JSON.stringify(dp.citations)}`,
    );
  }
  for (const citation of dp.citations) {
    assert.ok(dp.text.some((t) => t.startsWith(`${citation}: `)), `${where}: ${citation} has no passage in text`);
  }
  return dp;
}

/** The dental question's data points name Benefit_Options.md (by page), and the answer cites it in brackets. */
function checkDental(dp, answer, where) {
  checkDataPoints(dp, where);
  assert.ok(dp.citations.length >= 1, `${where}: no passage found for the dental question`);
  const first = dp.citations[0];
  assert.match(first, new RegExp(`^${DENTAL_DOC.replace(".", "\\.")}#page=\\d+$`), `${where}: the best passage`);
  assert.ok(answer.includes(`[${first}]`), `${where}: the answer does not cite [${first}]: ${answer}`);
}

const titles = (thoughts) => thoughts.map((t) => t.title);

/** The search thoughts: the query (with its settings), then the results, all before the answer's prompt. */
function checkSearchThoughts(thoughts, where) {
  const t = titles(thoughts);
  const search = thoughts.find((x) => SEARCH_TITLES.includes(x.title));
  assert.ok(search, `${where}: no search thought in ${JSON.stringify(t)}`);
  assert.equal(typeof search.description, "string", `${where}: the search thought's description is the query`);
  assert.match(search.description, /dental/i, `${where}: the query`);
  assert.ok(search.props && typeof search.props === "object", `${where}: the search's settings`);
  for (const key of ["top", "retrieval_mode", "search_type"]) {
    assert.ok(key in search.props, `${where}: the search thought's props lack ${key}: ${JSON.stringify(search.props)}`);
  }
  assert.ok("filters" in search.props, `${where}: the search thought's props lack filters`);
  const results = thoughts.find((x) => x.title === "Search results");
  assert.ok(results, `${where}: no "Search results" thought in ${JSON.stringify(t)}`);
  assert.ok(Array.isArray(results.description), `${where}: the results are a list`);
  for (const r of results.description) {
    assert.equal(typeof r.citation, "string", `${where}: a result's citation`);
    assert.equal(typeof r.text, "string", `${where}: a result's text`);
    assert.equal(typeof r.score, "number", `${where}: a result's score`);
  }
  const answerAt = t.indexOf("Prompt to generate answer");
  assert.ok(answerAt > t.indexOf(results.title), `${where}: the search comes before the answer's prompt: ${t}`);
  assert.ok(t.indexOf(search.title) < t.indexOf(results.title), `${where}: the query before its results: ${t}`);
  if (search.title === "Search using generated search query") {
    const rewrite = t.indexOf("Prompt to generate search query");
    assert.ok(rewrite >= 0 && rewrite < t.indexOf(search.title), `${where}: the rewrite's prompt comes first: ${t}`);
  }
  return { search, results };
}

/** What the local knowledge base received for the request whose query holds `word`. */
async function kbRequestsWith(word) {
  const r = await fetch(`${kbUrl}/__local/requests`);
  const all = await r.json();
  return all.filter((q) => (q.body?.retrievalQuery?.text ?? "").includes(word));
}

const dataPointsOf = (answer) => answer.context?.data_points;

// ------------------------------------------------------------------------------------------------ retrieval off
describe("with retrieval off", { skip: retrieval && "the run under test has retrieval on" }, () => {
  test("answers carry no data_points and no search thoughts, in either version", async () => {
    const a = await chat(DENTAL);
    assert.equal(a.context.data_points, undefined, JSON.stringify(a.context));
    assert.ok(!titles(a.context.thoughts).some((t) => t.startsWith("Search")), JSON.stringify(a.context.thoughts));
    const r = await post("/chat", { messages: [user(DENTAL)], stream: false });
    assert.equal(r.status, 200, r.text);
    assert.equal(json(r).choices[0].context.data_points, undefined);
    const s = await post("/chat/stream", { messages: [user(DENTAL)] });
    assert.equal(s.status, 200, s.text);
    for (const line of lines(s)) assert.equal(line.context?.data_points, undefined);
  });

  test("the retrieval overrides are accepted (and change nothing)", async () => {
    const a = await chat(DENTAL, {
      top: 2,
      retrieval_mode: "vectors",
      minimum_search_score: 0.5,
      exclude_category: "benefits",
      use_oid_security_filter: true,
      use_groups_security_filter: true,
    });
    assert.equal(a.message.content, `Echo: ${DENTAL}`);
    assert.equal(a.context.data_points, undefined);
  });

  test("invalid retrieval overrides are still a 400 naming the field", async () => {
    await checkInvalidOverrides();
  });
});

/** Each invalid retrieval override, in both versions: 400 `{"error": "context.overrides.<field>: …"}`. */
async function checkInvalidOverrides() {
  const cases = [
    ["top", 0],
    ["top", maxTop + 1],
    ["top", "3"],
    ["top", 2.5],
    ["retrieval_mode", "bm25"],
    ["retrieval_mode", 1],
    ["minimum_search_score", -0.1],
    ["minimum_search_score", 1.5],
    ["minimum_search_score", "high"],
    ["exclude_category", 5],
    ["use_oid_security_filter", "yes"],
    ["use_groups_security_filter", 1],
  ];
  for (const [field, value] of cases) {
    for (const extra of [{}, { stream: false }]) {
      const r = await post("/chat", { messages: [user(DENTAL)], context: { overrides: { [field]: value } }, ...extra });
      const what = `${field}=${JSON.stringify(value)}${extra.stream === false ? " (2024-01-28)" : ""}`;
      assert.equal(r.status, 400, `${what}: ${r.status} ${r.text}`);
      const error = json(r).error;
      assert.equal(typeof error, "string", `${what}: ${r.text}`);
      assert.ok(error.startsWith(`context.overrides.${field}: `), `${what}: the error names the field: ${error}`);
    }
  }
  // And on the stream, before any line.
  const r = await post("/chat/stream", { messages: [user(DENTAL)], context: { overrides: { top: 0 } } });
  assert.equal(r.status, 400, r.text);
  assert.ok(json(r).error.startsWith("context.overrides.top: "), r.text);
}

// ------------------------------------------------------------------------------------------------- retrieval on
describe("with retrieval on", { skip: !retrieval && "set CHAT_RETRIEVAL=on against a run with a knowledge base" }, () => {
  test("/chat 2024-05-29: data_points name the document, the answer cites it, thoughts show the search", async () => {
    const a = await chat(DENTAL);
    checkDental(dataPointsOf(a), a.message.content, "/chat 2024-05-29");
    const { search, results } = checkSearchThoughts(a.context.thoughts, "/chat 2024-05-29");
    assert.equal(search.props.top, 3, "the default top");
    assert.equal(results.description.length, a.context.data_points.text.length, "one result per passage");
    assert.deepEqual(
      [...new Set(results.description.map((r) => r.citation))].sort(),
      [...new Set(a.context.data_points.citations)].sort(),
    );
    // The answer's prompt holds the passages under their citations.
    const prompt = a.context.thoughts.find((t) => t.title === "Prompt to generate answer");
    assert.ok(JSON.stringify(prompt.description).includes(a.context.data_points.citations[0]), "the prompt cites");
  });

  test("/chat 2024-01-28: choices[0].context.data_points, buffered and as json-lines", async () => {
    const r = await post("/chat", { messages: [user(DENTAL)], stream: false });
    assert.equal(r.status, 200, r.text);
    const completion = json(r);
    const choice = completion.choices[0];
    checkDental(choice.context.data_points, choice.message.content, "/chat 2024-01-28");
    checkSearchThoughts(choice.context.thoughts, "/chat 2024-01-28");

    const l = await post("/chat", { messages: [user(DENTAL)], stream: true });
    assert.equal(l.status, 200, l.text);
    const chunks = lines(l);
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    checkDental(chunks[0].choices[0].context?.data_points, text, "/chat 2024-01-28 stream:true, first chunk");
  });

  test("/chat/stream 2024-05-29: the first line's context has data_points, before any text", async () => {
    const r = await post("/chat/stream", { messages: [user(DENTAL)] });
    assert.equal(r.status, 200, r.text);
    const all = lines(r);
    assert.equal(all[0].delta?.role, "assistant");
    assert.equal(all[0].delta?.content, undefined, "no text in the first line");
    const text = all.map((l) => l.delta?.content ?? "").join("");
    checkDental(all[0].context?.data_points, text, "/chat/stream first line");
    checkSearchThoughts(all[0].context.thoughts, "/chat/stream first line");
    for (const line of all.slice(1)) assert.equal(line.context?.data_points, undefined, "data_points only once");
  });

  test("/chat/stream 2024-01-28: the first chunk's context has data_points, before any text", async () => {
    const r = await post("/chat/stream", { messages: [user(DENTAL)], stream: true });
    assert.equal(r.status, 200, r.text);
    const chunks = lines(r);
    const first = chunks[0].choices[0];
    assert.equal(first.delta?.content ?? undefined, undefined, "no text in the first chunk");
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    checkDental(first.context?.data_points, text, "/chat/stream 2024-01-28 first chunk");
  });

  test("the official client sees data_points in getCompletion and on its first streamed chunk", async () => {
    const client = new AIChatProtocolClient(`${base}/chat`);
    const answer = await client.getCompletion([user(DENTAL)]);
    checkDental(answer.context.data_points, answer.message.content, "getCompletion");
    const chunks = [];
    for await (const chunk of await client.getStreamedCompletion([user(DENTAL)])) chunks.push(chunk);
    const text = chunks.map((c) => c.delta?.content ?? "").join("");
    checkDental(chunks[0].context?.data_points, text, "getStreamedCompletion's first chunk");
  });

  test("top: 1 retrieves one passage, and the knowledge base is asked for one", async () => {
    const word = marker();
    const a = await chat(`${DENTAL} ${word}`, { top: 1 });
    checkDataPoints(a.context.data_points, "top=1");
    assert.equal(a.context.data_points.text.length, 1, JSON.stringify(a.context.data_points));
    assert.equal(a.context.data_points.citations.length, 1);
    const { search } = checkSearchThoughts(a.context.thoughts, "top=1");
    assert.equal(search.props.top, 1);
    if (kbUrl) {
      const sent = await kbRequestsWith(word);
      assert.equal(sent.length, 1, `one search per turn: ${JSON.stringify(sent)}`);
      assert.equal(sent[0].knowledgeBaseId, "LOCALKB001");
      assert.equal(sent[0].body.retrievalConfiguration.vectorSearchConfiguration.numberOfResults, 1);
    }
    const most = await chat(DENTAL, { top: maxTop });
    checkDataPoints(most.context.data_points, `top=${maxTop}`);
  });

  test("retrieval_mode: hybrid, vectors and text are accepted and searched as HYBRID, SEMANTIC, HYBRID", async () => {
    for (const [mode, searchType] of [["hybrid", "HYBRID"], ["vectors", "SEMANTIC"], ["text", "HYBRID"]]) {
      const word = marker();
      const a = await chat(`${DENTAL} ${word}`, { retrieval_mode: mode });
      checkDental(a.context.data_points, a.message.content, `retrieval_mode=${mode}`);
      const { search } = checkSearchThoughts(a.context.thoughts, `retrieval_mode=${mode}`);
      assert.equal(search.props.retrieval_mode, mode);
      assert.equal(search.props.search_type, searchType);
      if (mode === "text") {
        // The knowledge base has no text-only search: a thought says what was done instead.
        assert.match(JSON.stringify(a.context.thoughts), /HYBRID/);
      }
      if (kbUrl) {
        const [sent] = await kbRequestsWith(word);
        assert.equal(sent?.body.retrievalConfiguration.vectorSearchConfiguration.overrideSearchType, searchType);
      }
    }
  });

  test("exclude_category drops that category's documents (a notEquals filter)", async () => {
    const word = marker();
    const a = await chat(`${DENTAL} ${word}`, { exclude_category: "benefits" });
    checkDataPoints(a.context.data_points, "exclude_category");
    assert.ok(
      !a.context.data_points.citations.some((c) => c.startsWith(DENTAL_DOC)),
      `benefits excluded: ${JSON.stringify(a.context.data_points.citations)}`,
    );
    if (kbUrl) {
      const [sent] = await kbRequestsWith(word);
      assert.match(JSON.stringify(sent?.body.retrievalConfiguration.vectorSearchConfiguration.filter), /notEquals/);
    }
  });

  test("minimum_search_score drops passages scoring lower; 1 leaves none", async () => {
    const some = await chat(DENTAL, { minimum_search_score: 0.8 });
    const { results } = checkSearchThoughts(some.context.thoughts, "minimum_search_score=0.8");
    for (const r of results.description) assert.ok(r.score >= 0.8, `score ${r.score} kept`);

    const none = await chat(DENTAL, { minimum_search_score: 1 });
    const dp = none.context.data_points;
    assert.deepEqual(dp?.text ?? [], [], JSON.stringify(dp));
    assert.deepEqual(dp?.citations ?? [], []);
    assert.ok(!/\[[^\]]+\.md(#page=\d+)?\]/.test(none.message.content), `nothing to cite: ${none.message.content}`);
  });

  test("document access is the server's: the local user (alice) reads her review and what is for everyone, never another's", async () => {
    const question = "What did the salary review decide about the merit increase?";
    const restrictedToOthers = ["Payroll_Bob", "Engineering_Roadmap", "Board_Minutes"];
    const noneOfOthers = (cites, what) =>
      assert.ok(!cites.some((c) => restrictedToOthers.some((r) => c.startsWith(r))), `${what}: ${JSON.stringify(cites)}`);
    // No overrides, or both false: everything alice may read (her review, the documents for everyone), nothing else.
    for (const [what, overrides] of [
      ["no overrides", undefined],
      ["both false", { use_oid_security_filter: false, use_groups_security_filter: false }],
      ["both true", { use_oid_security_filter: true, use_groups_security_filter: true }],
    ]) {
      const r = await chat(question, overrides);
      const cites = checkDataPoints(r.context.data_points, what).citations;
      assert.ok(cites.includes("Salary_Review_Alice.md"), `${what}: alice's own review is found: ${JSON.stringify(cites)}`);
      noneOfOthers(cites, what);
      const search = r.context.thoughts.find((t) => SEARCH_TITLES.includes(t.title));
      assert.equal(search.props.document_access, "enforced");
      assert.deepEqual(search.props.filters, {
        orAll: [
          { listContains: { key: "oids", value: localUser } },
          { listContains: { key: "groups", value: "everyone" } },
        ],
      }, `${what}: the filter the server built`);
    }
    const payroll = await chat("What is Bob's monthly salary on the payroll?", { top: maxTop });
    noneOfOthers(payroll.context.data_points?.citations ?? [], "Bob's payroll asked for");
    // The oid filter alone narrows to what names her: her review only.
    const mine = await chat(question, { use_oid_security_filter: true });
    const cites = checkDataPoints(mine.context.data_points, "use_oid_security_filter").citations;
    assert.ok(cites.length >= 1, `Alice's own review is found (LOCAL_USER=${localUser})`);
    assert.ok(cites.every((c) => c === "Salary_Review_Alice.md"), JSON.stringify(cites));
    // The groups filter alone: AUTH_MODE=none gives no groups but the everyone group, so no group-restricted
    // document, and not her review either.
    const groups = await chat("What is on the engineering roadmap?", { use_groups_security_filter: true });
    const g = groups.context.data_points?.citations ?? [];
    noneOfOthers(g, "use_groups_security_filter");
    assert.ok(!g.includes("Salary_Review_Alice.md"), JSON.stringify(g));
  });

  test("invalid retrieval overrides are a 400 naming the field", async () => {
    await checkInvalidOverrides();
  });

  test("the knowledge base's faults: throttled 429, not found and access denied 500 (generic), slow 504", async () => {
    const throttled = await post("/chat", { messages: [user(`${DENTAL} [[kb-fault:throttle]]`)] });
    assert.equal(throttled.status, 429, throttled.text);
    assert.equal(typeof json(throttled).error, "string");

    for (const fault of ["not-found", "access-denied"]) {
      const r = await post("/chat", { messages: [user(`${DENTAL} [[kb-fault:${fault}]]`)] });
      assert.equal(r.status, 500, `${fault}: ${r.text}`);
      const error = json(r).error;
      assert.ok(error.startsWith(GENERIC_ERROR), `${fault}: the generic message, no details: ${error}`);
      assert.ok(!/knowledge|LOCALKB|Resource|AccessDenied/i.test(error), `${fault}: no details: ${error}`);
    }

    const unavailable = await post("/chat", { messages: [user(`${DENTAL} [[kb-fault:unavailable]]`)] });
    assert.equal(unavailable.status, 503, unavailable.text);

    const slow = await post("/chat", { messages: [user(`${DENTAL} [[kb-delay-ms:${kbTimeoutMs + 3000}]]`)] });
    assert.equal(slow.status, 504, slow.text);

    // On the stream the search comes before the first line, so its fault is the response's status.
    const streamed = await post("/chat/stream", { messages: [user(`${DENTAL} [[kb-fault:throttle]]`)] });
    assert.equal(streamed.status, 429, streamed.text);
    const v1 = await post("/chat", { messages: [user(`${DENTAL} [[kb-fault:access-denied]]`)], stream: false });
    assert.equal(v1.status, 500, v1.text);
    assert.ok(json(v1).error.startsWith(GENERIC_ERROR));
  });

  test("the Chat UI's answer carries Metadata.Citations and cites them", async () => {
    const r = await post("/chat-ui/chat", { messages: [user(DENTAL)] }, { accept: "application/json" });
    assert.equal(r.status, 200, r.text);
    const body = json(r);
    // CHAT_UI_REPLY=spec (the default): an array of one ChatMessageContent.
    const message = Array.isArray(body) ? body[0] : body.messages?.[0];
    assert.ok(message, r.text);
    if (Array.isArray(body)) {
      const citations = message.Metadata?.Citations;
      assert.ok(Array.isArray(citations) && citations.length >= 1, `Metadata.Citations: ${r.text}`);
      assert.match(citations[0], /^Benefit_Options\.md#page=\d+$/);
      assert.ok(message.Items[0].Text.includes(`[${citations[0]}]`), message.Items[0].Text);
    } else {
      // CHAT_UI_REPLY=messages: the citations on the message object.
      assert.ok(Array.isArray(message.citations) && message.citations.length >= 1, r.text);
      assert.ok(message.content.includes(`[${message.citations[0]}]`), message.content);
    }
  });
});
