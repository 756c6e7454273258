//! A configuration error found before a function's service is built (the tokio runtime's own switches, read before
//! logging is set up), kept here for [`crate::start`] to report like any other.

use std::sync::Mutex;

use chat_edge::ConfigError;

/// The error kept (see [`defer`]).
static DEFERRED: Mutex<Option<ConfigError>> = Mutex::new(None);

/// Keeps a configuration error found before [`crate::start`] runs, for it to report (the first one kept wins).
pub(crate) fn defer(error: ConfigError) {
    let mut deferred = DEFERRED.lock().unwrap_or_else(|e| e.into_inner());
    deferred.get_or_insert(error);
}

/// The error kept, taken (once).
pub(crate) fn take() -> Option<ConfigError> {
    DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).take()
}
