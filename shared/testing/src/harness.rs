//! What the functions' tests share: the local backends (the local Bedrock server, a fresh moto table), the
//! configuration from `(name, value)` pairs, the chat helpers (a new chat as the Chat UI makes one, a chat's stored
//! history) and requests and replies (buffered bodies, and streamed ones frame by frame).
//!
//! Each function's `App` is wired in its own tests, from a [`Backend`]: `backend.app(App::new).await` gives
//! `App::new` the backends' model and store, [`auth`] and the configuration. A harness that needs more (a retriever,
//! a fault proxy, another auth) builds on the same pieces.

use std::sync::Arc;
use std::time::SystemTime;

use chat_app::Config;
use chat_aws::{BedrockKnowledgeBase, BedrockModel, DynamoStore};
use chat_core::{
    ChatMode, ChatRecord, Periods, Retriever, SessionStore, UsageLedger, UsageSnapshot,
};
use chat_edge::Auth;
use http_body_util::BodyExt;
use lambda_http::http::{HeaderMap, StatusCode};
use lambda_http::{Body, Request, Response};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use local_knowledge_base::LocalKnowledgeBase;
use serde_json::Value;

/// The one user of `AUTH_MODE=none` in these tests, and the owner id it becomes.
pub const USER: &str = "local-user";
pub const OWNER: &str = "local:local-user";
/// The local Bedrock server's echo model, the tests' default `MODEL_ID`.
pub const ECHO_MODEL: &str = "local.echo-v1:0";

/// A function configuration from `env` (as the environment would hold it) over the tests' default model.
pub fn config(env: &[(&str, &str)]) -> Config {
    Config::from_pairs(&[&[("MODEL_ID", ECHO_MODEL)], env].concat())
        .unwrap_or_else(|e| panic!("the test configuration is valid: {e:?}"))
}

/// `AUTH_MODE=none`, as [`USER`].
pub fn auth() -> Auth {
    Auth::None { user: USER.into() }
}

/// The identity configured as the environment `env` would configure it (the last of a name counting).
pub fn auth_from(env: &[(&str, &str)]) -> Auth {
    Auth::from_lookup(&|name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    })
    .expect("the identity settings are valid")
}

/// The knowledge base id the local knowledge base serves in tests.
pub const KNOWLEDGE_BASE_ID: &str = "LOCALKB001";

/// The local knowledge base over the sample collection (samples/knowledge-base), and a retriever on it through the
/// real Bedrock Agent Runtime SDK client, bounded by `config`'s `KNOWLEDGE_BASE_TIMEOUT_MS`.
pub async fn knowledge_base(config: &Config) -> (LocalKnowledgeBase, Arc<dyn Retriever>) {
    let collection =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/knowledge-base");
    let kb = LocalKnowledgeBase::start(KNOWLEDGE_BASE_ID, collection)
        .await
        .expect("the local knowledge base starts");
    let retriever = BedrockKnowledgeBase::new(
        &kb.sdk_config().await,
        KNOWLEDGE_BASE_ID.into(),
        config.knowledge_base_timeout,
    );
    (kb, Arc::new(retriever))
}

/// A store on a new, empty table of moto's shared server.
pub async fn fresh_store() -> DynamoStore {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    DynamoStore::new(client, table, None)
}

/// The files of messages in a new, empty bucket of moto's shared server (which serves S3 beside DynamoDB),
/// through the real S3 client, presigning URLs for five minutes.
pub async fn fresh_attachments() -> chat_aws::S3Attachments {
    let bucket = format!("chat-files-{}", uuid::Uuid::new_v4().simple());
    let files = chat_aws::S3Attachments::from_config(
        &LocalDynamo::shared().sdk_config().await,
        &bucket,
        std::time::Duration::from_secs(300),
        chat_core::StoreTimeouts::default(),
    );
    files.ensure_bucket().await.expect("the bucket is created");
    files
}

/// What a function under test talks to: a local Bedrock server of its own, a fresh table, and its configuration.
pub struct Backend {
    pub bedrock: LocalBedrock,
    pub store: DynamoStore,
    pub config: Config,
}

/// A function's `App` on backends of its own ([`Backend::wired`]), with handles on them.
pub struct Wired<A> {
    pub bedrock: LocalBedrock,
    pub store: DynamoStore,
    pub app: A,
}

impl Backend {
    /// The backends for a function configured with `env` (over [`config`]'s defaults).
    pub async fn start(env: &[(&str, &str)]) -> Self {
        let config = config(env);
        let bedrock = LocalBedrock::start()
            .await
            .expect("the local Bedrock server starts");
        Self {
            bedrock,
            store: fresh_store().await,
            config,
        }
    }

    /// A model on the real SDK client, talking to the local Bedrock server with the configured timeout.
    pub async fn model(&self) -> BedrockModel {
        BedrockModel::new(&self.bedrock.sdk_config().await, self.config.model_timeout)
    }

