// Files in messages, sent by the official client (@microsoft/ai-chat-protocol) unmodified, against the local run at
// CHAT_BASE_URL: a PNG and a PDF with getCompletion and with getStreamedCompletion, the answers naming both, the
// history listing them with URLs that read back the same bytes, a continued chat, and a type lie refused; then files
// inside a JSON body, posted with fetch.
//
// With `files`, the client posts multipart/form-data: a `json` part, then `messages[i].files[j]` parts. Given a
// File as a file's data, it sends the File's name as the part's filename.
import { test } from "node:test";
import assert from "node:assert/strict";
import { AIChatProtocolClient } from "@microsoft/ai-chat-protocol";

const base = process.env.CHAT_BASE_URL ?? "http://127.0.0.1:9000";
const client = new AIChatProtocolClient(`${base}/chat`);

// A 1×1 PNG and a minimal PDF.
const png = Uint8Array.from(
  Buffer.from(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
    "base64",
  ),
);
const pdf = new TextEncoder().encode(
  "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n" +
    "trailer<</Root 1 0 R>>\n%%EOF\n",
);

const files = () => [
  { contentType: "image/png", data: new File([png], "shot.png", { type: "image/png" }) },
  { contentType: "application/pdf", data: new File([pdf], "report.pdf", { type: "application/pdf" }) },
];

// What the local Bedrock server says it received: each file by the name the backend gave it, its kind and size.
const received = `Received: shot.png: image png ${png.length} bytes; report.pdf: document report pdf ${pdf.length} bytes`;

async function historyOf(chatId) {
  const response = await fetch(`${base}/chat-history/${chatId}/messages`);
  assert.equal(response.status, 200);
  return response.json();
}

/** The question's files as listed, and each URL read back whole. */
async function assertListed(chatId) {
  const messages = await historyOf(chatId);
  const listed = messages[0].files;
  assert.deepEqual(
    listed.map(({ name, contentType, size }) => ({ name, contentType, size })),
    [
      { name: "shot.png", contentType: "image/png", size: png.length },
      { name: "report.pdf", contentType: "application/pdf", size: pdf.length },
    ],
  );
  for (const [file, bytes] of [
    [listed[0], png],
    [listed[1], pdf],
  ]) {
    const response = await fetch(file.url);
    assert.equal(response.status, 200, file.url);
    assert.deepEqual(new Uint8Array(await response.arrayBuffer()), bytes);
  }
  assert.equal(messages[1].files, undefined, "the answer has no files");
  return messages;
}

test("getCompletion sends a PNG and a PDF: the answer names both, the history lists them", async () => {
  const response = await client.getCompletion([
    { role: "user", content: "What are these?", files: files() },
  ]);
  const answer = response.message.content;
  assert.ok(answer.includes("[file: shot.png, image/png"), answer);
  assert.ok(answer.includes("[file: report.pdf, application/pdf"), answer);
  assert.ok(answer.endsWith(received), answer);
  const thought = response.context.thoughts.find((t) => t.title === "Files sent to the model");
  assert.deepEqual(thought.props.files, [
    { name: "shot.png", contentType: "image/png", size: png.length },
    { name: "report.pdf", contentType: "application/pdf", size: pdf.length },
  ]);
  await assertListed(response.sessionState);

  // The chat continues with only its latest message; the history keeps the files on the first.
  const next = await client.getCompletion([{ role: "user", content: "And now?" }], {
    sessionState: response.sessionState,
  });
  assert.equal(next.message.content, "Echo: And now?");
  const sent = next.context.thoughts.find((t) => t.title === "Files sent to the model");
  assert.equal(sent.props.files.length, 2, "the earlier files went to the model again");
  const messages = await assertListed(response.sessionState);
  assert.equal(messages.length, 4);
});

test("getStreamedCompletion sends a PNG and a PDF: the streamed answer names both", async () => {
  const stream = await client.getStreamedCompletion([
    { role: "user", content: "Describe them", files: files() },
  ]);
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const answer = chunks.map((c) => c.delta.content ?? "").join("");
  assert.ok(answer.includes("shot.png") && answer.includes("report.pdf"), answer);
  assert.ok(answer.endsWith(received), answer);
  await assertListed(chunks[0].sessionState);
});

test("a .png whose bytes are a PDF is refused, naming its part", async () => {
  await assert.rejects(
    client.getCompletion([
      {
        role: "user",
        content: "What is this?",
        files: [{ contentType: "image/png", data: new File([pdf], "shot.png", { type: "image/png" }) }],
      },
    ]),
    (error) => {
      assert.match(
        String(error.message ?? error),
        /messages\[0\]\.files\[0\]: declared image\/png \(by its content type\), but its bytes are a PDF document/,
      );
      return true;
    },
  );
});

// The official client has no JSON form of files (with files it always posts multipart), but clients of the protocol
// sent them inside the JSON before: `files: [{data, contentType}]`, `data` as base64 or as whatever JSON.stringify
// makes of a Uint8Array. Both are taken as the parts are; a `files` of another shape is a 400 naming it.
test("files inside the JSON, as base64 and as a stringified Uint8Array, are taken and listed", async () => {
  for (const data of [Buffer.from(png).toString("base64"), png]) {
    const response = await fetch(`${base}/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "What is this?", files: [{ data, contentType: "image/png", filename: "shot.png" }] }],
      }),
    });
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
    assert.ok(body.message.content.endsWith(`Received: shot.png: image png ${png.length} bytes`), body.message.content);
    const [question] = await historyOf(body.sessionState);
    assert.deepEqual(
      question.files.map(({ name, contentType, size }) => ({ name, contentType, size })),
      [{ name: "shot.png", contentType: "image/png", size: png.length }],
    );
    const stored = await fetch(question.files[0].url);
    assert.deepEqual(new Uint8Array(await stored.arrayBuffer()), png);
  }
  const garbage = await fetch(`${base}/chat`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi", files: "garbage" }] }),
  });
  assert.equal(garbage.status, 400);
  assert.match((await garbage.json()).error, /^messages\[0\]\.files: expected an array of files/);
});
