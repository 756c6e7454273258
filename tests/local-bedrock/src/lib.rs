//! A local Bedrock-compatible server: `POST /model/{id}/converse` and `/converse-stream` in the real wire format
//! (JSON; AWS event-stream frames), and `/count-tokens`, so that tests and the local run exercise the real SDK
//! client.
//!
//! Its answers are derived from the prompt so tests can assert them: the answer to a last user message `T` is
//! `Echo: T`, sent as one delta per word. When the system prompt asks for `<<question>>` lines, three follow
//! up questions end the answer. Directives in the last user message ask for faults and pacing:
//!
//! | directive | effect |
//! |---|---|
//! | `[[fault:throttle]]` | `ThrottlingException` (429) on every attempt |
//! | `[[fault:throttle-first:N]]` | `ThrottlingException` on the first N attempts of this same request, then an answer |
//! | `[[fault:too-long]]` | `ValidationException` "Input is too long for requested model." |
//! | `[[fault:validation]]` | another `ValidationException` |
//! | `[[fault:access-denied]]` | `AccessDeniedException` (403) |
//! | `[[fault:not-found]]` | `ResourceNotFoundException` (404) |
//! | `[[fault:model-error]]` | `ModelErrorException` (424) |
//! | `[[fault:model-timeout]]` | `ModelTimeoutException` (408) |
//! | `[[fault:unavailable]]` | `ServiceUnavailableException` (503) |
//! | `[[fault:internal]]` | `InternalServerException` (500) |
//! | `[[fault:guardrail]]` | an answer `Sorry, I cannot answer that.` (one piece) with `stopReason` `guardrail_intervened`; with a `guardrailConfig`, its trace shows the input blocked (see Guardrails) |
//! | `[[fault:content-filter]]` | an answer `Sorry.` with `stopReason` `content_filtered` |
//! | `[[stream-error-after:N]]` | (stream) N deltas, then a `modelStreamErrorException` frame |
//! | `[[stream-break-after:N]]` | (stream) N deltas, then the connection breaks (the body is aborted) |
//! | `[[deltas:N]]` | the answer is N words `w1 … wN` |
//! | `[[delay-ms:N]]` | wait N ms before each delta (stream) or before answering (converse); found in any message |
//! | `[[first-delay-ms:N]]` | silence before the first word of each attempt: N ms before a stream's first delta (its start is sent at once), before a buffered answer, and before a fault's answer (so each throttled attempt takes N ms) |
//! | `[[stall-after:N]]` | (stream) N deltas, then silence for ten minutes with the connection open (or until the client leaves); (converse) no answer for ten minutes |
//! | `[[say:TEXT]]` | the answer is TEXT |
//! | `[[redacted-reasoning]]` | when reasoning is asked for (see Reasoning), a `redactedContent` block follows the reasoning text |
//!
//! The counts of `stream-error-after`, `stream-break-after` and `stall-after` are of text deltas: reasoning blocks
//! (see Reasoning) are sent whole before them.
//!
//! Without a `delay-ms` directive the server paces its words as a model does: it waits its pace (0 unless
//! started with [`LocalBedrock::start_paced`]; the local run's default is 30 ms) before each delta, and a buffered
//! answer takes as long as its words would.
//!
//! Directives are also read from the system prompt, so that a test can script one agent of a group through its
//! instructions.
//!
//! The *text* of a message (or of the system prompt) is its `text` blocks' and `guardContent` blocks'
//! (`{"guardContent":{"text":{"text":T,"qualifiers":[…]}}}`) texts, in block order, joined by `\n`: the model
//! sees guard content as text, so a question and a Sources section sent as guard content answer exactly as the same
//! texts in text blocks. *Input tokens* are the whitespace words of every `text` block, `guardContent` text and
//! `searchResult` passage of `system` and all messages (directives included).
//!
//! Grounded prompts get deterministic answers too, so tests can assert citations. The first row that applies
//! decides the answer (faults and pacing directives apply to all of them, as above):
//!
//! | the request | the answer |
//! |---|---|
//! | **query rewrite**: the system prompt contains `Generate a search query` | the search query: the last user message's text after its last `Generate search query for: ` (the whole text if absent), with the local model's directives removed but every `[[kb-…]]` directive kept (e.g. `[[kb-fault:throttle]]`, `[[kb-delay-ms:500]]`: they are for the local knowledge base that receives the query), runs of whitespace made one space, trimmed, one trailing `?` removed. Takes precedence over `say`/`deltas`, and no follow-up questions are added |
//! | `[[say:TEXT]]` / `[[deltas:N]]` | as above |
//! | **native citations**: the last user message holds `searchResult` content blocks | for each search result `i` (0-based, in order): its first sentence (below) as text deltas, then (when its `citations.enabled` is true) a `citation` delta `{title, source, sourceContent: [{text: sentence}], location: {searchResultLocation: {searchResultIndex: i, start: 0, end: 1}}}`, then a `" "` text delta before the next sentence. `converse` answers the same as content blocks: a `citationsContent` block `{content: [{text: sentence}], citations: [citation]}` per cited sentence, a `text` block for the rest (the `" "` between sentences, sentences of results without citations, follow-up questions). A result's passage is its `content` texts joined by a space; a result with an empty passage adds nothing. Citations are off unless `citations.enabled` is true. The results' texts count as input tokens |
//! | **prompted grounding**: the last user message's text has a `\n\nSources:\n` section (its last occurrence; a text ending in `\n\nSources:` is an empty section) | for each source line `{citation name}: {passage}` in order (the name is everything before the first `": "`; blank lines and lines without `": "` are skipped): the passage's first sentence, then ` [{citation name}]`, the pieces joined by a space, e.g. `Employees may choose between two plans. [Benefit_Options.md#page=2] Travel must be booked through the portal. [Travel_Policy.md]`. With no source lines: `The sources do not hold the answer to this question.` |
//! | anything else | `Echo: T` |
//!
//! When the last user message holds `image` or `document` blocks, the answer (echoed or grounded, not a query
//! rewrite, `say` or `deltas`) ends with ` Received: ` and one entry per block, in order, joined by `; `:
//! `NAME: image FORMAT SIZE bytes` or `NAME: document DOCNAME FORMAT SIZE bytes`, where SIZE counts the decoded
//! bytes, DOCNAME is the document block's own name, and NAME is the file's name from the text block just before it
//! when that block is `[file: NAME, …]` (the backend's label), else `unnamed`. So tests can assert the model got
//! each file whole, and by which name.
//!
//! A passage's *first sentence* runs up to and including the first `.`, `!` or `?` followed by whitespace or the
//! end of the passage (the whole passage if none); it is cut after 30 words, and its words are joined by single
//! spaces, leaving out Markdown heading marks (words of `#` only), so that an answer reads as text in a Markdown
//! view, never as one run-on heading. The follow-up `<<…>>` lines end every answer but a query rewrite, as above.
//!
//! # Reasoning
//!
//! `additionalModelRequestFields` may ask for reasoning; the first of `thinking`, `reasoningConfig` and
//! `reasoning_effort` present decides. A refused request is answered as a fault is (status 400,
//! `x-amzn-errortype: ValidationException:…`, `{"message": …}`), after its `first-delay-ms`, and is recorded:
//!
//! | `additionalModelRequestFields` | effort E | refused (`ValidationException` message), checked in this order |
//! |---|---|---|
//! | `{"thinking":{"type":"enabled","budget_tokens":N}}` | `budget N` | N not an integer: `thinking.budget_tokens: must be an integer`; N < 1024: `thinking.budget_tokens: must be at least 1024`; `inferenceConfig.maxTokens` present and N >= it: `max_tokens must be greater than thinking.budget_tokens`; `inferenceConfig.temperature` present and not 1, or `inferenceConfig.topP` present: `temperature and top_p may not be set when thinking is enabled` |
//! | `{"thinking":{"type":"adaptive"},"output_config":{"effort":X}}` | X; `high` without `output_config.effort` | X not `low`, `medium`, `high`, `max`: `output_config.effort: must be one of low, medium, high, max` |
//! | `{"thinking":{"type":"disabled"}}` | no reasoning | |
//! | `thinking` with another `type` | | `thinking.type: must be one of enabled, adaptive, disabled` |
//! | `{"reasoningConfig":{"type":"enabled","maxReasoningEffort":X}}` | X; `medium` without `maxReasoningEffort` | X not `low`, `medium`, `high`: `reasoningConfig.maxReasoningEffort: must be one of low, medium, high` |
//! | `{"reasoningConfig":{"type":"disabled"}}` | no reasoning | |
//! | `reasoningConfig` with another `type` | | `reasoningConfig.type: must be one of enabled, disabled` |
//! | `{"reasoning_effort":X}` | X | X not `low`, `medium`, `high`: `reasoning_effort: must be one of low, medium, high` |
//!
//! With an effort E the answer starts with the reasoning text R = `Reasoning (E): the question is: Q`, where Q is
//! the last user message's text without its directives (as `Echo: T` has it), split into word pieces as the answer
//! is. Its signature S is `local-signature-` and the 16 hex digits of the 64-bit FNV-1a hash of R's text. The
//! answer itself (echo, grounding, `say`, …) is unchanged:
//!
//! | | stream | `converse` |
//! |---|---|---|
//! | reasoning | one `contentBlockDelta` `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":piece}}}` per piece of R, then `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":S}}}`, then `contentBlockStop` 0 | first content block `{"reasoningContent":{"reasoningText":{"text":R,"signature":S}}}` |
//! | with `[[redacted-reasoning]]` | then `{"contentBlockIndex":1,"delta":{"reasoningContent":{"redactedContent":B}}}` and `contentBlockStop` 1, where B is the base64 of the bytes `redacted by local-bedrock` | then `{"reasoningContent":{"redactedContent":B}}` |
//! | the answer | its text (and citation) deltas and its `contentBlockStop` use the next block index (1, or 2 after a redacted block) | its blocks follow, as without reasoning |
//!
//! R's pieces count as output tokens and against `inferenceConfig.maxTokens` first (R is cut to `maxTokens`
//! pieces, and the answer to what is left; either cut makes the `stopReason` `max_tokens`). Pacing applies to them
//! as to the answer's pieces: the `delay-ms` or the pace before each reasoning delta, and a paced buffered answer
//! takes as long as both. [`RecordedRequest::deltas_sent_at`] holds the text deltas only. Reasoning stays when a
//! fault or a guardrail replaces the answer's text.
//!
//! # Prompt caching
//!
//! `{"cachePoint":{"type":"default"}}` blocks may stand in `system` and in any message's `content`. Each cache
//! point, in request order (system blocks, then each message's blocks), has a *prefix*: the model id (as decoded
//! from the path), the system blocks before it and, with their roles, the message blocks before it (cache points
//! left out, messages with no blocks before it left out), as JSON; and a token count: the input tokens of the
//! blocks before it. The server remembers every prefix it has answered, for all later requests (whatever their
//! operation); a request answered with an error (a refusal, a fault directive's error) remembers nothing. For a
//! request with cache points:
//!
//! | usage field | value |
//! |---|---|
//! | `cacheReadInputTokens` | the token count of the longest prefix an earlier request wrote that this request has at a cache point or at the end of a message before its last cache point (Claude's cache looks back from a cache point that way); 0 if none |
//! | `cacheWriteInputTokens` | the last cache point's token count minus the read count (0 when the last one was read) |
//! | `inputTokens` | the input tokens minus read minus write |
//! | `totalTokens` | input + output + read + write |
//!
//! Both cache fields are present (also when 0) in `converse`'s `usage` and the stream's `metadata` `usage`, and
//! only when the request has a cache point. Two identical requests in a row give a write of W, then a read of W.
//!
//! # Guardrails
//!
//! A request's `guardrailConfig` `{guardrailIdentifier, guardrailVersion, trace, streamProcessingMode}` (the last
//! for streams only) turns on:
//!
//! | | behaviour |
//! |---|---|
//! | **contextual grounding check** | runs when the last user message holds guard content qualified `grounding_source` and guard content qualified `query` (a block may have both; several blocks of a qualifier are joined by `\n`), and no `[[fault:guardrail]]` / `[[fault:content-filter]]` replaced the answer. *Words* of a text: its whitespace words lower-cased, only alphanumeric characters kept, those of at least 3 characters left. The answer's words are those of its text after `maxTokens`, without the `<<…>>` follow-up questions and the `[…]` citation names. **Grounding score**: the share of the answer's words (counted with repeats) found among the grounding source's words. **Relevance score**: the share of the query's words (its directives stripped first) found among the answer's or the grounding source's words. A score of no words is 1. Both are rounded to 2 decimals; both thresholds are 0.5 |
//! | **intervention** | when either score is below 0.5: `stopReason` `guardrail_intervened` and the answer (text and citations) is replaced by one piece `Sorry, the model cannot answer this question.` (`converse`; a stream in `sync` mode, the default). A stream with `streamProcessingMode` `async` sends the original answer's deltas, then `contentBlockStop` and `messageStop` `guardrail_intervened`. Output tokens count what was sent |
//! | **trace** | when `trace` is `enabled` or `enabled_full`: `converse`'s response has `"trace":{"guardrail":G}` and the stream's `metadata` event has the same `trace`. Without a guardrail, or with `trace` `disabled` or absent, no trace |
//!
//! G is `{"inputAssessment":{ID:{"contentPolicy":{"filters":F}}},"outputAssessments":{ID:[O]},"actionReason":A}`
//! with ID the `guardrailIdentifier`:
//!
//! | part | value |
//! |---|---|
//! | F | `[{"type":"VIOLENCE","confidence":"HIGH","filterStrength":"HIGH","action":"BLOCKED","detected":true}]` with `[[fault:guardrail]]`, else `[]` |
//! | O | `{"contextualGroundingPolicy":{"filters":[{"type":"GROUNDING","threshold":0.5,"score":g,"action":"BLOCKED" or "NONE","detected":g < 0.5},{"type":"RELEVANCE",…the same with the relevance score r}]}}` when the check ran, else `{}` |
//! | A | `Guardrail blocked.` when the input was blocked (`[[fault:guardrail]]`) or the check intervened, else `No action.` |
//!
//! # Echoed fields, model ids, CountTokens
//!
//! | request | response |
//! |---|---|
//! | `performanceConfig` `{"latency":"standard"\|"optimized"}` | the same `performanceConfig` in `converse`'s response and the stream's `metadata` event; another `latency` (or none) is refused: `ValidationException` `performanceConfig.latency: must be one of standard, optimized` |
//! | `serviceTier` `{"type":"default"\|"priority"\|"flex"}` | the same `serviceTier`, likewise; another `type`: `ValidationException` `serviceTier.type: must be one of default, priority, flex` |
//! | a model id that is an inference profile id (`us.…`, `global.…`) or an ARN (`arn:aws:bedrock:…:application-inference-profile/…`), percent-encoded in the path by the SDK | answered as any model id; [`RecordedRequest::model_id`] holds it decoded |
//! | `POST /model/{id}/invoke` for an embedding model (Titan Text Embeddings V2, Cohere Embed v3 and v4) | deterministic vectors in the model's wire format: see [`embeddings`] |
//! | `POST /model/{id}/count-tokens` `{"input":{"converse":{"system":…,"messages":…}}}` | `{"inputTokens":N}`, N the input tokens a `converse` request of the same `system`, `messages` and `toolConfig` has (cache points count nothing, no cache is read). With `{"input":{"invokeModel":{"body":B}}}`: the whitespace words of the decoded body. Otherwise a `ValidationException`. Only a foundation model of Anthropic's counts (its id, or its `…:foundation-model/…` ARN): any other id, an inference profile's included, is refused as Bedrock refuses it, `ValidationException` "The provided model doesn't support counting tokens." Recorded as [`Operation::CountTokens`]; no directives apply |
//!
//! # Tools
//!
//! A request's `toolConfig` `{"tools":[{"toolSpec":{"name","description","inputSchema":{"json":…}}}]}` offers tools.
//! Directives ask for them; a directive naming a tool the request does not offer is ignored (stripped from an
//! echo, like any directive). These rows come before the answers above, after a query rewrite:
//!
//! | the request | the answer |
//! |---|---|
//! | the last message is a user message without `toolResult` blocks, and its text holds `[[tool:NAME {json}]]` or `[[tool-loop:NAME {json}]]` directives (the JSON an object, or left out for `{}`) for offered tools | the text `Let me call NAME1, NAME2.`, then a `toolUse` block per directive, in order, and `stopReason` `tool_use` |
//! | the last message is a user message with `toolResult` blocks, and the last user message with text (the question) holds `[[tool-loop:NAME {json}]]` for an offered NAME | the same: the model asks for NAME again on every round while NAME is offered (for tests of a bound on rounds) |
//! | the last message is a user message with `toolResult` blocks | a paragraph per result, in order, joined by a blank line: `NAME returned TEXT`, or `NAME failed: TEXT` for `status` `error`. NAME is the `name` of the `toolUse` of the same `toolUseId` in the message before; TEXT is the result's content (`text` blocks, `json` blocks as JSON, `[image]`, `[document]`, joined by a space), its whitespace runs made one space, cut to 600 characters with `…` after a cut. Follow-up questions end it as usual |
//!
//! A call's id is `tooluse_` and 16 hex digits of a hash of the request (its objects' keys sorted) and the call's
//! position: the same request gets the same ids, whatever order its objects' keys come in, and each round of a conversation new ones. A call is made only when nothing else ended the
//! answer (a `fault`, a guardrail's intervention, `maxTokens`); then there are no `toolUse` blocks.
//!
//! | | stream | `converse` |
//! |---|---|---|
//! | a call | after the text's `contentBlockStop` N: `contentBlockStart` `{"contentBlockIndex":N+1,"start":{"toolUse":{"toolUseId","name"}}}`, `contentBlockDelta`s `{"delta":{"toolUse":{"input":piece}}}` whose pieces (two at least, 16 characters at most) concatenate to the input JSON, `contentBlockStop` N+1; the next call takes N+2 | a `{"toolUse":{"toolUseId","name","input"}}` block after the text block |
//! | the end | `messageStop` `{"stopReason":"tool_use"}`, then `metadata` | `"stopReason":"tool_use"` |
//!
//! Input pieces count as output tokens, and pacing (`delay-ms`, the pace) waits before each. *Input tokens* also
//! count the whitespace words of each tool's name, description and input schema JSON, of each `toolUse` block's
//! input JSON and of each `toolResult`'s content (as TEXT above, uncut); tools come first in a cache point's prefix.
//! Bedrock's refusals of tool use are played as `ValidationException`s (checked after reasoning's):
//!
//! | the request | the message |
//! |---|---|
//! | `toolUse` or `toolResult` blocks, no `toolConfig` | `The toolConfig field must be defined when using toolUse and toolResult content blocks.` |
//! | a `toolConfig` with no tools | `1 validation error detected: Value at 'toolConfig.tools' failed to satisfy constraint: Member must have length greater than or equal to 1` |
//! | a tool name not of `[a-zA-Z0-9_-]{1,64}` | `1 validation error detected: Value at 'toolConfig.tools.I.member.toolSpec.name' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+` |
//! | two tools of one name | `tools: Tool names must be unique.` |
//! | a `toolResult` whose `toolUseId` no `toolUse` of the message before has | ``messages.I.content.K: unexpected `tool_use_id` found in `tool_result` blocks: ID. …`` |
//! | a `toolUse` the next message answers with no `toolResult` | ``messages.I: `tool_use` ids were found without `tool_result` blocks immediately after: ID. …`` |
//!
//! # Tool choice, stop sequences, structured output
//!
//! | the request | the answer |
//! |---|---|
//! | `toolConfig.toolChoice` `{"tool":{"name":N}}` | only the calls of N the directives ask for; with none, one call of N whose input is the *example* of N's input schema (below, required properties only), as if `[[tool:N {example}]]` asked for it (the text `Let me call N.`, `stopReason` `tool_use`) |
//! | `toolConfig.toolChoice` `{"any":{}}` | the directives' calls; with none, one call of the first offered tool, its input the example of its schema |
//! | `toolConfig.toolChoice` `{"auto":{}}` or none | as without it |
//! | `inferenceConfig.stopSequences` `[S…]` | the answer's text (after the rows above chose it, before `maxTokens` cuts it) ends just before the first place any S occurs in it, S left out; then `stopReason` `stop_sequence` and no `toolUse` blocks. An S the text does not hold changes nothing |
//! | `outputConfig` `{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"schema":J,"name","description"}}}}`, J a JSON schema as a string | unless the answer is a query rewrite or tool calls: the example of J's schema with all its properties, as compact JSON, in the pieces a tool's input streams in (no follow-up questions) |
//!
//! The *example* of a schema is the same every time and valid against it: its `const`, its first `enum` value, the
//! example of its first `anyOf`/`oneOf` alternative, else by its `type` (the first that is not `null` of a list):
//! an object of its properties' examples (all, or the `required` ones), an array of `max(minItems, 1)` examples of
//! `items` (at most `maxItems`), the string `example` (padded with `x` to `minLength`), the `minimum` (else 1, at
//! most `maximum`) for `integer` and `number`, `true`, `null`; a schema without a type is an object when it has
//! `properties`, else `{}` ([`example`]).
//!
//! Refused as `ValidationException`s, after the tool refusals above and in this order:
//!
//! | the request | the message |
//! |---|---|
//! | `toolChoice.tool.name` N not offered | `toolConfig.toolChoice.tool.name: N is not one of the tools` |
//! | a `toolChoice` `any` or `tool` while `thinking` is `enabled` or `adaptive` (with an effort) | `Thinking may not be enabled when tool_choice forces tool use.` |
//! | `thinking` `enabled` or `adaptive` (with an effort), and the last assistant message has `toolUse` blocks but does not start with a `reasoningContent` block | ``messages.I.content.0.type: Expected `thinking` or `redacted_thinking`, but found `K`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). …`` (K `tool_use` or `text`), as Bedrock refuses Claude's tool use without the reasoning that led to it |
//! | the same, a `reasoningText` block of that message whose `signature` is not the one this server gives its `text` (`local-signature-…`, see Reasoning) | ``messages.I.content.K: Invalid `signature` in `thinking` block`` |
//! | an `outputConfig.textFormat` whose `type` is not `json_schema` | `outputConfig.textFormat.type: must be json_schema` |
//! | no `structure.jsonSchema.schema` string | `outputConfig.textFormat.structure.jsonSchema.schema: is required` |
//! | a schema that is not a JSON object | `outputConfig.textFormat.structure.jsonSchema.schema: is not a JSON schema object` |
//!
//! So reasoning is kept across a tool call exactly when the reasoning block this server sent, text and signature
//! unchanged, comes back first in the assistant message that made the calls.
//!
//! # What one model refuses
//!
//! Checked after every refusal above, by the model the path names, as Bedrock refuses them (`ValidationException`):
//!
//! | the request | the model | the message |
//! |---|---|---|
//! | `inferenceConfig` with both `temperature` and `topP` | Claude 4.5 and later (an id holding `claude-sonnet-4-5`, `claude-opus-4-5`, `claude-haiku-4-5`, `claude-sonnet-4-6`, `claude-opus-4-6`, `claude-opus-4-7` or a `claude-…-5`) | ``The model returned the following errors: `temperature` and `top_p` cannot both be specified for this model. Please use only one.`` |
//! | a tool's `toolSpec.strict` (at index I) | a model of Anthropic, Amazon, Meta, Mistral, DeepSeek, Cohere or AI21 but Claude 4.5 and later (this server's own models, `local.…`, and `openai.gpt-oss…` take it) | `This model doesn't support the toolConfig.tools.I.toolSpec.strict field. Remove strict and try again.` |
//!
//! Without these fields a request is answered as before (no reasoning, no cache fields, no trace, no echo).
//! `performanceConfig`/`serviceTier` are checked after reasoning; the first refusal wins.
//!
//! [`LocalBedrock::requests`] (and `GET /__local/requests`) keep each request's whole JSON body, so tests can
//! assert what reached the model: the system prompt, `searchResult` blocks, the Sources section.

