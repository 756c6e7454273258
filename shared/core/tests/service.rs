//! `ChatService` against the fakes of its ports (chat-testing's in-memory store and scripted model): what a turn
//! answers, what it stores and what it asks the model, buffered, streamed and in multi-agent rounds, with the
//! model's and the store's faults. No network: the whole suite runs in milliseconds.

use chat_core::{
    AgentGroup, Answer, Caller, ChatError, ChatMode, ChatService, FOLLOWUP_INSTRUCTIONS,
    FinishReason, Message, ModelError, ModelMessage, RetrievalSettings, Role, SessionStore,
    StopReason, StoreError, TokenUsage, TurnEvent, TurnInput,
};
use chat_testing::{InMemoryStore, Script, ScriptedModel, settings};
use serde_json::{Value, json};

const ALICE: &str = "alice";

type Service = ChatService<ScriptedModel, InMemoryStore>;

/// A service on fresh fakes, and handles on them (clones share their state).
fn fakes(scripts: impl IntoIterator<Item = Script>) -> (Service, ScriptedModel, InMemoryStore) {
    chat_testing::fakes(settings(), scripts)
}

fn input(messages: &[(Role, &str)], session: Option<&str>) -> TurnInput {
    let messages = messages
        .iter()
        .map(|(role, text)| Message::new(*role, *text))
        .collect();
    chat_testing::input(messages, session)
}

fn ask(text: &str) -> TurnInput {
    input(&[(Role::User, text)], None)
}

fn with_followups(mut input: TurnInput) -> TurnInput {
    input.overrides.suggest_followup_questions = true;
    input
}

fn alice() -> Caller {
    Caller::owner(ALICE)
}

fn chat_id(answer: &Answer) -> String {
    answer
        .session_state
        .as_ref()
        .and_then(Value::as_str)
        .expect("the answer names its chat")
        .to_string()
}

/// A stored chat's messages as (role, content).
async fn history(store: &InMemoryStore, owner: &str, id: &str) -> Vec<(Role, String)> {
    let (_, messages) = store.load(owner, id).await.expect("the chat exists");
    messages.into_iter().map(|m| (m.role, m.content)).collect()
}

fn usage(input: u64, output: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        ..TokenUsage::default()
    }
}

// ---- Buffered -------------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_buffered_answer_is_the_models_text_and_its_turn_is_stored() {
    let (service, model, store) = fakes([Script::pieces(["Hello", " there"]).usage(12, 3)]);
    let answer = service.answer(&alice(), &ask("hi")).await.unwrap();
    assert_eq!(answer.content, "Hello there");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(answer.usage, usage(12, 3));
    assert_eq!(answer.model, "test.model-v1");
    assert!(answer.id.starts_with("chatcmpl-"));
    assert_eq!(answer.followup_questions, None);
    // The thoughts: the prompt before the answer, the usage after it.
    let titles: Vec<String> = answer.thoughts().into_iter().map(|t| t.title).collect();
    assert_eq!(titles, ["Prompt to generate answer", "Token usage"]);
    assert_eq!(
        answer.result_thoughts[0].props,
        Some(
            json!({"input_tokens": 12, "output_tokens": 3, "total_tokens": 15, "stop_reason": "end_turn"})
        )
    );
    // The model got the configured prompt and the question.
    let request = model.last_request().unwrap();
    assert_eq!(request.model_id, "test.model-v1");
    assert_eq!(request.system, "Be brief.");
    assert_eq!(request.inference.max_tokens, 256);
    assert_eq!(
        request.messages,
        [ModelMessage::text(Role::User, vec!["hi".into()])]
    );
    // A new chat, holding the question and the answer.
    let id = chat_id(&answer);
    assert_eq!(
        history(&store, ALICE, &id).await,
        [
            (Role::User, "hi".into()),
            (Role::Assistant, "Hello there".into())
        ]
    );
    let (record, _) = store.load(ALICE, &id).await.unwrap();
    assert_eq!(record.mode, ChatMode::Standard);
    assert_eq!(record.title, "hi");
    assert_eq!(record.message_count, 2);
    assert_eq!(record.last_message, "Hello there");
}

#[tokio::test]
async fn follow_up_questions_are_asked_for_cut_out_and_not_stored() {
    let (service, model, store) = fakes([Script::pieces([
        "The answer.",
        "\n\n<<First question?>>",
        "\n<<Second question?>>",
    ])]);
    let answer = service
        .answer(&alice(), &with_followups(ask("q")))
        .await
        .unwrap();
    assert_eq!(answer.content, "The answer.");
    assert_eq!(
        answer.followup_questions,
        Some(vec!["First question?".into(), "Second question?".into()])
    );
    assert!(
        model
            .last_request()
            .unwrap()
            .system
            .ends_with(FOLLOWUP_INSTRUCTIONS)
    );
    assert_eq!(
        history(&store, ALICE, &chat_id(&answer)).await[1],
        (Role::Assistant, "The answer.".into())
    );
}

