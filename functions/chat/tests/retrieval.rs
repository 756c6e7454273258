//! Answers grounded in the sample collection: the chat function with the real Bedrock and Bedrock Agent Runtime SDK
//! clients, talking to the local Bedrock server and the local knowledge base (tantivy over samples/knowledge-base).

mod support;

use chat::App;
use chat_core::ChatMode;
use chat_testing::harness::{self, Backend, JwtSigner};
use chat_testing::setup;
use lambda_http::http::StatusCode;
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::{Value, json};
use support::{Harness, Reply};

struct Grounded {
    kb: LocalKnowledgeBase,
    h: Harness,
}

/// The chat function searching the local knowledge base, its configuration holding `env` as well.
async fn grounded(env: &[(&str, &str)]) -> Grounded {
    let env = [&[("KNOWLEDGE_BASE_ID", harness::KNOWLEDGE_BASE_ID)], env].concat();
    let backend = Backend::start(&env).await;
    let (kb, retriever) = harness::knowledge_base(&backend.config).await;
    let auth = match env.iter().rev().find(|(k, _)| *k == "AUTH_MODE") {
        Some(_) => harness::auth_from(&env),
        None => harness::auth(),
    };
    let app = App::new(
        backend.model().await,
        backend.store.clone(),
        auth,
        backend.config.clone(),
    )
    .with_retriever(Some(retriever));
    Grounded {
        kb,
        h: Harness {
            bedrock: backend.bedrock,
            store: backend.store,
            app,
        },
    }
}

/// The question the collection answers from one passage for everyone.
const DENTAL: &str = "What does dental coverage include?";

