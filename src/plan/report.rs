//! What a plan says about money and rules: its [`CostReport`] and its [`PolicyResult`]s.
//!
//! Types only. `cost/` fills the report and `policy/` the verdicts; they live here, in the
//! plan's own layer, so the plan document holds them as Rust types (serialized once, read
//! back with a type check, never decoded from untyped JSON by each reader), while cost and
//! policy keep depending on the plan and not the other way round.
//!
//! Fields are declared in key order: the plan, `plan --json` and `cost --json` print
//! objects with sorted keys (as a `serde_json::Value` does), and a derived `Serialize`
//! writes fields in declaration order.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::addr::Address;

/// Hourly cost bounds where something can move a pool's node count.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Range {
    pub hourly_expected: f64,
    pub hourly_max: f64,
    pub hourly_min: f64,
}

/// An instance type considered for a pool that leaves `instance_types` open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Alternative {
    pub chosen: bool,
    pub instance_type: String,
    pub usd_per_hour: f64,
}

/// One price, with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Price {
    /// When a live price was quoted (RFC 3339), or the catalog row's date.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub as_of: String,
    /// The catalog row's price was derived, not quoted.
    #[serde(default)]
    pub estimated: bool,
    /// The price in the cloud's own currency, when that is not USD: `[amount, currency]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<(f64, String)>,
    /// `catalog`, `catalog-spot-model` or `live`.
    pub source: String,
    pub usd_per_hour: f64,
}

/// An exchange rate a report used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rate {
    pub currency: String,
    pub per_usd: f64,
    /// `provider "x"`, `GPUPLAN_CNY_PER_USD` or `default`.
    pub source: String,
}

/// What runs during a floating pool's move, while the new nodes start and the old ones
/// (all of them, not only those kept for running jobs) still run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Peak {
    pub gpus: u64,
    /// Both sets, each at the price where it runs.
    pub hourly_usd: f64,
    pub nodes: u32,
}

/// One pool's cost before and after the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PoolCost {
    #[schemars(with = "String")]
    pub address: Address,
    /// Instance types considered when the pool leaves `instance_types` open.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub alternatives: Vec<Alternative>,
    /// Each node's disks (`disk {}`) and their price per node-hour, which the node prices
    /// here (`on_demand_price`, `spot_price`) include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<DiskCost>,
    pub gpu: String,
    pub gpus_after: u64,
    pub gpus_before: u64,
    pub hourly_after: f64,
    pub hourly_before: f64,
    /// The instance type new nodes get (the cheapest allowed one).
    pub instance_type: String,
    pub on_demand_after: u32,
    pub on_demand_before: u32,
    pub on_demand_hourly_after: f64,
    pub on_demand_price: Option<Price>,
    /// A floating pool that moves: what runs while its new nodes start and the old ones
    /// still run (docs/design/floating-pools.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<Peak>,
    /// After the change, per GPU-hour (0 when the pool has no nodes).
    pub price_per_gpu_hour: f64,
    pub provider: String,
    /// Set when something can move the node count between `nodes.min` and `nodes.max`: an
    /// autoscaler, or `ignore_changes` on `nodes.desired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<Range>,
    pub region: String,
    pub spot_after: u32,
    pub spot_before: u32,
    pub spot_hourly_after: f64,
    pub spot_price: Option<Price>,
}

/// A pool's disks per node and their catalog price (docs/design/big-runs.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiskCost {
    #[serde(flatten)]
    pub disks: crate::model::hardware::Disks,
    pub usd_per_node_hour: f64,
}

/// One quota's GPUs and cost after the plan, and at its pools' `nodes.max`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QuotaCost {
    #[schemars(with = "String")]
    pub address: Address,
    pub gpus_after: u64,
    /// GPUs if every covered pool grew to `nodes.max`.
    pub gpus_max: u64,
    pub hourly_after: f64,
    pub hourly_max: f64,
    pub monthly_after: f64,
    /// When a covered pool moves: its pools at their peak, the moving ones with both sets
    /// of nodes running, the others at "after".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<Peak>,
    #[schemars(with = "Vec<String>")]
    pub pools: Vec<Address>,
}

/// The plan's cost: per pool, quota and fleet; hourly and monthly; before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostReport {
    pub currency: String,
    pub exchange_rates: Vec<Rate>,
    pub hourly_after: f64,
    pub hourly_before: f64,
    pub hourly_delta: f64,
    pub hours_per_month: f64,
    pub monthly_after: f64,
    pub monthly_before: f64,
    pub monthly_delta: f64,
    pub on_demand_hourly_after: f64,
    #[serde(deserialize_with = "crate::model::exact::vec")]
    pub pools: Vec<PoolCost>,
    pub quotas: Vec<QuotaCost>,
    pub range: Range,
    pub spot_hourly_after: f64,
    /// Pools with nodes gpuplan has no price for (an instance type not in the catalog):
    /// left out of the totals, or, for nodes the plan removes, out of "before". Nodes
    /// that would stay or launch are also a plan error (`cost::errors`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub unpriced: Vec<Address>,
}

