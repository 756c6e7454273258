//! Building the model call of a turn from the request and the settings, and the thought that tells about it.

use serde_json::{Map, Value, json};

use crate::grounding::one_line;
use crate::{
    ChatSettings, CitationMode, Grounding, InferenceSettings, Message, ModelMessage, ModelRequest,
    Overrides, Reasoning, ReasoningStyle, Role, Thought, TurnInput,
};

/// Appended to the system prompt when a request asks for follow-up questions.
pub const FOLLOWUP_INSTRUCTIONS: &str =
    "Generate 3 very brief follow-up questions that the user would likely ask next.
Enclose the follow-up questions in double angle brackets. Example:
<<Are there exclusions for prescriptions?>>
<<Which pharmacies can be ordered from?>>
<<What is the limit for over-the-counter medication?>>
Do not repeat questions that have already been asked.
Make sure the last question ends with \">>\".";

/// Appended to the system prompt when the passages are listed in the prompt (prompted citations).
pub const GROUNDING_INSTRUCTIONS: &str = "Answer only with the facts in the sources listed after the user's \
question. If the sources do not hold the answer, say that they do not; do not make an answer up.
Each source has a name, a colon and its text. Cite the source of every fact you use by its name in square \
brackets, for example [info1.txt]. Do not combine sources: cite each separately, for example [info1.txt][info2.pdf].";

/// Appended to the system prompt when the passages are given as search results (native citations).
pub const NATIVE_GROUNDING_INSTRUCTIONS: &str = "Answer only with the facts in the search results given with the \
user's question, and cite them. If they do not hold the answer, say that they do not; do not make an answer up.";

/// A turn ready to send: the model call, and the thought describing it.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedTurn {
    pub request: ModelRequest,
    pub prompt_thought: Thought,
}

/// The system prompt: the configured one, replaced by `prompt_template`, or extended by it when it starts with `>>>`;
/// then how to use the sources, when the turn is grounded; then how to suggest follow-up questions.
pub(crate) fn system_prompt(settings: &ChatSettings, input: &TurnInput, grounded: bool) -> String {
    let mut system = match input.overrides.prompt_template.as_deref() {
        Some(t) if t.starts_with(">>>") => {
            format!("{}\n\n{}", settings.system_prompt, t[3..].trim_start())
        }
        Some(t) => t.to_string(),
        None => settings.system_prompt.clone(),
    };
    if grounded {
        system.push_str("\n\n");
        system.push_str(match settings.retrieval.citations {
            CitationMode::Prompted => GROUNDING_INSTRUCTIONS,
            CitationMode::Native => NATIVE_GROUNDING_INSTRUCTIONS,
        });
    }
    if input.overrides.suggest_followup_questions {
        system.push_str("\n\n");
        system.push_str(FOLLOWUP_INSTRUCTIONS);
    }
    system
}

/// The passages as the prompt lists them after the question: `\n\nSources:\n` and a line `<citation>: <text>`
/// for each.
pub(crate) fn sources_section(grounding: &Grounding) -> String {
    let mut sources = String::from("\n\nSources:");
    for p in &grounding.passages {
        sources.push_str(&format!("\n{}: {}", p.citation(), one_line(&p.text)));
    }
    sources
}

/// Adds `text` as `role`'s: to the last message when it is that role's, as models want the roles to alternate.
pub(crate) fn push_text(out: &mut Vec<ModelMessage>, role: Role, text: String) {
    match out.last_mut() {
        Some(last) if last.role == role => last.texts.push(text),
        _ => out.push(ModelMessage::text(role, vec![text])),
    }
}

/// Consecutive messages of one role become one model message with several text blocks (and their files).
pub(crate) fn model_messages(messages: &[Message]) -> Vec<ModelMessage> {
    let mut out: Vec<ModelMessage> = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let text = m.text();
        // The conversation ends in the client's calls, which it ran (a stateless completion continues): what the
        // answer said went before its calls, and their results are the last message.
        if i + 1 == messages.len() && m.role == Role::Assistant && m.tools().next().is_some() {
            if !text.is_empty() {
                push_text(&mut out, m.role, text);
            }
            push_tool_rounds(&mut out, m);
            continue;
        }
        push_tool_rounds(&mut out, m);
        // An answer of tool calls alone says nothing after them.
        if text.is_empty() && m.tools().next().is_some() {
            continue;
        }
        push_text(&mut out, m.role, text);
        if let Some(last) = out.last_mut() {
            last.files.extend(m.files().cloned());
        }
    }
    out
}

