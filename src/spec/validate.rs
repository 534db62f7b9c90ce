//! Cross-resource validation: providers exist, regions, zones, GPU models and instance
//! types match the catalog for the pool's provider, jobs fit their pools and quotas.
//!
//! Runs after decoding on whatever decoded; it never evaluates expressions.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::addr::Address;
use crate::catalog::{self, Catalog};
use crate::diag::{Diagnostic, Diagnostics, did_you_mean};
use crate::spec::Spec;
use crate::spec::decode::Partial;
use crate::spec::model::{GpuPool, Job, JobTemplate, Provider, ProviderKind, Spanned};

pub fn validate(spec: &Spec, partial: &Partial, diags: &mut Diagnostics) {
    let cat = catalog::catalog();
    let known = Known { spec, partial };
    let zones = ZoneLists::default();
    for (addr, pool) in spec.gpu_pools.iter().map(|(a, p)| (a, &**p)).chain(&partial.pools) {
        match &pool.placement {
            Some(p) => validate_floating(known, cat, &zones, addr, pool, p, diags),
            None => validate_pool(known, cat, &zones, addr, pool, diags),
        }
    }
    for q in spec.quotas.values() {
        for g in &q.allowed_gpus {
            check_gpu_model(cat, g, diags);
        }
    }
    validate_jobs(spec, diags);
    crate::spec::reservation::validate(spec, cat, diags);
    crate::spec::pool_capacity::validate_pools(spec, cat, diags);
    for (name, p) in &spec.providers {
        if let Some(c) = &p.cluster_id {
            diags.push(
                Diagnostic::warning(
                    "gpuplan::spec::provider_cluster_id",
                    format!("`cluster_id` in provider `{name}` is not used: pools name their cluster"),
                )
                .at(c.span, "ignored")
                .help(format!(
                    "move it into the pools that run jobs there: `kubernetes {{ cluster_id = \"{}\" }}`",
                    c.value
                )),
            );
        }
    }
    let mut scaled: BTreeMap<&Address, &Spanned<Address>> = BTreeMap::new();
    for a in spec.autoscalers.values() {
        if let Some(prev) = scaled.insert(&a.pool.value, &a.pool) {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::autoscaler",
                    format!("`{}` has more than one autoscaler", a.pool.value),
                )
                .at(a.pool.span, "second autoscaler for this pool")
                .at(prev.span, "first one")
                .help("merge the rules into one autoscaler block"),
            );
        }
    }
    for a in spec.autoscalers.values() {
        validate_autoscaler(spec, a, diags);
    }
}

/// Each provider kind's and region's zones ([`Catalog::region_zones`]), listed once per
/// validation: the catalog builds the list anew per call (every cloud's regions of that
/// name, each zone once), and each pool with zones asks twice.
#[derive(Default)]
struct ZoneLists<'c>(RefCell<Vec<(ProviderKind, String, Rc<[&'c str]>)>>);

impl<'c> ZoneLists<'c> {
    fn of(&self, cat: &'c Catalog, kind: ProviderKind, region: &str) -> Rc<[&'c str]> {
        if let Some((_, _, zones)) = self.0.borrow().iter().find(|(k, r, _)| *k == kind && r == region) {
            return Rc::clone(zones);
        }
        let zones: Rc<[&'c str]> = cat.region_zones(kind, region).into();
        self.0.borrow_mut().push((kind, region.to_string(), Rc::clone(&zones)));
        zones
    }
}

/// The spec with what is known of the blocks that failed to decode: a provider block with
/// a bad attribute is still declared for the pools that name it.
#[derive(Clone, Copy)]
struct Known<'a> {
    spec: &'a Spec,
    partial: &'a Partial,
}

impl<'a> Known<'a> {
    fn provider(&self, name: &str) -> Option<&'a Provider> {
        self.spec.providers.get(name).or_else(|| self.partial.providers.get(name))
    }
}

