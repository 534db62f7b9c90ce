//! diff(Spec, state, observed nodes) → [`Plan`]. Pure and deterministic.
//!
//! For each address in the spec, the state or the clouds:
//! - pools: the desired node layout (`shape.rs`) against the live nodes; nodes whose
//!   immutable attributes no longer match are replaced (new ones first by default);
//!   surplus nodes go newest first; orphans tagged for a pool in the spec are adopted.
//! - other resources: their configuration against the one last applied.
//!
//! Drift (reclaimed, removed, changed or orphaned nodes) is reported beside the changes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::addr::{Address, Kind};
use crate::catalog;
use crate::graph;
use crate::json_text::JsonText;
use crate::plan::model::*;
use crate::plan::shape::{self, PoolShape};
use crate::providers::{
    Capacity, CreateNodes, Node, NodeState, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER, Tags,
};
use crate::spec::Spec;
use crate::spec::model::{GpuPool, ProviderKind};
use crate::state::{ResourceState, State};

/// Everything a plan is computed from.
pub struct PlanInput<'a> {
    pub spec: &'a Spec,
    pub state: &'a State,
    /// Nodes carrying this state's lineage, from refresh. `None` means `--refresh=false`:
    /// the state's own record of nodes is taken as the truth.
    pub observed: Option<&'a [Node]>,
    pub targets: &'a [Address],
    pub destroy: bool,
    pub spec_digest: String,
    /// Autoscaler decisions (from `reconcile`): an autoscaled pool converges to their count.
    pub autoscale: &'a [ScaleAction],
}

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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn plan(input: &PlanInput<'_>) -> Plan {
    let spec = input.spec;
    let cat = catalog::catalog();
    let graph = graph::build(spec);

    // Live nodes per pool address, and every observed node by id (for drift messages).
    let mut live: BTreeMap<String, Vec<&Node>> = BTreeMap::new();
    let mut seen_by_id: BTreeMap<&str, &Node> = BTreeMap::new();
    match input.observed {
        Some(nodes) => {
            for n in nodes {
                seen_by_id.insert(&n.id, n);
                if n.is_live() {
                    live.entry(n.pool.to_string()).or_default().push(n);
                }
            }
        }
        None => {
            for (addr, r) in &input.state.resources {
                live.entry(addr.clone()).or_default().extend(r.nodes.iter().filter(|n| n.is_live()));
            }
        }
    }

    let mut addresses: BTreeSet<Address> = BTreeSet::new();
    if !input.destroy {
        addresses.extend(spec.gpu_pools.keys().cloned());
        addresses.extend(spec.quotas.keys().cloned());
        addresses.extend(spec.job_templates.keys().cloned());
        addresses.extend(spec.jobs.keys().cloned());
        addresses.extend(spec.autoscalers.keys().cloned());
    }
    addresses.extend(input.state.resources.keys().filter_map(|a| a.parse().ok()));
    addresses.extend(live.keys().filter_map(|a| a.parse().ok()));

    let mut plan = Plan {
        format_version: FORMAT_VERSION,
        lineage: input.state.lineage.clone(),
        serial: input.state.serial,
        spec_digest: input.spec_digest.clone(),
        refreshed: input.observed.is_some(),
        targets: input.targets.to_vec(),
        destroy: input.destroy,
        // Exact: a change is several hundred bytes, and doubling growth of a 100,000-change
        // vector would leave up to half of it unused.
        changes: Vec::with_capacity(addresses.len()),
        drift: Vec::new(),
        summary: Summary::default(),
        errors: Vec::new(),
        cost: None,
        policies: Vec::new(),
        autoscale: Vec::new(),
        jobs: Vec::new(),
    };

    let autoscaled: BTreeSet<&Address> = spec.autoscalers.values().map(|a| &a.pool.value).collect();
    if !input.destroy {
        plan.autoscale = input.autoscale.iter().filter(|a| autoscaled.contains(&a.pool)).cloned().collect();
    }
    for addr in &addresses {
        let key = addr.to_string();
        let prior = input.state.resources.get(&key);
        let nodes = live.get(&key).cloned().unwrap_or_default();
        let change = match addr.kind {
            Kind::GpuPool => {
                let pool = if input.destroy { None } else { spec.gpu_pools.get(addr) };
                let ctx = PoolCtx {
                    input,
                    addr,
                    pool,
                    prior,
                    live: nodes,
                    seen_by_id: &seen_by_id,
                    autoscaled: autoscaled.contains(addr),
                };
                pool_change(&ctx, cat, &mut plan)
            }
            _ => config_change(input, addr, prior, &mut plan.errors),
        };
        if let Some(mut c) = change {
            if matches!(c.action, Action::Create | Action::Update | Action::Replace) {
                c.after_changes = graph.dependencies(addr).into_iter().cloned().collect();
            }
            plan.changes.push(c);
        }
    }
    order_deletes(&mut plan, input.state);
    apply_targets(&mut plan, &graph);
    plan.summarize();
    plan
}

