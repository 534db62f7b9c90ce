//! One pool's change: its live nodes against the layout the spec asks for. Pure.
//!
//! [`pool_change`] runs named steps, each tested on its own (`tests.rs`):
//! 1. [`observe_drift`] (refreshed plans only): nodes the cloud lost or changed, and
//!    orphans tagged for the pool that the state does not know;
//! 2. [`configs`]: the configuration before (state) and after (spec, with `ignore_changes`
//!    and the autoscaler's count applied), and the paths that differ;
//! 3. a pool gone from the spec, or a destroy, becomes [`removed`]: every node goes,
//!    but the node of a job that is not preemptible stays until the job ends (deferred);
//! 4. otherwise [`target_count`] says how many nodes, [`node_ops`] which to create and
//!    delete (idle nodes first; the removal of a node under a job that is not
//!    preemptible is deferred, `busy.rs`), [`choose_action`] the action, [`explain`] why and
//!    [`prevent_destroy_error`] whether `lifecycle.prevent_destroy` refuses it.

mod busy;
mod health;
mod nodes;
mod removed;
mod reserved;
mod texts;

#[cfg(test)]
mod health_tests;
#[cfg(test)]
mod keep_tests;
#[cfg(test)]
mod tests;

use crate::model::words::nodes;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;

use crate::addr::Address;
use crate::catalog;
use crate::json_text::JsonText;
use crate::plan::context::{IMMUTABLE, PlanInput, changed_text, copy_path};
use crate::plan::model::*;
use crate::plan::shape::{self, PoolShape};
use crate::providers::{Node, NodeState};
use crate::spec::model::GpuPool;
use crate::state::ResourceState;

pub(crate) use busy::JobNodes;
pub(crate) use health::record as record_faults;
use nodes::Held;
pub(crate) use nodes::{NodeOps, node_ops, stale_reason};
pub use removed::{dropped_group_error, groups_to_delete};
pub(crate) use removed::{keep_deferred_jobs, removed};
pub use texts::AsRecorded;
pub(crate) use texts::ConfigTexts;

/// What one pool's change is computed from.
pub(crate) struct PoolCtx<'a, 'i> {
    pub input: &'a PlanInput<'i>,
    pub addr: &'a Address,
    /// The pool in the spec; `None` when it was removed or for a destroy.
    pub pool: Option<&'a GpuPool>,
    pub prior: Option<&'a ResourceState>,
    pub live: Vec<&'a Node>,
    /// Nodes of the pool that refresh found stopped outside gpuplan: terminated.
    pub stopped: Vec<&'a Node>,
    /// Every observed node by id (for drift messages).
    pub seen_by_id: &'a BTreeMap<&'a str, &'a Node>,
    pub autoscaled: bool,
    /// The nodes jobs run on: kept first, and not removed under a job that is not
    /// preemptible.
    pub jobs: &'a JobNodes,
    /// Configuration texts already made in this run of the diff.
    pub texts: &'a RefCell<ConfigTexts>,
    /// Which pools' recorded configuration is the spec's, found before the diff.
    pub known: Option<&'a AsRecorded>,
}