/// A floating pool: each candidate is checked as if the pool lived there (its provider
/// block, region, zones and the GPU shape on offer), every problem of every candidate
/// reported once, at the candidate's own line. Without candidates (they failed to
/// decode), only what the pool says itself: its GPU shape.
fn validate_floating<'c>(
    known: Known<'_>,
    cat: &'c Catalog,
    zones: &ZoneLists<'c>,
    addr: &Address,
    pool: &GpuPool,
    placement: &crate::spec::model::Placement,
    diags: &mut Diagnostics,
) {
    if placement.candidates.is_empty() {
        check_gpu_shape(cat, addr, pool, diags);
    }
    for c in &placement.candidates {
        let mut own = Diagnostics::default();
        validate_pool(known, cat, zones, addr, &pool.placed_in(c), &mut own);
        let here = [c.provider.span, c.region.span];
        for mut d in own.items {
            // Pointed at the candidate it is about, unless the pool's own attribute is at
            // fault (a GPU model or MIG profile fails alike everywhere: reported once).
            let own_attr = d.code == "gpuplan::spec::gpu" || d.code == "gpuplan::spec::mig_profile";
            if !own_attr && !d.labels.iter().any(|(s, _)| here.contains(s)) {
                d.labels.insert(0, (c.region.span, format!("candidate {}", c.label())));
            }
            diags.push(d);
        }
    }
    if let Some(k) = &pool.kubernetes {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::placement",
                format!("`{addr}` floats between candidates, so it cannot join one Kubernetes cluster"),
            )
            .at(k.namespace.span, "a cluster lives in one place")
            .help("remove `kubernetes {}`, or give the pool a fixed `provider` and `region`"),
        );
    }
    let mut places: Vec<(&str, &str)> = Vec::new();
    for c in &placement.candidates {
        let place = (c.provider.value.as_str(), c.region.value.as_str());
        if places.contains(&place) && c.zones.is_empty() {
            diags.push(
                Diagnostic::warning(
                    "gpuplan::spec::placement",
                    format!("`{addr}` lists the candidate {} more than once", c.label()),
                )
                .at(c.region.span, "again here"),
            );
        }
        places.push(place);
    }
}

/// Rules that decode but cannot do what the user meant: a fixed-size pool, a step wider
/// than the pool's whole range.
fn validate_autoscaler(spec: &Spec, a: &crate::spec::model::Autoscaler, diags: &mut Diagnostics) {
    let Some(pool) = spec.gpu_pools.get(&a.pool.value) else { return };
    let (min, max) = (&pool.nodes.min, &pool.nodes.max);
    if min.value == max.value {
        diags.push(
            Diagnostic::warning(
                "gpuplan::spec::autoscaler_fixed",
                format!("`{}` has min = max = {}: its autoscaler can never change its size", a.pool.value, max.value),
            )
            .at(a.pool.span, "autoscales a pool of fixed size")
            .at(max.span, "max")
            .help("widen `nodes { min max }`, or remove the autoscaler"),
        );
    } else if min.value < max.value && a.step.value > max.value - min.value {
        diags.push(
            Diagnostic::warning(
                "gpuplan::spec::autoscaler_step",
                format!(
                    "`step = {}` is larger than the range of `{}` ({}..{}): one step goes from one bound to the other",
                    a.step.value, a.pool.value, min.value, max.value
                ),
            )
            .at(a.step.span, "step")
            .help(format!("use a step of at most {} to scale gradually", max.value - min.value)),
        );
    }
}

/// The provider block a pool uses, if declared.
pub fn pool_provider<'s>(spec: &'s Spec, pool: &GpuPool) -> Option<&'s Provider> {
    spec.providers.get(&pool.provider.value)
}

/// The region a pool runs in: its own, else its provider's.
pub fn pool_region<'s>(spec: &'s Spec, pool: &'s GpuPool) -> Option<&'s Spanned<String>> {
    pool.region.as_ref().or_else(|| pool_provider(spec, pool).and_then(|p| p.region.as_ref()))
}

