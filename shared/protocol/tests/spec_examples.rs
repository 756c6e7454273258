//! Every JSON example of the spec documents in `../shared/spec/`, parsed into the protocol crate's types and
//! serialized back: the result must equal the example as a JSON value (fields shown as `null` stay `null`).
//!
//! The fixtures are copied from the documents byte for byte, except where an example is not valid JSON as printed;
//! the comment beside each such fixture says what was repaired, and nothing else was changed.

use chat_protocol::chat_ui::{
    ChatMessageContent, ChatRequest as UiChatRequest, ChatSummary, CreateChatRequest,
    HistoryMessage, ReplaceMessagesRequest,
};
use chat_protocol::v2024_01_28::{ChatCompletion, ChatCompletionChunk, ChatRequest as Request0128};
use chat_protocol::v2024_05_29::{ChatRequest, ChatResponse, StreamChunk};
use chat_protocol::{ErrorBody, RequestContext, ResponseContext};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn round_trip<T: DeserializeOwned + Serialize>(fixture: &str) {
    let path = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let original: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let typed: T = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{fixture} does not parse as {}: {e}",
            std::any::type_name::<T>()
        )
    });
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, original, "{fixture} changed in the round trip");
}

// Fragments: the documents print `"overrides": {…}`, `"followup_questions": […]`, `"data_points": {…},` and
// `"thoughts": […]` as a key and its value, not as a JSON document. Each fragment fixture is the fragment
// wrapped in `{` `}` (and, for `data_points`, its trailing comma dropped), which makes it a request or response
// `context` object.

