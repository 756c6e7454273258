//! Stateless completions (OpenAI's Chat Completions) against the fakes: the client's tools end the answer with
//! their calls (streamed and whole), a continuation gives the model the calls and their results, the tool choice,
//! stop sequences and answer format reach the model or are refused by name, the model is one the operator allows,
//! the client's system blocks replace the system prompt, its sampling, length and thinking reach the model or are
//! refused by name, nothing goes to history while the usage is settled, and a reasoning model gets its signed
//! reasoning back across the client's round trip.

use std::sync::Arc;

use chat_core::{
    Caller, ChatError, ChatService, ChatSettings, Completion, ContentPart, FinishReason,
    InvalidRequest, MIN_THINKING_BUDGET, Message, ModelRequest, Periods, ReasoningBlock,
    ReasoningEffort, ResponseFormat, Role, Sampling, SearchWhen, SessionStore, StopReason,
    Thinking, Tool, ToolBounds, ToolChoice, ToolExchange, ToolFuture, ToolOutput, ToolSpec,
    ToolStatus, TurnEvent, TurnInput, UsageLedger,
};
use chat_testing::{
    FixedTools, InMemoryStore, InMemoryUsage, Script, ScriptedModel, StoreOp, input,
};
use serde_json::json;

type Service = ChatService<ScriptedModel, InMemoryStore>;

const CLAUDE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA: &str = "amazon.nova-lite-v1:0";

/// The tests' settings with Claude and Nova allowed beside the tests' model.
fn settings() -> ChatSettings {
    let mut s = chat_testing::settings();
    s.allowed_models = ChatSettings::allowed(&s.model_id, &[CLAUDE.into(), NOVA.into()]);
    s
}

/// A server tool, to show it is not offered unless the operator says so.
struct Clock {
    spec: ToolSpec,
}

impl Tool for Clock {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, _caller: &'a Caller, _input: &'a serde_json::Value) -> ToolFuture<'a> {
        Box::pin(async {
            Ok(ToolOutput {
                text: "noon".into(),
                passages: Vec::new(),
            })
        })
    }
}

/// A server offering `clock`.
fn server() -> FixedTools {
    FixedTools::new(vec![Arc::new(Clock {
        spec: ToolSpec {
            strict: false,
            name: "clock".into(),
            description: "the time".into(),
            input_schema: json!({"type": "object"}),
        },
    })])
}

/// A service on the fakes, with a server tool and counted usage.
fn service(
    settings: ChatSettings,
    scripts: impl IntoIterator<Item = Script>,
) -> (Service, ScriptedModel, InMemoryStore, InMemoryUsage) {
    let model = ScriptedModel::with(scripts);
    let store = InMemoryStore::new();
    let usage = InMemoryUsage::new();
    let service = ChatService::new(model.clone(), store.clone(), settings)
        .with_tools(vec![Arc::new(server())], ToolBounds::default())
        .with_usage(
            Some(Arc::new(usage.clone()) as Arc<dyn UsageLedger>),
            Default::default(),
        );
    (service, model, store, usage)
}

