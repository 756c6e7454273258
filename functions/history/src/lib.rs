//! The history function: the Chat UI's `/chat-history` API, `GET /usage`, and the backend's own page at `GET /`.
//! Every operation is the caller's own: another user's chat answers 404, exactly like one that does not exist. Its
//! application is built by the composition root (`chat_app`); this crate is its choice of routes and its Lambda
//! invoke mode (buffered).

pub use chat_app::HistoryApp as App;
pub use chat_app::history::{MESSAGES_PAGE_BYTES, NEXT_CURSOR_HEADER, Page, PageSettings};

/// Which function this is: the routes its cold start builds.
pub type Function = chat_app::History;
