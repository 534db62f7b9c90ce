//! `gpuplan offers --gpu MODEL`: cheapest matching offers across clouds.

use super::output;
use super::{CliError, ExitStatus, OffersArgs, Settings};
use crate::cost::PriceBook;
use crate::cost::offers::{self, OfferQuery};
use crate::spec::Spec;

pub fn run(settings: &Settings, args: &OffersArgs) -> miette::Result<ExitStatus> {
    if offers::resolve_gpu(&args.gpu).is_empty() {
        let names: Vec<&str> = crate::catalog::GPU_MODELS.iter().map(|m| m.name).collect();
        let hint = match crate::diag::did_you_mean(&args.gpu, names.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("GPU models: {}", names.join(", ")),
        };
        return Err(CliError::new(format!("unknown GPU model `{}`", args.gpu)).hint(hint).into());
    }
    let q = OfferQuery {
        gpu: args.gpu.clone(),
        count: args.count,
        spot: args.spot,
        provider: args.provider,
        region: args.region.clone(),
    };
    let rows = offers::offers(&q, &PriceBook::new(&Spec::default(), &settings.env));
    if args.json {
        output::stdout(&format!("{:#}\n", serde_json::to_value(&rows).unwrap_or_default()));
        return Ok(ExitStatus::Success);
    }
    if rows.is_empty() {
        output::stderr(&format!(
            "No offers for {} with these filters.\nhint: drop --region or --provider to widen the search\n",
            args.gpu
        ));
        return Ok(ExitStatus::Error);
    }
    let mut table = vec![
        ["provider", "region", "instance type", "GPUs", "GPU mem", "vCPU", "RAM GiB", "capacity", "USD/h", "USD/GPU-h"]
            .map(String::from)
            .to_vec(),
    ];
    if args.count.is_some() {
        table[0].extend(["nodes".to_string(), "USD/h total".to_string()]);
    }
    for r in &rows {
        let mut row = vec![
            r.provider.to_string(),
            r.region.clone(),
            r.instance_type.clone(),
            format!("{} × {}", r.gpus_per_node, r.gpu),
            format!("{} GiB", r.gpu_memory_gib),
            r.vcpu.to_string(),
            r.ram_gib.to_string(),
            r.capacity.to_string(),
            format!("{:.4}{}", r.usd_per_node_hour, if r.estimated { "*" } else { "" }),
            format!("{:.4}", r.usd_per_gpu_hour),
        ];
        if args.count.is_some() {
            row.extend([r.nodes.to_string(), format!("{:.4}", r.usd_per_hour_total)]);
        }
        table.push(row);
    }
    let cols = table[0].len();
    let widths: Vec<usize> = (0..cols).map(|i| table.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &table {
        let cells: Vec<String> = r.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
        out += &format!("{}\n", cells.join("  ").trim_end());
    }
    output::stdout(&out);
    if rows.iter().any(|r| r.estimated) {
        output::stderr("* estimated catalog price (derived, not quoted; see src/catalog/README.md)\n");
    }
    output::stderr(
        "Prices are catalog list prices (spot: the cloud's typical discount) in USD; CNY converted at GPUPLAN_CNY_PER_USD or 7.1.\n",
    );
    Ok(ExitStatus::Success)
}
