//! `gpuplan state show ADDR`: one resource as recorded, pretty JSON on stdout; an
//! attribute derived from a sensitive variable prints `"(sensitive)"`.

use super::{CliError, ExitStatus, Settings, output, state_common};

pub fn run(settings: &Settings, input: &str) -> miette::Result<ExitStatus> {
    let state = state_common::read(settings)?;
    let address = state_common::resolve_one(input, state.as_ref(), settings)?.to_string();
    let Some(resource) = state.as_ref().and_then(|s| s.resources.get(&address)) else {
        return Err(state_common::no_state(&address, settings).into());
    };
    let mut shown = resource.clone();
    shown.config = crate::render::masked_config(&resource.config, &resource.sensitive);
    // A pool's labels are its nodes' tags: a sensitive label is hidden there too.
    let labels: Vec<&str> = resource.sensitive.iter().filter_map(|p| p.strip_prefix("labels")).collect();
    for tags in shown.nodes.iter_mut().map(|n| &mut n.tags) {
        let hidden: Vec<String> = tags
            .iter()
            .map(|(k, _)| k.to_string())
            .filter(|k| {
                labels.contains(&"") && !k.starts_with("gpuplan:") || labels.contains(&format!(".{k}").as_str())
            })
            .collect();
        for key in hidden {
            tags.insert(key, crate::render::SENSITIVE);
        }
    }
    let json =
        serde_json::to_string_pretty(&shown).map_err(|e| CliError::new(format!("cannot encode `{address}`: {e}")))?;
    output::stdout(&format!("{json}\n"));
    Ok(ExitStatus::Success)
}