    /// [`Backend::app`], with handles on the local Bedrock server and the store.
    pub async fn wired<A>(
        self,
        new: impl FnOnce(BedrockModel, DynamoStore, Auth, Config) -> A,
    ) -> Wired<A> {
        let app = self.app(new).await;
        Wired {
            bedrock: self.bedrock,
            store: self.store,
            app,
        }
    }

    /// The usage counters in the table the chats are stored in, as a function's cold start builds them.
    pub fn ledger(&self) -> Arc<dyn UsageLedger> {
        Arc::new(self.store.usage_ledger())
    }

    /// A chat function's `App` on these backends: `new` (the function's `App::new`) given the [`Backend::model`],
    /// the store, the [`auth`] of `AUTH_MODE=none` and the configuration.
    pub async fn app<A>(
        &self,
        new: impl FnOnce(BedrockModel, DynamoStore, Auth, Config) -> A,
    ) -> A {
        new(
            self.model().await,
            self.store.clone(),
            auth(),
            self.config.clone(),
        )
    }

    /// The body of the last Converse call the model received.
    pub fn last_model_request(&self) -> Value {
        last_model_request(&self.bedrock)
    }
}

/// The body of the last Converse call `bedrock` received.
pub fn last_model_request(bedrock: &LocalBedrock) -> Value {
    let requests = bedrock.requests();
    let last = requests.last().expect("the model was called");
    last.body.clone()
}

// ---- Chats ----------------------------------------------------------------------------------------------------------

/// An empty chat of [`OWNER`], as the Chat UI creates one (`POST /chat-history`) before its first message.
pub async fn new_chat<S: SessionStore>(store: &S, mode: ChatMode) -> String {
    let id = format!("{:032x}", fastrand::u128(..));
    let chat = ChatRecord {
        id: id.clone(),
        mode,
        title: "New Chat".into(),
        created_at: "2026-11-23T10:00:00.000Z".into(),
        last_updated: "2026-11-23T10:00:00.000Z".into(),
        last_message: String::new(),
        message_count: 0,
        usage: Default::default(),
    };
    store.create(OWNER, &chat, &[]).await.unwrap();
    id
}

/// How many chats of `mode` [`OWNER`] has.
pub async fn chat_count<S: SessionStore>(store: &S, mode: ChatMode) -> usize {
    store
        .list(OWNER, chat_core::ListRequest::first(mode, 100))
        .await
        .unwrap()
        .items
        .len()
}

/// [`OWNER`]'s usage counters now.
pub async fn usage_now(store: &DynamoStore) -> UsageSnapshot {
    let now = Periods::at(time::OffsetDateTime::now_utc());
    store.usage_ledger().read(OWNER, &now).await.unwrap()
}

/// The stored messages of a chat of `owner`, as (role, content); `None` when there is no such chat.
pub async fn stored<S: SessionStore>(
    store: &S,
    owner: &str,
    chat_id: &str,
) -> Option<Vec<(String, String)>> {
    let (_, messages) = store.load(owner, chat_id).await.ok()?;
    Some(
        messages
            .into_iter()
            .map(|m| (m.role.as_str().to_string(), m.content))
            .collect(),
    )
}

/// The stored messages of a chat of [`OWNER`], as (role, content); the chat must exist.
pub async fn history<S: SessionStore>(store: &S, chat_id: &str) -> Vec<(String, String)> {
    stored(store, OWNER, chat_id)
        .await
        .expect("the chat exists")
}

/// Who speaks in a round of the default agents (`AGENTS` unset) that runs to its turn limit, in order.
pub const DEFAULT_ROUND: [&str; 6] = [
    "BusinessAnalyst",
    "SoftwareEngineer",
    "ProductOwner",
    "BusinessAnalyst",
    "SoftwareEngineer",
    "ProductOwner",
];

/// The text `field` of each item of the JSON array `array`.
pub fn texts_of<'a>(array: &'a Value, field: &str) -> Vec<&'a str> {
    let items = array.as_array().expect("an array");
    items
        .iter()
        .map(|item| item[field].as_str().expect("a text"))
        .collect()
}

// ---- Requests and replies -------------------------------------------------------------------------------------------

/// A request as the Function URL hands it over: `body` as text, with `content_type` when given.
pub fn request(method: &str, path: &str, content_type: Option<&str>, body: &str) -> Request {
    let mut builder = lambda_http::http::Request::builder()
        .method(method)
        .uri(path);
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

/// A request with a JSON body (and its content type), or none.
pub fn json_request(method: &str, path: &str, body: Option<&Value>) -> Request {
    match body {
        Some(v) => request(method, path, Some("application/json"), &v.to_string()),
        None => lambda_http::http::Request::builder()
            .method(method)
            .uri(path)
            .body(Body::Empty)
            .unwrap(),
    }
}

/// A buffered body's text. A buffered body is whole in memory, so it is read without waiting.
pub fn body_text<B>(body: B) -> String
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let collected = futures_util::FutureExt::now_or_never(body.collect())
        .expect("a buffered body is whole in memory")
        .expect("the body reads");
    String::from_utf8(collected.to_bytes().to_vec()).expect("the body is UTF-8")
}