fn weather() -> ToolSpec {
    ToolSpec {
        strict: false,
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

/// A client's stateless turn: `messages`, stored nowhere.
fn stateless(messages: Vec<Message>) -> TurnInput {
    let mut turn = input(messages, None);
    turn.store_new_chat = false;
    turn
}

fn question(text: &str) -> TurnInput {
    stateless(vec![Message::new(Role::User, text)])
}

/// A completion offering the client's `get_weather`.
fn with_weather() -> Completion {
    Completion {
        tools: vec![weather()],
        ..Completion::default()
    }
}

fn alice() -> Caller {
    Caller::owner("alice")
}

/// The conversation after the model asked for `get_weather` in Paris (call `id`) and the client ran it.
fn continued(id: &str) -> TurnInput {
    stateless(vec![
        Message::new(Role::User, "Weather in Paris?"),
        Message {
            role: Role::Assistant,
            content: vec![ContentPart::Tool(ToolExchange {
                round: 0,
                id: id.into(),
                name: "get_weather".into(),
                input: json!({"city": "Paris"}),
                output: "sunny, 21 C".into(),
                status: ToolStatus::Success,
            })],
        },
    ])
}

/// The model asking for the weather in Paris and in Rome at once.
fn paris_and_rome() -> Script {
    Script::calls([
        ("get_weather", json!({"city": "Paris"})),
        ("get_weather", json!({"city": "Rome"})),
    ])
}

async fn day_tokens(usage: &InMemoryUsage, owner: &str) -> u64 {
    let now = Periods::at(time::OffsetDateTime::now_utc());
    usage
        .read(owner, &now)
        .await
        .unwrap()
        .day
        .spent
        .tokens
        .total_tokens
}

#[tokio::test]
async fn a_client_tool_call_ends_the_whole_answer_with_tool_calls() {
    let (service, model, _, _) = service(
        settings(),
        [Script::calls([("get_weather", json!({"city": "Paris"}))])],
    );
    let answer = service
        .complete(&alice(), &question("Weather in Paris?"), &with_weather())
        .await
        .unwrap();
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].name, "get_weather");
    assert_eq!(answer.tool_calls[0].input, json!({"city": "Paris"}));
    assert!(
        answer.tools.is_empty(),
        "the client runs it, not the server"
    );
    // One model call: the client's tool, and no server tool (OPENAI_SERVER_TOOLS is off).
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["get_weather"]);
}

#[tokio::test]
async fn a_client_tool_call_is_streamed_as_it_comes_then_the_end_says_tool_calls() {
    let (service, _, store, _) = service(settings(), [paris_and_rome()]);
    let mut turn = service
        .complete_stream(&alice(), &question("Paris and Rome?"), &with_weather())
        .await
        .unwrap();
    let mut calls = Vec::new();
    let end = loop {
        match turn.next().await.unwrap().unwrap() {
            TurnEvent::ToolCall(call) => calls.push(call.input["city"].clone()),
            TurnEvent::End(end) => break end,
            _ => {}
        }
    };
    assert_eq!(calls, [json!("Paris"), json!("Rome")]);
    assert_eq!(end.finish_reason, FinishReason::ToolCalls);
    service.save_streamed(&alice(), turn).await.unwrap();
    assert_eq!(store.chat_count(), 0, "nothing stored in history");
}

#[tokio::test]
async fn without_parallel_tool_calls_only_the_first_call_is_returned() {
    let (service, _, _, _) = service(settings(), [paris_and_rome()]);
    let completion = Completion {
        parallel_tool_calls: false,
        ..with_weather()
    };
    let answer = service
        .complete(&alice(), &question("Paris and Rome?"), &completion)
        .await
        .unwrap();
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].input, json!({"city": "Paris"}));
}

#[tokio::test]
async fn a_continuation_gives_the_model_the_calls_and_their_results_and_it_answers() {
    let (service, model, _, _) = service(settings(), [Script::text("Sunny in Paris.")]);
    let answer = service
        .complete(&alice(), &continued("call_1"), &with_weather())
        .await
        .unwrap();
    assert_eq!(answer.content, "Sunny in Paris.");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    let request = model.last_request().unwrap();
    let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
    assert_eq!(request.messages[1].tool_uses[0].id, "call_1");
    assert!(
        request.messages[1].texts.is_empty(),
        "{:?}",
        request.messages[1]
    );
    assert_eq!(request.messages[2].tool_results[0].text, "sunny, 21 C");
}

#[tokio::test]
async fn what_the_answer_said_before_its_calls_stays_before_them_when_the_client_continues() {
    let (service, model, _, _) = service(settings(), [Script::text("Sunny.")]);
    let mut turn = continued("call_1");
    turn.messages[1]
        .content
        .push(ContentPart::Text("Let me check.".into()));
    let request = sent(&service, &model, &turn, &with_weather()).await;
    assert_eq!(request.messages.len(), 3);
    assert_eq!(request.messages[1].texts, ["Let me check."]);
    assert_eq!(request.messages[1].tool_uses[0].id, "call_1");
    assert_eq!(request.messages[2].tool_results[0].id, "call_1");
}

