//! A turn's traces, from the built `chat` binary with the real backends: every line written while it is handled
//! carries `requestId` and `xrayTraceId`; each model, knowledge-base and store call closes in a line with its
//! `duration_ms`; and with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the same spans reach a collector (a stand-in here,
//! decoding what it receives with the OTLP protobuf types) as one trace per request: under Lambda before the
//! runtime asks for the next event, as a plain server when it stops. Nothing of OpenTelemetry runs without the
//! variable.

#[path = "support/binary.rs"]
mod binary;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use binary::{
    Backends, COOKIE_VALUE, Function, LAMBDA_REQUEST_ID, LAMBDA_TRACE_ROOT, SECRET_WORD,
    SESSION_TOKEN, UnderLambda, backends, first_turn, plain_server, second_turn, url_event,
};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::Value;

/// The batch processor's own timer, set beyond any test's length: spans that arrive were flushed.
const NO_TIMER: (&str, &str) = ("OTEL_BSP_SCHEDULE_DELAY", "600000");

/// The name the SDK's batch processor gives its thread, as the kernel keeps it (15 bytes).
const EXPORT_THREAD: &str = "OpenTelemetry.T";

/// What the collector received: each request's content type and body.
type Bodies = Arc<Mutex<Vec<(String, Bytes)>>>;

/// A stand-in OTLP/HTTP collector: takes `POST /v1/traces` and keeps each body.
struct Collector {
    endpoint: String,
    bodies: Bodies,
    server: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start() -> Self {
        let bodies: Bodies = Arc::default();
        let app = Router::new()
            .route(
                "/v1/traces",
                post(
                    |State(bodies): State<Bodies>, headers: HeaderMap, body: Bytes| async move {
                        let content_type = headers
                            .get("content-type")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        bodies.lock().unwrap().push((content_type, body));
                        // An empty ExportTraceServiceResponse: everything accepted.
                        (
                            StatusCode::OK,
                            [("content-type", "application/x-protobuf")],
                            Bytes::new(),
                        )
                    },
                ),
            )
            .with_state(bodies.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            endpoint,
            bodies,
            server,
        }
    }

    /// Every span received so far, with its service's name.
    fn spans(&self) -> Vec<(String, Span)> {
        let mut spans = Vec::new();
        for (content_type, body) in self.bodies.lock().unwrap().iter() {
            assert_eq!(content_type, "application/x-protobuf");
            let request = ExportTraceServiceRequest::decode(body.as_ref())
                .expect("an OTLP protobuf export request");
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .as_ref()
                    .and_then(|r| string_attribute(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for scope in resource.scope_spans {
                    spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
                }
            }
        }
        spans
    }

    /// Waits (at most `limit`) until a span named `name` has arrived.
    async fn wait_for(&self, name: &str, limit: Duration) -> Vec<(String, Span)> {
        let started = std::time::Instant::now();
        loop {
            let spans = self.spans();
            if spans.iter().any(|(_, s)| s.name == name) || started.elapsed() > limit {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every byte received, for the scan for secrets.
    fn raw(&self) -> Vec<u8> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|(_, b)| b.to_vec())
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn string_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|value| match value {
            AnyValue::StringValue(s) => s.clone(),
            other => format!("{other:?}"),
        })
}

/// The spans grouped by trace id.
fn traces(spans: &[(String, Span)]) -> BTreeMap<Vec<u8>, Vec<&Span>> {
    let mut traces: BTreeMap<Vec<u8>, Vec<&Span>> = BTreeMap::new();
    for (_, span) in spans {
        traces.entry(span.trace_id.clone()).or_default().push(span);
    }
    traces
}

/// A trace's one root span (none of its spans is its parent).
fn only_root<'a>(trace: &[&'a Span]) -> &'a Span {
    let roots: Vec<&Span> = trace
        .iter()
        .copied()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "{trace:#?}");
    roots[0]
}

fn names<'a>(spans: &[&'a Span]) -> BTreeSet<&'a str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

/// Each log line as JSON. A turn's metrics record (CloudWatch EMF, its `_aws` block) is a record of its own, not a
/// log line: it is left out.
fn parsed(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .filter(|l: &Value| l.get("_aws").is_none())
        .collect()
}

/// The lines written while requests were handled: from the first line carrying a request id to the last.
fn request_lines(lines: &[Value]) -> &[Value] {
    let first = lines.iter().position(|l| l.get("requestId").is_some());
    let last = lines.iter().rposition(|l| l.get("requestId").is_some());
    match (first, last) {
        (Some(first), Some(last)) => &lines[first..=last],
        _ => &[],
    }
}

