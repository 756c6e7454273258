// The AI SDK's `openai(id)` (@ai-sdk/openai, which calls OpenAI's Responses API) against the local run: a whole
// answer, a function tool the SDK runs in its own loop (it sends a kept response's items back as references), and a
// streamed answer. Run by tests/suites.py (its "openai" suite) with OPENAI_TEST_BASE_URL (default
// http://127.0.0.1:9090) and OPENAI_TEST_MODEL:
//
//     node --test tests/ai-sdk/     # against a run already started by hand
//
// The local model's answers are deterministic (tests/local-bedrock/src/lib.rs): `Echo: T`, `[[tool:NAME {json}]]`
// makes it call an offered tool, and a tool's result is answered `NAME returned TEXT`.

import assert from "node:assert/strict";
import { before, test } from "node:test";

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const BASE = (process.env.OPENAI_TEST_BASE_URL ?? "http://127.0.0.1:9090").replace(/\/$/, "");
const MODEL = process.env.OPENAI_TEST_MODEL ?? "local.echo-v1:0";

let model;

before(async () => {
  // An API key of the run's one user (no Authorization: the local user).
  const made = await fetch(`${BASE}/api-keys`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "ai-sdk" }),
  });
  assert.ok([200, 201].includes(made.status), `POST /api-keys answered ${made.status}`);
  const { key } = await made.json();
  model = createOpenAI({ baseURL: `${BASE}/v1`, apiKey: key })(MODEL);
});

test("generateText answers whole", async () => {
  const { text, finishReason, usage } = await generateText({ model, prompt: "What is the capital of France?" });
  assert.equal(text, "Echo: What is the capital of France?");
  assert.equal(finishReason, "stop");
  assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0);
});

test("a tool the SDK runs, and the answer to its result", async () => {
  const cities = [];
  const weather = tool({
    description: "The weather now in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      cities.push(city);
      return `18 C in ${city}`;
    },
  });
  const { text, steps } = await generateText({
    model,
    prompt: 'Weather? [[tool:get_weather {"city":"Paris"}]]',
    tools: { get_weather: weather },
    stopWhen: stepCountIs(3),
  });
  assert.deepEqual(cities, ["Paris"]);
  assert.equal(steps.length, 2);
  assert.match(text, /get_weather returned .*18 C in Paris/);
});

test("streamText streams the answer", async () => {
  const result = streamText({ model, prompt: "stream this" });
  const pieces = [];
  for await (const piece of result.textStream) pieces.push(piece);
  assert.ok(pieces.length > 1, JSON.stringify(pieces));
  assert.equal(pieces.join(""), "Echo: stream this");
});