fn validate_pool<'c>(
    known: Known<'_>,
    cat: &'c Catalog,
    zones: &ZoneLists<'c>,
    addr: &Address,
    pool: &GpuPool,
    diags: &mut Diagnostics,
) {
    let gpu_ok = check_gpu_shape(cat, addr, pool, diags);
    let Some(provider) = known.provider(&pool.provider.value) else {
        diags.push(missing_provider(known.spec, addr, pool));
        return;
    };
    let Some(kind) = provider.kind.value else { return };
    check_pool_cluster(addr, kind, pool, diags);
    let Some((reg, region)) = known_region(cat, kind, addr, pool, provider, diags) else { return };
    check_zones(&zones.of(cat, kind, &reg.name), reg, pool, diags);
    check_instance_types(cat, kind, reg, region, pool, gpu_ok, diags);
    let cny = provider.cny_per_usd.as_ref().map(|c| c.value).unwrap_or(catalog::DEFAULT_CNY_PER_USD);
    if gpu_ok && pool.instance_types.is_empty() {
        check_some_type_has_shape(cat, kind, reg, pool, cny, diags);
    }
    if gpu_ok {
        check_zones_offer_shape(cat, zones, kind, addr, pool, region, cny, diags);
        crate::spec::validate_hardware::check(cat, kind, addr, pool, &region.value, cny, diags);
        if kind == ProviderKind::Aws {
            crate::spec::validate_hardware::check_efa_groups(addr, provider, pool, diags);
        }
    }
    crate::spec::validate_hardware::check_erdma_interface(kind, addr, pool, provider, diags);
    crate::spec::validate_hardware::check_rdma_job_zones(kind, addr, pool, known.spec, diags);
}

/// What the pool's `kubernetes` block asks of its provider: `cluster_id` only where
/// gpuplan can fetch the cluster's kubeconfig, and what joining nodes to the cluster needs.
fn check_pool_cluster(addr: &Address, kind: ProviderKind, pool: &GpuPool, diags: &mut Diagnostics) {
    if let Some(c) = pool.kubernetes.as_ref().and_then(|k| k.cluster_id.as_ref())
        && !matches!(kind, ProviderKind::Tencentcloud | ProviderKind::Alicloud)
    {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::kubernetes_cluster_id",
                format!("`{addr}` is a `{kind}` pool: `cluster_id` names TKE and ACK clusters only"),
            )
            .at(c.span, "gpuplan cannot fetch this cluster's kubeconfig")
            .help("use `kubeconfig = \"~/.kube/config\"` (and `context`) for this cluster"),
        );
    }
    if let Some(k) = &pool.kubernetes
        && let Some(c) = &k.cluster_id
    {
        check_cluster_join(addr, kind, k, c, diags);
    }
    if let Some(k) = &pool.kubernetes
        && k.kubeconfig.is_some()
        && kind == ProviderKind::Aws
        && k.service_cidr.is_none()
    {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::eks_service_cidr",
                format!("`{addr}` joins its nodes to an EKS cluster, which needs `service_cidr`"),
            )
            .at(k.kubeconfig.as_ref().map_or(pool.meta.span, |c| c.span), "nodes of this cluster join with nodeadm")
            .help(
                "add `service_cidr = \"10.100.0.0/16\"`: the cluster's `serviceIpv4Cidr` (`aws eks describe-cluster`)",
            ),
        );
    }
}

/// The pool's region (its own, else its provider's) in the catalog; `None`, with the
/// problem reported, when there is none or the catalog does not know it.
fn known_region<'c, 'p>(
    cat: &'c Catalog,
    kind: ProviderKind,
    addr: &Address,
    pool: &'p GpuPool,
    provider: &'p Provider,
    diags: &mut Diagnostics,
) -> Option<(&'c catalog::Region, &'p Spanned<String>)> {
    let Some(region) = pool.region.as_ref().or(provider.region.as_ref()) else {
        diags.push(
            Diagnostic::error("gpuplan::spec::missing_region", format!("`{addr}` has no region"))
                .at(pool.meta.span, "set `region` here or in the provider block")
                .help(format!(
                    "add `region = \"{}\"`",
                    cat.regions(kind).first().map(|r| r.name.as_str()).unwrap_or("us-east-1")
                )),
        );
        return None;
    };
    let Some(reg) = cat.region(kind, &region.value) else {
        let names: Vec<&str> = cat.regions(kind).iter().map(|r| r.name.as_str()).collect();
        let d = Diagnostic::error(
            "gpuplan::spec::region",
            format!("unknown region {:?} for provider `{kind}`", region.value),
        )
        .at(region.span, "not in the catalog for this provider");
        diags.push(match did_you_mean(&region.value, names.iter().copied()) {
            Some(s) => d.help(format!("did you mean {s:?}?")),
            None => d.help(format!("regions: {}", names.join(", "))),
        });
        return None;
    };
    Some((reg, region))
}

