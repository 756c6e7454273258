//! Grounded answers streamed: the first line's context carries `data_points` and the search's thoughts before any
//! text, in both protocol versions; native citations arrive as marks in the text, where the model cited.

use chat_stream::App;
use chat_testing::harness::{self, Backend, Streamed};
use serde_json::{Value, json};

/// The streaming function searching the local knowledge base (the sample collection), with `env` configured too.
async fn grounded(env: &[(&str, &str)]) -> App<chat_aws::BedrockModel, chat_aws::DynamoStore> {
    let env = [&[("KNOWLEDGE_BASE_ID", harness::KNOWLEDGE_BASE_ID)], env].concat();
    let backend = Backend::start(&env).await;
    let (kb, retriever) = harness::knowledge_base(&backend.config).await;
    // The servers live as long as the test: they are leaked with it.
    let model = backend.model().await;
    let app = App::new(
        model,
        backend.store.clone(),
        harness::auth(),
        backend.config.clone(),
    )
    .with_retriever(Some(retriever));
    Box::leak(Box::new((kb, backend)));
    app
}

async fn stream(app: &App<chat_aws::BedrockModel, chat_aws::DynamoStore>, body: Value) -> Streamed {
    Streamed::read(
        app.handle(harness::json_request("POST", "/chat/stream", Some(&body)))
            .await,
    )
    .await
}

const DENTAL: &str = "What does dental coverage include?";

#[tokio::test]
async fn the_first_line_carries_the_data_points_before_any_text_in_both_versions() {
    let app = grounded(&[]).await;
    for stream_flag in [None, Some(true)] {
        let mut body = json!({"messages": [{"role": "user", "content": DENTAL}]});
        if let Some(flag) = stream_flag {
            body["stream"] = json!(flag);
        }
        let s = stream(&app, body).await;
        assert_eq!(s.status, 200);
        let lines = s.lines();
        let (first_context, first_delta) = match stream_flag {
            None => (&lines[0]["context"], &lines[0]["delta"]),
            Some(_) => (
                &lines[0]["choices"][0]["context"],
                &lines[0]["choices"][0]["delta"],
            ),
        };
        assert!(first_delta.get("content").is_none(), "{}", lines[0]);
        let dp = &first_context["data_points"];
        assert_eq!(
            dp["citations"][0], "Benefit_Options.md#page=2",
            "{}",
            lines[0]
        );
        // The one passage for everyone with these words (the others were Bob's payroll, his alone).
        assert_eq!(dp["text"].as_array().unwrap().len(), 1);
        let titles: Vec<&str> = harness::texts_of(&first_context["thoughts"], "title");
        assert_eq!(
            titles,
            [
                "Prompt to generate search query",
                "Search using generated search query",
                "Search results",
                "Prompt to generate answer"
            ]
        );
        // No later line repeats the data points; the answer cites the first passage.
        assert!(
            lines[1..]
                .iter()
                .all(|l| !l.to_string().contains("data_points"))
        );
        let text: String = lines
            .iter()
            .filter_map(|l| {
                l["delta"]["content"]
                    .as_str()
                    .or(l["choices"][0]["delta"]["content"].as_str())
            })
            .collect();
        assert!(text.contains("[Benefit_Options.md#page=2]"), "{text}");
    }
}

#[tokio::test]
async fn native_citations_stream_as_marks_after_the_text_they_support() {
    let app = grounded(&[("CITATIONS", "native")]).await;
    let s = stream(
        &app,
        json!({"messages": [{"role": "user", "content": DENTAL}]}),
    )
    .await;
    assert_eq!(s.status, 200);
    let content = s.content();
    assert!(
        content.starts_with("Dental and vision coverage Dental coverage includes two cleanings a year, fillings at 80 percent and orthodontics for children up to a lifetime maximum of 2,000 dollars. [Benefit_Options.md#page=2]"),
        "{content}"
    );
    // The mark is a delta of its own, sent when the model's citation arrived.
    let lines = s.lines();
    assert!(
        lines
            .iter()
            .any(|l| l["delta"]["content"] == " [Benefit_Options.md#page=2]"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn a_knowledge_base_fault_is_a_status_before_the_stream_starts() {
    let app = grounded(&[]).await;
    let s = stream(
        &app,
        json!({"messages": [{"role": "user", "content": "dental [[kb-fault:throttle]]"}]}),
    )
    .await;
    assert_eq!(s.status, 429);
    assert!(s.text().contains("document search"), "{}", s.text());
}

/// The Responses API grounded in the documents (`OPENAI_RETRIEVAL=on`): each citation of a passage found is an
/// annotation of the message's `output_text`, announced as it closes and held by the completed response.
#[tokio::test]
async fn a_grounded_response_annotates_its_citations() {
    let app = grounded(&[("OPENAI_RETRIEVAL", "on")]).await;
    let body =
        json!({"model": harness::ECHO_MODEL, "input": DENTAL, "store": false, "stream": true});
    let s = Streamed::read(
        app.handle(harness::json_request("POST", "/v1/responses", Some(&body)))
            .await,
    )
    .await;
    assert_eq!(s.status, 200, "{}", s.text());
    let events: Vec<Value> = s
        .text()
        .split_terminator("\n\n")
        .map(|e| serde_json::from_str(e.split_once("\ndata: ").unwrap().1).unwrap())
        .collect();
    let completed = &events.last().unwrap()["response"];
    let message = completed["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "message")
        .unwrap();
    let text = message["content"][0]["text"].as_str().unwrap();
    let annotations = message["content"][0]["annotations"].as_array().unwrap();
    assert!(!annotations.is_empty(), "cited: {text}");
    for annotation in annotations {
        assert_eq!(annotation["type"], "file_citation");
        let name = annotation["filename"].as_str().unwrap();
        let at = annotation["index"].as_u64().unwrap() as usize;
        let rest: String = text.chars().skip(at).collect();
        assert!(
            rest.starts_with(&format!("[{name}]")),
            "{annotation} in {text}"
        );
    }
    let announced: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.annotation.added")
        .map(|e| &e["annotation"])
        .collect();
    assert_eq!(announced, annotations.iter().collect::<Vec<_>>());
}
