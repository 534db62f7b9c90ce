//! Decoders for each block kind: attribute names, types, defaults and local range
//! checks. Cross-block checks (catalog, providers, quotas) live in `validate.rs`.
//!
//! Each decoder reads every attribute (so one run reports every problem), then returns
//! `Err(Reported)` if anything failed.

use crate::addr::{Address, Kind};
use crate::diag::{Diagnostic, did_you_mean};
use crate::spec::fields::{Cx, Fields, Reported};
use crate::spec::model::*;
use crate::spec::raw::{ExprKind, Step};

/// Meta-arguments every resource block accepts.
pub const META: &[&str] = &["depends_on", "count", "for_each", "lifecycle"];

/// Largest node count and GPU count we accept anywhere: big enough for any real fleet,
/// small enough that arithmetic on it never overflows.
pub const MAX_NODES: u32 = 100_000;

fn finish(f: Fields<'_>, cx: &mut Cx<'_, '_>, own: &[&str]) -> Result<(), Reported> {
    let failed = f.failed;
    let all: Vec<&str> = own.iter().chain(META.iter()).copied().collect();
    f.finish(cx, &all);
    if failed { Err(Reported) } else { Ok(()) }
}

/// `depends_on` and `lifecycle` (the driver handles `count`/`for_each`).
pub fn meta(f: &mut Fields<'_>, cx: &mut Cx<'_, '_>, own: &[&str]) -> Meta {
    f.raw("count");
    f.raw("for_each");
    let depends_on = f.address_list(cx, "depends_on", None).map(|v| v.value).unwrap_or_default();
    let lifecycle = match f.nested(cx, "lifecycle") {
        Some(lf) => {
            let r = lifecycle(lf, cx, own);
            f.check(r)
        }
        None => None,
    };
    Meta { depends_on, lifecycle, span: f.head, ..Meta::default() }
}

fn lifecycle(mut f: Fields<'_>, cx: &mut Cx<'_, '_>, own: &[&str]) -> Result<Lifecycle, Reported> {
    let prevent_destroy = f.bool(cx, "prevent_destroy");
    let prevent_destroy = f.or(prevent_destroy, false);
    let create_before_destroy = f.bool(cx, "create_before_destroy");
    // `ignore_changes = [nodes.desired, labels]` (HCL references) or strings (YAML).
    let mut ignore_changes = Vec::new();
    if let Some(expr) = f.raw("ignore_changes") {
        let items: Vec<_> = match &expr.kind {
            ExprKind::Array(items) => items.iter().collect(),
            _ => vec![expr],
        };
        for item in items {
            let path = match &item.kind {
                ExprKind::Traversal { root, steps } => {
                    let mut p = root.name.clone();
                    for s in steps {
                        let Step::Attr(id) = s else { break };
                        p.push('.');
                        p.push_str(&id.name);
                    }
                    Some(p)
                }
                ExprKind::String(s) => Some(s.clone()),
                _ => None,
            };
            match path {
                Some(p) if ignorable(own, &p) => ignore_changes.push(Spanned::new(p, item.span)),
                Some(p) => {
                    let valid = ignorable_paths(own);
                    let d = Diagnostic::error(
                        "gpuplan::spec::ignore_changes",
                        format!("`ignore_changes` names `{p}`, which is not an attribute of this block"),
                    )
                    .at(item.span, "unknown attribute");
                    let names = valid.iter().map(String::as_str).filter(|v| !v.ends_with(".KEY"));
                    cx.error(match did_you_mean(&p, names) {
                        Some(s) => d.help(format!("did you mean `{s}`? attributes: {}", valid.join(", "))),
                        None => d.help(format!("attributes: {}", valid.join(", "))),
                    });
                    f.failed = true;
                }
                None => {
                    cx.error(
                        Diagnostic::error(
                            "gpuplan::spec::ignore_changes",
                            "`ignore_changes` entries must be attribute names such as `nodes.desired`",
                        )
                        .at(item.span, "not an attribute name"),
                    );
                    f.failed = true;
                }
            }
        }
    }
    let out = Lifecycle { prevent_destroy, create_before_destroy, ignore_changes };
    let failed = f.failed;
    f.finish(cx, &["prevent_destroy", "create_before_destroy", "ignore_changes"]);
    if failed { Err(Reported) } else { Ok(out) }
}