/// Every zone the pool lists is one of its region's.
fn check_zones(region_zones: &[&str], reg: &catalog::Region, pool: &GpuPool, diags: &mut Diagnostics) {
    for z in &pool.zones {
        if !region_zones.contains(&z.value.as_str()) {
            let d =
                Diagnostic::error("gpuplan::spec::zone", format!("zone {:?} is not in region {:?}", z.value, reg.name))
                    .at(z.span, "unknown zone");
            // A typo of one of the region's zones gets a suggestion (not one the pool lists
            // already); a zone of another region gets the list.
            let unused = region_zones.iter().copied().filter(|c| !pool.zones.iter().any(|z| z.value == *c));
            let typo = if z.value.starts_with(reg.name.as_str()) { did_you_mean(&z.value, unused) } else { None };
            diags.push(match typo {
                Some(s) => d.help(format!("did you mean {s:?}?")),
                None => d.help(format!("zones of {}: {}", reg.name, region_zones.join(", "))),
            });
        }
    }
}

/// Every instance type the pool lists exists for its provider, has the pool's GPU shape
/// (when the GPU model is known: `gpu_ok`) and is offered in its region.
fn check_instance_types(
    cat: &Catalog,
    kind: ProviderKind,
    reg: &catalog::Region,
    region: &Spanned<String>,
    pool: &GpuPool,
    gpu_ok: bool,
    diags: &mut Diagnostics,
) {
    for it in &pool.instance_types {
        let Some(t) = cat.instance_type(kind, &it.value) else {
            let names: Vec<&str> = cat.instance_types(kind).iter().map(|t| t.name.as_str()).collect();
            let d = Diagnostic::error(
                "gpuplan::spec::instance_type",
                format!("unknown instance type {:?} for provider `{kind}`", it.value),
            )
            .at(it.span, "not in the catalog");
            let elsewhere = ProviderKind::ALL
                .into_iter()
                .find(|k| *k != ProviderKind::Sim && cat.instance_type(*k, &it.value).is_some());
            diags.push(match (did_you_mean(&it.value, names.iter().copied()), elsewhere) {
                (_, Some(other)) => d.help(format!(
                    "{:?} is an instance type of `{other}`; use it in a pool whose provider is `{other}`",
                    it.value
                )),
                (Some(s), None) => d.help(format!("did you mean {s:?}?")),
                (None, None) => d.help("run `gpuplan offers --gpu MODEL` to list instance types"),
            });
            continue;
        };
        if gpu_ok && t.gpu != pool.gpu.value {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::instance_type",
                    format!("{} has {} GPUs, but the pool asks for {}", t.name, t.gpu, pool.gpu.value),
                )
                .at(it.span, format!("{} GPUs", t.gpu))
                .at(pool.gpu.span, "pool GPU model")
                .help(
                    "pick an instance type with the pool's GPU model, or drop `instance_types` to let gpuplan choose",
                ),
            );
        } else if t.gpus != pool.gpus_per_node.value {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::instance_type",
                    format!(
                        "{} has {} GPUs per node, but `gpus_per_node` is {}",
                        t.name, t.gpus, pool.gpus_per_node.value
                    ),
                )
                .at(it.span, format!("{} GPUs per node", t.gpus))
                .at(pool.gpus_per_node.span, "gpus_per_node"),
            );
        }
        if !t.offered_in(&reg.name) {
            diags.push(
                Diagnostic::error("gpuplan::spec::instance_type", format!("{} is not offered in {}", t.name, reg.name))
                    .at(it.span, "not offered in this region")
                    .at(region.span, "region")
                    .help(format!("regions offering it: {}", t.regions.join(", "))),
            );
        }
    }
}

