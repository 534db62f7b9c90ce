//! State: what gpuplan created and last observed, kept in a local file with a lock,
//! a backup and a journal so an apply never loses a finished operation.
//!
//! - [`model`]: the state file's data model (`State`, `ResourceState`).
//! - [`local`]: [`LocalBackend`], reading and atomically writing `state/<workspace>.json`
//!   and its `.backup`; `read` replays a journal a crashed apply left, `recover` folds it.
//! - [`lock`]: the `.lock` file ([`LockInfo`]) held with an OS lock; dead holders are taken over.
//! - [`fence`]: [`Fence`], whether this process may still act under its lock (or Lease).
//! - [`journal`]: the append-only `.journal` an apply writes (one fsync per batch).
//! - [`pretty`]: the state file's text, its large maps rendered on the cores.
//! - [`scan`]: a quick, sure-or-unsure look at a state file's header before a write.
//! - [`replay`]: what each [`JournalEntry`] means ([`apply_entry`]) and linear replay.
//! - [`remote`]: [`RemoteBackend`], the state in an object store (S3 and S3-compatible
//!   stores, GCS, Azure) with a create-only lock object and compare-and-swap writes.
//! - [`backend`]: [`Backend`], either of the two behind one API.
//! - [`envelope`]: the remote state object's body, compressed, its header in plain JSON.
//! - [`seal`]: client-side encryption of the state, its backup, the journal and saved
//!   plans ([`seal::Keyring`], from the spec's `encryption {}` block).
//! - [`compact`]: the history's summary and the spend ledger's closed months, folded.
//! - [`migrate`]: older state formats, and the node tags the file leaves out.
//! - [`stored`]: how format 3 writes a pool's nodes and the spend ledger.
//! - [`error`]: [`StateError`], every failure as a diagnostic with a next step.

pub mod backend;
pub mod compact;
pub mod envelope;
pub mod error;
pub mod fence;
mod fsutil;
pub mod holder;
pub mod journal;
pub mod local;
pub mod lock;
pub mod migrate;
pub mod model;
mod parse;
mod pretty;
pub mod remote;
pub mod replay;
mod scan;
pub mod seal;
pub mod spend;
mod stored;

#[cfg(test)]
mod remote_tests;
#[cfg(test)]
mod small_tests;
#[cfg(test)]
mod test_store;
#[cfg(test)]
mod tests;

pub use backend::Backend;
pub use error::StateError;
pub use fence::Fence;
pub(crate) use fsutil::{FileBytes, holds, read_whole, same_file};
pub use journal::{Journal, JournalHeader};
pub use local::LocalBackend;
pub use lock::{LockInfo, StateLock};
pub use model::{HistoryEntry, ResourceState, ScaleRecord, State};
pub use remote::RemoteBackend;
pub use replay::{JournalEntry, Replay, apply_entry};
