//! What each Bedrock model can do and what it costs, so that a capability (reasoning, prompt caching, a context
//! window, a price) is decided in one table rather than by checks spread over the turn.

use std::str::FromStr;

use serde_json::{Value, json};

use crate::Prices;

/// A setting spelled as one of a few words: its `as_str` and its `FromStr`, from one list of its variants and their
/// words, refusing any other word with the list of those it takes (`must be "low", "medium" or "high"`).
macro_rules! spelled {
    ($name:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($name::$variant),)+
                    _ => Err(must_be(&[$($word),+])),
                }
            }
        }
    };
}

/// Why a word is not one of `words`: `must be "a", "b" or "c"`.
fn must_be(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("must be {} or {last}", rest.join(", ")),
        _ => format!("must be {}", quoted.join("")),
    }
}

/// How hard a reasoning model thinks before it answers (`reasoning_effort`), least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

spelled!(ReasoningEffort {
    Low => "low",
    Medium => "medium",
    High => "high",
});

impl ReasoningEffort {
    /// The thinking budget of models that take one in tokens instead of an effort.
    pub fn budget_tokens(self) -> u32 {
        match self {
            ReasoningEffort::Low => 1024,
            ReasoningEffort::Medium => 4096,
            ReasoningEffort::High => 16_384,
        }
    }

    /// The effort of a model that takes one in place of a thinking budget of `tokens`: the least effort whose
    /// budget holds them (the highest beyond).
    pub fn for_budget(tokens: u32) -> Self {
        [ReasoningEffort::Low, ReasoningEffort::Medium]
            .into_iter()
            .find(|e| tokens <= e.budget_tokens())
            .unwrap_or(ReasoningEffort::High)
    }
}

/// How a model family is asked to reason, in Converse's `additionalModelRequestFields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningStyle {
    /// The model cannot be asked to reason (it may reason on its own, as DeepSeek-R1 does).
    Unsupported,
    /// `thinking: {type: enabled, budget_tokens}` (Claude 3.7 to 4.5).
    AnthropicBudget,
    /// `thinking: {type: adaptive}` with `output_config.effort` (Claude 4.6 and later).
    AnthropicAdaptive,
    /// `reasoningConfig: {type: enabled, maxReasoningEffort}` (Amazon Nova 2).
    NovaEffort,
    /// `reasoning_effort` (OpenAI's open-weight models).
    OpenAiEffort,
}

/// Reasoning as one model call asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reasoning {
    pub effort: ReasoningEffort,
    pub style: ReasoningStyle,
    /// The tokens it thinks within, for the style that takes a budget ([`ReasoningStyle::AnthropicBudget`]): the
    /// effort's own budget unless the client named one.
    pub budget_tokens: u32,
}

impl Reasoning {
    /// Reasoning at `effort` in `style`, within the effort's own budget.
    pub fn new(effort: ReasoningEffort, style: ReasoningStyle) -> Self {
        Self {
            effort,
            style,
            budget_tokens: effort.budget_tokens(),
        }
    }

    /// The request fields that ask the model to reason, in the model provider's own shape.
    pub fn request_fields(&self) -> Value {
        let effort = self.effort.as_str();
        match self.style {
            ReasoningStyle::Unsupported => json!({}),
            ReasoningStyle::AnthropicBudget => {
                json!({"thinking": {"type": "enabled", "budget_tokens": self.budget_tokens}})
            }
            ReasoningStyle::AnthropicAdaptive => {
                json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": effort}})
            }
            ReasoningStyle::NovaEffort => {
                json!({"reasoningConfig": {"type": "enabled", "maxReasoningEffort": effort}})
            }
            ReasoningStyle::OpenAiEffort => json!({"reasoning_effort": effort}),
        }
    }
}

