//! The knowledge base adapter against the local knowledge base serving `samples/knowledge-base`, through the real
//! SDK client (`aws-sdk-bedrockagentruntime`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chat_aws::BedrockKnowledgeBase;
use chat_core::{MetadataFilter, Passage, Retriever, SearchError, SearchMode, SearchRequest};
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::{Value, json};

const KB_ID: &str = "NORTHWIND1";
const TIMEOUT: Duration = Duration::from_secs(5);

fn collection() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/knowledge-base")
}

async fn served() -> (LocalKnowledgeBase, BedrockKnowledgeBase) {
    served_with(KB_ID, TIMEOUT).await
}

/// A server for `KB_ID`, and an adapter asking for `id`.
async fn served_with(id: &str, timeout: Duration) -> (LocalKnowledgeBase, BedrockKnowledgeBase) {
    let server = LocalKnowledgeBase::start(KB_ID, collection())
        .await
        .unwrap();
    let config = server.sdk_config().await;
    let kb = BedrockKnowledgeBase::new(&config, id.to_string(), timeout);
    (server, kb)
}

fn request(query: &str, top: usize, filter: Option<MetadataFilter>) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        top,
        mode: SearchMode::Hybrid,
        filter,
    }
}

fn citations(passages: &[Passage]) -> Vec<String> {
    passages.iter().map(Passage::citation).collect()
}

/// The citation of the one passage found best for `query`, unfiltered.
async fn best_cited(kb: &BedrockKnowledgeBase, query: &str) -> Vec<String> {
    citations(&kb.retrieve(&request(query, 1, None)).await.unwrap())
}

fn documents(passages: &[Passage]) -> Vec<String> {
    let mut names: Vec<String> = passages
        .iter()
        .map(|p| p.citation().split('#').next().unwrap().to_string())
        .collect();
    names.dedup();
    names
}

fn eq(key: &str, value: Value) -> MetadataFilter {
    MetadataFilter::Equals {
        key: key.into(),
        value,
    }
}

fn has(key: &str, value: &str) -> MetadataFilter {
    MetadataFilter::ListContains {
        key: key.into(),
        value: json!(value),
    }
}

#[tokio::test]
async fn a_query_finds_the_right_passage_with_its_citation() {
    let (server, kb) = served().await;
    let found = kb
        .retrieve(&request("dental and vision coverage", 3, None))
        .await
        .unwrap();
    let best = &found[0];
    assert_eq!(best.citation(), "Benefit_Options.md#page=2");
    assert_eq!(best.source, "s3://local-knowledge-base/Benefit_Options.md");
    assert!(best.text.contains("Dental coverage includes two cleanings"));
    assert_eq!(best.page(), Some(2));
    assert_eq!(best.metadata["category"], "benefits");
    assert_eq!(
        best.metadata["x-amz-bedrock-kb-data-source-id"],
        "LOCALDATA1"
    );
    let score = best.score.unwrap();
    assert!(score > 0.0 && score <= 1.0, "{score}");
    assert!(found.windows(2).all(|w| w[0].score >= w[1].score));

    let sent = &server.requests()[0];
    assert_eq!(sent.knowledge_base_id, KB_ID);
    assert_eq!(sent.query(), Some("dental and vision coverage"));
    assert_eq!(sent.number_of_results(), Some(3));
    assert_eq!(sent.filter(), None);

    // A document without pages is cited by its name alone.
    let found = best_cited(&kb, "lactation rooms for nursing parents").await;
    assert_eq!(found, ["Parental_Leave.md"]);
}