pub(crate) fn pool_change(cx: &PoolCtx<'_, '_>, cat: &catalog::Catalog, plan: &mut Plan) -> Option<ResourceChange> {
    let shape = cx.pool.and_then(|p| reserved::shape(cx, p, cat, &mut plan.notes));
    if cx.pool.is_some() && shape.is_none() {
        plan.errors.push(unplaceable(cx.addr));
        return None;
    }
    let Drift { items, adopt, forget } = observe_drift(cx);
    let lost = forget.len();
    plan.drift.extend(items);
    let cfg = configs(cx);
    let before = recorded_counts(cx, &cfg, shape.as_ref());
    let (Some(pool), Some(shape)) = (cx.pool, shape) else {
        let (change, error) = removed(cx, cat, cfg.before, before)?;
        plan.errors.extend(error);
        return Some(change);
    };
    let home = home_provider(cx, &shape);
    let (replaced, stale, fresh, kept, verdicts) = split_stale(cx, pool, &shape, home);
    let (n, bounds) = target_count(cx, pool, &cfg.ignore, cfg.owned, kept);
    let NodeOps { creates, deletes, held, retry } = node_ops(cx, &shape, pool, n, &fresh, &stale, cfg.scale);
    let (mut deletes, deferred) = busy::defer(deletes, cx.jobs, &reserved::must_go(cx, &shape));
    // A stopped node serves no job: it goes whatever the jobs say.
    deletes.extend(sorted(&cx.stopped).into_iter().map(|node| delete(node, STOPPED)));
    let after = after_counts(n, pool, &shape, &held, &deferred);
    let record = cx.prior.and_then(|p| p.fallback.as_ref());
    let fell_back = if held.is_empty() { None } else { record.cloned() };
    let retry_preferred = if retry { record.cloned() } else { None };
    if let (Some(rec), false) = (record, held.is_empty()) {
        plan.notes.push(fallback_note(cx, &shape, pool, rec, &held));
    }
    let immutable_changed: Vec<&str> = cfg.changed.iter().map(String::as_str).filter(|p| is_immutable(p)).collect();
    let moves = !creates.is_empty()
        || !deletes.is_empty()
        || !adopt.is_empty()
        || !forget.is_empty()
        || !cfg.changed.is_empty()
        || cfg.unfinished;
    let action = choose_action(cx.prior.is_some(), stale.len(), fresh.len(), !immutable_changed.is_empty(), moves);

    let mut reasons: Vec<Reason> = bounds.into_iter().collect();
    if retry && let Some(rec) = record {
        reasons.push(retry_reason(cx, &shape, rec, &creates));
    }
    reasons.extend(explain(&Facts {
        addr: cx.addr,
        action,
        immutable_changed: &immutable_changed,
        changed: &cfg.changed,
        stale: stale.len(),
        replaced,
        scale: cfg.scale,
        owned: cfg.owned.is_some(),
        creates: !creates.is_empty(),
        lost,
        before,
        after,
        unfinished: cfg.unfinished,
        adopted: adopt.len(),
    }));
    if !deferred.is_empty() {
        reasons.push(Reason::new(ReasonCode::Deferred, busy::deferred_message(&deferred)));
    }
    health::explain(cx, pool, &verdicts, &mut deletes, &mut reasons, plan);
    reasons.shrink_to_fit();
    plan.errors.extend(prevent_destroy_error(cx.addr, pool, action, stale.len(), &deletes, replaced));
    // Only creates fall back to other zones: a change without any does not carry them.
    let zones = if creates.is_empty() { vec![] } else { shape.zones.clone() };
    Some(ResourceChange {
        address: cx.addr.clone(),
        action,
        before: cfg.before,
        after: cfg.after,
        reasons,
        pool: Some(PoolChange {
            provider: shape.provider.clone(),
            provider_kind: shape.provider_kind.to_string(),
            region: shape.region.clone(),
            gpu: shape.gpu.clone(),
            before,
            after,
            before_types: type_counts(&cx.live),
            creates,
            deletes,
            deferred,
            adopt,
            forget,
            zones,
            fallback: pool.mix.fallback.value,
            create_before_destroy: create_before_destroy(pool),
            fell_back: fell_back.map(Box::new),
            retry_preferred: retry_preferred.map(Box::new),
            placement: None,
            placement_before: None,
            alternates: Vec::new(),
        }),
        after_changes: vec![],
        sensitive: None,
    })
}

/// A pool no instance type or zone of its region can hold. Validation refuses such a
/// spec first; should a pool slip through, the plan says so rather than planning it as
/// zero nodes at zero cost.
fn unplaceable(addr: &Address) -> PlanError {
    PlanError {
        address: addr.clone(),
        message: format!("gpuplan cannot place `{addr}`: no instance type or zone of its region sells its GPU shape"),
        hint: Some("run `gpuplan validate` to see what the region offers".into()),
        location: None,
        span: None,
    }
}

/// The pool's nodes after the plan: `n` split by its mix, with the on-demand nodes held
/// in place of spot ones and the nodes whose removal is deferred.
fn after_counts(n: u32, pool: &GpuPool, shape: &PoolShape, held: &[Held], deferred: &[DeferredDelete]) -> NodeCounts {
    // Nodes in the pool's reservation first (on-demand), the rest per `mix`.
    let reserved = shape::reserved_count(shape, n);
    let (od, spot) = shape::split(n - reserved, pool.mix.on_demand_base.value, pool.mix.spot_percent.value);
    let od = od + reserved;
    // On-demand nodes standing in for spot ones stay on-demand (and cost as such).
    let swapped = held.iter().filter(|h| h.capacity.market() != h.preferred_capacity).count() as u32;
    // Nodes whose removal is deferred stay after this plan (and cost until they go).
    let kept_spot = deferred.iter().filter(|d| d.capacity == crate::providers::Capacity::Spot).count() as u32;
    let kept_od = deferred.len() as u32 - kept_spot;
    NodeCounts {
        on_demand: od + swapped + kept_od,
        spot: spot - swapped + kept_spot,
        gpus_per_node: shape.gpus_per_node,
    }
}

