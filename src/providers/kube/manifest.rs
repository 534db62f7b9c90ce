//! The Kubernetes Job manifests (TKE, ACK or any cluster whose GPU nodes carry gpuplan's
//! labels): one `batch/v1` Job per `job` instance, rendered by `gpuplan jobs render` and
//! carried in a launch request (placement calls [`launch_manifest`]) for this backend to submit.
//! The `k8s-openapi` wire types stay in `providers/kube`: nothing outside it builds them.
//!
//! The contract with the cluster's node groups: every node of a pool carries the labels
//! `gpuplan.dev/pool=<pool name>` and `gpuplan.dev/capacity=spot|on-demand`, and spot
//! nodes carry the taint `gpuplan.dev/capacity=spot:NoSchedule` (GPU nodes usually also
//! carry `nvidia.com/gpu:NoSchedule`). From the spec:
//!
//! | spec | manifest |
//! |---|---|
//! | `replicas` | `completions` = `parallelism`, `completionMode: Indexed` |
//! | template `gpus` | container `resources.limits."nvidia.com/gpu"` (`nvidia.com/mig-<profile>` on a pool with `mig`) |
//! | `pool` | `nodeSelector: {gpuplan.dev/pool: NAME}` |
//! | `preemptible = false` | also `gpuplan.dev/capacity: on-demand` in the selector |
//! | `preemptible = true` | a toleration for the spot taint |
//! | `priority` | `priorityClassName: gpuplan-<priority>` (classes the cluster defines) |
//! | `retries` | `backoffLimit` |
//! | `max_runtime` | `activeDeadlineSeconds` |
//! | spot reclaims | `podFailurePolicy` ignores pods with a `DisruptionTarget` condition (`restartPolicy: Never`, `podReplacementPolicy: Failed`): a reclaimed pod is replaced without spending `backoffLimit` |
//! | pool `kubernetes.namespace` | `metadata.namespace` |
//! | env, checkpoint URI | container `env` with `GPUPLAN_CHECKPOINT_URI`, `GPUPLAN_JOB`, `GPUPLAN_REPLICAS`; `GPUPLAN_REPLICA` from the completion index |
//! | env `secret("k8s:SECRET/KEY")` | an `env` entry with `valueFrom.secretKeyRef` (the value stays in the cluster) |
//! | `replicas` > 1 (multi-node) | a headless Service of the Job's name ([`service`]) as the pods' `subdomain`; `GPUPLAN_NNODES`, `GPUPLAN_MASTER_PORT`, `GPUPLAN_MASTER_ADDR` = `<job>-0.<job>` (replica 0's pod), `GPUPLAN_NODE_RANK` from the completion index |
//!
//! Kubernetes restarts failed pods itself, so `GPUPLAN_ATTEMPT` is the attempt gpuplan
//! submits the Job as (1 unless state says otherwise); pods learn their own retry count
//! from the checkpoint they find. Built as typed `k8s-openapi` objects; `jobs render`
//! prints them as YAML (serde-saphyr) and apply submits the same object. Pure: no I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{
    Job as K8sJob, JobSpec, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretKeySelector, Service, ServicePort, ServiceSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{CONTAINER, LABEL_ATTEMPT, LABEL_LINEAGE, LABEL_RUN};
use crate::addr::Address;
use crate::model::job::priority_str;
use crate::model::secret::SecretSource;
use crate::providers::job_env::{self, ENV_MASTER_PORT, ENV_NODE_RANK, ENV_REPLICA};
use crate::spec::Spec;
use crate::spec::model::{GpuPool, Job, JobTemplate};