/// What a model can do and costs, as far as this backend uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelProfile {
    /// The start of the base model ids this profile is for (`anthropic.claude-sonnet-4-5`); empty for the default.
    pub family: &'static str,
    /// Input and output tokens together.
    pub context_window: u64,
    pub reasoning: ReasoningStyle,
    /// Whether Converse takes `cachePoint` blocks for it.
    pub prompt_caching: bool,
    /// On-demand prices in us-east-1 when this was written; `None` when unknown here.
    pub prices: Option<Prices>,
    /// Whether Bedrock's `CountTokens` counts its prompts exactly (Claude from 3.5 on; not Nova, Llama or the
    /// open-weight models, and not every newer Claude in every Region: a refusal turns counting off at run time).
    pub token_counting: bool,
    /// Whether Converse's `toolChoice` (`any`, or a named tool) may make it call a tool (Claude, Nova, Mistral
    /// Large, as Bedrock documents it).
    pub tool_choice: bool,
    /// Whether Converse's `outputConfig.textFormat` holds its answer to a JSON schema (Bedrock's structured output:
    /// Claude from 4.5 and OpenAI's open-weight models when this was written).
    pub structured_output: bool,
    /// Whether it takes `top_k` in Converse's `additionalModelRequestFields` (Anthropic's Claude).
    pub top_k: bool,
    /// The most tokens one answer may hold (Converse's `maxTokens`), as Bedrock documents the model.
    pub max_output_tokens: u32,
    /// Whether it takes `temperature` or `top_p`, not both (Claude from 4.5 on Bedrock refuses the two together).
    pub temperature_or_top_p: bool,
}

const fn profile(
    family: &'static str,
    context_window: u64,
    reasoning: ReasoningStyle,
    prompt_caching: bool,
    prices: Option<Prices>,
) -> ModelProfile {
    ModelProfile {
        family,
        context_window,
        reasoning,
        prompt_caching,
        prices,
        token_counting: false,
        tool_choice: false,
        structured_output: false,
        top_k: false,
        max_output_tokens: 8192,
        temperature_or_top_p: false,
    }
}

/// A Claude of 3.5 Haiku or later: a 200k window, prompt caching, prompts `CountTokens` counts, tool choice and
/// `top_k`.
const fn claude(
    family: &'static str,
    reasoning: ReasoningStyle,
    prices: Option<Prices>,
) -> ModelProfile {
    profile(family, 200_000, reasoning, true, prices)
        .counted()
        .choosing()
        .top_k()
}

impl ModelProfile {
    /// The same profile, for a model whose prompts `CountTokens` counts.
    const fn counted(mut self) -> Self {
        self.token_counting = true;
        self
    }

    /// The same profile, for a model `toolChoice` can make call a tool.
    const fn choosing(mut self) -> Self {
        self.tool_choice = true;
        self
    }

    /// The same profile, for a model that takes Anthropic's `top_k`.
    const fn top_k(mut self) -> Self {
        self.top_k = true;
        self
    }

    /// The same profile, for a model Bedrock's structured output holds to a JSON schema.
    const fn structured(mut self) -> Self {
        self.structured_output = true;
        self
    }

    /// The same profile, for a model whose answers hold at most `tokens`.
    const fn output(mut self, tokens: u32) -> Self {
        self.max_output_tokens = tokens;
        self
    }
}

/// A Claude of 4.5 or later, answering up to `output` tokens: Bedrock's structured output, and `temperature` or
/// `top_p`, not both.
const fn claude_4_5(
    family: &'static str,
    reasoning: ReasoningStyle,
    prices: Option<Prices>,
    output: u32,
) -> ModelProfile {
    let mut profile = claude(family, reasoning, prices)
        .structured()
        .output(output);
    profile.temperature_or_top_p = true;
    profile
}

use ReasoningStyle::{AnthropicAdaptive, AnthropicBudget, NovaEffort, OpenAiEffort, Unsupported};

const SONNET: Option<Prices> = Some(Prices::new(3.0, 15.0, 0.30, 3.75));
const OPUS_4_5: Option<Prices> = Some(Prices::new(5.0, 25.0, 0.50, 6.25));

