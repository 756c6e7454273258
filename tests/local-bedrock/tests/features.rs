//! Reasoning, prompt caching, guardrails, the performance and service-tier echo, inference-profile model ids and
//! CountTokens of the local model, driven through the real `aws-sdk-bedrockruntime` client.

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::error::ProvideErrorMetadata;
use aws_sdk_bedrockruntime::operation::converse::ConverseOutput as ConverseResponse;
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, ContentBlock, ContentBlockDelta, ConversationRole,
    ConverseOutput, ConverseStreamMetadataEvent, ConverseStreamOutput, ConverseTokensRequest,
    CountTokensInput, GuardrailAssessment, GuardrailConfiguration, GuardrailContentFilterType,
    GuardrailContentPolicyAction, GuardrailContextualGroundingFilterType,
    GuardrailContextualGroundingPolicyAction, GuardrailConverseContentBlock,
    GuardrailConverseContentQualifier, GuardrailConverseTextBlock, GuardrailStreamConfiguration,
    GuardrailStreamProcessingMode, GuardrailTrace, GuardrailTraceAssessment,
    InferenceConfiguration, Message, PerformanceConfigLatency, PerformanceConfiguration,
    ReasoningContentBlock, ReasoningContentBlockDelta, SearchResultBlock, SearchResultContentBlock,
    ServiceTier, ServiceTierType, StopReason, SystemContentBlock, TokenUsage,
};
use local_bedrock::Operation;
use serde_json::{Value, json};
use support::{MODEL, document, error_text, message, start, text, user};

mod support;

const GUARDRAIL: &str = "gr-local-test";

fn cache_point() -> ContentBlock {
    ContentBlock::CachePoint(default_cache_point())
}

fn default_cache_point() -> CachePointBlock {
    CachePointBlock::builder()
        .r#type(CachePointType::Default)
        .build()
        .unwrap()
}

/// A system prompt of `text`, then a cache point.
fn cached_system(text: &str) -> Vec<SystemContentBlock> {
    vec![
        SystemContentBlock::Text(text.into()),
        SystemContentBlock::CachePoint(default_cache_point()),
    ]
}

fn guard(t: &str, qualifier: GuardrailConverseContentQualifier) -> ContentBlock {
    ContentBlock::GuardContent(GuardrailConverseContentBlock::Text(
        GuardrailConverseTextBlock::builder()
            .text(t)
            .qualifiers(qualifier)
            .build()
            .unwrap(),
    ))
}

/// `$request`'s settings but the guardrail's, on `$call` (a `converse` or a `converse_stream`: their builders are
/// of two types, with the same setters).
macro_rules! common {
    ($call:expr, $request:expr) => {
        $call
            .model_id($request.model())
            .set_system(Some($request.system.clone()).filter(|s| !s.is_empty()))
            .set_messages(Some($request.messages.clone()))
            .set_additional_model_request_fields($request.fields.as_ref().map(document))
            .set_inference_config($request.inference.clone())
            .set_performance_config($request.performance())
            .set_service_tier($request.tier())
    };
}

/// One request, sent as `converse` or `converse_stream`.
#[derive(Clone, Default)]
struct Request {
    model: Option<String>,
    system: Vec<SystemContentBlock>,
    messages: Vec<Message>,
    fields: Option<Value>,
    inference: Option<InferenceConfiguration>,
    guardrail: Option<(GuardrailTrace, GuardrailStreamProcessingMode)>,
    latency: Option<PerformanceConfigLatency>,
    tier: Option<ServiceTierType>,
}

impl Request {
    fn new(content: Vec<ContentBlock>) -> Self {
        Self {
            messages: vec![user(content)],
            ..Self::default()
        }
    }

    fn model(&self) -> String {
        self.model.clone().unwrap_or_else(|| MODEL.to_string())
    }

    fn performance(&self) -> Option<PerformanceConfiguration> {
        self.latency
            .clone()
            .map(|l| PerformanceConfiguration::builder().latency(l).build())
    }

