//! Views of a [`CostReport`]: a table in the text plan and in `gpuplan cost`, and a
//! markdown table for pull requests. Falls back to the generic view for cost objects
//! that are not a `CostReport`.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use crate::addr::Address;
use crate::cost::{CostReport, PoolCost};
use crate::model::money::{usd, usd_delta as delta};
use crate::render::style::paragraph;

fn range(p: &PoolCost) -> String {
    p.range.map(|r| format!("{}–{}", usd(r.hourly_min), usd(r.hourly_max))).unwrap_or_else(|| "—".into())
}

/// `3/1 -> 1/3` (text) or `3/1 → 1/3` (markdown): each view keeps to one arrow.
fn split(p: &PoolCost, arrow: &str) -> String {
    format!("{}/{} {arrow} {}/{}", p.on_demand_before, p.spot_before, p.on_demand_after, p.spot_after)
}

/// `1 GPU`, `3 GPUs`.
fn gpus(n: impl Into<u64>) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { "GPU" } else { "GPUs" })
}

/// `1 pool`, `2 other pools`.
fn pools(n: usize, other: &str) -> String {
    format!("{n} {other}{}", if n == 1 { "pool" } else { "pools" })
}

fn rates(c: &CostReport) -> String {
    c.exchange_rates
        .iter()
        .map(|r| format!("{} at {} per USD ({})", r.currency, r.per_usd, r.source))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Where the report's prices come from: live quotes (which pools and capacities, and
/// when) and the catalog (its dates). `None` when nothing is priced.
fn price_sources(c: &CostReport) -> Option<String> {
    let mut live: Vec<String> = Vec::new();
    let mut quoted: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    let mut catalog: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for p in &c.pools {
        let mut caps = Vec::new();
        for (name, price) in [("on-demand", &p.on_demand_price), ("spot", &p.spot_price)] {
            match price {
                Some(pr) if pr.source == "live" => {
                    caps.push(name);
                    quoted.insert(pr.as_of.as_str());
                }
                Some(pr) if !pr.as_of.is_empty() => {
                    catalog.insert(pr.as_of.as_str());
                }
                _ => {}
            }
        }
        if !caps.is_empty() {
            live.push(format!("{} ({})", p.address, caps.join(", ")));
        }
    }
    let dates = |set: &std::collections::BTreeSet<&str>| set.iter().copied().collect::<Vec<_>>().join(", ");
    let catalog_part = (!catalog.is_empty()).then(|| format!("catalog as of {}", dates(&catalog)));
    if live.is_empty() {
        return catalog_part.map(|c| format!("{c}; no live quotes"));
    }
    const LIST: usize = 5;
    let more = live.len().saturating_sub(LIST);
    live.truncate(LIST);
    let mut text = format!("live for {}", live.join(", "));
    if more > 0 {
        text += &format!(" and {more} more {}", if more == 1 { "pool" } else { "pools" });
    }
    let first = quoted.iter().next().copied().unwrap_or_default();
    text += &format!(" (quoted {first}{})", if quoted.len() > 1 { " and later" } else { "" });
    if let Some(c) = catalog_part {
        text += &format!("; {c} for the rest");
    }
    Some(text)
}

/// Columns of the cost table.
const COLUMNS: usize = 7;

/// One table row as one string and where each cell ends: at 100,000 pools, seven
/// `String`s per row would be about 50 MB held until the table is written.
struct Row {
    text: String,
    ends: [usize; COLUMNS],
}

impl Row {
    fn new(cells: [String; COLUMNS]) -> Self {
        let mut text = String::with_capacity(cells.iter().map(String::len).sum());
        let mut ends = [0; COLUMNS];
        for (end, cell) in ends.iter_mut().zip(&cells) {
            text.push_str(cell);
            *end = text.len();
        }
        Row { text, ends }
    }

    fn cell(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// [`usd`] of the amounts in a table's rows, each amount formatted once: a fleet of like
/// pools repeats a few prices (formatting them was half of a 2,000-pool plan's cost table).
#[derive(Default)]
struct Amounts(std::collections::HashMap<u64, String>);

impl Amounts {
    /// Amounts kept at most: a fleet of all different prices does not grow the map past it.
    const KEPT: usize = 4096;

    fn usd(&mut self, x: f64) -> String {
        if self.0.len() >= Self::KEPT && !self.0.contains_key(&x.to_bits()) {
            self.0.clear();
        }
        self.0.entry(x.to_bits()).or_insert_with(|| usd(x)).clone()
    }
}

/// Does the pool's row say anything a plan review needs (GPUs, split or price moved)?
fn changed(p: &PoolCost) -> bool {
    p.gpus_before != p.gpus_after
        || (p.on_demand_before, p.spot_before) != (p.on_demand_after, p.spot_after)
        // Equal amounts print alike: only different ones are formatted (most pools of a plan
        // cost what they did, and formatting two amounts per pool took a millisecond at 2,000).
        || (p.hourly_before != p.hourly_after && usd(p.hourly_before) != usd(p.hourly_after))
}

/// Plain-text cost section (no trailing blank line). `every_pool` lists each pool (`gpuplan
/// cost`); otherwise only pools whose cost changes are rows, as a diff shows (the plan:
/// at 100,000 pools a full table is 100,000 lines saying nothing changed), with a line
/// counting the rest. The fleet totals always cover every pool. The table's rows are data
/// and never wrap; the lines under it are prose, wrapped at `width` (0: never).
pub fn cost_text(c: &CostReport, every_pool: bool, width: usize) -> String {
    let header = ["pool", "GPUs", "od/spot", "USD/h before", "USD/h after", "USD/GPU-h", "autoscale range USD/h"];
    let mut rows = vec![Row::new(header.map(String::from))];
    let shown: Vec<&PoolCost> = c.pools.iter().filter(|p| every_pool || changed(p)).collect();
    rows.reserve_exact(shown.len());
    let mut amounts = Amounts::default();
    for p in &shown {
        rows.push(Row::new([
            p.address.to_string(),
            format!("{} -> {}", p.gpus_before, p.gpus_after),
            split(p, "->"),
            amounts.usd(p.hourly_before),
            amounts.usd(p.hourly_after),
            amounts.usd(p.price_per_gpu_hour),
            match p.range {
                Some(r) => format!("{}–{}", amounts.usd(r.hourly_min), amounts.usd(r.hourly_max)),
                None => range(p),
            },
        ]));
    }
    let widths: Vec<usize> =
        (0..COLUMNS).map(|i| rows.iter().map(|r| r.cell(i).chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    if !shown.is_empty() {
        let mut line = String::new();
        for r in &rows {
            line.clear();
            for (i, w) in widths.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let cell = r.cell(i);
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', w.saturating_sub(cell.chars().count())));
            }
            out.push_str("  ");
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    let unchanged = c.pools.len() - shown.len();
    if unchanged > 0 {
        let others = if shown.is_empty() { "" } else { "other " };
        out += &format!("  {} with unchanged cost (`gpuplan cost` lists every pool)\n", pools(unchanged, others));
    }
    if !out.is_empty() {
        out.push('\n');
    }
    for line in totals(c, &shown) {
        out += &paragraph("  ", "  ", 4, &line, width);
    }
    out
}

/// The lines under the cost table: fleet totals, quotas, the types considered, where the
/// prices come from.
fn totals(c: &CostReport, shown: &[&PoolCost]) -> Vec<String> {
    let mut lines = vec![format!(
        "fleet: {} -> {} USD/h ({}), {} -> {} USD/month ({}) at {} h/month",
        usd(c.hourly_before),
        usd(c.hourly_after),
        delta(c.hourly_delta),
        usd(c.monthly_before),
        usd(c.monthly_after),
        delta(c.monthly_delta),
        c.hours_per_month
    )];
    let mut after =
        format!("after: {} USD/h on-demand + {} USD/h spot", usd(c.on_demand_hourly_after), usd(c.spot_hourly_after));
    if (c.range.hourly_min - c.range.hourly_max).abs() > 1e-9 {
        after += &format!("; autoscaling range {}–{} USD/h", usd(c.range.hourly_min), usd(c.range.hourly_max));
    }
    lines.push(after);
    for q in &c.quotas {
        let mut line = format!(
            "{}: {}, {} USD/h ({} USD/month)",
            q.address,
            gpus(q.gpus_after),
            usd(q.hourly_after),
            usd(q.monthly_after)
        );
        if let Some(k) = q.peak {
            line += &format!("; while a move runs both sets: {}, {} USD/h", gpus(k.gpus), usd(k.hourly_usd));
        }
        lines.push(line);
    }
    for (p, named) in alike_choices(shown) {
        let alts: Vec<String> = p
            .alternatives
            .iter()
            .map(|a| format!("{}{} {}", if a.chosen { "*" } else { "" }, a.instance_type, usd(a.usd_per_hour)))
            .collect();
        lines.push(format!(
            "{} instance types considered (USD/h on-demand, * chosen): {}",
            pools_named(&named),
            alts.join(", ")
        ));
    }
    for p in shown.iter().filter_map(|p| p.disks.as_ref().map(|d| (p, d))) {
        let (pool, d) = p;
        lines.push(format!(
            "{} disks per node: {} at {} USD/h (in its node prices)",
            pool.address,
            d.disks,
            usd(d.usd_per_node_hour)
        ));
    }
    if let Some(sources) = price_sources(c) {
        lines.push(format!("prices: {sources}"));
    }
    if !c.exchange_rates.is_empty() {
        lines.push(format!("prices in CNY converted: {}", rates(c)));
    }
    if !c.unpriced.is_empty() {
        let list: Vec<String> = c.unpriced.iter().map(|a| a.to_string()).collect();
        lines.push(format!("not priced (not in the catalog): {}", list.join(", ")));
    }
    lines
}

/// The pools that weighed instance types, those that weighed the same types at the same
/// prices and chose the same together (in the order of their first pool): a fleet of
/// 2,000 like pools gets one line, not 2,000.
fn alike_choices<'a>(shown: &[&'a PoolCost]) -> Vec<(&'a PoolCost, Vec<&'a Address>)> {
    let mut groups: Vec<(&PoolCost, Vec<&Address>)> = Vec::new();
    let mut by_choice: BTreeMap<Vec<(bool, &str, u64)>, usize> = BTreeMap::new();
    for &p in shown.iter().filter(|p| !p.alternatives.is_empty()) {
        let choice =
            p.alternatives.iter().map(|a| (a.chosen, a.instance_type.as_str(), a.usd_per_hour.to_bits())).collect();
        match by_choice.entry(choice) {
            Entry::Occupied(group) => groups[*group.get()].1.push(&p.address),
            Entry::Vacant(group) => {
                group.insert(groups.len());
                groups.push((p, vec![&p.address]));
            }
        }
    }
    groups
}

/// `gpu_pool.a`, `gpu_pool.a and gpu_pool.b`, `gpu_pool.a, gpu_pool.b and gpu_pool.c`, and
/// past three `gpu_pool.a, gpu_pool.b and 1998 other pools`.
fn pools_named(pools: &[&Address]) -> String {
    match pools {
        [] => String::new(),
        [one] => one.to_string(),
        [first, second] => format!("{first} and {second}"),
        [first, second, third] => format!("{first}, {second} and {third}"),
        [first, second, rest @ ..] => format!("{first}, {second} and {} other pools", rest.len()),
    }
}

/// Markdown cost section for pull requests.
/// The short spend section of `gpuplan cost`: month-to-date from the ledger in state.
pub fn spend_text(s: &crate::state::spend::SpendReport) -> String {
    let mut out = format!(
        "\nSpent in {} (to {}): {} USD, {} running\n",
        s.month,
        s.as_of,
        usd(s.month_to_date_usd),
        crate::model::words::nodes(s.open_nodes)
    );
    let section = |title: &str, m: &std::collections::BTreeMap<String, f64>| {
        if m.is_empty() {
            return String::new();
        }
        let width = m.keys().map(String::len).max().unwrap_or(0);
        let mut t = format!("  by {title}:\n");
        for (k, v) in m {
            t += &format!("    {k:<width$}  {:>12} USD\n", usd(*v));
        }
        t
    };
    out += &section("pool", &s.by_pool);
    out += &section("quota", &s.by_quota);
    out += &section("job", &s.by_job);
    out
}

/// The short spend section of a pull-request comment: what the month cost so far, per
/// quota (the budgets' base) and the pools that cost most.
pub fn spend_markdown(s: &crate::state::spend::SpendReport) -> String {
    let mut out = format!("**Spent this month** ({}, to {}): {} USD", s.month, s.as_of, usd(s.month_to_date_usd));
    if !s.by_quota.is_empty() {
        let quotas: Vec<String> = s.by_quota.iter().map(|(q, v)| format!("`{q}` {} USD", usd(*v))).collect();
        out += &format!("; by quota: {}", quotas.join(", "));
    }
    let mut pools: Vec<(&String, &f64)> = s.by_pool.iter().collect();
    pools.sort_by(|a, b| b.1.total_cmp(a.1).then_with(|| a.0.cmp(b.0)));
    const TOP: usize = 3;
    if !pools.is_empty() {
        let top: Vec<String> = pools.iter().take(TOP).map(|(p, v)| format!("`{p}` {} USD", usd(**v))).collect();
        let rest = pools.len().saturating_sub(TOP);
        out += &format!(
            "; most by pool: {}{}",
            top.join(", "),
            if rest > 0 { format!(" and {rest} more") } else { String::new() }
        );
    }
    out += ".\n\n";
    out
}

pub fn cost_markdown(c: &CostReport) -> String {
    let mut s = format!(
        "**Cost**: {} → {} USD/h (**{}**), {} USD/month\n\n",
        usd(c.hourly_before),
        usd(c.hourly_after),
        delta(c.hourly_delta),
        delta(c.monthly_delta)
    );
    // As in the text plan, only pools whose cost moves: a comment has room for a diff.
    let shown: Vec<&PoolCost> = c.pools.iter().filter(|p| changed(p)).collect();
    if !shown.is_empty() {
        s += "| Pool | GPUs | On-demand / Spot | USD/h before → after | USD per GPU-hour | Autoscale range USD/h |\n|---|---|---|---|---|---|\n";
    }
    for p in shown.iter() {
        s += &format!(
            "| `{}` | {} → {} | {} | {} → {} | {} | {} |\n",
            p.address,
            p.gpus_before,
            p.gpus_after,
            split(p, "→"),
            usd(p.hourly_before),
            usd(p.hourly_after),
            usd(p.price_per_gpu_hour),
            range(p)
        );
    }
    let unchanged = c.pools.len() - shown.len();
    if unchanged > 0 {
        let others = if shown.is_empty() { "" } else { "other " };
        s += &format!("\n{} with unchanged cost.\n", pools(unchanged, others));
    }
    s += &format!(
        "\nAfter: {} USD/h on-demand + {} USD/h spot ({} h/month).",
        usd(c.on_demand_hourly_after),
        usd(c.spot_hourly_after),
        c.hours_per_month
    );
    if !c.exchange_rates.is_empty() {
        s += &format!(" CNY prices converted: {}.", rates(c));
    }
    if let Some(sources) = price_sources(c) {
        s += &format!(" Prices: {sources}.");
    }
    for p in shown.iter().filter_map(|p| p.disks.as_ref().map(|d| (p, d))) {
        let (pool, d) = p;
        s += &format!(
            " `{}` disks per node: {} at {} USD/h (in its node prices).",
            pool.address,
            d.disks,
            usd(d.usd_per_node_hour)
        );
    }
    s += "\n\n";
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pool(name: &str, before: (u32, u32), after: (u32, u32), price: f64) -> serde_json::Value {
        let nodes = |(od, spot): (u32, u32)| (od + spot) as u64;
        json!({
            "address": format!("gpu_pool.{name}"), "provider": "sim", "region": "us-east-1", "gpu": "L4",
            "instance_type": "g6.xlarge", "gpus_before": nodes(before), "gpus_after": nodes(after),
            "on_demand_before": before.0, "spot_before": before.1, "on_demand_after": after.0, "spot_after": after.1,
            "hourly_before": nodes(before) as f64 * price, "hourly_after": nodes(after) as f64 * price,
            "on_demand_hourly_after": after.0 as f64 * price, "spot_hourly_after": 0.0,
            "price_per_gpu_hour": price, "on_demand_price": null, "spot_price": null,
            "alternatives": [{"instance_type": "g6.xlarge", "usd_per_hour": price, "chosen": true}],
        })
    }

    fn report(pools: Vec<serde_json::Value>) -> CostReport {
        serde_json::from_value(json!({
            "currency": "USD", "hours_per_month": 730.0, "hourly_before": 1.6, "hourly_after": 2.4,
            "hourly_delta": 0.8, "monthly_before": 1168.0, "monthly_after": 1752.0, "monthly_delta": 584.0,
            "on_demand_hourly_after": 2.4, "spot_hourly_after": 0.0,
            "range": {"hourly_min": 2.4, "hourly_expected": 2.4, "hourly_max": 2.4},
            "pools": pools, "quotas": [], "exchange_rates": [],
        }))
        .expect("a cost report")
    }

    #[test]
    fn amounts_print_as_usd_prints_them_past_what_is_kept() {
        let mut a = Amounts::default();
        for i in 0..Amounts::KEPT * 2 + 10 {
            let x = (i % (Amounts::KEPT + 7)) as f64 * 1.37 - 50.0;
            assert_eq!(a.usd(x), usd(x));
            assert!(a.0.len() <= Amounts::KEPT);
        }
        for x in [0.0, -0.0, -0.001, 0.005, 0.015, 1e12, f64::MIN_POSITIVE] {
            assert_eq!(a.usd(x), usd(x));
            assert_eq!(a.usd(x), usd(x), "again, from the map");
        }
    }

    #[test]
    fn the_plan_lists_only_pools_whose_cost_moves() {
        let c = report(vec![
            pool("a", (1, 0), (2, 0), 0.8),
            pool("b", (1, 0), (1, 0), 0.8),
            pool("c", (1, 0), (0, 1), 0.8),
        ]);
        let plan = cost_text(&c, false, 0);
        assert!(plan.contains("gpu_pool.a  1 -> 2") && plan.contains("gpu_pool.c  1 -> 1  1/0 -> 0/1"), "{plan}");
        assert!(!plan.contains('→'), "one arrow in text: {plan}");
        assert!(!plan.contains("gpu_pool.b"), "{plan}");
        assert!(plan.contains("  1 other pool with unchanged cost (`gpuplan cost` lists every pool)\n"), "{plan}");
        assert!(plan.contains("fleet: 1.60 -> 2.40 USD/h (+0.80)"), "{plan}");
        let every = cost_text(&c, true, 0);
        assert!(every.contains("gpu_pool.b") && !every.contains("unchanged cost"), "{every}");
        // The three weighed the same types at the same prices: one line names them all.
        assert!(every.contains("gpu_pool.a, gpu_pool.b and gpu_pool.c instance types considered"), "{every}");
        assert_eq!(every.matches("instance types considered").count(), 1, "{every}");
        let md = cost_markdown(&c);
        assert!(md.contains("| `gpu_pool.a` | 1 → 2 |") && !md.contains("gpu_pool.b"), "{md}");
        assert!(md.contains("\n1 other pool with unchanged cost.\n"), "{md}");
        assert!(!md.contains("->"), "one arrow in markdown: {md}");
    }

    #[test]
    fn a_plan_with_no_cost_change_shows_only_the_totals() {
        let c = report(vec![pool("a", (1, 0), (1, 0), 0.8), pool("b", (2, 0), (2, 0), 0.8)]);
        let plan = cost_text(&c, false, 0);
        assert!(
            plan.starts_with("  2 pools with unchanged cost (`gpuplan cost` lists every pool)\n\n  fleet:"),
            "{plan}"
        );
        assert!(!plan.contains("USD/h before") && !plan.contains("instance types considered"), "{plan}");
        let none = cost_text(&report(vec![]), false, 0);
        assert!(none.starts_with("  fleet:"), "{none}");
    }

    /// Pools whose choice differs get lines of their own, in the order of their first
    /// pool; past three alike pools the line counts the rest.
    #[test]
    fn pools_that_weighed_the_same_types_share_one_line() {
        let mut pools: Vec<serde_json::Value> = (0..6).map(|i| pool(&format!("p{i}"), (0, 0), (1, 0), 0.8)).collect();
        pools.insert(2, pool("odd", (0, 0), (1, 0), 0.9));
        pools.push(pool("q", (0, 0), (1, 0), 0.9));
        let text = cost_text(&report(pools), false, 0);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("instance types considered")).collect();
        assert_eq!(
            lines,
            [
                "  gpu_pool.p0, gpu_pool.p1 and 4 other pools instance types considered (USD/h on-demand, * chosen): *g6.xlarge 0.80",
                "  gpu_pool.odd and gpu_pool.q instance types considered (USD/h on-demand, * chosen): *g6.xlarge 0.90",
            ],
            "{text}"
        );
        let three = cost_text(&report((0..3).map(|i| pool(&format!("p{i}"), (0, 0), (1, 0), 0.8)).collect()), false, 0);
        assert!(three.contains("  gpu_pool.p0, gpu_pool.p1 and gpu_pool.p2 instance types considered"), "{three}");
    }
}