#[tokio::test]
async fn a_chat_is_continued_through_its_session_state() {
    let (service, model, store) = fakes([Script::text("First answer."), Script::text("Second.")]);
    let first = service.answer(&alice(), &ask("one")).await.unwrap();
    let id = chat_id(&first);
    // The request holds only the new question: the stored history comes before it.
    let second = service
        .answer(&alice(), &input(&[(Role::User, "two")], Some(&id)))
        .await
        .unwrap();
    assert_eq!(chat_id(&second), id);
    assert_eq!(
        model.last_request().unwrap().messages,
        [
            ModelMessage::text(Role::User, vec!["one".into()]),
            ModelMessage::text(Role::Assistant, vec!["First answer.".into()]),
            ModelMessage::text(Role::User, vec!["two".into()]),
        ]
    );
    // A request holding the whole conversation stores only what is new.
    service
        .answer(
            &alice(),
            &input(
                &[
                    (Role::User, "one"),
                    (Role::Assistant, "First answer."),
                    (Role::User, "two"),
                    (Role::Assistant, "Second."),
                    (Role::User, "three"),
                ],
                Some(&id),
            ),
        )
        .await
        .unwrap();
    let stored = history(&store, ALICE, &id).await;
    let texts: Vec<&str> = stored.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "one",
            "First answer.",
            "two",
            "Second.",
            "three",
            "Echo: three"
        ]
    );
    assert_eq!(store.chat_count(), 1);
}

#[tokio::test]
async fn a_chat_ui_turn_without_a_chat_is_answered_but_not_stored() {
    let (service, _, store) = fakes([Script::text("Hi.")]);
    let mut chat_ui = ask("hello");
    chat_ui.store_new_chat = false;
    let answer = service.answer(&alice(), &chat_ui).await.unwrap();
    assert_eq!(answer.content, "Hi.");
    assert_eq!(answer.session_state, None);
    assert_eq!(store.chat_count(), 0);
    assert_eq!(store.writes(), 0);
}

#[tokio::test]
async fn an_empty_queue_echoes_like_the_local_bedrock_server() {
    let (service, _, _) = fakes([]);
    let answer = service
        .answer(&alice(), &ask("one two three"))
        .await
        .unwrap();
    assert_eq!(answer.content, "Echo: one two three");
    assert_eq!(answer.usage.output_tokens, 4);
}

// ---- Streamed -------------------------------------------------------------------------------------------------------

/// Every event of a streamed turn, then the turn stored.
async fn stream_all(service: &Service, input: &TurnInput) -> (Vec<TurnEvent>, String) {
    let mut turn = service.stream(&alice(), input).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = turn.next().await.unwrap() {
        events.push(event);
    }
    let shown = turn.shown().to_string();
    service.save_streamed(&alice(), turn).await.unwrap();
    (events, shown)
}

#[tokio::test]
async fn a_streamed_answer_yields_the_models_pieces_then_its_end_and_stores_what_was_shown() {
    let (service, _, store) = fakes([Script::pieces(["One ", "two ", "three."]).usage(5, 3)]);
    let (events, shown) = stream_all(&service, &ask("count")).await;
    assert_eq!(
        &events[..3],
        [
            TurnEvent::Text("One ".into()),
            TurnEvent::Text("two ".into()),
            TurnEvent::Text("three.".into())
        ]
    );
    let TurnEvent::End(end) = &events[3] else {
        panic!("the last event is the end: {events:?}")
    };
    assert_eq!(events.len(), 4);
    assert_eq!(end.finish_reason, FinishReason::Stop);
    assert_eq!(end.usage, usage(5, 3));
    assert_eq!(end.followup_questions, None);
    assert_eq!(end.result_thoughts[0].title, "Token usage");
    assert_eq!(shown, "One two three.");
    let chats = store.chats_of(ALICE);
    assert_eq!(chats.len(), 1);
    assert_eq!(
        history(&store, ALICE, &chats[0].id).await,
        [
            (Role::User, "count".into()),
            (Role::Assistant, "One two three.".into())
        ]
    );
}

