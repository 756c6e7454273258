//! A message's files however they come (multipart parts, or `files` inside the JSON body as older protocol clients
//! send them), held to one set of checks, so that no way of sending a file is dropped or checked less.
//!
//! In JSON a file is `{data, contentType, filename?}`; `data` is base64 text, or the JSON form of a byte array: what
//! `JSON.stringify` makes of a `Uint8Array` (`{"0":137,"1":80,…}`) or of a Node `Buffer`
//! (`{"type":"Buffer","data":[137,80,…]}`), or a plain array of numbers.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use bytes::Bytes;
use chat_core::{Attachment, ChatError, InvalidRequest, RequestLimits, identify};
use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

use crate::Endpoint;
use crate::error::{not_an_object, not_json, utf8};

/// The longest file name taken (what file systems allow); it is stored and shown with the message.
const MAX_FILE_NAME_CHARS: usize = 255;

/// What a JSON file is, for the errors that refuse another shape.
const SHAPE: &str = "a file is {\"data\": base64 text or a byte array, \"contentType\": \"image/png\", \"filename\"?: \"shot.png\"}";

fn invalid(path: impl Into<String>, reason: impl Into<String>) -> ChatError {
    InvalidRequest::new(path, reason).into()
}

/// One file of a message, at `path` (`messages[i].files[j]`), as sent: refused (naming `path`) when its name is too
/// long, its kind is not taken or its bytes contradict what it declares, it is larger than its kind may be (a 413),
/// or it is empty. Its name is `name` when given and not blank, else `path`.
pub(crate) fn take(
    path: &str,
    name: Option<String>,
    declared: Option<&str>,
    bytes: Bytes,
    limits: &RequestLimits,
) -> Result<Attachment, ChatError> {
    let name = name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| path.to_string());
    if name.chars().count() > MAX_FILE_NAME_CHARS {
        return Err(invalid(
            path,
            format!("the file name is longer than {MAX_FILE_NAME_CHARS} characters"),
        ));
    }
    let kind = identify(&name, declared, &bytes).map_err(|reason| invalid(path, reason))?;
    limits
        .files
        .check_size(path, kind, bytes.len() as u64)
        .map_err(ChatError::from)?;
    if bytes.is_empty() {
        return Err(invalid(path, "the file is empty"));
    }
    Ok(Attachment::new(name, kind, bytes))
}

/// The files of a request's messages, by message index: each message's files in order.
pub(crate) type Files = std::collections::BTreeMap<usize, Vec<Attachment>>;

/// Each message's `files` in a JSON request body, by message index, as their JSON text: decoded only once the
/// request's shape is known (see [`split_json`]), and never held as JSON values.
pub(crate) type SentFiles<'a> = Vec<(usize, &'a RawValue)>;

/// A JSON request body as a JSON object without its messages' `files` (so nothing else reads them as an unknown
/// field), and those files as sent. A file's bytes written as a JSON array take two to twelve bytes of body a byte,
/// and several dozen held as JSON values: a body as large as `MAX_UPLOAD_BYTES` would take hundreds of megabytes.
/// Refused as [`crate::request`] refuses a body that is not a JSON object.
pub(crate) fn split_json(body: &[u8]) -> Result<(Value, SentFiles<'_>), InvalidRequest> {
    utf8(body)?;
    // First the whole body as a JSON value is parsed (its syntax, its numbers, its depth), holding nothing: the
    // files' text is then taken as it stands, and what takes it checks less.
    let Skip(object) = serde_json::from_slice(body).map_err(not_json)?;
    if !object {
        return Err(not_an_object());
    }
    match At(Place::Body).deserialize(&mut serde_json::Deserializer::from_slice(body)) {
        Ok(Read::WithFiles(value, sent)) => Ok((value, sent)),
        Ok(_) => Err(not_an_object()),
        Err(e) => Err(not_json(e)),
    }
}

