//! The settings of the chat core, read once per cold start by the functions.

/// A Bedrock guardrail to apply to every turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guardrail {
    pub id: String,
    pub version: String,
    /// Whether a streamed answer is checked as it goes out (`async`: text is shown before the guardrail has seen
    /// it) rather than held back until checked (`sync`, Bedrock's default).
    pub stream_async: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatSettings {
    pub model_id: String,
    pub system_prompt: String,
    /// `max_tokens` when a request does not override it.
    pub default_max_tokens: u32,
    pub guardrail: Option<Guardrail>,
    pub limits: RequestLimits,
    pub retrieval: RetrievalSettings,
    pub model: ModelOptions,
    /// The models a stateless completion may name (`MODEL_ID` first, then `ALLOWED_MODELS`; Bedrock model ids and
    /// inference profile ids or ARNs), without repeats. [`ChatSettings::allowed`] keeps `model_id` first.
    pub allowed_models: Vec<String>,
    /// Whether a stateless completion is grounded in the knowledge base, under the caller's document access
    /// (`OPENAI_RETRIEVAL`; off by default).
    pub openai_retrieval: bool,
    /// Whether a stateless completion offers the server's tools (`search_documents`, MCP) beside the client's
    /// (`OPENAI_SERVER_TOOLS`; off by default).
    pub openai_server_tools: bool,
    /// Whether the thoughts, which the user is shown, show the system prompt of each model call and the filters of
    /// each search (`THOUGHTS_SHOW_PROMPT`; on by default). Off, an operator's prompt and how access is filtered stay
    /// out of what the user sees.
    pub thoughts_show_prompt: bool,
}

/// What the turn asks of the model beyond its words, and what it may spend: configured once, from the model's
/// profile unless set.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOptions {
    /// What the configured model can do (from `BASE_MODEL_ID`, or from `MODEL_ID`).
    pub profile: crate::ModelProfile,
    /// The most a prompt may hold (system prompt, passages and messages), estimated: older messages are left out
    /// to stay within it.
    pub max_prompt_tokens: u64,
    /// Whether prompts carry cache points.
    pub prompt_caching: bool,
    /// The foundation model whose `CountTokens` counts a prompt exactly where the estimate could be wrong about the
    /// budget (`None`: the estimate alone decides). An inference profile's base model: `CountTokens` takes no
    /// profile ids.
    pub token_counter: Option<String>,
    /// Reasoning when a request does not ask (`None`: off).
    pub reasoning_effort: Option<crate::ReasoningEffort>,
    /// The most reasoning a request may ask for (`MAX_REASONING_EFFORT`; `None`: any).
    pub max_reasoning_effort: Option<crate::ReasoningEffort>,
    /// The tokens the model thinks within, for a model that takes a budget, when a completion names them (`None`:
    /// the effort's own budget).
    pub thinking_budget: Option<u32>,
    /// What a million tokens cost; `None` shows no cost.
    pub prices: Option<crate::Prices>,
    /// The latency setting sent when a request does not ask, and those a request may ask for.
    pub latency: Option<crate::Latency>,
    pub allowed_latencies: Vec<crate::Latency>,
    /// The service tier sent when a request does not ask, and those a request may ask for.
    pub service_tier: Option<crate::ServiceTier>,
    pub allowed_service_tiers: Vec<crate::ServiceTier>,
}

impl ModelOptions {
    /// The options of `model_id` by its profile: a prompt budget of its context window less the largest answer,
    /// caching and exact counting where they are supported, its list prices, no reasoning and no latency or tier
    /// setting.
    pub fn for_model(model_id: &str, max_output_tokens: u32) -> Self {
        let profile = crate::ModelProfile::of(model_id);
        let mut options = Self {
            profile,
            max_prompt_tokens: profile
                .context_window
                .saturating_sub(u64::from(max_output_tokens))
                .max(1024),
            prompt_caching: profile.prompt_caching,
            token_counter: None,
            reasoning_effort: None,
            max_reasoning_effort: None,
            thinking_budget: None,
            prices: profile.prices,
            latency: None,
            allowed_latencies: Vec::new(),
            service_tier: None,
            allowed_service_tiers: Vec::new(),
        };
        options.count_tokens(profile.token_counting, model_id);
        options
    }