/// A pool that lets gpuplan choose its instance type: some type in its region has its
/// GPU model and GPUs per node; if none does, say where the model is offered and how.
fn check_some_type_has_shape(
    cat: &Catalog,
    kind: ProviderKind,
    reg: &catalog::Region,
    pool: &GpuPool,
    cny: f64,
    diags: &mut Diagnostics,
) {
    if cat.matching(kind, &reg.name, &pool.gpu.value, pool.gpus_per_node.value, cny).is_empty() {
        let mut sizes: Vec<u32> = cat
            .instance_types(kind)
            .iter()
            .filter(|t| t.gpu == pool.gpu.value && t.offered_in(&reg.name))
            .map(|t| t.gpus)
            .collect();
        sizes.sort();
        sizes.dedup();
        let help = if sizes.is_empty() {
            let mut regions: Vec<&str> = cat
                .instance_types(kind)
                .iter()
                .filter(|t| t.gpu == pool.gpu.value)
                .flat_map(|t| t.regions.iter().map(String::as_str))
                .collect();
            regions.sort();
            regions.dedup();
            if regions.is_empty() {
                format!(
                    "`{kind}` offers no {} instances; try another provider (`gpuplan offers --gpu {}`)",
                    pool.gpu.value, pool.gpu.value
                )
            } else {
                format!("{} is offered in: {}", pool.gpu.value, regions.join(", "))
            }
        } else {
            format!(
                "in {} it comes with {} GPUs per node",
                reg.name,
                sizes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            )
        };
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::no_instance_type",
                format!(
                    "no `{kind}` instance type in {} has {} × {}",
                    reg.name, pool.gpus_per_node.value, pool.gpu.value
                ),
            )
            .at(pool.gpu.span, "GPU model")
            .at(pool.gpus_per_node.span, "GPUs per node")
            .help(help),
        );
    }
}

/// The pool's GPU model and MIG profile against the catalog; true when the model is known.
fn check_gpu_shape(cat: &Catalog, addr: &Address, pool: &GpuPool, diags: &mut Diagnostics) -> bool {
    let gpu_ok = check_gpu_model(cat, &pool.gpu, diags);
    if let Some(m) = pool.mig.as_ref().filter(|_| gpu_ok)
        && crate::catalog::mig_slices(&pool.gpu.value, &m.value).is_none()
    {
        let offered = crate::catalog::mig_profiles(&pool.gpu.value);
        let d = Diagnostic::error(
            "gpuplan::spec::mig_profile",
            format!("`{addr}`: {} GPUs do not offer the MIG profile {:?}", pool.gpu.value, m.value),
        )
        .at(m.span, "not a MIG profile of this GPU model")
        .at(pool.gpu.span, "GPU model");
        diags.push(match (offered.is_empty(), did_you_mean(&m.value, offered.iter().copied())) {
            (true, _) => d.help(format!("{} has no MIG; MIG needs A100 or H100 GPUs: remove `mig`", pool.gpu.value)),
            (false, Some(s)) => d.help(format!("did you mean {s:?}? profiles: {}", offered.join(", "))),
            (false, None) => d.help(format!("profiles of {}: {}", pool.gpu.value, offered.join(", "))),
        });
    }
    gpu_ok
}

/// A pool names a provider block that no block declares, not even one that failed.
fn missing_provider(spec: &Spec, addr: &Address, pool: &GpuPool) -> Diagnostic {
    let declared: Vec<&str> = spec.providers.keys().map(String::as_str).collect();
    let known_kind = ProviderKind::ALL.iter().any(|k| k.as_str() == pool.provider.value);
    let d = Diagnostic::error(
        "gpuplan::spec::missing_provider",
        format!("`{addr}` uses provider {:?}, but no such provider block is declared", pool.provider.value),
    )
    .at(pool.provider.span, "no provider block with this name");
    match did_you_mean(&pool.provider.value, declared.iter().copied()) {
        Some(s) => d.help(format!("did you mean {s:?}?")),
        None if known_kind => d.help(format!("add `provider \"{}\" {{}}` to the spec", pool.provider.value)),
        None => d.help(format!(
            "declared providers: {}",
            if declared.is_empty() { "none".into() } else { declared.join(", ") }
        )),
    }
}

/// What joining a pool's nodes to its TKE or ACK cluster needs (README, "Kubernetes").
fn check_cluster_join(
    addr: &Address,
    kind: ProviderKind,
    k: &crate::spec::model::Kubernetes,
    cluster: &Spanned<String>,
    diags: &mut Diagnostics,
) {
    if kind == ProviderKind::Alicloud && k.key_pair.is_none() {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::ack_key_pair",
                format!("`{addr}` joins ACK cluster `{}` but names no `key_pair`", cluster.value),
            )
            .at(cluster.span, "ACK logs in to each node to attach it")
            .help("add `key_pair = \"NAME\"`, an ECS key pair of the region that ACK may use"),
        );
    }
}

