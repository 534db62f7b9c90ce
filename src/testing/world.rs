//! The private sim world a test file runs against: a temporary folder holding its own
//! state and sim cloud, removed when the file is done. Every provider of the spec is
//! replaced by that one sim cloud, so tests read no credentials and never touch a real
//! cloud, a remote backend or the project's `state/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::apply::ProviderSet;
use crate::engine::Workspace;
use crate::providers::Capacity;
use crate::providers::sim::{SimCloud, SimError, SimProvider};
use crate::spec::Spec;
use crate::spec::model::ProviderKind;
use crate::state::State;
use crate::testing::file::SimStep;

/// Environment variables a test world passes on: the sim's clock start and seed and the
/// exchange rate. Nothing else (no credentials, no `GPUPLAN_SIM_LATENCY`).
const PASSED_ON: &[&str] = &["GPUPLAN_SIM_START", "GPUPLAN_SIM_SEED", "GPUPLAN_CNY_PER_USD"];

pub struct World {
    root: PathBuf,
    pub ws: Workspace,
    /// The cloud as the last run opened it, with that run's job duration: kept open for
    /// the next run that asks for the same (reopening replays its log each time).
    open: std::sync::Mutex<Option<(Option<Duration>, Arc<SimCloud>)>>,
}

impl World {
    /// A fresh world for the specs of `dir`.
    pub fn new(dir: &Path, env: &BTreeMap<String, String>) -> std::io::Result<World> {
        let root = std::env::temp_dir().join(format!("gpuplan-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(root.join("state"))?;
        let env = env.iter().filter(|(k, _)| PASSED_ON.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone()));
        let ws = Workspace {
            dir: dir.to_path_buf(),
            state_path: root.join("state").join("default.json"),
            env: env.collect(),
            lock_timeout: Duration::from_secs(5),
            workspace: "default".into(),
            backend: None,
            encryption: None,
            read_only: false,
        };
        Ok(World { root, ws, open: std::sync::Mutex::new(None) })
    }

    /// Open the world's cloud with the spec's sim settings, without latency or injected
    /// failures (a test must not be slow or flaky), jobs lasting `job_duration` if given.
    pub fn open(&self, spec: &Spec, job_duration: Option<Duration>) -> Result<Arc<SimCloud>, String> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((d, cloud)) = open.as_ref()
            && *d == job_duration
        {
            return Ok(cloud.clone());
        }
        // Closed before it is opened again: the cloud's file lock is held while it is open.
        *open = None;
        let block = spec.providers.values().find(|p| p.kind.value == Some(ProviderKind::Sim));
        let mut config = crate::engine::providers::sim_config(&self.ws, block).map_err(|e| e.to_string())?;
        config.latency = None;
        config.failure_rate = 0.0;
        if let Some(d) = job_duration {
            config.job_duration = d;
        }
        let cloud = SimCloud::open(&self.ws.sim_path(), config).map_err(|e| e.to_string())?;
        *open = Some((job_duration, cloud.clone()));
        Ok(cloud)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // A leftover temp folder is harmless; failing a test run over it would not be.
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The spec as the test world runs it: every provider the sim cloud (same names, regions
/// and catalog instance types), no Kubernetes clusters, no remote backend.
pub fn simulated(mut spec: Spec) -> Spec {
    for p in spec.providers.values_mut() {
        p.kind.value = Some(ProviderKind::Sim);
    }
    for pool in spec.gpu_pools.values_mut() {
        pool.kubernetes = None;
    }
    spec.backend = None;
    spec
}

/// Every provider name the spec and the state use, all answered by `cloud`.
pub fn providers(cloud: &Arc<SimCloud>, spec: &Spec, state: &State) -> ProviderSet {
    let sim: Arc<dyn crate::providers::Provider> = Arc::new(SimProvider::new(cloud.clone()));
    let mut set: ProviderSet = BTreeMap::new();
    for name in spec.providers.keys() {
        set.insert(name.clone(), sim.clone());
    }
    for name in state.resources.values().filter_map(|r| r.provider.as_ref()) {
        set.entry(name.clone()).or_insert_with(|| sim.clone());
    }
    set
}

/// Do one `sim {}` step to the world.
pub fn step(cloud: &SimCloud, step: &SimStep) -> Result<(), String> {
    let sim_err = |e: SimError| e.to_string();
    match step {
        SimStep::Capacity { zone, spot, on_demand, .. } => {
            if let Some(n) = spot {
                cloud.set_capacity(zone, Capacity::Spot, Some(*n)).map_err(sim_err)?;
            }
            if let Some(n) = on_demand {
                cloud.set_capacity(zone, Capacity::OnDemand, Some(*n)).map_err(sim_err)?;
            }
            Ok(())
        }
        SimStep::Advance { by, .. } => cloud.advance(*by).map(|_| ()).map_err(sim_err),
        SimStep::Interrupt { pool, count, .. } => {
            let ids = cloud.interrupt(pool, *count).map_err(sim_err)?;
            if ids.is_empty() {
                return Err(format!(
                    "no live spot node of `{pool}` to interrupt: an earlier `apply` run must launch spot nodes first"
                ));
            }
            Ok(())
        }
        SimStep::Fault { pool, count, fault, .. } => {
            let ids = cloud.fault_pool(pool, *count, fault).map_err(sim_err)?;
            if ids.is_empty() {
                return Err(format!("no live node of `{pool}` to fault: an earlier `apply` run must launch it first"));
            }
            Ok(())
        }
    }
}

pub fn step_span(step: &SimStep) -> crate::diag::Span {
    match step {
        SimStep::Capacity { span, .. }
        | SimStep::Advance { span, .. }
        | SimStep::Interrupt { span, .. }
        | SimStep::Fault { span, .. } => *span,
    }
}
