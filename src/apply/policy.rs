//! The one place that decides what a provider error means for the executor:
//! retry after a backoff, fall back (capacity), or fail. Synchronous and pure, in the
//! spirit of kube-runtime's `error_policy`.

use std::time::Duration;

use crate::providers::{ErrorClass, ProviderError};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Try the same call again (same idempotency token) after this long.
    Retry(Duration),
    /// No capacity here: try the pool's fallback (other zone, type, on-demand).
    Fallback,
    /// Give up on this operation.
    Fail,
}

/// Attempts allowed per class before giving up.
pub const MAX_RETRIES: u32 = 6;
pub const MAX_THROTTLE_RETRIES: u32 = 10;

/// `attempt` counts failures so far for this call (1 after the first failure).
pub fn decide(err: &ProviderError, attempt: u32, jitter_seed: u64) -> Decision {
    match err.class {
        ErrorClass::OutOfCapacity => Decision::Fallback,
        ErrorClass::Retryable if attempt <= MAX_RETRIES => Decision::Retry(backoff(attempt, 100, 5_000, jitter_seed)),
        ErrorClass::Throttled if attempt <= MAX_THROTTLE_RETRIES => {
            let base = backoff(attempt, 500, 20_000, jitter_seed);
            let told = err.retry_after_secs.map(Duration::from_secs_f64).unwrap_or_default();
            Decision::Retry(base.max(told))
        }
        _ => Decision::Fail,
    }
}

/// Exponential backoff with deterministic "full jitter" between half and all of the
/// exponential step, capped.
fn backoff(attempt: u32, base_ms: u64, cap_ms: u64, seed: u64) -> Duration {
    let exp = base_ms.saturating_mul(1u64 << attempt.min(16)).min(cap_ms);
    let mix = (seed ^ (attempt as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let half = exp / 2;
    Duration::from_millis(half + mix % (half + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(class: ErrorClass) -> ProviderError {
        ProviderError::new(class, "X", "x")
    }

    #[test]
    fn classes_map_to_decisions() {
        assert_eq!(decide(&e(ErrorClass::OutOfCapacity), 1, 0), Decision::Fallback);
        assert!(matches!(decide(&e(ErrorClass::Retryable), 1, 0), Decision::Retry(_)));
        assert_eq!(decide(&e(ErrorClass::Retryable), MAX_RETRIES + 1, 0), Decision::Fail);
        for c in [ErrorClass::Invalid, ErrorClass::Auth, ErrorClass::Quota, ErrorClass::Fatal] {
            assert_eq!(decide(&e(c), 1, 0), Decision::Fail, "{c:?}");
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let d = |a| match decide(&e(ErrorClass::Retryable), a, 7) {
            Decision::Retry(d) => d,
            other => panic!("{other:?}"),
        };
        assert!(d(1) <= Duration::from_millis(200));
        assert!(d(5) >= Duration::from_millis(1_600));
        assert!(d(6) <= Duration::from_millis(5_000));
        let mut t = e(ErrorClass::Throttled);
        t.retry_after_secs = Some(30.0);
        assert_eq!(decide(&t, 1, 0), Decision::Retry(Duration::from_secs(30)));
    }
}