/// The note for a pool whose nodes stay in their fallback placement: where they are,
/// where the pool prefers them, since when and until when.
fn fallback_note(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
    rec: &crate::state::model::FallbackRecord,
    held: &[nodes::Held],
) -> PlanNote {
    let mut groups: BTreeMap<(String, crate::providers::Capacity, String, crate::providers::Capacity), u32> =
        BTreeMap::new();
    for h in held {
        *groups.entry((h.zone.clone(), h.capacity, h.preferred_zone.clone(), h.preferred_capacity)).or_default() += 1;
    }
    let parts: Vec<String> = groups
        .into_iter()
        .map(|((zone, cap, pzone, pcap), k)| {
            let any = pzone == shape::ANY_ZONE;
            let nodes = if k == 1 { "node" } else { "nodes" };
            match (cap == pcap, zone == pzone || any) {
                (true, _) => format!("{k} {cap} {nodes} in {zone} instead of {pzone}"),
                (false, true) if any => format!("{k} {cap} {nodes} instead of {pcap}"),
                (false, true) => format!("{k} {cap} {nodes} instead of {pcap} in {pzone}"),
                (false, false) => format!("{k} {cap} {nodes} in {zone} instead of {pcap} in {pzone}"),
            }
        })
        .collect();
    let now = cx.input.clocks.get(&shape.provider).copied();
    let since = match now {
        Some(now) => format!("fell back {} ago", ago(now, rec.since_ms)),
        None => "fell back".to_string(),
    };
    let next = rec.retry_at(pool.mix.retry_preferred());
    let retry = match now {
        Some(now) => format!("the preferred placement is tried again in {}", ago(next, now)),
        None => "the preferred placement is tried again by a refreshed plan".to_string(),
    };
    PlanNote { address: cx.addr.clone(), message: format!("{}; {since} ({}); {retry}", parts.join(", "), rec.reason) }
}

/// Why this plan moves nodes back: the fallback's age and what happened then.
fn retry_reason(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    rec: &crate::state::model::FallbackRecord,
    creates: &[crate::providers::CreateNodes],
) -> Reason {
    let spot = creates.iter().any(|c| c.capacity == crate::providers::Capacity::Spot);
    let what = if spot { "spot again" } else { "preferred zone again" };
    let when = match cx.input.clocks.get(&shape.provider) {
        Some(&now) => format!("fell back {} ago", ago(now, rec.since_ms)),
        None => "fell back".to_string(),
    };
    let tries =
        if rec.failed_retries > 0 { format!(", {} failed tries since", rec.failed_retries) } else { String::new() };
    Reason::new(ReasonCode::RetryPreferred, format!("{what}: {when} ({}{tries})", rec.reason))
}

/// `later - earlier` in whole minutes, e.g. `2h 5m`, or `under a minute`.
fn ago(later: u64, earlier: u64) -> String {
    let secs = later.saturating_sub(earlier) / 1000;
    if secs < 60 {
        return "under a minute".into();
    }
    humantime::format_duration(std::time::Duration::from_secs(secs / 60 * 60)).to_string()
}

/// For a floating pool, the provider block of its nodes that record none: the one the
/// state has the pool in, else (a new pool) the one the spec places it in. `None` for
/// other pools, whose nodes stay with their provider block.
pub(crate) fn home_provider<'a>(cx: &PoolCtx<'a, '_>, shape: &'a PoolShape) -> Option<&'a str> {
    cx.pool.filter(|p| p.placement.is_some())?;
    Some(cx.prior.and_then(|p| p.provider.as_deref()).unwrap_or(&shape.provider))
}

/// The delete reason of a node stopped outside gpuplan.
pub(crate) const STOPPED: &str = "stopped outside gpuplan";

/// Does a changed path (`gpu`, `nodes.desired`) name an attribute that cannot change in place?
fn is_immutable(path: &str) -> bool {
    IMMUTABLE.contains(&path.split('.').next().unwrap_or(""))
}

// ---- 1. drift ------------------------------------------------------------------------------

