//! The environment of one replica attempt, alike on every backend (a cloud VM, a sim
//! pool node, a Kubernetes pod): the template's env, the job's, then gpuplan's own
//! variables. Placement (`jobs/launch.rs`) and the Kubernetes manifests
//! (`providers/kube/manifest.rs`) both read it, so it lives below both. Pure.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::spec::model::{Job, JobTemplate};

/// Environment variables every launch carries.
pub const ENV_CHECKPOINT: &str = "GPUPLAN_CHECKPOINT_URI";
pub const ENV_ATTEMPT: &str = "GPUPLAN_ATTEMPT";
pub const ENV_JOB: &str = "GPUPLAN_JOB";
pub const ENV_REPLICA: &str = "GPUPLAN_REPLICA";
pub const ENV_REPLICAS: &str = "GPUPLAN_REPLICAS";

/// The environment of one replica attempt: template env, job env, then gpuplan's own.
pub fn env(job_addr: &Address, job: &Job, t: &JobTemplate, replica: u32, attempt: u32) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = t.env.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect();
    env.extend(job.env.iter().map(|(k, v)| (k.clone(), v.value.clone())));
    if let Some(uri) = &t.checkpoint_uri {
        env.insert(ENV_CHECKPOINT.into(), uri.value.clone());
    }
    env.insert(ENV_ATTEMPT.into(), attempt.to_string());
    env.insert(ENV_JOB.into(), job_addr.to_string());
    env.insert(ENV_REPLICA.into(), replica.to_string());
    env.insert(ENV_REPLICAS.into(), job.replicas.value.to_string());
    env
}
