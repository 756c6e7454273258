//! Refusing what the configuration does not allow before a turn starts: the request's overrides.

use crate::{ChatSettings, InvalidRequest, ReasoningStyle};

/// Refuses overrides the configuration does not allow: a latency or service tier not in its allowed list,
/// reasoning for a model that cannot be asked to reason, or more reasoning than `MAX_REASONING_EFFORT`.
pub(crate) fn check_overrides(
    settings: &ChatSettings,
    overrides: &crate::Overrides,
) -> Result<(), InvalidRequest> {
    let options = &settings.model;
    if let Some(latency) = overrides
        .latency
        .filter(|l| !options.allowed_latencies.contains(l))
    {
        return Err(InvalidRequest::new(
            "context.overrides.latency",
            format!(
                "{:?} is not allowed here (allowed: {})",
                latency.as_str(),
                allowed(options.allowed_latencies.iter().map(|l| l.as_str()))
            ),
        ));
    }
    if let Some(tier) = overrides
        .service_tier
        .filter(|t| !options.allowed_service_tiers.contains(t))
    {
        return Err(InvalidRequest::new(
            "context.overrides.service_tier",
            format!(
                "{:?} is not allowed here (allowed: {})",
                tier.as_str(),
                allowed(options.allowed_service_tiers.iter().map(|t| t.as_str()))
            ),
        ));
    }
    if overrides.reasoning_effort.is_some()
        && options.profile.reasoning == ReasoningStyle::Unsupported
    {
        return Err(InvalidRequest::new(
            "context.overrides.reasoning_effort",
            format!("the model {} cannot be asked to reason", settings.model_id),
        ));
    }
    if let (Some(asked), Some(most)) = (overrides.reasoning_effort, options.max_reasoning_effort)
        && asked > most
    {
        return Err(InvalidRequest::new(
            "context.overrides.reasoning_effort",
            format!(
                "{:?} is more than this deployment allows (at most {:?})",
                asked.as_str(),
                most.as_str()
            ),
        ));
    }
    Ok(())
}

fn allowed<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<&str> = values.collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}
