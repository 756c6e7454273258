//! Chat requests with files, as the protocol's own client sends them: `multipart/form-data` with one part `json`
//! (the request, its messages without files), then one part `messages[i].files[j]` per file. The parts become
//! the messages' file parts; kinds and limits are checked here, before anything is sent or stored.

use bytes::Bytes;
use chat_core::{ChatError, InvalidRequest, RequestLimits};

use crate::files::{Files, take};
use crate::request::parse_with_files;
use crate::{ChatInput, Endpoint};

/// Whether a `Content-Type` value is `multipart/form-data`.
pub fn is_multipart(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("multipart/form-data"))
}

/// What a part's name says it is.
#[derive(Debug, PartialEq, Eq)]
enum PartName {
    Json,
    File { message: usize, file: usize },
}

/// `json`, or `messages[i].files[j]` with plain decimal indexes.
fn part_name(name: &str) -> Option<PartName> {
    if name == "json" {
        return Some(PartName::Json);
    }
    let rest = name.strip_prefix("messages[")?;
    let (message, rest) = rest.split_once("].files[")?;
    let file = rest.strip_suffix(']')?;
    let index = |s: &str| {
        (!s.is_empty() && s.len() <= 6 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    Some(PartName::File {
        message: index(message)?,
        file: index(file)?,
    })
}

fn invalid(path: impl Into<String>, reason: impl Into<String>) -> ChatError {
    InvalidRequest::new(path, reason).into()
}

/// Parses a `multipart/form-data` chat request sent to `endpoint` (whose `Content-Type` is `content_type`).
/// Malformed multipart, a missing or repeated `json` part, an unknown part, a file of no message, gaps in a
/// message's file indexes, a kind this backend does not take or whose bytes contradict its declared type, or
/// more files than allowed: a 400 naming the part. A file larger than its kind may be: a 413 naming it.
pub async fn parse_multipart_chat_request(
    content_type: &str,
    body: Bytes,
    endpoint: Endpoint,
    limits: &RequestLimits,
) -> Result<ChatInput, ChatError> {
    if endpoint != Endpoint::Protocol {
        return Err(invalid(
            "",
            "this route takes JSON only; files go to /chat and /chat/stream",
        ));
    }
    let boundary = multer::parse_boundary(content_type).map_err(|e| {
        invalid(
            "",
            format!("the multipart/form-data content type has no usable boundary: {e}"),
        )
    })?;
    let stream = futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut json: Option<Bytes> = None;
    let mut files: Files = Files::new();
    let mut part_index = 0;
    loop {
        let field = multipart.next_field().await.map_err(|e| {
            invalid(
                "",
                format!("the multipart body is malformed at part {part_index}: {e}"),
            )
        })?;
        let Some(field) = field else { break };
        let Some(name) = field.name().map(str::to_string) else {
            return Err(invalid(
                "",
                format!("part {part_index} has no name (Content-Disposition: form-data; name=…)"),
            ));
        };
        let declared = field.content_type().map(|m| m.to_string());
        let file_name = field.file_name().map(str::to_string);
        let bytes = field.bytes().await.map_err(|e| {
            invalid(
                name.as_str(),
                format!("the multipart body is malformed in this part: {e}"),
            )
        })?;
        match part_name(&name) {
            Some(PartName::Json) if json.is_some() => {
                return Err(invalid("json", "the request has two json parts"));
            }
            Some(PartName::Json) => json = Some(bytes),
            Some(PartName::File { message, file }) => {
                let list = files.entry(message).or_default();
                if list.len() != file {
                    return Err(invalid(
                        name.as_str(),
                        format!(
                            "the files of messages[{message}] must come numbered from 0 without gaps or repeats; \
                             files[{}] was expected next",
                            list.len()
                        ),
                    ));
                }
                list.push(take(&name, file_name, declared.as_deref(), bytes, limits)?);
            }
            None => {
                return Err(invalid(
                    name.as_str(),
                    "is not a part of a chat request: expected json, then messages[i].files[j]",
                ));
            }
        }
        part_index += 1;
    }
    let Some(json) = json else {
        return Err(invalid(
            "json",
            "is required: the request itself, as an application/json part named json",
        ));
    };
    parse_with_files(&json, endpoint, limits, files).map_err(|e| match e {
        // A fault of the request as a whole is the json part's; a field's path names it already.
        ChatError::Invalid(mut e) if e.path.is_empty() => {
            e.path = "json".into();
            ChatError::Invalid(e)
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_are_json_or_a_files_index() {
        assert_eq!(part_name("json"), Some(PartName::Json));
        assert_eq!(
            part_name("messages[2].files[10]"),
            Some(PartName::File {
                message: 2,
                file: 10
            })
        );
        for bad in [
            "JSON",
            "messages[].files[0]",
            "messages[-1].files[0]",
            "messages[1].files[0]x",
            "messages[01x].files[0]",
            "messages[1].file[0]",
            "messages[99999999].files[0]",
            "",
        ] {
            assert_eq!(part_name(bad), None, "{bad}");
        }
    }
}
