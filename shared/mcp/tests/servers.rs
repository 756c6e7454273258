//! `McpServers` against the local MCP server (tests/local-mcp), each test with servers of its own on free ports.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chat_core::{Caller, Tool, ToolListing, ToolSource};
use chat_mcp::McpServers;
use serde_json::{Value, json};

const LIST_TIMEOUT: Duration = Duration::from_secs(10);

fn any_port() -> SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

/// A port nothing listens on (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    local_mcp::start(any_port()).await.unwrap()
}

fn servers(json: Value) -> McpServers {
    McpServers::from_json(&json.to_string(), LIST_TIMEOUT, chat_mcp::http_client()).unwrap()
}

/// Servers whose failures are listed again on the next turn (no retry interval).
fn servers_retried_at_once(json: Value) -> McpServers {
    servers(json).with_retry_after(Duration::ZERO)
}

/// A server that accepts connections and never answers, and how many connections it has accepted.
async fn silent() -> (SocketAddr, Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    (addr, accepted, task)
}

fn names(listing: &ToolListing) -> Vec<String> {
    let mut names: Vec<String> = listing
        .tools
        .iter()
        .map(|t| t.spec().name.clone())
        .collect();
    names.sort();
    names
}

/// A source of the one server named "silent" at `addr`, given up after `timeout`.
fn silent_source(addr: SocketAddr, timeout: Duration) -> McpServers {
    let config = json!([{"name": "silent", "url": format!("http://{addr}/mcp")}]);
    McpServers::from_json(&config.to_string(), timeout, chat_mcp::http_client()).unwrap()
}

/// What the listed tool `name` answers `input` (it must answer).
async fn called(listing: &ToolListing, name: &str, input: Value) -> String {
    call(&tool(listing, name), input).await.unwrap()
}

/// The one server a listing says is unavailable, when it lists no tool.
fn only_unavailable(listing: &ToolListing) -> &str {
    assert!(listing.tools.is_empty());
    assert_eq!(listing.unavailable.len(), 1, "{:?}", listing.unavailable);
    &listing.unavailable[0]
}

/// The local server with `options`.
async fn start_with(options: local_mcp::Options) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    local_mcp::start_with(any_port(), options).await.unwrap()
}

fn tool(listing: &ToolListing, name: &str) -> Arc<dyn Tool> {
    listing
        .tools
        .iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name} in {:?}", names(listing)))
        .clone()
}

async fn call(tool: &Arc<dyn Tool>, input: Value) -> Result<String, String> {
    tool.call(&Caller::owner("u"), &input)
        .await
        .map(|output| output.text)
}

