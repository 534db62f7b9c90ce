//! Which nodes a pool creates and deletes: live nodes that no longer match the pool are
//! replaced; the rest fill the layout bucket by bucket (zone × capacity), oldest first,
//! so the nodes past a bucket's count (the ones that go) are the newest.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::{PoolCtx, delete, sorted};
use crate::plan::diff::hex;
use crate::plan::model::{NodeDelete, ScaleAction};
use crate::plan::shape::{self, PoolShape};
use crate::providers::{
    Capacity, ClusterJoin, CreateNodes, Node, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER, Tags,
};
use crate::spec::model::GpuPool;
use crate::state::ResourceState;

/// The node-level work of one pool.
#[derive(Debug)]
pub(crate) struct NodeOps {
    pub creates: Vec<CreateNodes>,
    pub deletes: Vec<NodeDelete>,
}

/// Why a live node no longer matches the pool's immutable attributes, if it does not.
pub(crate) fn stale_reason(shape: &PoolShape, n: &Node) -> Option<String> {
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
    let layout = shape::layout(shape, n, pool.mix.on_demand_base.value, pool.mix.spot_percent.value);
    let age = age_rank(cx.prior);
    let (mut creates, excess) = fill_layout(cx, shape, pool, &layout, fresh, &age, scale);
    // A first push reserves room for four; most pools create one batch, and the plan
    // keeps them until apply ends.
    creates.shrink_to_fit();
    let surplus = fresh.len().saturating_sub(n as usize);
    let mut deletes = excess_deletes(&excess, surplus, &age, scale);
    for node in sorted(stale) {
        deletes.push(delete(node, &format!("replaced: {}", stale_reason(shape, node).unwrap_or_default())));
    }
    NodeOps { creates, deletes }
}

/// Did the autoscaler find this node idle (it goes first when its bucket shrinks)?
fn idle(scale: Option<&ScaleAction>, n: &Node) -> bool {
    scale.is_some_and(|s| s.remove.contains(&n.id))
}

/// Match fresh nodes to the layout's buckets: a batch to create for each bucket short of
/// nodes, and the nodes past each bucket's count (idle first, then newest).
pub(crate) fn fill_layout<'a>(
    cx: &PoolCtx<'_, '_>,
    shape: &PoolShape,
    pool: &GpuPool,
    layout: &[(String, Capacity, u32)],
    fresh: &[&'a Node],
    age: &BTreeMap<&str, usize>,
    scale: Option<&ScaleAction>,
) -> (Vec<CreateNodes>, Vec<&'a Node>) {
    let mut by_bucket: BTreeMap<(String, Capacity), Vec<&Node>> = BTreeMap::new();
    let mut ordered = oldest_first(fresh, age);
    // Nodes the autoscaler found idle go first when a bucket shrinks (stable: age order kept).
    ordered.sort_by_key(|n| idle(scale, n));
    for node in ordered {
        by_bucket.entry((shape::bucket(shape, &node.zone).to_string(), node.capacity)).or_default().push(node);
    }
    let mut creates = Vec::new();
    let mut excess: Vec<&Node> = Vec::new();
    for (zone, cap, want) in layout {
        let have = by_bucket.remove(&(zone.clone(), *cap)).unwrap_or_default();
        let want = *want as usize;
        if have.len() > want {
            excess.extend(&have[want..]);
        } else if have.len() < want {
            let missing = (want - have.len()) as u32;
            creates.push(create_batch(cx, shape, pool, zone, *cap, missing));
        }
    }
    for (_, rest) in by_bucket {
        excess.extend(rest);
    }
    (creates, excess)
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
        join: join(pool, &cx.addr.name, cap, shape.provider_kind),
    }
}

/// How a batch joins the pool's TKE or ACK cluster (`kubernetes { cluster_id }`): the
/// labels Kubernetes Jobs select (DESIGN.md, "Where jobs run") and the spot taint.
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
    let capacity = if cap == Capacity::Spot { "spot" } else { "on-demand" };
    let labels = vec![
        ("gpuplan.dev/pool".to_string(), pool_name.to_string()),
        ("gpuplan.dev/capacity".to_string(), capacity.to_string()),
    ];
    let taints = if cap == Capacity::Spot {
        vec![("gpuplan.dev/capacity".to_string(), "spot".to_string(), "NoSchedule".to_string())]
    } else {
        vec![]
    };
    Some(ClusterJoin {
        cluster_id,
        labels,
        taints,
        key_pair: k.key_pair.as_ref().map(|p| p.value.clone()),
        service_cidr: k.service_cidr.as_ref().map(|c| c.value.clone()),
    })
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
