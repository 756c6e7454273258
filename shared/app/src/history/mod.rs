//! The history function's application: the Chat UI's `/chat-history` API, `GET /usage`, the caller's API keys
//! (`/api-keys`), and the backend's own page at `GET /`.
//! Every operation is the caller's own: another user's chat answers 404, exactly like one that does not exist.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::routing::{get, put};
use chat_core::{
    AttachmentStore, Caller, ChatError, ChatMode, ChatRecord, InvalidRequest, Limits, ListRequest,
    PageRequest, Periods, RequestLimits, SessionStore, StoredFile, UsageLedger, display_time,
    rfc3339_millis,
};
use chat_edge::{
    ApiError, Auth, Cors, EdgeState, Identified, JsonBody, Query, json_response, only,
};
use chat_protocol::chat_ui::{
    CreateChatRequest, HistoryMessage, ListedFile, history_message, stored_message, summary,
};
use chat_protocol::{parse_body, parse_replace_request};
use chat_runtime::FunctionService;
use serde::Deserialize;
use time::OffsetDateTime;

mod api_keys;
pub(crate) mod documents;
mod page;
pub use page::{Page, PageSettings};

use crate::Config;
use crate::before_serving::take_back;

/// The response header that carries the cursor of the next page of `GET /chat-history` and of a chat's messages.
pub const NEXT_CURSOR_HEADER: &str = "x-next-cursor";
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 100;
/// The most messages a client may ask for in one page of `GET /chat-history/{id}/messages`.
pub const MAX_MESSAGES_PAGE: usize = 1000;
/// How much of a chat's messages one answer carries (as measured by `StoredMessage::wire_size`): a buffered Lambda
/// response is at most 6 MB, so a longer chat is paged.
pub const MESSAGES_PAGE_BYTES: usize = 5 * 1024 * 1024;

/// What a warm function keeps between requests. Cheap to clone: the routes share it.
pub struct HistoryApp<St> {
    shared: Arc<Shared<St>>,
    cors: Cors,
    /// The page at `GET /`, built once, and what it was built from.
    page: Page,
    page_settings: PageSettings,
}

struct Shared<St> {
    store: St,
    /// Where the files of messages are kept, when anywhere.
    attachments: Option<Arc<dyn AttachmentStore>>,
    auth: Auth,
    /// `MAX_HISTORY_BODY_BYTES`: a save carries the whole chat, so up to what a Lambda request holds.
    max_body_bytes: usize,
    max_title_chars: usize,
    /// The bounds of a chat request, which a saved chat keeps to: the next turn may send it whole.
    limits: RequestLimits,
    /// Where what each user spends is counted (`GET /usage` reads it), and the configured limits.
    ledger: Option<Arc<dyn UsageLedger>>,
    usage_limits: Limits,
    /// The documents people bring into the knowledge base (`/documents`), when they are on.
    documents: Option<chat_core::Documents>,
}

type AppState<St> = State<Arc<Shared<St>>>;

/// The query parameters the history API reads; each is checked where it is used.
#[derive(Debug, Default, Deserialize)]
struct Params {
    mode: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

fn mode(params: &Params) -> Result<ChatMode, ApiError> {
    match params.mode.as_deref() {
        None | Some("standard") => Ok(ChatMode::Standard),
        Some("multiAgent") => Ok(ChatMode::MultiAgent),
        Some(_) => {
            Err(InvalidRequest::new("mode", r#"expected "standard" or "multiAgent""#).into())
        }
    }
}

/// `limit`, a whole number from 1 to `max`, or `default` when absent.
fn limit(params: &Params, default: usize, max: usize) -> Result<usize, ApiError> {
    match params.limit.as_deref() {
        None => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                InvalidRequest::new("limit", format!("expected a whole number from 1 to {max}"))
                    .into()
            }),
    }
}

fn cursor(params: &Params) -> Option<&str> {
    params.cursor.as_deref().filter(|c| !c.is_empty())
}

/// One page of a listing as a 200, with the next page's cursor when there is one.
fn page_response<T: serde::Serialize>(body: &T, next: Option<String>) -> Response {
    let mut response = json_response(StatusCode::OK, body);
    if let Some(next) = next {
        response.headers_mut().insert(
            NEXT_CURSOR_HEADER,
            HeaderValue::from_str(&next).expect("a cursor is URL-safe text"),
        );
    }
    response
}

fn now() -> String {
    rfc3339_millis(OffsetDateTime::now_utc())
}

impl<St: SessionStore + 'static> HistoryApp<St> {
    pub fn new(store: St, auth: Auth, config: &Config) -> Self {
        let page_settings = PageSettings::default();
        let page = Page::new(&auth, &page_settings);
        Self {
            page,
            page_settings,
            shared: Arc::new(Shared {
                store,
                attachments: None,
                auth,
                max_body_bytes: config.max_history_body_bytes,
                max_title_chars: config.max_title_chars,
                limits: config.chat.limits,
                ledger: None,
                usage_limits: config.usage_limits,
                documents: None,
            }),
            cors: config.cors.clone(),
        }
    }

