//! The document APIs of a knowledge base's data source (`IngestKnowledgeBaseDocuments`,
//! `GetKnowledgeBaseDocuments`, `ListKnowledgeBaseDocuments`, `DeleteKnowledgeBaseDocuments`) in bedrock-agent's
//! REST-JSON wire format, so that uploads go through the real SDK client (`aws-sdk-bedrockagent`):
//!
//! | API | method and path |
//! |---|---|
//! | ingest | `PUT /knowledgebases/{kb}/datasources/{ds}/documents` |
//! | list | `POST /knowledgebases/{kb}/datasources/{ds}/documents` |
//! | get | `POST /knowledgebases/{kb}/datasources/{ds}/documents/getDocuments` |
//! | delete | `POST /knowledgebases/{kb}/datasources/{ds}/documents/deleteDocuments` |
//!
//! An ingested document is read from S3 (the `s3Location` given; moto in the tests and the local run), its
//! metadata from the request's inline attributes (or the `s3Location` of a metadata file). It answers `STARTING`
//! at once, then in the background `IN_PROGRESS`, then `INDEXED` (its passages searchable by `Retrieve` with their
//! metadata, the access filters included) or `FAILED` with a reason. What is parsed: Markdown, text and CSV as they
//! are, HTML without its tags (scripts and styles dropped), and PDF text (lopdf: each page's text, the passages
//! carrying the page number, as Bedrock's do). Word files are not parsed here: they end `FAILED` saying so, as does
//! a PDF with no text (scanned) or a file that is not what its name says. A delete removes the document's passages
//! at once and answers `DELETE_IN_PROGRESS`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::collection::{Chunk, DATA_SOURCE_ID, chunk_document};
use crate::{Served, error, ok, validation};

/// One document the data source was given.
#[derive(Debug, Clone)]
pub struct Ingested {
    pub status: &'static str,
    pub reason: Option<String>,
    pub updated_at: String,
    pub chunks: Vec<Chunk>,
}

/// The documents ingested, by their S3 URI.
pub type Ingestions = BTreeMap<String, Ingested>;

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The path's ids, checked: an unknown knowledge base or data source is a `ResourceNotFoundException`.
fn check_ids(served: &Served, kb: &str, ds: &str) -> Option<Response> {
    if kb != served.knowledge_base_id {
        return Some(error(
            404,
            "ResourceNotFoundException",
            format!("Knowledge base {kb} does not exist"),
        ));
    }
    if ds != DATA_SOURCE_ID {
        return Some(error(
            404,
            "ResourceNotFoundException",
            format!("Data source {ds} does not exist in knowledge base {kb}"),
        ));
    }
    None
}

/// The body as JSON; `None` answers a `SerializationException` ([`not_json`]).
fn body_of(bytes: &Bytes) -> Option<Value> {
    serde_json::from_slice(bytes).ok()
}

fn not_json() -> Response {
    error(400, "SerializationException", "body is not JSON")
}

fn detail(kb: &str, uri: &str, status: &str, reason: Option<&str>, updated_at: &str) -> Value {
    let mut d = json!({
        "knowledgeBaseId": kb,
        "dataSourceId": DATA_SOURCE_ID,
        "status": status,
        "identifier": {"dataSourceType": "S3", "s3": {"uri": uri}},
        "updatedAt": updated_at,
    });
    if let Some(reason) = reason {
        d["statusReason"] = Value::String(reason.to_string());
    }
    d
}

/// `s3://bucket/key` as (bucket, key).
fn split_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix("s3://")?;
    let (bucket, key) = rest.split_once('/')?;
    (!bucket.is_empty() && !key.is_empty()).then(|| (bucket.to_string(), key.to_string()))
}

