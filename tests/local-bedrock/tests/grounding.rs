//! Grounded answers of the local model, driven through the real `aws-sdk-bedrockruntime` client: prompted grounding
//! (a Sources section, bracket citations), query rewriting, native citations of `searchResult` blocks, and the
//! plain echo staying as it was.

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::types::{
    CitationGeneratedContent, CitationLocation, CitationSourceContent, CitationsConfig,
    ContentBlock, ContentBlockDelta, ConverseOutput, ConverseStreamOutput, SearchResultBlock,
    SearchResultContentBlock, SystemContentBlock,
};
use local_bedrock::Operation;
use support::{MODEL, start, text, user};

mod support;

const FOLLOW_UPS: &str =
    "\n\n<<What else should I know?>>\n<<Can you give an example?>>\n<<Where can I read more?>>";

fn search_result(source: &str, title: &str, passage: &str, cited: Option<bool>) -> ContentBlock {
    let block = SearchResultBlock::builder()
        .source(source)
        .title(title)
        .content(
            SearchResultContentBlock::builder()
                .text(passage)
                .build()
                .unwrap(),
        )
        .set_citations(
            cited.map(|enabled| CitationsConfig::builder().enabled(enabled).build().unwrap()),
        );
    ContentBlock::SearchResult(block.build().unwrap())
}

/// `$call` (a `converse` or a `converse_stream`: their builders are of two types, with the same setters) of the
/// model, with the system prompt `$system` if any and the user's `$content`.
macro_rules! asked {
    ($call:expr, $system:expr, $content:expr) => {
        $call
            .model_id(MODEL)
            .set_system($system.map(|s| vec![SystemContentBlock::Text(s.to_string())]))
            .messages(user($content))
    };
}

/// The answer's content blocks of a `converse` call.
async fn converse(
    client: &Client,
    system: Option<&str>,
    content: Vec<ContentBlock>,
) -> (Vec<ContentBlock>, i32) {
    let output = asked!(client.converse(), system, content)
        .send()
        .await
        .expect("converse answers");
    let input_tokens = output.usage().map(|u| u.input_tokens()).unwrap_or_default();
    match output.output() {
        Some(ConverseOutput::Message(m)) => (m.content().to_vec(), input_tokens),
        other => panic!("no message: {other:?}"),
    }
}

/// The text of a `converse` answer made of `text` blocks only.
async fn converse_text(
    client: &Client,
    system: Option<&str>,
    content: Vec<ContentBlock>,
) -> String {
    let (blocks, _) = converse(client, system, content).await;
    blocks
        .iter()
        .map(|b| b.as_text().expect("a text block").as_str())
        .collect()
}

/// Every event of a `converse_stream` answer.
async fn stream(
    client: &Client,
    system: Option<&str>,
    content: Vec<ContentBlock>,
) -> Vec<ConverseStreamOutput> {
    let mut output = asked!(client.converse_stream(), system, content)
        .send()
        .await
        .expect("the stream opens");
    let mut events = Vec::new();
    while let Some(event) = output.stream.recv().await.expect("the stream reads") {
        events.push(event);
    }
    events
}

fn deltas(events: &[ConverseStreamOutput]) -> Vec<&ContentBlockDelta> {
    events
        .iter()
        .filter_map(|e| match e {
            ConverseStreamOutput::ContentBlockDelta(d) => d.delta(),
            _ => None,
        })
        .collect()
}

fn stream_text(events: &[ConverseStreamOutput]) -> String {
    deltas(events)
        .into_iter()
        .filter_map(|d| d.as_text().ok().map(String::as_str))
        .collect()
}

async fn stream_text_of(
    client: &Client,
    system: Option<&str>,
    content: Vec<ContentBlock>,
) -> String {
    stream_text(&stream(client, system, content).await)
}

/// The text of `prompt`'s answer, asked with `system`, as `converse` and as `converse_stream` answer it.
async fn both_texts(client: &Client, system: Option<&str>, prompt: &str) -> [String; 2] {
    [
        converse_text(client, system, vec![text(prompt)]).await,
        stream_text_of(client, system, vec![text(prompt)]).await,
    ]
}

const GROUNDED: &str = "What are my benefit and travel options?\n\nSources:\n\
    Benefit_Options.md#page=2: Employees may choose between two plans. The plans differ in cost.\n\
    Travel_Policy.md: Travel must be booked through the portal! Receipts are due within 30 days.";
const GROUNDED_ANSWER: &str = "Employees may choose between two plans. [Benefit_Options.md#page=2] \
    Travel must be booked through the portal! [Travel_Policy.md]";

