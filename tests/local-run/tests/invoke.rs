//! `make test`'s invoke section: every file of `events/` through `cargo lambda invoke --data-file`, each answer
//! checked. The events are function URL events of a deployment with `AuthMode iam`, so this file starts its own
//! local run (port 9010) whose functions know callers as AWS does, from the IAM request context (`AUTH_MODE=iam`),
//! and log as the template configures them (`AWS_LAMBDA_LOG_FORMAT=JSON`); the logs are checked too.

mod support;

use std::process::Command;
use std::sync::OnceLock;

use chat_aws::DynamoStore;
use chat_core::ChatMode;
use chat_core::Role;
use chat_core::{ChatRecord, SessionStore, StoredMessage};
use serde_json::{Value, json};
use support::{LocalRun, root};

const PORT: u16 = 9010;
/// The caller of every event but the foreign-chat ones (`requestContext.authorizer.iam.userArn`).
const ALICE: &str = "iam:arn:aws:iam::123456789012:user/alice";
/// Alice's chats the events name: read (c1, also tried by Bob), replaced (c2), deleted (c3).
const READ: &str = "a11ce0000000000000000000000000c1";
const REPLACED: &str = "a11ce0000000000000000000000000c2";
const DELETED: &str = "a11ce0000000000000000000000000c3";
/// A word that is only ever inside message text: it must not reach the logs.
const SECRET: &str = "Alfama";

fn run() -> &'static LocalRun {
    static RUN: OnceLock<LocalRun> = OnceLock::new();
    RUN.get_or_init(|| {
        // The functions as Lambda runs them, under `cargo lambda watch`, which `cargo lambda invoke` reaches.
        LocalRun::start_with(
            "invoke",
            PORT,
            &[("AUTH_MODE", "iam"), ("AWS_LAMBDA_LOG_FORMAT", "JSON")],
            &["--cargo-lambda-watch"],
        )
    })
}

async fn seed_alices_chats() {
    let config =
        local_dynamodb::LocalDynamo::sdk_config_at(&format!("http://127.0.0.1:{}", PORT + 200))
            .await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), "chat-local", None);
    let at = "2026-11-22T06:00:00.000Z".to_string();
    let message = |id: &str, role, content: &str| StoredMessage::new(id, role, content, &at);
    for (id, title, messages) in [
        (
            READ,
            "Lisbon",
            vec![
                message(
                    "m1",
                    Role::User,
                    &format!("Plan three days around {SECRET}"),
                ),
                message("m2", Role::Assistant, "Echo: a plan"),
            ],
        ),
        (
            REPLACED,
            "To replace",
            vec![message("m3", Role::User, "old")],
        ),
        (DELETED, "To delete", vec![]),
    ] {
        let chat = ChatRecord {
            id: id.into(),
            mode: ChatMode::Standard,
            title: title.into(),
            created_at: at.clone(),
            last_updated: at.clone(),
            last_message: String::new(),
            message_count: 0,
            usage: Default::default(),
        };
        store.create(ALICE, &chat, &messages).await.expect("seeded");
    }
}

