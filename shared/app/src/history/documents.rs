//! `POST`, `GET /documents`, `GET` and `DELETE /documents/{id}`: people bring documents into the knowledge base
//! and follow their ingestion, under the core's rules ([`chat_core::Documents`]): what a user uploads is theirs
//! alone unless they are a document administrator; another user's document answers 404; only administrators list
//! everyone's (`?all=true`). Where documents are off (no knowledge base, data source or bucket configured) these
//! routes answer 404.
//!
//! The upload is `multipart/form-data`: one or more file parts (any part with a file name; the part's name is
//! conventionally `files`), and, for administrators, the text parts `groups` (names, comma-separated, or the part
//! repeated) and `everyone` (`true`). It answers 201 with the documents as stored, each `pending` (or already
//! further along), to be followed with `GET /documents/{id}` until `indexed` or `failed`. An upload that would pass
//! the uploader's upload quotas (`QUOTA_UPLOADED_DOCUMENTS_PER_DAY`, `QUOTA_UPLOADED_BYTES_PER_DAY`) is a 429 with
//! `Retry-After`, nothing of it stored.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use chat_core::{AccessChoice, Documents, InvalidRequest, NewDocument, SessionStore};
use chat_edge::{ApiError, Identified, Query, json_response, read_upload_body};
use chat_protocol::documents::view;
use serde::{Deserialize, Serialize};

use super::{AppState, Shared, page_response};

const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 100;
/// Room for the multipart framing and the text parts beside the files.
const FRAMING_BYTES: usize = 64 * 1024;

fn not_found() -> ApiError {
    ApiError::NotFound("/documents/{id} (no such document)".into())
}

/// The documents of the app, when they are on; else a 404 for the whole family of routes.
fn documents_of<St>(app: &Shared<St>) -> Result<&Documents, ApiError> {
    app.documents
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("/documents (documents are off here)".into()))
}

/// What an upload's parts say: its files and the access chosen.
async fn read_upload(
    content_type: &str,
    body: Bytes,
) -> Result<(Vec<NewDocument>, AccessChoice), ApiError> {
    let invalid = |reason: String| ApiError::from(InvalidRequest::new("", reason));
    let boundary = multer::parse_boundary(content_type).map_err(|e| {
        invalid(format!(
            "send the files as multipart/form-data with a boundary: {e}"
        ))
    })?;
    let stream = futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut files = Vec::new();
    let mut choice = AccessChoice::default();
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| invalid(format!("the multipart body is malformed: {e}")))?
    {
        let name = field.name().unwrap_or_default().to_string();
        if let Some(file_name) = field.file_name().map(str::to_string) {
            let bytes = field
                .bytes()
                .await
                .map_err(|e| invalid(format!("the part {name} could not be read: {e}")))?;
            files.push(NewDocument {
                name: file_name,
                bytes,
            });
            continue;
        }
        let text = field
            .text()
            .await
            .map_err(|e| invalid(format!("the part {name} could not be read: {e}")))?;
        match name.as_str() {
            "groups" => choice.groups.extend(
                text.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string),
            ),
            "everyone" => {
                choice.everyone = match text.trim() {
                    "true" => true,
                    "false" | "" => false,
                    _ => {
                        return Err(
                            InvalidRequest::new("everyone", "expected true or false").into()
                        );
                    }
                }
            }
            other => {
                return Err(InvalidRequest::new(
                    other,
                    "unknown part: send files (parts with a file name), groups and everyone",
                )
                .into());
            }
        }
    }
    Ok((files, choice))
}

// Each handler names the caller first: a request without credentials is a 401 before anything else of it is read.

pub(super) async fn upload<St: SessionStore>(
    State(app): AppState<St>,
    Identified(caller): Identified,
    request: Request,
) -> Result<Response, ApiError> {
    let documents = documents_of(&app)?;
    let (parts, body) = request.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if !chat_protocol::is_multipart(&content_type) {
        return Err(ApiError::UnsupportedMediaType(content_type));
    }
    let settings = documents.settings();
    let limit = settings
        .max_bytes
        .saturating_mul(settings.max_per_upload)
        .saturating_add(FRAMING_BYTES);
    let body = read_upload_body(&parts.headers, body, limit).await?;
    let (files, choice) = read_upload(&content_type, body).await?;
    let uploaded = documents
        .upload(&caller, files, &choice)
        .await
        .map_err(ApiError::from)?;
    let body: Vec<_> = uploaded.iter().map(|d| view(d, false)).collect();
    Ok(json_response(StatusCode::CREATED, &body))
}

/// What `GET /documents/settings` answers: what one upload may hold, and whether the caller may share what they
/// upload (a document administrator), so that a page offers only what the routes take.
#[derive(Serialize)]
struct UploadSettings<'a> {
    /// The caller is a member of `DOCUMENT_ADMIN_GROUP`: they may give an upload `groups` or `everyone`, and list
    /// everyone's documents.
    administrator: bool,
    /// The group every signed-in person is in (what `everyone=true` gives).
    everyone_group: &'a str,
    /// `MAX_UPLOADED_DOCUMENT_BYTES`.
    max_bytes: usize,
    /// `MAX_DOCUMENTS_PER_UPLOAD`.
    max_per_upload: usize,
}

pub(super) async fn settings<St: SessionStore>(
    State(app): AppState<St>,
    Identified(caller): Identified,
) -> Result<Response, ApiError> {
    let documents = documents_of(&app)?;
    let settings = documents.settings();
    Ok(json_response(
        StatusCode::OK,
        &UploadSettings {
            administrator: documents.is_admin(&caller),
            everyone_group: &settings.everyone_group,
            max_bytes: settings.max_bytes,
            max_per_upload: settings.max_per_upload,
        },
    ))
}

/// The query of `GET /documents`.
#[derive(Debug, Default, Deserialize)]
struct ListParams {
    all: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

pub(super) async fn list<St: SessionStore>(
    State(app): AppState<St>,
    Identified(caller): Identified,
    parts: axum::http::request::Parts,
) -> Result<Response, ApiError> {
    let documents = documents_of(&app)?;
    let Query(params) = Query::<ListParams>::from_uri(&parts.uri)?;
    let all = match params.all.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(InvalidRequest::new("all", "expected true or false").into()),
    };
    let limit = match params.limit.as_deref() {
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
    let cursor = params.cursor.as_deref().filter(|c| !c.is_empty());
    let page = documents
        .list(&caller, all, limit, cursor)
        .await
        .map_err(ApiError::from)?;
    let body: Vec<_> = page.items.iter().map(|d| view(d, all)).collect();
    Ok(page_response(&body, page.next))
}

pub(super) async fn get_one<St: SessionStore>(
    State(app): AppState<St>,
    Identified(caller): Identified,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let documents = documents_of(&app)?;
    let Path(id) = id.map_err(|_| not_found())?;
    let record = documents.get(&caller, &id).await.map_err(ApiError::from)?;
    Ok(json_response(StatusCode::OK, &view(&record, false)))
}

pub(super) async fn delete<St: SessionStore>(
    State(app): AppState<St>,
    Identified(caller): Identified,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let documents = documents_of(&app)?;
    let Path(id) = id.map_err(|_| not_found())?;
    documents
        .delete(&caller, &id)
        .await
        .map_err(ApiError::from)?;
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::empty())
        .expect("a response built from valid parts"))
}
