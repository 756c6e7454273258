//! Tools the model may call in a turn: the port a tool implements (a name, a description, a JSON schema for its
//! input, and a call that gets the caller, so that access follows the user), the operator's bounds, and one call
//! run under them: timed, its result cut to size, any failure an error the model reads rather than a failed turn.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Caller, Passage};

/// What the model is told of a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// `[A-Za-z0-9_-]{1,64}`, as Bedrock takes tool names.
    pub name: String,
    pub description: String,
    /// The JSON schema of the tool's input (an object schema).
    pub input_schema: Value,
    /// Whether the model's call must keep to the schema (Bedrock's strict tool use, for the models whose profile
    /// has structured output; for others the schema is still given, unenforced).
    pub strict: bool,
}

/// The model asks for a tool: which, with what input, under an id its result answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// Whether a tool did what it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    #[default]
    Success,
    Error,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
        }
    }
}

/// A tool's answer to one call, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The id of the call it answers.
    pub id: String,
    pub text: String,
    pub status: ToolStatus,
}

/// One call and its result, as a turn keeps them: stored with the answer's message and replayed to the model when
/// the chat continues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolExchange {
    /// Which of the turn's tool rounds made the call (0 first): calls of one round go to the model together.
    pub round: u32,
    pub id: String,
    pub name: String,
    pub input: Value,
    /// The result as the model read it (cut to the bound).
    pub output: String,
    pub status: ToolStatus,
}

impl ToolExchange {
    /// The call as the model made it.
    pub fn call(&self) -> ToolCall {
        ToolCall {
            id: self.id.clone(),
            name: self.name.clone(),
            input: self.input.clone(),
        }
    }

    /// The result as the model read it.
    pub fn result(&self) -> ToolResult {
        ToolResult {
            id: self.id.clone(),
            text: self.output.clone(),
            status: self.status,
        }
    }

    /// The exchange in words, for a model that is not offered this tool now (a changed tool set): it still reads
    /// what was asked and answered.
    pub fn as_text(&self) -> String {
        format!(
            "[tool {} called with {} → {}: {}]",
            self.name,
            self.input,
            self.status.as_str(),
            self.output
        )
    }
}

/// What a tool gives back: text for the model, and the passages it found (a document search's), which join the
/// turn's data points and citations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    pub text: String,
    pub passages: Vec<Passage>,
}

/// A tool call in progress. An `Err` is a message the model reads as the tool's error.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, String>> + Send + 'a>>;

/// A tool the model may call.
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;

    /// Runs the tool for `caller` (what the tool may reach is the caller's) with the model's `input`.
    fn call<'a>(&'a self, caller: &'a Caller, input: &'a Value) -> ToolFuture<'a>;
}

/// The tools a source offers a turn, and what it could not offer (a server that is down), said in a thought.
#[derive(Clone, Default)]
pub struct ToolListing {
    pub tools: Vec<Arc<dyn Tool>>,
    /// One line per source that offers nothing this turn, and why.
    pub unavailable: Vec<String>,
}

/// Where tools come from beyond the built-in ones (MCP servers): listed for each turn of `caller` (whose session
/// with the source, if it keeps one, is theirs alone), which a source may answer from what it listed before.
pub trait ToolSource: Send + Sync {
    fn list<'a>(
        &'a self,
        caller: &'a Caller,
    ) -> Pin<Box<dyn Future<Output = ToolListing> + Send + 'a>>;
}

/// When the knowledge base is searched: before the model answers (`before`, and the only way before tools), only
/// when the model calls `search_documents` (`tools`), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchWhen {
    #[default]
    Before,
    Tools,
    Both,
}

impl SearchWhen {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchWhen::Before => "before",
            SearchWhen::Tools => "tools",
            SearchWhen::Both => "both",
        }
    }

    /// Whether the turn searches before the model speaks.
    pub fn before(self) -> bool {
        matches!(self, SearchWhen::Before | SearchWhen::Both)
    }

    /// Whether the model is offered `search_documents`.
    pub fn as_tool(self) -> bool {
        matches!(self, SearchWhen::Tools | SearchWhen::Both)
    }
}

impl std::str::FromStr for SearchWhen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "before" => Ok(SearchWhen::Before),
            "tools" => Ok(SearchWhen::Tools),
            "both" => Ok(SearchWhen::Both),
            other => Err(format!("{other:?} is not one of before, tools, both")),
        }
    }
}

/// The operator's bounds on tool use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolBounds {
    /// How many rounds of tool calls a turn (or an agent's message) may make; the model then answers without tools.
    pub max_rounds: u32,
    /// How many of one round's calls run; the calls past them are answered "not run" (a model asking for dozens
    /// at once would otherwise fan out that many requests).
    pub max_calls_per_round: u32,
    /// How long one call may take.
    pub call_timeout: Duration,
    /// How many bytes of one result the model reads; the rest is cut, and the cut said.
    pub max_result_bytes: usize,
}

impl Default for ToolBounds {
    fn default() -> Self {
        Self {
            max_rounds: 5,
            max_calls_per_round: 8,
            call_timeout: Duration::from_secs(30),
            max_result_bytes: 16 * 1024,
        }
    }
}

