//! What the service's tests ask of it: the settings of a service on the fakes, a user's turn, the files it
//! carries and a group of agents.

use bytes::Bytes;
use chat_core::{
    Agent, AgentGroup, Attachment, ChatService, ChatSettings, DocumentFormat, FileKind,
    ImageFormat, Message, ModelOptions, Overrides, Role, TurnInput,
};
use serde_json::Value;

use crate::{InMemoryStore, Script, ScriptedModel};

/// A service on the fakes of its ports.
pub type FakeService = ChatService<ScriptedModel, InMemoryStore>;

/// The model the tests' services are configured with.
pub const MODEL_ID: &str = "test.model-v1";

/// A service's settings for `model_id`: the system prompt "Be brief.", 256 tokens an answer unless a request says,
/// the model's options from its profile (8,192 tokens of output at most), and every other setting as it defaults.
pub fn settings_for(model_id: &str) -> ChatSettings {
    ChatSettings {
        model_id: model_id.into(),
        system_prompt: "Be brief.".into(),
        default_max_tokens: 256,
        guardrail: None,
        limits: Default::default(),
        retrieval: Default::default(),
        model: ModelOptions::for_model(model_id, 8192),
        allowed_models: vec![model_id.into()],
        openai_retrieval: false,
        openai_server_tools: false,
        thoughts_show_prompt: true,
    }
}

/// [`settings_for`] the tests' model, [`MODEL_ID`].
pub fn settings() -> ChatSettings {
    settings_for(MODEL_ID)
}

/// A service with `settings` on a scripted model that answers with `scripts` and an in-memory store, and handles on
/// them (clones share their state).
pub fn fakes(
    settings: ChatSettings,
    scripts: impl IntoIterator<Item = Script>,
) -> (FakeService, ScriptedModel, InMemoryStore) {
    let model = ScriptedModel::with(scripts);
    let store = InMemoryStore::new();
    let service = ChatService::new(model.clone(), store.clone(), settings);
    (service, model, store)
}

/// A turn of `messages` in the chat `chat` (its id as the session state) or a new one, which is stored.
pub fn input(messages: Vec<Message>, chat: Option<&str>) -> TurnInput {
    TurnInput {
        messages,
        overrides: Overrides::default(),
        session_state: chat.map(|c| Value::String(c.into())),
        session_field: "sessionState",
        store_new_chat: true,
    }
}

/// A user's turn of one message, `text`, in the chat `chat` or a new one ([`input`]).
pub fn ask(text: &str, chat: Option<&str>) -> TurnInput {
    input(vec![Message::new(Role::User, text)], chat)
}

/// An image a user sends: `shot.png`.
pub fn png() -> Attachment {
    Attachment::new(
        "shot.png",
        FileKind::Image(ImageFormat::Png),
        Bytes::from_static(b"\x89PNG\r\n\x1a\nimage"),
    )
}

/// A document a user sends: `report.pdf`.
pub fn pdf() -> Attachment {
    Attachment::new(
        "report.pdf",
        FileKind::Document(DocumentFormat::Pdf),
        Bytes::from_static(b"%PDF-1.4 document"),
    )
}

/// Two agents, the Analyst and then the Engineer, each with its role as instructions, that speak `max_turns` times
/// each at most and stop at "APPROVED".
pub fn agents(max_turns: usize) -> AgentGroup {
    let agent = |name: &str| Agent {
        name: name.into(),
        instructions: format!("You are {name}'s role."),
        model_id: None,
        temperature: None,
    };
    AgentGroup {
        agents: vec![agent("Analyst"), agent("Engineer")],
        max_turns,
        approval_phrase: "APPROVED".into(),
    }
}
