//! The document-access matrix every chat route is tested with, so that each function's test asks the same people
//! the same questions under the same overrides: who asks, which sample document their question aims at, and
//! whether they may be given it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chat_app::Config;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{Retriever, SessionStore};
use chat_edge::Auth;
use lambda_http::Request;
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::{Value, json};

use crate::harness::{Backend, JwtSigner, KNOWLEDGE_BASE_ID, json_request, knowledge_base};

pub const ISSUER: &str = "https://issuer.access.test";
pub const AUDIENCE: &str = "chat-backend";

/// A caller of the matrix. All but [`Person::Local`] prove themselves with a JWT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Person {
    /// `oids: ["alice"]` names her: her salary review is hers.
    Alice,
    /// Named by `Payroll_Bob.md` only.
    Bob,
    /// A member of the `leadership` group.
    Dana,
    /// The local run's one user (`AUTH_MODE=none`), who is none of the above.
    Local,
}

impl Person {
    pub const ALL: [Person; 4] = [Person::Alice, Person::Bob, Person::Dana, Person::Local];

    /// The token's claims (`None` for the local user, who sends none).
    fn claims(self) -> Option<Value> {
        match self {
            Person::Alice => {
                Some(json!({"sub": "alice-sub", "oid": "alice", "groups": ["engineering"]}))
            }
            Person::Bob => Some(json!({"sub": "bob", "oid": "bob"})),
            Person::Dana => Some(json!({"sub": "dana", "oid": "dana", "groups": ["leadership"]})),
            Person::Local => None,
        }
    }

    /// `Authorization`'s value for this person, signed by `signer` (`None` for the local user).
    pub fn authorization(self, signer: &JwtSigner) -> Option<String> {
        self.claims().map(|claims| {
            format!(
                "Bearer {}",
                signer.token_with(ISSUER, AUDIENCE, |_| {}, claims)
            )
        })
    }

    /// The owner id of this person's history.
    pub fn owner(self) -> String {
        match self.claims() {
            Some(claims) => format!(
                "jwt:{ISSUER}:{}",
                claims["sub"].as_str().unwrap_or_default()
            ),
            None => crate::harness::OWNER.to_string(),
        }
    }
}

/// A sample document a question aims at, with words only it holds.
#[derive(Debug, Clone, Copy)]
pub struct Aim {
    /// Its file name, which its citations start with.
    pub document: &'static str,
    /// Words of its text that no other document holds.
    pub marker: &'static str,
    pub question: &'static str,
    /// Who may be given it; `None`: everyone.
    pub readers: Option<&'static [Person]>,
}

impl Aim {
    pub fn may_read(&self, person: Person) -> bool {
        self.readers.is_none_or(|readers| readers.contains(&person))
    }
}

pub const AIMS: [Aim; 3] = [
    Aim {
        document: "Salary_Review_Alice.md",
        marker: "97,520",
        question: "What does the salary review of Alice Martin say about her base salary?",
        readers: Some(&[Person::Alice]),
    },
    Aim {
        document: "Board_Minutes.md",
        marker: "4.5 percent",
        question: "What salary increase budget did the board approve at its spring meeting?",
        readers: Some(&[Person::Dana]),
    },
    Aim {
        document: "Parental_Leave.md",
        marker: "16 weeks of fully paid parental leave",
        question: "How many weeks of parental leave does a new parent get?",
        readers: None,
    },
];

