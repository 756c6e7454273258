//! A Bedrock guardrail's trace in the core's terms: which policy found what and did what, never the text it
//! matched (a blocked question or answer must not come back through the thoughts).

use aws_sdk_bedrockruntime::types::{GuardrailAssessment, GuardrailTraceAssessment};
use chat_core::{GuardrailFinding, GuardrailTrace};

fn finding(
    stage: &'static str,
    policy: &'static str,
    kind: &str,
    action: &str,
) -> GuardrailFinding {
    GuardrailFinding {
        stage,
        policy,
        kind: kind.to_string(),
        action: action.to_string(),
        confidence: None,
        score: None,
        threshold: None,
    }
}

/// Every finding of one assessment, at `stage` (`input` or `output`).
fn findings(stage: &'static str, a: &GuardrailAssessment, out: &mut Vec<GuardrailFinding>) {
    if let Some(p) = a.content_policy() {
        for f in p.filters() {
            let kind = f.r#type().as_str();
            let mut found = finding(stage, "content", kind, f.action().as_str());
            found.confidence = Some(f.confidence().as_str().to_string());
            out.push(found);
        }
    }
    if let Some(p) = a.topic_policy() {
        for t in p.topics() {
            out.push(finding(stage, "topic", t.name(), t.action().as_str()));
        }
    }
    if let Some(p) = a.word_policy() {
        for w in p.custom_words() {
            out.push(finding(stage, "word", "custom word", w.action().as_str()));
        }
        for w in p.managed_word_lists() {
            let kind = w.r#type().as_str();
            out.push(finding(stage, "word", kind, w.action().as_str()));
        }
    }
    if let Some(p) = a.sensitive_information_policy() {
        for e in p.pii_entities() {
            let kind = e.r#type().as_str();
            out.push(finding(
                stage,
                "sensitive_information",
                kind,
                e.action().as_str(),
            ));
        }
        for r in p.regexes() {
            let kind = r.name().unwrap_or("regex");
            out.push(finding(
                stage,
                "sensitive_information",
                kind,
                r.action().as_str(),
            ));
        }
    }
    if let Some(p) = a.contextual_grounding_policy() {
        for f in p.filters() {
            let kind = f.r#type().as_str();
            let mut found = finding(stage, "contextual_grounding", kind, f.action().as_str());
            found.score = Some(f.score());
            found.threshold = Some(f.threshold());
            out.push(found);
        }
    }
    if let Some(p) = a.automated_reasoning_policy() {
        for f in p.findings() {
            out.push(finding(
                stage,
                "automated_reasoning",
                &format!("{f:?}")
                    .chars()
                    .take_while(|c| c.is_alphanumeric())
                    .collect::<String>(),
                "NONE",
            ));
        }
    }
}

/// The trace of a Converse call's guardrail, as findings.
pub(crate) fn guardrail_trace(trace: &GuardrailTraceAssessment) -> GuardrailTrace {
    let mut out = Vec::new();
    let mut input: Vec<_> = trace.input_assessment().into_iter().flatten().collect();
    input.sort_by(|a, b| a.0.cmp(b.0));
    for (_, assessment) in input {
        findings("input", assessment, &mut out);
    }
    let mut output: Vec<_> = trace.output_assessments().into_iter().flatten().collect();
    output.sort_by(|a, b| a.0.cmp(b.0));
    for (_, assessments) in output {
        for assessment in assessments {
            findings("output", assessment, &mut out);
        }
    }
    GuardrailTrace {
        action_reason: trace.action_reason().map(str::to_string),
        findings: out,
    }
}