/// The tools an answer called, replayed as the model made them: for each round, its calls (the assistant's) and
/// their results (the user's), before the answer's text.
fn push_tool_rounds(out: &mut Vec<ModelMessage>, message: &Message) {
    let mut rounds: Vec<(u32, Vec<&crate::ToolExchange>)> = Vec::new();
    for exchange in message.tools() {
        match rounds.iter_mut().find(|(r, _)| *r == exchange.round) {
            Some((_, calls)) => calls.push(exchange),
            None => rounds.push((exchange.round, vec![exchange])),
        }
    }
    rounds.sort_by_key(|(r, _)| *r);
    for (_, calls) in rounds {
        let mut asked = ModelMessage::text(Role::Assistant, Vec::new());
        asked.tool_uses = calls.iter().map(|e| e.call()).collect();
        let mut answered = ModelMessage::text(Role::User, Vec::new());
        answered.tool_results = calls.iter().map(|e| e.result()).collect();
        match out.last_mut() {
            // Text the answer said before a call stays before it: one assistant message.
            Some(last) if last.role == Role::Assistant && last.tool_uses.is_empty() => {
                last.tool_uses = asked.tool_uses;
            }
            _ => out.push(asked),
        }
        out.push(answered);
    }
}

/// Keeps the earlier answers' tool calls as tool use when every tool they called is `offered` now; otherwise
/// writes them as text (a model provider refuses tool use blocks of tools the request does not offer).
pub(crate) fn tools_offered_or_text(conversation: &mut [Message], offered: &[&str]) {
    for message in conversation.iter_mut() {
        if message.tools().all(|t| offered.contains(&t.name.as_str())) {
            continue;
        }
        for part in message.content.iter_mut() {
            if let crate::ContentPart::Tool(exchange) = part {
                *part = crate::ContentPart::Text(exchange.as_text());
            }
        }
    }
}

/// The model's settings under the request's overrides; `temperature` (an agent's own) wins over the request's.
pub(crate) fn inference_settings(
    settings: &ChatSettings,
    overrides: &Overrides,
    temperature: Option<f64>,
) -> InferenceSettings {
    InferenceSettings {
        max_tokens: overrides.max_tokens.unwrap_or(settings.default_max_tokens),
        temperature: temperature.or(overrides.temperature),
        top_p: overrides.top_p,
        top_k: None,
    }
}

/// How the configured model reasons for this request, when it does (an agent with a model of its own does not).
fn reasoning(settings: &ChatSettings, input: &TurnInput) -> Option<Reasoning> {
    let options = &settings.model;
    input
        .overrides
        .reasoning_effort
        .or(options.reasoning_effort)
        .filter(|_| options.profile.reasoning != ReasoningStyle::Unsupported)
        .map(|effort| Reasoning {
            budget_tokens: options
                .thinking_budget
                .unwrap_or_else(|| effort.budget_tokens()),
            ..Reasoning::new(effort, options.profile.reasoning)
        })
}

/// The most tokens one model call of this request may write: its `max_tokens`, and the budget the model reasons
/// in where reasoning counts within it.
pub(crate) fn output_cap(settings: &ChatSettings, input: &TurnInput) -> u32 {
    let mut cap = inference_settings(settings, &input.overrides, None).max_tokens;
    if let Some(r) = reasoning(settings, input)
        && r.style == ReasoningStyle::AnthropicBudget
    {
        cap += r.budget_tokens;
    }
    cap
}

/// Who speaks in one answer of a turn, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Speaker {
    /// The agent who speaks, as its messages are stored; `None` for the standard answer.
    pub name: Option<String>,
    /// The whole system prompt, instructions for the sources included.
    pub system: String,
    /// The speaker's own model; `None` is the configured one.
    pub model_id: Option<String>,
    /// The speaker's own temperature, over the request's.
    pub temperature: Option<f64>,
    /// How the passages are given to the model.
    pub citations: CitationMode,
    /// Whether the answer ends in follow-up questions, to cut out.
    pub followups: bool,
}

