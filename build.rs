//! Links the `gpuplan` executable at a fixed address (not position-independent) on Linux.
//!
//! A position-independent executable is relocated by the dynamic loader at every start:
//! about 68,000 relative relocations, mostly pointers in the dependencies' read-only
//! tables (1 MB of `.data.rel.ro`, the GOT). Writing them copies each of those pages
//! into the process: about 300 page faults and 1.5–2 ms before `main` on the 2-core
//! benchmark machine, paid by every `plan` in CI and every reconcile tick (README,
//! Benchmarks). Packed relocations (`-z pack-relative-relocs`) shrink the table but
//! still write every page. Go links its CLIs the same way by default; the stack, the
//! heap and shared libraries are still placed at random addresses.
//!
//! Only the binaries get the flag (`rustc-link-arg-bins`): tests, build scripts and
//! proc-macros link as before.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
