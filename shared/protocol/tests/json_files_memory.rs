//! The memory a JSON body's files take to parse stays a small multiple of the body: a byte array's JSON costs two
//! to twelve bytes of body per byte, and would cost dozens of bytes more per byte held as JSON values, so a request
//! as large as `MAX_UPLOAD_BYTES` could take hundreds of megabytes. Its own test binary, since it counts every
//! allocation of the process (one test, so that no other test allocates meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use chat_core::{ChatError, RequestLimits};
use chat_protocol::{Endpoint, parse_chat_request};

/// The system allocator, counting the bytes held now and the most held since the last [`Counting::reset`].
struct Counting {
    held: AtomicUsize,
    peak: AtomicUsize,
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        self.held.fetch_sub(layout.size(), Ordering::SeqCst);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // While it moves, both blocks may be held: count the new one before the old one goes.
            self.grew(new_size);
            self.held.fetch_sub(layout.size(), Ordering::SeqCst);
        }
        new
    }
}

impl Counting {
    fn grew(&self, size: usize) {
        let held = self.held.fetch_add(size, Ordering::SeqCst) + size;
        self.peak.fetch_max(held, Ordering::SeqCst);
    }

    /// Starts a measure: the most held from now on, above what is held now.
    fn reset(&self) -> usize {
        let held = self.held.load(Ordering::SeqCst);
        self.peak.store(held, Ordering::SeqCst);
        held
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting {
    held: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
};

/// A PNG's signature and header start: what the sniffing looks at.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

/// About 4 MB of body, under the default `MAX_UPLOAD_BYTES` (4.5 MB).
const BODY_BYTES: usize = 4_000_000;

/// A request whose one file's `data` is `data` (the JSON text of its bytes).
fn body_with(data: &str) -> String {
    format!(
        r#"{{"messages": [{{"role": "user", "content": "What is this?", "files": [{{"data": {data}, "contentType": "image/png", "filename": "shot.png"}}]}}]}}"#
    )
}

/// A PNG header, then zeros up to about `BODY_BYTES` of JSON, written by `entry(index, byte)`; the bytes written.
fn byte_json(open: &str, close: &str, entry: impl Fn(&mut String, usize, u8)) -> (String, usize) {
    let mut json = String::from(open);
    let mut count = 0;
    while json.len() < BODY_BYTES {
        if count > 0 {
            json.push(',');
        }
        entry(&mut json, count, PNG.get(count).copied().unwrap_or(0));
        count += 1;
    }
    json.push_str(close);
    (json, count)
}

/// What parsing `body` holds at most above what was held before, and the one file's size.
fn peak_of(body: &str) -> (usize, Result<u64, ChatError>) {
    let limits = RequestLimits::default();
    let before = ALLOCATOR.reset();
    let parsed = parse_chat_request(body.as_bytes(), Endpoint::Protocol, &limits);
    let peak = ALLOCATOR.peak() - before;
    let size = parsed.map(|input| {
        let files: Vec<_> = input.turn.messages[0].files().collect();
        assert_eq!(files.len(), 1);
        files[0].size
    });
    (peak, size)
}

#[test]
fn a_byte_array_takes_at_most_a_few_times_the_body_to_parse() {
    let (plain, plain_bytes) = byte_json("[", "]", |json, _, byte| {
        write!(json, "{byte}").unwrap();
    });
    // What JSON.stringify makes of a Uint8Array: every index, in order.
    let (object, object_bytes) = byte_json("{", "}", |json, index, byte| {
        write!(json, "\"{index}\":{byte}").unwrap();
    });
    let (buffer, buffer_bytes) =
        byte_json(r#"{"type":"Buffer","data":["#, "]}", |json, _, byte| {
            write!(json, "{byte}").unwrap();
        });
    // The same object with its last two indexes swapped: read another way than JSON.stringify's order, still taken.
    let swapped = {
        let last = object_bytes - 1;
        object.replace(
            &format!(",\"{}\":0,\"{last}\":0}}", last - 1),
            &format!(",\"{last}\":0,\"{}\":0}}", last - 1),
        )
    };
    assert_ne!(swapped, object);
    // One index missing: refused, and still within bounds while finding out which.
    let gap = object.replacen("\"7\":", "\"x\":", 1);
    for (name, data, bytes) in [
        ("a plain array", &plain, Some(plain_bytes)),
        ("a Uint8Array's JSON", &object, Some(object_bytes)),
        ("a Buffer's JSON", &buffer, Some(buffer_bytes)),
        (
            "a Uint8Array's JSON out of order",
            &swapped,
            Some(object_bytes),
        ),
        ("a Uint8Array's JSON with a gap", &gap, None),
    ] {
        let body = body_with(data);
        let (peak, size) = peak_of(&body);
        match (bytes, size) {
            (Some(bytes), Ok(size)) => assert_eq!(size, bytes as u64, "{name}"),
            (None, Err(ChatError::Invalid(e))) => assert!(
                e.to_string()
                    .starts_with("messages[0].files[0].data: expected base64 text or a byte array"),
                "{name}: {e}"
            ),
            (_, other) => panic!("{name}: {other:?}"),
        }
        eprintln!(
            "{name}: a body of {} bytes took at most {peak} bytes to parse ({:.1} times the body)",
            body.len(),
            peak as f64 / body.len() as f64
        );
        assert!(
            peak < 4 * body.len(),
            "{name}: a body of {} bytes took {peak} bytes to parse",
            body.len()
        );
    }
}