/// The security overrides a request may carry, by name: none, both `false`, and both `true`.
pub fn override_cases() -> [(&'static str, Option<Value>); 3] {
    [
        ("no overrides", None),
        (
            "both false",
            Some(json!({"use_oid_security_filter": false, "use_groups_security_filter": false})),
        ),
        (
            "both true",
            Some(json!({"use_oid_security_filter": true, "use_groups_security_filter": true})),
        ),
    ]
}

/// Every combination of the two security overrides, each absent, `false` or `true` (with room for every passage).
pub fn every_override_combination() -> Vec<Value> {
    let values = [None, Some(false), Some(true)];
    let mut all = Vec::new();
    for oid in values {
        for groups in values {
            let mut overrides = json!({"top": 20});
            if let Some(oid) = oid {
                overrides["use_oid_security_filter"] = json!(oid);
            }
            if let Some(groups) = groups {
                overrides["use_groups_security_filter"] = json!(groups);
            }
            all.push(overrides);
        }
    }
    all
}

/// Everything one request left behind, as text: the response body, the model requests it made, the stored chat.
#[derive(Debug, Default)]
pub struct Seen {
    pub response: String,
    pub model: String,
    pub stored: String,
}

impl Seen {
    /// Asserts that `aim`'s document reached `person`'s turn exactly when they may read it: a reader's turn gave
    /// it to the model; anyone else's turn holds neither its name nor its words anywhere.
    pub fn check(&self, person: Person, aim: &Aim, case: &str) {
        let stem = aim.document.trim_end_matches(".md");
        if aim.may_read(person) {
            assert!(
                self.model.contains(stem) && self.model.contains(aim.marker),
                "{person:?} ({case}) may read {} but the model was not given it: {}",
                aim.document,
                self.model
            );
        } else {
            for (place, text) in [
                ("response", &self.response),
                ("model request", &self.model),
                ("stored chat", &self.stored),
            ] {
                assert!(
                    !text.contains(stem) && !text.contains(aim.marker),
                    "{person:?} ({case}) was given {} in the {place}: {text}",
                    aim.document
                );
            }
        }
    }
}

/// The backends of an access test: the local Bedrock server, a fresh table, the local knowledge base over the
/// sample collection, and the issuer of the matrix's tokens. Each function's test wires its `App` twice from it:
/// with [`Fixture::auth`] for the people with tokens, with [`crate::harness::auth`] for the local user.
pub struct Fixture {
    pub signer: JwtSigner,
    pub backend: Backend,
    pub retriever: Arc<dyn Retriever>,
    pub env: Vec<(String, String)>,
    _kb: LocalKnowledgeBase,
}

impl Fixture {
    /// The backends of a function configured with JWT callers, the knowledge base, and `extra`.
    pub async fn start(extra: &[(&str, &str)]) -> Self {
        let signer = JwtSigner::new("access");
        let mut env: Vec<(String, String)> = [
            ("KNOWLEDGE_BASE_ID", KNOWLEDGE_BASE_ID.to_string()),
            ("AUTH_MODE", "jwt".into()),
            ("JWT_ISSUER", ISSUER.into()),
            ("JWT_AUDIENCE", AUDIENCE.into()),
            // Alice's `oid` is not her `sub`: access lists name her by it.
            ("JWT_OID_CLAIM", "oid".into()),
            (
                "JWKS_FILE",
                signer.jwks_file().to_string_lossy().to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let backend = Backend::start(&pairs).await;
        let (kb, retriever) = knowledge_base(&backend.config).await;
        Self {
            signer,
            backend,
            retriever,
            env,
            _kb: kb,
        }
    }

    /// A function's `App` twice, made by `make` from this fixture's backends: for the people with tokens, and for
    /// the local user ([`crate::harness::auth`]); each searches the local knowledge base.
    pub async fn apps<A>(
        &self,
        make: impl Fn(BedrockModel, DynamoStore, Auth, Config, Arc<dyn Retriever>) -> A,
    ) -> Apps<A> {
        let b = &self.backend;
        let mut pair = Vec::with_capacity(2);
        for auth in [self.auth(), crate::harness::auth()] {
            pair.push(make(
                b.model().await,
                b.store.clone(),
                auth,
                b.config.clone(),
                self.retriever.clone(),
            ));
        }
        let local = pair.pop().expect("two apps");
        let with_tokens = pair.pop().expect("two apps");
        Apps { with_tokens, local }
    }

    /// The JWT verification of the matrix's issuer.
    pub fn auth(&self) -> Auth {
        Auth::from_lookup(&|name: &str| {
            self.env
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
        .expect("the access test's JWT settings are valid")
    }

    /// `person`'s POST of `body` to `path`, with their token if they have one.
    pub fn request(&self, person: Person, path: &str, body: &Value) -> Request {
        let mut request = json_request("POST", path, Some(body));
        if let Some(authorization) = person.authorization(&self.signer) {
            request.headers_mut().insert(
                "authorization",
                authorization.parse().expect("a header value"),
            );
        }
        request
    }

    /// How many model calls were made so far: [`Fixture::seen`] takes those after.
    pub fn model_calls(&self) -> usize {
        self.backend.bedrock.requests().len()
    }

    /// What `person`'s request left behind: `response` (its body), the model calls after the first `before`, and
    /// the chat the response's session state names, if any.
    pub async fn seen(&self, person: Person, before: usize, response: String) -> Seen {
        let model = self.backend.bedrock.requests()[before..]
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let mut stored = String::new();
        if let Some(chat_id) = session_state(&response) {
            let (record, messages) = self
                .backend
                .store
                .load(&person.owner(), &chat_id)
                .await
                .expect("the turn's chat is stored");
            stored = format!("{record:?} {messages:?}");
        }
        Seen {
            response,
            model,
            stored,
        }
    }
}

/// A route of a function under the matrix: where a question goes, and how it is asked there.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub path: &'static str,
    /// The `stream` field of the 2024-01-28 protocol, for a route asked in that version.
    pub stream: Option<bool>,
    /// Whether the route's client asks for server-sent events (`accept: text/event-stream`).
    pub events: bool,
}

impl Route {
    /// `path`, asked in the current protocol.
    pub const fn to(path: &'static str) -> Self {
        Self {
            path,
            stream: None,
            events: false,
        }
    }

    /// `path`, asked in the 2024-01-28 protocol with `stream`.
    pub const fn first_version(path: &'static str, stream: bool) -> Self {
        Self {
            stream: Some(stream),
            ..Self::to(path)
        }
    }

    /// `path`, whose client asks for server-sent events.
    pub const fn events(path: &'static str) -> Self {
        Self {
            events: true,
            ..Self::to(path)
        }
    }
}

/// A user's `question`, with `overrides` as the request's context when there are any.
pub fn question_body(question: &str, overrides: Option<&Value>) -> Value {
    let mut body = json!({"messages": [{"role": "user", "content": question}]});
    if let Some(overrides) = overrides {
        body["context"] = json!({"overrides": overrides});
    }
    body
}

/// How a function's `App` answers a request: its status and its body as text.
pub type Answers<A> =
    for<'a> fn(&'a A, Request) -> Pin<Box<dyn Future<Output = (u16, String)> + 'a>>;

/// A function under the matrix: its `App` twice over one [`Fixture`] ([`Fixture::apps`]), and how it answers.
pub struct World<A> {
    pub fixture: Fixture,
    pub apps: Apps<A>,
    send: Answers<A>,
}

impl<A> World<A> {
    /// The fixture configured with `extra`, the function's `App` twice made by `make` ([`Fixture::apps`]), and
    /// `send`, how it answers.
    pub async fn start(
        extra: &[(&str, &str)],
        make: impl Fn(BedrockModel, DynamoStore, Auth, Config, Arc<dyn Retriever>) -> A,
        send: Answers<A>,
    ) -> Self {
        let fixture = Fixture::start(extra).await;
        let apps = fixture.apps(make).await;
        Self {
            fixture,
            apps,
            send,
        }
    }

    /// `person` asks `question` on `route`, with `overrides`; what it left behind. The answer must be a 200.
    pub async fn ask(
        &self,
        person: Person,
        route: Route,
        question: &str,
        overrides: Option<&Value>,
    ) -> Seen {
        let mut body = question_body(question, overrides);
        if let Some(stream) = route.stream {
            body["stream"] = json!(stream);
        }
        let mut request = self.fixture.request(person, route.path, &body);
        if route.events {
            let accept = "text/event-stream".parse().expect("a header value");
            request.headers_mut().insert("accept", accept);
        }
        let before = self.fixture.model_calls();
        let (status, text) = (self.send)(self.apps.of(person), request).await;
        assert_eq!(status, 200, "{route:?}: {text}");
        self.fixture.seen(person, before, text).await
    }

    /// The matrix on every one of `routes`: each person asks each aim's question under each override case, and is
    /// given the aim's document exactly when they may read it.
    pub async fn check_every_route(&self, routes: &[Route]) {
        for &route in routes {
            for (case, overrides) in override_cases() {
                for aim in &AIMS {
                    for person in Person::ALL {
                        let seen = self
                            .ask(person, route, aim.question, overrides.as_ref())
                            .await;
                        seen.check(person, aim, &format!("{route:?}, {case}"));
                    }
                }
            }
        }
    }

    /// No combination of the security overrides gives the local user Alice's review, on any of `routes`.
    pub async fn check_no_override_gives_the_local_user_alices_review(&self, routes: &[Route]) {
        let review = &AIMS[0];
        for overrides in every_override_combination() {
            for &route in routes {
                let seen = self
                    .ask(Person::Local, route, review.question, Some(&overrides))
                    .await;
                seen.check(Person::Local, review, &format!("{route:?} {overrides}"));
            }
        }
    }
}

/// A function's `App` for callers with tokens, and for the local user.
pub struct Apps<A> {
    pub with_tokens: A,
    pub local: A,
}

impl<A> Apps<A> {
    /// The app `person` calls.
    pub fn of(&self, person: Person) -> &A {
        match person {
            Person::Local => &self.local,
            _ => &self.with_tokens,
        }
    }
}

/// The chat id a response names in its session state, in either spelling, in a JSON body or in any of its lines.
fn session_state(response: &str) -> Option<String> {
    let values: Vec<Value> = match serde_json::from_str(response) {
        Ok(value) => vec![value],
        Err(_) => response
            .lines()
            .filter_map(|line| serde_json::from_str(line.trim_start_matches("data:")).ok())
            .collect(),
    };
    values.iter().find_map(|v| {
        [
            &v["sessionState"],
            &v["session_state"],
            &v["choices"][0]["session_state"],
        ]
        .into_iter()
        .find_map(|s| s.as_str().map(str::to_string))
    })
}
