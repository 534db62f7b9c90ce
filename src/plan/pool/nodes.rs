//! Which nodes a pool creates and deletes: live nodes that no longer match the pool are
//! replaced; the rest fill the layout that keeps the most of them (`plan::keep`) bucket
//! by bucket (zone × capacity), nodes that run jobs first, then oldest first, so the nodes
//! past a bucket's count (the ones that go) are idle and the newest.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::{PoolCtx, delete, sorted};
use crate::hex::hex;
use crate::model::hardware::{Hardware, placement_group_name};
use crate::plan::keep;
use crate::plan::model::{NodeDelete, ScaleAction};
use crate::plan::shape::{self, PoolShape};
use crate::providers::{
    Capacity, ClusterJoin, CreateNodes, Node, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER, Tags,
};
use crate::spec::model::{Fallback, GpuPool};
use crate::state::ResourceState;

/// The node-level work of one pool.
#[derive(Debug)]
pub(crate) struct NodeOps {
    pub creates: Vec<CreateNodes>,
    pub deletes: Vec<NodeDelete>,
    /// Nodes kept in their fallback placement.
    pub held: Vec<Held>,
    /// The creates retry the preferred placement after a fallback.
    pub retry: bool,
}

/// Why a live node no longer matches the pool's immutable attributes, if it does not.
/// `home` is, for a floating pool, the provider block of its nodes that record none (the
/// state's for the pool); other pools' nodes stay with the provider block they have.
pub(crate) fn stale_reason(shape: &PoolShape, n: &Node, home: Option<&str>) -> Option<String> {
    let provider = home.map(|h| n.provider_or(h));
    if let Some(p) = provider.filter(|p| *p != shape.provider) {
        // A floating pool moving to another provider block: both are named.
        Some(format!("{p} {} → {} {}", n.region, shape.provider, shape.region))
    } else if n.region != shape.region {
        Some(format!("region {} → {}", n.region, shape.region))
    } else if !shape.instance_types.contains(&n.instance_type) {
        Some(format!("instance type {} no longer matches {} × {}", n.instance_type, shape.gpus_per_node, shape.gpu))
    } else if let (Some(have), Some(want)) = (&n.image, &shape.image)
        && have != want
    {
        Some(format!("image {have} → {want}"))
    } else {
        reservation_ends(shape, n)
    }
}

/// Why `n` goes with the reservation it runs in (ended, or a window about to close).
fn reservation_ends(shape: &PoolShape, n: &Node) -> Option<String> {
    let id = n.tags.get(crate::providers::TAG_RESERVATION)?;
    let r = shape.reserved.as_deref()?;
    r.ending.iter().find(|(e, _)| e == id).map(|(_, why)| why.clone())
}

/// Turn the `fresh` nodes into a layout of `n` nodes and replace the `stale` ones.
pub(crate) fn node_ops(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
    n: u32,
    fresh: &[&Node],
    stale: &[&Node],
    scale: Option<&ScaleAction>,
) -> NodeOps {
    let age = age_rank(cx.prior);
    let buckets = bucket_nodes(cx, shape, fresh, &age, scale);
    let phase = fallback_phase(cx, shape, pool);
    let layout = target_layout(cx, shape, pool, n, phase, &buckets, scale);
    let Filled { mut creates, excess, held, retry } = fill_layout(cx, shape, pool, &layout, buckets, phase);
    super::reserved::split_creates(cx, shape, &mut creates, |zone, k| {
        create_batch(cx, shape, pool, zone, Capacity::OnDemand, k)
    });
    // A first push reserves room for four; most pools create one batch, and the plan
    // keeps them until apply ends.
    creates.shrink_to_fit();
    let surplus = fresh.len().saturating_sub(n as usize);
    let mut deletes = excess_deletes(&excess, surplus, &age, scale);
    let home = super::home_provider(cx, shape);
    let requested = super::replace_requested(cx).then_some(super::REPLACE_REASON);
    for node in sorted(stale) {
        let why = stale_reason(shape, node, home).or_else(|| requested.map(str::to_string)).unwrap_or_default();
        let mut d = delete(node, &format!("replaced: {why}"));
        // Terminated where it runs, not in the pool's new region or provider block.
        d.region = (node.region != shape.region).then(|| node.region.clone());
        d.provider = home.map(|h| node.provider_or(h)).filter(|p| *p != shape.provider).map(str::to_string);
        deletes.push(d);
    }
    NodeOps { creates, deletes, held, retry }
}

