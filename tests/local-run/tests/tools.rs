//! The model acts, end to end against a local run of its own (port 9060): the local knowledge base searched as the
//! model's `search_documents` tool (`RETRIEVAL=both`), a local MCP server (started here, `tests/local-mcp`: `add`,
//! `echo`, `sleep`, read-only) and an MCP server that is down, `MAX_TOOL_ROUNDS=2`, `TOOL_TIMEOUT_MS=1000`, and the
//! default `MAX_TOOL_CALLS_PER_ROUND` (8). The local Bedrock
//! server asks for tools in Bedrock's own wire formats when a question holds `[[tool:NAME {json}]]`, and answers
//! "NAME returned …" once it reads their results.

mod support;

use std::sync::OnceLock;

use serde_json::{Value, json};
use support::LocalRun;

const ADD_AND_SEARCH: &str = r#"[[tool:search_documents {"query":"parental leave"}]] [[tool:add {"a":2,"b":3}]] How long is parental leave, and what is 2 + 3?"#;

fn run() -> &'static LocalRun {
    static RUN: OnceLock<LocalRun> = OnceLock::new();
    static MCP: OnceLock<std::net::SocketAddr> = OnceLock::new();
    RUN.get_or_init(|| {
        // The local MCP server, on a runtime of its own that outlives each test's.
        let addr = *MCP.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Runtime::new().unwrap();
                runtime.block_on(async move {
                    let (addr, server) = local_mcp::start("127.0.0.1:0".parse().unwrap())
                        .await
                        .unwrap();
                    tx.send(addr).unwrap();
                    let _ = server.await;
                });
            });
            rx.recv().unwrap()
        });
        // The local run searches its local knowledge base, so MCP_REQUIRE_ALLOW is on: the tools are named.
        let servers = json!([
            {"name": "local", "url": local_mcp::url(addr), "allow": ["add", "echo", "sleep"]},
            // Nothing listens on port 9: a server that is down.
            {"name": "down", "url": "http://127.0.0.1:9/mcp"}
        ])
        .to_string();
        LocalRun::start_grounded(
            "tools",
            9060,
            &[
                ("RETRIEVAL", "both"),
                ("MAX_TOOL_ROUNDS", "2"),
                ("TOOL_TIMEOUT_MS", "1000"),
                ("MCP_SERVERS", &servers),
            ],
        )
    })
}

