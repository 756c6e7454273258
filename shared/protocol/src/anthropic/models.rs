//! Which Bedrock model answers an Anthropic model name, and the models as `GET /v1/models` lists them to a client
//! that speaks Anthropic's API (`anthropic-version`). Claude Code and Anthropic's SDKs name Anthropic's models
//! (`claude-sonnet-4-5-20250929`, `claude-haiku-4-5`); the operator's table ([`ModelNames`], `ANTHROPIC_MODEL_NAMES`)
//! maps names, exactly or by family prefix, to the models it allows, and a name no entry maps goes to the allowed
//! Claude model whose id names it (`global.anthropic.claude-sonnet-4-5-20250929-v1:0` for
//! `claude-sonnet-4-5-20250929` or `claude-sonnet-4-5`). A Bedrock id is taken as it is.

use serde::Serialize;

/// The operator's table of Anthropic model names: `name=bedrock-id` pairs; a name maps itself and every name it is
/// the family prefix of (`claude-opus-4` maps `claude-opus-4-1-20250805`), the longest prefix winning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelNames {
    entries: Vec<(String, String)>,
}

impl ModelNames {
    /// The table of `value`: comma-separated `name=model id` pairs. A pair without `=`, or with an empty side, is
    /// refused with the reason.
    pub fn parse(value: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, id)) = pair.split_once('=') else {
                return Err(format!("{pair:?} is not name=model-id"));
            };
            let (name, id) = (name.trim(), id.trim());
            if name.is_empty() || id.is_empty() || id.chars().any(char::is_whitespace) {
                return Err(format!("{pair:?} is not name=model-id"));
            }
            entries.push((name.to_string(), id.to_string()));
        }
        Ok(Self { entries })
    }

    /// The names the table maps, in its order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(name, _)| name.as_str())
    }

    /// The Bedrock model that answers `name`, among `allowed` (the configured model first): `name` itself when
    /// allowed, else the table's entry (exact, then the longest family prefix), else the allowed Claude model whose
    /// id names it (with its date, then without). `None`: no model answers it here.
    pub fn resolve(&self, name: &str, allowed: &[String]) -> Option<String> {
        if allowed.iter().any(|id| id == name) {
            return Some(name.to_string());
        }
        let by_table = self
            .entries
            .iter()
            .filter(|(entry, _)| {
                name == entry
                    || name
                        .strip_prefix(entry.as_str())
                        .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|(entry, _)| entry.len());
        if let Some((_, id)) = by_table {
            return allowed.iter().any(|a| a == id).then(|| id.clone());
        }
        if !name.starts_with("claude-") {
            return None;
        }
        let names = |stem: &str| {
            let wanted = format!("anthropic.{stem}");
            allowed
                .iter()
                .find(|id| {
                    id.find(&wanted).is_some_and(|at| {
                        let rest = &id[at + wanted.len()..];
                        // The id goes on with its date or version, not with a later model's number.
                        rest.is_empty()
                            || rest.starts_with(':')
                            || rest.starts_with("-v")
                            || rest.get(1..9).is_some_and(|date| {
                                rest.starts_with('-') && date.bytes().all(|b| b.is_ascii_digit())
                            })
                    })
                })
                .cloned()
        };
        names(name).or_else(|| names(without_date(name)))
    }
}

/// A model name without its date (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`) or `-latest`.
fn without_date(name: &str) -> &str {
    if let Some(stem) = name.strip_suffix("-latest") {
        return stem;
    }
    match name.rsplit_once('-') {
        Some((stem, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => stem,
        _ => name,
    }
}

/// A model as Anthropic's `GET /v1/models` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub display_name: String,
    pub created_at: &'static str,
}

impl ModelInfo {
    pub fn new(id: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            kind: "model",
            display_name: id.clone(),
            id,
            // Bedrock does not say when a model was released: the epoch, as a valid time.
            created_at: "1970-01-01T00:00:00Z",
        }
    }
}

/// Anthropic's page of models (the whole list, in one page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelPage {
    pub data: Vec<ModelInfo>,
    pub has_more: bool,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
}

impl ModelPage {
    pub fn new(data: Vec<ModelInfo>) -> Self {
        Self {
            first_id: data.first().map(|m| m.id.clone()),
            last_id: data.last().map(|m| m.id.clone()),
            data,
            has_more: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Vec<String> {
        [
            "global.anthropic.claude-haiku-4-5-20251001-v1:0",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "us.anthropic.claude-opus-4-1-20250805-v1:0",
            "amazon.nova-pro-v1:0",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn a_name_goes_to_the_allowed_model_that_names_it_or_to_the_tables_entry() {
        let none = ModelNames::default();
        let a = allowed();
        // The table: exact, then the longest family prefix, and only to an allowed model.
        let table = ModelNames::parse(&format!(
            "claude-opus={}, claude-opus-5={}, claude-x=not.allowed",
            a[2], a[1]
        ))
        .unwrap();
        // Each name, and the allowed model it goes to (by its place in `a`), if any.
        let cases = [
            (&none, "claude-sonnet-4-5-20250929", Some(1)),
            (&none, "claude-sonnet-4-5", Some(1)),
            (&none, "claude-haiku-4-5-latest", Some(0)),
            // A Bedrock id is taken as it is; a name no allowed model carries is none.
            (&none, "amazon.nova-pro-v1:0", Some(3)),
            (&none, "claude-opus-5-5", None),
            (&none, "claude-sonnet-4", None),
            (&none, "gpt-4o", None),
            (&table, "claude-opus-5-5", Some(1)),
            (&table, "claude-opus-4-1-20250805", Some(2)),
            (&table, "claude-opusx", None),
            (&table, "claude-x", None),
        ];
        for (names, name, to) in cases {
            let to = to.map(|i: usize| a[i].clone());
            assert_eq!(names.resolve(name, &a), to, "{name}");
        }
        assert!(ModelNames::parse("claude-opus").is_err());
        assert!(ModelNames::parse("=x").is_err());
    }
}
