//! Span fields for the exported trace only, never a log line: a field named `trace_only.…` holds what a client sent
//! (the `user`, `safety_identifier` and `metadata` of an OpenAI-compatible request), which the trace of its turn
//! should carry but the log may not (no log line holds a body's text, at any level).
//!
//! The one place that decides it: the log layer's field formatters ([`LogTextFields`] for text lines,
//! [`LogJsonFields`] for JSON lines, and the JSON event formatter through [`Omitting`]) skip every field whose name
//! begins with [`TRACE_ONLY`], on spans (their close lines, and the span context of a text line) and events alike;
//! the OpenTelemetry layer ([`crate::traces`]) reads the fields itself and exports them as the span's attributes,
//! under the same names. Opening such a span: `tracing::info_span!("x", trace_only.user = user)`.

use std::collections::BTreeMap;
use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::Record;
use tracing_subscriber::field::{RecordFields, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::FormattedFields;
use tracing_subscriber::fmt::format::{DefaultVisitor, FormatFields, JsonVisitor, Writer};

/// The prefix of a field's name that keeps it out of every log line.
pub const TRACE_ONLY: &str = "trace_only.";

/// Whether `field` is for the exported trace only.
pub(crate) fn is_trace_only(field: &Field) -> bool {
    field.name().starts_with(TRACE_ONLY)
}

/// A visitor that passes every field but the trace-only ones to the visitor it wraps.
pub(crate) struct Omitting<V>(pub(crate) V);

/// `Visit`'s methods, each passing its field on unless it is trace-only. (A macro: a visitor has one method a type
/// of value, each to be passed on to the same method of the visitor wrapped, as the type it came as.)
macro_rules! passing_on {
    ($($method:ident: $value:ty),* $(,)?) => {
        $(
            fn $method(&mut self, field: &Field, value: $value) {
                if !is_trace_only(field) {
                    self.0.$method(field, value);
                }
            }
        )*
    };
}

impl<V: Visit> Visit for Omitting<V> {
    passing_on!(
        record_f64: f64,
        record_i64: i64,
        record_u64: u64,
        record_i128: i128,
        record_u128: u128,
        record_bool: bool,
        record_str: &str,
        record_bytes: &[u8],
        record_error: &(dyn std::error::Error + 'static),
        record_debug: &dyn fmt::Debug,
    );
}

impl<V: VisitOutput<fmt::Result>> Omitting<V> {
    /// `fields`, but the trace-only ones, written by the visitor wrapped.
    fn record(mut self, fields: impl RecordFields) -> fmt::Result {
        fields.record(&mut self);
        self.finish()
    }
}

impl<V: VisitOutput<fmt::Result>> VisitOutput<fmt::Result> for Omitting<V> {
    fn finish(self) -> fmt::Result {
        self.0.finish()
    }
}

impl<V: VisitFmt> VisitFmt for Omitting<V> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        self.0.writer()
    }
}

/// Text lines' fields: tracing-subscriber's default (`name=value …`), less the trace-only ones.
#[derive(Debug, Default)]
pub(crate) struct LogTextFields;

impl<'writer> FormatFields<'writer> for LogTextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        Omitting(DefaultVisitor::new(writer, true)).record(fields)
    }

    /// As the default does (the new fields after a space), but no space when every new field is trace-only.
    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &Record<'_>,
    ) -> fmt::Result {
        let empty = current.fields.is_empty();
        Omitting(DefaultVisitor::new(current.as_writer(), empty)).record(fields)
    }
}

/// JSON lines' span fields: tracing-subscriber's `JsonFields` (one JSON object, a field recorded later merged into
/// it), less the trace-only ones.
#[derive(Debug, Default)]
pub(crate) struct LogJsonFields;

impl<'writer> FormatFields<'writer> for LogJsonFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        Omitting(JsonVisitor::new(&mut writer)).record(fields)
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &Record<'_>,
    ) -> fmt::Result {
        let mut added = String::new();
        self.format_fields(Writer::new(&mut added), fields)?;
        if current.fields.is_empty() {
            current.fields = added;
            return Ok(());
        }
        let mut merged: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&current.fields).map_err(|_| fmt::Error)?;
        let added: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&added).map_err(|_| fmt::Error)?;
        merged.extend(added);
        current.fields = serde_json::to_string(&merged).map_err(|_| fmt::Error)?;
        Ok(())
    }
}
