//! Limits that hold against a user who tries, through the real SDK clients, the local Bedrock server and moto:
//! admission is one conditional write (fifty requests at once under a rate of ten admit ten; twenty turns at once
//! under a quota that holds five reservations admit five), every model call is counted whatever becomes of its
//! turn (a buffered answer whose model stream fails after some tokens), a process killed mid-answer leaves its
//! reservation counted, a multi-agent round ends with what it has before the invocation's deadline, a user at a
//! limit (of requests, or of spend) is refused on every dialect's routes before the model, and cache reads and
//! writes are charged at their own prices.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chat_app::{Buffered, ChatApp, HistoryApp};
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{Embedder, UsageSnapshot};
use chat_stream::App;
use chat_testing::harness::{self, Backend, Reply, Streamed, Wired};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use serde_json::{Value, json};

/// The prompt budget and output cap every test here configures: a turn's first call holds 2,200 tokens.
const BUDGET: &[(&str, &str)] = &[("MAX_PROMPT_TOKENS", "2000"), ("MAX_TOKENS", "200")];
const RESERVED: u64 = 2200;

type Harness = Wired<App<BedrockModel, DynamoStore>>;

/// The function as its cold start builds it, counting in the table it stores chats in, configured with `env`.
async fn harness(env: &[(&str, &str)]) -> Harness {
    let backend = Backend::start(&[BUDGET, env].concat()).await;
    let ledger = backend.ledger();
    let counting = |m, s, a, c| App::new(m, s, a, c).with_usage(Some(ledger));
    backend.wired(counting).await
}

async fn post(h: &Harness, path: &str, body: Value) -> Streamed {
    let request = harness::json_request("POST", path, Some(&body));
    Streamed::read(h.app.handle(request).await).await
}

/// The user's counters now.
async fn usage(h: &Harness) -> UsageSnapshot {
    harness::usage_now(&h.store).await
}

/// `questions` sent to `/chat/stream` all at once, each on a task of its own: the replies, in order.
async fn at_once(h: &Arc<Harness>, questions: impl Iterator<Item = String>) -> Vec<Streamed> {
    let all = questions.map(|question| {
        let h = h.clone();
        tokio::spawn(async move { post(&h, "/chat/stream", ask(&question)).await })
    });
    let replies = futures_util::future::join_all(all).await;
    replies.into_iter().map(Result::unwrap).collect()
}

/// Ends a plain server's process.
fn stop(server: &mut std::process::Child) {
    server.kill().unwrap();
    server.wait().unwrap();
}