pub mod embeddings;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One request the server received, for tests to inspect.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub operation: Operation,
    pub model_id: String,
    pub body: Value,
    /// When each delta of a stream was handed to the connection (empty for `converse`).
    pub deltas_sent_at: Vec<SystemTime>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Converse,
    ConverseStream,
    CountTokens,
}

#[derive(Default)]
struct Shared {
    requests: Vec<RecordedRequest>,
    attempts: HashMap<String, u32>,
    /// Every prompt-cache prefix seen so far.
    prefixes: HashSet<String>,
}

#[derive(Clone, Default)]
struct AppState {
    shared: Arc<Mutex<Shared>>,
    /// Print each streamed delta with its send time (the binary turns this on).
    log_deltas: bool,
    /// The wait before each word when no directive sets one.
    pace: Duration,
}

/// A running server; it stops when dropped.
pub struct LocalBedrock {
    addr: SocketAddr,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl LocalBedrock {
    /// Starts on `127.0.0.1` and a free port.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0".parse().unwrap(), false).await
    }

    /// Starts on `addr`; with `log_deltas`, prints each streamed delta and when it was sent.
    pub async fn start_on(addr: SocketAddr, log_deltas: bool) -> std::io::Result<Self> {
        Self::start_paced(addr, log_deltas, Duration::ZERO).await
    }

