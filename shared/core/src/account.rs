//! One turn's account with its owner's usage counters: admitted holding what its first model call may spend,
//! every later model call covered by a reservation before it starts, every call's spending noted when it ends
//! (reported, or estimated when it failed or was cut off), and settled once, whatever ends the turn. A turn that no
//! limit holds is not admitted: it reserves nothing, and is recorded once, whatever ends it.

use std::sync::Arc;

use crate::{
    ChatError, Hold, ModelError, ModelRequest, Prices, Reserve, TokenUsage, UsageCharge,
    UsageLedger, UsageTotals,
};

/// What one turn holds in and has settled with its owner's counters. Without a ledger it only adds up what the
/// turn spent.
pub struct TurnAccount {
    ledger: Option<Arc<dyn UsageLedger>>,
    /// The turn's reservation while it is open; `None` once settled for the last time (or without a ledger).
    hold: Option<Hold>,
    prices: Option<Prices>,
    /// What every model call of the turn spent so far (an estimate for a call that reported nothing).
    spent: UsageTotals,
    /// The part of `spent` the counters hold as spent.
    settled: UsageTotals,
    /// How many model calls `spent` adds up (those that certainly did not run are not among them).
    calls: u32,
}

impl TurnAccount {
    /// An account that counts nowhere: a service without a ledger.
    pub(crate) fn unmetered(prices: Option<Prices>) -> Self {
        Self {
            ledger: None,
            hold: None,
            prices,
            spent: UsageTotals::default(),
            settled: UsageTotals::default(),
            calls: 0,
        }
    }

    /// The account of a turn admitted with `hold` in `ledger`, or to be recorded there once it ends when `hold` was
    /// not admitted ([`Hold::unadmitted`]).
    pub(crate) fn held(ledger: Arc<dyn UsageLedger>, hold: Hold, prices: Option<Prices>) -> Self {
        Self {
            ledger: Some(ledger),
            hold: Some(hold),
            ..Self::unmetered(prices)
        }
    }

    /// This account, leaving in its place one that counts nowhere: for the step that hands it on.
    pub(crate) fn take(&mut self) -> TurnAccount {
        std::mem::replace(self, TurnAccount::unmetered(self.prices))
    }

    /// The turn's reservation, while it is open.
    pub fn hold(&self) -> Option<&Hold> {
        self.hold.as_ref()
    }

    /// What the turn's model calls have spent so far.
    pub fn spent(&self) -> UsageTotals {
        self.spent
    }

    /// How many model calls the turn made that may have spent (reported, or estimated).
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// Notes a model call that reported `usage` (or that is estimated to have spent it).
    pub(crate) fn add_call(&mut self, usage: TokenUsage) {
        self.spent
            .add(&UsageTotals::of(usage, self.prices.as_ref()));
        self.calls += 1;
    }

    /// The most `request` can spend: its prompt (`prompt` tokens when the turn counted or estimated them, else
    /// estimated here) and its output cap.
    pub(crate) fn ceiling(&self, request: &ModelRequest, prompt: Option<u64>) -> Reserve {
        let prompt = prompt.unwrap_or_else(|| crate::budget::estimate_request_tokens(request));
        Reserve::of_call(
            prompt,
            u64::from(request.inference.max_tokens),
            self.prices.as_ref(),
        )
    }

    /// Before a model call that may spend `ceiling`: when what the counters hold for the turn (what it settled and
    /// its reservation) does not cover what it spent and this call, the turn settles what it spent and reserves
    /// the call, in one write. A write that fails fails the call before it is made: no call runs uncovered.
    pub(crate) async fn cover(&mut self, ceiling: Reserve) -> Result<(), ChatError> {
        let (Some(ledger), Some(hold)) = (self.ledger.as_ref(), self.hold.as_mut()) else {
            return Ok(());
        };
        if !hold.admitted {
            // No limit holds the turn: nothing to reserve, and nothing written before it ends.
            return Ok(());
        }
        let held = Reserve::of_spent(&self.settled).plus(&hold.reserved);
        if held.covers(&Reserve::of_spent(&self.spent).plus(&ceiling)) {
            return Ok(());
        }
        let delta = difference(&self.spent, &self.settled);
        ledger
            .settle(hold, &delta, Some(ceiling))
            .await
            .map_err(ChatError::Store)?;
        hold.version += 1;
        hold.reserved = ceiling;
        self.settled = self.spent;
        Ok(())
    }

    /// Notes a model call `request` that failed with `error` before it reported what it spent: nothing when the
    /// model certainly did not run (throttled, refused, not found, not allowed, too long), else its prompt and its
    /// whole output cap, which it may have spent (no answer in time, a connection lost, a server fault).
    pub(crate) fn call_failed(
        &mut self,
        request: &ModelRequest,
        prompt: Option<u64>,
        error: &ModelError,
    ) {
        if model_did_not_run(error) {
            return;
        }
        let ceiling = self.ceiling(request, prompt);
        self.add_call(TokenUsage {
            input_tokens: ceiling.tokens - u64::from(request.inference.max_tokens),
            output_tokens: u64::from(request.inference.max_tokens),
            total_tokens: ceiling.tokens,
            ..TokenUsage::default()
        });
    }