/// The close lines of spans named `name` (or, ending in `.`, named with that prefix).
fn closes<'a>(lines: &'a [Value], name: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["message"] == "close")
        .filter(|l| {
            let span = l["span"].as_str().unwrap_or_default();
            if name.ends_with('.') {
                span.starts_with(name)
            } else {
                span == name
            }
        })
        .collect()
}

/// Whether `id` is an X-Ray trace id (`1-{8 hex}-{24 hex}`).
fn is_xray_trace_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 3 && parts[0] == "1" && hex(parts[1], 8) && hex(parts[2], 24)
}

#[tokio::test]
async fn under_lambda_every_line_of_a_turn_carries_its_ids_and_each_call_closes_with_its_duration()
{
    let backends = backends().await;
    let token = backends.token();
    let mut lambda =
        UnderLambda::start(url_event(&first_turn(), &token), &backends.env, "INFO").await;
    assert_eq!(lambda.answer().await["statusCode"], 200);
    // No collector configured: no exporter, no processor thread.
    let threads = lambda.function.threads();
    assert!(!threads.is_empty());
    assert!(
        !threads.iter().any(|t| t.starts_with(EXPORT_THREAD)),
        "{threads:?}"
    );
    let lines = parsed(&lambda.stop().await);

    let during = request_lines(&lines);
    assert!(during.len() >= 8, "{lines:#?}");
    for line in during {
        assert_eq!(line["requestId"], LAMBDA_REQUEST_ID, "{line}");
        // The Root of Lambda's trace header, not the whole header the runtime records.
        assert_eq!(line["xrayTraceId"], LAMBDA_TRACE_ROOT, "{line}");
    }
    // The adapters' own lines are among them.
    assert!(
        during.iter().any(|l| l["message"] == "model answered"),
        "{during:#?}"
    );

    // One close line per call, each with its duration; the model call's with the model and its outcome.
    for name in [
        "model.converse",
        "kb.retrieve",
        "store.",
        "request",
        "Lambda runtime invoke",
    ] {
        let closed = closes(during, name);
        assert!(!closed.is_empty(), "no {name} span closed: {during:#?}");
        for line in closed {
            let duration = line["duration_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("no duration: {line}"));
            assert!((0.0..120_000.0).contains(&duration), "{line}");
            assert_eq!(line["level"], "INFO", "{line}");
        }
    }
    for line in closes(during, "model.converse") {
        assert_eq!(
            line["model_id"],
            chat_testing::harness::ECHO_MODEL,
            "{line}"
        );
        assert_eq!(line["outcome"], "ok", "{line}");
        assert!(line["output_tokens"].as_u64().unwrap() > 0, "{line}");
    }
    let kb = closes(during, "kb.retrieve");
    assert!(kb[0]["passages"].as_u64().unwrap() > 0, "{}", kb[0]);
    // The request's span closes after the calls inside it, the invocation's last.
    let request = closes(during, "request")[0]["duration_ms"]
        .as_f64()
        .unwrap();
    let model = closes(during, "model.converse")[0]["duration_ms"]
        .as_f64()
        .unwrap();
    assert!(request >= model, "request {request} ms, model {model} ms");
    assert_eq!(
        during.last().unwrap()["span"],
        "Lambda runtime invoke",
        "{during:#?}"
    );
}

/// The backends, a collector, and the function's environment exporting its spans to that collector with the batch
/// processor's timer held off (so that only a flush sends them).
async fn traced_without_timer() -> (Backends, Collector, Vec<(String, String)>) {
    let backends = backends().await;
    let collector = Collector::start().await;
    let mut env = backends.env.clone();
    env.push((
        "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
        collector.endpoint.clone(),
    ));
    env.push((NO_TIMER.0.to_string(), NO_TIMER.1.to_string()));
    (backends, collector, env)
}

#[tokio::test]
async fn under_lambda_a_turns_spans_reach_the_collector_before_the_next_event() {
    let (backends, collector, env) = traced_without_timer().await;
    let token = backends.token();
    let mut lambda = UnderLambda::start(url_event(&first_turn(), &token), &env, "TRACE").await;
    assert_eq!(lambda.answer().await["statusCode"], 200);
    // The function now waits for its next event (which never comes), as a frozen Lambda environment would: the
    // spans must have been sent by then, not by the processor's timer.
    let spans = collector
        .wait_for("Lambda runtime invoke", Duration::from_secs(15))
        .await;
    let threads = lambda.function.threads();
    assert!(
        threads.iter().any(|t| t.starts_with(EXPORT_THREAD)),
        "{threads:?}"
    );
    let lines = lambda.stop().await;

    let traces = traces(&spans);
    assert_eq!(
        traces.len(),
        1,
        "one trace for the one invocation: {spans:#?}"
    );
    let trace: Vec<&Span> = traces.into_values().next().unwrap();
    let names = names(&trace);
    for name in [
        "Lambda runtime invoke",
        "request",
        "model.converse",
        "kb.retrieve",
    ] {
        assert!(names.contains(name), "no {name}: {names:?}");
    }
    assert!(
        names.iter().any(|n| n.starts_with("store.")),
        "no store call: {names:?}"
    );
    // One root, the runtime's invocation span, with Lambda's ids; every other span has its parent in the trace.
    let root = only_root(&trace);
    assert_eq!(root.name, "Lambda runtime invoke");
    assert_eq!(
        string_attribute(&root.attributes, "requestId").as_deref(),
        Some(LAMBDA_REQUEST_ID)
    );
    let ids: BTreeSet<&Vec<u8>> = trace.iter().map(|s| &s.span_id).collect();
    for span in &trace {
        assert!(
            span.parent_span_id.is_empty() || ids.contains(&span.parent_span_id),
            "{} has no parent in the trace",
            span.name
        );
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    }
    let model = trace.iter().find(|s| s.name == "model.converse").unwrap();
    assert_eq!(
        string_attribute(&model.attributes, "model_id").as_deref(),
        Some(chat_testing::harness::ECHO_MODEL)
    );
    // The service is the function.
    assert!(
        spans.iter().all(|(service, _)| service == "chat"),
        "{spans:#?}"
    );

    // What the collector received holds no word of the conversation nor any credential, at TRACE as well.
    let raw = collector.raw();
    let mut secrets = vec![SECRET_WORD, COOKIE_VALUE, SESSION_TOKEN];
    secrets.extend(token.split('.').skip(1));
    for secret in secrets {
        assert!(
            !raw.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{secret} reached the collector"
        );
        assert!(
            !lines.iter().any(|l| l.contains(secret)),
            "{secret} in the logs"
        );
    }
}

#[tokio::test]
async fn a_plain_server_gives_each_request_its_ids_and_exports_its_trace_when_it_stops() {
    let backends = backends().await;
    let collector = Collector::start().await;
    let mut env = backends.env.clone();
    env.retain(|(k, _)| k != "RUST_LOG");
    env.extend(
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.clone()),
            (NO_TIMER.0, NO_TIMER.1.to_string()),
            ("AWS_LAMBDA_LOG_FORMAT", "JSON".to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    let (function, base): (Function, String) = plain_server(&env).await;
    let token = backends.token();
    let client = reqwest::Client::new();
    // A client that traces its calls with X-Ray names its trace; the lines of its request take that Root.
    let client_root = "1-5759e988-bd862e3fe1be46a994272793";
    let first = client
        .post(format!("{base}/chat"))
        .bearer_auth(&token)
        .header(
            "x-amzn-trace-id",
            format!("Root={client_root};Parent=53995c3f42cd8ad8;Sampled=1"),
        )
        .json(&first_turn())
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.unwrap();
    // A trace header that is no X-Ray id is not taken (nor written anywhere).
    let second = client
        .post(format!("{base}/chat"))
        .bearer_auth(&token)
        .header("x-amzn-trace-id", format!("Root={SECRET_WORD}"))
        .json(&second_turn(&first["sessionState"]))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    // Nothing reaches the collector while the server runs (its timer is off), all of it once it stops.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(collector.spans().is_empty());
    let lines = parsed(&function.stop().await);

    // Every line of a request carries its ids; each answered turn has its own.
    let during = request_lines(&lines);
    for line in during {
        let request_id = line["requestId"]
            .as_str()
            .unwrap_or_else(|| panic!("{line}"));
        assert_eq!(request_id.len(), 36, "{line}");
        let trace_id = line["xrayTraceId"].as_str().unwrap_or_default();
        assert!(is_xray_trace_id(trace_id), "{line}");
    }
    let answered: Vec<&Value> = during
        .iter()
        .filter(|l| l["message"] == "request answered" && l["method"] == "POST")
        .collect();
    assert_eq!(answered.len(), 2, "{during:#?}");
    assert_eq!(answered[0]["xrayTraceId"], client_root);
    assert_ne!(answered[1]["xrayTraceId"], client_root);
    assert_ne!(answered[0]["requestId"], answered[1]["requestId"]);
    let text: String = lines.iter().map(|l| l.to_string()).collect();
    assert!(!text.contains(SECRET_WORD));

    // Each request is a trace of its own, rooted at its request span, which names the X-Ray trace.
    let spans = collector.spans();
    let turns: Vec<Vec<&Span>> = traces(&spans)
        .into_values()
        .filter(|trace| names(trace).contains("model.converse"))
        .collect();
    assert_eq!(turns.len(), 2, "{spans:#?}");
    let mut roots = Vec::new();
    for trace in &turns {
        let names = names(trace);
        assert!(names.iter().any(|n| n.starts_with("store.")), "{names:?}");
        let root = only_root(trace);
        assert_eq!(root.name, "request");
        roots.push(string_attribute(&root.attributes, "xrayTraceId").unwrap());
    }
    assert!(roots.contains(&client_root.to_string()), "{roots:?}");
    assert!(roots.iter().all(|r| is_xray_trace_id(r)), "{roots:?}");
    let raw = collector.raw();
    assert!(
        !raw.windows(SECRET_WORD.len())
            .any(|w| w == SECRET_WORD.as_bytes())
    );
}

/// What an OpenAI client sends of its own beside a conversation, each a string nothing else holds: the completion's
/// `user`, `safety_identifier` and a `metadata` value, and the embeddings' `user`. The exported trace carries them;
/// no log line may (they are the body's text).
const END_USER: &str = "enduserquagga81";
const SAFETY_ID: &str = "safetyokapi62";
const TICKET: &str = "ticketnarwhal93";
const EMBEDDINGS_USER: &str = "embedspangolin47";
/// A model no deployment serves, as a client may name it: refused, and its name on no line either.
const UNKNOWN_MODEL: &str = "modelwombat55";

fn completion_body() -> Value {
    serde_json::json!({
        "model": chat_testing::harness::ECHO_MODEL,
        "messages": [{"role": "user", "content": "Hello"}],
        "user": END_USER,
        "safety_identifier": SAFETY_ID,
        "metadata": {"ticket": TICKET}
    })
}

/// No line written holds a string the client sent of its own, and the lines were written at TRACE (`trace_marker`),
/// so that the scan read everything the function can write.
fn assert_no_client_label(lines: &[String], trace_marker: &str) {
    let all = lines.join("\n");
    assert!(lines.iter().any(|l| l.contains(trace_marker)), "{all}");
    for label in [END_USER, SAFETY_ID, TICKET, EMBEDDINGS_USER, UNKNOWN_MODEL] {
        let found: Vec<&String> = lines.iter().filter(|l| l.contains(label)).collect();
        assert!(found.is_empty(), "{label} is logged: {found:#?}");
    }
}

/// The exported spans named `name` (at least one).
fn exported<'a>(spans: &'a [(String, Span)], name: &str) -> Vec<&'a Span> {
    let named: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == name)
        .collect();
    assert!(!named.is_empty(), "no {name}: {spans:#?}");
    named
}

