//! Refusing what the configuration does not allow before a turn starts: the request's overrides.

use crate::{ChatSettings, InvalidRequest, ReasoningStyle};

/// Refuses overrides the configuration does not allow: a latency or service tier not in its allowed list,
/// reasoning for a model that cannot be asked to reason, or more reasoning than `MAX_REASONING_EFFORT`.
pub(crate) fn check_overrides(
    settings: &ChatSettings,
    overrides: &crate::Overrides,
) -> Result<(), InvalidRequest> {
    let options = &settings.model;
    only_allowed(
        "context.overrides.latency",
        overrides.latency,
        &options.allowed_latencies,
        |l| l.as_str(),
    )?;
    only_allowed(
        "context.overrides.service_tier",
        overrides.service_tier,
        &options.allowed_service_tiers,
        |t| t.as_str(),
    )?;
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

/// Refuses `asked` (the override `field`) unless it is one of `allowed_values`, naming them (by `name`).
fn only_allowed<T: PartialEq + Copy>(
    field: &str,
    asked: Option<T>,
    allowed_values: &[T],
    name: fn(&T) -> &'static str,
) -> Result<(), InvalidRequest> {
    match asked.filter(|a| !allowed_values.contains(a)) {
        Some(value) => Err(InvalidRequest::new(
            field,
            format!(
                "{:?} is not allowed here (allowed: {})",
                name(&value),
                allowed(allowed_values.iter().map(name))
            ),
        )),
        None => Ok(()),
    }
}

fn allowed<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<&str> = values.collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}
