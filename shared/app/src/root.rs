//! The composition root: configuration, identity, clients, adapters and the chat service built once per cold
//! start, and the routes of the function being started handed back, ready to serve. Every function's `main` and
//! the local run (all functions on one address) start here; nothing else builds an adapter.

use std::sync::Arc;

use axum::Router;
use axum::http::Method;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{UploadQuota, UsageLedger, WatchSlots};
use chat_edge::{ApiKeySettings, ApiKeys, Auth, ConfigError, Cors};
use chat_runtime::{FunctionService, Responses};

use crate::chat::{Buffered, ChatApp, ChatFunction, Streamed};
use crate::history::{HistoryApp, PageSettings};
use crate::{Backends, Config, mcp_servers};

/// Which routes a process serves: one function's ([`Buffered`], [`Streamed`], [`History`]), or (the local run)
/// every function's on one address ([`Everything`]). Each is its own type, so that a function's binary holds its
/// own routes' code only.
pub trait Function {
    /// The methods its routes answer, which a CORS preflight is told.
    const METHODS: &'static [Method];

    /// Its routes over the adapters the root built.
    fn routes(parts: Parts<'_>) -> Result<Router, ConfigError>;
}

/// What the root has built before a function's routes: the configuration, the caller's identity and the AWS
/// clients.
pub struct Parts<'a> {
    backends: &'a Backends,
    config: &'a Config,
    auth: Auth,
}

/// The history function (`functions/history`): the history API, `GET /usage` and the page.
pub struct History;

/// All three functions on one address (the local run); where two functions answer the same path on AWS (the bare
/// `/multi-agent-chat`, which each function URL takes), the streaming function answers it.
pub struct Everything;

/// What the chat functions' routes answer: their turns (POST), and OpenAI's `GET /v1/models`.
const CHAT_METHODS: &[Method] = &[Method::GET, Method::POST];

impl Function for Buffered {
    const METHODS: &'static [Method] = CHAT_METHODS;

    fn routes(parts: Parts<'_>) -> Result<Router, ConfigError> {
        Ok(chat::<Self>(parts)?.routes())
    }
}

impl Function for Streamed {
    const METHODS: &'static [Method] = CHAT_METHODS;

    fn routes(parts: Parts<'_>) -> Result<Router, ConfigError> {
        Ok(chat::<Self>(parts)?.routes())
    }
}