/// What `ignore_changes` may name below an attribute: the fields of a nested block, or
/// `*` for any key of a map. Attributes not listed here have no parts to name.
const SUB_PATHS: &[(&str, &[&str])] = &[
    ("nodes", &["min", "desired", "max"]),
    ("mix", &["on_demand_base", "spot_percent", "fallback", "max_spot_price", "retry_preferred"]),
    ("budget", &["alert_at", "hourly_usd", "monthly_usd"]),
    ("labels", &["*"]),
    ("env", &["*"]),
];

fn sub_paths(attr: &str) -> &'static [&'static str] {
    SUB_PATHS.iter().find(|(a, _)| *a == attr).map(|(_, s)| *s).unwrap_or(&[])
}

/// Does the dotted `path` name an attribute of a block whose attributes are `own`?
fn ignorable(own: &[&str], path: &str) -> bool {
    let (head, rest) = path.split_once('.').map_or((path, None), |(h, r)| (h, Some(r)));
    if !own.contains(&head) {
        return false;
    }
    match rest {
        None => true,
        Some(r) => sub_paths(head).iter().any(|s| *s == r || (*s == "*" && !r.is_empty() && !r.contains('.'))),
    }
}

/// Every path `ignore_changes` accepts for a block, for hints (`labels.KEY` for maps).
fn ignorable_paths(own: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for a in own {
        out.push(a.to_string());
        for s in sub_paths(a) {
            out.push(if *s == "*" { format!("{a}.KEY") } else { format!("{a}.{s}") });
        }
    }
    out
}

pub const PROVIDER_ATTRS: &[&str] = &[
    "alias",
    "region",
    "endpoint",
    "profile",
    "access_key",
    "secret_key",
    "subnets",
    "security_groups",
    "key_name",
    "iam_instance_profile",
    "image",
    "cluster_id",
    "cny_per_usd",
    "seed",
    "latency",
    "failure_rate",
    "zone_capacity",
    "job_duration",
];
const SIM_ONLY: &[&str] = &["seed", "latency", "failure_rate", "zone_capacity", "job_duration"];

/// Decode a provider block. When it fails, `partial` receives what decoded: the block is
/// still declared for the pools that name it, which are checked against the catalog
/// unless the region they would take from it failed (`kind: None`).
pub fn provider(
    mut f: Fields<'_>,
    cx: &mut Cx<'_, '_>,
    kind: Spanned<Option<ProviderKind>>,
    partial: &mut Option<Provider>,
) -> Result<Provider, Reported> {
    if kind.value.is_some_and(|k| k != ProviderKind::Sim) {
        for a in SIM_ONLY {
            if let Some(e) = f.raw(a) {
                cx.error(
                    Diagnostic::error("gpuplan::spec::sim_only", format!("`{a}` applies only to the `sim` provider"))
                        .at(e.span, "not used by this provider")
                        .help("remove it, or move it into `provider \"sim\" { ... }`"),
                );
                f.failed = true;
            }
        }
    }
    let p = Provider {
        kind,
        alias: f.string(cx, "alias"),
        region: f.string(cx, "region"),
        endpoint: f.string(cx, "endpoint"),
        profile: f.string(cx, "profile"),
        access_key: f.string(cx, "access_key"),
        secret_key: f.string(cx, "secret_key"),
        subnets: f.string_map(cx, "subnets").map(|m| m.value).unwrap_or_default(),
        security_groups: f.string_list(cx, "security_groups").map(|v| v.value).unwrap_or_default(),
        key_name: f.string(cx, "key_name"),
        iam_instance_profile: f.string(cx, "iam_instance_profile"),
        image: f.string(cx, "image"),
        cluster_id: f.string(cx, "cluster_id"),
        cny_per_usd: f.number(cx, "cny_per_usd", 0.01, 1000.0),
        seed: f.uint(cx, "seed", 0, 1 << 53),
        latency: f.duration(cx, "latency"),
        failure_rate: f.number(cx, "failure_rate", 0.0, 1.0),
        zone_capacity: f.u32(cx, "zone_capacity", 0, 1_000_000),
        job_duration: f.duration(cx, "job_duration"),
    };
    if cloud_checks(&p, cx) {
        f.failed = true;
    }
    if let Some(a) = &p.alias
        && !crate::addr::is_ident(&a.value)
    {
        cx.error(
            Diagnostic::error("gpuplan::spec::alias", format!("provider alias {:?} is not a valid name", a.value))
                .at(a.span, "letters, digits, `_` and `-` only"),
        );
        f.failed = true;
    }
    let failed = f.failed;
    if failed {
        let region_failed = p.region.is_none() && f.has("region");
        let kind = Spanned::new(p.kind.value.filter(|_| !region_failed), p.kind.span);
        *partial = Some(Provider { kind, ..p.clone() });
    }
    f.finish(cx, PROVIDER_ATTRS);
    if failed { Err(Reported) } else { Ok(p) }
}