/// `text` cut to at most `limit` bytes (at a character boundary), and whether it was cut.
pub(crate) fn cut(text: &str, limit: usize) -> (&str, bool) {
    if text.len() <= limit {
        return (text, false);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// One call run: the exchange as stored, the passages the tool found, and how long it took.
#[derive(Debug, Clone)]
pub(crate) struct ToolRun {
    pub exchange: ToolExchange,
    pub passages: Vec<Passage>,
    pub duration: Duration,
}

/// Runs `call` with the tool of its name among `tools`, within the bounds: an unknown tool, a failure or a call past
/// its time is an error result, and a result past its size is cut with a note saying so.
pub(crate) async fn run_call(
    tools: Arc<[Arc<dyn Tool>]>,
    caller: Caller,
    call: ToolCall,
    round: u32,
    bounds: ToolBounds,
) -> ToolRun {
    let started = Instant::now();
    let outcome = match tools.iter().find(|t| t.spec().name == call.name) {
        None => Err(format!(
            "there is no tool named {:?} here (offered: {})",
            call.name,
            tools
                .iter()
                .map(|t| t.spec().name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Some(tool) => {
            let span = crate::tool_call_span(&tool.spec().name);
            let running = tool.call(&caller, &call.input);
            let result = match tracing::Instrument::instrument(
                tokio::time::timeout(bounds.call_timeout, running),
                span.clone(),
            )
            .await
            {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "the tool did not answer within {} ms",
                    bounds.call_timeout.as_millis()
                )),
            };
            span.record("outcome", if result.is_ok() { "ok" } else { "error" });
            if result.is_err() {
                // What failed stays out of the log: the tool's words may be the conversation's.
                tracing::info!(parent: &span, "the tool call failed: the model reads why");
            }
            result
        }
    };
    let (status, mut output) = match outcome {
        Ok(output) => (ToolStatus::Success, output),
        Err(message) => (
            ToolStatus::Error,
            ToolOutput {
                text: message,
                passages: Vec::new(),
            },
        ),
    };
    // A model provider refuses a blank text block: a result with nothing to say says so.
    if output.text.trim().is_empty() {
        output.text = "(no output)".into();
    }
    let text = match cut(&output.text, bounds.max_result_bytes) {
        (whole, false) => whole.to_string(),
        (part, true) => format!(
            "{part}\n[cut: the result was {} bytes; the first {} are shown]",
            output.text.len(),
            part.len()
        ),
    };
    ToolRun {
        exchange: ToolExchange {
            round,
            id: call.id,
            name: call.name,
            input: call.input,
            output: text,
            status,
        },
        passages: output.passages,
        duration: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Slow;

    impl Tool for Slow {
        fn spec(&self) -> &ToolSpec {
            static SPEC: std::sync::OnceLock<ToolSpec> = std::sync::OnceLock::new();
            SPEC.get_or_init(|| ToolSpec {
                strict: false,
                name: "slow".into(),
                description: "sleeps".into(),
                input_schema: json!({"type": "object"}),
            })
        }

        fn call<'a>(&'a self, _caller: &'a Caller, input: &'a Value) -> ToolFuture<'a> {
            Box::pin(async move {
                let ms = input["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(ToolOutput {
                    text: "é".repeat(input["chars"].as_u64().unwrap_or(1) as usize),
                    passages: Vec::new(),
                })
            })
        }
    }

    fn call(name: &str, input: Value) -> ToolCall {
        ToolCall {
            id: "t1".into(),
            name: name.into(),
            input,
        }
    }

    fn bounds() -> ToolBounds {
        ToolBounds {
            max_rounds: 2,
            max_calls_per_round: 8,
            call_timeout: Duration::from_millis(50),
            max_result_bytes: 1_000,
        }
    }

    fn tools() -> Arc<[Arc<dyn Tool>]> {
        Arc::from(vec![Arc::new(Slow) as Arc<dyn Tool>])
    }

    /// `call` run for the caller `u` among [`tools`], in `round`, under `bounds`.
    async fn ran(call: ToolCall, round: u32, bounds: ToolBounds) -> ToolRun {
        run_call(tools(), Caller::owner("u"), call, round, bounds).await
    }

    #[tokio::test]
    async fn a_call_past_its_time_is_an_error_the_model_reads() {
        let run = ran(call("slow", json!({"ms": 5_000})), 0, bounds()).await;
        assert_eq!(run.exchange.status, ToolStatus::Error);
        assert!(run.exchange.output.contains("within 50 ms"), "{run:?}");
    }

    #[tokio::test]
    async fn an_unknown_tool_is_an_error_naming_what_is_offered() {
        let run = ran(call("nope", json!({})), 0, bounds()).await;
        assert_eq!(run.exchange.status, ToolStatus::Error);
        assert!(run.exchange.output.contains("\"nope\""));
        assert!(run.exchange.output.contains("offered: slow"));
    }

    #[tokio::test]
    async fn a_long_result_is_cut_at_a_character_and_the_cut_said() {
        let run = ran(
            call("slow", json!({"chars": 10})),
            1,
            ToolBounds {
                max_result_bytes: 9,
                ..bounds()
            },
        )
        .await;
        assert_eq!(run.exchange.status, ToolStatus::Success);
        // Nine bytes hold four two-byte characters.
        assert!(
            run.exchange
                .output
                .starts_with("éééé\n[cut: the result was 20 bytes; the first 8 are shown]")
        );
        assert_eq!(run.exchange.round, 1);
    }
}
