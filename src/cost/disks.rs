//! Disks in a pool's cost (docs/design/big-runs.md): each node's `disk {}` priced per
//! GB-month from the catalog, added to the node's hourly price so every total, the
//! ledger's lines included, counts them.

use crate::catalog::hardware::DISK_TYPES;
use crate::plan::report::{DiskCost, Price};
use crate::plan::shape::PoolShape;

/// The disks of one node of `shape` and their price per hour; `None` without `disk {}`.
/// `cny_per_usd` converts a cloud priced in CNY. A disk type the catalog does not know
/// cannot get here (validation refuses it); were one to, it is priced at nothing rather
/// than refusing the plan, and its name stays in the plan for a reviewer to see.
pub fn cost(shape: &PoolShape, cny_per_usd: f64) -> Option<DiskCost> {
    let disks = shape.hardware.as_ref()?.disks.as_ref()?;
    let usd: f64 = disks
        .all()
        .map(|d| {
            let per_gb = DISK_TYPES.iter().find(|t| t.name == d.kind).map_or(0.0, |t| t.usd_per_gb_hour(cny_per_usd));
            per_gb * f64::from(d.size_gb)
        })
        .sum();
    Some(DiskCost { disks: disks.clone(), usd_per_node_hour: usd })
}

/// `price` with `disk_usd` per hour added (in CNY too where the node is priced in CNY).
pub fn add(mut price: Price, disk_usd: f64, cny_per_usd: f64) -> Price {
    if disk_usd == 0.0 {
        return price;
    }
    price.usd_per_hour = add_usd(price.usd_per_hour, disk_usd);
    if let Some((native, currency)) = price.native.as_mut()
        && currency == "CNY"
    {
        *native += disk_usd * cny_per_usd;
    }
    price
}

/// [`add`]'s USD per hour alone: `usd` with `disk_usd` added.
pub fn add_usd(usd: f64, disk_usd: f64) -> f64 {
    if disk_usd == 0.0 { usd } else { usd + disk_usd }
}