/// What refresh found for one pool that the state does not say.
#[derive(Debug, Default)]
pub(crate) struct Drift {
    pub items: Vec<DriftItem>,
    /// Orphans tagged for a pool that is still in the spec: taken into state.
    pub adopt: Vec<Node>,
    /// Ids the state records but the cloud no longer runs (reclaimed or removed).
    pub forget: Vec<String>,
}

/// Drift of one pool; only meaningful when the plan actually looked at the cloud.
pub(crate) fn observe_drift(cx: &PoolCtx<'_, '_>) -> Drift {
    let mut drift = Drift::default();
    if cx.input.observed.is_none() {
        return drift;
    }
    if let Some(prior) = cx.prior {
        lost_nodes(cx, prior, &mut drift);
        drift.items.extend(changed_nodes(cx, prior));
    }
    orphans(cx, &mut drift);
    drift.items.extend(cx.stopped.iter().map(|n| DriftItem {
        address: cx.addr.clone(),
        kind: DriftKind::Stopped,
        node_id: Some(n.id.clone()),
        message: format!(
            "node {} in {} was stopped outside gpuplan; a stopped instance may still bill, so it will be terminated",
            n.id, n.zone
        ),
    }));
    drift
}

/// Nodes the state records as live that refresh did not find live: reclaimed (spot) or
/// terminated outside gpuplan. They are forgotten, so the drift is reported once.
fn lost_nodes(cx: &PoolCtx<'_, '_>, prior: &ResourceState, drift: &mut Drift) {
    let live_ids: BTreeSet<&str> = cx.live.iter().map(|n| n.id.as_str()).collect();
    for n in prior.nodes.iter().filter(|n| n.is_live()) {
        if live_ids.contains(n.id.as_str()) {
            continue;
        }
        let (kind, message) = match cx.seen_by_id.get(n.id.as_str()).map(|s| s.state) {
            // Reported with the pool's other stopped nodes (see `stopped_nodes`), not forgotten.
            Some(NodeState::Stopped) => continue,
            Some(NodeState::Reclaimed) => {
                (DriftKind::Reclaimed, format!("{} node {} in {} was reclaimed by the cloud", n.capacity, n.id, n.zone))
            }
            _ => (DriftKind::Removed, format!("node {} in {} was terminated outside gpuplan", n.id, n.zone)),
        };
        drift.forget.push(n.id.clone());
        drift.items.push(DriftItem { address: cx.addr.clone(), kind, node_id: Some(n.id.clone()), message });
    }
}

/// Live nodes whose type, zone or capacity differ from what the state recorded.
fn changed_nodes(cx: &PoolCtx<'_, '_>, prior: &ResourceState) -> Vec<DriftItem> {
    let mut items = Vec::new();
    for n in &cx.live {
        if let Some(old) = prior.nodes.iter().find(|o| o.id == n.id)
            && (old.instance_type != n.instance_type || old.zone != n.zone || old.capacity != n.capacity)
        {
            items.push(DriftItem {
                address: cx.addr.clone(),
                kind: DriftKind::Changed,
                node_id: Some(n.id.clone()),
                message: format!(
                    "node {} changed outside gpuplan ({} {} → {} {})",
                    n.id, old.instance_type, old.zone, n.instance_type, n.zone
                ),
            });
        }
    }
    items
}

/// Live nodes tagged for this pool that the state does not know: adopted while the pool
/// is in the spec, terminated otherwise.
fn orphans(cx: &PoolCtx<'_, '_>, drift: &mut Drift) {
    let state_ids: BTreeSet<&str> =
        cx.prior.map(|p| p.nodes.iter().map(|n| n.id.as_str()).collect()).unwrap_or_default();
    for n in cx.live.iter().filter(|n| !state_ids.contains(n.id.as_str())) {
        let verb = if cx.pool.is_some() { "adopting it" } else { "it will be terminated" };
        drift.items.push(DriftItem {
            address: cx.addr.clone(),
            kind: DriftKind::Orphan,
            node_id: Some(n.id.clone()),
            message: format!("node {} carries this state's tags but the state does not know it; {verb}", n.id),
        });
        if cx.pool.is_some() {
            drift.adopt.push((*n).clone());
        }
    }
}

// ---- 2. configuration ----------------------------------------------------------------------

