//! Waiting for a condition with a deadline (never a fixed sleep).

use std::future::Future;
use std::time::{Duration, Instant};

use crate::Error;

/// Polls `check` until it yields `Some`, for at most `timeout`. Polls often at first, then every
/// second at most.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(25);
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                timeout,
            });
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}