    /// Starts on `addr`, waiting `pace` before each word unless a directive says otherwise.
    pub async fn start_paced(
        addr: SocketAddr,
        log_deltas: bool,
        pace: Duration,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = AppState {
            log_deltas,
            pace,
            ..AppState::default()
        };
        let app = router(state.clone());
        // Every event frame leaves as it is written.
        let task = local_serve::serve(listener, app);
        Ok(Self { addr, state, task })
    }

    /// The endpoint URL to give the SDK (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// An SDK configuration whose clients talk to this server: test credentials, and the SDK's standard retries
    /// with short back-offs so throttling tests stay quick.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        local_serve::sdk_config(self.endpoint(), "local-bedrock").await
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.shared.lock().unwrap().requests.clone()
    }

    /// Runs until the task ends (never, unless the listener fails).
    pub async fn wait(self) {
        let _ = (&mut { self }.task).await;
    }
}

impl Drop for LocalBedrock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/model/{model_id}/converse", post(converse))
        .route("/model/{model_id}/converse-stream", post(converse_stream))
        .route("/model/{model_id}/count-tokens", post(count_tokens))
        .route("/__local/requests", axum::routing::get(inspect))
        .with_state(state)
        .merge(embeddings::router())
}

/// `GET /__local/requests`: what the server received and when it sent each delta (Unix milliseconds), for tests
/// that run it in another process.
async fn inspect(State(state): State<AppState>) -> Response {
    let ms = |t: &SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    };
    let requests: Vec<Value> = state
        .shared
        .lock()
        .unwrap()
        .requests
        .iter()
        .map(|r| {
            json!({
                "operation": match r.operation {
                    Operation::Converse => "converse",
                    Operation::ConverseStream => "converse-stream",
                    Operation::CountTokens => "count-tokens",
                },
                "modelId": r.model_id,
                "body": r.body,
                "deltasSentAtMs": r.deltas_sent_at.iter().map(ms).collect::<Vec<_>>(),
            })
        })
        .collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        Value::Array(requests).to_string(),
    )
        .into_response()
}

/// What the prompt asks of the model.
#[derive(Debug, Default)]
struct Plan {
    fault: Option<String>,
    stream_error_after: Option<usize>,
    stream_break_after: Option<usize>,
    /// The wait before each delta of a stream.
    delay: Duration,
    /// The wait before a buffered answer.
    converse_delay: Duration,
    /// The silence before an attempt's first word or fault.
    first_delay: Duration,
    /// Deltas sent before the model goes silent (a buffered call never answers).
    stall_after: Option<usize>,
    pieces: Vec<String>,
    /// Native citations of sentences among the pieces, in order.
    citations: Vec<Cite>,
    stop_reason: &'static str,
    input_tokens: u64,
    /// A `ValidationException` message: the request is refused before the model runs.
    invalid: Option<String>,
    /// The reasoning that starts the answer, when `additionalModelRequestFields` asks for it.
    reasoning: Option<Reasoning>,
    /// The request's guardrail and what it found.
    guard: Option<Guard>,
    /// The answer the grounding check replaced (an `async` stream still sends it).
    unguarded: Option<(Vec<String>, Vec<Cite>)>,
    /// `performanceConfig` and `serviceTier` of the request, echoed in the response.
    echoes: Vec<(&'static str, Value)>,
    /// The tools the answer asks for, after its text (the `stopReason` is then `tool_use`).
    tool_calls: Vec<PlannedCall>,
}

/// A tool call the answer makes.
#[derive(Debug)]
struct PlannedCall {
    id: String,
    name: String,
    input: Value,
    /// The input JSON in the pieces a stream sends it in (two at least).
    chunks: Vec<String>,
}

/// The reasoning block of an answer.
#[derive(Debug)]
struct Reasoning {
    pieces: Vec<String>,
    signature: String,
    /// A `redactedContent` block follows the reasoning text.
    redacted: bool,
}

/// A request's `guardrailConfig` and its assessment.
#[derive(Debug)]
struct Guard {
    id: String,
    /// `trace` is `enabled` or `enabled_full`.
    trace: bool,
    /// `streamProcessingMode` is `async`.
    async_mode: bool,
    /// `[[fault:guardrail]]`: the content filter blocked the input.
    input_blocked: bool,
    /// The contextual grounding check's (grounding, relevance) scores, when it ran.
    scores: Option<(f64, f64)>,
    /// The grounding check replaced the answer.
    grounding_blocked: bool,
}

fn directive<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = text.find(&format!("[[{name}:"))? + name.len() + 3;
    let end = start + text[start..].find("]]")?;
    Some(&text[start..end])
}

fn strip_directives(text: &str) -> String {
    strip_directives_but(text, |_| false)
}

/// The text without its `[[…]]` directives, except those `keep` accepts; runs of whitespace become one space.
fn strip_directives_but(text: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        match rest[start..].find("]]") {
            Some(end) => {
                let directive = &rest[start..start + end + 2];
                if keep(directive) {
                    out.push_str(directive);
                }
                rest = &rest[start + end + 2..];
            }
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the `image` and `document` blocks of a message's content hold: `image png 67 bytes`,
/// `document report pdf 300 bytes`.
fn received_files(blocks: Option<&Value>) -> Vec<String> {
    let size = |block: &Value| {
        block
            .pointer("/source/bytes")
            .and_then(Value::as_str)
            .and_then(|b64| aws_smithy_types::base64::decode(b64).ok())
            .map_or(0, |bytes| bytes.len())
    };
    let format = |block: &Value| {
        block
            .get("format")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    // The file's name, from the label just before its block.
    let label = |before: Option<&Value>| {
        before
            .and_then(|b| b.get("text"))
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix("[file: "))
            .and_then(|t| t.split(", ").next())
            .unwrap_or("unnamed")
            .to_string()
    };
    let Some(blocks) = blocks.and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let name = label(i.checked_sub(1).and_then(|j| blocks.get(j)));
            if let Some(image) = b.get("image") {
                Some(format!(
                    "{name}: image {} {} bytes",
                    format(image),
                    size(image)
                ))
            } else {
                b.get("document").map(|doc| {
                    let doc_name = doc.get("name").and_then(Value::as_str).unwrap_or("");
                    format!(
                        "{name}: document {doc_name} {} {} bytes",
                        format(doc),
                        size(doc)
                    )
                })
            }
        })
        .collect()
}

/// The texts of the `text` and `guardContent` blocks, in block order.
fn texts(blocks: Option<&Value>) -> Vec<String> {
    blocks
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|b| block_text(b).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The text the model sees in a `text` block or a `guardContent` block (`{"guardContent":{"text":{"text":…}}}`).
fn block_text(block: &Value) -> Option<&str> {
    block.get("text").and_then(Value::as_str).or_else(|| {
        block
            .pointer("/guardContent/text/text")
            .and_then(Value::as_str)
    })
}

/// The input tokens of a `system` or message content block: the whitespace words of its text, guard content's
/// text, search result's passage, tool call's input JSON or tool result's content.
fn block_words(block: &Value) -> u64 {
    let count = |t: &str| t.split_whitespace().count() as u64;
    match block_text(block) {
        Some(text) => count(text),
        None => {
            if let Some(result) = block.get("searchResult") {
                count(&texts(result.get("content")).join(" "))
            } else if let Some(call) = block.get("toolUse") {
                call.get("input")
                    .map_or(0, |input| count(&input.to_string()))
            } else if let Some(result) = block.get("toolResult") {
                count(&tool_result_text(result))
            } else {
                0
            }
        }
    }
}

/// The input tokens of a `toolConfig`: the whitespace words of each tool's name, description and input schema JSON.
fn tool_words(tool_config: Option<&Value>) -> u64 {
    let count = |t: &str| t.split_whitespace().count() as u64;
    blocks_of(tool_config.and_then(|c| c.get("tools")))
        .iter()
        .filter_map(|tool| tool.get("toolSpec"))
        .map(|spec| {
            let field = |name: &str| spec.get(name).and_then(Value::as_str).unwrap_or_default();
            count(field("name"))
                + count(field("description"))
                + spec
                    .pointer("/inputSchema/json")
                    .map_or(0, |schema| count(&schema.to_string()))
        })
        .sum()
}

fn blocks_of(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The input tokens of a request's `toolConfig`, `system` and `messages`.
fn input_tokens(
    tool_config: Option<&Value>,
    system: Option<&Value>,
    messages: Option<&Value>,
) -> u64 {
    let tools = tool_words(tool_config);
    let system: u64 = blocks_of(system).iter().map(block_words).sum();
    let messages: u64 = blocks_of(messages)
        .iter()
        .flat_map(|m| blocks_of(m.get("content")))
        .map(block_words)
        .sum();
    tools + system + messages
}

/// `value` as JSON with every object's keys sorted: what a request means, whatever order its client wrote the keys
/// in (the AWS SDK writes a tool's input schema, a Smithy document, in a hash map's order, which differs from one
/// request to the next). Bedrock parses a request; two requests that differ only in key order are the same one.
fn canonical(value: &Value) -> String {
    sorted(value).to_string()
}

/// `value` with every object's keys sorted, at every depth.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The request's cache points in order (system first, then each message's content): each one's prefix (the model
/// id, the tools of the `toolConfig` when there is one, and the system and message blocks before it with their
/// roles, cache points left out), the input tokens before it, and `true`; and, as `false`, the same at the end of
/// every message (where a lookup may also hit). Tools come before the system prompt, as the model reads them.
fn cache_points(model_id: &str, body: &Value) -> Vec<(String, u64, bool)> {
    let tools = body.pointer("/toolConfig/tools");
    let key = |system: &[Value], messages: &[(Value, Vec<Value>)]| {
        let messages: Vec<Value> = messages
            .iter()
            .filter(|(_, content)| !content.is_empty())
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut key = json!({"modelId": model_id, "system": system, "messages": messages});
        if let Some(tools) = tools {
            key["tools"] = tools.clone();
        }
        canonical(&key)
    };
    let mut points = Vec::new();
    let mut words = tool_words(body.get("toolConfig"));
    let mut system = Vec::new();
    for block in blocks_of(body.get("system")) {
        if block.get("cachePoint").is_some() {
            points.push((key(&system, &[]), words, true));
        } else {
            words += block_words(block);
            system.push(block.clone());
        }
    }
    let mut messages: Vec<(Value, Vec<Value>)> = Vec::new();
    for message in blocks_of(body.get("messages")) {
        messages.push((
            message.get("role").cloned().unwrap_or(Value::Null),
            Vec::new(),
        ));
        for block in blocks_of(message.get("content")) {
            if block.get("cachePoint").is_some() {
                points.push((key(&system, &messages), words, true));
            } else {
                words += block_words(block);
                if let Some((_, content)) = messages.last_mut() {
                    content.push(block.clone());
                }
            }
        }
        points.push((key(&system, &messages), words, false));
    }
    points
}

/// A request's prompt-cache usage: `(cacheReadInputTokens, cacheWriteInputTokens)`, `None` without cache points.
/// Remembers the request's prefixes for the requests that follow.
fn cache_usage(state: &AppState, model_id: &str, body: &Value) -> Option<(u64, u64)> {
    let points = cache_points(model_id, body);
    let last_at = points.iter().rposition(|(_, _, is_point)| *is_point)?;
    let last = points[last_at].1;
    let mut shared = state.shared.lock().unwrap();
    let read = points[..=last_at]
        .iter()
        .filter(|(prefix, _, _)| shared.prefixes.contains(prefix))
        .map(|(_, words, _)| *words)
        .max()
        .unwrap_or(0);
    shared.prefixes.extend(
        points
            .iter()
            .filter(|(_, _, is_point)| *is_point)
            .map(|(prefix, _, _)| prefix.clone()),
    );
    Some((read, last - read))
}

/// What the backend's query-rewrite system prompt says.
const QUERY_REWRITE: &str = "Generate a search query";
/// What precedes the question in a query-rewrite user message.
const QUERY_FOR: &str = "Generate search query for: ";
/// What the backend puts between the question and the passages it found.
const SOURCES: &str = "\n\nSources:\n";
/// The answer to a grounded prompt whose sources hold nothing.
const NO_ANSWER: &str = "The sources do not hold the answer to this question.";
/// The follow-up questions that end an answer when the system prompt asks for `<<question>>` lines.
const FOLLOW_UPS: &str =
    "\n\n<<What else should I know?>>\n<<Can you give an example?>>\n<<Where can I read more?>>";

/// The search query a query-rewrite prompt asks for: the question, without the local model's directives but with
/// the knowledge base's (`[[kb-…]]`), trimmed, without one trailing `?`.
fn search_query(last_user: &str) -> String {
    let question = last_user
        .rfind(QUERY_FOR)
        .map_or(last_user, |i| &last_user[i + QUERY_FOR.len()..]);
    let query = strip_directives_but(question, |d| d.starts_with("[[kb-"));
    match query.strip_suffix('?') {
        Some(query) => query.to_string(),
        None => query,
    }
}

/// A passage's first sentence: up to and including the first `.`, `!` or `?` followed by whitespace or the end, at
/// most 30 words, its words joined by single spaces, without Markdown heading marks (words of `#` only): the
/// backend lists a passage on one line, so a heading's `#` would make the whole answer one heading in a Markdown
/// view.
fn first_sentence(passage: &str) -> String {
    let mut chars = passage.char_indices().peekable();
    let mut end = passage.len();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, next)| next.is_whitespace())
        {
            end = i + c.len_utf8();
            break;
        }
    }
    passage[..end]
        .split_whitespace()
        .filter(|word| !word.chars().all(|c| c == '#'))
        .take(30)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `(citation name, passage)` lines of the text's Sources section, if it has one.
