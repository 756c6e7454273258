//! Operating it, end to end against a local run of its own (port 9050) with per-user limits on
//! (`QUOTA_TOKENS_PER_DAY=400`, `RATE_LIMIT_PER_MINUTE=5`), callers proven by JWTs (so that there are several users),
//! JSON logs at TRACE: turns answer until a user's quota is spent, then every model route refuses them with a 429
//! and `Retry-After` while another user still gets answers; the sixth request of a sliding minute is refused; `GET /usage`
//! reports what was spent; each turn leaves one CloudWatch EMF record in the log whose `_aws` block names every
//! metric it holds; and no log line holds a word of a conversation.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use chat_testing::harness;
use serde_json::{Value, json};
use support::{JwtRun, LocalRun};
use time::OffsetDateTime;

const ISSUER: &str = "https://issuer.operations.test";
const AUDIENCE: &str = "chat-backend";
const QUOTA: u64 = 400;
/// A word no log line may hold: every question here carries it, and the local model echoes it in its answers.
const SECRET_WORD: &str = "quokkaburrow";

fn run() -> &'static JwtRun {
    static RUN: OnceLock<JwtRun> = OnceLock::new();
    RUN.get_or_init(|| {
        JwtRun::start("ops-key", ISSUER, AUDIENCE, |jwt| {
            let limits = [
                ("QUOTA_TOKENS_PER_DAY", "400"),
                ("RATE_LIMIT_PER_MINUTE", "5"),
                ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
                ("AWS_LAMBDA_LOG_LEVEL", "TRACE"),
            ];
            LocalRun::start("operations", 9050, &[jwt, &limits].concat())
        })
    })
}

fn token(user: &str) -> String {
    run().token(json!({"sub": user}))
}

