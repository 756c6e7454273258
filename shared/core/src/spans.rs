//! The span a tool call runs in, so that each call's duration is a line of the log and a span of a turn's trace,
//! as the model's, the knowledge base's and the store's calls are (chat-aws opens those; chat-runtime writes and
//! exports them). The tool loop (`tools::run_call`) opens one around each call of a tool it offered.

/// The span of one call of `tool`: the name of a tool the turn offered (the operator's or built in, never a name
/// only the model or a caller wrote). The caller
/// records `outcome` (`ok` or `error`) once it is known. Neither the call's input nor its output belongs in it:
/// both are the conversation's.
pub fn tool_call_span(tool: &str) -> tracing::Span {
    tracing::info_span!("tool.call", tool, outcome = tracing::field::Empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_span_is_at_info_and_holds_only_the_tools_name_and_outcome() {
        tracing::subscriber::with_default(tracing_subscriber::registry(), || {
            let span = tool_call_span("calculator");
            let metadata = span.metadata().expect("an INFO span is enabled");
            assert_eq!(metadata.name(), "tool.call");
            assert_eq!(*metadata.level(), tracing::Level::INFO);
            let fields: Vec<&str> = metadata.fields().iter().map(|f| f.name()).collect();
            assert_eq!(fields, ["tool", "outcome"]);
        });
    }
}
