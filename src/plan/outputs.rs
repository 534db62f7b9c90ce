//! What a plan does to the output values in state: the spec's `output` blocks, evaluated
//! when the spec was decoded (the values `gpuplan test` asserts), against those the last
//! apply stored. Pure.
//!
//! As in Terraform: a new output is `create`, a changed value (or sensitivity) `update`, an
//! output that left the spec `delete`; a destroy deletes them all. A targeted plan takes
//! only the outputs that read resources, all of them targeted: an output of something the
//! plan leaves alone would record a value the fleet does not have.

use crate::addr::Address;
use crate::plan::model::{Action, OutputChange};
use crate::spec::Spec;
use crate::spec::model::Output;
use crate::state::model::OutputState;
use crate::state::{JournalEntry, State};

/// Every output of the spec or the state with its action, by name.
pub fn changes(spec: &Spec, state: &State, targets: &[Address], destroy: bool) -> Vec<OutputChange> {
    let mut out: Vec<OutputChange> = Vec::new();
    if destroy {
        for (name, before) in &state.outputs {
            out.push(change(name, Some(before), None));
        }
        return out;
    }
    for (name, o) in &spec.outputs {
        if !targets.is_empty() && !targeted(o, targets) {
            continue;
        }
        out.push(change(name, state.outputs.get(name), Some(value(o))));
    }
    if targets.is_empty() {
        for (name, before) in state.outputs.iter().filter(|(n, _)| !spec.outputs.contains_key(*n)) {
            out.push(change(name, Some(before), None));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The value an output stores.
pub fn value(o: &Output) -> OutputState {
    OutputState { value: o.value.value.to_json(), sensitive: o.sensitive.value }
}

fn change(name: &str, before: Option<&OutputState>, after: Option<OutputState>) -> OutputChange {
    let action = match (before, &after) {
        (None, Some(_)) => Action::Create,
        (Some(_), None) => Action::Delete,
        (Some(b), Some(a)) if b == a => Action::NoOp,
        (Some(_), Some(_)) => Action::Update,
        (None, None) => Action::NoOp,
    };
    OutputChange { name: name.to_string(), action, before: before.cloned(), after }
}

/// Does every resource the output reads fall under `targets` (and it reads one)?
fn targeted(o: &Output, targets: &[Address]) -> bool {
    !o.reads.is_empty() && o.reads.iter().all(|r| targets.iter().any(|t| t.kind == r.kind && t.name == r.name))
}

/// The journal entry that records `changes` in state once the plan is applied; `None`
/// when no value changes.
pub fn journal_entry(changes: &[OutputChange]) -> Option<JournalEntry> {
    let mut set = std::collections::BTreeMap::new();
    let mut remove = Vec::new();
    for o in changes.iter().filter(|o| o.action != Action::NoOp) {
        match &o.after {
            Some(v) => {
                set.insert(o.name.clone(), v.clone());
            }
            None => remove.push(o.name.clone()),
        }
    }
    (!set.is_empty() || !remove.is_empty()).then_some(JournalEntry::Outputs { set, remove })
}

#[cfg(test)]
mod tests;
