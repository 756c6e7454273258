//! The turn driver with tools, against the fakes of its ports: the rounds a turn makes when the model asks for
//! tools, what the model reads back, the thoughts, what is stored and replayed, the bounds, `search_documents`
//! under the caller's access, and multi-agent rounds calling tools. No network: it runs in milliseconds.

use std::sync::Arc;
use std::time::Duration;

use chat_core::{
    AgentGroup, Caller, ChatService, ChatSettings, MetadataFilter, RetrievalSettings, Role,
    SearchWhen, SessionStore, StreamingTurn, Tool, ToolBounds, ToolFuture, ToolOutput, ToolSpec,
    ToolStatus, TurnEvent,
};
use chat_testing::{
    FakeRetriever, FixedTools, InMemoryStore, Script, ScriptedModel, ScriptedStream, ask,
};
use serde_json::{Value, json};

type Service = ChatService<ScriptedModel, InMemoryStore>;

fn settings(when: SearchWhen) -> ChatSettings {
    ChatSettings {
        retrieval: RetrievalSettings {
            query_rewrite: false,
            when,
            ..RetrievalSettings::default()
        },
        ..chat_testing::settings()
    }
}

/// `add` ({a, b} → the sum), `fail` (always an error) and `sleep` ({ms} → waits).
struct Calculator {
    spec: ToolSpec,
}

impl Calculator {
    fn tool(name: &str) -> Arc<dyn Tool> {
        Arc::new(Self {
            spec: ToolSpec {
                strict: false,
                name: name.into(),
                description: format!("the {name} tool"),
                input_schema: json!({"type": "object"}),
            },
        })
    }
}

impl Tool for Calculator {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, _caller: &'a Caller, input: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.spec.name.as_str() {
                "add" => Ok(ToolOutput {
                    text: (input["a"].as_f64().unwrap_or(0.0) + input["b"].as_f64().unwrap_or(0.0))
                        .to_string(),
                    passages: Vec::new(),
                }),
                "sleep" => {
                    tokio::time::sleep(Duration::from_millis(input["ms"].as_u64().unwrap_or(0)))
                        .await;
                    Ok(ToolOutput {
                        text: "slept".into(),
                        passages: Vec::new(),
                    })
                }
                _ => Err("it broke".into()),
            }
        })
    }
}

/// A source offering fixed tools, and one server said to be down.
fn source() -> FixedTools {
    FixedTools {
        tools: vec![
            Calculator::tool("add"),
            Calculator::tool("fail"),
            Calculator::tool("sleep"),
        ],
        unavailable: vec!["MCP server down is unavailable (connection refused)".into()],
    }
}

fn bounds() -> ToolBounds {
    ToolBounds {
        max_rounds: 2,
        max_calls_per_round: 8,
        call_timeout: Duration::from_millis(200),
        max_result_bytes: 1_000,
    }
}

fn service(
    scripts: impl IntoIterator<Item = Script>,
    when: SearchWhen,
) -> (Service, ScriptedModel, InMemoryStore, FakeRetriever) {
    let model = ScriptedModel::with(scripts);
    let store = InMemoryStore::new();
    let retriever = FakeRetriever::new();
    let service = ChatService::new(model.clone(), store.clone(), settings(when))
        .with_retriever(Some(Arc::new(retriever.clone())))
        .with_tools(vec![Arc::new(source())], bounds());
    (service, model, store, retriever)
}

/// [`service`] with the tools offered and documents searched before the model is called.
fn with_tools(
    scripts: impl IntoIterator<Item = Script>,
) -> (Service, ScriptedModel, InMemoryStore, FakeRetriever) {
    service(scripts, SearchWhen::Before)
}

/// The model's call of `add` with 2 and 3.
fn add_2_3() -> Script {
    Script::calls([("add", json!({"a": 2, "b": 3}))])
}

/// `caller`'s answer to `text`, in a new chat.
async fn answered(service: &Service, caller: &Caller, text: &str) -> chat_core::Answer {
    service.answer(caller, &ask(text, None)).await.unwrap()
}

