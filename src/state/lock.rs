//! The state lock: `<state>.lock` holds a [`LockInfo`] as JSON and is held with an
//! exclusive OS lock (`File::try_lock`, i.e. `flock` on unix).
//!
//! The OS lock is the truth, the file content only says who holds it. The kernel drops
//! the OS lock when its holder dies, so a lock file whose OS lock can be taken belongs
//! to a dead process: it is taken over and reported in [`StateLock::stale`]. This module
//! owns acquiring, releasing and force-removing the lock; it never touches state.
//!
//! A remote lock (an object in a store, see [`super::remote`]) has no OS to release it, so
//! it expires instead: its holder's heartbeat rewrites it every renewal period
//! ([`LockTiming`]), and a waiter that has seen the same version unchanged for the TTL on
//! its own monotonic clock takes it over by compare-and-swap ([`LockInfo::abandoned`]).
//! `expires` is written for people; no clock compares it with another's. The holder acts
//! only while its [`StateLock::fence`] holds.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::StateError;
use super::fence::Fence;
use super::fsutil::{self, private};
pub use super::holder::{LockInfo, LockTiming, host, renew_failures, takeovers};

/// How often a waiting `lock` retries: fast enough that a short apply ahead of us does
/// not cost a noticeable wait, slow enough to be free.
const POLL: Duration = Duration::from_millis(100);

/// A held lock. Dropping it releases the lock: the OS lock and the lock file, or the
/// remote lock object.
#[derive(Debug)]
pub struct StateLock {
    pub info: LockInfo,
    /// The lock of a dead holder that was taken over; the CLI warns about it because that
    /// holder may have left an apply half done (its journal is recovered on read). For a
    /// remote lock: an expired lock (its `expires` is set), whose holder stopped renewing.
    pub stale: Option<LockInfo>,
    held: Held,
    path: PathBuf,
}

#[derive(Debug)]
enum Held {
    File(File),
    Remote(super::remote::RemoteBackend, super::remote::Heartbeat),
    /// Nothing was locked: a read-only command found no state, so there is nothing to
    /// guard and nothing to create (not even the state folder). Every write refuses it.
    Nothing,
}

impl StateLock {
    /// A remote lock, renewed by `heartbeat` until dropped; `taken_over` is the expired
    /// lock it replaced.
    pub(crate) fn remote(
        info: LockInfo,
        backend: super::remote::RemoteBackend,
        heartbeat: super::remote::Heartbeat,
        taken_over: Option<LockInfo>,
    ) -> StateLock {
        let path = PathBuf::from(backend.lock_url());
        StateLock { info, stale: taken_over, held: Held::Remote(backend, heartbeat), path }
    }

    /// No lock at all, for a read-only command that found no state at `path` (the lock
    /// file's path): it reads an empty state and writes nothing. A write under it fails.
    pub(crate) fn nothing(path: PathBuf) -> StateLock {
        StateLock { info: LockInfo::new("read"), stale: None, held: Held::Nothing, path }
    }

    /// The lock file's path (`<state>.lock`), or the lock object's URL.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Still ours: the lock file was not force-removed or replaced since we took it (for a
    /// remote lock: its fence holds and the lock object still holds our id).
    pub(crate) fn check(&self) -> Result<(), StateError> {
        match &self.held {
            Held::File(file) if fsutil::same_file(file, &self.path) => Ok(()),
            Held::File(_) => Err(StateError::LockLost { path: self.path.clone() }),
            Held::Remote(backend, _) => backend.check_lock(self),
            // Only read-only sessions hold nothing; a write under it is a bug, refused.
            Held::Nothing => Err(StateError::LockLost { path: self.path.clone() }),
        }
    }