struct PoolCtx<'a, 'i> {
    input: &'a PlanInput<'i>,
    addr: &'a Address,
    pool: Option<&'a GpuPool>,
    prior: Option<&'a ResourceState>,
    live: Vec<&'a Node>,
    seen_by_id: &'a BTreeMap<&'a str, &'a Node>,
    autoscaled: bool,
}

/// Attributes of a pool that cannot change in place: changing them replaces nodes.
/// (`render/` reads it to mark `# forces replacement`.)
pub const IMMUTABLE: &[&str] = &["provider", "region", "gpu", "gpus_per_node", "instance_types", "image"];

fn pool_change(cx: &PoolCtx<'_, '_>, cat: &catalog::Catalog, plan: &mut Plan) -> Option<ResourceChange> {
    let addr = cx.addr;
    let spec = cx.input.spec;
    let shape = cx.pool.and_then(|p| shape::shape(spec, p, cat));
    if cx.pool.is_some() && shape.is_none() {
        return None; // invalid spec; validation explains
    }
    let mut reasons = Vec::new();
    let state_ids: BTreeSet<&str> =
        cx.prior.map(|p| p.nodes.iter().map(|n| n.id.as_str()).collect()).unwrap_or_default();

    // Drift: only meaningful when we actually looked at the cloud.
    let mut adopt = Vec::new();
    let mut forget: Vec<String> = Vec::new();
    if cx.input.observed.is_some() {
        let live_ids: BTreeSet<&str> = cx.live.iter().map(|n| n.id.as_str()).collect();
        if let Some(prior) = cx.prior {
            for n in prior.nodes.iter().filter(|n| n.is_live()) {
                if live_ids.contains(n.id.as_str()) {
                    continue;
                }
                let (kind, message) = match cx.seen_by_id.get(n.id.as_str()).map(|s| s.state) {
                    Some(NodeState::Reclaimed) => {
                        ("reclaimed", format!("{} node {} in {} was reclaimed by the cloud", n.capacity, n.id, n.zone))
                    }
                    _ => ("removed", format!("node {} in {} was terminated outside gpuplan", n.id, n.zone)),
                };
                forget.push(n.id.clone());
                plan.drift.push(DriftItem {
                    address: addr.clone(),
                    kind: kind.into(),
                    node_id: Some(n.id.clone()),
                    message,
                });
            }
            for n in &cx.live {
                if let Some(old) = prior.nodes.iter().find(|o| o.id == n.id)
                    && (old.instance_type != n.instance_type || old.zone != n.zone || old.capacity != n.capacity)
                {
                    plan.drift.push(DriftItem {
                        address: addr.clone(),
                        kind: "changed".into(),
                        node_id: Some(n.id.clone()),
                        message: format!(
                            "node {} changed outside gpuplan ({} {} → {} {})",
                            n.id, old.instance_type, old.zone, n.instance_type, n.zone
                        ),
                    });
                }
            }
        }
        for n in cx.live.iter().filter(|n| !state_ids.contains(n.id.as_str())) {
            let verb = if cx.pool.is_some() { "adopting it" } else { "it will be terminated" };
            plan.drift.push(DriftItem {
                address: addr.clone(),
                kind: "orphan".into(),
                node_id: Some(n.id.clone()),
                message: format!("node {} carries this state's tags but the state does not know it; {verb}", n.id),
            });
            if cx.pool.is_some() {
                adopt.push((*n).clone());
            }
        }
    }

    // A pool whose last apply was killed after launching nodes but before recording its
    // configuration has nodes in state and a null config: no "before" to diff against.
    let unfinished = cx.prior.is_some_and(|p| p.config.is_null());
    let before_cfg = cx.prior.map(|p| p.config.clone()).filter(|c| !c.is_null());
    let mut after_cfg = cx.pool.map(|p| JsonText::to_json(p).unwrap_or_default());
    let mut ignore: Vec<String> = cx
        .pool
        .and_then(|p| p.meta.lifecycle.as_ref())
        .map(|l| l.ignore_changes.iter().map(|s| s.value.clone()).collect())
        .unwrap_or_default();
    if cx.autoscaled && !ignore.iter().any(|p| p == "nodes" || p == "nodes.desired") {
        // The autoscaler owns the node count: `nodes.desired` is only the starting size, and
        // editing it must not show up as a change that does nothing (Terraform users write
        // `ignore_changes = [desired_size]` for autoscaled node groups; here it is implied).
        ignore.push("nodes.desired".into());
    }
    if let (Some(before), Some(after)) = (&before_cfg, &mut after_cfg)
        && !ignore.is_empty()
    {
        let (before, mut edited) = (before.to_value(), after.to_value());
        for path in &ignore {
            copy_path(&before, &mut edited, path);
        }
        *after = JsonText::from_value(&edited);
    }
    // The autoscaler owns the count of an existing autoscaled pool: its decision in this
    // run, else the count recorded in state (`config.nodes.desired`), else the live count.
    let scale = cx.input.autoscale.iter().find(|a| &a.pool == addr).filter(|_| cx.autoscaled && !cx.input.destroy);
    let owned: Option<u32> = (cx.autoscaled && cx.prior.is_some()).then(|| {
        let recorded = before_cfg.as_ref().and_then(|c| c.pointer("/nodes/desired")).and_then(|d| d.as_u64());
        scale.map(|s| s.to).or(recorded.map(|d| d.min(u32::MAX as u64) as u32)).unwrap_or(cx.live.len() as u32)
    });
    if let (Some(count), Some(pool), Some(after)) = (owned, cx.pool, &mut after_cfg) {
        let mut edited = after.to_value();
        if let Some(nodes) = edited.get_mut("nodes").and_then(Json::as_object_mut) {
            let n = count.clamp(pool.nodes.min.value, pool.nodes.max.value.max(pool.nodes.min.value));
            nodes.insert("desired".into(), Json::from(n));
            *after = JsonText::from_value(&edited);
        }
    }
    let changed = match (&before_cfg, &after_cfg) {
        (Some(b), Some(a)) => changed_text(b, a),
        _ => vec![],
    };
    if changed.is_empty() && before_cfg.is_some() && after_cfg.is_some() {
        // Unchanged: share the state's copy instead of holding a second one.
        after_cfg.clone_from(&before_cfg);
    }

    let before_gpus =
        before_cfg.as_ref().and_then(|c| c.get("gpus_per_node")).and_then(|g| g.as_u64()).map(|g| g as u32);
    let before_counts = count(&cx.live, before_gpus.or(shape.as_ref().map(|s| s.gpus_per_node)).unwrap_or(0));
    let Some(shape) = shape else {
        // Removed from the spec (or destroy): every node goes.
        if cx.prior.is_none() && cx.live.is_empty() {
            return None;
        }
        let prevent = cx
            .prior
            .and_then(|p| p.config.pointer("/lifecycle/prevent_destroy"))
            .and_then(|b| b.as_bool())
            .unwrap_or(false);
        if prevent {
            plan.errors.push(PlanError {
                address: addr.clone(),
                message: format!("`{addr}` has `lifecycle.prevent_destroy` set, but this plan would destroy it"),
                hint: Some("set prevent_destroy = false and apply first, if destroying it is really intended".into()),
            });
        }
        // Orphans of a pool neither the spec nor the state knows: terminated, not "removed".
        let orphans_only = cx.prior.is_none() && !cx.input.destroy;
        let (code, message, why) = if cx.input.destroy {
            ("destroy", format!("destroy was requested for `{addr}`"), "destroy requested")
        } else if orphans_only {
            (
                "orphan",
                format!("`{addr}` is in neither the spec nor the state; its orphan node(s) will be terminated"),
                "orphan",
            )
        } else {
            ("removed_from_spec", format!("`{addr}` is removed from the spec"), "removed from the spec")
        };
        reasons.push(Reason::new(code, message));
        let deletes: Vec<NodeDelete> = sorted(&cx.live).into_iter().map(|n| delete(n, why)).collect();
        let prior = cx.prior;
        let provider = prior.and_then(|p| p.provider.clone()).or_else(|| orphan_provider(spec, &cx.live));
        let provider_kind = prior.and_then(|p| p.provider_kind.clone()).or_else(|| {
            let name = provider.as_ref()?;
            spec.providers.get(name).and_then(|p| p.kind.value).map(|k| k.to_string())
        });
        let mut before = before_counts;
        if before.gpus_per_node == 0 {
            // No configuration to read it from: the catalog knows the node's instance type.
            let kind = provider_kind.as_deref().and_then(|k| ProviderKind::ALL.into_iter().find(|p| p.as_str() == k));
            before.gpus_per_node = cx
                .live
                .first()
                .zip(kind)
                .and_then(|(n, k)| cat.instance_type(k, &n.instance_type))
                .map_or(0, |t| t.gpus);
        }
        return Some(ResourceChange {
            address: addr.clone(),
            action: Action::Delete,
            before: before_cfg,
            after: None,
            reasons,
            pool: Some(PoolChange {
                provider: provider.unwrap_or_default(),
                provider_kind: provider_kind.unwrap_or_default(),
                region: prior
                    .and_then(|p| p.region.clone())
                    .or_else(|| cx.live.first().map(|n| n.region.clone()))
                    .unwrap_or_default(),
                gpu: prior
                    .and_then(|p| p.config.get("gpu"))
                    .and_then(|g| g.as_str().map(str::to_string))
                    .unwrap_or_default(),
                before,
                after: NodeCounts { gpus_per_node: before.gpus_per_node, ..NodeCounts::default() },
                before_types: type_counts(&cx.live),
                creates: vec![],
                deletes,
                adopt: vec![],
                forget: vec![],
                zones: vec![],
                fallback: Default::default(),
                create_before_destroy: false,
            }),
            after_changes: vec![],
        });
    };
    let pool = cx.pool?;

    // Which live nodes no longer match the pool's immutable attributes.
    let stale_reason = |n: &Node| -> Option<String> {
        if n.region != shape.region {
            Some(format!("region {} → {}", n.region, shape.region))
        } else if !shape.instance_types.contains(&n.instance_type) {
            Some(format!("instance type {} no longer matches {} × {}", n.instance_type, shape.gpus_per_node, shape.gpu))
        } else if let (Some(have), Some(want)) = (&n.image, &shape.image)
            && have != want
        {
            Some(format!("image {have} → {want}"))
        } else {
            None
        }
    };
    let (stale, fresh): (Vec<&Node>, Vec<&Node>) = cx.live.iter().copied().partition(|n| stale_reason(n).is_some());

    // How many nodes the pool should have.
    let nodes_cfg = &pool.nodes;
    let ignores_count = ignore.iter().any(|p| p == "nodes" || p == "nodes.desired");
    let n = if (cx.autoscaled || ignores_count) && cx.prior.is_some() {
        let have = owned.unwrap_or(fresh.len().min(u32::MAX as usize) as u32);
        let n = have.clamp(nodes_cfg.min.value, nodes_cfg.max.value);
        let who =
            if cx.autoscaled { "the autoscaler owns the node count" } else { "`ignore_changes` covers nodes.desired" };
        if n != have {
            reasons.push(Reason::new(
                "node_bounds",
                format!("{have} nodes is outside min..max ({}..{}); {who}", nodes_cfg.min.value, nodes_cfg.max.value),
            ));
        }
        n
    } else {
        nodes_cfg.desired.value
    };
    let layout = shape::layout(&shape, n, pool.mix.on_demand_base.value, pool.mix.spot_percent.value);

    // Match fresh nodes to the layout bucket by bucket, oldest first, so that the nodes
    // past a bucket's count (the ones that go) are the newest.
    let age = age_rank(cx.prior);
    let mut by_bucket: BTreeMap<(String, Capacity), Vec<&Node>> = BTreeMap::new();
    let idle = |n: &Node| scale.is_some_and(|s| s.remove.contains(&n.id));
    let mut ordered = oldest_first(&fresh, &age);
    // Nodes the autoscaler found idle go first when a bucket shrinks (stable: age order kept).
    ordered.sort_by_key(|n| idle(n));
    for node in ordered {
        by_bucket.entry((shape::bucket(&shape, &node.zone).to_string(), node.capacity)).or_default().push(node);
    }
    let mut creates = Vec::new();
    let mut excess: Vec<&Node> = Vec::new();
    for (zone, cap, want) in &layout {
        let have = by_bucket.remove(&(zone.clone(), *cap)).unwrap_or_default();
        let want = *want as usize;
        if have.len() > want {
            excess.extend(&have[want..]);
        } else if have.len() < want {
            let missing = (want - have.len()) as u32;
            creates.push(create_batch(cx, &shape, pool, zone, *cap, missing));
        }
    }
    for (_, rest) in by_bucket {
        excess.extend(rest);
    }
    // A first push reserves room for four; most pools create one batch, and the plan
    // keeps them until apply ends.
    creates.shrink_to_fit();
    // Surplus first (the pool shrank), the rest moves to other zones/capacity types.
    let surplus = fresh.len().saturating_sub(n as usize);
    let mut deletes: Vec<NodeDelete> = Vec::new();
    excess = oldest_first(&excess, &age);
    excess.reverse();
    excess.sort_by_key(|n| !idle(n));
    for (i, node) in excess.iter().enumerate() {
        let why = if i >= surplus {
            "rebalance"
        } else if idle(node) {
            "idle"
        } else {
            "surplus"
        };
        deletes.push(delete(node, why));
    }
    for node in sorted(&stale) {
        deletes.push(delete(node, &format!("replaced: {}", stale_reason(node).unwrap_or_default())));
    }

    let (od, spot) = shape::split(n, pool.mix.on_demand_base.value, pool.mix.spot_percent.value);
    let after_counts = NodeCounts { on_demand: od, spot, gpus_per_node: shape.gpus_per_node };
    let immutable_changed: Vec<&String> =
        changed.iter().filter(|p| IMMUTABLE.contains(&p.split('.').next().unwrap_or(""))).collect();

    let action = if cx.prior.is_none() {
        Action::Create
    } else if !stale.is_empty() && (!immutable_changed.is_empty() || fresh.is_empty()) {
        Action::Replace
    } else if !creates.is_empty()
        || !deletes.is_empty()
        || !adopt.is_empty()
        || !forget.is_empty()
        || !changed.is_empty()
        || unfinished
    {
        Action::Update
    } else {
        Action::NoOp
    };

    match action {
        Action::Create => reasons.push(Reason::new("new", format!("`{addr}` is new in the spec"))),
        Action::Replace => {
            let what: Vec<&str> = immutable_changed.iter().map(|s| s.as_str()).collect();
            let attrs = if what.is_empty() {
                "nodes no longer match the pool".to_string()
            } else {
                format!("{} cannot change in place", what.join(", "))
            };
            reasons.push(Reason::new("immutable", format!("{attrs}; {} node(s) will be replaced", stale.len())));
        }
        _ => {}
    }
    if action != Action::Create {
        if let Some(s) = scale {
            reasons.push(Reason::new("autoscale", format!("autoscale: {}", s.reason)));
        }
        // An autoscaled pool's recorded count is the autoscaler's, not a spec change.
        let owned_path = |p: &str| owned.is_some() && p == "nodes.desired";
        for p in changed.iter().filter(|p| !IMMUTABLE.contains(&p.split('.').next().unwrap_or("")) && !owned_path(p)) {
            reasons.push(Reason::new(format!("changed:{p}"), format!("`{p}` changed")));
        }
        if !stale.is_empty() && action == Action::Update {
            reasons.push(Reason::new(
                "outdated_nodes",
                format!("{} node(s) no longer match and will be replaced", stale.len()),
            ));
        }
        let lost = plan
            .drift
            .iter()
            .filter(|d| &d.address == addr && matches!(d.kind.as_str(), "reclaimed" | "removed"))
            .count();
        if lost > 0 && !creates.is_empty() {
            reasons
                .push(Reason::new("drift", format!("{lost} node(s) disappeared outside gpuplan; restoring the mix")));
        } else if lost > 0 {
            reasons.push(Reason::new(
                "drift",
                format!("{lost} node(s) disappeared outside gpuplan; dropping them from state"),
            ));
        }
        if before_counts.nodes() != n {
            reasons.push(Reason::new("node_count", format!("nodes {} → {n}", before_counts.nodes())));
        } else if (before_counts.on_demand, before_counts.spot) != (od, spot) {
            reasons.push(Reason::new(
                "mix",
                format!("on-demand/spot {}/{} → {od}/{spot}", before_counts.on_demand, before_counts.spot),
            ));
        }
    }
    if unfinished {
        reasons.push(Reason::new(
            "unfinished",
            format!("an interrupted apply launched nodes for `{addr}` but did not record its configuration"),
        ));
    }
    if !adopt.is_empty() {
        reasons.push(Reason::new("adopt", format!("adopting {} orphan node(s) tagged for this pool", adopt.len())));
    }
    let prevent = pool.meta.lifecycle.as_ref().is_some_and(|l| l.prevent_destroy.value);
    let destroys_nodes = !stale.is_empty() || deletes.iter().any(|d| d.reason.starts_with("replaced"));
    if prevent && matches!(action, Action::Replace) || prevent && destroys_nodes {
        plan.errors.push(PlanError {
            address: addr.clone(),
            message: format!("`{addr}` has `lifecycle.prevent_destroy` set, but this plan would replace its nodes"),
            hint: Some("revert the change to the pool's immutable attributes, or set prevent_destroy = false".into()),
        });
    }
    let cbd =
        pool.meta.lifecycle.as_ref().and_then(|l| l.create_before_destroy.as_ref()).map(|b| b.value).unwrap_or(true);
    reasons.shrink_to_fit();
    // Only creates fall back to other zones: a change without any does not carry them.
    let zones = if creates.is_empty() { vec![] } else { shape.zones.clone() };
    Some(ResourceChange {
        address: addr.clone(),
        action,
        before: before_cfg,
        after: after_cfg,
        reasons,
        pool: Some(PoolChange {
            provider: shape.provider.clone(),
            provider_kind: shape.provider_kind.to_string(),
            region: shape.region.clone(),
            gpu: shape.gpu.clone(),
            before: before_counts,
            after: after_counts,
            before_types: type_counts(&cx.live),
            creates,
            deletes,
            adopt,
            forget,
            zones,
            fallback: pool.mix.fallback.value,
            create_before_destroy: cbd,
        }),
        after_changes: vec![],
    })
}