/// Checks of a cloud provider block that need no network: a usable `endpoint`, Tencent
/// subnets as `vpc-…/subnet-…`, and AWS-only settings elsewhere. True when any failed.
fn cloud_checks(p: &Provider, cx: &mut Cx<'_, '_>) -> bool {
    let mut failed = false;
    let Some(kind) = p.kind.value.filter(|k| *k != ProviderKind::Sim) else { return false };
    if let Some(e) = &p.endpoint
        && let Err(why) = crate::model::Endpoint::parse(&e.value)
    {
        cx.error(
            Diagnostic::error("gpuplan::spec::endpoint", format!("bad `endpoint` for `{kind}`: {why}"))
                .at(e.span, "not a usable endpoint")
                .help("write a scheme and host, e.g. `https://cvm.tencentcloudapi.com` or `http://127.0.0.1:8080`"),
        );
        failed = true;
    }
    if matches!(kind, ProviderKind::Tencentcloud | ProviderKind::Alicloud) {
        for (attr, v) in [("profile", &p.profile), ("iam_instance_profile", &p.iam_instance_profile)] {
            if let Some(v) = v {
                cx.error(
                    Diagnostic::error(
                        "gpuplan::spec::aws_only",
                        format!("`{attr}` applies only to the `aws` provider"),
                    )
                    .at(v.span, format!("not used by `{kind}`"))
                    .help("credentials come from the cloud's environment variables or `access_key`/`secret_key`"),
                );
                failed = true;
            }
        }
    }
    if kind == ProviderKind::Tencentcloud {
        for (zone, v) in &p.subnets {
            let ok =
                v.value.split_once('/').is_some_and(|(vpc, sn)| vpc.starts_with("vpc-") && sn.starts_with("subnet-"));
            if !ok {
                cx.error(
                    Diagnostic::error(
                        "gpuplan::spec::subnet",
                        format!("the Tencent Cloud subnet for `{zone}` must name its VPC too"),
                    )
                    .at(v.span, "expected `vpc-…/subnet-…`")
                    .help("CVM takes a VpcId with every SubnetId: write `\"vpc-abc/subnet-def\"`"),
                );
                failed = true;
            }
        }
    }
    failed
}

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
];

/// Decode a pool. When it fails but its identity (provider, GPU, GPUs per node) decoded,
/// `partial` receives a pool with defaults elsewhere, so catalog checks still run and
/// one run reports every problem.
pub fn gpu_pool(mut f: Fields<'_>, cx: &mut Cx<'_, '_>, partial: &mut Option<GpuPool>) -> Result<GpuPool, Reported> {
    let meta = meta(&mut f, cx, POOL_ATTRS);
    let mut broken_placement = None;
    let placement = match f.nested(cx, "placement") {
        Some(pf) => {
            let r = placement(pf, cx, &mut broken_placement);
            f.check(r)
        }
        None => None,
    };
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
    let labels = f.string_map(cx, "labels").map(|m| m.value).unwrap_or_default();
    let mig = f.string(cx, "mig");
    let kubernetes = match f.nested(cx, "kubernetes") {
        Some(kf) => {
            let r = kubernetes(kf, cx);
            f.check(r)
        }
        None => None,
    };
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
        meta,
    })
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

pub const QUOTA_ATTRS: &[&str] = &["pools", "max_gpus", "allowed_gpus", "budget", "warn_percent", "notify", "weight"];

