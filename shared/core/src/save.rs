//! Storing a turn once its answer is complete: the new messages and the answer, all or nothing, with the turn's
//! new files kept first (and removed again when the turn is not stored), and its account settled once: in the
//! turn's own write when the store keeps the usage counters, through the usage ledger otherwise.

use time::OffsetDateTime;

use crate::turn::{Turn, new_stored_messages, rfc3339_millis};
use crate::{
    Charged, ChatError, ChatModel, ChatRecord, ChatService, Session, SessionStore, StoredFile,
    StoredMessage, TurnWrite, UsageCharge, UsageTotals, display_time, title_of,
};

impl<M: ChatModel + 'static, St: SessionStore> ChatService<M, St> {
    /// Stores a turn whose answers are complete: the session's new messages and every answer (a standard answer, or
    /// each agent's message), all or nothing, with what they spent added to the chat's totals, and settles the
    /// turn's account. The turn's new files are kept first; a turn whose messages are not stored removes them again.
    /// `updated_at` (RFC 3339) is the chat's new `lastUpdated`; `None`, now.
    pub(crate) async fn save(
        &self,
        owner: &str,
        turn: &mut Turn,
        updated_at: Option<&str>,
    ) -> Result<(), ChatError> {
        if let Some((call_id, blocks)) = turn.kept_reasoning.take()
            && let Err(e) = self.store.keep_reasoning(owner, &call_id, &blocks).await
        {
            // The answer stands: its continuation is answered without this reasoning.
            tracing::warn!(error = %e, call_id = %call_id, "keeping the reasoning of the tool calls failed");
        }
        let said = std::mem::take(&mut turn.said);
        let (session, account) = (&turn.session, &mut turn.account);
        let mut spent = UsageTotals::default();
        for (_, usage) in &said {
            spent.add(&UsageTotals::of(*usage, turn.prices.as_ref()));
        }
        log_turn(session, &spent);
        let now = OffsetDateTime::now_utc();
        let shown_at = display_time(now.unix_timestamp());
        let files = match self.keep_files(owner, session).await {
            Ok(files) => files,
            Err(e) => {
                // Not stored, but spent all the same.
                account.close().await;
                return Err(e);
            }
        };
        let mut messages = new_stored_messages(session, &shown_at);
        for (message, files) in messages.iter_mut().zip(&files) {
            message.files = files.clone();
        }
        messages.extend(said.into_iter().map(|(message, _)| message));
        let updated_at = updated_at.map_or_else(|| rfc3339_millis(now), str::to_string);
        let stored = self
            .store_and_settle(owner, session, &messages, &updated_at, (&spent, account))
            .await;
        if stored.is_err() {
            let keys: Vec<String> = files.into_iter().flatten().map(|f| f.key).collect();
            self.remove_files(owner, &keys).await;
        }
        stored
    }

    /// Stores the files of the turn's new messages in the owner's files: for each new message, its files as
    /// stored. Nothing is kept for a turn that is not stored; a file that fails removes those stored before it.
    pub(crate) async fn keep_files(
        &self,
        owner: &str,
        session: &Session,
    ) -> Result<Vec<Vec<StoredFile>>, ChatError> {
        let mut kept: Vec<Vec<StoredFile>> = Vec::with_capacity(session.new_messages.len());
        let Some(store) = self.attachments.as_deref().filter(|_| session.kept) else {
            return Ok(kept);
        };
        for message in &session.new_messages {
            let mut files = Vec::new();
            for file in message.files() {
                match store.put(owner, &session.chat_id, file).await {
                    Ok(key) => {
                        let mut stored = file.stored();
                        stored.key = key;
                        files.push(stored);
                    }
                    Err(e) => {
                        let keys: Vec<String> = kept
                            .into_iter()
                            .chain([files])
                            .flatten()
                            .map(|f| f.key)
                            .collect();
                        self.remove_files(owner, &keys).await;
                        return Err(ChatError::Files(e));
                    }
                }
            }
            kept.push(files);
        }
        Ok(kept)
    }

    /// Removes files a failed turn stored. Best effort: what stays is the owner's, unlisted, and expires with the
    /// bucket's lifecycle.
    pub(crate) async fn remove_files(&self, owner: &str, keys: &[String]) {
        if let (Some(store), false) = (&self.attachments, keys.is_empty()) {
            let _ = store.delete(owner, keys).await;
        }
    }

    /// Stores the turn ([`Self::store_turn`]) and settles its account, once: in the turn's own write when the store
    /// keeps the ledger's counters, else through the ledger after the write, whether the turn was stored or not (a
    /// turn not kept, or a write that failed, spent all the same). `spent` is what goes in the chat's totals. The
    /// turn's hold makes its last settlement happen once whichever way it goes: a settlement through the ledger
    /// after a write that landed all the same (its answer lost) finds the hold released and changes nothing.
    pub(crate) async fn store_and_settle(
        &self,
        owner: &str,
        session: &Session,
        messages: &[StoredMessage],
        now: &str,
        (spent, account): (&UsageTotals, &mut crate::TurnAccount),
    ) -> Result<(), ChatError> {
        let unsettled = account.unsettled();
        let stored = self
            .store_turn(
                owner,
                session,
                messages,
                now,
                spent,
                account.charge(&unsettled),
            )
            .await;
        match stored {
            Ok(Charged::WithTurn) => account.settled_with_turn(),
            _ => account.close().await,
        }
        stored.map(|_| ())
    }

    /// Stores `messages` as the turn of `session`: the chat is created by its first turn, continued by the others.
    /// A session that is not kept stores nothing. `now` (RFC 3339) is the chat's new `lastUpdated`. Every turn,
    /// standard or multi-agent, is stored here, with what it `spent` added to the chat's totals; with a `charge`,
    /// the store is offered the turn's last settlement to make in the same write, and says whether it did.
    async fn store_turn(
        &self,
        owner: &str,
        session: &Session,
        messages: &[StoredMessage],
        now: &str,
        spent: &UsageTotals,
        charge: Option<UsageCharge<'_>>,
    ) -> Result<Charged, ChatError> {
        if !session.kept {
            return Ok(Charged::No);
        }
        if session.is_new {
            let chat = ChatRecord {
                id: session.chat_id.clone(),
                mode: session.mode,
                title: title_of(&session.conversation),
                created_at: now.to_string(),
                last_updated: now.to_string(),
                last_message: String::new(),
                message_count: 0,
                usage: *spent,
            };
            Ok(match &charge {
                Some(charge) => {
                    self.store
                        .create_charging(owner, &chat, messages, charge)
                        .await?
                        .1
                }
                None => {
                    self.store.create(owner, &chat, messages).await?;
                    Charged::No
                }
            })
        } else {
            let write = TurnWrite {
                mark: session.read_mark.as_ref(),
                messages,
                spent,
            };
            let chat_id = &session.chat_id;
            Ok(match &charge {
                Some(charge) => {
                    self.store
                        .append_after_charging(owner, chat_id, write, charge)
                        .await?
                        .1
                }
                None => {
                    self.store.append_after(owner, chat_id, write).await?;
                    Charged::No
                }
            })
        }
    }
}

/// Logs what a turn spent, once per turn: tokens, cache use and cost, never its words.
fn log_turn(session: &Session, spent: &UsageTotals) {
    let t = &spent.tokens;
    tracing::info!(
        chat_id = %session.chat_id,
        input_tokens = t.input_tokens,
        output_tokens = t.output_tokens,
        cache_read_input_tokens = t.cache_read_input_tokens,
        cache_write_input_tokens = t.cache_write_input_tokens,
        cost_usd = spent.cost_usd,
        messages_left_out = session.left_out,
        items_read = session.items_read,
        "turn cost"
    );
}
