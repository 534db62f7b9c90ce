//! `gpuplan offers`: the cheapest ways to get a GPU model across clouds, like dstack's
//! offers or SkyPilot's show-gpus, priced per GPU-hour. Pure over the catalog.

use serde::Serialize;

use crate::catalog::{self, CLOUDS};
use crate::cost::PriceBook;
use crate::providers::Capacity;
use crate::spec::model::ProviderKind;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfferRow {
    pub provider: ProviderKind,
    pub region: String,
    pub instance_type: String,
    pub gpu: String,
    pub gpus_per_node: u32,
    pub gpu_memory_gib: f64,
    pub vcpu: u32,
    pub ram_gib: f64,
    pub capacity: Capacity,
    pub usd_per_node_hour: f64,
    pub usd_per_gpu_hour: f64,
    /// Nodes needed for `--count` GPUs, and what they cost per hour.
    pub nodes: u32,
    pub usd_per_hour_total: f64,
    /// Price derived rather than quoted (see the catalog README).
    pub estimated: bool,
    pub price_source: String,
    /// When a live price was quoted (RFC 3339), or the catalog row's date.
    pub price_as_of: String,
}

#[derive(Debug, Clone, Default)]
pub struct OfferQuery {
    pub gpu: String,
    pub count: Option<u32>,
    pub spot: bool,
    pub provider: Option<ProviderKind>,
    pub region: Option<String>,
}

pub use crate::catalog::resolve_gpu;

/// Offers sorted cheapest first: by total for `count` GPUs when given, else per GPU-hour.
pub fn offers(q: &OfferQuery, prices: &PriceBook) -> Vec<OfferRow> {
    let gpus = resolve_gpu(&q.gpu);
    let cap = if q.spot { Capacity::Spot } else { Capacity::OnDemand };
    let mut rows = Vec::new();
    for cloud in CLOUDS {
        if q.provider.is_some_and(|p| p != cloud && p != ProviderKind::Sim) {
            continue;
        }
        for t in catalog::catalog().instance_types(cloud) {
            if !gpus.contains(&t.gpu.as_str()) {
                continue;
            }
            for region in &t.regions {
                if q.region.as_ref().is_some_and(|r| r != region) {
                    continue;
                }
                let Some(price) = prices.price(cloud.as_str(), cloud, region, &t.name, cap) else { continue };
                let nodes = q.count.map(|c| c.div_ceil(t.gpus)).unwrap_or(1);
                rows.push(OfferRow {
                    provider: cloud,
                    region: region.clone(),
                    instance_type: t.name.clone(),
                    gpu: t.gpu.clone(),
                    gpus_per_node: t.gpus,
                    gpu_memory_gib: t.gpu_memory_gib,
                    vcpu: t.vcpu,
                    ram_gib: t.ram_gib,
                    capacity: cap,
                    usd_per_node_hour: round(price.usd_per_hour),
                    usd_per_gpu_hour: round(price.usd_per_hour / t.gpus as f64),
                    nodes,
                    usd_per_hour_total: round(price.usd_per_hour * nodes as f64),
                    estimated: price.estimated,
                    price_source: price.source,
                    price_as_of: price.as_of,
                });
            }
        }
    }
    let key = |r: &OfferRow| if q.count.is_some() { r.usd_per_hour_total } else { r.usd_per_gpu_hour };
    rows.sort_by(|a, b| {
        key(a)
            .total_cmp(&key(b))
            .then(a.usd_per_gpu_hour.total_cmp(&b.usd_per_gpu_hour))
            .then_with(|| (a.provider, &a.region, &a.instance_type).cmp(&(b.provider, &b.region, &b.instance_type)))
    });
    rows
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn book() -> PriceBook {
        PriceBook::new(&Spec::default(), &Default::default())
    }

    #[test]
    fn cheapest_a100_80gb_per_gpu_hour_comes_first_and_prices_match_the_catalog() {
        let rows = offers(&OfferQuery { gpu: "A100-80GB".into(), ..Default::default() }, &book());
        assert!(!rows.is_empty());
        assert!(rows.windows(2).all(|w| w[0].usd_per_gpu_hour <= w[1].usd_per_gpu_hour));
        let p4de = rows.iter().find(|r| r.instance_type == "p4de.24xlarge" && r.region == "us-east-1").expect("p4de");
        assert_eq!(p4de.usd_per_node_hour, 27.4471);
        assert_eq!(p4de.usd_per_gpu_hour, round(27.44705 / 8.0));
    }

    #[test]
    fn count_needs_whole_nodes_and_spot_is_cheaper() {
        let q = OfferQuery {
            gpu: "a100-80gb".into(),
            count: Some(12),
            provider: Some(ProviderKind::Aws),
            region: Some("us-east-1".into()),
            ..Default::default()
        };
        let od = offers(&q, &book());
        let p4de = od.iter().find(|r| r.instance_type == "p4de.24xlarge").expect("p4de");
        assert_eq!(p4de.nodes, 2);
        assert_eq!(p4de.usd_per_hour_total, round(2.0 * 27.44705));
        let spot = offers(&OfferQuery { spot: true, ..q }, &book());
        let s = spot.iter().find(|r| r.instance_type == "p4de.24xlarge").expect("spot p4de");
        assert!(s.usd_per_node_hour < p4de.usd_per_node_hour);
        assert!(od.iter().all(|r| r.provider == ProviderKind::Aws && r.region == "us-east-1"));
    }
}
