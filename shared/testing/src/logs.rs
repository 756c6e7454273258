//! What a test's log subscriber writes, kept to be read back.

use std::sync::{Arc, Mutex};

/// A writer for a `tracing_subscriber` (`.with_writer(move || lines.clone())`) whose clones all write to one
/// buffer, read back whole by [`LogLines::text`].
#[derive(Clone, Default)]
pub struct LogLines(Arc<Mutex<Vec<u8>>>);

impl LogLines {
    /// All that was written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).expect("log lines are UTF-8")
    }
}

impl std::io::Write for LogLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
