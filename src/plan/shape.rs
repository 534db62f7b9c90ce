//! The desired node set of one pool: counts per capacity type and zone, and the
//! instance types allowed, from `nodes`, `mix`, zones and the catalog. Pure.

use crate::catalog::{self, Catalog};
use crate::model::hardware::{DEFAULT_ROOT_GB, Disk, Disks, Fabric, Hardware};
use crate::providers::Capacity;
use crate::spec::Spec;
use crate::spec::model::{GpuPool, ProviderKind};
use crate::spec::validate::{pool_provider, pool_region};

/// Everything about a pool that decides which nodes it should have.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolShape {
    pub provider: String,
    pub provider_kind: ProviderKind,
    pub region: String,
    pub zones: Vec<String>,
    pub gpu: String,
    pub gpus_per_node: u32,
    /// Allowed instance types, cheapest first. A node of any other type is replaced.
    pub instance_types: Vec<String>,
    pub image: Option<String>,
    pub max_spot_price: Option<f64>,
    /// Disks, fabric and placement group from `disk {}` and `network {}`, with the
    /// catalog's defaults filled in (the placement group named per zone by the batch).
    pub hardware: Option<crate::model::hardware::Hardware>,
    /// `network { placement_group = "cluster" }` (or `fabric = "rdma"` on Tencent Cloud,
    /// whose group is an HPC cluster): each zone's batches launch into the pool's group
    /// there ([`crate::model::hardware::placement_group_name`]).
    pub cluster_placement: bool,
    /// The reservation the pool's nodes launch into first (`capacity {}`), as this plan
    /// finds it (`plan::pool::reserved`); `None` from [`shape`].
    pub reserved: Option<Box<ReservedUse>>,
}

/// A pool's reserved capacity in one plan (docs/design/big-runs.md): the reservation its
/// first nodes launch into, and the ones whose nodes must go (ended or about to end).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReservedUse {
    /// The reservation launches go into; `None` when none can take nodes now.
    pub into: Option<crate::model::reservation::ReservationTarget>,
    pub zone: String,
    /// The instance type it holds: the reserved batch launches that type only.
    pub instance_type: String,
    /// How many of the pool's nodes it holds (the rest follow `mix`).
    pub slots: u32,
    /// Reservations (cloud ids) whose nodes are replaced, with why.
    pub ending: Vec<(String, String)>,
}

/// On-demand and spot counts for `n` nodes: the first `on_demand_base` on-demand, then
/// `spot_percent` of the rest on spot (rounded down, so on-demand never falls short).
pub fn split(n: u32, on_demand_base: u32, spot_percent: u32) -> (u32, u32) {
    let base = on_demand_base.min(n);
    let rest = (n - base) as u64;
    let spot = (rest * spot_percent.min(100) as u64 / 100) as u32;
    (n - spot, spot)
}

/// Spread `count` nodes over `zones` round-robin starting at zone `offset`.
pub fn spread(count: u32, zones: usize, offset: usize) -> Vec<u32> {
    if zones == 0 {
        return vec![];
    }
    let z = zones as u32;
    (0..zones)
        .map(|i| {
            let pos = ((i + zones - offset % zones) % zones) as u32;
            count / z + u32::from(pos < count % z)
        })
        .collect()
}

/// The bucket key of every allowed zone of a pool whose provider places nodes across its
/// zones itself (see [`PoolShape::provider_places_zones`]).
pub const ANY_ZONE: &str = "*";

impl PoolShape {
    /// Does the provider choose each node's zone among the pool's zones? EC2 fleets do:
    /// one `CreateFleet` per capacity type with overrides for every allowed subnet lets
    /// EC2's allocation strategy pick the zones with capacity (and the lowest spot
    /// interruption risk), as AWS recommends. The plan then counts nodes per capacity type
    /// over all allowed zones: holding them to a per-zone split would move the nodes EC2
    /// placed back on every apply. The other clouds launch into one zone per call.
    /// A pool in a cluster placement group launches zone by zone: a group lives in one zone.
    pub fn provider_places_zones(&self) -> bool {
        self.provider_kind == ProviderKind::Aws && self.zones.len() > 1 && !self.cluster_placement
    }
}

/// The layout bucket a node in `zone` counts in: [`ANY_ZONE`] for any allowed zone of a
/// pool whose provider places nodes across zones, otherwise the zone itself.
pub fn bucket<'a>(shape: &PoolShape, zone: &'a str) -> &'a str {
    if shape.provider_places_zones() && shape.zones.iter().any(|z| z == zone) { ANY_ZONE } else { zone }
}