impl Speaker {
    /// The standard turn's speaker: the configured model, prompted as the settings and the request say.
    pub(crate) fn standard(settings: &ChatSettings, input: &TurnInput, grounded: bool) -> Self {
        Self {
            name: None,
            system: system_prompt(settings, input, grounded),
            model_id: None,
            temperature: None,
            citations: settings.retrieval.citations,
            followups: input.overrides.suggest_followup_questions,
        }
    }

    /// An agent of a group: its instructions, who it is talking with, how other agents' messages are shown, and
    /// (in a grounded round) to cite the sources in square brackets; its own model and temperature.
    pub(crate) fn agent(agent: &crate::Agent, group: &crate::AgentGroup, grounded: bool) -> Self {
        let others: Vec<&str> = group
            .agents
            .iter()
            .filter(|a| a.name != agent.name)
            .map(|a| a.name.as_str())
            .collect();
        let mut system = format!(
            "{}\n\nYou are {}, in a group conversation with the user{}. Messages from the other agents are \
             shown as \"Name: text\". Answer only as {}.",
            agent.instructions,
            agent.name,
            if others.is_empty() {
                String::new()
            } else {
                format!(" and the agents {}", others.join(", "))
            },
            agent.name
        );
        // A grounded round's answers are whole, so its passages are never given as native search results.
        if grounded {
            system.push_str("\n\n");
            system.push_str(GROUNDING_INSTRUCTIONS);
        }
        Self {
            name: Some(agent.name.clone()),
            system,
            model_id: agent.model_id.clone(),
            temperature: agent.temperature,
            citations: CitationMode::Prompted,
            followups: false,
        }
    }

    /// The conversation as this speaker sees it. The standard speaker: as it is. An agent: its own messages are its
    /// turns; the user's (with their files) and the other agents' (attributed, "Name: text") are the other side.
    pub(crate) fn view(
        &self,
        conversation: &[Message],
        authors: &[Option<String>],
    ) -> Vec<Message> {
        let Some(me) = &self.name else {
            return conversation.to_vec();
        };
        let mut out: Vec<Message> = Vec::with_capacity(conversation.len() + 1);
        for (message, author) in conversation.iter().zip(authors) {
            out.push(match author {
                Some(a) if a == me => Message::new(Role::Assistant, message.text()),
                Some(a) => Message::new(Role::User, format!("{a}: {}", message.text())),
                None => message.clone(),
            });
        }
        if out.last().is_some_and(|m| m.role == Role::Assistant) {
            out.push(Message::new(Role::User, "Continue."));
        }
        out
    }
}

/// The model call that answers `conversation` under the request's overrides.
/// With `grounding`, the passages go with the last user message: listed under their names after its text
/// (prompted citations), or as search results (native citations).
pub fn prepare_turn(
    settings: &ChatSettings,
    input: &TurnInput,
    conversation: &[Message],
    grounding: Option<&Grounding>,
) -> PreparedTurn {
    model_request(
        settings,
        input,
        (
            &Speaker::standard(settings, input, grounding.is_some()),
            conversation,
            grounding,
        ),
    )
}