#[tokio::test]
async fn a_servers_tools_are_listed_and_called() {
    let (addr, _server) = start().await;
    let source = servers(json!([{"name": "local", "url": local_mcp::url(addr)}]));
    let listing = source.list(&Caller::owner("u")).await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    assert_eq!(names(&listing), ["add", "echo", "sleep"]);

    let add = tool(&listing, "add");
    assert!(!add.spec().description.is_empty());
    // The schema is the server's: an object with the numbers a and b.
    let schema = &add.spec().input_schema;
    assert_eq!(schema["type"], "object");
    assert!(schema["properties"]["a"].is_object(), "{schema}");
    assert!(schema["properties"]["b"].is_object(), "{schema}");

    assert_eq!(call(&add, json!({"a": 2, "b": 3})).await.unwrap(), "5");
    assert_eq!(call(&add, json!({"a": 0.5, "b": 2})).await.unwrap(), "2.5");
    assert_eq!(
        called(&listing, "echo", json!({"message": "hello, tools"})).await,
        "hello, tools"
    );
    let started = Instant::now();
    assert_eq!(
        called(&listing, "sleep", json!({"ms": 200})).await,
        "slept 200 ms"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn an_error_result_or_a_refused_call_is_an_error_the_model_reads() {
    let (addr, _server) = start().await;
    let source = servers(json!([{"name": "local", "url": local_mcp::url(addr)}]));
    let listing = source.list(&Caller::owner("u")).await;
    let add = tool(&listing, "add");
    // `isError: true`: the sum is not finite.
    let error = call(&add, json!({"a": 1e308, "b": 1e308}))
        .await
        .unwrap_err();
    assert!(error.contains("not a finite number"), "{error}");
    // Input that does not fit the schema: rmcp's server answers that as an error result too.
    let error = call(&add, json!({"a": "two", "b": 3})).await.unwrap_err();
    assert!(error.contains("\"two\""), "{error}");
    // Not an object at all.
    let error = call(&add, json!([2, 3])).await.unwrap_err();
    assert!(error.contains("must be a JSON object"), "{error}");
    // The server still answers after errors.
    assert_eq!(call(&add, json!({"a": 2, "b": 3})).await.unwrap(), "5");
}

#[tokio::test]
async fn a_server_that_is_down_is_said_and_listed_again_once_it_is_up() {
    let port = free_port();
    let source = servers_retried_at_once(json!([
        {"name": "later", "url": format!("http://127.0.0.1:{port}/mcp")}
    ]));
    let listing = source.list(&Caller::owner("u")).await;
    assert!(listing.tools.is_empty());
    assert_eq!(
        listing.unavailable,
        [
            "MCP server later is unavailable (connection refused): its tools are left out of this turn"
        ]
    );

    let (_, _server) = local_mcp::start(([127, 0, 0, 1], port).into())
        .await
        .unwrap();
    let listing = source.list(&Caller::owner("u")).await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    assert_eq!(names(&listing), ["add", "echo", "sleep"]);
    assert_eq!(called(&listing, "add", json!({"a": 2, "b": 3})).await, "5");
}

#[tokio::test]
async fn one_server_down_leaves_the_others_tools() {
    let (addr, _server) = start().await;
    let port = free_port();
    let source = servers(json!([
        {"name": "down", "url": format!("http://127.0.0.1:{port}/mcp")},
        {"name": "up", "url": local_mcp::url(addr)}
    ]));
    let listing = source.list(&Caller::owner("u")).await;
    // Only one server offers them, so no prefix.
    assert_eq!(names(&listing), ["add", "echo", "sleep"]);
    assert_eq!(listing.unavailable.len(), 1);
    assert!(listing.unavailable[0].starts_with("MCP server down is unavailable"));
}

#[tokio::test]
async fn tools_are_listed_once_and_again_after_a_call_loses_the_server() {
    let port = free_port();
    let at: SocketAddr = ([127, 0, 0, 1], port).into();
    let (_, server) = local_mcp::start(at).await.unwrap();
    let source = servers_retried_at_once(json!([{"name": "local", "url": local_mcp::url(at)}]));
    let first = source.list(&Caller::owner("u")).await;
    assert_eq!(names(&first), ["add", "echo", "sleep"]);

    server.abort();
    let _ = server.await;
    // Listed once: the next turn is offered what was listed, without asking the server.
    let second = source.list(&Caller::owner("u")).await;
    assert!(second.unavailable.is_empty(), "{:?}", second.unavailable);
    assert_eq!(names(&second), ["add", "echo", "sleep"]);

    // A call finds the server gone: an error for the model, and the server is listed again next turn.
    let error = call(&tool(&second, "add"), json!({"a": 2, "b": 3}))
        .await
        .unwrap_err();
    assert!(
        error.contains("the MCP server local could not be reached"),
        "{error}"
    );
    let third = source.list(&Caller::owner("u")).await;
    let down = only_unavailable(&third);
    assert!(down.contains("connection refused"), "{down}");

    let (_, _server) = local_mcp::start(at).await.unwrap();
    let fourth = source.list(&Caller::owner("u")).await;
    assert!(fourth.unavailable.is_empty(), "{:?}", fourth.unavailable);
    assert_eq!(
        called(&fourth, "echo", json!({"message": "back"})).await,
        "back"
    );
}

#[tokio::test]
async fn names_two_servers_share_are_prefixed_with_the_servers_names() {
    let (a, _a) = start().await;
    let (b, _b) = start().await;
    let source = servers(json!([
        {"name": "alpha", "url": local_mcp::url(a)},
        {"name": "beta-2", "url": local_mcp::url(b), "allow": ["add", "echo"]}
    ]));
    let listing = source.list(&Caller::owner("u")).await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    // `sleep` is alpha's alone and keeps its name.
    assert_eq!(
        names(&listing),
        [
            "alpha_add",
            "alpha_echo",
            "beta-2_add",
            "beta-2_echo",
            "sleep"
        ]
    );
    assert_eq!(
        called(&listing, "beta-2_add", json!({"a": 2, "b": 3})).await,
        "5"
    );
    assert_eq!(
        call(
            &tool(&listing, "alpha_echo"),
            json!({"message": "from alpha"})
        )
        .await
        .unwrap(),
        "from alpha"
    );
}

#[tokio::test]
async fn allow_keeps_only_the_tools_it_names() {
    let (addr, _server) = start().await;
    let source = servers(json!([
        {"name": "local", "url": local_mcp::url(addr), "allow": ["echo", "not-offered"]}
    ]));
    let listing = source.list(&Caller::owner("u")).await;
    assert_eq!(names(&listing), ["echo"]);
    let none = servers(json!([{"name": "local", "url": local_mcp::url(addr), "allow": []}]));
    let listing = none.list(&Caller::owner("u")).await;
    assert!(listing.tools.is_empty());
    assert!(listing.unavailable.is_empty());
}

#[tokio::test]
async fn configured_headers_are_sent_and_never_shown() {
    const TOKEN: &str = "tok-5ecr3t-value";
    let (addr, _server) = start_with(local_mcp::Options {
        bearer_token: Some(TOKEN.into()),
        ..Default::default()
    })
    .await;
    let with = servers(json!([{
        "name": "guarded",
        "url": local_mcp::url(addr),
        "headers": {"Authorization": format!("Bearer {TOKEN}")}
    }]));
    let listing = with.list(&Caller::owner("u")).await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    // Every request carries it: the calls after the handshake too.
    assert_eq!(called(&listing, "add", json!({"a": 2, "b": 3})).await, "5");
    let debug = format!("{with:?}");
    assert!(!debug.contains(TOKEN), "{debug}");
    assert!(debug.contains("authorization"), "{debug}");

    // Without it (or with another token) the server refuses, and the line says so without any header value.
    for headers in [json!({}), json!({"Authorization": "Bearer wrong-value"})] {
        let without =
            servers(json!([{"name": "guarded", "url": local_mcp::url(addr), "headers": headers}]));
        let listing = without.list(&Caller::owner("u")).await;
        assert!(listing.tools.is_empty());
        assert_eq!(listing.unavailable.len(), 1);
        let line = &listing.unavailable[0];
        assert!(
            line.starts_with("MCP server guarded is unavailable ("),
            "{line}"
        );
        assert!(line.contains("401"), "{line}");
        assert!(
            !line.contains("wrong-value") && !line.contains(TOKEN),
            "{line}"
        );
        assert!(!format!("{without:?}").contains("wrong-value"));
    }
}

#[tokio::test]
async fn a_server_that_does_not_answer_is_given_up_within_the_listing_timeout() {
    // Accepts connections and never answers.
    let (addr, _, _silent) = silent().await;
    let source = silent_source(addr, Duration::from_millis(300));
    let started = Instant::now();
    let listing = source.list(&Caller::owner("u")).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(listing.tools.is_empty());
    assert_eq!(
        listing.unavailable,
        [
            "MCP server silent is unavailable (no answer within 300 ms): its tools are left out of this turn"
        ]
    );
}

#[tokio::test]
async fn servers_are_listed_together() {
    // Two silent servers, each given up after the timeout: together they take about one timeout, not two.
    let mut urls = Vec::new();
    let mut holders = Vec::new();
    for _ in 0..2 {
        let (addr, _, holder) = silent().await;
        urls.push(format!("http://{addr}/mcp"));
        holders.push(holder);
    }
    let source = McpServers::from_json(
        &json!([{"name": "s1", "url": urls[0]}, {"name": "s2", "url": urls[1]}]).to_string(),
        Duration::from_millis(800),
        chat_mcp::http_client(),
    )
    .unwrap();
    let started = Instant::now();
    let listing = source.list(&Caller::owner("u")).await;
    let took = started.elapsed();
    assert_eq!(listing.unavailable.len(), 2);
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

#[tokio::test]
async fn turns_that_arrive_together_share_one_attempt() {
    let (addr, _, _silent) = silent().await;
    let source = silent_source(addr, Duration::from_millis(800)).with_retry_after(Duration::ZERO);
    let started = Instant::now();
    let u = Caller::owner("u");
    let (first, second, third) = tokio::join!(source.list(&u), source.list(&u), source.list(&u));
    let took = started.elapsed();
    for listing in [&first, &second, &third] {
        assert_eq!(listing.unavailable.len(), 1, "{:?}", listing.unavailable);
        assert!(listing.unavailable[0].contains("no answer within 800 ms"));
    }
    // One wait for all three, not one after another.
    assert!(took < Duration::from_millis(1500), "{took:?}");
    // A turn after that tries again (no retry interval here).
    let started = Instant::now();
    assert_eq!(source.list(&Caller::owner("u")).await.unavailable.len(), 1);
    assert!(started.elapsed() >= Duration::from_millis(800));
}

#[test]
fn no_servers_configured_is_an_empty_source() {
    let source = McpServers::from_json("", LIST_TIMEOUT, chat_mcp::http_client()).unwrap();
    assert!(source.is_empty());
    let source = McpServers::from_json("[]", LIST_TIMEOUT, chat_mcp::http_client()).unwrap();
    assert!(source.is_empty());
    let error = McpServers::from_json(r#"{"name":"a"}"#, LIST_TIMEOUT, chat_mcp::http_client())
        .unwrap_err();
    assert!(error.contains("list"), "{error}");
}

#[tokio::test]
async fn an_empty_source_lists_nothing() {
    let source = McpServers::from_json("[]", LIST_TIMEOUT, chat_mcp::http_client()).unwrap();
    let listing = source.list(&Caller::owner("u")).await;
    assert!(listing.tools.is_empty() && listing.unavailable.is_empty());
}

#[tokio::test]
async fn a_failed_server_is_not_listed_again_within_the_retry_interval() {
    let (addr, accepted, _silent) = silent().await;
    let source = silent_source(addr, Duration::from_millis(300))
        .with_retry_after(Duration::from_millis(1500));
    let line = "MCP server silent is unavailable (no answer within 300 ms): its tools are left out of this turn";
    let first = source.list(&Caller::owner("u")).await;
    assert!(first.tools.is_empty());
    assert_eq!(first.unavailable, [line]);
    let tried = accepted.load(Ordering::SeqCst);
    assert!(tried >= 1, "{tried}");

    // Within the interval: the same line, and the server is not asked (no connection, no wait for one).
    let started = Instant::now();
    let second = source.list(&Caller::owner("u")).await;
    let took = started.elapsed();
    assert!(second.tools.is_empty());
    assert_eq!(second.unavailable, [line]);
    assert!(took < Duration::from_millis(300), "{took:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), tried);

    // After it: listed again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let third = source.list(&Caller::owner("u")).await;
    assert_eq!(third.unavailable, [line]);
    assert!(accepted.load(Ordering::SeqCst) > tried);
}

#[tokio::test]
async fn a_server_lost_under_a_call_is_left_out_within_the_retry_interval() {
    let port = free_port();
    let at: SocketAddr = ([127, 0, 0, 1], port).into();
    let (_, server) = local_mcp::start(at).await.unwrap();
    let source = servers(json!([{"name": "local", "url": local_mcp::url(at)}]))
        .with_retry_after(Duration::from_millis(1000));
    let first = source.list(&Caller::owner("u")).await;
    server.abort();
    let _ = server.await;
    call(&tool(&first, "add"), json!({"a": 2, "b": 3}))
        .await
        .unwrap_err();
    // Up again at once, but the lost connection is the answer until the interval has passed.
    let (_, _server) = local_mcp::start(at).await.unwrap();
    let second = source.list(&Caller::owner("u")).await;
    let down = only_unavailable(&second);
    assert!(
        down.starts_with("MCP server local is unavailable ("),
        "{down}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let third = source.list(&Caller::owner("u")).await;
    assert!(third.unavailable.is_empty(), "{:?}", third.unavailable);
    assert_eq!(names(&third), ["add", "echo", "sleep"]);
}

#[tokio::test]
async fn the_listing_timeout_is_capped() {
    let (addr, _accepted, _silent) = silent().await;
    let source = silent_source(addr, Duration::from_secs(60));
    assert!(
        format!("{source:?}").contains(&format!("list_timeout: {:?}", chat_mcp::LIST_TIMEOUT_CAP)),
        "{source:?}"
    );
    let listing = source.list(&Caller::owner("u")).await;
    assert_eq!(
        listing.unavailable,
        [format!(
            "MCP server silent is unavailable (no answer within {} ms): its tools are left out of this turn",
            chat_mcp::LIST_TIMEOUT_CAP.as_millis()
        )]
    );
}

#[tokio::test]
async fn a_urls_user_info_and_query_are_never_shown() {
    let port = free_port();
    let source = servers(json!([{
        "name": "keyed",
        "url": format!("http://me:pa55w0rd@127.0.0.1:{port}/mcp?api_key=qu3ry-k3y")
    }]));
    let debug = format!("{source:?}");
    assert!(
        debug.contains(&format!("http://127.0.0.1:{port}/mcp")),
        "{debug}"
    );
    for secret in ["pa55w0rd", "me:pa55", "@", "qu3ry-k3y", "api_key"] {
        assert!(!debug.contains(secret), "{debug}");
    }
    let listing = source.list(&Caller::owner("u")).await;
    assert_eq!(listing.unavailable.len(), 1, "{:?}", listing.unavailable);
    let line = &listing.unavailable[0];
    assert!(
        line.starts_with("MCP server keyed is unavailable ("),
        "{line}"
    );
    for secret in ["pa55w0rd", "qu3ry-k3y"] {
        assert!(!line.contains(secret), "{line}");
    }
    let error = McpServers::from_json(
        &json!([{"name": "keyed", "url": "ftp://me:pa55w0rd@h/mcp?api_key=qu3ry-k3y"}]).to_string(),
        LIST_TIMEOUT,
        chat_mcp::http_client(),
    )
    .unwrap_err();
    assert!(
        !error.contains("pa55w0rd") && !error.contains("qu3ry-k3y"),
        "{error}"
    );
}

/// The local server, recording what each request carried.
async fn start_recorded() -> (SocketAddr, local_mcp::Recorder, tokio::task::JoinHandle<()>) {
    let record = local_mcp::Recorder::default();
    let (addr, server) = start_with(local_mcp::Options {
        record: Some(record.clone()),
        ..Default::default()
    })
    .await;
    (addr, record, server)
}

async fn note(listing: &ToolListing, who: &str, text: &str) -> String {
    tool(listing, "note")
        .call(&Caller::owner(who), &json!({ "text": text }))
        .await
        .map(|output| output.text)
        .unwrap()
}

/// The sessions of the requests seen, each with the users its requests carried, in the order first seen.
fn sessions(seen: &[local_mcp::Seen]) -> Vec<(String, Vec<Option<String>>)> {
    let mut sessions: Vec<(String, Vec<Option<String>>)> = Vec::new();
    for request in seen.iter().filter(|r| r.method == "POST") {
        let Some(session) = &request.session else {
            continue;
        };
        match sessions.iter_mut().find(|(s, _)| s == session) {
            Some((_, users)) => {
                if !users.contains(&request.user) {
                    users.push(request.user.clone());
                }
            }
            None => sessions.push((session.clone(), vec![request.user.clone()])),
        }
    }
    sessions
}

/// Waits up to two seconds for the server to have seen a DELETE of `count` sessions.
async fn deleted(record: &local_mcp::Recorder, count: usize) -> usize {
    let started = Instant::now();
    loop {
        let deleted = record
            .seen()
            .iter()
            .filter(|r| r.method == "DELETE")
            .count();
        if deleted >= count || started.elapsed() > Duration::from_secs(2) {
            return deleted;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_tool_not_marked_read_only_is_offered_only_when_allow_names_it() {
    let (addr, _server) = start().await;
    // `note` changes the server's state and is not marked read-only: without `allow` it is not offered.
    let listing = servers(json!([{"name": "local", "url": local_mcp::url(addr)}]))
        .list(&Caller::owner("u"))
        .await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    assert_eq!(names(&listing), ["add", "echo", "sleep"]);
    // Named in `allow`, it is the operator's choice; `allow` then offers only what it names.
    let listing = servers(json!([
        {"name": "local", "url": local_mcp::url(addr), "allow": ["note", "add"]}
    ]))
    .list(&Caller::owner("u"))
    .await;
    assert_eq!(names(&listing), ["add", "note"]);
    assert_eq!(note(&listing, "u", "kept").await, "kept");
}

#[tokio::test]
async fn with_allow_required_only_allow_offers_a_tool_read_only_or_not() {
    let (addr, _server) = start().await;
    // Without `allow`, not even the tools the server marks read-only are offered.
    let listing = servers(json!([{"name": "local", "url": local_mcp::url(addr)}]))
        .with_allow_required(true)
        .list(&Caller::owner("u"))
        .await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    assert!(names(&listing).is_empty(), "{:?}", names(&listing));
    // `allow` offers what it names, as without the setting.
    let listing = servers(json!([
        {"name": "local", "url": local_mcp::url(addr), "allow": ["echo"]}
    ]))
    .with_allow_required(true)
    .list(&Caller::owner("u"))
    .await;
    assert_eq!(names(&listing), ["echo"]);
    // Off, the read-only ones are offered.
    let listing = servers(json!([{"name": "local", "url": local_mcp::url(addr)}]))
        .with_allow_required(false)
        .list(&Caller::owner("u"))
        .await;
    assert_eq!(names(&listing), ["add", "echo", "sleep"]);
}

#[tokio::test]
async fn two_callers_get_two_sessions_and_never_each_others_state() {
    let (addr, record, _server) = start_recorded().await;
    let source = servers(json!([{
        "name": "local", "url": local_mcp::url(addr), "allow": ["note"], "forward_user": true
    }]));
    let alice = Caller::owner("jwt:https://issuer.example/:alice");
    let listing = source.list(&alice).await;
    assert_eq!(
        note(&listing, &alice.owner, "alice's secret").await,
        "alice's secret"
    );
    // Bob's turn on the same warm instance: the listing is reused, the session is his own.
    let listing = source.list(&Caller::owner("bob")).await;
    assert_eq!(note(&listing, "bob", "bob's note").await, "bob's note");
    assert_eq!(
        note(&listing, &alice.owner, "again").await,
        "alice's secret\nagain"
    );
    // Two sessions, each carrying its caller's owner id on every request.
    let users: Vec<Vec<Option<String>>> = sessions(&record.seen())
        .into_iter()
        .map(|(_, users)| users)
        .collect();
    assert_eq!(
        users,
        [
            vec![Some("jwt:https://issuer.example/:alice".to_string())],
            vec![Some("bob".to_string())]
        ]
    );
    // The handshake (before a session id) carries it too.
    assert!(
        record
            .seen()
            .iter()
            .filter(|r| r.method == "POST")
            .all(|r| r.user.is_some())
    );
}

#[tokio::test]
async fn without_forward_user_no_owner_id_is_sent() {
    let (addr, record, _server) = start_recorded().await;
    let source =
        servers(json!([{"name": "local", "url": local_mcp::url(addr), "allow": ["note"]}]));
    let listing = source.list(&Caller::owner("alice")).await;
    note(&listing, "alice", "a").await;
    note(&listing, "bob", "b").await;
    let seen = record.seen();
    assert!(seen.iter().all(|r| r.user.is_none()), "{seen:?}");
    assert_eq!(sessions(&seen).len(), 2);
}

#[tokio::test]
async fn sessions_are_bounded_in_number_and_closed_when_idle() {
    let (addr, record, _server) = start_recorded().await;
    let entry = json!([{"name": "local", "url": local_mcp::url(addr), "allow": ["note"]}]);
    // One session at most: bob's closes alice's, whose notes are then gone.
    let one = servers(entry.clone()).with_sessions(chat_mcp::Sessions {
        max: 1,
        idle: Duration::from_secs(60),
    });
    let listing = one.list(&Caller::owner("alice")).await;
    assert_eq!(note(&listing, "alice", "a1").await, "a1");
    assert_eq!(note(&listing, "bob", "b1").await, "b1");
    assert_eq!(deleted(&record, 1).await, 1);
    assert_eq!(note(&listing, "alice", "a2").await, "a2");
    assert_eq!(sessions(&record.seen()).len(), 3);
    drop(one);

    // Idle past its time, a session is closed, even when no turn comes; the caller's next call opens another.
    let (addr, record, _server) = start_recorded().await;
    let entry = json!([{"name": "local", "url": local_mcp::url(addr), "allow": ["note"]}]);
    let idle = servers(entry).with_sessions(chat_mcp::Sessions {
        max: 16,
        idle: Duration::from_millis(300),
    });
    let listing = idle.list(&Caller::owner("alice")).await;
    assert_eq!(note(&listing, "alice", "x").await, "x");
    assert_eq!(deleted(&record, 1).await, 1);
    assert_eq!(note(&listing, "alice", "y").await, "y");
    // Used within its time, it is kept.
    assert_eq!(note(&listing, "alice", "z").await, "y\nz");
}

#[tokio::test]
async fn a_long_answer_is_cut_while_it_is_read() {
    let (addr, _server) = local_mcp::flood::start(any_port()).await.unwrap();
    let source = servers(json!([{"name": "flood", "url": local_mcp::url(addr)}]))
        .with_max_result_bytes(4_000);
    let listing = source.list(&Caller::owner("u")).await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    let flood = tool(&listing, "flood");
    for sse in [false, true] {
        // Within the bound: the whole text, no note.
        let whole = call(&flood, json!({"bytes": 3_000, "sse": sse}))
            .await
            .unwrap();
        assert_eq!(whole, local_mcp::flood::text_of(3_000));
        // Past the bound and its margin: the start of the text and a note, within the bound.
        let text = call(&flood, json!({"bytes": 2_000_000, "sse": sse}))
            .await
            .unwrap();
        assert!(text.len() <= 4_000, "{}", text.len());
        let (shown, note) = text.split_once('\n').unwrap();
        assert!(shown.len() > 3_000, "{}", shown.len());
        assert!(local_mcp::flood::text_of(4_000).starts_with(shown));
        assert_eq!(
            note,
            format!(
                "[cut: the MCP server's answer was longer than {} bytes and was not read further; the first {} \
                 bytes of its text are shown]",
                4_000 + 64 * 1024,
                shown.len()
            )
        );
        // Past the bound, under its margin: read whole, cut to the bound as any result is (by the core).
        let text = call(&flood, json!({"bytes": 50_000, "sse": sse}))
            .await
            .unwrap();
        assert_eq!(text, local_mcp::flood::text_of(50_000));
    }
}
