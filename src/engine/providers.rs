//! Building the providers a spec and its state need, by the local names pools use.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::apply::ProviderSet;
use crate::engine::Workspace;
use crate::providers::Provider;
use crate::providers::aws::{AwsProvider, AwsSettings};
use crate::providers::sim::{SimCloud, SimConfig, SimProvider};
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
    Sim { path: String, message: String },
    #[error("bad simulated-cloud setting: {0}")]
    #[diagnostic(
        code(gpuplan::provider::sim_config),
        help("GPUPLAN_SIM_* variables take durations like `50ms` and rates like `0.1`")
    )]
    SimConfig(String),
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
    }
    c.with_env(&ws.env).map_err(ProviderSetupError::SimConfig)
}

/// Open the embedded cloud of a workspace.
pub fn open_sim(ws: &Workspace, block: Option<&ProviderBlock>) -> Result<Arc<SimCloud>, ProviderSetupError> {
    let config = sim_config(ws, block)?;
    let path = ws.sim_path();
    SimCloud::open(&path, config)
        .map_err(|e| ProviderSetupError::Sim { path: path.display().to_string(), message: e.to_string() })
}

/// Providers for every name the spec declares and the state still refers to.
pub fn build(ws: &Workspace, spec: &Spec, state: &State) -> Result<ProviderSet, ProviderSetupError> {
    let mut wanted: BTreeMap<String, ProviderKind> = BTreeMap::new();
    for (name, p) in &spec.providers {
        if let Some(k) = p.kind.value {
            wanted.insert(name.clone(), k);
        }
    }
    for r in state.resources.values() {
        if let (Some(name), Some(kind)) = (&r.provider, &r.provider_kind) {
            let kind = ProviderKind::ALL.into_iter().find(|k| k.as_str() == kind);
            if let Some(k) = kind {
                wanted.entry(name.clone()).or_insert(k);
            }
        }
    }
    let mut set: ProviderSet = BTreeMap::new();
    let mut sim: Option<Arc<dyn Provider>> = None;
    for (name, kind) in wanted {
        match kind {
            ProviderKind::Sim => {
                if sim.is_none() {
                    let block = spec.providers.values().find(|p| p.kind.value == Some(ProviderKind::Sim));
                    sim = Some(Arc::new(SimProvider::new(open_sim(ws, block)?)));
                }
                if let Some(s) = &sim {
                    set.insert(name, s.clone());
                }
            }
            ProviderKind::Aws => {
                // A block removed from the spec while the state still has its nodes: the
                // standard credential chain and the regions the state records.
                let settings = spec
                    .providers
                    .get(&name)
                    .map(|b| AwsSettings::from_block(&name, b))
                    .unwrap_or_else(|| AwsSettings { name: name.clone(), ..AwsSettings::default() });
                set.insert(name, Arc::new(AwsProvider::new(settings)));
            }
            other => return Err(ProviderSetupError::Unavailable { name, kind: other.to_string() }),
        }
    }
    Ok(set)
}
