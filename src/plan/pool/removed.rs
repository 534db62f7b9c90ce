//! A pool that goes: removed from the spec, destroyed, or orphan nodes of a pool neither
//! the spec nor the state knows. Every live node is deleted, except that a node running a
//! job that is not preemptible stays until the job ends (its removal deferred, as on
//! scale-in: docs/design/jobs.md, "Jobs under removed nodes"); the pool's record stays while such a
//! node does, and a later plan finishes the removal. A destroy keeps those jobs' records
//! too ([`keep_deferred_jobs`]). What the spec no longer says (provider, region, GPUs per
//! node) comes from the state, the nodes and the catalog.

use std::collections::BTreeMap;

use super::{PoolCtx, busy, delete, sorted, type_counts};
use crate::addr::{Address, Kind};
use crate::catalog;
use crate::json_text::JsonText;
use crate::plan::model::*;
use crate::providers::{Node, TAG_PROVIDER};
use crate::spec::Spec;
use crate::spec::model::ProviderKind;

/// The delete of a pool that goes, and the refusal if its recorded configuration has
/// `lifecycle.prevent_destroy`. `None` when there is nothing to delete.
pub(crate) fn removed(
    cx: &PoolCtx<'_, '_>,
    cat: &catalog::Catalog,
    before_cfg: Option<JsonText>,
    before_counts: NodeCounts,
) -> Option<(ResourceChange, Option<PlanError>)> {
    if cx.prior.is_none() && cx.live.is_empty() && cx.stopped.is_empty() {
        return None;
    }
    let addr = cx.addr;
    let (reason, why) = removal_reason(cx);
    let prior = cx.prior;
    let (provider, provider_kind) = removed_provider(cx);
    let region =
        prior.and_then(|p| p.region.clone()).or_else(|| cx.live.first().map(|n| n.region.clone())).unwrap_or_default();
    let home = provider.as_deref().unwrap_or_default();
    let live: Vec<NodeDelete> = sorted(&cx.live).into_iter().map(|n| delete_where(n, why, home, &region)).collect();
    let (mut deletes, deferred) = busy::defer(live, cx.jobs, &Default::default());
    // A stopped node serves no job: it goes whatever the jobs say.
    deletes.extend(sorted(&cx.stopped).into_iter().map(|n| delete_where(n, super::STOPPED, home, &region)));
    let mut before = before_counts;
    if before.gpus_per_node == 0 {
        before.gpus_per_node = catalog_gpus(cat, provider_kind.as_deref(), &cx.live);
    }
    // The nodes whose removal is deferred stay after this plan (and cost until they go).
    let kept_spot = deferred.iter().filter(|d| d.capacity == crate::providers::Capacity::Spot).count() as u32;
    let after = NodeCounts {
        on_demand: deferred.len() as u32 - kept_spot,
        spot: kept_spot,
        gpus_per_node: before.gpus_per_node,
    };
    let mut reasons = vec![reason];
    if !deferred.is_empty() {
        reasons.push(Reason::new(ReasonCode::Deferred, busy::deferred_message(&deferred)));
    }
    // Only deferred nodes left: nothing to do until their jobs end (as a scale-in whose
    // every removal is deferred), and the record stays as it is. A destroy stays a delete:
    // what was asked is judged (`no_destroy_pool_with_jobs` denies it while jobs run), and
    // applying it deletes what it can.
    let waits = deletes.is_empty() && !deferred.is_empty() && !cx.input.destroy;
    let (action, after_cfg) = if waits { (Action::NoOp, before_cfg.clone()) } else { (Action::Delete, None) };
    let change = ResourceChange {
        address: addr.clone(),
        action,
        before: before_cfg,
        after: after_cfg,
        reasons,
        pool: Some(PoolChange {
            provider: provider.unwrap_or_default(),
            provider_kind: provider_kind.unwrap_or_default(),
            region,
            gpu: prior
                .and_then(|p| p.config.get("gpu"))
                .and_then(|g| g.as_str().map(str::to_string))
                .unwrap_or_default(),
            before,
            after,
            before_types: type_counts(&cx.live),
            creates: vec![],
            deletes,
            deferred,
            adopt: vec![],
            forget: vec![],
            zones: vec![],
            fallback: Default::default(),
            create_before_destroy: false,
            fell_back: None,
            retry_preferred: None,
            placement: None,
            placement_before: None,
            alternates: Vec::new(),
        }),
        after_changes: vec![],
        sensitive: None,
    };
    let refused = if waits { None } else { prevent_destroy_error(cx) };
    Some((change, refused))
}

