//! `gpuplan state show ADDR`: one resource as recorded, pretty JSON on stdout.

use super::{CliError, ExitStatus, Settings, output, state_common};

pub fn run(settings: &Settings, input: &str) -> miette::Result<ExitStatus> {
    let state = state_common::read(settings)?;
    let address = state_common::resolve_one(input, state.as_ref(), settings)?.to_string();
    let Some(resource) = state.as_ref().and_then(|s| s.resources.get(&address)) else {
        return Err(state_common::no_state(&address, settings).into());
    };
    let json =
        serde_json::to_string_pretty(resource).map_err(|e| CliError::new(format!("cannot encode `{address}`: {e}")))?;
    output::stdout(&format!("{json}\n"));
    Ok(ExitStatus::Success)
}