/// The known families, a longer id start before a shorter one it begins with. The output limits are Bedrock's
/// documented `maxTokens` bounds when this was written.
const PROFILES: &[ModelProfile] = &[
    claude_4_5(
        "anthropic.claude-opus-4-6",
        AnthropicAdaptive,
        OPUS_4_5,
        128_000,
    ),
    claude_4_5(
        "anthropic.claude-opus-4-7",
        AnthropicAdaptive,
        OPUS_4_5,
        128_000,
    ),
    claude_4_5(
        "anthropic.claude-sonnet-4-6",
        AnthropicAdaptive,
        SONNET,
        64_000,
    ),
    claude_4_5("anthropic.claude-opus-5", AnthropicAdaptive, None, 64_000),
    claude_4_5("anthropic.claude-sonnet-5", AnthropicAdaptive, None, 64_000),
    claude_4_5(
        "anthropic.claude-opus-4-5",
        AnthropicBudget,
        OPUS_4_5,
        64_000,
    ),
    claude_4_5(
        "anthropic.claude-sonnet-4-5",
        AnthropicBudget,
        SONNET,
        64_000,
    ),
    claude_4_5(
        "anthropic.claude-haiku-4-5",
        AnthropicBudget,
        Some(Prices::new(1.0, 5.0, 0.10, 1.25)),
        64_000,
    ),
    claude(
        "anthropic.claude-opus-4",
        AnthropicBudget,
        Some(Prices::new(15.0, 75.0, 1.50, 18.75)),
    )
    .output(32_000),
    claude("anthropic.claude-sonnet-4", AnthropicBudget, SONNET).output(64_000),
    claude("anthropic.claude-3-7-sonnet", AnthropicBudget, SONNET).output(64_000),
    claude(
        "anthropic.claude-3-5-haiku",
        Unsupported,
        Some(Prices::new(0.80, 4.0, 0.08, 1.0)),
    ),
    profile(
        "anthropic.claude-3-5-sonnet",
        200_000,
        Unsupported,
        false,
        Some(Prices::new(3.0, 15.0, 3.0, 3.0)),
    )
    .counted()
    .choosing()
    .top_k(),
    profile(
        "anthropic.claude-3-haiku",
        200_000,
        Unsupported,
        false,
        Some(Prices::new(0.25, 1.25, 0.25, 0.25)),
    )
    .choosing()
    .top_k()
    .output(4096),
    profile("anthropic.claude", 200_000, Unsupported, false, None)
        .choosing()
        .top_k()
        .output(4096),
    profile("amazon.nova-2-lite", 1_000_000, NovaEffort, true, None)
        .choosing()
        .output(65_536),
    profile("amazon.nova-premier", 1_000_000, Unsupported, true, None)
        .choosing()
        .output(32_000),
    profile(
        "amazon.nova-pro",
        300_000,
        Unsupported,
        true,
        Some(Prices::new(0.80, 3.20, 0.20, 0.80)),
    )
    .choosing()
    .output(10_000),
    profile(
        "amazon.nova-lite",
        300_000,
        Unsupported,
        true,
        Some(Prices::new(0.06, 0.24, 0.015, 0.06)),
    )
    .choosing()
    .output(10_000),
    profile(
        "amazon.nova-micro",
        128_000,
        Unsupported,
        true,
        Some(Prices::new(0.035, 0.14, 0.00875, 0.035)),
    )
    .choosing()
    .output(10_000),
    profile(
        "meta.llama3-3-70b",
        128_000,
        Unsupported,
        false,
        Some(Prices::new(0.72, 0.72, 0.72, 0.72)),
    ),
    profile("meta.llama", 128_000, Unsupported, false, None).output(2048),
    profile(
        "openai.gpt-oss-120b",
        128_000,
        OpenAiEffort,
        false,
        Some(Prices::new(0.15, 0.60, 0.15, 0.15)),
    )
    .structured()
    .output(32_768),
    profile(
        "openai.gpt-oss-20b",
        128_000,
        OpenAiEffort,
        false,
        Some(Prices::new(0.07, 0.30, 0.07, 0.07)),
    )
    .structured()
    .output(32_768),
    profile(
        "deepseek.r1",
        128_000,
        Unsupported,
        false,
        Some(Prices::new(1.35, 5.40, 1.35, 1.35)),
    )
    .output(32_768),
    profile("mistral.mistral-large", 128_000, Unsupported, false, None).choosing(),
];