/// The answer to `body` (the question on dental coverage) at `path`, which must be a 200.
async fn dental_answer(g: &Grounded, path: &str, body: &Value) -> Value {
    let reply = g.h.post(path, body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.json()
}

fn ask(question: &str, overrides: Value) -> Value {
    json!({"messages": [{"role": "user", "content": question}], "context": {"overrides": overrides}})
}

fn titles(context: &Value) -> Vec<String> {
    context["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap().to_string())
        .collect()
}

fn citations(context: &Value) -> Vec<String> {
    context["data_points"]["citations"]
        .as_array()
        .unwrap_or_else(|| panic!("no data_points in {context}"))
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_answer_cites_the_passages_it_was_grounded_in() {
    let g = grounded(&[]).await;
    let body = dental_answer(&g, "/chat", &ask(DENTAL, json!({}))).await;
    let context = &body["context"];
    let names = citations(context);
    // The one passage for everyone that holds these words (Bob's payroll mentions deductions that "include" his
    // medical plan, and is his alone).
    assert_eq!(names, ["Benefit_Options.md#page=2"], "{context}");
    let text = context["data_points"]["text"].as_array().unwrap();
    assert_eq!(text.len(), 1);
    assert!(
        text[0]
            .as_str()
            .unwrap()
            .starts_with("Benefit_Options.md#page=2: ## Dental and vision coverage Dental coverage includes two cleanings"),
        "{text:?}"
    );
    let content = body["message"]["content"].as_str().unwrap();
    assert!(content.contains("[Benefit_Options.md#page=2]"), "{content}");
    assert_eq!(
        titles(context),
        [
            "Prompt to generate search query",
            "Search using generated search query",
            "Search results",
            "Prompt to generate answer",
            "Token usage"
        ]
    );
    // The model wrote the query; the knowledge base got it, and the answer's prompt listed the sources.
    let searched = g.kb.requests();
    assert_eq!(searched.len(), 1);
    assert_eq!(
        searched[0].query(),
        Some("What does dental coverage include")
    );
    assert_eq!(searched[0].search_type(), Some("HYBRID"));
    assert_eq!(searched[0].number_of_results(), Some(3));
    let prompt = g.h.last_model_request();
    let question = prompt["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        question.contains(
            "\n\nSources:\nBenefit_Options.md#page=2: ## Dental and vision coverage Dental coverage"
        ),
        "{question}"
    );
    // The stored turn is the answer with its citation marks.
    let chat = body["sessionState"].as_str().unwrap();
    let history = g.h.history(chat).await;
    assert_eq!(history[1].1, content);
}

#[tokio::test]
async fn the_2024_01_28_dialect_carries_data_points_in_its_choice() {
    let g = grounded(&[]).await;
    let mut body = ask("How much is the wellness stipend?", json!({}));
    body["stream"] = json!(false);
    let reply = g.h.post("/chat", &body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let context = &reply.json()["choices"][0]["context"];
    assert_eq!(
        citations(context)[0],
        "Benefit_Options.md#page=3",
        "{context}"
    );
}

#[tokio::test]
async fn each_override_shapes_the_search() {
    let g = grounded(&[]).await;
    let question = "What does dental coverage include?";
    let post = |overrides: Value| {
        let body = ask(question, overrides);
        let h = &g.h;
        async move { h.post("/chat", &body).await }
    };

    let one = post(json!({"top": 1})).await.json();
    assert_eq!(citations(&one["context"]).len(), 1);
    assert_eq!(g.kb.requests().last().unwrap().number_of_results(), Some(1));

    let vectors = post(json!({"retrieval_mode": "vectors"})).await.json();
    assert_eq!(
        g.kb.requests().last().unwrap().search_type(),
        Some("SEMANTIC")
    );
    let search = &vectors["context"]["thoughts"][1];
    assert_eq!(search["props"]["retrieval_mode"], "vectors");
    assert_eq!(search["props"]["search_type"], "SEMANTIC");

    let text = post(json!({"retrieval_mode": "text"})).await.json();
    assert_eq!(
        g.kb.requests().last().unwrap().search_type(),
        Some("HYBRID")
    );
    let note = text["context"]["thoughts"][1]["props"]["note"]
        .as_str()
        .unwrap();
    assert!(note.contains("no text-only search"), "{note}");

    let excluded = post(json!({"exclude_category": "benefits"})).await.json();
    let names = citations(&excluded["context"]);
    assert!(
        !names.iter().any(|n| n.starts_with("Benefit_Options")),
        "{names:?}"
    );
    assert_eq!(
        g.kb.requests().last().unwrap().filter(),
        Some(&json!({"andAll": [
            {"notEquals": {"key": "category", "value": "benefits"}},
            {"orAll": [
                {"listContains": {"key": "oids", "value": "local-user"}},
                {"listContains": {"key": "groups", "value": "everyone"}}
            ]}
        ]}))
    );

    let nothing = post(json!({"minimum_search_score": 1})).await.json();
    assert!(citations(&nothing["context"]).is_empty());
    assert_eq!(
        nothing["message"]["content"],
        "The sources do not hold the answer to this question."
    );

    let high = post(json!({"minimum_search_score": 0.5})).await.json();
    for passage in high["context"]["thoughts"][2]["description"]
        .as_array()
        .unwrap()
    {
        assert!(passage["score"].as_f64().unwrap() >= 0.5, "{passage}");
    }

    let out_of_range = "context.overrides.top: must be between 1 and 20";
    let modes = r#"context.overrides.retrieval_mode: must be "hybrid", "vectors" or "text""#;
    for (bad, message) in [
        (json!({"top": 0}), out_of_range),
        (json!({"top": 21}), out_of_range),
        (json!({"retrieval_mode": "keyword"}), modes),
    ] {
        let reply = post(bad).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert_eq!(reply.json()["error"], message);
    }
}

#[tokio::test]
async fn without_query_rewriting_the_users_message_is_the_query() {
    let g = grounded(&[("QUERY_REWRITE", "false"), ("MAX_TOP", "5")]).await;
    let reply =
        g.h.post("/chat", &ask("dental coverage", json!({"top": 5})))
            .await
            .json();
    assert_eq!(g.kb.requests()[0].query(), Some("dental coverage"));
    assert_eq!(
        titles(&reply["context"])[..3],
        [
            "Search using user query",
            "Search results",
            "Prompt to generate answer"
        ]
    );
    // The model was asked once: for the answer.
    assert_eq!(g.h.bedrock.requests().len(), 1);
}

#[tokio::test]
async fn knowledge_base_faults_have_the_models_statuses_and_store_nothing() {
    let g = grounded(&[("KNOWLEDGE_BASE_TIMEOUT_MS", "300")]).await;
    let generic = "The app encountered an error processing your request.\nIf you are an administrator of the app, view the full error in the logs.";
    for (directive, status, message) in [
        ("[[kb-fault:throttle]]", StatusCode::TOO_MANY_REQUESTS, None),
        (
            "[[kb-fault:not-found]]",
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(generic),
        ),
        (
            "[[kb-fault:access-denied]]",
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(generic),
        ),
        (
            "[[kb-fault:unavailable]]",
            StatusCode::SERVICE_UNAVAILABLE,
            None,
        ),
        ("[[kb-delay-ms:2000]]", StatusCode::GATEWAY_TIMEOUT, None),
    ] {
        let reply =
            g.h.post(
                "/chat",
                &ask(&format!("dental coverage {directive}"), json!({})),
            )
            .await;
        assert_eq!(reply.status, status, "{directive}: {}", reply.body);
        if let Some(message) = message {
            assert_eq!(reply.json()["error"], message);
        }
    }
    assert_eq!(g.h.chat_count(ChatMode::Standard).await, 0);
}

#[tokio::test]
async fn the_chat_ui_answer_carries_the_citations_in_its_metadata() {
    let g = grounded(&[]).await;
    let question = json!({"messages": [{"role": "user", "content": DENTAL}]});
    let body = dental_answer(&g, "/chat-ui/chat", &question).await;
    let cited = body[0]["Metadata"]["Citations"].as_array().unwrap();
    assert_eq!(cited[0], "Benefit_Options.md#page=2", "{body}");
    let text = body[0]["Items"][0]["Text"].as_str().unwrap();
    for name in cited {
        assert!(
            text.contains(&format!("[{}]", name.as_str().unwrap())),
            "{text}"
        );
    }
}

#[tokio::test]
async fn native_citations_come_from_the_models_own_citations() {
    let g = grounded(&[("CITATIONS", "native")]).await;
    let body = dental_answer(&g, "/chat", &ask(DENTAL, json!({}))).await;
    // The passages went to Converse as search results with citations on, not into the question's text.
    let prompt = g.h.last_model_request();
    let content = prompt["messages"][0]["content"].as_array().unwrap();
    assert_eq!(
        content[0]["searchResult"]["title"],
        "Benefit_Options.md#page=2"
    );
    assert_eq!(content[0]["searchResult"]["citations"]["enabled"], true);
    assert!(
        !content.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("Sources:")
    );
    // Each sentence the model cited carries its mark, where the model put its citation.
    let text = body["message"]["content"].as_str().unwrap();
    assert!(
        text.starts_with("Dental and vision coverage Dental coverage includes two cleanings a year, fillings at 80 percent and orthodontics for children up to a lifetime maximum of 2,000 dollars. [Benefit_Options.md#page=2]"),
        "{text}"
    );
    assert_eq!(citations(&body["context"])[0], "Benefit_Options.md#page=2");
    // The buffered answer's citations came from Converse's citationsContent blocks, one per cited sentence.
    // Only one passage for everyone holds these words: one cited sentence.
    assert_eq!(text.matches(" [").count(), 1, "{text}");
}

#[tokio::test]
async fn a_multi_agent_round_searches_once_and_every_agent_cites_the_sources() {
    let g = grounded(&[]).await;
    let question = json!({"messages": [{"role": "user", "content": DENTAL}]});
    let body = dental_answer(&g, "/multi-agent-chat/batch", &question).await;
    let agents = &body.as_array().unwrap()[1..];
    assert_eq!(agents.len(), 6, "{body}");
    for message in agents {
        assert_eq!(
            message["Metadata"]["Citations"][0], "Benefit_Options.md#page=2",
            "{message}"
        );
        let text = message["Items"][0]["Text"].as_str().unwrap();
        assert!(text.contains("[Benefit_Options.md#page=2]"), "{text}");
    }
    // One search for the round; every agent's prompt listed the sources.
    assert_eq!(g.kb.requests().len(), 1);
    let prompt = g.h.last_model_request();
    let last = prompt["messages"].as_array().unwrap().last().unwrap();
    let text = last["content"].as_array().unwrap().last().unwrap()["text"]
        .as_str()
        .unwrap();
    assert!(
        text.contains("\n\nSources:\nBenefit_Options.md#page=2: "),
        "{text}"
    );
}

// --- the security filters, with JWT callers ---------------------------------------------------------------------

const ISSUER: &str = "https://issuer.retrieval.test";
const AUDIENCE: &str = "chat-backend";

fn token(signer: &JwtSigner, claims: Value) -> String {
    signer.token_with(ISSUER, AUDIENCE, |_| {}, claims)
}

async fn ask_as(g: &Grounded, token: &str, question: &str, overrides: Value) -> Reply {
    let request = setup::bearer_request(
        "POST",
        "/chat",
        Some(token),
        Some(&ask(question, overrides)),
    );
    Reply::buffered(g.h.app.handle(request).await)
}

#[tokio::test]
async fn a_users_documents_reach_that_user_only_in_every_retrieval_mode() {
    let signer = JwtSigner::new("k1");
    let jwks = signer.jwks_path();
    // Alice's `oid` is not her `sub`: access lists name her by it (JWT_OID_CLAIM=oid).
    let env = [
        setup::jwt_env(ISSUER, AUDIENCE, &jwks),
        vec![("JWT_OID_CLAIM", "oid")],
    ]
    .concat();
    let g = grounded(&env).await;
    let alice = token(
        &signer,
        json!({"sub": "alice-sub", "oid": "alice", "groups": ["engineering"]}),
    );
    let bob = token(&signer, json!({"sub": "bob", "oid": "bob"}));
    let mallory = token(
        &signer,
        json!({"sub": "mallory", "oid": "mallory", "groups": ["sales"]}),
    );
    let documents = |reply: &Reply| -> Vec<String> {
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        citations(&reply.json()["context"])
    };
    // Questions aimed squarely at the protected documents, with room for every passage that could match.
    let questions = [
        "Alice salary review merit increase",
        "Bob payroll overtime salary",
        "engineering roadmap next quarter",
    ];
    for mode in ["hybrid", "vectors", "text"] {
        let filters = json!({
            "retrieval_mode": mode, "top": 20,
            "use_oid_security_filter": true, "use_groups_security_filter": true
        });
        for question in questions {
            let for_alice = documents(&ask_as(&g, &alice, question, filters.clone()).await);
            let for_bob = documents(&ask_as(&g, &bob, question, filters.clone()).await);
            let for_mallory = documents(&ask_as(&g, &mallory, question, filters.clone()).await);
            // Each sees what is for everyone, and of the restricted documents only those naming them or their
            // group: Alice her review and the roadmap, Bob his payroll, Mallory none.
            let restricted = |found: &[String], own: &[&str]| -> Vec<String> {
                found
                    .iter()
                    .filter(|d| {
                        RESTRICTED.iter().any(|r| d.starts_with(r))
                            && !own.iter().any(|o| d.starts_with(o))
                    })
                    .cloned()
                    .collect()
            };
            let alices = ["Salary_Review_Alice", "Engineering_Roadmap"];
            assert_eq!(
                restricted(&for_alice, &alices),
                Vec::<String>::new(),
                "{mode} {question}"
            );
            assert_eq!(
                restricted(&for_bob, &["Payroll_Bob"]),
                Vec::<String>::new(),
                "{mode} {question}"
            );
            assert_eq!(
                restricted(&for_mallory, &[]),
                Vec::<String>::new(),
                "{mode} {question}"
            );
        }
        let own = documents(&ask_as(&g, &alice, questions[0], filters.clone()).await);
        assert!(
            own.iter().any(|d| d.starts_with("Salary_Review_Alice")),
            "{mode}: {own:?}"
        );
        let roadmap = documents(&ask_as(&g, &alice, questions[2], filters.clone()).await);
        assert!(
            roadmap.iter().any(|d| d.starts_with("Engineering_Roadmap")),
            "{mode}: {roadmap:?}"
        );
        let payroll = documents(&ask_as(&g, &bob, questions[1], filters.clone()).await);
        assert!(
            payroll.iter().any(|d| d.starts_with("Payroll_Bob")),
            "{mode}: {payroll:?}"
        );
    }
    // Without the overrides, or with them false, access holds all the same: the server's filter, not the
    // request, keeps them out.
    for overrides in [
        json!({"top": 20}),
        json!({"top": 20, "use_oid_security_filter": false, "use_groups_security_filter": false}),
    ] {
        let found = documents(&ask_as(&g, &bob, questions[0], overrides.clone()).await);
        assert!(
            !found.iter().any(|d| d.starts_with("Salary_Review_Alice")),
            "{overrides}: {found:?}"
        );
        let own = documents(&ask_as(&g, &alice, questions[0], overrides.clone()).await);
        assert!(
            own.iter().any(|d| d.starts_with("Salary_Review_Alice")),
            "{overrides}: {own:?}"
        );
    }
}

/// The sample collection's restricted documents.
const RESTRICTED: [&str; 4] = [
    "Salary_Review_Alice",
    "Payroll_Bob",
    "Engineering_Roadmap",
    "Board_Minutes",
];