pub fn quota(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Quota, Reported> {
    let meta = meta(&mut f, cx, QUOTA_ATTRS);
    let pools = f.address_list(cx, "pools", Some(Kind::GpuPool)).map(|v| v.value).unwrap_or_default();
    let max_gpus = f.u32(cx, "max_gpus", 0, MAX_NODES * 16);
    let allowed_gpus = f.string_list(cx, "allowed_gpus").map(|v| v.value).unwrap_or_default();
    let budget = match f.nested(cx, "budget") {
        Some(mut bf) => {
            let hourly_usd = bf.number(cx, "hourly_usd", 0.0, 1e9);
            let monthly_usd = bf.number(cx, "monthly_usd", 0.0, 1e12);
            let mut alert_at = Vec::new();
            for item in bf.string_list(cx, "alert_at").map(|v| v.value).unwrap_or_default() {
                match item.value.parse::<u32>() {
                    Ok(p) if (1..=1000).contains(&p) => alert_at.push(Spanned::new(p, item.span)),
                    _ => {
                        bf.failed = true;
                        cx.diags.push(
                            Diagnostic::error(
                                "gpuplan::spec::alert_at",
                                format!("`alert_at` holds {:?}, not a percentage of the monthly budget", item.value),
                            )
                            .at(item.span, "expected a whole number from 1 to 1000")
                            .help("e.g. `alert_at = [50, 80, 100]`"),
                        );
                    }
                }
            }
            if !alert_at.is_empty() && monthly_usd.is_none() && !bf.failed {
                cx.diags.push(
                    Diagnostic::warning(
                        "gpuplan::spec::alert_at",
                        "`alert_at` needs a `monthly_usd` to be a percentage of",
                    )
                    .at(alert_at[0].span, "no monthly budget")
                    .help("set `monthly_usd`; alerts compare month-to-date spend with it"),
                );
            }
            if hourly_usd.is_none() && monthly_usd.is_none() && !bf.failed {
                cx.diags.push(
                    Diagnostic::warning("gpuplan::spec::budget", "this `budget` block sets no limit")
                        .at(bf.head, "empty budget")
                        .help("set `hourly_usd` and/or `monthly_usd`"),
                );
            }
            let failed = bf.failed;
            bf.finish(cx, &["hourly_usd", "monthly_usd", "alert_at"]);
            f.failed |= failed;
            Some(Budget { hourly_usd, monthly_usd, alert_at })
        }
        None => None,
    };
    let warn_percent = f.u32(cx, "warn_percent", 1, 100);
    let mut notify = Vec::new();
    for url in f.string_list(cx, "notify").map(|v| v.value).unwrap_or_default() {
        if url.value.starts_with("https://") || url.value.starts_with("http://") {
            notify.push(url);
        } else {
            f.failed = true;
            cx.diags.push(
                Diagnostic::error(
                    "gpuplan::spec::notify",
                    format!("`notify` holds {:?}, which is not a webhook URL", url.value),
                )
                .at(url.span, "expected an http(s) URL")
                .help("e.g. `notify = [\"https://hooks.slack.com/services/...\"]`"),
            );
        }
    }
    let weight = f.number(cx, "weight", 0.01, 1_000_000.0);
    finish(f, cx, QUOTA_ATTRS)?;
    Ok(Quota { pools, max_gpus, allowed_gpus, budget, warn_percent, notify, weight, meta })
}

pub const TEMPLATE_ATTRS: &[&str] =
    &["image", "command", "env", "gpu", "gpus", "priority", "preemptible", "max_runtime", "retries", "checkpoint_uri"];
const PRIORITIES: &[(&str, Priority)] =
    &[("critical", Priority::Critical), ("high", Priority::High), ("medium", Priority::Medium), ("low", Priority::Low)];

pub fn job_template(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<JobTemplate, Reported> {
    let meta = meta(&mut f, cx, TEMPLATE_ATTRS);
    let image = f.string(cx, "image");
    let image = f.required(cx, image, "image", "\"ghcr.io/org/trainer:1.0\"");
    let command = f.string_list(cx, "command").map(|v| v.value).unwrap_or_default();
    let env = f.string_map(cx, "env").map(|m| m.value).unwrap_or_default();
    let gpu = f.string(cx, "gpu");
    let gpus = f.u32(cx, "gpus", 1, 16 * 64);
    let gpus = f.or(gpus, 1);
    let priority = f.enumeration(cx, "priority", PRIORITIES);
    let priority = f.or(priority, Priority::Medium);
    let preemptible = f.bool(cx, "preemptible");
    let preemptible = f.or(preemptible, false);
    let max_runtime = f.duration(cx, "max_runtime");
    if let Some(d) = &max_runtime
        && d.value.as_secs() == 0
    {
        cx.error(
            Diagnostic::error("gpuplan::spec::max_runtime", "`max_runtime` must be longer than zero")
                .at(d.span, "zero"),
        );
        f.failed = true;
    }
    let retries = f.u32(cx, "retries", 0, 100);
    let retries = f.or(retries, 0);
    let checkpoint_uri = f.string(cx, "checkpoint_uri");
    finish(f, cx, TEMPLATE_ATTRS)?;
    Ok(JobTemplate {
        image: image.ok_or(Reported)?,
        command,
        env,
        gpu,
        gpus,
        priority,
        preemptible,
        max_runtime,
        retries,
        checkpoint_uri,
        meta,
    })
}

pub const JOB_ATTRS: &[&str] = &["template", "pool", "quota", "args", "env", "replicas"];

pub fn job(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Job, Reported> {
    let meta = meta(&mut f, cx, JOB_ATTRS);
    let template = f.address(cx, "template", Kind::JobTemplate);
    let template = f.required(cx, template, "template", "job_template.NAME");
    // Without `pool`, the template's `gpu` picks one (`resolve_job_pools`); an empty
    // address stands in until then.
    let pool = f.address(cx, "pool", Kind::GpuPool);
    let head = f.head;
    let pool = if f.has("pool") { pool } else { Some(Spanned::new(Address::new(Kind::GpuPool, ""), head)) };
    let quota = f.address(cx, "quota", Kind::Quota);
    let args = f.string_list(cx, "args").map(|v| v.value).unwrap_or_default();
    let env = f.string_map(cx, "env").map(|m| m.value).unwrap_or_default();
    let replicas = f.u32(cx, "replicas", 1, 10_000);
    let replicas = f.or(replicas, 1);
    finish(f, cx, JOB_ATTRS)?;
    Ok(Job {
        template: template.ok_or(Reported)?,
        pool: pool.ok_or(Reported)?,
        quota,
        args,
        env,
        replicas,
        pool_choices: Vec::new(),
        meta,
    })
}

pub const AUTOSCALER_ATTRS: &[&str] = &["pool", "queue_wait", "utilization_above", "idle_for", "step", "cooldown"];

pub fn autoscaler(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Autoscaler, Reported> {
    let meta = meta(&mut f, cx, AUTOSCALER_ATTRS);
    let pool = f.address(cx, "pool", Kind::GpuPool);
    let pool = f.required(cx, pool, "pool", "gpu_pool.NAME");
    let queue_wait = f.duration(cx, "queue_wait");
    let queue_wait = f.or(queue_wait, Duration::secs(300));
    let utilization_above = f.u32(cx, "utilization_above", 1, 100);
    let utilization_above = f.or(utilization_above, 80);
    let idle_for = f.duration(cx, "idle_for");
    let idle_for = f.or(idle_for, Duration::secs(900));
    let step = f.u32(cx, "step", 0, MAX_NODES);
    if let Some(s) = step.as_ref().filter(|s| s.value == 0) {
        cx.diags.push(
            Diagnostic::error("gpuplan::spec::range", "`step` must be at least 1, found 0")
                .at(s.span, "an autoscaler step of 0 never scales")
                .help("`step` is how many nodes one action adds or removes; use 1 or more"),
        );
        f.failed = true;
    }
    let step = f.or(step, 1);
    let cooldown = f.duration(cx, "cooldown");
    let cooldown = f.or(cooldown, Duration::secs(300));
    finish(f, cx, AUTOSCALER_ATTRS)?;
    Ok(Autoscaler { pool: pool.ok_or(Reported)?, queue_wait, utilization_above, idle_for, step, cooldown, meta })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nested blocks' field lists follow the model, so a new field is ignorable at once.
    #[test]
    fn sub_paths_match_the_model_fields() {
        fn fields<T: schemars::JsonSchema>() -> Vec<String> {
            let schema = schemars::schema_for!(T).to_value();
            let mut keys: Vec<String> = schema["properties"].as_object().expect("properties").keys().cloned().collect();
            keys.sort();
            keys
        }
        let listed = |a: &str| {
            let mut v: Vec<String> = sub_paths(a).iter().map(|s| s.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(listed("nodes"), fields::<Nodes>());
        assert_eq!(listed("mix"), fields::<Mix>());
        assert_eq!(listed("budget"), fields::<Budget>());
    }

    #[test]
    fn ignorable_paths_are_attributes_their_fields_and_map_keys() {
        for ok in ["nodes", "nodes.desired", "mix.spot_percent", "labels", "labels.team", "image"] {
            assert!(ignorable(POOL_ATTRS, ok), "{ok}");
        }
        for bad in ["nodes.desred", "nodes.desired.x", "labels.", "labels.a.b", "image.tag", "count", "budget"] {
            assert!(!ignorable(POOL_ATTRS, bad), "{bad}");
        }
        assert!(ignorable(QUOTA_ATTRS, "budget.hourly_usd"));
        assert!(ignorable(JOB_ATTRS, "env.TOKEN"));
        let paths = ignorable_paths(POOL_ATTRS);
        assert!(paths.contains(&"nodes.desired".to_string()) && paths.contains(&"labels.KEY".to_string()), "{paths:?}");
    }
}