/// The pool's configuration before and after, as the plan shows and apply records it.
#[derive(Debug)]
pub(crate) struct Configs<'a> {
    /// The configuration last applied; `None` for a new pool or an unfinished apply.
    pub before: Option<JsonText>,
    /// The spec's, with ignored paths kept from `before` and the autoscaler's count.
    pub after: Option<JsonText>,
    /// Dotted paths whose values differ.
    pub changed: Vec<String>,
    /// `ignore_changes`, plus `nodes.desired` for an autoscaled pool.
    pub ignore: Vec<String>,
    /// The state has the pool but no configuration: an apply was killed after launching
    /// nodes and before recording it, so there is no "before" to diff against.
    pub unfinished: bool,
    /// The autoscaler's decision for this pool in this run.
    pub scale: Option<&'a ScaleAction>,
    /// The node count the autoscaler owns (an autoscaled pool the state knows).
    pub owned: Option<u32>,
    /// The spec's configuration, unedited, is the one recorded (`before`).
    pub as_recorded: bool,
}

pub(crate) fn configs<'a>(cx: &PoolCtx<'a, '_>) -> Configs<'a> {
    let unfinished = cx.prior.is_some_and(|p| p.config.is_null());
    let before = cx.prior.map(|p| p.config.clone()).filter(|c| !c.is_null());
    let ignore = ignored_paths(cx.pool, cx.autoscaled);
    let scale = scale_decision(cx);
    let owned = owned_count(cx, before.as_ref(), scale);
    if let (Some(b), Some(pool), true, None) = (&before, cx.pool, ignore.is_empty(), owned)
        && cx.known.and_then(|k| k.answer(pool, b)).unwrap_or_else(|| cx.texts.borrow_mut().recorded(b, pool))
    {
        // Nothing edits the spec's text and it is the one recorded: no change, and the
        // state's copy serves as "after" (as below, without making the text first).
        let after = Some(b.clone());
        return Configs { before, after, changed: vec![], ignore, unfinished, scale, owned, as_recorded: true };
    }
    let mut after = cx.pool.map(|p| cx.texts.borrow_mut().of(p).unwrap_or_default());
    if let (Some(before), Some(after)) = (&before, &mut after) {
        keep_ignored(before, after, &ignore);
    }
    if let (Some(count), Some(pool), Some(after)) = (owned, cx.pool, &mut after) {
        set_desired(after, count, pool);
    }
    let changed = match (&before, &after) {
        (Some(b), Some(a)) => changed_text(b, a),
        _ => vec![],
    };
    if changed.is_empty() && before.is_some() && after.is_some() {
        // Unchanged: share the state's copy instead of holding a second one.
        after.clone_from(&before);
    }
    Configs { before, after, changed, ignore, unfinished, scale, owned, as_recorded: false }
}

/// The paths `lifecycle.ignore_changes` names, and `nodes.desired` for an autoscaled pool.
pub(crate) fn ignored_paths(pool: Option<&GpuPool>, autoscaled: bool) -> Vec<String> {
    let mut ignore: Vec<String> = pool
        .and_then(|p| p.meta.lifecycle.as_ref())
        .map(|l| l.ignore_changes.iter().map(|s| s.value.clone()).collect())
        .unwrap_or_default();
    if autoscaled && !ignore.iter().any(|p| p == "nodes" || p == "nodes.desired") {
        // The autoscaler owns the node count: `nodes.desired` is only the starting size, and
        // editing it must not show up as a change that does nothing (Terraform users write
        // `ignore_changes = [desired_size]` for autoscaled node groups; here it is implied).
        ignore.push("nodes.desired".into());
    }
    ignore
}

/// Copy each ignored path's value from `before` into `after`, so it shows no change.
pub(crate) fn keep_ignored(before: &JsonText, after: &mut JsonText, ignore: &[String]) {
    if ignore.is_empty() {
        return;
    }
    let (before, mut edited) = (before.to_value(), after.to_value());
    for path in ignore {
        copy_path(&before, &mut edited, path);
    }
    *after = JsonText::from_value(&edited);
}

/// The autoscaler's decision for this pool, if it is autoscaled and this is no destroy.
fn scale_decision<'a>(cx: &PoolCtx<'a, '_>) -> Option<&'a ScaleAction> {
    let autoscale: &'a [ScaleAction] = cx.input.autoscale;
    autoscale.iter().find(|a| &a.pool == cx.addr).filter(|_| cx.autoscaled && !cx.input.destroy)
}

