//! Decoders of the `gpu_pool` block and the blocks inside it (`placement` with its
//! candidates, `kubernetes`, `nodes`, `mix`): the largest block kind, in a file of its own
//! beside the other kinds' decoders in `blocks.rs`, whose shared steps (`meta`, `finish`)
//! it uses.

use crate::diag::Diagnostic;
use crate::spec::blocks::{MAX_NODES, finish, meta};
use crate::spec::fields::{Cx, Fields, Reported};
use crate::spec::model::*;

pub const POOL_ATTRS: &[&str] = &[
    "provider",
    "region",
    "zones",
    "gpu",
    "gpus_per_node",
    "instance_types",
    "image",
    "nodes",
    "mix",
    "labels",
    "mig",
    "kubernetes",
    "placement",
    "health",
    "disk",
    "network",
    "capacity",
];

/// Decode a pool. When it fails but its identity (provider, GPU, GPUs per node) decoded,
/// `partial` receives a pool with defaults elsewhere, so catalog checks still run and
/// one run reports every problem.
pub fn gpu_pool(mut f: Fields<'_>, cx: &mut Cx<'_, '_>, partial: &mut Option<GpuPool>) -> Result<GpuPool, Reported> {
    let meta = meta(&mut f, cx, POOL_ATTRS);
    let mut broken_placement = None;
    let placement = f.nested(cx, "placement").and_then(|pf| {
        let r = placement(pf, cx, &mut broken_placement);
        f.check(r)
    });
    let floating = f.has("placement");
    let provider = f.string(cx, "provider");
    let region = f.string(cx, "region");
    let zones = f.string_list(cx, "zones");
    let provider = if floating {
        not_with_placement(cx, &mut f, [provider.as_ref().map(|p| p.span), region.as_ref().map(|r| r.span)]);
        not_with_placement(cx, &mut f, [zones.as_ref().map(|z| z.span), None]);
        // Chosen by the plan from the candidates.
        Some(Spanned::new(String::new(), meta.span))
    } else {
        f.required(cx, provider, "provider", "\"sim\"")
    };
    let zones = zones.map(|v| v.value).unwrap_or_default();
    let gpu = f.string(cx, "gpu");
    let gpu = f.required(cx, gpu, "gpu", "\"A100-80GB\"");
    let gpus_per_node = f.u32(cx, "gpus_per_node", 1, 16);
    let gpus_per_node = f.required(cx, gpus_per_node, "gpus_per_node", "8");
    let instance_types = f.string_list(cx, "instance_types").map(|v| v.value).unwrap_or_default();
    let image = f.string(cx, "image");
    let (nodes, mix) = nodes_and_mix(&mut f, cx);
    let labels = f.string_map(cx, "labels").map(|m| m.value).unwrap_or_default();
    let mig = f.string(cx, "mig");
    let kubernetes = f.nested(cx, "kubernetes").and_then(|kf| {
        let r = kubernetes(kf, cx);
        f.check(r)
    });
    let health = f.nested(cx, "health").and_then(|hf| {
        let r = crate::spec::health_block::health(hf, cx);
        f.check(r)
    });
    let disk = f.nested(cx, "disk").and_then(|df| {
        let r = crate::spec::pool_hardware::disk(df, cx);
        f.check(r)
    });
    let network = f.nested(cx, "network").and_then(|nf| {
        let r = crate::spec::pool_hardware::network(nf, cx);
        f.check(r)
    });
    let capacity = f.nested(cx, "capacity").map(|cf| crate::spec::pool_capacity::capacity(cf, cx));
    let capacity = capacity.and_then(|r| f.check(r));
    if f.failed
        && let (Some(p), Some(g), Some(n)) = (&provider, &gpu, &gpus_per_node)
    {
        *partial = Some(GpuPool {
            provider: p.clone(),
            region: region.clone(),
            zones: zones.clone(),
            gpu: g.clone(),
            gpus_per_node: n.clone(),
            instance_types: instance_types.clone(),
            image: image.clone(),
            nodes: Nodes::default(),
            mix: Mix::default(),
            labels: Default::default(),
            mig: mig.clone(),
            kubernetes: None,
            // A floating pool stays floating, with the candidates that decoded (maybe
            // none): it has no provider of its own to be told is missing.
            placement: placement
                .clone()
                .or(broken_placement)
                .or_else(|| floating.then(|| Placement { span: meta.span, ..Placement::default() }))
                .map(Box::new),
            health: None,
            disk: None,
            network: None,
            capacity: None,
            meta: meta.clone(),
        });
    }
    finish(f, cx, POOL_ATTRS)?;
    Ok(GpuPool {
        provider: provider.ok_or(Reported)?,
        region,
        zones,
        gpu: gpu.ok_or(Reported)?,
        gpus_per_node: gpus_per_node.ok_or(Reported)?,
        instance_types,
        image,
        nodes: nodes.ok_or(Reported)?,
        mix: mix.ok_or(Reported)?,
        labels,
        mig,
        kubernetes: kubernetes.map(Box::new),
        placement: placement.map(Box::new),
        health: health.map(Box::new),
        disk: disk.map(Box::new),
        network: network.map(Box::new),
        capacity: capacity.map(Box::new),
        meta,
    })
}