/// The provider of orphan nodes the state has no record of: their `gpuplan:provider` tag,
/// else the spec's only provider (nodes created before the tag existed).
fn orphan_provider(spec: &Spec, live: &[&Node]) -> Option<String> {
    if let Some(p) = live.iter().find_map(|n| n.tags.get(TAG_PROVIDER)) {
        return Some(p.to_string());
    }
    let mut names = spec.providers.keys();
    match (names.next(), names.next()) {
        (Some(only), None) => Some(only.clone()),
        _ => None,
    }
}

fn sorted<'a>(nodes: &[&'a Node]) -> Vec<&'a Node> {
    let mut v = nodes.to_vec();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

fn type_counts(nodes: &[&Node]) -> Vec<TypeCount> {
    let mut m: BTreeMap<(String, Capacity), u32> = BTreeMap::new();
    for n in nodes {
        *m.entry((n.instance_type.clone(), n.capacity)).or_default() += 1;
    }
    m.into_iter().map(|((instance_type, capacity), count)| TypeCount { instance_type, capacity, count }).collect()
}

/// A node's age rank: its position in the state, which records nodes in the order they were
/// created (journal `AddNodes` appends). Node ids carry no order (clouds hash them).
fn age_rank(prior: Option<&ResourceState>) -> BTreeMap<&str, usize> {
    prior.map(|p| p.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect()).unwrap_or_default()
}

