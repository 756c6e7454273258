//! The multi-agent batch answer: the user's message echoed (with its own id), then each agent's message; as
//! server-sent events when the client asks for `text/event-stream`.

mod support;

use serde_json::{Value, json};
use support::harness_with;

const AGENTS: &str = r#"[{"name": "Analyst", "instructions": "Analyse."}, {"name": "Reviewer", "instructions": "[[say:APPROVED]]"}]"#;

#[tokio::test]
async fn the_batch_answer_echoes_the_user_then_the_agents() {
    let h = harness_with(&[("AGENTS", AGENTS)]).await;
    let r = h
        .post(
            "/multi-agent-chat/batch",
            &json!({"messages": [{"role": "user", "content": "Why is the sky blue"}]}),
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
    let chat_id = all[1]["Metadata"]["SessionState"].as_str().unwrap();
    assert_eq!(h.history(chat_id).await.len(), 3);
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
    let text = match response.into_body() {
        lambda_http::Body::Binary(b) => String::from_utf8(b).unwrap(),
        lambda_http::Body::Text(t) => t,
        _ => panic!("a body"),
    };
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
