//! Every way reading, locking or writing state can fail, as one miette diagnostic enum.
//!
//! Each variant names the file involved and, where a user can act, a `help` with the next
//! step. The state layer never panics on file content: bad bytes end up here.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::fence::Broken;
use super::holder::LockInfo;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StateError {
    #[error("state `{}` is locked{}", path.display(), holder_text(holder, waited))]
    #[diagnostic(code(gpuplan::state::locked), help("{}", locked_help(holder)))]
    Locked { path: PathBuf, holder: Option<LockInfo>, waited: Duration },

    #[error("lost the lock on `{}`: the lock file was removed or replaced while this command held it", path.display())]
    #[diagnostic(
        code(gpuplan::state::lock_lost),
        help("someone ran `gpuplan state unlock`; nothing was written. Re-run the command.")
    )]
    LockLost { path: PathBuf },

    /// The lock's fence no longer holds ([`super::fence`]): someone else holds the lock now,
    /// or this process could not renew it for longer than it may trust it.
    #[error("{broken}")]
    #[diagnostic(
        code(gpuplan::state::lock_lost),
        help(
            "nothing was written under the lost lock. If another run holds it now, let it finish and \
             run `gpuplan plan` to see what is left; nodes launched but not recorded carry gpuplan's tags \
             and the next plan adopts them"
        )
    )]
    Fenced { broken: Broken },

    #[error("the lock passed in is for `{}`, not for state `{}`", lock_path.display(), path.display())]
    #[diagnostic(code(gpuplan::state::wrong_lock))]
    WrongLock { path: PathBuf, lock_path: PathBuf },

    #[error("state `{}` is not locked", path.display())]
    #[diagnostic(code(gpuplan::state::not_locked), help("there is nothing to unlock"))]
    NotLocked { path: PathBuf },

    #[error("lock id `{given}` does not match the lock on `{}` (held by {} for `{}`)", path.display(), holder.who, holder.operation)]
    #[diagnostic(
        code(gpuplan::state::unlock_mismatch),
        help("the current lock id is `{}`; copy it exactly (see the lock error or `{}`)", holder.id, path.display())
    )]
    UnlockMismatch { path: PathBuf, given: String, holder: LockInfo },

    /// A state (or remote envelope) a newer gpuplan wrote: nothing is wrong with the file,
    /// so the fix is a newer gpuplan, never restoring the `.backup` over it.
    #[error("state file `{}` is unreadable: {message}", path.display())]
    #[diagnostic(
        code(gpuplan::state::newer),
        help(
            "nothing was written; a newer gpuplan wrote this state: run that version (or a later one) for this \
             workspace, and leave the file and its `.backup` as they are"
        )
    )]
    Newer { path: PathBuf, message: String },

    #[error("state file `{}` is unreadable{}: {message}", path.display(), position(line, column))]
    #[diagnostic(code(gpuplan::state::corrupt), help("{}", corrupt_help(path, backup)))]
    Corrupt { path: PathBuf, line: Option<usize>, column: Option<usize>, message: String, backup: PathBuf },

    /// A sealed state, journal or backup that no configured key opens
    /// (docs/design/secrets.md, "Encryption at rest"). Nothing was written.
    #[error("cannot decrypt `{}`{}: {reason}", path.display(), with_provider(provider))]
    #[diagnostic(code(gpuplan::state::decrypt), help("{hint}"))]
    Decrypt { path: PathBuf, provider: String, reason: String, hint: String },

    /// A write that could not be sealed (a passphrase variable unset, KMS refusing):
    /// nothing was written.
    #[error("cannot encrypt `{}`{}: {reason}", path.display(), with_provider(provider))]
    #[diagnostic(code(gpuplan::state::encrypt), help("{hint}"))]
    Encrypt { path: PathBuf, provider: String, reason: String, hint: String },

    /// A resource (or autoscaler record) key that is not an address: the planner could not
    /// tell which object it is, so it would have to drop it and forget nodes that cost money.
    #[error("state file `{}` has the key `{key}`, which is not a resource address: {reason}", path.display())]
    #[diagnostic(code(gpuplan::state::bad_address), help("{}", bad_address_help(path, backup)))]
    BadAddress { path: PathBuf, key: String, reason: &'static str, backup: PathBuf },

    #[error("journal `{}` is damaged at line {line}: {message}", path.display())]
    #[diagnostic(
        code(gpuplan::state::journal_corrupt),
        help(
            "the journal records operations a crashed apply finished; only a torn last line is \
             ignored automatically. Inspect the file, fix or remove line {line} and later ones, \
             then run `gpuplan plan` to see what the clouds really run"
        )
    )]
    JournalCorrupt { path: PathBuf, line: usize, message: String },

    #[error(
        "journal `{}` was started on state lineage `{journal_lineage}` serial {journal_serial}, \
         but the state file has {}",
        path.display(), state_text(state_lineage, state_serial)
    )]
    #[diagnostic(
        code(gpuplan::state::journal_mismatch),
        help(
            "gpuplan will not guess which one is right. If the state file was restored or replaced \
             on purpose, move the journal aside; otherwise restore the state file the journal was \
             started on (maybe its `.backup`)"
        )
    )]
    JournalMismatch {
        path: PathBuf,
        journal_lineage: String,
        journal_serial: u64,
        state_lineage: Option<String>,
        state_serial: Option<u64>,
    },

    #[error("journal `{}` from an interrupted apply has not been folded into the state yet", path.display())]
    #[diagnostic(
        code(gpuplan::state::pending_journal),
        help("recover it first (every locking command does this, e.g. `gpuplan plan`)")
    )]
    PendingJournal { path: PathBuf },

    #[error("journal `{}` refused an append because an earlier append failed", path.display())]
    #[diagnostic(
        code(gpuplan::state::journal_poisoned),
        help("stop the apply; the next command recovers every entry that reached the disk")
    )]
    JournalPoisoned { path: PathBuf },

    #[error(
        "state `{}` changed underneath: expected lineage `{expected_lineage}` serial {expected_serial}, \
         found lineage `{found_lineage}` serial {found_serial}",
        path.display()
    )]
    #[diagnostic(code(gpuplan::state::stale), help("re-run the command so it starts from the current state"))]
    Stale { path: PathBuf, expected_lineage: String, expected_serial: u64, found_lineage: String, found_serial: u64 },

    #[error("cannot {action} remote state `{url}`: {message}")]
    #[diagnostic(code(gpuplan::state::remote), help("{hint}"))]
    Remote { action: &'static str, url: String, message: String, hint: String },

    /// An apply's progress writes to a remote store stopped: someone else wrote, the lock
    /// was broken, or the store kept failing. What the apply does next is still folded in
    /// memory and goes to the final write (or to `errored.json`).
    #[error("progress is no longer written to `{url}`: {cause}")]
    #[diagnostic(
        code(gpuplan::state::progress_stopped),
        help("the apply goes on; its final write says where the state went")
    )]
    ProgressStopped { url: String, cause: String },

    /// The final state could not be written to the store, so it was kept in a local file.
    #[error(
        "could not write the state to `{url}`: {cause}\nthe state this run produced was saved to `{}`",
        crate::spec::display_path(saved)
    )]
    #[diagnostic(
        code(gpuplan::state::errored),
        help(
            "nothing the run did is lost: once the store answers, push the saved state with `{command}` \
             (it refuses another lineage or an older serial unless you add --force), then remove the file"
        )
    )]
    Errored { url: String, cause: Box<StateError>, saved: PathBuf, command: String },

    /// The final write failed and so did keeping a local copy: the state is printed to
    /// stderr as the last resort.
    #[error("could not write the state to `{url}`: {cause}\nand could not save it locally to `{}`: {save_error}", saved.display())]
    #[diagnostic(
        code(gpuplan::state::errored),
        help("the state was printed above this error: save it to a file and run `gpuplan state push FILE`")
    )]
    ErroredUnsaved { url: String, cause: Box<StateError>, saved: PathBuf, save_error: String },

    #[error("cannot {action} `{}`", path.display())]
    #[diagnostic(code(gpuplan::state::io))]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// ` with key_provider passphrase (NAME)`, or nothing when no provider was involved.