async fn post(path: &str, body: Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", run().base()))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the local run answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The 200 answer to `body` at `path`: its text, and its JSON.
async fn answered(path: &str, body: Value) -> (String, Value) {
    let (status, text) = post(path, body).await;
    assert_eq!(status, 200, "{text}");
    let json = serde_json::from_str(&text).unwrap();
    (text, json)
}

fn ask(question: &str) -> Value {
    json!({"messages": [{"role": "user", "content": question}]})
}

fn titles(thoughts: &Value) -> Vec<String> {
    thoughts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["title"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn the_model_searches_and_adds_then_answers_with_the_sum_and_citations() {
    let (status, body) = post("/chat", ask(ADD_AND_SEARCH)).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let content = answer["message"]["content"].as_str().unwrap();
    assert!(content.contains("add returned 5"), "{content}");
    assert!(content.contains("search_documents returned"), "{content}");
    let context = &answer["context"];
    let citations = context["data_points"]["citations"].to_string();
    assert!(citations.contains("Parental_Leave"), "{citations}");
    let thoughts = titles(&context["thoughts"]);
    for title in [
        "Tool call: search_documents",
        "Tool result: search_documents",
        "Tool call: add",
        "Tool result: add",
    ] {
        assert!(thoughts.contains(&title.to_string()), "{thoughts:?}");
    }
    // The server that is down is said, and the turn answered all the same.
    let unavailable = context["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Tools unavailable")
        .expect("a thought says which server is down");
    assert!(
        unavailable["description"]
            .as_str()
            .unwrap()
            .contains("down"),
        "{unavailable}"
    );

    // Continuing the chat replays the tool use to the model (the local Bedrock server refuses tool blocks that do
    // not pair up, as Bedrock does): it answers.
    let id = answer["sessionState"].as_str().expect("the chat's id");
    let (status, body) = post(
        "/chat",
        json!({"messages": [
            {"role": "user", "content": ADD_AND_SEARCH},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "Thanks. And 2 + 4?"}
        ], "sessionState": id}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, messages) = get(&format!("/chat-history/{id}/messages")).await;
    assert_eq!(status, 200, "{messages}");
    let messages: Value = serde_json::from_str(&messages).unwrap();
    assert_eq!(messages.as_array().unwrap().len(), 4, "{messages}");
}

async fn get(path: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", run().base()))
        .send()
        .await
        .expect("the local run answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn streamed_tool_thoughts_arrive_as_lines_before_the_answers_text() {
    // The model searches for something the search before it did not find: the help desk.
    let question = r#"[[tool:search_documents {"query":"IT help desk tickets"}]] [[tool:add {"a":2,"b":3}]] How long is parental leave, and what is 2 + 3?"#;
    let (status, body) = post("/chat/stream", ask(question)).await;
    assert_eq!(status, 200, "{body}");
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    // The answer's text: from the line where the model starts quoting the results (before it, the model only
    // said which tools it calls).
    let mut said = String::new();
    let answer_starts = lines
        .iter()
        .position(|l| {
            said.push_str(l["delta"]["content"].as_str().unwrap_or_default());
            said.contains("returned")
        })
        .expect("the answer's text");
    let tool_lines: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            titles(&l["context"]["thoughts"])
                .iter()
                .any(|t| t.starts_with("Tool call") || t.starts_with("Tool result"))
        })
        .map(|(i, _)| i)
        .collect();
    // One line per call and per result, each on its own line, all before the answer's text.
    assert_eq!(tool_lines.len(), 4, "{body}");
    assert!(tool_lines.iter().all(|i| *i < answer_starts), "{body}");
    assert!(tool_lines[0] > 0, "the first line is the answer's start");
    let text: String = lines
        .iter()
        .filter_map(|l| l["delta"]["content"].as_str())
        .collect();
    assert!(text.contains("add returned 5"), "{text}");
    // The first line has what the search before the model found; the search's result line adds what the model's
    // search found.
    assert!(
        !lines[0]["context"]["data_points"]
            .to_string()
            .contains("IT_Help_Desk"),
        "{body}"
    );
    let found = lines
        .iter()
        .find(|l| titles(&l["context"]["thoughts"]) == ["Tool result: search_documents"])
        .expect("the search's result line");
    let points = found["context"]["data_points"].to_string();
    assert!(points.contains("IT_Help_Desk"), "{found}");
    assert!(points.contains("Parental_Leave"), "{found}");
}

#[tokio::test]
async fn a_round_asking_for_twenty_calls_runs_eight() {
    let directives: String = (0..20)
        .map(|i| format!(r#"[[tool:echo {{"message":"m{i}"}}]] "#))
        .collect();
    let (status, body) = post("/chat", ask(&format!("{directives}Say each back."))).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    // The model quotes each result in a paragraph of its own: the first eight ran, the other twelve did not.
    let content = answer["message"]["content"].as_str().unwrap();
    let paragraphs: Vec<&str> = content.split("\n\n").collect();
    for i in 0..8 {
        let said = format!("echo returned m{i}");
        assert!(paragraphs.contains(&said.as_str()), "{content}");
    }
    let not_run =
        "echo failed: not run: at most 8 tool calls run in one round; ask for fewer at once";
    assert_eq!(
        paragraphs.iter().filter(|p| **p == not_run).count(),
        12,
        "{content}"
    );
    let thoughts = &answer["context"]["thoughts"];
    let titles = titles(thoughts);
    assert_eq!(
        titles.iter().filter(|t| *t == "Tool call: echo").count(),
        20
    );
    assert_eq!(
        titles.iter().filter(|t| *t == "Tool result: echo").count(),
        8
    );
    let cap = thoughts
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Tool calls")
        .expect("a thought says calls were not run");
    assert_eq!(cap["props"]["calls_not_run"], 12, "{cap}");
}

#[tokio::test]
async fn an_agent_of_a_multi_agent_round_calls_a_tool() {
    let (body, all) = answered(
        "/multi-agent-chat/batch",
        ask(r#"[[tool:add {"a":20,"b":22}]] What is 20 + 22?"#),
    )
    .await;
    let called = all
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["Metadata"]["ToolCalls"].as_array())
        .flatten()
        .find(|c| c["Name"] == "add")
        .unwrap_or_else(|| panic!("an agent called add: {body}"));
    assert_eq!(called["Result"], "42");
    assert_eq!(called["Status"], "success");
    assert!(body.contains("add returned 42"), "{body}");
}

#[tokio::test]
async fn a_tool_past_its_time_ends_in_an_answer() {
    let (_, answer) = answered("/chat", ask(r#"[[tool:sleep {"ms":5000}]] Wait."#)).await;
    let content = answer["message"]["content"].as_str().unwrap();
    assert!(content.contains("sleep failed"), "{content}");
    assert!(content.contains("within 1000 ms"), "{content}");
}

#[tokio::test]
async fn a_tool_loop_that_never_ends_is_cut_at_max_tool_rounds_and_answers() {
    let (body, answer) = answered(
        "/chat",
        ask(r#"[[tool-loop:echo {"message":"again"}]] Loop."#),
    )
    .await;
    let thoughts = titles(&answer["context"]["thoughts"]);
    let calls = thoughts.iter().filter(|t| *t == "Tool call: echo").count();
    // Two rounds run, the third round's call is not run.
    assert_eq!(calls, 3, "{thoughts:?}");
    assert!(
        thoughts.contains(&"Tool rounds".to_string()),
        "{thoughts:?}"
    );
    assert!(
        !answer["message"]["content"].as_str().unwrap().is_empty(),
        "{body}"
    );
}

#[tokio::test]
async fn search_documents_never_finds_what_the_caller_may_not_read() {
    // The local user (AUTH_MODE=none) is neither Alice nor in a group her review names.
    let (status, body) = post(
        "/chat",
        ask(
            r#"[[tool:search_documents {"query":"salary review of Alice Martin base salary","top":20}]] What is Alice Martin's base salary?"#,
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Tool result: search_documents"), "{body}");
    // Neither the review's name nor its own words, anywhere: data points, thoughts, the tool's result, the answer.
    for words in ["Salary_Review_Alice", "97,520", "band P4"] {
        assert!(!body.contains(words), "{words}: {body}");
    }
    let (status, body) = post(
        "/chat/stream",
        ask(r#"[[tool:search_documents {"query":"Alice Martin salary review"}]] Alice's salary?"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for words in ["Salary_Review_Alice", "97,520", "band P4"] {
        assert!(!body.contains(words), "{words}: {body}");
    }
}