/// What the history API answers (and so all functions on one address).
const HISTORY_METHODS: &[Method] = &[
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

impl Function for History {
    const METHODS: &'static [Method] = HISTORY_METHODS;

    fn routes(parts: Parts<'_>) -> Result<Router, ConfigError> {
        Ok(history(parts)?.routes())
    }
}

impl Function for Everything {
    const METHODS: &'static [Method] = HISTORY_METHODS;

    fn routes(parts: Parts<'_>) -> Result<Router, ConfigError> {
        let history = history(Parts {
            auth: parts.auth.clone(),
            ..parts
        })?;
        let chat = chat::<Streamed>(parts)?;
        Ok(Buffered::own_routes(chat.state())
            .merge(chat.routes())
            .merge(history.routes()))
    }
}

/// A function's routes as its cold start built them, and the CORS they are served with.
pub struct App {
    routes: Router,
    cors: Cors,
    methods: &'static [Method],
}

impl App {
    /// Builds the function `F` from the environment: its configuration and identity, the AWS clients (loaded once
    /// and shared by every adapter), the store, the chat service with its knowledge base, files, tools and usage
    /// ledger, and the routes over them.
    pub async fn build<F: Function>() -> Result<Self, ConfigError> {
        let config = Config::from_env()?;
        let backends = Backends::load().await;
        let auth = Auth::from_env(crate::http_client)?;
        let auth = with_api_keys(auth, &backends, &config, ApiKeySettings::from_env()?)?;
        let routes = F::routes(Parts {
            backends: &backends,
            config: &config,
            auth,
        })?;
        Ok(Self {
            routes,
            cors: config.cors,
            methods: F::METHODS,
        })
    }

    /// The routes with `change` made to them (the local run adds its own layer).
    pub fn map_routes(self, change: impl FnOnce(Router) -> Router) -> Self {
        Self {
            routes: change(self.routes),
            ..self
        }
    }

    /// The function's whole edge, as Lambda and the plain server run it.
    pub fn service(self) -> FunctionService {
        chat_runtime::function_service(self.routes, &self.cors, self.methods)
    }
}

/// A function's whole process, what its `main` runs: the tokio runtime its environment calls for, the logger, then
/// the function `F` built once ([`App::build`]) and served under Lambda's runtime (`responses`: buffered or
/// streamed) or as a plain HTTP server (`chat_runtime::serve` says which). A configuration error is reported, not
/// returned (`chat_runtime::start` says how).
pub fn run<F: Function>(responses: Responses) -> Result<(), lambda_http::Error> {
    // SAFETY: a function's `main` calls this first: the process has no other thread yet (the runtime and its
    // threads are built by `run_function`, below).
    let _bundle = unsafe { chat_aws::https::read_bundle_only() };
    chat_runtime::run_function(async move {
        chat_runtime::init_logging(crate::http_client);
        let service = async { App::build::<F>().await.map(App::service) };
        chat_runtime::start(service, responses).await
    })
}

/// A chat function: the model, the store, the knowledge base standard turns search (first, or as the model's tool:
/// `RETRIEVAL`), the files of messages, the MCP servers' tools, every turn counted in the usage ledger, and the
/// uploaded documents whose statuses the streaming function pushes.
fn chat<F: ChatFunction>(
    Parts {
        backends,
        config,
        auth,
    }: Parts<'_>,
) -> Result<ChatApp<BedrockModel, DynamoStore, F>, ConfigError> {
    let tools = mcp_servers(config)?;
    // A chat function writes a metrics record per turn.
    chat_runtime::init_metrics(&config.metrics_namespace);
    let store = backends.store(config);
    let ledger = usage_ledger(&store);
    // Only a function that pushes the documents' statuses is given them (a constant of `F`: the other's binary
    // holds no documents' adapter).
    let documents = if F::PUSHES_DOCUMENTS {
        // Each open watch of documents takes a place in the same table (`QUOTA_OPEN_WATCHES`).
        let watch_slots: Arc<dyn WatchSlots> = Arc::new(store.usage_ledger());
        backends.documents(config).map(|d| {
            d.with_watch_slots(
                watch_slots,
                &config.usage_limits,
                crate::chat::PLACE_HELD_FOR,
            )
        })
    } else {
        None
    };
    let store_for_responses = store.clone();
    Ok(
        ChatApp::new(backends.model(config), store, auth, config.clone())
            .with_retriever(backends.knowledge_base(config))
            .with_attachments(backends.attachments(config))
            .with_tools(tools, config.tool_bounds)
            .with_usage(Some(ledger))
            .with_responses(Some(Arc::new(store_for_responses)))
            .with_embedder(backends.embedder(config))
            // The streaming function pushes the documents' statuses (`GET /documents/events`); the buffered one
            // serves no documents route (and, on AWS, is given no documents bucket): `None` there.
            .with_documents(documents),
    )
}

/// The history function: the store, the files of messages, the usage ledger `GET /usage` reads, the documents
/// uploaded into the knowledge base (each upload counted in the same ledger against the upload quotas), and the
/// page.
fn history(
    Parts {
        backends,
        config,
        auth,
    }: Parts<'_>,
) -> Result<HistoryApp<DynamoStore>, ConfigError> {
    let page = PageSettings::from_env()?;
    let store = backends.store(config);
    let ledger = usage_ledger(&store);
    // Uploads count in the same counters (nothing is counted where no upload quota is configured).
    let upload_quota: Arc<dyn UploadQuota> = Arc::new(store.usage_ledger());
    let documents = backends
        .documents(config)
        .map(|d| d.with_upload_quota(upload_quota, config.usage_limits));
    Ok(HistoryApp::new(store, auth, config)
        .with_page(&page)
        .with_attachments(backends.attachments(config))
        .with_usage(Some(ledger))
        .with_documents(documents))
}

/// `auth` taking the API keys kept in the store's table (in JWT mode and local runs; IAM mode takes none), every
/// check of them bounded by the store's timeout for a whole call.
fn with_api_keys(
    auth: Auth,
    backends: &Backends,
    config: &Config,
    settings: ApiKeySettings,
) -> Result<Auth, ConfigError> {
    if matches!(auth, Auth::Iam) {
        return Ok(auth);
    }
    let store = Arc::new(backends.store(config).api_keys());
    let keys = ApiKeys::new(store, settings, config.store_timeouts.operation);
    // The template's user pool (COGNITO_USER_POOL_ID, set when the stack makes one): a person disabled or deleted
    // there loses their keys within the key cache's life.
    match user_pool_id()? {
        Some(pool) => Ok(auth.with_api_keys(keys.with_accounts(Arc::new(
            backends.accounts(&pool, config.store_timeouts.operation),
        )))),
        None => Ok(auth.with_api_keys(keys)),
    }
}

/// `COGNITO_USER_POOL_ID`, when set: a pool id is `{region}_{id}`.
fn user_pool_id() -> Result<Option<String>, ConfigError> {
    let Some(pool) = std::env::var("COGNITO_USER_POOL_ID")
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    let shaped = pool.split_once('_').is_some_and(|(region, id)| {
        !region.is_empty()
            && !id.is_empty()
            && pool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    if !shaped {
        return Err(ConfigError {
            name: "COGNITO_USER_POOL_ID",
            reason: format!("expected a user pool id such as us-east-1_AbC123, got {pool:?}"),
        });
    }
    Ok(Some(pool))
}

fn usage_ledger(store: &DynamoStore) -> Arc<dyn UsageLedger> {
    Arc::new(store.usage_ledger())
}
