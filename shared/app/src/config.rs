//! The functions' configuration, read from the environment once per cold start.

use std::time::Duration;

use chat_core::EmbeddingModels;
use chat_core::{
    AgentGroup, AllowedOverrides, ChatSettings, CitationMode, DocumentAccess, FileLimits,
    Guardrail, Latency, LimitKind, Limits, ModelOptions, ReasoningStyle, RequestLimits,
    RetrievalSettings, SearchWhen, ServiceTier, StoreTimeouts, ToolBounds,
};
use chat_protocol::anthropic::ModelNames;
use chat_protocol::chat_ui::ReplyShape;

use chat_edge::{ConfigError, Cors};

/// Everything a function needs to know about its deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub chat: ChatSettings,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Largest body the history routes accept, in bytes (`MAX_HISTORY_BODY_BYTES`): a Chat UI save carries the
    /// whole chat.
    pub max_history_body_bytes: usize,
    /// Largest request body with files accepted, in bytes (`MAX_UPLOAD_BYTES`): a `multipart/form-data` one, or a JSON
    /// one whose messages carry `files`.
    pub max_upload_bytes: usize,
    /// Parameters a Chat Completions request may carry unapplied, named back in the answer, beside the vendor ones
    /// every deployment takes (`OPENAI_IGNORED_PARAMETERS`, comma-separated).
    pub ignored_parameters: Vec<String>,
    /// The S3 bucket that keeps the files of messages (`ATTACHMENTS_BUCKET`); `None` takes no files.
    pub attachments_bucket: Option<String>,
    /// How long a listed file's presigned URL may be used (`ATTACHMENT_URL_SECONDS`).
    pub attachment_url_lifetime: Duration,
    /// How long one model call may take to start answering.
    pub model_timeout: Duration,
    /// The DynamoDB table of chats and messages.
    pub table_name: String,
    /// Chats expire this many days after they were created; `None` keeps them.
    pub history_ttl_days: Option<u32>,
    /// How long a response of the Responses API asked to be kept (`store: true`) is kept (`RESPONSES_KEPT_DAYS`,
    /// default 30).
    pub responses_kept_days: u32,
    /// The secret the Responses API seals a model's signed reasoning with, for a client that keeps it
    /// (`store: false` with `include: ["reasoning.encrypted_content"]`; `RESPONSES_REASONING_KEY`, at least 32
    /// characters); `None`: such reasoning is kept by the backend for a day instead.
    pub responses_reasoning_key: Option<SecretText>,
    /// How long DynamoDB may take to connect, per attempt and per call with its retries (`STORE_CONNECT_TIMEOUT_MS`,
    /// `STORE_ATTEMPT_TIMEOUT_MS`, `STORE_TIMEOUT_MS`); past them the store is unavailable (503).
    pub store_timeouts: StoreTimeouts,
    /// Longest chat title accepted by the history API, in characters.
    pub max_title_chars: usize,
    /// The multi-agent group.
    pub agents: AgentGroup,
    /// Browser origins the function itself answers CORS for (`CORS_ALLOWED_ORIGINS`); none on AWS, where the
    /// function URL does it.
    pub cors: Cors,
    /// The shape of the Chat UI's chat answers (`CHAT_UI_REPLY`): the spec's, or the page's current revision's.
    pub chat_ui_reply: ReplyShape,
    /// The Bedrock knowledge base turns search (`KNOWLEDGE_BASE_ID`); `None`: answers come from the model alone.
    pub knowledge_base_id: Option<String>,
    /// How long one search may take, retries included (`KNOWLEDGE_BASE_TIMEOUT_MS`).
    pub knowledge_base_timeout: Duration,
    /// What each user may spend and upload into the knowledge base: `QUOTA_{RESOURCE}_PER_{PERIOD}` for each
    /// limit of [`LimitKind::ALL`] (`QUOTA_TOKENS_PER_DAY`, `QUOTA_UPLOADED_BYTES_PER_DAY`, …;
    /// `RATE_LIMIT_PER_MINUTE` is `QUOTA_REQUESTS_PER_MINUTE`); all off unless set.
    pub usage_limits: Limits,
    /// The CloudWatch namespace of the per-turn metrics (`METRICS_NAMESPACE`, default `ChatBackend`).
    pub metrics_namespace: String,
    /// The bounds every tool call runs under (`MAX_TOOL_ROUNDS`, `MAX_TOOL_CALLS_PER_ROUND`, `TOOL_TIMEOUT_MS`,
    /// `TOOL_RESULT_MAX_BYTES`).
    pub tool_bounds: ToolBounds,
    /// The MCP servers whose tools the model is offered (`MCP_SERVERS`, a JSON list of `{name, url, headers?,
    /// allow?, forward_user?}`), as written: read by the MCP adapter at the cold start. Its header values are
    /// secrets.
    pub mcp_servers: Option<SecretJson>,
    /// How many callers' sessions one MCP server keeps open at once (`MCP_MAX_SESSIONS`); the least recently used
    /// is closed to open another.
    pub mcp_max_sessions: usize,
    /// How long a caller's MCP session is kept unused before it is closed (`MCP_SESSION_IDLE_MS`).
    pub mcp_session_idle: Duration,
    /// Whether an MCP server's tools are offered only by its `allow` (`MCP_REQUIRE_ALLOW`; by default where a
    /// knowledge base is searched, so that no tool's arguments carry the documents out unless the operator chose
    /// it), else also the tools it marks read-only.
    pub mcp_require_allow: bool,
    /// The embedding models `POST /v1/embeddings` serves (`EMBEDDING_MODELS`, comma-separated; set empty: none,
    /// and the route answers every model with 404).
    pub embedding_models: EmbeddingModels,
    /// Which allowed Bedrock model answers an Anthropic model name on `/v1/messages` (`ANTHROPIC_MODEL_NAMES`,
    /// comma-separated `name=model-id` pairs, a name also mapping the names it is the family prefix of); a name no
    /// pair maps goes to the allowed Claude model whose id names it.
    pub anthropic_model_names: ModelNames,
    /// Documents people upload into the knowledge base (`/documents` on the history function).
    pub documents: DocumentsConfig,
}

/// Where uploaded documents go and what an upload may hold. The routes are on when a knowledge base, its data
/// source and a bucket are all named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentsConfig {
    /// The S3 bucket of the knowledge base's data source that uploads go into (`DOCUMENTS_BUCKET`).
    pub bucket: Option<String>,
    /// The knowledge base's S3 data source over that bucket (`KNOWLEDGE_BASE_DATA_SOURCE_ID`).
    pub data_source_id: Option<String>,
    /// The group whose members may share what they upload and list everyone's (`DOCUMENT_ADMIN_GROUP`).
    pub admin_group: Option<String>,
    /// The largest file one may upload, in bytes (`MAX_UPLOADED_DOCUMENT_BYTES`).
    pub max_bytes: usize,
    /// The most files one upload may hold (`MAX_DOCUMENTS_PER_UPLOAD`).
    pub max_per_upload: usize,
}

