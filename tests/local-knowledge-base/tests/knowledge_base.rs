//! The server through the real SDK client: what it answers parses as Bedrock's answers do, and it rejects what the
//! service rejects.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use aws_sdk_bedrockagentruntime::Client;
use aws_sdk_bedrockagentruntime::error::ProvideErrorMetadata;
use aws_sdk_bedrockagentruntime::types::{
    FilterAttribute, KnowledgeBaseQuery, KnowledgeBaseRetrievalConfiguration,
    KnowledgeBaseVectorSearchConfiguration, RetrievalFilter, RetrievalResultContentType,
    RetrievalResultLocationType, SearchType,
};
use aws_smithy_types::Document;
use local_knowledge_base::{LocalKnowledgeBase, PAGE_NUMBER_KEY};

const KB_ID: &str = "KB12345678";

async fn start() -> (LocalKnowledgeBase, Client) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/knowledge-base");
    let server = LocalKnowledgeBase::start(KB_ID, dir).await.unwrap();
    let client = Client::new(&server.sdk_config().await);
    (server, client)
}

fn attribute(key: &str, value: impl Into<Document>) -> FilterAttribute {
    FilterAttribute::builder()
        .key(key)
        .value(value.into())
        .build()
        .unwrap()
}

fn category(value: &str) -> RetrievalFilter {
    RetrievalFilter::Equals(attribute("category", value))
}

/// The sources (file names, with their pages) of a search, or the service's error code.
async fn search(
    client: &Client,
    query: &str,
    top: i32,
    filter: Option<RetrievalFilter>,
) -> Result<Vec<String>, String> {
    let config = KnowledgeBaseVectorSearchConfiguration::builder()
        .number_of_results(top)
        .set_filter(filter)
        .build();
    client
        .retrieve()
        .knowledge_base_id(KB_ID)
        .retrieval_query(KnowledgeBaseQuery::builder().text(query).build())
        .retrieval_configuration(
            KnowledgeBaseRetrievalConfiguration::builder()
                .vector_search_configuration(config)
                .build(),
        )
        .send()
        .await
        .map(|out| {
            out.retrieval_results()
                .iter()
                .map(|r| {
                    let uri = r.location().unwrap().s3_location().unwrap().uri().unwrap();
                    let name = uri.rsplit('/').next().unwrap().to_string();
                    match r.metadata().and_then(|m| m.get(PAGE_NUMBER_KEY)) {
                        Some(Document::Number(n)) => format!("{name}#{}", n.to_f64_lossy()),
                        _ => name,
                    }
                })
                .collect()
        })
        .map_err(|e| e.code().unwrap_or("no code").to_string())
}