/// Oldest first by [`age_rank`]; nodes the state does not know (orphans) count as newest;
/// ties by id, for determinism.
fn oldest_first<'a>(nodes: &[&'a Node], age: &BTreeMap<&str, usize>) -> Vec<&'a Node> {
    let mut v = nodes.to_vec();
    v.sort_by_key(|n| (age.get(n.id.as_str()).copied().unwrap_or(usize::MAX), n.id.clone()));
    v
}

fn count(nodes: &[&Node], gpus_per_node: u32) -> NodeCounts {
    let spot = nodes.iter().filter(|n| n.capacity == Capacity::Spot).count() as u32;
    NodeCounts { on_demand: nodes.len() as u32 - spot, spot, gpus_per_node }
}

fn delete(n: &Node, reason: &str) -> NodeDelete {
    NodeDelete {
        id: n.id.clone(),
        zone: n.zone.clone(),
        instance_type: n.instance_type.clone(),
        capacity: n.capacity,
        reason: reason.to_string(),
    }
}

fn create_batch(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
    zone: &str,
    cap: Capacity,
    count: u32,
) -> CreateNodes {
    let lineage = &cx.input.state.lineage;
    let seed = format!("{lineage}|{}|{}|{zone}|{cap}|{count}", cx.input.state.serial, cx.addr);
    // The bucket of every allowed zone: one batch the provider places across them all.
    let (zone, zones) = if zone == shape::ANY_ZONE {
        (shape.zones.first().cloned().unwrap_or_default(), shape.zones.clone())
    } else {
        (zone.to_string(), vec![])
    };
    let token = format!("gp-{}", &hex(&Sha256::digest(seed.as_bytes()))[..40]);
    // The ownership tags come last so that they win over a label of the same key.
    let address = cx.addr.to_string();
    let ownership =
        [(TAG_MANAGED, "true"), (TAG_LINEAGE, lineage), (TAG_ADDRESS, &address), (TAG_PROVIDER, &shape.provider)];
    let tags: Tags = pool.labels.iter().map(|(k, v)| (k.as_str(), v.value.as_str())).chain(ownership).collect();
    CreateNodes {
        pool: cx.addr.clone(),
        region: shape.region.clone(),
        zone,
        zones,
        instance_types: shape.instance_types.clone(),
        capacity: cap,
        count,
        image: shape.image.clone(),
        max_spot_price: if cap == Capacity::Spot { shape.max_spot_price } else { None },
        token,
        tags,
        user_data: None,
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
            Kind::GpuPool | Kind::Provider => None,
        }
        .and_then(Result::ok)
    };
    let before = prior.map(|p| p.config.clone());
    let (action, reasons) = match (&before, &after) {
        (None, None) => return None,
        (None, Some(_)) => (Action::Create, vec![Reason::new("new", format!("`{addr}` is new in the spec"))]),
        (Some(b), None) => {
            if b.pointer("/lifecycle/prevent_destroy").and_then(|p| p.as_bool()).unwrap_or(false) {
                errors.push(PlanError {
                    address: addr.clone(),
                    message: format!("`{addr}` has `lifecycle.prevent_destroy` set, but this plan would destroy it"),
                    hint: Some(
                        "set prevent_destroy = false and apply first, if destroying it is really intended".into(),
                    ),
                });
            }
            let reason = if input.destroy {
                Reason::new("destroy", format!("destroy was requested for `{addr}`"))
            } else {
                Reason::new("removed_from_spec", format!("`{addr}` is removed from the spec"))
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
                });
            } else {
                (
                    Action::Update,
                    changed.iter().map(|p| Reason::new(format!("changed:{p}"), format!("`{p}` changed"))).collect(),
                )
            }
        }
    };
    Some(ResourceChange { address: addr.clone(), action, before, after, reasons, pool: None, after_changes: vec![] })
}

