//! Limits that hold against a user who tries, through the real SDK clients, the local Bedrock server and moto:
//! admission is one conditional write (fifty requests at once under a rate of ten admit ten; twenty turns at once
//! under a quota that holds five reservations admit five), every model call is counted whatever becomes of its
//! turn (a buffered answer whose model stream fails after some tokens), a process killed mid-answer leaves its
//! reservation counted, and a multi-agent round ends with what it has before the invocation's deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chat_aws::{BedrockModel, DynamoStore};
use chat_core::UsageSnapshot;
use chat_stream::App;
use chat_testing::harness::{self, Backend, Streamed, Wired};
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
/// it has, the last saying why, and is stored and counted.
#[tokio::test]
async fn a_multi_agent_round_ends_with_what_it_has_before_the_deadline() {
    let agents = r#"[
        {"name": "Analyst", "instructions": "[[delay-ms:700]] Analyse."},
        {"name": "Engineer", "instructions": "[[delay-ms:700]] Build."},
        {"name": "Owner", "instructions": "[[delay-ms:700]] Review."}
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
    // Lambda's context, as the runtime gives it: this invocation must end 4 s from now (the round then ends by 3 s).
    let mut context = lambda_http::Context::default();
    let ends = std::time::SystemTime::now() + Duration::from_secs(4);
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
        "a round of up to 6 agent messages, 0.7 s a word, 4 s before the invocation's deadline: {} messages in {took:?}",
        events.len()
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!((1..6).contains(&events.len()), "ended early: {events:?}");
    let last = events.last().unwrap();
    assert_eq!(
        last["Metadata"]["Thoughts"][0]["title"], "Round ended",
        "{last}"
    );
    for event in &events {
        assert!(event.get("error").is_none(), "{event}");
    }
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
/// through and refuses the next on every model route of both functions, buffered and streaming, the OpenAI ones
/// too, with 429 and `Retry-After` until midnight UTC; `GET /usage` lists the limit, used.
#[tokio::test]
async fn a_limit_that_is_one_setting_refuses_every_route_and_shows_in_usage() {
    use chat_app::{Buffered, ChatApp, HistoryApp};
    use chat_testing::harness::Reply;
    let backend = Backend::start(&[("QUOTA_REQUESTS_PER_DAY", "1")]).await;
    let ledger = backend.ledger();
    let sdk = backend.bedrock.sdk_config().await;
    let streaming = backend
        .app(|m, s, a, c| {
            let embedder = chat_aws::BedrockEmbedder::new(&sdk, c.model_timeout);
            App::new(m, s, a, c)
                .with_usage(Some(ledger.clone()))
                .with_embedder(Some(Arc::new(embedder)))
        })
        .await;
    let buffered = backend
        .app(|m, s, a, c| {
            ChatApp::<_, _, Buffered>::new(m, s, a, c).with_usage(Some(ledger.clone()))
        })
        .await;
    let history = HistoryApp::new(backend.store.clone(), harness::auth(), &backend.config)
        .with_usage(Some(ledger.clone()));
    let chat = ask("hello");
    let completion =
        json!({"model": harness::ECHO_MODEL, "messages": [{"role": "user", "content": "hello"}]});
    let embedding = json!({"input": "hello", "model": "amazon.titan-embed-text-v2:0"});
    let first = Reply::buffered(
        buffered
            .handle(harness::json_request("POST", "/chat", Some(&chat)))
            .await,
    );
    assert_eq!(first.status, 200, "{}", first.body);
    let midnight = chat_core::Periods::at(time::OffsetDateTime::now_utc());
    let until_midnight = midnight.seconds_until(midnight.day_ends);
    let routes: [(&str, &Value, bool); 7] = [
        ("/chat", &chat, false),
        ("/chat-ui/chat", &chat, false),
        ("/multi-agent-chat/batch", &chat, false),
        ("/chat/stream", &chat, true),
        ("/multi-agent-chat/stream", &chat, true),
        ("/v1/chat/completions", &completion, true),
        ("/v1/embeddings", &embedding, true),
    ];
    for (path, body, streamed) in routes {
        let request = harness::json_request("POST", path, Some(body));
        let refused = if streamed {
            Reply::collected(streaming.handle(request).await).await
        } else {
            Reply::buffered(buffered.handle(request).await)
        };
        println!("{path}: {} {}", refused.status, refused.body);
        assert_eq!(refused.status, 429, "{path}: {}", refused.body);
        let retry = refused.retry_after();
        assert!(
            retry <= until_midnight && retry + 60 >= until_midnight,
            "{path}: Retry-After {retry}, {until_midnight} s to midnight UTC"
        );
        assert!(
            refused.body.contains("your 1 request for today"),
            "{path}: {}",
            refused.body
        );
    }
    assert_eq!(h_requests(&backend), 1, "only the first reached the model");
    let usage = Reply::buffered(
        history
            .handle(harness::json_request("GET", "/usage", None))
            .await,
    );
    assert_eq!(usage.status, 200, "{}", usage.body);
    let limits = usage.json()["limits"].clone();
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

/// The calls the local Bedrock server answered.
fn h_requests(backend: &Backend) -> usize {
    backend.bedrock.requests().len()
}