#[tokio::test]
async fn a_streamed_turn_names_its_chat_and_its_prompt_before_the_answer() {
    let (service, _, _) = fakes([Script::text("x")]);
    let turn = service.stream(&alice(), &ask("q")).await.unwrap();
    assert!(turn.session().is_new);
    assert_eq!(turn.session().state(), Some(json!(turn.session().chat_id)));
    assert_eq!(turn.thoughts[0].title, "Prompt to generate answer");
    assert_eq!(turn.header.model, "test.model-v1");
}

#[tokio::test]
async fn an_error_in_the_middle_of_a_stream_stores_nothing() {
    let (service, _, store) = fakes([
        Script::pieces(["a ", "b ", "c"]).fail_after(2, ModelError::Timeout("silent".into()))
    ]);
    let mut turn = service.stream(&alice(), &ask("q")).await.unwrap();
    assert_eq!(
        turn.next().await.unwrap(),
        Some(TurnEvent::Text("a ".into()))
    );
    assert_eq!(
        turn.next().await.unwrap(),
        Some(TurnEvent::Text("b ".into()))
    );
    assert_eq!(
        turn.next().await.unwrap_err(),
        ChatError::Model(ModelError::Timeout("silent".into()))
    );
    // The function does not save a turn that failed; nothing was written on the way.
    assert_eq!(store.writes(), 0);
    assert_eq!(store.chat_count(), 0);
}

#[tokio::test]
async fn a_fault_before_the_first_text_is_an_error_of_stream_itself() {
    let (service, model, store) = fakes([
        Script::error(ModelError::Throttled),
        Script::pieces(["never shown"]).fail_after(0, ModelError::Failed("cut".into())),
    ]);
    assert!(matches!(
        service.stream(&alice(), &ask("q")).await,
        Err(ChatError::Model(ModelError::Throttled))
    ));
    // Read up to the first text: a stream that fails before it is the same error.
    assert!(matches!(
        service.stream(&alice(), &ask("q")).await,
        Err(ChatError::Model(ModelError::Failed(_)))
    ));
    assert_eq!(model.requests().len(), 2);
    assert_eq!(store.writes(), 0);
}

#[tokio::test]
async fn the_buffered_answer_is_the_streamed_one_collected() {
    let script = || {
        Script::pieces(["Part one, ", "part two.", "\n\n<<Why?>>", "\n<<How?>>"])
            .usage(7, 4)
            .stop(StopReason::MaxTokens)
    };
    let (buffered_service, _, buffered_store) = fakes([script()]);
    let answer = buffered_service
        .answer(&alice(), &with_followups(ask("q")))
        .await
        .unwrap();
    let (streamed_service, _, streamed_store) = fakes([script()]);
    let (events, shown) = stream_all(&streamed_service, &with_followups(ask("q"))).await;
    let TurnEvent::End(end) = events.last().unwrap() else {
        panic!("the last event is the end")
    };
    assert_eq!(answer.content, shown);
    assert_eq!(answer.finish_reason, end.finish_reason);
    assert_eq!(answer.finish_reason, FinishReason::Length);
    assert_eq!(answer.usage, end.usage);
    assert_eq!(answer.followup_questions, end.followup_questions);
    assert_eq!(answer.result_thoughts, end.result_thoughts);
    let stored = |store: InMemoryStore| async move {
        let id = store.chats_of(ALICE)[0].id.clone();
        history(&store, ALICE, &id).await
    };
    assert_eq!(stored(buffered_store).await, stored(streamed_store).await);
}

// ---- Faults ---------------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_guardrail_that_stops_the_model_is_content_filtered_and_nothing_is_stored() {
    for stop in [StopReason::GuardrailIntervened, StopReason::ContentFiltered] {
        let (service, _, store) = fakes([
            Script::text("Unsafe").stop(stop.clone()),
            Script::pieces(["Shown ", "then stopped"]).stop(stop.clone()),
        ]);
        assert_eq!(
            service.answer(&alice(), &ask("q")).await.unwrap_err(),
            ChatError::ContentFiltered,
            "{stop:?}"
        );
        // Streamed: the text before the stop was shown, and the end is the error.
        let mut turn = service.stream(&alice(), &ask("q")).await.unwrap();
        let mut result = Ok(None);
        for _ in 0..5 {
            result = turn.next().await;
            if !matches!(result, Ok(Some(TurnEvent::Text(_)))) {
                break;
            }
        }
        assert_eq!(result.unwrap_err(), ChatError::ContentFiltered, "{stop:?}");
        assert_eq!(store.writes(), 0, "{stop:?}");
    }
}

#[tokio::test]
async fn a_full_context_window_is_input_too_long() {
    let (service, _, store) = fakes([Script::text("…").stop(StopReason::ContextWindowExceeded)]);
    assert!(matches!(
        service.answer(&alice(), &ask("q")).await.unwrap_err(),
        ChatError::Model(ModelError::InputTooLong(_))
    ));
    assert_eq!(store.writes(), 0);
}

