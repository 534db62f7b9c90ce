//! A head start on the state and the embedded cloud: their files are read and parsed on
//! two more threads (one each) while the spec is parsed on the first.
//!
//! Where the state lives is known only once the spec is decoded (its `backend` block),
//! and the locks are taken after that, state first, as always. What is read here is
//! therefore a guess made without any lock: the default local state file and the sim
//! cloud's files beside it. It is used only if, under the locks, the files still hold
//! exactly the same bytes ([`LocalBackend::recover_preread`](crate::state::LocalBackend::recover_preread),
//! [`SimCloud::open_preread`](crate::providers::sim::SimCloud::open_preread)); any other
//! case reads them again as before. Nothing here writes, locks or reports: an error is
//! only a lost head start, and the read under the lock reports it.

use super::Workspace;
use crate::providers::sim;
use crate::state::local;

/// Files larger than this are not read ahead: at that size the parse of the spec, not
/// its latency, is what matters, and a second copy would only raise the peak memory (the
/// 31 MB state of 100,000 pools, parsed beside the spec's raw tree, raised the peak of
/// `plan`, `apply` and `destroy` at the end of the spec's parse by about 100 MB).
pub const MAX_BYTES: u64 = 8 << 20;

/// What was read ahead; either part may be missing.
#[derive(Default)]
pub struct Preread {
    pub state: Option<local::Preread>,
    pub sim: Option<sim::Preread>,
}

/// Read and parse the workspace's local state file and sim cloud files, if they exist
/// and are small enough, each on its own thread: at 2,000 pools the state is about 19 ms
/// of parsing and the sim cloud 8, and one after the other they took longer than the
/// spec beside them. Runs without locks; see the module docs.
pub fn read(ws: &Workspace) -> Preread {
    std::thread::scope(|s| {
        let sim = s.spawn(|| sim::Preread::read(&ws.sim_path(), MAX_BYTES));
        let state = local::Preread::read(&ws.state_path, MAX_BYTES);
        // As in `alongside`: a panic while reading ahead is a bug, surfaced.
        let sim = sim.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        Preread { state, sim }
    })
}

/// Run `load` (the spec) on this thread while [`read`] runs on another.
pub fn alongside<T>(ws: &Workspace, load: impl FnOnce() -> T) -> (T, Preread) {
    std::thread::scope(|s| {
        let ahead = s.spawn(|| read(ws));
        let loaded = load();
        // A panic while reading ahead is a bug: surface it, do not plan without it silently.
        let pre = ahead.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (loaded, pre)
    })
}