#[tokio::test]
async fn an_answer_parses_as_bedrocks_does() {
    let started = Instant::now();
    let (server, client) = start().await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(server.passages() > 15);
    let out = client
        .retrieve()
        .knowledge_base_id(KB_ID)
        .retrieval_query(
            KnowledgeBaseQuery::builder()
                .text("eye exam glasses")
                .build(),
        )
        .retrieval_configuration(
            KnowledgeBaseRetrievalConfiguration::builder()
                .vector_search_configuration(
                    KnowledgeBaseVectorSearchConfiguration::builder()
                        .number_of_results(1)
                        .override_search_type(SearchType::Semantic)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(out.next_token(), None);
    let [result] = out.retrieval_results() else {
        panic!("{out:?}")
    };
    let content = result.content().unwrap();
    assert_eq!(content.r#type(), Some(&RetrievalResultContentType::Text));
    assert!(
        content
            .text()
            .contains("Vision coverage pays for one eye exam")
    );
    let location = result.location().unwrap();
    assert_eq!(location.r#type(), &RetrievalResultLocationType::S3);
    assert_eq!(
        location.s3_location().unwrap().uri(),
        Some("s3://local-knowledge-base/Benefit_Options.md")
    );
    let score = result.score().unwrap();
    assert!(score > 0.0 && score <= 1.0);
    let metadata = result.metadata().unwrap();
    assert_eq!(
        metadata[PAGE_NUMBER_KEY]
            .as_number()
            .unwrap()
            .to_f64_lossy(),
        2.0
    );
    assert_eq!(metadata["category"].as_string(), Some("benefits"));
    assert_eq!(
        metadata["x-amz-bedrock-kb-source-uri"].as_string(),
        Some("s3://local-knowledge-base/Benefit_Options.md")
    );
    assert!(metadata.contains_key("x-amz-bedrock-kb-chunk-id"));
    assert_eq!(server.requests()[0].search_type(), Some("SEMANTIC"));
}

#[tokio::test]
async fn the_service_rules_on_requests_hold() {
    let (_server, client) = start().await;
    for top in [0, 101] {
        assert_eq!(
            search(&client, "tents", top, None).await,
            Err("ValidationException".into()),
            "numberOfResults {top}"
        );
    }
    assert!(search(&client, "tents", 100, None).await.is_ok());
    // andAll / orAll take two to five members.
    let one = RetrievalFilter::OrAll(vec![category("leave")]);
    assert_eq!(
        search(&client, "leave", 5, Some(one)).await,
        Err("ValidationException".into())
    );
    let six = RetrievalFilter::AndAll(vec![category("leave"); 6]);
    assert_eq!(
        search(&client, "leave", 5, Some(six)).await,
        Err("ValidationException".into())
    );
    let five = RetrievalFilter::AndAll(vec![category("leave"); 5]);
    assert!(
        !search(&client, "leave", 5, Some(five))
            .await
            .unwrap()
            .is_empty()
    );
    // `in` takes a list.
    let not_a_list = RetrievalFilter::In(attribute("category", "leave"));
    assert_eq!(
        search(&client, "leave", 5, Some(not_a_list)).await,
        Err("ValidationException".into())
    );
}

#[tokio::test]
async fn the_other_filter_operators_work_through_the_sdk() {
    let (_server, client) = start().await;
    let docs = |found: Vec<String>| {
        let mut names: Vec<String> = found
            .into_iter()
            .map(|s| s.split('#').next().unwrap().to_string())
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let query = "salary review roadmap payroll leave";
    let newer = RetrievalFilter::GreaterThan(attribute("year", Document::from(2025u64)));
    let older = RetrievalFilter::LessThanOrEquals(attribute("year", Document::from(2024u64)));
    let starts = RetrievalFilter::StartsWith(attribute("department", "engin"));
    let contains = RetrievalFilter::StringContains(attribute("oids", "ali"));
    let not_in = RetrievalFilter::NotIn(attribute(
        "category",
        Document::Array(vec!["compensation".into(), "leadership".into()]),
    ));
    let found = docs(search(&client, query, 100, Some(starts)).await.unwrap());
    assert_eq!(found, ["Engineering_Roadmap.md"]);
    let found = docs(search(&client, query, 100, Some(contains)).await.unwrap());
    assert_eq!(found, ["Salary_Review_Alice.md"]);
    let found = docs(search(&client, query, 100, Some(not_in)).await.unwrap());
    assert!(!found.is_empty());
    for restricted in [
        "Salary_Review_Alice.md",
        "Payroll_Bob.md",
        "Board_Minutes.md",
    ] {
        assert!(!found.contains(&restricted.to_string()), "{found:?}");
    }
    let newer = docs(search(&client, query, 100, Some(newer)).await.unwrap());
    assert!(newer.contains(&"Paid_Leave.md".to_string()), "{newer:?}");
    assert!(
        !newer.contains(&"Parental_Leave.md".to_string()),
        "{newer:?}"
    );
    let older = docs(
        search(&client, "remote help desk", 100, Some(older))
            .await
            .unwrap(),
    );
    assert_eq!(older, ["IT_Help_Desk.md", "Remote_Work.md"]);
}

#[tokio::test]
async fn faults_arrive_with_the_services_error_codes() {
    let (_server, client) = start().await;
    for (fault, code) in [
        ("throttle", "ThrottlingException"),
        ("access-denied", "AccessDeniedException"),
        ("not-found", "ResourceNotFoundException"),
        ("validation", "ValidationException"),
        ("quota", "ServiceQuotaExceededException"),
        ("dependency-failed", "DependencyFailedException"),
        ("internal", "InternalServerException"),
        ("bad-gateway", "BadGatewayException"),
        ("unavailable", "ServiceUnavailableException"),
    ] {
        let got = search(&client, &format!("[[kb-fault:{fault}]] tents"), 3, None).await;
        assert_eq!(got, Err(code.to_string()), "{fault}");
    }
    let started = Instant::now();
    let found = search(&client, "tent care [[kb-delay-ms:200]]", 1, None).await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(found, Ok(vec!["Product_FAQ.md#2".to_string()]));
}