#[tokio::test]
async fn a_model_fault_is_the_turns_error_and_nothing_is_stored() {
    for fault in [
        ModelError::Throttled,
        ModelError::Timeout("slow".into()),
        ModelError::AccessDenied("no".into()),
    ] {
        let (service, _, store) = fakes([Script::error(fault.clone())]);
        assert_eq!(
            service.answer(&alice(), &ask("q")).await.unwrap_err(),
            ChatError::Model(fault.clone())
        );
        assert_eq!(store.writes(), 0, "{fault:?}");
        assert_eq!(store.chat_count(), 0, "{fault:?}");
    }
    // A buffered call whose stream would fail part-way fails whole.
    let (service, _, store) =
        fakes([Script::pieces(["a", "b"]).fail_after(1, ModelError::Failed("cut".into()))]);
    assert!(service.answer(&alice(), &ask("q")).await.is_err());
    assert_eq!(store.chat_count(), 0);
}

#[tokio::test]
async fn a_store_fault_on_save_is_the_turns_error() {
    let (service, _, store) = fakes([Script::text("a"), Script::text("b")]);
    store.fail_next_write(StoreError::Unavailable("down".into()));
    assert_eq!(
        service.answer(&alice(), &ask("q")).await.unwrap_err(),
        ChatError::Store(StoreError::Unavailable("down".into()))
    );
    assert_eq!(store.chat_count(), 0);
    // A continued chat whose save fails keeps what it held.
    let id = chat_id(&service.answer(&alice(), &ask("q")).await.unwrap());
    store.fail_next_write(StoreError::Contended);
    assert_eq!(
        service
            .answer(&alice(), &input(&[(Role::User, "again")], Some(&id)))
            .await
            .unwrap_err(),
        ChatError::Store(StoreError::Contended)
    );
    assert_eq!(history(&store, ALICE, &id).await.len(), 2);
    // A streamed turn's save fails the same way.
    let mut turn = service
        .stream(&alice(), &input(&[(Role::User, "more")], Some(&id)))
        .await
        .unwrap();
    while turn.next().await.unwrap().is_some() {}
    store.fail_next_write(StoreError::Failed("refused".into()));
    assert_eq!(
        service.save_streamed(&alice(), turn).await.unwrap_err(),
        ChatError::Store(StoreError::Failed("refused".into()))
    );
    assert_eq!(history(&store, ALICE, &id).await.len(), 2);
}

