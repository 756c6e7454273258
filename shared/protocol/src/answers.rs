//! The AI Chat Protocol's and the Chat UI's answers as encoders for the one writer ([`crate::encode`]): a turn's
//! answer in the dialect its request spoke ([`ProtocolAnswer`]: 2024-05-29 `delta` lines, 2024-01-28
//! `chat.completion.chunk` lines, or whole as `message`, `chat.completion` or the Chat UI's array), and a
//! multi-agent round's ([`AgentEvents`]: one server-sent event per agent message, or the whole round).

use chat_core::{AgentMessage, AgentRound, Answer, DataPoints, TurnEnd, TurnEvent, TurnOpening};
use serde_json::Value;

use crate::chat_ui::{ReplyShape, UiReply, agent_event, round_events, round_reply};
use crate::encode::{Encoder, Fault, Whole, WholeEncoder, json, sse_data};
use crate::v2024_01_28::{ChatCompletion, ChatCompletionChunk, ChunkHeader, chunks_of};
use crate::v2024_05_29::{ChatResponse, StreamChunk};
use crate::{Dialect, ErrorBody, ResponseContext, SessionSpelling, json_line};

/// A turn's answer in the AI Chat Protocol (either version) or the Chat UI's standard chat: streamed as JSON lines
/// (2024-05-29 `delta` lines for both the protocol's current version and the Chat UI, `chat.completion.chunk` lines
/// for 2024-01-28 with `stream: true`), or whole in the shape the request's dialect expects.
pub struct ProtocolAnswer {
    dialect: Dialect,
    spelling: SessionSpelling,
    ui_reply: ReplyShape,
    /// What every 2024-01-28 chunk repeats, known at the opening.
    header: Option<ChunkHeader>,
    /// What a tool found, told with the next thought.
    found: Option<DataPoints>,
}

impl ProtocolAnswer {
    pub fn new(dialect: Dialect, spelling: SessionSpelling, ui_reply: ReplyShape) -> Self {
        Self {
            dialect,
            spelling,
            ui_reply,
            header: None,
            found: None,
        }
    }

    /// Whether the lines are 2024-01-28's chunks.
    fn chunks(&self) -> Option<&ChunkHeader> {
        match self.dialect {
            Dialect::V20240128 { .. } => self.header.as_ref(),
            Dialect::V20240529 | Dialect::ChatUi => None,
        }
    }

    /// A line carrying `context` and no text.
    fn context_line(&self, context: ResponseContext) -> Vec<u8> {
        match self.chunks() {
            Some(header) => json_line(&ChatCompletionChunk::context(header, context)),
            None => json_line(&StreamChunk::context(context)),
        }
    }
}

impl Encoder for ProtocolAnswer {
    type Opening = TurnOpening;
    type Event = TurnEvent;
    type Done = TurnEnd;

    fn content_type(&self) -> &'static str {
        match self.dialect {
            Dialect::V20240128 { .. } => "application/json-lines",
            Dialect::V20240529 | Dialect::ChatUi => "application/jsonl",
        }
    }

    fn opening(&mut self, opening: &TurnOpening) -> Vec<u8> {
        let context = ResponseContext::new(&opening.thoughts, None)
            .with_data_points(opening.data_points.as_ref());
        let state = opening.session_state.clone();
        match self.dialect {
            Dialect::V20240128 { .. } => {
                let header = ChunkHeader {
                    id: opening.header.id.clone(),
                    created: opening.header.created,
                    model: opening.header.model.clone(),
                };
                let line = json_line(&ChatCompletionChunk::start(
                    &header,
                    context,
                    state,
                    self.spelling,
                ));
                self.header = Some(header);
                line
            }
            Dialect::V20240529 | Dialect::ChatUi => {
                json_line(&StreamChunk::start(context, state, self.spelling))
            }
        }
    }

    fn event(&mut self, event: TurnEvent) -> Vec<u8> {
        match event {
            TurnEvent::Text(text) => match self.chunks() {
                Some(header) => json_line(&ChatCompletionChunk::content(header, text)),
                None => json_line(&StreamChunk::content(text)),
            },
            // A piece of the model's reasoning (or the note that some is redacted), as a line of its own.
            TurnEvent::Reasoning(piece) => {
                self.context_line(ResponseContext::reasoning(&piece, false))
            }
            TurnEvent::RedactedReasoning(note) => {
                self.context_line(ResponseContext::reasoning(&note, true))
            }
            TurnEvent::Found(points) => {
                self.found = Some(points);
                Vec::new()
            }
            // A thought as it happens (a tool call, its result), with the data points when a tool found more.
            TurnEvent::Thought(thought) => {
                let found = self.found.take();
                self.context_line(
                    ResponseContext::new(std::slice::from_ref(&thought), None)
                        .with_data_points(found.as_ref()),
                )
            }
            // Only a stateless completion's answer asks for the client's tools; no turn of these dialects does. The
            // end is the writer's to hand to `done`.
            TurnEvent::ToolCall(_) | TurnEvent::ReasoningBlock(_) | TurnEvent::End(_) => Vec::new(),
        }
    }

    fn done(&mut self, end: TurnEnd) -> Vec<u8> {
        let context = ResponseContext::new(&end.result_thoughts, end.followup_questions);
        match self.chunks() {
            Some(header) => json_line(&ChatCompletionChunk::finish(
                header,
                end.finish_reason,
                end.usage,
                context,
            )),
            None => json_line(&StreamChunk::end(context)),
        }
    }

    fn fault(&mut self, fault: &Fault) -> Vec<u8> {
        json_line(&ErrorBody::new(fault.message.clone()))
    }
}