/// The autoscaler owns the count of an existing autoscaled pool: its decision in this
/// run, else the count recorded in state (`config.nodes.desired`), else the live count.
pub(crate) fn owned_count(cx: &PoolCtx<'_, '_>, before: Option<&JsonText>, scale: Option<&ScaleAction>) -> Option<u32> {
    (cx.autoscaled && cx.prior.is_some()).then(|| {
        let recorded = before.and_then(|c| c.pointer("/nodes/desired")).and_then(|d| d.as_u64());
        scale.map(|s| s.to).or(recorded.map(|d| d.min(u32::MAX as u64) as u32)).unwrap_or(cx.live.len() as u32)
    })
}

/// Record `count`, within the pool's bounds, as `nodes.desired` of the configuration.
pub(crate) fn set_desired(after: &mut JsonText, count: u32, pool: &GpuPool) {
    let mut edited = after.to_value();
    if let Some(nodes) = edited.get_mut("nodes").and_then(Json::as_object_mut) {
        let n = count.clamp(pool.nodes.min.value, pool.nodes.max.value.max(pool.nodes.min.value));
        nodes.insert("desired".into(), Json::from(n));
        *after = JsonText::from_value(&edited);
    }
}

/// The live nodes by capacity, with the GPUs per node the last applied configuration
/// recorded (else the spec's).
pub(crate) fn before_counts(live: &[&Node], before: Option<&JsonText>, shape: Option<&PoolShape>) -> NodeCounts {
    let before_gpus = before.and_then(|c| c.get("gpus_per_node")).and_then(|g| g.as_u64()).map(|g| g as u32);
    count(live, before_gpus.or(shape.map(|s| s.gpus_per_node)).unwrap_or(0))
}

/// [`before_counts`], where a recorded text that is the spec's own says the spec's GPUs
/// per node without being read.
fn recorded_counts(cx: &PoolCtx<'_, '_>, cfg: &Configs<'_>, shape: Option<&PoolShape>) -> NodeCounts {
    match (cfg.as_recorded, cx.pool) {
        (true, Some(pool)) => count(&cx.live, pool.gpus_per_node.value),
        _ => before_counts(&cx.live, cfg.before.as_ref(), shape),
    }
}

// ---- 4. count, action, reasons -------------------------------------------------------------

/// How many nodes the pool should have: `nodes.desired`, unless the autoscaler or
/// `ignore_changes` owns the count of a pool that exists, which then keeps its count
/// within `min..max` (with a reason when that moves it).
pub(crate) fn target_count(
    cx: &PoolCtx<'_, '_>,
    pool: &GpuPool,
    ignore: &[String],
    owned: Option<u32>,
    fresh: usize,
) -> (u32, Option<Reason>) {
    let nodes_cfg = &pool.nodes;
    let ignores_count = ignore.iter().any(|p| p == "nodes" || p == "nodes.desired");
    if !((cx.autoscaled || ignores_count) && cx.prior.is_some()) {
        return (nodes_cfg.desired.value, None);
    }
    let have = owned.unwrap_or(fresh.min(u32::MAX as usize) as u32);
    let n = have.clamp(nodes_cfg.min.value, nodes_cfg.max.value);
    let who =
        if cx.autoscaled { "the autoscaler owns the node count" } else { "`ignore_changes` covers nodes.desired" };
    let reason = (n != have).then(|| {
        Reason::new(
            ReasonCode::NodeBounds,
            format!("{have} nodes is outside min..max ({}..{}); {who}", nodes_cfg.min.value, nodes_cfg.max.value),
        )
    });
    (n, reason)
}

/// `lifecycle.create_before_destroy`, true by default.
fn create_before_destroy(pool: &GpuPool) -> bool {
    pool.meta.lifecycle.as_ref().and_then(|l| l.create_before_destroy.as_ref()).map(|b| b.value).unwrap_or(true)
}

/// The live nodes that go (`stale`) and those that stay (`fresh`), and how many count
/// toward a count the pool keeps (an autoscaler's). With `--replace` (`replaced`) every
/// node goes the way of a stale one, and the pool keeps its count. Also the pool's health
/// verdicts ([`health::judge`]): a node replaced for its health is stale too.
#[allow(clippy::type_complexity)]
fn split_stale<'n>(
    cx: &PoolCtx<'n, '_>,
    pool: &GpuPool,
    shape: &PoolShape,
    home: Option<&str>,
) -> (bool, Vec<&'n Node>, Vec<&'n Node>, usize, Vec<health::Verdict<'n>>) {
    let replaced = replace_requested(cx);
    let verdicts = health::judge(cx, pool, &shape.region, cx.input.clocks.get(&shape.provider).copied());
    // A node replaced for its health goes the way of a stale one (docs/design/gpu-health.md).
    let repaired: BTreeSet<&str> = verdicts.iter().filter(|v| v.repaired()).map(|v| v.node.id.as_str()).collect();
    let (stale, fresh): (Vec<&Node>, Vec<&Node>) = cx
        .live
        .iter()
        .copied()
        .partition(|n| replaced || repaired.contains(n.id.as_str()) || stale_reason(shape, n, home).is_some());
    // A node replaced for its health is replaced one for one, as with `--replace`.
    let kept = if replaced { cx.live.len() } else { (fresh.len() + repaired.len()).min(cx.live.len()) };
    (replaced, stale, fresh, kept, verdicts)
}

