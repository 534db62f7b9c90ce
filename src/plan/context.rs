//! What the planners of single resources (`diff.rs` for configurations, `pool/` for
//! pools) share: the [`PlanInput`] a plan is computed from, the pool attributes that
//! cannot change in place, and the dotted-path helpers over configurations. It sits below
//! both so that `pool/` takes them from here rather than from the diff that calls it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;

use crate::addr::Address;
use crate::json_text::JsonText;
use crate::plan::model::ScaleAction;
use crate::providers::Node;
use crate::spec::Spec;
use crate::state::State;

/// Everything a plan is computed from.
pub struct PlanInput<'a> {
    pub spec: &'a Spec,
    pub state: &'a State,
    /// Nodes carrying this state's lineage, from refresh. `None` means `--refresh=false`:
    /// the state's own record of nodes is taken as the truth.
    pub observed: Option<&'a [Node]>,
    pub targets: &'a [Address],
    /// Pools (or counted pools' instances) whose every node is replaced (`--replace`).
    pub replace: &'a [Address],
    /// What the GPU health reads of live nodes found, by node id (docs/design/gpu-health.md);
    /// `None`: not read (no refresh, or no provider with a health port).
    pub health: Option<&'a std::collections::BTreeMap<String, crate::model::health::NodeHealth>>,
    pub destroy: bool,
    pub spec_digest: String,
    /// Autoscaler decisions (from `reconcile`): an autoscaled pool converges to their count.
    pub autoscale: &'a [ScaleAction],
    /// Each provider's clock (ms since the epoch) by provider block name, read when the plan
    /// refreshed: when a pool that fell back tries its preferred placement again. Empty for
    /// a plan that did not refresh (fallbacks then hold).
    pub clocks: &'a BTreeMap<String, u64>,
    /// Run id → status from the jobs' refresh; `None`: the state's record of runs stands.
    /// Says which nodes run a job now (kept first when a pool removes nodes).
    pub job_statuses: Option<&'a BTreeMap<String, crate::providers::JobStatus>>,
    /// A destroy with `--override-policy no_destroy_pool_with_jobs`: the jobs on the nodes
    /// it removes stop with them. Otherwise a job that is not preemptible keeps its node
    /// (and its record) until it ends, as on scale-in.
    pub stop_busy: bool,
}

#[cfg(test)]
impl<'a> PlanInput<'a> {
    /// A plan of `spec` against `state` with nothing refreshed, targeted, replaced or
    /// autoscaled (`--refresh=false`): what most unit tests plan. A test that needs more
    /// sets those fields and takes the rest with `..PlanInput::offline(spec, state)`.
    pub(crate) fn offline(spec: &'a Spec, state: &'a State) -> Self {
        static NO_CLOCKS: BTreeMap<String, u64> = BTreeMap::new();
        PlanInput {
            spec,
            state,
            observed: None,
            targets: &[],
            replace: &[],
            health: None,
            destroy: false,
            spec_digest: crate::plan::diff::spec_digest(spec),
            autoscale: &[],
            clocks: &NO_CLOCKS,
            job_statuses: None,
            stop_busy: false,
        }
    }
}

/// Attributes of a pool that cannot change in place: changing them replaces nodes.
/// (`render/` reads it to mark `# forces replacement`.)
pub const IMMUTABLE: &[&str] = &["provider", "region", "gpu", "gpus_per_node", "instance_types", "image"];

/// [`changed_paths`] of stored configurations; equal text (the common case) is no change.
pub(crate) fn changed_text(before: &JsonText, after: &JsonText) -> Vec<String> {
    if before == after { vec![] } else { changed_paths(&before.to_value(), &after.to_value()) }
}

/// Dotted paths of leaves that differ between two JSON values.
pub fn changed_paths(before: &Json, after: &Json) -> Vec<String> {
    let mut out = Vec::new();
    diff_into(before, after, String::new(), &mut out);
    out
}

fn diff_into(b: &Json, a: &Json, path: String, out: &mut Vec<String>) {
    // A secret reference is one value (`env.HF_TOKEN`), not an object with a `secret` key.
    let secret = |v: &Json| crate::model::secret::SecretRef::in_json(v).is_some();
    match (b, a) {
        (Json::Object(bo), Json::Object(ao)) if !secret(b) && !secret(a) => {
            let keys: BTreeSet<&String> = bo.keys().chain(ao.keys()).collect();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                diff_into(bo.get(k).unwrap_or(&Json::Null), ao.get(k).unwrap_or(&Json::Null), p, out);
            }
        }
        _ if b != a => out.push(path),
        _ => {}
    }
}

/// Copy the value at a dotted path from `from` into `to` (for `ignore_changes`).
pub(crate) fn copy_path(from: &Json, to: &mut Json, path: &str) {
    let pointer = format!("/{}", path.replace('.', "/"));
    let value = from.pointer(&pointer).cloned();
    let mut cur = to;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let Json::Object(map) = cur else { return };
        if i + 1 == parts.len() {
            match &value {
                Some(v) => {
                    map.insert(part.to_string(), v.clone());
                }
                None => {
                    map.remove(*part);
                }
            }
            return;
        }
        cur = map.entry(part.to_string()).or_insert_with(|| Json::Object(Default::default()));
    }
}