fn ask(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

/// The three functions on one backend, counting in its table as their cold starts build them: the streaming chat
/// function, the buffered one and the history function (`GET /usage`).
struct Counting {
    streaming: App<BedrockModel, DynamoStore>,
    buffered: ChatApp<BedrockModel, DynamoStore, Buffered>,
    history: HistoryApp<DynamoStore>,
}

impl Counting {
    async fn new(backend: &Backend) -> Self {
        Self::with_embedder(backend, None).await
    }

    /// With the streaming function's embedder too (`/v1/embeddings`).
    async fn with_embeddings(backend: &Backend) -> Self {
        let sdk = backend.bedrock.sdk_config().await;
        let embedder = chat_aws::BedrockEmbedder::new(&sdk, backend.config.model_timeout);
        Self::with_embedder(backend, Some(Arc::new(embedder))).await
    }

    async fn with_embedder(backend: &Backend, embedder: Option<Arc<dyn Embedder>>) -> Self {
        let ledger = backend.ledger();
        let streaming = backend
            .app(|m, s, a, c| {
                App::new(m, s, a, c)
                    .with_usage(Some(ledger.clone()))
                    .with_embedder(embedder)
            })
            .await;
        let buffered = backend
            .app(|m, s, a, c| ChatApp::new(m, s, a, c).with_usage(Some(ledger.clone())))
            .await;
        let history = HistoryApp::new(backend.store.clone(), harness::auth(), &backend.config)
            .with_usage(Some(ledger));
        Counting {
            streaming,
            buffered,
            history,
        }
    }

    /// `body` sent to `path` in its dialect's form, to the streaming function if `streamed`, else to the buffered one.
    async fn send(&self, path: &str, body: &Value, streamed: bool) -> Reply {
        let request = dialect_request(path, body);
        if streamed {
            Reply::collected(self.streaming.handle(request).await).await
        } else {
            Reply::buffered(self.buffered.handle(request).await)
        }
    }

    /// `GET /usage`, answered 200: its report.
    async fn usage(&self) -> Value {
        let usage = Reply::buffered(
            self.history
                .handle(harness::json_request("GET", "/usage", None))
                .await,
        );
        assert_eq!(usage.status, 200, "{}", usage.body);
        usage.json()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_requests_at_once_under_a_rate_of_ten_a_minute_admit_exactly_ten() {
    let h = Arc::new(harness(&[("RATE_LIMIT_PER_MINUTE", "10")]).await);
    let replies = at_once(&h, (0..50).map(|i| format!("question {i}"))).await;
    let answered = replies.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&Streamed> = replies.iter().filter(|r| r.status == 429).collect();
    println!(
        "50 requests at once, RATE_LIMIT_PER_MINUTE=10: {answered} admitted, {} refused",
        refused.len()
    );
    assert_eq!((answered, refused.len()), (10, 40));
    for reply in refused {
        let body: Value = serde_json::from_str(&reply.text()).unwrap();
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("Too many requests"),
            "{body}"
        );
    }
    assert_eq!(
        h.bedrock.requests().len(),
        10,
        "only the admitted reach the model"
    );
    let usage = usage(&h).await;
    assert_eq!(usage.window.requests(), 10);
    assert_eq!((usage.day.turns, usage.day.reserved.tokens), (10, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_turns_at_once_under_a_quota_that_holds_five_admit_at_most_six() {
    let quota = (5 * RESERVED).to_string();
    let h = Arc::new(harness(&[("QUOTA_TOKENS_PER_DAY", &quota)]).await);
    // Each answer takes a while, as a model's does: the twenty are all in progress together.
    let questions = (0..20).map(|i| format!("[[deltas:5]] [[delay-ms:400]] question {i}"));
    let replies = at_once(&h, questions).await;
    let answered = replies.iter().filter(|r| r.status == 200).count();
    let refused = replies.iter().filter(|r| r.status == 429).count();
    println!(
        "20 turns at once under a quota of 5 reservations ({quota} tokens): {answered} admitted, {refused} refused"
    );
    assert!((5..=6).contains(&answered), "{answered} admitted");
    assert_eq!(answered + refused, 20);
    // Settled, they hold what they spent, far less than their reservations: the user gets in again.
    let usage = usage(&h).await;
    assert_eq!(usage.day.reserved.tokens, 0);
    assert!(usage.day.spent.tokens.total_tokens < RESERVED, "{usage:?}");
    let again = post(&h, "/chat/stream", ask("one more")).await;
    assert_eq!(again.status, 200);
}

#[tokio::test]
async fn a_buffered_answer_whose_model_stream_fails_after_some_tokens_is_counted() {
    let h = harness(&[]).await;
    // The 2024-01-28 dialect without `stream`: the streamed answer, collected, fails after twenty words.
    let body = json!({
        "messages": [{"role": "user", "content": "[[deltas:60]] [[stream-error-after:20]] tell me"}],
        "stream": false
    });
    let reply = post(&h, "/chat/stream", body).await;
    assert!(reply.status.is_server_error(), "{}", reply.status);
    let usage = usage(&h).await;
    let spent = usage.day.spent.tokens;
    println!(
        "a buffered answer that failed after 20 of 60 words: counted {} input + {} output tokens, {} held",
        spent.input_tokens, spent.output_tokens, usage.day.reserved.tokens
    );
    assert_eq!(usage.day.turns, 1);
    assert!(spent.input_tokens > 0, "the prompt read is counted");
    assert!(
        spent.output_tokens >= 20,
        "the words written are counted: {spent:?}"
    );
    assert_eq!(usage.day.reserved.tokens, 0, "settled, its hold released");
}

/// A multi-agent round given an invocation whose deadline comes before its agents are done ends with the messages
/// it has, the last saying why, and is stored and counted. The second agent's model never answers within the
/// test (a minute's silence before its first word), so only the deadline can end the round: what is asserted is
/// what the round holds when it ends, never how long it took (a deadline cut late shows as the Engineer's words).
#[tokio::test]
async fn a_multi_agent_round_ends_with_what_it_has_before_the_deadline() {
    let agents = r#"[
        {"name": "Analyst", "instructions": "Analyse."},
        {"name": "Engineer", "instructions": "[[first-delay-ms:60000]] Build."},
        {"name": "Owner", "instructions": "Review."}
    ]"#;
    let h = harness(&[("AGENTS", agents), ("MAX_AGENT_TURNS", "6")]).await;
    let mut request = harness::json_request(
        "POST",
        "/multi-agent-chat/stream",
        Some(&ask("[[deltas:3]] plan it")),
    );
    request
        .headers_mut()
        .insert("accept", "text/event-stream".parse().unwrap());
    // Lambda's context, as the runtime gives it: this invocation must end 10 s from now, so the round ends by 7.5 s
    // (a quarter left to store and answer), long after the Analyst's words and long before the Engineer's.
    let mut context = lambda_http::Context::default();
    let ends = std::time::SystemTime::now() + Duration::from_secs(10);
    context.deadline = ends
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    request.extensions_mut().insert(context);
    let started = Instant::now();
    let reply = Streamed::read(h.app.handle(request).await).await;
    let took = started.elapsed();
    assert_eq!(reply.status, 200);
    let events: Vec<Value> = reply
        .text()
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    println!(
        "a round of up to 6 agent messages, the second agent's model silent, 10 s before the invocation's deadline: {} events in {took:?}",
        events.len()
    );
    for event in &events {
        assert!(event.get("error").is_none(), "{event}");
    }
    // What it has: the Analyst's whole message, then the Engineer's, cut by the deadline before its first word,
    // which says why the round ended. The Owner never spoke.
    let speakers: Vec<&str> = events
        .iter()
        .map(|e| e["AuthorName"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(speakers, ["Analyst", "Engineer"], "{events:?}");
    let said = |e: &Value| -> String {
        e["Items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["Text"].as_str())
            .collect()
    };
    assert_eq!(said(&events[0]), "w1 w2 w3", "{}", events[0]);
    assert_eq!(
        said(&events[1]),
        "",
        "cut before its first word: {}",
        events[1]
    );
    let last = events.last().unwrap();
    let ended = &last["Metadata"]["Thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Round ended")
        .unwrap_or_else(|| panic!("the last message says why the round ended: {last}"))
        .clone();
    assert_eq!(ended["props"]["reason"], "time_limit", "{ended}");
    assert_eq!(ended["props"]["messages"], 2, "{ended}");
    let usage = usage(&h).await;
    assert_eq!(usage.day.turns, 1, "stored and counted");
    assert_eq!(usage.day.reserved.tokens, 0);
}

#[tokio::test]
async fn a_turn_whose_process_is_killed_mid_answer_leaves_its_reservation_counted() {
    let bedrock = LocalBedrock::start().await.unwrap();
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let port = harness::free_port();
    let reserved = RESERVED.to_string();
    let start = || {
        harness::plain_server(
            env!("CARGO_BIN_EXE_chat-stream"),
            port,
            (&bedrock.endpoint(), &table),
            &[
                BUDGET,
                // A quota of one reservation: a turn in progress (or one whose process died) holds it all.
                &[("QUOTA_TOKENS_PER_DAY", reserved.as_str())],
            ]
            .concat(),
        )
        .spawn()
        .expect("the binary starts")
    };
    let mut server = start();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    harness::wait_for_port(port).await;
    let send = |text: &str| {
        http.post(format!("{base}/chat/stream"))
            .json(&ask(text))
            .send()
    };
    let mut answer = send("[[deltas:100]] [[delay-ms:100]] a long answer")
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // The first words arrive; then the process is killed (as Lambda's timeout ends an invocation).
    let mut read = String::new();
    while !read.contains("w2") {
        read.push_str(&String::from_utf8_lossy(
            &answer.chunk().await.unwrap().unwrap(),
        ));
    }
    stop(&mut server);
    let store = DynamoStore::new(client, table.clone(), None);
    let usage = harness::usage_now(&store).await;
    println!(
        "a turn killed mid-answer: {} tokens held, {} spent, {} turns",
        usage.day.reserved.tokens, usage.day.spent.tokens.total_tokens, usage.day.turns
    );
    assert_eq!(usage.day.reserved.tokens, RESERVED, "its reservation stays");
    assert_eq!(usage.month.reserved.tokens, RESERVED);
    assert_eq!(usage.day.turns, 0, "never settled");
    // It counts against the quota: the next turn is refused until the day ends.
    let mut server = start();
    harness::wait_for_port(port).await;
    let refused = send("another").await.unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    stop(&mut server);
}

/// A limit added as configuration alone: `QUOTA_REQUESTS_PER_DAY=1`, and nothing else, lets a user's first request
/// through and refuses the next on every model route of both functions, buffered and streaming, OpenAI's, Anthropic's
/// Messages and the Responses API too, each in its dialect's error shape, with 429 and `Retry-After` until midnight
/// UTC; `GET /usage` lists the limit, used.
#[tokio::test]
async fn a_limit_that_is_one_setting_refuses_every_route_and_shows_in_usage() {
    let backend = Backend::start(&[("QUOTA_REQUESTS_PER_DAY", "1")]).await;
    let functions = Counting::with_embeddings(&backend).await;
    let chat = ask("hello");
    let embedding = json!({"input": "hello", "model": "amazon.titan-embed-text-v2:0"});
    let first = functions.send("/chat", &chat, false).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let midnight = chat_core::Periods::at(time::OffsetDateTime::now_utc());
    let until_midnight = midnight.seconds_until(midnight.day_ends);
    let mut routes = vec![
        ("/chat", chat.clone(), false),
        ("/chat-ui/chat", chat.clone(), false),
        ("/multi-agent-chat/batch", chat.clone(), false),
        ("/chat/stream", chat.clone(), true),
        ("/multi-agent-chat/stream", chat, true),
        ("/v1/embeddings", embedding, true),
    ];
    routes.extend(
        every_dialect()
            .into_iter()
            .map(|(path, body)| (path, body, true)),
    );
    assert_eq!(routes.len(), 12);
    for (path, body, streamed) in routes {
        let refused = functions.send(path, &body, streamed).await;
        println!("{path}: {} {}", refused.status, refused.body);
        assert_refused_until(path, &refused, until_midnight, "your 1 request for today");
    }
    assert_eq!(h_requests(&backend), 1, "only the first reached the model");
    let limits = functions.usage().await["limits"].clone();
    println!("GET /usage limits: {limits}");
    // The one configured, and the open watches' default (none held).
    assert_eq!(limits.as_array().unwrap().len(), 2, "{limits}");
    let limit = &limits[0];
    assert_eq!(limit["name"], "requests_per_day");
    assert_eq!(limits[1]["name"], "open_watches");
    assert_eq!(
        (limits[1]["used"].clone(), limits[1]["limit"].clone()),
        (json!(0), json!(3))
    );
    assert_eq!(
        (limit["used"].clone(), limit["limit"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        limit["resets_at"],
        chat_core::rfc3339_millis(midnight.day_ends)
    );
}

/// Each dialect's request of the echo model asking "hello", for a whole answer and then streamed: Anthropic's
/// Messages, OpenAI's Chat Completions and the Responses API (the answer not kept).
fn every_dialect() -> Vec<(&'static str, Value)> {
    let message = json!({"model": harness::ECHO_MODEL, "max_tokens": 100,
        "messages": [{"role": "user", "content": "hello"}]});
    let completion =
        json!({"model": harness::ECHO_MODEL, "messages": [{"role": "user", "content": "hello"}]});
    let response = json!({"model": harness::ECHO_MODEL, "input": "hello", "store": false});
    [
        ("/v1/messages", message),
        ("/v1/chat/completions", completion),
        ("/v1/responses", response),
    ]
    .into_iter()
    .flat_map(|(path, body)| [(path, body.clone()), (path, with_stream(&body))])
    .collect()
}

/// `body` asking for a streamed answer.
fn with_stream(body: &Value) -> Value {
    let mut body = body.clone();
    body["stream"] = json!(true);
    body
}

/// A POST of `body` to `path` as its dialect's clients send it: Anthropic's SDKs add `anthropic-version`.
fn dialect_request(path: &str, body: &Value) -> axum::http::Request<lambda_http::Body> {
    let mut request = harness::json_request("POST", path, Some(body));
    if path.starts_with("/v1/messages") {
        request
            .headers_mut()
            .insert("anthropic-version", "2023-06-01".parse().unwrap());
    }
    request
}

/// A quota's refusal in the error shape of `path`'s dialect, whole JSON before any byte of an answer (a streamed
/// request's too), that its clients read as a rate limit: Anthropic's `{"type": "error", "error": {"type":
/// "rate_limit_error", "message"}}` (what Anthropic's SDKs raise as `RateLimitError`), OpenAI's `{"error":
/// {"message", "type": "insufficient_quota", "code": "rate_limit_exceeded"}}`, the AI Chat Protocol's `{"error":
/// message}`; with `Retry-After` in whole seconds, and, when that is further off than an SDK should sleep,
/// `x-should-retry: false` (Anthropic's and OpenAI's SDKs would otherwise retry, Anthropic's after sleeping the whole
/// `Retry-After`, and a capped user would wait until midnight for the sentence that says why).
fn assert_refusal_shape(path: &str, refused: &Reply) {
    assert_eq!(refused.status, 429, "{path}: {}", refused.body);
    assert!(
        refused.content_type().starts_with("application/json"),
        "{path}: {:?}",
        refused.content_type()
    );
    let retry = refused.headers.get("retry-after");
    assert!(
        retry.is_some_and(|r| r.to_str().unwrap().parse::<u64>().is_ok()),
        "{path}: Retry-After {retry:?}"
    );
    let seconds: u64 = retry.unwrap().to_str().unwrap().parse().unwrap();
    let should_retry = refused.headers.get("x-should-retry");
    if seconds > u64::from(chat_edge::LONGEST_RETRY_SECONDS) {
        assert_eq!(
            should_retry.map(|v| v.to_str().unwrap()),
            Some("false"),
            "{path}: Retry-After {seconds}"
        );
    } else {
        assert!(should_retry.is_none(), "{path}: Retry-After {seconds}");
    }
    let body = refused.json();
    let message = if path.starts_with("/v1/messages") {
        assert_eq!(body["type"], "error", "{path}: {body}");
        assert_eq!(body["error"]["type"], "rate_limit_error", "{path}: {body}");
        assert_eq!(body.as_object().unwrap().len(), 2, "{path}: {body}");
        &body["error"]["message"]
    } else if path.starts_with("/v1/") {
        assert_eq!(
            body["error"]["type"], "insufficient_quota",
            "{path}: {body}"
        );
        assert_eq!(
            body["error"]["code"], "rate_limit_exceeded",
            "{path}: {body}"
        );
        &body["error"]["message"]
    } else {
        &body["error"]
    };
    assert!(
        !message.as_str().unwrap_or_default().is_empty(),
        "{path}: {body}"
    );
}

/// A refusal in `path`'s dialect's shape ([`assert_refusal_shape`]) saying `says`, with `Retry-After` until
/// midnight UTC (`until_midnight` seconds off, within a minute).
fn assert_refused_until(path: &str, refused: &Reply, until_midnight: u64, says: &str) {
    assert_refusal_shape(path, refused);
    let retry = refused.retry_after();
    assert!(
        retry <= until_midnight && retry + 60 >= until_midnight,
        "{path}: Retry-After {retry}, {until_midnight} s to midnight UTC"
    );
    assert!(refused.body.contains(says), "{path}: {}", refused.body);
}

/// The calls the local Bedrock server answered.
fn h_requests(backend: &Backend) -> usize {
    backend.bedrock.requests().len()
}

/// Seconds from now to midnight UTC, when a daily quota resets.
fn seconds_to_midnight() -> u64 {
    let now = chat_core::Periods::at(time::OffsetDateTime::now_utc());
    now.seconds_until(now.day_ends)
}

/// A spend cap: `QUOTA_COST_PER_DAY` of $0.05 at a dollar per thousand output tokens. Two real turns through the
/// local Bedrock server take the user from under the cap to it (their cost what the answers' usage says, at
/// `MODEL_PRICES`); then every model route of every dialect, buffered and streamed, answers 429 in its dialect's
/// shape with `Retry-After` until midnight UTC and a sentence naming the cap, and none of them reaches the model.
#[tokio::test]
async fn a_user_at_their_daily_spend_cap_is_refused_on_every_dialect_before_the_model() {
    const CAP: f64 = 0.05;
    // Dollars per million tokens: a cent per thousand read, a dollar per thousand written.
    let (input_price, output_price) = (10.0, 1000.0);
    let backend = Backend::start(&[
        ("MODEL_PRICES", "input=10,output=1000"),
        ("QUOTA_COST_PER_DAY", "0.05"),
    ])
    .await;
    let functions = Counting::new(&backend).await;
    let priced = |input: &Value, output: &Value| {
        (input.as_u64().unwrap() as f64 * input_price
            + output.as_u64().unwrap() as f64 * output_price)
            / 1e6
    };
    // A turn answered (its usage), and what the ledger holds after it, checked against the figure by hand.
    let answered = |path: &'static str, body: Value| {
        let functions = &functions;
        async move {
            let reply = functions.send(path, &body, true).await;
            assert_eq!(reply.status, 200, "{path}: {}", reply.body);
            reply.json()["usage"].clone()
        }
    };
    let spent_is = |by_hand: f64, when: &'static str| {
        let store = &backend.store;
        async move {
            let day = harness::usage_now(store).await.day;
            println!(
                "{when}: spent ${:?} (priced by hand: ${by_hand}), cap ${CAP}",
                day.spent.cost_usd
            );
            assert!(
                (day.spent.cost_usd.unwrap() - by_hand).abs() < 1e-9,
                "{day:?}"
            );
            day
        }
    };

    // The first turn, Anthropic's dialect: thirty words, about $0.03, under the cap.
    let usage = answered(
        "/v1/messages",
        json!({"model": harness::ECHO_MODEL, "max_tokens": 100,
            "messages": [{"role": "user", "content": "[[deltas:30]] tell me"}]}),
    )
    .await;
    let first_cost = priced(&usage["input_tokens"], &usage["output_tokens"]);
    spent_is(first_cost, "after one turn").await;
    assert!(
        first_cost < CAP,
        "the first turn leaves the user under the cap"
    );
    // The second, OpenAI's dialect, is let in (under the cap) and takes the user past it.
    let usage = answered(
        "/v1/chat/completions",
        json!({"model": harness::ECHO_MODEL,
            "messages": [{"role": "user", "content": "[[deltas:30]] more"}]}),
    )
    .await;
    let spent = first_cost + priced(&usage["prompt_tokens"], &usage["completion_tokens"]);
    let day = spent_is(spent, "after two turns").await;
    assert!(spent >= CAP, "at the cap: ${spent}");
    assert_eq!((day.turns, day.reserved.tokens), (2, 0));
    assert_eq!(h_requests(&backend), 2);

    let until_midnight = seconds_to_midnight();
    let chat = ask("hello");
    let mut routes: Vec<_> = every_dialect()
        .into_iter()
        .map(|(path, body)| (path, body, true))
        .collect();
    routes.extend([("/chat", chat.clone(), false), ("/chat/stream", chat, true)]);
    assert_eq!(routes.len(), 8);
    for (path, body, streamed) in routes {
        let refused = functions.send(path, &body, streamed).await;
        println!(
            "{path} (stream: {}): {} retry-after {:?} {}",
            body["stream"] == true,
            refused.status,
            refused.headers.get("retry-after"),
            refused.body
        );
        assert_refused_until(
            path,
            &refused,
            until_midnight,
            "You have used your $0.05 of model use for today. The quota resets at midnight UTC.",
        );
    }
    assert_eq!(
        h_requests(&backend),
        2,
        "no refused request reached the model"
    );
    let day = spent_is(spent, "after the refusals").await;
    assert_eq!((day.turns, day.reserved.tokens), (2, 0), "nothing held");

    let report = functions.usage().await;
    println!(
        "GET /usage: today {} limits {}",
        report["today"], report["limits"]
    );
    let cap = report["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "cost_per_day")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(cap["limit"], json!(CAP));
    assert!(
        (cap["used"].as_f64().unwrap() - spent).abs() < 1e-9,
        "{cap}"
    );
    assert_eq!(report["today"]["cost_limit_usd"], json!(CAP));
    assert!((report["today"]["cost_usd"].as_f64().unwrap() - spent).abs() < 1e-9);
}

/// Cache reads and writes are charged at the model's cache prices, not as input: Anthropic's Messages API with
/// `cache_control` on a 300-word system prompt, twice, to Claude Sonnet 4.5 (whose list prices per million tokens
/// are $3 input, $15 output, $0.30 a cache read, $3.75 a cache write). The first call writes the prompt to the
/// cache, the second reads it (the local Bedrock server counts a word a token, as it reports cache use for
/// `cachePoint` blocks as Bedrock does); the ledger and `GET /usage` hold exactly the figure priced by hand.
#[tokio::test]
async fn cache_reads_and_writes_are_charged_at_the_cache_prices_not_as_input() {
    const SONNET: &str = "global.anthropic.claude-sonnet-4-5-20250929-v1:0";
    // Sonnet 4.5's list prices, dollars per million tokens.
    let (input, output, cache_read, cache_write) = (3.0, 15.0, 0.30, 3.75);
    let backend = Backend::start(&[
        ("MODEL_ID", SONNET),
        ("ALLOWED_MODELS", SONNET),
        ("MAX_OUTPUT_TOKENS", "8192"),
        // Any limit of cost turns the counting on.
        ("QUOTA_COST_PER_DAY", "10"),
    ])
    .await;
    let functions = Counting::new(&backend).await;
    let system: Vec<String> = (1..=300).map(|i| format!("rule{i}")).collect();
    let message = json!({"model": SONNET, "max_tokens": 100,
        "system": [{"type": "text", "text": system.join(" "), "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "[[deltas:20]] hello"}]});
    let mut usages = Vec::new();
    for _ in 0..2 {
        let reply = functions.send("/v1/messages", &message, true).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        println!("usage: {}", reply.json()["usage"]);
        usages.push(reply.json()["usage"].clone());
    }
    let sent = harness::last_model_request(&backend.bedrock);
    assert_eq!(
        sent["system"][1],
        json!({"cachePoint": {"type": "default"}}),
        "{sent}"
    );
    let tokens = |usage: &Value, field: &str| usage[field].as_u64().unwrap();
    // The first writes the 300 words to the cache; the second reads them.
    assert_eq!(
        (
            tokens(&usages[0], "cache_creation_input_tokens"),
            tokens(&usages[0], "cache_read_input_tokens")
        ),
        (300, 0)
    );
    assert_eq!(
        (
            tokens(&usages[1], "cache_creation_input_tokens"),
            tokens(&usages[1], "cache_read_input_tokens")
        ),
        (0, 300)
    );
    let (fresh, written) = (
        usages
            .iter()
            .map(|u| tokens(u, "input_tokens"))
            .sum::<u64>(),
        usages
            .iter()
            .map(|u| tokens(u, "output_tokens"))
            .sum::<u64>(),
    );
    assert!(fresh > 0 && written >= 40, "{usages:?}");
    let by_hand =
        (fresh as f64 * input + written as f64 * output + 300.0 * cache_read + 300.0 * cache_write)
            / 1e6;
    let as_input = ((fresh + 600) as f64 * input + written as f64 * output) / 1e6;
    let day = harness::usage_now(&backend.store).await.day;
    println!(
        "ledger: ${:?} and {:?}; priced by hand ${by_hand} (cache as input: ${as_input})",
        day.spent.cost_usd, day.spent.tokens
    );
    let cost = day.spent.cost_usd.unwrap();
    assert!((cost - by_hand).abs() < 1e-9, "${cost}, by hand ${by_hand}");
    assert!((cost - as_input).abs() > 1e-4, "cache not priced as input");
    assert_eq!(
        (
            day.spent.tokens.cache_read_input_tokens,
            day.spent.tokens.cache_write_input_tokens
        ),
        (300, 300)
    );
    let usage = functions.usage().await;
    let today = &usage["today"];
    println!("GET /usage today: {today}");
    assert!(
        (today["cost_usd"].as_f64().unwrap() - by_hand).abs() < 1e-9,
        "{today}"
    );
    assert_eq!(
        (
            today["cache_read_input_tokens"].clone(),
            today["cache_write_input_tokens"].clone()
        ),
        (json!(300), json!(300))
    );
    let cap = usage["limits"][0].clone();
    assert_eq!(cap["name"], "cost_per_day", "{cap}");
    assert!(
        (cap["used"].as_f64().unwrap() - by_hand).abs() < 1e-9,
        "{cap}"
    );
}