/// Alice's streamed turn asking `text`, in a new chat.
async fn streamed(service: &Service, text: &str) -> StreamingTurn<ScriptedStream> {
    let caller = Caller::owner("alice");
    service.stream(&caller, &ask(text, None)).await.unwrap()
}

fn titles(thoughts: &[chat_core::Thought]) -> Vec<String> {
    thoughts.iter().map(|t| t.title.clone()).collect()
}

#[tokio::test]
async fn the_model_calls_tools_together_reads_their_results_and_answers() {
    let (service, model, store, _) = with_tools([
        Script::calls([
            ("add", json!({"a": 2, "b": 3})),
            ("fail", json!({})),
            ("nope", json!({})),
        ]),
        Script::text("add returned 5"),
    ]);
    let caller = Caller::owner("alice");
    let answer = answered(&service, &caller, "what is 2 + 3?").await;
    assert_eq!(answer.content, "add returned 5");
    // Two model calls; the second reads the calls and their results, in the order asked.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let offered: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["add", "fail", "sleep"]);
    let second = &requests[1].messages;
    let asked = &second[second.len() - 2];
    let answered = &second[second.len() - 1];
    assert_eq!(asked.role, Role::Assistant);
    assert_eq!(asked.tool_uses.len(), 3);
    assert_eq!(answered.role, Role::User);
    let results: Vec<(&str, ToolStatus)> = answered
        .tool_results
        .iter()
        .map(|r| (r.text.as_str(), r.status))
        .collect();
    assert_eq!(results[0], ("5", ToolStatus::Success));
    assert_eq!(results[1], ("it broke", ToolStatus::Error));
    assert_eq!(results[2].1, ToolStatus::Error);
    assert!(
        results[2].0.contains("no tool named \"nope\""),
        "{results:?}"
    );
    // The thoughts say what was called and what came back, and which server was down.
    let thoughts = titles(&answer.thoughts());
    let expected = [
        "Tools unavailable",
        "Tool call: add",
        "Tool result: add",
        "Tool result: fail",
    ];
    let missing: Vec<&str> = expected
        .into_iter()
        .filter(|title| !thoughts.iter().any(|t| t == title))
        .collect();
    assert!(missing.is_empty(), "{missing:?} not in {thoughts:?}");
    assert_eq!(answer.spent.tool_calls, 3);
    assert_eq!(answer.spent.model_calls, 2);
    // The answer is stored with its tool use.
    let chat = answer.session_state.unwrap();
    let stored = store.load("alice", chat.as_str().unwrap()).await.unwrap().1;
    assert_eq!(stored[1].tools.len(), 3);
    assert_eq!(stored[1].tools[0].output, "5");
}

#[tokio::test]
async fn a_continued_chat_replays_tool_use_to_the_model() {
    let (service, model, _, _) = with_tools([
        add_2_3(),
        Script::text("add returned 5"),
        Script::text("10"),
    ]);
    let caller = Caller::owner("alice");
    let first = answered(&service, &caller, "what is 2 + 3?").await;
    let chat = first.session_state.clone().unwrap();
    service
        .answer(&caller, &ask("and twice that?", chat.as_str()))
        .await
        .unwrap();
    let third = model.last_request().unwrap();
    // question, tool use, tool result, answer, new question
    let roles: Vec<Role> = third.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(third.messages[1].tool_uses[0].name, "add");
    assert_eq!(third.messages[2].tool_results[0].text, "5");
    assert_eq!(third.messages[3].texts, ["add returned 5"]);
}

#[tokio::test]
async fn tool_use_of_tools_no_longer_offered_is_replayed_as_text() {
    let (service, _, store, _) = with_tools([add_2_3(), Script::text("add returned 5")]);
    let caller = Caller::owner("alice");
    let first = answered(&service, &caller, "what is 2 + 3?").await;
    let chat = first.session_state.unwrap();
    // The same chat, continued where no tools are configured.
    let model = ScriptedModel::with([Script::text("ok")]);
    let bare = ChatService::new(model.clone(), store.clone(), settings(SearchWhen::Before));
    bare.answer(&caller, &ask("again?", chat.as_str()))
        .await
        .unwrap();
    let request = model.last_request().unwrap();
    assert!(request.tools.is_empty());
    assert!(request.messages.iter().all(|m| m.tool_uses.is_empty()));
    let said = request.messages[1].texts.join(" ");
    assert!(said.contains("[tool add called with"), "{said}");
    assert!(said.contains("add returned 5"), "{said}");
}

