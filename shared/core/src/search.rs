//! The search step of a turn: the query (the user's, or one the model writes), the filters the request and the
//! caller's access make, the knowledge base's passages, and the thoughts that tell what was done.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::grounding::one_line;
use crate::prompt::{inference_settings, model_messages, push_text, system_shown};
use crate::{
    Caller, ChatError, ChatModel, ChatSettings, DocumentAccess, Grounding, Message, MetadataFilter,
    ModelRequest, Passage, RetrievalMode, Retriever, Role, SearchMode, SearchRequest, Thought,
    Tool, ToolFuture, ToolOutput, ToolSpec, TurnInput,
};

/// The system prompt of the query the model writes; the conversation follows it.
pub const QUERY_PROMPT: &str = "Below is a history of the conversation so far, and a new question asked by the user \
that needs to be answered by searching in a knowledge base of the team's documents.
Generate a search query based on the conversation and the new question.
Do not include cited source filenames and document names such as info.txt or doc.pdf in the search query terms.
Do not include any text inside [] or <<>> in the search query terms.
Do not include any special characters like '+'.
If you cannot generate a search query, return just the number 0.";

/// The search step's outcome: the grounding and the thoughts of the steps taken.
pub(crate) struct SearchOutcome {
    pub grounding: Grounding,
    pub thoughts: Vec<Thought>,
    /// What writing the query spent (nothing when the user's words were the query).
    pub spent: crate::TurnSpent,
}

/// Searches `retriever` for the turn: writes the query (or takes the user's), builds the filters, and keeps the
/// passages that score at least the requested minimum.
pub(crate) async fn search<M: ChatModel>(
    (model, account): (&M, &mut crate::TurnAccount),
    retriever: &dyn Retriever,
    settings: &ChatSettings,
    caller: &Caller,
    input: &TurnInput,
    conversation: &[Message],
) -> Result<SearchOutcome, ChatError> {
    let overrides = &input.overrides;
    let question = conversation
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(Message::text)
        .unwrap_or_default();
    let mut thoughts = Vec::new();
    let mut spent = crate::TurnSpent::default();
    let (query, generated) = if settings.retrieval.query_rewrite {
        let request = query_request(settings, input, conversation, &question);
        let reply = account.converse(model, &request).await?;
        spent.add_call(reply.usage, settings.model.prices.as_ref());
        let written = reply.text.trim().trim_matches('"').trim().to_string();
        thoughts.push(query_thought(
            &request,
            &written,
            settings.thoughts_show_prompt,
        ));
        if written.is_empty() || written == "0" {
            (question.clone(), false)
        } else {
            (written, true)
        }
    } else {
        (question.clone(), false)
    };
    let mode = overrides.retrieval_mode.unwrap_or(RetrievalMode::Hybrid);
    let search = SearchRequest {
        query: query.clone(),
        top: overrides.top.unwrap_or(settings.retrieval.default_top),
        mode: search_mode(mode, settings.retrieval.hybrid),
        filter: filter(&settings.retrieval.access, overrides, caller),
    };
    // A security filter that can name nobody (a caller with no groups) matches nothing: no search is needed.
    let found = if search.filter.as_ref().is_some_and(matches_nothing) {
        Vec::new()
    } else {
        retriever
            .retrieve(&search)
            .await
            .map_err(ChatError::Search)?
    };
    let passages: Vec<Passage> = found
        .into_iter()
        .filter(|p| match (overrides.minimum_search_score, p.score) {
            (Some(minimum), Some(score)) => score >= minimum,
            (Some(_), None) => false,
            (None, _) => true,
        })
        .take(search.top)
        .collect();
    thoughts.push(search_thought(
        input,
        &settings.retrieval.access,
        &search,
        mode,
        generated,
        settings.thoughts_show_prompt,
    ));
    thoughts.push(results_thought(&passages));
    Ok(SearchOutcome {
        grounding: Grounding { passages },
        thoughts,
        spent,
    })
}

