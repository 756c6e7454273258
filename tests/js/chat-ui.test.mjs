// The Chat UI (github.com/ChrisMcKee1/ChatUI, a Next.js app) against CHAT_BASE_URL, call for call as its browser
// client makes them: src/services/ApiChatService.ts (standard chat, multi-agent stream and batch) and
// src/services/ApiHistoryService.ts (/chat-history). Every call sends `Content-Type: application/json` — GET and
// DELETE too — so a browser first sends a CORS preflight; each call here does the same, from the UI's dev-server
// origin, and checks what the browser would need from the answers. Shapes are those of spec/chat-ui-api.md.
//
// The database is shared with other tests and runs: these tests only look for chats they made themselves.
import { test } from "node:test";
import assert from "node:assert/strict";

const base = (process.env.CHAT_BASE_URL ?? "http://127.0.0.1:9000").replace(/\/+$/, "");
/** `next dev` serves the Chat UI on http://localhost:3000. */
const ORIGIN = process.env.CHAT_UI_ORIGIN ?? "http://localhost:3000";
/** The Chat UI's three configured endpoints (NEXT_PUBLIC_*_API_URL) pointed at this backend. */
const STANDARD_CHAT_API_URL = `${base}/chat-ui/chat`;
const MULTI_AGENT_CHAT_API_URL = `${base}/multi-agent-chat`;
const CHAT_HISTORY_API_URL = `${base}/chat-history`;

