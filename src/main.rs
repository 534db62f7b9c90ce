//! The `gpuplan` binary: everything happens in [`gpuplan::cli::run`]; this file only sets
//! up miette's report hook and turns the returned status into the process exit code.

use std::io::IsTerminal;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: gpuplan::Allocator = gpuplan::Allocator;

/// Small pages from before the first allocation: the loader runs the functions of
/// `.init_array` before Rust's runtime starts, and so before the allocator touches its
/// arena (see [`gpuplan::cli::small_pages_from_the_start`]; a run with large inputs gets
/// huge pages back once its inputs are known).
#[cfg(any(target_os = "linux", target_os = "android"))]
#[used]
#[unsafe(link_section = ".init_array")]
static SMALL_PAGES_FROM_THE_START: extern "C" fn() = {
    extern "C" fn small_pages() {
        gpuplan::cli::small_pages_from_the_start();
    }
    small_pages
};

fn main() -> ExitCode {
    install_miette_hook();
    gpuplan::cli::run(std::env::args_os()).into()
}

/// Plain reports (no colour, no unicode art) when `NO_COLOR` is set or stderr is not a
/// terminal. Commands render their own diagnostics with the resolved settings; this hook
/// covers any `miette::Report` printed outside them. The tokio runtime is not built here
/// but in `cli::runtime`, only for the commands that need one.
fn install_miette_hook() {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let color = !no_color && std::io::stderr().is_terminal();
    // Fails only if a hook is already installed, which cannot happen this early.
    let _ = miette::set_hook(Box::new(move |_| {
        let opts = miette::MietteHandlerOpts::new().color(color);
        let opts = if color { opts } else { opts.unicode(false) };
        Box::new(opts.build())
    }));
}
