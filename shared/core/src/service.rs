//! The chat core as a service: [`ChatService`] with its ports plugged in (model, store, search, files, usage
//! ledger, tools), built once per cold start, and what every turn asks of it before anything else: admission
//! against the user's limits, which opens the turn's account with the counters.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::driver::RoundStarter;
use crate::{
    AttachmentStore, Caller, ChatError, ChatModel, ChatSettings, Family, Hold, Limits, ReplyStream,
    Reserve, Retriever, SessionStore, ToolBounds, ToolSource, TurnAccount, TurnInput, UsageLedger,
};

/// The chat core with its ports plugged in; built once per cold start and shared by every request.
pub struct ChatService<M, St> {
    /// Shared with the rounds of the answers in progress, which start model calls of their own.
    pub(crate) model: Arc<M>,
    pub(crate) store: St,
    pub(crate) settings: ChatSettings,
    pub(crate) retriever: Option<Arc<dyn Retriever>>,
    pub(crate) attachments: Option<Arc<dyn AttachmentStore>>,
    /// Where what each user spends is counted, and the limits it is held to.
    pub(crate) ledger: Option<Arc<dyn UsageLedger>>,
    pub(crate) usage_limits: Limits,
    /// Where tools beyond the built-in ones come from (MCP servers), and the bounds every tool runs under.
    pub(crate) tool_sources: Vec<Arc<dyn ToolSource>>,
    pub(crate) tool_bounds: ToolBounds,
}

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    pub fn new(model: M, store: St, settings: ChatSettings) -> Self {
        Self {
            model: Arc::new(model),
            store,
            settings,
            retriever: None,
            attachments: None,
            ledger: None,
            usage_limits: Limits::default(),
            tool_sources: Vec::new(),
            tool_bounds: ToolBounds::default(),
        }
    }

    /// Offers the model the tools of `sources` (beside `search_documents`, offered when `RETRIEVAL` says so), run
    /// under `bounds`.
    pub fn with_tools(mut self, sources: Vec<Arc<dyn ToolSource>>, bounds: ToolBounds) -> Self {
        self.tool_sources = sources;
        self.tool_bounds = bounds;
        self
    }

    /// Starts each streamed round of an answer.
    pub(crate) fn stream_starter(&self) -> RoundStarter<M::Stream> {
        let model = self.model.clone();
        Box::new(move |request| {
            let model = model.clone();
            Box::pin(async move { model.converse_stream(&request).await })
        })
    }

    /// Starts each round of a buffered answer: the whole reply, read as a stream.
    pub(crate) fn reply_starter(&self) -> RoundStarter<ReplyStream> {
        let model = self.model.clone();
        Box::new(move |request| {
            let model = model.clone();
            Box::pin(async move { model.converse(&request).await.map(ReplyStream::new) })
        })
    }

    /// Counts what each user spends in `ledger`, and holds them to `limits` (checked before every turn when any
    /// is set). `None` counts nothing and limits nothing.
    pub fn with_usage(mut self, ledger: Option<Arc<dyn UsageLedger>>, limits: Limits) -> Self {
        self.ledger = ledger;
        self.usage_limits = if self.ledger.is_some() {
            limits
        } else {
            Limits::default()
        };
        self
    }

    /// The limits users are held to (before an operator's item raises one user's).
    pub fn usage_limits(&self) -> &Limits {
        &self.usage_limits
    }

    /// Admits a turn, before anything is asked of the model: under a limit, in one atomic write of its caller's
    /// counters, refuses it when they are over a quota (what they spent and what their turns in progress hold) or
    /// the rate limit, and otherwise counts the request and holds what the turn's first model call may spend: a
    /// prompt up to the budget and the output cap, priced. The account returned covers every later call and
    /// settles once the turn is over. With no limit configured nothing is written now: the turn is recorded once
    /// it ends. Without a ledger nothing is written, and the account only adds up.
    pub async fn admit(
        &self,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<TurnAccount, ChatError> {
        self.admit_under(&self.settings, caller, input).await
    }

    /// [`Self::admit`] for a turn that answers under `settings` (a completion's model, priced as it is).
    pub(crate) async fn admit_under(
        &self,
        settings: &ChatSettings,
        caller: &Caller,
        input: &TurnInput,
    ) -> Result<TurnAccount, ChatError> {
        let prices = settings.model.prices;
        let ceiling = Reserve::of_call(
            settings.model.max_prompt_tokens,
            u64::from(crate::prompt::output_cap(settings, input)),
            prices.as_ref(),
        );
        self.open_account(&caller.owner, ceiling, 1, prices).await
    }

    /// Admits a turn ([`Self::admit`]) while its chat is read ([`Self::begin`]): the two at once, so that the
    /// admission's write costs the turn no time. A refused turn is refused whatever the read found; a turn admitted
    /// whose read fails is closed again.
    pub(crate) async fn admit_and_begin(
        &self,
        settings: &ChatSettings,
        caller: &Caller,
        input: &TurnInput,
        mode: crate::ChatMode,
        budget: crate::HistoryBudget,
    ) -> Result<(TurnAccount, crate::Session), ChatError> {
        let (admitted, begun) = futures_util::future::join(
            self.admit_under(settings, caller, input),
            self.begin(&caller.owner, input, mode, budget),
        )
        .await;
        let mut account = admitted?;
        match begun {
            Ok(session) => Ok((account, session)),
            Err(e) => {
                account.close().await;
                Err(e)
            }
        }
    }

    /// Keeps the files of messages in `attachments`, per owner; `None` takes no files.
    pub fn with_attachments(mut self, attachments: Option<Arc<dyn AttachmentStore>>) -> Self {
        self.attachments = attachments;
        self
    }

    /// Where the owners' files are kept, when anywhere.
    pub fn attachments(&self) -> Option<&dyn AttachmentStore> {
        self.attachments.as_deref()
    }

    /// Grounds standard turns in what `retriever` finds; `None` answers from the model alone.
    pub fn with_retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.retriever = retriever;
        self
    }

    pub fn settings(&self) -> &ChatSettings {
        &self.settings
    }

    pub fn store(&self) -> &St {
        &self.store
    }

    pub(crate) fn model(&self) -> &M {
        &self.model
    }
}