#[tokio::test]
async fn a_streamed_turn_shows_each_call_and_result_as_it_happens_before_the_text() {
    let (service, _, _, _) = with_tools([add_2_3(), Script::pieces(["add ", "returned 5"])]);
    let mut turn = streamed(&service, "what is 2 + 3?").await;
    let mut order = Vec::new();
    while let Some(event) = turn.next().await.unwrap() {
        order.push(match event {
            TurnEvent::Thought(t) => t.title,
            TurnEvent::Text(t) => format!("text {t}"),
            TurnEvent::End(_) => "end".into(),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        order,
        [
            "Tool call: add",
            "Tool result: add",
            "text add ",
            "text returned 5",
            "end"
        ]
    );
    assert_eq!(turn.tool_exchanges().len(), 1);
    service
        .save_streamed(&Caller::owner("alice"), turn)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_tool_loop_that_never_ends_is_bounded_and_still_answers() {
    let forever = || Script::calls([("add", json!({"a": 1, "b": 1}))]);
    let (service, model, _, _) =
        with_tools([forever(), forever(), forever(), Script::text("done")]);
    let answer = answered(&service, &Caller::owner("alice"), "loop").await;
    assert_eq!(answer.content, "done");
    let requests = model.requests();
    // Two rounds of calls run; the third round's calls are answered "not run", and the last request offers no
    // tools and carries the exchanges as text.
    assert_eq!(requests.len(), 4);
    let last = &requests[3];
    assert!(last.tools.is_empty());
    assert!(
        last.messages
            .iter()
            .all(|m| m.tool_uses.is_empty() && m.tool_results.is_empty())
    );
    let text: String = last.messages.iter().flat_map(|m| m.texts.clone()).collect();
    assert!(text.contains("at most 2 rounds"), "{text}");
    assert!(titles(&answer.thoughts()).contains(&"Tool rounds".to_string()));
}

#[tokio::test]
async fn a_round_asking_for_twenty_calls_runs_eight() {
    let calls: Vec<(&str, Value)> = (0..20)
        .map(|i| ("add", json!({"a": i, "b": 1000})))
        .collect();
    let (service, model, store, _) = with_tools([Script::calls(calls), Script::text("done")]);
    let caller = Caller::owner("alice");
    let answer = answered(&service, &caller, "add them all").await;
    assert_eq!(answer.content, "done");
    // Eight calls ran: the first eight asked, each with its sum.
    assert_eq!(answer.spent.tool_calls, 8);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    // The next round still offers the tools: the cap bounds a round, not the turn.
    assert!(!second.tools.is_empty());
    let answered = &second.messages[second.messages.len() - 1];
    assert_eq!(answered.tool_results.len(), 20);
    for (i, result) in answered.tool_results.iter().enumerate() {
        if i < 8 {
            assert_eq!(result.status, ToolStatus::Success, "{result:?}");
            assert_eq!(result.text, (1000 + i).to_string());
        } else {
            assert_eq!(result.status, ToolStatus::Error, "{result:?}");
            assert_eq!(
                result.text,
                "not run: at most 8 tool calls run in one round; ask for fewer at once"
            );
        }
    }
    // One thought says so; only the calls that ran have a result thought.
    let thoughts = answer.thoughts();
    let cap = thoughts
        .iter()
        .find(|t| t.title == "Tool calls")
        .expect("a thought about the cap");
    assert_eq!(cap.props.as_ref().unwrap()["calls_not_run"], 12);
    assert_eq!(
        titles(&thoughts)
            .iter()
            .filter(|t| *t == "Tool result: add")
            .count(),
        8
    );
    // All twenty are stored with the answer, the twelve not run as errors.
    let chat = answer.session_state.unwrap();
    let stored = store.load("alice", chat.as_str().unwrap()).await.unwrap().1;
    assert_eq!(stored[1].tools.len(), 20);
    assert_eq!(
        stored[1]
            .tools
            .iter()
            .filter(|t| t.status == ToolStatus::Error)
            .count(),
        12
    );
}

#[tokio::test]
async fn a_tool_past_its_time_is_an_error_the_model_reads() {
    let (service, model, _, _) = with_tools([
        Script::calls([("sleep", json!({"ms": 5_000}))]),
        Script::text("it timed out"),
    ]);
    let answer = answered(&service, &Caller::owner("alice"), "sleep").await;
    assert_eq!(answer.content, "it timed out");
    let requests = model.requests();
    let result = &requests[1].messages.last().unwrap().tool_results[0];
    assert_eq!(result.status, ToolStatus::Error);
    assert!(result.text.contains("within 200 ms"), "{result:?}");
}

#[tokio::test]
async fn search_documents_searches_under_the_callers_access_and_grounds_the_answer() {
    let (service, model, _, retriever) = service(
        [
            Script::calls([(
                "search_documents",
                json!({"query": "parental leave", "top": 2}),
            )]),
            Script::text("See [Parental_Leave.md]."),
        ],
        SearchWhen::Tools,
    );
    retriever.push(vec![FakeRetriever::passage(
        "Twelve weeks of parental leave.",
        "s3://docs/Parental_Leave.md",
        0.9,
    )]);
    let caller = Caller {
        owner: "bob".into(),
        oid: Some("bob-oid".into()),
        groups: vec![],
    };
    let answer = answered(&service, &caller, "how long is parental leave?").await;
    // No search before the model in `tools` mode: one search, the model's.
    let searches = retriever.requests();
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0].query, "parental leave");
    assert_eq!(searches[0].top, 2);
    // The caller's access filter, which the tool's input cannot widen.
    let filter = format!("{:?}", searches[0].filter);
    assert!(filter.contains("bob-oid"), "{filter}");
    assert!(matches!(searches[0].filter, Some(MetadataFilter::OrAll(_))));
    let requests = model.requests();
    let result = &requests[1].messages.last().unwrap().tool_results[0];
    assert!(
        result.text.starts_with("[Parental_Leave.md]: Twelve weeks"),
        "{result:?}"
    );
    let points = answer.data_points.unwrap();
    assert_eq!(points.citations, ["Parental_Leave.md"]);
    assert_eq!(answer.citations, ["Parental_Leave.md"]);
    assert!(
        model.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "search_documents")
    );
}

