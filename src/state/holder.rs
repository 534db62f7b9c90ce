//! Who holds a state lock and for how long: the [`LockInfo`] a lock file or object holds,
//! the remote lock's [`LockTiming`], and this process's counts of taken-over locks and
//! failed renewals. Plain data below the lock (`lock.rs`), the remote store (`remote.rs`)
//! and the errors that name a holder (`error.rs`), which all use it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// Expired remote locks taken over by this process (`gpuplan_lock_takeovers_total`).
static TAKEOVERS: AtomicU64 = AtomicU64::new(0);

/// How many expired remote locks this process has taken over.
pub fn takeovers() -> u64 {
    TAKEOVERS.load(Ordering::Relaxed)
}

pub(crate) fn count_takeover() {
    TAKEOVERS.fetch_add(1, Ordering::Relaxed);
}

/// Failed renewals of remote locks held by this process (`gpuplan_lock_renew_failures_total`).
static RENEW_FAILURES: AtomicU64 = AtomicU64::new(0);

/// How many renewals of a held remote lock failed in this process.
pub fn renew_failures() -> u64 {
    RENEW_FAILURES.load(Ordering::Relaxed)
}

pub(crate) fn count_renew_failure() {
    RENEW_FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// How long a remote lock lives without renewal, and how often its holder renews it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockTiming {
    /// `expires` is set this far ahead at every write (60 s).
    pub ttl: Duration,
    /// The heartbeat's period (20 s): two renewals may fail before the lock expires.
    pub renew: Duration,
}

impl Default for LockTiming {
    fn default() -> Self {
        LockTiming { ttl: Duration::from_secs(60), renew: Duration::from_secs(20) }
    }
}

impl LockTiming {
    /// The defaults, overridden by `GPUPLAN_LOCK_TTL` and `GPUPLAN_LOCK_RENEW` (`2s`,
    /// `500ms`) from `env`: test knobs, so that expiry is seen in seconds.
    pub fn from_env(env: &std::collections::BTreeMap<String, String>) -> Result<LockTiming, String> {
        let mut t = LockTiming::default();
        let get = |key: &str| -> Result<Option<Duration>, String> {
            match env.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => crate::model::time::duration(v)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .map(Some)
                    .ok_or_else(|| format!("`{key}={v}` is not a duration such as `60s`")),
            }
        };
        if let Some(d) = get("GPUPLAN_LOCK_TTL")? {
            t.ttl = d;
        }
        if let Some(d) = get("GPUPLAN_LOCK_RENEW")? {
            t.renew = d;
        }
        if t.renew >= t.ttl {
            return Err(format!(
                "the lock renewal period ({}) must be shorter than its lifetime ({})",
                humantime::format_duration(t.renew),
                humantime::format_duration(t.ttl)
            ));
        }
        Ok(t)
    }
}

/// Who holds the lock, as written in the lock file (OpenTofu's `LockInfo`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LockInfo {
    /// A UUID v4; `gpuplan state unlock ID` must quote it.
    pub id: String,
    /// `user@host`.
    pub who: String,
    /// 0 when the writer did not say (docs/design/state-and-locks.md: readers accept a lock without
    /// it).
    #[serde(default)]
    pub pid: u32,
    /// The command holding it: `apply`, `plan`, `state rm`, ...
    pub operation: String,
    /// RFC 3339, UTC, seconds.
    pub created: String,
    /// A remote lock's expiry (RFC 3339, UTC) by its holder's clock, moved ahead by its
    /// heartbeat: information for people, never compared with another clock. A remote lock
    /// without it never expires (older gpuplan wrote none, and renews nothing). Local
    /// locks have none: the OS releases a dead holder's lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// The holder's TTL in milliseconds: a waiter takes the lock over only once it has seen
    /// it unchanged for this long (or for its own TTL, if longer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

impl LockInfo {
    pub fn new(operation: &str) -> Self {
        LockInfo {
            id: uuid::Uuid::new_v4().to_string(),
            who: format!("{}@{}", user(), host()),
            pid: std::process::id(),
            operation: operation.to_string(),
            created: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            expires: None,
            ttl_ms: None,
        }
    }

    /// Say the lock lives `ttl` from `now` (the holder's wall clock, for people to read).
    pub(crate) fn extend(&mut self, now: SystemTime, ttl: Duration) {
        self.expires = Some(humantime::format_rfc3339_millis(now + ttl).to_string());
        self.ttl_ms = Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
    }

    /// A remote lock its holder stopped renewing: this very version was seen unchanged for
    /// `unchanged_for` on the waiter's monotonic clock, at least the holder's TTL and the
    /// waiter's own (`own_ttl`). A lock without `expires` is never abandoned: its writer
    /// renews nothing, so taking it over could break a live holder, and `gpuplan state
    /// unlock` remains for it.
    pub fn abandoned(&self, unchanged_for: Duration, own_ttl: Duration) -> bool {
        let theirs = Duration::from_millis(self.ttl_ms.unwrap_or(0));
        self.expires.is_some() && unchanged_for >= own_ttl.max(theirs)
    }

    /// `` `gpuplan apply` by ci@runner-7 (pid 42, id …, since …) ``, for messages.
    pub fn describe(&self) -> String {
        format!(
            "`gpuplan {}` by {} (pid {}, id {}, since {})",
            self.operation, self.who, self.pid, self.id, self.created
        )
    }
}

fn user() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".to_string())
}

/// This machine's host name (`localhost` when none can be read).
pub fn host() -> String {
    let from_file = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    from_file("/proc/sys/kernel/hostname")
        .or_else(|| from_file("/etc/hostname"))
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|v| !v.is_empty()))
        .or_else(|| std::env::var("COMPUTERNAME").ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "localhost".to_string())
}
