//! The history function: the Chat UI's `/chat-history` API. Every operation is the caller's own: another user's
//! chat answers 404, exactly like one that does not exist.

use chat_core::{
    ChatError, ChatMode, ChatRecord, InvalidRequest, SessionStore, display_time, rfc3339_millis,
};
use chat_http::{ApiError, Auth, Config, Cors, json_response, normalized_path, read_json_body};
use chat_protocol::chat_ui::{
    CreateChatRequest, HistoryMessage, history_message, stored_message, summary,
};
use chat_protocol::{parse_body, parse_replace_request};
use lambda_http::http::{Method, StatusCode, header};
use lambda_http::{Body, Request, Response};
use time::OffsetDateTime;

/// The response header that carries the cursor of the next page of `GET /chat-history` and of a chat's messages.
pub const NEXT_CURSOR_HEADER: &str = "x-next-cursor";
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 100;
/// The most messages a client may ask for in one page of `GET /chat-history/{id}/messages`.
pub const MAX_MESSAGES_PAGE: usize = 1000;
/// How much of a chat's messages one answer carries (as measured by `StoredMessage::wire_size`): a buffered Lambda
/// response is at most 6 MB, so a longer chat is paged.
pub const MESSAGES_PAGE_BYTES: usize = 5 * 1024 * 1024;

pub struct App<St> {
    store: St,
    auth: Auth,
    max_body_bytes: usize,
    max_title_chars: usize,
    max_message_chars: usize,
    cors: Cors,
}

/// Which operation a path and method name.
enum Route<'a> {
    List,
    Create,
    Messages(&'a str),
    Replace(&'a str),
    Delete(&'a str),
}

fn route<'a>(method: &Method, path: &'a str) -> Result<Route<'a>, ApiError> {
    let rest = path
        .strip_prefix("/chat-history")
        .ok_or_else(|| ApiError::NotFound(path.into()))?;
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match (segments.as_slice(), method) {
        ([], &Method::GET) => Ok(Route::List),
        ([], &Method::POST) => Ok(Route::Create),
        ([], _) => Err(ApiError::MethodNotAllowed { allow: "GET, POST" }),
        ([id, "messages"], &Method::GET) => Ok(Route::Messages(id)),
        ([_, "messages"], _) => Err(ApiError::MethodNotAllowed { allow: "GET" }),
        ([id], &Method::PUT) => Ok(Route::Replace(id)),
        ([id], &Method::DELETE) => Ok(Route::Delete(id)),
        ([_], _) => Err(ApiError::MethodNotAllowed {
            allow: "PUT, DELETE",
        }),
        _ => Err(ApiError::NotFound(path.into())),
    }
}