/// Configuration that holds secrets (MCP servers' header values): its `Debug` never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretJson(pub String);

impl std::fmt::Debug for SecretJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretJson({} bytes, redacted)", self.0.len())
    }
}

/// A secret setting: its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(pub String);

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretText({} bytes, redacted)", self.0.len())
    }
}

impl Config {
    /// The shortest `RESPONSES_REASONING_KEY`: a key of less than 32 characters may be guessed.
    pub const MIN_REASONING_KEY_CHARS: usize = 32;

    /// The model that answers when `MODEL_ID` is unset: Claude Haiku 4.5, the cheapest model this backend knows
    /// with reasoning, prompt caching and exact token counts, through its global cross-Region inference profile
    /// (Haiku 4.5 is not offered on demand in-Region; the global profile runs it wherever there is capacity, at the
    /// source Region's price). template.yaml's `ModelId` has the same default.
    pub const DEFAULT_MODEL_ID: &'static str = "global.anthropic.claude-haiku-4-5-20251001-v1:0";
    /// The embedding model `POST /v1/embeddings` serves unless `EMBEDDING_MODELS` says otherwise.
    pub const DEFAULT_EMBEDDING_MODEL: &'static str = "amazon.titan-embed-text-v2:0";
    /// What fits in a Lambda request: 6 MB of event, in which a function URL carries a binary body in base64.
    pub const DEFAULT_MAX_UPLOAD_BYTES: usize = 4_500_000;
    /// How many days a kept response of the Responses API is kept by default (OpenAI keeps them 30).
    pub const DEFAULT_RESPONSES_KEPT_DAYS: u32 = 30;
    /// Lambda's limit on a synchronous invocation's request, 6 MB as Lambda counts it (6,291,456 bytes): no body a
    /// function URL hands over is larger (it travels inside the event, beside the headers), so the history
    /// function never refuses a save that reached it, and a plain server takes what Lambda would.
    pub const DEFAULT_MAX_HISTORY_BODY_BYTES: usize = 6 * 1024 * 1024;

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration from name/value pairs, later pairs winning (for tests and tools).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Result<Self, ConfigError> {
        Self::from_lookup(|name| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    /// Reads the configuration through `lookup` (the environment in production, a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let number = |name: &'static str, default: u64| -> Result<u64, ConfigError> {
            match get(name) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(ConfigError {
                        name,
                        reason: format!("expected a positive whole number, got {v:?}"),
                    }),
            }
        };
        let defaults = RequestLimits::default();
        let max_output_tokens = number("MAX_OUTPUT_TOKENS", defaults.max_output_tokens.into())?;
        let default_max_tokens = number("MAX_TOKENS", ChatSettings::DEFAULT_MAX_TOKENS.into())?;
        if default_max_tokens > max_output_tokens {
            return Err(ConfigError {
                name: "MAX_TOKENS",
                reason: format!(
                    "{default_max_tokens} is more than MAX_OUTPUT_TOKENS ({max_output_tokens})"
                ),
            });
        }
        let to_u32 = |name: &'static str, n: u64| {
            u32::try_from(n).map_err(|_| ConfigError {
                name,
                reason: "too large".into(),
            })
        };
        let max_message_chars = number("MAX_MESSAGE_CHARS", defaults.max_message_chars as u64)?;
        let history_ttl_days = match get("HISTORY_TTL_DAYS") {
            None => None,
            Some(_) => Some(to_u32("HISTORY_TTL_DAYS", number("HISTORY_TTL_DAYS", 0)?)?),
        };
        let responses_kept_days = to_u32(
            "RESPONSES_KEPT_DAYS",
            number(
                "RESPONSES_KEPT_DAYS",
                Self::DEFAULT_RESPONSES_KEPT_DAYS.into(),
            )?,
        )?;
        let responses_reasoning_key = match get("RESPONSES_REASONING_KEY") {
            None => None,
            Some(key) if key.trim().chars().count() < Self::MIN_REASONING_KEY_CHARS => {
                return Err(ConfigError {
                    name: "RESPONSES_REASONING_KEY",
                    reason: format!(
                        "expected at least {} characters of a random secret",
                        Self::MIN_REASONING_KEY_CHARS
                    ),
                });
            }
            Some(key) => Some(SecretText(key.trim().to_string())),
        };
        let mut agents = AgentGroup::default_group();
        let agents_json = match (get("AGENTS"), get("AGENTS_FILE")) {
            (Some(json), _) => Some(("AGENTS", json)),
            (None, Some(path)) => Some((
                "AGENTS_FILE",
                std::fs::read_to_string(&path).map_err(|e| ConfigError {
                    name: "AGENTS_FILE",
                    reason: format!("cannot read {path}: {e}"),
                })?,
            )),
            (None, None) => None,
        };
        if let Some((name, json)) = agents_json {
            agents.agents = AgentGroup::agents_from_json(&json)
                .map_err(|reason| ConfigError { name, reason })?;
        }
        agents.max_turns = number("MAX_AGENT_TURNS", agents.max_turns as u64)? as usize;
        if let Some(phrase) = get("APPROVAL_PHRASE") {
            agents.approval_phrase = phrase;
        }
        let stream_async = match get("GUARDRAIL_STREAM_MODE").as_deref().map(str::trim) {
            None | Some("sync") => false,
            Some("async") => true,
            Some(other) => {
                return Err(ConfigError {
                    name: "GUARDRAIL_STREAM_MODE",
                    reason: format!(r#"expected "sync" or "async", got {other:?}"#),
                });
            }
        };
        let guardrail = get("GUARDRAIL_ID").map(|id| Guardrail {
            id,
            version: get("GUARDRAIL_VERSION").unwrap_or_else(|| "DRAFT".into()),
            stream_async,
        });
        let chat_ui_reply = match get("CHAT_UI_REPLY") {
            None => ReplyShape::default(),
            Some(v) => v.parse().map_err(|reason| ConfigError {
                name: "CHAT_UI_REPLY",
                reason,
            })?,
        };
        let flag = |name: &'static str, default: bool| -> Result<bool, ConfigError> {
            match get(name).map(|v| v.trim().to_ascii_lowercase()).as_deref() {
                None => Ok(default),
                Some("true" | "1" | "yes" | "on") => Ok(true),
                Some("false" | "0" | "no" | "off") => Ok(false),
                Some(other) => Err(ConfigError {
                    name,
                    reason: format!("expected true or false, got {other:?}"),
                }),
            }
        };
        let citations = match get("CITATIONS").as_deref().map(str::trim) {
            None | Some("prompted") => CitationMode::Prompted,
            Some("native") => CitationMode::Native,
            Some(other) => {
                return Err(ConfigError {
                    name: "CITATIONS",
                    reason: format!(r#"expected "prompted" or "native", got {other:?}"#),
                });
            }
        };
        let max_top = number("MAX_TOP", defaults.max_top as u64)?;
        if max_top > 100 {
            return Err(ConfigError {
                name: "MAX_TOP",
                reason: "a knowledge base returns at most 100 passages".into(),
            });
        }
        let default_top = (RetrievalSettings::default().default_top as u64).min(max_top);
        let files = FileLimits::default();
        // S3 presigns for at most seven days.
        let attachment_url_seconds = number("ATTACHMENT_URL_SECONDS", 300)?;
        if !(1..=604_800).contains(&attachment_url_seconds) {
            return Err(ConfigError {
                name: "ATTACHMENT_URL_SECONDS",
                reason: "must be between 1 and 604800 (seven days)".into(),
            });
        }
        let model_id = get("MODEL_ID").unwrap_or_else(|| Self::DEFAULT_MODEL_ID.into());
        let max_output = to_u32("MAX_OUTPUT_TOKENS", max_output_tokens)?;
        let model = model_options(&get, &model_id, max_output, &flag)?;
        let usage_limits = usage_limits(&get, model.prices.is_some())?;
        let allowed_models = allowed_models(&model_id, get("ALLOWED_MODELS").as_deref())?;
        let config = Self {
            chat: ChatSettings {
                model,
                model_id,
                system_prompt: get("SYSTEM_PROMPT")
                    .unwrap_or_else(|| ChatSettings::DEFAULT_SYSTEM_PROMPT.into()),
                default_max_tokens: to_u32("MAX_TOKENS", default_max_tokens)?,
                guardrail,
                limits: RequestLimits {
                    max_messages: number("MAX_MESSAGES", defaults.max_messages as u64)? as usize,
                    max_message_chars: max_message_chars as usize,
                    max_output_tokens: max_output,
                    output_ceiling: get("MAX_OUTPUT_TOKENS").and(Some(max_output)),
                    max_top: max_top as usize,
                    files: FileLimits {
                        max_images: number("MAX_IMAGES", files.max_images as u64)? as usize,
                        max_image_bytes: number("MAX_IMAGE_BYTES", files.max_image_bytes)?,
                        max_documents: number("MAX_DOCUMENTS", files.max_documents as u64)?
                            as usize,
                        max_document_bytes: number("MAX_DOCUMENT_BYTES", files.max_document_bytes)?,
                    },
                    allowed_overrides: match get("ALLOWED_OVERRIDES") {
                        None => AllowedOverrides::default(),
                        Some(list) => {
                            AllowedOverrides::parse_list(&list).map_err(|reason| ConfigError {
                                name: "ALLOWED_OVERRIDES",
                                reason,
                            })?
                        }
                    },
                },
                retrieval: RetrievalSettings {
                    default_top: default_top as usize,
                    query_rewrite: flag("QUERY_REWRITE", true)?,
                    citations,
                    access: document_access(&get)?,
                    when: match get("RETRIEVAL") {
                        None => SearchWhen::default(),
                        Some(v) => v.parse().map_err(|reason| ConfigError {
                            name: "RETRIEVAL",
                            reason,
                        })?,
                    },
                    hybrid: flag("KNOWLEDGE_BASE_HYBRID_SEARCH", true)?,
                },
                allowed_models,
                openai_retrieval: flag("OPENAI_RETRIEVAL", false)?,
                openai_server_tools: flag("OPENAI_SERVER_TOOLS", false)?,
                thoughts_show_prompt: flag("THOUGHTS_SHOW_PROMPT", true)?,
            },
            max_body_bytes: number("MAX_BODY_BYTES", 1024 * 1024)? as usize,
            max_history_body_bytes: number(
                "MAX_HISTORY_BODY_BYTES",
                Self::DEFAULT_MAX_HISTORY_BODY_BYTES as u64,
            )? as usize,
            max_upload_bytes: number("MAX_UPLOAD_BYTES", Self::DEFAULT_MAX_UPLOAD_BYTES as u64)?
                as usize,
            ignored_parameters: get("OPENAI_IGNORED_PARAMETERS")
                .map(|list| {
                    list.split(',')
                        .map(str::trim)
                        .filter(|name| !name.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
            attachments_bucket: get("ATTACHMENTS_BUCKET")
                .map(|b| b.trim().to_string())
                .filter(|b| !b.is_empty()),
            attachment_url_lifetime: Duration::from_secs(attachment_url_seconds),
            model_timeout: Duration::from_secs(number("MODEL_TIMEOUT_SECONDS", 60)?),
            table_name: get("TABLE_NAME").unwrap_or_else(|| "chat-backend".into()),
            history_ttl_days,
            responses_kept_days,
            responses_reasoning_key,
            store_timeouts: StoreTimeouts {
                connect: Duration::from_millis(number(
                    "STORE_CONNECT_TIMEOUT_MS",
                    StoreTimeouts::default().connect.as_millis() as u64,
                )?),
                attempt: Duration::from_millis(number(
                    "STORE_ATTEMPT_TIMEOUT_MS",
                    StoreTimeouts::default().attempt.as_millis() as u64,
                )?),
                operation: Duration::from_millis(number(
                    "STORE_TIMEOUT_MS",
                    StoreTimeouts::default().operation.as_millis() as u64,
                )?),
            },
            max_title_chars: number("MAX_TITLE_CHARS", 200)? as usize,
            agents,
            cors: get("CORS_ALLOWED_ORIGINS")
                .map(|list| Cors::from_list(&list))
                .unwrap_or_default(),
            chat_ui_reply,
            knowledge_base_id: get("KNOWLEDGE_BASE_ID").map(|id| id.trim().to_string()),
            knowledge_base_timeout: Duration::from_millis(number(
                "KNOWLEDGE_BASE_TIMEOUT_MS",
                10_000,
            )?),
            usage_limits,
            metrics_namespace: get("METRICS_NAMESPACE")
                .map(|n| n.trim().to_string())
                .unwrap_or_else(|| "ChatBackend".into()),
            tool_bounds: ToolBounds {
                max_rounds: number(
                    "MAX_TOOL_ROUNDS",
                    u64::from(ToolBounds::default().max_rounds),
                )?
                .min(u64::from(u32::MAX)) as u32,
                max_calls_per_round: number(
                    "MAX_TOOL_CALLS_PER_ROUND",
                    u64::from(ToolBounds::default().max_calls_per_round),
                )?
                .min(u64::from(u32::MAX)) as u32,
                call_timeout: Duration::from_millis(number(
                    "TOOL_TIMEOUT_MS",
                    ToolBounds::default().call_timeout.as_millis() as u64,
                )?),
                max_result_bytes: number(
                    "TOOL_RESULT_MAX_BYTES",
                    ToolBounds::default().max_result_bytes as u64,
                )? as usize,
            },
            mcp_servers: get("MCP_SERVERS").map(SecretJson),
            mcp_max_sessions: number("MCP_MAX_SESSIONS", 16)?.min(100_000) as usize,
            mcp_session_idle: Duration::from_millis(number("MCP_SESSION_IDLE_MS", 300_000)?),
            mcp_require_allow: flag(
                "MCP_REQUIRE_ALLOW",
                get("KNOWLEDGE_BASE_ID").is_some_and(|id| !id.trim().is_empty()),
            )?,
            embedding_models: embedding_models(lookup("EMBEDDING_MODELS"))?,
            anthropic_model_names: ModelNames::parse(
                &get("ANTHROPIC_MODEL_NAMES").unwrap_or_default(),
            )
            .map_err(|reason| ConfigError {
                name: "ANTHROPIC_MODEL_NAMES",
                reason,
            })?,
            documents: DocumentsConfig {
                bucket: get("DOCUMENTS_BUCKET").map(|b| b.trim().to_string()),
                data_source_id: get("KNOWLEDGE_BASE_DATA_SOURCE_ID").map(|d| d.trim().to_string()),
                admin_group: get("DOCUMENT_ADMIN_GROUP").map(|g| g.trim().to_string()),
                max_bytes: number(
                    "MAX_UPLOADED_DOCUMENT_BYTES",
                    chat_core::DEFAULT_MAX_DOCUMENT_BYTES as u64,
                )?
                .max(1) as usize,
                max_per_upload: number(
                    "MAX_DOCUMENTS_PER_UPLOAD",
                    chat_core::DEFAULT_MAX_DOCUMENTS_PER_UPLOAD as u64,
                )?
                .clamp(1, 100) as usize,
            },
        };
        // `open` searches with no filter: with uploads on, each one's private uploads would be found by everyone.
        if config.chat.retrieval.access == DocumentAccess::Open && config.uploads_into().is_some() {
            return Err(ConfigError {
                name: "DOCUMENT_ACCESS",
                reason: "open searches every document whoever asks, so with the documents routes on \
                         (KNOWLEDGE_BASE_ID, KNOWLEDGE_BASE_DATA_SOURCE_ID and DOCUMENTS_BUCKET set) everyone would \
                         find everyone's private uploads: set it to enforced, or turn the uploads off"
                    .into(),
            });
        }
        Ok(config)
    }

    /// The knowledge base, its S3 data source and the bucket people's uploads go into, when all three are named
    /// (`KNOWLEDGE_BASE_ID`, `KNOWLEDGE_BASE_DATA_SOURCE_ID`, `DOCUMENTS_BUCKET`): the documents routes are on.
    pub fn uploads_into(&self) -> Option<(&str, &str, &str)> {
        Some((
            self.knowledge_base_id.as_deref()?,
            self.documents.data_source_id.as_deref()?,
            self.documents.bucket.as_deref()?,
        ))
    }
}

/// A quota of whole units (tokens, requests, documents, bytes): unset, empty or 0 is no limit.
fn quota_number(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Option<u64>, ConfigError> {
    match get(name) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(n)),
            Err(_) => Err(ConfigError {
                name,
                reason: format!("expected a whole number (0: no limit), got {v:?}"),
            }),
        },
    }
}