/// The S3 URI of a `documentIdentifiers` / `content` entry.
fn identifier_uri(identifier: &Value, path: &str) -> Result<String, String> {
    match identifier.get("dataSourceType").and_then(Value::as_str) {
        Some("S3") => {}
        Some(other) => {
            return Err(format!(
                "{path}.dataSourceType: {other} is not the type of data source {DATA_SOURCE_ID} (S3)"
            ));
        }
        None => return Err(format!("{path}.dataSourceType must not be null")),
    }
    let uri = identifier
        .pointer("/s3/uri")
        .or_else(|| identifier.pointer("/s3/s3Location/uri"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{path}.s3 must name a location"))?;
    split_uri(uri).ok_or_else(|| format!("{path}: {uri} is not an S3 URI"))?;
    Ok(uri.to_string())
}

/// The inline attributes as metadata values (`STRING_LIST` → an array of strings, as `Retrieve` gives them).
fn inline_attributes(list: &[Value]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for attribute in list {
        let key = attribute
            .get("key")
            .and_then(Value::as_str)
            .ok_or("metadata.inlineAttributes.key must not be null")?;
        let value = attribute
            .get("value")
            .ok_or("metadata.inlineAttributes.value must not be null")?;
        let v = match value.get("type").and_then(Value::as_str) {
            Some("STRING") => value.get("stringValue").cloned(),
            Some("NUMBER") => value.get("numberValue").cloned(),
            Some("BOOLEAN") => value.get("booleanValue").cloned(),
            Some("STRING_LIST") => value.get("stringListValue").cloned(),
            _ => None,
        }
        .ok_or_else(|| {
            format!("metadata.inlineAttributes: the value of {key} does not match its type")
        })?;
        out.insert(key.to_string(), v);
    }
    Ok(out)
}

/// Where a document's metadata comes from.
enum MetadataSource {
    Inline(Map<String, Value>),
    S3(String),
    None,
}

fn metadata_source(doc: &Value) -> Result<MetadataSource, String> {
    let Some(metadata) = doc.get("metadata").filter(|m| !m.is_null()) else {
        return Ok(MetadataSource::None);
    };
    match metadata.get("type").and_then(Value::as_str) {
        Some("IN_LINE_ATTRIBUTE") => Ok(MetadataSource::Inline(inline_attributes(
            metadata
                .get("inlineAttributes")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default(),
        )?)),
        Some("S3_LOCATION") => metadata
            .pointer("/s3Location/uri")
            .and_then(Value::as_str)
            .map(|u| MetadataSource::S3(u.to_string()))
            .ok_or_else(|| "metadata.s3Location.uri must not be null".to_string()),
        _ => Err("metadata.type must be IN_LINE_ATTRIBUTE or S3_LOCATION".into()),
    }
}

pub(crate) async fn ingest(
    State(served): State<Arc<Served>>,
    UrlPath((kb, ds)): UrlPath<(String, String)>,
    bytes: Bytes,
) -> Response {
    if let Some(refused) = check_ids(&served, &kb, &ds) {
        return refused;
    }
    let Some(body) = body_of(&bytes) else {
        return not_json();
    };
    let Some(docs) = body.get("documents").and_then(Value::as_array) else {
        return validation("documents must not be null");
    };
    if docs.is_empty() || docs.len() > 25 {
        return validation("documents must hold 1 to 25 documents");
    }
    let mut accepted = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let Some(content) = doc.get("content") else {
            return validation(format!("documents[{i}].content must not be null"));
        };
        let uri = match identifier_uri(content, &format!("documents[{i}].content")) {
            Ok(uri) => uri,
            Err(e) => return validation(e),
        };
        let metadata = match metadata_source(doc) {
            Ok(m) => m,
            Err(e) => return validation(format!("documents[{i}].{e}")),
        };
        accepted.push((uri, metadata));
    }
    let updated_at = now();
    let mut details = Vec::new();
    served
        .ingest_count
        .fetch_add(accepted.len(), std::sync::atomic::Ordering::SeqCst);
    for (uri, metadata) in accepted {
        served.ingestions.lock().unwrap().insert(
            uri.clone(),
            Ingested {
                status: "STARTING",
                reason: None,
                updated_at: updated_at.clone(),
                chunks: Vec::new(),
            },
        );
        details.push(detail(&kb, &uri, "STARTING", None, &updated_at));
        tokio::spawn(process(served.clone(), uri, metadata));
    }
    (
        StatusCode::ACCEPTED,
        ok(json!({ "documentDetails": details })),
    )
        .into_response()
}

/// Sets `uri`'s state, unless it was deleted meanwhile; rebuilds the index when its passages changed.
fn set_state(
    served: &Served,
    uri: &str,
    status: &'static str,
    reason: Option<String>,
    chunks: Option<Vec<Chunk>>,
) {
    let mut ingestions = served.ingestions.lock().unwrap();
    let Some(entry) = ingestions.get_mut(uri) else {
        return;
    };
    entry.status = status;
    entry.reason = reason;
    entry.updated_at = now();
    if let Some(chunks) = chunks {
        entry.chunks = chunks;
        served.reindex(&ingestions);
    }
}

/// What the background work of one ingestion does: read, parse, index.
async fn process(served: Arc<Served>, uri: String, metadata: MetadataSource) {
    // Let the caller see the document start before it is done, as the service's take seconds.
    tokio::time::sleep(std::time::Duration::from_millis(served.ingest_delay_ms)).await;
    set_state(&served, &uri, "IN_PROGRESS", None, None);
    match read_and_chunk(&served, &uri, metadata).await {
        Ok(chunks) => set_state(&served, &uri, "INDEXED", None, Some(chunks)),
        Err(reason) => set_state(&served, &uri, "FAILED", Some(reason), Some(Vec::new())),
    }
}

async fn read_object(served: &Served, uri: &str) -> Result<Vec<u8>, String> {
    let Some(s3) = served.s3.as_ref() else {
        return Err(
            "The knowledge base cannot read from Amazon S3 (no S3 endpoint is configured).".into(),
        );
    };
    let (bucket, key) = split_uri(uri).ok_or_else(|| format!("{uri} is not an S3 URI"))?;
    let object = s3
        .get_object()
        .bucket(&bucket)
        .key(&key)
        .send()
        .await
        .map_err(|e| {
            format!(
                "The knowledge base could not read the document from S3 ({uri}): {}",
                aws_sdk_s3::error::DisplayErrorContext(e)
            )
        })?;
    let body = object
        .body
        .collect()
        .await
        .map_err(|e| format!("The document could not be read from S3: {e}"))?;
    Ok(body.into_bytes().to_vec())
}

async fn read_and_chunk(
    served: &Served,
    uri: &str,
    metadata: MetadataSource,
) -> Result<Vec<Chunk>, String> {
    let attributes = match metadata {
        MetadataSource::Inline(attributes) => attributes,
        MetadataSource::None => Map::new(),
        MetadataSource::S3(meta_uri) => {
            let raw = read_object(served, &meta_uri).await?;
            let value: Value = serde_json::from_slice(&raw)
                .map_err(|e| format!("The metadata file {meta_uri} is not valid JSON: {e}"))?;
            value
                .get("metadataAttributes")
                .and_then(Value::as_object)
                .cloned()
                .ok_or_else(|| {
                    format!("The metadata file {meta_uri} has no metadataAttributes object")
                })?
        }
    };
    let bytes = read_object(served, uri).await?;
    let name = uri.rsplit('/').next().unwrap_or(uri);
    let text = parse(name, &bytes)?;
    let mut chunks = chunk_document(name, &text, &attributes);
    if chunks.is_empty() {
        return Err(format!(
            "The document {name} holds no text to index (it is empty, or only images)."
        ));
    }
    for (i, chunk) in chunks.iter_mut().enumerate() {
        chunk.source_uri = uri.to_string();
        chunk
            .metadata
            .insert(crate::SOURCE_URI_KEY.into(), Value::String(uri.to_string()));
        chunk.metadata.insert(
            crate::CHUNK_ID_KEY.into(),
            Value::String(format!("{uri}:{}", i + 1)),
        );
    }
    Ok(chunks)
}

/// The text of a document, by its extension; the error is the reason a person is given.
pub fn parse(name: &str, bytes: &[u8]) -> Result<String, String> {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    let utf8 = || {
        std::str::from_utf8(bytes).map(str::to_string).map_err(|_| {
            format!("The document {name} is not valid UTF-8 text and could not be parsed.")
        })
    };
    match ext.as_str() {
        "md" | "markdown" | "txt" | "csv" => utf8(),
        "html" | "htm" => Ok(strip_html(&utf8()?)),
        "pdf" => pdf_text(name, bytes),
        "doc" | "docx" => Err(format!(
            "The local knowledge base does not parse Word documents ({name}); Amazon Bedrock does."
        )),
        _ => Err(format!(
            "Unsupported file type: {name}. Supported types are .txt, .md, .html, .csv and .pdf here."
        )),
    }
}

/// A PDF's text, page by page (`<!-- page N -->` before each, so that passages carry their page number).
fn pdf_text(name: &str, bytes: &[u8]) -> Result<String, String> {
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| {
        format!("The PDF {name} could not be parsed: it is damaged or not a PDF ({e}).")
    })?;
    if doc.is_encrypted() {
        return Err(format!(
            "The PDF {name} is encrypted and could not be read."
        ));
    }
    let mut out = String::new();
    let mut any = false;
    for (number, _) in doc.get_pages() {
        let text = doc.extract_text(&[number]).unwrap_or_default();
        if !text.trim().is_empty() {
            any = true;
        }
        out.push_str(&format!("<!-- page {number} -->\n{}\n", text.trim()));
    }
    if !any {
        return Err(format!(
            "The PDF {name} has no extractable text (it may be scanned images): nothing to index."
        ));
    }
    Ok(out)
}