fn with_provider(provider: &str) -> String {
    if provider.is_empty() { String::new() } else { format!(" with key_provider {provider}") }
}

impl StateError {
    /// `path` (shown from the working directory) could not be opened with its keys.
    pub fn decrypt(path: &std::path::Path, e: super::seal::SealError) -> StateError {
        let path = PathBuf::from(crate::spec::display_path(path));
        StateError::Decrypt { path, provider: e.provider, reason: e.reason, hint: e.hint }
    }

    /// `path` (shown from the working directory) could not be sealed.
    pub fn encrypt(path: &std::path::Path, e: super::seal::SealError) -> StateError {
        let path = PathBuf::from(crate::spec::display_path(path));
        StateError::Encrypt { path, provider: e.provider, reason: e.reason, hint: e.hint }
    }

    /// Another writer got there first (or broke our lock): trying again cannot help. A
    /// fence that lapsed without a new holder may hold again after a renewal: not a conflict.
    pub fn is_conflict(&self) -> bool {
        match self {
            StateError::Fenced { broken } => broken.lost,
            _ => matches!(self, StateError::Stale { .. } | StateError::LockLost { .. } | StateError::WrongLock { .. }),
        }
    }

    pub(crate) fn fenced(broken: Broken) -> StateError {
        StateError::Fenced { broken }
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StateError {
        let path = path.into();
        move |source| StateError::Io { action, path, source }
    }
}

fn holder_text(holder: &Option<LockInfo>, waited: &Duration) -> String {
    let waited =
        if waited.is_zero() { String::new() } else { format!(" (waited {})", humantime::format_duration(*waited)) };
    match holder {
        Some(h) => {
            format!(" by {} (pid {}) running `{}` since {}{waited}", h.who, h.pid, h.operation, h.created)
        }
        None => format!(" by another process{waited}"),
    }
}

fn locked_help(holder: &Option<LockInfo>) -> String {
    match holder {
        // A remote lock that renews: taken over once seen unchanged for its TTL.
        Some(h) if h.expires.is_some() => format!(
            "wait for it to finish or pass a longer `--lock-timeout`: a lock its holder stopped renewing is \
             taken over once this process has seen it unchanged for {} (the lock's TTL).\nRun `gpuplan state \
             unlock {}` only if pid {} on {} is really gone and you cannot wait",
            humantime::format_duration(Duration::from_millis(h.ttl_ms.unwrap_or(60_000))),
            h.id,
            h.pid,
            h.who.rsplit('@').next().unwrap_or(&h.who),
        ),
        Some(h) => format!(
            "wait for it to finish or pass a longer `--lock-timeout`. Only if pid {} on {} is really gone, \
             run `gpuplan state unlock {}`",
            h.pid,
            h.who.rsplit('@').next().unwrap_or(&h.who),
            h.id
        ),
        None => "the holder is still writing its lock details; try again in a moment".to_string(),
    }
}

fn position(line: &Option<usize>, column: &Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
        _ => String::new(),
    }
}

fn corrupt_help(path: &std::path::Path, backup: &std::path::Path) -> String {
    if backup.exists() {
        format!(
            "nothing was written. The previous state is in `{b}` (left untouched); inspect it and, if it is \
             right, restore it with `cp {b} {p}`",
            b = backup.display(),
            p = path.display()
        )
    } else {
        format!("nothing was written, and there is no `{}` to restore from; fix the file by hand", backup.display())
    }
}

fn bad_address_help(path: &std::path::Path, backup: &std::path::Path) -> String {
    let fix = format!(
        "nothing was written. Keys are addresses such as `gpu_pool.train` or `job.eval[2]`: correct the key in `{}` by hand",
        path.display()
    );
    if backup.exists() { format!("{fix}, or restore the previous state from `{}`", backup.display()) } else { fix }
}

fn state_text(lineage: &Option<String>, serial: &Option<u64>) -> String {
    match (lineage, serial) {
        (Some(l), Some(s)) => format!("lineage `{l}` serial {s}"),
        _ => "no state file".to_string(),
    }
}
