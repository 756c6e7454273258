//! One CloudWatch Embedded Metric Format record per turn, written to standard output with the log lines, so that
//! CloudWatch turns each into metrics with no agent and no API call: tokens, cost, latency, time to first token,
//! model and tool calls, errors and throttles by class; dimensions `function`, `route` and `model`, never a user.
//! The measures the template's alarms read ([`BY_KIND`]) are in a second record too, under the one dimension
//! `kind` ([`kind_of`]): an alarm reads those two kinds' metrics and so sees every route and model, the routes to
//! come with them, where one reading (function, route, model) metrics by name would see only the ones it names.
//!
//! The `metrics` crate records and `metrics_cloudwatch_embedded` writes the record. Every value is a histogram's,
//! so a record holds only what its turn recorded, and `Errors` and `Throttles` are 0 or 1 in every record: their
//! average is the error (throttle) rate, their sample count the number of turns. The names are the template's
//! alarms' and dashboard's (docs/operations.md lists them).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use chat_core::{ChatError, ModelError, SearchError, StoreError, TurnSpent};
use metrics::Unit;
use metrics_cloudwatch_embedded::Collector;

use chat_edge::ApiError;

/// The collector, once metrics are on (a function's cold start, or the local run, calls [`init_metrics`]).
static COLLECTOR: OnceLock<Option<&'static Collector>> = OnceLock::new();

/// Every metric of a record, with its unit.
const METRICS: &[(&str, Option<Unit>)] = &[
    ("Turns", Some(Unit::Count)),
    ("InputTokens", Some(Unit::Count)),
    ("OutputTokens", Some(Unit::Count)),
    ("CacheReadInputTokens", Some(Unit::Count)),
    ("CacheWriteInputTokens", Some(Unit::Count)),
    ("CostUSD", None),
    ("Latency", Some(Unit::Milliseconds)),
    ("TimeToFirstToken", Some(Unit::Milliseconds)),
    ("ModelRounds", Some(Unit::Count)),
    ("ToolCalls", Some(Unit::Count)),
    ("Errors", Some(Unit::Count)),
    ("Throttles", Some(Unit::Count)),
    ("ErrorsModel", Some(Unit::Count)),
    ("ErrorsStore", Some(Unit::Count)),
    ("ErrorsTimeout", Some(Unit::Count)),
    ("ErrorsInternal", Some(Unit::Count)),
    ("ClientErrors", Some(Unit::Count)),
    ("ThrottlesQuota", Some(Unit::Count)),
    ("ThrottlesRate", Some(Unit::Count)),
    ("ThrottlesModel", Some(Unit::Count)),
];

/// The metrics a turn also records under the dimension `kind` alone: the alarms' (turns, 5xx, 429s, latency, cost).
pub const BY_KIND: &[&str] = &["Turns", "Errors", "Throttles", "Latency", "CostUSD"];

/// The routes of multi-agent rounds: each is several model calls, one after another.
const MULTI_AGENT_ROUTES: &str = "/multi-agent-chat";

/// The `kind` of a turn on `route`: `agents` for a multi-agent round (its latency several answers'), `answer` for
/// every other route (one answer: the protocol's, the Chat UI's, the OpenAI-compatible and embedding routes, and
/// any added later).
pub fn kind_of(route: &str) -> &'static str {
    if route.starts_with(MULTI_AGENT_ROUTES) {
        "agents"
    } else {
        "answer"
    }
}

/// Turns per-turn metrics on for this process, in `namespace`: once; later calls change nothing. A process that
/// never calls it (a test) records nothing.
pub fn init_metrics(namespace: &str) {
    COLLECTOR.get_or_init(|| {
        match metrics_cloudwatch_embedded::Builder::new()
            .cloudwatch_namespace(namespace.to_string())
            .init()
        {
            Ok(collector) => {
                for (name, unit) in METRICS {
                    match unit {
                        Some(unit) => metrics::describe_histogram!(*name, *unit, ""),
                        None => metrics::describe_histogram!(*name, ""),
                    }
                }
                Some(collector)
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics are off: another recorder is installed");
                None
            }
        }
    });
}

