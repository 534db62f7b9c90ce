//! Prices per node-hour in USD: the catalog's on-demand prices, a spot price from the
//! cloud's typical discount, replaced by live prices when a provider reports them.
//! CNY prices are converted at a rate the user can set per provider (`cny_per_usd`) or
//! globally (`GPUPLAN_CNY_PER_USD`); the rates used are part of every cost report.

use std::collections::BTreeMap;

use crate::catalog::{self, Currency};
use crate::providers::{Capacity, Offer};
use crate::spec::Spec;
use crate::spec::model::ProviderKind;

pub use crate::plan::report::{Price, Rate};

#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    /// CNY per USD by provider name.
    rates: BTreeMap<String, f64>,
    default_rate: f64,
    default_source: String,
    /// Live prices: (provider kind, region, instance type, capacity) → USD per hour.
    live: BTreeMap<(ProviderKind, String, String, Capacity), (f64, String)>,
    /// Capacity Blocks by cloud id → what a node-hour in one costs: its up-front price
    /// over its instances and hours (docs/design/big-runs.md).
    prepaid: BTreeMap<String, f64>,
}

impl PriceBook {
    /// Catalog prices with the spec's and environment's exchange rates.
    pub fn new(spec: &Spec, env: &BTreeMap<String, String>) -> Self {
        let (default_rate, default_source) =
            match env.get("GPUPLAN_CNY_PER_USD").and_then(|v| v.trim().parse::<f64>().ok()) {
                Some(r) if r > 0.0 && r.is_finite() => (r, "GPUPLAN_CNY_PER_USD".to_string()),
                _ => (catalog::DEFAULT_CNY_PER_USD, "default".to_string()),
            };
        let rates = spec
            .providers
            .iter()
            .filter_map(|(name, p)| p.cny_per_usd.as_ref().map(|r| (name.clone(), r.value)))
            .collect();
        PriceBook { rates, default_rate, default_source, live: BTreeMap::new(), prepaid: BTreeMap::new() }
    }

    /// Use live offers (e.g. a cloud's current spot prices) instead of the catalog's.
    pub fn with_live(mut self, offers: &[Offer]) -> Self {
        for o in offers.iter().filter(|o| o.live_price) {
            self.live.insert(
                (o.provider, o.region.clone(), o.instance_type.clone(), o.capacity),
                (o.price_usd, o.as_of.clone()),
            );
        }
        self
    }

    /// Price the nodes in the plan's Capacity Blocks at their prepaid rate (the block's
    /// up-front price over its instances and hours); an On-Demand reservation's nodes keep
    /// the on-demand price, which is what it commits.
    pub fn with_reservations(mut self, lines: &[crate::model::reservation::ReservationLine]) -> Self {
        for r in lines.iter().filter_map(|l| l.reserved.as_deref()) {
            if let Some(rate) = r.prepaid_per_node_hour() {
                self.prepaid.insert(r.id.clone(), rate);
            }
        }
        self
    }

    /// A node-hour in Capacity Block `id` at its prepaid rate; `None` for another.
    pub fn prepaid(&self, id: &str) -> Option<f64> {
        self.prepaid.get(id).copied()
    }

    pub fn rate(&self, provider: &str) -> f64 {
        self.rates.get(provider).copied().unwrap_or(self.default_rate)
    }

    /// The rates a report used, for the providers it priced in CNY.
    pub fn rates_used(&self, providers: &[(String, ProviderKind)]) -> Vec<Rate> {
        let mut out: Vec<Rate> = Vec::new();
        for (name, kind) in providers {
            let cny =
                matches!(kind, ProviderKind::Tencentcloud | ProviderKind::Alicloud) || (*kind == ProviderKind::Sim);
            if !cny {
                continue;
            }
            let (per_usd, source) = match self.rates.get(name) {
                Some(r) => (*r, format!("provider \"{name}\"")),
                None => (self.default_rate, self.default_source.clone()),
            };
            let r = Rate { currency: "CNY".into(), per_usd, source };
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }

    /// Price of one node-hour of `instance_type` on `capacity` for a pool of `provider`.
    pub fn price(
        &self,
        provider: &str,
        kind: ProviderKind,
        region: &str,
        instance_type: &str,
        capacity: Capacity,
    ) -> Option<Price> {
        let t = catalog::catalog().instance_type(kind, instance_type)?;
        if let Some((p, at)) = self.live(kind, region, instance_type, capacity) {
            return Some(Price {
                usd_per_hour: *p,
                native: None,
                source: "live".into(),
                as_of: at.clone(),
                estimated: false,
            });
        }
        let rate = self.rate(provider);
        let usd = catalog_usd(t, capacity, rate);
        let native_price = match capacity {
            Capacity::OnDemand | Capacity::Reserved => t.price,
            Capacity::Spot => t.price * (1.0 - t.spot_discount),
        };
        let native = (t.currency == Currency::Cny).then(|| (round(native_price), "CNY".to_string()));
        let source = if capacity == Capacity::Spot { "catalog-spot-model" } else { "catalog" };
        let as_of = t.as_of.clone();
        Some(Price { usd_per_hour: usd, native, source: source.into(), as_of, estimated: t.price_estimated })
    }

    /// [`PriceBook::price`]'s `usd_per_hour` alone, with nothing allocated: what the sums
    /// of a pool's cost read (a plan asks about eight prices per pool, and keeps two).
    pub fn usd_per_hour(
        &self,
        provider: &str,
        kind: ProviderKind,
        region: &str,
        instance_type: &str,
        capacity: Capacity,
    ) -> Option<f64> {
        let t = catalog::catalog().instance_type(kind, instance_type)?;
        if let Some((p, _)) = self.live(kind, region, instance_type, capacity) {
            return Some(*p);
        }
        Some(catalog_usd(t, capacity, self.rate(provider)))
    }

    /// The live price reported for this type, if any. Most plans have no live prices: no
    /// key is built for them.
    fn live(
        &self,
        kind: ProviderKind,
        region: &str,
        instance_type: &str,
        capacity: Capacity,
    ) -> Option<&(f64, String)> {
        if self.live.is_empty() {
            return None;
        }
        self.live.get(&(kind, region.to_string(), instance_type.to_string(), capacity))
    }
}

/// The catalog's USD price of a node-hour of `t` on `capacity` at `rate` CNY per USD.
fn catalog_usd(t: &catalog::InstanceType, capacity: Capacity, rate: f64) -> f64 {
    match capacity {
        Capacity::OnDemand | Capacity::Reserved => t.price_usd(rate),
        Capacity::Spot => t.spot_price_usd(rate),
    }
}

pub fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
