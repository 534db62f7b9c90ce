//! `gpuplan check`: before anything else in CI, ask every provider block and the state
//! backend whether the credentials, endpoint and region work (as SkyPilot's `sky check`
//! does). One cheap read per provider and region, in parallel, each bounded in time; a
//! fix hint per failure; exit 1 when any fails. Each line names the credential source
//! that answered (never a value). Nothing is written.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::output::{self, Style};
use super::{ExitStatus, Settings, load, runtime};
use crate::model::{ErrorClass, ListFilter, ProviderKind};
use crate::state::Backend;

/// How long one probe may take: a dead endpoint must not stall a CI job.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

struct Outcome {
    what: String,
    result: Result<String, (String, String)>,
}

pub fn run(settings: &Settings) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let spec = &loaded.spec;
    let ws = settings.workspace().with_backend(spec).reading();
    let mut outcomes = Vec::new();

    // The state backend.
    outcomes.push(backend_probe(&ws));

    // Every provider, in every region its pools use (its own region when none does).
    let mut regions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, p) in &spec.providers {
        let list = regions.entry(name.clone()).or_default();
        if let Some(r) = &p.region {
            list.push(r.value.clone());
        }
    }
    for pool in spec.gpu_pools.values() {
        let name = pool.provider.value.clone();
        let region = pool.region.as_ref().map(|r| r.value.clone());
        if let (Some(list), Some(r)) = (regions.get_mut(&name), region)
            && !list.contains(&r)
        {
            list.push(r);
        }
    }
    let empty = crate::state::State::new("gpuplan-check".into());
    let providers = crate::engine::providers::build(&ws, spec, &empty);
    match providers {
        Err(e) => outcomes.push(Outcome { what: "providers".into(), result: Err((e.to_string(), String::new())) }),
        Ok(set) => {
            let probes = regions.iter().flat_map(|(name, rs)| rs.iter().map(move |r| (name.clone(), r.clone())));
            let futures: Vec<_> = probes
                .filter_map(|(name, region)| set.get(&name).map(|p| (name, region, p.clone())))
                .map(|(name, region, provider)| async move {
                    let kind = provider.kind();
                    let what = format!("provider \"{name}\" ({kind}, {region})");
                    let t = Instant::now();
                    // A lineage nothing carries: the call proves access and lists nothing.
                    let filter = ListFilter { region: region.clone(), lineage: Some("gpuplan-check".into()) };
                    // A provider that makes no nodes lists none, as a list that finds none.
                    let list = async {
                        match provider.nodes() {
                            Some(nodes) => nodes.list_nodes(&filter).await.map(drop),
                            None => Ok(()),
                        }
                    };
                    let result = match tokio::time::timeout(PROBE_TIMEOUT, list).await {
                        Ok(Ok(_)) => Ok(format!("credentials and endpoint work ({:.1} s)", t.elapsed().as_secs_f64())),
                        Ok(Err(e)) => Err(failure(&e.to_string(), kind, e.class)),
                        Err(_) => Err((
                            format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
                            "check the endpoint and the network path to it".into(),
                        )),
                    };
                    Outcome { what, result: with_source(result, provider.credential_source()) }
                })
                .collect();
            outcomes.extend(runtime::block_on(join_all(futures))?);
            let reached: Vec<(String, String)> = regions
                .iter()
                .flat_map(|(name, rs)| rs.iter().map(move |r| (name.clone(), r.clone())))
                .filter(|(name, r)| {
                    outcomes.iter().any(|o| {
                        o.what.starts_with(&format!("provider \"{name}\" ("))
                            && o.what.contains(r.as_str())
                            && o.result.is_ok()
                    })
                })
                .collect();
            outcomes.extend(runtime::block_on(join_all(quota_probes(spec, &set, reached)))?);
            outcomes.extend(runtime::block_on(join_all(cluster_probes(spec, &set)))?);
        }
    }

    let mut text = String::new();
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    for o in &outcomes {
        match &o.result {
            Ok(detail) => {
                text +=
                    &format!("{} {}: {detail}\n", output::paint("ok  ", Style::Success, settings.color_stdout), o.what)
            }
            Err((message, hint)) => {
                text +=
                    &format!("{} {}: {message}\n", output::paint("FAIL", Style::Error, settings.color_stdout), o.what);
                if !hint.is_empty() {
                    text += &format!("     hint: {hint}\n");
                }
            }
        }
    }
    if spec.providers.values().any(|p| p.kind.value == Some(ProviderKind::Aws)) {
        text += "AWS quotas: not checked (they are in the Service Quotas API, which gpuplan does not read); a launch over quota fails with EC2's quota error\n";
    }
    text += &format!("{} passed, {failed} failed\n", outcomes.len() - failed);
    output::stdout(&text);
    Ok(if failed > 0 { ExitStatus::Error } else { ExitStatus::Success })
}