/// A model this table does not know: a modest window, answers of at most 8192 tokens, nothing asked of it that it
/// might refuse.
const UNKNOWN: ModelProfile = profile("", 32_000, Unsupported, false, None);

/// The foundation model a model id names: an inference profile's id (`us.`, `eu.`, `apac.`, `global.` …) or ARN
/// (`…:inference-profile/us.anthropic…`, `…:foundation-model/anthropic…`) without its prefix. An application
/// inference profile's ARN names no model: it is returned whole (set `BASE_MODEL_ID` for it).
pub fn base_model_id(model_id: &str) -> &str {
    let id = model_id.rsplit_once('/').map_or(model_id, |(_, id)| id);
    match id.split_once('.') {
        // A geography prefix is short and has no `-`-free vendor after it, e.g. `us.` or `us-gov.`.
        Some((prefix, rest))
            if rest.contains('.')
                && matches!(
                    prefix,
                    "us" | "eu" | "apac" | "global" | "jp" | "au" | "ca" | "us-gov" | "ap"
                ) =>
        {
            rest
        }
        _ => id,
    }
}

impl ModelProfile {
    /// The profile of the model `model_id` names.
    pub fn of(model_id: &str) -> ModelProfile {
        let base = base_model_id(model_id);
        PROFILES
            .iter()
            .find(|p| base.starts_with(p.family))
            .copied()
            .unwrap_or(UNKNOWN)
    }

    /// Whether this profile is the fallback for a model the table does not know.
    pub fn is_known(&self) -> bool {
        !self.family.is_empty()
    }
}

/// Converse's latency setting (`performanceConfig.latency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    Standard,
    Optimized,
}

spelled!(Latency {
    Standard => "standard",
    Optimized => "optimized",
});

/// Converse's service tier (`serviceTier.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceTier {
    Default,
    Priority,
    Flex,
}

