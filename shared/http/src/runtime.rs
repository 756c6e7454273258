//! Keeping the Lambda runtime loop alive across a failed exchange with the Runtime API.

use std::future::Future;
use std::time::{Duration, Instant};

/// Runs the runtime loop `run` again when it fails, up to three quick failures in a row.
///
/// The loop ends with an error when one response cannot be handed to the Runtime API. On AWS that is rare and
/// the sandbox would be restarted anyway; under `cargo lambda watch` (the local run) it happens when a client
/// hangs up at the wrong moment, and a function that exited is not started again, so every later request would
/// hang. Starting the loop again loses nothing: that one response could not be delivered.
pub async fn keep_running<F, Fut, E>(mut run: F) -> Result<(), E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut quick_failures = 0u32;
    loop {
        let started = Instant::now();
        match run().await {
            Ok(()) => return Ok(()),
            Err(e) => {
                // A loop that ran a while before failing starts the count afresh.
                if started.elapsed() > Duration::from_secs(10) {
                    quick_failures = 0;
                }
                quick_failures += 1;
                if quick_failures > 3 {
                    return Err(e);
                }
                tracing::error!(error = %e, "the runtime loop failed; starting it again");
                tokio::time::sleep(Duration::from_millis(100 * u64::from(quick_failures))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test(start_paused = true)]
    async fn restarts_after_a_failure_and_gives_up_after_three_quick_ones() {
        let calls = Cell::new(0);
        let result: Result<(), String> = keep_running(|| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n == 2 {
                    Ok(())
                } else {
                    Err(format!("failure {n}"))
                }
            }
        })
        .await;
        assert_eq!((result, calls.get()), (Ok(()), 2));

        let calls = Cell::new(0);
        let result: Result<(), String> = keep_running(|| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move { Err(format!("failure {n}")) }
        })
        .await;
        assert_eq!((result, calls.get()), (Err("failure 4".to_string()), 4));
    }
}
