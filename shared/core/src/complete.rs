//! A stateless completion (OpenAI's Chat Completions): a turn whose client sends the whole conversation, answered
//! through the same steps and driver as every route, under the model and instructions the client names, with the
//! client's function tools (a call of one ends the answer), its tool choice, stop sequences and answer format; the
//! knowledge base and the server's tools only where the operator turns them on; nothing stored in history.

use std::collections::HashMap;

use crate::completion::Plan;
use crate::prompt::{Speaker, system_prompt};
use crate::turn::Scope;
use crate::{
    Answer, Caller, ChatError, ChatMode, ChatModel, ChatService, ChatSettings, Completion,
    InvalidRequest, MIN_THINKING_BUDGET, ModelOptions, ReasoningBlock, ReasoningEffort,
    ReasoningStyle, ResponseFormat, Role, SessionStore, StreamingTurn, Thinking, ToolChoice,
    ToolSpec, TurnInput,
};

/// The most stop sequences a request may name (Converse's bound for the models that take them).
pub const MAX_STOP_SEQUENCES: usize = 4;

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Starts a completion's streamed answer ([`Self::stream`] for a stateless turn): its text, reasoning and
    /// thoughts as they come, each client tool call as [`crate::TurnEvent::ToolCall`], then the end
    /// ([`crate::FinishReason::ToolCalls`] when the model asked for the client's tools). Once the end is read, hand
    /// the turn to [`Self::save_streamed`]: nothing goes to history, but the account settles there, and the
    /// reasoning of client calls is kept for the continuation.
    pub async fn complete_stream(
        &self,
        caller: &Caller,
        input: &TurnInput,
        completion: &Completion,
    ) -> Result<StreamingTurn<M::Stream>, ChatError> {
        let (turn, call) = self.prepare_completion(caller, input, completion).await?;
        self.stream_prepared(turn, call).await
    }

    /// A completion's whole answer ([`Self::answer`] for a stateless turn), the client's tool calls in
    /// [`Answer::tool_calls`]; its account settled, nothing stored in history.
    pub async fn complete(
        &self,
        caller: &Caller,
        input: &TurnInput,
        completion: &Completion,
    ) -> Result<Answer, ChatError> {
        let (turn, call) = self.prepare_completion(caller, input, completion).await?;
        self.answer_prepared(caller, turn, call).await
    }

    /// A completion's whole answer made by the model, to read as a stream ([`Self::whole`] for a stateless turn):
    /// read it to its end, then hand it to [`Self::save_answered`], which settles its account and stores nothing.
    pub async fn complete_whole(
        &self,
        caller: &Caller,
        input: &TurnInput,
        completion: &Completion,
    ) -> Result<StreamingTurn<crate::ReplyStream>, ChatError> {
        let (turn, call) = self.prepare_completion(caller, input, completion).await?;
        self.whole_prepared(turn, call).await
    }

    /// The input tokens a completion's request holds (its system prompt, conversation and tools), without answering
    /// it and without charging anyone: counted by the model's `CountTokens` where the completion's model has a
    /// counter, else estimated. Returns the count and whether it is exact.
    pub async fn count_completion(
        &self,
        input: &TurnInput,
        completion: &Completion,
    ) -> Result<(u64, bool), ChatError> {
        let settings = self.completion_settings(completion)?;
        let request = crate::ModelRequest {
            model_id: settings.model_id.clone(),
            system: settings.system_prompt.clone(),
            messages: crate::prompt::model_messages(&input.messages),
            tools: completion.tools.clone(),
            ..crate::ModelRequest::default()
        };
        if let Some(counter) = settings.model.token_counter.as_deref() {
            match self.model().count_tokens(counter, &request).await {
                Ok(Some(exact)) => return Ok((exact, true)),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(operation = "CountTokens", model_id = %counter, error = %e, "counting failed: the estimate answers");
                }
            }
        }
        Ok((crate::estimate_request_tokens(&request), false))
    }

    /// The settings a completion answers under: the model it names (one the operator allows, with its own
    /// profile's window, prices, caching and reasoning style), its system blocks in place of the system prompt, and
    /// its thinking (off, or within the budget it names).
    pub fn completion_settings(&self, completion: &Completion) -> Result<ChatSettings, ChatError> {
        let mut settings = self.settings.clone();
        if let Some(id) = completion
            .model_id
            .as_deref()
            .filter(|id| *id != settings.model_id)
        {
            if !settings.allowed_models.iter().any(|m| m == id) {
                return Err(ChatError::ModelNotFound(id.to_string()));
            }
            let configured = &settings.model;
            let mut options = ModelOptions::for_model(id, settings.limits.max_output_tokens);
            // What the operator turned off for the configured model stays off for the others.
            options.prompt_caching &=
                configured.prompt_caching || !configured.profile.prompt_caching;
            if configured.token_counter.is_none() && configured.profile.token_counting {
                options.token_counter = None;
            }
            options.reasoning_effort = configured.reasoning_effort;
            options.max_reasoning_effort = configured.max_reasoning_effort;
            options.latency = configured.latency;
            options.allowed_latencies = configured.allowed_latencies.clone();
            options.service_tier = configured.service_tier;
            options.allowed_service_tiers = configured.allowed_service_tiers.clone();
            settings.model_id = id.to_string();
            settings.model = options;
        }
        // The client's instructions come after the operator's prompt, which keeps its place (its rules hold on every
        // route); they replace it where the operator lets requests replace it (`prompt_template` allowed), or where
        // the operator wrote none (the default prompt is no rule of theirs, and coding agents bring their own).
        if let Some(system) = completion.system_prompt() {
            let operators = settings.system_prompt.as_str();
            settings.system_prompt = if settings.limits.allowed_overrides.allows("prompt_template")
                || operators == ChatSettings::DEFAULT_SYSTEM_PROMPT
            {
                system
            } else {
                format!("{operators}\n\n{system}")
            };
        }
        match completion.thinking {
            Some(Thinking::Off) => settings.model.reasoning_effort = None,
            Some(Thinking::Budget(tokens)) => settings.model.thinking_budget = Some(tokens),
            Some(Thinking::Effort(_)) | None => {}
        }
        Ok(settings)
    }

    /// A completion's turn prepared under its settings and scope, and its call made ready.
    async fn prepare_completion(
        &self,
        caller: &Caller,
        input: &TurnInput,
        completion: &Completion,
    ) -> Result<(crate::turn::Turn, crate::call::Call), ChatError> {
        let mut settings = self.completion_settings(completion)?;
        let mut input = input.clone();
        with_completion_terms(&mut input, completion);
        // The overrides are the completion's own fields (`reasoning_effort`, …): a refusal names them so.
        crate::checks::check_overrides(&settings, &input.overrides).map_err(|mut e| {
            if let Some(field) = e.path.strip_prefix("context.overrides.") {
                e.path = field.to_string();
            }
            e
        })?;
        check_completion(&settings, &input, completion)?;
        let reasoning = self
            .kept_reasoning(caller, &input, &settings, completion)
            .await;
        if reasoning.is_none() {
            // The model would refuse its own tool calls without their reasoning: it answers without reasoning.
            settings.model.reasoning_effort = None;
            input.overrides.reasoning_effort = None;
        }
        let plan = Plan {
            tools: match completion.tool_choice {
                ToolChoice::None => Vec::new(),
                // Strict tool use where the model has Bedrock's structured output; elsewhere the schema is given
                // unenforced, as the model would refuse the flag.
                _ => completion
                    .tools
                    .iter()
                    .map(|tool| ToolSpec {
                        strict: tool.strict && settings.model.profile.structured_output,
                        ..tool.clone()
                    })
                    .collect(),
            },
            tool_choice: completion.tool_choice.clone(),
            parallel: completion.parallel_tool_calls,
            stop: completion.stop_sequences.clone(),
            top_k: completion.sampling.top_k,
            response_format: completion.response_format.clone(),
            reasoning: reasoning.unwrap_or_default(),
            client_keeps_reasoning: completion.client_keeps_reasoning,
        };
        let retrieval = settings.openai_retrieval;
        let grounded_hint = retrieval && self.retriever.is_some();
        let hint = system_prompt(&settings, &input, grounded_hint);
        let scope = Scope {
            server_tools: settings.openai_server_tools
                && completion.tool_choice != ToolChoice::None,
            retrieval,
            own: Some(Box::new(settings)),
            completion: Some(Box::new(plan)),
        };
        let turn = self
            .prepare_scoped(caller, &input, (ChatMode::Standard, &hint), scope)
            .await?;
        let speaker = Speaker::standard(
            turn.scope.settings(&self.settings),
            &input,
            turn.grounding.is_some(),
        );
        let call = self.speak(&turn, &input, speaker).await;
        Ok((turn, call))
    }

    /// The reasoning kept for the client calls a conversation continues (its last message, an answer of tool
    /// calls): `Some` (empty when nothing is needed or kept) or `None` when Claude reasons but its reasoning for
    /// those calls is gone, so the continuation must be answered without reasoning (which is logged). A client
    /// that keeps the reasoning itself gave it back with the request: none is read from the store.
    async fn kept_reasoning(
        &self,
        caller: &Caller,
        input: &TurnInput,
        settings: &ChatSettings,
        completion: &Completion,
    ) -> Option<HashMap<String, Vec<ReasoningBlock>>> {
        let reasons = input
            .overrides
            .reasoning_effort
            .or(settings.model.reasoning_effort)
            .is_some()
            && settings.model.profile.reasoning != ReasoningStyle::Unsupported;
        let continued = input
            .messages
            .last()
            .filter(|m| m.role == Role::Assistant)
            .and_then(|m| m.tools().next());
        let (true, Some(first)) = (reasons, continued) else {
            return Some(HashMap::new());
        };
        // Claude refuses its tool use without the reasoning that led to it; other models take it without.
        let required = matches!(
            settings.model.profile.reasoning,
            ReasoningStyle::AnthropicBudget | ReasoningStyle::AnthropicAdaptive
        );
        if completion.client_keeps_reasoning {
            if required && !completion.reasoning.contains_key(&first.id) {
                tracing::info!(call_id = %first.id, "the client gave back no reasoning for the tool calls continued: the model answers without reasoning");
                return None;
            }
            return Some(completion.reasoning.clone());
        }
        match self.store.kept_reasoning(&caller.owner, &first.id).await {
            Ok(Some(blocks)) => Some(HashMap::from([(first.id.clone(), blocks)])),
            Ok(None) if !required => Some(HashMap::new()),
            Err(e) if !required => {
                tracing::warn!(call_id = %first.id, error = %e, "reading the reasoning of the tool calls continued failed");
                Some(HashMap::new())
            }
            Ok(None) => {
                tracing::info!(call_id = %first.id, "no reasoning is kept for the tool calls continued (expired, or never made): the model answers without reasoning");
                None
            }
            Err(e) => {
                tracing::warn!(call_id = %first.id, error = %e, "reading the reasoning of the tool calls continued failed: the model answers without reasoning");
                None
            }
        }
    }
}