/// The model call that writes the search query: the conversation, its last question asked as a query.
fn query_request(
    settings: &ChatSettings,
    input: &TurnInput,
    conversation: &[Message],
    question: &str,
) -> ModelRequest {
    let history = &conversation[..conversation
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(conversation.len())];
    let mut messages = model_messages(history);
    // The query is written from the words of the conversation: its files would cost the call much and tell the
    // query little.
    for message in &mut messages {
        message.files.clear();
    }
    push_text(
        &mut messages,
        Role::User,
        format!("Generate search query for: {question}"),
    );
    let mut inference = inference_settings(settings, &input.overrides, Some(0.0));
    inference.max_tokens = 100;
    ModelRequest {
        model_id: settings.model_id.clone(),
        system: QUERY_PROMPT.to_string(),
        messages,
        inference,
        guardrail: settings.guardrail.clone(),
        ..ModelRequest::default()
    }
}

/// The metadata filter of a search: the request's `exclude_category`, and the documents the caller may read.
///
/// Access is the server's. Unless the operator opened the collection (`DOCUMENT_ACCESS=open`), a passage is found
/// only when its `oids` list the caller's id, or its `groups` list one of the caller's groups or the everyone group,
/// which every caller belongs to. The security overrides may only narrow that: `use_oid_security_filter` alone
/// keeps the documents naming the caller, `use_groups_security_filter` alone those naming one of their groups
/// (the everyone group among them); both, neither, or `false` keep the whole of what the caller may read.
fn filter(
    access: &DocumentAccess,
    overrides: &crate::Overrides,
    caller: &Caller,
) -> Option<MetadataFilter> {
    let mut all = Vec::new();
    if let Some(category) = &overrides.exclude_category {
        all.push(MetadataFilter::NotEquals {
            key: "category".into(),
            value: Value::String(category.clone()),
        });
    }
    let (by_oid, by_groups) = match (
        overrides.use_oid_security_filter,
        overrides.use_groups_security_filter,
    ) {
        (true, false) => (true, false),
        (false, true) => (false, true),
        _ => (true, true),
    };
    let everyone = match access {
        DocumentAccess::Enforced { everyone_group } => Some(everyone_group.as_str()),
        // An open collection is narrowed only when the request asks, as the overrides always did.
        DocumentAccess::Open => None,
    };
    let narrowed = overrides.use_oid_security_filter || overrides.use_groups_security_filter;
    if everyone.is_some() || narrowed {
        let mut any = Vec::new();
        if by_oid && let Some(oid) = &caller.oid {
            any.push(MetadataFilter::ListContains {
                key: "oids".into(),
                value: Value::String(oid.clone()),
            });
        }
        if by_groups {
            let mut groups: Vec<&str> = caller.groups.iter().map(String::as_str).collect();
            groups.extend(everyone);
            let mut seen = Vec::new();
            for group in groups {
                if !seen.contains(&group) {
                    seen.push(group);
                    any.push(MetadataFilter::ListContains {
                        key: "groups".into(),
                        value: Value::String(group.to_string()),
                    });
                }
            }
        }
        // Nothing to name the caller by leaves an empty OrAll: nothing matches.
        all.push(MetadataFilter::OrAll(any));
    }
    match all.len() {
        0 => None,
        1 => all.pop(),
        _ => Some(MetadataFilter::AndAll(all)),
    }
}

/// The knowledge base as a tool the model calls when and as often as it chooses (`RETRIEVAL=tools` or `both`):
/// always under the caller's document access and the request's narrowing, which its input (a query, and how many
/// passages) cannot widen.
pub(crate) struct SearchDocuments {
    retriever: Arc<dyn Retriever>,
    access: DocumentAccess,
    overrides: crate::Overrides,
    default_top: usize,
    /// Whether the knowledge base takes `HYBRID` search.
    hybrid: bool,
    /// The most passages one call may ask for: the operator's `MAX_TOP`, the bound of a request's own `top`.
    max_top: usize,
    spec: ToolSpec,
}