/// The pool's `nodes` block (required) and its `mix` block (by default all on-demand,
/// falling back to on-demand); `None` for one that failed (reported).
fn nodes_and_mix(f: &mut Fields<'_>, cx: &mut Cx<'_, '_>) -> (Option<Nodes>, Option<Mix>) {
    let nodes = match f.nested(cx, "nodes") {
        Some(nf) => {
            let r = nodes(nf, cx);
            f.check(r)
        }
        None => {
            if !f.has("nodes") {
                f.missing(cx, "nodes", "{ min = 0, desired = 1, max = 4 }");
                f.failed = true;
            }
            None
        }
    };
    let mix = match f.nested(cx, "mix") {
        Some(mf) => {
            let r = mix(mf, cx, nodes.as_ref());
            f.check(r)
        }
        None => Some(Mix {
            on_demand_base: f.or(None, 0),
            spot_percent: f.or(None, 0),
            fallback: f.or(None, Fallback::OnDemand),
            max_spot_price: None,
            retry_preferred: None,
        }),
    };
    (nodes, mix)
}

/// `provider`, `region` and `zones` belong to the candidates of a floating pool.
fn not_with_placement(cx: &mut Cx<'_, '_>, f: &mut Fields<'_>, spans: [Option<crate::diag::Span>; 2]) {
    for span in spans.into_iter().flatten() {
        cx.error(
            Diagnostic::error(
                "gpuplan::spec::placement",
                "a pool with `placement` takes its provider, region and zones from its candidates",
            )
            .at(span, "remove this, or remove `placement`")
            .help("write `{ provider = \"aws\", region = \"us-east-1\", zones = [...] }` as a candidate"),
        );
        f.failed = true;
    }
}

/// A floating pool's `placement {}` block: candidates, strategy, min_saving, min_stay.
/// When it fails, `partial` receives it with the candidates that decoded.
fn placement(mut f: Fields<'_>, cx: &mut Cx<'_, '_>, partial: &mut Option<Placement>) -> Result<Placement, Reported> {
    let span = f.head;
    let list = f.object_list(cx, "candidates");
    let mut candidates = Vec::new();
    match list {
        Some(items) if items.value.is_empty() => {
            cx.error(
                Diagnostic::error("gpuplan::spec::placement", "`candidates` is empty: a pool needs somewhere to live")
                    .at(items.span, "no candidates")
                    .help("add `{ provider = \"sim\", region = \"us-east-1\" }`"),
            );
            f.failed = true;
        }
        Some(items) => {
            for cf in items.value {
                let r = candidate(cf, cx);
                if let Some(c) = f.check(r) {
                    candidates.push(c);
                }
            }
        }
        None if !f.has("candidates") => {
            f.missing(cx, "candidates", "[{ provider = \"sim\", region = \"us-east-1\" }]");
            f.failed = true;
        }
        None => {}
    }
    let strategy = f.enumeration(cx, "strategy", &[("cheapest", Strategy::Cheapest), ("ordered", Strategy::Ordered)]);
    let strategy = f.or(strategy, Strategy::Cheapest);
    let min_saving = f.number(cx, "min_saving", 0.0, 100.0);
    let min_stay = f.duration(cx, "min_stay");
    let failed = f.failed;
    f.finish(cx, &["candidates", "strategy", "min_saving", "min_stay"]);
    let placement = Placement { candidates, strategy, min_saving, min_stay, span };
    if failed {
        *partial = Some(placement);
        return Err(Reported);
    }
    Ok(placement)
}