    /// Whether this process may still act under the lock ([`Fence`]): always for a local
    /// lock, which has no expiry; for a remote one, while its heartbeat proves it.
    pub fn fence(&self) -> Fence {
        match &self.held {
            // A read-only session that holds nothing makes no mutating call either.
            Held::File(_) | Held::Nothing => Fence::unbounded(),
            Held::Remote(_, heartbeat) => heartbeat.fence(),
        }
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        match &mut self.held {
            Held::File(file) => {
                // Remove the file while still holding the OS lock, and only if it is still
                // ours: after a force-unlock the path may hold someone else's lock. A waiter
                // that locked the unlinked file notices (same_file) and retries on the new one.
                if fsutil::same_file(file, &self.path) {
                    // A file left behind is harmless: the next holder takes it over (the OS
                    // lock, not the file, is the lock).
                    let _ = std::fs::remove_file(&self.path);
                }
                // Closing the file releases the OS lock in any case.
                let _ = file.unlock();
            }
            Held::Nothing => {}
            Held::Remote(backend, heartbeat) => {
                // No renewal may land after the release (it would fail anyway: the
                // renewal is a compare-and-swap on an object that is gone).
                heartbeat.stop();
                // Drop cannot return an error; a lock left in the store would block the next
                // run, so say so where the user sees it, with the way out.
                if let Err(e) = backend.release(&self.info.id) {
                    eprintln!(
                        "warning: could not remove the state lock `{}`: {e}\nhint: once no gpuplan runs on this state, run `gpuplan state unlock {}`",
                        self.path.display(),
                        self.info.id
                    );
                }
            }
        }
    }
}

/// Take the lock at `path`, retrying every [`POLL`] until `timeout` has passed.
pub(crate) fn acquire(path: &Path, operation: &str, timeout: Duration) -> Result<StateLock, StateError> {
    let start = Instant::now();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(StateError::io("create directory", dir))?;
    }
    loop {
        let mut file = private(OpenOptions::new().read(true).write(true).create(true).truncate(false))
            .open(path)
            .map_err(StateError::io("open lock file", path))?;
        match file.try_lock() {
            Ok(()) => {
                if !fsutil::same_file(&file, path) {
                    // We locked a file its holder removed on release: retry on the current one.
                    continue;
                }
                let stale = read_info(&mut file);
                let info = LockInfo::new(operation);
                write_info(&mut file, path, &info)?;
                return Ok(StateLock { info, stale, held: Held::File(file), path: path.to_path_buf() });
            }
            Err(TryLockError::WouldBlock) => {
                let waited = start.elapsed();
                if waited >= timeout {
                    let holder = read_info(&mut file);
                    let waited = if timeout.is_zero() { Duration::ZERO } else { waited };
                    return Err(StateError::Locked { path: path.to_path_buf(), holder, waited });
                }
                drop(file);
                std::thread::sleep(POLL.min(timeout - waited));
            }
            Err(TryLockError::Error(e)) => return Err(StateError::io("lock", path)(e)),
        }
    }
}

/// The lock file's content, whether or not anyone holds it. `None` if there is no file.
pub(crate) fn peek(path: &Path) -> Result<Option<LockInfo>, StateError> {
    let Some(bytes) = fsutil::read_optional(path)? else { return Ok(None) };
    Ok(serde_json::from_slice(&bytes).ok())
}

/// Force-unlock: remove the lock file if its id is `id`. The holder, if alive, keeps an
/// OS lock on a file nobody else can see, and notices before its next write (LockLost).
pub(crate) fn force_unlock(path: &Path, state_path: &Path, id: &str) -> Result<LockInfo, StateError> {
    let Some(bytes) = fsutil::read_optional(path)? else {
        return Err(StateError::NotLocked { path: state_path.to_path_buf() });
    };
    let holder: LockInfo = match serde_json::from_slice(&bytes) {
        Ok(info) => info,
        // An empty or unreadable lock file has no id to match; nobody can own it meaningfully.
        Err(_) => return Err(StateError::NotLocked { path: state_path.to_path_buf() }),
    };
    if holder.id != id.trim() {
        return Err(StateError::UnlockMismatch { path: path.to_path_buf(), given: id.to_string(), holder });
    }
    fsutil::remove_if_exists(path)?;
    fsutil::sync_dir(fsutil::parent_dir(path))?;
    Ok(holder)
}

fn read_info(file: &mut File) -> Option<LockInfo> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn write_info(file: &mut File, path: &Path, info: &LockInfo) -> Result<(), StateError> {
    let json = serde_json::to_vec_pretty(info).expect("LockInfo serializes");
    (|| {
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&json)?;
        file.write_all(b"\n")?;
        // A lock file created by someone else's umask or an older tool: make it private.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        // No fsync: the OS lock on this file is the lock, and it dies with the process
        // or the machine; the text only tells others who holds it. After a crash an
        // empty or torn file reads as "no holder" (`read_info`, `force_unlock`). The
        // fsync cost every command that takes the lock (a no-op plan too) one disk flush.
        Ok(())
    })()
    .map_err(StateError::io("write lock file", path))
}
