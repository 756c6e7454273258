//! The chat core as a service: [`ChatService`] with its ports plugged in (model, store, search, files, usage
//! ledger, tools), built once per cold start, and what every turn asks of it before anything else (admission
//! against the user's limits) and after (counting what it spent).

use std::sync::Arc;

use time::OffsetDateTime;

use crate::driver::RoundStarter;
use crate::{
    AttachmentStore, Caller, ChatError, ChatModel, ChatSettings, Limits, Periods, ReplyStream,
    Retriever, SessionStore, ToolBounds, ToolSource, UsageLedger,
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

    /// Refuses a turn whose caller is over a quota or the rate limit, before anything is asked of the model: one
    /// read of their counters, and, when a rate is limited, the request counted. Nothing when no limit is set.
    pub async fn admit(&self, caller: &Caller) -> Result<(), ChatError> {
        let Some(ledger) = self.ledger.as_deref() else {
            return Ok(());
        };
        if !self.usage_limits.any() {
            return Ok(());
        }
        let periods = Periods::at(OffsetDateTime::now_utc());
        let usage = ledger
            .read(&caller.owner, &periods)
            .await
            .map_err(ChatError::Store)?;
        let limits = self.usage_limits.for_user(&usage.overrides);
        if let Err(refused) = crate::check(&limits, &usage, &periods) {
            tracing::info!(limit = ?refused.kind, retry_after = refused.retry_after, "over a limit: turn refused");
            return Err(ChatError::OverLimit(refused));
        }
        if limits.requests_per_minute.is_some() {
            ledger
                .count_request(&caller.owner, &periods)
                .await
                .map_err(ChatError::Store)?;
        }
        Ok(())
    }

    /// Counts a turn that ended before its answer did (its client went away, or the model failed on the way) with
    /// what it had spent ([`StreamingTurn::spent_so_far`], [`crate::AgentRound::spent`]). Without this, a client that
    /// always hangs up just before the end would spend without limit.
    pub async fn count_unfinished(&self, caller: &Caller, spent: crate::TurnSpent) {
        self.count_spent(&caller.owner, &spent).await;
    }

    /// Adds what a turn spent to its caller's counters through the ledger: for a turn whose store write did not
    /// add it ([`crate::Charged::No`]), or that was not stored. A failure is logged, not the turn's: its answer stands,
    /// and the counter is short by this turn rather than counted twice by a blind retry.
    pub(crate) async fn count_spent(&self, owner: &str, spent: &crate::TurnSpent) {
        let Some(ledger) = self.ledger.as_deref() else {
            return;
        };
        let periods = Periods::at(OffsetDateTime::now_utc());
        if let Err(e) = ledger.record(owner, &periods, &spent.totals).await {
            tracing::warn!(error = %e, "the turn's usage was not counted");
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

    pub(crate) fn retriever(&self) -> Option<&dyn Retriever> {
        self.retriever.as_deref()
    }
}
