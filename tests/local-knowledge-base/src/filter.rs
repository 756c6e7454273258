//! Bedrock's `RetrievalFilter` (the `filter` of a `vectorSearchConfiguration`): parsed and validated as the service
//! does, then evaluated on a passage's metadata.

use serde_json::{Map, Value};

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `equals`, `notEquals`, `greaterThan`, … : one attribute compared with one value.
    Compare {
        op: Op,
        key: String,
        value: Value,
    },
    AndAll(Vec<Filter>),
    OrAll(Vec<Filter>),
}

/// The comparisons Bedrock offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Equals,
    NotEquals,
    GreaterThan,
    GreaterThanOrEquals,
    LessThan,
    LessThanOrEquals,
    In,
    NotIn,
    StartsWith,
    ListContains,
    StringContains,
}

impl Op {
    fn from_name(name: &str) -> Option<Op> {
        Some(match name {
            "equals" => Op::Equals,
            "notEquals" => Op::NotEquals,
            "greaterThan" => Op::GreaterThan,
            "greaterThanOrEquals" => Op::GreaterThanOrEquals,
            "lessThan" => Op::LessThan,
            "lessThanOrEquals" => Op::LessThanOrEquals,
            "in" => Op::In,
            "notIn" => Op::NotIn,
            "startsWith" => Op::StartsWith,
            "listContains" => Op::ListContains,
            "stringContains" => Op::StringContains,
            _ => return None,
        })
    }
}

/// The fewest and most members Bedrock accepts in an `andAll` or `orAll`.
pub const GROUP_MEMBERS: std::ops::RangeInclusive<usize> = 2..=5;