/// The completion's sampling, answer length and thinking effort as the turn's overrides, where the core's steps
/// read them (and [`crate::checks::check_overrides`] holds them to the operator's bounds); a thinking budget asks
/// for the least effort that holds it, and no thinking for none.
fn with_completion_terms(input: &mut TurnInput, completion: &Completion) {
    let overrides = &mut input.overrides;
    let sampling = completion.sampling;
    overrides.temperature = sampling.temperature.or(overrides.temperature);
    overrides.top_p = sampling.top_p.or(overrides.top_p);
    overrides.max_tokens = completion.max_output_tokens.or(overrides.max_tokens);
    match completion.thinking {
        None => {}
        Some(Thinking::Off) => overrides.reasoning_effort = None,
        Some(Thinking::Effort(effort)) => overrides.reasoning_effort = Some(effort),
        Some(Thinking::Budget(tokens)) => {
            overrides.reasoning_effort = Some(ReasoningEffort::for_budget(tokens));
        }
    }
}

/// Refuses what the completion's model cannot do, naming the field: too many stop sequences, a thinking budget
/// below the least, `top_k` for a model that does not take it, a tool choice of a tool not offered or a model that
/// cannot be made to call one, an answer format the model cannot keep to.
fn check_completion(
    settings: &ChatSettings,
    input: &TurnInput,
    completion: &Completion,
) -> Result<(), ChatError> {
    let model = &settings.model_id;
    // The model's profile as the settings hold it: `BASE_MODEL_ID`'s for the configured model.
    let profile = settings.model.profile;
    let stop = &completion.stop_sequences;
    if stop.len() > MAX_STOP_SEQUENCES {
        return Err(InvalidRequest::new(
            "stop",
            format!(
                "at most {MAX_STOP_SEQUENCES} stop sequences, not {}",
                stop.len()
            ),
        )
        .into());
    }
    if stop.iter().any(|s| s.is_empty()) {
        return Err(InvalidRequest::new("stop", "a stop sequence may not be empty").into());
    }
    if let Some(Thinking::Budget(tokens)) = completion.thinking
        && tokens < MIN_THINKING_BUDGET
    {
        return Err(InvalidRequest::new(
            "thinking.budget_tokens",
            format!("must be at least {MIN_THINKING_BUDGET}, not {tokens}"),
        )
        .into());
    }
    if completion.sampling.top_k.is_some() && !profile.top_k {
        return Err(
            InvalidRequest::new("top_k", format!("the model {model} takes no top_k")).into(),
        );
    }
    let forced = match &completion.tool_choice {
        ToolChoice::Auto | ToolChoice::None => false,
        ToolChoice::Any => {
            if completion.tools.is_empty() {
                return Err(InvalidRequest::new("tool_choice", "\"required\" needs tools").into());
            }
            true
        }
        ToolChoice::Tool(name) => {
            if !completion.tools.iter().any(|t| t.name == *name) {
                return Err(InvalidRequest::new(
                    "tool_choice",
                    format!("names the function {name:?}, which is not among the tools"),
                )
                .into());
            }
            true
        }
    };
    if forced {
        if !profile.tool_choice {
            return Err(InvalidRequest::new(
                "tool_choice",
                format!(
                    "the model {model} cannot be made to call a tool: use \"auto\" or \"none\""
                ),
            )
            .into());
        }
        let reasons = input
            .overrides
            .reasoning_effort
            .or(settings.model.reasoning_effort)
            .is_some();
        if reasons
            && matches!(
                profile.reasoning,
                ReasoningStyle::AnthropicBudget | ReasoningStyle::AnthropicAdaptive
            )
        {
            return Err(InvalidRequest::new(
                "tool_choice",
                format!(
                    "the model {model} cannot be made to call a tool while it reasons: use \"auto\" or \"none\", or no reasoning_effort"
                ),
            )
            .into());
        }
    }
    if completion.response_format != ResponseFormat::Text && !profile.structured_output {
        return Err(InvalidRequest::new(
            "response_format",
            format!("the model {model} cannot be held to a JSON format (structured output): use \"text\""),
        )
        .into());
    }
    Ok(())
}