impl SearchDocuments {
    pub(crate) fn new(
        retriever: Arc<dyn Retriever>,
        settings: &ChatSettings,
        overrides: &crate::Overrides,
    ) -> Self {
        let max_top = settings.limits.max_top.max(1);
        Self {
            retriever,
            access: settings.retrieval.access.clone(),
            hybrid: settings.retrieval.hybrid,
            overrides: overrides.clone(),
            default_top: overrides
                .top
                .unwrap_or(settings.retrieval.default_top)
                .clamp(1, max_top),
            max_top,
            spec: ToolSpec {
                strict: false,
                name: "search_documents".into(),
                description: "Searches the team's documents and returns the passages that match best, each after \
                              its source's name in square brackets. Cite a passage by that name, e.g. \
                              [Benefit_Options.pdf#page=2]."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "query": { "type": "string", "description": "What to search for." },
                        "top": {
                            "type": "integer", "minimum": 1, "maximum": max_top,
                            "description": "How many passages to return."
                        }
                    },
                    "required": ["query"]
                }),
            },
        }
    }
}

impl Tool for SearchDocuments {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, caller: &'a Caller, input: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let query = input
                .get("query")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .ok_or("the input needs a non-empty string \"query\"")?;
            let top = match input.get("top") {
                None | Some(Value::Null) => self.default_top,
                Some(top) => top
                    .as_u64()
                    .filter(|t| (1..=self.max_top as u64).contains(t))
                    .ok_or(format!(
                        "\"top\" must be a whole number from 1 to {}",
                        self.max_top
                    ))? as usize,
            };
            let mode = search_mode(
                self.overrides
                    .retrieval_mode
                    .unwrap_or(RetrievalMode::Hybrid),
                self.hybrid,
            );
            let search = SearchRequest {
                query: query.to_string(),
                top,
                mode,
                filter: filter(&self.access, &self.overrides, caller),
            };
            let found = if search.filter.as_ref().is_some_and(matches_nothing) {
                Vec::new()
            } else {
                self.retriever
                    .retrieve(&search)
                    .await
                    .map_err(|e| format!("the search failed: {e}"))?
            };
            let passages: Vec<Passage> = found
                .into_iter()
                .filter(|p| match (self.overrides.minimum_search_score, p.score) {
                    (Some(minimum), Some(score)) => score >= minimum,
                    (Some(_), None) => false,
                    (None, _) => true,
                })
                .take(top)
                .collect();
            let text = if passages.is_empty() {
                "No documents matched.".to_string()
            } else {
                passages
                    .iter()
                    .map(|p| format!("[{}]: {}", p.citation(), one_line(&p.text)))
                    .collect::<Vec<_>>()
                    .join("\n\n")
            };
            Ok(ToolOutput { text, passages })
        })
    }
}

/// Whether `filter` can match no passage at all.
fn matches_nothing(filter: &MetadataFilter) -> bool {
    match filter {
        MetadataFilter::OrAll(any) => any.iter().all(matches_nothing),
        MetadataFilter::AndAll(all) => all.iter().any(matches_nothing),
        MetadataFilter::In { values, .. } => values.is_empty(),
        _ => false,
    }
}

fn query_thought(request: &ModelRequest, query: &str, show_system: bool) -> Thought {
    let mut description = system_shown(&request.system, show_system);
    description.extend(
        request
            .messages
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.texts.join("\n\n")})),
    );
    Thought {
        title: "Prompt to generate search query".into(),
        description: Value::Array(description),
        props: Some(json!({"model": request.model_id, "query": query})),
    }
}