pub const LABEL_POOL: &str = "gpuplan.dev/pool";
pub const LABEL_CAPACITY: &str = "gpuplan.dev/capacity";
pub const LABEL_JOB: &str = "gpuplan.dev/job";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const ANNOTATION_ADDRESS: &str = "gpuplan.dev/address";
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The annotation Kubernetes sets on an Indexed Job's pods: the replica.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// A DNS-1123 name for a job address: `job.llama_sweep[2]` → `llama-sweep-2`.
pub fn object_name(addr: &Address) -> String {
    let mut raw = addr.name.clone();
    if let Some(k) = &addr.key {
        raw.push('-');
        raw.push_str(k.to_string().trim_matches(|c| c == '[' || c == ']' || c == '"'));
    }
    let mut name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name.trim_matches('-');
    let mut name: String = name.chars().take(63).collect();
    while name.ends_with('-') {
        name.pop();
    }
    if name.is_empty() { "job".into() } else { name }
}

/// The `batch/v1` Job of one job instance; `None` when its template or pool is missing
/// (validation reports that). `lineage` labels the Job as this state's (apply passes
/// it; `jobs render` passes the state's when there is one).
pub fn manifest(spec: &Spec, addr: &Address, attempt: u32, lineage: Option<&str>) -> Option<K8sJob> {
    manifest_for(spec, addr, spec.jobs.get(addr)?, attempt, lineage)
}

/// [`manifest`] of `job` as placement resolved it (a job that names a GPU model runs on
/// the pool placement chose).
pub fn manifest_for(spec: &Spec, addr: &Address, job: &Job, attempt: u32, lineage: Option<&str>) -> Option<K8sJob> {
    let t = spec.job_templates.get(&job.template.value)?;
    let pool_addr = &job.pool.value;
    let pool = spec.gpu_pools.get(pool_addr).map(Box::as_ref);
    let name = object_name(addr);
    let pod_spec = pod_spec(addr, job, t, pool, attempt);
    let mut labels = BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), "gpuplan".to_string()),
        (LABEL_JOB.to_string(), name.clone()),
        (LABEL_POOL.to_string(), pool_addr.name.clone()),
        (LABEL_ATTEMPT.to_string(), attempt.to_string()),
    ]);
    if let Some(l) = lineage {
        labels.insert(LABEL_LINEAGE.into(), l.to_string());
    }
    Some(K8sJob {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: pool.and_then(|p| p.kubernetes.as_ref()).map(|k| k.namespace.value.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(ANNOTATION_ADDRESS.to_string(), addr.to_string())])),
            ..Default::default()
        },
        spec: Some(job_spec(job, t, name, pod_spec)),
        status: None,
    })
}

/// The Job of one launch as the backend submits it (JSON, as a launch request carries
/// it), labelled with the run's identity `run` (`gpuplan.dev/run`): an old Job of the
/// same name is never taken for this one. `Null` only without a template, which never
/// reaches a launch; the backend refuses a null Job (`BadManifest`), never submits it.
pub fn launch_manifest(
    spec: &Spec,
    addr: &Address,
    job: &Job,
    attempt: u32,
    lineage: &str,
    run: String,
) -> serde_json::Value {
    manifest_for(spec, addr, job, attempt, Some(lineage))
        .map(|mut m| {
            m.metadata.labels.get_or_insert_with(Default::default).insert(LABEL_RUN.to_string(), run);
            m
        })
        .map(|m| serde_json::to_value(m).expect("a Job is plain data and always serializes"))
        .unwrap_or_default()
}