/// HTML's text: tags removed (block elements end a paragraph), `<script>` and `<style>` dropped, the common
/// entities decoded.
pub fn strip_html(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let Some(end) = after.find('>') else {
            rest = "";
            break;
        };
        let tag = after[1..end].trim().to_ascii_lowercase();
        let tag_name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        rest = &after[end + 1..];
        if (tag_name == "script" || tag_name == "style") && !tag.starts_with('/') {
            let close = format!("</{tag_name}");
            match rest.to_ascii_lowercase().find(&close) {
                Some(at) => {
                    rest = &rest[at..];
                    if let Some(e) = rest.find('>') {
                        rest = &rest[e + 1..];
                    }
                }
                None => rest = "",
            }
            continue;
        }
        let block = [
            "p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table",
            "section", "article", "title",
        ];
        if block.contains(&tag_name.as_str()) {
            out.push_str("\n\n");
        } else {
            out.push(' ');
        }
    }
    out.push_str(rest);
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    // Lines without their runs of spaces; blank lines kept (they separate paragraphs).
    decoded
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifiers(body: &Value) -> Result<Vec<String>, String> {
    let list = body
        .get("documentIdentifiers")
        .and_then(Value::as_array)
        .ok_or("documentIdentifiers must not be null")?;
    if list.is_empty() || list.len() > 10 {
        return Err("documentIdentifiers must hold 1 to 10 identifiers".into());
    }
    list.iter()
        .enumerate()
        .map(|(i, id)| identifier_uri(id, &format!("documentIdentifiers[{i}]")))
        .collect()
}

