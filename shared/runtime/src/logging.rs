//! Log lines CloudWatch can query: one JSON object per line with the Lambda request id at the top level.
//!
//! Lambda's advanced logging controls set `AWS_LAMBDA_LOG_FORMAT` (`JSON` or `Text`) and `AWS_LAMBDA_LOG_LEVEL`;
//! the template asks for JSON. The runtime opens a span carrying `requestId` and `xrayTraceId` around each
//! invocation, and the edge a `request` span with the same ids (new ones as a plain server: [`crate::traces`]); the
//! formatter lifts those onto every line written inside them, spawned stream writers included (they run inside
//! the request's span), with the trace header's `Root` as `xrayTraceId`. A span's close is one line too: its name
//! (`span`), its fields and `duration_ms`, from its creation to its end. Nothing here logs message text: turns log
//! sizes, token counts and latencies only, and spans hold ids, counts and outcomes. A field named `trace_only.…`
//! (what a client sent, for the exported trace) is on no line, in either format ([`crate::trace_only`]).
//!
//! Other crates are held at INFO whatever the level asked, because below it they write what passes through them:
//! the Lambda runtime the whole raw event (headers with the `Authorization` token and cookies, the body with the
//! conversation), lambda_http the request, the AWS SDKs each request and response (the prompt sent to Bedrock, the
//! session token in the signed headers), hyper, h2 and rustls the bytes on the wire. Only this workspace's crates,
//! which log no text of a conversation and no credential at any level, go lower. The same filter decides which spans
//! reach an OpenTelemetry collector, when one is configured ([`crate::traces`]).

use std::fmt;
use std::time::Instant;

use chat_core::rfc3339_millis;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets, filter_fn};
use tracing_subscriber::fmt::format::{FmtSpan, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use crate::trace_only::{LogJsonFields, LogTextFields, Omitting};

/// Span fields lifted onto every line.
const LIFTED: [&str; 2] = ["requestId", "xrayTraceId"];

/// The crates of this workspace (as targets name them): the only ones whose lines below INFO are written.
const OUR_CRATES: &[&str] = &[
    "chat",
    "chat_stream",
    "history",
    "chat_core",
    "chat_protocol",
    "chat_aws",
    "chat_edge",
    "chat_runtime",
    "chat_app",
    "chat_testing",
    "local_run",
    "api_keys",
    "load_documents",
    "local_bedrock",
    "local_dynamodb",
    "local_knowledge_base",
    "local_serve",
    "chat_mcp",
    "local_mcp",
    "bench",
];

/// Crates whose INFO lines may hold what a conversation holds (rmcp logs an MCP server's notifications, and its
/// URL, at INFO): only their warnings and errors are written.
const QUIET_CRATES: &[&str] = &["rmcp"];

/// Whether a line (or span) may be written whatever its level: ours may; another crate's only at INFO or above
/// (see the module's doc for why). Matched on the target's crate, so no directive of `RUST_LOG` lifts it.
fn may_write(metadata: &Metadata<'_>) -> bool {
    let krate = metadata.target().split("::").next().unwrap_or_default();
    if QUIET_CRATES.contains(&krate) {
        return *metadata.level() <= Level::WARN;
    }
    *metadata.level() <= Level::INFO || OUR_CRATES.contains(&krate)
}

/// Whether a span (or an event inside one) goes to the collector: what may be written, but for the runtime's
/// `worker` span, which with `AWS_LAMBDA_MAX_CONCURRENCY` above 1 holds every invocation its worker polls and would
/// make them all one trace that never ends.
fn may_export(metadata: &Metadata<'_>) -> bool {
    may_write(metadata)
        && !(metadata.is_span()
            && metadata.name() == "worker"
            && metadata.target().starts_with("lambda_runtime"))
}

/// Installs the process's logger: JSON lines when `AWS_LAMBDA_LOG_FORMAT` is `JSON`, plain text otherwise; the
/// level from `AWS_LAMBDA_LOG_LEVEL`, else `RUST_LOG`, else INFO, other crates never below INFO. When a collector is
/// configured, spans are exported too, through the client `http_client` gives (the process's one client, which the
/// composition root builds; not called when no collector is configured).
pub fn init_logging(http_client: impl FnOnce() -> reqwest::Client) {
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok();
    let filter = asked_filter(level.as_deref());
    let layer = log_layer(json, std::io::stdout);
    // Nothing of OpenTelemetry is built unless a collector is configured.
    let (tracer, trace_setup) = match crate::traces::exporting_tracer(http_client) {
        Ok(tracer) => (tracer, None),
        Err(e) => (None, Some(e)),
    };
    let export = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(filter_fn(may_export))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(SpanNotes)
        // After the level asked, every line passes `may_write` (decided once per call site).
        .with(layer.with_filter(filter_fn(may_write)))
        .with(export)
        .init();
    if let Some(e) = trace_setup {
        tracing::warn!(error = %e, "spans are not exported");
    }
    tracing::trace!(
        "logging at TRACE for this workspace's crates; other crates' lines at INFO and above only, as theirs \
         below hold requests, events and credentials"
    );
}

/// The layer that writes the lines, to `writer`: JSON ([`LambdaJson`]) or text, a span's close a line of its own,
/// no `trace_only.…` field on any line ([`crate::trace_only`]).
fn log_layer<S, W>(json: bool, writer: W) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_span_events(FmtSpan::CLOSE);
    if json {
        layer
            .fmt_fields(LogJsonFields)
            .event_format(LambdaJson)
            .boxed()
    } else {
        // No time on the line (Lambda, or the terminal, adds its own), but the layer keeps its span timings: its
        // own `without_time` would drop the `time.busy`/`time.idle` of a span's close line too.
        layer
            .fmt_fields(LogTextFields)
            .event_format(
                tracing_subscriber::fmt::format()
                    .without_time()
                    .with_target(false),
            )
            .boxed()
    }
}