const DEFAULT_AGENTS = ["BusinessAnalyst", "SoftwareEngineer", "ProductOwner"];
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const unique = (label) => `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
const strangerId = () =>
  Array.from({ length: 32 }, () => Math.floor(Math.random() * 16).toString(16)).join("");
/** The UI's own message ids and times (uuidv4(), toLocaleTimeString hh:mm). */
const uiId = () => crypto.randomUUID();
const uiTimestamp = () => new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
// A message the user typed, as the Chat UI keeps it.
const userMessage = (content) => ({ id: uiId(), content, role: "user", timestamp: uiTimestamp() });

const headerList = (value) =>
  (value ?? "")
    .split(",")
    .map((v) => v.trim().toLowerCase())
    .filter(Boolean);

/**
 * The preflight a browser sends before a request with `Content-Type: application/json`, and the checks it makes
 * of the answer: an ok status, the origin allowed, the method allowed, the content-type header allowed.
 */
async function preflight(url, method) {
  const r = await fetch(url, {
    method: "OPTIONS",
    headers: {
      Origin: ORIGIN,
      "Access-Control-Request-Method": method,
      "Access-Control-Request-Headers": "content-type",
    },
  });
  await r.arrayBuffer();
  const what = `preflight of ${method} ${url}`;
  assert.ok(r.status >= 200 && r.status <= 299, `${what}: status ${r.status}, a browser needs an ok status`);
  const allowOrigin = r.headers.get("access-control-allow-origin");
  assert.ok(allowOrigin === ORIGIN || allowOrigin === "*", `${what}: Access-Control-Allow-Origin ${allowOrigin}`);
  const methods = headerList(r.headers.get("access-control-allow-methods"));
  assert.ok(
    methods.includes(method.toLowerCase()) || methods.includes("*"),
    `${what}: Access-Control-Allow-Methods ${r.headers.get("access-control-allow-methods")}`,
  );
  const headers = headerList(r.headers.get("access-control-allow-headers"));
  assert.ok(
    headers.includes("content-type") || headers.includes("*"),
    `${what}: Access-Control-Allow-Headers ${r.headers.get("access-control-allow-headers")}`,
  );
  return r;
}

/** What the browser checks of the real answer before handing it to the page. */
function assertCorsAnswer(r, url) {
  const allowOrigin = r.headers.get("access-control-allow-origin");
  assert.ok(
    allowOrigin === ORIGIN || allowOrigin === "*",
    `${r.status} from ${url}: Access-Control-Allow-Origin ${allowOrigin}; the page could not read it`,
  );
}

/**
 * One call of the Chat UI: the preflight, then the request with the UI's headers. The answer is returned unread
 * (the stream is read as it arrives).
 */
async function uiFetch(url, { method = "GET", body, accept } = {}) {
  await preflight(url, method);
  const headers = { Origin: ORIGIN, "Content-Type": "application/json" };
  if (accept) headers.Accept = accept;
  const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  assertCorsAnswer(r, url);
  return r;
}

async function uiJson(url, options) {
  const r = await uiFetch(url, options);
  const text = await r.text();
  let body;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    assert.fail(`${options?.method ?? "GET"} ${url}: not JSON (${r.status}): ${text}`);
  }
  return { status: r.status, headers: r.headers, text, body };
}

const mediaType = (r) => (r.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();

function assertError(r, status) {
  assert.equal(r.status, status, r.text);
  assert.equal(mediaType(r), "application/json");
  assert.deepEqual(Object.keys(r.body ?? {}), ["error"], r.text);
  assert.equal(typeof r.body.error, "string");
  assert.ok(r.body.error.length > 0);
}

// --- The UI's calls -------------------------------------------------------------------------------------------

/**
 * A chat request's body as the UI makes it ({role, content} only); `sessionState` names a chat made through
 * /chat-history, which the backend then continues and stores (the UI itself never sends one).
 */
const chatBody = (messages, sessionState) => ({
  messages: messages.map(({ role, content }) => ({ role, content })),
  ...(sessionState === undefined ? {} : { sessionState }),
});

/** ApiChatService.handleStandardMode. */
const sendStandard = (messages, sessionState) =>
  uiJson(STANDARD_CHAT_API_URL, { method: "POST", body: chatBody(messages, sessionState) });

/** ApiChatService.handleMultiAgentMode with NEXT_PUBLIC_MULTI_AGENT_RESPONSE_MODE=batch. */
const sendBatch = (messages, sessionState) =>
  uiJson(`${MULTI_AGENT_CHAT_API_URL}/batch`, { method: "POST", body: chatBody(messages, sessionState) });

/**
 * ApiChatService.handleMultiAgentMode with NEXT_PUBLIC_MULTI_AGENT_RESPONSE_MODE=stream, and its
 * processMultiAgentStream: the body read as it arrives, events split on a blank line, `data: ` stripped.
 * Returns each event's JSON with the time (ms from the request) it was complete, and the raw body.
 */
async function sendStream(messages) {
  const started = performance.now();
  const r = await uiFetch(`${MULTI_AGENT_CHAT_API_URL}/stream`, {
    method: "POST",
    accept: "text/event-stream",
    body: { messages: messages.map(({ role, content }) => ({ role, content })) },
  });
  const events = [];
  let raw = "";
  let buffer = "";
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const chunk = decoder.decode(value, { stream: true });
    raw += chunk;
    buffer += chunk;
    let boundary = buffer.indexOf("\n\n");
    while (boundary !== -1) {
      const eventString = buffer.substring(0, boundary);
      buffer = buffer.substring(boundary + 2);
      if (eventString.trim().startsWith("data:")) {
        const dataString = eventString.replace(/^data: /, "").trim();
        if (dataString !== "[HEARTBEAT]") {
          let data;
          try {
            data = JSON.parse(dataString);
          } catch {
            assert.fail(`an SSE event that is not JSON: ${JSON.stringify(eventString)}`);
          }
          events.push({ at: performance.now() - started, data });
        }
      }
      boundary = buffer.indexOf("\n\n");
    }
  }
  raw += decoder.decode();
  return { status: r.status, headers: r.headers, events, raw, rest: buffer };
}

/** ApiHistoryService.getChatHistories (one page, as the UI asks) or one page with limit/cursor. */
function listChats(mode, { limit, cursor } = {}) {
  let url = `${CHAT_HISTORY_API_URL}?mode=${mode}`;
  if (limit !== undefined) url += `&limit=${limit}`;
  if (cursor !== undefined) url += `&cursor=${encodeURIComponent(cursor)}`;
  return uiJson(url);
}
/** ApiHistoryService.createChat. */
const createChat = (mode, title) =>
  uiJson(CHAT_HISTORY_API_URL, { method: "POST", body: { mode, title: title || "New Chat" } });
/** ApiHistoryService.getChatMessages. */
const chatMessages = (id) => uiJson(`${CHAT_HISTORY_API_URL}/${id}/messages`);
/** ApiHistoryService.updateChat: the UI's own Message objects. */
const updateChat = (id, messages) => uiJson(`${CHAT_HISTORY_API_URL}/${id}`, { method: "PUT", body: { messages } });
/** ApiHistoryService.deleteChat. */
const deleteChat = (id, mode) => uiJson(`${CHAT_HISTORY_API_URL}/${id}?mode=${mode}`, { method: "DELETE" });

/** Pages through a mode's list (newest first) until `match` finds a chat; the chat, or undefined. */
async function findChat(mode, match) {
  let cursor;
  for (let page = 0; page < 40; page++) {
    const r = await listChats(mode, { limit: 100, cursor });
    assert.equal(r.status, 200, r.text);
    const found = r.body.find(match);
    if (found) return found;
    cursor = r.headers.get("x-next-cursor") ?? undefined;
    if (!cursor) return undefined;
  }
  return undefined;
}

/** The chat of `mode` updated since `since` (ms) whose first message is `content`: a chat the backend made. */
async function findChatStartingWith(mode, content, since) {
  let cursor;
  for (let page = 0; page < 40; page++) {
    const r = await listChats(mode, { limit: 20, cursor });
    assert.equal(r.status, 200, r.text);
    for (const c of r.body) {
      if (Date.parse(c.lastUpdated) < since) return undefined;
      const messages = await chatMessages(c.id);
      if (messages.status === 200 && messages.body[0]?.content === content) return { chat: c, messages: messages.body };
    }
    cursor = r.headers.get("x-next-cursor") ?? undefined;
    if (!cursor) return undefined;
  }
  return undefined;
}

// --- Shapes (spec/chat-ui-api.md) -----------------------------------------------------------------------------

const CONTENT_KEYS = ["AuthorName", "Role", "Items", "ModelId", "Metadata"];

/** A ChatMessageContent: Role.Label, Items[{$type: "TextContent", Text}], and the optional fields typed. */
function assertMessageContent(m, { label, author, text }) {
  for (const key of Object.keys(m)) {
    assert.ok(CONTENT_KEYS.includes(key), `ChatMessageContent has no field ${key}: ${JSON.stringify(m)}`);
  }
  assert.deepEqual(Object.keys(m.Role), ["Label"]);
  assert.equal(m.Role.Label, label);
  assert.ok(Array.isArray(m.Items) && m.Items.length >= 1, JSON.stringify(m));
  for (const item of m.Items) {
    assert.equal(item.$type, "TextContent");
    assert.equal(typeof item.Text, "string");
  }
  if (text instanceof RegExp) assert.match(m.Items[0].Text, text);
  else if (text !== undefined) assert.equal(m.Items[0].Text, text);
  assert.ok(m.Items[0].Text.trim().length > 0, "the UI shows nothing for an empty text");
  if (author === undefined) assert.ok(!("AuthorName" in m), `AuthorName on a non-agent message: ${JSON.stringify(m)}`);
  else assert.equal(m.AuthorName, author);
  assert.equal(typeof m.Metadata, "object");
  assert.equal(typeof m.Metadata.Id, "string", "Metadata.Id is always present");
  assert.ok(m.Metadata.Id.length > 0);
  if (label === "Assistant") {
    assert.equal(typeof m.ModelId, "string");
    assert.ok(m.ModelId.length > 0);
  }
}

/** The assistant's Metadata: CreatedAt, Usage token counts and FinishReason, as Semantic Kernel spells them. */
function assertAssistantMetadata(metadata) {
  assert.match(metadata.CreatedAt, RFC3339);
  assert.ok(Math.abs(Date.parse(metadata.CreatedAt) - Date.now()) < 10 * 60 * 1000, `CreatedAt ${metadata.CreatedAt}`);
  const u = metadata.Usage;
  for (const key of ["OutputTokenCount", "InputTokenCount", "TotalTokenCount"]) {
    assert.ok(Number.isInteger(u?.[key]) && u[key] > 0, `Usage.${key}: ${JSON.stringify(u)}`);
  }
  assert.equal(u.TotalTokenCount, u.InputTokenCount + u.OutputTokenCount);
  assert.equal(metadata.FinishReason, "Stop");
}

const SUMMARY_KEYS = ["id", "lastMessage", "lastUpdated", "messageCount", "title", "usage"];

/** A chat as the history API shows it: {id, title, lastMessage, lastUpdated, messageCount} (+ mode on PUT), and its
 * running totals of tokens and cost (`usage`, this backend's addition). */
function assertSummary(chat, { withMode = false } = {}) {
  assert.deepEqual(
    Object.keys(chat).sort(),
    withMode ? [...SUMMARY_KEYS.slice(0, 4), "mode", "title", "usage"] : SUMMARY_KEYS,
  );
  for (const key of ["inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens", "totalTokens"]) {
    assert.ok(Number.isInteger(chat.usage[key]) && chat.usage[key] >= 0, `usage.${key}: ${JSON.stringify(chat.usage)}`);
  }
  assert.equal(typeof chat.id, "string");
  assert.ok(chat.id.length > 0);
  assert.equal(typeof chat.title, "string");
  assert.equal(typeof chat.lastMessage, "string");
  assert.match(chat.lastUpdated, RFC3339);
  assert.ok(!Number.isNaN(new Date(chat.lastUpdated).getTime()), "the UI makes a Date of lastUpdated");
  assert.ok(Number.isInteger(chat.messageCount) && chat.messageCount >= 0);
}

const MESSAGE_KEYS = ["id", "content", "role", "timestamp", "agentIdentifier", "agentName"];

/** A stored message: {id, content, role, timestamp, agentIdentifier?} (agentName: the UI's own Message field). */
function assertHistoryMessage(m) {
  for (const key of Object.keys(m)) assert.ok(MESSAGE_KEYS.includes(key), `a message has no field ${key}: ${JSON.stringify(m)}`);
  for (const key of ["id", "content", "role", "timestamp"]) {
    assert.equal(typeof m[key], "string", `${key} of ${JSON.stringify(m)}`);
  }
  assert.ok(m.id.length > 0);
  assert.ok(["user", "assistant"].includes(m.role), m.role);
  if ("agentIdentifier" in m) assert.equal(typeof m.agentIdentifier, "string");
}

// --- Chat -----------------------------------------------------------------------------------------------------

test("standard chat: POST /chat-ui/chat answers an array of one ChatMessageContent", async () => {
  const question = unique("Why is the sky blue");
  const r = await sendStandard([{ role: "user", content: question }]);
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/json");
  assert.ok(Array.isArray(r.body), "an array");
  assert.equal(r.body.length, 1, "of one message");
  const [answer] = r.body;
  assertMessageContent(answer, { label: "Assistant", author: undefined, text: `Echo: ${question}` });
  assertAssistantMetadata(answer.Metadata);

  // The whole conversation, newest last, as the UI sends every turn: answered from the last user message.
  const more = await sendStandard([
    { role: "user", content: question },
    { role: "assistant", content: `Echo: ${question}` },
    { role: "user", content: "And at sunset?" },
  ]);
  assert.equal(more.status, 200, more.text);
  assert.equal(more.body.length, 1);
  assertMessageContent(more.body[0], { label: "Assistant", text: "Echo: And at sunset?" });
  assert.notEqual(more.body[0].Metadata.Id, answer.Metadata.Id, "each answer has its own Metadata.Id");
});

test("standard chat: errors reach the page as JSON {error} with their status", async () => {
  const r = await sendStandard([{ role: "user", content: "[[fault:throttle]]" }]);
  assertError(r, 429);
  const filtered = await sendStandard([{ role: "user", content: "[[fault:content-filter]]" }]);
  assertError(filtered, 400);
  assert.equal(filtered.body.error, "Your message contains content that was flagged by the content filter.");
});

test("multi-agent stream: POST /multi-agent-chat/stream sends one SSE event per agent message, each as it is ready", async () => {
  const question = unique("Plan a launch");
  const s = await sendStream([{ role: "user", content: `${question} [[delay-ms:300]]` }]);
  assert.equal(s.status, 200, s.raw);
  assert.equal(mediaType(s), "text/event-stream");
  assert.equal(s.rest, "", `the stream ends with a whole event: ${JSON.stringify(s.rest)}`);
  // The body is nothing but `data: {…}\n\n` events.
  assert.match(s.raw, /^(data: [^\n]+\n\n)+$/, `not a sequence of data events: ${JSON.stringify(s.raw.slice(0, 200))}`);
  assert.equal(s.raw.split("\n\n").length - 1, s.events.length);
  // The default group answers in turn: BusinessAnalyst, SoftwareEngineer, ProductOwner, again until the limit.
  const authors = s.events.map((e) => e.data.AuthorName);
  assert.ok(authors.length >= DEFAULT_AGENTS.length, `agents: ${authors}`);
  authors.forEach((a, i) => assert.equal(a, DEFAULT_AGENTS[i % DEFAULT_AGENTS.length], `agents: ${authors}`));
  for (const { data } of s.events) {
    assertMessageContent(data, { label: "Assistant", author: data.AuthorName });
    assertAssistantMetadata(data.Metadata);
  }
  assert.equal(s.events[0].data.Items[0].Text, `Echo: ${question}`, "the first agent answers the user");
  // Each later agent sees the conversation so far (the local model echoes it).
  assert.match(s.events[1].data.Items[0].Text, new RegExp(question));
  assert.equal(new Set(s.events.map((e) => e.data.Metadata.Id)).size, s.events.length, "Metadata.Id differs per message");
  // The model takes 300 ms to answer each agent: each event is sent when its agent is done, not all at the end.
  const gaps = s.events.slice(1).map((e, i) => e.at - s.events[i].at);
  const spread = s.events.at(-1).at - s.events[0].at;
  assert.ok(spread >= 150 * gaps.length, `the events came within ${spread.toFixed(0)} ms: sent at the end, not as ready`);
  const paced = gaps.filter((g) => g >= 150).length;
  assert.ok(paced >= gaps.length - 1, `gaps between events ${gaps.map((g) => g.toFixed(0))} ms: held back, not sent as ready`);
});

test("multi-agent batch: POST /multi-agent-chat/batch answers the user message, then the agent messages", async () => {
  const question = unique("Why is the sky blue");
  const r = await sendBatch([{ role: "user", content: question }]);
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/json");
  assert.ok(Array.isArray(r.body));
  const [echoed, ...agents] = r.body;
  assertMessageContent(echoed, { label: "user", author: undefined, text: question });
  assert.ok(!("ModelId" in echoed), "ModelId is only for assistant messages");
  assert.ok(agents.length >= DEFAULT_AGENTS.length, r.text);
  agents.forEach((m, i) => {
    assertMessageContent(m, { label: "Assistant", author: DEFAULT_AGENTS[i % DEFAULT_AGENTS.length] });
    assertAssistantMetadata(m.Metadata);
  });
  assert.equal(agents[0].Items[0].Text, `Echo: ${question}`);
  // What processMultiAgentBatchResponse keeps: entries with content and an author, i.e. every agent message.
  const shown = r.body.filter((m) => (m.AuthorName || m.name) && m.Items?.find((i) => i?.Text?.trim()));
  assert.equal(shown.length, agents.length);

  // The same round streamed has the same agents in the same order.
  const s = await sendStream([{ role: "user", content: question }]);
  assert.deepEqual(
    s.events.map((e) => e.data.AuthorName),
    agents.map((m) => m.AuthorName),
  );
});

test("multi-agent: POST /multi-agent-chat (the URL the UI's documentation configures) streams with Accept: text/event-stream, else answers the batch", async () => {
  const url = MULTI_AGENT_CHAT_API_URL;
  assertCorsAnswer(await preflight(url, "POST"), url);
  const question = unique("Bare URL");
  const r = await uiFetch(url, { method: "POST", accept: "text/event-stream", body: chatBody([{ role: "user", content: question }]) });
  assert.equal(r.status, 200);
  assert.equal(mediaType(r), "text/event-stream");
  const events = (await r.text()).split("\n\n").filter((e) => e).map((e) => JSON.parse(e.replace(/^data: /, "")));
  assert.deepEqual(events.map((e) => e.AuthorName).slice(0, 3), ["BusinessAnalyst", "SoftwareEngineer", "ProductOwner"]);
  const batch = await uiJson(url, { method: "POST", body: chatBody([{ role: "user", content: question }]) });
  assert.equal(batch.status, 200, batch.text);
  assert.equal(mediaType(batch), "application/json");
  assert.deepEqual(batch.body[0].Items, [{ $type: "TextContent", Text: question }]);
  assert.deepEqual(batch.body.slice(1).map((m) => m.AuthorName), events.map((e) => e.AuthorName));
});

test("multi-agent: an agent saying the approval phrase ends the round", async () => {
  const marker = unique("done");
  const r = await sendBatch([{ role: "user", content: `Ship it [[say:APPROVED ${marker}]]` }]);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.length, 2, `the user message and one agent: ${r.text}`);
  assertMessageContent(r.body[1], { label: "Assistant", author: "BusinessAnalyst", text: `APPROVED ${marker}` });
  const s = await sendStream([{ role: "user", content: `Ship it [[say:APPROVED ${marker}]]` }]);
  assert.deepEqual(
    s.events.map((e) => e.data.AuthorName),
    ["BusinessAnalyst"],
  );
});

test("multi-agent stream: a model fault before the first event is a JSON error with its status", async () => {
  const s = await sendStream([{ role: "user", content: "[[fault:unavailable]] plan" }]);
  assert.equal(s.status, 503, s.raw);
  assert.equal(mediaType(s), "application/json");
  assert.deepEqual(JSON.parse(s.raw), { error: "The model could not answer right now. Please try again." });
  const throttled = await sendStream([{ role: "user", content: "[[fault:throttle]] plan" }]);
  assert.equal(throttled.status, 429, throttled.raw);
  assert.deepEqual(Object.keys(JSON.parse(throttled.raw)), ["error"]);
});

test("multi-agent stream: a fault after the first event ends the stream with an SSE event carrying {error}", async () => {
  // The local model throttles the first 4 attempts of each distinct model request. The backend's retries use
  // up the first agent's attempts over one or more rounds; then the first agent answers and the second agent's
  // (new) request is throttled past the retries: the round fails after its first event.
  const marker = unique("midway");
  const started = Date.now();
  const messages = [{ role: "user", content: `${marker} [[fault:throttle-first:4]]` }];
  let s;
  for (let round = 0; round < 6; round++) {
    s = await sendStream(messages);
    if (s.status === 200) break;
    assert.equal(s.status, 429, s.raw);
  }
  assert.equal(s.status, 200, s.raw);
  assert.equal(mediaType(s), "text/event-stream");
  assert.equal(s.rest, "", "the stream ends with a whole event");
  assert.match(s.raw, /^(data: [^\n]+\n\n)+$/);
  assert.ok(s.events.length >= 2, s.raw);
  const last = s.events.at(-1).data;
  assert.deepEqual(last, { error: "The model is receiving too many requests. Please try again in a moment." });
  s.events.slice(0, -1).forEach((e, i) => assertMessageContent(e.data, { label: "Assistant", author: DEFAULT_AGENTS[i % 3] }));
  assert.equal(s.events[0].data.Items[0].Text, `Echo: ${marker}`);
  // A round that failed leaves the history as it was: no chat holds it.
  assert.equal(await findChatStartingWith("multiAgent", messages[0].content, started - 60_000), undefined);
});

// --- History --------------------------------------------------------------------------------------------------

test("history create: POST /chat-history answers 201 with the new chat, listed in its own mode", async () => {
  const title = unique("New Discussion");
  const r = await createChat("standard", title);
  assert.equal(r.status, 201, r.text);
  assert.equal(mediaType(r), "application/json");
  assertSummary(r.body);
  assert.equal(r.body.title, title);
  assert.equal(r.body.lastMessage, "");
  assert.equal(r.body.messageCount, 0);
  assert.ok(Math.abs(Date.parse(r.body.lastUpdated) - Date.now()) < 10 * 60 * 1000);

  const multi = await createChat("multiAgent", `${title} (agents)`);
  assert.equal(multi.status, 201, multi.text);
  assertSummary(multi.body);
  assert.notEqual(multi.body.id, r.body.id);

  // Each is listed in its mode, and only there; the listed item is the created one.
  const standardItem = await findChat("standard", (c) => c.id === r.body.id);
  assert.deepEqual(standardItem, r.body);
  assert.equal(await findChat("multiAgent", (c) => c.id === r.body.id), undefined);
  assert.deepEqual(await findChat("multiAgent", (c) => c.id === multi.body.id), multi.body);
  assert.equal(await findChat("standard", (c) => c.id === multi.body.id), undefined);

  // The UI's default title.
  const untitled = await createChat("standard");
  assert.equal(untitled.status, 201);
  assert.equal(untitled.body.title, "New Chat");
});

test("history list: GET /chat-history?mode=… is a bare array, newest first, x-next-cursor exposed to the page", async () => {
  const marker = unique("listed");
  const started = Date.now();
  // Chats the backend stores for the Chat UI's routes are those named with sessionState.
  const standardChat = await createChat("standard");
  const roundChat = await createChat("multiAgent");
  const standard = await sendStandard([{ role: "user", content: marker }], standardChat.body.id);
  assert.equal(standard.status, 200, standard.text);
  const batch = await sendBatch([{ role: "user", content: `${marker} [[say:${marker} agents]]` }], roundChat.body.id);
  assert.equal(batch.status, 200, batch.text);

  for (const mode of ["standard", "multiAgent"]) {
    const r = await listChats(mode);
    assert.equal(r.status, 200, r.text);
    assert.equal(mediaType(r), "application/json");
    assert.ok(Array.isArray(r.body), "a bare array");
    assert.ok(r.body.length > 0, `our ${mode} chat is not listed`);
    r.body.forEach((c) => assertSummary(c));
    const times = r.body.map((c) => Date.parse(c.lastUpdated));
    for (let i = 1; i < times.length; i++) {
      assert.ok(times[i - 1] >= times[i], `not newest first at ${i}: ${r.body[i - 1].lastUpdated} < ${r.body[i].lastUpdated}`);
    }
    const exposed = headerList(r.headers.get("access-control-expose-headers"));
    assert.ok(
      exposed.includes("x-next-cursor") || exposed.includes("*"),
      `Access-Control-Expose-Headers ${r.headers.get("access-control-expose-headers")}: the page cannot read x-next-cursor`,
    );
  }
  // Every chat is a history item of its mode: the standard chat and the agents' round.
  const mine = await findChat("standard", (c) => c.lastMessage === `Echo: ${marker}`);
  assert.ok(mine, "the /chat-ui/chat conversation is not in mode=standard");
  assert.equal(mine.id, standardChat.body.id);
  assert.equal(mine.messageCount, 2);
  const lastText = batch.body.at(-1).Items[0].Text;
  const found = await findChatStartingWith("multiAgent", `${marker} [[say:${marker} agents]]`, started - 60_000);
  assert.ok(found, "the multi-agent round is not in mode=multiAgent");
  const round = found.chat;
  assert.equal(round.id, roundChat.body.id);
  assert.equal(round.messageCount, batch.body.length);
  assert.ok(round.lastMessage.length > 0 && lastText.startsWith(round.lastMessage), `lastMessage ${round.lastMessage}`);
  assert.equal(await findChat("multiAgent", (c) => c.id === mine.id), undefined);
  assert.equal(await findChat("standard", (c) => c.id === round.id), undefined);
});

for (const [mode, count, limit] of [
  ["standard", 5, 2],
  ["multiAgent", 3, 1],
]) {
  test(`history list: mode=${mode} with limit and x-next-cursor pages through the chats, each once`, async () => {
    const title = unique("paged");
    const ids = [];
    for (let i = 0; i < count; i++) {
      const r = await createChat(mode, `${title} ${i}`);
      assert.equal(r.status, 201, r.text);
      ids.push(r.body.id);
    }
    const seen = new Set();
    const found = [];
    let cursor;
    let pages = 0;
    let last = Infinity;
    do {
      const r = await listChats(mode, { limit, cursor });
      assert.equal(r.status, 200, r.text);
      assert.ok(Array.isArray(r.body));
      assert.ok(r.body.length <= limit, `limit=${limit} gave ${r.body.length}`);
      const exposed = headerList(r.headers.get("access-control-expose-headers"));
      assert.ok(exposed.includes("x-next-cursor") || exposed.includes("*"), "x-next-cursor is not exposed to the page");
      for (const c of r.body) {
        assertSummary(c);
        assert.ok(!seen.has(c.id), `${c.id} is on two pages`);
        seen.add(c.id);
        if (ids.includes(c.id)) found.push(c.id);
        const t = Date.parse(c.lastUpdated);
        assert.ok(t <= last, "pages continue newest first");
        last = t;
      }
      cursor = r.headers.get("x-next-cursor") ?? undefined;
      if (cursor !== undefined) assert.ok(r.body.length > 0, "a cursor after an empty page");
      pages++;
    } while (cursor && found.length < ids.length && pages < 200);
    assert.ok(pages >= Math.ceil(count / limit), `${count} new chats in pages of ${limit} took ${pages} pages`);
    // Newest first: the last created comes first.
    assert.deepEqual(found, [...ids].reverse());
  });
}

test("history list: a bad mode, limit or cursor is a 400 the page can read", async () => {
  for (const query of ["mode=everything", "mode=standard&limit=0", "mode=standard&limit=lots", "mode=standard&cursor=not-a-cursor"]) {
    const r = await uiJson(`${CHAT_HISTORY_API_URL}?${query}`);
    assertError(r, 400);
  }
});

test("history messages: GET /chat-history/{id}/messages answers the chat's messages in order", async () => {
  const marker = unique("Round");
  const started = Date.now();
  const created = await createChat("multiAgent");
  const batch = await sendBatch([{ role: "user", content: marker }], created.body.id);
  assert.equal(batch.status, 200, batch.text);
  const agents = batch.body.slice(1);
  const found = await findChatStartingWith("multiAgent", marker, started - 60_000);
  assert.ok(found, "the round is not listed");
  const round = found.chat;
  const r = await chatMessages(round.id);
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/json");
  assert.ok(Array.isArray(r.body));
  r.body.forEach(assertHistoryMessage);
  assert.deepEqual(
    r.body.map((m) => [m.role, m.content, m.agentIdentifier]),
    [["user", marker, undefined], ...agents.map((a) => ["assistant", a.Items[0].Text, a.AuthorName])],
  );
  assert.equal(round.messageCount, r.body.length);
  assert.equal(round.lastMessage.slice(0, 20), r.body.at(-1).content.slice(0, 20));
});

test("history replace: PUT /chat-history/{id} replaces the messages and answers the chat with its mode", async () => {
  const created = await createChat("standard", unique("Replace me"));
  assert.equal(created.status, 201, created.text);
  const { id } = created.body;
  const messages = [
    { id: uiId(), content: "New message content", role: "user", timestamp: "09:45 AM" },
    { id: uiId(), content: "Response to the new message", role: "assistant", timestamp: "09:46 AM" },
  ];
  const r = await updateChat(id, messages);
  assert.equal(r.status, 200, r.text);
  assert.equal(mediaType(r), "application/json");
  assertSummary(r.body, { withMode: true });
  assert.equal(r.body.id, id);
  assert.equal(r.body.title, created.body.title);
  assert.equal(r.body.lastMessage, "Response to the new message");
  assert.equal(r.body.messageCount, 2);
  assert.equal(r.body.mode, "standard");
  assert.ok(Date.parse(r.body.lastUpdated) >= Date.parse(created.body.lastUpdated));
  // The stored messages are the ones sent, as sent.
  const stored = await chatMessages(id);
  assert.equal(stored.status, 200, stored.text);
  assert.deepEqual(stored.body, messages);
  // The list shows the new state.
  const listed = await findChat("standard", (c) => c.id === id);
  assert.deepEqual(listed, { id, title: created.body.title, lastMessage: "Response to the new message", lastUpdated: r.body.lastUpdated, messageCount: 2, usage: created.body.usage });

  // Replacing again replaces (does not append).
  const shorter = [{ id: uiId(), content: "Only this", role: "user", timestamp: "10:00 AM" }];
  const again = await updateChat(id, shorter);
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.messageCount, 1);
  assert.equal(again.body.lastMessage, "Only this");
  assert.deepEqual((await chatMessages(id)).body, shorter);

  // A multi-agent chat keeps its mode.
  const multi = await createChat("multiAgent", unique("Agents"));
  const put = await updateChat(multi.body.id, [
    { id: uiId(), content: "Plan", role: "user", timestamp: "10:01 AM" },
    { id: uiId(), content: "Requirements…", role: "assistant", timestamp: "10:02 AM", agentIdentifier: "BusinessAnalyst" },
  ]);
  assert.equal(put.status, 200, put.text);
  assert.equal(put.body.mode, "multiAgent");
  assert.equal((await chatMessages(multi.body.id)).body[1].agentIdentifier, "BusinessAnalyst");
});

test("history delete: DELETE /chat-history/{id}?mode=… answers 200 with no body, and the chat is gone", async () => {
  for (const mode of ["standard", "multiAgent"]) {
    const created = await createChat(mode, unique("Delete me"));
    assert.equal(created.status, 201, created.text);
    const { id } = created.body;
    const r = await deleteChat(id, mode);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, "", "no body");
    assertError(await chatMessages(id), 404);
    assert.equal(await findChat(mode, (c) => c.id === id), undefined, "still listed");
    assertError(await deleteChat(id, mode), 404);
  }
});

test("history: an unknown chat is a 404 {\"error\":\"There is no chat with that id.\"} the page can read", async () => {
  const id = strangerId();
  for (const r of [
    await chatMessages(id),
    await updateChat(id, [userMessage("hi")]),
    await deleteChat(id, "standard"),
  ]) {
    assertError(r, 404);
    assert.equal(r.body.error, "There is no chat with that id.");
  }
});

// --- Whole conversations, as ChatContext runs them ------------------------------------------------------------

// What the Chat UI does on load and at a first message with no active chat: it lists the mode's chats, then creates
// one ('New Chat'). The new chat's id.
async function listedThenCreated(mode) {
  const initial = await listChats(mode);
  assert.equal(initial.status, 200, initial.text);
  assert.ok(Array.isArray(initial.body));
  const created = await createChat(mode, "New Chat");
  assert.equal(created.status, 201, created.text);
  return created.body.id;
}

test("a standard conversation, call for call as the Chat UI makes it", async () => {
  // On load: the list of the mode's chats. First message with no active chat: createNewChat('New Chat'), then the
  // chat call, then updateChat.
  const chatId = await listedThenCreated("standard");
  const first = unique("How do I deploy");
  const state = [userMessage(first)];
  let answer = await sendStandard(state);
  assert.equal(answer.status, 200, answer.text);
  assert.equal(answer.body.length, 1);
  // convertToMessage: Content, else the first Items entry with Text; trimmed.
  const reply = (body) => ({ id: uiId(), content: body[0].Items.find((i) => i.Text?.trim()).Text.trim(), role: "assistant", timestamp: uiTimestamp() });
  state.push(reply(answer.body));
  assert.equal(state[1].content, `Echo: ${first}`);
  let saved = await updateChat(chatId, state);
  assert.equal(saved.status, 200, saved.text);
  assert.equal(saved.body.messageCount, 2);
  let listed = await findChat("standard", (c) => c.id === chatId);
  assert.equal(listed?.messageCount, 2);
  assert.equal(listed.lastMessage, `Echo: ${first}`);

  // Second message: the whole conversation again.
  state.push(userMessage("And roll back?"));
  answer = await sendStandard(state);
  assert.equal(answer.status, 200, answer.text);
  state.push(reply(answer.body));
  assert.equal(state[3].content, "Echo: And roll back?");
  saved = await updateChat(chatId, state);
  assert.equal(saved.status, 200, saved.text);
  assert.equal(saved.body.messageCount, 4);

  // Selecting the chat later loads exactly what the UI saved.
  const loaded = await chatMessages(chatId);
  assert.equal(loaded.status, 200, loaded.text);
  assert.deepEqual(loaded.body, state);
  listed = await findChat("standard", (c) => c.id === chatId);
  assert.equal(listed.messageCount, 4);
  assert.equal(listed.lastMessage, "Echo: And roll back?");

  // The UI's own chat is the conversation's one entry in the list: the chat calls named no chat, so the backend
  // stored no second copy of its own.
  const others = await findChat("standard", (c) => c.id !== chatId && (c.title === first || c.lastMessage.includes(first)));
  assert.equal(others, undefined, `a second chat lists this conversation: ${JSON.stringify(others)}`);

  // Deleting it.
  const deleted = await deleteChat(chatId, "standard");
  assert.equal(deleted.status, 200, deleted.text);
  assert.equal(await findChat("standard", (c) => c.id === chatId), undefined);
});

test("a multi-agent conversation, call for call as the Chat UI makes it (stream mode)", async () => {
  const chatId = await listedThenCreated("multiAgent");
  const question = unique("Build a todo app");
  const state = [userMessage(question)];
  const s = await sendStream(state);
  assert.equal(s.status, 200, s.raw);
  // processMultiAgentStream keeps events with content and an author; each becomes an assistant message.
  const agentMessages = s.events
    .map((e) => e.data)
    .filter((d) => (d.AuthorName || d.name) && d.Items?.find((i) => i?.Text?.trim()))
    .map((d) => ({
      id: uiId(),
      content: d.Items.find((i) => i.Text.trim()).Text.trim(),
      role: "assistant",
      agentName: d.AuthorName || d.name,
      timestamp: uiTimestamp(),
    }));
  assert.equal(agentMessages.length, s.events.length, "the UI skipped an event");
  state.push(...agentMessages);
  const saved = await updateChat(chatId, state);
  assert.equal(saved.status, 200, saved.text);
  assert.equal(saved.body.mode, "multiAgent");
  assert.equal(saved.body.messageCount, state.length);
  const listed = await findChat("multiAgent", (c) => c.id === chatId);
  assert.equal(listed?.messageCount, state.length);
  const loaded = await chatMessages(chatId);
  assert.equal(loaded.status, 200, loaded.text);
  loaded.body.forEach(assertHistoryMessage);
  assert.deepEqual(
    loaded.body.map((m) => [m.id, m.role, m.content, m.timestamp]),
    state.map((m) => [m.id, m.role, m.content, m.timestamp]),
  );
  // The next turn sends the whole conversation, agents' messages included.
  state.push(userMessage("Keep it small [[say:APPROVED small]]"));
  const next = await sendStream(state);
  assert.equal(next.status, 200, next.raw);
  assert.deepEqual(next.events.map((e) => [e.data.AuthorName, e.data.Items[0].Text]), [["BusinessAnalyst", "APPROVED small"]]);
  const others = await findChat("multiAgent", (c) => c.id !== chatId && c.title.includes(question));
  assert.equal(others, undefined, `a second chat lists this conversation: ${JSON.stringify(others)}`);
  assert.equal((await deleteChat(chatId, "multiAgent")).status, 200);
});

test(
  "a multi-agent chat saved by the UI loads back with each agent message's agentIdentifier",
  async () => {
    const created = await createChat("multiAgent", "New Chat");
    const state = [
      userMessage("Plan"),
      { id: uiId(), content: "Requirements", role: "assistant", agentName: "BusinessAnalyst", timestamp: uiTimestamp() },
    ];
    assert.equal((await updateChat(created.body.id, state)).status, 200);
    const loaded = await chatMessages(created.body.id);
    assert.equal(loaded.body[1].agentIdentifier, "BusinessAnalyst", JSON.stringify(loaded.body[1]));
  },
);

test(
  "after a failed turn, the UI's next message (which carries its system-role error message) is answered",
  async () => {
    // The UI keeps the failed turn's question, then its error note (the local model's fault directives apply to
    // every message of a request, so the failure itself is shown by the 429 test above, not repeated here).
    const state = [userMessage("hello")];
    state.push({ id: uiId(), content: "API Error: Too many requests. Please try again later.", role: "system", timestamp: uiTimestamp() });
    state.push(userMessage("hello again"));
    const r = await sendStandard(state);
    assert.equal(r.status, 200, r.text);
    // The note is gone; the two questions in a row reach the model as one user turn.
    assertMessageContent(r.body[0], { label: "Assistant", text: "Echo: hello hello again" });
  },
);