/// A request's refusal, boxed: it is large beside what an accepted request reads.
pub(crate) struct Refused(Box<Response>);

impl From<Response> for Refused {
    fn from(response: Response) -> Self {
        Self(Box::new(response))
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        *self.0
    }
}

/// The document URIs a GetDocuments or DeleteDocuments request names, or the refusal it earns.
fn named_documents(
    served: &Served,
    kb: &str,
    ds: &str,
    bytes: &Bytes,
) -> Result<Vec<String>, Refused> {
    if let Some(refused) = check_ids(served, kb, ds) {
        return Err(refused.into());
    }
    let body = body_of(bytes).ok_or_else(not_json)?;
    Ok(identifiers(&body).map_err(validation)?)
}

pub(crate) async fn get_documents(
    State(served): State<Arc<Served>>,
    UrlPath((kb, ds)): UrlPath<(String, String)>,
    bytes: Bytes,
) -> Result<Response, Refused> {
    let uris = named_documents(&served, &kb, &ds, &bytes)?;
    let ingestions = served.ingestions.lock().unwrap();
    let details: Vec<Value> = uris
        .iter()
        .map(|uri| match ingestions.get(uri) {
            Some(d) => detail(&kb, uri, d.status, d.reason.as_deref(), &d.updated_at),
            None => detail(&kb, uri, "NOT_FOUND", None, &now()),
        })
        .collect();
    Ok(ok(json!({ "documentDetails": details })))
}