/// The level asked: a level name (Lambda's, `FATAL` included), or `RUST_LOG`'s directives (`level,target=level,…`;
/// a directive that does not parse is left out). tracing-subscriber's `Targets`, not its `EnvFilter`: the same
/// directives but for span and field filters, without a regular expression engine in every bootstrap.
fn asked_filter(level: Option<&str>) -> Targets {
    let mut targets = Targets::new().with_default(lambda_level(level));
    let Some(directives) = level.filter(|l| l.contains('=')) else {
        return targets;
    };
    for directive in directives.split(',').map(str::trim) {
        match directive.split_once('=') {
            Some((target, level)) => {
                if let Ok(level) = level.trim().parse::<LevelFilter>() {
                    targets = targets.with_target(target.trim(), level);
                }
            }
            None => {
                if let Ok(level) = directive.parse::<LevelFilter>() {
                    targets = targets.with_default(level);
                }
            }
        }
    }
    targets
}

/// Lambda's level names (`FATAL` included) as a filter; anything else is INFO.
fn lambda_level(level: Option<&str>) -> LevelFilter {
    match level.map(|l| l.trim().to_ascii_uppercase()).as_deref() {
        Some("TRACE") => LevelFilter::TRACE,
        Some("DEBUG") => LevelFilter::DEBUG,
        Some("WARN") => LevelFilter::WARN,
        Some("ERROR") | Some("FATAL") => LevelFilter::ERROR,
        _ => LevelFilter::INFO,
    }
}

/// `{"timestamp","level","requestId","message",…fields,"target"}` on one line.
struct LambdaJson;

impl<S> FormatEvent<S, LogJsonFields> for LambdaJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, LogJsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            rfc3339_millis(OffsetDateTime::now_utc()).into(),
        );
        line.insert("level".into(), event.metadata().level().as_str().into());
        // tracing-subscriber writes a span's close as an event with the span's own metadata, inside the span.
        let closing = event.metadata().is_span();
        let mut closed = None;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                // The ids as noted when they were recorded ([`SpanNotes`]): a line does not parse its spans' fields
                // back from their JSON, several lines a request, several spans a line.
                if let Some(ids) = extensions.get::<LiftedIds>() {
                    for (key, value) in &ids.0 {
                        line.insert((*key).into(), value.clone());
                    }
                }
                if closing && event.parent() == Some(&span.id()) {
                    let Some(fields) = extensions.get::<FormattedFields<LogJsonFields>>() else {
                        continue;
                    };
                    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(fields) {
                        let duration = extensions.get::<Started>().map(|s| s.0.elapsed());
                        closed = Some((map, duration));
                    }
                }
            }
        }
        match closed {
            Some((fields, duration)) => {
                line.insert("message".into(), "close".into());
                line.insert("span".into(), event.metadata().name().into());
                for (key, value) in fields {
                    if !LIFTED.contains(&key.as_str()) {
                        line.insert(key, value);
                    }
                }
                if let Some(duration) = duration {
                    // Milliseconds with microseconds: a store call to a local server takes less than one.
                    let ms = (duration.as_secs_f64() * 1_000_000.0).round() / 1000.0;
                    line.insert("duration_ms".into(), ms.into());
                }
            }
            None => event.record(&mut Omitting(Fields(&mut line))),
        }
        line.insert("target".into(), event.metadata().target().into());
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// A lifted field as the line shows it: the trace header's `Root` for `xrayTraceId` (the runtime records Lambda's
/// whole header), every other value as it is.
fn lifted(key: &str, value: &Value) -> Value {
    match (key, value.as_str()) {
        ("xrayTraceId", Some(header)) => {
            crate::traces::xray_root(header).map_or_else(|| value.clone(), |root| root.into())
        }
        _ => value.clone(),
    }
}

