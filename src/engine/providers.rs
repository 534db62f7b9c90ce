//! Building the providers a spec and its state need, by the local names pools use.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::apply::ProviderSet;
use crate::engine::Workspace;
use crate::providers::alicloud::{self, AlibabaProvider};
use crate::providers::aws::{AwsProvider, AwsSettings};
use crate::providers::http::{CloudConfig, CredentialCache, Endpoint, Secret};
use crate::providers::sim::{SimCloud, SimConfig, SimProvider};
use crate::providers::tencentcloud::{self, TencentProvider};
use crate::providers::{Provider, kube};
use crate::spec::Spec;
use crate::spec::model::{Provider as ProviderBlock, ProviderKind};
use crate::state::State;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ProviderSetupError {
    #[error("provider `{name}` ({kind}) is not available in this build yet")]
    #[diagnostic(
        code(gpuplan::provider::unavailable),
        help("use `provider \"sim\" {{}}` to try gpuplan without a cloud account")
    )]
    Unavailable { name: String, kind: String },
    #[error("cannot open the simulated cloud at `{path}`: {message}")]
    #[diagnostic(code(gpuplan::provider::sim))]
    Sim {
        path: String,
        message: String,
        /// The cloud's own way out (a lock to wait for, a file to move aside).
        #[help]
        help: Option<String>,
    },
    #[error("bad simulated-cloud setting: {0}")]
    #[diagnostic(
        code(gpuplan::provider::sim_config),
        help(
            "GPUPLAN_SIM_* variables take durations like `50ms`, rates like `0.1` and times like `2026-03-01T00:00:00Z`"
        )
    )]
    SimConfig(String),
    #[error("provider `{name}`: {message}")]
    #[diagnostic(
        code(gpuplan::provider::setup),
        help("check the provider block's `endpoint` and the `{env}` variable")
    )]
    Cloud { name: String, env: String, message: String },
    #[error("`{path}`: `resources.\"{address}\".provider_kind` is `{kind}`, a provider kind gpuplan does not know")]
    #[diagnostic(
        code(gpuplan::state::provider_kind),
        help("gpuplan knows {known}; a state written by a newer gpuplan needs that version")
    )]
    UnknownKind { path: String, address: String, kind: String, known: String },
}

/// The sim cloud's settings: the first sim provider block, then `GPUPLAN_SIM_*` variables.
pub fn sim_config(ws: &Workspace, block: Option<&ProviderBlock>) -> Result<SimConfig, ProviderSetupError> {
    let mut c = SimConfig::default();
    if let Some(b) = block {
        if let Some(s) = &b.seed {
            c.seed = s.value;
        }
        c.latency = b.latency.as_ref().map(|l| l.value.0);
        if let Some(f) = &b.failure_rate {
            c.failure_rate = f.value;
        }
        c.zone_capacity = b.zone_capacity.as_ref().map(|z| z.value);
        if let Some(d) = &b.job_duration {
            c.job_duration = d.value.0;
        }
    }
    c.read_only = ws.read_only;
    c.with_env(&ws.env).map_err(ProviderSetupError::SimConfig)
}

/// Open the embedded cloud of a workspace.
pub fn open_sim(ws: &Workspace, block: Option<&ProviderBlock>) -> Result<Arc<SimCloud>, ProviderSetupError> {
    open_sim_preread(ws, block, None)
}

/// [`open_sim`], with the cloud's files possibly read ahead ([`super::preread`]).
fn open_sim_preread(
    ws: &Workspace,
    block: Option<&ProviderBlock>,
    pre: Option<crate::providers::sim::Preread>,
) -> Result<Arc<SimCloud>, ProviderSetupError> {
    let config = sim_config(ws, block)?;
    let path = ws.sim_path();
    SimCloud::open_preread(&path, config, pre).map_err(|e| ProviderSetupError::Sim {
        path: path.display().to_string(),
        message: e.to_string(),
        help: miette::Diagnostic::help(&e).map(|h| h.to_string()),
    })
}

/// Providers for every name the spec declares and the state still refers to.
pub fn build(ws: &Workspace, spec: &Spec, state: &State) -> Result<ProviderSet, ProviderSetupError> {
    build_with_sim(ws, spec, state, None).map(|(set, _)| set)
}

