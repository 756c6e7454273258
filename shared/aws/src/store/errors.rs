//! What a failed write means for the store: a lost race, a write that certainly did not land, or one that may have
//! landed all the same (which the store then reads back, see [`super::idempotency`]). What any failed call means
//! (worth trying later, or a fault of ours) is [`crate::dynamo::failed`].

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use chat_core::StoreError;

use crate::dynamo::{WriteFailure, is_throttling};

/// Why a write did not land, or may not have.
pub(super) enum WriteError {
    /// Another write of the chat got there first: a condition failed. When it was the commit's, an earlier attempt
    /// of the same commit (the SDK retries one whose answer was lost) may be what changed the chat.
    Race { commit: bool },
    /// Nothing of the write is visible: the commit was never sent, or the store refused it.
    Failed(StoreError),
    /// The commit failed without saying whether it (or an earlier attempt of it) landed.
    Unknown(StoreError),
}

/// Whether a failed commit certainly did not land, on this attempt or an earlier one the SDK made: the store refused
/// the request itself (validation, size, access), as it would have refused every attempt. A lost race, throttling,
/// a server error or no answer at all may hide an earlier attempt that landed.
pub(super) fn refused(e: &WriteFailure) -> bool {
    match e {
        SdkError::ConstructionFailure(_) => true,
        SdkError::ServiceError(ctx) => match ctx.err() {
            TransactWriteItemsError::TransactionCanceledException(c) => {
                c.cancellation_reasons().iter().any(|r| {
                    matches!(
                        r.code(),
                        Some("ValidationError" | "ItemCollectionSizeLimitExceeded")
                    )
                })
            }
            other => {
                ctx.raw().status().is_client_error()
                    && !is_throttling(other.code())
                    && !matches!(
                        other.code(),
                        Some("TransactionInProgressException" | "TransactionConflictException")
                    )
            }
        },
        _ => false,
    }
}

/// Whether a failed transaction lost a race: every item that failed, failed its condition or conflicted with
/// another transaction. Throttling, validation or size failures are faults, not races.
pub(super) fn lost_race(e: &WriteFailure) -> bool {
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
            let reasons = c.cancellation_reasons();
            !reasons.is_empty()
                && reasons.iter().all(|r| {
                    matches!(
                        r.code(),
                        None | Some("None")
                            | Some("ConditionalCheckFailed")
                            | Some("TransactionConflict")
                    )
                })
        }
        Some(other) => other.code() == Some("TransactionConflictException"),
        None => false,
    }
}
