//! Floating pools in every view: each pool's candidates with their hourly cost, price
//! source and known capacity, and the choice with its reason (docs/design/floating-pools.md).
//! Text and markdown read the same [`PlacementDecision`]s the JSON carries.

use crate::model::money::usd;
use crate::plan::model::{PlacementDecision, Plan};

/// The terminal section: one table per floating pool.
pub fn text(plan: &Plan) -> String {
    let mut out = String::new();
    for d in &plan.placements {
        out += &format!("Placement of `{}`: {}\n", d.address, d.reason);
        if let Some(line) = peak(d) {
            out += &format!("  {line}\n");
        }
        let rows = rows(d);
        let widths: Vec<usize> = (0..5).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
        for r in &rows {
            let line: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            out += &format!("  {}\n", line.join("  ").trim_end());
        }
        out.push('\n');
    }
    out
}

/// The pull-request section: one table per floating pool.
pub fn markdown(plan: &Plan) -> String {
    let mut out = String::new();
    for d in &plan.placements {
        out += &format!("**Placement of `{}`**: {}\n\n", d.address, d.reason);
        if let Some(line) = peak(d) {
            out += &format!("{line}\n\n");
        }
        let rows = rows(d);
        for (i, r) in rows.iter().enumerate() {
            out += &format!("| {} |\n", r.join(" | "));
            if i == 0 {
                out += "|---|---:|---|---|---|\n";
            }
        }
        out.push('\n');
    }
    out
}

/// A move's overlap: what runs while the new nodes start and the old ones still run. How
/// long that lasts is not known (no boot time to go by), so no one-time cost is given.
fn peak(d: &PlacementDecision) -> Option<String> {
    let k = d.peak?;
    Some(format!(
        "while both sets run: {} nodes, {} GPUs, {} USD/h (the overlap's one-time cost is not estimated yet)",
        k.nodes,
        k.gpus,
        usd(k.hourly_usd)
    ))
}

/// Header and one row per candidate: candidate, USD/h, price, capacity, role.
fn rows(d: &PlacementDecision) -> Vec<[String; 5]> {
    let mut rows = vec![["candidate", "USD/h", "price", "capacity", ""].map(String::from)];
    for c in &d.candidates {
        rows.push([
            format!("{} {}", c.provider, c.region),
            c.hourly_usd.map_or("-".to_string(), |h| format!("{h:.2}")),
            c.price.clone(),
            c.capacity.clone(),
            c.role.clone(),
        ]);
    }
    rows
}
