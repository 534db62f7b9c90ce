//! diff(Spec, state, observed nodes) → [`Plan`]. Pure and deterministic.
//!
//! For each address in the spec, the state or the clouds:
//! - pools (`pool/`): the desired node layout (`shape.rs`) against the live nodes; nodes whose
//!   immutable attributes no longer match are replaced (new ones first by default);
//!   surplus nodes go newest first; orphans tagged for a pool in the spec are adopted.
//! - other resources: their configuration against the one last applied.
//!
//! Drift (reclaimed, removed, changed or orphaned nodes) is reported beside the changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::addr::{Address, Kind};
use crate::catalog;
use crate::graph;
use crate::hex::hex;
use crate::json_text::JsonText;
use crate::plan::context::changed_text;
pub use crate::plan::context::{IMMUTABLE, PlanInput, changed_paths};
use crate::plan::model::*;
use crate::plan::pool::{AsRecorded, JobNodes, PoolCtx, pool_change};
use crate::providers::Node;
use crate::spec::Spec;
use crate::state::{ResourceState, State};

/// The starter policy whose override lets a destroy stop the jobs on the nodes it removes
/// ([`PlanInput::stop_busy`]).
pub const BUSY_POLICY: &str = "no_destroy_pool_with_jobs";

/// SHA-256 of the canonical JSON of a spec, streamed into the hash (a large fleet's spec
/// is tens of MB as JSON).
pub fn spec_digest(spec: &Spec) -> String {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = std::io::BufWriter::with_capacity(1 << 16, Hashing(Sha256::new()));
    if serde_json::to_writer(&mut w, spec).is_err() {
        // As before: a spec that cannot be serialized digests as empty input.
        return hex(&Sha256::digest(b""));
    }
    match w.into_inner() {
        Ok(h) => hex(&h.0.finalize()),
        Err(_) => hex(&Sha256::digest(b"")),
    }
}

/// A state resource key that is not an address. The state layer refuses such a file when
/// it reads it (`state::local::parse_state`, [`crate::state::State::bad_address`]), so
/// only a state built in memory can get here; the planner could not say what the key is,
/// and dropping it would forget resources that cost money.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("the state has the key `{key}`, which is not a resource address: {reason}")]
#[diagnostic(code(gpuplan::plan::bad_state_key), help("state keys are addresses such as `gpu_pool.train`"))]
pub struct BadStateKey {
    pub key: String,
    pub reason: &'static str,
}

/// The plan of `input`: every address of the spec, the state and the live nodes.
pub fn plan(input: &PlanInput<'_>) -> Result<Plan, BadStateKey> {
    plan_knowing(input, None)
}

/// [`plan`], with which pools' recorded configuration is the spec's found already (of
/// this input's spec and state, or of the ones they were copied from): the same plan.
pub fn plan_knowing(input: &PlanInput<'_>, known: Option<&AsRecorded>) -> Result<Plan, BadStateKey> {
    plan_in_rounds(input, crate::par::cores(), PER_ROUND, known)
}

/// [`plan`] on at most `threads` threads (the same plan on any number).
#[cfg(test)]
pub(crate) fn plan_on(input: &PlanInput<'_>, threads: usize) -> Result<Plan, BadStateKey> {
    plan_in_rounds(input, threads, PER_ROUND, None)
}

/// Addresses planned per round of threads. Each round's runs move into the plan's
/// vector once done, so beside it only one round's changes are alive: at 100,000 pools,
/// every run's changes at once were 33 to 67 MB more at the peak of a plan.
const PER_ROUND: usize = 8_192;