/// Why every node of a pool named by `--replace` is replaced (after `replaced: `).
pub(crate) const REPLACE_REASON: &str = "replacement requested (--replace)";

/// Is this pool (or counted pool's instance) named by `--replace`?
pub(crate) fn replace_requested(cx: &PoolCtx<'_, '_>) -> bool {
    cx.input.replace.iter().any(|r| cx.addr.matches_target(r))
}

/// Create for a pool the state does not know; replace when nodes no longer match and
/// either an immutable attribute changed or no matching node is left; update when
/// anything else `moves` (nodes, configuration, an unfinished apply).
pub(crate) fn choose_action(known: bool, stale: usize, fresh: usize, immutable_changed: bool, moves: bool) -> Action {
    if !known {
        Action::Create
    } else if stale > 0 && (immutable_changed || fresh == 0) {
        Action::Replace
    } else if moves {
        Action::Update
    } else {
        Action::NoOp
    }
}

/// What [`explain`] explains.
pub(crate) struct Facts<'a> {
    pub addr: &'a Address,
    pub action: Action,
    pub immutable_changed: &'a [&'a str],
    pub changed: &'a [String],
    /// Nodes that no longer match the pool.
    pub stale: usize,
    /// `--replace` named the pool: its nodes are stale because the user asked.
    pub replaced: bool,
    pub scale: Option<&'a ScaleAction>,
    /// The autoscaler owns the count (its `nodes.desired` is no spec change).
    pub owned: bool,
    /// Nodes will be created.
    pub creates: bool,
    /// Nodes that disappeared outside gpuplan.
    pub lost: usize,
    pub before: NodeCounts,
    pub after: NodeCounts,
    pub unfinished: bool,
    pub adopted: usize,
}

/// The reasons of a pool change, in the order users read them.
pub(crate) fn explain(f: &Facts<'_>) -> Vec<Reason> {
    let addr = f.addr;
    let mut reasons = Vec::new();
    match f.action {
        Action::Create => reasons.push(Reason::new(ReasonCode::New, format!("`{addr}` is new in the spec"))),
        Action::Replace => {
            let attrs = if f.replaced && f.immutable_changed.is_empty() {
                REPLACE_REASON.to_string()
            } else if f.immutable_changed.is_empty() {
                "nodes no longer match the pool".to_string()
            } else {
                format!("{} cannot change in place", f.immutable_changed.join(", "))
            };
            reasons.push(Reason::new(ReasonCode::Immutable, format!("{attrs}; {} will be replaced", nodes(f.stale))));
        }
        _ => {}
    }
    if f.action != Action::Create {
        reasons.extend(change_reasons(f));
    }
    if f.unfinished {
        reasons.push(Reason::new(
            ReasonCode::Unfinished,
            format!("an interrupted apply launched nodes for `{addr}` but did not record its configuration"),
        ));
    }
    if f.adopted > 0 {
        reasons.push(Reason::new(
            ReasonCode::Adopt,
            format!(
                "adopting {} orphan {} tagged for this pool",
                f.adopted,
                if f.adopted == 1 { "node" } else { "nodes" }
            ),
        ));
    }
    reasons
}