#[tokio::test]
async fn a_store_that_cannot_load_the_chat_is_the_turns_error_before_the_model_is_asked() {
    let (service, model, store) = fakes([]);
    let id = chat_id(&service.answer(&alice(), &ask("q")).await.unwrap());
    store.fail_next(StoreError::Unavailable("down".into()));
    assert_eq!(
        service
            .answer(&alice(), &input(&[(Role::User, "next")], Some(&id)))
            .await
            .unwrap_err(),
        ChatError::Store(StoreError::Unavailable("down".into()))
    );
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn another_owners_chat_is_not_found_and_the_model_is_not_asked() {
    let (service, model, store) = fakes([]);
    let id = chat_id(&service.answer(&alice(), &ask("mine")).await.unwrap());
    let bob = Caller::owner("bob");
    let foreign = input(&[(Role::User, "let me in")], Some(&id));
    assert_eq!(
        service.answer(&bob, &foreign).await.unwrap_err(),
        ChatError::ChatNotFound
    );
    assert!(matches!(
        service.stream(&bob, &foreign).await,
        Err(ChatError::ChatNotFound)
    ));
    let mut agents = foreign.clone();
    agents.messages = vec![Message::new(Role::User, "agents")];
    assert!(matches!(
        service
            .whole_round(&bob, &AgentGroup::default_group(), &agents)
            .await,
        Err(ChatError::ChatNotFound)
    ));
    // Made-up ids name no chat either.
    assert_eq!(
        service
            .answer(&alice(), &input(&[(Role::User, "x")], Some("not-an-id")))
            .await
            .unwrap_err(),
        ChatError::ChatNotFound
    );
    assert_eq!(model.requests().len(), 1, "only alice's first turn");
    assert_eq!(history(&store, ALICE, &id).await.len(), 2);
    assert!(store.chats_of("bob").is_empty());
}

#[tokio::test]
async fn a_session_state_that_is_not_a_string_is_invalid() {
    let (service, model, _) = fakes([]);
    let mut bad = ask("q");
    bad.session_state = Some(json!(42));
    assert!(matches!(
        service.answer(&alice(), &bad).await.unwrap_err(),
        ChatError::Invalid(_)
    ));
    assert!(model.requests().is_empty());
}

// ---- Agents ---------------------------------------------------------------------------------------------------------

fn group(max_turns: usize) -> AgentGroup {
    chat_testing::agents(max_turns)
}

#[tokio::test]
async fn agents_speak_in_turn_until_the_approval_phrase_and_the_round_is_stored_once() {
    let (service, model, store) = fakes([
        Script::text("Requirements."),
        Script::text("Design."),
        Script::text("Looks good: approved."),
        Script::text("never asked"),
    ]);
    let round = service
        .whole_round(&alice(), &group(6), &ask("Build it"))
        .await
        .unwrap();
    let said: Vec<(&str, &str)> = round
        .messages()
        .iter()
        .map(|m| (m.agent.as_str(), m.text.as_str()))
        .collect();
    assert_eq!(
        said,
        [
            ("Analyst", "Requirements."),
            ("Engineer", "Design."),
            ("Analyst", "Looks good: approved.")
        ]
    );
    assert_eq!(model.pending(), 1, "the approval ended the round");
    // Each agent sees its own instructions, its own messages as its turns and the others' attributed by name.
    let requests = model.requests();
    assert!(requests[1].system.starts_with("You are Engineer's role."));
    assert!(requests[1].system.contains("the agents Analyst"));
    assert_eq!(
        requests[1].messages,
        [ModelMessage::text(
            Role::User,
            vec!["Build it".into(), "Analyst: Requirements.".into()]
        )]
    );
    assert_eq!(
        requests[2].messages,
        [
            ModelMessage::text(Role::User, vec!["Build it".into()]),
            ModelMessage::text(Role::Assistant, vec!["Requirements.".into()]),
            ModelMessage::text(Role::User, vec!["Engineer: Design.".into()]),
        ]
    );
    // Stored once, as one new multi-agent chat: the user's message and every agent's, attributed.
    assert_eq!(store.writes(), 1);
    let chats = store.chats_of(ALICE);
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].mode, ChatMode::MultiAgent);
    assert_eq!(chats[0].message_count, 4);
    let (_, stored) = store.load(ALICE, &chats[0].id).await.unwrap();
    let authors: Vec<Option<&str>> = stored
        .iter()
        .map(|m| m.agent_identifier.as_deref())
        .collect();
    assert_eq!(
        authors,
        [None, Some("Analyst"), Some("Engineer"), Some("Analyst")]
    );
    assert_eq!(stored[0].content, "Build it");
    assert_eq!(stored[3].agent_name.as_deref(), Some("Analyst"));
}

#[tokio::test]
async fn a_round_without_approval_ends_at_the_turn_limit() {
    let (service, model, store) = fakes([]);
    let round = service
        .whole_round(&alice(), &group(5), &ask("Plan"))
        .await
        .unwrap();
    let agents: Vec<&str> = round.messages().iter().map(|m| m.agent.as_str()).collect();
    assert_eq!(
        agents,
        ["Analyst", "Engineer", "Analyst", "Engineer", "Analyst"]
    );
    assert_eq!(model.requests().len(), 5);
    // The other agent's last message is the last the agent sees, attributed.
    assert_eq!(
        model.requests()[2].messages.last().unwrap().texts,
        [format!("Engineer: {}", round.messages()[1].text)]
    );
    assert_eq!(store.chats_of(ALICE)[0].message_count, 6);
    // An agent alone, whose own message is last, is asked to continue.
    let (service, model, _) = fakes([]);
    let mut alone = group(2);
    alone.agents.truncate(1);
    service
        .whole_round(&alice(), &alone, &ask("Plan"))
        .await
        .unwrap();
    assert_eq!(
        model.requests()[1].messages.last().unwrap(),
        &ModelMessage::text(Role::User, vec!["Continue.".into()])
    );
}

#[tokio::test]
async fn a_round_continues_its_chat_and_a_failed_round_stores_nothing() {
    let (service, model, store) = fakes([Script::text("approved")]);
    let round = service
        .whole_round(&alice(), &group(4), &ask("First"))
        .await
        .unwrap();
    let id = round.session().chat_id.clone();
    let before = history(&store, ALICE, &id).await;
    assert_eq!(before.len(), 2);
    // The second agent fails: the round is an error, and the chat is as it was.
    model.push(Script::text("ok"));
    model.push(Script::error(ModelError::Throttled));
    let err = service
        .whole_round(
            &alice(),
            &group(4),
            &input(&[(Role::User, "Second")], Some(&id)),
        )
        .await;
    assert!(matches!(err, Err(ChatError::Model(ModelError::Throttled))));
    assert_eq!(history(&store, ALICE, &id).await, before);
    // A round that succeeds is appended after the history.
    let round = service
        .whole_round(
            &alice(),
            &group(1),
            &input(&[(Role::User, "Third")], Some(&id)),
        )
        .await
        .unwrap();
    assert_eq!(round.messages().len(), 1);
    assert_eq!(history(&store, ALICE, &id).await.len(), 4);
}