/// Is `gpu` a canonical catalog GPU model? Reports and returns false if not.
fn check_gpu_model(cat: &Catalog, gpu: &Spanned<String>, diags: &mut Diagnostics) -> bool {
    if cat.gpu_model(&gpu.value).is_some() {
        return true;
    }
    let like = catalog::gpu_models_like(&gpu.value);
    let d = Diagnostic::error("gpuplan::spec::gpu", format!("unknown GPU model {:?}", gpu.value))
        .at(gpu.span, "not a catalog GPU model");
    let names: Vec<&str> = catalog::GPU_MODELS.iter().map(|m| m.name).collect();
    diags.push(match (like.as_slice(), did_you_mean(&gpu.value, names.iter().copied())) {
        ([one], _) => d.help(format!("did you mean {:?}?", one.name)),
        ([_, ..], _) => d.help(format!("which one: {}?", like.iter().map(|m| m.name).collect::<Vec<_>>().join(", "))),
        ([], Some(s)) => d.help(format!("did you mean {s:?}?")),
        ([], None) => d.help(format!("GPU models: {}", names.join(", "))),
    });
    false
}

fn validate_jobs(spec: &Spec, diags: &mut Diagnostics) {
    for (addr, job) in &spec.jobs {
        if let Some(t) = spec.job_templates.get(&job.template.value) {
            crate::spec::secrets::check_job(spec, addr, job, t, diags);
        }
        let (Some(t), Some(pool)) = (spec.job_templates.get(&job.template.value), spec.gpu_pools.get(&job.pool.value))
        else {
            continue;
        };
        check_job_fits(addr, job, t, pool, diags);
        if let Some(q) = &job.quota
            && let Some(quota) = spec.quotas.get(&q.value)
            && !quota.pools.is_empty()
            && !quota.pools.iter().any(|p| p.value == job.pool.value)
        {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::job_quota",
                    format!("`{addr}` runs on `{}`, which `{}` does not cover", job.pool.value, q.value),
                )
                .at(job.pool.span, "pool")
                .at(q.span, "quota")
                .help(format!("add {} to the quota's `pools`", job.pool.value)),
            );
        }
        // A job its quota can never admit (a GPU model it does not allow, more GPUs than
        // `max_gpus`) stays a planning verdict: it waits with the reason `quota`, shown in
        // the plan, so a quota can be raised without the spec becoming invalid.
    }
}

/// A job's replicas are placed together (all or none), each on a single node: a replica
/// wider than a node, or more replicas than `nodes.max` nodes can hold, would wait forever.
fn check_job_fits(addr: &Address, job: &Job, t: &JobTemplate, pool: &GpuPool, diags: &mut Diagnostics) {
    // On a MIG pool a job's `gpus` count slices.
    let (gpus, per_node, max) = (t.gpus.value, pool.job_units_per_node(), pool.nodes.max.value);
    let unit = if pool.mig.is_some() { "MIG slices" } else { "GPUs" };
    if gpus > per_node {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::job_gpus",
                format!(
                    "`{addr}` needs {gpus} {unit} per replica, but a node of `{}` has {per_node}; a replica runs on one node",
                    job.pool.value
                ),
            )
            .at(t.gpus.span, "GPUs per replica")
            .at(job.pool.span, "pool")
            .at(pool.gpus_per_node.span, format!("{per_node} {unit} per node"))
            .help(format!(
                "lower the template's `gpus` to at most {per_node}, or run the job on a pool with larger nodes"
            )),
        );
        return;
    }
    let replicas = job.replicas.value;
    // gpus ≥ 1 (decoding enforces it) and ≤ per_node here, so at least one fits a node.
    let per_node_replicas = (per_node / gpus.max(1)).max(1);
    let nodes_needed = replicas.div_ceil(per_node_replicas);
    if nodes_needed > max {
        let mut d = Diagnostic::error(
            "gpuplan::spec::job_gpus",
            format!(
                "`{addr}` needs {replicas} × {gpus} GPUs, which takes {nodes_needed} nodes of `{}` ({per_node_replicas} replica(s) per node), but its `nodes.max` is {max}",
                job.pool.value
            ),
        )
        .at(job.pool.span, "pool too small");
        if job.replicas.span != job.meta.span {
            d = d.at(job.replicas.span, "replicas");
        }
        diags.push(
            d.at(pool.nodes.max.span, "nodes.max")
                .help(format!("raise the pool's `nodes.max` to at least {nodes_needed}, or run fewer replicas")),
        );
    }
}

