//! End to end: these tests talk HTTP to the local run (`local-run`, what `make run` runs: moto, the local Bedrock
//! server, the three functions' routers), as a client would: the one `make test` started for its conformance section
//! (`LOCAL_RUN_URL`), or one of their own on http://127.0.0.1:9000. They need the project's tools (`make tools`).
//! The JavaScript clients' side of the conformance suite is in `tests/js/`.

mod support;

use std::sync::OnceLock;
use std::time::SystemTime;

use chat_testing::harness;
use serde_json::{Value, json};
use support::LocalRun;

/// The address of the local run: the one `LOCAL_RUN_URL` names (`make test` starts one for its suites), else one
/// this file starts on port 9000 and stops when it ends.
fn base() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    static RUN: OnceLock<LocalRun> = OnceLock::new();
    BASE.get_or_init(|| match std::env::var("LOCAL_RUN_URL") {
        Ok(url) => url.trim_end_matches('/').to_string(),
        Err(_) => RUN.get_or_init(|| LocalRun::start("e2e", 9000, &[])).base(),
    })
}

async fn post(path: &str, content_type: &str, body: String) -> (u16, String, String) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", base()))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("the local run answers");
    let status = response.status().as_u16();
    let ct = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, response.text().await.unwrap())
}

/// The user's question `text`, as a chat request's body.
fn asked(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

async fn post_json(path: &str, body: Value) -> (u16, String, String) {
    post(path, "application/json", body.to_string()).await
}

#[tokio::test]
async fn chat_answers_the_2024_05_29_shape() {
    // The README's first request, word for word.
    let (status, ct, body) = post_json("/chat", asked("hi")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ct, "application/json");
    assert!(
        body.starts_with(
            r#"{"message":{"role":"assistant","content":"Echo: hi"},"context":{"thoughts":["#
        ),
        "{body}"
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    // No session state in the request: a new chat, whose id is the session state.
    let id = v["sessionState"].as_str().expect("the new chat's id");
    assert!(
        body.ends_with(&format!(r#"]}},"sessionState":"{id}"}}"#)),
        "{body}"
    );
    assert_eq!(
        v["context"]["thoughts"][0]["props"]["model"],
        "local.echo-v1:0"
    );
}

#[tokio::test]
async fn chat_ui_and_the_older_dialect_answer_on_the_same_address() {
    let (status, _, body) = post_json("/chat-ui/chat", asked("Hello")).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v[0]["Items"][0]["Text"], "Echo: Hello");

    let (status, ct, body) = post_json(
        "/chat",
        json!({"messages": [{"role": "user", "content": "one two"}], "stream": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ct, "application/json-lines");
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["choices"][0]["delta"]["content"], "Echo: one two");
    assert!(body.ends_with('\n'));
}

#[tokio::test]
async fn errors_are_json_on_the_local_run() {
    let (status, _, body) = post("/chat", "text/plain", "hi".into()).await;
    assert_eq!(
        (status, body.as_str()),
        (
            415,
            r#"{"error":"The request body must be JSON (Content-Type: application/json)."}"#
        )
    );
    let (status, _, body) = post_json("/no/such/route", json!({})).await;
    assert_eq!(
        (status, body.as_str()),
        (404, r#"{"error":"There is nothing at /no/such/route."}"#)
    );
    let (status, _, body) = post_json("/chat", asked("[[fault:throttle]]")).await;
    assert_eq!(status, 429, "{body}");
    let (status, _, body) = post_json("/chat", asked("[[fault:guardrail]]")).await;
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            r#"{"error":"Your message contains content that was flagged by the content filter."}"#
        )
    );
}

#[tokio::test]
async fn cors_answers_pages_of_this_machine_only() {
    let client = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        client
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/chat-history?mode=standard", base()),
            )
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let allowed = |response: &reqwest::Response| {
        response
            .headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string())
    };
    // A front end's dev server on any local port, by name or by address.
    for origin in ["http://localhost:5173", "http://127.0.0.1:41000"] {
        let answer = preflight(origin).await.unwrap();
        assert!(answer.status().is_success(), "{origin}");
        assert_eq!(allowed(&answer).as_deref(), Some(origin));
    }
    // Any other page the developer opens is refused what it would read.
    let answer = preflight("https://evil.example").await.unwrap();
    assert_eq!(allowed(&answer), None);
    let answer = client
        .get(format!("{}/chat-history?mode=standard", base()))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(allowed(&answer), None);
}

#[tokio::test]
async fn a_page_whose_name_was_rebound_to_this_machine_is_refused() {
    // DNS rebinding: the page's own name resolves to 127.0.0.1, so its requests are same-origin (no CORS question),
    // but they carry its name in Host.
    let client = reqwest::Client::new();
    let list = format!("{}/chat-history?mode=standard", base());
    let answer = client
        .get(&list)
        .header("host", "evil.example:9000")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 421);
    let error: Value = answer.json().await.unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("localhost"),
        "{error}"
    );
    for host in ["localhost:9000", "127.0.0.1:9000"] {
        let answer = client.get(&list).header("host", host).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{host}");
    }
}