/// A whole reply: status, headers and the body as text.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// A buffered function's response.
    pub fn buffered<B>(response: Response<B>) -> Self
    where
        B: http_body::Body,
        B::Error: std::fmt::Debug,
    {
        let (parts, body) = response.into_parts();
        Self {
            status: parts.status,
            headers: parts.headers,
            body: body_text(body),
        }
    }

    /// A streamed response, read to its end.
    pub async fn collected<B>(response: Response<B>) -> Self
    where
        B: http_body::Body,
        B::Error: std::fmt::Debug,
    {
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        Self {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8(bytes.to_vec()).expect("the body is UTF-8"),
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }
}

/// A streamed response read frame by frame, with when each frame arrived.
#[derive(Debug)]
pub struct Streamed {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: HeaderMap,
    pub frames: Vec<(SystemTime, String)>,
}

impl Streamed {
    /// Reads `response` to its end, one frame at a time.
    pub async fn read<B>(response: Response<B>) -> Self
    where
        B: http_body::Body<Data = bytes::Bytes> + Unpin,
        B::Error: std::fmt::Debug,
    {
        let (parts, mut body) = response.into_parts();
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            let bytes = data.to_vec();
            frames.push((SystemTime::now(), String::from_utf8(bytes).unwrap()));
        }
        Self {
            status: parts.status,
            content_type: parts
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default(),
            headers: parts.headers,
            frames,
        }
    }

    /// Every frame, joined.
    pub fn text(&self) -> String {
        self.frames.iter().map(|(_, f)| f.as_str()).collect()
    }

    /// The chat the first line names (the 2024-05-29 stream's `sessionState`).
    pub fn chat_id(&self) -> String {
        let first = &self.lines()[0];
        let id = first["sessionState"]
            .as_str()
            .expect("the first line names the chat");
        id.to_string()
    }

    /// The body as JSON lines, each ending in a newline.
    pub fn lines(&self) -> Vec<Value> {
        let text = self.text();
        assert!(
            text.ends_with('\n'),
            "every line ends in a newline: {text:?}"
        );
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The answer's text, from lines of `{"delta": {"content": …}}`.
    pub fn content(&self) -> String {
        self.lines()
            .iter()
            .filter_map(|l| l["delta"]["content"].as_str().map(str::to_string))
            .collect()
    }
}

/// A signing key made for a test (ES256), and the JWKS that publishes it: the tests' JWT issuer.
pub struct JwtSigner {
    pub key: jsonwebtoken::EncodingKey,
    pub kid: String,
    /// The public key as a JWK.
    pub jwk: Value,
}

impl JwtSigner {
    pub fn new(kid: &str) -> Self {
        use aws_lc_rs::rand::SystemRandom;
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .expect("a key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
            .expect("the key just made");
        let point = pair.public_key().as_ref(); // 0x04, then x and y
        Self {
            key: jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()),
            kid: kid.into(),
            jwk: serde_json::json!({
                "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
            }),
        }
    }

    /// A JWKS file publishing this key (for `JWKS_FILE`), in the temporary directory.
    pub fn jwks_file(&self) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("jwks-{}.json", uuid::Uuid::new_v4().simple()));
        std::fs::write(&path, serde_json::json!({"keys": [self.jwk]}).to_string())
            .expect("the JWKS file is written");
        path
    }

    /// A token of `issuer` for `audience`, valid for an hour from now, with `claims` over those, its header
    /// changed by `edit`.
    pub fn token_with(
        &self,
        issuer: &str,
        audience: &str,
        edit: impl FnOnce(&mut jsonwebtoken::Header),
        claims: Value,
    ) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        edit(&mut header);
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut all =
            serde_json::json!({"iss": issuer, "aud": audience, "exp": now + 3600, "iat": now});
        if let (Some(all), Some(claims)) = (all.as_object_mut(), claims.as_object()) {
            all.extend(claims.clone());
        }
        jsonwebtoken::encode(&header, &all, &self.key).expect("the token is signed")
    }
}

// ---- A function's binary as a plain server ---------------------------------------------------------------------------

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

/// The command that runs a function's `binary` as a plain server on `port`: `AUTH_MODE=none`, the echo model of
/// the local Bedrock server at `bedrock`, a table of moto's shared server, no knowledge base, local credentials; and
/// `env` over that (an environment of nothing else).
pub fn plain_server(
    binary: &str,
    port: u16,
    (bedrock, table): (&str, &str),
    env: &[(&str, &str)],
) -> std::process::Command {
    let mut command = std::process::Command::new(binary);
    command
        .env_clear()
        .env("PORT", port.to_string())
        .env("BIND_ADDRESS", "127.0.0.1")
        .env("MODEL_ID", ECHO_MODEL)
        .env("TABLE_NAME", table)
        .env("AUTH_MODE", "none")
        .env("KNOWLEDGE_BASE_ID", "")
        .env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock)
        .envs(LocalDynamo::shared().sdk_env())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null());
    command
}

/// Waits until something accepts connections on `port` of 127.0.0.1 (a plain server has come up), 30 s at most.
pub async fn wait_for_port(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing came up on port {port}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
