//! Quotas and the rate limit against the fakes (scripted model, in-memory store and counters): a user over a limit
//! is refused before any model call, on standard turns and multi-agent rounds alike; every model call of a turn is
//! counted (the query it wrote, each agent's message); another user is not affected.

use std::sync::Arc;

use chat_core::{
    AgentGroup, Caller, ChatError, ChatService, LimitKind, LimitOverrides, Limits, Periods,
    Retriever, TurnInput, UsageLedger,
};
use chat_testing::{FakeRetriever, InMemoryStore, InMemoryUsage, Script, ScriptedModel, settings};

type Service = ChatService<ScriptedModel, InMemoryStore>;

fn ask(text: &str) -> TurnInput {
    chat_testing::ask(text, None)
}

fn service(model: &ScriptedModel, usage: &InMemoryUsage, limits: Limits) -> Service {
    ChatService::new(model.clone(), InMemoryStore::new(), settings()).with_usage(
        Some(Arc::new(usage.clone()) as Arc<dyn UsageLedger>),
        limits,
    )
}

/// A scripted model with nothing to say yet, fresh counters, and a service on both under `limits`.
fn fakes(limits: Limits) -> (ScriptedModel, InMemoryUsage, Service) {
    let model = ScriptedModel::with([]);
    let usage = InMemoryUsage::new();
    let svc = service(&model, &usage, limits);
    (model, usage, svc)
}

async fn day_tokens(usage: &InMemoryUsage, owner: &str) -> (u64, u64) {
    let now = Periods::at(time::OffsetDateTime::now_utc());
    let read = usage.read(owner, &now).await.unwrap();
    (read.day.spent.tokens.total_tokens, read.day.turns)
}

#[tokio::test]
async fn turns_answer_until_the_daily_tokens_are_spent_then_none_reaches_the_model() {
    let model = ScriptedModel::with([]);
    let usage = InMemoryUsage::new();
    for _ in 0..3 {
        model.push(Script::text("fine").usage(150, 50));
    }
    let limits = Limits::default().with(LimitKind::TOKENS_PER_DAY, 400.0);
    let svc = service(&model, &usage, limits);
    let alice = Caller::owner("alice");
    svc.answer(&alice, &ask("one")).await.unwrap();
    svc.answer(&alice, &ask("two")).await.unwrap();
    // 400 tokens spent: the third turn is refused, and the model is not asked.
    assert_eq!(day_tokens(&usage, "alice").await, (400, 2));
    let calls = model.requests().len();
    let refused = svc.answer(&alice, &ask("three")).await.unwrap_err();
    let ChatError::OverLimit(over) = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(over.kind, LimitKind::TOKENS_PER_DAY);
    assert!((1..=86_400).contains(&over.retry_after));
    assert!(svc.stream(&alice, &ask("three")).await.is_err());
    assert!(
        svc.agent_round(&alice, &ask("three")).await.is_err(),
        "a multi-agent round is refused too"
    );
    assert_eq!(model.requests().len(), calls);
    // Another user is not affected.
    svc.answer(&Caller::owner("bob"), &ask("hello"))
        .await
        .unwrap();
    assert_eq!(day_tokens(&usage, "bob").await, (200, 1));
}

#[tokio::test]
async fn the_rate_limit_refuses_the_sixth_request_of_a_minute() {
    let (_, _, svc) = fakes(Limits::default().with(LimitKind::REQUESTS_PER_MINUTE, 5.0));
    let alice = Caller::owner("alice");
    let mut answered = 0;
    let mut refused = None;
    for i in 0..6 {
        match svc.answer(&alice, &ask(&format!("q{i}"))).await {
            Ok(_) => answered += 1,
            Err(e) => refused = Some(e),
        }
    }
    // Six within one sliding minute: the sixth is refused, whenever the clock's minute turns. It may try again
    // once the window holds fewer than five: within the 70 s a window of seven buckets spans.
    assert_eq!(answered, 5);
    let Some(ChatError::OverLimit(over)) = refused else {
        panic!("the sixth is refused")
    };
    assert!(over.is_rate());
    assert!((1..=70).contains(&over.retry_after));
}

