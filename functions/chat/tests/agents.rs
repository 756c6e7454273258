//! The multi-agent batch answer: the user's message echoed (with its own id), then each agent's message; as
//! server-sent events when the client asks for `text/event-stream`.

mod support;

use chat_core::ChatMode;
use serde_json::{Value, json};
use support::harness_with;

const AGENTS: &str = r#"[{"name": "Analyst", "instructions": "Analyse."}, {"name": "Reviewer", "instructions": "[[say:APPROVED]]"}]"#;

#[tokio::test]
async fn the_batch_answer_echoes_the_user_then_the_agents() {
    let h = harness_with(&[("AGENTS", AGENTS)]).await;
    let chat_id = h.new_chat(ChatMode::MultiAgent).await;
    let r = h
        .post(
            "/multi-agent-chat/batch",
            &json!({"messages": [{"role": "user", "content": "Why is the sky blue"}], "sessionState": chat_id}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type(), "application/json");
    let all = r.json();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["Role"], json!({"Label": "user"}));
    assert_eq!(
        all[0]["Items"],
        json!([{"$type": "TextContent", "Text": "Why is the sky blue"}])
    );
    assert_eq!(all[0]["Metadata"]["Id"].as_str().unwrap().len(), 32);
    assert!(all[0].get("AuthorName").is_none());
    assert_eq!(all[1]["AuthorName"], "Analyst");
    assert_eq!(all[1]["Items"][0]["Text"], "Echo: Why is the sky blue");
    assert_eq!(all[2]["AuthorName"], "Reviewer");
    assert_eq!(all[2]["Items"][0]["Text"], "APPROVED");
    assert_eq!(all[1]["Metadata"]["SessionState"], chat_id.as_str());
    assert_eq!(h.history(&chat_id).await.len(), 3);
}

#[tokio::test]
async fn a_batch_request_accepting_events_gets_events() {
    let h = harness_with(&[("AGENTS", AGENTS)]).await;
    let body = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    let request = lambda_http::http::Request::builder()
        .method("POST")
        .uri("/multi-agent-chat/batch")
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(lambda_http::Body::from(body))
        .unwrap();
    let response = h.app.handle(request).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = chat_testing::harness::body_text(response.into_body());
    let events: Vec<Value> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    let authors: Vec<&str> = events
        .iter()
        .map(|e| e["AuthorName"].as_str().unwrap())
        .collect();
    assert_eq!(authors, ["Analyst", "Reviewer"]);
    assert!(text.ends_with("\n\n"));
}

#[tokio::test]
async fn the_bare_multi_agent_route_answers_whole_rounds_in_either_shape() {
    // The Chat UI's documentation configures `…/multi-agent-chat`; without `text/event-stream` it is the batch.
    let h = harness_with(&[("AGENTS", AGENTS)]).await;
    let ask = json!({"messages": [{"role": "user", "content": "Why is the sky blue"}]});
    let r = h.post("/multi-agent-chat", &ask).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let all = r.json();
    let labels: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["AuthorName"].as_str().unwrap_or("user"))
        .collect();
    assert_eq!(labels, ["user", "Analyst", "Reviewer"]);
    // Nothing stored: the request named no chat.
    assert_eq!(h.chat_count(ChatMode::MultiAgent).await, 0);

    // The page's current revision reads {"messages": [...]}: the agents' messages only, as its own objects.
    let h = harness_with(&[("AGENTS", AGENTS), ("CHAT_UI_REPLY", "messages")]).await;
    for path in ["/multi-agent-chat", "/multi-agent-chat/batch"] {
        let r = h.post(path, &ask).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let body = r.json();
        let messages = body["messages"].as_array().unwrap();
        let shown: Vec<(&str, &str, &str)> = messages
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap(),
                    m["agentName"].as_str().unwrap(),
                    m["content"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("assistant", "Analyst", "Echo: Why is the sky blue"),
                ("assistant", "Reviewer", "APPROVED")
            ]
        );
        assert_eq!(messages[0]["agentIdentifier"], "Analyst");
        assert!(messages[0]["id"].as_str().unwrap().starts_with("chatcmpl-"));
        let t = messages[1]["timestamp"].as_str().unwrap();
        assert!(
            t.len() == 8 && (t.ends_with(" AM") || t.ends_with(" PM")),
            "{t}"
        );
    }
}