/// The Job's spec: every replica at once (Indexed), retries as `backoffLimit`, and spot
/// reclaims that do not spend them.
fn job_spec(job: &Job, t: &JobTemplate, name: String, pod_spec: PodSpec) -> JobSpec {
    let replicas = i32::try_from(job.replicas.value).unwrap_or(i32::MAX);
    JobSpec {
        completions: Some(replicas),
        parallelism: Some(replicas),
        completion_mode: Some("Indexed".into()),
        backoff_limit: Some(i32::try_from(t.retries.value).unwrap_or(i32::MAX)),
        // A pod evicted because its spot node went away (or preempted by the scheduler)
        // gets a `DisruptionTarget` condition: replace it without spending a retry.
        pod_failure_policy: Some(PodFailurePolicy {
            rules: vec![PodFailurePolicyRule {
                action: "Ignore".into(),
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".into(),
                    status: "True".into(),
                }]),
                ..Default::default()
            }],
        }),
        pod_replacement_policy: Some("Failed".into()),
        active_deadline_seconds: t.max_runtime.as_ref().map(|d| i64::try_from(d.value.as_secs()).unwrap_or(i64::MAX)),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([(LABEL_JOB.to_string(), name)])),
                ..Default::default()
            }),
            spec: Some(pod_spec),
        },
        ..Default::default()
    }
}