    /// Counts prompts exactly (`on`) with the foundation model `model_id` names, or not at all. `model_id` is the id
    /// the profile comes from: an inference profile's base model counts, as `CountTokens` takes no profile ids.
    pub fn count_tokens(&mut self, on: bool, model_id: &str) {
        self.token_counter = on.then(|| crate::base_model_id(model_id).to_string());
    }
}

/// How turns search the knowledge base, when one is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrievalSettings {
    /// `top` when a request does not say.
    pub default_top: usize,
    /// Whether the model writes the search query from the conversation (`QUERY_REWRITE`); otherwise the last
    /// user message is the query.
    pub query_rewrite: bool,
    pub citations: CitationMode,
    /// Which documents a caller may be given (`DOCUMENT_ACCESS`, `DOCUMENT_EVERYONE_GROUP`).
    pub access: DocumentAccess,
    /// When the knowledge base is searched: before the model answers, as the model's `search_documents` tool, or
    /// both (`RETRIEVAL`).
    pub when: crate::SearchWhen,
    /// Whether the knowledge base's vector store takes `HYBRID` search (`KNOWLEDGE_BASE_HYBRID_SEARCH`): Bedrock
    /// offers it on OpenSearch Serverless with a filterable text field only; on any other store (Amazon S3 Vectors,
    /// the template's) every search must be `SEMANTIC`.
    pub hybrid: bool,
}

impl Default for RetrievalSettings {
    fn default() -> Self {
        Self {
            default_top: 3,
            query_rewrite: true,
            citations: CitationMode::Prompted,
            access: DocumentAccess::default(),
            when: crate::SearchWhen::default(),
            hybrid: true,
        }
    }
}

/// Who may read a document: the server decides, from the document's metadata and the caller's identity, never from
/// what a request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentAccess {
    /// A search finds only documents whose `oids` list the caller's id, or whose `groups` list one of the caller's
    /// groups or `everyone_group`, to which every caller belongs. (A knowledge base's filters cannot test for a
    /// missing attribute, so a document for everyone says so in its `groups`.)
    Enforced { everyone_group: String },
    /// Every document is searched, whatever its metadata (`DOCUMENT_ACCESS=open`): the operator's explicit choice
    /// for a collection with nothing restricted.
    Open,
}

impl DocumentAccess {
    pub const DEFAULT_EVERYONE_GROUP: &'static str = "everyone";

    pub fn as_str(&self) -> &'static str {
        match self {
            DocumentAccess::Enforced { .. } => "enforced",
            DocumentAccess::Open => "open",
        }
    }
}

impl Default for DocumentAccess {
    fn default() -> Self {
        DocumentAccess::Enforced {
            everyone_group: Self::DEFAULT_EVERYONE_GROUP.into(),
        }
    }
}

/// How the model is given the passages and cites them (`CITATIONS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CitationMode {
    /// Listed in the prompt under their names; the model is told to cite them in square brackets. Any model.
    #[default]
    Prompted,
    /// Given as Converse `searchResult` blocks with citations on; the model's own citations become the marks.
    Native,
}

impl ChatSettings {
    /// `model_id` first, then `others` in order, each once (blank ids left out): the models a completion may name.
    pub fn allowed(model_id: &str, others: &[String]) -> Vec<String> {
        let mut all = vec![model_id.to_string()];
        for id in others.iter().map(|id| id.trim()) {
            if !id.is_empty() && !all.iter().any(|a| a == id) {
                all.push(id.to_string());
            }
        }
        all
    }

    pub const DEFAULT_SYSTEM_PROMPT: &'static str =
        "You are a helpful assistant. Answer clearly and concisely.";
    pub const DEFAULT_MAX_TOKENS: u32 = 1024;
}