impl WholeEncoder for ProtocolAnswer {
    type Answer = Answer;

    fn whole(&mut self, answer: &Answer) -> Whole {
        match self.dialect {
            Dialect::V20240529 => Whole::json(&ChatResponse::from_answer(answer, self.spelling)),
            Dialect::V20240128 { stream: false } => {
                Whole::json(&ChatCompletion::from_answer(answer, self.spelling))
            }
            // Asked for a stream where the answer goes whole (the buffered function): the very lines the stream
            // would have, all at once.
            Dialect::V20240128 { stream: true } => Whole {
                content_type: "application/json-lines",
                body: chunks_of(answer, self.spelling)
                    .iter()
                    .flat_map(json_line)
                    .collect(),
            },
            Dialect::ChatUi => Whole::json(&UiReply::from_answer(answer, self.ui_reply)),
        }
    }
}

/// A multi-agent round's answer: one server-sent event per agent message (its `ChatMessageContent` with
/// `AuthorName`), each written when that agent has finished; or the whole round (the user's message echoed, then
/// the agents', in the configured [`ReplyShape`]; as events all at once when the client asked for
/// `text/event-stream`). A fault once the events have begun is an event carrying `{"error": …}`.
pub struct AgentEvents {
    ui_reply: ReplyShape,
    /// Whether a whole round is written as events (the client accepts `text/event-stream`).
    whole_as_events: bool,
    /// The round's session state, which every event carries.
    state: Option<Value>,
}

impl AgentEvents {
    pub fn new(ui_reply: ReplyShape, whole_as_events: bool) -> Self {
        Self {
            ui_reply,
            whole_as_events,
            state: None,
        }
    }
}

impl Encoder for AgentEvents {
    /// The round's session state.
    type Opening = Option<Value>;
    type Event = AgentMessage;
    /// The round, stored.
    type Done = ();

    fn opening(&mut self, state: &Option<Value>) -> Vec<u8> {
        self.state.clone_from(state);
        Vec::new()
    }

    fn event(&mut self, message: AgentMessage) -> Vec<u8> {
        sse_data(&agent_event(&message, self.state.as_ref()))
    }

    fn done(&mut self, (): ()) -> Vec<u8> {
        Vec::new()
    }

    fn fault(&mut self, fault: &Fault) -> Vec<u8> {
        sse_data(&ErrorBody::new(fault.message.clone()))
    }
}

impl WholeEncoder for AgentEvents {
    type Answer = AgentRound;

    fn whole(&mut self, round: &AgentRound) -> Whole {
        if self.whole_as_events {
            return Whole {
                content_type: "text/event-stream",
                body: round_events(round).iter().flat_map(sse_data).collect(),
            };
        }
        Whole {
            content_type: "application/json",
            body: json(&round_reply(round, self.ui_reply)),
        }
    }
}

#[cfg(test)]
mod tests {
    use chat_core::{Thought, TurnHeader};
    use serde_json::{Value, json};

    use super::*;

    fn opening() -> TurnOpening {
        TurnOpening {
            header: TurnHeader {
                id: "chatcmpl-1".into(),
                created: 1,
                created_at: "1970-01-01T00:00:01+00:00".into(),
                model: "m".into(),
            },
            thoughts: Vec::new(),
            data_points: None,
            session_state: Some(json!("chat-1")),
        }
    }

    fn lines(bytes: &[u8]) -> Vec<Value> {
        std::str::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn what_a_tool_found_goes_with_the_thought_of_its_result_and_only_there() {
        for dialect in [Dialect::V20240529, Dialect::V20240128 { stream: true }] {
            let mut encoder =
                ProtocolAnswer::new(dialect, SessionSpelling::Camel, ReplyShape::Spec);
            // 2024-01-28 carries what 2024-05-29 puts on the line in its one choice.
            let choice = |line: &Value| match dialect {
                Dialect::V20240529 => line.clone(),
                _ => line["choices"][0].clone(),
            };
            let first = lines(&encoder.opening(&opening()));
            assert_eq!(choice(&first[0])["sessionState"], "chat-1", "{dialect:?}");
            let found = DataPoints {
                text: vec!["a.md: A".into()],
                citations: vec!["a.md".into()],
            };
            assert!(encoder.event(TurnEvent::Found(found)).is_empty());
            let thought = |title: &str| {
                TurnEvent::Thought(Thought {
                    title: title.into(),
                    description: Value::Null,
                    props: None,
                })
            };
            let told = lines(&encoder.event(thought("Tool result: search_documents")));
            let context = |line: &Value| choice(line)["context"].clone();
            assert_eq!(
                context(&told[0])["data_points"]["citations"],
                json!(["a.md"]),
                "{dialect:?}"
            );
            let next = lines(&encoder.event(thought("Tool call: add")));
            assert!(
                context(&next[0]).get("data_points").is_none(),
                "{dialect:?}"
            );
            // A fault after the first line is the protocol's last error line.
            let fault = Fault {
                status: 502,
                message: "The model could not answer right now.".into(),
                kind: crate::FaultKind::Other,
                param: None,
                retry_after: None,
            };
            assert_eq!(
                encoder.fault(&fault),
                b"{\"error\":\"The model could not answer right now.\"}\n"
            );
        }
    }
}