/// The pod of every replica: the job's container on the pool's nodes, tolerating GPU
/// nodes and (preemptible jobs only) spot nodes.
fn pod_spec(addr: &Address, job: &Job, t: &JobTemplate, pool: Option<&GpuPool>, attempt: u32) -> PodSpec {
    let mut selector = BTreeMap::from([(LABEL_POOL.to_string(), job.pool.value.name.clone())]);
    let mut tolerations = vec![Toleration {
        key: Some(GPU_RESOURCE.into()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    }];
    if t.preemptible.value {
        tolerations.push(Toleration {
            key: Some(LABEL_CAPACITY.into()),
            operator: Some("Equal".into()),
            value: Some("spot".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        });
    } else {
        selector.insert(LABEL_CAPACITY.into(), "on-demand".into());
    }
    PodSpec {
        // A multi-node job's pods are found by name under its headless Service.
        subdomain: (job.replicas.value > 1).then(|| object_name(addr)),
        restart_policy: Some("Never".into()),
        priority_class_name: Some(priority_class(t.priority.value)),
        node_selector: Some(selector),
        tolerations: Some(tolerations),
        containers: vec![container(addr, job, t, pool, attempt)],
        ..Default::default()
    }
}

/// The job's container: its image, command, arguments, GPUs and environment, the replica
/// read from the pod's completion index.
fn container(addr: &Address, job: &Job, t: &JobTemplate, pool: Option<&GpuPool>, attempt: u32) -> Container {
    let mut job_env = job_env::env(addr, job, t, 0, attempt);
    let multi_node = job_env::node_rank(&job_env.plain).is_some();
    if multi_node {
        // Replica 0's pod, by its hostname under the Job's headless Service.
        let name = object_name(addr);
        job_env::with_master(&mut job_env.plain, &format!("{name}-0.{name}"));
    }
    let mut env: Vec<EnvVar> = job_env
        .plain
        .into_iter()
        .filter(|(k, _)| k != ENV_REPLICA && k != ENV_NODE_RANK)
        .map(|(name, value)| EnvVar { name, value: Some(value), ..Default::default() })
        .collect();
    // Only `k8s:` references reach a cluster's pools (`spec::secrets` refuses the others):
    // the pod reads the value from the Secret, never the manifest.
    for (name, r) in job_env.secrets.into_iter().filter(|(_, r)| r.source == SecretSource::K8s) {
        let key_ref = SecretKeySelector { name: r.name, key: r.key.unwrap_or_default(), optional: None };
        let value_from = EnvVarSource { secret_key_ref: Some(key_ref), ..Default::default() };
        env.push(EnvVar { name, value_from: Some(value_from), ..Default::default() });
    }
    let ranks: &[&str] = if multi_node { &[ENV_REPLICA, ENV_NODE_RANK] } else { &[ENV_REPLICA] };
    for name in ranks {
        env.push(EnvVar {
            name: (*name).into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let limits = BTreeMap::from([(gpu_resource(pool), Quantity(t.gpus.value.to_string()))]);
    Container {
        name: CONTAINER.into(),
        image: Some(t.image.value.clone()),
        command: (!t.command.is_empty()).then(|| t.command.iter().map(|c| c.value.clone()).collect()),
        args: (!job.args.is_empty()).then(|| job.args.iter().map(|a| a.value.clone()).collect()),
        env: Some(env),
        resources: Some(ResourceRequirements { limits: Some(limits), ..Default::default() }),
        ..Default::default()
    }
}

/// The headless Service of a multi-node job (more than one replica): named as its Job,
/// the pods' `subdomain`, so replica 0's pod answers at `<job>-0.<job>` as soon as it
/// exists (`publishNotReadyAddresses`). `None` for a job of one replica. The backend
/// creates it owned by the Job, so it goes with it.
pub fn service(spec: &Spec, addr: &Address, job: &Job, lineage: Option<&str>) -> Option<Service> {
    if job.replicas.value < 2 {
        return None;
    }
    let t = spec.job_templates.get(&job.template.value)?;
    let pool = spec.gpu_pools.get(&job.pool.value).map(Box::as_ref);
    let name = object_name(addr);
    let port = t
        .env
        .iter()
        .chain(&job.env)
        .filter(|(k, _)| *k == ENV_MASTER_PORT)
        .find_map(|(_, v)| match &v.value {
            crate::model::secret::EnvValue::Text(p) => p.parse().ok(),
            crate::model::secret::EnvValue::Secret { .. } => None,
        })
        .unwrap_or(job_env::DEFAULT_MASTER_PORT);
    let mut labels =
        BTreeMap::from([(LABEL_MANAGED_BY.to_string(), "gpuplan".to_string()), (LABEL_JOB.to_string(), name.clone())]);
    if let Some(l) = lineage {
        labels.insert(LABEL_LINEAGE.into(), l.to_string());
    }
    Some(Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: pool.and_then(|p| p.kubernetes.as_ref()).map(|k| k.namespace.value.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(ANNOTATION_ADDRESS.to_string(), addr.to_string())])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(BTreeMap::from([(LABEL_JOB.to_string(), name)])),
            publish_not_ready_addresses: Some(true),
            ports: Some(vec![ServicePort {
                name: Some("rendezvous".into()),
                port: i32::from(port),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    })
}

/// [`service`] as a launch request carries it (JSON); `None` for a job of one replica.
pub fn launch_service(spec: &Spec, addr: &Address, job: &Job, lineage: &str) -> Option<serde_json::Value> {
    service(spec, addr, job, Some(lineage))
        .map(|s| serde_json::to_value(s).expect("a Service is plain data and always serializes"))
}

/// The extended resource a job's GPUs are: `nvidia.com/gpu`, or on a MIG pool the
/// profile's slices, `nvidia.com/mig-1g.10gb` (the NVIDIA device plugin's mixed strategy).
pub fn gpu_resource(pool: Option<&GpuPool>) -> String {
    match pool.and_then(|p| p.mig.as_ref()) {
        Some(m) => format!("nvidia.com/mig-{}", m.value),
        None => GPU_RESOURCE.to_string(),
    }
}

/// The PriorityClass a priority maps to (the cluster defines them).
pub fn priority_class(p: crate::spec::model::Priority) -> String {
    format!("gpuplan-{}", priority_str(p))
}

/// Manifests as a YAML stream (`---` between documents), as `kubectl apply -f` reads.
pub fn to_yaml<T: serde::Serialize>(jobs: &[T]) -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string_multiple(jobs)
}

/// The job instances a name on the command line means: `x`, `job.x` (every instance),
/// `x[0]` or `job.x[0]` ([`crate::addr::resolve`]); none when it names no job (the CLI
/// resolves the name itself first, to say why).
pub fn resolve<'s>(spec: &'s Spec, name: &str) -> Vec<&'s Address> {
    let jobs: Vec<Address> = spec.jobs.keys().cloned().collect();
    match crate::addr::resolve::resolve(name, &jobs) {
        Ok(r) => spec.jobs.keys().filter(|a| r.matches.contains(a)).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