/// Why a pool the state knows changes: the autoscaler, attributes, outdated nodes, drift,
/// and the node count or mix.
fn change_reasons(f: &Facts<'_>) -> Vec<Reason> {
    let mut reasons = Vec::new();
    if let Some(s) = f.scale {
        reasons.push(Reason::new(ReasonCode::Autoscale, format!("autoscale: {}", s.reason)));
    }
    // An autoscaled pool's recorded count is the autoscaler's, not a spec change.
    let owned_path = |p: &str| f.owned && p == "nodes.desired";
    for p in f.changed.iter().filter(|p| !is_immutable(p) && !owned_path(p)) {
        reasons.push(Reason::new(ReasonCode::Changed(p.to_string()), format!("`{p}` changed")));
    }
    if f.stale > 0 && f.action == Action::Update {
        reasons.push(Reason::new(
            ReasonCode::OutdatedNodes,
            format!(
                "{} no longer {} and will be replaced",
                nodes(f.stale),
                if f.stale == 1 { "matches" } else { "match" }
            ),
        ));
    }
    let lost = f.lost;
    if lost > 0 && f.creates {
        reasons.push(Reason::new(
            ReasonCode::Drift,
            format!("{} disappeared outside gpuplan; restoring the mix", nodes(lost)),
        ));
    } else if lost > 0 {
        reasons.push(Reason::new(
            ReasonCode::Drift,
            format!(
                "{} disappeared outside gpuplan; dropping {} from state",
                nodes(lost),
                if lost == 1 { "it" } else { "them" }
            ),
        ));
    }
    let (before, n) = (f.before, f.after.nodes());
    let (od, spot) = (f.after.on_demand, f.after.spot);
    if before.nodes() != n {
        reasons.push(Reason::new(ReasonCode::NodeCount, format!("nodes {} → {n}", before.nodes())));
    } else if (before.on_demand, before.spot) != (od, spot) {
        reasons.push(Reason::new(
            ReasonCode::Mix,
            format!("on-demand/spot {}/{} → {od}/{spot}", before.on_demand, before.spot),
        ));
    }
    reasons
}

/// `lifecycle.prevent_destroy` refuses a plan that replaces the pool or any of its nodes.
pub(crate) fn prevent_destroy_error(
    addr: &Address,
    pool: &GpuPool,
    action: Action,
    stale: usize,
    deletes: &[NodeDelete],
    replaced: bool,
) -> Option<PlanError> {
    let prevent = pool.meta.lifecycle.as_ref().is_some_and(|l| l.prevent_destroy.value);
    let destroys_nodes = stale > 0 || deletes.iter().any(|d| d.reason.starts_with("replaced"));
    (prevent && (action == Action::Replace || destroys_nodes)).then(|| PlanError {
        address: addr.clone(),
        message: format!("`{addr}` has `lifecycle.prevent_destroy` set, but this plan would replace its nodes"),
        hint: Some(if replaced {
            "drop `--replace` for this pool, or set prevent_destroy = false".into()
        } else {
            "revert the change to the pool's immutable attributes, or set prevent_destroy = false".into()
        }),
        location: None,
        span: None,
    })
}

// ---- helpers -------------------------------------------------------------------------------

/// The nodes by instance type, capacity and reservation, in that order. Counted over
/// borrowed keys, sorted: a string is copied once per kind of node, not once per node.
fn type_counts(nodes: &[&Node]) -> Vec<TypeCount> {
    let mut keys: Vec<(&str, crate::providers::Capacity, Option<&str>)> = nodes
        .iter()
        .map(|n| (n.instance_type.as_str(), n.capacity, n.tags.get(crate::providers::TAG_RESERVATION)))
        .collect();
    keys.sort_unstable();
    let mut out: Vec<TypeCount> = Vec::new();
    for (i, &(instance_type, capacity, reservation)) in keys.iter().enumerate() {
        if i > 0 && keys[i - 1] == keys[i] {
            if let Some(last) = out.last_mut() {
                last.count += 1;
            }
            continue;
        }
        out.push(TypeCount {
            instance_type: instance_type.to_string(),
            capacity,
            count: 1,
            reservation: reservation.map(str::to_string),
        });
    }
    out
}

fn count(nodes: &[&Node], gpus_per_node: u32) -> NodeCounts {
    let spot = nodes.iter().filter(|n| n.capacity == crate::providers::Capacity::Spot).count() as u32;
    NodeCounts { on_demand: nodes.len() as u32 - spot, spot, gpus_per_node }
}

fn sorted<'a>(nodes: &[&'a Node]) -> Vec<&'a Node> {
    let mut v = nodes.to_vec();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

fn delete(n: &Node, reason: &str) -> NodeDelete {
    NodeDelete {
        id: n.id.clone(),
        zone: n.zone.clone(),
        instance_type: n.instance_type.clone(),
        capacity: n.capacity,
        reason: reason.to_string(),
        region: None,
        provider: None,
        reservation: n.tags.get(crate::providers::TAG_RESERVATION).map(str::to_string),
    }
}
