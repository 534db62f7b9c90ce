//! GPU health on the embedded cloud (docs/design/gpu-health.md): the faults `gpuplan sim
//! fault` scripts ([`Fault`], kept in the world until cleared) and the sim's
//! [`HealthPort`], which answers a node's health read with them. A fault that kills a GPU
//! ends the run on that node as failed, as a real job would crash.

use async_trait::async_trait;

use super::cloud::SimCloud;
use super::error::SimError;
use super::provider::SimProvider;
use super::world::{Change, JobEnd};
use crate::health::xid;
use crate::model::ProviderError;
use crate::model::health::{Finding, NodeHealth, Readiness, Signal, Source};
use crate::providers::JobState;
use crate::providers::health::HealthPort;

/// One scripted fault.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// An XID on a GPU (default GPU 0).
    Xid { code: u32, gpu: Option<u32> },
    /// Uncorrectable ECC errors on a GPU.
    Ecc { gpu: Option<u32> },
    /// One GPU fewer than the shape answers.
    MissingGpu,
    /// The readiness check fails.
    ReadinessFail,
    /// A raw capture, already read, as the node's answer.
    Capture(NodeHealth),
}

impl Fault {
    /// What the node's health reads answer with this fault, first seen at `now_ms`.
    pub fn health(self, node_id: &str, now_ms: u64) -> NodeHealth {
        let finding = |signal, gpu, xid, detail: String, source| Finding {
            signal,
            gpu,
            pci_bus: None,
            xid,
            detail,
            source,
            seen_ms: now_ms,
        };
        let findings = match self {
            Fault::Capture(mut h) => {
                h.node_id = node_id.to_string();
                return h;
            }
            Fault::Xid { code, gpu } => {
                let meaning = xid::lookup(code).map_or("not in gpuplan's XID catalog", |x| x.meaning);
                let signal = if xid::marks_node(code) { Signal::XidFatal } else { return app_xid(node_id) };
                vec![finding(signal, Some(gpu.unwrap_or(0)), Some(code), meaning.to_string(), Source::Sim)]
            }
            Fault::Ecc { gpu } => vec![finding(
                Signal::EccUncorrectable,
                Some(gpu.unwrap_or(0)),
                None,
                "uncorrectable ECC errors".into(),
                Source::Sim,
            )],
            Fault::MissingGpu => {
                vec![finding(Signal::GpuMissing, None, None, "a GPU does not answer".into(), Source::Sim)]
            }
            Fault::ReadinessFail => vec![finding(
                Signal::ReadinessFailed,
                None,
                None,
                "the readiness check failed".into(),
                Source::Readiness,
            )],
        };
        NodeHealth { node_id: node_id.to_string(), findings, ..NodeHealth::default() }
    }
}

/// The sim's readiness check, run where the job script would run it: before a run starts
/// on its node (docs/design/gpu-health.md, "Readiness"). A node whose scripted fault fails
/// the check (`--readiness-fail`) fails it unless the pool's `readiness` is `none`.
/// Returns why, as the job script's `gpuplan-node-unready=` line says it.
pub(super) fn readiness_failure(health: Option<&NodeHealth>, check: Readiness) -> Option<String> {
    let command = match check {
        Readiness::None => return None,
        Readiness::Dcgm => "dcgmi diag -r 1",
        Readiness::NvidiaSmi => "nvidia-smi -L",
    };
    let failed = health?.findings.iter().find(|f| f.signal == Signal::ReadinessFailed)?;
    Some(format!("`{command}` failed on the simulated node ({})", failed.detail))
}

/// An XID the catalog does not count: the node still answers, with no finding (XIDs such
/// as 13 or 31 are the application's own fault).
fn app_xid(node_id: &str) -> NodeHealth {
    NodeHealth { node_id: node_id.to_string(), ..NodeHealth::default() }
}

/// Signals whose fault kills what runs on the GPU.
fn kills_jobs(signal: Signal) -> bool {
    matches!(signal, Signal::XidFatal | Signal::EccUncorrectable | Signal::GpuMissing)
}

impl SimCloud {
    /// `gpuplan sim fault NODE ...`: from now on the node's health reads answer with
    /// `fault` (`None`: healthy again). A fault that kills a GPU fails the run on the node.
    /// Returns the runs that failed.
    pub fn set_fault(&self, node_id: &str, fault: Option<Fault>) -> Result<Vec<String>, SimError> {
        let mut inner = self.lock();
        let now = inner.world.now_ms();
        if !inner.world.nodes.get(node_id).is_some_and(|n| n.is_live() && n.is_managed()) {
            return Err(SimError::Invalid(format!("no live node `{node_id}` of gpuplan's in the simulated cloud")));
        }
        let health = fault.map(|f| f.health(node_id, now));
        let mut changes = Vec::new();
        let mut failed = Vec::new();
        if let Some(killing) = health.as_ref().and_then(|h| h.findings.iter().find(|f| kills_jobs(f.signal))) {
            failed = inner.world.running_jobs_on(&[node_id.to_string()], now);
            if !failed.is_empty() {
                let message = format!("GPU fault on node {node_id}: {}", killing.detail);
                let end = JobEnd { state: JobState::Failed, at_ms: now, message: Some(message) };
                changes.push(Change::JobsEnded { ids: failed.clone(), end });
            }
        }
        changes.push(Change::Fault { node_id: node_id.to_string(), health });
        inner.commit(changes)?;
        Ok(failed)
    }

    /// `fault` on the first `count` live nodes of `pool` (by id; `gpuplan test`'s `sim {
    /// fault {} }`). Returns the nodes faulted.
    pub fn fault_pool(&self, pool: &crate::addr::Address, count: u32, fault: &Fault) -> Result<Vec<String>, SimError> {
        let ids: Vec<String> = {
            let inner = self.lock();
            inner
                .world
                .nodes
                .values()
                .filter(|n| n.is_live() && n.is_managed() && n.pool.as_ref().is_some_and(|p| p.matches_target(pool)))
                .take(count as usize)
                .map(|n| n.id.clone())
                .collect()
        };
        for id in &ids {
            self.set_fault(id, Some(fault.clone()))?;
        }
        Ok(ids)
    }

    /// The health reads of `ids` in `region`: a node with a scripted fault answers it, any
    /// other live node of gpuplan's answers healthy; unknown or ended nodes are left out.
    pub fn api_read_health(&self, region: &str, ids: &[String]) -> Vec<NodeHealth> {
        let inner = self.lock();
        ids.iter()
            .filter_map(|id| inner.world.nodes.get(id))
            .filter(|n| n.region == region && n.is_live() && n.is_managed())
            .map(|n| {
                inner
                    .world
                    .faults
                    .get(&n.id)
                    .cloned()
                    .unwrap_or_else(|| NodeHealth { node_id: n.id.clone(), ..NodeHealth::default() })
            })
            .collect()
    }
}

#[async_trait]
impl HealthPort for SimProvider {
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        Ok(self.cloud().api_read_health(region, ids))
    }

    /// A VM cloud: gpuplan itself keeps jobs off a quarantined node; nothing to call.
    async fn cordon(&self, _region: &str, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
