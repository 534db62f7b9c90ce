//! A pool's nodes in Capacity Blocks (docs/design/big-runs.md), priced at the block's
//! prepaid rate ([`super::PriceBook::prepaid`]: its up-front price over its instances and
//! hours) plus their disks, instead of the on-demand price: kept, removed and launched.

use std::collections::BTreeMap;

use super::PriceBook;
use crate::plan::model::PoolChange;

/// What a pool's nodes in Capacity Blocks cost per hour, before and after the plan.
#[derive(Debug, Default)]
pub(crate) struct InBlocks<'p> {
    prices: Option<&'p PriceBook>,
    disk_usd: f64,
    /// Block id → (rate per node-hour, nodes after the plan).
    after: BTreeMap<String, (f64, i64)>,
    /// Before the plan.
    pub before: f64,
    /// The nodes the plan launches into blocks.
    pub new: f64,
}

impl<'p> InBlocks<'p> {
    pub(crate) fn new(pc: &PoolChange, prices: &'p PriceBook, disk_usd: f64) -> Self {
        let mut out = InBlocks { prices: Some(prices), disk_usd, ..InBlocks::default() };
        for t in &pc.before_types {
            if let Some(rate) = out.rate(t.reservation.as_ref()) {
                out.before += rate * f64::from(t.count);
                out.after.entry(t.reservation.clone().unwrap_or_default()).or_insert((rate, 0)).1 += i64::from(t.count);
            }
        }
        let gone: Vec<&String> = pc.deletes.iter().filter_map(|d| d.reservation.as_ref()).collect();
        for id in gone {
            if let Some(b) = out.after.get_mut(id).filter(|b| b.1 > 0) {
                b.1 -= 1;
            }
        }
        for c in &pc.creates {
            let id = c.reservation.as_ref().map(|r| &r.id);
            if let Some(rate) = out.rate(id) {
                out.new += rate * f64::from(c.count);
                out.after.entry(id.cloned().unwrap_or_default()).or_insert((rate, 0)).1 += i64::from(c.count);
            }
        }
        out
    }

    /// A node-hour in block `id`, disks included; `None` outside a Capacity Block.
    fn rate(&self, id: Option<&String>) -> Option<f64> {
        Some(self.prices?.prepaid(id?)? + self.disk_usd)
    }

    /// Is a node in reservation `id` priced here (in a Capacity Block)?
    pub(crate) fn holds(&self, id: Option<&String>) -> bool {
        self.rate(id).is_some()
    }

    /// Their hourly cost after the plan.
    pub(crate) fn after(&self) -> f64 {
        self.after.values().map(|(rate, n)| rate * (*n).max(0) as f64).sum()
    }
}
