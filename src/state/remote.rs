//! Remote state on an object store (docs/design/state-and-locks.md, "Team state"): S3 and
//! S3-compatible stores
//! (Tencent COS, Alibaba OSS, MinIO, Ceph), Google Cloud Storage and Azure Blob, through
//! the `object_store` crate.
//!
//! Objects, for state object `O` (`key`, or `env:/W/key` for workspace W):
//! - `O`: the state, the same JSON as a local state file.
//! - `O.lock`: the lock, a [`LockInfo`] written create-only (`If-None-Match: *`, or the
//!   store's own create-only header: `x-cos-forbid-overwrite` on COS, `x-oss-forbid-overwrite`
//!   on OSS, which ignore `If-None-Match`). A second writer fails at once or polls up to its
//!   `--lock-timeout`, naming the holder. The lock expires: its holder's [`Heartbeat`]
//!   rewrites it every 20 s ([`LockTiming`]) by compare-and-swap on the lock object (moving
//!   `expires`, 60 s ahead by the holder's clock, for people to read). A waiter that has
//!   seen the same version unchanged for the TTL on its own monotonic clock takes it over
//!   with a write conditional on that version, so of several waiters one wins, and a live
//!   holder (whose renewal changes the version) is never taken over. The holder acts only
//!   while its [`Fence`] holds: renewed within the TTL minus a margin, and not lost.
//! - `O.backup`: the previous state, copied before every write.
//!
//! Every state write is compare-and-swap on the version this process last read or wrote
//! (`If-Match: ETAG` on S3 and Azure, `x-goog-if-generation-match` on GCS; the first write
//! is create-only): a writer whose lock was broken can never overwrite a newer state. An
//! apply writes its progress every [`FLUSH_EVERY`] (see [`super::journal`]), tries failed
//! writes again with backoff ([`Timing`]), and keeps a final state the store will not take
//! in `errored.json` ([`ErroredCopy`]); nodes launched after the last write are adopted
//! from their tags by the next plan.
//!
//! The lock mode is configured (`lock_mode`), never guessed from the host name. A store
//! gpuplan cannot take on trust (an `endpoint` without `lock_mode`, or COS/OSS, which
//! document no compare-and-swap on writes) is [`probe`](RemoteBackend::probe)d before
//! every lock and refused if it ignores a precondition.
//!
//! The store's calls run on a small runtime this backend owns, from a scoped thread, so
//! the synchronous state API can be called from anywhere (inside the CLI's runtime too).

// `StateError` is large, as everywhere in the state module (boxing it is a separate change).
#![allow(clippy::result_large_err)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::error::StateError;
use super::fence::{self, Fence};
use super::holder::{LockInfo, LockTiming, count_takeover};
use super::model::{FORMAT_VERSION, State};
use super::parse::parse_state;
use crate::spec::backend::BackendConfig;
pub(crate) use heartbeat::Heartbeat;
use heartbeat::{digest, unchanged_for};
use store::{Built, RuntimeBox, build, runtime, store_error};

mod heartbeat;
mod rekey;
mod store;

mod workspaces;

/// How often an apply on a remote backend makes its progress durable.
pub const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// How a remote backend paces its writes: progress every [`Timing::flush_every`]; after a
/// failed write, the next try waits `backoff_first`, doubling up to `backoff_max`. A store
/// that keeps failing is given up on after `flush_attempts` progress writes in a row (about a
/// minute by default), and the final write after `final_attempts`. Only a conflict (someone
/// else wrote, or the lock was broken) stops the writes at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub flush_every: Duration,
    pub backoff_first: Duration,
    pub backoff_max: Duration,
    pub flush_attempts: u32,
    pub final_attempts: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            flush_every: FLUSH_EVERY,
            backoff_first: Duration::from_secs(2),
            backoff_max: Duration::from_secs(30),
            flush_attempts: 6,
            final_attempts: 4,
        }
    }
}