/// `QUOTA_OPEN_WATCHES` when unset: the watches of documents (`GET /documents/events`) one user may hold open at
/// once, each holding a streaming instance (the page opens one per tab).
pub const DEFAULT_OPEN_WATCHES: f64 = 3.0;

/// The older name of `QUOTA_REQUESTS_PER_MINUTE`, read as well.
const RATE_LIMIT_ALIAS: &str = "RATE_LIMIT_PER_MINUTE";

/// The per-user limits, one variable per limit of [`LimitKind::ALL`]: each unset, empty or 0 is no limit, but for
/// `QUOTA_OPEN_WATCHES`, [`DEFAULT_OPEN_WATCHES`] when unset (0: no limit). A cost
/// quota needs the model's prices (`MODEL_PRICES` when the model's own are not known), or nothing could be counted
/// against it. `RATE_LIMIT_PER_MINUTE` sets requests per minute as `QUOTA_REQUESTS_PER_MINUTE` does; both set, they
/// must agree.
fn usage_limits(
    get: &impl Fn(&str) -> Option<String>,
    prices_known: bool,
) -> Result<Limits, ConfigError> {
    let whole = |name: &'static str| quota_number(get, name).map(|v| v.map(|v| v as f64));
    let dollars = |name: &'static str| -> Result<Option<f64>, ConfigError> {
        let Some(v) = get(name) else {
            return Ok(None);
        };
        match v.trim().parse::<f64>() {
            Ok(0.0) => Ok(None),
            Ok(d) if d.is_finite() && d > 0.0 => {
                if prices_known {
                    Ok(Some(d))
                } else {
                    Err(ConfigError {
                        name,
                        reason: "a cost quota needs the model's prices: set MODEL_PRICES".into(),
                    })
                }
            }
            _ => Err(ConfigError {
                name,
                reason: format!("expected US dollars such as 2.50 (0: no limit), got {v:?}"),
            }),
        }
    };
    let mut limits = Limits::default();
    for kind in LimitKind::ALL {
        let Some(name) = kind.setting() else {
            continue;
        };
        let mut amount = if kind.resource.is_dollars() {
            dollars(name)?
        } else {
            whole(name)?
        };
        if kind == LimitKind::REQUESTS_PER_MINUTE {
            let alias = whole(RATE_LIMIT_ALIAS)?;
            if amount.is_some() && alias.is_some() && amount != alias {
                return Err(ConfigError {
                    name: RATE_LIMIT_ALIAS,
                    reason: format!("differs from {name}, which sets the same limit"),
                });
            }
            amount = amount.or(alias);
        }
        if kind == LimitKind::OPEN_WATCHES && get(name).is_none() {
            amount = Some(DEFAULT_OPEN_WATCHES);
        }
        limits.set(kind, amount);
    }
    Ok(limits)
}