/// The layout the nodes move to: of those the shape allows, the one that keeps the most
/// of them and the busiest ([`keep::layout`]), so that no node the shape can keep is
/// terminated. A pool waiting on, or retrying, its preferred placement after a fallback
/// keeps the usual layout ([`shape::layout`]): its fallback record is about that one.
fn target_layout(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
    n: u32,
    phase: FallbackPhase,
    buckets: &Buckets<'_>,
    scale: Option<&ScaleAction>,
) -> keep::Layout {
    let (base, pct) = (pool.mix.on_demand_base.value, pool.mix.spot_percent.value);
    let usual = shape::layout(shape, n, base, pct);
    // Most pools of a plan do not change: their nodes fit the usual layout already.
    if phase != FallbackPhase::None || keep::keeps_all(&usual, buckets.iter().map(|(b, nodes)| (*b, nodes.len()))) {
        return usual;
    }
    let worth = |node: &Node| -> keep::Worth {
        let rank = cx.jobs.keep_rank(&node.id);
        [1, u32::from(!idle(scale, node)), u32::from(rank == 0), u32::from(rank <= 1)]
    };
    let have: keep::Have<'_> =
        buckets.iter().map(|(bucket, nodes)| (*bucket, nodes.iter().map(|n| worth(n)).collect())).collect();
    keep::layout(shape, n, base, pct, &have)
}

/// Did the autoscaler find this node idle (it goes first when its bucket shrinks)?
fn idle(scale: Option<&ScaleAction>, n: &Node) -> bool {
    scale.is_some_and(|s| s.remove.contains(&n.id))
}

/// What [`fill_layout`] decided.
#[derive(Debug)]
pub(crate) struct Filled<'a> {
    /// A batch for each bucket short of nodes.
    pub creates: Vec<CreateNodes>,
    /// Nodes past their bucket's count (idle first, then newest).
    pub excess: Vec<&'a Node>,
    /// Nodes left in their fallback placement, each standing in for a node of the bucket
    /// the pool prefers (see [`FallbackPhase`]).
    pub held: Vec<Held>,
    /// The creates retry the preferred placement of a pool that fell back.
    pub retry: bool,
}

/// A node kept in its fallback placement instead of the one the layout prefers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub id: String,
    pub zone: String,
    pub capacity: Capacity,
    /// The bucket it stands in for.
    pub preferred_zone: String,
    pub preferred_capacity: Capacity,
}

/// Where a pool stands with its recorded fallback (docs/design/convergence.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FallbackPhase {
    /// No fallback recorded: nodes out of place are moved (rebalance).
    None,
    /// Fallen back and waiting: nodes in their fallback placement stay.
    Hold,
    /// The wait is over: this plan tries the preferred placement again.
    Due,
}

/// The pool's [`FallbackPhase`] by its provider's clock. Without a clock (a plan that did
/// not refresh) the fallback holds: retrying is a change, and only a refreshed plan proposes it.
pub(crate) fn fallback_phase(cx: &PoolCtx<'_, '_>, shape: &PoolShape, pool: &GpuPool) -> FallbackPhase {
    let Some(record) = cx.prior.and_then(|p| p.fallback.as_ref()) else { return FallbackPhase::None };
    match cx.input.clocks.get(&shape.provider) {
        Some(&now) if now >= record.retry_at(pool.mix.retry_preferred()) => FallbackPhase::Due,
        _ => FallbackPhase::Hold,
    }
}

/// A pool's fresh nodes by layout bucket (zone × capacity), each bucket in the order its
/// nodes are kept: nodes of jobs that are not preemptible, then of preemptible ones, then
/// idle ones, and last of all the nodes the autoscaler found idle; oldest first within each.
pub(crate) type Buckets<'a> = BTreeMap<(&'a str, Capacity), Vec<&'a Node>>;

/// [`Buckets`] of the `fresh` nodes.
pub(crate) fn bucket_nodes<'a>(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    fresh: &[&'a Node],
    age: &BTreeMap<&str, usize>,
    scale: Option<&ScaleAction>,
) -> Buckets<'a> {
    // Keyed by borrowed zone names: a pool's buckets are looked up a dozen times a plan.
    let mut by_bucket: Buckets<'a> = BTreeMap::new();
    let mut ordered = oldest_first(fresh, age);
    // Stable: age order kept within each rank.
    ordered.sort_by_key(|n| (idle(scale, n), cx.jobs.keep_rank(&n.id)));
    for node in ordered {
        // Reserved nodes fill on-demand buckets: reserved capacity is on-demand paid ahead.
        by_bucket.entry((shape::bucket(shape, &node.zone), node.capacity.market())).or_default().push(node);
    }
    by_bucket
}