/// The completions' spans, as exported: each with the client's labels under their trace-only names; and the model
/// of each (none where the client named one the deployment does not serve).
fn completions_exported(spans: &[(String, Span)]) -> Vec<Option<String>> {
    let mut models = Vec::new();
    for span in exported(spans, "chat.completion") {
        let attribute = |key| string_attribute(&span.attributes, key);
        assert_eq!(attribute("trace_only.user").as_deref(), Some(END_USER));
        assert_eq!(
            attribute("trace_only.safety_identifier").as_deref(),
            Some(SAFETY_ID)
        );
        let metadata: Value =
            serde_json::from_str(&attribute("trace_only.metadata").unwrap()).unwrap();
        assert_eq!(metadata, serde_json::json!({"ticket": TICKET}));
        models.push(attribute("model"));
    }
    models.sort();
    models
}

#[tokio::test]
async fn under_lambda_an_openai_clients_user_and_metadata_reach_the_trace_and_no_log_line() {
    let (backends, collector, env) = traced_without_timer().await;
    let token = backends.token();
    let mut event = url_event(&completion_body(), &token);
    event["rawPath"] = "/v1/chat/completions".into();
    event["requestContext"]["http"]["path"] = "/v1/chat/completions".into();
    let mut lambda = UnderLambda::start(event, &env, "TRACE").await;
    let answer = lambda.answer().await;
    assert_eq!(answer["statusCode"], 200, "{answer}");
    let spans = collector
        .wait_for("Lambda runtime invoke", Duration::from_secs(15))
        .await;
    let raw_lines = lambda.stop().await;

    assert_no_client_label(&raw_lines, "\"level\":\"TRACE\"");
    // The completion's span closed in a line of its own, with the fields that may be logged, the model's call inside
    // it.
    let lines = parsed(&raw_lines);
    let during = request_lines(&lines);
    let closed = closes(during, "chat.completion");
    assert_eq!(closed.len(), 1, "{during:#?}");
    let span = closed[0];
    assert_eq!(span["model"], chat_testing::harness::ECHO_MODEL, "{span}");
    assert_eq!(span["stream"], false, "{span}");
    for key in ["user", "safety_identifier", "metadata", "trace_only.user"] {
        assert!(span.get(key).is_none(), "{key}: {span}");
    }
    assert!(
        during
            .iter()
            .any(|l| l["span"] == "model.converse" && l["message"] == "close"),
        "{during:#?}"
    );
    let echo = Some(chat_testing::harness::ECHO_MODEL.to_string());
    assert_eq!(completions_exported(&spans), [echo]);
    let completion = exported(&spans, "chat.completion")[0];
    let model = exported(&spans, "model.converse");
    assert_eq!(model.len(), 1);
    assert_eq!(model[0].parent_span_id, completion.span_id);
}

