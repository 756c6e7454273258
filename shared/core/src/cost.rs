//! What model calls use and what that costs: each call's tokens, the prices of a million of them, the totals of a
//! turn or a chat, and everything one turn spent. The plain values the model port, the usage ledger, the store and
//! the answers all count in, so they sit below all of them.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Input tokens read afresh: neither read from nor written to the prompt cache.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Every token of the call: input, output, and the cache's reads and writes.
    pub total_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_write_input_tokens: u64,
}

impl TokenUsage {
    /// Both calls' tokens together.
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cache_write_input_tokens += other.cache_write_input_tokens;
    }
}

/// Tokens and what they cost: one turn's, or a chat's running total.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageTotals {
    pub tokens: TokenUsage,
    /// In US dollars; `None` when no price was known for any of it.
    pub cost_usd: Option<f64>,
}

impl UsageTotals {
    /// `usage`, priced by `prices` when known.
    pub fn of(usage: TokenUsage, prices: Option<&Prices>) -> Self {
        Self {
            tokens: usage,
            cost_usd: prices.map(|p| p.cost(&usage)),
        }
    }

    /// Adds another turn's.
    pub fn add(&mut self, other: &UsageTotals) {
        self.tokens.add(&other.tokens);
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(((a.unwrap_or(0.0) + b.unwrap_or(0.0)) * 1e10).round() / 1e10),
        };
    }
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl Prices {
    pub(crate) const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Self {
            input,
            output,
            cache_read,
            cache_write,
        }
    }

    /// What `usage` costs, in US dollars, to a ten-billionth of a dollar (so that sums show no binary noise).
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let micro_dollars = usage.input_tokens as f64 * self.input
            + usage.output_tokens as f64 * self.output
            + usage.cache_read_input_tokens as f64 * self.cache_read
            + usage.cache_write_input_tokens as f64 * self.cache_write;
        (micro_dollars * 10_000.0).round() / 10_000_000_000.0
    }
}

impl FromStr for Prices {
    type Err = String;

    /// `input=3,output=15,cache_read=0.3,cache_write=3.75` (dollars per million tokens; the cache prices default to
    /// the input price when left out).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (mut input, mut output, mut read, mut write) = (None, None, None, None);
        for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not name=price"))?;
            let value: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{pair:?}: the price is not a number of dollars"))?;
            match name.trim() {
                "input" => input = Some(value),
                "output" => output = Some(value),
                "cache_read" => read = Some(value),
                "cache_write" => write = Some(value),
                other => {
                    return Err(format!(
                        "{other:?} is not input, output, cache_read or cache_write"
                    ));
                }
            }
        }
        let input = input.ok_or("input= is required")?;
        let output = output.ok_or("output= is required")?;
        Ok(Prices::new(
            input,
            output,
            read.unwrap_or(input),
            write.unwrap_or(input),
        ))
    }
}

/// What one turn spent, every model call of it counted (the query it wrote, each agent's message, the answer).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TurnSpent {
    pub totals: UsageTotals,
    /// Calls to the model that answered (`CountTokens` costs nothing and is not one).
    pub model_calls: u32,
    pub tool_calls: u32,
}

impl TurnSpent {
    /// Counts one model call that used `usage`, priced by `prices` when known.
    pub fn add_call(&mut self, usage: TokenUsage, prices: Option<&Prices>) {
        self.totals.add(&UsageTotals::of(usage, prices));
        self.model_calls += 1;
    }

    /// Both turns' spending.
    pub fn plus(mut self, other: &TurnSpent) -> TurnSpent {
        self.totals.add(&other.totals);
        self.model_calls += other.model_calls;
        self.tool_calls += other.tool_calls;
        self
    }
}