/// Match the bucketed nodes to the layout: a batch to create for each bucket short of
/// nodes, and the nodes past each bucket's count (idle first, then newest). A pool that
/// fell back and is still waiting to retry keeps its fallback nodes in place of the
/// nodes its preferred buckets lack ([`hold_fallbacks`]).
pub(crate) fn fill_layout<'a>(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
    layout: &[(String, Capacity, u32)],
    by_bucket: Buckets<'a>,
    phase: FallbackPhase,
) -> Filled<'a> {
    // Keys borrowed for as long as this call, so the layout's zone names can look them up.
    let mut by_bucket: BTreeMap<(&str, Capacity), Vec<&'a Node>> = by_bucket;
    let mut short: Vec<(String, Capacity, u32)> = Vec::new();
    let mut excess: Vec<&Node> = Vec::new();
    for (zone, cap, want) in layout {
        let have = by_bucket.remove(&(zone.as_str(), *cap)).unwrap_or_default();
        let want = *want as usize;
        if have.len() > want {
            excess.extend(&have[want..]);
        } else if have.len() < want {
            short.push((zone.clone(), *cap, (want - have.len()) as u32));
        }
    }
    for (_, rest) in by_bucket {
        excess.extend(rest);
    }
    let held = if phase == FallbackPhase::Hold {
        hold_fallbacks(shape, pool.mix.fallback.value, &mut short, &mut excess)
    } else {
        vec![]
    };
    let creates: Vec<CreateNodes> = short
        .iter()
        .filter(|(_, _, missing)| *missing > 0)
        .map(|(zone, cap, missing)| create_batch(cx, shape, pool, zone, *cap, *missing))
        .collect();
    let retry = phase == FallbackPhase::Due && !creates.is_empty() && !excess.is_empty();
    Filled { creates, excess, held, retry }
}

/// Let nodes in a fallback placement stand in for the nodes the preferred buckets lack: a
/// node of the same capacity type in another of the pool's zones, or (spot short, with
/// `fallback = "on_demand"`) an on-demand node in any of them. Takes them out of `excess`
/// and lowers `short` by as many.
pub(crate) fn hold_fallbacks(
    shape: &PoolShape,
    fallback: Fallback,
    short: &mut [(String, Capacity, u32)],
    excess: &mut Vec<&Node>,
) -> Vec<Held> {
    let mut held = Vec::new();
    let allowed = |n: &Node| shape.zones.contains(&n.zone);
    for (zone, cap, missing) in short.iter_mut() {
        // Same capacity type in another zone first, then on-demand standing in for spot.
        let mut stands_in = |ok: &dyn Fn(&Node) -> bool, missing: &mut u32| {
            let mut i = 0;
            while *missing > 0 && i < excess.len() {
                let n = excess[i];
                if allowed(n) && ok(n) {
                    held.push(Held {
                        id: n.id.clone(),
                        zone: n.zone.clone(),
                        capacity: n.capacity,
                        preferred_zone: zone.clone(),
                        preferred_capacity: *cap,
                    });
                    excess.remove(i);
                    *missing -= 1;
                } else {
                    i += 1;
                }
            }
        };
        let want = *cap;
        stands_in(&|n: &Node| n.capacity.market() == want, missing);
        if want == Capacity::Spot && fallback == Fallback::OnDemand {
            stands_in(&|n: &Node| n.capacity.market() == Capacity::OnDemand, missing);
        }
    }
    held
}

/// Deletes for the nodes past the layout: the first `surplus` go because the pool shrank
/// (`idle` if the autoscaler chose them), the rest move to other zones or capacity types
/// (`rebalance`). Idle nodes first, then newest first.
pub(crate) fn excess_deletes(
    excess: &[&Node],
    surplus: usize,
    age: &BTreeMap<&str, usize>,
    scale: Option<&ScaleAction>,
) -> Vec<NodeDelete> {
    let mut excess = oldest_first(excess, age);
    excess.reverse();
    excess.sort_by_key(|n| !idle(scale, n));
    excess
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let why = if i >= surplus {
                "rebalance"
            } else if idle(scale, node) {
                "idle"
            } else {
                "surplus"
            };
            delete(node, why)
        })
        .collect()
}

/// One create call: `count` nodes of `cap` in `zone`, with an idempotency token derived
/// from the state (the same plan never launches twice) and the ownership tags.
pub(crate) fn create_batch(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
    zone: &str,
    cap: Capacity,
    count: u32,
) -> CreateNodes {
    let lineage = &cx.input.state.lineage;
    let address = cx.addr.to_string();
    let serial = cx.input.state.serial.to_string();
    let token = batch_token(&[lineage, &serial, &address, zone, cap.as_str(), &count.to_string()]);
    // The bucket of every allowed zone: one batch the provider places across them all.
    let (zone, zones) = if zone == shape::ANY_ZONE {
        (shape.zones.first().cloned().unwrap_or_default(), shape.zones.clone())
    } else {
        (zone.to_string(), vec![])
    };
    // The ownership tags come last so that they win over a label of the same key.
    let ownership =
        [(TAG_MANAGED, "true"), (TAG_LINEAGE, lineage), (TAG_ADDRESS, &address), (TAG_PROVIDER, &shape.provider)];
    let tags: Tags = pool.labels.iter().map(|(k, v)| (k.as_str(), v.value.as_str())).chain(ownership).collect();
    let hardware = batch_hardware(shape, lineage, &cx.addr.name, &zone);
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
        join: join(pool, &cx.addr.name, cap, shape.provider_kind),
        hardware,
        reservation: None,
    }
}