fn sources_section(text: &str) -> Option<Vec<(&str, &str)>> {
    let section = if text.trim_end().ends_with(SOURCES.trim_end()) {
        ""
    } else {
        &text[text.rfind(SOURCES)? + SOURCES.len()..]
    };
    Some(
        section
            .lines()
            .filter_map(|line| {
                let (name, passage) = line.split_once(": ")?;
                Some((name.trim(), passage.trim()))
            })
            .collect(),
    )
}

/// The answer to a prompt grounded in a Sources section: each source's first sentence and its name in brackets.
fn bracket_cited_answer(sources: &[(&str, &str)]) -> String {
    if sources.is_empty() {
        return NO_ANSWER.to_string();
    }
    sources
        .iter()
        .map(|(name, passage)| match first_sentence(passage) {
            sentence if sentence.is_empty() => format!("[{name}]"),
            sentence => format!("{sentence} [{name}]"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `searchResult` content block of a user message.
struct SearchResult {
    title: String,
    source: String,
    /// Its content texts joined by a space.
    passage: String,
    /// `citations.enabled`.
    cited: bool,
}

fn search_results(content: Option<&Value>) -> Vec<SearchResult> {
    let field = |block: &Value, name: &str| {
        block
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("searchResult"))
        .map(|block| SearchResult {
            title: field(block, "title"),
            source: field(block, "source"),
            passage: texts(block.get("content")).join(" "),
            cited: block.pointer("/citations/enabled").and_then(Value::as_bool) == Some(true),
        })
        .collect()
}

/// A native citation of the answer: pieces `start..end` are the cited sentence.
#[derive(Debug)]
struct Cite {
    start: usize,
    end: usize,
    /// The `Citation` (converse) / `CitationsDelta` (stream) JSON; both have the same shape.
    citation: Value,
}

/// The answer to search results: each one's first sentence, cited natively, with a `" "` piece between sentences.
fn natively_cited_answer(results: &[SearchResult]) -> (Vec<String>, Vec<Cite>) {
    let mut out: Vec<String> = Vec::new();
    let mut cites = Vec::new();
    for (index, result) in results.iter().enumerate() {
        let sentence = first_sentence(&result.passage);
        if sentence.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(" ".to_string());
        }
        let start = out.len();
        out.extend(pieces(&sentence));
        if result.cited {
            cites.push(Cite {
                start,
                end: out.len(),
                citation: json!({
                    "title": result.title,
                    "source": result.source,
                    "sourceContent": [{"text": sentence}],
                    "location": {"searchResultLocation": {"searchResultIndex": index, "start": 0, "end": 1}},
                }),
            });
        }
    }
    if out.is_empty() {
        out = pieces(NO_ANSWER);
    }
    (out, cites)
}

/// Splits text into deltas the way a model streams words: each piece keeps its following space.
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        current.push(ch);
        if ch == ' ' || ch == '\n' {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A tool directive of a message's text: `[[tool:NAME {json}]]` (`looping` false) or `[[tool-loop:NAME {json}]]`
/// (true); the JSON may be left out (`{}`).
#[derive(Debug, PartialEq)]
struct ToolDirective {
    looping: bool,
    name: String,
    input: Value,
}

/// The tool directives of a text, in order. A directive whose input is not a JSON object, or with no name, is none.
fn tool_directives(text: &str) -> Vec<ToolDirective> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[tool") {
        let after = &rest[start + "[[tool".len()..];
        rest = after;
        let (looping, body) = match (after.strip_prefix(':'), after.strip_prefix("-loop:")) {
            (Some(body), _) => (false, body),
            (None, Some(body)) => (true, body),
            (None, None) => continue,
        };
        let name_end = body
            .find(|c: char| c.is_whitespace() || c == ']')
            .unwrap_or(body.len());
        let name = &body[..name_end];
        let tail = body[name_end..].trim_start();
        let (input, tail) = if tail.starts_with("]]") {
            (json!({}), tail)
        } else {
            let mut values = serde_json::Deserializer::from_str(tail).into_iter::<Value>();
            match values.next() {
                Some(Ok(input)) => (input, &tail[values.byte_offset()..]),
                _ => continue,
            }
        };
        if let Some(after) = tail.trim_start().strip_prefix("]]")
            && !name.is_empty()
            && input.is_object()
        {
            out.push(ToolDirective {
                looping,
                name: name.to_string(),
                input,
            });
            rest = after;
        }
    }
    out
}

/// The names of the tools a request's `toolConfig` offers.
fn offered_tools(body: &Value) -> Vec<&str> {
    blocks_of(body.pointer("/toolConfig/tools"))
        .iter()
        .filter_map(|tool| tool.pointer("/toolSpec/name").and_then(Value::as_str))
        .collect()
}

/// A message's `toolUse` blocks.
fn tool_uses(message: Option<&Value>) -> Vec<&Value> {
    blocks_of(message.and_then(|m| m.get("content")))
        .iter()
        .filter_map(|b| b.get("toolUse"))
        .collect()
}

/// A message's `toolResult` blocks.
fn tool_results(message: Option<&Value>) -> Vec<&Value> {
    blocks_of(message.and_then(|m| m.get("content")))
        .iter()
        .filter_map(|b| b.get("toolResult"))
        .collect()
}

/// A `toolUse` or `toolResult` block's `toolUseId`.
fn tool_use_id(block: &Value) -> &str {
    block
        .get("toolUseId")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// What a `toolResult` block's content says: its `text` blocks, its `json` blocks as JSON, `[image]` and
/// `[document]` for those, joined by a space.
fn tool_result_text(result: &Value) -> String {
    blocks_of(result.get("content"))
        .iter()
        .filter_map(|block| {
            if let Some(text) = block.get("text").and_then(Value::as_str) {
                Some(text.to_string())
            } else if let Some(json) = block.get("json") {
                Some(json.to_string())
            } else if block.get("image").is_some() {
                Some("[image]".to_string())
            } else {
                block.get("document").map(|_| "[document]".to_string())
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How much of a tool's result the answer quotes, in characters.
const QUOTED_RESULT_CHARS: usize = 600;

/// The answer to tool results: a paragraph per result, `NAME returned TEXT` or `NAME failed: TEXT`, NAME from the
/// `toolUse` of the assistant message before that answers to it, TEXT the result's text with its whitespace made
/// single spaces and cut to 600 characters (`…` marks a cut).
fn tool_results_answer(results: &[&Value], calls: &[&Value]) -> String {
    results
        .iter()
        .map(|result| {
            let id = tool_use_id(result);
            let name = calls
                .iter()
                .find(|call| tool_use_id(call) == id)
                .and_then(|call| call.get("name").and_then(Value::as_str))
                .unwrap_or("unknown");
            let text = tool_result_text(result)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let mut quoted: String = text.chars().take(QUOTED_RESULT_CHARS).collect();
            if quoted.len() < text.len() {
                quoted.push('…');
            }
            match result.get("status").and_then(Value::as_str) {
                Some("error") => format!("{name} failed: {quoted}"),
                _ => format!("{name} returned {quoted}"),
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The pieces a stream sends a tool's input JSON in: at least two, of at most 16 characters.
fn input_chunks(input: &str) -> Vec<String> {
    let chars: Vec<char> = input.chars().collect();
    let size = (chars.len() / 2).clamp(1, 16);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// Whether Bedrock takes `name` as a tool's name: `[a-zA-Z0-9_-]{1,64}`.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The `ValidationException` message of a request whose tools or tool blocks Bedrock refuses, if it does: tool
/// blocks without a `toolConfig`, a tool name Bedrock does not take or given twice, a `toolResult` that answers no
/// `toolUse` of the assistant message just before it, a `toolUse` the next message does not answer.
fn tool_refusal(body: &Value) -> Option<String> {
    let messages = blocks_of(body.get("messages"));
    let has_tool_blocks = messages
        .iter()
        .flat_map(|m| blocks_of(m.get("content")))
        .any(|b| b.get("toolUse").is_some() || b.get("toolResult").is_some());
    let Some(config) = body.get("toolConfig") else {
        return has_tool_blocks.then(|| {
            "The toolConfig field must be defined when using toolUse and toolResult content blocks."
                .to_string()
        });
    };
    let tools = blocks_of(config.get("tools"));
    if tools.is_empty() {
        return Some(
            "1 validation error detected: Value at 'toolConfig.tools' failed to satisfy constraint: Member must have length greater than or equal to 1"
                .to_string(),
        );
    }
    let mut names = HashSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let Some(name) = tool.pointer("/toolSpec/name").and_then(Value::as_str) else {
            continue;
        };
        if !valid_tool_name(name) {
            return Some(format!(
                "1 validation error detected: Value at 'toolConfig.tools.{}.member.toolSpec.name' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+",
                i + 1
            ));
        }
        if !names.insert(name) {
            return Some("tools: Tool names must be unique.".to_string());
        }
    }
    for (i, message) in messages.iter().enumerate() {
        let previous = i.checked_sub(1).and_then(|j| messages.get(j));
        let called: Vec<&str> = tool_uses(previous).into_iter().map(tool_use_id).collect();
        let answered: Vec<&str> = tool_results(Some(message))
            .into_iter()
            .map(tool_use_id)
            .collect();
        if let Some((k, id)) = answered
            .iter()
            .enumerate()
            .find(|(_, id)| !called.contains(id))
        {
            return Some(format!(
                "messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
            ));
        }
        let unanswered: Vec<&str> = called
            .iter()
            .filter(|id| !answered.contains(id))
            .copied()
            .collect();
        if !unanswered.is_empty() {
            return Some(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                unanswered.join(", ")
            ));
        }
    }
    None
}

/// The calls the answer to a request makes, by the tool directives (see the module's Tools section), each with an
/// id of its own: `tooluse_` and a hash of the request and the call's position.
fn planned_calls(body: &Value, messages: &[Value]) -> Vec<PlannedCall> {
    let offered = offered_tools(body);
    let is_user = |m: &&Value| m.get("role").and_then(Value::as_str) == Some("user");
    let Some(last) = messages.last().filter(is_user) else {
        return Vec::new();
    };
    let directives = if tool_results(Some(last)).is_empty() {
        tool_directives(&texts(last.get("content")).join("\n"))
    } else {
        // A round after tool results: the question's loop directives ask again.
        let question = messages
            .iter()
            .rev()
            .filter(is_user)
            .map(|m| texts(m.get("content")).join("\n"))
            .find(|text| !text.trim().is_empty())
            .unwrap_or_default();
        tool_directives(&question)
            .into_iter()
            .filter(|d| d.looping)
            .collect()
    };
    // Its keys sorted: a client may write a JSON object's keys in any order (the SDK's documents are hash maps).
    let request = canonical(body);
    let mut calls: Vec<(String, Value)> = directives
        .into_iter()
        .filter(|d| offered.contains(&d.name.as_str()))
        .map(|d| (d.name, d.input))
        .collect();
    // A tool choice that forces a call: the named tool (its directives' calls only), or any (the first offered
    // when no directive asks), its input made from its schema.
    match forced_tool(body) {
        Some(Forced::Tool(name)) => {
            calls.retain(|(n, _)| *n == name);
            if calls.is_empty() && offered.contains(&name.as_str()) {
                let input = example(&tool_schema(body, &name), true);
                calls.push((name, input));
            }
        }
        Some(Forced::Any) if calls.is_empty() => {
            if let Some(name) = offered.first() {
                calls.push((name.to_string(), example(&tool_schema(body, name), true)));
            }
        }
        _ => {}
    }
    calls
        .into_iter()
        .enumerate()
        .map(|(i, (name, input))| {
            let json = input.to_string();
            PlannedCall {
                id: format!("tooluse_{:016x}", fnv1a(&format!("{request}#{i}"))),
                chunks: input_chunks(&json),
                name,
                input,
            }
        })
        .collect()
}

/// A `toolConfig.toolChoice` that forces a call.
#[derive(Debug, PartialEq)]
enum Forced {
    Any,
    Tool(String),
}

/// The call `toolConfig.toolChoice` forces: `{"any":{}}` or `{"tool":{"name"}}`; `{"auto":{}}` or none forces none.
fn forced_tool(body: &Value) -> Option<Forced> {
    let choice = body.pointer("/toolConfig/toolChoice")?;
    if choice.get("any").is_some() {
        return Some(Forced::Any);
    }
    choice
        .pointer("/tool/name")
        .and_then(Value::as_str)
        .map(|name| Forced::Tool(name.to_string()))
}

/// The input schema of the offered tool `name` (`{}` if it has none).
fn tool_schema(body: &Value, name: &str) -> Value {
    blocks_of(body.pointer("/toolConfig/tools"))
        .iter()
        .find(|t| t.pointer("/toolSpec/name").and_then(Value::as_str) == Some(name))
        .and_then(|t| t.pointer("/toolSpec/inputSchema/json"))
        .cloned()
        .unwrap_or_else(|| json!({}))
}

/// A JSON value valid against `schema`, the same every time: its `const`, its first `enum` value, its first
/// `anyOf`/`oneOf` alternative, else by its `type` (the first that is not `null` when a list): an object of its
/// required properties (all of its properties unless `required_only`), each an example of its own schema; an
/// array of `max(minItems, 1)` examples of `items` (at most `maxItems`); the string `example` (padded with `x` to
/// `minLength`); the integer or number `minimum`, else 1 (at most `maximum`); `true`; `null`. A schema without a
/// type is an object when it has `properties`, else `{}`.
pub fn example(schema: &Value, required_only: bool) -> Value {
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return example(first, required_only);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => return json!({}),
    };
    let bounded = |default: f64| {
        let low = schema.get("minimum").and_then(Value::as_f64);
        let high = schema.get("maximum").and_then(Value::as_f64);
        let value = low.unwrap_or(default);
        high.map_or(value, |h| value.min(h))
    };
    match kind {
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = serde_json::Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if !required_only || required.contains(&name.as_str()) {
                        out.insert(name.clone(), example(property, required_only));
                    }
                }
            }
            Value::Object(out)
        }
        "array" => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let max = schema
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let items = schema.get("items").cloned().unwrap_or_else(|| json!({}));
            let count = min.max(1).min(max);
            Value::Array((0..count).map(|_| example(&items, required_only)).collect())
        }
        "string" => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let mut text = String::from("example");
            while text.len() < min {
                text.push('x');
            }
            Value::String(text)
        }
        "integer" => json!(bounded(1.0) as i64),
        "number" => json!(bounded(1.0)),
        "boolean" => Value::Bool(true),
        _ => Value::Null,
    }
}

/// The JSON schema `outputConfig.textFormat` holds the answer to, or the `ValidationException` message of a
/// format Bedrock refuses; `None` without an `outputConfig`.
fn output_schema(body: &Value) -> Option<Result<Value, String>> {
    let format = body.pointer("/outputConfig/textFormat")?;
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Some(Err(
            "outputConfig.textFormat.type: must be json_schema".into()
        ));
    }
    let Some(text) = format
        .pointer("/structure/jsonSchema/schema")
        .and_then(Value::as_str)
    else {
        return Some(Err(
            "outputConfig.textFormat.structure.jsonSchema.schema: is required".into(),
        ));
    };
    Some(
        serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| {
                "outputConfig.textFormat.structure.jsonSchema.schema: is not a JSON schema object"
                    .into()
            }),
    )
}

/// The `ValidationException` message of a tool choice Bedrock refuses: a named tool not offered, or a forced call
/// while Claude thinks.
fn tool_choice_refusal(body: &Value, thinking: bool) -> Option<String> {
    match forced_tool(body)? {
        Forced::Tool(name) if !offered_tools(body).contains(&name.as_str()) => Some(format!(
            "toolConfig.toolChoice.tool.name: {name} is not one of the tools"
        )),
        _ if thinking => {
            Some("Thinking may not be enabled when tool_choice forces tool use.".into())
        }
        _ => None,
    }
}

/// Whether Claude's `thinking` is on (`enabled` or `adaptive`).
fn thinking(body: &Value) -> bool {
    matches!(
        body.pointer("/additionalModelRequestFields/thinking/type")
            .and_then(Value::as_str),
        Some("enabled" | "adaptive")
    )
}

/// The `ValidationException` message of a request whose last assistant message asks for tools without the
/// reasoning that led to them, while Claude thinks: it must start with a `reasoningContent` block, and each of its
/// `reasoningText` blocks must carry the signature this server gave that text.
fn reasoning_refusal(messages: &[Value]) -> Option<String> {
    let (i, last) = messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| m.get("role").and_then(Value::as_str) == Some("assistant"))?;
    if tool_uses(Some(last)).is_empty() {
        return None;
    }
    let blocks = blocks_of(last.get("content"));
    let first = blocks.first()?;
    if first.get("reasoningContent").is_none() {
        let kind = if first.get("toolUse").is_some() {
            "tool_use"
        } else {
            "text"
        };
        return Some(format!(
            "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{kind}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        ));
    }
    blocks.iter().enumerate().find_map(|(k, block)| {
        let text = block.pointer("/reasoningContent/reasoningText")?;
        let said = text.get("text").and_then(Value::as_str).unwrap_or_default();
        let signed = text.get("signature").and_then(Value::as_str);
        (signed != Some(signature(said).as_str()))
            .then(|| format!("messages.{i}.content.{k}: Invalid `signature` in `thinking` block"))
    })
}

/// The answer cut before the first of `stops` it holds, and whether it was cut.
fn cut_at_stop(pieces: &mut Vec<String>, stops: &[&str]) -> bool {
    let text = pieces.concat();
    let Some(at) = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s))
        .min()
    else {
        return false;
    };
    let mut kept = Vec::new();
    let mut from = 0;
    for piece in pieces.drain(..) {
        if from >= at {
            break;
        }
        let end = from + piece.len();
        kept.push(if end <= at {
            piece
        } else {
            piece[..at - from].to_string()
        });
        from = end;
    }
    kept.retain(|p| !p.is_empty());
    *pieces = kept;
    true
}

fn plan(body: &Value, pace: Duration) -> Plan {
    let system = texts(body.get("system")).join("\n");
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let last_user_message = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    let last_user = last_user_message
        .map(|m| texts(m.get("content")).join("\n"))
        .unwrap_or_default();
    let results = last_user_message
        .map(|m| search_results(m.get("content")))
        .unwrap_or_default();
    let files = last_user_message
        .map(|m| received_files(m.get("content")))
        .unwrap_or_default();
    let all_text: Vec<String> = std::iter::once(system.clone())
        .chain(messages.iter().flat_map(|m| texts(m.get("content"))))
        .collect();
    let input_tokens = input_tokens(
        body.get("toolConfig"),
        body.get("system"),
        body.get("messages"),
    );

    // Directives of the last user message first, then of the system prompt.
    let directives = format!("{last_user}\n{system}");
    let follow_ups = system.contains("<<");
    let mut citations = Vec::new();
    let mut tool_calls = planned_calls(body, &messages);
    let last_results = match messages.last() {
        Some(last) if last.get("role").and_then(Value::as_str) == Some("user") => {
            tool_results(Some(last))
        }
        _ => Vec::new(),
    };
    let structured = output_schema(body);
    let mut pieces = if system.contains(QUERY_REWRITE) {
        pieces(&search_query(&last_user))
    } else if !tool_calls.is_empty() {
        let names: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
        pieces(&format!("Let me call {}.", names.join(", ")))
    } else if let Some(Ok(schema)) = &structured {
        // Structured output: a JSON value of the schema, with all its properties, in pieces.
        input_chunks(&example(schema, false).to_string())
    } else if !last_results.is_empty() {
        let before = messages.len().checked_sub(2).and_then(|i| messages.get(i));
        let mut answer = tool_results_answer(&last_results, &tool_uses(before));
        if follow_ups {
            answer.push_str(FOLLOW_UPS);
        }
        pieces(&answer)
    } else {
        let answer = match (
            directive(&directives, "say"),
            directive(&directives, "deltas").and_then(|n| n.parse::<usize>().ok()),
        ) {
            (Some(text), _) => Some(text.to_string()),
            (None, Some(n)) => Some(
                (1..=n)
                    .map(|i| format!("w{i}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            (None, None) if !results.is_empty() => None,
            (None, None) => {
                let mut answer = match sources_section(&last_user) {
                    Some(sources) => bracket_cited_answer(&sources),
                    None => format!("Echo: {}", strip_directives(&last_user)),
                };
                if !files.is_empty() {
                    answer.push_str(" Received: ");
                    answer.push_str(&files.join("; "));
                }
                Some(answer)
            }
        };
        match answer {
            Some(mut answer) => {
                if follow_ups {
                    answer.push_str(FOLLOW_UPS);
                }
                pieces(&answer)
            }
            None => {
                let (mut answer, cites) = natively_cited_answer(&results);
                citations = cites;
                if follow_ups {
                    answer.extend(pieces(FOLLOW_UPS));
                }
                answer
            }
        }
    };
    let mut stop_reason = "end_turn";
    let max_tokens = body
        .pointer("/inferenceConfig/maxTokens")
        .and_then(Value::as_u64);
    let (effort, mut invalid) = match reasoning_effort(body) {
        Ok(effort) => (effort, None),
        Err(message) => (None, Some(message)),
    };
    if invalid.is_none() {
        invalid = tool_refusal(body);
    }
    let thinks = effort.is_some() && thinking(body);
    if invalid.is_none() {
        invalid = tool_choice_refusal(body, thinks);
    }
    if invalid.is_none() && thinks {
        invalid = reasoning_refusal(&messages);
    }
    if invalid.is_none() {
        invalid = structured.and_then(Result::err);
    }
    // The answer ends before the first stop sequence it would write.
    let stops: Vec<&str> = blocks_of(body.pointer("/inferenceConfig/stopSequences"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if cut_at_stop(&mut pieces, &stops) {
        citations.retain(|c| c.end <= pieces.len());
        stop_reason = "stop_sequence";
    }
    let mut reasoning_pieces = effort.map(|effort| {
        self::pieces(&format!(
            "Reasoning ({effort}): the question is: {}",
            strip_directives(&last_user)
        ))
    });
    // Reasoning counts against `maxTokens` first.
    if let (Some(max), Some(reasoning)) = (max_tokens, reasoning_pieces.as_mut())
        && reasoning.len() as u64 > max
    {
        reasoning.truncate(max as usize);
        stop_reason = "max_tokens";
    }
    let reasoned = reasoning_pieces.as_ref().map_or(0, Vec::len) as u64;
    if let Some(max) = max_tokens
        .map(|max| max.saturating_sub(reasoned))
        .filter(|max| pieces.len() as u64 > *max)
    {
        pieces.truncate(max as usize);
        citations.retain(|c| c.end <= pieces.len());
        stop_reason = "max_tokens";
    }
    let reasoning = reasoning_pieces.map(|pieces| Reasoning {
        signature: signature(&pieces.concat()),
        pieces,
        redacted: directives.contains(REDACTED_DIRECTIVE),
    });
    let fault = directive(&directives, "fault").map(str::to_string);
    let replaced = matches!(fault.as_deref(), Some("guardrail" | "content-filter"));
    match fault.as_deref() {
        Some("guardrail") => {
            pieces = vec!["Sorry, I cannot answer that.".into()];
            citations.clear();
            stop_reason = "guardrail_intervened";
        }
        Some("content-filter") => {
            pieces = vec!["Sorry.".into()];
            citations.clear();
            stop_reason = "content_filtered";
        }
        _ => {}
    }
    let mut guard = guardrail(body, fault.as_deref() == Some("guardrail"));
    let mut unguarded = None;
    if let Some(guard) = guard.as_mut().filter(|_| !replaced)
        && let Some(scores) = grounding_scores(last_user_message, &pieces.concat())
    {
        guard.scores = Some(scores);
        if scores.0 < GROUNDING_THRESHOLD || scores.1 < GROUNDING_THRESHOLD {
            guard.grounding_blocked = true;
            stop_reason = "guardrail_intervened";
            unguarded = Some((
                std::mem::replace(&mut pieces, vec![GROUNDING_BLOCKED.to_string()]),
                std::mem::take(&mut citations),
            ));
        }
    }
    let mut echoes = Vec::new();
    for (field, key, allowed) in [
        (
            "performanceConfig",
            "latency",
            &["standard", "optimized"][..],
        ),
        ("serviceTier", "type", &["default", "priority", "flex"][..]),
    ] {
        let Some(value) = body.get(field) else {
            continue;
        };
        match value.get(key).and_then(Value::as_str) {
            Some(v) if allowed.contains(&v) => echoes.push((field, value.clone())),
            _ => {
                invalid.get_or_insert_with(|| {
                    format!("{field}.{key}: must be one of {}", allowed.join(", "))
                });
            }
        }
    }
    // The calls are made when nothing else ended the answer (a fault, a guardrail, `maxTokens`).
    if stop_reason == "end_turn" && !tool_calls.is_empty() {
        stop_reason = "tool_use";
    } else {
        tool_calls.clear();
    }
    let words = pieces.len()
        + reasoning.as_ref().map_or(0, |r| r.pieces.len())
        + tool_calls.iter().map(|c| c.chunks.len()).sum::<usize>();
    // Pacing holds for the whole conversation: later turns (another agent's) keep it.
    let directed = directive(
        &format!("{directives}\n{}", all_text.join("\n")),
        "delay-ms",
    )
    .and_then(|n| n.parse().ok())
    .map(Duration::from_millis);
    let (delay, converse_delay) = match directed {
        Some(delay) => (delay, delay),
        None => (pace, pace * words as u32),
    };
    Plan {
        fault,
        stream_error_after: directive(&directives, "stream-error-after")
            .and_then(|n| n.parse().ok()),
        stream_break_after: directive(&directives, "stream-break-after")
            .and_then(|n| n.parse().ok()),
        delay,
        converse_delay,
        first_delay: directive(&directives, "first-delay-ms")
            .and_then(|n| n.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or_default(),
        stall_after: directive(&directives, "stall-after").and_then(|n| n.parse().ok()),
        pieces,
        citations,
        stop_reason,
        input_tokens,
        invalid,
        reasoning,
        guard,
        unguarded,
        echoes,
        tool_calls,
    }
}

/// Marks the last user message so that a `redactedContent` block follows the reasoning.
const REDACTED_DIRECTIVE: &str = "[[redacted-reasoning]]";
/// The bytes of a redacted reasoning block.
const REDACTED_BYTES: &[u8] = b"redacted by local-bedrock";
/// What replaces an answer the contextual grounding check blocks.
const GROUNDING_BLOCKED: &str = "Sorry, the model cannot answer this question.";
/// The grounding and relevance thresholds of the contextual grounding check.
const GROUNDING_THRESHOLD: f64 = 0.5;

/// The reasoning effort `additionalModelRequestFields` asks for (`low`, `medium`, `high`, `max`, `budget N`), or
/// the `ValidationException` message of a request the service refuses.
fn reasoning_effort(body: &Value) -> Result<Option<String>, String> {
    let Some(fields) = body.get("additionalModelRequestFields") else {
        return Ok(None);
    };
    let one_of = |value: Option<&Value>, default: &str, allowed: &[&str], field: &str| match value
        .map(Value::as_str)
    {
        None => Ok(Some(default.to_string())),
        Some(Some(v)) if allowed.contains(&v) => Ok(Some(v.to_string())),
        Some(_) => Err(format!("{field}: must be one of {}", allowed.join(", "))),
    };
    if let Some(thinking) = fields.get("thinking") {
        match thinking.get("type").and_then(Value::as_str) {
            Some("enabled") => {
                let Some(budget) = thinking.get("budget_tokens").and_then(Value::as_i64) else {
                    return Err("thinking.budget_tokens: must be an integer".into());
                };
                if budget < 1024 {
                    return Err("thinking.budget_tokens: must be at least 1024".into());
                }
                let max_tokens = body
                    .pointer("/inferenceConfig/maxTokens")
                    .and_then(Value::as_i64);
                if max_tokens.is_some_and(|max| budget >= max) {
                    return Err("max_tokens must be greater than thinking.budget_tokens".into());
                }
                let temperature = body
                    .pointer("/inferenceConfig/temperature")
                    .map(|t| t.as_f64());
                if temperature.is_some_and(|t| t != Some(1.0))
                    || body.pointer("/inferenceConfig/topP").is_some()
                {
                    return Err(
                        "temperature and top_p may not be set when thinking is enabled".into(),
                    );
                }
                Ok(Some(format!("budget {budget}")))
            }
            Some("adaptive") => one_of(
                fields.pointer("/output_config/effort"),
                "high",
                &["low", "medium", "high", "max"],
                "output_config.effort",
            ),
            Some("disabled") => Ok(None),
            _ => Err("thinking.type: must be one of enabled, adaptive, disabled".into()),
        }
    } else if let Some(config) = fields.get("reasoningConfig") {
        match config.get("type").and_then(Value::as_str) {
            Some("enabled") => one_of(
                config.get("maxReasoningEffort"),
                "medium",
                &["low", "medium", "high"],
                "reasoningConfig.maxReasoningEffort",
            ),
            Some("disabled") => Ok(None),
            _ => Err("reasoningConfig.type: must be one of enabled, disabled".into()),
        }
    } else if let Some(effort) = fields.get("reasoning_effort") {
        one_of(
            Some(effort),
            "",
            &["low", "medium", "high"],
            "reasoning_effort",
        )
    } else {
        Ok(None)
    }
}

/// A reasoning block's signature: `local-signature-` and the FNV-1a hash of its text in hex.
fn signature(text: &str) -> String {
    format!("local-signature-{:016x}", fnv1a(text))
}

/// The 64-bit FNV-1a hash of a text.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The request's `guardrailConfig`, if any; `input_blocked` when `[[fault:guardrail]]` asks for a blocked input.
fn guardrail(body: &Value, input_blocked: bool) -> Option<Guard> {
    let config = body.get("guardrailConfig")?;
    let field = |name: &str| config.get(name).and_then(Value::as_str);
    Some(Guard {
        id: field("guardrailIdentifier").unwrap_or_default().to_string(),
        trace: matches!(field("trace"), Some("enabled" | "enabled_full")),
        async_mode: field("streamProcessingMode") == Some("async"),
        input_blocked,
        scores: None,
        grounding_blocked: false,
    })
}

/// The words the grounding check compares: lower-cased, only alphanumeric characters kept, at least 3 characters.
fn grounding_words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|word| {
            word.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .filter(|word| word.chars().count() >= 3)
        .collect()
}

/// The text without what lies between `open` and `close` (both removed too; an unclosed `open` ends the text).
fn without_between(text: &str, open: &str, close: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        out.push_str(&rest[..start]);
        out.push(' ');
        match rest[start + open.len()..].find(close) {
            Some(end) => rest = &rest[start + open.len() + end + close.len()..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// The contextual grounding check's (grounding, relevance) scores of an answer, rounded to 2 decimals, when the
/// last user message holds guard content qualified `grounding_source` and guard content qualified `query`.
fn grounding_scores(last_user_message: Option<&Value>, answer: &str) -> Option<(f64, f64)> {
    let qualified = |qualifier: &str| {
        let texts: Vec<&str> = blocks_of(last_user_message?.get("content"))
            .iter()
            .filter_map(|b| b.pointer("/guardContent/text"))
            .filter(|g| {
                blocks_of(g.get("qualifiers"))
                    .iter()
                    .any(|q| q.as_str() == Some(qualifier))
            })
            .filter_map(|g| g.get("text").and_then(Value::as_str))
            .collect();
        (!texts.is_empty()).then(|| texts.join("\n"))
    };
    let sources = grounding_words(&qualified("grounding_source")?);
    let query = grounding_words(&strip_directives(&qualified("query")?));
    let answer = grounding_words(&without_between(
        &without_between(answer, "<<", ">>"),
        "[",
        "]",
    ));
    let share = |words: &[String], found: &dyn Fn(&String) -> bool| {
        if words.is_empty() {
            return 1.0;
        }
        let share = words.iter().filter(|w| found(w)).count() as f64 / words.len() as f64;
        (share * 100.0).round() / 100.0
    };
    let grounding = share(&answer, &|w| sources.contains(w));
    let relevance = share(&query, &|w| answer.contains(w) || sources.contains(w));
    Some((grounding, relevance))
}

/// Whether a model id (a foundation model's, an inference profile's or an ARN) is of Claude 4.5 or later.
pub fn claude_4_5_or_later(model_id: &str) -> bool {
    const FAMILIES: &[&str] = &[
        "claude-sonnet-4-5",
        "claude-opus-4-5",
        "claude-haiku-4-5",
        "claude-sonnet-4-6",
        "claude-opus-4-6",
        "claude-opus-4-7",
        "claude-sonnet-5",
        "claude-opus-5",
        "claude-haiku-5",
    ];
    FAMILIES.iter().any(|f| model_id.contains(f))
}

/// The `ValidationException` message of what the model the path names refuses, as Bedrock plays it for that model
/// (checked after every other refusal): `temperature` with `topP` for Claude 4.5 and later; a tool's `strict` for
/// another vendor's model without strict tool use.
fn model_refusal(model_id: &str, body: &Value) -> Option<String> {
    let inference = body.get("inferenceConfig");
    let both = inference.is_some_and(|c| c.get("temperature").is_some() && c.get("topP").is_some());
    if both && claude_4_5_or_later(model_id) {
        return Some(
            "The model returned the following errors: `temperature` and `top_p` cannot both be specified for \
             this model. Please use only one."
                .into(),
        );
    }
    // Another vendor's model without strict tool use; this server's own models (`local.…`) take it, as they take
    // structured output.
    let vendor = [
        "anthropic.",
        "amazon.",
        "meta.",
        "mistral.",
        "deepseek.",
        "cohere.",
        "ai21.",
    ]
    .iter()
    .any(|v| model_id.contains(v));
    let strict_tools =
        !vendor || claude_4_5_or_later(model_id) || model_id.contains("openai.gpt-oss");
    let tools = body
        .pointer("/toolConfig/tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let strict = tools
        .iter()
        .position(|t| t.pointer("/toolSpec/strict").is_some());
    match strict {
        Some(i) if !strict_tools => Some(format!(
            "This model doesn't support the toolConfig.tools.{i}.toolSpec.strict field. Remove strict and try again."
        )),
        _ => None,
    }
}

/// The HTTP error Bedrock answers for a fault, if the fault is one.
fn fault_response(state: &AppState, plan: &Plan, body: &Value) -> Option<Response> {
    if let Some(message) = &plan.invalid {
        return Some(error_response(400, "ValidationException", message));
    }
    let (status, kind, message) = match plan.fault.as_deref()? {
        "throttle" => (
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        f if f.starts_with("throttle-first:") => {
            let limit: u32 = f["throttle-first:".len()..].parse().unwrap_or(1);
            let mut shared = state.shared.lock().unwrap();
            let seen = shared.attempts.entry(canonical(body)).or_insert(0);
            *seen += 1;
            if *seen > limit {
                return None;
            }
            (
                429,
                "ThrottlingException",
                "Too many requests, please wait before trying again.",
            )
        }
        "too-long" => (
            400,
            "ValidationException",
            "Input is too long for requested model.",
        ),
        "validation" => (
            400,
            "ValidationException",
            "The provided request is not valid",
        ),
        "access-denied" => (
            403,
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        "not-found" => (
            404,
            "ResourceNotFoundException",
            "The provided model identifier is invalid.",
        ),
        "model-error" => (
            424,
            "ModelErrorException",
            "The model encountered an error processing the request.",
        ),
        "model-timeout" => (
            408,
            "ModelTimeoutException",
            "Model has timed out in processing the request.",
        ),
        "unavailable" => (
            503,
            "ServiceUnavailableException",
            "Service is unavailable. Try again later.",
        ),
        "internal" => (
            500,
            "InternalServerException",
            "The server encountered an internal error.",
        ),
        _ => return None,
    };
    Some(error_response(status, kind, message))
}

/// An error answer as Bedrock sends it: the status, the `x-amzn-errortype` header and a JSON message.
fn error_response(status: u16, kind: &str, message: &str) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (
                header::HeaderName::from_static("x-amzn-errortype"),
                format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            ),
        ],
        json!({ "message": message }).to_string(),
    )
        .into_response();
    response.headers_mut().insert(
        "x-amzn-requestid",
        header::HeaderValue::from_static("00000000-0000-0000-0000-000000000000"),
    );
    response
}

/// The `usage` object: `output` tokens sent; with cache points, `cache` is (read, write).
fn usage(plan: &Plan, output: usize, cache: Option<(u64, u64)>) -> Value {
    let output = output as u64;
    let (read, write) = cache.unwrap_or_default();
    let input = plan.input_tokens.saturating_sub(read + write);
    let mut usage = json!({
        "inputTokens": input,
        "outputTokens": output,
        "totalTokens": input + output + read + write,
    });
    if cache.is_some() {
        usage["cacheReadInputTokens"] = json!(read);
        usage["cacheWriteInputTokens"] = json!(write);
    }
    usage
}

/// The response fields beside `usage` and `metrics` (`converse`: top level; stream: the `metadata` event): the
/// echoed `performanceConfig` and `serviceTier`, and the guardrail's `trace`.
fn extra_fields(plan: &Plan, out: &mut Value) {
    for (field, value) in &plan.echoes {
        out[*field] = value.clone();
    }
    if let Some(guard) = plan.guard.as_ref().filter(|g| g.trace) {
        out["trace"] = trace(guard);
    }
}

/// The guardrail `trace`: the input's content-policy filters, the output's contextual grounding filters.
fn trace(guard: &Guard) -> Value {
    let input_filters = if guard.input_blocked {
        vec![json!({
            "type": "VIOLENCE",
            "confidence": "HIGH",
            "filterStrength": "HIGH",
            "action": "BLOCKED",
            "detected": true,
        })]
    } else {
        Vec::new()
    };
    let filter = |kind: &str, score: f64| {
        let detected = score < GROUNDING_THRESHOLD;
        json!({
            "type": kind,
            "threshold": GROUNDING_THRESHOLD,
            "score": score,
            "action": if detected { "BLOCKED" } else { "NONE" },
            "detected": detected,
        })
    };
    let output = match guard.scores {
        Some((grounding, relevance)) => json!({"contextualGroundingPolicy": {"filters": [
            filter("GROUNDING", grounding),
            filter("RELEVANCE", relevance),
        ]}}),
        None => json!({}),
    };
    let blocked = guard.input_blocked || guard.grounding_blocked;
    let mut input = serde_json::Map::new();
    input.insert(
        guard.id.clone(),
        json!({"contentPolicy": {"filters": input_filters}}),
    );
    let mut outputs = serde_json::Map::new();
    outputs.insert(guard.id.clone(), json!([output]));
    json!({"guardrail": {
        "inputAssessment": input,
        "outputAssessments": outputs,
        "actionReason": if blocked { "Guardrail blocked." } else { "No action." },
    }})
}

fn record(state: &AppState, operation: Operation, model_id: String, body: Value) -> usize {
    let mut shared = state.shared.lock().unwrap();
    shared.requests.push(RecordedRequest {
        operation,
        model_id,
        body,
        deltas_sent_at: Vec::new(),
    });
    shared.requests.len() - 1
}

/// A request's body, which Bedrock refuses with a `SerializationException` unless it is JSON.
struct JsonBody(Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|_| {
            (
                StatusCode::BAD_REQUEST,
                [(
                    header::HeaderName::from_static("x-amzn-errortype"),
                    "SerializationException",
                )],
                json!({"message": "body is not JSON"}).to_string(),
            )
                .into_response()
        })
    }
}

async fn converse(
    State(state): State<AppState>,
    Path(model_id): Path<String>,
    _headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Response {
    let mut plan = plan(&body, state.pace);
    if plan.invalid.is_none() {
        plan.invalid = model_refusal(&model_id, &body);
    }
    record(&state, Operation::Converse, model_id.clone(), body.clone());
    tokio::time::sleep(plan.first_delay).await;
    if let Some(r) = fault_response(&state, &plan, &body) {
        return r;
    }
    let cache = cache_usage(&state, &model_id, &body);
    if plan.stall_after.is_some() {
        tokio::time::sleep(STALL).await;
    }
    tokio::time::sleep(plan.converse_delay).await;
    let mut content = reasoning_blocks(&plan);
    content.extend(content_blocks(&plan));
    content.extend(plan.tool_calls.iter().map(
        |call| json!({"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.input}}),
    ));
    let output = plan.pieces.len()
        + plan.reasoning.as_ref().map_or(0, |r| r.pieces.len())
        + plan
            .tool_calls
            .iter()
            .map(|c| c.chunks.len())
            .sum::<usize>();
    let mut out = json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": plan.stop_reason,
        "usage": usage(&plan, output, cache),
        "metrics": {"latencyMs": 1},
    });
    extra_fields(&plan, &mut out);
    (
        [(header::CONTENT_TYPE, "application/json")],
        out.to_string(),
    )
        .into_response()
}

/// A buffered answer's reasoning blocks: its `reasoningText`, and a `redactedContent` block when asked for.
fn reasoning_blocks(plan: &Plan) -> Vec<Value> {
    let Some(reasoning) = &plan.reasoning else {
        return Vec::new();
    };
    let mut blocks = vec![json!({"reasoningContent": {"reasoningText": {
        "text": reasoning.pieces.concat(),
        "signature": reasoning.signature,
    }}})];
    if reasoning.redacted {
        blocks.push(json!({"reasoningContent": {"redactedContent": redacted_content()}}));
    }
    blocks
}

/// The base64 of a redacted reasoning block's bytes.
fn redacted_content() -> String {
    aws_smithy_types::base64::encode(REDACTED_BYTES)
}

/// A buffered answer's content blocks: one `text` block, or with native citations a `citationsContent` block per
/// cited sentence and `text` blocks for the rest.
fn content_blocks(plan: &Plan) -> Vec<Value> {
    let mut blocks = Vec::new();
    let mut next = 0;
    let text_block = |text: String, blocks: &mut Vec<Value>| {
        if !text.is_empty() {
            blocks.push(json!({ "text": text }));
        }
    };
    for cite in &plan.citations {
        text_block(plan.pieces[next..cite.start].concat(), &mut blocks);
        blocks.push(json!({"citationsContent": {
            "content": [{"text": plan.pieces[cite.start..cite.end].concat()}],
            "citations": [cite.citation],
        }}));
        next = cite.end;
    }
    text_block(plan.pieces[next..].concat(), &mut blocks);
    if blocks.is_empty() && plan.tool_calls.is_empty() {
        blocks.push(json!({"text": ""}));
    }
    blocks
}

fn frame(headers: Vec<(&'static str, &str)>, payload: Value) -> Bytes {
    let headers = headers
        .into_iter()
        .map(|(name, value)| Header::new(name, HeaderValue::String(value.to_string().into())))
        .collect();
    let message = Message::new_from_parts(headers, payload.to_string().into_bytes());
    let mut buffer = Vec::new();
    write_message_to(&message, &mut buffer).expect("an event frame always encodes");
    Bytes::from(buffer)
}

fn event(kind: &str, payload: Value) -> Bytes {
    frame(
        vec![
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload,
    )
}

fn exception(kind: &str, message: &str) -> Bytes {
    frame(
        vec![
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({ "message": message }),
    )
}

/// How long a stalled model stays silent: longer than any timeout a test or a client would wait.
const STALL: Duration = Duration::from_secs(600);

/// Waits `pause` without sending, the connection open; false when the client left meanwhile (stop producing).
async fn silence(tx: &mpsc::Sender<Result<Bytes, std::io::Error>>, pause: Duration) -> bool {
    if pause.is_zero() {
        return !tx.is_closed();
    }
    tokio::select! {
        _ = tokio::time::sleep(pause) => true,
        _ = tx.closed() => false,
    }
}

async fn converse_stream(
    State(state): State<AppState>,
    Path(model_id): Path<String>,
    JsonBody(body): JsonBody,
) -> Response {
    let mut plan = plan(&body, state.pace);
    if plan.invalid.is_none() {
        plan.invalid = model_refusal(&model_id, &body);
    }
    let index = record(
        &state,
        Operation::ConverseStream,
        model_id.clone(),
        body.clone(),
    );
    if let Some(r) = fault_response(&state, &plan, &body) {
        tokio::time::sleep(plan.first_delay).await;
        return r;
    }
    let cache = cache_usage(&state, &model_id, &body);
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        let send = |b: Bytes| {
            let tx = tx.clone();
            async move { tx.send(Ok(b)).await.is_ok() }
        };
        let delta = |index: usize, delta: Value| {
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": delta}),
            )
        };
        let stop = |index: usize| event("contentBlockStop", json!({"contentBlockIndex": index}));
        // A delta after the plan's delay: none at all when unpaced (tokio's timer rounds a zero sleep up to its next
        // millisecond tick). False once the client went away: stop producing.
        let paced = async |index: usize, piece: Value| {
            if !plan.delay.is_zero() {
                tokio::time::sleep(plan.delay).await;
            }
            send(delta(index, piece)).await
        };
        let failed = || {
            send(exception(
                "modelStreamErrorException",
                "The model stream failed.",
            ))
        };
        if !send(event("messageStart", json!({"role": "assistant"}))).await {
            return;
        }
        if !silence(&tx, plan.first_delay).await {
            return;
        }
        // The block the answer's text goes to: after the reasoning blocks.
        let mut block = 0;
        let mut output = 0;
        if let Some(reasoning) = &plan.reasoning {
            for piece in &reasoning.pieces {
                if !paced(block, json!({"reasoningContent": {"text": piece}})).await {
                    return;
                }
                output += 1;
                if state.log_deltas {
                    eprintln!("local-bedrock: sent reasoning {piece:?}");
                }
            }
            let signature = json!({"reasoningContent": {"signature": reasoning.signature}});
            if !(send(delta(block, signature)).await && send(stop(block)).await) {
                return;
            }
            block += 1;
            if reasoning.redacted {
                let redacted = json!({"reasoningContent": {"redactedContent": redacted_content()}});
                if !(send(delta(block, redacted)).await && send(stop(block)).await) {
                    return;
                }
                block += 1;
            }
        }
        // An `async` guardrail lets the answer through and intervenes after it.
        let (pieces, citations) = match &plan.unguarded {
            Some((pieces, citations)) if plan.guard.as_ref().is_some_and(|g| g.async_mode) => {
                (pieces, citations)
            }
            _ => (&plan.pieces, &plan.citations),
        };
        for (i, piece) in pieces.iter().enumerate() {
            if plan.stream_break_after == Some(i) {
                // An error item makes the server abort the connection mid-body.
                let _ = tx
                    .send(Err(std::io::Error::other("connection broken on purpose")))
                    .await;
                return;
            }
            if plan.stall_after == Some(i) {
                silence(&tx, STALL).await;
                return;
            }
            if plan.stream_error_after == Some(i) {
                failed().await;
                return;
            }
            if !paced(block, json!({"text": piece})).await {
                return;
            }
            output += 1;
            let now = SystemTime::now();
            if let Some(r) = state.shared.lock().unwrap().requests.get_mut(index) {
                r.deltas_sent_at.push(now);
            }
            if state.log_deltas {
                let ms = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis();
                eprintln!("local-bedrock: sent delta {} at {ms} ms {piece:?}", i + 1);
            }
            for cite in citations.iter().filter(|c| c.end == i + 1) {
                if !send(delta(block, json!({"citation": cite.citation}))).await {
                    return;
                }
                if state.log_deltas {
                    eprintln!("local-bedrock: sent citation {}", cite.citation);
                }
            }
        }
        if plan.stall_after.is_some_and(|n| n >= pieces.len()) {
            silence(&tx, STALL).await;
            return;
        }
        if plan.stream_error_after.is_some_and(|n| n >= pieces.len()) {
            failed().await;
            return;
        }
        if !send(stop(block)).await {
            return;
        }
        // The calls, each a block of its own after the text: its start (id and name), its input JSON in pieces,
        // its stop.
        for call in &plan.tool_calls {
            block += 1;
            let start = json!({
                "contentBlockIndex": block,
                "start": {"toolUse": {"toolUseId": call.id, "name": call.name}},
            });
            if !send(event("contentBlockStart", start)).await {
                return;
            }
            for chunk in &call.chunks {
                if !paced(block, json!({"toolUse": {"input": chunk}})).await {
                    return;
                }
                output += 1;
            }
            if !send(stop(block)).await {
                return;
            }
            if state.log_deltas {
                eprintln!("local-bedrock: sent tool call {} {}", call.name, call.id);
            }
        }
        let mut metadata =
            json!({"usage": usage(&plan, output, cache), "metrics": {"latencyMs": 1}});
        extra_fields(&plan, &mut metadata);
        let _ = send(event(
            "messageStop",
            json!({"stopReason": plan.stop_reason}),
        ))
        .await
            && send(event("metadata", metadata)).await;
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/vnd.amazon.eventstream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Whether `CountTokens` counts for `model_id`, as Bedrock answers: only a foundation model (by id or ARN) of a
/// family that counts (Anthropic's); inference profiles and other families are refused.
fn counts_tokens(model_id: &str) -> bool {
    let id = model_id
        .split_once(":foundation-model/")
        .map_or(model_id, |(_, id)| id);
    id.starts_with("anthropic.")
}

/// `POST /model/{id}/count-tokens`: the input tokens a `converse` request of the same `system` and `messages`
/// would count (`input.converse`), or the whitespace words of an `input.invokeModel` body.
async fn count_tokens(
    State(state): State<AppState>,
    Path(model_id): Path<String>,
    JsonBody(body): JsonBody,
) -> Response {
    record(
        &state,
        Operation::CountTokens,
        model_id.clone(),
        body.clone(),
    );
    if !counts_tokens(&model_id) {
        return error_response(
            400,
            "ValidationException",
            "The provided model doesn't support counting tokens.",
        );
    }
    let tokens = if let Some(converse) = body.pointer("/input/converse") {
        input_tokens(
            converse.get("toolConfig"),
            converse.get("system"),
            converse.get("messages"),
        )
    } else if let Some(invoke) = body.pointer("/input/invokeModel") {
        let text = invoke
            .get("body")
            .and_then(Value::as_str)
            .and_then(|b64| aws_smithy_types::base64::decode(b64).ok())
            .unwrap_or_default();
        String::from_utf8_lossy(&text).split_whitespace().count() as u64
    } else {
        return error_response(
            400,
            "ValidationException",
            "input: must hold converse or invokeModel",
        );
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "inputTokens": tokens }).to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_is_valid_against_its_schema_and_the_same_every_time() {
        let schema = json!({
            "type": "object",
            "properties": {
                "s": {"type": "string", "minLength": 9},
                "n": {"type": ["null", "number"], "minimum": 2.5},
                "i": {"type": "integer", "maximum": 0},
                "e": {"enum": ["b", "a"]},
                "c": {"const": 7},
                "a": {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
                "o": {"anyOf": [{"type": "null"}, {"type": "string"}]},
                "x": {"properties": {"y": {"type": "integer"}}, "required": []},
            },
            "required": ["s", "a"],
        });
        assert_eq!(
            example(&schema, false),
            json!({"s": "examplexx", "n": 2.5, "i": 0, "e": "b", "c": 7, "a": [true, true], "o": null, "x": {"y": 1}})
        );
        assert_eq!(
            example(&schema, true),
            json!({"s": "examplexx", "a": [true, true]})
        );
        assert_eq!(example(&json!({}), true), json!({}));
    }

    #[test]
    fn a_stop_sequence_cuts_the_pieces_before_it() {
        let mut p = pieces("one two STOP three");
        assert!(cut_at_stop(&mut p, &["three", "STOP"]));
        assert_eq!(p.concat(), "one two ");
        let mut p = pieces("one two");
        assert!(!cut_at_stop(&mut p, &["zz", ""]));
        assert_eq!(p.concat(), "one two");
        let mut p = pieces("abc def");
        assert!(cut_at_stop(&mut p, &["c d"]));
        assert_eq!(p, ["ab"]);
    }

    #[test]
    fn a_grounded_answer_leaves_out_the_passages_heading_marks() {
        let sources = [
            (
                "Benefit_Options.md",
                "# Benefit Options ## Medical Employees may choose between two plans. More.",
            ),
            ("Gear.md", "## Tent care Dry the tent before storing it."),
        ];
        let answer = bracket_cited_answer(&sources);
        assert_eq!(
            answer,
            "Benefit Options Medical Employees may choose between two plans. [Benefit_Options.md] \
             Tent care Dry the tent before storing it. [Gear.md]"
        );
        // A word that only starts with `#` is text, not a heading mark.
        assert_eq!(first_sentence("Use #general. Then"), "Use #general.");
    }

    #[test]
    fn requests_that_differ_only_in_key_order_are_the_same_request() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[{"q":1,"p":2}],"x":2}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":2,"y":[{"p":2,"q":1}]},"b":1}"#).unwrap();
        assert_ne!(a.to_string(), b.to_string());
        assert_eq!(canonical(&a), canonical(&b));
        let c: Value = serde_json::from_str(r#"{"a":{"x":2,"y":[{"p":2,"q":9}]},"b":1}"#).unwrap();
        assert_ne!(canonical(&a), canonical(&c));
    }

    #[test]
    fn tool_directives_are_read_in_order_with_their_json_and_malformed_ones_are_none() {
        let text = r#"add [[tool:add {"a": 2, "b": [[3]]}]] then [[tool-loop:search]] and
            [[tool:bad {"a":]] [[tool:list [1]]] [[tool: {}]] [[toolbox:x]] [[tool:last {"q":"]]"} ]]"#;
        assert_eq!(
            tool_directives(text),
            vec![
                ToolDirective {
                    looping: false,
                    name: "add".into(),
                    input: json!({"a": 2, "b": [[3]]}),
                },
                ToolDirective {
                    looping: true,
                    name: "search".into(),
                    input: json!({}),
                },
                ToolDirective {
                    looping: false,
                    name: "last".into(),
                    input: json!({"q": "]]"}),
                },
            ]
        );
    }

    #[test]
    fn an_input_goes_in_two_pieces_at_least_and_sixteen_characters_at_most() {
        assert_eq!(input_chunks("{}"), vec!["{", "}"]);
        let long = json!({"query": "the whole input of a longer call", "n": 1}).to_string();
        let chunks = input_chunks(&long);
        assert!(chunks.len() > 2, "{chunks:?}");
        assert!(chunks.iter().all(|c| c.chars().count() <= 16), "{chunks:?}");
        assert_eq!(chunks.concat(), long);
        assert_eq!(input_chunks("{\"é\":\"ü\"}").concat(), "{\"é\":\"ü\"}");
    }

    #[test]
    fn results_are_quoted_by_the_name_of_their_call_cut_at_600_characters() {
        let calls = [
            json!({"toolUseId": "t1", "name": "add", "input": {}}),
            json!({"toolUseId": "t2", "name": "fetch", "input": {}}),
            json!({"toolUseId": "t3", "name": "big", "input": {}}),
        ];
        let results = [
            json!({"toolUseId": "t1", "content": [{"text": "5"}], "status": "success"}),
            json!({"toolUseId": "t2", "content": [{"text": "timed\n out"}], "status": "error"}),
            json!({"toolUseId": "t3", "content": [{"text": "x".repeat(700)}]}),
            json!({"toolUseId": "t4", "content": [{"json": {"a": 1}}]}),
        ];
        let answer = tool_results_answer(
            &results.iter().collect::<Vec<_>>(),
            &calls.iter().collect::<Vec<_>>(),
        );
        let paragraphs: Vec<&str> = answer.split("\n\n").collect();
        assert_eq!(paragraphs[0], "add returned 5");
        assert_eq!(paragraphs[1], "fetch failed: timed out");
        assert_eq!(paragraphs[2], format!("big returned {}…", "x".repeat(600)));
        assert_eq!(paragraphs[3], r#"unknown returned {"a":1}"#);
    }

    #[test]
    fn tool_blocks_are_refused_as_bedrock_refuses_them() {
        let tools = json!({"tools": [{"toolSpec": {"name": "add", "inputSchema": {"json": {}}}}]});
        let asked = json!({"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "t1", "name": "add", "input": {}}}
        ]});
        let answered = |id: &str| json!({"role": "user", "content": [{"toolResult": {"toolUseId": id, "content": [{"text": "5"}]}}]});
        let question = json!({"role": "user", "content": [{"text": "add"}]});
        let body = |config: Option<&Value>, messages: Vec<Value>| {
            let mut body = json!({"messages": messages});
            if let Some(config) = config {
                body["toolConfig"] = config.clone();
            }
            body
        };
        let good = vec![question.clone(), asked.clone(), answered("t1")];
        assert_eq!(tool_refusal(&body(Some(&tools), good.clone())), None);
        assert_eq!(tool_refusal(&body(None, vec![question.clone()])), None);
        assert!(
            tool_refusal(&body(None, good))
                .unwrap()
                .starts_with("The toolConfig field must be defined")
        );
        assert!(
            tool_refusal(&body(
                Some(&tools),
                vec![question.clone(), asked.clone(), answered("t2")]
            ))
            .unwrap()
            .contains("unexpected `tool_use_id` found in `tool_result` blocks: t2")
        );
        assert!(
            tool_refusal(&body(
                Some(&tools),
                vec![question.clone(), asked, question.clone()]
            ))
            .unwrap()
            .starts_with("messages.2: `tool_use` ids were found without `tool_result` blocks")
        );
        let bad_name =
            json!({"tools": [{"toolSpec": {"name": "no spaces", "inputSchema": {"json": {}}}}]});
        assert!(
            tool_refusal(&body(Some(&bad_name), vec![question.clone()]))
                .unwrap()
                .contains("toolConfig.tools.1.member.toolSpec.name")
        );
        let twice = json!({"tools": [
            {"toolSpec": {"name": "add", "inputSchema": {"json": {}}}},
            {"toolSpec": {"name": "add", "inputSchema": {"json": {}}}}
        ]});
        assert_eq!(
            tool_refusal(&body(Some(&twice), vec![question])).as_deref(),
            Some("tools: Tool names must be unique.")
        );
    }
}