    fn tier(&self) -> Option<ServiceTier> {
        self.tier
            .clone()
            .map(|t| ServiceTier::builder().r#type(t).build().unwrap())
    }

    async fn converse(&self, client: &Client) -> Result<ConverseResponse, String> {
        common!(client.converse(), self)
            .set_guardrail_config(self.guardrail.clone().map(|(trace, _)| {
                GuardrailConfiguration::builder()
                    .guardrail_identifier(GUARDRAIL)
                    .guardrail_version("1")
                    .trace(trace)
                    .build()
            }))
            .send()
            .await
            .map_err(|e| error_text(e.into_service_error()))
    }

    async fn stream(&self, client: &Client) -> Result<Vec<ConverseStreamOutput>, String> {
        let mut output = common!(client.converse_stream(), self)
            .set_guardrail_config(self.guardrail.clone().map(|(trace, mode)| {
                GuardrailStreamConfiguration::builder()
                    .guardrail_identifier(GUARDRAIL)
                    .guardrail_version("1")
                    .trace(trace)
                    .stream_processing_mode(mode)
                    .build()
            }))
            .send()
            .await
            .map_err(|e| error_text(e.into_service_error()))?;
        let mut events = Vec::new();
        while let Some(event) = output.stream.recv().await.expect("the stream reads") {
            events.push(event);
        }
        Ok(events)
    }
}

/// The content blocks of a `converse` answer.
fn blocks(response: &ConverseResponse) -> &[ContentBlock] {
    match response.output() {
        Some(ConverseOutput::Message(m)) => m.content(),
        other => panic!("no message: {other:?}"),
    }
}

/// A `converse` answer's blocks as short lines, so a test asserts them whole.
fn describe_blocks(response: &ConverseResponse) -> Vec<String> {
    blocks(response)
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => format!("text {t}"),
            ContentBlock::ReasoningContent(ReasoningContentBlock::ReasoningText(r)) => {
                format!(
                    "reasoning {} | {}",
                    r.text(),
                    r.signature().unwrap_or("no signature")
                )
            }
            ContentBlock::ReasoningContent(ReasoningContentBlock::RedactedContent(b)) => {
                format!(
                    "redacted {}",
                    String::from_utf8_lossy(b.as_ref()).into_owned()
                )
            }
            other => format!("{other:?}"),
        })
        .collect()
}

/// A stream's events as short lines (metadata left out: tests read it through [`metadata`]).
fn describe_events(events: &[ConverseStreamOutput]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            ConverseStreamOutput::MessageStart(_) => Some("start".to_string()),
            ConverseStreamOutput::ContentBlockDelta(d) => {
                let index = d.content_block_index();
                Some(match d.delta().expect("a delta") {
                    ContentBlockDelta::Text(t) => format!("{index} text {t}"),
                    ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Text(t)) => {
                        format!("{index} reasoning {t}")
                    }
                    ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Signature(
                        s,
                    )) => format!("{index} signature {s}"),
                    ContentBlockDelta::ReasoningContent(
                        ReasoningContentBlockDelta::RedactedContent(b),
                    ) => format!(
                        "{index} redacted {}",
                        String::from_utf8_lossy(b.as_ref()).into_owned()
                    ),
                    other => format!("{index} {other:?}"),
                })
            }
            ConverseStreamOutput::ContentBlockStop(s) => {
                Some(format!("{} stop", s.content_block_index()))
            }
            ConverseStreamOutput::MessageStop(s) => {
                Some(format!("messageStop {}", s.stop_reason().as_str()))
            }
            ConverseStreamOutput::Metadata(_) => None,
            other => Some(format!("{other:?}")),
        })
        .collect()
}

fn metadata(events: &[ConverseStreamOutput]) -> &ConverseStreamMetadataEvent {
    let all: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ConverseStreamOutput::Metadata(m) => Some(m),
            _ => None,
        })
        .collect();
    assert_eq!(all.len(), 1, "one metadata event");
    all[0]
}

fn stream_text(events: &[ConverseStreamOutput]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ConverseStreamOutput::ContentBlockDelta(d) => d.delta()?.as_text().ok().cloned(),
            _ => None,
        })
        .collect()
}

/// `(input, output, total, cache read, cache write)`.
fn tokens(usage: Option<&TokenUsage>) -> (i32, i32, i32, Option<i32>, Option<i32>) {
    let u = usage.expect("usage");
    (
        u.input_tokens(),
        u.output_tokens(),
        u.total_tokens(),
        u.cache_read_input_tokens(),
        u.cache_write_input_tokens(),
    )
}

/// The word pieces of a text, each with its following space, as the server streams them.
fn pieces(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_string).collect()
}

const QUESTION: &str = "What is two plus two?";
const ECHO: &str = "Echo: What is two plus two?";

