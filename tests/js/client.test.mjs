// The official client (@microsoft/ai-chat-protocol) against the local run at CHAT_BASE_URL.
import { test } from "node:test";
import assert from "node:assert/strict";
import { AIChatProtocolClient } from "@microsoft/ai-chat-protocol";

const base = process.env.CHAT_BASE_URL ?? "http://127.0.0.1:9000";
const client = new AIChatProtocolClient(`${base}/chat`);
const user = (content) => [{ role: "user", content }];

test("getCompletion answers the message", async () => {
  const response = await client.getCompletion(user("hi"));
  assert.deepEqual(response.message, { role: "assistant", content: "Echo: hi" });
  assert.match(response.sessionState, /^[0-9a-f]{32}$/, "a new chat's id");
  assert.equal(response.context.thoughts[0].title, "Prompt to generate answer");
});

test("getStreamedCompletion yields every delta in order", async () => {
  const stream = await client.getStreamedCompletion(user("[[deltas:10]] [[delay-ms:20]]"));
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.equal(chunks[0].delta.role, "assistant");
  const contents = chunks.map((c) => c.delta.content).filter((c) => c !== undefined);
  assert.deepEqual(contents, ["w1 ", "w2 ", "w3 ", "w4 ", "w5 ", "w6 ", "w7 ", "w8 ", "w9 ", "w10"]);
  // The last line carries the context known at the end: the token usage.
  assert.equal(chunks.at(-1).context.thoughts[0].title, "Token usage");
});

test("session state carries a chat across turns, streamed or not", async () => {
  const first = await client.getCompletion(user("first question"));
  const stream = await client.getStreamedCompletion(user("tell me"), {
    context: { overrides: { suggest_followup_questions: true } },
    sessionState: first.sessionState,
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.equal(chunks[0].sessionState, first.sessionState);
  // The model saw the earlier turn: the prompt thought lists it before the new question.
  const prompt = chunks[0].context.thoughts[0].description.map((m) => m.content);
  assert.deepEqual(prompt.slice(1), ["first question", "Echo: first question", "tell me"]);
  assert.equal(chunks.map((c) => c.delta.content ?? "").join(""), "Echo: tell me");
  assert.equal(chunks.at(-1).context.followup_questions.length, 3);
});

test("getStreamedCompletion throws on the error line", async () => {
  const stream = await client.getStreamedCompletion(user("[[stream-error-after:2]] a b c"));
  const seen = [];
  await assert.rejects(
    async () => {
      for await (const chunk of stream) seen.push(chunk);
    },
    (error) => error === "The model could not answer right now. Please try again.",
  );
  assert.equal(seen.length, 3, "the first line and two deltas arrived before the error");
});

// A throttled model's 429 carries `Retry-After: 5`, on which the client waits and asks again, three times (some
// 20 s); and the 429s it then drops unread keep its sockets, and so this process, alive. The message is what is
// checked here: a client that does not retry.
const once = new AIChatProtocolClient(`${base}/chat`, { retryOptions: { maxRetries: 0 } });

test("an error before the stream is thrown with the server's message", async () => {
  await assert.rejects(
    once.getStreamedCompletion(user("[[fault:throttle]]")),
    (error) => error === "The model is receiving too many requests. Please try again in a moment.",
  );
  await assert.rejects(
    client.getCompletion(user("[[fault:guardrail]]")),
    (error) => error === "Your message contains content that was flagged by the content filter.",
  );
});