#[tokio::test]
async fn tool_choice_none_offers_no_tools_and_required_or_a_function_is_sent() {
    let mut s = settings();
    s.openai_server_tools = true;
    let (service, model, _, _) = service(
        s,
        [
            Script::text("no tools"),
            Script::calls([("get_weather", json!({"city": "Paris"}))]),
            Script::calls([("get_weather", json!({"city": "Paris"}))]),
        ],
    );
    let none = Completion {
        tool_choice: ToolChoice::None,
        ..with_weather()
    };
    service
        .complete(&alice(), &question("hi"), &none)
        .await
        .unwrap();
    assert!(model.last_request().unwrap().tools.is_empty());
    let on_claude = |choice| Completion {
        model_id: Some(CLAUDE.into()),
        tool_choice: choice,
        ..with_weather()
    };
    let request = sent(
        &service,
        &model,
        &question("hi"),
        &on_claude(ToolChoice::Any),
    )
    .await;
    assert_eq!(request.tool_choice, ToolChoice::Any);
    // The server's tools too, when the operator turns them on.
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["clock", "get_weather"]);
    let named = ToolChoice::Tool("get_weather".into());
    service
        .complete(&alice(), &question("hi"), &on_claude(named.clone()))
        .await
        .unwrap();
    assert_eq!(model.last_request().unwrap().tool_choice, named);
}