/// [`plan_on`] in rounds of `round` addresses (the same plan for any size).
pub(crate) fn plan_in_rounds(
    input: &PlanInput<'_>,
    threads: usize,
    round: usize,
    known: Option<&AsRecorded>,
) -> Result<Plan, BadStateKey> {
    let spec = input.spec;
    let cat = catalog::catalog();
    // Built when first asked: only creates, updates and replacements (and `--target`)
    // read dependencies from the spec, so a no-op plan or a destroy never builds it
    // (at 100,000 pools about 30 MB beside the diff's peak).
    let graph = OnceLock::new();
    let state = state_addresses(input.state)?;
    let (live, stopped, seen_by_id) = live_nodes(input, &state);
    let addresses = addresses(input, &state, &live, &stopped);
    let mut plan = empty_plan(input);
    let jobs = if input.stop_busy { JobNodes::default() } else { JobNodes::new(spec, input.state, input.job_statuses) };

    let autoscaled: BTreeSet<&Address> = spec.autoscalers.values().map(|a| &a.pool.value).collect();
    if !input.destroy {
        plan.autoscale = input.autoscale.iter().filter(|a| autoscaled.contains(&a.pool)).cloned().collect();
    }
    let cx = Shared {
        input,
        cat,
        graph: &graph,
        live: &live,
        stopped: &stopped,
        seen_by_id: &seen_by_id,
        autoscaled: &autoscaled,
        jobs: &jobs,
        known,
    };
    let addresses: Vec<&Address> = addresses.iter().collect();
    // Exact: a change is several hundred bytes, and doubling growth of a 100,000-change
    // vector would leave up to half of it unused.
    plan.changes = Vec::with_capacity(addresses.len());
    for addresses in addresses.chunks(round.max(1)) {
        for part in changes_of(&cx, addresses, threads) {
            plan.changes.extend(part.changes);
            plan.errors.extend(part.errors);
            plan.drift.extend(part.drift);
            plan.notes.extend(part.notes);
            plan.health.extend(part.health);
        }
    }
    let going: BTreeSet<&str> =
        plan.changes.iter().filter_map(|c| c.pool.as_ref()).flat_map(|p| &p.deletes).map(|d| d.id.as_str()).collect();
    plan.evidence = crate::plan::pool::record_faults(input, &live, &going);
    let dropped: Vec<PlanError> = plan.changes.iter().filter_map(crate::plan::pool::dropped_group_error).collect();
    plan.errors.extend(dropped);
    if input.destroy {
        crate::plan::pool::keep_deferred_jobs(&mut plan, BUSY_POLICY);
    }
    order_deletes(&mut plan, &state);
    mark_sensitive(&mut plan, spec, input.state);
    if !plan.targets.is_empty() {
        apply_targets(&mut plan, graph.get_or_init(|| graph::build(spec)));
    }
    note_idle_replacements(&mut plan);
    plan.summarize();
    Ok(plan)
}

/// What every address's change is computed from (shared, read-only).
struct Shared<'s, 'a> {
    input: &'s PlanInput<'a>,
    cat: &'s catalog::Catalog,
    /// The spec's dependency graph, built by the first change that needs it.
    graph: &'s OnceLock<graph::Graph<'a>>,
    live: &'s ByPool<'a>,
    stopped: &'s ByPool<'a>,
    seen_by_id: &'s BTreeMap<&'a str, &'a Node>,
    autoscaled: &'s BTreeSet<&'a Address>,
    jobs: &'s JobNodes,
    /// Which pools' recorded configuration is the spec's, found before the diff.
    known: Option<&'s AsRecorded>,
}

/// The changes of a run of addresses, with what computing them said, in address order.
#[derive(Default)]
struct Part {
    changes: Vec<ResourceChange>,
    errors: Vec<PlanError>,
    drift: Vec<DriftItem>,
    notes: Vec<PlanNote>,
    health: Vec<crate::plan::model::HealthEntry>,
}

/// Addresses per thread below which one thread does all (a pool costs microseconds;
/// a thread, tens of them).
const PER_THREAD: usize = 256;

/// The changes of every address, in order. Each address's change depends only on the
/// shared inputs, so large plans split the addresses into contiguous runs computed on
/// the machine's cores; the runs are joined in order, so the plan is the same as one
/// thread's, error for error.
fn changes_of(cx: &Shared<'_, '_>, addresses: &[&Address], threads: usize) -> Vec<Part> {
    crate::par::runs_in_order(addresses, threads, PER_THREAD, |run| part_of(cx, run))
}