/// What `cargo lambda invoke --data-file events/{event}` printed: for a buffered function the function URL
/// response as JSON, for a streaming one the streamed body.
fn invoke_raw(function: &str, event: &str, format: &str) -> String {
    let out = Command::new(root().join(".tools/venv/bin/cargo-lambda"))
        .args([
            "lambda",
            "invoke",
            function,
            "--invoke-address",
            "127.0.0.1",
        ])
        .args(["--invoke-port", &PORT.to_string()])
        .args(["--output-format", format, "--data-file"])
        .arg(root().join("events").join(event))
        .output()
        .expect("cargo lambda invoke runs");
    assert!(
        out.status.success(),
        "{event}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    println!("invoke {function} events/{event}: {} bytes", text.len());
    text
}

fn invoke(function: &str, event: &str) -> Value {
    serde_json::from_str(&invoke_raw(function, event, "json")).unwrap()
}

fn invoke_lines(event: &str) -> Vec<Value> {
    invoke_raw("chat-stream", event, "text")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn body_of(response: &Value) -> Value {
    serde_json::from_str(response["body"].as_str().unwrap()).unwrap()
}

fn no_such_chat(response: &Value) {
    assert_eq!(response["statusCode"], 404, "{response}");
    assert_eq!(
        body_of(response),
        json!({"error": "There is no chat with that id."})
    );
}

#[tokio::test]
async fn every_event_invokes_and_is_answered_as_it_should_be() {
    run();
    seed_alices_chats().await;

    // The protocol, both versions and both spellings.
    let r = invoke("chat", "chat-2024-05-29.json");
    assert_eq!(r["statusCode"], 200);
    let b = body_of(&r);
    assert_eq!(
        b["message"]["content"],
        "Echo: What is included in my plan?"
    );
    assert_eq!(b["context"]["thoughts"][0]["props"]["temperature"], 0.3);
    assert!(b["sessionState"].is_string(), "a new chat's id");

    let b = body_of(&invoke("chat", "chat-2024-05-29-snake-case.json"));
    assert!(b["session_state"].is_string());
    assert!(b.get("sessionState").is_none());

    let b = body_of(&invoke("chat", "chat-2024-01-28.json"));
    assert_eq!(b["object"], "chat.completion");
    assert_eq!(
        b["choices"][0]["message"]["content"],
        "Echo: What is included in my plan?"
    );

    // A request with files: multipart, which a function URL hands over in base64.
    let r = invoke("chat", "chat-with-files.json");
    assert_eq!(r["statusCode"], 200, "{r}");
    let b = body_of(&r);
    assert_eq!(
        b["message"]["content"],
        "Echo: [file: chart.png, image/png, 33 bytes] [file: plan notes.md, text/markdown, 49 bytes] \
         What do these show? Received: chart.png: image png 33 bytes; plan notes.md: document plan notes md 49 bytes"
    );

    let r = invoke("chat", "chat-2024-01-28-stream.json");
    assert_eq!(r["headers"]["content-type"], "application/json-lines");
    let lines: Vec<Value> = r["body"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.last().unwrap()["choices"][0]["finish_reason"], "stop");

    let lines = invoke_lines("chat-stream-2024-05-29.json");
    assert_eq!(lines[0]["delta"], json!({"role": "assistant"}));
    let text: String = lines
        .iter()
        .filter_map(|l| l["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Echo: What is included in my plan?");
    assert_eq!(
        lines.last().unwrap()["context"]["followup_questions"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let lines = invoke_lines("chat-stream-2024-01-28.json");
    assert!(lines.iter().all(|l| l["object"] == "chat.completion.chunk"));
    assert_eq!(lines.last().unwrap()["choices"][0]["finish_reason"], "stop");

    // The Chat UI: standard and multi-agent.
    let b = body_of(&invoke("chat", "chat-ui-chat.json"));
    assert_eq!(
        b[0]["Items"][0]["Text"],
        "Echo: Can you help me with my plan?"
    );

    let events = invoke_raw("chat-stream", "multi-agent-stream.json", "text");
    let authors: Vec<String> = events
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let data = e.trim().strip_prefix("data: ").expect("an SSE data line");
            let v: Value = serde_json::from_str(data).unwrap();
            v["AuthorName"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        authors[..3],
        ["BusinessAnalyst", "SoftwareEngineer", "ProductOwner"]
    );
    let all = body_of(&invoke("chat", "multi-agent-batch.json"));
    assert_eq!(all[0]["Role"]["Label"], "user");
    assert_eq!(all[1]["AuthorName"], "BusinessAnalyst");
    // The bare URL the Chat UI's documentation configures, without `Accept: text/event-stream`: the whole round.
    let all: Value =
        serde_json::from_str(&invoke_raw("chat-stream", "multi-agent-chat.json", "text")).unwrap();
    assert_eq!(all[0]["Role"]["Label"], "user");
    assert_eq!(all[1]["AuthorName"], "BusinessAnalyst");

    // History, as Alice.
    let r = invoke("history", "history-create.json");
    assert_eq!(r["statusCode"], 201);
    assert_eq!(body_of(&r)["title"], "New Discussion");

    let r = invoke("history", "history-list.json");
    assert_eq!(r["statusCode"], 200);
    let titles: Vec<Value> = body_of(&r)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].clone())
        .collect();
    // Newest first: the chat just created leads.
    assert_eq!(titles[0], "New Discussion", "{titles:?}");

    let r = invoke("history", "history-messages.json");
    assert_eq!(r["statusCode"], 200);
    let messages = body_of(&r);
    assert_eq!(
        messages[0]["content"],
        format!("Plan three days around {SECRET}")
    );
    assert_eq!(messages[1]["role"], "assistant");

    let r = invoke("history", "history-replace.json");
    assert_eq!(r["statusCode"], 200, "{r}");
    assert_eq!(body_of(&r)["messageCount"], 2);
    assert_eq!(body_of(&r)["id"], REPLACED);

    let r = invoke("history", "history-delete.json");
    assert_eq!(
        (&r["statusCode"], &r["body"]),
        (&json!(200), &json!("")),
        "{r}"
    );
    // Deleted means gone: the same delete again finds nothing.
    no_such_chat(&invoke("history", "history-delete.json"));

    // Alice's own usage: her turns above are counted; this run sets no limits, so each is null.
    let r = invoke("history", "history-usage.json");
    assert_eq!(r["statusCode"], 200, "{r}");
    let usage = body_of(&r);
    assert!(usage["today"]["turns"].as_u64() >= Some(1), "{usage}");
    assert!(
        usage["this_month"]["total_tokens"].as_u64() > Some(0),
        "{usage}"
    );
    assert_eq!(usage["today"]["token_limit"], Value::Null, "{usage}");
    assert_eq!(
        usage["this_minute"]["request_limit"],
        Value::Null,
        "{usage}"
    );

    // The main error cases.
    let r = invoke("chat", "chat-bad-json.json");
    assert_eq!(r["statusCode"], 400);
    assert!(
        body_of(&r)["error"]
            .as_str()
            .unwrap()
            .starts_with("body is not valid JSON")
    );
    no_such_chat(&invoke("chat", "chat-unknown-chat.json"));
    no_such_chat(&invoke("history", "history-messages-unknown-chat.json"));
    // Bob is another IAM caller: Alice's chat does not exist for him, and he cannot add to it.
    no_such_chat(&invoke("chat", "chat-foreign-chat.json"));
    no_such_chat(&invoke("history", "history-messages-foreign-chat.json"));
    let r = invoke("history", "history-messages.json");
    assert_eq!(
        body_of(&r).as_array().unwrap().len(),
        2,
        "Bob added nothing"
    );
    let r = invoke("chat", "chat-wrong-method.json");
    assert_eq!(r["statusCode"], 405);
    assert_eq!(r["headers"]["allow"], "POST");

    // Every event file is exercised here.
    let tested = [
        "chat-2024-05-29.json",
        "chat-2024-05-29-snake-case.json",
        "chat-2024-01-28.json",
        "chat-2024-01-28-stream.json",
        "chat-with-files.json",
        "chat-stream-2024-05-29.json",
        "chat-stream-2024-01-28.json",
        "chat-ui-chat.json",
        "multi-agent-stream.json",
        "multi-agent-batch.json",
        "multi-agent-chat.json",
        "history-create.json",
        "history-list.json",
        "history-messages.json",
        "history-replace.json",
        "history-delete.json",
        "history-usage.json",
        "chat-bad-json.json",
        "chat-unknown-chat.json",
        "history-messages-unknown-chat.json",
        "chat-foreign-chat.json",
        "history-messages-foreign-chat.json",
        "chat-wrong-method.json",
    ];
    for entry in std::fs::read_dir(root().join("events")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            tested.contains(&name.as_str()),
            "events/{name} is not invoked by this test"
        );
    }

    the_functions_logged_json_lines_with_request_ids_and_no_message_text();
}

/// The functions' own lines in the local run's log (cargo lambda prints its own lines around them).
fn the_functions_logged_json_lines_with_request_ids_and_no_message_text() {
    let log = run().log_text();
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.get("level").is_some() && v.get("message").is_some())
        .collect();
    let answered = lines
        .iter()
        .filter(|l| l["message"] == "request answered")
        .count();
    assert!(
        answered >= 20,
        "one line per request, {answered} found in:\n{log}"
    );
    // The runtime's own start-up notes come before any request; every line written while answering has its id.
    for line in lines.iter().filter(|l| {
        !l["target"]
            .as_str()
            .unwrap_or("")
            .starts_with("lambda_runtime")
    }) {
        assert!(
            line["requestId"].as_str().is_some_and(|id| !id.is_empty()),
            "a line without a request id: {line}"
        );
    }
    let model_calls: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "model answered")
        .collect();
    assert!(
        model_calls
            .iter()
            .any(|l| l["operation"] == "Converse" && l["input_tokens"].as_u64() > Some(0)),
        "{model_calls:?}"
    );
    assert!(
        model_calls
            .iter()
            .any(|l| l["operation"] == "ConverseStream"
                && l["output_tokens"].as_u64() > Some(0)
                && l["first_text_ms"].is_u64()
                && l["latency_ms"].is_u64()),
        "{model_calls:?}"
    );
    for text in [SECRET, "What is included in my plan", "Three days"] {
        assert!(
            !log.contains(text),
            "message text {text:?} reached the logs"
        );
    }
}