/// Which class a failed turn falls in, as its metric names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    Model,
    Store,
    Timeout,
    Internal,
    Client,
    Quota,
    Rate,
    ModelThrottled,
}

impl FailureClass {
    /// The class of the answer `error` gets.
    pub fn of(error: &ApiError) -> Self {
        match error {
            ApiError::Chat(ChatError::OverLimit(over)) if over.is_rate() => FailureClass::Rate,
            ApiError::Chat(ChatError::OverLimit(_)) => FailureClass::Quota,
            ApiError::Chat(ChatError::Model(ModelError::Throttled))
            | ApiError::Chat(ChatError::Search(SearchError::Throttled)) => {
                FailureClass::ModelThrottled
            }
            ApiError::Chat(ChatError::Model(ModelError::Timeout(_)))
            | ApiError::Chat(ChatError::Search(SearchError::Timeout(_))) => FailureClass::Timeout,
            ApiError::Chat(ChatError::Store(
                StoreError::Unavailable(_) | StoreError::Failed(_),
            ))
            | ApiError::Chat(ChatError::Files(_)) => FailureClass::Store,
            ApiError::Chat(ChatError::Model(_) | ChatError::Search(_))
                if error.status().is_server_error() =>
            {
                FailureClass::Model
            }
            e if e.status().is_server_error() => FailureClass::Internal,
            _ => FailureClass::Client,
        }
    }