/// Takes each message's files, as [`take`] takes a part. `null` or `[]` is no files. Any other shape is a 400
/// naming the field; on `/chat-ui/chat`, which takes no files, any file is. Before any file is decoded, their
/// number: a request with more files than it may carry of both kinds is refused without reading them.
pub(crate) fn from_json(
    sent: SentFiles<'_>,
    endpoint: Endpoint,
    limits: &RequestLimits,
) -> Result<Files, ChatError> {
    let mut files = Files::new();
    let counts = sent
        .iter()
        .map(|&(_, list)| elements(list))
        .collect::<Result<Vec<_>, _>>()?;
    let most = limits
        .files
        .max_images
        .saturating_add(limits.files.max_documents);
    let count: usize = counts.iter().flatten().sum();
    if endpoint == Endpoint::Protocol && count > most {
        return Err(invalid(
            "messages",
            format!(
                "carry {count} files, more than the limit of {} images and {} documents per request",
                limits.files.max_images, limits.files.max_documents
            ),
        ));
    }
    for ((i, list), count) in sent.into_iter().zip(counts) {
        let path = format!("messages[{i}].files");
        match (kind_of(list), count) {
            ("null", _) | (_, Some(0)) => continue,
            (_, Some(_)) => {}
            (kind, None) => {
                return Err(invalid(
                    path,
                    format!("expected an array of files, not {kind}; {SHAPE}"),
                ));
            }
        }
        if endpoint != Endpoint::Protocol {
            return Err(invalid(
                path,
                "this route takes no files; send them to /chat or /chat/stream",
            ));
        }
        let list: Vec<&RawValue> = serde_json::from_str(list.get()).map_err(not_json)?;
        let taken = list
            .into_iter()
            .enumerate()
            .map(|(j, file)| one(&format!("{path}[{j}]"), file, limits))
            .collect::<Result<Vec<_>, _>>()?;
        files.insert(i, taken);
    }
    Ok(files)
}

/// How many elements an array has (`None` when it is no array), read without holding them.
fn elements(text: &RawValue) -> Result<Option<usize>, InvalidRequest> {
    struct Count;
    impl<'de> Visitor<'de> for Count {
        type Value = Option<usize>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut count = 0;
            while seq.next_element::<IgnoredAny>()?.is_some() {
                count += 1;
            }
            Ok(Some(count))
        }
    }
    if kind_of(text) != "an array" {
        return Ok(None);
    }
    serde_json::Deserializer::from_str(text.get())
        .deserialize_seq(Count)
        .map_err(not_json)
}

/// One JSON file at `path`.
fn one(path: &str, file: &RawValue, limits: &RequestLimits) -> Result<Attachment, ChatError> {
    if kind_of(file) != "an object" {
        return Err(invalid(
            path,
            format!("expected a file, not {}; {SHAPE}", kind_of(file)),
        ));
    }
    let fields = FileFields::of(file)?;
    let declared = match fields.content_type.map(|t| (kind_of(t), t)) {
        Some(("a string", t)) => Some(text(t)?).filter(|t| !t.trim().is_empty()),
        None | Some(("null", _)) => None,
        Some((kind, _)) => {
            return Err(invalid(
                format!("{path}.contentType"),
                format!("expected a media type such as image/png, not {kind}"),
            ));
        }
    };
    let Some(declared) = declared else {
        return Err(invalid(
            format!("{path}.contentType"),
            "is required: the file's media type, such as image/png or application/pdf",
        ));
    };
    let name = match fields.filename.map(|name| (kind_of(name), name)) {
        None | Some(("null", _)) => None,
        Some(("a string", name)) => Some(text(name)?),
        Some((kind, _)) => {
            return Err(invalid(
                format!("{path}.filename"),
                format!("expected a string, not {kind}"),
            ));
        }
    };
    // A file's other fields would be dropped: say so rather than keep a name or a size that means nothing here.
    if let Some(field) = fields.other {
        return Err(invalid(
            // The name is the client's text: quoted, so the log line of the refusal leaves it out.
            format!("{path}[{field:?}]"),
            format!("is not a field of a file; {SHAPE}"),
        ));
    }
    let bytes = bytes_of(&format!("{path}.data"), fields.data)?;
    take(path, name, Some(&declared), Bytes::from(bytes), limits)
}

/// A JSON file's fields as their text (each one's last, as a JSON value keeps a repeated key's last value), and
/// the first other field it has: nothing of it is held as a JSON value.
struct FileFields<'a> {
    content_type: Option<&'a RawValue>,
    filename: Option<&'a RawValue>,
    data: Option<&'a RawValue>,
    other: Option<Cow<'a, str>>,
}

