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
    let spec = spec_with_providers(settings);
    let live = if args.offline { Vec::new() } else { live_quotes(settings, &spec, args)? };
    let rows = offers::offers(&q, &PriceBook::new(&spec, &settings.env).with_live(&live));
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
        [
            "provider",
            "region",
            "instance type",
            "GPUs",
            "GPU mem",
            "vCPU",
            "RAM GiB",
            "capacity",
            "USD/h",
            "USD/GPU-h",
            "price",
        ]
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
            if r.price_source == "live" {
                format!("live {}", r.price_as_of)
            } else {
                format!("catalog {}", r.price_as_of)
            },
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
    let catalog_note = "catalog list prices (spot: the cloud's typical discount), dated";
    if rows.iter().any(|r| r.price_source == "live") {
        output::stderr(&format!(
            "Prices in USD: `live` ones were quoted by the spec's providers just now, the others are {catalog_note}; CNY converted at the provider's cny_per_usd, GPUPLAN_CNY_PER_USD or 7.1.\n"
        ));
    } else {
        output::stderr(&format!(
            "Prices in USD are {catalog_note}; CNY converted at GPUPLAN_CNY_PER_USD or 7.1. Live quotes come from the cloud providers a spec in this folder declares (`-C DIR`).\n"
        ));
    }
    Ok(ExitStatus::Success)
}

/// The spec of `-C DIR` when it loads cleanly (its providers and exchange rates), else
/// none: `offers` is a catalog lookup first and needs no spec.
fn spec_with_providers(settings: &Settings) -> Spec {
    match crate::spec::load_dir(&settings.dir, &settings.load_options()) {
        Ok(l) if !l.diags.has_errors() => l.spec,
        _ => Spec::default(),
    }
}

/// Live quotes from the spec's cloud providers that the query's filters allow. A provider
/// that cannot be set up or answer is a warning: its catalog prices stand.
fn live_quotes(settings: &Settings, spec: &Spec, args: &OffersArgs) -> Result<Vec<crate::model::Offer>, CliError> {
    let wanted: Vec<(&String, crate::model::ProviderKind)> = spec
        .providers
        .iter()
        .filter_map(|(name, p)| p.kind.value.map(|k| (name, k)))
        .filter(|(_, k)| *k != crate::model::ProviderKind::Sim && args.provider.is_none_or(|p| p == *k))
        .collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let ws = settings.workspace().with_backend(spec).reading();
    let empty = crate::state::State::new("gpuplan-offers".into());
    let providers = match crate::engine::providers::build(&ws, spec, &empty) {
        Ok(p) => p,
        Err(e) => {
            output::stderr(&format!("warning: no live prices: {e}; showing catalog prices\n"));
            return Ok(Vec::new());
        }
    };
    super::runtime::block_on(async {
        let mut out = Vec::new();
        for (name, _) in wanted {
            // A provider that sells nothing (the Kubernetes job backend) has no live prices.
            let Some(p) = providers.get(name).and_then(|p| p.prices()) else { continue };
            match p.offers(&args.gpu, args.region.as_deref()).await {
                Ok(offers) => out.extend(offers.into_iter().filter(|o| o.live_price)),
                Err(e) => output::stderr(&format!(
                    "warning: provider \"{name}\" gave no live prices for {}: {e}; showing catalog prices\n",
                    args.gpu
                )),
            }
        }
        out
    })
}