/// Alice's `input` completed as `completion`, which must be refused as an invalid request: what it says.
async fn refusal(service: &Service, input: &TurnInput, completion: &Completion) -> InvalidRequest {
    match service.complete(&alice(), input, completion).await {
        Err(ChatError::Invalid(e)) => e,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_tool_choice_the_model_or_the_tools_cannot_meet_is_refused_naming_tool_choice() {
    let (service, model, _, usage) = service(settings(), []);
    let unknown = Completion {
        model_id: Some(CLAUDE.into()),
        tool_choice: ToolChoice::Tool("nope".into()),
        ..with_weather()
    };
    let e = refusal(&service, &question("hi"), &unknown).await;
    assert_eq!(e.path, "tool_choice");
    assert!(e.reason.contains("nope"), "{e}");
    // The tests' model is one whose profile takes no tool choice.
    let forced = Completion {
        tool_choice: ToolChoice::Any,
        ..with_weather()
    };
    let e = refusal(&service, &question("hi"), &forced).await;
    assert_eq!(e.path, "tool_choice");
    assert!(e.reason.contains("test.model-v1"), "{e}");
    // Reasoning the tests' model cannot do is refused naming the completion's own field.
    let mut reasoning = question("hi");
    reasoning.overrides.reasoning_effort = Some(ReasoningEffort::High);
    let e = refusal(&service, &reasoning, &Completion::default()).await;
    assert_eq!(e.path, "reasoning_effort");
    assert!(model.requests().is_empty());
    assert_eq!(day_tokens(&usage, "alice").await, 0);
}

#[tokio::test]
async fn stop_sequences_and_the_answer_format_reach_the_model_or_are_refused_by_name() {
    let (service, model, _, _) = service(
        settings(),
        [Script::text("{}").stop(StopReason::StopSequence)],
    );
    let schema = ResponseFormat::JsonSchema {
        name: "person".into(),
        description: None,
        schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        strict: true,
    };
    let completion = Completion {
        model_id: Some(CLAUDE.into()),
        stop_sequences: vec!["END".into()],
        response_format: schema.clone(),
        ..Completion::default()
    };
    let answer = service
        .complete(&alice(), &question("who?"), &completion)
        .await
        .unwrap();
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    let request = model.last_request().unwrap();
    assert_eq!(request.stop_sequences, ["END"]);
    assert_eq!(request.response_format, schema);
    let too_many = Completion {
        stop_sequences: vec!["a".into(), "b".into(), "c".into(), "d".into(), "e".into()],
        ..Completion::default()
    };
    let e = refusal(&service, &question("x"), &too_many).await;
    assert_eq!(e.path, "stop");
    // Nova holds no answer to a schema here.
    let on_nova = Completion {
        model_id: Some(NOVA.into()),
        response_format: ResponseFormat::JsonObject,
        ..Completion::default()
    };
    let e = refusal(&service, &question("x"), &on_nova).await;
    assert_eq!(e.path, "response_format");
    assert!(e.reason.contains(NOVA), "{e}");
}

#[tokio::test]
async fn a_model_the_operator_does_not_allow_is_not_found_and_an_allowed_one_answers_at_its_prices()
{
    let (service, model, _, usage) = service(settings(), [Script::text("hi").usage(1000, 1000)]);
    let other = Completion {
        model_id: Some("anthropic.claude-opus-4-1-20250805-v1:0".into()),
        ..Completion::default()
    };
    let err = service
        .complete(&alice(), &question("hi"), &other)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ChatError::ModelNotFound("anthropic.claude-opus-4-1-20250805-v1:0".into())
    );
    assert!(model.requests().is_empty());
    let claude = Completion {
        model_id: Some(CLAUDE.into()),
        ..Completion::default()
    };
    let answer = service
        .complete(&alice(), &question("hi"), &claude)
        .await
        .unwrap();
    assert_eq!(model.last_request().unwrap().model_id, CLAUDE);
    assert_eq!(answer.model, CLAUDE);
    // Sonnet's prices: $3 and $15 a million.
    assert_eq!(answer.cost_usd, Some(0.018));
    assert!(
        model.last_request().unwrap().prompt_caching,
        "Claude caches"
    );
    assert_eq!(day_tokens(&usage, "alice").await, 2000);
}

/// A completion whose client gives the instructions `system`, block by block.
fn instructed(system: &[&str]) -> Completion {
    Completion {
        system: system.iter().map(|block| block.to_string()).collect(),
        ..Completion::default()
    }
}

/// Alice's `input` completed as `completion`, answered: the request the model was sent.
async fn sent(
    service: &Service,
    model: &ScriptedModel,
    input: &TurnInput,
    completion: &Completion,
) -> ModelRequest {
    service.complete(&alice(), input, completion).await.unwrap();
    model.last_request().unwrap()
}

#[tokio::test]
async fn the_clients_instructions_follow_the_operators_prompt() {
    let (service, model, _, _) = service(settings(), [Script::text("a"), Script::text("b")]);
    let hi = question("hi");
    let completion = instructed(&["You are a pirate.", "Say arr."]);
    assert_eq!(
        sent(&service, &model, &hi, &completion).await.system,
        "Be brief.\n\nYou are a pirate.\n\nSay arr."
    );
    assert_eq!(
        sent(&service, &model, &hi, &Completion::default())
            .await
            .system,
        "Be brief."
    );
}

#[tokio::test]
async fn the_clients_instructions_replace_the_operators_prompt_where_prompt_template_is_allowed() {
    let mut s = settings();
    s.limits.allowed_overrides = chat_core::AllowedOverrides::all();
    let (service, model, _, _) = service(s, [Script::text("a")]);
    let completion = instructed(&["You are a pirate."]);
    assert_eq!(
        sent(&service, &model, &question("hi"), &completion)
            .await
            .system,
        "You are a pirate."
    );
}

#[tokio::test]
async fn the_clients_instructions_replace_the_default_prompt() {
    let mut s = settings();
    s.system_prompt = ChatSettings::DEFAULT_SYSTEM_PROMPT.into();
    let (service, model, _, _) = service(s, [Script::text("a"), Script::text("b")]);
    let hi = question("hi");
    let completion = instructed(&["You are Claude Code."]);
    assert_eq!(
        sent(&service, &model, &hi, &completion).await.system,
        "You are Claude Code."
    );
    assert_eq!(
        sent(&service, &model, &hi, &Completion::default())
            .await
            .system,
        ChatSettings::DEFAULT_SYSTEM_PROMPT
    );
}

#[tokio::test]
async fn nothing_is_stored_in_history_and_the_usage_is_settled() {
    let (service, _, store, usage) = service(settings(), [Script::text("hello").usage(40, 2)]);
    let answer = service
        .complete(&alice(), &question("hi"), &Completion::default())
        .await
        .unwrap();
    assert!(answer.session_state.is_none());
    assert_eq!(store.chat_count(), 0);
    assert!(
        !store
            .calls()
            .iter()
            .any(|op| matches!(op, StoreOp::Create | StoreOp::Append)),
        "{:?}",
        store.calls()
    );
    assert_eq!(day_tokens(&usage, "alice").await, 42);
    assert_eq!(usage.open_holds(), 0, "the reservation is released");
}

#[tokio::test]
async fn reasoning_is_given_back_across_the_clients_round_trip_and_its_loss_answers_without_it() {
    let (service, model, store, _) = service(
        settings(),
        [
            Script::calls([("get_weather", json!({"city": "Paris"}))])
                .reasoning(["Paris: ", "ask the tool."])
                .signed("sig-paris"),
            Script::text("Sunny."),
            Script::text("Sunny again."),
        ],
    );
    let mut asked = question("Weather in Paris?");
    asked.overrides.reasoning_effort = Some(ReasoningEffort::Low);
    let completion = Completion {
        model_id: Some(CLAUDE.into()),
        ..with_weather()
    };
    let answer = service
        .complete(&alice(), &asked, &completion)
        .await
        .unwrap();
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(answer.reasoning.as_deref(), Some("Paris: ask the tool."));
    assert!(model.last_request().unwrap().reasoning.is_some());
    let id = answer.tool_calls[0].id.clone();
    // The client runs the tool and continues: the model gets its reasoning back before its call.
    let mut next = continued(&id);
    next.overrides.reasoning_effort = Some(ReasoningEffort::Low);
    let request = sent(&service, &model, &next, &completion).await;
    assert!(request.reasoning.is_some());
    assert_eq!(
        request.messages[1].reasoning,
        [ReasoningBlock::signed("Paris: ask the tool.", "sig-paris")]
    );
    // Another owner has none of it; once it is gone, the model answers without reasoning rather than fail.
    assert_eq!(store.kept_reasoning("bob", &id).await.unwrap(), None);
    store.expire_reasoning("alice", &id);
    let answer = service
        .complete(&alice(), &next, &completion)
        .await
        .unwrap();
    assert_eq!(answer.content, "Sunny again.");
    let request = model.last_request().unwrap();
    assert!(request.reasoning.is_none());
    assert!(request.messages[1].reasoning.is_empty());
}

#[tokio::test]
async fn retrieval_stays_off_for_completions_unless_the_operator_turns_it_on() {
    let mut s = settings();
    s.retrieval.when = SearchWhen::Before;
    s.retrieval.query_rewrite = false;
    let retriever = chat_testing::FakeRetriever::new();
    let (service, model, _, _) = service(s.clone(), [Script::text("a")]);
    let service = service.with_retriever(Some(Arc::new(retriever.clone())));
    let policy = question("policy?");
    assert_eq!(
        sent(&service, &model, &policy, &Completion::default())
            .await
            .system,
        "Be brief."
    );
    let mut on = s;
    on.openai_retrieval = true;
    let (service, model, _, _) = self::service(on, [Script::text("b")]);
    let service = service.with_retriever(Some(Arc::new(retriever.clone())));
    assert!(
        sent(&service, &model, &policy, &Completion::default())
            .await
            .system
            .len()
            > "Be brief.".len(),
        "the grounding instructions join the prompt"
    );
}

#[tokio::test]
async fn the_clients_system_blocks_join_in_order_and_its_sampling_and_length_reach_the_model() {
    let (service, model, _, _) = service(settings(), [Script::text("a"), Script::text("b")]);
    let completion = Completion {
        model_id: Some(CLAUDE.into()),
        system: vec!["You are a pirate.".into(), "Answer in French.".into()],
        sampling: Sampling {
            temperature: Some(0.3),
            top_p: Some(0.8),
            top_k: Some(40),
        },
        max_output_tokens: Some(77),
        ..Completion::default()
    };
    let request = sent(&service, &model, &question("hi"), &completion).await;
    assert_eq!(
        request.system,
        "Be brief.\n\nYou are a pirate.\n\nAnswer in French."
    );
    assert_eq!(request.inference.temperature, Some(0.3));
    assert_eq!(request.inference.top_p, Some(0.8));
    assert_eq!(request.inference.top_k, Some(40));
    assert_eq!(request.inference.max_tokens, 77);
    // Claude takes no sampling settings while it thinks: `top_k` goes with temperature and top_p.
    let thinking = Completion {
        thinking: Some(Thinking::Effort(ReasoningEffort::Low)),
        ..completion
    };
    let request = sent(&service, &model, &question("hi"), &thinking).await;
    assert!(request.reasoning.is_some());
    assert_eq!(request.inference.temperature, None);
    assert_eq!(request.inference.top_k, None);
}

#[tokio::test]
async fn top_k_is_refused_for_a_model_that_takes_none() {
    let (service, model, _, _) = service(settings(), []);
    let on_nova = Completion {
        model_id: Some(NOVA.into()),
        sampling: Sampling {
            top_k: Some(40),
            ..Sampling::default()
        },
        ..Completion::default()
    };
    let e = refusal(&service, &question("x"), &on_nova).await;
    assert_eq!(e.path, "top_k");
    assert!(e.reason.contains(NOVA), "{e}");
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn a_thinking_budget_is_claudes_budget_and_thinking_off_turns_the_configured_reasoning_off() {
    let mut configured = settings();
    configured.model.reasoning_effort = Some(ReasoningEffort::High);
    let (service, model, _, _) = service(configured, [Script::text("a"), Script::text("b")]);
    let budget = Completion {
        model_id: Some(CLAUDE.into()),
        thinking: Some(Thinking::Budget(2000)),
        max_output_tokens: Some(100),
        ..Completion::default()
    };
    let reasoning = sent(&service, &model, &question("hi"), &budget)
        .await
        .reasoning
        .unwrap();
    assert_eq!(reasoning.budget_tokens, 2000);
    assert_eq!(reasoning.effort, ReasoningEffort::Medium);
    // Claude thinks within max_tokens: the answer's 100 and the budget.
    assert_eq!(model.last_request().unwrap().inference.max_tokens, 2100);
    let off = Completion {
        model_id: Some(CLAUDE.into()),
        thinking: Some(Thinking::Off),
        ..Completion::default()
    };
    service
        .complete(&alice(), &question("hi"), &off)
        .await
        .unwrap();
    assert_eq!(model.last_request().unwrap().reasoning, None);
    let too_small = Completion {
        thinking: Some(Thinking::Budget(MIN_THINKING_BUDGET - 1)),
        ..budget
    };
    let e = refusal(&service, &question("x"), &too_small).await;
    assert_eq!(e.path, "thinking.budget_tokens");
}

/// A completion fitted to its model: `top_p` left out beside `temperature` for a Claude that takes one of them,
/// `top_k` for a model that takes none, the answer's length held to the model's limit (less a thinking budget) and
/// the operator's ceiling; each change named, nothing named when nothing changed.
#[test]
fn a_completion_is_fitted_to_what_its_model_takes() {
    let sonnet = chat_core::ModelProfile::of(CLAUDE);
    let nova = chat_core::ModelProfile::of(NOVA);
    let asked = |max: u32| Completion {
        sampling: Sampling {
            temperature: Some(0.5),
            top_p: Some(0.9),
            top_k: Some(40),
        },
        max_output_tokens: Some(max),
        ..Completion::default()
    };
    let mut c = asked(50_000);
    assert_eq!(c.fit(&sonnet, None), ["top_p"]);
    assert_eq!(
        (c.sampling.temperature, c.sampling.top_p, c.sampling.top_k),
        (Some(0.5), None, Some(40))
    );
    assert_eq!(c.max_output_tokens, Some(50_000));
    let mut c = asked(100_000);
    assert_eq!(c.fit(&sonnet, None), ["top_p", "max_tokens=64000"]);
    let mut c = asked(50_000);
    assert_eq!(c.fit(&sonnet, Some(4096)), ["top_p", "max_tokens=4096"]);
    // Thinking at a high effort takes 16384 of Sonnet 4.5's 64000.
    let mut c = Completion {
        thinking: Some(Thinking::Effort(ReasoningEffort::High)),
        ..asked(64_000)
    };
    assert_eq!(c.fit(&sonnet, None), ["top_p", "max_tokens=47616"]);
    let mut c = asked(5_000);
    assert_eq!(c.fit(&nova, None), ["top_k"]);
    assert_eq!(c.sampling.top_p, Some(0.9));
    let mut plain = Completion::default();
    assert!(plain.fit(&sonnet, Some(4096)).is_empty());
}
