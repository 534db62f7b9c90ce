//! The fence: may this process still act under the lock (or Lease) it took? (docs/design/state-and-locks.md,
//! "Expiry and fencing".) A holder consults it before every mutating cloud call and every
//! state write. It holds while the last successful renewal is younger than the lock's
//! validity (its TTL minus a margin of at least one renewal period, [`validity`]) on this
//! process's monotonic clock, and the lock was not lost (a renewal refused because someone
//! else holds it now). A local lock has no expiry (the OS releases a dead holder's lock),
//! so its fence always holds.
//!
//! This file owns the judgement only, never the renewing: the remote lock's heartbeat
//! (`remote.rs`) and the reconcile Lease's election feed it. A check is two atomic loads
//! and a clock read, cheap enough for every call.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a renewal may be trusted: `ttl` minus a margin of at least one renewal period
/// (a third of the TTL when that is more). A waiter takes the lock over only after seeing
/// it unchanged for the full `ttl`, so a holder stops at least the margin before then,
/// and a call it started just in time has the margin to finish.
pub fn validity(ttl: Duration, renew: Duration) -> Duration {
    ttl.saturating_sub(renew.max(ttl / 3))
}

/// A handle on the right to act; clones share it.
#[derive(Clone, Default)]
pub struct Fence(Option<Arc<Inner>>);

struct Inner {
    /// What is held, for messages: ``the state lock `s3://b/k.lock` ``, `` lease `ns/n` ``.
    what: String,
    start: Instant,
    /// Nanoseconds from `start` to when the last successful renewal was sent.
    renewed: AtomicU64,
    valid_for: Duration,
    lost: AtomicBool,
    /// What became of it (`it is held by … now`), when the holder found out.
    taken_by: Mutex<Option<String>>,
    /// Why the last renewal failed, while renewals fail.
    failure: Mutex<Option<String>>,
}

/// Why a fence no longer holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    pub what: String,
    /// Someone else holds it now: a renewal was refused.
    pub lost: bool,
    /// What became of it, when known: a clause such as `it is held by … now`.
    pub taken_by: Option<String>,
    /// Since the last successful renewal was sent.
    pub unrenewed_for: Duration,
    pub valid_for: Duration,
    /// Why the last renewal failed, if one did.
    pub failure: Option<String>,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lost {}: ", self.what)?;
        match (&self.taken_by, self.lost) {
            (Some(what_became), _) => write!(f, "{what_became}"),
            (None, true) => write!(f, "another process holds it now"),
            (None, false) => {
                let secs = |d: Duration| format!("{:.1}s", d.as_secs_f64());
                write!(
                    f,
                    "it was not renewed for {} (it may be trusted for {} after a renewal)",
                    secs(self.unrenewed_for),
                    secs(self.valid_for)
                )?;
                match &self.failure {
                    Some(why) => write!(f, "; the last renewal failed: {why}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.check() {
            Ok(()) => write!(f, "Fence(held)"),
            Err(b) => write!(f, "Fence({b})"),
        }
    }
}

impl Fence {
    /// A right that never expires (a local lock, or no lock at all).
    pub fn unbounded() -> Fence {
        Fence(None)
    }

    /// A right to `what`, renewed now, trusted for `valid_for` after each renewal.
    pub fn new(what: impl Into<String>, valid_for: Duration) -> Fence {
        Fence::since(what, valid_for, Instant::now())
    }

    /// [`Fence::new`], first renewed by a request sent at `start`.
    pub fn since(what: impl Into<String>, valid_for: Duration, start: Instant) -> Fence {
        Fence(Some(Arc::new(Inner {
            what: what.into(),
            start,
            renewed: AtomicU64::new(0),
            valid_for,
            lost: AtomicBool::new(false),
            taken_by: Mutex::new(None),
            failure: Mutex::new(None),
        })))
    }

    /// A renewal sent at `at` succeeded (the send, not the answer, counts: the store may
    /// have taken it at any moment in between). Never moves back.
    pub fn renewed_at(&self, at: Instant) {
        let Some(i) = &self.0 else { return };
        let nanos = u64::try_from(at.saturating_duration_since(i.start).as_nanos()).unwrap_or(u64::MAX);
        i.renewed.fetch_max(nanos, Ordering::SeqCst);
        *i.failure.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// A renewal failed for a reason that may pass (the store did not answer).
    pub fn renew_failed(&self, why: impl Into<String>) {
        if let Some(i) = &self.0 {
            *i.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(why.into());
        }
    }

    /// Someone else holds it now (`taken_by` says who, as a clause: `it is held by …
    /// now`, when known). For good: no renewal follows.
    pub fn lose(&self, taken_by: Option<String>) {
        let Some(i) = &self.0 else { return };
        if taken_by.is_some() {
            *i.taken_by.lock().unwrap_or_else(PoisonError::into_inner) = taken_by;
        }
        i.lost.store(true, Ordering::SeqCst);
    }

    /// Held now, or why not.
    pub fn check(&self) -> Result<(), Broken> {
        let Some(i) = &self.0 else { return Ok(()) };
        let renewed = i.start + Duration::from_nanos(i.renewed.load(Ordering::SeqCst));
        let unrenewed_for = renewed.elapsed();
        let lost = i.lost.load(Ordering::SeqCst);
        if !lost && unrenewed_for < i.valid_for {
            return Ok(());
        }
        Err(Broken {
            what: i.what.clone(),
            lost,
            taken_by: i.taken_by.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            unrenewed_for,
            valid_for: i.valid_for,
            failure: i.failure.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        })
    }

    pub fn is_held(&self) -> bool {
        self.check().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_holds_while_renewed_within_its_validity_and_never_once_lost() {
        assert_eq!(validity(Duration::from_secs(60), Duration::from_secs(20)), Duration::from_secs(40));
        assert_eq!(validity(Duration::from_secs(3), Duration::from_millis(500)), Duration::from_secs(2));
        assert!(Fence::unbounded().is_held(), "a local lock's fence always holds");

        let fence = Fence::new("the state lock `mem://k.lock`", Duration::from_secs(10));
        assert!(fence.is_held());
        // Not renewed for longer than its validity, on the monotonic clock: not held.
        let long_ago = Instant::now().checked_sub(Duration::from_secs(11)).unwrap();
        let stale = Fence::since("the state lock `mem://k.lock`", Duration::from_secs(10), long_ago);
        stale.renew_failed("503 Service Unavailable");
        let b = stale.check().unwrap_err();
        assert!(!b.lost && b.unrenewed_for >= Duration::from_secs(11), "{b:?}");
        let text = b.to_string();
        assert!(text.starts_with("lost the state lock `mem://k.lock`: it was not renewed for 11"), "{text}");
        assert!(text.contains("503 Service Unavailable"), "{text}");
        // A renewal sent now proves it again; one sent before the last never moves it back.
        stale.renewed_at(Instant::now());
        assert!(stale.is_held());
        stale.renewed_at(long_ago);
        assert!(stale.is_held());

        // Lost: for good, whatever the renewals say, naming the new holder.
        fence.lose(Some("it is held by `gpuplan apply` by ci@runner-2 (id abc) now".into()));
        fence.renewed_at(Instant::now());
        let b = fence.check().unwrap_err();
        assert!(b.lost);
        assert_eq!(
            b.to_string(),
            "lost the state lock `mem://k.lock`: it is held by `gpuplan apply` by ci@runner-2 (id abc) now"
        );
        let clone = fence.clone();
        assert!(!clone.is_held(), "clones share the fence");
    }
}