// ---- Retrieval ------------------------------------------------------------------------------------------------------

mod retrieval {
    use super::*;
    use std::sync::Arc;

    use chat_core::{
        CitationMode, MetadataFilter, PAGE_NUMBER_KEY, Passage, Retriever, SearchError, SearchMode,
    };
    use chat_testing::FakeRetriever;

    fn paged(text: &str, file: &str, page: u64, score: f64) -> Passage {
        let mut p = FakeRetriever::passage(text, &format!("s3://docs/{file}"), score);
        p.metadata.insert(PAGE_NUMBER_KEY.into(), json!(page));
        p
    }

    /// A service whose turns search `retriever`, with `citations` and query rewriting as given.
    fn grounded(
        scripts: impl IntoIterator<Item = Script>,
        citations: CitationMode,
        query_rewrite: bool,
    ) -> (Service, ScriptedModel, InMemoryStore, FakeRetriever) {
        let model = ScriptedModel::with(scripts);
        let store = InMemoryStore::new();
        let retriever = FakeRetriever::new();
        let mut s = settings();
        s.retrieval = RetrievalSettings {
            default_top: 3,
            query_rewrite,
            citations,
            ..RetrievalSettings::default()
        };
        let service = ChatService::new(model.clone(), store.clone(), s)
            .with_retriever(Some(Arc::new(retriever.clone()) as Arc<dyn Retriever>));
        (service, model, store, retriever)
    }

    #[tokio::test]
    async fn the_model_writes_the_query_and_the_answer_cites_the_passages_listed_in_its_prompt() {
        let (service, model, store, retriever) = grounded(
            [
                Script::text("dental coverage"),
                Script::pieces(["Two cleanings a year ", "[Benefits.pdf#page=2]."]),
            ],
            CitationMode::Prompted,
            true,
        );
        retriever.push(vec![
            paged("Dental: two\ncleanings a year.", "Benefits.pdf", 2, 0.9),
            paged("Vision: one exam.", "Benefits.pdf", 3, 0.5),
        ]);
        let answer = service
            .answer(&alice(), &ask("What does dental cover?"))
            .await
            .unwrap();
        // The search: the model's query, the default top, hybrid, and only what the caller may read (this caller
        // has no id or groups of their own: what is for everyone).
        let searched = retriever.requests();
        assert_eq!(searched.len(), 1);
        assert_eq!(searched[0].query, "dental coverage");
        assert_eq!((searched[0].top, searched[0].mode), (3, SearchMode::Hybrid));
        assert_eq!(
            searched[0].filter,
            Some(MetadataFilter::OrAll(vec![MetadataFilter::ListContains {
                key: "groups".into(),
                value: Value::String("everyone".into())
            }]))
        );
        // The query's prompt, then the answer's: the sources under their names after the question.
        let requests = model.requests();
        assert!(requests[0].system.contains("Generate a search query"));
        assert_eq!(
            requests[0].messages.last().unwrap().texts,
            ["Generate search query for: What does dental cover?"]
        );
        assert_eq!(
            requests[1].messages[0].texts,
            [
                "What does dental cover?\n\nSources:\nBenefits.pdf#page=2: Dental: two cleanings a year.\nBenefits.pdf#page=3: Vision: one exam."
            ]
        );
        assert!(requests[1].system.contains("square brackets"));
        assert!(requests[1].search_results.is_empty());
        // The answer: data points, the cited passage, and the search's thoughts before the prompt's.
        let dp = answer.data_points.clone().unwrap();
        assert_eq!(dp.citations, ["Benefits.pdf#page=2", "Benefits.pdf#page=3"]);
        assert_eq!(
            dp.text[0],
            "Benefits.pdf#page=2: Dental: two cleanings a year."
        );
        assert_eq!(answer.citations, ["Benefits.pdf#page=2"]);
        let titles: Vec<String> = answer.thoughts().into_iter().map(|t| t.title).collect();
        assert_eq!(
            titles,
            [
                "Prompt to generate search query",
                "Search using generated search query",
                "Search results",
                "Prompt to generate answer",
                "Token usage"
            ]
        );
        // The stored answer keeps its citation marks.
        let stored = history(&store, ALICE, &chat_id(&answer)).await;
        assert_eq!(stored[1].1, "Two cleanings a year [Benefits.pdf#page=2].");
    }