#[tokio::test]
async fn search_documents_top_is_bounded_by_max_top() {
    let model = ScriptedModel::with([
        Script::calls([
            ("search_documents", json!({"query": "leave", "top": 20})),
            ("search_documents", json!({"query": "leave", "top": 5})),
        ]),
        Script::text("done"),
    ]);
    let retriever = FakeRetriever::new();
    retriever.push(vec![FakeRetriever::passage(
        "Twelve weeks.",
        "s3://docs/a.md",
        0.9,
    )]);
    let mut settings = settings(SearchWhen::Tools);
    settings.limits.max_top = 5;
    let service = ChatService::new(model.clone(), InMemoryStore::new(), settings)
        .with_retriever(Some(Arc::new(retriever.clone())))
        .with_tools(vec![Arc::new(source())], bounds());
    answered(&service, &Caller::owner("alice"), "leave?").await;
    // The schema the model is offered says so.
    let requests = model.requests();
    let search = requests[0]
        .tools
        .iter()
        .find(|t| t.name == "search_documents")
        .unwrap();
    assert_eq!(search.input_schema["properties"]["top"]["maximum"], 5);
    // 20 is refused (the model reads why); 5 is searched.
    let results = &requests[1].messages.last().unwrap().tool_results;
    assert_eq!(results[0].status, ToolStatus::Error);
    assert_eq!(
        results[0].text,
        "\"top\" must be a whole number from 1 to 5"
    );
    assert_eq!(results[1].status, ToolStatus::Success);
    let searches = retriever.requests();
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0].top, 5);
}