/// As a plain server, its lines JSON (`json`) or text: a completion and an embeddings request, each with the client's
/// labels; none is on a line, each is on its route's exported span.
async fn a_plain_servers_client_labels_reach_only_the_trace(json: bool) {
    let backends = backends().await;
    let collector = Collector::start().await;
    let mut env = backends.env.clone();
    env.extend(
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.clone()),
            (NO_TIMER.0, NO_TIMER.1.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    if json {
        env.push(("AWS_LAMBDA_LOG_FORMAT".to_string(), "JSON".to_string()));
    }
    let (function, base) = plain_server(&env).await;
    let token = backends.token();
    let client = reqwest::Client::new();
    let completion = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(&token)
        .json(&completion_body())
        .send()
        .await
        .unwrap();
    assert_eq!(completion.status(), 200);
    let embeddings = client
        .post(format!("{base}/v1/embeddings"))
        .bearer_auth(&token)
        .json(&serde_json::json!({
            "model": "amazon.titan-embed-text-v2:0",
            "input": "Hello",
            "user": EMBEDDINGS_USER
        }))
        .send()
        .await
        .unwrap();
    let status = embeddings.status();
    assert_eq!(status, 200, "{}", embeddings.text().await.unwrap());
    // A model the deployment does not serve is a 404 that names it to the client, and to no log line.
    let mut unknown = completion_body();
    unknown["model"] = UNKNOWN_MODEL.into();
    for (path, body) in [
        ("/v1/chat/completions", unknown),
        (
            "/v1/embeddings",
            serde_json::json!({"model": UNKNOWN_MODEL, "input": "Hello", "user": EMBEDDINGS_USER}),
        ),
    ] {
        let refused = client
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 404, "{path}");
        let answer = refused.text().await.unwrap();
        assert!(answer.contains(UNKNOWN_MODEL), "{path}: {answer}");
    }
    let lines = function.stop().await;

    let marker = if json { "\"level\":\"TRACE\"" } else { "TRACE" };
    assert_no_client_label(&lines, marker);
    // Each route's span closed in a line of its own (its fields were written, and scanned).
    for name in ["chat.completion", "embeddings"] {
        let closed = lines.iter().any(|l| {
            if json {
                l.contains(&format!("\"span\":\"{name}\"")) && l.contains("\"message\":\"close\"")
            } else {
                // The span last in the line's context: `…:name{fields}: close time.busy=…` or `…:name: close …`
                // (its fields hold no `}`).
                l.split(&format!(":{name}")).nth(1).is_some_and(|rest| {
                    let rest = match rest.strip_prefix('{') {
                        Some(fields) => fields.split_once('}').map_or("", |(_, after)| after),
                        None => rest,
                    };
                    rest.starts_with(": close time.busy=")
                })
            }
        });
        assert!(closed, "no {name} span closed:\n{}", lines.join("\n"));
    }
    let spans = collector.spans();
    let echo = Some(chat_testing::harness::ECHO_MODEL.to_string());
    assert_eq!(completions_exported(&spans), [None, echo]);
    let embeddings = exported(&spans, "embeddings");
    assert_eq!(embeddings.len(), 2, "{embeddings:#?}");
    for span in embeddings {
        assert_eq!(
            string_attribute(&span.attributes, "trace_only.user").as_deref(),
            Some(EMBEDDINGS_USER)
        );
    }
}

#[tokio::test]
async fn a_plain_server_writes_no_client_label_on_a_json_line() {
    a_plain_servers_client_labels_reach_only_the_trace(true).await;
}

#[tokio::test]
async fn a_plain_server_writes_no_client_label_on_a_text_line() {
    a_plain_servers_client_labels_reach_only_the_trace(false).await;
}