#[tokio::test]
async fn a_sources_section_is_answered_with_bracket_citations() {
    let (_server, client) = start().await;
    assert_eq!(
        converse_text(&client, None, vec![text(GROUNDED)]).await,
        GROUNDED_ANSWER
    );
    let events = stream(&client, None, vec![text(GROUNDED)]).await;
    assert_eq!(stream_text(&events), GROUNDED_ANSWER);
    // Word pieces, as for any answer.
    assert_eq!(deltas(&events).len(), GROUNDED_ANSWER.split(' ').count());
}

#[tokio::test]
async fn first_sentences_need_a_space_after_the_stop_and_are_cut_after_30_words() {
    let (_server, client) = start().await;
    let long: Vec<String> = (1..=40).map(|i| format!("w{i}")).collect();
    let prompt = format!(
        "Q?\n\nSources:\n\
         a.pdf#page=1: The rate is 3.5 percent for e.g.staff members?\n\
         \n\
         a line without a citation name\n\
         b.md: {}",
        long.join(" ")
    );
    let expected = format!(
        "The rate is 3.5 percent for e.g.staff members? [a.pdf#page=1] {} [b.md]",
        long[..30].join(" ")
    );
    assert_eq!(
        converse_text(&client, None, vec![text(&prompt)]).await,
        expected
    );
}

#[tokio::test]
async fn the_last_sources_section_counts_and_follow_ups_still_end_the_answer() {
    let (_server, client) = start().await;
    let prompt = "Quoting \"x\n\nSources:\nold.md: Not this one.\" what now?\n\nSources:\nnew.md: This one. Not this.";
    let system = "Answer, then ask three <<follow-up questions>>.";
    let expected = format!("This one. [new.md]{FOLLOW_UPS}");
    assert_eq!(
        both_texts(&client, Some(system), prompt).await,
        [expected.as_str(); 2]
    );
}

#[tokio::test]
async fn an_empty_sources_section_is_answered_with_the_fixed_sentence() {
    let (_server, client) = start().await;
    const NO_ANSWER: &str = "The sources do not hold the answer to this question.";
    for prompt in [
        "What is the dress code?\n\nSources:\n",
        "What is the dress code?\n\nSources:",
    ] {
        assert_eq!(
            both_texts(&client, None, prompt).await,
            [NO_ANSWER, NO_ANSWER],
            "{prompt:?}"
        );
    }
}

#[tokio::test]
async fn say_and_faults_still_apply_to_grounded_prompts() {
    let (_server, client) = start().await;
    let said = format!("[[say:Scripted.]] {GROUNDED}");
    assert_eq!(
        converse_text(&client, None, vec![text(&said)]).await,
        "Scripted."
    );
    let faulty = format!("[[fault:access-denied]] {GROUNDED}");
    let error = client
        .converse()
        .model_id(MODEL)
        .messages(user(vec![text(&faulty)]))
        .send()
        .await
        .expect_err("the fault directive applies");
    assert!(error.into_service_error().is_access_denied_exception());
}

const REWRITE_PROMPT: &str = "Below is a history of the conversation so far, and a new question asked by the user. \
    Generate a search query based on the conversation and the new question. \
    Do not include any text inside [] or <<>> in the search query terms.";

#[tokio::test]
async fn a_query_rewrite_is_answered_with_the_search_query() {
    let (server, client) = start().await;
    let cases = [
        (
            "Generate search query for: What does my plan cover? [[delay-ms:1]] [[say:not this]]",
            "What does my plan cover",
        ),
        (
            "Generate search query for:   [[kb-fault:throttle]]  What does   my plan cover??  ",
            "[[kb-fault:throttle]] What does my plan cover?",
        ),
        (
            "Generate search query for: old question\nGenerate search query for: [[kb-delay-ms:500]] travel policy",
            "[[kb-delay-ms:500]] travel policy",
        ),
        ("Is [[deltas:3]] travel covered?", "Is travel covered"),
    ];
    for (prompt, query) in cases {
        // The rewrite prompt holds `<<>>`, yet no follow-up questions are added.
        assert_eq!(
            both_texts(&client, Some(REWRITE_PROMPT), prompt).await,
            [query, query]
        );
    }
    // The rewrite prompt reached the server whole.
    let requests = server.requests();
    assert_eq!(requests.len(), 2 * cases.len());
    assert_eq!(requests[1].operation, Operation::ConverseStream);
    assert_eq!(requests[1].body["system"][0]["text"], REWRITE_PROMPT);
    assert_eq!(
        requests[1].body["messages"][0]["content"][0]["text"],
        cases[0].0
    );
}

#[tokio::test]
async fn faults_of_the_local_model_apply_to_a_query_rewrite() {
    let (_server, client) = start().await;
    let fault = vec![text("Generate search query for: x [[fault:not-found]]")];
    let error = asked!(client.converse(), Some(REWRITE_PROMPT), fault)
        .send()
        .await
        .expect_err("the fault directive applies");
    assert!(error.into_service_error().is_resource_not_found_exception());
}

