//! Each dialect's answer, end to end through the real SDK client and the local Bedrock server.

mod support;

use chat_core::ChatMode;
use serde_json::{Value, json};
use support::{Harness, Reply, harness, harness_with};

/// `body` to `/chat`.
async fn chat(h: &Harness, body: Value) -> Reply {
    h.post("/chat", &body).await
}

/// `body` to `/chat` of a backend of its own, for a test that asks it one thing.
async fn chat_once(body: Value) -> Reply {
    chat(&harness().await, body).await
}

/// `body` to `/chat-ui/chat`.
async fn chat_ui(h: &Harness, body: Value) -> Reply {
    h.post("/chat-ui/chat", &body).await
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[tokio::test]
async fn v2024_05_29_answers_message_context_and_session_state() {
    let h = harness().await;
    let r = chat(&h, json!({"messages": user("hi")})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type(), "application/json");
    let body = r.json();
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["context", "message", "sessionState"]);
    assert_eq!(
        body["message"],
        json!({"role": "assistant", "content": "Echo: hi"})
    );
    // A request without session state starts a chat; its id is the session state.
    let chat_id = body["sessionState"].as_str().expect("the new chat's id");
    assert_eq!(
        chat_id.len(),
        32,
        "an unguessable id: 128 random bits in hex"
    );
    assert_eq!(
        h.history(chat_id).await,
        [
            ("user".into(), "hi".into()),
            ("assistant".into(), "Echo: hi".into())
        ]
    );
    // The raw text keeps the field order of the protocol's examples.
    assert!(
        r.body.starts_with(
            r#"{"message":{"role":"assistant","content":"Echo: hi"},"context":{"thoughts":["#
        ),
        "{}",
        r.body
    );
    let thoughts = body["context"]["thoughts"].as_array().unwrap();
    let prompt = &thoughts[0];
    assert_eq!(prompt["title"], "Prompt to generate answer");
    assert_eq!(
        prompt["description"][1],
        json!({"role": "user", "content": "hi"})
    );
    assert_eq!(prompt["props"]["model"], "local.echo-v1:0");
    assert_eq!(prompt["props"]["max_tokens"], 1024);
    let usage = &thoughts[1];
    assert_eq!(usage["title"], "Token usage");
    // The local model counts words: the default system prompt's 9, and "hi"; it answered 2 words.
    assert_eq!(usage["props"]["input_tokens"], 10);
    assert_eq!(usage["props"]["output_tokens"], 2);
    assert_eq!(usage["props"]["total_tokens"], 12);
}

#[tokio::test]
async fn session_state_comes_back_in_the_requests_spelling() {
    let h = harness().await;
    let first = chat(&h, json!({"messages": user("a"), "sessionState": null}))
        .await
        .json();
    let id = first["sessionState"].clone();
    assert!(id.is_string());
    let snake = chat(&h, json!({"messages": user("b"), "session_state": id}))
        .await
        .json();
    assert_eq!(snake["session_state"], id);
    assert!(snake.get("sessionState").is_none());
    let camel = chat(&h, json!({"messages": user("c"), "sessionState": id}))
        .await
        .json();
    assert_eq!(camel["sessionState"], id);
    assert!(camel.get("session_state").is_none());
    let both = chat(
        &h,
        json!({"messages": user("a"), "session_state": id, "sessionState": id}),
    )
    .await;
    assert_eq!(both.status, 400);
    assert_eq!(
        both.json()["error"],
        "session_state: send sessionState or session_state, not both"
    );
    let object = chat(
        &h,
        json!({"messages": user("a"), "sessionState": {"chat": 1}}),
    )
    .await;
    assert_eq!(object.status, 400);
    assert_eq!(
        object.json()["error"],
        "sessionState: expected the chat id this backend returned (a string), or null for a new chat"
    );
}

#[tokio::test]
async fn v2024_01_28_without_stream_is_a_chat_completion() {
    let r =
        chat_once(json!({"messages": user("hello there"), "stream": false, "session_state": null}))
            .await;
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["object"], "chat.completion");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert!(body["created"].as_i64().unwrap() > 1_700_000_000);
    assert_eq!(body["model"], "local.echo-v1:0");
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(
        choice["message"],
        json!({"role": "assistant", "content": "Echo: hello there"})
    );
    assert_eq!(choice["finish_reason"], "stop");
    assert!(choice["session_state"].is_string(), "the new chat's id");
    assert_eq!(
        choice["context"]["thoughts"][0]["title"],
        "Prompt to generate answer"
    );
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14})
    );
}