    /// Starts a model call of `request` (`call`, not yet polled) once it is covered; a call that fails has its
    /// spending noted as [`Self::call_failed`] says. A call that starts notes what it spends when it reports it.
    pub(crate) async fn start<T>(
        &mut self,
        request: &ModelRequest,
        prompt: Option<u64>,
        call: impl std::future::Future<Output = Result<T, ModelError>>,
    ) -> Result<T, ChatError> {
        self.cover(self.ceiling(request, prompt)).await?;
        call.await.map_err(|e| {
            self.call_failed(request, prompt, &e);
            ChatError::from(e)
        })
    }

    /// [`Self::start`] for a turn's first call: a call that does not start ends the turn, which is closed.
    pub(crate) async fn start_or_close<T>(
        &mut self,
        request: &ModelRequest,
        prompt: Option<u64>,
        call: impl std::future::Future<Output = Result<T, ModelError>>,
    ) -> Result<T, ChatError> {
        let started = self.start(request, prompt, call).await;
        if started.is_err() {
            self.close().await;
        }
        started
    }

    /// A buffered model call, covered first, its spending noted whatever its outcome.
    pub(crate) async fn converse<M: crate::ChatModel>(
        &mut self,
        model: &M,
        request: &ModelRequest,
    ) -> Result<crate::ModelReply, ChatError> {
        let reply = self.start(request, None, model.converse(request)).await?;
        self.add_call(reply.usage);
        Ok(reply)
    }

    /// What the turn spent beyond what it settled, for a store that settles the turn in its own write.
    pub(crate) fn unsettled(&self) -> UsageTotals {
        difference(&self.spent, &self.settled)
    }

    /// The turn's last settlement, for the store writing the turn, when it has an open hold.
    pub(crate) fn charge<'a>(&'a self, unsettled: &'a UsageTotals) -> Option<UsageCharge<'a>> {
        Some(UsageCharge {
            ledger: self.ledger.as_deref()?,
            hold: self.hold.as_ref()?,
            spent: unsettled,
        })
    }

    /// The store made the turn's last settlement in the turn's own write.
    pub(crate) fn settled_with_turn(&mut self) {
        self.settled = self.spent;
        self.hold = None;
    }

    /// Ends the turn: settles everything it spent and releases its reservation, once (a turn not admitted is
    /// recorded). A failure is logged: the reservation then stays counted, more than the turn spent rather than less
    /// (a turn not admitted reserved nothing, and goes uncounted).
    pub async fn close(&mut self) {
        let (Some(ledger), Some(hold)) = (self.ledger.as_ref(), self.hold.take()) else {
            return;
        };
        let delta = difference(&self.spent, &self.settled);
        match last_settlement(ledger.as_ref(), &hold, &delta).await {
            Ok(()) => self.settled = self.spent,
            Err(e) => not_settled(&e, &hold),
        }
    }
}

impl Drop for TurnAccount {
    /// A turn dropped without being closed (a fault between its steps) is closed in the background with what it
    /// had spent; where no runtime is left to do so its reservation stays counted.
    fn drop(&mut self) {
        let (Some(ledger), Some(hold)) = (self.ledger.clone(), self.hold.take()) else {
            return;
        };
        let delta = difference(&self.spent, &self.settled);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = last_settlement(ledger.as_ref(), &hold, &delta).await {
                    not_settled(&e, &hold);
                }
            });
        }
    }
}

/// The turn's last write to its owner's counters: its hold released with what it spent since its last settlement
/// when it was admitted, else the whole turn recorded.
async fn last_settlement(
    ledger: &dyn UsageLedger,
    hold: &Hold,
    unsettled: &UsageTotals,
) -> Result<(), crate::StoreError> {
    if hold.admitted {
        ledger.settle(hold, unsettled, None).await
    } else {
        ledger.record(hold, unsettled).await
    }
}

/// Logs a turn's last settlement that failed: an admitted turn's reservation stays counted, a turn not admitted
/// (no limit held it) goes uncounted.
fn not_settled(error: &crate::StoreError, hold: &Hold) {
    if hold.admitted {
        tracing::warn!(error = %error, turn = %hold.id, "the turn's usage was not settled: its reservation stays counted");
    } else {
        tracing::warn!(error = %error, turn = %hold.id, "the turn's usage was not settled: it was not recorded");
    }
}

/// Whether a failed model call certainly spent nothing: the model refused the request before running it.
pub(crate) fn model_did_not_run(error: &ModelError) -> bool {
    matches!(
        error,
        ModelError::Throttled
            | ModelError::AccessDenied(_)
            | ModelError::NotFound(_)
            | ModelError::Rejected(_)
            | ModelError::InputTooLong(_)
    )
}

/// `all` less `part` (of which it is the sum with something else).
fn difference(all: &UsageTotals, part: &UsageTotals) -> UsageTotals {
    let (a, b) = (&all.tokens, &part.tokens);
    UsageTotals {
        tokens: TokenUsage {
            input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
            output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
            total_tokens: a.total_tokens.saturating_sub(b.total_tokens),
            cache_read_input_tokens: a
                .cache_read_input_tokens
                .saturating_sub(b.cache_read_input_tokens),
            cache_write_input_tokens: a
                .cache_write_input_tokens
                .saturating_sub(b.cache_write_input_tokens),
        },
        cost_usd: match (all.cost_usd, part.cost_usd) {
            (None, _) => None,
            (Some(a), b) => Some(crate::usage::round_dollars(a - b.unwrap_or(0.0)).max(0.0)),
        },
    }
}