#[tokio::test]
async fn an_operators_item_raises_one_users_limit() {
    let (model, usage, svc) = fakes(Limits::default().with(LimitKind::TOKENS_PER_DAY, 10.0));
    let (carol, q) = (Caller::owner("carol"), ask("q"));
    model.push(Script::text("a").usage(20, 5));
    svc.answer(&carol, &q).await.unwrap();
    assert!(svc.answer(&carol, &q).await.is_err());
    usage.set_limits(
        "carol",
        LimitOverrides::default().with(LimitKind::TOKENS_PER_DAY, 1_000.0),
    );
    svc.answer(&carol, &q).await.unwrap();
}

#[tokio::test]
async fn every_model_call_counts_the_query_it_wrote_and_each_agents_message() {
    let model = ScriptedModel::with([
        Script::text("dental coverage").usage(30, 3),
        Script::text("Two cleanings.").usage(100, 10),
    ]);
    let usage = InMemoryUsage::new();
    let mut s = settings();
    s.retrieval.query_rewrite = true;
    let retriever = FakeRetriever::new();
    retriever.push(vec![FakeRetriever::passage(
        "Dental: two cleanings.",
        "s3://docs/Benefits.pdf",
        0.9,
    )]);
    let svc = ChatService::new(model.clone(), InMemoryStore::new(), s)
        .with_retriever(Some(Arc::new(retriever) as Arc<dyn Retriever>))
        .with_usage(
            Some(Arc::new(usage.clone()) as Arc<dyn UsageLedger>),
            Limits::default(),
        );
    let answer = svc
        .answer(&Caller::owner("dana"), &ask("What does dental cover?"))
        .await
        .unwrap();
    assert_eq!(answer.spent.model_calls, 2);
    assert_eq!(answer.spent.totals.tokens.total_tokens, 143);
    // The answer's own usage is its last call's, as the protocol reports it.
    assert_eq!(answer.usage.total_tokens, 110);
    assert_eq!(day_tokens(&usage, "dana").await, (143, 1));

    // A multi-agent round: each agent's message is a model call.
    let group = AgentGroup {
        max_turns: 3,
        ..AgentGroup::default_group()
    };
    for _ in 0..3 {
        model.push(Script::text("noted").usage(40, 2));
    }
    let plain = ChatService::new(model.clone(), InMemoryStore::new(), settings()).with_usage(
        Some(Arc::new(usage.clone()) as Arc<dyn UsageLedger>),
        Limits::default(),
    );
    let round = plain
        .whole_round(&Caller::owner("erin"), &group, &ask("Plan it"))
        .await
        .unwrap();
    assert_eq!(round.spent().model_calls, 3);
    assert_eq!(day_tokens(&usage, "erin").await, (126, 1));
}

#[tokio::test]
async fn a_stream_cut_off_before_its_end_is_counted_too() {
    let model = ScriptedModel::with([Script::pieces([
        "Parental leave ",
        "is sixteen weeks ",
        "at full pay.",
    ])
    .usage(500, 9)]);
    let usage = InMemoryUsage::new();
    let svc = service(&model, &usage, Limits::default());
    let frank = Caller::owner("frank");
    let mut turn = svc
        .stream(&frank, &ask("How long is leave?"))
        .await
        .unwrap();
    // The client reads the first words and hangs up: the model had not reported its usage yet.
    let Some(chat_core::TurnEvent::Text(first)) = turn.next().await.unwrap() else {
        panic!("text first")
    };
    assert!(!first.is_empty());
    let spent = turn.spent_so_far();
    assert_eq!(spent.model_calls, 1);
    assert!(
        spent.totals.tokens.input_tokens > 0,
        "the prompt is counted"
    );
    assert!(
        spent.totals.tokens.output_tokens > 0,
        "what was written is counted"
    );
    turn.close_unfinished().await;
    let (tokens, turns) = day_tokens(&usage, "frank").await;
    assert_eq!((tokens, turns), (spent.totals.tokens.total_tokens, 1));
    assert_eq!(
        usage
            .read("frank", &Periods::at(time::OffsetDateTime::now_utc()))
            .await
            .unwrap()
            .day
            .reserved
            .tokens,
        0,
        "its reservation released"
    );

    // Read to its end, the model's own figures are taken.
    model.push(
        Script::pieces(["Parental leave ", "is sixteen weeks ", "at full pay."]).usage(500, 9),
    );
    let mut turn = svc
        .stream(&frank, &ask("How long is leave?"))
        .await
        .unwrap();
    while let Some(event) = turn.next().await.unwrap() {
        if let chat_core::TurnEvent::End(_) = event {
            break;
        }
    }
    assert_eq!(turn.spent_so_far().totals.tokens.total_tokens, 509);
}