impl Timing {
    /// The wait after the `failures`-th failed write in a row (from 1).
    pub fn backoff(&self, failures: u32) -> Duration {
        let doubled = self.backoff_first.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
        doubled.min(self.backoff_max)
    }
}

/// Where the final state goes when the store will not take it (Terraform's
/// `errored.tfstate`), and the command that pushes it back.
#[derive(Debug, Clone)]
pub struct ErroredCopy {
    /// The first free name of `errored.json`, `errored-2.json`, ... in this folder.
    pub dir: PathBuf,
    /// The command up to the file name, e.g. `gpuplan -C fleet state push`.
    pub push_command: String,
}

/// The version of the state object this process last read or wrote: the ETag (S3, Azure)
/// and the generation (GCS, whose conditional writes name it instead of the ETag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Seen {
    e_tag: Option<String>,
    version: Option<String>,
}

impl Seen {
    fn update(&self) -> PutMode {
        PutMode::Update(UpdateVersion { e_tag: self.e_tag.clone(), version: self.version.clone() })
    }
}

/// How often a waiting lock retries.
const POLL: Duration = Duration::from_millis(500);

/// How a store refuses to overwrite an object that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// `If-None-Match: *` for create-only, `If-Match: ETAG` for compare-and-swap (AWS S3,
    /// MinIO, Ceph, GCS and Azure through their own preconditions).
    Conditional,
    /// Tencent COS: `x-cos-forbid-overwrite: true`.
    Cos,
    /// Alibaba OSS: `x-oss-forbid-overwrite: true`.
    Oss,
}

impl LockMode {
    fn header(self) -> Option<&'static str> {
        match self {
            LockMode::Conditional => None,
            LockMode::Cos => Some("x-cos-forbid-overwrite"),
            LockMode::Oss => Some("x-oss-forbid-overwrite"),
        }
    }
}

/// The wall clock the lock's `created` and `expires` are written by (for people to read;
/// never compared). Tests set one that runs fast.
type WallClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// A state in an object store. Cheap to clone (one shared connection).
#[derive(Clone)]
pub struct RemoteBackend {
    inner: Arc<Inner>,
    timing: Timing,
    lock_timing: LockTiming,
    errored: Option<Arc<ErroredCopy>>,
    wall: WallClock,
    /// Opens a sealed object, and seals every write when the spec has `encryption {}`.
    keys: super::seal::Keyring,
}

impl std::fmt::Debug for RemoteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBackend").field("url", &self.inner.url).finish()
    }
}

struct Inner {
    rt: RuntimeBox,
    /// For state reads and conditional writes.
    store: Arc<dyn ObjectStore>,
    /// For the create-only lock object: the same store, with the vendor header when the
    /// store needs one.
    lock_store: Arc<dyn ObjectStore>,
    mode: LockMode,
    key: ObjectPath,
    /// `s3://bucket/key`, for messages.
    url: String,
    /// The state object's version as this process last read or wrote it; `None` before a
    /// read, or when there was no object.
    seen: Mutex<Option<Seen>>,
    /// Probe the store before taking the lock: its documentation does not promise the
    /// preconditions the lock and the compare-and-swap rely on (see [`Self::probe`]).
    probe_before_lock: bool,
    probed: Mutex<bool>,
    /// The digest and serial of the last write whose answer never came.
    unacked: Mutex<Option<([u8; 32], u64)>>,
}

impl RemoteBackend {
    /// Connect to the store `cfg` names, for `workspace` (`default` uses `key` itself).
    /// An s3 store signs with `s3_credentials` (the AWS credential chain, which the
    /// providers layer owns) when given, else with what object_store reads itself. No
    /// request is made yet.
    pub fn new(
        cfg: &BackendConfig,
        workspace: &str,
        s3_credentials: Option<object_store::aws::AwsCredentialProvider>,
    ) -> Result<RemoteBackend, StateError> {
        let key = cfg.get("key").unwrap_or("gpuplan.json");
        let key = if workspace == "default" { key.to_string() } else { format!("env:/{workspace}/{key}") };
        let rt = runtime(&key)?;
        let built = build(cfg, &key, s3_credentials)?;
        RemoteBackend::assemble(rt, built, &key)
    }