/// A batch's idempotency token: `gp-` and the first 40 hex digits of the SHA-256 of
/// `parts` joined by `|` (lineage, serial, address, zone, capacity, count). Hashed piece
/// by piece, the same digest as of the joined text, which is not built; only the 20 bytes
/// the token shows are turned into hex.
fn batch_token(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hash.update(b"|");
        }
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    let mut token = String::with_capacity(43);
    token.push_str("gp-");
    token.push_str(&hex(&digest[..20]));
    token
}

/// The pool's disks and fabric, and in a cluster placement group the group of the batch's
/// zone, named by [`placement_group_name`]; `None` without `disk {}` or `network {}`.
fn batch_hardware(shape: &PoolShape, lineage: &str, pool: &str, zone: &str) -> Option<Box<Hardware>> {
    let mut h = shape.hardware.clone().unwrap_or_default();
    if shape.cluster_placement {
        h.placement_group = Some(placement_group_name(lineage, pool, zone));
    }
    (h != Hardware::default()).then(|| Box::new(h))
}

/// How a batch joins the pool's TKE or ACK cluster (`kubernetes { cluster_id }`): the
/// labels Kubernetes Jobs select (docs/design/jobs.md, "Where jobs run") and the spot taint.
fn join(pool: &GpuPool, pool_name: &str, cap: Capacity, kind: crate::model::ProviderKind) -> Option<ClusterJoin> {
    let k = pool.kubernetes.as_ref()?;
    // EKS: nodes join by nodeadm user data read from the kubeconfig's cluster. Other
    // kubeconfig clusters join nodes their own way.
    let cluster_id = match (&k.cluster_id, &k.kubeconfig) {
        (Some(id), _) => id.value.clone(),
        (None, Some(path)) if kind == crate::model::ProviderKind::Aws => {
            crate::providers::kube::locator(&path.value, k.context.as_ref().map(|c| c.value.as_str()))
        }
        _ => return None,
    };
    let service = match kind {
        crate::model::ProviderKind::Tencentcloud => "TKE",
        crate::model::ProviderKind::Alicloud => "ACK",
        crate::model::ProviderKind::Aws => "EKS",
        crate::model::ProviderKind::Sim => "",
    };
    let mut join = ClusterJoin {
        cluster_id,
        service: service.to_string(),
        labels: vec![("gpuplan.dev/pool".to_string(), pool_name.to_string())],
        taints: vec![],
        key_pair: k.key_pair.as_ref().map(|p| p.value.clone()),
        service_cidr: k.service_cidr.as_ref().map(|c| c.value.clone()),
    };
    join.set_capacity(cap);
    Some(join)
}

/// A node's age rank: its position in the state, which records nodes in the order they were
/// created (journal `AddNodes` appends). Node ids carry no order (clouds hash them).
pub(crate) fn age_rank(prior: Option<&ResourceState>) -> BTreeMap<&str, usize> {
    prior.map(|p| p.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect()).unwrap_or_default()
}

/// Oldest first by [`age_rank`]; nodes the state does not know (orphans) count as newest;
/// ties by id, for determinism.
pub(crate) fn oldest_first<'a>(nodes: &[&'a Node], age: &BTreeMap<&str, usize>) -> Vec<&'a Node> {
    let mut v = nodes.to_vec();
    v.sort_by_key(|n| (age.get(n.id.as_str()).copied().unwrap_or(usize::MAX), n.id.clone()));
    v
}

#[cfg(test)]
mod token_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The token hashed piece by piece is the one the joined seed text gave.
        #[test]
        fn batch_token_is_the_joined_seeds_digest(
            lineage in "[a-f0-9-]{0,40}",
            serial in any::<u64>(),
            address in "\\PC{0,30}",
            zone in "[a-z0-9|-]{0,20}",
            spot in any::<bool>(),
            count in any::<u32>(),
        ) {
            let cap = if spot { Capacity::Spot } else { Capacity::OnDemand };
            let seed = format!("{lineage}|{serial}|{address}|{zone}|{cap}|{count}");
            let old = format!("gp-{}", &hex(&Sha256::digest(seed.as_bytes()))[..40]);
            let new = batch_token(&[&lineage, &serial.to_string(), &address, &zone, cap.as_str(), &count.to_string()]);
            prop_assert_eq!(new, old);
        }
    }
}
