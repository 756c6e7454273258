//! What a turn asks of today's models and shows of their answers, against the fakes of its ports: the context
//! budget, reasoning, prompt caching and cost, guardrail grounding, latency and tier. No network.

use chat_core::{
    Caller, ChatError, ChatService, ChatSettings, Guardrail, Latency, Message, Overrides, Prices,
    ReasoningEffort, ReasoningStyle, Role, ServiceTier, SessionStore, TurnEvent, TurnInput,
};
use chat_testing::{InMemoryStore, Script, ScriptedModel, ask, short_words};
use serde_json::{Value, json};

type Service = ChatService<ScriptedModel, InMemoryStore>;

fn settings(model_id: &str) -> ChatSettings {
    chat_testing::settings_for(model_id)
}

fn service(
    settings: ChatSettings,
    scripts: Vec<Script>,
) -> (Service, ScriptedModel, InMemoryStore) {
    chat_testing::fakes(settings, scripts)
}

/// Settings whose prompts hold 300 tokens at most, counted by the model's token count before they are sent.
fn counted_within_300() -> ChatSettings {
    let mut s = settings("test.model-v1");
    s.model.max_prompt_tokens = 300;
    s.model.token_counter = Some("test.counter-v1".into());
    s
}

/// The texts of a request's messages.
fn texts(request: &chat_core::ModelRequest) -> impl Iterator<Item = &String> {
    request.messages.iter().flat_map(|m| &m.texts)
}

fn alice() -> Caller {
    Caller::owner("alice")
}

fn thought<'a>(thoughts: &'a [chat_core::Thought], title: &str) -> Option<&'a chat_core::Thought> {
    thoughts.iter().find(|t| t.title == title)
}

#[tokio::test]
async fn a_long_chat_sends_its_newest_messages_within_the_budget_and_says_how_many_were_left_out() {
    let mut s = settings("test.model-v1");
    s.model.max_prompt_tokens = 300;
    let (service, model, store) = service(s, vec![]);
    let first = service
        .answer(&alice(), &ask("question 0 about the budget", None))
        .await
        .unwrap();
    let chat = first.session_state.clone().unwrap();
    let chat = chat.as_str().unwrap();
    let mut sent = Vec::new();
    for turn in 1..60 {
        let answer = service
            .answer(
                &alice(),
                &ask(&format!("question {turn} about the budget"), Some(chat)),
            )
            .await
            .unwrap();
        let request = model.last_request().unwrap();
        let words: usize = texts(&request).map(|t| t.len()).sum();
        // Bytes of the messages and the system prompt stay within three bytes a token of the budget.
        assert!(
            words + request.system.len() <= 3 * 300,
            "turn {turn}: {words} bytes"
        );
        // The newest question is always sent, and the first message sent is a question.
        assert_eq!(
            request.messages.last().unwrap().texts.last().unwrap(),
            &format!("question {turn} about the budget")
        );
        assert_eq!(request.messages[0].role, Role::User);
        let prompt = thought(&answer.prompt_thoughts, "Prompt to generate answer").unwrap();
        let props = prompt.props.as_ref().unwrap();
        let left_out = props["messages_left_out"].as_u64().unwrap();
        // A thought of its own says so when messages are left out.
        let history = thought(&answer.prompt_thoughts, "Conversation history");
        assert_eq!(history.is_some(), left_out > 0);
        sent.push((
            request
                .messages
                .iter()
                .map(|m| m.texts.len() as u64)
                .sum::<u64>(),
            left_out,
            props["store_items_read"].as_u64().unwrap(),
        ));
    }
    // Early turns send everything; later ones leave the oldest out, and read about as much as they send.
    assert_eq!(sent[0].1, 0);
    let (last_sent, last_left_out, last_read) = *sent.last().unwrap();
    assert!(last_left_out > 0);
    assert_eq!(last_sent + last_left_out, 2 * 59 + 1);
    assert!(last_read <= last_sent + 3, "{sent:?}");
    // Items read do not grow with the chat once the budget is full.
    let full: Vec<u64> = sent.iter().filter(|s| s.1 > 0).map(|s| s.2).collect();
    assert!(
        full.iter().max().unwrap() - full.iter().min().unwrap() <= 2,
        "{full:?}"
    );
    // The whole history stays stored.
    let (record, messages) = store.load("alice", chat).await.unwrap();
    assert_eq!(record.message_count, 120);
    assert_eq!(messages.len(), 120);
}

