//! The thoughts a turn shows about itself: the history left out, each tool call and its result, the model's
//! reasoning, the guardrail's assessment and the token usage.

use serde_json::{Value, json};

use crate::tools::{ToolRun, cut};
use crate::{GuardrailTrace, Served, StopReason, Thought, TokenUsage, ToolCall, ToolStatus};

/// How much of a result a thought shows.
const THOUGHT_RESULT_BYTES: usize = 2_000;

/// The thought of a call the model asks for, as it asks.
pub(crate) fn call_thought(call: &ToolCall, round: u32) -> Thought {
    Thought {
        title: format!("Tool call: {}", call.name),
        description: Value::String(format!("{}({})", call.name, call.input)),
        props: Some(json!({
            "tool": call.name,
            "id": call.id,
            "input": call.input,
            "round": round + 1,
        })),
    }
}

/// The thought of a call's result, as it arrives (cut to a bound).
pub(crate) fn result_thought(run: &ToolRun) -> Thought {
    let exchange = &run.exchange;
    let (shown, was_cut) = cut(&exchange.output, THOUGHT_RESULT_BYTES);
    let mut props = json!({
        "tool": exchange.name,
        "id": exchange.id,
        "status": exchange.status.as_str(),
        "result": shown,
        "duration_ms": run.duration.as_millis() as u64,
        "round": exchange.round + 1,
    });
    if was_cut {
        props["result_cut"] = json!(true);
    }
    if !run.passages.is_empty() {
        props["passages"] = json!(run.passages.len());
    }
    Thought {
        title: format!("Tool result: {}", exchange.name),
        description: Value::String(format!(
            "{} {}: {}",
            exchange.name,
            if exchange.status == ToolStatus::Success {
                "returned"
            } else {
                "failed"
            },
            shown
        )),
        props: Some(props),
    }
}

/// What the turn leaves out of the chat's history, when it leaves something out.
pub(crate) fn history_thought(
    (sent, left_out, items_read): (usize, usize, u64),
    budget: u64,
    estimated: u64,
    counted: Option<u64>,
) -> Option<Thought> {
    if left_out == 0 {
        return None;
    }
    let used = match counted {
        Some(counted) => format!("{counted} used, counted"),
        None => format!("about {estimated} used"),
    };
    let mut props = json!({
        "messages_sent": sent,
        "messages_left_out": left_out,
        "max_prompt_tokens": budget,
        "estimated_prompt_tokens": estimated,
        "store_items_read": items_read,
    });
    if let Some(counted) = counted {
        props["counted_prompt_tokens"] = json!(counted);
    }
    Some(Thought {
        title: "Conversation history".into(),
        description: Value::String(format!(
            "{sent} newest messages sent; {left_out} earlier messages left out to stay within {budget} prompt tokens ({used})"
        )),
        props: Some(props),
    })
}

/// The reasoning as shown: redacted reasoning is said to be there, never shown.
pub(crate) fn reasoning_text(reasoning: &str, redacted: bool) -> String {
    let mut text = reasoning.to_string();
    if redacted {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(REDACTED);
    }
    text
}

/// What stands for reasoning the model provider sent encrypted.
pub const REDACTED: &str =
    "[Part of the reasoning is redacted: the model provider sent it encrypted.]";

/// What the model reasoned, whole; redacted reasoning is said to be there, never shown.
pub(crate) fn reasoning_thought(reasoning: &str, redacted: bool) -> Thought {
    Thought {
        title: "Reasoning".into(),
        description: Value::String(reasoning_text(reasoning, redacted)),
        props: Some(json!({ "redacted": redacted })),
    }
}

/// What the guardrail assessed: each policy's finding and action, never the text it matched.
pub(crate) fn guardrail_thought(trace: &GuardrailTrace) -> Thought {
    let findings: Vec<Value> = trace
        .findings
        .iter()
        .map(|f| {
            let mut finding = json!({
                "stage": f.stage, "policy": f.policy, "type": f.kind, "action": f.action,
            });
            if let Some(c) = &f.confidence {
                finding["confidence"] = json!(c);
            }
            if let Some(s) = f.score {
                finding["score"] = json!(s);
            }
            if let Some(t) = f.threshold {
                finding["threshold"] = json!(t);
            }
            finding
        })
        .collect();
    let described: Vec<String> = trace
        .findings
        .iter()
        .map(|f| {
            let mut line = format!("{} {} {}: {}", f.stage, f.policy, f.kind, f.action);
            if let (Some(score), Some(threshold)) = (f.score, f.threshold) {
                line.push_str(&format!(" (score {score}, threshold {threshold})"));
            }
            line
        })
        .collect();
    let description = if described.is_empty() {
        "nothing found".to_string()
    } else {
        described.join("; ")
    };
    Thought {
        title: "Guardrail assessment".into(),
        description: Value::String(description),
        props: Some(json!({
            "intervened": trace.intervened(),
            "action_reason": trace.action_reason,
            "findings": findings,
        })),
    }
}

pub(crate) fn usage_thought(
    usage: TokenUsage,
    stop: &StopReason,
    cost_usd: Option<f64>,
    served: &Served,
) -> Thought {
    let stop = match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::StopSequence => "stop_sequence",
        StopReason::MaxTokens => "max_tokens",
        StopReason::GuardrailIntervened => "guardrail_intervened",
        StopReason::ContentFiltered => "content_filtered",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
        StopReason::ToolUse => "tool_use",
        StopReason::Other(s) => s.as_str(),
    };
    let mut description = format!(
        "{} input tokens, {} output tokens, {} in all",
        usage.input_tokens, usage.output_tokens, usage.total_tokens
    );
    if usage.cache_read_input_tokens > 0 || usage.cache_write_input_tokens > 0 {
        description.push_str(&format!(
            "; {} read from the prompt cache, {} written to it",
            usage.cache_read_input_tokens, usage.cache_write_input_tokens
        ));
    }
    if let Some(cost) = cost_usd {
        description.push_str(&format!("; cost ${cost:.6}"));
    }
    let mut props = json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    });
    // The cache's counts when the prompt cache was used at all.
    if usage.cache_read_input_tokens > 0 || usage.cache_write_input_tokens > 0 {
        props["cache_read_input_tokens"] = json!(usage.cache_read_input_tokens);
        props["cache_write_input_tokens"] = json!(usage.cache_write_input_tokens);
    }
    props["stop_reason"] = json!(stop);
    if let Some(cost) = cost_usd {
        props["cost_usd"] = json!(cost);
    }
    if let Some(latency) = &served.latency {
        props["latency"] = json!(latency);
    }
    if let Some(tier) = &served.service_tier {
        props["service_tier"] = json!(tier);
    }
    Thought {
        title: "Token usage".into(),
        description: Value::String(description),
        props: Some(props),
    }
}