/// What [`build`] reads of a spec, and nothing else: its provider blocks, its backend
/// and its pools that run on Kubernetes clusters. `apply FILE` keeps this and frees the
/// rest of the spec (hundreds of MB at 100,000 pools) before it reads the plan.
pub fn providers_part(spec: &Spec) -> Spec {
    Spec {
        providers: spec.providers.clone(),
        gpu_pools: spec
            .gpu_pools
            .iter()
            .filter(|(_, p)| p.kubernetes.is_some())
            .map(|(a, p)| (a.clone(), p.clone()))
            .collect(),
        backend: spec.backend.clone(),
        encryption: spec.encryption.clone(),
        ..Spec::default()
    }
}

/// [`build`], with the sim cloud's files possibly read ahead ([`super::preread`]).
pub fn build_preread(
    ws: &Workspace,
    spec: &Spec,
    state: &State,
    pre: Option<crate::providers::sim::Preread>,
) -> Result<ProviderSet, ProviderSetupError> {
    build_sim_preread(ws, spec, state, pre).map(|(set, _)| set)
}

/// [`build`], plus the embedded cloud itself when one is in use (`reconcile` reads its job
/// runs for the autoscaler, `apply` and `destroy` settle its log when done; the cloud is
/// one per process, so it cannot be opened twice), its files possibly read ahead.
pub fn build_with_sim(
    ws: &Workspace,
    spec: &Spec,
    state: &State,
    pre: Option<crate::providers::sim::Preread>,
) -> Result<(ProviderSet, Option<Arc<SimCloud>>), ProviderSetupError> {
    build_sim_preread(ws, spec, state, pre)
}

fn build_sim_preread(
    ws: &Workspace,
    spec: &Spec,
    state: &State,
    mut pre: Option<crate::providers::sim::Preread>,
) -> Result<(ProviderSet, Option<Arc<SimCloud>>), ProviderSetupError> {
    let mut wanted: BTreeMap<String, ProviderKind> = BTreeMap::new();
    for (name, p) in &spec.providers {
        if let Some(k) = p.kind.value {
            wanted.insert(name.clone(), k);
        }
    }
    for (address, r) in &state.resources {
        if let (Some(name), Some(kind)) = (&r.provider, &r.provider_kind) {
            // Never skipped: the pool's nodes would be left without a provider to manage them.
            let Some(k) = ProviderKind::ALL.into_iter().find(|k| k.as_str() == kind) else {
                return Err(ProviderSetupError::UnknownKind {
                    path: ws.state_path.display().to_string(),
                    address: address.clone(),
                    kind: kind.clone(),
                    known: ProviderKind::ALL.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
                });
            };
            wanted.entry(name.clone()).or_insert(k);
        }
    }
    let kinds = wanted.clone();
    let mut set: ProviderSet = BTreeMap::new();
    // TKE and ACK: their kubeconfigs, for pools with `kubernetes { cluster_id }`.
    let mut sources: BTreeMap<String, Arc<dyn kube::KubeconfigSource>> = BTreeMap::new();
    let mut sim: Option<Arc<dyn Provider>> = None;
    let mut cloud: Option<Arc<SimCloud>> = None;
    for (name, kind) in wanted {
        match kind {
            ProviderKind::Sim => {
                if sim.is_none() {
                    let block = spec.providers.values().find(|p| p.kind.value == Some(ProviderKind::Sim));
                    let c = open_sim_preread(ws, block, pre.take())?;
                    cloud = Some(c.clone());
                    sim = Some(Arc::new(SimProvider::new(c)));
                }
                if let Some(s) = &sim {
                    set.insert(name, s.clone());
                }
            }
            ProviderKind::Tencentcloud => {
                let config = cloud_config(ws, spec, &name, tencentcloud::ENV_ENDPOINT, ProviderKind::Tencentcloud)?;
                let p = TencentProvider::new(config).map_err(|e| setup_error(&name, tencentcloud::ENV_ENDPOINT, e))?;
                let p = Arc::new(p);
                sources.insert(name.clone(), p.clone());
                set.insert(name, p);
            }
            ProviderKind::Alicloud => {
                let config = cloud_config(ws, spec, &name, alicloud::ENV_ENDPOINT, ProviderKind::Alicloud)?;
                let p = AlibabaProvider::new(config).map_err(|e| setup_error(&name, alicloud::ENV_ENDPOINT, e))?;
                let p = Arc::new(p);
                sources.insert(name.clone(), p.clone());
                set.insert(name, p);
            }
            ProviderKind::Aws => {
                // A block removed from the spec while the state still has its nodes: the
                // standard credential chain and the regions the state records.
                let mut settings = spec
                    .providers
                    .get(&name)
                    .map(|b| AwsSettings::from_block(&name, b))
                    .unwrap_or_else(|| AwsSettings { name: name.clone(), ..AwsSettings::default() });
                settings.spec_dir = Some(ws.dir.clone());
                settings.home = ws.env.get("HOME").map(std::path::PathBuf::from);
                set.insert(name, Arc::new(AwsProvider::new(settings)));
            }
        }
    }
    // The Kubernetes backend of every provider whose pools have a `kubernetes {}` block,
    // or whose jobs the state recorded through one (a pool since removed from the spec).
    let mut kube_for: Vec<String> =
        spec.gpu_pools.values().filter(|p| p.kubernetes.is_some()).map(|p| p.provider.value.clone()).collect();
    for r in state.resources.values().filter_map(|r| r.job.as_ref()) {
        kube_for.extend(r.runs.iter().filter_map(|run| run.provider.strip_prefix(kube::PREFIX)).map(str::to_string));
    }
    let home = ws.env.get("HOME").map(std::path::PathBuf::from);
    for provider in kube_for {
        let name = kube::name(&provider);
        // A run whose provider block is gone entirely keeps the state's record (its
        // provider is reported as not configured where it is needed).
        if let (Some(kind), false) = (kinds.get(&provider), set.contains_key(&name)) {
            let source = sources.get(&provider).cloned();
            set.insert(name, Arc::new(kube::KubeJobs::new(*kind, &ws.dir, home.clone(), &state.lineage, source)));
        }
    }
    Ok((set, cloud))
}