/// The one place a turn's model call is built, for any speaker: its conversation as model messages (files and
/// earlier tool calls included), the passages with the last user message, inference under the request's
/// overrides and the speaker's temperature, reasoning when the speaker is the configured model (whose profile
/// says how it reasons), and the thought that tells about it.
/// `conversation` is what the speaker sees, oldest first, its files read; `grounding` what the turn's search found.
pub(crate) fn model_request(
    settings: &ChatSettings,
    input: &TurnInput,
    (speaker, conversation, grounding): (&Speaker, &[Message], Option<&Grounding>),
) -> PreparedTurn {
    let system = speaker.system.clone();
    let own_model = speaker
        .model_id
        .as_deref()
        .filter(|m| *m != settings.model_id);
    let mut inference = inference_settings(settings, &input.overrides, speaker.temperature);
    let mut messages = model_messages(conversation);
    let mut search_results = Vec::new();
    // With a guardrail, the passages are what its contextual grounding check holds the answer to, beside the
    // question: they go to the model as guard content rather than in the question's text.
    // Passages found, that is: a grounding check against nothing would block every answer.
    let grounding_source = grounding
        .filter(|g| settings.guardrail.is_some() && !g.passages.is_empty())
        .map(sources_section);
    if let Some(grounding) = grounding {
        match speaker.citations {
            CitationMode::Prompted if grounding_source.is_none() => {
                if let Some(text) = messages
                    .last_mut()
                    .filter(|m| m.role == Role::User)
                    .and_then(|m| m.texts.last_mut())
                {
                    text.push_str(&sources_section(grounding));
                }
            }
            CitationMode::Prompted => {}
            CitationMode::Native => search_results = grounding.passages.clone(),
        }
    }
    let options = &settings.model;
    let reasoning = reasoning(settings, input).filter(|_| own_model.is_none());
    if let Some(reasoning) = reasoning {
        match reasoning.style {
            // Claude thinks within max_tokens and takes no sampling settings while it thinks.
            ReasoningStyle::AnthropicBudget => {
                inference.max_tokens += reasoning.budget_tokens;
                inference.temperature = None;
                inference.top_p = None;
            }
            ReasoningStyle::AnthropicAdaptive => {
                inference.temperature = None;
                inference.top_p = None;
            }
            _ => {}
        }
    }
    let request = ModelRequest {
        model_id: own_model.unwrap_or(&settings.model_id).to_string(),
        system,
        messages,
        inference,
        guardrail: settings.guardrail.clone(),
        search_results,
        reasoning,
        prompt_caching: options.prompt_caching,
        latency: input.overrides.latency.or(options.latency),
        service_tier: input.overrides.service_tier.or(options.service_tier),
        grounding_source,
        tools: Vec::new(),
        question: None,
        tool_choice: crate::ToolChoice::Auto,
        stop_sequences: Vec::new(),
        response_format: crate::ResponseFormat::Text,
    };
    let mut prompt_thought = prompt_thought(&request, settings.thoughts_show_prompt);
    if !input.overrides.not_used.is_empty()
        && let Some(Value::Object(props)) = &mut prompt_thought.props
    {
        props.insert("overrides_not_used".into(), json!(input.overrides.not_used));
    }
    PreparedTurn {
        request,
        prompt_thought,
    }
}

fn prompt_thought(request: &ModelRequest, show_system: bool) -> Thought {
    let mut description = system_shown(&request.system, show_system);
    description.extend(request.messages.iter().map(|m| {
        let mut entry = json!({"role": m.role.as_str(), "content": m.texts.join("\n\n")});
        if !m.files.is_empty() {
            entry["files"] = json!(m.files.iter().map(|f| &f.name).collect::<Vec<_>>());
        }
        entry
    }));
    let mut props = Map::new();
    props.insert("model".into(), json!(request.model_id));
    props.insert("max_tokens".into(), json!(request.inference.max_tokens));
    if let Some(t) = request.inference.temperature {
        props.insert("temperature".into(), json!(t));
    }
    if let Some(p) = request.inference.top_p {
        props.insert("top_p".into(), json!(p));
    }
    if !request.search_results.is_empty() {
        props.insert(
            "search_results".into(),
            json!(
                request
                    .search_results
                    .iter()
                    .map(|p| p.citation())
                    .collect::<Vec<_>>()
            ),
        );
    }
    if let Some(g) = &request.guardrail {
        props.insert(
            "guardrail".into(),
            json!({
                "id": g.id,
                "version": g.version,
                "grounding_check": request.grounding_source.is_some(),
            }),
        );
    }
    if let Some(r) = &request.reasoning {
        props.insert("reasoning_effort".into(), json!(r.effort.as_str()));
        if r.style == ReasoningStyle::AnthropicBudget {
            props.insert("reasoning_budget_tokens".into(), json!(r.budget_tokens));
        }
    }
    props.insert("prompt_caching".into(), json!(request.prompt_caching));
    if let Some(l) = request.latency {
        props.insert("latency".into(), json!(l.as_str()));
    }
    if let Some(t) = request.service_tier {
        props.insert("service_tier".into(), json!(t.as_str()));
    }
    Thought {
        title: "Prompt to generate answer".into(),
        description: Value::Array(description),
        props: Some(Value::Object(props)),
    }
}