#[tokio::test]
async fn budget_reasoning_streams_before_the_text_with_a_signature_and_a_redacted_block() {
    let (server, client) = start().await;
    let request = Request {
        fields: Some(json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})),
        inference: Some(InferenceConfiguration::builder().max_tokens(4096).build()),
        ..Request::new(vec![text("Why is the sky [[redacted-reasoning]] blue?")])
    };
    let reasoning = "Reasoning (budget 2048): the question is: Why is the sky blue?";
    let signature = "local-signature-2a0533005e8c1f43";
    let answer = "Echo: Why is the sky blue?";

    let events = request.stream(&client).await.unwrap();
    let mut expected = vec!["start".to_string()];
    expected.extend(pieces(reasoning).iter().map(|p| format!("0 reasoning {p}")));
    expected.push(format!("0 signature {signature}"));
    expected.push("0 stop".into());
    expected.push("1 redacted redacted by local-bedrock".into());
    expected.push("1 stop".into());
    expected.extend(pieces(answer).iter().map(|p| format!("2 text {p}")));
    expected.push("2 stop".into());
    expected.push("messageStop end_turn".into());
    assert_eq!(describe_events(&events), expected);
    // Reasoning pieces (11) count as output tokens with the text's (6); the input is the message's 6 words.
    assert_eq!(tokens(metadata(&events).usage()), (6, 17, 23, None, None));
    // `deltas_sent_at` keeps meaning the text deltas.
    assert_eq!(server.requests()[0].deltas_sent_at.len(), 6);

    let response = request.converse(&client).await.unwrap();
    assert_eq!(
        describe_blocks(&response),
        [
            format!("reasoning {reasoning} | {signature}"),
            "redacted redacted by local-bedrock".to_string(),
            format!("text {answer}"),
        ]
    );
    assert_eq!(tokens(response.usage()), (6, 17, 23, None, None));
    // On the wire the redacted bytes are base64.
    assert_eq!(
        aws_smithy_types::base64::encode(b"redacted by local-bedrock"),
        "cmVkYWN0ZWQgYnkgbG9jYWwtYmVkcm9jaw=="
    );
}

#[tokio::test]
async fn each_reasoning_style_starts_the_answer_with_its_effort() {
    let (_server, client) = start().await;
    let styles = [
        (
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048}}),
            "budget 2048",
            "local-signature-eed04177832c4d2d",
        ),
        (
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}),
            "max",
            "local-signature-90fbf6923f5f47d0",
        ),
        (
            json!({"thinking": {"type": "adaptive"}}),
            "high",
            "local-signature-6b5ee7d253903764",
        ),
        (
            json!({"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "low"}}),
            "low",
            "local-signature-9f990295d6547c68",
        ),
        (
            json!({"reasoning_effort": "medium"}),
            "medium",
            "local-signature-7179207bd3f27cf5",
        ),
    ];
    for (fields, effort, signature) in styles {
        let request = Request {
            fields: Some(fields.clone()),
            ..Request::new(vec![text(QUESTION)])
        };
        let reasoning = format!("Reasoning ({effort}): the question is: {QUESTION}");
        let response = request.converse(&client).await.unwrap();
        assert_eq!(
            describe_blocks(&response),
            [
                format!("reasoning {reasoning} | {signature}"),
                format!("text {ECHO}")
            ],
            "{fields}"
        );
        let reasoned = pieces(&reasoning).len() as i32;
        assert_eq!(
            tokens(response.usage()),
            (5, reasoned + 6, 5 + reasoned + 6, None, None)
        );

        let events = request.stream(&client).await.unwrap();
        let mut expected = vec!["start".to_string()];
        expected.extend(
            pieces(&reasoning)
                .iter()
                .map(|p| format!("0 reasoning {p}")),
        );
        expected.push(format!("0 signature {signature}"));
        expected.push("0 stop".into());
        expected.extend(pieces(ECHO).iter().map(|p| format!("1 text {p}")));
        expected.push("1 stop".into());
        expected.push("messageStop end_turn".into());
        assert_eq!(describe_events(&events), expected, "{fields}");
    }
    // Reasoning switched off, or not asked for: the answer is as before.
    for fields in [
        json!({"thinking": {"type": "disabled"}}),
        json!({"reasoningConfig": {"type": "disabled"}}),
        json!({"other": 1}),
    ] {
        let request = Request {
            fields: Some(fields),
            ..Request::new(vec![text(QUESTION)])
        };
        let response = request.converse(&client).await.unwrap();
        assert_eq!(describe_blocks(&response), [format!("text {ECHO}")]);
    }
}

