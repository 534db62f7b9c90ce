//! The environment of one replica attempt, alike on every backend (a cloud VM, a sim
//! pool node, a Kubernetes pod): the template's env, the job's, then gpuplan's own
//! variables. Placement (`jobs/launch.rs`) and the Kubernetes manifests
//! (`providers/kube/manifest.rs`) both read it, so it lives below both. Pure.
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
    for own in [ENV_CHECKPOINT, ENV_ATTEMPT, ENV_JOB, ENV_REPLICA, ENV_REPLICAS] {
        out.secrets.remove(own);
    }
    out
}

#[cfg(test)]
mod tests;