#[tokio::test]
async fn reasoning_streams_before_the_answer_and_is_not_stored() {
    let mut s = settings("anthropic.claude-sonnet-4-5-20250929-v1:0");
    s.model.prompt_caching = false;
    let script = Script::pieces(["The ", "answer."])
        .reasoning(["Let me ", "think."])
        .redacted();
    let (service, model, store) = service(s, vec![script]);
    let mut input = ask("Why?", None);
    input.overrides.reasoning_effort = Some(ReasoningEffort::Medium);
    input.overrides.temperature = Some(0.3);
    let mut turn = service.stream(&alice(), &input).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = turn.next().await.unwrap() {
        events.push(event);
    }
    assert_eq!(
        events[..5],
        [
            TurnEvent::Reasoning("Let me ".into()),
            TurnEvent::Reasoning("think.".into()),
            TurnEvent::RedactedReasoning(format!("\n\n{}", chat_core::REDACTED)),
            TurnEvent::Text("The ".into()),
            TurnEvent::Text("answer.".into()),
        ]
    );
    let TurnEvent::End(end) = &events[5] else {
        panic!("{events:?}")
    };
    let reasoning = thought(&end.result_thoughts, "Reasoning").unwrap();
    assert_eq!(
        reasoning.description,
        json!(format!("Let me think.\n\n{}", chat_core::REDACTED))
    );
    let chat = turn.session().chat_id.clone();
    service.save_streamed(&alice(), turn).await.unwrap();
    let (_, stored) = store.load("alice", &chat).await.unwrap();
    assert_eq!(stored[1].content, "The answer.");
    // Claude's budget style: thinking within max_tokens, and no temperature while it thinks.
    let request = model.last_request().unwrap();
    let reasoning = request.reasoning.unwrap();
    assert_eq!(reasoning.style, ReasoningStyle::AnthropicBudget);
    assert_eq!(
        reasoning.request_fields(),
        json!({"thinking": {"type": "enabled", "budget_tokens": 4096}})
    );
    assert_eq!(request.inference.max_tokens, 256 + 4096);
    assert_eq!(request.inference.temperature, None);
}

