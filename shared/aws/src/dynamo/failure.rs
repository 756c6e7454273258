//! What a failed call to DynamoDB means for its caller (the store or the usage ledger): the table out of reach,
//! worth trying again later, or a request the table refuses, a fault of ours.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use chat_core::StoreError;

/// What a failed call means for the caller: the store out of reach (no answer in time, no connection, a response
/// cut off, a server error or throttling past the SDK's retries) is [`StoreError::Unavailable`], worth trying again
/// later; anything else (a request the store refuses) is a fault of ours.
pub(crate) fn failed<E>(e: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let unavailable = match &e {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(f) => !f.is_user(),
        SdkError::ServiceError(ctx) => {
            ctx.raw().status().is_server_error() || is_throttling(ctx.err().code())
        }
        _ => false,
    };
    let detail = format!("{:?}", aws_sdk_dynamodb::error::DisplayErrorContext(&e));
    if unavailable {
        StoreError::Unavailable(detail)
    } else {
        StoreError::Failed(detail)
    }
}

/// Whether an error's code says the table throttled the call.
pub(crate) fn is_throttling(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "ThrottlingException"
                | "ThrottlingError"
                | "ProvisionedThroughputExceededException"
                | "ProvisionedThroughputExceeded"
                | "RequestLimitExceeded"
        )
    )
}