/// The cluster placement groups apply deletes after `change` (docs/design/big-runs.md),
/// by the name apply made them under in state `lineage`. A pool removed or destroyed (no
/// removal deferred) whose recorded configuration asked for them (`network {
/// placement_group }`): one per zone it named or ran nodes in. A kept pool: the groups of
/// the zones it no longer launches into in a group (a zone dropped, or `network {}` or its
/// `placement_group` dropped) where none of its nodes stays, a node whose removal a job
/// defers holding its zone's group to a later plan (which finds the zone again through that
/// node). Derived, not stored: a plan holds one pool change per pool, and few pools have
/// groups.
pub fn groups_to_delete(lineage: &str, change: &ResourceChange) -> Vec<String> {
    let (Some(pc), Some(cfg)) = (&change.pool, &change.before) else { return Vec::new() };
    // Checked first: only a delete or an update reads its recorded configuration, and
    // only one whose text names a group (a 100,000-pool plan renders its JSON without
    // parsing every pool's).
    // Kept: changed in place, or every node replaced (`--replace`, a forced replacement).
    let kept = matches!(change.action, Action::Update | Action::Replace);
    let hpc = pc.provider_kind == "tencentcloud";
    if !(change.action == Action::Delete && pc.deferred.is_empty() || kept) || !grouped(Some(cfg), hpc) {
        return Vec::new();
    }
    let mut zones = named_zones(Some(cfg));
    let gone = pc.deletes.iter().map(|d| &d.zone).chain(pc.deferred.iter().map(|d| &d.zone));
    zones.extend(gone.filter(|z| !z.is_empty()).cloned());
    if kept {
        if grouped(change.after.as_ref(), hpc) {
            let after = named_zones(change.after.as_ref());
            // A pool over the region's every zone drops none by name.
            if after.is_empty() {
                return Vec::new();
            }
            zones.retain(|z| !after.contains(z));
        } else if !all_go(pc) {
            // Nodes stay in the groups: `dropped_group_error` refuses such a plan.
            return Vec::new();
        }
        zones.retain(|z| !pc.deferred.iter().any(|d| d.zone == *z));
    }
    let pool = &change.address.name;
    zones.iter().map(|z| crate::model::hardware::placement_group_name(lineage, pool, z)).collect()
}

/// Does a pool configuration ask for a group per zone (a placement group, an HPC cluster)?
/// `hpc`: the pool is on Tencent Cloud, where `fabric = "rdma"` is an HPC cluster per zone.
/// The text is searched first: only a configuration that names a group is parsed.
fn grouped(cfg: Option<&crate::json_text::JsonText>, hpc: bool) -> bool {
    let Some(cfg) = cfg else { return false };
    let text = cfg.as_str();
    if !(text.contains("\"placement_group\"") || hpc && text.contains("\"rdma\"")) {
        return false;
    }
    cfg.get("network").is_some_and(|n| {
        n.get("placement_group").is_some_and(|g| !g.is_null())
            || (hpc && n.get("fabric").and_then(|f| f.as_str()) == Some("rdma"))
    })
}

/// The zones a pool configuration names.
fn named_zones(cfg: Option<&crate::json_text::JsonText>) -> std::collections::BTreeSet<String> {
    let named = cfg.and_then(|c| c.get("zones")).and_then(|z| z.as_array().cloned()).unwrap_or_default();
    named.iter().filter_map(|z| z.as_str().map(str::to_string)).collect()
}

/// Does every node the pool runs go in this change (deleted now, or deferred)?
fn all_go(pc: &crate::plan::model::PoolChange) -> bool {
    pc.deletes.len() + pc.deferred.len() >= pc.before.nodes() as usize
}

/// A kept pool that drops `network { placement_group }` while some of its nodes stay: they
/// run on in groups gpuplan could then never delete, so the plan is refused with the two
/// ways out.
pub fn dropped_group_error(change: &ResourceChange) -> Option<crate::plan::model::PlanError> {
    let (Some(pc), Some(cfg)) = (&change.pool, &change.before) else { return None };
    if !matches!(change.action, Action::Update | Action::Replace)
        || !grouped(Some(cfg), pc.provider_kind == "tencentcloud")
        || grouped(change.after.as_ref(), pc.provider_kind == "tencentcloud")
        || all_go(pc)
    {
        return None;
    }
    let staying = pc.before.nodes() as usize - pc.deletes.len() - pc.deferred.len();
    // Each cloud's group by its own word; on Tencent Cloud `fabric = "rdma"` asks for it.
    let what = if pc.provider_kind == "tencentcloud" { "fabric = \"rdma\"" } else { "placement_group" };
    let noun = crate::model::hardware::group_noun(&pc.provider_kind);
    Some(crate::plan::model::PlanError {
        address: change.address.clone(),
        message: format!(
            "`{}` drops `network {{ {what} }}` while {staying} of its nodes stay in its {noun}s, which gpuplan could then not delete",
            change.address
        ),
        hint: Some(format!(
            "replace its nodes outside the groups (`gpuplan apply --replace {}`), or scale it to 0 first",
            change.address
        )),
        location: None,
        span: None,
    })
}