    /// The page at `GET /` configured by `settings` (the default: no sign-in offered, every URL the page's own
    /// origin).
    pub fn with_page(self, settings: &PageSettings) -> Self {
        let settings = PageSettings {
            documents: self.shared.documents.is_some(),
            ..settings.clone()
        };
        Self {
            page: Page::new(&self.shared.auth, &settings),
            page_settings: settings,
            ..self
        }
    }

    /// Lists the files of messages kept in `attachments` (with URLs to read them), and deletes them with their
    /// chat; `None` keeps no files.
    pub fn with_attachments(self, attachments: Option<Arc<dyn AttachmentStore>>) -> Self {
        self.map_shared(|shared| Shared {
            attachments,
            ..shared
        })
    }

    /// Answers `GET /usage` from the counters in `ledger`; `None` answers it with nothing counted.
    pub fn with_usage(self, ledger: Option<Arc<dyn UsageLedger>>) -> Self {
        self.map_shared(|shared| Shared { ledger, ..shared })
    }

    /// Serves `/documents` over `documents`; `None` answers those routes 404. The page is told whether they are on.
    pub fn with_documents(self, documents: Option<chat_core::Documents>) -> Self {
        let page_settings = PageSettings {
            documents: documents.is_some(),
            ..self.page_settings
        };
        let page = Page::new(&self.shared.auth, &page_settings);
        Self {
            page,
            page_settings,
            ..self
        }
        .map_shared(|shared| Shared {
            documents,
            ..shared
        })
    }

    /// The app with what its routes share changed by `change` (before it serves).
    fn map_shared(self, change: impl FnOnce(Shared<St>) -> Shared<St>) -> Self {
        Self {
            shared: Arc::new(change(take_back(self.shared))),
            ..self
        }
    }

    /// The store behind the API.
    pub fn store(&self) -> &St {
        &self.shared.store
    }

    /// The routes: the page at `GET /` and its icon at `GET /favicon.svg`, `GET` and `POST /chat-history`, `PUT`,
    /// `PATCH` and `DELETE /chat-history/{id}`, `GET /chat-history/{id}/messages`, `GET /usage`, `GET` and `POST
    /// /api-keys` and `DELETE /api-keys/{id}`.
    pub fn routes(&self) -> Router {
        Router::new()
            .route("/", self.page.route())
            .route("/favicon.svg", Page::icon_route())
            .route("/chat-history", only("GET, POST", get(list).post(create)))
            .route(
                "/chat-history/{id}",
                only(
                    "PUT, PATCH, DELETE",
                    put(replace).patch(rename).delete(delete),
                ),
            )
            .route("/chat-history/{id}/messages", only("GET", get(messages)))
            .route("/usage", only("GET", get(usage)))
            .route(
                "/api-keys",
                only("GET, POST", get(api_keys::list).post(api_keys::create)),
            )
            .route(
                "/api-keys/{id}",
                only("DELETE", axum::routing::delete(api_keys::revoke)),
            )
            .route(
                "/documents",
                only("GET, POST", get(documents::list).post(documents::upload)),
            )
            .route("/documents/settings", only("GET", get(documents::settings)))
            .route(
                "/documents/{id}",
                only(
                    "GET, DELETE",
                    get(documents::get_one).delete(documents::delete),
                ),
            )
            .with_state(self.shared.clone())
    }

    /// The function's whole edge, as Lambda and the plain server run it.
    pub fn service(&self) -> FunctionService {
        chat_runtime::function_service(
            self.routes(),
            &self.cors,
            &[
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ],
        )
    }

    /// Answers one request through the whole edge (what tests call; the runtime serves [`HistoryApp::service`]).
    pub async fn handle<B>(&self, request: axum::http::Request<B>) -> Response
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        chat_runtime::answer_one(self.service(), request).await
    }
}

// Each handler names the caller first: a request without credentials is a 401 before anything else of it is read.

async fn list<St: SessionStore>(
    State(app): AppState<St>,
    Identified(Caller { owner, .. }): Identified,
    parts: Parts,
) -> Result<Response, ApiError> {
    let Query(params) = query(&parts)?;
    let mode = mode(&params)?;
    let limit = limit(&params, DEFAULT_PAGE, MAX_PAGE)?;
    let page = app
        .store
        .list(
            &owner,
            ListRequest {
                mode,
                limit,
                cursor: cursor(&params),
            },
        )
        .await
        .map_err(ChatError::from)?;
    let body: Vec<_> = page.items.iter().map(|c| summary(c, false)).collect();
    Ok(page_response(&body, page.next_cursor))
}

