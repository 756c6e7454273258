// LangChain.js's ChatOpenAI (@langchain/openai, what LangGraph.js agents and LibreChat's agent runtime run on)
// against the local run's /v1/chat/completions with an API key (issue 48): a tool through LangChain's own tool loop,
// whose tool message carries the function's `name`, and a streamed answer with its usage. Run by tests/suites.py
// (its "openai" suite) with OPENAI_TEST_BASE_URL (default http://127.0.0.1:9090) and OPENAI_TEST_MODEL:
//
//     node --test tests/langchain-js/     # against a run already started by hand
//
// The local model's answers are deterministic (tests/local-bedrock/src/lib.rs): `Echo: T`, `[[tool:NAME {json}]]`
// makes it call an offered tool, and a tool's result is answered `NAME returned TEXT`.

import assert from "node:assert/strict";
import { before, test } from "node:test";

import { HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const BASE = (process.env.OPENAI_TEST_BASE_URL ?? "http://127.0.0.1:9090").replace(/\/$/, "");
const MODEL = process.env.OPENAI_TEST_MODEL ?? "local.echo-v1:0";

let key;
// The JSON bodies LangChain sent, through the fetch it is given.
const sent = [];

function chat(options = {}) {
  return new ChatOpenAI({
    model: MODEL,
    apiKey: key,
    configuration: {
      baseURL: `${BASE}/v1`,
      fetch: async (url, init) => {
        if (init?.body) sent.push(JSON.parse(init.body));
        return fetch(url, init);
      },
    },
    ...options,
  });
}

before(async () => {
  // An API key of the run's one user (no Authorization: the local user).
  const made = await fetch(`${BASE}/api-keys`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "langchain-js" }),
  });
  assert.ok([200, 201].includes(made.status), `POST /api-keys answered ${made.status}`);
  ({ key } = await made.json());
});

test("a tool through LangChain's own tool loop, its tool message named", async () => {
  const cities = [];
  const getWeather = tool(
    async ({ city }) => {
      cities.push(city);
      return `18 C in ${city}`;
    },
    { name: "get_weather", description: "The weather now in a city.", schema: z.object({ city: z.string() }) },
  );
  const model = chat().bindTools([getWeather]);
  const messages = [new HumanMessage('Weather? [[tool:get_weather {"city":"Paris"}]]')];
  // LangChain's loop: ask, run each call the model makes with the tool (a ToolMessage), ask again, until no call.
  for (let round = 0; round < 4; round += 1) {
    const answer = await model.invoke(messages);
    messages.push(answer);
    if (!answer.tool_calls?.length) break;
    for (const call of answer.tool_calls) messages.push(await getWeather.invoke(call));
  }
  assert.deepEqual(cities, ["Paris"]);
  assert.equal(messages.at(-1).content, "get_weather returned 18 C in Paris");
  // What LangChain sent back: the tool message with the function's name (refused before issue 48).
  const toolMessage = sent.at(-1).messages.find((m) => m.role === "tool");
  assert.equal(toolMessage.name, "get_weather", JSON.stringify(sent.at(-1)));
  assert.equal(toolMessage.content, "18 C in Paris");
});

test("a streamed answer in pieces, with its usage", async () => {
  const pieces = [];
  let usage;
  for await (const chunk of await chat().stream("Stream this, please.")) {
    if (chunk.content) pieces.push(chunk.content);
    if (chunk.usage_metadata) usage = chunk.usage_metadata;
  }
  assert.equal(pieces.join(""), "Echo: Stream this, please.");
  assert.ok(pieces.length > 2, `streamed in pieces: ${JSON.stringify(pieces)}`);
  // ChatOpenAI asks for the usage (stream_options.include_usage) by default.
  assert.equal(sent.at(-1).stream_options?.include_usage, true, JSON.stringify(sent.at(-1)));
  assert.ok(usage?.input_tokens > 0 && usage?.output_tokens > 0, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
});