/// The system message a prompt thought opens with: none when the operator keeps the system prompt out of thoughts
/// (`THOUGHTS_SHOW_PROMPT=false`).
pub(crate) fn system_shown(system: &str, show: bool) -> Vec<Value> {
    if show {
        vec![json!({"role": "system", "content": system})]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RequestLimits;

    fn settings() -> ChatSettings {
        ChatSettings {
            model_id: "m".into(),
            system_prompt: "Base.".into(),
            default_max_tokens: 100,
            guardrail: None,
            limits: RequestLimits::default(),
            retrieval: crate::RetrievalSettings::default(),
            model: crate::ModelOptions::for_model("m", 8192),
            allowed_models: vec!["m".into()],
            openai_retrieval: false,
            openai_server_tools: false,
            thoughts_show_prompt: true,
        }
    }

    fn input(overrides: Overrides, messages: Vec<Message>) -> TurnInput {
        TurnInput {
            messages,
            overrides,
            session_state: None,
            session_field: "sessionState",
            store_new_chat: true,
        }
    }

    fn prepared(s: &ChatSettings, input: TurnInput) -> PreparedTurn {
        prepare_turn(s, &input, &input.messages, None)
    }

    fn user(text: &str) -> Message {
        Message::new(Role::User, text)
    }

    #[test]
    fn prompt_template_replaces_or_extends_the_system_prompt() {
        let with = |t: &str| Overrides {
            prompt_template: Some(t.into()),
            ..Overrides::default()
        };
        let s = settings();
        assert_eq!(
            prepared(&s, input(Overrides::default(), vec![user("q")]))
                .request
                .system,
            "Base."
        );
        assert_eq!(
            prepared(&s, input(with("Other."), vec![user("q")]))
                .request
                .system,
            "Other."
        );
        assert_eq!(
            prepared(&s, input(with(">>> Be terse."), vec![user("q")]))
                .request
                .system,
            "Base.\n\nBe terse."
        );
        let followups = Overrides {
            suggest_followup_questions: true,
            ..Overrides::default()
        };
        let system = prepared(&s, input(followups, vec![user("q")]))
            .request
            .system;
        assert!(
            system.starts_with("Base.\n\nGenerate 3 very brief follow-up questions"),
            "{system}"
        );
    }

    #[test]
    fn overrides_reach_the_inference_settings() {
        let o = Overrides {
            temperature: Some(0.2),
            top_p: Some(0.5),
            max_tokens: Some(7),
            ..Overrides::default()
        };
        let turn = prepared(&settings(), input(o, vec![user("q")]));
        assert_eq!(
            turn.request.inference,
            InferenceSettings {
                max_tokens: 7,
                temperature: Some(0.2),
                top_p: Some(0.5),
                top_k: None,
            }
        );
        let props = turn.prompt_thought.props.as_ref().unwrap();
        assert_eq!(props["temperature"], 0.2);
        assert_eq!(props["model"], "m");
        let defaulted = prepared(&settings(), input(Overrides::default(), vec![user("q")]));
        assert_eq!(defaulted.request.inference.max_tokens, 100);
        assert!(
            defaulted
                .prompt_thought
                .props
                .as_ref()
                .unwrap()
                .get("temperature")
                .is_none()
        );
    }

    #[test]
    fn consecutive_messages_of_one_role_are_merged() {
        let msgs = vec![
            user("a"),
            user("b"),
            Message::new(Role::Assistant, "c"),
            user("d"),
        ];
        let turn = prepared(&settings(), input(Overrides::default(), msgs));
        let roles: Vec<_> = turn
            .request
            .messages
            .iter()
            .map(|m| (m.role, m.texts.len()))
            .collect();
        assert_eq!(
            roles,
            [(Role::User, 2), (Role::Assistant, 1), (Role::User, 1)]
        );
    }
}