spelled!(ServiceTier {
    Default => "default",
    Priority => "priority",
    Flex => "flex",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inference_profiles_and_arns_name_their_base_model() {
        for id in [
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0",
        ] {
            assert_eq!(
                base_model_id(id),
                "anthropic.claude-sonnet-4-5-20250929-v1:0",
                "{id}"
            );
            assert_eq!(ModelProfile::of(id).reasoning, AnthropicBudget, "{id}");
        }
        let app = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3";
        assert!(!ModelProfile::of(app).is_known());
    }

    #[test]
    fn a_longer_family_wins_over_the_shorter_it_begins_with() {
        assert_eq!(
            ModelProfile::of("anthropic.claude-sonnet-4-6").reasoning,
            AnthropicAdaptive
        );
        assert_eq!(
            ModelProfile::of("anthropic.claude-sonnet-4-20250514-v1:0").family,
            "anthropic.claude-sonnet-4"
        );
        assert_eq!(
            ModelProfile::of("anthropic.claude-opus-4-1-20250805-v1:0").prices,
            Some(Prices::new(15.0, 75.0, 1.5, 18.75))
        );
        assert_eq!(
            ModelProfile::of("amazon.nova-lite-v1:0").context_window,
            300_000
        );
    }

    #[test]
    fn claude_from_3_5_counts_its_prompts_and_other_families_do_not() {
        for id in [
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "anthropic.claude-3-5-haiku-20241022-v1:0",
            "global.anthropic.claude-opus-4-6-v1",
        ] {
            assert!(ModelProfile::of(id).token_counting, "{id}");
        }
        for id in [
            "anthropic.claude-3-haiku-20240307-v1:0",
            "amazon.nova-pro-v1:0",
            "meta.llama3-3-70b-instruct-v1:0",
            "an.unknown-model",
        ] {
            assert!(!ModelProfile::of(id).token_counting, "{id}");
        }
    }

    #[test]
    fn prices_read_from_configuration_and_cost_a_turn() {
        let p: Prices = "input=3, output=15, cache_read=0.3, cache_write=3.75"
            .parse()
            .unwrap();
        let usage = crate::TokenUsage {
            input_tokens: 1_000,
            output_tokens: 100,
            cache_read_input_tokens: 10_000,
            cache_write_input_tokens: 2_000,
            ..Default::default()
        };
        // 1000×3 + 100×15 + 10000×0.3 + 2000×3.75 = 15000 per million.
        assert!((p.cost(&usage) - 0.015).abs() < 1e-9);
        let plain: Prices = "input=1,output=2".parse().unwrap();
        assert_eq!(plain.cache_read, 1.0);
        assert!("output=2".parse::<Prices>().is_err());
        assert!("input=-1,output=2".parse::<Prices>().is_err());
        assert!("input=1,output=2,other=3".parse::<Prices>().is_err());
    }

    #[test]
    fn a_word_not_taken_is_refused_naming_those_that_are() {
        assert_eq!(
            "max".parse::<ReasoningEffort>().unwrap_err(),
            r#"must be "low", "medium" or "high""#
        );
        assert_eq!(
            "fast".parse::<Latency>().unwrap_err(),
            r#"must be "standard" or "optimized""#
        );
        assert_eq!(
            "".parse::<ServiceTier>().unwrap_err(),
            r#"must be "default", "priority" or "flex""#
        );
        for tier in [
            ServiceTier::Default,
            ServiceTier::Priority,
            ServiceTier::Flex,
        ] {
            assert_eq!(tier.as_str().parse::<ServiceTier>(), Ok(tier));
        }
        assert_eq!("high".parse(), Ok(ReasoningEffort::High));
        assert_eq!(Latency::Optimized.as_str(), "optimized");
    }

    #[test]
    fn reasoning_fields_follow_the_models_style() {
        let r = |style| Reasoning::new(ReasoningEffort::Medium, style);
        assert_eq!(
            r(AnthropicBudget).request_fields(),
            json!({"thinking": {"type": "enabled", "budget_tokens": 4096}})
        );
        assert_eq!(
            r(AnthropicAdaptive).request_fields(),
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}})
        );
        assert_eq!(
            r(NovaEffort).request_fields(),
            json!({"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "medium"}})
        );
        assert_eq!(
            r(OpenAiEffort).request_fields(),
            json!({"reasoning_effort": "medium"})
        );
        let named = Reasoning {
            budget_tokens: 2000,
            ..r(AnthropicBudget)
        };
        assert_eq!(
            named.request_fields(),
            json!({"thinking": {"type": "enabled", "budget_tokens": 2000}})
        );
    }

    #[test]
    fn each_family_answers_up_to_its_own_output_limit() {
        let limit = |id| ModelProfile::of(id).max_output_tokens;
        assert_eq!(
            limit("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            64_000
        );
        assert_eq!(limit("global.anthropic.claude-opus-4-6-v1"), 128_000);
        assert_eq!(limit("anthropic.claude-opus-4-1-20250805-v1:0"), 32_000);
        assert_eq!(limit("anthropic.claude-3-haiku-20240307-v1:0"), 4096);
        assert_eq!(limit("us.amazon.nova-pro-v1:0"), 10_000);
        assert_eq!(limit("an.unknown-model"), 8192);
        // Claude from 4.5 takes temperature or top_p; earlier ones both.
        assert!(
            ModelProfile::of("us.anthropic.claude-haiku-4-5-20251001-v1:0").temperature_or_top_p
        );
        assert!(ModelProfile::of("anthropic.claude-sonnet-4-6").temperature_or_top_p);
        assert!(!ModelProfile::of("anthropic.claude-sonnet-4-20250514-v1:0").temperature_or_top_p);
        assert!(!ModelProfile::of("us.amazon.nova-lite-v1:0").temperature_or_top_p);
    }

    #[test]
    fn a_thinking_budget_takes_the_least_effort_that_holds_it() {
        assert_eq!(ReasoningEffort::for_budget(1024), ReasoningEffort::Low);
        assert_eq!(ReasoningEffort::for_budget(1025), ReasoningEffort::Medium);
        assert_eq!(ReasoningEffort::for_budget(4096), ReasoningEffort::Medium);
        assert_eq!(ReasoningEffort::for_budget(4097), ReasoningEffort::High);
        assert_eq!(ReasoningEffort::for_budget(100_000), ReasoningEffort::High);
    }
}
