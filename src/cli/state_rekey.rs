//! `gpuplan state rekey [--decrypt]`: the state and its backup sealed again under the
//! `encryption {}` block's key provider, read with it or its `fallback` (a rotation), a
//! pending journal folded in first (docs/design/secrets.md, "Encryption at rest").
//! `--decrypt`, with the block removed, stores them unencrypted again, read with the key
//! provider their headers name.

use super::output;
use super::{CliError, ExitStatus, Settings, state_common};

pub fn run(settings: &Settings, decrypt: bool) -> miette::Result<ExitStatus> {
    let backend = state_common::backend(settings)?;
    let keys = backend.keys().clone();
    let provider = keys.config().map(|c| c.key_provider.describe());
    let backend = match (decrypt, provider.is_some()) {
        (true, true) => {
            return Err(CliError::new("`state rekey --decrypt` stores the state unencrypted, but the spec still has `encryption {}`")
                .hint("remove the `encryption` block first (else the next write encrypts the state again); nothing was written")
                .into());
        }
        (false, false) => {
            return Err(CliError::new("`state rekey` needs an `encryption` block in the spec")
                .hint("add `gpuplan { encryption { key_provider \"passphrase\" { passphrase_env = \"NAME\" } } }`; to store an encrypted state unencrypted, remove the block and run `gpuplan state rekey --decrypt`")
                .into());
        }
        (true, false) => backend.with_keys(crate::engine::keys::from_headers()),
        (false, true) => backend.with_keys(keys.fresh()),
    };
    let lock = backend.lock("state rekey", settings.lock_timeout).map_err(state_common::cli_error)?;
    state_common::warn_stale(&lock, settings);
    let at = state_common::location(&backend);
    let Some(mut state) = backend.recover(&lock).map_err(state_common::cli_error)? else {
        return Err(CliError::new(format!("there is no state yet at `{at}`"))
            .hint("`gpuplan apply` creates it")
            .into());
    };
    let how = match &provider {
        Some(p) => format!("encrypted with key_provider {p}"),
        None => "stored unencrypted".to_string(),
    };
    state.history.push(crate::engine::history("state_rekey", how.clone()));
    backend.write(&lock, &mut state).map_err(state_common::cli_error)?;
    let backup = backend.rekey_backup(&lock).map_err(state_common::cli_error)?;
    let also = if backup { " and its backup" } else { "" };
    output::stderr(&format!("The state `{at}` (serial {}){also} {how}.\n", state.serial));
    Ok(ExitStatus::Success)
}
