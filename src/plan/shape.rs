//! The desired node set of one pool: counts per capacity type and zone, and the
//! instance types allowed, from `nodes`, `mix`, zones and the catalog. Pure.

use crate::catalog::{self, Catalog};
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

/// Desired (zone, capacity) → count for a pool of `n` nodes.
pub fn layout(shape: &PoolShape, n: u32, on_demand_base: u32, spot_percent: u32) -> Vec<(String, Capacity, u32)> {
    let (od, spot) = split(n, on_demand_base, spot_percent);
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
    types.sort_by(|a, b| a.price_usd(cny).total_cmp(&b.price_usd(cny)).then_with(|| a.name.cmp(&b.name)));
    let preferred = types.first()?;
    let reg = cat.region(kind, &region)?;
    let zones: Vec<String> = if pool.zones.is_empty() {
        let mut z: Vec<String> = preferred.zones_in(reg).into_iter().map(str::to_string).collect();
        z.sort();
        z
    } else {
        pool.zones.iter().map(|z| z.value.clone()).collect()
    };
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
    })
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

    #[test]
    fn spread_is_even_and_rotates() {
        assert_eq!(spread(5, 2, 0), vec![3, 2]);
        assert_eq!(spread(5, 2, 1), vec![2, 3]);
        assert_eq!(spread(3, 3, 0), vec![1, 1, 1]);
        assert_eq!(spread(1, 3, 2), vec![0, 0, 1]);
        assert_eq!(spread(4, 0, 0), Vec::<u32>::new());
    }
}