/// Which documents callers may be given: `DOCUMENT_ACCESS` (`enforced`, the default, or `open`) and, when enforced,
/// the group every caller belongs to (`DOCUMENT_EVERYONE_GROUP`, default `everyone`).
fn document_access(get: &impl Fn(&str) -> Option<String>) -> Result<DocumentAccess, ConfigError> {
    match get("DOCUMENT_ACCESS")
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("enforced") => {}
        Some("open") => return Ok(DocumentAccess::Open),
        Some(other) => {
            return Err(ConfigError {
                name: "DOCUMENT_ACCESS",
                reason: format!(r#"expected "enforced" or "open", got {other:?}"#),
            });
        }
    }
    let everyone_group = get("DOCUMENT_EVERYONE_GROUP")
        .map(|g| g.trim().to_string())
        .unwrap_or_else(|| DocumentAccess::DEFAULT_EVERYONE_GROUP.into());
    if everyone_group.chars().any(char::is_control) {
        return Err(ConfigError {
            name: "DOCUMENT_EVERYONE_GROUP",
            reason: "must not hold control characters".into(),
        });
    }
    Ok(DocumentAccess::Enforced { everyone_group })
}

/// A list of choices (`standard,optimized`), each parsed.
fn choices<T: std::str::FromStr<Err = String>>(
    name: &'static str,
    value: Option<String>,
) -> Result<Vec<T>, ConfigError> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse().map_err(|reason: String| ConfigError {
                name,
                reason: format!("{v:?} {reason}"),
            })
        })
        .collect()
}

