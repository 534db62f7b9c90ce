//! The environment of one replica attempt, alike on every backend (a cloud VM, a sim
//! pool node, a Kubernetes pod): the template's env, the job's, then gpuplan's own
//! variables. Placement (`jobs/launch.rs`) and the Kubernetes manifests
//! (`providers/kube/manifest.rs`) both read it, so it lives below both. Pure.
//!
//! A job of several replicas is a multi-node job: each replica also gets the rendezvous
//! variables torchrun and its kind read, `GPUPLAN_NNODES`, `GPUPLAN_NODE_RANK`,
//! `GPUPLAN_MASTER_PORT` (29500 unless the job's or template's env sets it) and
//! `GPUPLAN_MASTER_ADDR`, the private address of replica 0's node. Only that last one is
//! not known when the job is planned: the launch of replica 0 answers it (apply passes it
//! to the others, [`with_master`]); replica 0 itself reads its own address on its node.
//!
//! Secret references (`secret("…")`) stay references here: [`JobEnv::secrets`] names
//! them, and only the place the job runs reads their values (`docs/design/secrets.md`).

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::model::secret::{EnvValue, SecretRef};
use crate::spec::model::{Job, JobTemplate};

/// Environment variables every launch carries.
pub const ENV_CHECKPOINT: &str = "GPUPLAN_CHECKPOINT_URI";
pub const ENV_ATTEMPT: &str = "GPUPLAN_ATTEMPT";
pub const ENV_JOB: &str = "GPUPLAN_JOB";
pub const ENV_REPLICA: &str = "GPUPLAN_REPLICA";
pub const ENV_REPLICAS: &str = "GPUPLAN_REPLICAS";
/// Rendezvous of a multi-node job (more than one replica).
pub const ENV_MASTER_ADDR: &str = "GPUPLAN_MASTER_ADDR";
pub const ENV_MASTER_PORT: &str = "GPUPLAN_MASTER_PORT";
pub const ENV_NNODES: &str = "GPUPLAN_NNODES";
pub const ENV_NODE_RANK: &str = "GPUPLAN_NODE_RANK";
/// `GPUPLAN_MASTER_PORT` unless the job's or template's env sets it (torchrun's default).
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// A launch's environment: values, and the variables whose values are secrets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobEnv {
    pub plain: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, SecretRef>,
}

/// The environment of one replica attempt: template env, job env (a job's variable
/// replaces the template's, value or secret), then gpuplan's own.
pub fn env(job_addr: &Address, job: &Job, t: &JobTemplate, replica: u32, attempt: u32) -> JobEnv {
    let mut out = JobEnv::default();
    for (k, v) in t.env.iter().chain(&job.env) {
        match &v.value {
            EnvValue::Text(text) => {
                out.secrets.remove(k);
                out.plain.insert(k.clone(), text.clone());
            }
            EnvValue::Secret { secret } => {
                out.plain.remove(k);
                out.secrets.insert(k.clone(), secret.clone());
            }
        }
    }
    let env = &mut out.plain;
    if let Some(uri) = &t.checkpoint_uri {
        env.insert(ENV_CHECKPOINT.into(), uri.value.clone());
    }
    env.insert(ENV_ATTEMPT.into(), attempt.to_string());
    env.insert(ENV_JOB.into(), job_addr.to_string());
    env.insert(ENV_REPLICA.into(), replica.to_string());
    env.insert(ENV_REPLICAS.into(), job.replicas.value.to_string());
    env.remove(ENV_MASTER_ADDR);
    if job.replicas.value > 1 {
        env.insert(ENV_NNODES.into(), job.replicas.value.to_string());
        env.insert(ENV_NODE_RANK.into(), replica.to_string());
        env.entry(ENV_MASTER_PORT.into()).or_insert_with(|| DEFAULT_MASTER_PORT.to_string());
    } else {
        env.remove(ENV_NNODES);
        env.remove(ENV_NODE_RANK);
    }
    for own in
        [ENV_CHECKPOINT, ENV_ATTEMPT, ENV_JOB, ENV_REPLICA, ENV_REPLICAS, ENV_MASTER_ADDR, ENV_NNODES, ENV_NODE_RANK]
    {
        out.secrets.remove(own);
    }
    out
}

/// The node rank of a launch's environment when it is a replica of a multi-node job.
pub fn node_rank(env: &BTreeMap<String, String>) -> Option<u32> {
    env.contains_key(ENV_NNODES).then(|| env.get(ENV_NODE_RANK).and_then(|r| r.parse().ok())).flatten()
}

/// `env` of a multi-node job's replica with replica 0's private address (a replica of
/// any other job is left as it is).
pub fn with_master(env: &mut BTreeMap<String, String>, address: &str) {
    if env.contains_key(ENV_NNODES) {
        env.insert(ENV_MASTER_ADDR.into(), address.to_string());
    }
}

#[cfg(test)]
mod tests;
