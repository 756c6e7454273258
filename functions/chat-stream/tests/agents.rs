//! The multi-agent mode through the real SDK client, the local Bedrock server and moto: agents speak in turn,
//! each prompt carries the agent's instructions and the earlier messages, the round ends on the approval phrase or
//! the turn limit, every agent message is one event, and a failure stores nothing.

use chat_aws::{BedrockModel, DynamoStore};
use chat_core::SessionStore;
use chat_stream::App;
use chat_testing::harness::{self, Backend, OWNER, Wired};
use http_body_util::BodyExt;
use lambda_http::{Body, Request};
use serde_json::{Value, json};

type Harness = Wired<App<BedrockModel, DynamoStore>>;

async fn harness(env: &[(&str, &str)]) -> Harness {
    Backend::start(env).await.wired(App::new).await
}

fn request(body: &Value) -> Request {
    let mut request = harness::json_request("POST", "/multi-agent-chat/stream", Some(body));
    request
        .headers_mut()
        .insert("accept", "text/event-stream".parse().unwrap());
    request
}

/// The response, frame by frame: each frame must be exactly one event.
async fn stream(h: &Harness, body: Value) -> (u16, String, Vec<Value>) {
    let response = h.app.handle(request(&body)).await;
    let status = response.status().as_u16();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    let mut body = response.into_body();
    let mut events = Vec::new();
    while let Some(frame) = body.frame().await {
        let text = String::from_utf8(frame.unwrap().into_data().unwrap().to_vec()).unwrap();
        if status != 200 {
            events.push(serde_json::from_str(&text).unwrap());
            continue;
        }
        let data = text
            .strip_prefix("data: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("one whole event per write: {text:?}"));
        assert!(!data.contains('\n'), "one line of data: {text:?}");
        events.push(serde_json::from_str(data).unwrap());
    }
    (status, content_type, events)
}

fn ask(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

/// `text` asked in the chat `chat_id`.
fn ask_in(chat_id: &str, text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}], "sessionState": chat_id})
}

/// An empty multi-agent chat, as the Chat UI creates one (`POST /chat-history`) before its first round.
async fn new_chat(h: &Harness) -> String {
    harness::new_chat(&h.store, chat_core::ChatMode::MultiAgent).await
}

/// The owner's multi-agent chats.
async fn chats(h: &Harness) -> usize {
    harness::chat_count(&h.store, chat_core::ChatMode::MultiAgent).await
}