#[tokio::test]
async fn top_bounds_the_passages() {
    let (server, kb) = served().await;
    for top in [1, 2, 4] {
        let found = kb
            .retrieve(&request("salary payroll vacation travel", top, None))
            .await
            .unwrap();
        assert_eq!(found.len(), top);
    }
    assert_eq!(
        server
            .requests()
            .iter()
            .map(|r| r.number_of_results())
            .collect::<Vec<_>>(),
        [Some(1), Some(2), Some(4)]
    );
    // Zero passages asked: the service is not called.
    assert!(
        kb.retrieve(&request("salary", 0, None))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn the_search_mode_reaches_the_service() {
    let (server, kb) = served().await;
    for mode in [SearchMode::Hybrid, SearchMode::Semantic] {
        let found = kb
            .retrieve(&SearchRequest {
                mode,
                ..request("hotel per diem", 2, None)
            })
            .await
            .unwrap();
        assert_eq!(documents(&found)[0], "Travel_Expenses.md");
    }
    let modes: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.search_type().map(str::to_string))
        .collect();
    assert_eq!(modes, [Some("HYBRID".into()), Some("SEMANTIC".into())]);
}

#[tokio::test]
async fn each_filter_kind_restricts_the_passages() {
    let (server, kb) = served().await;
    let search = |filter: MetadataFilter| {
        let kb = kb.clone();
        async move {
            kb.retrieve(&request("leave days benefits", 20, Some(filter)))
                .await
                .unwrap()
        }
    };
    let all = kb
        .retrieve(&request("leave days benefits", 20, None))
        .await
        .unwrap();
    assert!(documents(&all).len() > 2);

    let leave = search(eq("category", json!("leave"))).await;
    assert!(!leave.is_empty());
    assert!(leave.iter().all(|p| p.metadata["category"] == "leave"));

    let not_leave = search(MetadataFilter::NotEquals {
        key: "category".into(),
        value: json!("leave"),
    })
    .await;
    assert!(!not_leave.is_empty());
    assert!(not_leave.iter().all(|p| p.metadata["category"] != "leave"));

    let either = search(MetadataFilter::In {
        key: "category".into(),
        values: vec![json!("benefits"), json!("onboarding")],
    })
    .await;
    assert!(!either.is_empty());
    assert!(
        either
            .iter()
            .all(|p| ["benefits", "onboarding"].contains(&p.metadata["category"].as_str().unwrap()))
    );

    let numbers = search(eq("year", json!(2025))).await;
    assert!(!numbers.is_empty());
    assert!(numbers.iter().all(|p| p.metadata["year"] == 2025));

    let both = search(MetadataFilter::AndAll(vec![
        eq("department", json!("hr")),
        eq("year", json!(2026)),
    ]))
    .await;
    assert!(!both.is_empty());
    assert!(
        both.iter()
            .all(|p| p.metadata["department"] == "hr" && p.metadata["year"] == 2026)
    );

    let any = search(MetadataFilter::OrAll(vec![
        eq("category", json!("leave")),
        eq("category", json!("benefits")),
    ]))
    .await;
    let mut docs = documents(&any);
    docs.sort();
    docs.dedup();
    assert_eq!(
        docs,
        ["Benefit_Options.md", "Paid_Leave.md", "Parental_Leave.md"]
    );

    // Bedrock wants two to five members: a single-member group is sent as its member, more than five are nested.
    let single = search(MetadataFilter::OrAll(vec![eq("category", json!("leave"))])).await;
    assert_eq!(citations(&single), citations(&leave));
    let categories = [
        "leave",
        "benefits",
        "finance",
        "workplace",
        "security",
        "onboarding",
        "it",
    ];
    let seven = search(MetadataFilter::OrAll(
        categories
            .iter()
            .map(|c| eq("category", json!(c)))
            .collect(),
    ))
    .await;
    assert!(!seven.is_empty());
    assert!(
        seven
            .iter()
            .all(|p| categories.contains(&p.metadata["category"].as_str().unwrap()))
    );
    let sent: Vec<Value> = server
        .requests()
        .iter()
        .filter_map(|r| r.filter().cloned())
        .collect();
    assert!(sent.contains(&json!({"equals": {"key": "category", "value": "leave"}})));
    assert!(sent.iter().any(|f| {
        f["orAll"]
            .as_array()
            .is_some_and(|m| m.len() == 2 && m[0].get("orAll").is_some())
    }));

    // An empty OrAll holds for nothing: no call. An empty AndAll holds always: no filter sent.
    let before = server.requests().len();
    assert!(search(MetadataFilter::OrAll(vec![])).await.is_empty());
    assert_eq!(server.requests().len(), before);
    assert_eq!(
        citations(&search(MetadataFilter::AndAll(vec![])).await),
        citations(&all)
    );
    assert_eq!(server.requests().last().unwrap().filter(), None);
}

#[tokio::test]
async fn an_access_filter_keeps_other_peoples_documents_out() {
    let (_server, kb) = served().await;
    let query = "salary review merit increase payroll";
    // Without a filter, both private documents match the query.
    let open = kb.retrieve(&request(query, 20, None)).await.unwrap();
    let open = documents(&open);
    assert!(
        open.contains(&"Salary_Review_Alice.md".to_string()),
        "{open:?}"
    );
    assert!(open.contains(&"Payroll_Bob.md".to_string()), "{open:?}");

    let alice = kb
        .retrieve(&request(query, 20, Some(has("oids", "alice"))))
        .await
        .unwrap();
    assert_eq!(documents(&alice), ["Salary_Review_Alice.md"]);

    // Public documents plus alice's (a public document has no access lists), with her groups.
    let alice_or_public = MetadataFilter::OrAll(vec![
        has("oids", "alice"),
        has("groups", "engineering"),
        MetadataFilter::AndAll(vec![
            MetadataFilter::NotEquals {
                key: "category".into(),
                value: json!("compensation"),
            },
            MetadataFilter::NotEquals {
                key: "category".into(),
                value: json!("leadership"),
            },
        ]),
    ]);
    let query = "salary review payroll roadmap board";
    let restricted = [
        "Payroll_Bob.md",
        "Board_Minutes.md",
        "Salary_Review_Alice.md",
    ];
    // Unfiltered, restricted documents lead: a filter applied after the top would leave too few passages.
    let unfiltered = kb.retrieve(&request(query, 3, None)).await.unwrap();
    assert!(
        documents(&unfiltered)
            .iter()
            .any(|d| ["Payroll_Bob.md", "Board_Minutes.md"].contains(&d.as_str())),
        "{:?}",
        citations(&unfiltered)
    );
    let allowed = kb
        .retrieve(&request(query, 100, Some(alice_or_public.clone())))
        .await
        .unwrap();
    assert!(allowed.len() > 3, "{allowed:?}");
    for top in [1, 3] {
        let found = kb
            .retrieve(&request(query, top, Some(alice_or_public.clone())))
            .await
            .unwrap();
        assert_eq!(found.len(), top, "a filtered-out passage took a place");
    }
    let docs = documents(&allowed);
    assert!(!docs.contains(&"Payroll_Bob.md".to_string()), "{docs:?}");
    assert!(!docs.contains(&"Board_Minutes.md".to_string()), "{docs:?}");
    assert!(
        docs.contains(&"Salary_Review_Alice.md".to_string()),
        "{docs:?}"
    );
    assert!(
        docs.contains(&"Engineering_Roadmap.md".to_string()),
        "{docs:?}"
    );
    assert!(
        docs.iter().any(|d| !restricted.contains(&d.as_str())),
        "{docs:?}"
    );

    let bob_only = kb
        .retrieve(&request("salary review", 20, Some(has("oids", "bob"))))
        .await
        .unwrap();
    assert_eq!(documents(&bob_only), ["Payroll_Bob.md"]);
}

fn variant(err: &SearchError) -> &'static str {
    match err {
        SearchError::Throttled => "Throttled",
        SearchError::AccessDenied(_) => "AccessDenied",
        SearchError::NotFound(_) => "NotFound",
        SearchError::Rejected(_) => "Rejected",
        SearchError::Timeout(_) => "Timeout",
        SearchError::Unavailable(_) => "Unavailable",
        SearchError::Failed(_) => "Failed",
    }
}