    fn metric(self) -> &'static str {
        match self {
            FailureClass::Model => "ErrorsModel",
            FailureClass::Store => "ErrorsStore",
            FailureClass::Timeout => "ErrorsTimeout",
            FailureClass::Internal => "ErrorsInternal",
            FailureClass::Client => "ClientErrors",
            FailureClass::Quota => "ThrottlesQuota",
            FailureClass::Rate => "ThrottlesRate",
            FailureClass::ModelThrottled => "ThrottlesModel",
        }
    }

    fn is_error(self) -> bool {
        matches!(
            self,
            FailureClass::Model
                | FailureClass::Store
                | FailureClass::Timeout
                | FailureClass::Internal
        )
    }

    fn is_throttle(self) -> bool {
        matches!(
            self,
            FailureClass::Quota | FailureClass::Rate | FailureClass::ModelThrottled
        )
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy)]
pub enum TurnOutcome<'a> {
    /// Answered whole; what every model call of it spent.
    Answered(&'a TurnSpent),
    /// Failed with this class (before or during its answer); what it spent when known.
    Failed(FailureClass, Option<&'a TurnSpent>),
    /// The client went away before the end: neither an error of ours nor an answer.
    Abandoned,
}

/// One turn's measures, from the moment its request arrived; [`TurnMeter::finish`] writes its record.
#[derive(Debug)]
pub struct TurnMeter {
    function: &'static str,
    route: &'static str,
    model: String,
    started: Instant,
    first_token: Option<Duration>,
}

impl TurnMeter {
    pub fn start(function: &'static str, route: &'static str, model: &str) -> Self {
        Self::start_at(function, route, model, Instant::now())
    }

    /// A meter counting from `started`: when the request reached its handler ([`chat_edge::Arrived`]), before its
    /// caller was known and its body read.
    pub fn start_at(
        function: &'static str,
        route: &'static str,
        model: &str,
        started: Instant,
    ) -> Self {
        Self {
            function,
            route,
            model: model.to_string(),
            started,
            first_token: None,
        }
    }

    /// Marks the first text of the answer sent (only the first call counts).
    pub fn first_token(&mut self) {
        if self.first_token.is_none() {
            self.first_token = Some(self.started.elapsed());
        }
    }

    /// Ends a turn that failed with `error`.
    pub fn fail(self, error: &ApiError) {
        self.finish(TurnOutcome::Failed(FailureClass::of(error), None));
    }

    /// Records the turn and writes its records (nothing when metrics are off).
    pub fn finish(self, outcome: TurnOutcome<'_>) {
        // One write of whole lines, under the lock the log lines take too, so the two never interleave.
        let mut out = Vec::with_capacity(1024);
        self.finish_into(outcome, &mut out);
        use std::io::Write;
        let _ = std::io::stdout().lock().write_all(&out);
    }

    /// Records the turn and writes its records into `out`: the one by function, route and model, and the one by
    /// kind (nothing when metrics are off).
    fn finish_into(mut self, outcome: TurnOutcome<'_>, out: &mut Vec<u8>) {
        let Some(Some(collector)) = COLLECTOR.get() else {
            return;
        };
        let labels = [
            ("function", self.function.to_string()),
            ("route", self.route.to_string()),
            ("model", std::mem::take(&mut self.model)),
        ];
        let by_kind = [("kind", kind_of(self.route).to_string())];
        let record = |name: &'static str, value: f64| {
            metrics::histogram!(name, &labels).record(value);
            if BY_KIND.contains(&name) {
                metrics::histogram!(name, &by_kind).record(value);
            }
        };
        let millis = |d: Duration| d.as_secs_f64() * 1000.0;
        record("Turns", 1.0);
        record("Latency", millis(self.started.elapsed()));
        let (spent, class) = match outcome {
            TurnOutcome::Answered(spent) => (Some(spent), None),
            TurnOutcome::Failed(class, spent) => (spent, Some(class)),
            TurnOutcome::Abandoned => (None, None),
        };
        if let (Some(first), None) = (self.first_token, class) {
            record("TimeToFirstToken", millis(first));
        }
        if let Some(spent) = spent {
            let t = &spent.totals.tokens;
            record("InputTokens", t.input_tokens as f64);
            record("OutputTokens", t.output_tokens as f64);
            record("CacheReadInputTokens", t.cache_read_input_tokens as f64);
            record("CacheWriteInputTokens", t.cache_write_input_tokens as f64);
            if let Some(cost) = spent.totals.cost_usd {
                record("CostUSD", cost);
            }
            record("ModelRounds", spent.model_calls as f64);
            record("ToolCalls", spent.tool_calls as f64);
        }
        record(
            "Errors",
            if class.is_some_and(FailureClass::is_error) {
                1.0
            } else {
                0.0
            },
        );
        record(
            "Throttles",
            if class.is_some_and(FailureClass::is_throttle) {
                1.0
            } else {
                0.0
            },
        );
        if let Some(class) = class {
            record(class.metric(), 1.0);
        }
        if let Err(e) = collector.flush(&mut *out) {
            tracing::warn!(error = %e, "the turn's metrics record was not written");
            out.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chat_core::{InvalidRequest, LimitKind, OverLimit};

    fn over(kind: LimitKind) -> ApiError {
        ApiError::Chat(ChatError::OverLimit(OverLimit {
            kind,
            retry_after: 1,
            message: String::new(),
            alone: false,
        }))
    }

    /// The records one finished turn writes, as JSON.
    fn records_of(meter: TurnMeter, outcome: TurnOutcome<'_>) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        meter.finish_into(outcome, &mut out);
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// The one record whose dimension set is exactly `dimensions`.
    fn with_dimensions<'a>(
        records: &'a [serde_json::Value],
        dimensions: &[&str],
    ) -> &'a serde_json::Value {
        let found: Vec<_> = records
            .iter()
            .filter(|r| {
                r["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == serde_json::json!([dimensions])
            })
            .collect();
        assert_eq!(found.len(), 1, "{dimensions:?} in {records:?}");
        found[0]
    }

    fn metric_names(record: &serde_json::Value) -> Vec<String> {
        let mut names: Vec<String> = record["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }

    /// The one test that turns metrics on: the recorder is the process's, and a flush writes whatever is recorded.
    #[test]
    fn a_turn_is_recorded_by_its_route_and_model_and_again_by_its_kind() {
        init_metrics("MetricsTest");
        let mut spent = TurnSpent::default();
        spent.totals.cost_usd = Some(0.25);
        spent.model_calls = 1;
        // A completion with a model other than the default: the kind record counts it all the same.
        let records = records_of(
            TurnMeter::start("chat", "/v1/chat/completions", "us.amazon.nova-pro-v1:0"),
            TurnOutcome::Answered(&spent),
        );
        assert_eq!(records.len(), 2, "{records:?}");
        let by_route = with_dimensions(&records, &["function", "route", "model"]);
        assert_eq!(by_route["function"], "chat");
        assert_eq!(by_route["route"], "/v1/chat/completions");
        assert_eq!(by_route["model"], "us.amazon.nova-pro-v1:0");
        assert!(metric_names(by_route).contains(&"InputTokens".to_string()));
        let by_kind = with_dimensions(&records, &["kind"]);
        assert_eq!(by_kind["kind"], "answer");
        assert!(by_kind.get("route").is_none() && by_kind.get("model").is_none());
        let mut alarmed: Vec<String> = BY_KIND.iter().map(|n| n.to_string()).collect();
        alarmed.sort();
        assert_eq!(metric_names(by_kind), alarmed);
        assert_eq!(by_kind["Turns"], serde_json::json!([1.0]));
        assert_eq!(by_kind["Errors"], serde_json::json!([0.0]));
        assert_eq!(by_kind["CostUSD"], serde_json::json!([0.25]));
        // A failed multi-agent round: kind agents, its error counted there too.
        let records = records_of(
            TurnMeter::start("chat-stream", "/multi-agent-chat/stream", "m"),
            TurnOutcome::Failed(FailureClass::Model, None),
        );
        let by_kind = with_dimensions(&records, &["kind"]);
        assert_eq!(by_kind["kind"], "agents");
        assert_eq!(by_kind["Errors"], serde_json::json!([1.0]));
        assert_eq!(by_kind["Throttles"], serde_json::json!([0.0]));
        let by_route = with_dimensions(&records, &["function", "route", "model"]);
        assert_eq!(by_route["ErrorsModel"], serde_json::json!([1.0]));
    }

    #[test]
    fn every_route_but_the_multi_agent_rounds_is_an_answer() {
        for route in [
            "/chat",
            "/chat/stream",
            "/chat-ui/chat",
            "/v1/chat/completions",
            "/v1/embeddings",
            "/v1/messages",
            "/v1/responses",
        ] {
            assert_eq!(kind_of(route), "answer", "{route}");
        }
        for route in [
            "/multi-agent-chat",
            "/multi-agent-chat/batch",
            "/multi-agent-chat/stream",
        ] {
            assert_eq!(kind_of(route), "agents", "{route}");
        }
    }

    #[test]
    fn each_failure_falls_in_the_class_its_metric_names() {
        let cases = [
            (over(LimitKind::REQUESTS_PER_MINUTE), FailureClass::Rate),
            (over(LimitKind::TOKENS_PER_DAY), FailureClass::Quota),
            (over(LimitKind::COST_PER_MONTH), FailureClass::Quota),
            (
                ApiError::Chat(ChatError::Model(ModelError::Throttled)),
                FailureClass::ModelThrottled,
            ),
            (
                ApiError::Chat(ChatError::Model(ModelError::Timeout("t".into()))),
                FailureClass::Timeout,
            ),
            (
                ApiError::Chat(ChatError::Model(ModelError::Failed("f".into()))),
                FailureClass::Model,
            ),
            (
                ApiError::Chat(ChatError::Store(StoreError::Unavailable("u".into()))),
                FailureClass::Store,
            ),
            (
                ApiError::Chat(ChatError::Invalid(InvalidRequest::new("messages", "x"))),
                FailureClass::Client,
            ),
            (ApiError::Unauthorized("no".into()), FailureClass::Client),
            (
                ApiError::Chat(ChatError::Model(ModelError::AccessDenied("d".into()))),
                FailureClass::Model,
            ),
        ];
        for (error, class) in cases {
            assert_eq!(FailureClass::of(&error), class, "{error:?}");
            // A 5xx is an error, a 429 a throttle, anything else neither.
            let status = error.status();
            assert_eq!(class.is_error(), status.is_server_error(), "{error:?}");
            assert_eq!(class.is_throttle(), status.as_u16() == 429, "{error:?}");
        }
    }
}
