//! The buffered chat function: `POST /chat` (both protocol versions), `POST /chat-ui/chat` and
//! `POST /multi-agent-chat/batch` (and the bare `POST /multi-agent-chat`). Its application is built by the
//! composition root (`chat_app`); this crate is its choice of routes and its Lambda invoke mode (buffered).

/// The chat function's application, as tests build it over any model and store.
pub type App<M, St> = chat_app::ChatApp<M, St, chat_app::Buffered>;

/// Which function this is: the routes its cold start builds.
pub type Function = chat_app::Buffered;