#[tokio::test]
async fn budget_reasoning_is_validated_like_the_service() {
    let (server, client) = start().await;
    let inference = |max: i32| InferenceConfiguration::builder().max_tokens(max);
    let cases = [
        (
            1000,
            inference(4096).build(),
            "ValidationException: thinking.budget_tokens: must be at least 1024",
        ),
        (
            2048,
            inference(2048).build(),
            "ValidationException: max_tokens must be greater than thinking.budget_tokens",
        ),
        (
            2048,
            inference(4096).temperature(0.5).build(),
            "ValidationException: temperature and top_p may not be set when thinking is enabled",
        ),
        (
            2048,
            inference(4096).top_p(0.9).build(),
            "ValidationException: temperature and top_p may not be set when thinking is enabled",
        ),
    ];
    for (budget, inference, error) in cases {
        let request = Request {
            fields: Some(json!({"thinking": {"type": "enabled", "budget_tokens": budget}})),
            inference: Some(inference),
            ..Request::new(vec![text(QUESTION)])
        };
        assert_eq!(request.converse(&client).await.unwrap_err(), error);
        assert_eq!(request.stream(&client).await.unwrap_err(), error);
    }
    // A temperature of 1 is allowed.
    let request = Request {
        fields: Some(json!({"thinking": {"type": "enabled", "budget_tokens": 1024}})),
        inference: Some(inference(1025).temperature(1.0).build()),
        ..Request::new(vec![text(QUESTION)])
    };
    let response = request.converse(&client).await.unwrap();
    assert_eq!(blocks(&response).len(), 2);
    // Refused requests are recorded too.
    assert_eq!(server.requests().len(), 9);
}

#[tokio::test]
async fn cache_points_write_then_read_and_a_longer_conversation_reads_the_earlier_prefix() {
    let (_server, client) = start().await;
    // 8 words, then a cache point.
    let system = cached_system("You are a helpful assistant for the test.");
    // 5 words, a cache point (8 + 5 = 13 before it), then 2 words: 15 input words.
    let first = vec![
        text("Tell me about caching please"),
        cache_point(),
        text("Answer briefly"),
    ];
    let request = Request {
        system: system.clone(),
        ..Request::new(first.clone())
    };
    // A fault leaves no prefix behind.
    let faulty = Request {
        system: system.clone(),
        ..Request::new(vec![
            text("Tell me about caching please"),
            cache_point(),
            text("[[fault:too-long]]"),
        ])
    };
    assert_eq!(
        faulty.converse(&client).await.unwrap_err(),
        "ValidationException: Input is too long for requested model."
    );
    // Output: `Echo: Tell me about caching please Answer briefly` is 8 words.
    let written = request.converse(&client).await.unwrap();
    assert_eq!(tokens(written.usage()), (2, 8, 23, Some(0), Some(13)));
    let read = request.converse(&client).await.unwrap();
    assert_eq!(tokens(read.usage()), (2, 8, 23, Some(13), Some(0)));

    // A longer conversation: the first message's cache point reads; the rest up to the last point is written.
    let answer = "Echo: Tell me about caching please Answer briefly";
    let longer = Request {
        system,
        messages: vec![
            user(first),
            message(ConversationRole::Assistant, vec![text(answer)]),
            user(vec![text("And what else"), cache_point()]),
        ],
        ..Request::default()
    };
    // 15 + 8 + 3 = 26 input words, all before the last cache point: 13 read, 13 written.
    let response = longer.converse(&client).await.unwrap();
    assert_eq!(tokens(response.usage()), (0, 4, 30, Some(13), Some(13)));
    // The stream reports it in its metadata: now the whole prefix is read.
    let events = longer.stream(&client).await.unwrap();
    assert_eq!(
        tokens(metadata(&events).usage()),
        (0, 4, 30, Some(26), Some(0))
    );
    // Another model has its own cache.
    let other = Request {
        model: Some("amazon.nova-lite-v1:0".into()),
        ..longer.clone()
    };
    let response = other.converse(&client).await.unwrap();
    assert_eq!(tokens(response.usage()), (0, 4, 30, Some(0), Some(26)));
    // Without cache points, usage has no cache fields.
    let plain = Request::new(vec![text("Tell me about caching please")]);
    let response = plain.converse(&client).await.unwrap();
    assert_eq!(tokens(response.usage()), (5, 6, 11, None, None));
}

const SOURCES: &str = "\n\nSources:\n\
    Benefit_Options.md#page=2: Employees may choose between two plans. The plans differ in cost.\n\
    Travel_Policy.md: Travel must be booked through the portal! Receipts are due within 30 days.";
const GROUNDED_ANSWER: &str = "Employees may choose between two plans. [Benefit_Options.md#page=2] \
    Travel must be booked through the portal! [Travel_Policy.md]";
const GROUNDED_QUESTION: &str = "Which plans may employees choose?";
const BLOCKED: &str = "Sorry, the model cannot answer this question.";

