//! Transparent huge pages only for runs big enough to fill them, and freed memory
//! returned promptly only by runs large enough for it to matter; decided at start-up.
//!
//! mimalloc asks the kernel for transparent huge pages on its arenas (`MADV_HUGEPAGE`),
//! so the first touch of each 2 MiB of them zeroes all 2 MiB (after compacting memory
//! when the kernel is short of free huge pages). A small run touches a few MiB of each
//! and uses little of it: in a 500-node AWS create that zeroing was the largest single
//! CPU cost (`perf`: 40 % of the samples in the kernel's `clear_page_erms`, most of them
//! right after each fleet's answer), for memory the run never used. Big runs keep huge
//! pages: they fill them, and take fewer page faults and TLB misses through them.
//!
//! The size of a run is guessed from its inputs before it allocates much: the spec's
//! files, the local state file and the sim cloud's file beside it. At most
//! [`SMALL_INPUTS`] in all, huge pages are turned off for this process
//! (`PR_SET_THP_DISABLE`; children inherit it). Measured on `plan --out` of sim fleets
//! from an empty state, small pages cost nothing up to 200 pools (41 KB of spec), 5 %
//! more CPU at 500 (97 KB) and about 20 % at 1,000 and 2,000 (190 and 376 KB): more
//! page faults once a run fills its memory, so those sizes keep huge pages. A remote
//! state counts as nothing, so a tiny spec over a big remote state runs on small pages:
//! slower page faults, less memory, the same results.
//!
//! Over [`LARGE_INPUTS`], freed memory goes back to the kernel within milliseconds
//! ([`super::allocator`]): at 100,000 pools that keeps hundreds of MB off the peak. Below
//! it, mimalloc's own delay (a second) stands: a 2,000-pool no-op plan (4 MB of inputs)
//! spent 5 % more CPU returning pages it then touched, and zeroed, again. Nothing here
//! changes what a command does.

use std::path::Path;

use super::Settings;

/// Inputs at most this large (bytes) run without transparent huge pages.
pub const SMALL_INPUTS: u64 = 64 << 10;

/// Inputs larger than this (bytes) return freed memory promptly.
pub const LARGE_INPUTS: u64 = 8 << 20;

/// Turn transparent huge pages off for this process if its inputs are small; return freed
/// memory promptly if they are large.
pub fn fit(settings: &Settings) {
    let bytes = inputs_bytes(settings);
    if bytes <= SMALL_INPUTS {
        disable_huge_pages();
    }
    if bytes > LARGE_INPUTS {
        super::allocator::return_freed_memory_promptly();
    }
}

/// Are the run's inputs at most [`SMALL_INPUTS`]? ([`fit`] reads the size once for both
/// decisions.)
#[cfg(test)]
fn small(settings: &Settings) -> bool {
    inputs_bytes(settings) <= SMALL_INPUTS
}

/// The size of the spec's files, the state file and the sim cloud's file. A file that
/// cannot be read counts as empty: a new workspace has no state yet, and the spec's
/// loader reports an unreadable spec where it always did.
fn inputs_bytes(settings: &Settings) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let spec: u64 = crate::spec::spec_files(&settings.dir).map_or(0, |files| files.iter().map(|f| size(f)).sum());
    spec + size(&settings.state_path) + size(&settings.workspace().sim_path())
}

/// `PR_SET_THP_DISABLE` for this process (Linux; elsewhere nothing). Refused (an old
/// kernel, a sandbox): the run goes on with huge pages, as it did before, so there is
/// nothing to report.
fn disable_huge_pages() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _refused = rustix::thread::disable_transparent_huge_pages(true).is_err();
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    fn settings(dir: &Path) -> Settings {
        let global = super::super::GlobalArgs {
            dir: Some(dir.to_path_buf()),
            state: None,
            workspace: "default".into(),
            no_color: true,
            lock_timeout: std::time::Duration::ZERO,
        };
        Settings::resolve(&global, &[]).expect("settings")
    }

    fn huge_pages_disabled() -> bool {
        rustix::thread::transparent_huge_pages_are_disabled().expect("PR_GET_THP_DISABLE")
    }

    #[test]
    fn a_small_workspace_runs_without_huge_pages() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("main.hcl"), "gpu_pool \"a\" {\n  provider = \"sim\"\n}\n").unwrap();
        assert!(small(&settings(tmp.path())));
        fit(&settings(tmp.path()));
        assert!(huge_pages_disabled());
    }

    /// The spec's files, the state file and the sim cloud's file all count.
    #[test]
    fn a_big_workspace_keeps_huge_pages() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("main.hcl"), "# big\n".repeat(5_000)).unwrap();
        std::fs::create_dir(tmp.path().join("state")).unwrap();
        std::fs::write(tmp.path().join("state/default.json"), vec![b' '; 20_000]).unwrap();
        assert!(small(&settings(tmp.path())), "30,000 bytes");
        std::fs::write(tmp.path().join("state/default.sim.json"), vec![b' '; 40_000]).unwrap();
        assert_eq!(inputs_bytes(&settings(tmp.path())), 30_000 + 20_000 + 40_000);
        assert!(!small(&settings(tmp.path())));
    }

    /// Past [`LARGE_INPUTS`] (here a state file that large) freed memory goes back within
    /// milliseconds.
    #[test]
    fn a_large_workspace_returns_freed_memory_promptly() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("main.hcl"), "# large\n").unwrap();
        std::fs::create_dir(tmp.path().join("state")).unwrap();
        let state = std::fs::File::create(tmp.path().join("state/default.json")).unwrap();
        state.set_len(LARGE_INPUTS).unwrap();
        assert!(inputs_bytes(&settings(tmp.path())) > LARGE_INPUTS);
        fit(&settings(tmp.path()));
        // Unset (or not a number, which mimalloc ignores too): our delay applies.
        let expected = std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse().ok());
        assert_eq!(super::super::allocator::purge_delay(), expected.unwrap_or(super::super::allocator::PURGE_DELAY_MS));
    }
}
