//! The process allocator's tuned options: how soon freed memory goes back to the kernel,
//! set at start-up for runs with large inputs ([`super::pages::fit`]), and that memory
//! still held at exit is left to the kernel ([`leave_memory_to_exit`], every run).
//!
//! The binary runs on mimalloc ([`crate::Allocator`]), which the `mimalloc` crate builds
//! from its vendored v3 sources (3.3.2). mimalloc returns freed pages to the kernel
//! (`MADV_DONTNEED`) only after its purge delay, and v3's default is 1,000 ms (v2's was
//! 10 ms). A command at 100,000 pools frees and allocates hundreds of MB within such a
//! second (the spec's raw tree after decoding, a refresh's fleet after the diff, the
//! plan before the state is built), so all of it stayed resident on top of the live
//! heap: destroy peaked at 709–722 MiB for a heap of about 600. With
//! [`PURGE_DELAY_MS`] it peaks about 100 MiB lower, for a few tenths of a second more
//! system time (README, Benchmarks). `MIMALLOC_PURGE_DELAY` in the environment still
//! wins, as mimalloc documents.
//!
//! The crate's bindings name this option only behind a feature that pulls in another
//! dependency, so the function is declared here; a test pins the option's
//! number to mimalloc's enum (it moves between major versions).

use std::ffi::{c_int, c_long};

/// Freed memory goes back to the kernel this long after it was freed (ms). 0 (at once)
/// measured the same peaks and more system time; 100 about the same as 10.
pub const PURGE_DELAY_MS: c_long = 10;

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_t` (and v2's): the 16th option.
const MI_OPTION_PURGE_DELAY: c_int = 15;

// mimalloc's C API (`mimalloc.h`), linked through the `mimalloc` crate's sys crate.
unsafe extern "C" {
    fn mi_option_set_default(option: c_int, value: c_long);
}

/// Set the purge delay to [`PURGE_DELAY_MS`] unless the environment set it. Affects only
/// when freed memory is returned, never what a command does.
pub fn return_freed_memory_promptly() {
    // SAFETY: mimalloc's option setter takes any option number and value; an out-of-range
    // number is ignored. The number is pinned by a test against the linked mimalloc.
    unsafe { mi_option_set_default(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
}

/// `mi_option_destroy_on_exit`, the 23rd option of mimalloc v3's `mi_option_t`.
const MI_OPTION_DESTROY_ON_EXIT: c_int = 22;

/// Skip mimalloc's clean-up at exit. By default its exit handler collects the main
/// thread's heap and hands every free page back to the kernel (`MADV_DONTNEED`), one
/// call per 64 KiB: after a 2,000-pool no-op plan, about 290 calls that split the huge
/// pages they fall in, for memory the kernel takes back a moment later anyway when the
/// process ends. A value above 1 makes the handler return at once (`_mi_auto_process_done`
/// in mimalloc's `init.c`). `MIMALLOC_DESTROY_ON_EXIT` in the environment still wins.
pub fn leave_memory_to_exit() {
    // SAFETY: as in `return_freed_memory_promptly`; the number is pinned by a test.
    unsafe { mi_option_set_default(MI_OPTION_DESTROY_ON_EXIT, 2) };
}

/// The purge delay mimalloc uses now (ms).
#[cfg(test)]
pub(super) fn purge_delay() -> c_long {
    unsafe extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
    }
    // SAFETY: a read of mimalloc's option table, valid for any option number.
    unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" {
        fn mi_version() -> c_int;
        fn mi_option_get(option: c_int) -> c_long;
    }

    /// mimalloc v3's option table around the purge delay, by the defaults its header
    /// documents: 15 is `purge_delay` (1,000 ms, unless this module set it already) and
    /// 18 is `os_tag` (100). A different major version, or a reordered enum, fails here
    /// rather than setting some other option.
    #[test]
    fn option_15_is_mimallocs_purge_delay() {
        // SAFETY: reads of mimalloc's version and option table.
        let version = unsafe { mi_version() };
        assert_eq!(version / 10_000, 3, "mimalloc {version}: not the v3 this module was written against");
        const MI_OPTION_OS_TAG: c_int = 18;
        // SAFETY: as above.
        assert_eq!(unsafe { mi_option_get(MI_OPTION_OS_TAG) }, 100);
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert!([1_000, PURGE_DELAY_MS].contains(&purge_delay()), "{}", purge_delay());
        }
    }

    #[test]
    fn the_purge_delay_is_set_unless_the_environment_sets_it() {
        return_freed_memory_promptly();
        // Unset (or not a number, which mimalloc ignores too): our delay applies.
        let expected = std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse().ok());
        assert_eq!(purge_delay(), expected.unwrap_or(PURGE_DELAY_MS));
    }

    /// Option 22 is `destroy_on_exit`: it sits right before `arena_reserve` (23), whose
    /// default is 1 GiB counted in KiB, and after `max_warnings` (20, default 32). Once
    /// set, it reads 2, the value that makes mimalloc's exit handler return at once.
    #[test]
    fn option_22_is_mimallocs_destroy_on_exit_and_is_set_above_one() {
        const MI_OPTION_MAX_WARNINGS: c_int = 20;
        const MI_OPTION_ARENA_RESERVE: c_int = 23;
        // SAFETY: reads of mimalloc's option table.
        if std::env::var_os("MIMALLOC_ARENA_RESERVE").is_none() {
            assert_eq!(unsafe { mi_option_get(MI_OPTION_ARENA_RESERVE) }, 1024 * 1024);
        }
        if std::env::var_os("MIMALLOC_MAX_WARNINGS").is_none() {
            assert_eq!(unsafe { mi_option_get(MI_OPTION_MAX_WARNINGS) }, 32);
        }
        leave_memory_to_exit();
        if std::env::var_os("MIMALLOC_DESTROY_ON_EXIT").is_none() {
            assert_eq!(unsafe { mi_option_get(MI_OPTION_DESTROY_ON_EXIT) }, 2);
        }
    }
}