impl<'a> FileFields<'a> {
    fn of(file: &'a RawValue) -> Result<Self, InvalidRequest> {
        let mut fields = FileFields {
            content_type: None,
            filename: None,
            data: None,
            other: None,
        };
        each_entry(file, |key, value| {
            match key.as_ref() {
                "contentType" => fields.content_type = Some(value),
                "filename" => fields.filename = Some(value),
                "data" => fields.data = Some(value),
                _ => {
                    fields.other.get_or_insert(key);
                }
            }
            Ok(())
        })?;
        Ok(fields)
    }
}

/// A JSON string's text.
fn text(string: &RawValue) -> Result<String, InvalidRequest> {
    serde_json::from_str(string.get()).map_err(not_json)
}

/// A file's `data`, at `path`, decoded from its JSON text.
fn bytes_of(path: &str, data: Option<&RawValue>) -> Result<Vec<u8>, ChatError> {
    match data.map(|data| (kind_of(data), data)) {
        None | Some(("null", _)) => Err(invalid(
            path,
            "is required: the file's bytes, as base64 text or a byte array (a file listed by the history is not \
             read back from its url: send earlier messages without their files, and their files are read from the \
             chat)",
        )),
        Some(("a string", text)) => {
            let text = serde_json::from_str::<Text>(text.get()).map_err(not_json)?;
            base64(path, &text.0)
        }
        Some(("an array", items)) => byte_array(path, items),
        Some(("an object", map)) => byte_object(path, map),
        Some((kind, _)) => Err(invalid(
            path,
            format!("expected base64 text or a byte array, not {kind}"),
        )),
    }
}

/// Base64 as encoders write it: the standard or the URL-safe alphabet, padded or not, in lines or not.
pub(crate) fn base64(path: &str, text: &str) -> Result<Vec<u8>, ChatError> {
    if text.starts_with("data:") {
        return Err(invalid(
            path,
            "is a data: URL; send only its base64 text (after the comma), and its media type as contentType",
        ));
    }
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    let compact: String;
    let text = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        compact = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        &compact
    } else {
        text
    };
    let engine = if text.contains(['-', '_']) {
        URL_SAFE
    } else {
        STANDARD
    };
    engine
        .decode(text)
        .map_err(|e| invalid(path, format!("is not base64: {e}")))
}

/// A byte array's JSON text (`[137, 80, …]`), one byte at a time: an element is refused at `path[k]`.
fn byte_array(path: &str, items: &RawValue) -> Result<Vec<u8>, ChatError> {
    struct ByteSeq<'p>(&'p str);
    impl<'de> Visitor<'de> for ByteSeq<'_> {
        type Value = Result<Vec<u8>, ChatError>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of bytes")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut bytes = Vec::new();
            while let Some(item) = seq.next_element::<Item>()? {
                let Some(byte) = item.byte() else {
                    // The rest is read (and dropped) for the array to end where its text does.
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(Err(item.refused(&format!("{}[{}]", self.0, bytes.len()))));
                };
                bytes.push(byte);
            }
            Ok(Ok(bytes))
        }
    }
    serde_json::Deserializer::from_str(items.get())
        .deserialize_seq(ByteSeq(path))
        .map_err(not_json)?
}

/// One element of a byte array as sent: a number (a byte when it is an integer from 0 to 255), or the kind of
/// anything else, read without holding it.
enum Item {
    Number(Number),
    Other(&'static str),
}

impl Item {
    fn byte(&self) -> Option<u8> {
        match self {
            Item::Number(n) => n.as_u64().and_then(|n| u8::try_from(n).ok()),
            Item::Other(_) => None,
        }
    }

    /// Why this element at `path` is no byte: a number is shown as it is, anything else by its kind.
    fn refused(&self, path: &str) -> ChatError {
        let shown = match self {
            Item::Number(n) => n.to_string(),
            Item::Other(kind) => kind.to_string(),
        };
        invalid(
            path,
            format!("expected a byte (an integer from 0 to 255), not {shown}"),
        )
    }