/// Jobs without `pool`: their template's `gpu` names the model; every pool of that model
/// (within the job's quota's pools, when it lists some) is a choice, the first by address
/// the default. Placement picks the cheapest with room (`jobs::place`).
pub fn resolve_job_pools(spec: &mut Spec, diags: &mut Diagnostics) {
    let cat = catalog::catalog();
    let canonical = |g: &str| cat.gpu_model(g).map_or_else(|| g.to_string(), |m| m.name.to_string());
    let mut resolved: Vec<(Address, Spanned<Address>, Vec<Address>)> = Vec::new();
    for (addr, job) in spec.jobs.iter().filter(|(_, j)| j.pool.value.name.is_empty()) {
        let Some(t) = spec.job_templates.get(&job.template.value) else { continue };
        let Some(gpu) = &t.gpu else {
            diags.push(
                Diagnostic::error("gpuplan::spec::job_pool", format!("`{addr}` names no `pool`, and its template no `gpu`"))
                    .at(job.pool.span, "where does it run?")
                    .help("add `pool = gpu_pool.NAME`, or `gpu = \"A100-80GB\"` to its template to run on the cheapest pool of that model"),
            );
            continue;
        };
        let model = canonical(&gpu.value);
        let quota_pools: Vec<&Address> = job
            .quota
            .as_ref()
            .and_then(|q| spec.quotas.get(&q.value))
            .map(|q| q.pools.iter().map(|p| &p.value).collect())
            .unwrap_or_default();
        let choices: Vec<Address> = spec
            .gpu_pools
            .iter()
            .filter(|(a, p)| canonical(&p.gpu.value) == model && (quota_pools.is_empty() || quota_pools.contains(a)))
            .map(|(a, _)| a.clone())
            .collect();
        match choices.first() {
            Some(first) => resolved.push((addr.clone(), Spanned::new(first.clone(), gpu.span), choices)),
            None => {
                let have: Vec<String> = spec.gpu_pools.iter().map(|(a, p)| format!("{a} ({})", p.gpu.value)).collect();
                diags.push(
                    Diagnostic::error(
                        "gpuplan::spec::job_pool",
                        format!("`{addr}` asks for {model} GPUs, but no pool it may use has them"),
                    )
                    .at(gpu.span, "no pool of this model")
                    .at(job.pool.span, "job")
                    .help(if have.is_empty() {
                        "declare a `gpu_pool` of this model".to_string()
                    } else {
                        format!("pools: {}", have.join(", "))
                    }),
                );
            }
        }
    }
    for (addr, pool, choices) in resolved {
        if let Some(j) = spec.jobs.get_mut(&addr) {
            j.pool = pool;
            j.pool_choices = choices;
        }
    }
}