/// The knowledge base's search type for the mode asked: `vectors` is `SEMANTIC`; `hybrid` and `text` (a knowledge
/// base has no text-only search) are `HYBRID` where the vector store takes it, else `SEMANTIC` (Bedrock refuses
/// `HYBRID` on any store but OpenSearch Serverless).
fn search_mode(mode: RetrievalMode, hybrid: bool) -> SearchMode {
    match mode {
        RetrievalMode::Hybrid | RetrievalMode::Text if hybrid => SearchMode::Hybrid,
        _ => SearchMode::Semantic,
    }
}

fn search_thought(
    input: &TurnInput,
    access: &DocumentAccess,
    search: &SearchRequest,
    mode: RetrievalMode,
    generated: bool,
    show_filters: bool,
) -> Thought {
    let overrides = &input.overrides;
    let mut props = Map::new();
    props.insert("top".into(), json!(search.top));
    props.insert("retrieval_mode".into(), json!(mode.as_str()));
    props.insert(
        "search_type".into(),
        json!(match search.mode {
            SearchMode::Hybrid => "HYBRID",
            SearchMode::Semantic => "SEMANTIC",
        }),
    );
    match (mode, search.mode) {
        (RetrievalMode::Text, SearchMode::Hybrid) => {
            props.insert(
                "note".into(),
                json!("a knowledge base has no text-only search; hybrid search, which ranks text matches, was used"),
            );
        }
        (RetrievalMode::Text | RetrievalMode::Hybrid, SearchMode::Semantic) => {
            props.insert(
                "note".into(),
                json!("this knowledge base's vector store has no hybrid search (KNOWLEDGE_BASE_HYBRID_SEARCH=false); semantic search was used"),
            );
        }
        _ => {}
    }
    if let Some(minimum) = overrides.minimum_search_score {
        props.insert("minimum_search_score".into(), json!(minimum));
    }
    if let Some(category) = &overrides.exclude_category {
        props.insert("exclude_category".into(), json!(category));
    }
    props.insert(
        "use_oid_security_filter".into(),
        json!(overrides.use_oid_security_filter),
    );
    props.insert(
        "use_groups_security_filter".into(),
        json!(overrides.use_groups_security_filter),
    );
    props.insert("document_access".into(), json!(access.as_str()));
    if *access == DocumentAccess::Open {
        props.insert(
            "document_access_note".into(),
            json!("DOCUMENT_ACCESS=open: the operator opened the collection; every document is searched, whoever asks"),
        );
    }
    // The filters name the caller's oid and groups and how access is decided: out of the thought when the operator
    // keeps them out (`THOUGHTS_SHOW_PROMPT=false`).
    if show_filters {
        props.insert(
            "filters".into(),
            search.filter.as_ref().map_or(Value::Null, filter_json),
        );
    }
    Thought {
        title: if generated {
            "Search using generated search query"
        } else {
            "Search using user query"
        }
        .into(),
        description: Value::String(search.query.clone()),
        props: Some(Value::Object(props)),
    }
}

/// A filter as the thoughts show it, in the knowledge base's own terms (`{"listContains": {"key", "value"}}`).
fn filter_json(filter: &MetadataFilter) -> Value {
    let pair = |key: &str, value: &Value| json!({"key": key, "value": value});
    match filter {
        MetadataFilter::Equals { key, value } => json!({"equals": pair(key, value)}),
        MetadataFilter::NotEquals { key, value } => json!({"notEquals": pair(key, value)}),
        MetadataFilter::In { key, values } => json!({"in": pair(key, &json!(values))}),
        MetadataFilter::ListContains { key, value } => json!({"listContains": pair(key, value)}),
        MetadataFilter::AndAll(all) => {
            json!({"andAll": all.iter().map(filter_json).collect::<Vec<_>>()})
        }
        MetadataFilter::OrAll(any) => {
            json!({"orAll": any.iter().map(filter_json).collect::<Vec<_>>()})
        }
    }
}