    /// A backend over stores the caller built (tests: a store that fails on demand).
    #[cfg(test)]
    pub(crate) fn over(
        store: Arc<dyn ObjectStore>,
        mode: LockMode,
        probe_before_lock: bool,
        key: &str,
    ) -> Result<RemoteBackend, StateError> {
        let url = format!("mem://{key}");
        RemoteBackend::assemble(
            runtime(key)?,
            Built { lock_store: store.clone(), store, mode, url, probe_before_lock },
            key,
        )
    }

    fn assemble(rt: RuntimeBox, built: Built, key: &str) -> Result<RemoteBackend, StateError> {
        let Built { store, lock_store, mode, url, probe_before_lock } = built;
        let key = ObjectPath::parse(key).map_err(|e| StateError::Remote {
            action: "name",
            url: url.clone(),
            message: e.to_string(),
            hint: "object keys are `/`-separated names without empty, `.` or `..` parts".into(),
        })?;
        let inner = Inner {
            rt,
            store,
            lock_store,
            mode,
            key,
            url,
            seen: Mutex::new(None),
            probe_before_lock,
            probed: Mutex::new(false),
            unacked: Mutex::new(None),
        };
        Ok(RemoteBackend {
            inner: Arc::new(inner),
            timing: Timing::default(),
            lock_timing: LockTiming::default(),
            errored: None,
            wall: Arc::new(SystemTime::now),
            keys: super::seal::Keyring::default(),
        })
    }

    /// Write the lock's times by `wall` instead of the system clock (tests: a waiter whose
    /// clock runs fast).
    #[cfg(test)]
    pub(crate) fn with_wall_clock(mut self, wall: impl Fn() -> SystemTime + Send + Sync + 'static) -> RemoteBackend {
        self.wall = Arc::new(wall);
        self
    }