/// Bounds on what one request may ask for; configurable, with defaults generous for real conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    pub max_messages: usize,
    pub max_message_chars: usize,
    /// The largest `max_tokens` a request may ask for.
    pub max_output_tokens: u32,
    /// The operator's ceiling on a completion's answer (`MAX_OUTPUT_TOKENS`, when set): a completion asking for more
    /// than this or its model's own limit is held to the lesser, not refused. `None`: the model's limit.
    pub output_ceiling: Option<u32>,
    /// The largest `top` (passages to search for) a request may ask for.
    pub max_top: usize,
    /// How many files, and how large, a request may carry.
    pub files: crate::FileLimits,
    /// Which of `context.overrides` a request may use (`ALLOWED_OVERRIDES`).
    pub allowed_overrides: AllowedOverrides,
}

impl RequestLimits {
    /// The longest message `id` a save may carry. Ids are the client's own (the Chat UI makes short ones, this
    /// backend 32 hex characters); a bound keeps a message's item within DynamoDB's 400 KB whatever the id.
    pub const MAX_MESSAGE_ID_CHARS: usize = 200;
    /// The longest `agentIdentifier` or `agentName` a saved message may carry: agents' names are short.
    pub const MAX_AGENT_CHARS: usize = 200;
    /// The longest `timestamp` a saved message may carry. Times stay free text, as the Chat UI writes them
    /// (`10:15 AM`), or an RFC 3339 instant; 64 characters hold either with room to spare.
    pub const MAX_TIMESTAMP_CHARS: usize = 64;
    /// The longest session state a chat request may send as a string. This backend's session states are chat
    /// ids of 32 characters; anything far longer names no chat, and is refused before it reaches a key.
    pub const MAX_SESSION_STATE_CHARS: usize = 256;
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_messages: 500,
            max_message_chars: 80_000,
            max_output_tokens: 8192,
            output_ceiling: None,
            max_top: 20,
            files: crate::FileLimits::default(),
            allowed_overrides: AllowedOverrides::default(),
        }
    }
}

/// The overrides (`context.overrides`) a deployment lets requests use: a set of their names. By default every one
/// but `prompt_template`, which replaces the operator's system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllowedOverrides(u32);

impl AllowedOverrides {
    /// Every override this backend reads, by its name in `context.overrides`.
    pub const NAMES: [&'static str; 14] = [
        "temperature",
        "top_p",
        "max_tokens",
        "suggest_followup_questions",
        "prompt_template",
        "top",
        "retrieval_mode",
        "minimum_search_score",
        "exclude_category",
        "use_oid_security_filter",
        "use_groups_security_filter",
        "reasoning_effort",
        "latency",
        "service_tier",
    ];

    pub fn all() -> Self {
        Self((1 << Self::NAMES.len()) - 1)
    }

    pub fn none() -> Self {
        Self(0)
    }

    fn bit(name: &str) -> Option<u32> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| 1 << i)
    }

    /// Whether a request may use the override `name`.
    pub fn allows(self, name: &str) -> bool {
        Self::bit(name).is_some_and(|bit| self.0 & bit != 0)
    }

    /// The names allowed, in [`Self::NAMES`] order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES.into_iter().filter(move |n| self.allows(n))
    }

    /// From a comma-separated list of names, `all`, or `none`; an unknown name is an error naming it.
    pub fn parse_list(list: &str) -> Result<Self, String> {
        let names: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        match names.as_slice() {
            ["all"] => return Ok(Self::all()),
            ["none"] | [] => return Ok(Self::none()),
            _ => {}
        }
        names.into_iter().try_fold(Self::none(), |set, name| {
            Self::bit(name).map(|bit| Self(set.0 | bit)).ok_or_else(|| {
                format!(
                    "{name:?} is no override (the overrides are all, none, or a list of: {})",
                    Self::NAMES.join(", ")
                )
            })
        })
    }
}

impl Default for AllowedOverrides {
    fn default() -> Self {
        Self(Self::all().0 & !Self::bit("prompt_template").unwrap_or(0))
    }
}
