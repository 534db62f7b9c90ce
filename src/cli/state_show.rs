//! `gpuplan state show ADDR`: one resource as recorded, pretty JSON on stdout.

use super::{CliError, ExitStatus, Settings, output, state_common};
use crate::addr::Address;

pub fn run(settings: &Settings, address: &Address) -> miette::Result<ExitStatus> {
    let address = address.to_string();
    let state = state_common::read(settings)?;
    let Some(resource) = state.as_ref().and_then(|s| s.resources.get(&address)) else {
        return Err(state_common::unknown_address(&address, state.as_ref(), settings).into());
    };
    let json =
        serde_json::to_string_pretty(resource).map_err(|e| CliError::new(format!("cannot encode `{address}`: {e}")))?;
    output::stdout(&format!("{json}\n"));
    Ok(ExitStatus::Success)
}