/// Parses a filter as the service validates it; the error is the `ValidationException` message.
pub fn parse(value: &Value, path: &str) -> Result<Filter, String> {
    let object = value.as_object().ok_or_else(|| {
        format!("Value at '{path}' failed to satisfy constraint: must be an object")
    })?;
    // A union: exactly one member set.
    let mut members = object.iter().filter(|(_, v)| !v.is_null());
    let (name, body) = match (members.next(), members.next()) {
        (Some(member), None) => member,
        (None, _) => {
            return Err(format!(
                "Value at '{path}' failed to satisfy constraint: exactly one filter must be set"
            ));
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "Value at '{path}' failed to satisfy constraint: only one filter may be set, found {}",
                object.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    };
    let path = format!("{path}.{name}");
    match name.as_str() {
        "andAll" | "orAll" => {
            let items = body.as_array().ok_or_else(|| {
                format!("Value at '{path}' failed to satisfy constraint: must be a list")
            })?;
            if !GROUP_MEMBERS.contains(&items.len()) {
                return Err(format!(
                    "1 validation error detected: Value '{}' at '{path}' failed to satisfy constraint: Member must have length between {} and {}",
                    items.len(),
                    GROUP_MEMBERS.start(),
                    GROUP_MEMBERS.end()
                ));
            }
            let filters = items
                .iter()
                .enumerate()
                .map(|(i, f)| parse(f, &format!("{path}.{}", i + 1)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(if name == "andAll" {
                Filter::AndAll(filters)
            } else {
                Filter::OrAll(filters)
            })
        }
        other => {
            let op = Op::from_name(other)
                .ok_or_else(|| format!("Unknown filter '{other}' at '{path}'"))?;
            let key = body
                .get("key")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .ok_or_else(|| {
                    format!("Value at '{path}.key' failed to satisfy constraint: Member must not be null or empty")
                })?
                .to_string();
            let value = body.get("value").cloned().ok_or_else(|| {
                format!(
                    "Value at '{path}.value' failed to satisfy constraint: Member must not be null"
                )
            })?;
            let ok = match op {
                Op::In | Op::NotIn => value.is_array(),
                Op::GreaterThan | Op::GreaterThanOrEquals | Op::LessThan | Op::LessThanOrEquals => {
                    value.is_number()
                }
                Op::StartsWith | Op::StringContains => value.is_string(),
                Op::ListContains => !value.is_array() && !value.is_object(),
                Op::Equals | Op::NotEquals => !value.is_object(),
            };
            if !ok {
                return Err(format!(
                    "Value at '{path}.value' failed to satisfy constraint: {other} does not take {value}"
                ));
            }
            Ok(Filter::Compare { op, key, value })
        }
    }
}

/// Two JSON values are the same attribute value: numbers by value (`2` is `2.0`), everything else exactly.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn number(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

impl Filter {
    /// Whether a passage with this metadata passes. An attribute the passage lacks matches no positive condition
    /// (`equals`, `in`, `listContains`, …) and every negative one (`notEquals`, `notIn`).
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        match self {
            Filter::AndAll(all) => all.iter().all(|f| f.matches(metadata)),
            Filter::OrAll(any) => any.iter().any(|f| f.matches(metadata)),
            Filter::Compare { op, key, value } => {
                let attribute = metadata.get(key);
                let equals = || attribute.is_some_and(|a| same(a, value));
                let within = || {
                    attribute.is_some_and(|a| {
                        value
                            .as_array()
                            .is_some_and(|vs| vs.iter().any(|v| same(a, v)))
                    })
                };
                let text = value.as_str().unwrap_or_default();
                let strings = || -> Vec<&str> {
                    match attribute {
                        Some(Value::String(s)) => vec![s.as_str()],
                        Some(Value::Array(items)) => {
                            items.iter().filter_map(Value::as_str).collect()
                        }
                        _ => Vec::new(),
                    }
                };
                let compare = |f: fn(f64, f64) -> bool| matches!((number(attribute), number(Some(value))), (Some(a), Some(b)) if f(a, b));
                match op {
                    Op::Equals => equals(),
                    Op::NotEquals => !equals(),
                    Op::In => within(),
                    Op::NotIn => !within(),
                    Op::GreaterThan => compare(|a, b| a > b),
                    Op::GreaterThanOrEquals => compare(|a, b| a >= b),
                    Op::LessThan => compare(|a, b| a < b),
                    Op::LessThanOrEquals => compare(|a, b| a <= b),
                    Op::ListContains => match attribute {
                        Some(Value::Array(items)) => items.iter().any(|i| same(i, value)),
                        _ => false,
                    },
                    Op::StringContains => strings().iter().any(|s| s.contains(text)),
                    Op::StartsWith => match attribute {
                        Some(Value::String(s)) => s.starts_with(text),
                        _ => false,
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn check(filter: Value, metadata: Value) -> bool {
        parse(&filter, "filter").unwrap().matches(&meta(metadata))
    }

    #[test]
    fn each_comparison_holds_as_bedrock_describes_it() {
        let m = json!({"category": "benefits", "year": 2026, "oids": ["alice", "carol"], "title": "Benefit Options"});
        for filter in [
            json!({"equals": {"key": "category", "value": "benefits"}}),
            json!({"equals": {"key": "year", "value": 2026.0}}),
            json!({"notEquals": {"key": "category", "value": "leave"}}),
            json!({"notEquals": {"key": "missing", "value": "x"}}),
            json!({"in": {"key": "category", "value": ["leave", "benefits"]}}),
            json!({"notIn": {"key": "category", "value": ["leave"]}}),
            json!({"listContains": {"key": "oids", "value": "alice"}}),
            json!({"stringContains": {"key": "title", "value": "Option"}}),
            json!({"stringContains": {"key": "oids", "value": "aro"}}),
            json!({"startsWith": {"key": "title", "value": "Benefit"}}),
            json!({"greaterThan": {"key": "year", "value": 2025}}),
            json!({"greaterThanOrEquals": {"key": "year", "value": 2026}}),
            json!({"lessThan": {"key": "year", "value": 2027}}),
            json!({"lessThanOrEquals": {"key": "year", "value": 2026}}),
        ] {
            assert!(check(filter.clone(), m.clone()), "{filter} holds");
        }
        for filter in [
            json!({"equals": {"key": "category", "value": "leave"}}),
            json!({"in": {"key": "missing", "value": ["x"]}}),
            json!({"listContains": {"key": "oids", "value": "bob"}}),
            json!({"listContains": {"key": "category", "value": "benefits"}}),
            json!({"greaterThan": {"key": "year", "value": 2026}}),
            json!({"lessThan": {"key": "category", "value": 1}}),
        ] {
            assert!(!check(filter.clone(), m.clone()), "{filter} does not hold");
        }
    }

    #[test]
    fn groups_combine_their_members() {
        let m = json!({"category": "benefits", "oids": ["alice"]});
        let a = json!({"equals": {"key": "category", "value": "benefits"}});
        let b = json!({"listContains": {"key": "oids", "value": "bob"}});
        assert!(!check(json!({"andAll": [a, b]}), m.clone()));
        assert!(check(json!({"orAll": [a, b]}), m.clone()));
        assert!(check(json!({"orAll": [b, {"andAll": [a, a]}]}), m));
    }

    #[test]
    fn groups_need_two_to_five_members_as_the_service_requires() {
        let a = json!({"equals": {"key": "category", "value": "benefits"}});
        for n in [0usize, 1, 6] {
            let members = vec![a.clone(); n];
            let err = parse(&json!({ "orAll": members }), "filter").unwrap_err();
            assert!(err.contains("length between 2 and 5"), "{err}");
        }
        for n in 2..=5 {
            let members = vec![a.clone(); n];
            parse(&json!({ "andAll": members }), "filter").unwrap();
        }
    }

    #[test]
    fn malformed_filters_are_rejected() {
        for bad in [
            json!({}),
            json!({"equals": {"key": "a", "value": 1}, "notEquals": {"key": "a", "value": 2}}),
            json!({"sounds-like": {"key": "a", "value": 1}}),
            json!({"equals": {"value": 1}}),
            json!({"equals": {"key": "a"}}),
            json!({"in": {"key": "a", "value": "not a list"}}),
            json!({"greaterThan": {"key": "a", "value": "x"}}),
            json!("equals"),
        ] {
            assert!(parse(&bad, "filter").is_err(), "{bad}");
        }
    }
}