struct Reply {
    status: u16,
    retry_after: Option<String>,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

async fn send(method: &str, path: &str, user: Option<&str>, body: Option<Value>) -> Reply {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", run().local.base());
    let mut request = match method {
        "GET" => client.get(url),
        _ => client.post(url),
    };
    if let Some(user) = user {
        request = request.bearer_auth(token(user));
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("the local run answers");
    let (status, retry_after, body) = support::read_answer(response).await;
    Reply {
        status,
        retry_after,
        body,
    }
}

/// A question of about a hundred words, so that a turn spends a good part of the quota.
fn long_question(n: usize) -> String {
    let filler = (0..100)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!("Question {n} about the {SECRET_WORD}: {filler}")
}

/// The total tokens a `/chat` answer reports in its usage thought.
fn answered_tokens(answer: &Value) -> u64 {
    answer["context"]["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Token usage")
        .and_then(|t| t["props"]["total_tokens"].as_u64())
        .unwrap_or_else(|| panic!("no token usage thought: {answer}"))
}

/// Seconds from now to the next midnight UTC.
fn seconds_to_midnight() -> i64 {
    let now = OffsetDateTime::now_utc();
    let midnight = now
        .date()
        .next_day()
        .unwrap()
        .with_hms(0, 0, 0)
        .unwrap()
        .assume_utc();
    (midnight - now).whole_seconds()
}

/// Every model route, in each shape it answers: (path, body).
fn every_model_route(text: &str) -> Vec<(&'static str, Value)> {
    let messages = json!([{"role": "user", "content": text}]);
    vec![
        ("/chat", json!({"messages": messages})),
        ("/chat", json!({"messages": messages, "stream": false})),
        ("/chat", json!({"messages": messages, "stream": true})),
        ("/chat/stream", json!({"messages": messages})),
        (
            "/chat/stream",
            json!({"messages": messages, "stream": true}),
        ),
        ("/chat-ui/chat", json!({"messages": messages})),
        ("/multi-agent-chat/batch", json!({"messages": messages})),
        ("/multi-agent-chat/stream", json!({"messages": messages})),
        ("/multi-agent-chat", json!({"messages": messages})),
    ]
}

/// `text` sent to `path` as `user`'s question.
async fn ask(path: &str, user: &str, text: &str) -> Reply {
    let body = json!({"messages": [{"role": "user", "content": text}]});
    send("POST", path, Some(user), Some(body)).await
}

#[tokio::test]
async fn turns_answer_until_the_quota_is_spent_then_every_model_route_is_a_429_for_that_user_only()
{
    let mut spent = 0u64;
    let mut answered = 0u64;
    let refused = loop {
        let reply = send(
            "POST",
            "/chat",
            Some("alice"),
            Some(json!({"messages": [{"role": "user", "content": long_question(answered as usize)}]})),
        )
        .await;
        if reply.status == 429 {
            break reply;
        }
        assert_eq!(reply.status, 200, "{}", reply.body);
        // Nothing is refused while the quota is not spent.
        assert!(
            spent < QUOTA,
            "answered past the quota: {spent} tokens spent"
        );
        spent += answered_tokens(&reply.json());
        answered += 1;
        assert!(answered < 20, "never refused");
    };
    assert!(answered >= 1);
    assert!(spent >= QUOTA, "refused at {spent} tokens, under the quota");
    eprintln!("quota run: {answered} turns answered, {spent} tokens counted, then refused");
    let retry: i64 = refused.retry_after.as_deref().unwrap().parse().unwrap();
    assert!(
        (retry - seconds_to_midnight()).abs() <= 5,
        "Retry-After {retry} s is not the time to midnight UTC"
    );
    assert!(
        refused.json()["error"]
            .as_str()
            .unwrap()
            .contains("400 tokens")
    );

    // Every model route, both protocol versions, streamed and buffered, the Chat UI and multi-agent: 429, before
    // any model call.
    for (path, body) in every_model_route(&format!("one more about the {SECRET_WORD}")) {
        let reply = send("POST", path, Some("alice"), Some(body.clone())).await;
        assert_eq!(reply.status, 429, "{path} {body}: {}", reply.body);
        let retry: i64 = reply.retry_after.as_deref().unwrap().parse().unwrap();
        assert!(
            (retry - seconds_to_midnight()).abs() <= 5,
            "{path}: {retry}"
        );
        assert!(reply.json()["error"].is_string(), "{path}: {}", reply.body);
    }

    // Another user is not affected.
    let bob = ask("/chat", "bob", &format!("hello {SECRET_WORD}")).await;
    assert_eq!(bob.status, 200, "{}", bob.body);
    let bob_tokens = answered_tokens(&bob.json());
    let bob_stream = ask("/chat/stream", "bob", "hello again").await;
    assert_eq!(bob_stream.status, 200, "{}", bob_stream.body);

    // GET /usage: each caller's own.
    let usage = send("GET", "/usage", Some("alice"), None).await;
    assert_eq!(usage.status, 200, "{}", usage.body);
    let usage = usage.json();
    assert_eq!(usage["today"]["total_tokens"], json!(spent), "{usage}");
    assert_eq!(usage["today"]["turns"], json!(answered), "{usage}");
    assert_eq!(usage["today"]["token_limit"], json!(QUOTA));
    assert_eq!(usage["this_month"]["total_tokens"], json!(spent));
    assert_eq!(usage["this_month"]["token_limit"], Value::Null);
    let tomorrow = OffsetDateTime::now_utc().date().next_day().unwrap();
    assert_eq!(
        usage["today"]["resets_at"],
        json!(format!("{tomorrow}T00:00:00.000Z"))
    );
    assert_eq!(usage["this_minute"]["request_limit"], json!(5));
    let bob_usage = send("GET", "/usage", Some("bob"), None).await.json();
    assert_eq!(bob_usage["today"]["turns"], json!(2), "{bob_usage}");
    assert!(bob_usage["today"]["total_tokens"].as_u64().unwrap() > bob_tokens);
    assert_eq!(send("GET", "/usage", None, None).await.status, 401);
}

#[tokio::test]
async fn a_rate_limit_of_five_a_minute_refuses_the_sixth_request() {
    // Six requests inside one sliding minute, whenever the clock's minute turns.
    for i in 0..5 {
        let reply = ask("/chat", "carol", &format!("rate {i} {SECRET_WORD}")).await;
        assert_eq!(reply.status, 200, "request {i}: {}", reply.body);
    }
    let sixth = ask("/chat/stream", "carol", &format!("rate 5 {SECRET_WORD}")).await;
    assert_eq!(sixth.status, 429, "{}", sixth.body);
    let retry: u64 = sixth.retry_after.as_deref().unwrap().parse().unwrap();
    // Until the window (seven buckets of 10 s) holds fewer than five.
    assert!((1..=70).contains(&retry), "Retry-After {retry}");
    assert!(sixth.json()["error"].as_str().unwrap().contains("a minute"));
    let usage = send("GET", "/usage", Some("carol"), None).await.json();
    assert_eq!(usage["this_minute"]["requests"], json!(5), "{usage}");
    // Another user's minute is their own.
    let dave = ask("/chat", "dave", "hi").await;
    assert_eq!(dave.status, 200, "{}", dave.body);
}

#[tokio::test]
async fn a_stream_the_client_leaves_before_its_end_is_counted() {
    // Twenty paced words: the client reads the first line and hangs up long before the end.
    let response = reqwest::Client::new()
        .post(format!("{}/chat/stream", run().local.base()))
        .bearer_auth(token("grace"))
        .header("content-type", "application/json")
        .body(
            json!({"messages": [{"role": "user", "content": format!("[[deltas:20]] [[delay-ms:300]] {SECRET_WORD}")}]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    use futures_util::StreamExt;
    let first = body.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(body);
    // The function notices at its next write (one delta later), stops the model and counts what was spent.
    let mut turns = json!(0);
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let usage = send("GET", "/usage", Some("grace"), None).await.json();
        turns = usage["today"]["turns"].clone();
        if turns == json!(1) {
            assert!(
                usage["today"]["input_tokens"].as_u64().unwrap() > 0,
                "{usage}"
            );
            assert!(
                usage["today"]["output_tokens"].as_u64().unwrap() > 0,
                "{usage}"
            );
            return;
        }
    }
    panic!("the abandoned turn was not counted: {turns}");
}

/// The metrics the alarms' record of a turn (dimension `kind`) may hold (docs/operations.md).
const BY_KIND: &[&str] = &["Turns", "Errors", "Throttles", "Latency", "CostUSD"];

/// The metrics every record of a turn may hold (docs/operations.md).
const METRICS: &[&str] = &[
    "Turns",
    "InputTokens",
    "OutputTokens",
    "CacheReadInputTokens",
    "CacheWriteInputTokens",
    "CostUSD",
    "Latency",
    "TimeToFirstToken",
    "ModelRounds",
    "ToolCalls",
    "Errors",
    "Throttles",
    "ErrorsModel",
    "ErrorsStore",
    "ErrorsTimeout",
    "ErrorsInternal",
    "ClientErrors",
    "ThrottlesQuota",
    "ThrottlesRate",
    "ThrottlesModel",
];

#[tokio::test]
async fn each_turn_leaves_an_emf_record_and_no_log_line_holds_a_word_of_the_conversation() {
    // Turns of this test's own, on a buffered and a streamed route, answered and refused.
    for path in [
        "/chat",
        "/chat/stream",
        "/chat-ui/chat",
        "/multi-agent-chat/batch",
    ] {
        let reply = send(
            "POST",
            path,
            Some("erin"),
            Some(json!({"messages": [{"role": "user", "content": format!("metrics {SECRET_WORD}")}]})),
        )
        .await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    }
    // A streamed turn writes its record when its stream ends; the log is written as it goes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = std::fs::read_to_string(&run().local.log).unwrap();
    let mut records = Vec::new();
    for line in log.lines() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if value.get("_aws").is_some() {
            records.push(value);
        }
    }
    assert!(!records.is_empty(), "no EMF record in the log");
    let mut routes = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeSet::new();
    for record in &records {
        let aws = &record["_aws"];
        assert!(
            aws["Timestamp"].as_u64().unwrap() > 1_700_000_000_000,
            "{record}"
        );
        let directive = &aws["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "ChatBackend", "{record}");
        let dimensions: Vec<&str> = directive["Dimensions"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        // The alarms' record of the turn: the one dimension kind, the alarms' metrics only.
        if dimensions == ["kind"] {
            let kind = record["kind"].as_str().unwrap();
            assert!(["answer", "agents"].contains(&kind), "{record}");
            assert!(record.get("user").is_none() && !record.to_string().contains("erin"));
            let named: Vec<&str> = harness::texts_of(&directive["Metrics"], "Name");
            assert!(
                named.iter().all(|n| BY_KIND.contains(n)),
                "{named:?}: {record}"
            );
            assert!(
                named.contains(&"Turns") && named.contains(&"Latency") && named.contains(&"Errors")
            );
            kinds.insert(kind.to_string());
            continue;
        }
        let mut sorted = dimensions.clone();
        sorted.sort();
        assert_eq!(sorted, ["function", "model", "route"], "{record}");
        for d in &dimensions {
            assert!(
                record[*d].is_string(),
                "dimension {d} has no value: {record}"
            );
        }
        assert!(record.get("user").is_none() && !record.to_string().contains("erin"));
        let named: Vec<&str> = harness::texts_of(&directive["Metrics"], "Name");
        // The `_aws` block names every metric the record holds, and each it names is there.
        for (key, value) in record.as_object().unwrap() {
            if key == "_aws" || dimensions.contains(&key.as_str()) {
                continue;
            }
            assert!(
                named.contains(&key.as_str()),
                "{key} is not named: {record}"
            );
            assert!(
                value.is_number()
                    || value
                        .as_array()
                        .is_some_and(|a| a.iter().all(Value::is_number)),
                "{key}: {record}"
            );
        }
        for name in &named {
            assert!(METRICS.contains(name), "unknown metric {name}");
            assert!(
                record.get(*name).is_some(),
                "{name} named but absent: {record}"
            );
        }
        assert!(
            named.contains(&"Turns") && named.contains(&"Latency") && named.contains(&"Errors")
        );
        routes.insert(format!(
            "{} {}",
            record["function"].as_str().unwrap(),
            record["route"].as_str().unwrap()
        ));
    }
    for expected in [
        "chat /chat",
        "chat-stream /chat/stream",
        "chat /chat-ui/chat",
        "chat /multi-agent-chat/batch",
    ] {
        assert!(
            routes.contains(expected),
            "no record for {expected}: {routes:?}"
        );
    }
    // The single answers and the multi-agent round, each in its kind's record too.
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["agents", "answer"],
        "the alarms' records"
    );
    // An answered turn's record holds its tokens and time to first token.
    assert!(records.iter().any(|r| {
        r["route"] == "/chat/stream"
            && r.get("OutputTokens").is_some()
            && r.get("TimeToFirstToken").is_some()
            && r.get("ModelRounds").is_some()
    }));

    // At TRACE, nothing of the conversation reaches the log: not the questions, not the answers.
    let lines_with_trace = log
        .lines()
        .filter(|l| l.contains("\"TRACE\"") || l.contains("\"DEBUG\""))
        .count();
    assert!(lines_with_trace > 0, "the log is not at TRACE");
    // (The local Bedrock server stands in for AWS: its own lines, which say what it sent, are not the backend's.)
    for line in log.lines().filter(|l| !l.starts_with("local-bedrock:")) {
        assert!(
            !line.contains(SECRET_WORD),
            "a log line holds a word of the conversation: {line}"
        );
    }
}