/// Desired (zone, capacity) → count for a pool of `n` nodes. A pool whose provider places
/// nodes across zones has one bucket per capacity type, keyed by [`ANY_ZONE`].
///
/// A pool with reserved capacity puts its first nodes (up to the reservation's slots) in
/// the reservation's zone, on-demand; the rest follow `mix`.
pub fn layout(shape: &PoolShape, n: u32, on_demand_base: u32, spot_percent: u32) -> Vec<(String, Capacity, u32)> {
    let reserved = reserved_count(shape, n);
    let mut out = mix_layout(shape, n - reserved, on_demand_base, spot_percent);
    if let Some(r) = shape.reserved.as_deref().filter(|_| reserved > 0) {
        let zone = bucket(shape, &r.zone);
        match out.iter_mut().find(|(z, c, _)| z == zone && *c == Capacity::OnDemand) {
            Some(b) => b.2 += reserved,
            None => out.push((zone.to_string(), Capacity::OnDemand, reserved)),
        }
    }
    out
}

/// How many of a pool's `n` nodes run in its reservation (on-demand, before `mix`).
pub fn reserved_count(shape: &PoolShape, n: u32) -> u32 {
    shape.reserved.as_deref().filter(|r| r.into.is_some()).map_or(0, |r| r.slots.min(n))
}

/// [`layout`] by `mix` alone.
fn mix_layout(shape: &PoolShape, n: u32, on_demand_base: u32, spot_percent: u32) -> Vec<(String, Capacity, u32)> {
    let (od, spot) = split(n, on_demand_base, spot_percent);
    if shape.provider_places_zones() {
        return vec![(ANY_ZONE.to_string(), Capacity::OnDemand, od), (ANY_ZONE.to_string(), Capacity::Spot, spot)];
    }
    let z = shape.zones.len();
    let od_by_zone = spread(od, z, 0);
    // Start spot where on-demand left off, so zones stay balanced overall.
    let spot_by_zone = spread(spot, z, if z == 0 { 0 } else { od as usize % z });
    let mut out = Vec::new();
    for (i, zone) in shape.zones.iter().enumerate() {
        out.push((zone.clone(), Capacity::OnDemand, od_by_zone[i]));
        out.push((zone.clone(), Capacity::Spot, spot_by_zone[i]));
    }
    out
}

/// Resolve a pool's shape from the spec and catalog. `None` if the spec is invalid
/// (validation reports why).
pub fn shape(spec: &Spec, pool: &GpuPool, cat: &Catalog) -> Option<PoolShape> {
    let provider = pool_provider(spec, pool)?;
    let kind = provider.kind.value?;
    let region = pool_region(spec, pool)?.value.clone();
    let cny = provider.cny_per_usd.as_ref().map(|c| c.value).unwrap_or(catalog::DEFAULT_CNY_PER_USD);
    let mut types: Vec<&catalog::InstanceType> = if pool.instance_types.is_empty() {
        cat.matching(kind, &region, &pool.gpu.value, pool.gpus_per_node.value, cny)
    } else {
        pool.instance_types
            .iter()
            .filter_map(|t| cat.instance_type(kind, &t.value))
            .filter(|t| t.offered_in(&region))
            .collect()
    };
    // A pool with a fabric chooses among the types that have it (validation refuses a
    // named type without it).
    if let Some(f) = pool.network.as_ref().and_then(|n| n.fabric.as_ref())
        && pool.instance_types.is_empty()
    {
        types.retain(|t| catalog::hardware::fabric_of(&t.name).is_some_and(|(have, _)| have == f.value));
    }
    // Tencent's RDMA (HCC) types launch only into an HPC cluster, made for `fabric = "rdma"`.
    if kind == ProviderKind::Tencentcloud && pool.network.as_ref().and_then(|n| n.fabric.as_ref()).is_none() {
        types.retain(|t| catalog::hardware::fabric_of(&t.name).is_none_or(|(f, _)| f != Fabric::Rdma));
    }
    // At one price, a type without a fabric first: a pool asking none keeps its usual type
    // (Alibaba's bare-metal eRDMA type is priced as its VM sibling).
    let fabric = |t: &catalog::InstanceType| catalog::hardware::fabric_of(&t.name).is_some();
    types.sort_by(|a, b| {
        a.price_usd(cny)
            .total_cmp(&b.price_usd(cny))
            .then_with(|| fabric(a).cmp(&fabric(b)))
            .then_with(|| a.name.cmp(&b.name))
    });
    let preferred = types.first()?;
    let zones: Vec<String> = if pool.zones.is_empty() {
        let mut z: Vec<String> = cat.type_zones(preferred, &region).into_iter().map(str::to_string).collect();
        z.sort();
        z
    } else {
        pool.zones.iter().map(|z| z.value.clone()).collect()
    };
    if zones.is_empty() {
        return None; // nowhere to place a node: validation says what the region offers
    }
    Some(PoolShape {
        provider: pool.provider.value.clone(),
        provider_kind: kind,
        region,
        zones,
        gpu: pool.gpu.value.clone(),
        gpus_per_node: pool.gpus_per_node.value,
        instance_types: types.iter().map(|t| t.name.clone()).collect(),
        image: pool.image.as_ref().or(provider.image.as_ref()).map(|i| i.value.clone()),
        max_spot_price: pool.mix.max_spot_price.as_ref().map(|p| p.value),
        hardware: hardware(pool, preferred.cloud),
        cluster_placement: pool.network.as_ref().is_some_and(|n| {
            // Tencent's RDMA (HCC) types launch only into an HPC cluster: the pool's group.
            n.placement_group.is_some()
                || (kind == ProviderKind::Tencentcloud && n.fabric.as_ref().is_some_and(|f| f.value == Fabric::Rdma))
        }),
        reserved: None,
    })
}

