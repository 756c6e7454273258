// Raw HTTP against CHAT_BASE_URL: both versions of the AI Chat Protocol (2024-05-29 and 2024-01-28), both
// spellings of session state, JSON and JSON lines, sessions across turns, and every kind of error, byte for byte
// where the contract says exactly what to send. The local model answers `Echo: <last user message>` (one word per
// streamed delta) and obeys directives such as [[deltas:N]], [[delay-ms:N]], [[stream-error-after:N]], [[fault:…]].
import { test } from "node:test";
import assert from "node:assert/strict";

const base = (process.env.CHAT_BASE_URL ?? "http://127.0.0.1:9000").replace(/\/+$/, "");

/** A marker no other run or test uses, to find this test's own chats in a shared database. */
const unique = (label) => `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
const user = (content) => ({ role: "user", content });
const assistant = (content) => ({ role: "assistant", content });
/** A chat id that no one has: 32 hex digits, the shape the local run uses. */
const strangerId = () =>
  Array.from({ length: 32 }, () => Math.floor(Math.random() * 16).toString(16)).join("");

/** Sends a request and reads the whole body; `body` is JSON-encoded unless `raw` is given. */
async function send(method, path, { body, raw, contentType = "application/json", headers = {} } = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined || raw !== undefined) {
    init.headers["content-type"] = contentType;
    init.body = raw ?? JSON.stringify(body);
  }
  const response = await fetch(base + path, init);
  const text = await response.text();
  return { status: response.status, headers: response.headers, text };
}
const post = (path, body, options = {}) => send("POST", path, { body, ...options });

function parse(r) {
  try {
    return JSON.parse(r.text);
  } catch {
    assert.fail(`the body is not JSON (status ${r.status}): ${JSON.stringify(r.text)}`);
  }
}

/** The media type of a response, without parameters. */
const mediaType = (r) => (r.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();

/** A JSON-lines body: every line ends in `\n`, none is empty, each is one JSON object. */
function jsonLines(text) {
  assert.ok(text.length > 0, "an empty body");
  assert.ok(text.endsWith("\n"), `the last line does not end in \\n: ${JSON.stringify(text.slice(-80))}`);
  const lines = text.slice(0, -1).split("\n");
  return lines.map((line, i) => {
    assert.notEqual(line.trim(), "", `line ${i} is empty`);
    let value;
    try {
      value = JSON.parse(line);
    } catch {
      assert.fail(`line ${i} is not JSON: ${JSON.stringify(line)}`);
    }
    assert.equal(typeof value, "object", `line ${i} is not an object`);
    assert.ok(value !== null && !Array.isArray(value), `line ${i} is not an object`);
    return value;
  });
}

/** Reads a streamed body as it arrives: each line with the time (ms from the request) its last byte came. */
async function streamLines(path, body) {
  const started = performance.now();
  const response = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const lines = [];
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      lines.push({ at: performance.now() - started, text: buffer.slice(0, newline) });
      buffer = buffer.slice(newline + 1);
    }
  }
  buffer += decoder.decode();
  return { status: response.status, headers: response.headers, lines, rest: buffer };
}

/** An error answer: the status, JSON, exactly `{"error": "<message>"}`; `message` a string or a RegExp. */
function assertError(r, status, message) {
  assert.equal(r.status, status, `status of ${JSON.stringify(r.text)}`);
  assert.equal(mediaType(r), "application/json");
  const body = parse(r);
  assert.deepEqual(Object.keys(body), ["error"], `an error body is {"error": …}: ${r.text}`);
  assert.equal(typeof body.error, "string");
  assert.ok(body.error.trim().length > 0, "the error message is empty");
  if (message instanceof RegExp) assert.match(body.error, message);
  else if (message !== undefined) assert.equal(body.error, message);
  return body.error;
}

/** The protocol's thoughts: a list of {title, description, props?} telling what the backend did. */
function assertThoughts(thoughts, where) {
  assert.ok(Array.isArray(thoughts), `${where}: context.thoughts is a list`);
  assert.ok(thoughts.length > 0, `${where}: context.thoughts is empty`);
  for (const t of thoughts) {
    assert.equal(typeof t.title, "string", `${where}: a thought without a title: ${JSON.stringify(t)}`);
    assert.ok(t.title.length > 0);
    assert.ok("description" in t, `${where}: a thought without a description: ${JSON.stringify(t)}`);
  }
}

const contentOf = (chunks) =>
  chunks
    .map((c) => c.delta?.content)
    .filter((c) => c !== undefined && c !== null)
    .join("");

async function historyMessages(id) {
  const r = await send("GET", `/chat-history/${id}/messages`);
  assert.equal(r.status, 200, r.text);
  return parse(r);
}

// ---------------------------------------------------------------------------------------------------------------
// 2024-05-29

test("POST /chat (2024-05-29) answers {message, context, sessionState} as application/json", async () => {
  const question = unique("what is new");
  const r = await post("/chat", { messages: [user(question)], context: {} });
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/json");
  const body = parse(r);
  assert.deepEqual(Object.keys(body).sort(), ["context", "message", "sessionState"]);
  assert.deepEqual(body.message, { role: "assistant", content: `Echo: ${question}` });
  assert.equal(typeof body.sessionState, "string", "a new chat's id is the session state");
  assert.ok(body.sessionState.length > 0);
  assertThoughts(body.context.thoughts, "/chat");
  // The thoughts tell the prompt sent to the model (it holds the question), the model and the token usage.
  assert.ok(
    body.context.thoughts.some((t) => JSON.stringify(t.description).includes(question)),
    "no thought shows the prompt",
  );
  assert.ok(
    body.context.thoughts.some((t) => typeof t.props?.model === "string" && t.props.model.length > 0),
    "no thought names the model",
  );
  assert.ok(
    body.context.thoughts.some((t) => /token/i.test(t.title) || /token/i.test(JSON.stringify(t.props ?? {}))),
    "no thought tells the token usage",
  );
});

test("the response spells session state as the request did (sessionState, session_state, camelCase by default)", async () => {
  // Neither spelling: camelCase.
  let body = parse(await post("/chat", { messages: [user("spelling none")] }));
  assert.ok("sessionState" in body && !("session_state" in body), JSON.stringify(body));
  // session_state (null: a new chat) on /chat: answered as session_state.
  const r = await post("/chat", { messages: [user("spelling snake")], session_state: null });
  assert.equal(r.status, 200, r.text);
  body = parse(r);
  assert.ok(!("sessionState" in body), `sessionState in a session_state answer: ${r.text}`);
  assert.equal(typeof body.session_state, "string");
  const id = body.session_state;
  // Continuing with session_state keeps the spelling and the chat.
  body = parse(await post("/chat", { messages: [user("spelling snake again")], session_state: id }));
  assert.equal(body.session_state, id);
  assert.ok(!("sessionState" in body));
  // sessionState on the same chat: camelCase again.
  body = parse(await post("/chat", { messages: [user("spelling camel")], sessionState: id }));
  assert.equal(body.sessionState, id);
  assert.ok(!("session_state" in body));
  // And on /chat/stream: the first line carries the spelling of the request.
  const snake = jsonLines((await post("/chat/stream", { messages: [user("x")], session_state: id })).text);
  assert.equal(snake[0].session_state, id);
  assert.ok(!("sessionState" in snake[0]), JSON.stringify(snake[0]));
  const camel = jsonLines((await post("/chat/stream", { messages: [user("y")], sessionState: id })).text);
  assert.equal(camel[0].sessionState, id);
  assert.ok(!("session_state" in camel[0]), JSON.stringify(camel[0]));
});

test("a request with both sessionState and session_state is a 400 naming them", async () => {
  for (const path of ["/chat", "/chat/stream"]) {
    for (const body of [
      { messages: [user("both")], sessionState: null, session_state: null },
      { messages: [user("both")], sessionState: "a", session_state: "a" },
      { messages: [user("both")], sessionState: null, session_state: null, stream: false },
    ]) {
      const r = await post(path, body);
      assertError(r, 400, /session_?state/i);
      assert.match(parse(r).error, /sessionState/);
      assert.match(parse(r).error, /session_state/);
    }
  }
});

test("POST /chat/stream (2024-05-29) answers application/jsonl: a role line, then content deltas", async () => {
  const question = unique("stream me");
  const r = await post("/chat/stream", { messages: [user(question)], context: {} });
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/jsonl");
  const lines = jsonLines(r.text);
  assert.ok(lines.length >= 3, `a role line and content lines: ${r.text}`);
  // First: {"delta":{"role":"assistant"},"context":…,"sessionState":…}
  const [first, ...rest] = lines;
  assert.deepEqual(first.delta, { role: "assistant" });
  assertThoughts(first.context?.thoughts, "first line");
  assert.equal(typeof first.sessionState, "string");
  assert.ok(!("session_state" in first));
  // Then {"delta":{"content":"…"}} lines (a last line may carry context learned at the end, with no content).
  const contentLines = rest.filter((l) => l.delta?.content !== undefined);
  assert.ok(contentLines.length >= 2, "the answer comes in deltas, one per word");
  for (const line of rest) {
    assert.equal(typeof line.delta, "object", `a line without delta: ${JSON.stringify(line)}`);
    assert.ok(!("error" in line), `an error line: ${JSON.stringify(line)}`);
    assert.ok(!("role" in line.delta) || line.delta.role === "assistant");
  }
  for (const line of contentLines) {
    assert.equal(typeof line.delta.content, "string");
    assert.deepEqual(Object.keys(line), ["delta"], `a content line is {"delta":{"content":…}}: ${JSON.stringify(line)}`);
  }
  // The deltas concatenate to the answer /chat gives for the same conversation.
  const buffered = parse(await post("/chat", { messages: [user(question)] }));
  assert.equal(contentOf(lines), buffered.message.content);
  assert.equal(contentOf(lines), `Echo: ${question}`);
});

test("POST /chat/stream flushes each line as the model produces it", async () => {
  const s = await streamLines("/chat/stream", { messages: [user("[[deltas:6]] [[delay-ms:250]]")] });
  assert.equal(s.status, 200);
  assert.equal(s.rest, "", "the body ends with a whole line");
  const content = s.lines.filter((l) => JSON.parse(l.text).delta?.content !== undefined);
  assert.deepEqual(
    content.map((l) => JSON.parse(l.text).delta.content),
    ["w1 ", "w2 ", "w3 ", "w4 ", "w5 ", "w6"],
  );
  // The model waits 250 ms before each delta: streamed lines arrive spread over ~1.25 s, buffered ones at once.
  const spread = content.at(-1).at - content[0].at;
  assert.ok(spread >= 600, `the deltas arrived within ${spread.toFixed(0)} ms of each other: buffered, not streamed`);
  // Each delta is its own write: the gaps between them are the model's pauses (a stalled machine may bunch one).
  const gaps = content.slice(1).map((l, i) => l.at - content[i].at);
  const paced = gaps.filter((g) => g >= 100).length;
  assert.ok(paced >= gaps.length - 1, `gaps between deltas ${gaps.map((g) => g.toFixed(0))} ms: lines held back, not flushed`);
});

// ---------------------------------------------------------------------------------------------------------------
// 2024-01-28

test("2024-01-28 stream:false on /chat answers a chat.completion", async () => {
  const question = unique("old style");
  const before = Math.floor(Date.now() / 1000);
  const r = await post("/chat", { messages: [user(question)], stream: false, context: {} });
  const after = Math.ceil(Date.now() / 1000);
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/json");
  const body = parse(r);
  for (const key of ["choices", "created", "id", "model", "object", "usage"]) {
    assert.ok(key in body, `no ${key}: ${r.text}`);
  }
  assert.equal(body.object, "chat.completion");
  assert.equal(typeof body.id, "string");
  assert.ok(body.id.length > 0);
  assert.equal(typeof body.model, "string");
  assert.ok(body.model.length > 0);
  assert.ok(Number.isInteger(body.created), "created is a Unix time in seconds");
  assert.ok(body.created >= before - 5 && body.created <= after + 5, `created ${body.created} is not now`);
  assert.equal(body.choices.length, 1);
  const [choice] = body.choices;
  assert.equal(choice.index, 0);
  assert.deepEqual(choice.message, { role: "assistant", content: `Echo: ${question}` });
  assert.equal(choice.finish_reason, "stop");
  assertThoughts(choice.context?.thoughts, "choices[0].context");
  // 2024-01-28 spells it session_state, inside the choice.
  assert.equal(typeof choice.session_state, "string");
  assert.ok(choice.session_state.length > 0);
  assert.ok(!("sessionState" in choice) && !("sessionState" in body) && !("session_state" in body));
  const { usage } = body;
  for (const key of ["completion_tokens", "prompt_tokens", "total_tokens"]) {
    assert.ok(Number.isInteger(usage[key]) && usage[key] > 0, `usage.${key}: ${JSON.stringify(usage)}`);
  }
  assert.equal(usage.total_tokens, usage.completion_tokens + usage.prompt_tokens);
});

/** Checks a 2024-01-28 chunk stream and returns its lines. */
function assertChunkLines(r, question) {
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/json-lines");
  const lines = jsonLines(r.text);
  assert.ok(lines.length >= 3, `a role chunk, content chunks and a finishing chunk: ${r.text}`);
  const [first] = lines;
  for (const line of lines) {
    assert.equal(line.object, "chat.completion.chunk", JSON.stringify(line));
    assert.equal(line.id, first.id, "every chunk has the completion's id");
    assert.equal(line.model, first.model);
    assert.equal(line.created, first.created);
    assert.equal(line.choices.length, 1);
    assert.equal(line.choices[0].index, 0);
    assert.equal(typeof line.choices[0].delta, "object");
  }
  assert.equal(typeof first.id, "string");
  assert.ok(Number.isInteger(first.created));
  assert.equal(typeof first.model, "string");
  assert.equal(first.choices[0].delta.role, "assistant");
  assertThoughts(first.choices[0].context?.thoughts, "first chunk");
  assert.equal(typeof first.choices[0].session_state, "string");
  const content = lines.map((l) => l.choices[0].delta.content ?? "").join("");
  assert.equal(content, `Echo: ${question}`);
  const last = lines.at(-1);
  assert.equal(last.choices[0].finish_reason, "stop");
  for (const line of lines.slice(0, -1)) assert.equal(line.choices[0].finish_reason ?? null, null);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  return lines;
}

test("2024-01-28 stream:true on /chat/stream streams chat.completion.chunk lines (application/json-lines)", async () => {
  const question = unique("old stream");
  const lines = assertChunkLines(await post("/chat/stream", { messages: [user(question)], stream: true }), question);
  const contentChunks = lines.filter((l) => typeof l.choices[0].delta.content === "string");
  assert.ok(contentChunks.length >= 2, "streamed word by word");
});

test("2024-01-28 stream:true on /chat answers the same chunk lines all at once", async () => {
  const question = unique("old buffered");
  const buffered = await post("/chat", { messages: [user(question)], stream: true });
  const lines = assertChunkLines(buffered, question);
  const streamed = assertChunkLines(await post("/chat/stream", { messages: [user(question)], stream: true }), question);
  // The same kinds of line, in the same order: the role chunk, content, the finishing chunk.
  const shape = (ls) => [
    Object.keys(ls[0].choices[0].delta),
    ls.at(-1).choices[0].finish_reason,
    Object.keys(ls[0]).sort(),
    Object.keys(ls.at(-1)).sort(),
  ];
  assert.deepEqual(shape(lines), shape(streamed));
});

// ---------------------------------------------------------------------------------------------------------------
// Sessions

test("session state carries a chat across turns, and stored messages are not stored twice", async () => {
  const first = unique("first question");
  const one = parse(await post("/chat", { messages: [user(first)] }));
  const id = one.sessionState;
  assert.deepEqual(await historyMessages(id).then((ms) => ms.map((m) => [m.role, m.content])), [
    ["user", first],
    ["assistant", `Echo: ${first}`],
  ]);

  // Second turn: only the new message, with the id.
  const two = await post("/chat", { messages: [user("second question")], sessionState: id });
  assert.equal(two.status, 200, two.text);
  assert.equal(parse(two).sessionState, id, "the same chat");
  assert.equal(parse(two).message.content, "Echo: second question");
  // The model saw the earlier turn: the prompt thought lists it.
  const prompt = JSON.stringify(parse(two).context.thoughts);
  assert.ok(prompt.includes(first) && prompt.indexOf(first) < prompt.indexOf("second question"), prompt);

  // Third turn, streamed, sending the whole conversation (the stored history is its prefix).
  const whole = [user(first), assistant(`Echo: ${first}`), user("second question"), assistant("Echo: second question"), user("third")];
  const three = jsonLines((await post("/chat/stream", { messages: whole, session_state: id })).text);
  assert.equal(three[0].session_state, id);
  assert.equal(contentOf(three), "Echo: third");

  // Fourth turn in the 2024-01-28 dialect: session_state goes in and comes back inside the choice.
  const four = parse(await post("/chat", { messages: [user("fourth")], session_state: id, stream: false }));
  assert.equal(four.choices[0].session_state, id);
  assert.equal(four.choices[0].message.content, "Echo: fourth");

  const stored = await historyMessages(id);
  assert.deepEqual(
    stored.map((m) => [m.role, m.content]),
    [
      ["user", first],
      ["assistant", `Echo: ${first}`],
      ["user", "second question"],
      ["assistant", "Echo: second question"],
      ["user", "third"],
      ["assistant", "Echo: third"],
      ["user", "fourth"],
      ["assistant", "Echo: fourth"],
    ],
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Errors

test("an unknown chat id is a 404 {\"error\":\"There is no chat with that id.\"} and nothing is written", async () => {
  const id = strangerId();
  for (const [path, body] of [
    ["/chat", { messages: [user("hello?")], sessionState: id }],
    ["/chat", { messages: [user("hello?")], session_state: id, stream: false }],
    ["/chat/stream", { messages: [user("hello?")], sessionState: id }],
    ["/chat/stream", { messages: [user("hello?")], session_state: id, stream: true }],
  ]) {
    const r = await post(path, body);
    assert.equal(r.text, '{"error":"There is no chat with that id."}', `${path} ${JSON.stringify(body)}`);
    assertError(r, 404, "There is no chat with that id.");
  }
  assertError(await send("GET", `/chat-history/${id}/messages`), 404, "There is no chat with that id.");
});

test("a malformed JSON body is a 400 with a JSON error", async () => {
  for (const path of ["/chat", "/chat/stream", "/chat-ui/chat"]) {
    assertError(await post(path, undefined, { raw: '{"messages": [' }), 400);
    assertError(await post(path, undefined, { raw: "not json at all" }), 400);
  }
});

test("an invalid body is a 400 whose message names the field", async () => {
  for (const path of ["/chat", "/chat/stream"]) {
    assertError(await post(path, {}), 400, /messages/);
    assertError(await post(path, { messages: [] }), 400, /messages/);
    assertError(await post(path, { messages: "hi" }), 400, /messages/);
    assertError(await post(path, { messages: [{ role: "user" }] }), 400, /content/);
    assertError(await post(path, { messages: [{ role: "wizard", content: "hi" }] }), 400, /role/);
    assertError(await post(path, { messages: [user("hi")], stream: "yes" }), 400, /stream/);
    assertError(await post(path, []), 400);
  }
});

test("a body that is not declared as JSON is a 415", async () => {
  const body = JSON.stringify({ messages: [user("hi")] });
  for (const path of ["/chat", "/chat/stream"]) {
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded"]) {
      assertError(await post(path, undefined, { raw: body, contentType }), 415);
    }
  }
});

test("a wrong method is a 405 with an Allow header", async () => {
  const allowOf = (r) =>
    (r.headers.get("allow") ?? "")
      .split(",")
      .map((m) => m.trim().toUpperCase())
      .filter(Boolean)
      .sort();
  for (const [method, path, allowed] of [
    ["GET", "/chat", ["POST"]],
    ["PUT", "/chat", ["POST"]],
    ["GET", "/chat/stream", ["POST"]],
    ["DELETE", "/chat-ui/chat", ["POST"]],
    ["GET", "/multi-agent-chat/stream", ["POST"]],
    ["GET", "/multi-agent-chat/batch", ["POST"]],
    ["DELETE", "/chat-history", ["GET", "POST"]],
    ["POST", `/chat-history/${strangerId()}/messages`, ["GET"]],
    ["GET", `/chat-history/${strangerId()}`, ["DELETE", "PATCH", "PUT"]],
  ]) {
    const r = await send(method, path);
    assertError(r, 405);
    assert.deepEqual(allowOf(r), allowed, `Allow of ${method} ${path}: ${r.headers.get("allow")}`);
  }
});

test("an unknown route is a 404 with a JSON error", async () => {
  for (const [method, path] of [
    ["POST", "/no/such/route"],
    ["GET", "/no/such/route"],
    ["POST", "/chats"],
    ["POST", "/chat/streams"],
    ["GET", `/chat-history/${strangerId()}/messages/more`],
  ]) {
    const r = await send(method, path, method === "POST" ? { body: { messages: [user("hi")] } } : {});
    assertError(r, 404);
  }
});

test(
  "the root path / is the backend's own page (GET, HEAD); any other method a JSON 405",
  async () => {
    const page = await send("GET", "/");
    assert.equal(page.status, 200);
    assert.equal(mediaType(page), "text/html");
    assert.match(page.text, /<script id="page-config" type="application\/json">\{"auth":/);
    const head = await send("HEAD", "/");
    assert.equal(head.status, 200);
    assert.equal(head.text, "");
    const r = await send("POST", "/", { body: { messages: [user("hi")] } });
    assertError(r, 405);
    assert.equal(r.headers.get("allow"), "GET, HEAD");
  },
);

test("limits: a body over the size limit is a 413, too many or too long messages a 400 naming the field", async () => {
  // The local run's defaults: MAX_BODY_BYTES 1 MiB, MAX_MESSAGES 500, MAX_MESSAGE_CHARS 80000.
  const huge = { messages: [user("a".repeat(2 * 1024 * 1024))] };
  for (const path of ["/chat", "/chat/stream", "/chat-ui/chat"]) {
    assertError(await post(path, huge), 413);
  }
  for (const path of ["/chat", "/chat/stream"]) {
    assertError(await post(path, { messages: [user("a".repeat(90_000))] }), 400, /messages\[0\]\.content/);
    assertError(await post(path, { messages: Array.from({ length: 501 }, () => user("a")) }), 400, /messages/);
  }
});

test("a model fault before the answer is a JSON error with a fitting status", async () => {
  for (const path of ["/chat", "/chat/stream"]) {
    assertError(
      await post(path, { messages: [user("[[fault:throttle]]")] }),
      429,
      "The model is receiving too many requests. Please try again in a moment.",
    );
    for (const fault of ["guardrail", "content-filter"]) {
      const r = await post(path, { messages: [user(`[[fault:${fault}]]`)] });
      const filtered = "Your message contains content that was flagged by the content filter.";
      if (path === "/chat" || r.status !== 200) {
        assertError(r, 400, filtered);
      } else {
        // A stream learns of the filter only when the model stops, after its text: the error is the last line.
        assert.equal(mediaType(r), "application/jsonl");
        assert.deepEqual(jsonLines(r.text).at(-1), { error: filtered }, r.text);
      }
    }
    assertError(await post(path, { messages: [user("[[fault:too-long]]")] }), 400);
    for (const fault of ["unavailable", "internal", "access-denied", "model-error"]) {
      const r = await post(path, { messages: [user(`[[fault:${fault}]]`)] });
      assert.ok(r.status >= 500 && r.status <= 599, `${fault} on ${path}: ${r.status} ${r.text}`);
      const message = assertError(r, r.status);
      assert.doesNotMatch(message, /Exception|arn:|bedrock|\.rs\b|panicked/i, `internals in ${JSON.stringify(message)}`);
    }
  }
});

test("an error mid-stream becomes a last line {\"error\":…} with status 200, and the turn is not stored", async () => {
  // 2024-05-29
  const r = await post("/chat/stream", { messages: [user("one two three four [[stream-error-after:2]]")] });
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/jsonl");
  const lines = jsonLines(r.text);
  assert.equal(lines.length, 4, `role line, two deltas, error line: ${r.text}`);
  assert.deepEqual(lines[0].delta, { role: "assistant" });
  assert.deepEqual(lines.slice(1, 3).map((l) => l.delta.content), ["Echo: ", "one "]);
  const last = lines.at(-1);
  assert.deepEqual(Object.keys(last), ["error"], JSON.stringify(last));
  assert.equal(typeof last.error, "string");
  assert.ok(last.error.length > 0);
  assert.ok(r.text.endsWith(`${JSON.stringify(last)}\n`), "the error line is the last line, ending in \\n");
  // A turn that failed leaves the history as it was: here, no chat at all.
  assertError(await send("GET", `/chat-history/${lines[0].sessionState}/messages`), 404);

  // A failed turn of an existing chat leaves its messages as they were.
  const id = parse(await post("/chat", { messages: [user("keep me")] })).sessionState;
  const again = jsonLines(
    (await post("/chat/stream", { messages: [user("a b c [[stream-error-after:1]]")], sessionState: id })).text,
  );
  assert.ok("error" in again.at(-1));
  assert.deepEqual((await historyMessages(id)).map((m) => m.content), ["keep me", "Echo: keep me"]);

  // 2024-01-28
  const old = await post("/chat/stream", { messages: [user("one two three [[stream-error-after:1]]")], stream: true });
  assert.equal(old.status, 200, old.text);
  assert.equal(mediaType(old), "application/json-lines");
  const oldLines = jsonLines(old.text);
  assert.equal(oldLines[0].object, "chat.completion.chunk");
  assert.deepEqual(Object.keys(oldLines.at(-1)), ["error"], old.text);
});