/// The caller's own usage: tokens, cost and turns today and this month (UTC), documents and bytes uploaded today,
/// the limits that apply to them (an operator's item for them included) and when each period resets; and every
/// limit in force with what counts against it (`limits`).
async fn usage<St: SessionStore>(
    State(app): AppState<St>,
    Identified(Caller { owner, .. }): Identified,
) -> Result<Response, ApiError> {
    let periods = Periods::at(OffsetDateTime::now_utc());
    let snapshot = match &app.ledger {
        Some(ledger) => ledger
            .read(&owner, &periods)
            .await
            .map_err(ChatError::Store)?,
        None => Default::default(),
    };
    let limits = app.usage_limits.for_user(&snapshot.overrides);
    Ok(json_response(
        StatusCode::OK,
        &chat_core::report(&limits, &snapshot, &periods),
    ))
}

/// A chat's messages, oldest first: all of them when they fit one answer, else one page and the next page's cursor
/// in [`NEXT_CURSOR_HEADER`].
async fn messages<St: SessionStore>(
    State(app): AppState<St>,
    Identified(Caller { owner, .. }): Identified,
    ChatQuery { id, params }: ChatQuery,
) -> Result<Response, ApiError> {
    let limit = limit(&params, usize::MAX, MAX_MESSAGES_PAGE)?;
    let page = app
        .store
        .load_page(
            &owner,
            &id,
            PageRequest {
                cursor: cursor(&params),
                limit,
                max_bytes: MESSAGES_PAGE_BYTES,
            },
        )
        .await
        .map_err(ChatError::from)?;
    let mut body: Vec<HistoryMessage> = page.items.iter().map(history_message).collect();
    for (listed, stored) in body.iter_mut().zip(&page.items) {
        if !stored.files.is_empty() {
            listed.files = Some(app.listed_files(&owner, &stored.files).await?);
        }
    }
    Ok(page_response(&body, page.next_cursor))
}

async fn create<St: SessionStore>(
    State(app): AppState<St>,
    Identified(Caller { owner, .. }): Identified,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let body: CreateChatRequest = parse_body(&body)?;
    let now = now();
    let chat = ChatRecord {
        id: uuid::Uuid::new_v4().simple().to_string(),
        mode: body.mode,
        title: app.title(body.title)?,
        created_at: now.clone(),
        last_updated: now,
        last_message: String::new(),
        message_count: 0,
        usage: Default::default(),
    };
    let created = app
        .store
        .create(&owner, &chat, &[])
        .await
        .map_err(ChatError::from)?;
    Ok(json_response(
        StatusCode::CREATED,
        &summary(&created, false),
    ))
}

async fn replace<St: SessionStore>(
    State(app): AppState<St>,
    Identified(Caller { owner, .. }): Identified,
    id: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let body = parse_replace_request(&body, &app.limits)?;
    // A message saved without a time gets the time as the Chat UI shows one.
    let shown_at = display_time(OffsetDateTime::now_utc().unix_timestamp());
    let mut messages: Vec<_> = body
        .messages
        .into_iter()
        .map(|m| stored_message(m, &shown_at))
        .collect();
    let id = chat_id(id)?;
    let dropped = app.carry_files(&owner, &id, &mut messages).await?;
    let record = app
        .store
        .replace(&owner, &id, &messages)
        .await
        .map_err(ChatError::from)?;
    if let (Some(store), false) = (&app.attachments, dropped.is_empty())
        && let Err(e) = store.delete(&owner, &dropped).await
    {
        tracing::warn!(error = %e, "files of replaced messages are left to expire");
    }
    Ok(json_response(StatusCode::OK, &summary(&record, true)))
}

/// What `PATCH /chat-history/{id}` takes: the chat's new title. Other fields are ignored, as a create's are.
#[derive(Debug, Deserialize)]
struct RenameChatRequest {
    title: String,
}

/// Renames the chat: only its title changes (not its messages, nor when it was last updated, so it keeps its place
/// in the list). Answers the chat as `POST /chat-history` does.
async fn rename<St: SessionStore>(
    State(app): AppState<St>,
    Identified(Caller { owner, .. }): Identified,
    id: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let body: RenameChatRequest = parse_body(&body)?;
    let title = app.new_title(&body.title)?;
    let id = chat_id(id)?;
    let renamed = app
        .store
        .rename(&owner, &id, &title)
        .await
        .map_err(ChatError::from)?;
    Ok(json_response(StatusCode::OK, &summary(&renamed, false)))
}

