//! Log lines CloudWatch can query: one JSON object per line with the Lambda request id at the top level.
//!
//! Lambda's advanced logging controls set `AWS_LAMBDA_LOG_FORMAT` (`JSON` or `Text`) and `AWS_LAMBDA_LOG_LEVEL`;
//! the template asks for JSON. The runtime opens a span carrying `requestId` (and `xrayTraceId`) around each
//! invocation; the formatter lifts those onto every line written inside it, spawned stream writers included
//! (they run inside the request's span). Nothing here logs message text: turns log sizes, token counts and
//! latencies only.

use std::fmt;

use chat_core::rfc3339_millis;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Span fields lifted onto every line.
const LIFTED: [&str; 2] = ["requestId", "xrayTraceId"];

/// Installs the process's logger: JSON lines when `AWS_LAMBDA_LOG_FORMAT` is `JSON`, plain text otherwise; the
/// level from `AWS_LAMBDA_LOG_LEVEL`, else `RUST_LOG`, else INFO.
pub fn init_logging() {
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok();
    let filter = EnvFilter::builder()
        .with_default_directive(lambda_level(level.as_deref()).into())
        .parse_lossy(level.filter(|l| l.contains('=')).unwrap_or_default());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout);
    if json {
        builder
            .fmt_fields(JsonFields::new())
            .event_format(LambdaJson)
            .init();
    } else {
        builder.with_target(false).without_time().init();
    }
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

impl<S> FormatEvent<S, JsonFields> for LambdaJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            rfc3339_millis(OffsetDateTime::now_utc()).into(),
        );
        line.insert("level".into(), event.metadata().level().as_str().into());
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<JsonFields>>() else {
                    continue;
                };
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(fields) {
                    for key in LIFTED {
                        if let Some(v) = map.get(key) {
                            line.insert(key.into(), v.clone());
                        }
                    }
                }
            }
        }
        event.record(&mut Fields(&mut line));
        line.insert("target".into(), event.metadata().target().into());
        writeln!(writer, "{}", Value::Object(line))
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
    use tracing_subscriber::layer::SubscriberExt;

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

    #[test]
    fn every_line_inside_an_invocation_carries_its_request_id() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(JsonFields::new())
                .event_format(LambdaJson)
                .with_writer(move || writer.clone()),
        );
        tracing::subscriber::with_default(subscriber, || {
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
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let parsed: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
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
    fn lambda_level_names_are_understood() {
        assert_eq!(lambda_level(Some("FATAL")), LevelFilter::ERROR);
        assert_eq!(lambda_level(Some("debug")), LevelFilter::DEBUG);
        assert_eq!(lambda_level(None), LevelFilter::INFO);
    }
}