const QUESTION: &str = "What are my options?";
fn results() -> Vec<ContentBlock> {
    vec![
        text(QUESTION),
        search_result(
            "s3://docs/Benefit_Options.md",
            "Benefit_Options.md#page=2",
            "Employees may choose between two plans. The plans differ in cost.",
            Some(true),
        ),
        search_result(
            "s3://docs/Handbook.md",
            "Handbook.md",
            "Holidays follow the calendar. Ask HR.",
            Some(false),
        ),
        search_result(
            "s3://docs/Travel_Policy.md",
            "Travel_Policy.md",
            "Travel must be booked through the portal! Receipts are due within 30 days.",
            Some(true),
        ),
    ]
}
const S0: &str = "Employees may choose between two plans.";
const S1: &str = "Holidays follow the calendar.";
const S2: &str = "Travel must be booked through the portal!";

#[tokio::test]
async fn search_results_are_cited_natively_in_a_stream() {
    let (server, client) = start().await;
    let events = stream(&client, None, results()).await;
    assert_eq!(stream_text(&events), format!("{S0} {S1} {S2}"));

    // Text before each citation: the sentence it cites ends right there.
    let mut text_so_far = String::new();
    let mut cited = Vec::new();
    for delta in deltas(&events) {
        match delta {
            ContentBlockDelta::Text(t) => text_so_far.push_str(t),
            ContentBlockDelta::Citation(c) => {
                let Some(CitationLocation::SearchResultLocation(location)) = c.location() else {
                    panic!("a search result location: {c:?}");
                };
                assert_eq!((location.start(), location.end()), (Some(0), Some(1)));
                let source_text = c.source_content()[0].text().unwrap().to_string();
                cited.push((
                    location.search_result_index().unwrap(),
                    c.title().unwrap().to_string(),
                    c.source().unwrap().to_string(),
                    source_text,
                    text_so_far.clone(),
                ));
            }
            other => panic!("unexpected delta {other:?}"),
        }
    }
    assert_eq!(
        cited,
        [
            (
                0,
                "Benefit_Options.md#page=2".into(),
                "s3://docs/Benefit_Options.md".into(),
                S0.into(),
                S0.into()
            ),
            (
                2,
                "Travel_Policy.md".into(),
                "s3://docs/Travel_Policy.md".into(),
                S2.into(),
                format!("{S0} {S1} {S2}")
            ),
        ]
    );
    // Text deltas are word pieces, the space between sentences one of them.
    let texts = deltas(&events).into_iter().filter(|d| d.is_text()).count();
    assert_eq!(
        texts,
        S0.split(' ').count() + 1 + S1.split(' ').count() + 1 + S2.split(' ').count()
    );
    assert_eq!(server.requests()[0].deltas_sent_at.len(), texts);

    // The search results reached the server whole.
    let body = &server.requests()[0].body;
    assert_eq!(
        body["messages"][0]["content"][1]["searchResult"]["title"],
        "Benefit_Options.md#page=2"
    );
    assert_eq!(
        body["messages"][0]["content"][2]["searchResult"]["citations"]["enabled"],
        false
    );
    assert_eq!(
        body["messages"][0]["content"][3]["searchResult"]["content"][0]["text"],
        "Travel must be booked through the portal! Receipts are due within 30 days."
    );
}

#[tokio::test]
async fn search_results_are_cited_natively_in_a_buffered_answer() {
    let (_server, client) = start().await;
    let (blocks, input_tokens) = converse(&client, None, results()).await;
    let citation = |block: &ContentBlock| {
        let c = block
            .as_citations_content()
            .expect("a citationsContent block");
        assert_eq!(c.citations().len(), 1);
        let citation = &c.citations()[0];
        let Some(CitationLocation::SearchResultLocation(location)) = citation.location() else {
            panic!("a search result location: {citation:?}");
        };
        let CitationGeneratedContent::Text(generated) = &c.content()[0] else {
            panic!()
        };
        let CitationSourceContent::Text(source_text) = &citation.source_content()[0] else {
            panic!()
        };
        (
            generated.clone(),
            location.search_result_index().unwrap(),
            citation.title().unwrap().to_string(),
            citation.source().unwrap().to_string(),
            source_text.clone(),
        )
    };
    assert_eq!(blocks.len(), 3, "{blocks:?}");
    assert_eq!(
        citation(&blocks[0]),
        (
            S0.into(),
            0,
            "Benefit_Options.md#page=2".into(),
            "s3://docs/Benefit_Options.md".into(),
            S0.into()
        )
    );
    assert_eq!(blocks[1].as_text().unwrap(), &format!(" {S1} "));
    assert_eq!(
        citation(&blocks[2]),
        (
            S2.into(),
            2,
            "Travel_Policy.md".into(),
            "s3://docs/Travel_Policy.md".into(),
            S2.into()
        )
    );
    // The question and the search results' texts are the input.
    let words = |t: &str| t.split_whitespace().count() as i32;
    assert_eq!(
        input_tokens,
        words(QUESTION)
            + words("Employees may choose between two plans. The plans differ in cost.")
            + words("Holidays follow the calendar. Ask HR.")
            + words("Travel must be booked through the portal! Receipts are due within 30 days.")
    );
}

