//! The Kubernetes job backend (TKE, ACK or any cluster whose GPU nodes carry gpuplan's
//! labels): one `batch/v1` Job per `job` instance, rendered by `gpuplan jobs render`.
//!
//! The contract with the cluster's node groups: every node of a pool carries the labels
//! `gpuplan.dev/pool=<pool name>` and `gpuplan.dev/capacity=spot|on-demand`, and spot
//! nodes carry the taint `gpuplan.dev/capacity=spot:NoSchedule` (GPU nodes usually also
//! carry `nvidia.com/gpu:NoSchedule`). From the spec:
//!
//! | spec | manifest |
//! |---|---|
//! | `replicas` | `completions` = `parallelism`, `completionMode: Indexed` |
//! | template `gpus` | container `resources.limits."nvidia.com/gpu"` |
//! | `pool` | `nodeSelector: {gpuplan.dev/pool: NAME}` |
//! | `preemptible = false` | also `gpuplan.dev/capacity: on-demand` in the selector |
//! | `preemptible = true` | a toleration for the spot taint |
//! | `priority` | `priorityClassName: gpuplan-<priority>` (classes the cluster defines) |
//! | `retries` | `backoffLimit` |
//! | `max_runtime` | `activeDeadlineSeconds` |
//! | env, checkpoint URI | container `env` with `GPUPLAN_CHECKPOINT_URI`, `GPUPLAN_JOB`, `GPUPLAN_REPLICAS`; `GPUPLAN_REPLICA` from the completion index |
//!
//! Kubernetes restarts failed pods itself, so `GPUPLAN_ATTEMPT` is the attempt gpuplan
//! submits the Job as (1 unless state says otherwise); pods learn their own retry count
//! from the checkpoint they find. Pure: no I/O.

use crate::addr::Address;
use crate::jobs::model::priority_str;
use crate::jobs::place::{self, ENV_REPLICA};
use crate::jobs::yaml::Yaml;
use crate::spec::Spec;

pub const LABEL_POOL: &str = "gpuplan.dev/pool";
pub const LABEL_CAPACITY: &str = "gpuplan.dev/capacity";
pub const LABEL_JOB: &str = "gpuplan.dev/job";
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

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

/// The manifest of one job instance; `None` when its template or pool is missing
/// (validation reports that).
pub fn manifest(spec: &Spec, addr: &Address, attempt: u32) -> Option<Yaml> {
    let job = spec.jobs.get(addr)?;
    let t = spec.job_templates.get(&job.template.value)?;
    let pool = &job.pool.value;
    let name = object_name(addr);
    fn s(x: impl Into<String>) -> Yaml {
        Yaml::Str(x.into())
    }

    let mut env: Vec<Yaml> = place::env(addr, job, t, 0, attempt)
        .into_iter()
        .filter(|(k, _)| k != ENV_REPLICA)
        .map(|(k, v)| Yaml::map(vec![("name", s(k)), ("value", s(v))]))
        .collect();
    env.push(Yaml::map(vec![
        ("name", s(ENV_REPLICA)),
        (
            "valueFrom",
            Yaml::map(vec![(
                "fieldRef",
                Yaml::map(vec![("fieldPath", s("metadata.annotations['batch.kubernetes.io/job-completion-index']"))]),
            )]),
        ),
    ]));

    let mut container = vec![("name", s("job")), ("image", s(t.image.value.clone()))];
    if !t.command.is_empty() {
        container.push(("command", Yaml::Seq(t.command.iter().map(|c| s(c.value.clone())).collect())));
    }
    if !job.args.is_empty() {
        container.push(("args", Yaml::Seq(job.args.iter().map(|a| s(a.value.clone())).collect())));
    }
    container.push(("env", Yaml::Seq(env)));
    container.push((
        "resources",
        Yaml::map(vec![("limits", Yaml::map(vec![(GPU_RESOURCE, Yaml::Int(t.gpus.value as i64))]))]),
    ));

    let mut selector = vec![(LABEL_POOL, s(pool.name.clone()))];
    let mut tolerations =
        vec![Yaml::map(vec![("key", s(GPU_RESOURCE)), ("operator", s("Exists")), ("effect", s("NoSchedule"))])];
    if t.preemptible.value {
        tolerations.push(Yaml::map(vec![
            ("key", s(LABEL_CAPACITY)),
            ("operator", s("Equal")),
            ("value", s("spot")),
            ("effect", s("NoSchedule")),
        ]));
    } else {
        selector.push((LABEL_CAPACITY, s("on-demand")));
    }

    let pod_spec = Yaml::map(vec![
        ("restartPolicy", s("Never")),
        ("priorityClassName", s(format!("gpuplan-{}", priority_str(t.priority.value)))),
        ("nodeSelector", Yaml::map(selector)),
        ("tolerations", Yaml::Seq(tolerations)),
        ("containers", Yaml::Seq(vec![Yaml::map(container)])),
    ]);
    let replicas = job.replicas.value as i64;
    let mut job_spec = vec![
        ("completions", Yaml::Int(replicas)),
        ("parallelism", Yaml::Int(replicas)),
        ("completionMode", s("Indexed")),
        ("backoffLimit", Yaml::Int(t.retries.value as i64)),
    ];
    if let Some(d) = &t.max_runtime {
        job_spec.push(("activeDeadlineSeconds", Yaml::Int(d.value.as_secs() as i64)));
    }
    job_spec.push((
        "template",
        Yaml::map(vec![
            ("metadata", Yaml::map(vec![("labels", Yaml::map(vec![(LABEL_JOB, s(name.clone()))]))])),
            ("spec", pod_spec),
        ]),
    ));
    Some(Yaml::map(vec![
        ("apiVersion", s("batch/v1")),
        ("kind", s("Job")),
        (
            "metadata",
            Yaml::map(vec![
                ("name", s(name.clone())),
                (
                    "labels",
                    Yaml::map(vec![
                        ("app.kubernetes.io/managed-by", s("gpuplan")),
                        (LABEL_JOB, s(name)),
                        (LABEL_POOL, s(pool.name.clone())),
                    ]),
                ),
                ("annotations", Yaml::map(vec![("gpuplan.dev/address", s(addr.to_string()))])),
            ]),
        ),
        ("spec", Yaml::map(job_spec)),
    ]))
}

/// The job instances a name on the command line means: `x`, `job.x` (every instance),
/// `x[0]` or `job.x[0]`.
pub fn resolve<'s>(spec: &'s Spec, name: &str) -> Vec<&'s Address> {
    let target: Option<Address> =
        if name.starts_with("job.") { name.parse().ok() } else { format!("job.{name}").parse().ok() };
    let Some(target) = target else { return Vec::new() };
    spec.jobs.keys().filter(|a| a.matches_target(&target)).collect()
}

#[cfg(test)]
mod tests;