/// Deletes wait for the deletes of whatever depended on them. One pass over the state's
/// recorded dependencies builds the reverse index, so destroying N resources is
/// O(N log N), not O(N²).
fn order_deletes(plan: &mut Plan, state: &State) {
    let deleted: BTreeSet<&Address> =
        plan.changes.iter().filter(|c| c.action == Action::Delete).map(|c| &c.address).collect();
    if deleted.is_empty() {
        return;
    }
    // A recorded dependency (as written in state) → the deleted resources that depended on
    // it, in the state's order, each once.
    let mut dependents: BTreeMap<&str, Vec<Address>> = BTreeMap::new();
    for (addr, r) in &state.resources {
        let Some(addr) = addr.parse::<Address>().ok().filter(|a| deleted.contains(a)) else { continue };
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

/// [`changed_paths`] of stored configurations; equal text (the common case) is no change.
fn changed_text(before: &JsonText, after: &JsonText) -> Vec<String> {
    if before == after { vec![] } else { changed_paths(&before.to_value(), &after.to_value()) }
}

/// Dotted paths of leaves that differ between two JSON values.
pub fn changed_paths(before: &Json, after: &Json) -> Vec<String> {
    let mut out = Vec::new();
    diff_into(before, after, String::new(), &mut out);
    out
}

fn diff_into(b: &Json, a: &Json, path: String, out: &mut Vec<String>) {
    match (b, a) {
        (Json::Object(bo), Json::Object(ao)) => {
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
fn copy_path(from: &Json, to: &mut Json, path: &str) {
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