/// Every zone a pool may use must sell its shape: a node planned into a zone that has none
/// of the pool's instance types can never launch, and a pool left with no zone at all would
/// plan zero nodes at zero cost while its `nodes` ask for more. Unknown zones and instance
/// types are reported by [`validate_pool`] already; this looks only at known ones.
// The catalog and its zone lists travel together; the rest is the pool being checked.
#[allow(clippy::too_many_arguments)]
fn check_zones_offer_shape<'c>(
    cat: &'c Catalog,
    zones: &ZoneLists<'c>,
    kind: ProviderKind,
    addr: &Address,
    pool: &GpuPool,
    region: &Spanned<String>,
    cny_per_usd: f64,
    diags: &mut Diagnostics,
) {
    let gpn = pool.gpus_per_node.value;
    let types: Vec<&catalog::InstanceType> = if pool.instance_types.is_empty() {
        cat.matching(kind, &region.value, &pool.gpu.value, gpn, cny_per_usd)
    } else {
        pool.instance_types
            .iter()
            .filter_map(|t| cat.instance_type(kind, &t.value))
            .filter(|t| t.gpu == pool.gpu.value && t.gpus == gpn && t.offered_in(&region.value))
            .collect()
    };
    if types.is_empty() {
        return; // no instance type at all: reported above
    }
    // The usual pool names no zones: all that matters is that some zone sells a type, and
    // the first type offered anywhere in the region answers (checked for every pool).
    if pool.zones.is_empty() && types.iter().any(|t| !cat.type_zones(t, &region.value).is_empty()) {
        return;
    }
    let region_zones = zones.of(cat, kind, &region.value);
    let mut offering: Vec<&str> = Vec::new();
    for t in &types {
        for z in cat.type_zones(t, &region.value) {
            if !offering.contains(&z) {
                offering.push(z);
            }
        }
    }
    offering.sort_unstable();
    // Words of the messages only: not made for the pools that pass.
    let shape = || format!("{gpn} × {}", pool.gpu.value);
    let names = || types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ");
    if offering.is_empty() {
        let (shape, names) = (shape(), names());
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::zone_shape",
                format!("`{addr}`: no zone of {} sells {shape} ({names})", region.value),
            )
            .at(pool.gpu.span, "GPU model")
            .at(region.span, "region")
            .help(format!("{}; or pick another region", shapes_on_offer(cat, kind, &region.value, &region_zones))),
        );
        return;
    }
    for z in pool.zones.iter().filter(|z| region_zones.contains(&z.value.as_str())) {
        if offering.contains(&z.value.as_str()) {
            continue;
        }
        let (shape, names) = (shape(), names());
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::zone_shape",
                format!("`{addr}`: zone {:?} does not sell {shape} ({names})", z.value),
            )
            .at(z.span, "no node of this pool can launch here")
            .at(pool.gpu.span, "GPU model")
            .help(format!(
                "zones of {} selling {shape}: {}; {}",
                region.value,
                offering.join(", "),
                shapes_on_offer(cat, kind, &region.value, &[z.value.as_str()])
            )),
        );
    }
}

/// `ap-guangzhou-3 sells 1, 2 or 4 × T4; 8 × V100-32GB`: the GPU shapes (GPUs per node × model)
/// sold in `zones` of `region`, for hints.
fn shapes_on_offer(cat: &Catalog, kind: ProviderKind, region: &str, zones: &[&str]) -> String {
    let mut shapes: Vec<(&str, u32)> = cat
        .instance_types(kind)
        .into_iter()
        .filter(|t| cat.type_zones(t, region).iter().any(|z| zones.contains(z)))
        .map(|t| (t.gpu.as_str(), t.gpus))
        .collect();
    shapes.sort_unstable();
    shapes.dedup();
    let place = if zones.len() == 1 { zones[0].to_string() } else { region.to_string() };
    if shapes.is_empty() {
        return format!("{place} sells no GPU instance type");
    }
    // One entry per model, its node sizes joined: `1, 2 or 4 × T4`.
    let mut list: Vec<String> = Vec::new();
    for chunk in shapes.chunk_by(|a, b| a.0 == b.0) {
        let sizes: Vec<String> = chunk.iter().map(|(_, n)| n.to_string()).collect();
        let sizes = match sizes.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => sizes.join(""),
        };
        list.push(format!("{sizes} × {}", chunk[0].0));
    }
    format!("{place} sells {}", list.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo answers what the catalog answers, for every kind and region (asked twice,
    /// in turn, so that each answer after the first comes from the memo), and for a
    /// region the catalog does not know.
    #[test]
    fn zone_lists_answer_as_the_catalog() {
        let cat = catalog::catalog();
        let zones = ZoneLists::default();
        for _ in 0..2 {
            for kind in ProviderKind::ALL {
                for r in cat.regions(kind) {
                    assert_eq!(&*zones.of(cat, kind, &r.name), cat.region_zones(kind, &r.name).as_slice());
                }
                assert!(zones.of(cat, kind, "nowhere-1").is_empty());
            }
        }
        assert!(zones.0.borrow().len() > ProviderKind::ALL.len(), "one list per kind and region");
    }
}
