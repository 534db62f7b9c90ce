//! The remote lock's liveness: the [`Heartbeat`] that renews a held lock by
//! compare-and-swap and keeps its [`Fence`], and how long this process has watched a
//! waited-on lock unchanged (the takeover's measure, on its own monotonic clock).

use std::collections::BTreeMap;
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use super::{RemoteBackend, Seen};
use crate::state::fence::{self, Fence};
use crate::state::holder::{LockInfo, count_renew_failure};

/// Each lock object this process has waited on: the version and content it last saw, and
/// since when on its own monotonic clock. Process-wide, because a reconcile loop opens its
/// backend again every round: a lock watched unchanged across rounds for the TTL is
/// abandoned as surely as one watched within a single wait.
static OBSERVED: Mutex<BTreeMap<String, (Seen, [u8; 32], Instant)>> = Mutex::new(BTreeMap::new());

/// How long this process has seen the lock at `url` as exactly this version (`seen`) and
/// content (`bytes`: a store that reports no version still shows a renewal there).
pub(super) fn unchanged_for(url: &str, seen: &Seen, bytes: &[u8]) -> Duration {
    let digest = digest(bytes);
    let mut observed = OBSERVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let entry = observed.entry(url.to_string()).or_insert_with(|| (seen.clone(), digest, Instant::now()));
    if entry.0 != *seen || entry.1 != digest {
        *entry = (seen.clone(), digest, Instant::now());
    }
    entry.2.elapsed()
}

/// Renews a held remote lock every [`LockTiming::renew`] (sooner again after a failure):
/// a write conditional on the lock's last version. Each renewal that goes through proves
/// the [`Fence`] again from when it was sent. A renewal the store refuses because the
/// lock changed (taken over, or unlocked) loses the fence for good, naming the new holder
/// when there is one; the heartbeat ends. A renewal that fails otherwise (the store
/// unreachable) is said on stderr, counted (`gpuplan_lock_renew_failures_total`) and
/// tried again; meanwhile the fence lapses on its own once the last renewal is too old.
pub(crate) struct Heartbeat {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    fence: Fence,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat").field("fence", &self.fence).finish()
    }
}

impl Heartbeat {
    pub(super) fn start(backend: RemoteBackend, info: LockInfo, seen: Seen, fence: Fence) -> Heartbeat {
        let (stop, stopped) = mpsc::channel::<()>();
        let beat = Beat { backend, info, seen, fence: fence.clone() };
        let thread = std::thread::Builder::new().name("gpuplan-lock-heartbeat".into()).spawn(move || beat.run(stopped));
        if let Err(e) = &thread {
            // Nothing renews the lock then: its fence lapses after one validity, and the
            // apply starts no operation after that.
            eprintln!("warning: cannot start the state lock's heartbeat: {e}; the lock will not be renewed");
        }
        Heartbeat { stop: Some(stop), thread: thread.ok(), fence }
    }

    /// The fence this heartbeat keeps.
    pub(crate) fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Stop renewing and wait for a renewal in flight.
    pub(crate) fn stop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            // A panicked heartbeat renews nothing more: that is all stopping asks.
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The heartbeat thread's own state.
struct Beat {
    backend: RemoteBackend,
    info: LockInfo,
    /// The lock object's version as our last renewal left it.
    seen: Seen,
    fence: Fence,
}

impl Beat {
    /// Renew until the sender is dropped (the lock released) or the lock is lost.
    fn run(mut self, stopped: mpsc::Receiver<()>) {
        let timing = self.backend.lock_timing;
        let mut wait = timing.renew;
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
            wait = match self.renew() {
                Ok(true) => timing.renew,
                Ok(false) => return,
                // Sooner again: the fence has `renew` or more of margin, and one answer
                // lost should not cost a whole period of it.
                Err(()) => (timing.renew / 4).max(Duration::from_millis(20)),
            };
        }
    }

    /// One renewal: `Ok(true)` done, `Ok(false)` lost, `Err` to be tried again soon.
    fn renew(&mut self) -> Result<bool, ()> {
        let sent = Instant::now();
        self.info.extend((self.backend.wall)(), self.backend.lock_timing.ttl);
        match self.backend.put_lock(&self.info, self.seen.update()) {
            Ok(Some(next)) => {
                self.seen = next;
                self.fence.renewed_at(sent);
                Ok(true)
            }
            Ok(None) => self.refused(),
            Err(e) => {
                count_renew_failure();
                let timing = self.backend.lock_timing;
                eprintln!(
                    "warning: could not renew the state lock `{}`: {e}\n  trying again; without a renewal for {} this run starts no new operation",
                    self.backend.lock_url(),
                    humantime::format_duration(fence::validity(timing.ttl, timing.renew))
                );
                self.fence.renew_failed(e.to_string());
                Err(())
            }
        }
    }

    /// The store refused the renewal: the lock changed since our last one. Still ours when
    /// an earlier renewal went through and only its answer was lost (then renewed again
    /// soon, with the version found); anyone else's (or nobody's) means lost.
    fn refused(&mut self) -> Result<bool, ()> {
        match self.backend.get(&self.backend.lock_key(), "read the lock of") {
            Ok(Some((bytes, seen))) => {
                let now = serde_json::from_slice::<LockInfo>(&bytes).ok();
                if now.as_ref().is_some_and(|n| n.id == self.info.id) {
                    // Renewed with this version soon (not now: no loop on a store that
                    // keeps refusing).
                    self.seen = seen;
                    return Err(());
                }
                self.fence.lose(now.map(|n| format!("it is held by {} now", n.describe())));
                Ok(false)
            }
            Ok(None) => {
                self.fence.lose(Some("it was removed (`gpuplan state unlock`)".into()));
                Ok(false)
            }
            Err(e) => {
                // Changed, but whether by us (an answer lost) or by another is unknown:
                // asked again soon; meanwhile the fence lapses on its own.
                count_renew_failure();
                eprintln!("warning: could not renew the state lock `{}`: {e}", self.backend.lock_url());
                self.fence.renew_failed(e.to_string());
                Err(())
            }
        }
    }
}

pub(super) fn digest(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}
