//! One state API over both backends: the local file ([`LocalBackend`]) and an object store
//! ([`RemoteBackend`]). Commands and the engine hold a [`Backend`] and never ask which.

// `StateError` is large, as everywhere in the state module (boxing it is a separate change).
#![allow(clippy::result_large_err)]

use std::path::PathBuf;
use std::time::Duration;

use super::error::StateError;
use super::journal::Journal;
use super::local::LocalBackend;
use super::lock::{LockInfo, StateLock};
use super::model::State;
use super::remote::RemoteBackend;

#[derive(Debug, Clone)]
pub enum Backend {
    Local(LocalBackend),
    Remote(RemoteBackend),
}

impl Backend {
    /// The state file's path, or the state object's URL, for messages.
    pub fn location(&self) -> PathBuf {
        match self {
            Backend::Local(b) => b.path().to_path_buf(),
            Backend::Remote(b) => b.display_path(),
        }
    }

    /// The keys it reads and writes with (`super::seal`).
    pub fn keys(&self) -> &super::seal::Keyring {
        match self {
            Backend::Local(b) => b.keys(),
            Backend::Remote(b) => b.keys(),
        }
    }

    /// The same backend, reading and writing with `keys`.
    pub fn with_keys(self, keys: super::seal::Keyring) -> Backend {
        match self {
            Backend::Local(b) => Backend::Local(b.with_keys(keys)),
            Backend::Remote(b) => Backend::Remote(b.with_keys(keys)),
        }
    }

    /// `gpuplan state rekey`: the backup written again with the current keys; `false`
    /// when there is none.
    pub fn rekey_backup(&self, lock: &StateLock) -> Result<bool, StateError> {
        match self {
            Backend::Local(b) => b.rekey_backup(lock),
            Backend::Remote(b) => b.rekey_backup(lock),
        }
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Backend::Remote(_))
    }

    pub fn lock(&self, operation: &str, timeout: Duration) -> Result<StateLock, StateError> {
        match self {
            Backend::Local(b) => b.lock(operation, timeout),
            Backend::Remote(b) => b.lock(operation, timeout),
        }
    }

    pub fn lock_info(&self) -> Result<Option<LockInfo>, StateError> {
        match self {
            Backend::Local(b) => b.lock_info(),
            Backend::Remote(b) => b.lock_info(),
        }
    }

    /// Force-unlock: remove the lock if its id is `id`.
    pub fn unlock(&self, id: &str) -> Result<LockInfo, StateError> {
        match self {
            Backend::Local(b) => b.unlock(id),
            Backend::Remote(b) => b.unlock(id),
        }
    }

    /// The current state without locking or writing; `None` if there is none.
    pub fn read(&self) -> Result<Option<State>, StateError> {
        match self {
            Backend::Local(b) => b.read(),
            Backend::Remote(b) => b.read(),
        }
    }

    /// The current state under the lock; locally, a crashed apply's journal is folded in.
    pub fn recover(&self, lock: &StateLock) -> Result<Option<State>, StateError> {
        match self {
            Backend::Local(b) => b.recover(lock),
            Backend::Remote(b) => {
                b.check_lock(lock)?;
                b.read()
            }
        }
    }

    /// Write the whole state (`serial += 1`, the previous version kept as the backup).
    pub fn write(&self, lock: &StateLock, state: &mut State) -> Result<(), StateError> {
        match self {
            Backend::Local(b) => b.write(lock, state),
            Backend::Remote(b) => b.write(lock, state),
        }
    }

    /// Replace the state with `state`, whatever is there (the caller checked lineage and
    /// serial under the lock, after a `recover`): written with `serial + 1`. Remote: still
    /// compare-and-swap on the version that `recover` read.
    pub fn replace(&self, lock: &StateLock, state: &mut State) -> Result<(), StateError> {
        match self {
            Backend::Local(b) => b.replace(lock, state),
            Backend::Remote(b) => b.write(lock, state),
        }
    }

    /// Remove the state and its backup (`gpuplan workspace delete`), under `lock`.
    pub fn delete_state(&self, lock: &StateLock) -> Result<(), StateError> {
        match self {
            Backend::Local(b) => b.delete_state(lock),
            Backend::Remote(b) => b.delete_state(lock),
        }
    }

    /// Whether there is a state yet (read-only: nothing is locked or created).
    pub fn exists(&self) -> Result<bool, StateError> {
        match self {
            Backend::Local(b) => Ok(b.exists()),
            Backend::Remote(b) => b.exists(),
        }
    }

    /// Start recording an apply on top of `base`.
    pub fn open_journal(&self, lock: &StateLock, base: &State) -> Result<Journal, StateError> {
        match self {
            Backend::Local(b) => b.open_journal(lock, base),
            Backend::Remote(b) => {
                b.check_lock(lock)?;
                Ok(Journal::remote(b.clone(), base, lock.fence()))
            }
        }
    }

    /// Fold the journal into the state and write it once; `state` becomes what was written.
    /// Remote: a write the store will not take (after retries) leaves the folded state in
    /// `errored.json` beside the specs, and the error names the command that pushes it.
    pub fn compact(&self, lock: &StateLock, journal: Journal, state: &mut State) -> Result<(), StateError> {
        match self {
            Backend::Local(b) => b.compact(lock, journal, state),
            Backend::Remote(b) => {
                let mut folded = journal.into_state();
                let written = b.write_final(lock, &mut folded);
                *state = folded;
                written.map_err(|cause| b.keep_errored(state, cause))
            }
        }
    }
}

impl From<LocalBackend> for Backend {
    fn from(b: LocalBackend) -> Self {
        Backend::Local(b)
    }
}