fn query(request: &Request) -> Vec<(String, String)> {
    form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn mode(query: &[(String, String)]) -> Result<ChatMode, ApiError> {
    match param(query, "mode") {
        None | Some("standard") => Ok(ChatMode::Standard),
        Some("multiAgent") => Ok(ChatMode::MultiAgent),
        Some(_) => {
            Err(InvalidRequest::new("mode", r#"expected "standard" or "multiAgent""#).into())
        }
    }
}

/// `response` with the next page's cursor, when there is one.
fn with_next_cursor(mut response: Response<Body>, next: Option<String>) -> Response<Body> {
    if let Some(next) = next {
        response.headers_mut().insert(
            NEXT_CURSOR_HEADER,
            header::HeaderValue::from_str(&next).expect("a cursor is URL-safe text"),
        );
    }
    response
}

fn now() -> String {
    rfc3339_millis(OffsetDateTime::now_utc())
}

impl<St: SessionStore> App<St> {
    pub fn new(store: St, auth: Auth, config: &Config) -> Self {
        Self {
            store,
            auth,
            max_body_bytes: config.max_body_bytes,
            max_title_chars: config.max_title_chars,
            max_message_chars: config.chat.limits.max_message_chars,
            cors: config.cors.clone(),
        }
    }

    /// The store behind the API.
    pub fn store(&self) -> &St {
        &self.store
    }

    pub async fn handle(&self, request: Request) -> Response<Body> {
        chat_http::respond(
            &request,
            &self.cors,
            "GET, POST, PUT, DELETE",
            |r| r,
            self.serve(&request),
        )
        .await
    }

    async fn serve(&self, request: &Request) -> Result<Response<Body>, ApiError> {
        let route = route(request.method(), normalized_path(request))?;
        let owner = self.auth.caller(request).await?;
        let query = query(request);
        match route {
            Route::List => self.list(&owner, &query).await,
            Route::Create => self.create(&owner, request).await,
            Route::Messages(id) => self.messages(&owner, id, &query).await,
            Route::Replace(id) => self.replace(&owner, id, request).await,
            Route::Delete(id) => {
                mode(&query)?;
                self.store
                    .delete(&owner, id)
                    .await
                    .map_err(ChatError::from)?;
                Ok(Response::builder()
                    .status(StatusCode::OK)
                    .body(Body::Empty)
                    .expect("a response built from valid parts"))
            }
        }
    }

    async fn list(
        &self,
        owner: &str,
        query: &[(String, String)],
    ) -> Result<Response<Body>, ApiError> {
        let mode = mode(query)?;
        let limit = match param(query, "limit") {
            None => DEFAULT_PAGE,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_PAGE).contains(n))
                .ok_or_else(|| {
                    InvalidRequest::new(
                        "limit",
                        format!("expected a whole number from 1 to {MAX_PAGE}"),
                    )
                })?,
        };
        let cursor = param(query, "cursor").filter(|c| !c.is_empty());
        let page = self
            .store
            .list(owner, mode, limit, cursor)
            .await
            .map_err(ChatError::from)?;
        let body: Vec<_> = page.items.iter().map(|c| summary(c, false)).collect();
        Ok(with_next_cursor(
            json_response(StatusCode::OK, &body),
            page.next_cursor,
        ))
    }

    /// A chat's messages, oldest first: all of them when they fit one answer, else one page and the next page's
    /// cursor in [`NEXT_CURSOR_HEADER`].
    async fn messages(
        &self,
        owner: &str,
        id: &str,
        query: &[(String, String)],
    ) -> Result<Response<Body>, ApiError> {
        let limit = match param(query, "limit") {
            None => usize::MAX,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_MESSAGES_PAGE).contains(n))
                .ok_or_else(|| {
                    InvalidRequest::new(
                        "limit",
                        format!("expected a whole number from 1 to {MAX_MESSAGES_PAGE}"),
                    )
                })?,
        };
        let cursor = param(query, "cursor").filter(|c| !c.is_empty());
        let page = self
            .store
            .load_page(owner, id, cursor, limit, MESSAGES_PAGE_BYTES)
            .await
            .map_err(ChatError::from)?;
        let body: Vec<HistoryMessage> = page.items.iter().map(history_message).collect();
        Ok(with_next_cursor(
            json_response(StatusCode::OK, &body),
            page.next_cursor,
        ))
    }

    fn title(&self, title: Option<String>) -> Result<String, ApiError> {
        let title = title
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        let title = title.unwrap_or_else(|| "New chat".to_string());
        InvalidRequest::check_length("title", &title, self.max_title_chars)?;
        Ok(title)
    }

    async fn create(&self, owner: &str, request: &Request) -> Result<Response<Body>, ApiError> {
        let body: CreateChatRequest = parse_body(read_json_body(request, self.max_body_bytes)?)?;
        let now = now();
        let chat = ChatRecord {
            id: uuid::Uuid::new_v4().simple().to_string(),
            mode: body.mode,
            title: self.title(body.title)?,
            created_at: now.clone(),
            last_updated: now,
            last_message: String::new(),
            message_count: 0,
        };
        let created = self
            .store
            .create(owner, &chat, &[])
            .await
            .map_err(ChatError::from)?;
        Ok(json_response(
            StatusCode::CREATED,
            &summary(&created, false),
        ))
    }

    async fn replace(
        &self,
        owner: &str,
        id: &str,
        request: &Request,
    ) -> Result<Response<Body>, ApiError> {
        let body = parse_replace_request(
            read_json_body(request, self.max_body_bytes)?,
            self.max_message_chars,
        )?;
        // A message saved without a time gets the time as the Chat UI shows one.
        let shown_at = display_time(OffsetDateTime::now_utc().unix_timestamp());
        let messages: Vec<_> = body
            .messages
            .into_iter()
            .map(|m| stored_message(m, &shown_at))
            .collect();
        let record = self
            .store
            .replace(owner, id, &messages)
            .await
            .map_err(ChatError::from)?;
        Ok(json_response(StatusCode::OK, &summary(&record, true)))
    }
}