#[tokio::test]
async fn before_mode_does_not_offer_search_documents() {
    let (service, model, _, _) = service([Script::text("hi")], SearchWhen::Before);
    answered(&service, &Caller::owner("alice"), "hello").await;
    let request = model.last_request().unwrap();
    assert!(request.tools.iter().all(|t| t.name != "search_documents"));
}

#[tokio::test]
async fn an_agent_of_a_multi_agent_round_can_call_a_tool() {
    let (service, model, store, _) =
        with_tools([add_2_3(), Script::text("add returned 5. APPROVED")]);
    let group = AgentGroup {
        max_turns: 1,
        ..AgentGroup::default_group()
    };
    let caller = Caller::owner("alice");
    let round = service
        .whole_round(&caller, &group, &ask("what is 2 + 3?", None))
        .await
        .unwrap();
    let message = &round.messages()[0];
    assert_eq!(message.text, "add returned 5. APPROVED");
    assert_eq!(message.tools.len(), 1);
    assert_eq!(message.model_calls, 2);
    assert_eq!(round.spent().tool_calls, 1);
    assert!(!model.requests()[0].tools.is_empty());
    let stored = store
        .load("alice", &round.session().chat_id)
        .await
        .unwrap()
        .1;
    assert_eq!(stored.last().unwrap().tools[0].output, "5");
    assert_eq!(
        model.requests()[1].messages.last().unwrap().tool_results[0].text,
        "5"
    );
}

#[tokio::test]
async fn tools_are_offered_while_the_model_reasons_and_its_signed_reasoning_goes_back_with_its_calls()
 {
    let mut s = settings(SearchWhen::Before);
    s.model_id = "anthropic.claude-sonnet-4-5-20250929-v1:0".into();
    s.model = chat_core::ModelOptions::for_model(&s.model_id, 8192);
    let model = ScriptedModel::with([
        add_2_3().reasoning(["I should ", "add."]).signed("sig-1"),
        Script::text("5").reasoning(["Done."]).signed("sig-2"),
    ]);
    let service = ChatService::new(model.clone(), InMemoryStore::new(), s)
        .with_tools(vec![Arc::new(source())], bounds());
    let mut input = ask("what is 2 + 3?", None);
    input.overrides.reasoning_effort = Some(chat_core::ReasoningEffort::Medium);
    let answer = service
        .answer(&Caller::owner("alice"), &input)
        .await
        .unwrap();
    assert_eq!(answer.content, "5");
    let requests = model.requests();
    assert!(requests[0].reasoning.is_some());
    assert_eq!(requests[0].tools.len(), 3, "{:?}", requests[0].tools);
    // The second round gives the first round's reasoning back, signed, before its call.
    let asked = &requests[1].messages[requests[1].messages.len() - 2];
    assert_eq!(asked.tool_uses[0].name, "add");
    assert_eq!(
        asked.reasoning,
        [chat_core::ReasoningBlock::signed("I should add.", "sig-1")]
    );
    assert!(!titles(&answer.thoughts()).contains(&"Tools not offered".to_string()));
    assert_eq!(answer.reasoning.as_deref(), Some("I should add.Done."));
}

#[tokio::test]
async fn a_round_that_fails_after_a_tool_round_is_counted_with_the_rounds_before_it() {
    let (service, _, _, _) = with_tools([
        add_2_3().usage(100, 10),
        Script::pieces(["add ", "returned ", "5"])
            .fail_after(2, chat_core::ModelError::Failed("the stream broke".into())),
    ]);
    let mut turn = streamed(&service, "what is 2 + 3?").await;
    let mut shown = String::new();
    loop {
        match turn.next().await {
            Ok(Some(TurnEvent::Text(text))) => shown.push_str(&text),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the turn ended without its failure"),
            Err(_) => break,
        }
    }
    // (The round before said nothing, so no paragraph break goes before this round's text.)
    assert_eq!(shown, "add returned ");
    let spent = turn.spent_so_far();
    // The first round as reported, and the failed round estimated: two model calls, one tool call.
    assert_eq!(spent.model_calls, 2);
    assert_eq!(spent.tool_calls, 1);
    assert!(spent.totals.tokens.output_tokens > 10, "{spent:?}");
    assert!(spent.totals.tokens.input_tokens > 100, "{spent:?}");
}
