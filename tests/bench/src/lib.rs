//! Running the functions' real binaries as Lambda runs them, for tests and `make bench`: a Runtime API emulator
//! that hands out function URL events and receives (streamed) responses with each line's arrival time, the
//! function processes it drives, and a look at a function's own sockets from outside.

pub mod emulator;
pub mod function;
pub mod sockets;

pub use emulator::{Emulator, EmulatorOptions, Invocation, Line, function_url_event};
pub use function::Function;
pub use sockets::tcp_nodelay_of;

/// The `q`-quantile (0 ≤ q ≤ 1) of `values` by the nearest-rank method; `None` when there are none.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn nearest_rank_quantiles() {
        let values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(quantile(&values, 0.5), Some(50.0));
        assert_eq!(quantile(&values, 0.99), Some(99.0));
        assert_eq!(quantile(&values, 1.0), Some(100.0));
        assert_eq!(quantile(&values, 0.0), Some(1.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