impl CostReport {
    /// The fleet-level figures without the per-pool and per-quota lists.
    pub fn clone_summary(&self) -> CostReport {
        CostReport {
            currency: self.currency.clone(),
            exchange_rates: self.exchange_rates.clone(),
            hourly_after: self.hourly_after,
            hourly_before: self.hourly_before,
            hourly_delta: self.hourly_delta,
            hours_per_month: self.hours_per_month,
            monthly_after: self.monthly_after,
            monthly_before: self.monthly_before,
            monthly_delta: self.monthly_delta,
            on_demand_hourly_after: self.on_demand_hourly_after,
            pools: vec![],
            quotas: vec![],
            range: self.range,
            spot_hourly_after: self.spot_hourly_after,
            unpriced: self.unpriced.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Reported, never blocks.
    Advisory,
    /// Blocks unless overridden with `--override-policy NAME`.
    Soft,
    /// Always blocks.
    Hard,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Advisory => "advisory",
            Enforcement::Soft => "soft",
            Enforcement::Hard => "hard",
        }
    }
}

/// The verdict of one policy (or one element of a `for_each` policy), or of a quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyResult {
    pub enforcement: Enforcement,
    /// The `for_each` key (an address, usually) this result is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub message: String,
    pub name: String,
    /// A soft failure accepted with `--override-policy`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overridden: bool,
    pub passed: bool,
    /// Where the policy is defined (`policies/x.hcl:3`, `quota.ml_team`).
    pub source: String,
    /// Failed on the fleet as it stands, before this plan (a standing violation): in a
    /// plan without changes it denies nothing; in one with changes it denies as before,
    /// and the denial says it was already failing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standing: bool,
    /// Passed, but close to a limit (quota warnings).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warning: bool,
}

impl PolicyResult {
    /// Does this result stop the plan from being applied?
    pub fn denies(&self) -> bool {
        // `overridden` is only honoured on soft policies, even in a hand-edited plan file.
        match self.enforcement {
            Enforcement::Advisory => false,
            Enforcement::Soft => !self.passed && !self.overridden,
            Enforcement::Hard => !self.passed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Declared in key order, a derived `Serialize` prints what a sorted `Value` prints:
    /// the plan's bytes did not change when the report stopped being JSON text.
    #[test]
    fn fields_serialize_in_sorted_key_order() {
        let price = Price {
            estimated: true,
            native: Some((7.5, "CNY".into())),
            source: "catalog".into(),
            as_of: String::new(),
            usd_per_hour: 1.0,
        };
        let pool = PoolCost {
            address: "gpu_pool.a".parse().unwrap(),
            alternatives: vec![Alternative { chosen: true, instance_type: "t".into(), usd_per_hour: 1.0 }],
            disks: None,
            gpu: "H100".into(),
            gpus_after: 8,
            gpus_before: 0,
            hourly_after: 1.0,
            hourly_before: 0.0,
            instance_type: "t".into(),
            on_demand_after: 1,
            on_demand_before: 0,
            on_demand_hourly_after: 1.0,
            on_demand_price: Some(price.clone()),
            peak: Some(Peak { gpus: 16, hourly_usd: 2.0, nodes: 2 }),
            price_per_gpu_hour: 0.125,
            provider: "sim".into(),
            range: Some(Range::default()),
            region: "r".into(),
            spot_after: 0,
            spot_before: 0,
            spot_hourly_after: 0.0,
            spot_price: Some(price),
        };
        let report = CostReport {
            currency: "USD".into(),
            exchange_rates: vec![Rate { currency: "CNY".into(), per_usd: 7.2, source: "default".into() }],
            hourly_after: 1.0,
            hourly_before: 0.0,
            hourly_delta: 1.0,
            hours_per_month: 730.0,
            monthly_after: 730.0,
            monthly_before: 0.0,
            monthly_delta: 730.0,
            on_demand_hourly_after: 1.0,
            pools: vec![pool],
            quotas: vec![QuotaCost {
                address: "quota.q".parse().unwrap(),
                gpus_after: 8,
                gpus_max: 8,
                hourly_after: 1.0,
                hourly_max: 1.0,
                monthly_after: 730.0,
                peak: Some(Peak { gpus: 16, hourly_usd: 2.0, nodes: 2 }),
                pools: vec!["gpu_pool.a".parse().unwrap()],
            }],
            range: Range::default(),
            spot_hourly_after: 0.0,
            unpriced: vec!["gpu_pool.b".parse().unwrap()],
        };
        let verdict = PolicyResult {
            enforcement: Enforcement::Soft,
            key: Some("k".into()),
            message: "m".into(),
            name: "n".into(),
            overridden: true,
            passed: false,
            source: "s".into(),
            standing: true,
            warning: true,
        };
        for (typed, what) in [
            (serde_json::to_string(&report).unwrap(), "cost report"),
            (serde_json::to_string(&verdict).unwrap(), "policy result"),
        ] {
            let value: serde_json::Value = serde_json::from_str(&typed).unwrap();
            assert_eq!(typed, value.to_string(), "{what}: fields must be declared in key order");
        }
        assert_eq!(report.clone_summary().pools, vec![]);
        assert_eq!(report.clone_summary().hourly_after, report.hourly_after);
    }
}