fn results_thought(passages: &[Passage]) -> Thought {
    Thought {
        title: "Search results".into(),
        description: Value::Array(
            passages
                .iter()
                .map(|p| json!({"citation": p.citation(), "text": one_line(&p.text), "score": p.score}))
                .collect(),
        ),
        props: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Overrides;

    fn caller(oid: Option<&str>, groups: &[&str]) -> Caller {
        Caller {
            owner: "o".into(),
            oid: oid.map(str::to_string),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn flags(oid: bool, groups: bool) -> Overrides {
        Overrides {
            use_oid_security_filter: oid,
            use_groups_security_filter: groups,
            ..Overrides::default()
        }
    }

    fn shown(filter: Option<MetadataFilter>) -> Value {
        filter.as_ref().map_or(Value::Null, filter_json)
    }

    fn contains(key: &str, value: &str) -> Value {
        json!({"listContains": {"key": key, "value": value}})
    }

    #[test]
    fn every_search_is_limited_to_what_the_caller_may_read() {
        let access = DocumentAccess::default();
        let alice = caller(Some("alice"), &["eng", "everyone", "eng"]);
        let whole = json!({"orAll": [
            contains("oids", "alice"), contains("groups", "eng"), contains("groups", "everyone")
        ]});
        // No override, both off, and both on: the whole of what alice may read (no group twice).
        for overrides in [Overrides::default(), flags(false, false), flags(true, true)] {
            assert_eq!(shown(filter(&access, &overrides, &alice)), whole);
        }
        // Each alone narrows.
        assert_eq!(
            shown(filter(&access, &flags(true, false), &alice)),
            json!({"orAll": [contains("oids", "alice")]})
        );
        assert_eq!(
            shown(filter(&access, &flags(false, true), &alice)),
            json!({"orAll": [contains("groups", "eng"), contains("groups", "everyone")]})
        );
        // A caller with no id still reads what is for everyone; under the oid filter alone, nothing.
        let nobody = caller(None, &[]);
        let only_everyone = filter(&access, &Overrides::default(), &nobody).unwrap();
        assert_eq!(
            shown(Some(only_everyone.clone())),
            json!({"orAll": [contains("groups", "everyone")]})
        );
        assert!(!matches_nothing(&only_everyone));
        assert!(matches_nothing(
            &filter(&access, &flags(true, false), &nobody).unwrap()
        ));
        // The configured everyone group is the one named.
        let staff = DocumentAccess::Enforced {
            everyone_group: "all-staff".into(),
        };
        assert_eq!(
            shown(filter(&staff, &Overrides::default(), &nobody)),
            json!({"orAll": [contains("groups", "all-staff")]})
        );
    }

    #[test]
    fn the_category_filter_joins_the_access_filter() {
        let overrides = Overrides {
            exclude_category: Some("hr".into()),
            ..Overrides::default()
        };
        let f = filter(
            &DocumentAccess::default(),
            &overrides,
            &caller(Some("bob"), &[]),
        );
        assert_eq!(
            shown(f),
            json!({"andAll": [
                {"notEquals": {"key": "category", "value": "hr"}},
                {"orAll": [contains("oids", "bob"), contains("groups", "everyone")]}
            ]})
        );
    }

    #[test]
    fn an_open_collection_is_narrowed_only_when_asked() {
        let alice = caller(Some("alice"), &["eng"]);
        assert_eq!(
            filter(&DocumentAccess::Open, &Overrides::default(), &alice),
            None
        );
        assert_eq!(
            filter(&DocumentAccess::Open, &flags(false, false), &alice),
            None
        );
        assert_eq!(
            shown(filter(&DocumentAccess::Open, &flags(true, false), &alice)),
            json!({"orAll": [contains("oids", "alice")]})
        );
        assert_eq!(
            shown(filter(&DocumentAccess::Open, &flags(true, true), &alice)),
            json!({"orAll": [contains("oids", "alice"), contains("groups", "eng")]})
        );
    }
}
