//! The streaming chat function: `POST /chat/stream`, each line written and flushed as the model produces text, and
//! `POST /multi-agent-chat/stream` (and the bare `POST /multi-agent-chat`), one server-sent event per agent
//! message; and `GET /documents/events`, the caller's documents' statuses pushed as server-sent events while they
//! change. Its application is built by the composition root (`chat_app`); this crate is its choice of routes and
//! its Lambda invoke mode (response streaming).

/// The streaming chat function's application, as tests build it over any model and store.
pub type App<M, St> = chat_app::ChatApp<M, St, chat_app::Streamed>;

/// Which function this is: the routes its cold start builds.
pub type Function = chat_app::Streamed;