    #[tokio::test]
    async fn the_operator_keeps_the_system_prompt_and_the_filters_out_of_thoughts_when_asked() {
        for show in [true, false] {
            let model = ScriptedModel::with([
                Script::text("dental coverage"),
                Script::text("Two cleanings a year."),
            ]);
            let retriever = FakeRetriever::new();
            retriever.push(vec![paged(
                "Dental: two cleanings.",
                "Benefits.pdf",
                2,
                0.9,
            )]);
            let mut s = settings();
            s.system_prompt = "Operator's secret instructions.".into();
            s.retrieval = RetrievalSettings {
                query_rewrite: true,
                ..RetrievalSettings::default()
            };
            s.thoughts_show_prompt = show;
            let service = ChatService::new(model.clone(), InMemoryStore::new(), s)
                .with_retriever(Some(Arc::new(retriever.clone()) as Arc<dyn Retriever>));
            let answer = service
                .answer(&alice(), &ask("What does dental cover?"))
                .await
                .unwrap();
            let thoughts = answer.thoughts();
            let thought = |title: &str| {
                thoughts
                    .iter()
                    .find(|t| t.title == title)
                    .unwrap_or_else(|| panic!("a thought {title:?}"))
            };
            for title in [
                "Prompt to generate search query",
                "Prompt to generate answer",
            ] {
                let messages = thought(title).description.as_array().unwrap();
                let systems = messages.iter().filter(|m| m["role"] == "system").count();
                assert_eq!(systems, usize::from(show), "{title}, shown: {show}");
                // The conversation is still shown either way.
                assert!(
                    messages.iter().any(|m| m["role"] == "user"),
                    "{title}: {messages:?}"
                );
            }
            let shown: String = thoughts
                .iter()
                .map(|t| format!("{} {:?}", t.description, t.props))
                .collect();
            assert_eq!(
                shown.contains("Operator's secret instructions."),
                show,
                "{shown}"
            );
            let search = thought("Search using generated search query");
            let props = search.props.as_ref().unwrap();
            assert_eq!(props.get("filters").is_some(), show, "{props}");
            assert_eq!(shown.contains("listContains"), show, "{shown}");
            // What the search and the model were given does not change: only what the user is shown.
            assert!(retriever.requests()[0].filter.is_some());
            assert!(
                model.requests()[1]
                    .system
                    .contains("Operator's secret instructions.")
            );
            assert_eq!(answer.content, "Two cleanings a year.");
        }
    }

    #[tokio::test]
    async fn overrides_and_the_callers_access_make_the_filter() {
        let (service, _, _, retriever) = grounded([], CitationMode::Prompted, false);
        let caller = Caller {
            owner: "local:alice".into(),
            oid: Some("alice".into()),
            groups: vec!["eng".into()],
        };
        let mut turn = ask("salary");
        turn.overrides.top = Some(7);
        turn.overrides.retrieval_mode = Some(chat_core::RetrievalMode::Vectors);
        turn.overrides.exclude_category = Some("hr".into());
        turn.overrides.use_oid_security_filter = true;
        turn.overrides.use_groups_security_filter = true;
        service.answer(&caller, &turn).await.unwrap();
        let searched = &retriever.requests()[0];
        assert_eq!(searched.query, "salary");
        assert_eq!((searched.top, searched.mode), (7, SearchMode::Semantic));
        let text = |v: &str| Value::String(v.into());
        assert_eq!(
            searched.filter,
            Some(MetadataFilter::AndAll(vec![
                MetadataFilter::NotEquals {
                    key: "category".into(),
                    value: text("hr")
                },
                MetadataFilter::OrAll(vec![
                    MetadataFilter::ListContains {
                        key: "oids".into(),
                        value: text("alice")
                    },
                    MetadataFilter::ListContains {
                        key: "groups".into(),
                        value: text("eng")
                    },
                    MetadataFilter::ListContains {
                        key: "groups".into(),
                        value: text("everyone")
                    },
                ]),
            ]))
        );
        // A caller with no id, under the oid filter only, can see nothing: no search is made.
        let mut oid_only = ask("salary");
        oid_only.overrides.use_oid_security_filter = true;
        let answer = service.answer(&alice(), &oid_only).await.unwrap();
        assert_eq!(retriever.requests().len(), 1);
        assert_eq!(answer.data_points.unwrap().citations, Vec::<String>::new());
    }