/// The pool's disks (the cloud's first disk type and [`DEFAULT_ROOT_GB`] where `disk {}`
/// leaves them out; data disks default to the root's type) and fabric; `None` without
/// either block. `cloud`: the cloud of the preferred instance type (a sim pool's disks
/// are those of the cloud whose type it runs).
pub fn hardware(pool: &GpuPool, cloud: ProviderKind) -> Option<Hardware> {
    let fabric = pool.network.as_ref().and_then(|n| n.fabric.as_ref()).map(|f| f.value);
    let disks = pool.disk.as_ref().map(|d| {
        let default = catalog::hardware::disk_types(cloud).next().map_or("", |t| t.name);
        let root_kind = d.kind.as_ref().map_or(default, |k| k.value.as_str()).to_string();
        let data = d
            .data
            .iter()
            .map(|x| Disk {
                size_gb: x.size_gb.value,
                kind: x.kind.as_ref().map_or_else(|| root_kind.clone(), |k| k.value.clone()),
            })
            .collect();
        let root = Disk { size_gb: d.size_gb.as_ref().map_or(DEFAULT_ROOT_GB, |s| s.value), kind: root_kind };
        Disks { root, data }
    });
    (disks.is_some() || fabric.is_some()).then_some(Hardware { disks, fabric, placement_group: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_base_on_demand_and_rounds_spot_down() {
        assert_eq!(split(2, 1, 70), (2, 0)); // 1 base + 70% of 1 = 0.7 → 0 spot
        assert_eq!(split(4, 1, 70), (2, 2)); // 70% of 3 = 2.1 → 2
        assert_eq!(split(10, 0, 100), (0, 10));
        assert_eq!(split(3, 5, 50), (3, 0)); // base larger than the pool
        assert_eq!(split(0, 1, 50), (0, 0));
    }

    fn aws_shape(zones: &[&str]) -> PoolShape {
        PoolShape {
            provider: "aws".into(),
            provider_kind: ProviderKind::Aws,
            region: "us-east-1".into(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            gpu: "A10G".into(),
            gpus_per_node: 1,
            instance_types: vec!["g5.xlarge".into()],
            image: None,
            max_spot_price: None,
            hardware: None,
            cluster_placement: false,
            reserved: None,
        }
    }

    #[test]
    fn fleets_over_several_zones_count_per_capacity_type_only() {
        let s = aws_shape(&["us-east-1a", "us-east-1b"]);
        let any = ANY_ZONE.to_string();
        assert_eq!(layout(&s, 5, 1, 50), vec![(any.clone(), Capacity::OnDemand, 3), (any, Capacity::Spot, 2)]);
        assert_eq!(bucket(&s, "us-east-1b"), ANY_ZONE);
        assert_eq!(bucket(&s, "us-east-1c"), "us-east-1c", "a zone the pool no longer allows stays its own bucket");
        // One zone, or another cloud: per-zone buckets as before.
        let one = aws_shape(&["us-east-1a"]);
        assert_eq!(layout(&one, 2, 2, 0)[0], ("us-east-1a".to_string(), Capacity::OnDemand, 2));
        assert_eq!(bucket(&one, "us-east-1a"), "us-east-1a");
        let sim = PoolShape { provider_kind: ProviderKind::Sim, ..s };
        assert_eq!(layout(&sim, 4, 0, 50).len(), 4);
    }

    #[test]
    fn spread_is_even_and_rotates() {
        assert_eq!(spread(5, 2, 0), vec![3, 2]);
        assert_eq!(spread(5, 2, 1), vec![2, 3]);
        assert_eq!(spread(3, 3, 0), vec![1, 1, 1]);
        assert_eq!(spread(1, 3, 2), vec![0, 0, 1]);
        assert_eq!(spread(4, 0, 0), Vec::<u32>::new());
    }
}