async fn delete<St: SessionStore>(
    State(app): AppState<St>,
    Identified(Caller { owner, .. }): Identified,
    ChatQuery { id, params }: ChatQuery,
) -> Result<Response, ApiError> {
    mode(&params)?;
    // The files first: a delete that fails there can be tried again whole. Then again after the chat, for a file a
    // turn stored meanwhile.
    app.delete_files(&owner, &id).await?;
    app.store
        .delete(&owner, &id)
        .await
        .map_err(ChatError::from)?;
    if let Err(e) = app.delete_files(&owner, &id).await {
        tracing::warn!(error = %e, "a file stored while its chat was deleted is left to expire");
    }
    Ok(Response::builder()
        .status(StatusCode::OK)
        .body(Body::empty())
        .expect("a response built from valid parts"))
}

/// The chat id of the path. One that does not decode (`%FF` is no UTF-8) names no chat, as any unknown id: read
/// after the caller, so that a 401 still comes first.
fn chat_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    id.map(|Path(id)| id)
        .map_err(|_| ApiError::Chat(ChatError::ChatNotFound))
}

/// The request's query, typed.
fn query(parts: &Parts) -> Result<Query<Params>, ApiError> {
    Query::from_uri(&parts.uri)
}

/// The chat id of the path, then the request's query: what a handler of one chat's listing or deletion reads after
/// the caller.
struct ChatQuery {
    id: String,
    params: Params,
}

impl<S: Send + Sync> FromRequestParts<S> for ChatQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let id = chat_id(Path::<String>::from_request_parts(parts, state).await)?;
        let Query(params) = query(parts)?;
        Ok(Self { id, params })
    }
}

impl<St: SessionStore> EdgeState for Shared<St> {
    fn auth(&self) -> &Auth {
        &self.auth
    }

    fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }
}

impl<St: SessionStore> Shared<St> {
    /// A message's files as listed, each with a URL that reads it for a few minutes. A message's files are listed
    /// only where files are kept.
    async fn listed_files(
        &self,
        owner: &str,
        files: &[StoredFile],
    ) -> Result<Vec<ListedFile>, ApiError> {
        let mut listed = Vec::with_capacity(files.len());
        for file in files {
            let url = match &self.attachments {
                Some(store) => store.url(owner, file).await.map_err(ChatError::Files)?,
                None => String::new(),
            };
            listed.push(ListedFile {
                name: file.name.clone(),
                content_type: file.content_type.clone(),
                size: file.size,
                url,
            });
        }
        Ok(listed)
    }

    /// A save carries no files (they come only with a chat turn) and no tool use (it comes only from the model):
    /// each message saved again under its id keeps the files and the tool exchanges it had, so that a continued
    /// chat still replays them. Returns the keys of the files no saved message keeps, to remove once the save is in.
    async fn carry_files(
        &self,
        owner: &str,
        id: &str,
        messages: &mut [chat_core::StoredMessage],
    ) -> Result<Vec<String>, ApiError> {
        let (_, before) = self.store.load(owner, id).await.map_err(ChatError::from)?;
        let mut tools: std::collections::HashMap<&str, &Vec<chat_core::ToolExchange>> = before
            .iter()
            .filter(|m| !m.tools.is_empty())
            .map(|m| (m.id.as_str(), &m.tools))
            .collect();
        let mut files: std::collections::HashMap<&str, &Vec<StoredFile>> = before
            .iter()
            .filter(|m| !m.files.is_empty() && self.attachments.is_some())
            .map(|m| (m.id.as_str(), &m.files))
            .collect();
        for message in messages.iter_mut() {
            if let Some(kept) = files.remove(message.id.as_str()) {
                message.files = kept.clone();
            }
            if let Some(kept) = tools.remove(message.id.as_str()) {
                message.tools = kept.clone();
            }
        }
        Ok(files
            .into_values()
            .flatten()
            .map(|f| f.key.clone())
            .collect())
    }

    /// Deletes every file of `owner`'s chat `id`.
    async fn delete_files(&self, owner: &str, id: &str) -> Result<(), ApiError> {
        if let Some(store) = &self.attachments {
            store
                .delete_chat(owner, id)
                .await
                .map_err(ChatError::Files)?;
        }
        Ok(())
    }

    /// A rename's title: trimmed and within `MAX_TITLE_CHARS`, as a create's; but a blank one is refused, not made
    /// `New chat`: renaming a chat to nothing is a mistake to show, not to guess at.
    fn new_title(&self, title: &str) -> Result<String, ApiError> {
        let title = title.trim();
        if title.is_empty() {
            return Err(InvalidRequest::new("title", "must not be blank").into());
        }
        InvalidRequest::check_length("title", title, self.max_title_chars)?;
        Ok(title.to_string())
    }

    fn title(&self, title: Option<String>) -> Result<String, ApiError> {
        let title = title
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        let title = title.unwrap_or_else(|| "New chat".to_string());
        InvalidRequest::check_length("title", &title, self.max_title_chars)?;
        Ok(title)
    }
}