impl<M, St> ChatService<M, St> {
    /// The account of a request of `owner`'s whose first model call may spend `ceiling`, counting `requests`
    /// requests against the rate limit and the request quotas (a chat turn one; a request to embed one per model
    /// call: [`Hold::requests`]): admitted in one atomic write when a limit of turns is configured (refused when
    /// over it, or when its requests would pass a limit of requests), else opened with nothing written, to be
    /// recorded once it ends with its requests. Without a ledger nothing is written, and the account only adds up.
    pub(crate) async fn open_account(
        &self,
        owner: &str,
        ceiling: Reserve,
        requests: u64,
        prices: Option<crate::Prices>,
    ) -> Result<TurnAccount, ChatError> {
        let Some(ledger) = self.ledger.clone() else {
            return Ok(TurnAccount::unmetered(prices));
        };
        let now = OffsetDateTime::now_utc();
        if !self.usage_limits.counts(Family::Turns) {
            // No limit to hold the turn to (a user's own item only replaces or lifts a configured one): nothing
            // stands before its model call.
            return Ok(TurnAccount::held(
                ledger,
                Hold::unadmitted(owner, now).counting(requests),
                prices,
            ));
        }
        let hold = Hold::new(owner, ceiling, now).counting(requests);
        match ledger.admit(&hold, &self.usage_limits).await {
            Ok(Ok(())) => Ok(TurnAccount::held(ledger, hold, prices)),
            Ok(Err(refused)) => {
                tracing::info!(limit = ?refused.kind, retry_after = refused.retry_after, "over a limit: turn refused");
                Err(ChatError::OverLimit(refused))
            }
            Err(e) => Err(ChatError::Store(e)),
        }
    }
}