#[tokio::test]
async fn cited_sentences_are_separated_by_a_text_block() {
    let (_server, client) = start().await;
    let content = vec![
        search_result("a", "A", "First. x", Some(true)),
        search_result("b", "B", "Second one", Some(true)),
        // Citations are off unless enabled.
        search_result("c", "C", "Third", None),
    ];
    let (blocks, _) = converse(&client, None, content).await;
    let shape: Vec<String> = blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => format!("text {t:?}"),
            ContentBlock::CitationsContent(c) => format!(
                "cited {:?} by {:?}",
                c.content()[0].as_text().unwrap(),
                c.citations()[0].title().unwrap()
            ),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "cited \"First.\" by \"A\"",
            "text \" \"",
            "cited \"Second one\" by \"B\"",
            "text \" Third\"",
        ]
    );
}

#[tokio::test]
async fn say_wins_over_search_results() {
    let (_server, client) = start().await;
    let mut content = results();
    content[0] = text("[[say:Scripted answer.]]");
    assert_eq!(
        converse_text(&client, None, content.clone()).await,
        "Scripted answer."
    );
    let events = stream(&client, None, content).await;
    assert_eq!(stream_text(&events), "Scripted answer.");
    assert!(deltas(&events).iter().all(|d| d.is_text()));
}

#[tokio::test]
async fn an_echo_prompt_is_unchanged() {
    let (_server, client) = start().await;
    let prompt = "hello there [[delay-ms:1]]";
    assert_eq!(
        converse_text(&client, None, vec![text(prompt)]).await,
        "Echo: hello there"
    );
    let events = stream(&client, None, vec![text(prompt)]).await;
    let pieces: Vec<&str> = deltas(&events)
        .into_iter()
        .map(|d| d.as_text().unwrap().as_str())
        .collect();
    assert_eq!(pieces, ["Echo: ", "hello ", "there"]);

    let system = "Then list <<three questions>>.";
    let expected = format!("Echo: hi{FOLLOW_UPS}");
    assert_eq!(
        converse_text(&client, Some(system), vec![text("hi")]).await,
        expected
    );
    let events = stream(&client, Some(system), vec![text("hi")]).await;
    let pieces: Vec<&str> = deltas(&events)
        .into_iter()
        .map(|d| d.as_text().unwrap().as_str())
        .collect();
    assert_eq!(
        pieces,
        [
            "Echo: ",
            "hi\n",
            "\n",
            "<<What ",
            "else ",
            "should ",
            "I ",
            "know?>>\n",
            "<<Can ",
            "you ",
            "give ",
            "an ",
            "example?>>\n",
            "<<Where ",
            "can ",
            "I ",
            "read ",
            "more?>>"
        ]
    );
}

#[tokio::test]
async fn a_cited_sentence_cut_by_max_tokens_loses_its_citation_and_stream_faults_still_apply() {
    let (_server, client) = start().await;
    // Six word pieces, a citation, a space: four tokens end inside the first sentence.
    let output = asked!(client.converse(), None::<&str>, results())
        .inference_config(
            aws_sdk_bedrockruntime::types::InferenceConfiguration::builder()
                .max_tokens(4)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(output.stop_reason().as_str(), "max_tokens");
    let Some(ConverseOutput::Message(m)) = output.output() else {
        panic!()
    };
    assert_eq!(m.content(), [text("Employees may choose between ")]);

    let mut content = results();
    content[0] = text("What are my options? [[stream-error-after:7]]");
    let mut output = client
        .converse_stream()
        .model_id(MODEL)
        .messages(user(content))
        .send()
        .await
        .unwrap();
    let mut seen = Vec::new();
    let error = loop {
        match output.stream.recv().await {
            Ok(Some(ConverseStreamOutput::ContentBlockDelta(d))) => {
                seen.push(d.delta().unwrap().clone())
            }
            Ok(Some(_)) => {}
            Ok(None) => panic!("the stream ended without its error"),
            Err(e) => break e,
        }
    };
    assert!(
        format!("{error:?}").contains("ModelStreamError"),
        "{error:?}"
    );
    // The first sentence, its citation, the space; then the error.
    assert_eq!(seen.len(), 8);
    assert!(seen[6].is_citation() && seen[7].as_text().is_ok_and(|t| t == " "));
}
