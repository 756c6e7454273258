// Reasoning, prompt caching and cost as the official client (@microsoft/ai-chat-protocol) and a history list see
// them, against the local run at CHAT_BASE_URL (whose local model stands for Claude Sonnet 4.5).
import { test } from "node:test";
import assert from "node:assert/strict";
import { AIChatProtocolClient } from "@microsoft/ai-chat-protocol";

const base = process.env.CHAT_BASE_URL ?? "http://127.0.0.1:9000";
const client = new AIChatProtocolClient(`${base}/chat`);
const user = (content) => [{ role: "user", content }];
const thought = (context, title) => context?.thoughts?.find((t) => t.title === title);

test("a streamed answer with reasoning: reasoning lines first, the answer's deltas unchanged", async () => {
  const stream = await client.getStreamedCompletion(user("Why is the sky blue?"), {
    context: { overrides: { reasoning_effort: "low" } },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const reasoningAt = chunks
    .map((c, i) => (thought(c.context, "Reasoning")?.props?.delta ? i : -1))
    .filter((i) => i >= 0);
  const firstText = chunks.findIndex((c) => c.delta?.content !== undefined);
  assert.ok(reasoningAt.length > 3, JSON.stringify(chunks));
  assert.ok(reasoningAt.at(-1) < firstText, "every reasoning line arrives before the first delta of the answer");
  // The answer, read as the client reads it, is the answer alone.
  assert.equal(chunks.map((c) => c.delta?.content ?? "").join(""), "Echo: Why is the sky blue?");
  const reasoning = reasoningAt.map((i) => thought(chunks[i].context, "Reasoning").description).join("");
  assert.equal(reasoning, "Reasoning (budget 1024): the question is: Why is the sky blue?");
  // The stored answer holds no reasoning.
  const id = chunks[0].sessionState;
  const messages = await (await fetch(`${base}/chat-history/${id}/messages`)).json();
  assert.deepEqual(
    messages.map((m) => m.content),
    ["Why is the sky blue?", "Echo: Why is the sky blue?"],
  );
});

test("the second turn of a chat reads the prompt cache, and its cost is in thoughts and the history list", async () => {
  // A question of its own, so that no earlier run's prompt is in the local model's cache.
  const first = await client.getCompletion(user(`Tell me about prompt caching (${crypto.randomUUID()}).`));
  const second = await client.getCompletion(user("And what does it cost?"), { sessionState: first.sessionState });
  const usage = thought(second.context, "Token usage").props;
  assert.ok(usage.cache_read_input_tokens > 0, JSON.stringify(usage));
  assert.ok(usage.cache_write_input_tokens > 0, JSON.stringify(usage));
  assert.ok(usage.cost_usd > 0, JSON.stringify(usage));
  const firstUsage = thought(first.context, "Token usage").props;
  const list = await (await fetch(`${base}/chat-history?mode=standard&limit=5`)).json();
  const item = list.find((c) => c.id === first.sessionState);
  assert.ok(item, "the chat is listed");
  assert.equal(
    item.usage.cacheReadInputTokens,
    (firstUsage.cache_read_input_tokens ?? 0) + usage.cache_read_input_tokens,
  );
  assert.ok(Math.abs(item.usage.costUsd - (firstUsage.cost_usd + usage.cost_usd)) < 1e-9, JSON.stringify(item));
  // The 2024-01-28 usage carries the cache counts too.
  const completion = await (
    await fetch(`${base}/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "One more." }],
        session_state: first.sessionState,
        stream: false,
      }),
    })
  ).json();
  assert.ok(completion.usage.cache_read_input_tokens > 0, JSON.stringify(completion.usage));
  assert.equal(
    completion.usage.prompt_tokens,
    thought(completion.choices[0].context, "Token usage").props.input_tokens +
      completion.usage.cache_read_input_tokens +
      (completion.usage.cache_write_input_tokens ?? 0),
  );
});
