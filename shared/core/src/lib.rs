//! The chat core: what one chat turn does. It decides (prompt, overrides, follow-ups, answer shape) and talks to
//! the model through the [`ChatModel`] port; adapters beside it translate to Bedrock.

mod account;
mod agents;
mod answer;
mod api_keys;
mod attachments;
mod budget;
mod call;
mod caller;
mod checks;
mod complete;
mod completion;
mod conversation;
mod cost;
mod documents;
mod driver;
mod embeddings;
mod error;
mod followups;
mod grounding;
mod invalid;
mod kept_responses;
mod limits;
mod model;
mod models;
mod prepare;
mod prompt;
mod reasoning;
mod retrieval;
mod save;
mod search;
mod service;
mod session;
mod settings;
mod spans;
mod store;
mod streaming;
mod thoughts;
mod tools;
mod turn;
mod usage;

pub use account::TurnAccount;
pub use agents::{Agent, AgentGroup, AgentMessage, AgentRound};
pub use api_keys::{
    API_KEY_PREFIX, AccountDirectory, ApiKeyFuture, ApiKeyRecord, ApiKeyRefusal, ApiKeyStore,
    MAX_KEY_DAYS, MAX_KEY_NAME_CHARS, MAX_KEYS_PER_OWNER, NewApiKey, api_key_hash, is_api_key,
    revoke_owner,
};
pub use attachments::{
    Attachment, AttachmentError, AttachmentFuture, AttachmentStore, DocumentFormat, FileKind,
    FileLimits, FileRefusal, ImageFormat, StoredFile, distinct_names, document_name, identify,
};
pub use budget::{
    CACHE_FRIENDLY_STEP, HistoryBudget, align_conversation, estimate_file_tokens,
    estimate_message_tokens, estimate_request_tokens, estimate_stored_tokens, estimate_tokens,
    fit_conversation,
};
pub use caller::Caller;
pub use completion::{Completion, MIN_THINKING_BUDGET, Sampling, Thinking};
pub use conversation::{
    Answer, ChatMode, ContentPart, DataPoints, FinishReason, Message, Overrides, RetrievalMode,
    Role, Thought, TurnInput, display_time,
};
pub use cost::{Prices, TokenUsage, TurnSpent, UsageTotals};
pub use documents::{
    AccessChoice, AccessList, DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_DOCUMENTS_PER_UPLOAD,
    DocumentChange, DocumentError, DocumentFuture, DocumentIndex, DocumentPage, DocumentRecord,
    DocumentSettings, DocumentStatus, DocumentStore, DocumentType, DocumentWatch, Documents,
    IndexError, IndexState, LoadAccess, LoadOutcome, MAX_DOCUMENT_GROUPS, MAX_DOCUMENT_NAME_BYTES,
    MAX_LOADED_DOCUMENT_BYTES, MAX_SOURCE_BYTES, MAX_WATCHED_DOCUMENTS, NewDocument,
    document_digest, document_file_name, is_document_id, is_source_path, new_document_id,
};
pub use embeddings::{
    EmbedFuture, Embedded, Embedder, EmbeddingFamily, EmbeddingModels, EmbeddingProfile,
    EmbeddingRequest, Embeddings, MAX_ANSWER_BYTES, MAX_CONCURRENT_CALLS, MAX_INPUTS,
    MAX_REQUEST_TOKENS, VectorEncoding, check_texts, most_texts,
};
pub use error::{ChatError, ModelError};
pub use followups::FollowupSplitter;
pub use grounding::Grounding;
pub use invalid::InvalidRequest;
pub use kept_responses::{KeptFuture, KeptResponse, ResponseStore};
pub use limits::{
    Family, InForce, LimitAmounts, LimitKind, LimitOverrides, Limits, Period, Resource, UsersOwn,
};
pub use model::ReplyStream;
pub use model::{
    ChatModel, GuardrailFinding, GuardrailTrace, InferenceSettings, ModelEvent, ModelMessage,
    ModelReply, ModelRequest, ModelStream, ReplyCitation, ResponseFormat, Served, StopReason,
    ToolChoice,
};
pub use models::{
    Latency, ModelProfile, Reasoning, ReasoningEffort, ReasoningStyle, ServiceTier, base_model_id,
};
pub use prompt::{FOLLOWUP_INSTRUCTIONS, PreparedTurn, Speaker, prepare_turn};
pub use reasoning::ReasoningBlock;
pub use retrieval::{
    MetadataFilter, PAGE_NUMBER_KEY, Passage, Retriever, SearchError, SearchFuture, SearchMode,
    SearchRequest,
};
pub use search::QUERY_PROMPT;
pub use service::ChatService;
pub use session::{Session, title_of};
pub use settings::{
    AllowedOverrides, ChatSettings, CitationMode, DocumentAccess, Guardrail, ModelOptions,
    RequestLimits, RetrievalSettings,
};
pub use spans::tool_call_span;
pub use store::{
    Charged, ChatRecord, ListRequest, LoadedChat, Page, PageRequest, REASONING_KEPT_FOR, ReadMark,
    SessionStore, StoreError, StoreTimeouts, StoredMessage, TurnWrite, is_chat_id, is_expired,
    reasoning_kept_until,
};
pub use streaming::{StreamingTurn, TurnEnd, TurnEvent, TurnOpening};
pub use thoughts::REDACTED;
pub use tools::{
    SearchWhen, Tool, ToolBounds, ToolCall, ToolExchange, ToolFuture, ToolListing, ToolOutput,
    ToolResult, ToolSource, ToolSpec, ToolStatus,
};
pub use turn::new_message_id;
pub use turn::{TurnHeader, rfc3339_millis};
pub use usage::{
    Amount, BUCKET_SECONDS, HELD_RETRY_SECONDS, HeldPlaces, Hold, LimitReport, MinuteReport,
    OverLimit, PeriodReport, PeriodUsage, Periods, RateWindow, Reserve, Upload, UploadQuota,
    UploadReport, UploadUsage, UsageCharge, UsageFuture, UsageLedger, UsageReport, UsageSnapshot,
    WINDOW_BUCKETS, WINDOW_SPAN, WatchLease, WatchPlace, WatchSlots, check, check_requests,
    check_upload, place_held, report, upload_ceilings, watches_full,
};
