//! State: what gpuplan created and last observed, kept in a local file with a lock,
//! a backup and a journal so an apply never loses a finished operation.
//!
//! - `model.rs`: the file format (`State`, `ResourceState`).
//! - `local.rs`: the local file backend: atomic writes (temp, fsync, rename), a
//!   `.backup` of the previous version, mode 0600, the lock, load with journal replay.
//! - `lock.rs`: the lock file `{id, who, operation, created}` held with an OS file lock;
//!   a second writer waits up to `--lock-timeout`, then fails naming the holder.
//! - `journal.rs`: append-only JSON lines of finished operations, each durable (fsync)
//!   before it is reported done; replayed on load and compacted into the state file at
//!   the end of an apply, so an apply of N operations writes O(N) bytes, not O(N²).

pub mod model;

pub use model::{ResourceState, State};
