//! The upload quotas as a deployment wires them (the composition root, from the environment), against a local run of
//! its own (port 9777) with documents on and `QUOTA_UPLOADED_DOCUMENTS_PER_DAY=2`, callers proven by JWTs: alice's
//! first two documents of the day are stored, her third is a 429 with `Retry-After`, bob still uploads, and
//! `GET /usage` reports each one's day.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use support::{JwtRun, LocalRun};

const ISSUER: &str = "https://issuer.upload-quota.test";
const AUDIENCE: &str = "chat-backend";
const BOUNDARY: &str = "---local-upload-quota";

fn run() -> &'static JwtRun {
    static RUN: OnceLock<JwtRun> = OnceLock::new();
    RUN.get_or_init(|| {
        JwtRun::start("upload-quota-key", ISSUER, AUDIENCE, |jwt| {
            let quota = [("QUOTA_UPLOADED_DOCUMENTS_PER_DAY", "2")];
            LocalRun::start_grounded("upload-quota", 9777, &[jwt, &quota].concat())
        })
    })
}

struct Reply {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

async fn send(user: &str, method: &str, path: &str, files: &[&str]) -> Reply {
    let token = run().token(json!({"sub": user, "oid": user}));
    let client = reqwest::Client::new();
    let url = format!("{}{path}", run().local.base());
    let mut request = match method {
        "GET" => client.get(url),
        _ => client.post(url),
    }
    .bearer_auth(token)
    .timeout(Duration::from_secs(60));
    if !files.is_empty() {
        let mut body = String::new();
        for name in files {
            body.push_str(&format!(
                "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n\r\n# {name}\n\nA note of {user}'s.\r\n"
            ));
        }
        body.push_str(&format!("--{BOUNDARY}--\r\n"));
        request = request
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(body);
    }
    let response = request.send().await.expect("the local run answers");
    let (status, retry_after, body) = support::read_answer(response).await;
    Reply {
        status,
        retry_after,
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    }
}

#[tokio::test]
async fn the_third_document_of_the_day_is_refused_and_usage_reports_the_day() {
    let first = send("alice", "POST", "/documents", &["one.md", "two.md"]).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let third = send("alice", "POST", "/documents", &["three.md"]).await;
    assert_eq!(third.status, 429, "{}", third.body);
    let retry: u64 = third.retry_after.as_deref().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&retry), "Retry-After {retry}");
    let message = third.body["error"].as_str().unwrap();
    assert!(message.contains("2 documents"), "{message}");
    let list = send("alice", "GET", "/documents", &[]).await;
    assert_eq!(list.body.as_array().unwrap().len(), 2, "{}", list.body);

    let bobs = send("bob", "POST", "/documents", &["bob.md"]).await;
    assert_eq!(bobs.status, 201, "{}", bobs.body);

    let alice = send("alice", "GET", "/usage", &[]).await;
    assert_eq!(
        alice.body["uploads_today"]["documents"], 2,
        "{}",
        alice.body
    );
    assert_eq!(alice.body["uploads_today"]["document_limit"], 2);
    assert_eq!(alice.body["uploads_today"]["byte_limit"], Value::Null);
    let bob = send("bob", "GET", "/usage", &[]).await;
    assert_eq!(bob.body["uploads_today"]["documents"], 1, "{}", bob.body);
}
