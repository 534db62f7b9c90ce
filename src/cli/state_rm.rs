//! `gpuplan state rm ADDR...`: forget resources without touching the clouds. Under the
//! lock, all addresses checked first, one write, a history entry.

use super::output::{self, Style};
use super::{ExitStatus, Settings, addresses, state_common};
use crate::state::{JournalEntry, apply_entry};

pub fn run(settings: &Settings, inputs: &[String]) -> miette::Result<ExitStatus> {
    let backend = state_common::backend(settings)?;
    let lock = backend.lock("state rm", settings.lock_timeout).map_err(state_common::cli_error)?;
    state_common::warn_stale(&lock, settings);
    let state = backend.recover(&lock).map_err(state_common::cli_error)?;
    let Some(mut state) = state else {
        return Err(state_common::no_state(&inputs[0], settings).into());
    };
    // Every address must exist before anything is removed: a typo must not half-apply.
    // Without its key, an address removes every instance (as Terraform's does).
    let known = addresses::in_state(&state);
    let lookup = state_common::lookup(settings);
    let mut names: Vec<String> = Vec::new();
    for input in inputs {
        for name in addresses::resolve(input, &known, &lookup)?.matches.iter().map(ToString::to_string) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }

    let live = |a: &String| state.resources[a].nodes.iter().filter(|n| n.is_live()).count();
    let nodes: usize = names.iter().map(live).sum();
    for address in &names {
        apply_entry(&mut state, &JournalEntry::DeleteResource { address: address.clone() });
    }
    let entry = crate::engine::history("state_rm", names.join(", "));
    apply_entry(&mut state, &JournalEntry::History { entry });
    backend.write(&lock, &mut state).map_err(state_common::cli_error)?;

    let mut text: String = names.iter().map(|n| format!("Removed `{n}`\n")).collect();
    let warning = output::paint("warning:", Style::Warning, settings.color_stderr);
    let (live, keep) = (
        crate::model::words::count(nodes, "live node", "live nodes"),
        crate::model::words::plural(nodes, "keeps", "keep"),
    );
    text.push_str(&format!(
        "{warning} cloud objects were not destroyed: {live} {keep} running and billing; \
         `gpuplan plan` will report them as orphans\n"
    ));
    text.push_str("hint: adopt them back with `gpuplan plan`/`apply`, or delete them in the cloud console\n");
    output::stderr(&text);
    Ok(ExitStatus::Success)
}