#[tokio::test]
async fn a_client_sending_8_mib_whole_reads_its_413() {
    // reqwest writes the whole body before it reads the answer: a server that answered and closed mid-body would
    // break the pipe under it.
    let mut body = r#"{"messages":[{"role":"user","content":""#.to_string();
    body.push_str(&"x".repeat(8 * 1024 * 1024));
    body.push_str(r#""}]}"#);
    let (status, ct, text) = post("/chat", "application/json", body).await;
    assert_eq!((status, ct.as_str()), (413, "application/json"), "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("The request body is larger than the limit of "),
        "{text}"
    );
}

/// Milliseconds since the Unix epoch.
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn streamed_lines_arrive_as_the_local_model_sends_them() {
    let marker = format!("timing-{}", unix_ms(SystemTime::now()));
    let started = SystemTime::now();
    let mut response = reqwest::Client::new()
        .post(format!("{}/chat/stream", base()))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(json!({"messages": [{"role": "user", "content": format!("[[deltas:10]] [[delay-ms:200]] {marker}")}]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/jsonl");
    // Each complete line, with when its last byte arrived.
    let mut lines: Vec<(SystemTime, Value)> = Vec::new();
    let mut partial = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        let now = SystemTime::now();
        partial.extend_from_slice(&chunk);
        while let Some(end) = partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = partial.drain(..=end).collect();
            lines.push((now, serde_json::from_slice(&line).unwrap()));
        }
    }
    assert!(partial.is_empty(), "every line ends in a newline");
    let contents: Vec<SystemTime> = lines
        .iter()
        .filter(|(_, l)| l["delta"]["content"].is_string())
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(contents.len(), 10);

    let recorded: Value = reqwest::get("http://127.0.0.1:9100/__local/requests")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let request = recorded
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["body"].to_string().contains(&marker))
        .expect("the local model saw the request");
    let sent: Vec<u64> = request["deltasSentAtMs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(sent.len(), 10);
    let t0 = unix_ms(started);
    println!("delta  sent by the local model  arrived at the client   (ms after the request)");
    for (i, (s, a)) in sent.iter().zip(&contents).enumerate() {
        println!("{:>5}  {:>24}  {:>21}", i + 1, s - t0, unix_ms(*a) - t0);
    }
    // Causal order, not speed: each line reaches the client before the model produces the delta two after it,
    // which a buffered answer could not do.
    for i in 0..8 {
        assert!(
            unix_ms(contents[i]) < sent[i + 2],
            "line {} arrived after delta {} was sent",
            i + 1,
            i + 3
        );
    }
}

async fn get_json(path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{}{path}", base())).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// What the README's curl session does: a chat through /chat, continued with its session state, then listed and
/// read through /chat-history.
#[tokio::test]
async fn a_chat_made_through_chat_is_continued_and_listed_in_the_history() {
    let marker = format!("history-{}", unix_ms(SystemTime::now()));
    let (status, _, body) = post_json(
        "/chat",
        json!({"messages": [{"role": "user", "content": format!("Plan the {marker} trip")}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["sessionState"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _, body) = post_json(
        "/chat/stream",
        json!({"messages": [{"role": "user", "content": "And the budget?"}], "sessionState": id}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, list) = get_json("/chat-history?mode=standard").await;
    assert_eq!(status, 200);
    let item = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!(id))
        .expect("the chat is listed");
    assert_eq!(item["title"], json!(format!("Plan the {marker} trip")));
    assert_eq!(item["messageCount"], 4);
    assert_eq!(item["lastMessage"], "Echo: And the budget?");
    let (status, messages) = get_json(&format!("/chat-history/{id}/messages")).await;
    assert_eq!(status, 200);
    let contents: Vec<&str> = harness::texts_of(&messages, "content");
    assert_eq!(
        contents,
        [
            format!("Plan the {marker} trip").as_str(),
            format!("Echo: Plan the {marker} trip").as_str(),
            "And the budget?",
            "Echo: And the budget?"
        ]
    );
}

/// The Chat UI's SSE client takes each network read as one event: every read must hold exactly one whole event.
#[tokio::test]
async fn each_agent_message_arrives_as_one_event_per_read() {
    let started = SystemTime::now();
    let mut response = reqwest::Client::new()
        .post(format!("{}/multi-agent-chat/stream", base()))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(
            json!({"messages": [{"role": "user", "content": "Plan a launch [[delay-ms:150]]"}]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut authors = Vec::new();
    while let Some(read) = response.chunk().await.unwrap() {
        let text = String::from_utf8(read.to_vec()).unwrap();
        let data = text
            .strip_prefix("data: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("a read that is not exactly one event: {text:?}"));
        let event: Value = serde_json::from_str(data).unwrap();
        let author = event["AuthorName"].as_str().unwrap().to_string();
        println!(
            "{:>5} ms  {author}",
            unix_ms(SystemTime::now()) - unix_ms(started)
        );
        authors.push(author);
    }
    assert_eq!(authors, harness::DEFAULT_ROUND);
}

/// Every answer reaches the client: 1,000 requests (`E2E_LIST_REQUESTS`: moto answers one request at a time, 4 to
/// 17 lists a second depending on the machine, so 1,000 take one to four minutes) for a history list of about 20 KB, eight at a time, each answered 200 with the whole
/// list. (Under `cargo lambda watch`, a few in a thousand such answers were lost on their way back; the local run
/// now serves the functions' routers itself.)
#[tokio::test]
async fn every_request_for_a_long_history_list_is_answered() {
    let requests: usize = std::env::var("E2E_LIST_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let client = reqwest::Client::new();
    // Fifty chats with long titles and long last messages: the first page of the list is about 20 KB.
    for n in 0..50 {
        let (status, created) = {
            let r = client
                .post(format!("{}/chat-history", base()))
                .json(&json!({"title": format!("{n:02} {}", "a long title for a long list ".repeat(3)), "mode": "multiAgent"}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        };
        assert_eq!(status, 201, "{created}");
        let id = created["id"].as_str().unwrap();
        let status = client
            .put(format!("{}/chat-history/{id}?mode=multiAgent", base()))
            .json(&json!({"messages": [{"id": "m1", "role": "user", "content": "word ".repeat(60), "timestamp": "10:15 AM"}]}))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200);
    }
    let url = format!("{}/chat-history?mode=multiAgent&limit=50", base());
    let first = client
        .get(&url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    println!("history list: {} bytes", first.len());
    assert!(first.len() >= 16_000, "{} bytes", first.len());

    let started = std::time::Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (answered, bytes) = futures_util::future::join_all((0..8).map(|_| async {
        let (mut answered, mut bytes) = (0usize, 0usize);
        while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < requests {
            let response = client.get(&url).send().await.expect("an answer");
            assert_eq!(response.status(), 200);
            let body = response.bytes().await.expect("the whole answer");
            let list: Value = serde_json::from_slice(&body).expect("the whole list, as JSON");
            assert_eq!(list.as_array().map(Vec::len), Some(50));
            answered += 1;
            bytes += body.len();
        }
        (answered, bytes)
    }))
    .await
    .into_iter()
    .fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
    println!(
        "{answered} of {requests} requests answered with the whole list ({bytes} bytes) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(answered, requests);
}

/// Inputs that `cargo lambda watch` used to answer with its own 500 reach the functions: a body that is not UTF-8
/// is their 400, and header values that are not ASCII are read like any other.
#[tokio::test]
async fn bytes_that_are_not_utf8_or_ascii_reach_the_functions() {
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/chat", base()))
        .header("content-type", "application/json")
        .body(vec![0xff, 0xfe, b'{', 0x80])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"error": "the body is not valid UTF-8"})
    );

    let latin1 = reqwest::header::HeaderValue::from_bytes(b"Bearer \xe9t\xe9").unwrap();
    let response = client
        .post(format!("{}/chat", base()))
        .header("authorization", latin1.clone())
        .header(
            "content-type",
            reqwest::header::HeaderValue::from_bytes(b"application/json; note=\xe9").unwrap(),
        )
        .body(json!({"messages": [{"role": "user", "content": "hi"}]}).to_string())
        .send()
        .await
        .unwrap();
    // The local run has one local user: the token is not read; the JSON body is, its type named by the essence.
    assert_eq!(response.status(), 200, "{:?}", response.text().await);

    let response = client
        .get(format!("{}/chat-history?mode=standard", base()))
        .header(
            "accept",
            reqwest::header::HeaderValue::from_bytes(b"application/json, text/\xff").unwrap(),
        )
        .header("authorization", latin1)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.json::<Value>().await.unwrap().is_array());

    let response = client
        .post(format!("{}/chat", base()))
        .header(
            "content-type",
            reqwest::header::HeaderValue::from_bytes(b"text/\xe9").unwrap(),
        )
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    assert!(response.json::<Value>().await.unwrap()["error"].is_string());
}

#[tokio::test]
async fn openai_clients_are_served_at_the_same_address_streamed_by_the_streaming_function() {
    let models: Value = reqwest::get(format!("{}/v1/models", base()))
        .await
        .expect("the local run answers")
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let model = models["data"][0]["id"]
        .as_str()
        .expect("a model")
        .to_string();
    let ask = |stream: bool| {
        json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "Hello"}]})
            .to_string()
    };
    let (status, ct, body) = post("/v1/chat/completions", "application/json", ask(false)).await;
    assert_eq!((status, ct.as_str()), (200, "application/json"), "{body}");
    let completion: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        "Echo: Hello"
    );
    // stream: true is answered here, as the streaming function answers it (the buffered one would refuse it).
    let (status, ct, body) = post("/v1/chat/completions", "application/json", ask(true)).await;
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"), "{body}");
    assert!(body.starts_with("data: {"), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
}

/// A client of the local run sending `Authorization: Bearer` when given a key (the API keys' test).
struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = bearer {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the local run answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

#[tokio::test]
async fn the_local_run_issues_keys_to_its_user_and_refuses_any_other() {
    // API keys as an OpenAI client would try them: a request without `Authorization` is the local user as before; one
    // with `Authorization: Bearer` must carry a key this local run issued (else 401), and then acts as the local
    // user; a revoked key gets 401.
    let c = Client {
        base: base().to_string(),
        http: reqwest::Client::new(),
    };
    use reqwest::Method;
    let chat = json!({"messages": [{"role": "user", "content": "hello"}]});

    let (status, created) = c
        .send(
            Method::POST,
            "/api-keys",
            None,
            Some(json!({"name": "sdk"})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_string();
    let id = created["id"].as_str().unwrap().to_string();

    // The key is the local user: a chat it starts is listed to the local user.
    let (status, answer) = c
        .send(Method::POST, "/chat", Some(&key), Some(chat.clone()))
        .await;
    assert_eq!(status, 200, "{answer}");
    let chat_id = answer["sessionState"].as_str().unwrap().to_string();
    let (status, listed) = c
        .send(Method::GET, "/chat-history?mode=standard", None, None)
        .await;
    assert_eq!(status, 200);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == chat_id.as_str()),
        "{listed}"
    );

    // A Bearer token this run did not issue: 401, whether shaped like a key or not.
    for other in [
        "cbk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "sk-not-ours",
    ] {
        let (status, body) = c
            .send(Method::POST, "/chat", Some(other), Some(chat.clone()))
            .await;
        assert_eq!(status, 401, "{other}: {body}");
    }

    // Revoked: 401 at once (one instance serves every route here, and it forgets what it revoked).
    let (status, _) = c
        .send(Method::DELETE, &format!("/api-keys/{id}"), None, None)
        .await;
    assert_eq!(status, 204);
    let (status, _) = c.send(Method::POST, "/chat", Some(&key), Some(chat)).await;
    assert_eq!(status, 401);
}