/// A destroy leaves the jobs whose nodes it defers (jobs that are not preemptible, still
/// running): their deletion would cancel them, so it is taken out of the plan, and a note
/// per job says what keeps it and how to end it now (`gpuplan jobs cancel`, or the
/// override of `policy`). The next destroy deletes them once they have ended.
pub(crate) fn keep_deferred_jobs(plan: &mut Plan, policy: &str) {
    let mut kept: BTreeMap<Address, Vec<String>> = BTreeMap::new();
    for d in plan.changes.iter().filter_map(|c| c.pool.as_ref()).flat_map(|p| &p.deferred) {
        kept.entry(d.job.clone()).or_default().push(d.id.clone());
    }
    if kept.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for (job, nodes) in &kept {
        notes.push(PlanNote {
            address: job.clone(),
            message: format!(
                "not destroyed: it is not preemptible and still runs on {}, which {} until it ends; \
                 to destroy now, cancel it with `gpuplan jobs cancel {job}` or pass `--override-policy {policy}`",
                nodes.join(", "),
                if nodes.len() == 1 { "stays" } else { "stay" }
            ),
        });
    }
    plan.changes
        .retain(|c| !(c.address.kind == Kind::Job && c.action == Action::Delete && kept.contains_key(&c.address)));
    plan.notes.extend(notes);
}

/// The delete of node `n`, terminated where it runs: a floating pool caught mid-move has
/// nodes in another region or provider block than the pool's (`home`, `region`).
fn delete_where(n: &Node, why: &str, home: &str, region: &str) -> NodeDelete {
    let mut d = delete(n, why);
    d.region = (n.region != region).then(|| n.region.clone());
    d.provider = Some(n.provider_or(home)).filter(|p| *p != home).map(str::to_string);
    d
}

/// The refusal when the configuration last applied has `lifecycle.prevent_destroy`.
fn prevent_destroy_error(cx: &PoolCtx<'_, '_>) -> Option<PlanError> {
    let addr = cx.addr;
    let prevent = cx
        .prior
        .and_then(|p| p.config.pointer("/lifecycle/prevent_destroy"))
        .and_then(|b| b.as_bool())
        .unwrap_or(false);
    prevent.then(|| PlanError {
        address: addr.clone(),
        message: format!("`{addr}` has `lifecycle.prevent_destroy` set, but this plan would destroy it"),
        hint: Some("set prevent_destroy = false and apply first, if destroying it is really intended".into()),
        location: None,
        span: None,
    })
}

/// The reason for the delete, and the reason each node delete carries.
pub(crate) fn removal_reason(cx: &PoolCtx<'_, '_>) -> (Reason, &'static str) {
    let addr = cx.addr;
    // Orphans of a pool neither the spec nor the state knows: terminated, not "removed".
    let orphans_only = cx.prior.is_none() && !cx.input.destroy;
    let (code, message, why) = if cx.input.destroy {
        (ReasonCode::Destroy, format!("destroy was requested for `{addr}`"), "destroy requested")
    } else if orphans_only {
        (
            ReasonCode::Orphan,
            format!("`{addr}` is in neither the spec nor the state; its orphan nodes will be terminated"),
            "orphan",
        )
    } else {
        (ReasonCode::RemovedFromSpec, format!("`{addr}` is removed from the spec"), "removed from the spec")
    };
    (Reason::new(code, message), why)
}

/// The provider's name and kind: as the state recorded them, else from the orphan nodes
/// and the spec.
pub(crate) fn removed_provider(cx: &PoolCtx<'_, '_>) -> (Option<String>, Option<String>) {
    let spec = cx.input.spec;
    let prior = cx.prior;
    let provider = prior.and_then(|p| p.provider.clone()).or_else(|| orphan_provider(spec, &cx.live));
    let provider_kind = prior.and_then(|p| p.provider_kind.clone()).or_else(|| {
        let name = provider.as_ref()?;
        spec.providers.get(name).and_then(|p| p.kind.value).map(|k| k.to_string())
    });
    (provider, provider_kind)
}

/// The provider of orphan nodes the state has no record of: their `gpuplan:provider` tag,
/// else the spec's only provider (nodes created before the tag existed).
pub(crate) fn orphan_provider(spec: &Spec, live: &[&Node]) -> Option<String> {
    if let Some(p) = live.iter().find_map(|n| n.tags.get(TAG_PROVIDER)) {
        return Some(p.to_string());
    }
    let mut names = spec.providers.keys();
    match (names.next(), names.next()) {
        (Some(only), None) => Some(only.clone()),
        _ => None,
    }
}

/// GPUs per node when no configuration records it: the catalog knows the first node's
/// instance type. 0 if nothing says.
pub(crate) fn catalog_gpus(cat: &catalog::Catalog, provider_kind: Option<&str>, live: &[&Node]) -> u32 {
    let kind = provider_kind.and_then(|k| ProviderKind::ALL.into_iter().find(|p| p.as_str() == k));
    live.first().zip(kind).and_then(|(n, k)| cat.instance_type(k, &n.instance_type)).map_or(0, |t| t.gpus)
}