pub(crate) async fn list_documents(
    UrlPath((kb, ds)): UrlPath<(String, String)>,
    State(served): State<Arc<Served>>,
    bytes: Bytes,
) -> Response {
    if let Some(refused) = check_ids(&served, &kb, &ds) {
        return refused;
    }
    let body = if bytes.is_empty() {
        json!({})
    } else {
        match body_of(&bytes) {
            Some(b) => b,
            None => return not_json(),
        }
    };
    let max = body
        .get("maxResults")
        .and_then(Value::as_u64)
        .unwrap_or(1000)
        .clamp(1, 1000) as usize;
    let after = body.get("nextToken").and_then(Value::as_str);
    let ingestions = served.ingestions.lock().unwrap();
    let mut page: Vec<(&String, &Ingested)> = ingestions
        .iter()
        .filter(|(uri, _)| after.is_none_or(|a| uri.as_str() > a))
        .take(max + 1)
        .collect();
    let next = (page.len() > max).then(|| page[max - 1].0.clone());
    page.truncate(max);
    let details: Vec<Value> = page
        .iter()
        .map(|(uri, d)| detail(&kb, uri, d.status, d.reason.as_deref(), &d.updated_at))
        .collect();
    let mut answer = json!({ "documentDetails": details });
    if let Some(next) = next {
        answer["nextToken"] = Value::String(next);
    }
    ok(answer)
}

pub(crate) async fn delete_documents(
    State(served): State<Arc<Served>>,
    UrlPath((kb, ds)): UrlPath<(String, String)>,
    bytes: Bytes,
) -> Result<Response, Refused> {
    let uris = named_documents(&served, &kb, &ds, &bytes)?;
    let mut ingestions = served.ingestions.lock().unwrap();
    let at = now();
    let details: Vec<Value> = uris
        .iter()
        .map(|uri| match ingestions.remove(uri) {
            Some(_) => detail(&kb, uri, "DELETE_IN_PROGRESS", None, &at),
            None => detail(&kb, uri, "NOT_FOUND", None, &at),
        })
        .collect();
    served.reindex(&ingestions);
    let accepted = (
        StatusCode::ACCEPTED,
        ok(json!({ "documentDetails": details })),
    );
    Ok(accepted.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_loses_its_tags_scripts_and_styles() {
        let text = strip_html(
            "<html><head><title>Plan</title><style>p{x:1}</style></head><body><p>Ski &amp; kayak</p>\
             <script>alert(1)</script><div>trip <b>days</b></div></body></html>",
        );
        assert!(text.contains("Ski & kayak"), "{text}");
        assert!(text.contains("trip days"), "{text}");
        assert!(
            !text.contains("alert") && !text.contains("x:1") && !text.contains('<'),
            "{text}"
        );
    }

    #[test]
    fn what_cannot_be_parsed_says_why() {
        assert!(
            parse("a.pdf", b"%PDF-1.4 garbage")
                .unwrap_err()
                .contains("could not be parsed")
        );
        assert!(parse("a.docx", b"PK\x03\x04").unwrap_err().contains("Word"));
        assert!(parse("a.txt", &[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        assert_eq!(parse("a.md", b"# Hi").unwrap(), "# Hi");
    }
}

#[cfg(test)]
mod pdf_tests {
    use super::*;
    use chat_testing::bytes::simple_pdf;

    #[test]
    fn a_pdf_s_text_is_read_page_by_page() {
        let pdf = simple_pdf(&["The kayak fleet (twelve boats)", "Paddles are kept dry"]);
        let text = parse("Fleet.pdf", &pdf).unwrap();
        assert!(text.contains("<!-- page 1 -->"), "{text}");
        assert!(text.contains("kayak fleet"), "{text}");
        assert!(text.contains("<!-- page 2 -->"), "{text}");
        assert!(text.contains("Paddles are kept dry"), "{text}");
    }
}