#[tokio::test]
async fn v2024_01_28_with_stream_is_all_its_chunks_at_once() {
    let r = chat_once(json!({"messages": user("one two three"), "stream": true})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type(), "application/json-lines");
    assert!(r.body.ends_with('\n'));
    let lines: Vec<Value> = r
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{}", r.body);
    let id = &lines[0]["id"];
    for line in &lines {
        assert_eq!(line["object"], "chat.completion.chunk");
        assert_eq!(&line["id"], id);
    }
    assert_eq!(
        lines[0]["choices"][0]["delta"],
        json!({"role": "assistant"})
    );
    assert!(lines[0]["choices"][0]["session_state"].is_string());
    assert_eq!(lines[0]["choices"][0]["finish_reason"], Value::Null);
    assert_eq!(
        lines[1]["choices"][0]["delta"],
        json!({"content": "Echo: one two three"})
    );
    assert_eq!(lines[2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(lines[2]["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn chat_ui_answers_one_chat_message_content() {
    let h = harness().await;
    let r = chat_ui(&h, json!({"messages": user("Why is the sky blue")})).await;
    assert_eq!(r.status, 200);
    let body = r.json();
    let items = body.as_array().unwrap();
    assert_eq!(items.len(), 1);
    let m = &items[0];
    assert_eq!(m["Role"], json!({"Label": "Assistant"}));
    assert_eq!(
        m["Items"],
        json!([{"$type": "TextContent", "Text": "Echo: Why is the sky blue"}])
    );
    assert_eq!(m["ModelId"], "local.echo-v1:0");
    let meta = &m["Metadata"];
    assert!(meta["Id"].as_str().unwrap().starts_with("chatcmpl-"));
    let created = meta["CreatedAt"].as_str().unwrap();
    assert!(
        created.len() == 25 && created.ends_with("+00:00"),
        "{created}"
    );
    assert_eq!(
        meta["Usage"],
        json!({"OutputTokenCount": 6, "InputTokenCount": 14, "TotalTokenCount": 20})
    );
    assert_eq!(meta["FinishReason"], "Stop");
    assert!(m.get("AuthorName").is_none());
    // No chat named: the Chat UI keeps its own history through /chat-history, so nothing is stored here.
    assert!(meta.get("SessionState").is_none(), "{meta}");
    assert_eq!(h.chat_count(ChatMode::Standard).await, 0);
    // A chat named with sessionState (one created through /chat-history) is continued and stored.
    let chat_id = h.new_chat(ChatMode::Standard).await;
    let r = chat_ui(
        &h,
        json!({"messages": user("Why is the sky blue"), "sessionState": chat_id}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()[0]["Metadata"]["SessionState"], chat_id.as_str());
    assert_eq!(h.history(&chat_id).await.len(), 2);
    assert_eq!(h.chat_count(ChatMode::Standard).await, 1);
}

#[tokio::test]
async fn chat_ui_answers_the_pages_current_shape_when_configured() {
    let h = harness_with(&[("CHAT_UI_REPLY", "messages")]).await;
    let r = chat_ui(&h, json!({"messages": user("Why is the sky blue")})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type(), "application/json");
    let body = r.json();
    let messages = body["messages"].as_array().expect("{\"messages\": [...]}");
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    assert_eq!(m["role"], "assistant");
    assert_eq!(m["content"], "Echo: Why is the sky blue");
    assert!(m["id"].as_str().unwrap().starts_with("chatcmpl-"));
    let t = m["timestamp"].as_str().unwrap();
    assert!(
        t.len() == 8 && (t.ends_with(" AM") || t.ends_with(" PM")),
        "{t}"
    );
    assert!(m.get("agentName").is_none());
}

#[tokio::test]
async fn overrides_reach_the_model() {
    let h = harness_with_prompt().await;
    let r = chat(&h, json!({"messages": user("a b c d e f"), "context": {"overrides": {
                "temperature": 0.25, "top_p": 0.5, "max_tokens": 3, "prompt_template": ">>> Speak like a pirate.",
                "retrieval_mode": "hybrid"
            }}}))
        .await;
    assert_eq!(r.status, 200);
    let sent = h.last_model_request();
    assert_eq!(
        sent["inferenceConfig"],
        json!({"maxTokens": 3, "temperature": 0.25, "topP": 0.5})
    );
    assert_eq!(
        sent["system"],
        json!([{"text": "Be kind.\n\nSpeak like a pirate."}])
    );
    assert_eq!(
        sent["modelId"],
        Value::Null,
        "the model id travels in the path"
    );
    assert_eq!(
        h.bedrock.requests().last().unwrap().model_id,
        "local.echo-v1:0"
    );
    // The local model stops after max_tokens words, as a model would, mid-sentence.
    let body = r.json();
    assert_eq!(body["message"]["content"], "Echo: a b ");
    let replaced = chat(
        &h,
        json!({"messages": user("x"), "context": {"overrides": {"prompt_template": "Only this."}}}),
    )
    .await;
    assert_eq!(replaced.status, 200);
    assert_eq!(
        h.last_model_request()["system"],
        json!([{"text": "Only this."}])
    );
}

/// A deployment that lets requests use every override, `prompt_template` too.
async fn harness_with_prompt() -> support::Harness {
    support::harness_with(&[("SYSTEM_PROMPT", "Be kind."), ("ALLOWED_OVERRIDES", "all")]).await
}

#[tokio::test]
async fn an_override_the_operator_does_not_allow_is_refused_by_name() {
    // By default every override but prompt_template is allowed: the system prompt is the operator's.
    let h = support::harness_with(&[("SYSTEM_PROMPT", "Be kind.")]).await;
    for stream in [None, Some(false)] {
        let mut body = json!({"messages": user("x"), "context": {"overrides": {"prompt_template": "Only this."}}});
        if let Some(stream) = stream {
            body["stream"] = json!(stream);
        }
        let refused = h.post("/chat", &body).await;
        assert_eq!(refused.status, 400, "{}", refused.body);
        let error = refused.json()["error"].as_str().unwrap().to_string();
        assert!(
            error.contains("context.overrides.prompt_template")
                && error.contains("ALLOWED_OVERRIDES"),
            "{error}"
        );
    }
    // The Chat UI's routes read the same context, and refuse the same.
    for path in ["/chat-ui/chat", "/multi-agent-chat/batch"] {
        let refused = h
            .post(path, &json!({"messages": user("x"), "context": {"overrides": {"prompt_template": "Only this."}}}))
            .await;
        assert_eq!(refused.status, 400, "{path}: {}", refused.body);
        assert!(
            refused
                .error_message()
                .starts_with("context.overrides.prompt_template: is not allowed"),
            "{path}: {}",
            refused.body
        );
    }
    assert!(h.bedrock.requests().is_empty(), "no model call was made");
    // A blank template asks for nothing, and is no use of the override.
    let blank = chat(
        &h,
        json!({"messages": user("x"), "context": {"overrides": {"prompt_template": ""}}}),
    )
    .await;
    assert_eq!(blank.status, 200, "{}", blank.body);
    assert_eq!(
        h.last_model_request()["system"],
        json!([{"text": "Be kind."}])
    );
    // An operator who allows only some refuses the rest.
    let h = support::harness_with(&[("ALLOWED_OVERRIDES", "top,temperature")]).await;
    let ok = chat(&h, json!({"messages": user("x"), "context": {"overrides": {"temperature": 0.5, "use_oid_security_filter": false}}}))
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let refused = chat(
        &h,
        json!({"messages": user("x"), "context": {"overrides": {"max_tokens": 5}}}),
    )
    .await;
    assert_eq!(refused.status, 400);
    let error = refused.json()["error"].as_str().unwrap().to_string();
    assert!(
        error.contains("context.overrides.max_tokens")
            && error.contains("allows: temperature, top"),
        "{error}"
    );
}

#[tokio::test]
async fn overrides_this_backend_does_not_define_are_named_in_the_prompt_thought() {
    let r = chat_once(json!({"messages": user("x"), "context": {"overrides": {
        "semantic_ranker": true, "use_gpt4v": false, "top": 2
    }}}))
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let thoughts = r.json()["context"]["thoughts"].clone();
    let prompt = thoughts
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Prompt to generate answer")
        .unwrap();
    assert_eq!(
        prompt["props"]["overrides_not_used"],
        json!(["semantic_ranker", "use_gpt4v"]),
        "{prompt}"
    );
}

#[tokio::test]
async fn reasoning_beyond_the_operators_cap_is_refused() {
    let h = support::harness_with(&[
        ("MODEL_ID", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("MAX_REASONING_EFFORT", "low"),
    ])
    .await;
    let refused = chat(
        &h,
        json!({"messages": user("x"), "context": {"overrides": {"reasoning_effort": "high"}}}),
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let error = refused.json()["error"].as_str().unwrap().to_string();
    assert!(
        error.contains("context.overrides.reasoning_effort") && error.contains(r#"at most "low""#),
        "{error}"
    );
    assert!(h.bedrock.requests().is_empty());
}

#[tokio::test]
async fn max_tokens_cut_is_finish_reason_length() {
    let r = chat_once(json!({"messages": user("a b c d"), "stream": false, "context": {"overrides": {"max_tokens": 2}}}))
        .await;
    assert_eq!(r.json()["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn followup_questions_are_cut_from_the_answer_and_returned() {
    let h = harness().await;
    let r = chat(&h, json!({"messages": user("tell me"), "context": {"overrides": {"suggest_followup_questions": true}}}))
        .await;
    assert_eq!(r.status, 200);
    let system = h.last_model_request()["system"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("Enclose the follow-up questions in double angle brackets"),
        "{system}"
    );
    let body = r.json();
    assert_eq!(body["message"]["content"], "Echo: tell me");
    assert_eq!(
        body["context"]["followup_questions"],
        json!([
            "What else should I know?",
            "Can you give an example?",
            "Where can I read more?"
        ])
    );
    // Without the override, nothing is asked and nothing is cut.
    let plain = chat(&h, json!({"messages": user("tell me")})).await.json();
    assert!(plain["context"].get("followup_questions").is_none());
}

#[tokio::test]
async fn a_conversation_reaches_the_model_with_alternating_roles() {
    let h = harness().await;
    let r = chat(
        &h,
        json!({"messages": [
            {"role": "user", "content": "first"}, {"role": "user", "content": "second"},
            {"role": "assistant", "content": "reply"}, {"role": "user", "content": "third"}
        ]}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        h.last_model_request()["messages"],
        json!([
            {"role": "user", "content": [{"text": "first"}, {"text": "second"}]},
            {"role": "assistant", "content": [{"text": "reply"}]},
            {"role": "user", "content": [{"text": "third"}]}
        ])
    );
    assert_eq!(r.json()["message"]["content"], "Echo: third");
}

/// The Chat UI's answer carries what its `ChatMessageContent` has no context for in `Metadata`: the reasoning (with
/// `REASONING_EFFORT` configured: the Chat UI sends no overrides), the cost, and the cache counts in `Usage`.
#[tokio::test]
async fn chat_ui_metadata_carries_reasoning_cost_and_cache_counts() {
    let h = harness_with(&[
        ("MODEL_ID", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("REASONING_EFFORT", "low"),
    ])
    .await;
    let chat = h.new_chat(ChatMode::Standard).await;
    let mut answers = Vec::new();
    for question in ["What is a cache?", "And a prompt cache?"] {
        let r = chat_ui(
            &h,
            json!({"messages": [{"role": "user", "content": question}], "sessionState": chat}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        answers.push(r.json()[0].clone());
    }
    let metadata = &answers[1]["Metadata"];
    assert_eq!(
        metadata["Reasoning"],
        "Reasoning (budget 1024): the question is: And a prompt cache?"
    );
    assert_eq!(answers[1]["Items"][0]["Text"], "Echo: And a prompt cache?");
    let usage = &metadata["Usage"];
    let read = usage["CacheReadInputTokenCount"].as_u64().unwrap();
    assert!(read > 0, "{usage}");
    // Every prompt token is an input token, those of the cache too.
    assert_eq!(
        usage["TotalTokenCount"].as_u64().unwrap(),
        usage["InputTokenCount"].as_u64().unwrap() + usage["OutputTokenCount"].as_u64().unwrap()
    );
    assert!(metadata["CostUsd"].as_f64().unwrap() > 0.0, "{metadata}");
    // The stored answer holds no reasoning.
    assert_eq!(h.history(&chat).await[3].1, "Echo: And a prompt cache?");
}