    fn of(text: &RawValue) -> Result<Item, serde_json::Error> {
        serde_json::from_str(text.get())
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Kind;
        impl<'de> Visitor<'de> for Kind {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Item, E> {
                Ok(Item::Other("a boolean"))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Item, E> {
                Ok(Item::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Item, E> {
                Ok(Item::Number(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Item, E> {
                // As a JSON value holds it.
                Ok(Number::from_f64(n).map_or(Item::Other("null"), Item::Number))
            }
            fn visit_str<E>(self, _: &str) -> Result<Item, E> {
                Ok(Item::Other("a string"))
            }
            fn visit_unit<E>(self) -> Result<Item, E> {
                Ok(Item::Other("null"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Item::Other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Item::Other("an object"))
            }
        }
        deserializer.deserialize_any(Kind)
    }
}

/// A byte array as an object: a `Uint8Array`'s (`{"0": 137, "1": 80, …}`, every index from 0 once) or a Node
/// `Buffer`'s (`{"type": "Buffer", "data": [137, 80, …]}`). Read as a JSON value's map would read it (a repeated
/// key has its last value, in the place of its first), without holding one: `JSON.stringify`'s order in one pass,
/// anything else in a few more over its text.
fn byte_object(path: &str, map: &RawValue) -> Result<Vec<u8>, ChatError> {
    /// Every index in order, each once, each a byte; `Err` when the object is not that.
    struct InOrder;
    impl<'de> Visitor<'de> for InOrder {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a Uint8Array's JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<u8>, A::Error> {
            let mut bytes = Vec::new();
            let other = || de::Error::custom("not in JSON.stringify's order");
            while let Some(Text(key)) = map.next_key()? {
                if canonical_index(&key) != Some(bytes.len()) {
                    return Err(other());
                }
                bytes.push(map.next_value::<Item>()?.byte().ok_or_else(other)?);
            }
            Ok(bytes)
        }
    }
    match serde_json::Deserializer::from_str(map.get()).deserialize_map(InOrder) {
        Ok(bytes) => Ok(bytes),
        Err(_) => byte_object_in_any_order(path, map),
    }
}

/// [`byte_object`] for an object in another order, or with a repeated key, or another key, or an element that is
/// no byte: what a JSON value's map would hold, found in passes over its text.
fn byte_object_in_any_order(path: &str, map: &RawValue) -> Result<Vec<u8>, ChatError> {
    let mut entries = 0;
    each_entry(map, |_, _| {
        entries += 1;
        Ok(())
    })?;
    // How many keys, each counted once: the indexes below `entries` by a mark each, the others by their text.
    let mut seen = vec![false; entries];
    let (mut indexes, mut others) = (0, Vec::new());
    let (mut kind, mut buffer) = (None, None);
    each_entry(map, |key, value| {
        match canonical_index(&key).filter(|&k| k < entries) {
            Some(k) => indexes += usize::from(!std::mem::replace(&mut seen[k], true)),
            None => {
                match key.as_ref() {
                    "type" => kind = Some(value),
                    "data" => buffer = Some(value),
                    _ => {}
                }
                others.push(key);
            }
        }
        Ok(())
    })?;
    others.sort_unstable();
    others.dedup();
    let len = indexes + others.len();
    let is_buffer = match kind {
        Some(kind) if kind_of(kind) == "a string" => {
            serde_json::from_str::<Text>(kind.get())
                .map_err(not_json)?
                .0
                == "Buffer"
        }
        _ => false,
    };
    if is_buffer && len == 2 {
        return match buffer {
            Some(items) if kind_of(items) == "an array" => {
                byte_array(&format!("{path}.data"), items)
            }
            _ => Err(invalid(
                format!("{path}.data"),
                "expected the Buffer's bytes, an array of numbers",
            )),
        };
    }
    // Each index's last value.
    let mut bytes = vec![0u8; len];
    let mut refused = vec![false; len];
    each_entry(map, |key, value| {
        if let Some(k) = canonical_index(&key).filter(|&k| k < len) {
            match Item::of(value)?.byte() {
                Some(byte) => (bytes[k], refused[k]) = (byte, false),
                None => refused[k] = true,
            }
        }
        Ok(())
    })?;
    // The first key, in the order of first appearance, that is no index below `len` or whose value is no byte.
    seen.fill(false);
    let mut fault = None;
    each_entry(map, |key, _| {
        if fault.is_none() {
            match canonical_index(&key).filter(|&k| k < len) {
                Some(k) if std::mem::replace(&mut seen[k], true) => {}
                Some(k) if refused[k] => fault = Some((key, Some(k))),
                Some(_) => {}
                None => fault = Some((key, None)),
            }
        }
        Ok(())
    })?;
    match fault {
        None => Ok(bytes),
        Some((key, None)) => Err(invalid(
            path,
            format!(
                "expected base64 text or a byte array; as an object, its keys are the indexes 0 to {} (what \
                 JSON.stringify makes of a Uint8Array), not {key:?}",
                len.saturating_sub(1)
            ),
        )),
        Some((key, Some(k))) => {
            let mut last = None;
            each_entry(map, |other, value| {
                if canonical_index(&other) == Some(k) {
                    last = Some(value);
                }
                Ok(())
            })?;
            let last = last.expect("the key was just read");
            Err(Item::of(last)
                .map_err(not_json)?
                .refused(&format!("{path}[\"{key}\"]")))
        }
    }
}

/// Calls `f` with each member of an object's JSON text, in order: its key, and its value's text.
fn each_entry<'a>(
    map: &'a RawValue,
    f: impl FnMut(Cow<'a, str>, &'a RawValue) -> Result<(), serde_json::Error>,
) -> Result<(), InvalidRequest> {
    struct Entries<F>(F);
    impl<'de, F> Visitor<'de> for Entries<F>
    where
        F: FnMut(Cow<'de, str>, &'de RawValue) -> Result<(), serde_json::Error>,
    {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            while let Some(Text(key)) = map.next_key()? {
                let value = map.next_value()?;
                (self.0)(key, value).map_err(de::Error::custom)?;
            }
            Ok(())
        }
    }
    serde_json::Deserializer::from_str(map.get())
        .deserialize_map(Entries(f))
        .map_err(not_json)
}

/// A decimal index as JavaScript writes it: no sign, no leading zero.
fn canonical_index(key: &str) -> Option<usize> {
    let canonical = !key.is_empty()
        && key.len() <= 10
        && key.bytes().all(|b| b.is_ascii_digit())
        && (key == "0" || !key.starts_with('0'));
    canonical.then(|| key.parse().ok()).flatten()
}

/// What kind of JSON value this text is, for an error: its first character says.
fn kind_of(text: &RawValue) -> &'static str {
    match text.get().trim_start().bytes().next() {
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        Some(b'"') => "a string",
        Some(b'[') => "an array",
        Some(b'{') => "an object",
        _ => "a number",
    }
}

/// A JSON string, borrowed from the body unless it has escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Str;
        impl<'de> Visitor<'de> for Str {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(text))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(text.to_string()))
            }
        }
        deserializer.deserialize_str(Str).map(Text)
    }
}

