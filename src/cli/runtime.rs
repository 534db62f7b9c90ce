//! The tokio seam: only commands that talk to providers or sleep (`plan`, `apply`,
//! `reconcile`, ...) build a runtime, so `validate`, `fmt` and `--help` stay instant.
//!
//! The runtime is built here rather than in `main` because only the parsed command knows
//! whether it needs one; `main` stays a three-liner around `cli::run`.

use std::future::Future;

use super::CliError;

/// Run an async command to completion on a fresh multi-threaded runtime.
#[allow(dead_code)] // the first async command (`plan`) arrives with the engine
pub fn block_on<F: Future>(future: F) -> Result<F::Output, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("gpuplan")
        .build()
        .map_err(|e| CliError::new(format!("cannot start the async runtime: {e}")))?;
    Ok(runtime.block_on(future))
}
