//! `gpuplan state mv FROM TO`: rename a resource in the state, as a `moved {}` block
//! would, under the lock. The instances of a pool are retagged in place first (their
//! `gpuplan:address` tag is how refresh finds their pool); nothing is launched or
//! terminated. Then one state write and a history entry.

use super::output;
use super::{CliError, ExitStatus, Settings, load, runtime, state_common};
use crate::addr::Address;
use crate::engine;
use crate::providers::{NodeState, TAG_ADDRESS, Tags};
use crate::state::{JournalEntry, apply_entry};

pub fn run(settings: &Settings, from: &str, to: &str) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let ws = settings.workspace().with_backend(&loaded.spec);
    runtime::block_on(async {
        let mut session = engine::open_session(&ws, "state mv")?;
        if session.is_new() {
            return Err(state_common::no_state(from, settings).into());
        }
        let from = state_common::resolve_one(from, Some(&session.state), settings)?;
        let to = destination(&from, to)?;
        let (from_key, to_key) = (from.to_string(), to.to_string());
        if session.state.resources.contains_key(&to_key) {
            return Err(CliError::new(format!("the state already has `{to}`"))
                .hint("`gpuplan state rm` it first, or move to another address")
                .into());
        }
        let Some(resource) = session.state.resources.get(&from_key) else {
            return Err(state_common::no_state(&from_key, settings).into());
        };
        let ids: Vec<String> =
            resource.nodes.iter().filter(|n| n.state != NodeState::Terminated).map(|n| n.id.clone()).collect();
        if !ids.is_empty() {
            let (Some(provider), Some(region)) = (resource.provider.clone(), resource.region.clone()) else {
                return Err(CliError::new(format!("`{from}` records no provider for its nodes")).into());
            };
            let providers = engine::providers::build(&ws, &loaded.spec, &session.state)?;
            let providers = crate::apply::fence::under_lock(&providers, &session.lock);
            let p = providers.get(&provider).ok_or_else(|| {
                CliError::new(format!("provider `{provider}` of `{from}` is not in the spec"))
                    .hint("add its `provider` block, then run `gpuplan state mv` again")
            })?;
            let set: Tags = [(TAG_ADDRESS, to_key.as_str())].into_iter().collect();
            let adoption = crate::providers::ports::adoption_of(p.as_ref(), crate::providers::ports::RETAG);
            async { adoption?.tag_nodes(&region, &ids, &set, &[]).await }.await.map_err(|e| {
                CliError::new(format!("retagging the nodes of `{from}` failed: {e}"))
                    .hint("nothing was recorded; run the command again")
            })?;
        }
        let state = &mut session.state;
        apply_entry(state, &JournalEntry::Move { from: from_key.clone(), to: to_key.clone() });
        let entry = engine::history("state_mv", format!("{from_key} → {to_key}"));
        apply_entry(state, &JournalEntry::History { entry });
        session.backend.write(&session.lock, state)?;
        output::stderr(&format!(
            "Moved `{from}` to `{to}` ({} retagged in place)\n",
            crate::model::words::nodes(ids.len())
        ));
        Ok::<_, miette::Report>(ExitStatus::Success)
    })?
}

/// Where `to` moves `from`: a full address of the same kind, or a name alone, which keeps
/// `from`'s kind (`state mv train trainer`).
fn destination(from: &Address, to: &str) -> Result<Address, CliError> {
    let typed =
        if to.split('[').next().unwrap_or(to).contains('.') { to.to_string() } else { format!("{}.{to}", from.kind) };
    let to: Address = typed.parse().map_err(|e: crate::addr::AddressError| {
        CliError::new(e.to_string()).hint("the destination is `KIND.NAME`, or a name alone for the same kind")
    })?;
    if from.kind != to.kind {
        return Err(CliError::new(format!("`{from}` cannot move to `{to}`: a move keeps the kind")));
    }
    Ok(to)
}