fn authors(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["AuthorName"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[tokio::test]
async fn the_default_agents_speak_in_turn_until_the_turn_limit() {
    let h = harness(&[]).await;
    let (status, content_type, events) = stream(&h, ask("Build a todo app")).await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    assert_eq!(authors(&events), harness::DEFAULT_ROUND);
    let first = &events[0];
    assert_eq!(first["Role"], json!({"Label": "Assistant"}));
    assert_eq!(first["Items"][0]["$type"], "TextContent");
    assert_eq!(first["Items"][0]["Text"], "Echo: Build a todo app");
    assert_eq!(first["ModelId"], "local.echo-v1:0");
    for key in ["Id", "CreatedAt", "Usage", "FinishReason"] {
        assert!(first["Metadata"].get(key).is_some(), "Metadata.{key}");
    }
    // The request named no chat: the Chat UI keeps its own history, so nothing is stored and no state is given.
    assert!(first["Metadata"].get("SessionState").is_none(), "{first}");
    assert_eq!(chats(&h).await, 0);
    // Each prompt carries its agent's instructions and everything said before, attributed by name.
    let requests = h.bedrock.requests();
    assert_eq!(requests.len(), 6);
    let system = |i: usize| {
        requests[i].body["system"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        system(0).starts_with("You are a business analyst."),
        "{}",
        system(0)
    );
    assert!(system(1).starts_with("You are a senior software engineer."));
    assert!(system(2).contains("say APPROVED"));
    assert!(system(1).contains("You are SoftwareEngineer, in a group conversation with the user and the agents BusinessAnalyst, ProductOwner"));
    assert_eq!(
        requests[1].body["messages"],
        json!([{"role": "user", "content": [{"text": "Build a todo app"}, {"text": "BusinessAnalyst: Echo: Build a todo app"}]}])
    );
    // The analyst's second turn sees its own first message as its own.
    let fourth = requests[3].body["messages"].as_array().unwrap();
    assert_eq!(
        fourth[1],
        json!({"role": "assistant", "content": [{"text": "Echo: Build a todo app"}]})
    );
}

fn group(second: &str) -> String {
    json!([
        {"name": "Analyst", "instructions": "Analyse."},
        {"name": "Reviewer", "instructions": second},
        {"name": "Third", "instructions": "Never reached."}
    ])
    .to_string()
}

/// A harness whose agents are [`group`]'s, the second instructed `second`.
async fn with_group(second: &str) -> Harness {
    harness(&[("AGENTS", group(second).as_str())]).await
}

#[tokio::test]
async fn the_approval_phrase_ends_the_round_early() {
    let h = with_group("Review. [[say:Looks good to me. Approved.]]").await;
    let (_, _, events) = stream(&h, ask("ship it?")).await;
    assert_eq!(authors(&events), ["Analyst", "Reviewer"]);
    assert_eq!(events[1]["Items"][0]["Text"], "Looks good to me. Approved.");
}

#[tokio::test]
async fn the_turn_limit_holds() {
    let agents = group("Review.");
    let h = harness(&[("AGENTS", agents.as_str()), ("MAX_AGENT_TURNS", "4")]).await;
    let (_, _, events) = stream(&h, ask("go")).await;
    assert_eq!(
        authors(&events),
        ["Analyst", "Reviewer", "Third", "Analyst"]
    );
}

#[tokio::test]
async fn a_failure_at_the_second_agent_sends_the_first_then_an_error_and_stores_nothing() {
    let h = with_group("[[fault:model-error]]").await;
    let chat_id = new_chat(&h).await;
    let (status, _, events) = stream(&h, ask_in(&chat_id, "go")).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["AuthorName"], "Analyst");
    assert_eq!(
        events[1],
        json!({"error": "The model could not answer right now. Please try again."})
    );
    assert_eq!(events[0]["Metadata"]["SessionState"], chat_id.as_str());
    assert!(
        h.store.load(OWNER, &chat_id).await.unwrap().1.is_empty(),
        "no half round was stored"
    );
    // A failure at the first agent is an ordinary error response.
    let agents = json!([{"name": "Broken", "instructions": "[[fault:throttle]]"}]).to_string();
    let h = harness(&[("AGENTS", agents.as_str())]).await;
    let (status, _, body) = stream(&h, ask("go")).await;
    assert_eq!(status, 429);
    assert!(body[0]["error"].is_string());
}

#[tokio::test]
async fn a_round_is_a_multi_agent_history_item_and_continues() {
    let h = with_group("Review. [[say:APPROVED]]").await;
    let chat_id = new_chat(&h).await;
    let (_, _, events) = stream(&h, ask_in(&chat_id, "first")).await;
    assert_eq!(events[0]["Metadata"]["SessionState"], chat_id.as_str());
    let (record, messages) = h.store.load(OWNER, &chat_id).await.unwrap();
    assert_eq!(record.mode, chat_core::ChatMode::MultiAgent);
    let stored: Vec<(String, Option<String>)> = messages
        .iter()
        .map(|m| (m.content.clone(), m.agent_identifier.clone()))
        .collect();
    assert_eq!(
        stored,
        [
            ("first".to_string(), None),
            ("Echo: first".to_string(), Some("Analyst".to_string())),
            ("APPROVED".to_string(), Some("Reviewer".to_string())),
        ]
    );
    // Stored times are as the Chat UI shows a message's (`10:15 AM`); the chat's own time stays RFC 3339.
    for m in &messages {
        let t = m.timestamp.as_bytes();
        assert!(
            t.len() == 8
                && t[2] == b':'
                && (m.timestamp.ends_with(" AM") || m.timestamp.ends_with(" PM")),
            "{}",
            m.timestamp
        );
    }
    assert!(record.last_updated.starts_with("20") && record.last_updated.ends_with('Z'));
    // The next round sees the earlier one, attributed: the analyst's own message is its turn, the reviewer's is
    // the other side.
    let next = events_of(
        &h,
        json!({"messages": [{"role": "user", "content": "second"}], "sessionState": chat_id}),
    )
    .await;
    let last = h.bedrock.requests().last().unwrap().body["messages"].clone();
    assert_eq!(
        last,
        json!([
            {"role": "user", "content": [{"text": "first"}]},
            {"role": "assistant", "content": [{"text": "Echo: first"}]},
            {"role": "user", "content": [{"text": "Reviewer: APPROVED"}, {"text": "second"}]}
        ])
    );
    // The analyst echoed the approval, which ends this round after one agent.
    assert_eq!(authors(&next), ["Analyst"]);
    assert_eq!(h.store.load(OWNER, &chat_id).await.unwrap().1.len(), 5);
}

async fn events_of(h: &Harness, body: Value) -> Vec<Value> {
    stream(h, body).await.2
}

/// `body` posted to `path` with `accept`.
async fn post_to(h: &Harness, path: &str, accept: &str, body: &Value) -> (u16, String, String) {
    let request = lambda_http::http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = h.app.handle(request).await;
    let status = response.status().as_u16();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(bytes.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn the_bare_multi_agent_route_streams_events_or_answers_the_batch_by_accept() {
    let agents = group("Review. [[say:APPROVED]]");
    for (reply, accept) in [
        ("spec", "text/event-stream"),
        ("spec", "application/json"),
        ("messages", "*/*"),
    ] {
        let h = harness(&[("AGENTS", agents.as_str()), ("CHAT_UI_REPLY", reply)]).await;
        let (status, content_type, body) =
            post_to(&h, "/multi-agent-chat", accept, &ask("Why is the sky blue")).await;
        assert_eq!(status, 200, "{body}");
        match (reply, accept) {
            (_, "text/event-stream") => {
                assert_eq!(content_type, "text/event-stream");
                let events: Vec<Value> = body
                    .split_terminator("\n\n")
                    .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
                    .collect();
                assert_eq!(authors(&events), ["Analyst", "Reviewer"]);
            }
            ("spec", _) => {
                assert_eq!(content_type, "application/json");
                let all: Vec<Value> = serde_json::from_str(&body).unwrap();
                assert_eq!(all[0]["Role"]["Label"], "user");
                assert_eq!(authors(&all[1..]), ["Analyst", "Reviewer"]);
            }
            _ => {
                assert_eq!(content_type, "application/json");
                let reply: Value = serde_json::from_str(&body).unwrap();
                let names: Vec<&str> = harness::texts_of(&reply["messages"], "agentName");
                assert_eq!(names, ["Analyst", "Reviewer"]);
            }
        }
        assert_eq!(
            chats(&h).await,
            0,
            "a request naming no chat stores nothing"
        );
    }
}