/// The models a completion may name: `MODEL_ID`, then each of `ALLOWED_MODELS` (comma-separated Bedrock model ids,
/// inference profile ids and ARNs), each once. An id with white space in it is no id.
fn allowed_models(model_id: &str, list: Option<&str>) -> Result<Vec<String>, ConfigError> {
    let others: Vec<String> = list
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .collect();
    if let Some(bad) = others.iter().find(|id| id.chars().any(char::is_whitespace)) {
        return Err(ConfigError {
            name: "ALLOWED_MODELS",
            reason: format!("{bad:?} is not a model id: ids are separated by commas"),
        });
    }
    Ok(ChatSettings::allowed(model_id, &others))
}

/// What the turn asks of the model and may spend: from the model's profile (by `BASE_MODEL_ID`, for an application
/// inference profile whose ARN names no model, else by `MODEL_ID`), each overridden by its variable.
fn model_options(
    get: &impl Fn(&str) -> Option<String>,
    model_id: &str,
    max_output_tokens: u32,
    flag: &impl Fn(&'static str, bool) -> Result<bool, ConfigError>,
) -> Result<ModelOptions, ConfigError> {
    let base = get("BASE_MODEL_ID").filter(|b| !b.trim().is_empty());
    let mut options =
        ModelOptions::for_model(base.as_deref().unwrap_or(model_id), max_output_tokens);
    if let Some(tokens) = get("MAX_PROMPT_TOKENS") {
        options.max_prompt_tokens = tokens
            .trim()
            .parse()
            .ok()
            .filter(|n: &u64| *n >= 100)
            .ok_or_else(|| ConfigError {
                name: "MAX_PROMPT_TOKENS",
                reason: "expected a number of tokens, at least 100".into(),
            })?;
    }
    options.prompt_caching = flag("PROMPT_CACHING", options.prompt_caching)?;
    options.count_tokens(
        flag("COUNT_TOKENS", options.profile.token_counting)?,
        base.as_deref().unwrap_or(model_id),
    );
    options.reasoning_effort = match get("REASONING_EFFORT").as_deref().map(str::trim) {
        None | Some("" | "off") => None,
        Some(effort) => Some(effort.parse().map_err(|reason: String| ConfigError {
            name: "REASONING_EFFORT",
            reason: format!("{reason}, or \"off\""),
        })?),
    };
    if options.reasoning_effort.is_some()
        && options.profile.reasoning == ReasoningStyle::Unsupported
    {
        return Err(ConfigError {
            name: "REASONING_EFFORT",
            reason: format!(
                "the model {model_id} cannot be asked to reason (set BASE_MODEL_ID when MODEL_ID is an \
                 application inference profile)"
            ),
        });
    }
    options.max_reasoning_effort = match get("MAX_REASONING_EFFORT").as_deref().map(str::trim) {
        None | Some("") => None,
        Some(effort) => Some(effort.parse().map_err(|reason: String| ConfigError {
            name: "MAX_REASONING_EFFORT",
            reason,
        })?),
    };
    if let (Some(default), Some(most)) = (options.reasoning_effort, options.max_reasoning_effort)
        && default > most
    {
        return Err(ConfigError {
            name: "REASONING_EFFORT",
            reason: format!(
                "{:?} is more than MAX_REASONING_EFFORT ({:?})",
                default.as_str(),
                most.as_str()
            ),
        });
    }
    if let Some(prices) = get("MODEL_PRICES").filter(|p| !p.trim().is_empty()) {
        options.prices = Some(prices.parse().map_err(|reason| ConfigError {
            name: "MODEL_PRICES",
            reason,
        })?);
    }
    options.latency = choices::<Latency>("LATENCY", get("LATENCY"))?.pop();
    options.allowed_latencies = choices("ALLOWED_LATENCIES", get("ALLOWED_LATENCIES"))?;
    options.allowed_latencies.extend(options.latency);
    options.service_tier = choices::<ServiceTier>("SERVICE_TIER", get("SERVICE_TIER"))?.pop();
    options.allowed_service_tiers = choices("ALLOWED_SERVICE_TIERS", get("ALLOWED_SERVICE_TIERS"))?;
    options.allowed_service_tiers.extend(options.service_tier);
    Ok(options)
}

/// The embedding models of `EMBEDDING_MODELS` (`value`): unset, Titan Text Embeddings V2; set empty, none.
fn embedding_models(value: Option<String>) -> Result<EmbeddingModels, ConfigError> {
    let list = value.unwrap_or_else(|| Config::DEFAULT_EMBEDDING_MODEL.into());
    let ids: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(String::from)
        .collect();
    EmbeddingModels::new(ids).map_err(|reason| ConfigError {
        name: "EMBEDDING_MODELS",
        reason,
    })
}

#[cfg(test)]
mod embedding_models_tests {
    use super::*;

    #[test]
    fn titan_by_default_none_when_set_empty_and_unknown_models_refused() {
        let default = Config::from_pairs(&[]).unwrap().embedding_models;
        assert_eq!(default.ids(), [Config::DEFAULT_EMBEDDING_MODEL]);
        let off = Config::from_pairs(&[("EMBEDDING_MODELS", " ")]).unwrap();
        assert!(off.embedding_models.is_empty());
        let two = Config::from_pairs(&[(
            "EMBEDDING_MODELS",
            "cohere.embed-english-v3, amazon.titan-embed-text-v2:0",
        )])
        .unwrap();
        assert_eq!(two.embedding_models.ids().len(), 2);
        let refused =
            Config::from_pairs(&[("EMBEDDING_MODELS", "amazon.nova-pro-v1:0")]).unwrap_err();
        assert_eq!(refused.name, "EMBEDDING_MODELS");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn the_models_a_completion_may_name_start_with_model_id_once_each() {
        let c = config(&[
            ("MODEL_ID", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            (
                "ALLOWED_MODELS",
                " amazon.nova-lite-v1:0, us.anthropic.claude-sonnet-4-5-20250929-v1:0,,arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3 ",
            ),
        ])
        .unwrap();
        assert_eq!(
            c.chat.allowed_models,
            [
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "amazon.nova-lite-v1:0",
                "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3",
            ]
        );
        assert!(!c.chat.openai_retrieval && !c.chat.openai_server_tools);
        let bare = config(&[]).unwrap();
        assert_eq!(
            bare.chat.allowed_models,
            std::slice::from_ref(&bare.chat.model_id)
        );
        let on = config(&[("OPENAI_RETRIEVAL", "on"), ("OPENAI_SERVER_TOOLS", "true")]).unwrap();
        assert!(on.chat.openai_retrieval && on.chat.openai_server_tools);
        let bad = config(&[("ALLOWED_MODELS", "a.b-v1 c.d-v1")]).unwrap_err();
        assert_eq!(bad.name, "ALLOWED_MODELS");
        let bad = config(&[("OPENAI_RETRIEVAL", "maybe")]).unwrap_err();
        assert_eq!(bad.name, "OPENAI_RETRIEVAL");
    }

    #[test]
    fn thoughts_show_the_prompt_and_filters_unless_the_operator_says_not() {
        assert!(config(&[]).unwrap().chat.thoughts_show_prompt);
        let off = config(&[("THOUGHTS_SHOW_PROMPT", "false")]).unwrap();
        assert!(!off.chat.thoughts_show_prompt);
        let bad = config(&[("THOUGHTS_SHOW_PROMPT", "hidden")]).unwrap_err();
        assert_eq!(bad.name, "THOUGHTS_SHOW_PROMPT");
    }

    #[test]
    fn mcp_tools_need_allow_by_default_where_documents_are_searched() {
        assert!(!config(&[]).unwrap().mcp_require_allow);
        let kb = ("KNOWLEDGE_BASE_ID", "ABCDEFGHIJ");
        assert!(config(&[kb]).unwrap().mcp_require_allow);
        assert!(
            !config(&[kb, ("MCP_REQUIRE_ALLOW", "false")])
                .unwrap()
                .mcp_require_allow
        );
        assert!(
            config(&[("MCP_REQUIRE_ALLOW", "true")])
                .unwrap()
                .mcp_require_allow
        );
        assert_eq!(
            config(&[("MCP_REQUIRE_ALLOW", "sometimes")])
                .unwrap_err()
                .name,
            "MCP_REQUIRE_ALLOW"
        );
    }

    #[test]
    fn tools_are_bounded_by_default_and_the_mcp_servers_never_show_in_debug() {
        let c = config(&[]).unwrap();
        assert_eq!(c.tool_bounds, ToolBounds::default());
        assert_eq!(c.tool_bounds.max_rounds, 5);
        assert_eq!(c.tool_bounds.max_calls_per_round, 8);
        assert_eq!(c.chat.retrieval.when, SearchWhen::Before);
        assert_eq!(c.mcp_servers, None);
        assert_eq!(c.mcp_max_sessions, 16);
        assert_eq!(c.mcp_session_idle, Duration::from_secs(300));
        let servers =
            r#"[{"name":"x","url":"http://h/mcp","headers":{"Authorization":"Bearer s3cret"}}]"#;
        let c = config(&[
            ("MAX_TOOL_ROUNDS", "2"),
            ("MAX_TOOL_CALLS_PER_ROUND", "3"),
            ("MCP_MAX_SESSIONS", "4"),
            ("MCP_SESSION_IDLE_MS", "60000"),
            ("TOOL_TIMEOUT_MS", "1500"),
            ("TOOL_RESULT_MAX_BYTES", "4096"),
            ("RETRIEVAL", "Both"),
            ("MCP_SERVERS", servers),
        ])
        .unwrap();
        assert_eq!(c.tool_bounds.max_rounds, 2);
        assert_eq!(c.tool_bounds.max_calls_per_round, 3);
        assert_eq!(c.mcp_max_sessions, 4);
        assert_eq!(c.mcp_session_idle, Duration::from_secs(60));
        assert_eq!(c.tool_bounds.call_timeout, Duration::from_millis(1500));
        assert_eq!(c.tool_bounds.max_result_bytes, 4096);
        assert_eq!(c.chat.retrieval.when, SearchWhen::Both);
        assert_eq!(c.mcp_servers.as_ref().unwrap().0, servers);
        assert!(!format!("{c:?}").contains("s3cret"));
        let bad = config(&[("RETRIEVAL", "after")]).unwrap_err();
        assert_eq!(bad.name, "RETRIEVAL");
        assert!(bad.reason.contains("before, tools, both"), "{}", bad.reason);
        assert_eq!(
            config(&[("MAX_TOOL_ROUNDS", "0")]).unwrap_err().name,
            "MAX_TOOL_ROUNDS"
        );
        assert_eq!(
            config(&[("MAX_TOOL_CALLS_PER_ROUND", "0")])
                .unwrap_err()
                .name,
            "MAX_TOOL_CALLS_PER_ROUND"
        );
    }

    #[test]
    fn document_access_is_enforced_unless_the_operator_opens_it() {
        let c = config(&[]).unwrap();
        assert_eq!(
            c.chat.retrieval.access,
            DocumentAccess::Enforced {
                everyone_group: "everyone".into()
            }
        );
        let c = config(&[("DOCUMENT_EVERYONE_GROUP", " all-staff ")]).unwrap();
        assert_eq!(
            c.chat.retrieval.access,
            DocumentAccess::Enforced {
                everyone_group: "all-staff".into()
            }
        );
        let c = config(&[("DOCUMENT_ACCESS", "open")]).unwrap();
        assert_eq!(c.chat.retrieval.access, DocumentAccess::Open);
        let bad = config(&[("DOCUMENT_ACCESS", "none")]).unwrap_err();
        assert_eq!(bad.name, "DOCUMENT_ACCESS");
    }

    #[test]
    fn open_document_access_is_refused_with_the_documents_routes_on() {
        let uploads = [
            ("KNOWLEDGE_BASE_ID", "KB12345678"),
            ("KNOWLEDGE_BASE_DATA_SOURCE_ID", "DS1"),
            ("DOCUMENTS_BUCKET", "docs"),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = uploads.to_vec();
            pairs.extend_from_slice(extra);
            config(&pairs)
        };
        // Uploads on and enforced (the default, or said): the routes are on.
        let c = with(&[]).unwrap();
        assert_eq!(c.uploads_into(), Some(("KB12345678", "DS1", "docs")));
        assert!(with(&[("DOCUMENT_ACCESS", "enforced")]).is_ok());
        // Open with uploads on: everyone's private uploads would be searched by all. Refused, naming the setting.
        let bad = with(&[("DOCUMENT_ACCESS", "open")]).unwrap_err();
        assert_eq!(bad.name, "DOCUMENT_ACCESS");
        assert!(bad.reason.contains("private uploads"), "{}", bad.reason);
        assert!(with(&[("DOCUMENT_ACCESS", " Open ")]).is_err());
        // Open with any of the three missing (set empty reads as unset): no uploads, nothing private to leak.
        for name in [
            "KNOWLEDGE_BASE_ID",
            "KNOWLEDGE_BASE_DATA_SOURCE_ID",
            "DOCUMENTS_BUCKET",
        ] {
            let c = with(&[(name, ""), ("DOCUMENT_ACCESS", "open")]).unwrap();
            assert_eq!(c.uploads_into(), None, "{name}");
            assert_eq!(c.chat.retrieval.access, DocumentAccess::Open, "{name}");
        }
    }

    #[test]
    fn allowed_overrides_default_to_all_but_the_prompt_template() {
        let allowed = config(&[]).unwrap().chat.limits.allowed_overrides;
        assert!(!allowed.allows("prompt_template"));
        assert!(allowed.allows("temperature") && allowed.allows("use_oid_security_filter"));
        let allowed = config(&[("ALLOWED_OVERRIDES", "top, prompt_template")])
            .unwrap()
            .chat
            .limits
            .allowed_overrides;
        assert_eq!(
            allowed.names().collect::<Vec<_>>(),
            ["prompt_template", "top"]
        );
        let all = config(&[("ALLOWED_OVERRIDES", "all")]).unwrap();
        assert!(all.chat.limits.allowed_overrides.allows("prompt_template"));
        let none = config(&[("ALLOWED_OVERRIDES", "none")]).unwrap();
        assert_eq!(none.chat.limits.allowed_overrides.names().count(), 0);
        let bad = config(&[("ALLOWED_OVERRIDES", "top,seed")]).unwrap_err();
        assert_eq!(bad.name, "ALLOWED_OVERRIDES");
        assert!(bad.reason.contains("\"seed\""), "{}", bad.reason);
    }

    #[test]
    fn reasoning_effort_is_capped_by_the_operator() {
        let model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
        let c = config(&[("MODEL_ID", model), ("MAX_REASONING_EFFORT", "medium")]).unwrap();
        assert_eq!(
            c.chat.model.max_reasoning_effort,
            Some(chat_core::ReasoningEffort::Medium)
        );
        let bad = config(&[
            ("MODEL_ID", model),
            ("MAX_REASONING_EFFORT", "low"),
            ("REASONING_EFFORT", "high"),
        ])
        .unwrap_err();
        assert_eq!(bad.name, "REASONING_EFFORT");
        let bad = config(&[("MAX_REASONING_EFFORT", "max")]).unwrap_err();
        assert_eq!(bad.name, "MAX_REASONING_EFFORT");
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let c = config(&[]).unwrap();
        assert_eq!(c.chat.model_id, Config::DEFAULT_MODEL_ID);
        assert_eq!(c.chat.default_max_tokens, 1024);
        assert_eq!(c.max_body_bytes, 1024 * 1024);
        assert_eq!(c.max_history_body_bytes, 6_291_456);
        assert_eq!(c.chat.guardrail, None);
    }

    #[test]
    fn values_are_read_and_checked() {
        let c = config(&[
            ("MODEL_ID", "m"),
            ("GUARDRAIL_ID", "g"),
            ("MAX_BODY_BYTES", "10"),
            ("MAX_HISTORY_BODY_BYTES", "20"),
            ("MAX_MESSAGES", "3"),
        ])
        .unwrap();
        assert_eq!(c.chat.model_id, "m");
        assert_eq!(
            c.chat.guardrail,
            Some(Guardrail {
                id: "g".into(),
                version: "DRAFT".into(),
                stream_async: false,
            })
        );
        assert_eq!(c.max_body_bytes, 10);
        assert_eq!(c.max_history_body_bytes, 20);
        assert_eq!(c.chat.limits.max_messages, 3);
        assert_eq!(c.chat_ui_reply, ReplyShape::Spec);
        assert_eq!(
            config(&[("CHAT_UI_REPLY", "messages")])
                .unwrap()
                .chat_ui_reply,
            ReplyShape::Messages
        );
        assert_eq!(
            config(&[("CHAT_UI_REPLY", "array")]).unwrap_err().name,
            "CHAT_UI_REPLY"
        );
        let bad = config(&[("MAX_BODY_BYTES", "lots")]).unwrap_err();
        assert_eq!(bad.name, "MAX_BODY_BYTES");
        assert!(config(&[("MAX_TOKENS", "9000"), ("MAX_OUTPUT_TOKENS", "100")]).is_err());
    }

    #[test]
    fn model_options_come_from_the_profile_unless_set() {
        let c = config(&[("MODEL_ID", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")]).unwrap();
        let m = &c.chat.model;
        assert_eq!(m.max_prompt_tokens, 200_000 - 8192);
        assert!(m.prompt_caching);
        assert_eq!(m.reasoning_effort, None);
        assert_eq!(m.prices.unwrap().input, 3.0);
        assert_eq!(
            m.token_counter.as_deref(),
            Some("anthropic.claude-sonnet-4-5-20250929-v1:0")
        );
        assert!(m.allowed_latencies.is_empty());
        let nova = config(&[("MODEL_ID", "us.amazon.nova-pro-v1:0")]).unwrap();
        assert_eq!(nova.chat.model.token_counter, None);
        let off = config(&[
            ("MODEL_ID", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            ("COUNT_TOKENS", "off"),
        ])
        .unwrap();
        assert_eq!(off.chat.model.token_counter, None);
        let c = config(&[
            (
                "MODEL_ID",
                "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x1",
            ),
            ("BASE_MODEL_ID", "anthropic.claude-sonnet-4-6"),
            ("MAX_PROMPT_TOKENS", "5000"),
            ("PROMPT_CACHING", "off"),
            ("REASONING_EFFORT", "high"),
            ("MODEL_PRICES", "input=1,output=2"),
            ("LATENCY", "optimized"),
            ("ALLOWED_LATENCIES", "standard"),
            ("SERVICE_TIER", "flex"),
            ("GUARDRAIL_ID", "g"),
            ("GUARDRAIL_STREAM_MODE", "async"),
        ])
        .unwrap();
        let m = &c.chat.model;
        assert_eq!(m.max_prompt_tokens, 5000);
        assert!(!m.prompt_caching);
        assert_eq!(
            m.token_counter.as_deref(),
            Some("anthropic.claude-sonnet-4-6")
        );
        assert_eq!(m.reasoning_effort, Some(chat_core::ReasoningEffort::High));
        assert_eq!(m.profile.reasoning, ReasoningStyle::AnthropicAdaptive);
        assert_eq!(m.prices.unwrap().output, 2.0);
        assert_eq!(m.latency, Some(Latency::Optimized));
        assert_eq!(m.allowed_latencies, [Latency::Standard, Latency::Optimized]);
        assert_eq!(m.allowed_service_tiers, [ServiceTier::Flex]);
        assert!(c.chat.guardrail.unwrap().stream_async);
        for (name, value) in [
            ("MAX_PROMPT_TOKENS", "lots"),
            ("REASONING_EFFORT", "extreme"),
            ("MODEL_PRICES", "output=2"),
            ("LATENCY", "fast"),
            ("ALLOWED_SERVICE_TIERS", "default,gold"),
            ("GUARDRAIL_STREAM_MODE", "later"),
        ] {
            assert_eq!(config(&[(name, value)]).unwrap_err().name, name);
        }
        // A model that cannot be asked to reason is refused a default effort.
        assert_eq!(
            config(&[
                ("MODEL_ID", "amazon.nova-lite-v1:0"),
                ("REASONING_EFFORT", "low")
            ])
            .unwrap_err()
            .name,
            "REASONING_EFFORT"
        );
    }

    #[test]
    fn upload_quotas_are_off_unless_set_and_whole_numbers() {
        let c = config(&[]).unwrap();
        // No limit but the open watches' default.
        assert_eq!(
            c.usage_limits,
            Limits::default().with(LimitKind::OPEN_WATCHES, DEFAULT_OPEN_WATCHES)
        );
        let c = config(&[
            ("QUOTA_UPLOADED_DOCUMENTS_PER_DAY", "20"),
            ("QUOTA_UPLOADED_BYTES_PER_DAY", "0"),
        ])
        .unwrap();
        assert_eq!(
            c.usage_limits.get(LimitKind::UPLOADED_DOCUMENTS_PER_DAY),
            Some(20.0)
        );
        assert_eq!(c.usage_limits.get(LimitKind::UPLOADED_BYTES_PER_DAY), None);
        let e = config(&[("QUOTA_UPLOADED_BYTES_PER_DAY", "5MB")]).unwrap_err();
        assert_eq!(e.name, "QUOTA_UPLOADED_BYTES_PER_DAY");
    }

    #[test]
    fn open_watches_are_limited_unless_turned_off() {
        let c = config(&[]).unwrap();
        assert_eq!(c.usage_limits.get(LimitKind::OPEN_WATCHES), Some(3.0));
        assert!(!c.usage_limits.counts(chat_core::Family::Turns));
        let c = config(&[("QUOTA_OPEN_WATCHES", "5")]).unwrap();
        assert_eq!(c.usage_limits.get(LimitKind::OPEN_WATCHES), Some(5.0));
        let c = config(&[("QUOTA_OPEN_WATCHES", "0")]).unwrap();
        assert_eq!(c.usage_limits.get(LimitKind::OPEN_WATCHES), None);
        assert!(config(&[("QUOTA_OPEN_WATCHES", "three")]).is_err());
    }

    #[test]
    fn every_limit_is_one_variable_of_the_quota_family() {
        use chat_core::{Period, Resource};
        let c = config(&[
            ("QUOTA_REQUESTS_PER_DAY", "1"),
            ("QUOTA_TOKENS_PER_WEEK", "5000"),
            ("RATE_LIMIT_PER_MINUTE", "5"),
        ])
        .unwrap();
        let limits = &c.usage_limits;
        assert_eq!(
            limits.get(LimitKind::new(Resource::Requests, Period::Day)),
            Some(1.0)
        );
        assert_eq!(
            limits.get(LimitKind::new(Resource::Tokens, Period::Week)),
            Some(5000.0)
        );
        assert_eq!(limits.get(LimitKind::REQUESTS_PER_MINUTE), Some(5.0));
        // These three, and the open watches' default.
        assert_eq!(limits.iter().count(), 4);
        assert_eq!(
            limits.get(LimitKind::OPEN_WATCHES),
            Some(DEFAULT_OPEN_WATCHES)
        );
        // The rate limit's newer name sets the same limit; both set, they must agree.
        let both = |a, b| {
            config(&[
                ("QUOTA_REQUESTS_PER_MINUTE", a),
                ("RATE_LIMIT_PER_MINUTE", b),
            ])
        };
        assert_eq!(
            both("7", "7")
                .unwrap()
                .usage_limits
                .get(LimitKind::REQUESTS_PER_MINUTE),
            Some(7.0)
        );
        assert_eq!(both("7", "8").unwrap_err().name, "RATE_LIMIT_PER_MINUTE");
        assert_eq!(
            config(&[("QUOTA_UPLOADED_BYTES_PER_MONTH", "lots")])
                .unwrap_err()
                .name,
            "QUOTA_UPLOADED_BYTES_PER_MONTH"
        );
    }

    #[test]
    fn documents_are_off_until_named_and_bounded_as_set() {
        let c = config(&[]).unwrap();
        assert_eq!(c.documents.bucket, None);
        assert_eq!(c.documents.max_bytes, chat_core::DEFAULT_MAX_DOCUMENT_BYTES);
        assert_eq!(c.documents.max_per_upload, 10);
        let c = config(&[
            ("DOCUMENTS_BUCKET", " docs "),
            ("KNOWLEDGE_BASE_DATA_SOURCE_ID", "DS1"),
            ("DOCUMENT_ADMIN_GROUP", "doc-admins"),
            ("MAX_UPLOADED_DOCUMENT_BYTES", "1000"),
            ("MAX_DOCUMENTS_PER_UPLOAD", "3"),
        ])
        .unwrap();
        assert_eq!(c.documents.bucket.as_deref(), Some("docs"));
        assert_eq!(c.documents.data_source_id.as_deref(), Some("DS1"));
        assert_eq!(c.documents.admin_group.as_deref(), Some("doc-admins"));
        assert_eq!(
            (c.documents.max_bytes, c.documents.max_per_upload),
            (1000, 3)
        );
        assert!(config(&[("MAX_DOCUMENTS_PER_UPLOAD", "many")]).is_err());
    }

    #[test]
    fn store_timeouts_are_read_in_milliseconds() {
        let c = config(&[]).unwrap();
        assert_eq!(c.store_timeouts, StoreTimeouts::default());
        let c = config(&[
            ("STORE_CONNECT_TIMEOUT_MS", "250"),
            ("STORE_ATTEMPT_TIMEOUT_MS", "500"),
            ("STORE_TIMEOUT_MS", "1500"),
        ])
        .unwrap();
        assert_eq!(
            c.store_timeouts,
            StoreTimeouts {
                connect: Duration::from_millis(250),
                attempt: Duration::from_millis(500),
                operation: Duration::from_millis(1500),
            }
        );
        assert_eq!(
            config(&[("STORE_TIMEOUT_MS", "0")]).unwrap_err().name,
            "STORE_TIMEOUT_MS"
        );
        // A message is stored over several items when it needs them: no ceiling from the item size.
        let long = config(&[("MAX_MESSAGE_CHARS", "500000")]).unwrap();
        assert_eq!(long.chat.limits.max_message_chars, 500_000);
    }

    #[test]
    fn the_reasoning_key_is_optional_long_and_never_shown() {
        assert_eq!(config(&[]).unwrap().responses_reasoning_key, None);
        let key = "k".repeat(32);
        let set = config(&[("RESPONSES_REASONING_KEY", key.as_str())]).unwrap();
        assert_eq!(set.responses_reasoning_key, Some(SecretText(key.clone())));
        assert!(!format!("{set:?}").contains(&key));
        assert_eq!(
            config(&[("RESPONSES_REASONING_KEY", "short")])
                .unwrap_err()
                .name,
            "RESPONSES_REASONING_KEY"
        );
    }

    #[test]
    fn responses_are_kept_thirty_days_unless_set_and_never_zero() {
        assert_eq!(config(&[]).unwrap().responses_kept_days, 30);
        assert_eq!(
            config(&[("RESPONSES_KEPT_DAYS", "2")])
                .unwrap()
                .responses_kept_days,
            2
        );
        for bad in ["0", "-1", "a week"] {
            assert_eq!(
                config(&[("RESPONSES_KEPT_DAYS", bad)]).unwrap_err().name,
                "RESPONSES_KEPT_DAYS"
            );
        }
    }
}
