//! The chat core: what one chat turn does. It decides (prompt, overrides, follow-ups, answer shape) and talks to
//! the model through the [`ChatModel`] port; adapters beside it translate to Bedrock.

mod agents;
mod attachments;
mod conversation;
mod error;
mod followups;
mod invalid;
mod model;
mod prompt;
mod retrieval;
mod search;
mod session;
mod settings;
mod store;
mod streaming;
mod turn;

pub use agents::{Agent, AgentGroup, AgentMessage, AgentRound};
pub use attachments::{
    Attachment, AttachmentError, AttachmentFuture, AttachmentStore, DocumentFormat, FileKind,
    FileLimits, FileRefusal, ImageFormat, StoredFile, distinct_names, document_name, identify,
};
pub use conversation::{
    Answer, ChatMode, ContentPart, DataPoints, FinishReason, Message, Overrides, RetrievalMode,
    Role, Thought, TokenUsage, TurnInput, display_time,
};
pub use error::{ChatError, ModelError};
pub use followups::FollowupSplitter;
pub use invalid::InvalidRequest;
pub(crate) use model::ReplyStream;
pub use model::{
    ChatModel, InferenceSettings, ModelEvent, ModelMessage, ModelReply, ModelRequest, ModelStream,
    ReplyCitation, StopReason,
};
pub use prompt::{FOLLOWUP_INSTRUCTIONS, PreparedTurn, prepare_turn};
pub use retrieval::{
    MetadataFilter, PAGE_NUMBER_KEY, Passage, Retriever, SearchError, SearchFuture, SearchMode,
    SearchRequest,
};
pub use search::{Grounding, QUERY_PROMPT};
pub use session::{Caller, Session, title_of};
pub use settings::{ChatSettings, CitationMode, Guardrail, RequestLimits, RetrievalSettings};
pub use store::{
    ChatRecord, LoadedChat, Page, ReadMark, SessionStore, StoreError, StoreTimeouts, StoredMessage,
    is_chat_id,
};
pub use streaming::{StreamingTurn, TurnEnd, TurnEvent};
pub use turn::{ChatService, TurnHeader, new_message_id, rfc3339_millis};