#[tokio::test]
async fn reasoning_is_refused_for_a_model_that_cannot_be_asked_and_tiers_the_configuration_does_not_allow()
 {
    let mut s = settings("amazon.nova-lite-v1:0");
    s.model.allowed_latencies = vec![Latency::Standard];
    let (service, model, _) = service(s, vec![]);
    type Change = fn(&mut Overrides);
    let cases: [(Change, &str); 3] = [
        (
            |o| o.reasoning_effort = Some(ReasoningEffort::High),
            "context.overrides.reasoning_effort",
        ),
        (
            |o| o.latency = Some(Latency::Optimized),
            "context.overrides.latency",
        ),
        (
            |o| o.service_tier = Some(ServiceTier::Priority),
            "context.overrides.service_tier",
        ),
    ];
    for (change, field) in cases {
        let mut input = ask("q", None);
        change(&mut input.overrides);
        match service.answer(&alice(), &input).await {
            Err(ChatError::Invalid(e)) => assert_eq!(e.path, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(model.last_request().is_none(), "nothing reached the model");
    // An allowed latency reaches the model.
    let mut input = ask("q", None);
    input.overrides.latency = Some(Latency::Standard);
    service.answer(&alice(), &input).await.unwrap();
    assert_eq!(
        model.last_request().unwrap().latency,
        Some(Latency::Standard)
    );
}

#[tokio::test]
async fn cache_tokens_and_cost_are_shown_and_added_to_the_chats_totals() {
    let mut s = settings("anthropic.claude-sonnet-4-5-20250929-v1:0");
    s.model.prices = Some(
        "input=3,output=15,cache_read=0.3,cache_write=3.75"
            .parse::<Prices>()
            .unwrap(),
    );
    let (service, model, store) = service(
        s,
        vec![
            Script::text("first").cached_usage(100, 10, 0, 1000),
            Script::text("second").cached_usage(20, 10, 1000, 30),
        ],
    );
    let first = service.answer(&alice(), &ask("one", None)).await.unwrap();
    let chat = first.session_state.clone().unwrap();
    let second = service
        .answer(&alice(), &ask("two", chat.as_str()))
        .await
        .unwrap();
    let usage = thought(&second.result_thoughts, "Token usage").unwrap();
    let props = usage.props.as_ref().unwrap();
    assert_eq!(props["cache_read_input_tokens"], 1000);
    assert_eq!(props["cache_write_input_tokens"], 30);
    // 20×3 + 10×15 + 1000×0.3 + 30×3.75 = 622.5 per million.
    let cost = props["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.0006225).abs() < 1e-9, "{cost}");
    assert_eq!(second.cost_usd, Some(cost));
    // Cache points were asked for (the model's profile supports them).
    assert!(model.last_request().unwrap().prompt_caching);
    let record = &store
        .list(
            "alice",
            chat_core::ListRequest::first(chat_core::ChatMode::Standard, 10),
        )
        .await
        .unwrap()
        .items[0];
    assert_eq!(record.usage.tokens.cache_read_input_tokens, 1000);
    assert_eq!(record.usage.tokens.cache_write_input_tokens, 1030);
    assert_eq!(record.usage.tokens.input_tokens, 120);
    // 100×3 + 10×15 + 1000×3.75 = 4200 per million, and the second turn's.
    assert!((record.usage.cost_usd.unwrap() - (0.0042 + 0.0006225)).abs() < 1e-9);
}

#[tokio::test]
async fn with_a_guardrail_the_passages_are_the_grounding_source_of_the_question() {
    let mut s = settings("test.model-v1");
    s.guardrail = Some(Guardrail {
        id: "g1".into(),
        version: "1".into(),
        stream_async: false,
    });
    let retriever = chat_testing::FakeRetriever::new();
    retriever.push(vec![chat_testing::FakeRetriever::passage(
        "Employees may choose between two plans.",
        "Benefit_Options.md",
        0.9,
    )]);
    s.retrieval.query_rewrite = false;
    let (service, model, _) = service(s, vec![]);
    let service = service.with_retriever(Some(std::sync::Arc::new(retriever)));
    service
        .answer(&alice(), &ask("Which plans may employees choose?", None))
        .await
        .unwrap();
    let request = model.last_request().unwrap();
    assert_eq!(
        request.grounding_source.as_deref(),
        Some("\n\nSources:\nBenefit_Options.md: Employees may choose between two plans.")
    );
    // The question's text is the query alone: the sources are not appended to it.
    assert_eq!(
        request.messages.last().unwrap().texts.last().unwrap(),
        "Which plans may employees choose?"
    );
}

#[tokio::test]
async fn a_client_sending_the_whole_conversation_gets_the_same_budget_and_counts() {
    let mut s = settings("test.model-v1");
    s.model.max_prompt_tokens = 300;
    let (service, model, store) = service(s, vec![]);
    let mut conversation: Vec<Message> = Vec::new();
    let mut chat: Option<String> = None;
    for turn in 0..40 {
        conversation.push(Message::new(
            Role::User,
            format!("question {turn} about the budget"),
        ));
        let input = TurnInput {
            messages: conversation.clone(),
            overrides: Overrides::default(),
            session_state: chat.clone().map(Value::String),
            session_field: "sessionState",
            store_new_chat: true,
        };
        let answer = service.answer(&alice(), &input).await.unwrap();
        chat = answer
            .session_state
            .as_ref()
            .and_then(Value::as_str)
            .map(str::to_string);
        let props = thought(&answer.prompt_thoughts, "Prompt to generate answer")
            .unwrap()
            .props
            .clone()
            .unwrap();
        let sent: usize = model
            .last_request()
            .unwrap()
            .messages
            .iter()
            .map(|m| m.texts.len())
            .sum();
        // Every message of the conversation is sent or counted as left out, once.
        assert_eq!(
            sent as u64 + props["messages_left_out"].as_u64().unwrap(),
            conversation.len() as u64,
            "turn {turn}"
        );
        conversation.push(Message::new(Role::Assistant, answer.content.clone()));
    }
    // Nothing was stored twice: the request's repeated messages matched the stored ones.
    let (record, _) = store.load("alice", chat.as_deref().unwrap()).await.unwrap();
    assert_eq!(record.message_count, 80);
}

#[tokio::test]
async fn a_chat_that_fits_loses_nothing_to_the_cache_friendly_cut() {
    // A saved chat that starts with the assistant's greeting: the greeting is left out (models take a conversation
    // that starts with the user), and nothing else, though caching is on.
    let s = settings("anthropic.claude-sonnet-4-5-20250929-v1:0");
    assert!(s.model.prompt_caching);
    let (service, model, store) = service(s, vec![]);
    let chat = chat_core::ChatRecord {
        id: "0123456789abcdef0123456789abcdef".into(),
        mode: chat_core::ChatMode::Standard,
        title: "t".into(),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        last_updated: "2026-01-01T00:00:00.000Z".into(),
        last_message: String::new(),
        message_count: 0,
        usage: Default::default(),
    };
    let stored = |role, text: &str| {
        chat_core::StoredMessage::new(chat_core::new_message_id(), role, text, "10:00 AM")
    };
    store
        .create(
            "alice",
            &chat,
            &[
                stored(Role::Assistant, "Hello! How can I help?"),
                stored(Role::User, "one"),
                stored(Role::Assistant, "Echo: one"),
            ],
        )
        .await
        .unwrap();
    let answer = service
        .answer(&alice(), &ask("two", Some(&chat.id)))
        .await
        .unwrap();
    let texts: Vec<String> = model
        .last_request()
        .unwrap()
        .messages
        .iter()
        .flat_map(|m| m.texts.clone())
        .collect();
    assert_eq!(texts, ["one", "Echo: one", "two"]);
    let props = thought(&answer.prompt_thoughts, "Prompt to generate answer")
        .unwrap()
        .props
        .clone()
        .unwrap();
    assert_eq!(props["messages_left_out"], 1);
}

#[tokio::test]
async fn a_prompt_the_estimate_under_counts_is_counted_exactly_and_cut_to_the_budget() {
    let s = counted_within_300();
    let (service, model, _) = service(s, vec![]);
    let first = service
        .answer(&alice(), &ask(&short_words(0), None))
        .await
        .unwrap();
    let chat = first.session_state.clone().unwrap();
    let chat = chat.as_str().unwrap();
    // Short chats are far from the budget: nothing is counted.
    assert!(model.counts().is_empty(), "{:?}", model.counts());
    let mut cut_by_count = 0;
    for turn in 1..30 {
        let counts_before = model.counts().len();
        let answer = service
            .answer(&alice(), &ask(&short_words(turn), Some(chat)))
            .await
            .unwrap();
        let request = model.last_request().unwrap();
        let sent: u64 = texts(&request)
            .chain([&request.system])
            .map(|t| t.split_whitespace().count() as u64)
            .sum();
        // What the model got, in its own tokens, is within the budget.
        assert!(sent <= 300, "turn {turn}: {sent} tokens sent");
        let props = thought(&answer.prompt_thoughts, "Prompt to generate answer")
            .unwrap()
            .props
            .clone()
            .unwrap();
        let estimated = props["estimated_prompt_tokens"].as_u64().unwrap();
        let counts = &model.counts()[counts_before..];
        if estimated * 2 > 300 {
            // The prompt sent was counted, by the counter, and the thoughts say so.
            assert_eq!(
                props["counted_prompt_tokens"].as_u64(),
                Some(sent),
                "turn {turn}: {props}"
            );
            assert_eq!(
                counts.last().unwrap(),
                &("test.counter-v1".to_string(), sent)
            );
            if counts.iter().any(|(_, n)| *n > 300) {
                cut_by_count += 1;
                let history = thought(&answer.prompt_thoughts, "Conversation history").unwrap();
                assert_eq!(
                    history.props.as_ref().unwrap()["counted_prompt_tokens"],
                    sent
                );
            }
        } else {
            assert!(counts.is_empty(), "turn {turn}: {counts:?}");
            assert!(props.get("counted_prompt_tokens").is_none());
        }
    }
    // The estimate alone would have sent too much on most turns: the count cut them.
    assert!(cut_by_count > 10, "{cut_by_count} turns cut by the count");
}

#[tokio::test]
async fn a_count_that_fails_leaves_the_estimate_to_decide() {
    let s = counted_within_300();
    let (counted_service, model, _) = service(s, vec![]);
    model.fail_counts(Some(chat_core::ModelError::Timeout("no count".into())));
    let first = counted_service
        .answer(&alice(), &ask(&short_words(0), None))
        .await
        .unwrap();
    let chat = first.session_state.clone().unwrap();
    let mut counted = 0;
    for turn in 1..20 {
        let answer = counted_service
            .answer(&alice(), &ask(&short_words(turn), chat.as_str()))
            .await
            .unwrap();
        let props = thought(&answer.prompt_thoughts, "Prompt to generate answer")
            .unwrap()
            .props
            .clone()
            .unwrap();
        assert!(props.get("counted_prompt_tokens").is_none(), "{props}");
        assert!(props["estimated_prompt_tokens"].as_u64().unwrap() <= 300);
        counted += usize::from(props["messages_left_out"].as_u64().unwrap() > 0);
    }
    // The estimate still cut the history.
    assert!(counted > 0);
    // Without a counter, nothing is counted at all.
    let (uncounted, model, _) = service(settings("test.model-v1"), vec![]);
    let mut chat = None;
    for turn in 0..20 {
        let answer = uncounted
            .answer(&alice(), &ask(&short_words(turn), chat.as_deref()))
            .await
            .unwrap();
        chat = answer
            .session_state
            .as_ref()
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    assert!(model.counts().is_empty());
}