fn part_of(cx: &Shared<'_, '_>, addresses: &[&Address]) -> Part {
    let input = cx.input;
    let mut out = Part { changes: Vec::with_capacity(addresses.len()), ..Part::default() };
    // `pool_change` reports into a plan's errors, drift and notes; nothing else of it.
    let mut scratch = empty_plan(input);
    let texts = std::cell::RefCell::new(crate::plan::pool::ConfigTexts::default());
    for &addr in addresses {
        let prior = input.state.resources.get(&addr.to_string());
        let nodes = cx.live.get(addr).cloned().unwrap_or_default();
        let change = match addr.kind {
            Kind::GpuPool => {
                let pool = if input.destroy { None } else { input.spec.gpu_pools.get(addr).map(Box::as_ref) };
                let ctx = PoolCtx {
                    input,
                    addr,
                    pool,
                    prior,
                    live: nodes,
                    stopped: cx.stopped.get(addr).cloned().unwrap_or_default(),
                    seen_by_id: cx.seen_by_id,
                    autoscaled: cx.autoscaled.contains(addr),
                    jobs: cx.jobs,
                    texts: &texts,
                    known: cx.known,
                };
                pool_change(&ctx, cx.cat, &mut scratch)
            }
            _ => config_change(input, addr, prior, &mut scratch.errors),
        };
        if let Some(mut c) = change {
            if matches!(c.action, Action::Create | Action::Update | Action::Replace) {
                let graph = cx.graph.get_or_init(|| graph::build(input.spec));
                c.after_changes = graph.dependencies(addr).into_iter().cloned().collect();
            }
            out.changes.push(c);
        }
    }
    out.errors = scratch.errors;
    out.drift = scratch.drift;
    out.notes = scratch.notes;
    out.health = scratch.health;
    out
}

/// The state's resources with their keys parsed, in the state's (key text) order.
fn state_addresses(state: &State) -> Result<Vec<(Address, &ResourceState)>, BadStateKey> {
    state
        .resources
        .iter()
        .map(|(key, r)| match key.parse::<Address>() {
            Ok(a) => Ok((a, r)),
            Err(e) => Err(BadStateKey { key: e.input, reason: e.reason }),
        })
        .collect()
}

/// Nodes per pool address by what refresh found them doing.
type ByPool<'a> = BTreeMap<Address, Vec<&'a Node>>;

