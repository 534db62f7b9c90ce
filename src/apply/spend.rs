//! The spend ledger's lines as apply opens them: at the price the plan priced each pool's
//! new nodes at (live or catalog), a Capacity Block's nodes at its prepaid rate
//! (docs/design/spend.md).

use std::sync::Arc;

use crate::plan::model::{PoolChange, ResourceChange};
use crate::plan::report::Price;
use crate::providers::{Capacity, Provider};
use crate::state::JournalEntry;
use crate::state::model::SpendEntry;

/// The prices the plan priced each pool that adds nodes at (its instance type, on-demand
/// and spot): live quotes where the plan had them, the catalog at the spec's exchange
/// rate otherwise. Only pools that add nodes: linear in the plan.
///
/// Read from the plan's own cost report through an index sorted by address: a copy of
/// every pool's prices keyed by address text was about 60 MB at 100,000 pools, alive
/// for the whole apply.
#[derive(Debug, Default)]
pub struct LedgerPrices {
    plan: Option<Arc<crate::plan::Plan>>,
    /// Positions in the cost report's pools, sorted by address, one per address (the
    /// last one the report lists, as a map built from it would keep).
    order: Vec<u32>,
}

/// What the plan priced one pool's new nodes at: instance type, on-demand, spot.
pub type PlannedPrices<'a> = (&'a str, Option<&'a Price>, Option<&'a Price>);

impl LedgerPrices {
    pub fn new(plan: Arc<crate::plan::Plan>) -> LedgerPrices {
        let adds: std::collections::HashSet<&crate::addr::Address> = plan
            .changes
            .iter()
            .filter(|c| c.pool.as_ref().is_some_and(|p| !p.creates.is_empty() || !p.adopt.is_empty()))
            .map(|c| &c.address)
            .collect();
        let pools = plan.cost.as_ref().map(|c| c.pools.as_slice()).unwrap_or_default();
        let mut order: Vec<u32> =
            (0..pools.len() as u32).filter(|&i| adds.contains(&pools[i as usize].address)).collect();
        drop(adds);
        // Later positions first among equal addresses, so the dedup keeps the last one.
        order.sort_unstable_by(|&a, &b| pools[a as usize].address.cmp(&pools[b as usize].address).then(b.cmp(&a)));
        order.dedup_by(|a, b| pools[*a as usize].address == pools[*b as usize].address);
        LedgerPrices { plan: Some(plan), order }
    }

    /// The prices the plan priced pool `address` at, if it adds nodes.
    pub fn get(&self, address: &crate::addr::Address) -> Option<PlannedPrices<'_>> {
        let p = self.pool(address)?;
        Some((p.instance_type.as_str(), p.on_demand_price.as_ref(), p.spot_price.as_ref()))
    }

    fn pool(&self, address: &crate::addr::Address) -> Option<&crate::cost::PoolCost> {
        let pools = self.plan.as_ref()?.cost.as_ref()?.pools.as_slice();
        // `Err` from a binary search is no error: the address is not in the report (a pool
        // that adds no nodes), which is `None` here as it was for the map this replaced.
        let at = self.order.binary_search_by(|&i| pools[i as usize].address.cmp(address)).ok()?;
        Some(&pools[self.order[at] as usize])
    }

    /// What a node-hour of `node` of pool `address` costs in the Capacity Block it runs
    /// in: the block's prepaid rate plus the pool's disks; `None` outside one.
    pub fn prepaid(&self, address: &crate::addr::Address, node: &crate::providers::Node) -> Option<f64> {
        let id = node.tags.get(crate::providers::TAG_RESERVATION)?;
        let lines = &self.plan.as_ref()?.reservations;
        let rate = lines.iter().filter_map(|l| l.reserved.as_deref()).find(|r| r.id == id)?.prepaid_per_node_hour()?;
        let disks = self.pool(address).and_then(|p| p.disks.as_ref()).map_or(0.0, |d| d.usd_per_node_hour);
        Some(rate + disks)
    }
}

/// Ledger lines for `nodes` of pool `addr`, opened now by the provider's clock at the
/// price the plan priced them at (live or catalog, see [`LedgerPrices`]); a node of
/// another instance type than the plan priced is recorded at the catalog's price.
pub(super) fn spend_open(
    change: &ResourceChange,
    pc: &PoolChange,
    provider: &dyn Provider,
    nodes: &[crate::providers::Node],
    prices: &LedgerPrices,
) -> JournalEntry {
    let addr = change.address.to_string();
    let mut open =
        spend_open_at(&addr, &pc.provider, &pc.provider_kind, provider.clock_ms(), nodes, prices.get(&change.address));
    // Nodes in a Capacity Block at its prepaid rate, as the plan priced them.
    if let JournalEntry::SpendOpen { entries } = &mut open {
        for (node, (_, e)) in nodes.iter().zip(entries.iter_mut()).filter(|(n, (id, _))| n.id == *id) {
            if let Some(rate) = prices.prepaid(&change.address, node) {
                let block = node.tags.get(crate::providers::TAG_RESERVATION).unwrap_or_default();
                e.usd_per_hour = rate;
                e.price_source = format!("prepaid (Capacity Block {block})");
            }
        }
    }
    open
}

/// [`spend_open`] for a provider block `provider_name` of kind `provider_kind`, at `now`
/// by its clock (imports open their lines here too).
pub(crate) fn spend_open_at(
    addr: &str,
    provider_name: &str,
    provider_kind: &str,
    now: u64,
    nodes: &[crate::providers::Node],
    planned: Option<PlannedPrices<'_>>,
) -> JournalEntry {
    // A kind this build does not know cannot come from a plan it made (the planner refuses
    // unknown kinds); if one did, the lines below say "unknown" instead of a price.
    let kind: Option<crate::model::ProviderKind> = provider_kind.parse().ok();
    let entries = nodes
        .iter()
        .map(|n| {
            let t = kind.and_then(|k| crate::catalog::catalog().instance_type(k, &n.instance_type));
            let planned = planned
                .filter(|(itype, _, _)| *itype == n.instance_type)
                .and_then(|(_, od, spot)| if n.capacity == Capacity::Spot { spot.cloned() } else { od.cloned() });
            let (usd_per_hour, price_source) = match (planned, t) {
                (Some(p), _) if p.source == "live" => (p.usd_per_hour, format!("live (quoted {})", p.as_of)),
                (Some(p), _) => (p.usd_per_hour, format!("catalog (as of {})", p.as_of)),
                (None, Some(t)) => {
                    let rate = crate::catalog::DEFAULT_CNY_PER_USD;
                    let usd = if n.capacity == Capacity::Spot { t.spot_price_usd(rate) } else { t.price_usd(rate) };
                    (usd, format!("catalog (as of {})", t.as_of))
                }
                // An instance type the catalog does not know is recorded at 0 and says so.
                (None, None) => (0.0, "unknown: the catalog has no price for this instance type".to_string()),
            };
            let entry = SpendEntry {
                pool: addr.to_string(),
                provider: provider_name.to_string(),
                job: n.tags.get(crate::providers::TAG_JOB).map(str::to_string),
                instance_type: n.instance_type.clone(),
                capacity: n.capacity,
                usd_per_hour,
                price_source,
                start_ms: now,
                end_ms: None,
            };
            (n.id.clone(), entry)
        })
        .collect();
    JournalEntry::SpendOpen { entries }
}