    #[tokio::test]
    async fn a_store_without_hybrid_search_is_searched_semantically_and_the_thought_says_so() {
        for (hybrid, asked, expected) in [
            (true, None, SearchMode::Hybrid),
            (
                true,
                Some(chat_core::RetrievalMode::Text),
                SearchMode::Hybrid,
            ),
            (false, None, SearchMode::Semantic),
            (
                false,
                Some(chat_core::RetrievalMode::Hybrid),
                SearchMode::Semantic,
            ),
            (
                false,
                Some(chat_core::RetrievalMode::Text),
                SearchMode::Semantic,
            ),
        ] {
            let model = ScriptedModel::with([]);
            let retriever = FakeRetriever::new();
            let mut s = settings();
            s.retrieval = RetrievalSettings {
                query_rewrite: false,
                hybrid,
                ..RetrievalSettings::default()
            };
            let service = ChatService::new(model, InMemoryStore::new(), s)
                .with_retriever(Some(Arc::new(retriever.clone()) as Arc<dyn Retriever>));
            let mut turn = ask("salary");
            turn.overrides.retrieval_mode = asked;
            let answer = service.answer(&alice(), &turn).await.unwrap();
            assert_eq!(retriever.requests()[0].mode, expected, "{hybrid} {asked:?}");
            let thoughts: Vec<Value> = answer
                .thoughts()
                .into_iter()
                .filter_map(|t| t.props)
                .collect();
            let thoughts = Value::Array(thoughts).to_string();
            let expected_type = if expected == SearchMode::Hybrid {
                "HYBRID"
            } else {
                "SEMANTIC"
            };
            assert!(
                thoughts.contains(&format!("\"search_type\":\"{expected_type}\"")),
                "{thoughts}"
            );
            assert_eq!(
                thoughts.contains("KNOWLEDGE_BASE_HYBRID_SEARCH=false"),
                !hybrid,
                "{thoughts}"
            );
        }
    }

    #[tokio::test]
    async fn passages_under_the_minimum_score_are_dropped() {
        let (service, _, _, retriever) = grounded([], CitationMode::Prompted, false);
        retriever.push(vec![
            paged("a", "A.pdf", 1, 0.9),
            paged("b", "B.pdf", 1, 0.2),
        ]);
        let mut turn = ask("q");
        turn.overrides.minimum_search_score = Some(0.5);
        let answer = service.answer(&alice(), &turn).await.unwrap();
        assert_eq!(answer.data_points.unwrap().citations, ["A.pdf#page=1"]);
    }

    #[tokio::test]
    async fn native_citations_become_marks_where_the_model_put_them_buffered_and_streamed() {
        let script = || {
            Script::pieces(["Two cleanings.", " One exam."])
                .cite(0, 1)
                .cite(1, 0)
        };
        for streamed in [false, true] {
            let (service, model, _, retriever) = grounded([script()], CitationMode::Native, false);
            retriever.push(vec![
                paged("Vision: one exam.", "Benefits.pdf", 3, 0.9),
                paged("Dental: two cleanings.", "Benefits.pdf", 2, 0.8),
            ]);
            let answer = if streamed {
                let mut turn = service.stream(&alice(), &ask("teeth?")).await.unwrap();
                assert_eq!(turn.data_points().unwrap().citations.len(), 2);
                let mut shown = String::new();
                while let Some(event) = turn.next().await.unwrap() {
                    if let TurnEvent::Text(t) = event {
                        shown.push_str(&t);
                    }
                }
                shown
            } else {
                let answer = service.answer(&alice(), &ask("teeth?")).await.unwrap();
                assert_eq!(
                    answer.citations,
                    ["Benefits.pdf#page=2", "Benefits.pdf#page=3"]
                );
                answer.content
            };
            assert_eq!(
                answer, "Two cleanings. [Benefits.pdf#page=2] One exam. [Benefits.pdf#page=3]",
                "streamed: {streamed}"
            );
            // The passages went as search results; the question kept its own text.
            let request = model.last_request().unwrap();
            assert_eq!(request.search_results.len(), 2);
            assert_eq!(request.messages[0].texts, ["teeth?"]);
        }
    }

    #[tokio::test]
    async fn a_failed_search_fails_the_turn_and_stores_nothing() {
        let (service, _, store, retriever) = grounded([], CitationMode::Prompted, false);
        retriever.fail_next(SearchError::Throttled);
        let err = service.answer(&alice(), &ask("q")).await.unwrap_err();
        assert_eq!(err, ChatError::Search(SearchError::Throttled));
        assert_eq!(store.chat_count(), 0);
    }
}