macro_rules! fixtures {
    ($($name:ident: $ty:ty = $file:literal;)*) => {
        $(#[test] fn $name() { round_trip::<$ty>($file); })*
    };
}

fixtures! {
    v0529_request: ChatRequest = "2024-05-29/request.json";
    // Fragment wrapped in braces (see above).
    v0529_overrides: RequestContext = "2024-05-29/overrides.json";
    // Repaired: the "Prompt" thought's description has a raw line break inside a string; written as `\n`.
    v0529_response: ChatResponse = "2024-05-29/response.json";
    v0529_error_1: ErrorBody = "2024-05-29/error-1.json";
    v0529_error_2: ErrorBody = "2024-05-29/error-2.json";
    // Repaired: the three stream objects are printed back to back (`}{`) in one block; one file each, and a
    // trailing comma after `"sessionState": null` removed.
    v0529_stream_1: StreamChunk = "2024-05-29/stream-1.json";
    // Repaired: split out of the back-to-back block (see stream-1).
    v0529_stream_2: StreamChunk = "2024-05-29/stream-2.json";
    // Repaired: split out of the back-to-back block (see stream-1).
    v0529_stream_3: StreamChunk = "2024-05-29/stream-3.json";
    v0529_stream_error: ErrorBody = "2024-05-29/stream-error.json";
    // Fragment wrapped in braces.
    v0529_followup_questions: ResponseContext = "2024-05-29/followup-questions.json";
    // Fragment wrapped in braces, trailing comma dropped.
    v0529_data_points_text: ResponseContext = "2024-05-29/data-points-text.json";
    // Fragment wrapped in braces, trailing comma dropped.
    v0529_data_points_images: ResponseContext = "2024-05-29/data-points-images.json";
    // Fragment wrapped in braces.
    v0529_thoughts: ResponseContext = "2024-05-29/thoughts.json";

    v0529_snake_request: ChatRequest = "2024-05-29-snake-case/request.json";
    // Fragment wrapped in braces.
    v0529_snake_overrides: RequestContext = "2024-05-29-snake-case/overrides.json";
    // Repaired: a raw line break inside the "Prompt" description string, written as `\n`.
    v0529_snake_response: ChatResponse = "2024-05-29-snake-case/response.json";
    v0529_snake_error_1: ErrorBody = "2024-05-29-snake-case/error-1.json";
    v0529_snake_error_2: ErrorBody = "2024-05-29-snake-case/error-2.json";
    // Repaired: printed back to back with the next two; split, and the trailing comma after
    // `"session_state": null` removed.
    v0529_snake_stream_1: StreamChunk = "2024-05-29-snake-case/stream-1.json";
    // Repaired: split out of the back-to-back block.
    v0529_snake_stream_2: StreamChunk = "2024-05-29-snake-case/stream-2.json";
    // Repaired: split out of the back-to-back block.
    v0529_snake_stream_3: StreamChunk = "2024-05-29-snake-case/stream-3.json";
    v0529_snake_stream_error: ErrorBody = "2024-05-29-snake-case/stream-error.json";
    // Fragment (indented in the page) dedented and wrapped in braces.
    v0529_snake_followup_questions: ResponseContext = "2024-05-29-snake-case/followup-questions.json";
    // Fragment dedented, wrapped in braces, trailing comma dropped.
    v0529_snake_data_points_text: ResponseContext = "2024-05-29-snake-case/data-points-text.json";
    // Fragment dedented, wrapped in braces, trailing comma dropped.
    v0529_snake_data_points_images: ResponseContext = "2024-05-29-snake-case/data-points-images.json";
    // Fragment dedented and wrapped in braces.
    v0529_snake_thoughts: ResponseContext = "2024-05-29-snake-case/thoughts.json";

    v0128_request: Request0128 = "2024-01-28/request.json";
    // Fragment wrapped in braces.
    v0128_overrides: RequestContext = "2024-01-28/overrides.json";
    // Repaired: a raw line break inside the "Prompt" description string, written as `\n`.
    v0128_completion: ChatCompletion = "2024-01-28/completion.json";
    v0128_error_1: ErrorBody = "2024-01-28/error-1.json";
    v0128_error_2: ErrorBody = "2024-01-28/error-2.json";
    // Repaired: the three chunks are printed back to back (`}{`) in one block; one file each.
    v0128_chunk_1: ChatCompletionChunk = "2024-01-28/chunk-1.json";
    // Repaired: split out of the back-to-back block.
    v0128_chunk_2: ChatCompletionChunk = "2024-01-28/chunk-2.json";
    // Repaired: split out of the back-to-back block.
    v0128_chunk_3: ChatCompletionChunk = "2024-01-28/chunk-3.json";
    v0128_stream_error: ErrorBody = "2024-01-28/stream-error.json";
    // Fragment wrapped in braces.
    v0128_followup_questions: ResponseContext = "2024-01-28/followup-questions.json";
    // Fragment wrapped in braces, trailing comma dropped.
    v0128_data_points_text: ResponseContext = "2024-01-28/data-points-text.json";
    // Fragment wrapped in braces, trailing comma dropped.
    v0128_data_points_images: ResponseContext = "2024-01-28/data-points-images.json";
    // Fragment wrapped in braces.
    v0128_thoughts: ResponseContext = "2024-01-28/thoughts.json";

    ui_request: UiChatRequest = "chat-ui-api/request.json";
    ui_standard_response: Vec<ChatMessageContent> = "chat-ui-api/standard-response.json";
    // The JSON after `data: ` of the first SSE line of the multi-agent stream example.
    ui_multi_agent_event_1: ChatMessageContent = "chat-ui-api/multi-agent-event-1.json";
    // The JSON after `data: ` of the second SSE line.
    ui_multi_agent_event_2: ChatMessageContent = "chat-ui-api/multi-agent-event-2.json";
    ui_batch_response: Vec<ChatMessageContent> = "chat-ui-api/batch-response.json";
    ui_history_list: Vec<ChatSummary> = "chat-ui-api/history-list.json";
    ui_history_messages: Vec<HistoryMessage> = "chat-ui-api/history-messages.json";
    ui_create_chat_request: CreateChatRequest = "chat-ui-api/create-chat-request.json";
    ui_create_chat_response: ChatSummary = "chat-ui-api/create-chat-response.json";
    ui_update_chat_request: ReplaceMessagesRequest = "chat-ui-api/update-chat-request.json";
    ui_update_chat_response: ChatSummary = "chat-ui-api/update-chat-response.json";
}

/// Every fixture file is listed above: a new one cannot be added and forgotten.
#[test]
fn every_fixture_is_tested() {
    let this = include_str!("spec_examples.rs");
    let root = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut count = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap();
        for file in std::fs::read_dir(dir.path()).unwrap() {
            let file = file.unwrap();
            let name = format!(
                "\"{}/{}\"",
                dir.file_name().to_string_lossy(),
                file.file_name().to_string_lossy()
            );
            assert!(
                this.contains(&name),
                "fixture {name} has no round-trip test"
            );
            count += 1;
        }
    }
    assert_eq!(count, 50);
}
