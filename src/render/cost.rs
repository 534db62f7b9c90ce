//! Views of a [`CostReport`]: a table in the text plan and in `gpuplan cost`, and a
//! markdown table for pull requests. Falls back to the generic view for cost objects
//! that are not a `CostReport`.

use crate::cost::{CostReport, PoolCost};
use crate::json_text::JsonText;

fn usd(x: f64) -> String {
    format!("{x:.2}")
}

fn delta(x: f64) -> String {
    if x >= 0.0 { format!("+{x:.2}") } else { format!("{x:.2}") }
}

fn range(p: &PoolCost) -> String {
    p.range.map(|r| format!("{}–{}", usd(r.hourly_min), usd(r.hourly_max))).unwrap_or_else(|| "—".into())
}

fn split(p: &PoolCost) -> String {
    format!("{}/{} → {}/{}", p.on_demand_before, p.spot_before, p.on_demand_after, p.spot_after)
}

fn rates(c: &CostReport) -> String {
    c.exchange_rates
        .iter()
        .map(|r| format!("{} at {} per USD ({})", r.currency, r.per_usd, r.source))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Plain-text cost section (no trailing blank line).
pub fn cost_text(c: &CostReport) -> String {
    let mut rows = vec![[
        "pool".to_string(),
        "GPUs".to_string(),
        "od/spot".to_string(),
        "USD/h before".to_string(),
        "USD/h after".to_string(),
        "USD/GPU-h".to_string(),
        "autoscale range USD/h".to_string(),
    ]];
    for p in &c.pools {
        rows.push([
            p.address.to_string(),
            format!("{} → {}", p.gpus_before, p.gpus_after),
            split(p),
            usd(p.hourly_before),
            usd(p.hourly_after),
            usd(p.price_per_gpu_hour),
            range(p),
        ]);
    }
    let widths: Vec<usize> = (0..7).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r.iter().enumerate().map(|(i, cell)| format!("{cell:<w$}", w = widths[i])).collect();
        out += &format!("  {}\n", line.join("  ").trim_end());
    }
    out += &format!(
        "\n  fleet: {} -> {} USD/h ({}), {} -> {} USD/month ({}) at {} h/month\n",
        usd(c.hourly_before),
        usd(c.hourly_after),
        delta(c.hourly_delta),
        usd(c.monthly_before),
        usd(c.monthly_after),
        delta(c.monthly_delta),
        c.hours_per_month
    );
    out += &format!(
        "  after: {} USD/h on-demand + {} USD/h spot",
        usd(c.on_demand_hourly_after),
        usd(c.spot_hourly_after)
    );
    if (c.range.hourly_min - c.range.hourly_max).abs() > 1e-9 {
        out += &format!("; autoscaling range {}–{} USD/h", usd(c.range.hourly_min), usd(c.range.hourly_max));
    }
    out.push('\n');
    for q in &c.quotas {
        out += &format!(
            "  {}: {} GPUs, {} USD/h ({} USD/month)\n",
            q.address,
            q.gpus_after,
            usd(q.hourly_after),
            usd(q.monthly_after)
        );
    }
    for p in c.pools.iter().filter(|p| !p.alternatives.is_empty()) {
        let alts: Vec<String> = p
            .alternatives
            .iter()
            .map(|a| format!("{}{} {}", if a.chosen { "*" } else { "" }, a.instance_type, usd(a.usd_per_hour)))
            .collect();
        out += &format!("  {} instance types considered (USD/h on-demand, * chosen): {}\n", p.address, alts.join(", "));
    }
    if !c.exchange_rates.is_empty() {
        out += &format!("  prices in CNY converted: {}\n", rates(c));
    }
    if !c.unpriced.is_empty() {
        let list: Vec<String> = c.unpriced.iter().map(|a| a.to_string()).collect();
        out += &format!("  not priced (not in the catalog): {}\n", list.join(", "));
    }
    out
}

/// Markdown cost section for pull requests.
pub fn cost_markdown(c: &CostReport) -> String {
    let mut s = format!(
        "**Cost**: {} → {} USD/h (**{}**), {} USD/month\n\n",
        usd(c.hourly_before),
        usd(c.hourly_after),
        delta(c.hourly_delta),
        delta(c.monthly_delta)
    );
    s += "| Pool | GPUs | On-demand / Spot | USD/h before → after | USD per GPU-hour | Autoscale range USD/h |\n|---|---|---|---|---|---|\n";
    for p in &c.pools {
        s += &format!(
            "| `{}` | {} → {} | {} | {} → {} | {} | {} |\n",
            p.address,
            p.gpus_before,
            p.gpus_after,
            split(p),
            usd(p.hourly_before),
            usd(p.hourly_after),
            usd(p.price_per_gpu_hour),
            range(p)
        );
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
    s += "\n\n";
    s
}

/// The plan's cost as a [`CostReport`], when it is one.
pub fn report(cost: &JsonText) -> Option<CostReport> {
    cost.decode().ok()
}