/// A JSON value parsed as [`Value`] parses it (its syntax, numbers and depth), holding nothing; whether it is an
/// object.
struct Skip(bool);

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkipVisitor).map(Skip)
    }
}

struct SkipVisitor;

impl<'de> DeserializeSeed<'de> for SkipVisitor {
    type Value = bool;
    /// A key, read as [`Value`] reads one.
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_key_seed(SkipVisitor)?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(true)
    }
}

/// Where in a body a value is, for what is read differently there.
#[derive(Clone, Copy)]
enum Place {
    /// The body: its `messages` are read as [`Place::Messages`].
    Body,
    /// `messages`: each object in it is read as a [`Place::Message`].
    Messages,
    /// A message: its `files` are kept as their JSON text (the last given, as a JSON value keeps a repeated key's
    /// last value) and taken out as a JSON value's `remove` takes them, so that its other members keep the order
    /// they had when the message was a JSON value and its files were taken out of it.
    Message,
}

/// A value read at a [`Place`].
enum Read<'a> {
    /// Anything that is not what its place reads differently, as a JSON value.
    Value(Value),
    /// The body, or its `messages`, without the messages' `files`, and those files.
    WithFiles(Value, SentFiles<'a>),
    /// A message without its `files`, and those files.
    Message(Map<String, Value>, Option<&'a RawValue>),
}

impl Read<'_> {
    fn into_value(self) -> Value {
        match self {
            Read::Value(value) | Read::WithFiles(value, _) => value,
            Read::Message(members, _) => Value::Object(members),
        }
    }
}