/// The state backend: where it is, whether it answers, and (s3) which credential source
/// answered.
fn backend_probe(ws: &crate::engine::Workspace) -> Outcome {
    let hint_of = |e: &crate::state::StateError| miette::Diagnostic::help(e).map(|h| h.to_string()).unwrap_or_default();
    match ws.backend_and_credentials() {
        Ok((Backend::Local(b), _)) => {
            Outcome { what: "state backend: local".into(), result: Ok(crate::spec::display_path(b.path())) }
        }
        Ok((Backend::Remote(b), chain)) => {
            let t = Instant::now();
            let result = b
                .check()
                .map(|found| format!("{found} ({:.1} s)", t.elapsed().as_secs_f64()))
                .map_err(|e| (e.to_string(), hint_of(&e)));
            let source = chain.and_then(|c| c.source());
            Outcome { what: format!("state backend: {}", b.url()), result: with_source(result, source) }
        }
        Err(e) => Outcome { what: "state backend".into(), result: Err((e.to_string(), hint_of(&e))) },
    }
}

/// A probe's outcome with the credential source that answered, when one did: its name,
/// never a value.
fn with_source(result: Result<String, (String, String)>, source: Option<String>) -> Result<String, (String, String)> {
    let Some(source) = source else { return result };
    match result {
        Ok(detail) => Ok(format!("{detail}; credentials from {source}")),
        Err((message, hint)) => Err((format!("{message} (credentials from {source})"), hint)),
    }
}

/// The account quotas each reachable cloud reports (Tencent: instances per zone;
/// Alibaba: vCPUs per region), against what the pools may launch at `nodes.max`: a quota
/// that cannot hold it fails the check.
fn quota_probes(
    spec: &crate::spec::Spec,
    set: &crate::apply::ProviderSet,
    reached: Vec<(String, String)>,
) -> Vec<impl std::future::Future<Output = Outcome> + Send + 'static> {
    let cat = crate::catalog::catalog();
    reached
        .into_iter()
        .filter_map(|(name, region)| {
            let provider = set.get(&name)?.clone();
            let kind = provider.kind();
            // Only these clouds report launch quotas through the APIs gpuplan calls (AWS's
            // are in Service Quotas: said once below the checks).
            if !matches!(kind, ProviderKind::Tencentcloud | ProviderKind::Alicloud) {
                return None;
            }
            // What the pools of this provider and region may launch at most.
            let mut need: Vec<(String, Option<String>, u64)> = Vec::new();
            for pool in spec.gpu_pools.values().filter(|p| p.provider.value == name) {
                let pool_region = crate::spec::validate::pool_region(spec, pool).map(|r| r.value.clone());
                if pool_region.as_deref() != Some(region.as_str()) {
                    continue;
                }
                let max = u64::from(pool.nodes.max.value);
                let spot = pool.mix.spot_percent.value > 0;
                let vcpu = pool
                    .instance_types
                    .first()
                    .and_then(|t| cat.instance_type(kind, &t.value))
                    .map_or(0, |t| u64::from(t.vcpu));
                let whats = if spot { vec!["pay-as-you-go", "spot"] } else { vec!["pay-as-you-go"] };
                for w in whats {
                    match kind {
                        ProviderKind::Tencentcloud => {
                            let zones: Vec<String> = pool.zones.iter().map(|z| z.value.clone()).collect();
                            let n = zones.len().max(1) as u64;
                            for z in zones {
                                need.push((format!("{w} instances"), Some(z), max.div_ceil(n)));
                            }
                        }
                        _ => need.push((format!("{w} vCPUs"), None, max * vcpu)),
                    }
                }
            }
            Some(async move {
                let what = format!("quotas of provider \"{name}\" ({kind}, {region})");
                // A provider that makes no nodes reports no quotas for them.
                let quotas = async {
                    match provider.nodes() {
                        Some(nodes) => nodes.quotas(&region).await,
                        None => Ok(None),
                    }
                };
                let result = match tokio::time::timeout(PROBE_TIMEOUT, quotas).await {
                    Ok(Ok(None)) => Ok("not reported by this cloud's API".into()),
                    Ok(Ok(Some(lines))) => judge_quotas(&lines, &need),
                    Ok(Err(e)) => Err(failure(&e.to_string(), kind, e.class)),
                    Err(_) => Err((format!("no answer within {} s", PROBE_TIMEOUT.as_secs()), String::new())),
                };
                Outcome { what, result }
            })
        })
        .collect()
}

/// The quota lines the pools use, and whether each can hold what they may launch.
fn judge_quotas(
    lines: &[crate::providers::QuotaLine],
    need: &[(String, Option<String>, u64)],
) -> Result<String, (String, String)> {
    let mut shown = Vec::new();
    let mut short = Vec::new();
    for l in lines {
        let wanted: u64 =
            need.iter().filter(|(w, z, _)| *w == l.what && (z.is_none() || *z == l.zone)).map(|n| n.2).sum();
        if wanted == 0 {
            continue;
        }
        let left = l.limit.saturating_sub(l.used);
        let place = l.zone.as_ref().map(|z| format!(" in {z}")).unwrap_or_default();
        shown.push(format!("{}{place}: {} of {} used", l.what, l.used, l.limit));
        if left < wanted {
            short.push(format!("{}{place}: {left} left, the pools may need {wanted}", l.what));
        }
    }
    if !short.is_empty() {
        return Err((
            format!("not enough quota for the pools' nodes.max: {}", short.join("; ")),
            "raise the quota in the cloud's console (quota center), or lower nodes.max".into(),
        ));
    }
    Ok(if shown.is_empty() { "no quota the pools use is reported".into() } else { shown.join("; ") })
}