#[tokio::test]
async fn each_fault_is_classified() {
    let (server, kb) = served().await;
    let cases = [
        ("throttle", "Throttled"),
        ("quota", "Throttled"),
        ("access-denied", "AccessDenied"),
        ("not-found", "NotFound"),
        ("validation", "Rejected"),
        ("internal", "Unavailable"),
        ("unavailable", "Unavailable"),
        ("bad-gateway", "Unavailable"),
        ("dependency-failed", "Unavailable"),
    ];
    for (fault, expected) in cases {
        let err = kb
            .retrieve(&request(&format!("tents [[kb-fault:{fault}]]"), 3, None))
            .await
            .unwrap_err();
        assert_eq!(variant(&err), expected, "{fault}: {err:?}");
    }
    // The SDK retried the transient ones (throttling, 5xx) before giving up.
    let throttled = server
        .requests()
        .iter()
        .filter(|r| r.query().is_some_and(|q| q.contains("kb-fault:throttle")))
        .count();
    assert!(throttled > 1, "{throttled}");

    // More than the service's 100 results asked: the adapter asks for 100 rather than be rejected.
    let found = kb.retrieve(&request("tents", 101, None)).await.unwrap();
    assert!(!found.is_empty());
    assert_eq!(
        server.requests().last().unwrap().number_of_results(),
        Some(100)
    );
}

#[tokio::test]
async fn a_slow_knowledge_base_times_out_promptly() {
    let (_server, kb) = served_with(KB_ID, Duration::from_millis(300)).await;
    let started = Instant::now();
    let err = kb
        .retrieve(&request("tents [[kb-delay-ms:3000]]", 3, None))
        .await
        .unwrap_err();
    assert!(matches!(err, SearchError::Timeout(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    // Under the timeout, the delay only slows the answer.
    let found = best_cited(&kb, "tent care [[kb-delay-ms:50]]").await;
    assert_eq!(found, ["Product_FAQ.md#page=2"]);
}

#[tokio::test]
async fn an_unknown_knowledge_base_is_not_found() {
    let (server, kb) = served_with("NOSUCHKB99", TIMEOUT).await;
    let err = kb.retrieve(&request("tents", 3, None)).await.unwrap_err();
    assert!(matches!(err, SearchError::NotFound(_)), "{err:?}");
    assert_eq!(server.requests()[0].knowledge_base_id, "NOSUCHKB99");
}