/// The seed that reads a value at a place.
struct At(Place);

impl<'de> DeserializeSeed<'de> for At {
    type Value = Read<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Read<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for At {
    type Value = Read<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Read<'de>, E> {
        Ok(Read::Value(Value::Bool(b)))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Read<'de>, E> {
        Ok(Read::Value(Value::Number(n.into())))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Read<'de>, E> {
        Ok(Read::Value(Value::Number(n.into())))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Read<'de>, E> {
        Ok(Read::Value(
            Number::from_f64(n).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, text: &str) -> Result<Read<'de>, E> {
        Ok(Read::Value(Value::String(text.to_string())))
    }
    fn visit_string<E>(self, text: String) -> Result<Read<'de>, E> {
        Ok(Read::Value(Value::String(text)))
    }
    fn visit_unit<E>(self) -> Result<Read<'de>, E> {
        Ok(Read::Value(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Read<'de>, A::Error> {
        let Place::Messages = self.0 else {
            return Value::deserialize(SeqAccessDeserializer::new(seq)).map(Read::Value);
        };
        let (mut messages, mut sent) = (Vec::new(), SentFiles::new());
        while let Some(message) = seq.next_element_seed(At(Place::Message))? {
            if let Read::Message(_, Some(files)) = &message {
                sent.push((messages.len(), *files));
            }
            messages.push(message.into_value());
        }
        Ok(Read::WithFiles(Value::Array(messages), sent))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read<'de>, A::Error> {
        if let Place::Messages = self.0 {
            return Value::deserialize(MapAccessDeserializer::new(map)).map(Read::Value);
        }
        let (mut members, mut files, mut sent) = (Map::new(), None, SentFiles::new());
        while let Some(key) = map.next_key::<String>()? {
            let value = match self.0 {
                // As in a JSON value's map, a repeated key's last value is the one read.
                Place::Body if key == "messages" => {
                    match map.next_value_seed(At(Place::Messages))? {
                        Read::WithFiles(messages, files) => {
                            sent = files;
                            messages
                        }
                        other => {
                            sent = SentFiles::new();
                            other.into_value()
                        }
                    }
                }
                Place::Message if key == "files" => {
                    files = Some(map.next_value()?);
                    Value::Null
                }
                _ => map.next_value()?,
            };
            members.insert(key, value);
        }
        Ok(match self.0 {
            Place::Body => Read::WithFiles(Value::Object(members), sent),
            _ => {
                members.remove("files");
                Read::Message(members, files)
            }
        })
    }
}

/// How much of a JSON body is not its messages' files (each non-empty `files` array's text left out), read without
/// holding anything: a body may pass the JSON limit by its files only, so that nothing else in it (a long
/// `context`, a number array elsewhere) is parsed into values at the upload limit's size. A body that does not read
/// as a chat request counts whole.
pub fn text_outside_files(body: &[u8]) -> usize {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(deserialize_with = "files_text")]
        messages: usize,
    }
    #[derive(Deserialize)]
    struct ProbeMessage<'a> {
        #[serde(borrow, default)]
        files: Option<&'a RawValue>,
    }
    /// The length of the messages' non-empty `files` arrays' text, one message at a time.
    fn files_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
        struct Sum;
        impl<'de> Visitor<'de> for Sum {
            type Value = usize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of messages")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
                let mut sum = 0;
                while let Some(message) = seq.next_element::<ProbeMessage<'de>>()? {
                    let Some(files) = message.files else { continue };
                    let non_empty = serde_json::from_str::<Vec<IgnoredAny>>(files.get())
                        .is_ok_and(|f| !f.is_empty());
                    if non_empty {
                        sum += files.get().len();
                    }
                }
                Ok(sum)
            }
        }
        deserializer.deserialize_seq(Sum)
    }
    let files = serde_json::from_slice::<Probe>(body).map_or(0, |probe| probe.messages);
    body.len().saturating_sub(files)
}
