//! The chat core: what one chat turn does. It decides (prompt, overrides, follow-ups, answer shape) and talks to
//! the model through the [`ChatModel`] port; adapters beside it translate to Bedrock.

mod agents;
mod error;
mod followups;
pub mod history;
mod model;
mod prompt;
mod retrieval;
mod session;
mod settings;
mod store;
mod streaming;
mod turn;

pub use agents::{Agent, AgentGroup, AgentMessage, AgentRound};
pub use error::{ChatError, ModelError};
pub use followups::FollowupSplitter;
pub use model::{
    ChatModel, InferenceSettings, ModelEvent, ModelMessage, ModelReply, ModelRequest, ModelStream,
    StopReason,
};
pub use prompt::{FOLLOWUP_INSTRUCTIONS, PreparedTurn, prepare_turn};
pub use retrieval::{
    MetadataFilter, PAGE_NUMBER_KEY, Passage, Retriever, SearchError, SearchFuture, SearchMode,
    SearchRequest,
};
pub use session::{Session, title_of};
pub use settings::{ChatSettings, Guardrail};
pub use store::{
    ChatRecord, Page, SessionStore, StoreError, StoreTimeouts, StoredMessage, is_chat_id,
};
pub use streaming::{StreamingTurn, TurnEnd, TurnEvent};
pub use turn::{ChatService, TurnHeader, rfc3339_millis};