/// One candidate: `{ provider = "aws", region = "us-east-1", zones = [...] }`.
fn candidate(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Candidate, Reported> {
    let provider = f.string(cx, "provider");
    let provider = f.required(cx, provider, "provider", "\"sim\"");
    let region = f.string(cx, "region");
    let region = f.required(cx, region, "region", "\"us-east-1\"");
    let zones = f.string_list(cx, "zones").map(|v| v.value).unwrap_or_default();
    let failed = f.failed;
    f.finish(cx, &["provider", "region", "zones"]);
    if failed {
        return Err(Reported);
    }
    Ok(Candidate { provider: provider.ok_or(Reported)?, region: region.ok_or(Reported)?, zones })
}

/// A pool's `kubernetes {}` block: `cluster_id` (TKE, ACK) or `kubeconfig` [+ `context`],
/// and `namespace` (default `default`). Which clouds take `cluster_id` is checked with
/// the provider blocks (validate.rs).
fn kubernetes(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Kubernetes, Reported> {
    let cluster_id = f.string(cx, "cluster_id");
    let kubeconfig = f.string(cx, "kubeconfig");
    let context = f.string(cx, "context");
    let namespace = f.string(cx, "namespace");
    let key_pair = f.string(cx, "key_pair");
    let service_cidr = f.string(cx, "service_cidr");
    if let Some(c) = &service_cidr
        && !is_cidr(&c.value)
    {
        f.failed = true;
        cx.diags.push(
            Diagnostic::error("gpuplan::spec::service_cidr", format!("`{}` is not an IPv4 CIDR block", c.value))
                .at(c.span, "expected ADDRESS/PREFIX")
                .help("e.g. `service_cidr = \"10.100.0.0/16\"` (`aws eks describe-cluster` shows it as `serviceIpv4Cidr`)"),
        );
    }
    let head = f.head;
    match (&cluster_id, &kubeconfig) {
        (None, None) if !f.failed => {
            f.failed = true;
            cx.diags.push(
                Diagnostic::error(
                    "gpuplan::spec::kubernetes_cluster",
                    "this `kubernetes` block names no cluster",
                )
                .at(head, "needs `cluster_id` or `kubeconfig`")
                .help("TKE and ACK pools: `cluster_id = \"cls-8xk2p4\"`; any other cluster: `kubeconfig = \"~/.kube/config\"` and `context = \"prod\"`"),
            );
        }
        (Some(c), Some(_)) => {
            f.failed = true;
            cx.diags.push(
                Diagnostic::error(
                    "gpuplan::spec::kubernetes_cluster",
                    "`cluster_id` and `kubeconfig` both name the cluster",
                )
                .at(c.span, "remove this or `kubeconfig`")
                .help("`cluster_id` fetches the kubeconfig with the pool's provider (TKE, ACK); `kubeconfig` reads a file"),
            );
        }
        _ => {}
    }
    if let (Some(c), None) = (&context, &kubeconfig) {
        f.failed = true;
        cx.diags.push(
            Diagnostic::error("gpuplan::spec::kubernetes_context", "`context` needs `kubeconfig`")
                .at(c.span, "a context of which kubeconfig?")
                .help("add `kubeconfig = \"~/.kube/config\"`, or remove `context` to use the fetched kubeconfig of `cluster_id`"),
        );
    }
    if let Some(n) = &namespace
        && !is_dns_label(&n.value)
    {
        f.failed = true;
        cx.diags.push(
            Diagnostic::error("gpuplan::spec::kubernetes_namespace", format!("`{}` is not a Kubernetes namespace name", n.value))
                .at(n.span, "not a DNS-1123 label")
                .help("at most 63 lowercase letters, digits and `-`, starting and ending with a letter or digit, e.g. `ml-jobs`"),
        );
    }
    let namespace = f.or(namespace, "default".to_string());
    let failed = f.failed;
    f.finish(cx, &["cluster_id", "kubeconfig", "context", "namespace", "key_pair", "service_cidr"]);
    if failed {
        Err(Reported)
    } else {
        Ok(Kubernetes { cluster_id, kubeconfig, context, namespace, key_pair, service_cidr })
    }
}

/// `10.100.0.0/16`.
fn is_cidr(s: &str) -> bool {
    s.split_once('/')
        .is_some_and(|(ip, n)| ip.parse::<std::net::Ipv4Addr>().is_ok() && n.parse::<u8>().is_ok_and(|n| n <= 32))
}

/// A DNS-1123 label (namespace names).
fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn nodes(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Nodes, Reported> {
    let min = f.u32(cx, "min", 0, MAX_NODES);
    let min = f.or(min, 0);
    let desired = f.u32(cx, "desired", 0, MAX_NODES);
    let desired = f.required(cx, desired, "desired", "1");
    let max = f.u32(cx, "max", 1, MAX_NODES);
    let max = f.required(cx, max, "max", "4");
    if let (Some(d), Some(m)) = (&desired, &max) {
        if min.value > m.value {
            cx.error(
                Diagnostic::error(
                    "gpuplan::spec::nodes",
                    format!("`min` ({}) is larger than `max` ({})", min.value, m.value),
                )
                .at(min.span, "min")
                .at(m.span, "max")
                .help("node counts must satisfy min <= desired <= max"),
            );
            f.failed = true;
        } else if d.value < min.value || d.value > m.value {
            cx.error(
                Diagnostic::error(
                    "gpuplan::spec::nodes",
                    format!("`desired` ({}) must be between `min` ({}) and `max` ({})", d.value, min.value, m.value),
                )
                .at(d.span, "desired is out of bounds")
                .at(if d.value > m.value { m.span } else { min.span }, if d.value > m.value { "max" } else { "min" })
                .help("node counts must satisfy min <= desired <= max"),
            );
            f.failed = true;
        }
    }
    let failed = f.failed;
    f.finish(cx, &["min", "desired", "max"]);
    if failed {
        return Err(Reported);
    }
    Ok(Nodes { min, desired: desired.ok_or(Reported)?, max: max.ok_or(Reported)? })
}

const FALLBACKS: &[(&str, Fallback)] =
    &[("on_demand", Fallback::OnDemand), ("wait", Fallback::Wait), ("fail", Fallback::Fail)];

fn mix(mut f: Fields<'_>, cx: &mut Cx<'_, '_>, nodes: Option<&Nodes>) -> Result<Mix, Reported> {
    let on_demand_base = f.u32(cx, "on_demand_base", 0, MAX_NODES);
    let on_demand_base = f.or(on_demand_base, 0);
    let spot_percent = f.u32(cx, "spot_percent", 0, 100);
    let spot_percent = f.or(spot_percent, 0);
    let fallback = f.enumeration(cx, "fallback", FALLBACKS);
    let fallback = f.or(fallback, Fallback::OnDemand);
    let max_spot_price = f.number(cx, "max_spot_price", 0.0001, 10_000.0);
    let retry_preferred = f.duration(cx, "retry_preferred");
    if let Some(d) = &retry_preferred
        && d.value.as_secs() == 0
    {
        cx.error(
            Diagnostic::error("gpuplan::spec::retry_preferred", "`retry_preferred` must be longer than zero")
                .at(d.span, "zero")
                .help("e.g. \"30m\": how long a pool stays in its fallback placement before trying again"),
        );
        f.failed = true;
    }
    if let Some(n) = nodes
        && on_demand_base.value > n.max.value
    {
        cx.diags.push(
            Diagnostic::warning(
                "gpuplan::spec::on_demand_base",
                format!(
                    "`on_demand_base` ({}) is above `nodes.max` ({}): every node will be on-demand",
                    on_demand_base.value, n.max.value
                ),
            )
            .at(on_demand_base.span, "larger than the pool can grow"),
        );
    }
    let failed = f.failed;
    f.finish(cx, &["on_demand_base", "spot_percent", "fallback", "max_spot_price", "retry_preferred"]);
    if failed {
        Err(Reported)
    } else {
        Ok(Mix { on_demand_base, spot_percent, fallback, max_spot_price, retry_preferred })
    }
}