/// When a span was created, for its close line's `duration_ms`.
struct Started(Instant);

/// The [`LIFTED`] fields a span holds, as a line shows them ([`lifted`]), noted once when they are recorded.
#[derive(Default)]
struct LiftedIds(Vec<(&'static str, Value)>);

impl LiftedIds {
    fn note(&mut self, field: &Field, value: Value) {
        let Some(key) = LIFTED.iter().find(|key| **key == field.name()) else {
            return;
        };
        let value = lifted(key, &value);
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = value,
            None => self.0.push((key, value)),
        }
    }
}

/// As [`Fields`] and tracing-subscriber's `JsonFields` record a value, for the lifted fields only.
impl Visit for LiftedIds {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.note(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.note(field, value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.note(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.note(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.note(field, value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if LIFTED.contains(&field.name()) {
            self.note(field, format!("{value:?}").into());
        }
    }
}

/// Notes each span's creation ([`Started`]) and the ids its lines carry ([`LiftedIds`]).
struct SpanNotes;

impl<S> Layer<S> for SpanNotes
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut ids = LiftedIds::default();
            attrs.record(&mut ids);
            let mut extensions = span.extensions_mut();
            extensions.insert(Started(Instant::now()));
            if !ids.0.is_empty() {
                extensions.insert(ids);
            }
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut extensions = span.extensions_mut();
            match extensions.get_mut::<LiftedIds>() {
                Some(ids) => values.record(ids),
                None => {
                    let mut ids = LiftedIds::default();
                    values.record(&mut ids);
                    if !ids.0.is_empty() {
                        extensions.insert(ids);
                    }
                }
            }
        }
    }
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The JSON lines written while `write` runs, under the notes layer and the JSON lines as init_logging
    /// composes them (the formatter reads the ids from the notes), with `span_events` as its span lines: the text,
    /// and each line parsed.
    fn json_lines(span_events: FmtSpan, write: impl FnOnce()) -> (String, Vec<Value>) {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::registry().with(SpanNotes).with(
            tracing_subscriber::fmt::layer()
                .with_span_events(span_events)
                .fmt_fields(LogJsonFields)
                .event_format(LambdaJson)
                .with_writer(move || writer.clone()),
        );
        tracing::subscriber::with_default(subscriber, write);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let parsed = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (text, parsed)
    }

    #[test]
    fn every_line_inside_an_invocation_carries_its_request_id() {
        let (text, parsed) = json_lines(FmtSpan::NONE, || {
            tracing::info!("before any request");
            let span = tracing::info_span!("Lambda runtime invoke", requestId = "req-1");
            let _inside = span.enter();
            let inner = tracing::info_span!("turn", chat = "abc");
            let _inner = inner.enter();
            tracing::info!(
                input_tokens = 12u64,
                latency_ms = 340u64,
                stop = ?"EndTurn",
                "model answered"
            );
        });
        assert_eq!(parsed.len(), 2, "{text}");
        assert!(parsed[0].get("requestId").is_none());
        let line = &parsed[1];
        assert_eq!(line["requestId"], "req-1");
        assert_eq!(line["message"], "model answered");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["input_tokens"], 12);
        assert_eq!(line["latency_ms"], 340);
        assert_eq!(line["stop"], "\"EndTurn\"");
        assert!(line["timestamp"].as_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn an_id_recorded_after_its_span_began_is_on_the_lines_written_after() {
        let (text, parsed) = json_lines(FmtSpan::NONE, || {
            let span = tracing::info_span!(
                "request",
                requestId = "outer",
                xrayTraceId = tracing::field::Empty
            );
            let _inside = span.enter();
            tracing::info!("before");
            span.record("requestId", "req-2");
            span.record(
                "xrayTraceId",
                "Root=1-6740a000-0123456789abcdef01234567;Sampled=1",
            );
            tracing::info!("after");
        });
        assert_eq!(parsed.len(), 2, "{text}");
        assert_eq!(parsed[0]["requestId"], "outer");
        assert!(parsed[0].get("xrayTraceId").is_none(), "{text}");
        assert_eq!(parsed[1]["requestId"], "req-2");
        assert_eq!(
            parsed[1]["xrayTraceId"],
            "1-6740a000-0123456789abcdef01234567"
        );
    }

    #[test]
    fn a_span_closes_in_one_line_with_its_fields_and_duration() {
        let (text, parsed) = json_lines(FmtSpan::CLOSE, || {
            // As the runtime records it: Lambda's whole trace header.
            let invocation = tracing::info_span!(
                "Lambda runtime invoke",
                requestId = "req-1",
                xrayTraceId =
                    "Root=1-6740a000-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1"
            );
            let _inside = invocation.enter();
            let call = tracing::info_span!(
                "model.converse",
                model_id = "m1",
                outcome = tracing::field::Empty
            );
            {
                let _call = call.enter();
                std::thread::sleep(std::time::Duration::from_millis(20));
                tracing::info!("model answered");
            }
            call.record("outcome", "ok");
            drop(call);
        });
        // The line inside, the call's close, the invocation's close.
        assert_eq!(parsed.len(), 3, "{text}");
        for line in &parsed {
            assert_eq!(line["requestId"], "req-1", "{line}");
            assert_eq!(
                line["xrayTraceId"], "1-6740a000-0123456789abcdef01234567",
                "{line}"
            );
        }
        let close = &parsed[1];
        assert_eq!(close["message"], "close");
        assert_eq!(close["span"], "model.converse");
        assert_eq!(close["model_id"], "m1");
        assert_eq!(close["outcome"], "ok");
        assert_eq!(close["level"], "INFO");
        let duration = close["duration_ms"].as_f64().expect("a duration");
        assert!((20.0..5_000.0).contains(&duration), "{close}");
        assert!(close.get("time.busy").is_none(), "{close}");
        assert_eq!(parsed[2]["span"], "Lambda runtime invoke");
        assert!(parsed[2]["duration_ms"].as_f64().unwrap() >= duration);
    }

    /// Writes, in the given format as init_logging composes it, a span with trace-only fields (one given when it
    /// opens, one recorded later), an event inside it with one, and the span's close; returns the text written.
    fn with_trace_only_fields(json: bool) -> String {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::registry()
            .with(SpanNotes)
            .with(log_layer(json, move || writer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let request = tracing::info_span!("request", requestId = "req-9");
            let _request = request.enter();
            let span = tracing::info_span!(
                "chat.completion",
                model = "m1",
                trace_only.user = "USERSECRET",
                trace_only.metadata = tracing::field::Empty,
                outcome = tracing::field::Empty,
            );
            {
                let _inside = span.enter();
                tracing::info!(trace_only.note = "EVENTSECRET", tokens = 3u64, "inside");
            }
            span.record("trace_only.metadata", "METADATASECRET");
            span.record("outcome", "ok");
            // A record of trace-only fields alone adds nothing to the line, not even a separator.
            span.record("trace_only.user", "USERSECRET2");
        });
        String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn no_trace_only_field_is_on_a_json_line() {
        let text = with_trace_only_fields(true);
        for secret in ["USERSECRET", "METADATASECRET", "EVENTSECRET", "trace_only"] {
            assert!(!text.contains(secret), "{secret}: {text}");
        }
        let parsed: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // The event, the completion's close, the request's close: each with the fields that may be logged.
        assert_eq!(parsed.len(), 3, "{text}");
        assert_eq!(parsed[0]["message"], "inside");
        assert_eq!(parsed[0]["tokens"], 3);
        assert_eq!(parsed[1]["span"], "chat.completion");
        assert_eq!(parsed[1]["model"], "m1");
        assert_eq!(parsed[1]["outcome"], "ok");
        for line in &parsed {
            assert_eq!(line["requestId"], "req-9", "{line}");
        }
    }

    #[test]
    fn no_trace_only_field_is_on_a_text_line() {
        let text = with_trace_only_fields(false);
        for secret in ["USERSECRET", "METADATASECRET", "EVENTSECRET", "trace_only"] {
            assert!(!text.contains(secret), "{secret}: {text}");
        }
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // The span's fields as the line's context, before and after a later record.
        assert!(
            lines[0].contains(
                "request{requestId=\"req-9\"}:chat.completion{model=\"m1\"}: inside tokens=3"
            ),
            "{text}"
        );
        assert!(
            lines[1].contains("chat.completion{model=\"m1\" outcome=\"ok\"}: close time.busy="),
            "{text}"
        );
    }

    #[test]
    fn other_crates_write_nothing_below_info_whatever_the_level_asked() {
        let lines = Lines::default();
        let writer = lines.clone();
        // The level a user asks for, wide open (as `RUST_LOG=trace,hyper=trace`), composed as init_logging does.
        let asked = asked_filter(Some("trace,hyper=trace,aws_smithy_runtime=trace"));
        let subscriber = tracing_subscriber::registry().with(asked).with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || writer.clone())
                .with_filter(filter_fn(may_write)),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "lambda_runtime::layers::api_response", body = "SECRET", "raw event");
            tracing::debug!(target: "aws_smithy_runtime::client::orchestrator", "SECRET request");
            tracing::trace!(target: "hyper", "SECRET bytes");
            tracing::debug!(target: "h2::codec", "SECRET frame");
            // A crate whose name begins like one of ours is not ours.
            tracing::debug!(target: "chat_corex::x", "SECRET lookalike");
            tracing::info!(target: "aws_config::x", "an info line of another crate");
            tracing::warn!(target: "hyper::proto", "a warning of another crate");
            tracing::trace!(target: "chat_core::turn", "a trace line of ours");
            tracing::debug!("a debug line of this crate");
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
        for written in [
            "an info line of another crate",
            "a warning of another crate",
            "a trace line of ours",
            "a debug line of this crate",
        ] {
            assert!(text.contains(written), "{written}: {text}");
        }
    }

    #[test]
    fn every_crate_of_the_workspace_is_ours() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let workspace = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
        let members = workspace
            .split("members = [")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .expect("the workspace lists its members");
        let mut seen = 0;
        for member in members.split(',').map(|m| m.trim().trim_matches('"')) {
            if member.is_empty() {
                continue;
            }
            let manifest = std::fs::read_to_string(format!("{root}/{member}/Cargo.toml")).unwrap();
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = "))
                .map(|n| n.trim().trim_matches('"').replace('-', "_"))
                .expect("a package has a name");
            assert!(OUR_CRATES.contains(&name.as_str()), "{name} is missing");
            seen += 1;
        }
        assert!(seen >= 10, "{members}");
    }

    #[test]
    fn lambda_level_names_are_understood() {
        assert_eq!(lambda_level(Some("FATAL")), LevelFilter::ERROR);
        assert_eq!(lambda_level(Some("debug")), LevelFilter::DEBUG);
        assert_eq!(lambda_level(None), LevelFilter::INFO);
    }

    #[test]
    fn the_directives_asked_set_the_default_and_each_target() {
        use tracing::Level;
        let asked = asked_filter(Some("warn,chat_core=trace, hyper = debug,nonsense=loud,=x"));
        assert!(asked.would_enable("chat_core::turn", &Level::TRACE));
        assert!(asked.would_enable("hyper::proto", &Level::DEBUG));
        assert!(!asked.would_enable("hyper::proto", &Level::TRACE));
        assert!(asked.would_enable("other", &Level::WARN));
        assert!(!asked.would_enable("other", &Level::INFO));
        // A plain level is Lambda's name for it.
        assert!(asked_filter(Some("FATAL")).would_enable("x", &Level::ERROR));
        assert!(!asked_filter(Some("FATAL")).would_enable("x", &Level::WARN));
        assert!(asked_filter(None).would_enable("x", &Level::INFO));
        assert!(!asked_filter(None).would_enable("x", &Level::DEBUG));
    }
}
