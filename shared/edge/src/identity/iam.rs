//! The caller a function URL's `AWS_IAM` auth vouches for: the Cognito identity when the caller came through an
//! identity pool (whose users share one role), else the IAM user or role's ARN.

use lambda_http::request::RequestContext;

use super::{CallerParts, usable_name};

const NO_IAM_CALLER: &str =
    "the request carries no IAM caller (is the function URL's AuthType AWS_IAM?)";

pub(super) fn iam_caller(request: &impl CallerParts) -> Result<String, String> {
    let Some(RequestContext::ApiGatewayV2(ctx)) = request.lambda_context() else {
        return Err(NO_IAM_CALLER.into());
    };
    let Some(iam) = ctx.authorizer.as_ref().and_then(|a| a.iam.as_ref()) else {
        return Err(NO_IAM_CALLER.into());
    };
    // Callers with Cognito identity-pool credentials all assume one role: their identity id tells them apart.
    // A name that is present but empty is refused, never passed over for a broader one (the shared role's ARN).
    if let Some(id) = iam
        .cognito_identity
        .as_ref()
        .and_then(|c| c.identity_id.as_deref())
    {
        return usable_name("the caller's Cognito identity id", id)
            .map(|id| format!("cognito:{id}"));
    }
    match (iam.user_arn.as_deref(), iam.caller_id.as_deref()) {
        (Some(arn), _) => usable_name("the caller's userArn", arn).map(str::to_string),
        (None, Some(id)) => usable_name("the caller's callerId", id).map(str::to_string),
        (None, None) => Err(NO_IAM_CALLER.into()),
    }
}
