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

pub(crate) fn finish(f: Fields<'_>, cx: &mut Cx<'_, '_>, own: &[&str]) -> Result<(), Reported> {
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
    let env = crate::spec::env::env_map(&mut f, cx);
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
    let env = crate::spec::env::env_map(&mut f, cx);
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
    use crate::spec::pool_blocks::POOL_ATTRS;

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