/// The latency and the tier a response (or a stream's metadata) echoes.
fn echoed<'a>(
    performance: Option<&'a PerformanceConfiguration>,
    tier: Option<&'a ServiceTier>,
) -> (
    Option<&'a PerformanceConfigLatency>,
    Option<&'a ServiceTierType>,
) {
    (performance.map(|p| p.latency()), tier.map(|t| t.r#type()))
}

/// The guardrail's checks before an answer is streamed.
const SYNC: GuardrailStreamProcessingMode = GuardrailStreamProcessingMode::Sync;

fn guarded(question: &str, trace: GuardrailTrace, mode: GuardrailStreamProcessingMode) -> Request {
    Request {
        guardrail: Some((trace, mode)),
        ..Request::new(vec![
            guard(question, GuardrailConverseContentQualifier::Query),
            guard(SOURCES, GuardrailConverseContentQualifier::GroundingSource),
        ])
    }
}

/// A guardrail filter's line: what it is (its type and two figures), its action and whether it detected anything.
fn filter_line(kind: [&str; 3], action: &str, detected: Option<bool>) -> String {
    format!("{} {action} {detected:?}", kind.join(" "))
}

/// `(input filters, output assessments, action reason)` of a guardrail trace, as short lines.
fn describe_trace(trace: Option<&GuardrailTraceAssessment>) -> (Vec<String>, Vec<String>, String) {
    let trace = trace.expect("a guardrail trace");
    let input = trace.input_assessment().expect("an input assessment");
    assert_eq!(input.len(), 1);
    let input_filters = input[GUARDRAIL]
        .content_policy()
        .expect("a content policy")
        .filters()
        .iter()
        .map(|f| {
            let strength = f.filter_strength().map_or("-", |s| s.as_str());
            let kind = [f.r#type().as_str(), f.confidence().as_str(), strength];
            filter_line(kind, f.action().as_str(), f.detected())
        })
        .collect();
    let outputs = trace.output_assessments().expect("output assessments");
    assert_eq!(outputs.len(), 1);
    let describe = |a: &GuardrailAssessment| match a.contextual_grounding_policy() {
        Some(policy) => policy
            .filters()
            .iter()
            .map(|f| {
                let (threshold, score) = (f.threshold().to_string(), f.score().to_string());
                let kind = [f.r#type().as_str(), &threshold, &score];
                filter_line(kind, f.action().as_str(), f.detected())
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => format!("{a:?}"),
    };
    let output = outputs[GUARDRAIL].iter().map(describe).collect();
    (
        input_filters,
        output,
        trace.action_reason().unwrap_or("-").to_string(),
    )
}

#[tokio::test]
async fn guard_content_is_answered_as_text_blocks_and_the_trace_shows_the_grounding_scores() {
    let (server, client) = start().await;
    let request = guarded(GROUNDED_QUESTION, GuardrailTrace::Enabled, SYNC);
    let response = request.converse(&client).await.unwrap();
    assert_eq!(
        describe_blocks(&response),
        [format!("text {GROUNDED_ANSWER}")]
    );
    assert_eq!(response.stop_reason(), &StopReason::EndTurn);
    // Every answer word is in the sources; 4 of the question's 5 words (not "which") are in the answer or sources.
    let expected = (
        vec![],
        vec!["GROUNDING 0.5 1 NONE Some(false), RELEVANCE 0.5 0.8 NONE Some(false)".to_string()],
        "No action.".to_string(),
    );
    let trace = response.trace().and_then(|t| t.guardrail());
    assert_eq!(describe_trace(trace), expected);
    // The guard content's words are input tokens: 5 of the question, 27 of the sources.
    assert_eq!(tokens(response.usage()).0, 32);

    // The same texts in text blocks, without a guardrail, answer the same.
    let plain = Request::new(vec![text(GROUNDED_QUESTION), text(SOURCES)]);
    let response = plain.converse(&client).await.unwrap();
    assert_eq!(
        describe_blocks(&response),
        [format!("text {GROUNDED_ANSWER}")]
    );
    assert_eq!(tokens(response.usage()).0, 32);
    assert!(response.trace().is_none());

    let events = request.stream(&client).await.unwrap();
    assert_eq!(stream_text(&events), GROUNDED_ANSWER);
    let trace = metadata(&events).trace().and_then(|t| t.guardrail());
    assert_eq!(describe_trace(trace), expected);

    // `enabled_full` traces the same; `disabled` does not trace.
    let full = guarded(GROUNDED_QUESTION, GuardrailTrace::EnabledFull, SYNC);
    let response = full.converse(&client).await.unwrap();
    assert_eq!(
        describe_trace(response.trace().and_then(|t| t.guardrail())),
        expected
    );
    let untraced = guarded(GROUNDED_QUESTION, GuardrailTrace::Disabled, SYNC);
    let response = untraced.converse(&client).await.unwrap();
    assert!(response.trace().is_none());
    let events = untraced.stream(&client).await.unwrap();
    assert!(metadata(&events).trace().is_none());
    assert_eq!(stream_text(&events), GROUNDED_ANSWER);
    // The guard content reached the server as sent.
    let body = &server.requests()[0].body;
    assert_eq!(
        body["messages"][0]["content"][1]["guardContent"]["text"]["qualifiers"],
        json!(["grounding_source"])
    );
    assert_eq!(body["guardrailConfig"]["trace"], "enabled");
}

#[tokio::test]
async fn the_grounding_check_blocks_an_ungrounded_answer() {
    let (_server, client) = start().await;
    let question = format!("[[say:Bananas are yellow fruit]] {GROUNDED_QUESTION}");
    // Only "are" of the answer's 4 words is in the sources (0.25); relevance stays 0.8.
    let expected = (
        vec![],
        vec![
            "GROUNDING 0.5 0.25 BLOCKED Some(true), RELEVANCE 0.5 0.8 NONE Some(false)".to_string(),
        ],
        "Guardrail blocked.".to_string(),
    );

    let sync = guarded(&question, GuardrailTrace::Enabled, SYNC);
    let response = sync.converse(&client).await.unwrap();
    assert_eq!(describe_blocks(&response), [format!("text {BLOCKED}")]);
    assert_eq!(response.stop_reason(), &StopReason::GuardrailIntervened);
    assert_eq!(
        describe_trace(response.trace().and_then(|t| t.guardrail())),
        expected
    );
    // 9 words of the question (its directive's too) and 27 of the sources.
    assert_eq!(tokens(response.usage()), (36, 1, 37, None, None));

    // Sync: only the replacement is streamed.
    let events = sync.stream(&client).await.unwrap();
    assert_eq!(
        describe_events(&events),
        [
            "start".to_string(),
            format!("0 text {BLOCKED}"),
            "0 stop".into(),
            "messageStop guardrail_intervened".into(),
        ]
    );
    assert_eq!(
        describe_trace(metadata(&events).trace().and_then(|t| t.guardrail())),
        expected
    );

    // Async: the answer goes out, then the guardrail intervenes.
    let not_waiting = guarded(
        &question,
        GuardrailTrace::Enabled,
        GuardrailStreamProcessingMode::Async,
    );
    let events = not_waiting.stream(&client).await.unwrap();
    assert_eq!(
        describe_events(&events),
        [
            "start",
            "0 text Bananas ",
            "0 text are ",
            "0 text yellow ",
            "0 text fruit",
            "0 stop",
            "messageStop guardrail_intervened",
        ]
    );
    assert_eq!(
        describe_trace(metadata(&events).trace().and_then(|t| t.guardrail())),
        expected
    );
    assert_eq!(tokens(metadata(&events).usage()), (36, 4, 40, None, None));

    // An irrelevant answer to an irrelevant question: relevance 0 ("bananas", "color" in neither).
    let off_topic = guarded(
        "[[say:Employees may choose between two plans.]] Bananas color?",
        GuardrailTrace::Enabled,
        SYNC,
    );
    let response = off_topic.converse(&client).await.unwrap();
    assert_eq!(response.stop_reason(), &StopReason::GuardrailIntervened);
    assert_eq!(
        describe_trace(response.trace().and_then(|t| t.guardrail())).1,
        ["GROUNDING 0.5 1 NONE Some(false), RELEVANCE 0.5 0 BLOCKED Some(true)"]
    );

    // Without a guardrail the same request is answered.
    let unguarded = Request {
        guardrail: None,
        ..sync
    };
    let response = unguarded.converse(&client).await.unwrap();
    assert_eq!(
        describe_blocks(&response),
        ["text Bananas are yellow fruit"]
    );
    assert!(response.trace().is_none());
}

#[tokio::test]
async fn a_guardrail_fault_shows_a_blocked_input_in_the_trace() {
    let (_server, client) = start().await;
    let request = Request {
        guardrail: Some((GuardrailTrace::Enabled, GuardrailStreamProcessingMode::Sync)),
        ..Request::new(vec![text("Hello [[fault:guardrail]]")])
    };
    let response = request.converse(&client).await.unwrap();
    assert_eq!(response.stop_reason(), &StopReason::GuardrailIntervened);
    assert_eq!(
        describe_blocks(&response),
        ["text Sorry, I cannot answer that."]
    );
    let trace = response.trace().and_then(|t| t.guardrail());
    let (input, output, reason) = describe_trace(trace);
    assert_eq!(input, ["VIOLENCE HIGH HIGH BLOCKED Some(true)"]);
    assert_eq!(reason, "Guardrail blocked.");
    // No grounding check ran: the output assessment is empty.
    assert_eq!(output.len(), 1);
    let assessment = &trace.unwrap().output_assessments().unwrap()[GUARDRAIL][0];
    assert_eq!(assessment, &GuardrailAssessment::builder().build());
    let filter = &trace.unwrap().input_assessment().unwrap()[GUARDRAIL]
        .content_policy()
        .unwrap()
        .filters()[0];
    assert_eq!(filter.r#type(), &GuardrailContentFilterType::Violence);
    assert_eq!(filter.action(), &GuardrailContentPolicyAction::Blocked);

    let events = request.stream(&client).await.unwrap();
    assert_eq!(stream_text(&events), "Sorry, I cannot answer that.");
    let (input, _, reason) = describe_trace(metadata(&events).trace().and_then(|t| t.guardrail()));
    assert_eq!(input, ["VIOLENCE HIGH HIGH BLOCKED Some(true)"]);
    assert_eq!(reason, "Guardrail blocked.");

    // Without a guardrail, the fault answers as before and without a trace.
    let plain = Request::new(vec![text("Hello [[fault:guardrail]]")]);
    let response = plain.converse(&client).await.unwrap();
    assert_eq!(response.stop_reason(), &StopReason::GuardrailIntervened);
    assert!(response.trace().is_none());
}

#[tokio::test]
async fn the_sdk_reads_grounding_filters_as_typed_values() {
    let (_server, client) = start().await;
    let request = guarded(GROUNDED_QUESTION, GuardrailTrace::Enabled, SYNC);
    let response = request.converse(&client).await.unwrap();
    let trace = response.trace().unwrap().guardrail().unwrap();
    let policy = trace.output_assessments().unwrap()[GUARDRAIL][0]
        .contextual_grounding_policy()
        .unwrap();
    let filters = policy.filters();
    assert_eq!(
        filters[0].r#type(),
        &GuardrailContextualGroundingFilterType::Grounding
    );
    assert_eq!(
        filters[1].r#type(),
        &GuardrailContextualGroundingFilterType::Relevance
    );
    assert_eq!(
        filters[1].action(),
        &GuardrailContextualGroundingPolicyAction::None
    );
    assert_eq!((filters[0].score(), filters[1].score()), (1.0, 0.8));
}

#[tokio::test]
async fn performance_and_service_tier_are_echoed() {
    let (_server, client) = start().await;
    let request = Request {
        latency: Some(PerformanceConfigLatency::Optimized),
        tier: Some(ServiceTierType::Priority),
        ..Request::new(vec![text(QUESTION)])
    };
    let response = request.converse(&client).await.unwrap();
    assert_eq!(
        echoed(response.performance_config(), response.service_tier()),
        (
            Some(&PerformanceConfigLatency::Optimized),
            Some(&ServiceTierType::Priority)
        )
    );
    let events = request.stream(&client).await.unwrap();
    let meta = metadata(&events);
    assert_eq!(
        echoed(meta.performance_config(), meta.service_tier()),
        (
            Some(&PerformanceConfigLatency::Optimized),
            Some(&ServiceTierType::Priority)
        )
    );

    let other = Request {
        latency: Some(PerformanceConfigLatency::Standard),
        tier: Some(ServiceTierType::Flex),
        ..request.clone()
    };
    let response = other.converse(&client).await.unwrap();
    assert_eq!(
        echoed(response.performance_config(), response.service_tier()),
        (
            Some(&PerformanceConfigLatency::Standard),
            Some(&ServiceTierType::Flex)
        )
    );
    // Only the tier: no performance configuration comes back.
    let tier_only = Request {
        latency: None,
        tier: Some(ServiceTierType::Default),
        ..request.clone()
    };
    let events = tier_only.stream(&client).await.unwrap();
    assert!(metadata(&events).performance_config().is_none());
    assert_eq!(
        metadata(&events).service_tier().map(|t| t.r#type()),
        Some(&ServiceTierType::Default)
    );

    // Absent in the request, absent in the response.
    let plain = Request::new(vec![text(QUESTION)]);
    let response = plain.converse(&client).await.unwrap();
    assert!(response.performance_config().is_none());
    assert!(response.service_tier().is_none());
    let events = plain.stream(&client).await.unwrap();
    assert!(metadata(&events).performance_config().is_none());
    assert!(metadata(&events).service_tier().is_none());

    // Other values are refused.
    let fast = Request {
        latency: Some(PerformanceConfigLatency::from("fast")),
        tier: None,
        ..request.clone()
    };
    assert_eq!(
        fast.converse(&client).await.unwrap_err(),
        "ValidationException: performanceConfig.latency: must be one of standard, optimized"
    );
    let reserved = Request {
        latency: None,
        tier: Some(ServiceTierType::Reserved),
        ..request
    };
    assert_eq!(
        reserved.stream(&client).await.unwrap_err(),
        "ValidationException: serviceTier.type: must be one of default, priority, flex"
    );
}

#[tokio::test]
async fn inference_profile_ids_and_arns_reach_the_server_decoded() {
    let (server, client) = start().await;
    let ids = [
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-lite-v1:0",
    ];
    for id in ids {
        let request = Request {
            model: Some(id.to_string()),
            ..Request::new(vec![text(QUESTION)])
        };
        let response = request.converse(&client).await.unwrap();
        assert_eq!(describe_blocks(&response), [format!("text {ECHO}")]);
        let events = request.stream(&client).await.unwrap();
        assert_eq!(stream_text(&events), ECHO);
    }
    let recorded: Vec<(Operation, String)> = server
        .requests()
        .into_iter()
        .map(|r| (r.operation, r.model_id))
        .collect();
    let expected: Vec<(Operation, String)> = ids
        .iter()
        .flat_map(|id| {
            [
                (Operation::Converse, id.to_string()),
                (Operation::ConverseStream, id.to_string()),
            ]
        })
        .collect();
    assert_eq!(recorded, expected);
}

#[tokio::test]
async fn count_tokens_counts_as_converse_does() {
    let (server, client) = start().await;
    let system = cached_system("Be brief and kind.");
    let search_result = ContentBlock::SearchResult(
        SearchResultBlock::builder()
            .source("s3://docs/a.md")
            .title("a.md")
            .content(
                SearchResultContentBlock::builder()
                    .text("Three more words.")
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap(),
    );
    let messages = vec![
        user(vec![text("First question here"), cache_point()]),
        message(ConversationRole::Assistant, vec![text("An answer")]),
        user(vec![
            guard(
                "Guarded words count too",
                GuardrailConverseContentQualifier::Query,
            ),
            search_result,
        ]),
    ];
    // 4 + 3 + 2 + 4 + 3 words; the cache points count nothing.
    let model = "anthropic.claude-sonnet-4-5-20250929-v1:0";
    let counted = client
        .count_tokens()
        .model_id(model)
        .input(CountTokensInput::Converse(
            ConverseTokensRequest::builder()
                .set_system(Some(system.clone()))
                .set_messages(Some(messages.clone()))
                .build(),
        ))
        .send()
        .await
        .expect("count-tokens answers");
    assert_eq!(counted.input_tokens(), 16);

    // Converse counts the same: its input, cache read and cache write add up to it.
    let request = Request {
        system,
        messages,
        ..Request::default()
    };
    let response = request.converse(&client).await.unwrap();
    let (input, _, _, read, write) = tokens(response.usage());
    assert_eq!(input + read.unwrap() + write.unwrap(), 16);

    let requests = server.requests();
    assert_eq!(requests[0].operation, Operation::CountTokens);
    assert_eq!(requests[0].model_id, model);
    assert_eq!(
        requests[0].body["input"]["converse"]["messages"][1]["content"][0]["text"],
        "An answer"
    );

    // As Bedrock: a foundation model's ARN counts; inference profiles and models of other families are refused.
    let count = |model: &'static str| {
        client
            .count_tokens()
            .model_id(model)
            .input(CountTokensInput::Converse(
                ConverseTokensRequest::builder()
                    .set_messages(Some(vec![user(vec![text("Two words")])]))
                    .build(),
            ))
            .send()
    };
    let arn =
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0";
    assert_eq!(count(arn).await.unwrap().input_tokens(), 2);
    for refused in [
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
        "amazon.nova-pro-v1:0",
    ] {
        let err = count(refused).await.expect_err(refused);
        let err = err.into_service_error();
        assert_eq!(err.code(), Some("ValidationException"), "{refused}");
        assert_eq!(
            err.message(),
            Some("The provided model doesn't support counting tokens."),
            "{refused}"
        );
    }
}