fn setup_error(name: &str, env: &str, e: crate::providers::ProviderError) -> ProviderSetupError {
    ProviderSetupError::Cloud { name: name.to_string(), env: env.to_string(), message: e.message }
}

/// A self-signed cloud's settings from its provider block (by local name) and the
/// environment. A provider only the state still names gets the environment alone.
fn cloud_config(
    ws: &Workspace,
    spec: &Spec,
    name: &str,
    endpoint_env: &str,
    kind: ProviderKind,
) -> Result<CloudConfig, ProviderSetupError> {
    let block = spec.providers.get(name).or_else(|| spec.providers.values().find(|p| p.local_name() == name));
    let value = |v: Option<&crate::spec::model::Spanned<String>>| v.map(|s| s.value.clone());
    let env_endpoint = ws.env.get(endpoint_env).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let endpoint = match block.and_then(|b| value(b.endpoint.as_ref())).or(env_endpoint) {
        Some(e) => Some(Endpoint::parse(&e).map_err(|message| ProviderSetupError::Cloud {
            name: name.to_string(),
            env: endpoint_env.to_string(),
            message,
        })?),
        None => None,
    };
    let keys = block.and_then(|b| b.access_key.as_ref().zip(b.secret_key.as_ref()));
    let block_keys = keys.map(|(id, secret)| (id.value.clone(), Secret::new(secret.value.clone())));
    let (env, name_owned) = (ws.env.clone(), name.to_string());
    let chain: Box<dyn crate::providers::credentials::Resolve> = match kind {
        ProviderKind::Alicloud => Box::new(alicloud::credentials::Chain {
            name: name_owned,
            block: block_keys,
            env,
            api_endpoint: endpoint.clone(),
        }),
        _ => Box::new(tencentcloud::credentials::Chain {
            name: name_owned,
            block: block_keys,
            env,
            api_endpoint: endpoint.clone(),
        }),
    };
    let cny = block
        .and_then(|b| b.cny_per_usd.as_ref().map(|c| c.value))
        .or_else(|| ws.env.get("GPUPLAN_CNY_PER_USD").and_then(|v| v.trim().parse().ok()))
        .filter(|c: &f64| c.is_finite() && *c > 0.0)
        .unwrap_or(crate::catalog::DEFAULT_CNY_PER_USD);
    Ok(CloudConfig {
        name: name.to_string(),
        endpoint,
        credentials: std::sync::Arc::new(CredentialCache::new(chain)),
        image: block.and_then(|b| value(b.image.as_ref())),
        subnets: block
            .map(|b| b.subnets.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect())
            .unwrap_or_default(),
        security_groups: block.map(|b| b.security_groups.iter().map(|s| s.value.clone()).collect()).unwrap_or_default(),
        key_name: block.and_then(|b| value(b.key_name.as_ref())),
        cluster_id: block.and_then(|b| value(b.cluster_id.as_ref())),
        cny_per_usd: cny,
    })
}