/// Live nodes per pool address (from refresh, or the state's record without one), nodes
/// refresh found stopped per pool address, and every observed node by id (for drift messages).
fn live_nodes<'a>(
    input: &PlanInput<'a>,
    state: &[(Address, &'a ResourceState)],
) -> (ByPool<'a>, ByPool<'a>, BTreeMap<&'a str, &'a Node>) {
    let mut live: ByPool<'a> = BTreeMap::new();
    let mut stopped: ByPool<'a> = BTreeMap::new();
    let mut seen_by_id: BTreeMap<&str, &Node> = BTreeMap::new();
    match input.observed {
        Some(nodes) => {
            // Built at once (refresh lists nodes sorted by id); a repeated id keeps its
            // last node, as inserting them one by one did.
            seen_by_id = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
            for n in nodes {
                if n.is_live() {
                    live.entry(n.pool.clone()).or_default().push(n);
                } else if n.state == crate::providers::NodeState::Stopped {
                    stopped.entry(n.pool.clone()).or_default().push(n);
                }
            }
        }
        None => {
            for (addr, r) in state {
                live.entry(addr.clone()).or_default().extend(r.nodes.iter().filter(|n| n.is_live()));
            }
        }
    }
    (live, stopped, seen_by_id)
}

/// Every address to plan: the spec's (unless destroying), the state's and the live nodes' pools.
fn addresses(
    input: &PlanInput<'_>,
    state: &[(Address, &ResourceState)],
    live: &ByPool<'_>,
    stopped: &ByPool<'_>,
) -> BTreeSet<Address> {
    let spec = input.spec;
    // Most addresses come two or three times (a pool in the spec, in the state and among
    // the live nodes), each list already sorted: they are gathered by reference, merged
    // by a stable sort (one pass per list), and only the distinct ones are copied, into a
    // set built at once, instead of copying every one to insert it.
    let mut all: Vec<&Address> = Vec::with_capacity(spec.gpu_pools.len() + state.len() + live.len());
    if !input.destroy {
        all.extend(spec.gpu_pools.keys());
        all.extend(spec.quotas.keys());
        all.extend(spec.job_templates.keys());
        all.extend(spec.jobs.keys());
        all.extend(spec.autoscalers.keys());
        all.extend(spec.reservations.keys());
    }
    all.extend(state.iter().map(|(a, _)| a));
    all.extend(live.keys());
    all.extend(stopped.keys());
    all.sort();
    all.dedup();
    all.into_iter().cloned().collect()
}

/// A plan with no changes yet.
fn empty_plan(input: &PlanInput<'_>) -> Plan {
    Plan {
        format_version: FILE_FORMAT_VERSION,
        lineage: input.state.lineage.clone(),
        serial: input.state.serial,
        spec_digest: input.spec_digest.clone(),
        inputs: None,
        refreshed: input.observed.is_some(),
        targets: input.targets.to_vec(),
        replace: input.replace.to_vec(),
        destroy: input.destroy,
        changes: Vec::new(),
        drift: Vec::new(),
        notes: Vec::new(),
        summary: Summary::default(),
        errors: Vec::new(),
        cost: None,
        policies: Vec::new(),
        autoscale: Vec::new(),
        jobs: Vec::new(),
        spend: None,
        orphan_job_nodes: Vec::new(),
        evidence: Default::default(),
        health: Vec::new(),
        reservations: Vec::new(),
        adoptions: Vec::new(),
        placements: Vec::new(),
        outputs: crate::plan::outputs::changes(input.spec, input.state, input.targets, input.destroy),
    }
}

/// Each change's sensitive paths: those the spec derives from a sensitive variable now,
/// and those the state recorded (the `before` side printed as it was applied).
fn mark_sensitive(plan: &mut Plan, spec: &Spec, state: &State) {
    let recorded = state.resources.iter().filter(|(_, r)| !r.sensitive.is_empty());
    if spec.sensitive.is_empty() && recorded.clone().next().is_none() {
        return;
    }
    for c in &mut plan.changes {
        let key = format!("{}.{}", c.address.kind, c.address.name);
        let mut paths: BTreeSet<String> = spec.sensitive.get(&key).into_iter().flatten().cloned().collect();
        if let Some(r) = state.resources.get(&c.address.to_string()) {
            paths.extend(r.sensitive.iter().cloned());
        }
        c.sensitive = (!paths.is_empty()).then(|| Box::new(paths.into_iter().collect()));
    }
}

/// Configuration-only resources (quotas, templates, jobs, autoscalers).
fn config_change(
    input: &PlanInput<'_>,
    addr: &Address,
    prior: Option<&ResourceState>,
    errors: &mut Vec<PlanError>,
) -> Option<ResourceChange> {
    let spec = input.spec;
    let after = if input.destroy {
        None
    } else {
        match addr.kind {
            Kind::Quota => spec.quotas.get(addr).map(JsonText::to_json),
            Kind::JobTemplate => spec.job_templates.get(addr).map(JsonText::to_json),
            Kind::Job => spec.jobs.get(addr).map(JsonText::to_json),
            Kind::Autoscaler => spec.autoscalers.get(addr).map(JsonText::to_json),
            Kind::Reservation => spec.reservations.get(addr).map(JsonText::to_json),
            Kind::GpuPool | Kind::Provider => None,
        }
        .and_then(Result::ok)
    };
    let before = prior.map(|p| p.config.clone());
    let (action, reasons) = match (&before, &after) {
        (None, None) => return None,
        (None, Some(_)) => (Action::Create, vec![Reason::new(ReasonCode::New, format!("`{addr}` is new in the spec"))]),
        (Some(b), None) => {
            if b.pointer("/lifecycle/prevent_destroy").and_then(|p| p.as_bool()).unwrap_or(false) {
                errors.push(PlanError {
                    address: addr.clone(),
                    message: format!("`{addr}` has `lifecycle.prevent_destroy` set, but this plan would destroy it"),
                    hint: Some(
                        "set prevent_destroy = false and apply first, if destroying it is really intended".into(),
                    ),
                    location: None,
                    span: None,
                });
            }
            let reason = if input.destroy {
                Reason::new(ReasonCode::Destroy, format!("destroy was requested for `{addr}`"))
            } else {
                Reason::new(ReasonCode::RemovedFromSpec, format!("`{addr}` is removed from the spec"))
            };
            (Action::Delete, vec![reason])
        }
        (Some(b), Some(a)) => {
            let changed = changed_text(b, a);
            if changed.is_empty() {
                // Unchanged: share the state's copy instead of holding a second one.
                let after = Some(b.clone());
                return Some(ResourceChange {
                    address: addr.clone(),
                    action: Action::NoOp,
                    before,
                    after,
                    reasons: vec![],
                    pool: None,
                    after_changes: vec![],
                    sensitive: None,
                });
            } else {
                (
                    Action::Update,
                    changed
                        .iter()
                        .map(|p| Reason::new(ReasonCode::Changed(p.to_string()), format!("`{p}` changed")))
                        .collect(),
                )
            }
        }
    };
    Some(ResourceChange {
        address: addr.clone(),
        action,
        before,
        after,
        reasons,
        pool: None,
        after_changes: vec![],
        sensitive: None,
    })
}

/// Deletes wait for the deletes of whatever depended on them. One pass over the state's
/// recorded dependencies builds the reverse index, so destroying N resources is
/// O(N log N), not O(N²).
fn order_deletes(plan: &mut Plan, state: &[(Address, &ResourceState)]) {
    let deleted: BTreeSet<&Address> =
        plan.changes.iter().filter(|c| c.action == Action::Delete).map(|c| &c.address).collect();
    if deleted.is_empty() {
        return;
    }
    // A recorded dependency (as written in state) → the deleted resources that depended on
    // it, in the state's order, each once.
    let mut dependents: BTreeMap<&str, Vec<Address>> = BTreeMap::new();
    for (addr, r) in state.iter().filter(|(a, _)| deleted.contains(a)) {
        let deps: BTreeSet<&str> = r.dependencies.iter().map(String::as_str).collect();
        for dep in deps {
            dependents.entry(dep).or_default().push(addr.clone());
        }
    }
    for c in plan.changes.iter_mut().filter(|c| c.action == Action::Delete) {
        c.after_changes = dependents.remove(c.address.to_string().as_str()).unwrap_or_default();
    }
}

/// Keep only targeted changes and what they depend on.
/// A `--replace` that replaces nothing says so, instead of passing in silence: a pool
/// left out by `--target`, or one with no node to replace (none launched yet, or none
/// left).
fn note_idle_replacements(plan: &mut Plan) {
    for r in &plan.replace {
        let changes: Vec<&ResourceChange> = plan.changes.iter().filter(|c| c.address.matches_target(r)).collect();
        if changes.iter().any(|c| c.action == Action::Replace) {
            continue;
        }
        let targeted_out = !plan.targets.is_empty() && changes.is_empty();
        let message = if targeted_out {
            "`--replace` replaces nothing here: the pool is outside `--target` (add it to the targets)"
        } else {
            "`--replace` replaces nothing here: the pool has no running node to replace"
        };
        plan.notes.push(PlanNote { address: r.clone(), message: message.to_string() });
    }
}

fn apply_targets(plan: &mut Plan, graph: &graph::Graph) {
    if plan.targets.is_empty() {
        return;
    }
    let mut keep: BTreeSet<Address> = BTreeSet::new();
    let mut stack: Vec<Address> = plan
        .changes
        .iter()
        .map(|c| c.address.clone())
        .chain(plan.drift.iter().map(|d| d.address.clone()))
        .filter(|a| plan.targets.iter().any(|t| a.matches_target(t)))
        .collect();
    while let Some(a) = stack.pop() {
        if keep.insert(a.clone()) {
            stack.extend(graph.dependencies(&a).into_iter().cloned());
        }
    }
    plan.changes.retain(|c| keep.contains(&c.address));
    plan.drift.retain(|d| keep.contains(&d.address));
    plan.errors.retain(|e| keep.contains(&e.address));
}