    /// Pace writes by `timing` instead of the defaults.
    pub fn with_timing(mut self, timing: Timing) -> RemoteBackend {
        self.timing = timing;
        self
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Expire and renew the lock by `timing` instead of 60 s / 20 s.
    pub fn with_lock_timing(mut self, timing: LockTiming) -> RemoteBackend {
        self.lock_timing = timing;
        self
    }

    /// Read and write with `keys` (`super::seal`).
    pub fn with_keys(mut self, keys: super::seal::Keyring) -> RemoteBackend {
        self.keys = keys;
        self
    }

    pub fn keys(&self) -> &super::seal::Keyring {
        &self.keys
    }

    /// Keep the final state in `copy.dir` when the store will not take it.
    pub fn with_errored_copy(mut self, copy: ErroredCopy) -> RemoteBackend {
        self.errored = Some(Arc::new(copy));
        self
    }

    /// `s3://bucket/key`.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The URL as a path, for errors shared with the local backend.
    pub fn display_path(&self) -> PathBuf {
        PathBuf::from(&self.inner.url)
    }

    pub fn lock_url(&self) -> String {
        format!("{}.lock", self.inner.url)
    }

    pub fn backup_url(&self) -> String {
        format!("{}.backup", self.inner.url)
    }

    pub fn mode(&self) -> LockMode {
        self.inner.mode
    }

    fn lock_key(&self) -> ObjectPath {
        ObjectPath::from(format!("{}.lock", self.inner.key))
    }

    fn backup_key(&self) -> ObjectPath {
        ObjectPath::from(format!("{}.backup", self.inner.key))
    }

    /// Run `fut` on the backend's runtime and wait for it, from any thread.
    fn block<F, T>(&self, fut: F) -> T
    where
        F: std::future::Future<Output = T> + Send,
        T: Send,
    {
        let rt = self.inner.rt.0.as_ref().expect("the runtime lives as long as the backend");
        std::thread::scope(|s| s.spawn(|| rt.block_on(fut)).join().expect("a store call does not panic"))
    }

    /// The object's bytes and version; `None` if there is none.
    fn get(&self, key: &ObjectPath, what: &'static str) -> Result<Option<(bytes::Bytes, Seen)>, StateError> {
        let store = self.inner.store.clone();
        let url = self.inner.url.clone();
        self.block(async move {
            match store.get(key).await {
                Ok(r) => {
                    let seen = Seen { e_tag: r.meta.e_tag.clone(), version: r.meta.version.clone() };
                    let bytes = r.bytes().await.map_err(|e| store_error(&url, what, e))?;
                    Ok(Some((bytes, seen)))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(store_error(&url, what, e)),
            }
        })
    }

    fn set_seen(&self, seen: Option<Seen>) {
        *self.inner.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = seen;
    }

    fn seen(&self) -> Option<Seen> {
        self.inner.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The current state, or `None` if the object does not exist. Remembers its version
    /// for the next write.
    pub fn read(&self) -> Result<Option<State>, StateError> {
        let got = self.get(&self.inner.key.clone(), "read")?;
        let Some((bytes, seen)) = got else {
            self.set_seen(None);
            return Ok(None);
        };
        // The envelope is opened there (`envelope::decode`), a sealed one with the keys.
        let state = parse_state(&self.display_path(), &PathBuf::from(self.backup_url()), &bytes, &self.keys)?;
        self.set_seen(Some(seen));
        Ok(Some(state))
    }

    /// Write `state` with `serial + 1`: compare-and-swap on the version last seen (create-only
    /// when there was no object), the previous version copied to `O.backup` first. The
    /// caller's serial advances only once the write succeeded. Only while the lock's fence
    /// holds and the lock object still holds our id.
    pub fn write(&self, lock: &super::StateLock, state: &mut State) -> Result<(), StateError> {
        self.check_lock(lock)?;
        self.write_unchecked(state)
    }

    /// An apply's last write: [`write`](Self::write), tried again after a failure that is
    /// not a conflict, up to [`Timing::final_attempts`] times with backoff.
    pub(crate) fn write_final(&self, lock: &super::StateLock, state: &mut State) -> Result<(), StateError> {
        let mut failures = 0;
        loop {
            match self.write(lock, state) {
                Ok(()) => return Ok(()),
                Err(e) if e.is_conflict() => return Err(e),
                Err(e) => {
                    failures += 1;
                    if failures >= self.timing.final_attempts {
                        return Err(e);
                    }
                    std::thread::sleep(self.timing.backoff(failures));
                }
            }
        }
    }

    /// [`write`](Self::write) without reading the lock object: for an apply's periodic
    /// flush, which checks the lock's fence first (`Journal`), and whose CAS still guards
    /// the object.
    pub(crate) fn write_unchecked(&self, state: &mut State) -> Result<(), StateError> {
        super::compact::tidy(state);
        let mut body = Vec::with_capacity(1 << 16);
        // Serialize the caller's copy with the next serial (a clone of a large state is
        // hundreds of MB), then put the old serial back.
        let previous = (state.serial, state.format_version);
        let next_serial = state.serial + 1;
        (state.serial, state.format_version) = (next_serial, FORMAT_VERSION);
        // Compressed in an envelope (`envelope`): a progress write of a large fleet sends a
        // tenth of the bytes. Sealed (`seal`, compressed too) when the keys seal.
        let rendered = super::pretty::write_state(&mut body, &*state);
        let encoded = match rendered {
            Err(e) => Err(self.encode_error(e.to_string())),
            Ok(()) if self.keys.seals() => super::seal::seal(&body, "state", seal_head(state), &self.keys)
                .map_err(|e| StateError::encrypt(&self.display_path(), e)),
            Ok(()) => super::envelope::encode(&body, state, next_serial, FORMAT_VERSION)
                .map_err(|e| self.encode_error(e.to_string())),
        };
        (state.serial, state.format_version) = previous;
        let body = encoded?;
        let body = bytes::Bytes::from(body);
        let seen = self.seen();
        let (store, key, backup, url) =
            (self.inner.store.clone(), self.inner.key.clone(), self.backup_key(), self.inner.url.clone());
        let expected = (state.lineage.clone(), state.serial);
        let sent = body.clone();
        let result = self.block(async move {
            let mode = match &seen {
                Some(seen) => {
                    // Keep the previous version. Copy is unconditional, so it runs only
                    // when the object is still the one we read (else the put below fails).
                    store.copy(&key, &backup).await.map_err(|e| store_error(&url, "back up", e))?;
                    seen.update()
                }
                None => PutMode::Create,
            };
            match store.put_opts(&key, PutPayload::from(sent), PutOptions::from(mode)).await {
                Ok(r) => Ok(Seen { e_tag: r.e_tag, version: r.version }),
                Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => Err(None),
                Err(e) => Err(Some(store_error(&url, "write", e))),
            }
        });
        let written = match result {
            Ok(seen) => seen,
            Err(Some(e)) => {
                // The store may have taken it and only the answer was lost: remember what
                // was sent, so the next write can tell our own object from someone else's.
                *self.unacked() = Some((digest(&body), next_serial));
                return Err(e);
            }
            Err(None) => {
                // Someone wrote since we read, or an earlier write of ours landed though
                // its answer was lost: then the object holds exactly what that write sent.
                let now = self.get(&self.inner.key.clone(), "read")?;
                let ours = self.unacked().take();
                match (now, ours) {
                    (Some((bytes, seen)), Some((sent, serial))) if digest(&bytes) == sent => {
                        self.set_seen(Some(seen));
                        state.serial = serial;
                        return self.write_unchecked(state);
                    }
                    (now, _) => {
                        let (found_lineage, found_serial) = now.and_then(|(b, _)| header_of(&b)).unwrap_or_default();
                        return Err(StateError::Stale {
                            path: self.display_path(),
                            expected_lineage: expected.0,
                            expected_serial: expected.1,
                            found_lineage,
                            found_serial,
                        });
                    }
                }
            }
        };
        *self.unacked() = None;
        self.set_seen(Some(written));
        state.serial = next_serial;
        state.format_version = FORMAT_VERSION;
        Ok(())
    }

    pub(crate) fn encode_error(&self, message: String) -> StateError {
        StateError::Remote { action: "encode the state for", url: self.inner.url.clone(), message, hint: String::new() }
    }

    fn unacked(&self) -> std::sync::MutexGuard<'_, Option<([u8; 32], u64)>> {
        self.inner.unacked.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Take the lock: a create-only write of `O.lock`, or, when the lock there is
    /// abandoned, a write conditional on the version read (the takeover). Retried every
    /// [`POLL`] until `timeout` has passed. A lock is abandoned once this process has seen
    /// the very same version for the TTL on its own monotonic clock ([`LockInfo::abandoned`]):
    /// a live holder rewrites it every renewal, and its `expires` (another machine's wall
    /// clock) is never compared with ours. The lock is renewed by a [`Heartbeat`] until
    /// dropped, which keeps its [`Fence`].
    pub fn lock(&self, operation: &str, timeout: Duration) -> Result<super::StateLock, StateError> {
        self.probe_if_untrusted()?;
        let start = Instant::now();
        let ttl = self.lock_timing.ttl;
        let mut info = LockInfo::new(operation);
        info.created = humantime::format_rfc3339_seconds((self.wall)()).to_string();
        loop {
            info.extend((self.wall)(), ttl);
            let sent = Instant::now();
            if let Some(seen) = self.put_lock(&info, PutMode::Create)? {
                return Ok(self.held(info, seen, sent, None));
            }
            if let Some((bytes, seen)) = self.get(&self.lock_key(), "read the lock of")? {
                // A lock object that does not parse is never taken over (it may be a live
                // holder's of another version); the caller reports it as held, and
                // `gpuplan state unlock` remains for it.
                let old = serde_json::from_slice::<LockInfo>(&bytes).ok();
                let unchanged = unchanged_for(&self.lock_url(), &seen, &bytes);
                if let Some(old) = old.filter(|o| o.abandoned(unchanged, ttl)) {
                    info.extend((self.wall)(), ttl);
                    let sent = Instant::now();
                    if let Some(seen) = self.put_lock(&info, seen.update())? {
                        count_takeover();
                        return Ok(self.held(info, seen, sent, Some(old)));
                    }
                    // Another waiter took it over first, or its holder renewed just now.
                    continue;
                }
            }
            let waited = start.elapsed();
            if waited >= timeout {
                let holder = self.lock_info()?;
                let waited = if timeout.is_zero() { Duration::ZERO } else { waited };
                return Err(StateError::Locked { path: PathBuf::from(self.lock_url()), holder, waited });
            }
            std::thread::sleep(POLL.min(timeout - waited));
        }
    }

    /// The lock just written (its request sent at `sent`), renewed from now on.
    fn held(&self, info: LockInfo, seen: Seen, sent: Instant, taken_over: Option<LockInfo>) -> super::StateLock {
        let what = format!("the state lock `{}`", self.lock_url());
        let fence = Fence::since(what, fence::validity(self.lock_timing.ttl, self.lock_timing.renew), sent);
        let heartbeat = Heartbeat::start(self.clone(), info.clone(), seen, fence);
        super::StateLock::remote(info, self.clone(), heartbeat, taken_over)
    }

    /// Write the lock object in `mode`: its new version, or `None` when the precondition
    /// failed (it exists, for a create; it changed, for an update).
    fn put_lock(&self, info: &LockInfo, mode: PutMode) -> Result<Option<Seen>, StateError> {
        let body = serde_json::to_vec_pretty(info).expect("lock info serializes");
        // Create-only goes through the store with the vendor's create-only header; an
        // update must overwrite, so it goes without (its If-Match is the guard).
        let store = match mode {
            PutMode::Create => self.inner.lock_store.clone(),
            _ => self.inner.store.clone(),
        };
        let (key, url) = (self.lock_key(), self.lock_url());
        self.block(async move {
            match store.put_opts(&key, PutPayload::from(body), PutOptions::from(mode)).await {
                Ok(r) => Ok(Some(Seen { e_tag: r.e_tag, version: r.version })),
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(None),
                Err(e) => Err(store_error(&url, "write the lock of", e)),
            }
        })
    }

    /// The lock object's content; `None` if there is no lock.
    pub fn lock_info(&self) -> Result<Option<LockInfo>, StateError> {
        let Some((bytes, _)) = self.get(&self.lock_key(), "read the lock of")? else { return Ok(None) };
        Ok(serde_json::from_slice(&bytes).ok())
    }

    /// Still ours: the lock's fence holds (its last renewal is recent enough, and it was
    /// not lost), and the lock object holds our id.
    pub(crate) fn check_lock(&self, lock: &super::StateLock) -> Result<(), StateError> {
        lock.fence().check().map_err(StateError::fenced)?;
        match self.lock_info()? {
            Some(info) if info.id == lock.info.id => Ok(()),
            _ => Err(StateError::LockLost { path: PathBuf::from(self.lock_url()) }),
        }
    }

    /// Force-unlock: delete the lock object if its id is `id`.
    pub fn unlock(&self, id: &str) -> Result<LockInfo, StateError> {
        let Some((bytes, _)) = self.get(&self.lock_key(), "read the lock of")? else {
            return Err(StateError::NotLocked { path: self.display_path() });
        };
        let Ok(holder) = serde_json::from_slice::<LockInfo>(&bytes) else {
            return Err(StateError::NotLocked { path: self.display_path() });
        };
        if holder.id != id.trim() {
            return Err(StateError::UnlockMismatch { path: PathBuf::from(self.lock_url()), given: id.into(), holder });
        }
        self.delete_lock()?;
        Ok(holder)
    }

    /// Release our lock (the holder's own delete). Only if it is still ours.
    pub(crate) fn release(&self, id: &str) -> Result<(), StateError> {
        match self.lock_info()? {
            Some(info) if info.id == id => self.delete_lock(),
            _ => Ok(()),
        }
    }

    fn delete_lock(&self) -> Result<(), StateError> {
        let (store, key, url) = (self.inner.lock_store.clone(), self.lock_key(), self.lock_url());
        self.block(async move { store.delete(&key).await.map_err(|e| store_error(&url, "remove the lock of", e)) })
    }

    /// `gpuplan check`: one listing under the state's key proves the credentials, the
    /// endpoint and the bucket (a missing bucket fails here, where a read of a missing key
    /// would look like "no state yet"). Says whether the state exists. Writes nothing.
    pub fn check(&self) -> Result<String, StateError> {
        let (store, key, url) = (self.inner.store.clone(), self.inner.key.clone(), self.inner.url.clone());
        self.block(async move {
            let listed = store
                .list_with_delimiter(
                    key.parts()
                        .count()
                        .checked_sub(1)
                        .map(|_| {
                            let parent: Vec<_> = key.parts().collect();
                            ObjectPath::from_iter(parent[..parent.len() - 1].iter().cloned())
                        })
                        .as_ref(),
                )
                .await;
            match listed {
                Ok(list) if list.objects.iter().any(|o| o.location == key) => Ok("reachable, state found".to_string()),
                Ok(_) => Ok("reachable, no state yet (the first apply writes it)".to_string()),
                Err(e) => Err(store_error(&url, "list", e)),
            }
        })
    }

    /// The check that the store honours what locking and compare-and-swap rely on, run by
    /// `gpuplan init` and, for a store whose documentation does not promise it, before every
    /// lock: a probe object written create-only twice must fail the second time; a write
    /// naming the probe's current version must succeed, and one naming a wrong version
    /// (ETag, or GCS generation) must fail. The probe is removed. A store that fails any of
    /// these is refused with the reason: it cannot hold the state safely.
    pub fn probe(&self) -> Result<(), StateError> {
        let probe = ObjectPath::from(format!("{}.probe-{}", self.inner.key, uuid::Uuid::new_v4()));
        let (lock_store, store, url, mode) =
            (self.inner.lock_store.clone(), self.inner.store.clone(), self.inner.url.clone(), self.inner.mode);
        let refused = |what: &str| {
            StateError::Remote {
            action: "use",
            url: url.clone(),
            message: format!("the store {what}: it cannot hold the state safely"),
            hint: match mode {
                LockMode::Conditional => "for Tencent COS set `lock_mode = \"cos\"`, for Alibaba OSS `lock_mode = \"oss\"`; otherwise use a store that honours If-None-Match and If-Match (AWS S3, MinIO, Ceph, GCS, Azure Blob)".into(),
                _ => "the store must refuse a write whose If-Match names a wrong ETag (gpuplan found no documented compare-and-swap for COS or OSS writes), and the bucket must never have had versioning enabled (COS ignores x-cos-forbid-overwrite then); use another store for the state".into(),
            },
        }
        };
        let outcome: Result<(), StateError> = self.block(async {
            let create = || PutOptions::from(PutMode::Create);
            let first = lock_store
                .put_opts(&probe, PutPayload::from_static(b"1"), create())
                .await
                .map_err(|e| store_error(&url, "write a probe object in", e))?;
            let result = async {
                match lock_store.put_opts(&probe, PutPayload::from_static(b"2"), create()).await {
                    Ok(_) => return Err(refused("accepted a second create-only write of the same object")),
                    Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
                    Err(e) => return Err(store_error(&url, "probe", e)),
                }
                let current =
                    PutMode::Update(UpdateVersion { e_tag: first.e_tag.clone(), version: first.version.clone() });
                store.put_opts(&probe, PutPayload::from_static(b"3"), PutOptions::from(current)).await.map_err(
                    |e| {
                        let mut e = store_error(&url, "probe", e);
                        if let StateError::Remote { message, .. } = &mut e {
                            *message = format!("a write naming the object's current version failed: {message}");
                        }
                        e
                    },
                )?;
                let wrong = UpdateVersion { e_tag: Some("\"0-not-the-etag\"".into()), version: Some("1".into()) };
                match store
                    .put_opts(&probe, PutPayload::from_static(b"4"), PutOptions::from(PutMode::Update(wrong)))
                    .await
                {
                    Ok(_) => Err(refused("accepted a write whose precondition (If-Match) named a wrong version")),
                    Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => Ok(()),
                    Err(e) => Err(store_error(&url, "probe", e)),
                }
            }
            .await;
            let cleanup =
                lock_store.delete(&probe).await.map_err(|e| store_error(&url, "remove the probe object in", e));
            result.and(cleanup)
        });
        outcome
    }

    /// The final write failed with `cause`: keep `state` in the first free `errored.json`,
    /// `errored-2.json`, ... (never over an earlier one nobody pushed yet) and say how to
    /// push it. Without a place for it (a library caller), the cause as it is.
    pub(crate) fn keep_errored(&self, state: &State, cause: StateError) -> StateError {
        let Some(copy) = &self.errored else { return cause };
        let url = self.inner.url.clone();
        let cause = Box::new(cause);
        // Sealed like the object itself when the keys seal: `state push` opens it.
        let body = match serde_json::to_vec_pretty(state) {
            Ok(body) if self.keys.seals() => super::seal::seal(&body, "state", seal_head(state), &self.keys)
                .map_err(|e| format!("cannot encrypt it: {}", e.reason)),
            Ok(mut body) => {
                body.push(b'\n');
                Ok(body)
            }
            Err(e) => Err(e.to_string()),
        };
        let body = match body {
            Ok(body) => body,
            Err(save_error) => {
                return StateError::ErroredUnsaved { url, cause, saved: copy.dir.clone(), save_error };
            }
        };
        let saved = (1..)
            .map(|n| copy.dir.join(if n == 1 { "errored.json".to_string() } else { format!("errored-{n}.json") }))
            .find(|p| !p.exists())
            .unwrap_or_else(|| copy.dir.join("errored.json"));
        match super::fsutil::atomic_write(&saved, &body) {
            Ok(()) => {
                let name = saved.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                StateError::Errored { url, cause, command: format!("{} {name}", copy.push_command), saved }
            }
            Err(e) => {
                // The last resort: the state on stderr, where a CI log keeps it.
                eprintln!("{}", String::from_utf8_lossy(&body));
                StateError::ErroredUnsaved { url, cause, saved, save_error: e.to_string() }
            }
        }
    }

    /// [`probe`](Self::probe) once per backend, when the configuration asks for it.
    fn probe_if_untrusted(&self) -> Result<(), StateError> {
        if !self.inner.probe_before_lock {
            return Ok(());
        }
        let mut probed = self.inner.probed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !*probed {
            self.probe()?;
            *probed = true;
        }
        Ok(())
    }
}

/// A sealed state's plain fields, `state` as it is being written.
pub(crate) fn seal_head(state: &State) -> super::seal::Head {
    super::seal::Head {
        format_version: Some(state.format_version),
        serial: Some(state.serial),
        lineage: Some(state.lineage.clone()),
    }
}

fn header_of(bytes: &[u8]) -> Option<(String, u64)> {
    #[derive(serde::Deserialize)]
    struct H {
        lineage: String,
        serial: u64,
    }
    serde_json::from_slice::<H>(bytes).ok().map(|h| (h.lineage, h.serial))
}

#[cfg(test)]
mod tests;