/// One probe per Kubernetes cluster and namespace the pools submit jobs to.
fn cluster_probes(
    spec: &crate::spec::Spec,
    set: &crate::apply::ProviderSet,
) -> Vec<impl std::future::Future<Output = Outcome> + Send + 'static> {
    use crate::providers::kube;
    let mut targets: Vec<(String, String, String)> = Vec::new();
    for pool in spec.gpu_pools.values() {
        let Some(k) = &pool.kubernetes else { continue };
        let locator = match (&k.kubeconfig, &k.cluster_id) {
            (Some(path), _) => kube::locator(&path.value, k.context.as_ref().map(|c| c.value.as_str())),
            (None, Some(id)) => match crate::spec::validate::pool_region(spec, pool) {
                Some(r) => kube::cluster_locator(&r.value, &id.value),
                None => continue, // validation reports a pool without a region
            },
            (None, None) => continue,
        };
        let t = (kube::name(&pool.provider.value), locator, k.namespace.value.clone());
        if !targets.contains(&t) {
            targets.push(t);
        }
    }
    targets
        .into_iter()
        .map(|(backend, locator, namespace)| {
            let provider = set.get(&backend).cloned();
            async move {
                let what = format!("Kubernetes cluster {} (namespace {namespace})", kube::describe(&locator));
                let Some(p) = provider else {
                    return Outcome { what, result: Err(("its provider block is missing".into(), String::new())) };
                };
                let t = Instant::now();
                let check = async {
                    crate::providers::ports::cluster_of(p.as_ref(), &locator)?.check_cluster(&locator, &namespace).await
                };
                let result = match tokio::time::timeout(PROBE_TIMEOUT, check).await {
                    Ok(Ok(detail)) => Ok(format!("{detail} ({:.1} s)", t.elapsed().as_secs_f64())),
                    Ok(Err(e)) => Err((e.message, cluster_hint(e.class))),
                    Err(_) => Err((
                        format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
                        "check the kubeconfig's server and the network path to it".into(),
                    )),
                };
                Outcome { what, result }
            }
        })
        .collect()
}

fn cluster_hint(class: ErrorClass) -> String {
    match class {
        ErrorClass::Auth => "the API server refused the kubeconfig's credentials; refresh them (e.g. `aws eks update-kubeconfig`, or a new token)".into(),
        ErrorClass::Retryable | ErrorClass::Throttled => "check the kubeconfig's server address and that it is reachable from here".into(),
        _ => String::new(),
    }
}

/// Run the probes concurrently (a slow endpoint does not hold up the others), in order.
async fn join_all<F>(futures: Vec<F>) -> Vec<Outcome>
where
    F: std::future::Future<Output = Outcome> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for (i, f) in futures.into_iter().enumerate() {
        set.spawn(async move { (i, f.await) });
    }
    let mut out: Vec<(usize, Outcome)> = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(pair) => out.push(pair),
            // A probe that panicked is a failed check, never a silent pass.
            Err(e) => out.push((
                usize::MAX,
                Outcome {
                    what: "a provider check".into(),
                    result: Err((format!("the check crashed: {e}"), String::new())),
                },
            )),
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, o)| o).collect()
}

/// A failed probe as (message, hint). A provider's message that carries its own hint
/// (`… (hint: …)` or a `hint:` line) gives it once, on the hint line; only a message
/// without one gets the generic hint for its class.
fn failure(message: &str, kind: ProviderKind, class: ErrorClass) -> (String, String) {
    let own = message
        .rsplit_once("\nhint: ")
        .map(|(m, h)| (m, h.to_string()))
        .or_else(|| message.strip_suffix(')').and_then(|m| m.rsplit_once(" (hint: ")).map(|(m, h)| (m, h.to_string())));
    match own {
        Some((m, h)) => (m.to_string(), h),
        None => (message.to_string(), hint(kind, class)),
    }
}

fn hint(kind: ProviderKind, class: ErrorClass) -> String {
    let creds = match kind {
        ProviderKind::Aws => "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity or an instance role",
        ProviderKind::Tencentcloud => {
            "TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY, OIDC, the profile file or a CVM role"
        }
        ProviderKind::Alicloud => {
            "ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, RRSA, ~/.aliyun/config.json or an ECS RAM role"
        }
        ProviderKind::Sim => "nothing: the sim cloud needs no credentials",
    };
    match class {
        ErrorClass::Auth => format!("the cloud refused the credentials; set {creds}"),
        ErrorClass::Invalid => "check the provider block's region and endpoint".into(),
        ErrorClass::Throttled | ErrorClass::Retryable => "a transient fault; run `gpuplan check` again".into(),
        _ => format!("check the endpoint and region, and the credentials ({creds})"),
    }
}
