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
//! files, the local state file and the sim cloud's file beside it. The binary starts with
//! huge pages off, from before its first allocation ([`small_pages_from_the_start`]);
//! over [`SMALL_INPUTS`] in all, [`fit`] turns them on again (`PR_SET_THP_DISABLE`;
//! children inherit it). Which is faster depends on how the runs
//! come. Back to back, a run gets the huge pages the last one just freed, and zeroing
//! them is cheap: small pages then cost 20–30 % more time in page faults (a 2,000-pool
//! no-op plan: 5,100 faults instead of 330, 29 against 23 ms). Run as people and CI run
//! it, seconds apart, a huge page is fresh memory that a virtual machine's host must
//! fault in again (the guest hands free 2 MiB blocks back to it), and that costs far more
//! than the faults saved. Three seconds apart, on this project's 2-core VM, huge pages
//! made the no-op plan of 2,000 pools (4 MB of inputs) take 87 ms against 34 ms on small
//! pages, of 3,000 pools 112 against 55 ms, and of 10,000 pools (21 MB) 293 against
//! 159 ms; an earlier round measured `validate` and `plan --out` of 500 and 2,000 pools
//! the same way. Only the largest runs keep huge pages: at 100,000 pools the no-op plan
//! and `destroy` (about 140 MB of inputs with the sim cloud's files) ran about a tenth
//! faster on them, while `validate` and `apply FILE` (the 18 MB spec) ran as fast or
//! faster without (README, Benchmarks). A remote state counts as nothing, so a small
//! spec over a big remote state runs on small pages: slower page faults, less memory,
//! the same results.
//!
//! Over [`LARGE_INPUTS`], freed memory goes back to the kernel within milliseconds
//! ([`super::allocator`]): at 100,000 pools that keeps hundreds of MB off the peak. Below
//! it, mimalloc's own delay (a second) stands: a 2,000-pool no-op plan (4 MB of inputs)
//! spent 5 % more CPU returning pages it then touched, and zeroed, again. Nothing here
//! changes what a command does.

use std::path::Path;

use super::Settings;

/// Inputs at most this large (bytes) run without transparent huge pages.
pub const SMALL_INPUTS: u64 = 64 << 20;

/// Inputs larger than this (bytes) return freed memory promptly.
pub const LARGE_INPUTS: u64 = 8 << 20;

/// Turn transparent huge pages off for this process if its inputs are small (on again if
/// they are large: the binary turns them off before its first allocation, see
/// [`small_pages_from_the_start`]); return freed memory promptly if they are large.
pub fn fit(settings: &Settings) {
    let bytes = inputs_bytes(settings);
    set_huge_pages(bytes > SMALL_INPUTS);
    if bytes > LARGE_INPUTS {
        super::allocator::return_freed_memory_promptly();
    }
}

/// Turn transparent huge pages off before anything is allocated; [`fit`] turns them on
/// again for a run with large inputs. Called by the binary from its `.init_array`, so
/// before Rust's runtime, and so the allocator, starts: the arguments cannot be parsed
/// before memory is allocated, and the allocator's first touches of its arena were 2 MiB
/// pages the kernel zeroed while `clap` parsed them, about 5 ms of a 2,000-pool no-op
/// plan of 25–30 ms on the README's VM (`perf`: `clear_page_erms` under huge-page faults
/// from mimalloc's arena set-up and first pages). Allocates nothing.
pub fn small_pages_from_the_start() {
    set_huge_pages(false);
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

/// Transparent huge pages on or off for this process (`PR_SET_THP_DISABLE`, which
/// children inherit; Linux, elsewhere nothing). Memory already faulted in keeps its pages;
/// the setting applies from the next fault. Refused (an old kernel, a sandbox): the run
/// goes on as it is, so there is nothing to report.
fn set_huge_pages(on: bool) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _refused = rustix::thread::disable_transparent_huge_pages(!on).is_err();
    // No such switch elsewhere: nothing to do, and nothing that could fail.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = on;
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    fn settings(dir: &Path) -> Settings {
        let global = super::super::GlobalArgs {
            dir: Some(dir.to_path_buf()),
            state: None,
            workspace: None,
            no_color: true,
            lock_timeout: std::time::Duration::ZERO,
            input: true,
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

    /// The spec's files, the state file and the sim cloud's file all count (sparse files:
    /// only their length is read).
    #[test]
    fn a_big_workspace_keeps_huge_pages() {
        let tmp = tempfile::tempdir().unwrap();
        let sized = |path: &str, len: u64| std::fs::File::create(tmp.path().join(path)).unwrap().set_len(len).unwrap();
        sized("main.hcl", SMALL_INPUTS / 2);
        std::fs::create_dir(tmp.path().join("state")).unwrap();
        sized("state/default.json", SMALL_INPUTS / 4);
        assert!(small(&settings(tmp.path())), "three quarters of the limit");
        sized("state/default.sim.json", SMALL_INPUTS / 4 + 1);
        assert_eq!(inputs_bytes(&settings(tmp.path())), SMALL_INPUTS + 1);
        assert!(!small(&settings(tmp.path())));
        // The binary starts on small pages; a big run gets huge pages back.
        small_pages_from_the_start();
        assert!(huge_pages_disabled());
        fit(&settings(tmp.path()));
        assert!(!huge_pages_disabled());
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
