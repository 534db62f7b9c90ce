//! The Kubernetes job backend: jobs of pools with a `kubernetes {}` block run as
//! `batch/v1` Jobs in that cluster, through its API server (kube-rs).
//!
//! It is registered in the [`ProviderSet`](super::ProviderSet) as `@kubernetes.<provider>`
//! beside the pool's own provider, so refresh, `jobs status`, `jobs cancel` and apply
//! reach it like any provider's jobs. It owns no nodes: the pool's nodes belong to the
//! pool's provider and join the cluster with gpuplan's labels.
//!
//! - One Job per job instance (an Indexed Job runs every replica); each replica's run
//!   id is `<namespace>/<job name>/<replica>`, and its region is the cluster locator
//!   (`kubeconfig:<path>#<context>`).
//! - Submission is idempotent: a Job of the same name carrying this state's lineage and
//!   attempt labels is the one submitted before. A Job of that name without them is
//!   someone else's: gpuplan reports the collision and never touches it (nor reads,
//!   follows or deletes it).
//! - Before the first submission to a cluster, the Job's PriorityClass must exist:
//!   without it the Job would be accepted but its pods never created.
//! - Cancel deletes the Job with background propagation (without it Kubernetes keeps
//!   the pods running).
//! - Preempting one replica evicts that replica's pod through the Eviction API, never the
//!   Job: the pod gets a `DisruptionTarget` condition, and the Job's pod failure policy
//!   replaces it without spending a retry.

pub mod health;
pub mod manifest;
pub mod nodes;
mod service;
pub mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ::kube::api::{Api, DeleteParams, EvictParams, ListParams, LogParams, PostParams};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::{ClusterPort, ErrorClass, JobPort, JobState, JobStatus, LaunchJob, LogPort, Provider, ProviderError};
use crate::model::{Priority, ProviderKind};

/// The prefix of the backend's name in a provider set.
pub const PREFIX: &str = "@kubernetes.";
/// Labels gpuplan puts on its Jobs (written by [`manifest`]).
/// The state lineage that submitted a Job: gpuplan only reads, follows and deletes Jobs
/// carrying its own lineage (a Job of the same name without it is someone else's).
pub const LABEL_LINEAGE: &str = "gpuplan.dev/lineage";
pub const LABEL_ATTEMPT: &str = "gpuplan.dev/attempt";
/// The run's identity on a submitted Job (the job's life and attempt, hashed; set by
/// placement): a Job of the same name without this value is not this run's, however it
/// is labelled otherwise.
pub const LABEL_RUN: &str = "gpuplan.dev/run";
const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
const INDEX_LABEL: &str = "batch.kubernetes.io/job-completion-index";
/// The container every gpuplan Job runs, whose output `jobs logs` prints.
pub const CONTAINER: &str = "job";

/// A run id's namespace, Job name and replica, or the error saying it is not one.
fn split_run_id(id: &str) -> Result<(&str, &str, u32), ProviderError> {
    parse_run_id(id).ok_or_else(|| {
        ProviderError::new(ErrorClass::Invalid, "BadRunId", format!("`{id}` is not a Kubernetes run id"))
    })
}

/// How long connecting to a cluster's API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an API server may take to answer one request (and to take one request's body),
/// unless `GPUPLAN_KUBE_READ_TIMEOUT` (e.g. `2m`) says otherwise.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

fn read_timeout() -> Result<Duration, ProviderError> {
    match std::env::var("GPUPLAN_KUBE_READ_TIMEOUT") {
        Err(_) => Ok(READ_TIMEOUT),
        Ok(v) => humantime::parse_duration(v.trim()).ok().filter(|d| !d.is_zero()).ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "BadTimeout",
                format!("GPUPLAN_KUBE_READ_TIMEOUT=`{v}` is not a duration above zero (e.g. `30s`, `2m`)"),
            )
        }),
    }
}

/// The backend's name for the jobs of a pool whose provider block is `provider`.
pub fn name(provider: &str) -> String {
    format!("{PREFIX}{provider}")
}

/// The cluster locator of a kubeconfig file and context (empty: the current context).
pub fn locator(kubeconfig: &str, context: Option<&str>) -> String {
    format!("kubeconfig:{kubeconfig}#{}", context.unwrap_or(""))
}

/// The cluster locator of a TKE or ACK cluster, whose kubeconfig the pool's provider
/// fetches.
pub fn cluster_locator(region: &str, cluster_id: &str) -> String {
    format!("cluster:{region}/{cluster_id}")
}

/// The cluster locator of a pool's `kubernetes {}` block: its kubeconfig file and context,
/// else its TKE or ACK cluster in `region`; empty for a block with neither (validation
/// refuses it).
pub fn pool_locator(k: &crate::spec::model::Kubernetes, region: &str) -> String {
    match (&k.kubeconfig, &k.cluster_id) {
        (Some(path), _) => locator(&path.value, k.context.as_ref().map(|c| c.value.as_str())),
        (None, Some(id)) => cluster_locator(region, &id.value),
        (None, None) => String::new(),
    }
}

/// Where a cluster's kubeconfig comes from.
enum Locator<'a> {
    File { path: &'a str, context: Option<&'a str> },
    Cloud { region: &'a str, cluster_id: &'a str },
}

fn parse_locator(loc: &str) -> Option<Locator<'_>> {
    if let Some(rest) = loc.strip_prefix("kubeconfig:") {
        let (path, ctx) = rest.rsplit_once('#')?;
        return Some(Locator::File { path, context: (!ctx.is_empty()).then_some(ctx) });
    }
    let (region, cluster_id) = loc.strip_prefix("cluster:")?.split_once('/')?;
    Some(Locator::Cloud { region, cluster_id })
}

/// A locator for people: `kube/config (context prod)`, `cluster cls-8xk2p4 (ap-guangzhou)`.
pub fn describe(loc: &str) -> String {
    match parse_locator(loc) {
        Some(Locator::File { path, context: Some(c) }) => format!("{path} (context {c})"),
        Some(Locator::File { path, context: None }) => format!("{path} (current context)"),
        Some(Locator::Cloud { region, cluster_id }) => format!("{cluster_id} ({region})"),
        None => loc.to_string(),
    }
}

/// `(path, context)` of a kubeconfig locator.
pub fn kubeconfig_of(loc: &str) -> Option<(&str, Option<&str>)> {
    match parse_locator(loc)? {
        Locator::File { path, context } => Some((path, context)),
        Locator::Cloud { .. } => None,
    }
}

/// A cloud that hands out its managed clusters' kubeconfigs (TKE, ACK).
#[async_trait]
pub trait KubeconfigSource: Send + Sync {
    async fn kubeconfig(&self, cluster_id: &str, region: &str) -> Result<String, ProviderError>;
}

/// A run id: `<namespace>/<name>/<replica>`.
pub fn run_id(namespace: &str, name: &str, replica: u32) -> String {
    format!("{namespace}/{name}/{replica}")
}

/// `None` for an id that is not one ([`split_run_id`] answers `BadRunId`, naming it).
fn parse_run_id(id: &str) -> Option<(&str, &str, u32)> {
    let mut it = id.splitn(3, '/');
    let (ns, name, replica) = (it.next()?, it.next()?, it.next()?);
    Some((ns, name, replica.parse().ok()?))
}

/// The Kubernetes backend of one provider block's pools.
pub struct KubeJobs {
    kind: ProviderKind,
    /// The spec folder: relative kubeconfig paths start here.
    dir: PathBuf,
    home: Option<PathBuf>,
    lineage: String,
    /// The pool's cloud, for `cluster_id` clusters.
    source: Option<std::sync::Arc<dyn KubeconfigSource>>,
    clients: tokio::sync::Mutex<HashMap<String, ::kube::Client>>,
    /// Which cloud instance each node a replica runs on is (`nodes.rs`).
    node_ids: nodes::NodeIds,
}

impl KubeJobs {
    /// `kind` is the kind of the provider whose pools' jobs this runs.
    pub fn new(
        kind: ProviderKind,
        dir: &Path,
        home: Option<PathBuf>,
        lineage: &str,
        source: Option<std::sync::Arc<dyn KubeconfigSource>>,
    ) -> Self {
        KubeJobs {
            kind,
            dir: dir.to_path_buf(),
            home,
            lineage: lineage.to_string(),
            source,
            clients: Default::default(),
            node_ids: Default::default(),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        match (p.strip_prefix("~/"), &self.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => self.dir.join(p),
        }
    }

    /// A client for a cluster locator, connected once per run, with [`CONNECT_TIMEOUT`] and
    /// [`READ_TIMEOUT`]: a hung API server fails the call instead of hanging `plan`.
    async fn client(&self, loc: &str) -> Result<::kube::Client, ProviderError> {
        self.client_with(loc, Some(read_timeout()?)).await
    }

    /// [`client`](Self::client) for a log stream followed until its pods end: a quiet pod
    /// sends nothing for as long as it likes, so only the connection is timed.
    async fn streaming_client(&self, loc: &str) -> Result<::kube::Client, ProviderError> {
        self.client_with(loc, None).await
    }

    async fn client_with(&self, loc: &str, reads: Option<Duration>) -> Result<::kube::Client, ProviderError> {
        let key = if reads.is_some() { loc.to_string() } else { format!("{loc}#stream") };
        let mut clients = self.clients.lock().await;
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let unknown =
            || ProviderError::new(ErrorClass::Invalid, "BadCluster", format!("`{loc}` is not a cluster gpuplan knows"));
        let (text, context, origin) = match parse_locator(loc).ok_or_else(unknown)? {
            Locator::File { path, context } => {
                let file = self.path(path);
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    ProviderError::new(
                        ErrorClass::Invalid,
                        "Kubeconfig",
                        format!("cannot read the kubeconfig `{}`: {e}", file.display()),
                    )
                })?;
                (text, context, format!("kubeconfig `{}`", file.display()))
            }
            Locator::Cloud { region, cluster_id } => {
                let source = self.source.as_ref().ok_or_else(|| {
                    ProviderError::new(
                        ErrorClass::Invalid,
                        "NoClusterApi",
                        format!("cluster `{cluster_id}`: only tencentcloud (TKE) and alicloud (ACK) pools fetch a kubeconfig by `cluster_id`"),
                    )
                })?;
                (
                    source.kubeconfig(cluster_id, region).await?,
                    None,
                    format!("the kubeconfig of cluster `{cluster_id}`"),
                )
            }
        };
        let bad =
            |e: &dyn std::fmt::Display| ProviderError::new(ErrorClass::Invalid, "Kubeconfig", format!("{origin}: {e}"));
        let kc = Kubeconfig::from_yaml(&text).map_err(|e| bad(&e))?;
        let opts = KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
        let mut config = ::kube::Config::from_custom_kubeconfig(kc, &opts).await.map_err(|e| bad(&e))?;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = reads;
        config.write_timeout = Some(self::read_timeout()?);
        // Count the read timeout from each request, not from when a pooled connection went idle.
        config.reset_reader_on_write = true;
        let client = ::kube::Client::try_from(config).map_err(|e| bad(&e))?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// The Job of a run, if it is this state's; `Ok(None)` when it is gone.
    async fn owned_job(&self, jobs: &Api<Job>, loc: &str, ns: &str, name: &str) -> Result<Option<Job>, ProviderError> {
        match jobs.get_opt(name).await.map_err(|e| api_error(e, loc, ns, name))? {
            Some(j) if self.owns(&j) => Ok(Some(j)),
            Some(_) => Err(not_ours(loc, ns, name)),
            None => Ok(None),
        }
    }

    /// Submit `job` (after checking its PriorityClass exists); a Job of that name created
    /// meanwhile by someone is this run's only when it is ours and carries its run label.
    #[allow(clippy::too_many_arguments)]
    async fn submit(
        &self,
        jobs: &Api<Job>,
        client: &::kube::Client,
        job: &Job,
        req: &LaunchJob,
        loc: &str,
        ns: &str,
        name: &str,
    ) -> Result<(), ProviderError> {
        let class =
            job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|p| p.priority_class_name.clone());
        if let Some(pc) = class {
            let classes: Api<PriorityClass> = Api::all(client.clone());
            if classes.get_opt(&pc).await.map_err(|e| api_error(e, loc, "priorityclasses", &pc))?.is_none() {
                return Err(ProviderError::new(
                    ErrorClass::Invalid,
                    "NoPriorityClass",
                    format!(
                        "cluster {} has no PriorityClass `{pc}`, which `{}` asks for: its pods would never start; \
                         create the classes gpuplan uses (gpuplan-critical, gpuplan-high, gpuplan-medium, gpuplan-low), \
                         e.g. `kubectl create priorityclass {pc} --value=1000`",
                        describe(loc),
                        req.job
                    ),
                ));
            }
        }
        let run = job.metadata.labels.as_ref().and_then(|l| l.get(LABEL_RUN));
        match jobs.create(&PostParams::default(), job).await {
            Ok(_) => Ok(()),
            // Created by someone between our read and our create: decide on what is there.
            Err(::kube::Error::Api(s)) if s.code == 409 => match jobs.get_opt(name).await {
                Ok(Some(j)) if self.owns(&j) && j.metadata.labels.as_ref().and_then(|l| l.get(LABEL_RUN)) == run => {
                    Ok(())
                }
                Ok(_) => Err(not_ours(loc, ns, name)),
                Err(e) => Err(api_error(e, loc, ns, name)),
            },
            Err(e) => Err(api_error(e, loc, ns, name)),
        }
    }

    fn owns(&self, j: &Job) -> bool {
        j.metadata.labels.as_ref().and_then(|l| l.get(LABEL_LINEAGE)) == Some(&self.lineage)
    }

    /// Every pod of a Job, by replica, with each pod's own output (`jobs logs`). With
    /// `follow`, each line is passed to `out` as it comes until every pod ends.
    async fn pod_logs(
        &self,
        loc: &str,
        ns: &str,
        name: &str,
        follow: bool,
        out: &crate::providers::ports::LogSink<'_>,
    ) -> Result<(), ProviderError> {
        use futures::AsyncBufReadExt;
        use futures::StreamExt;
        let client = if follow { self.streaming_client(loc).await? } else { self.client(loc).await? };
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        if self.owned_job(&jobs, loc, ns, name).await?.is_none() {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "NotFound",
                format!("Job `{ns}/{name}` is no longer in cluster {}; its pods' output went with it", describe(loc)),
            ));
        }
        let pods: Api<Pod> = Api::namespaced(client, ns);
        let list = pods
            .list(&ListParams::default().labels(&format!("{JOB_NAME_LABEL}={name}")))
            .await
            .map_err(|e| api_error(e, loc, ns, name))?;
        let mut found: Vec<(u32, String)> = list
            .items
            .iter()
            .filter_map(|p| {
                // Every pod of an Indexed Job carries its index; one without (not a pod
                // of this Job's template) has no replica's output to show.
                let idx = p.metadata.labels.as_ref()?.get(INDEX_LABEL)?.parse().ok()?;
                Some((idx, p.metadata.name.clone()?))
            })
            .collect();
        found.sort();
        let lp = LogParams { container: Some(CONTAINER.into()), follow, ..Default::default() };
        if !follow {
            for (idx, pod) in &found {
                let text = pods.logs(pod, &lp).await.map_err(|e| api_error(e, loc, ns, pod))?;
                for line in text.lines() {
                    out(*idx, line);
                }
            }
            return Ok(());
        }
        let mut streams = Vec::new();
        for (idx, pod) in &found {
            let s = pods.log_stream(pod, &lp).await.map_err(|e| api_error(e, loc, ns, pod))?;
            let idx = *idx;
            streams.push(s.lines().map(move |l| (idx, l)).boxed());
        }
        let mut all = futures::stream::select_all(streams);
        while let Some((idx, line)) = all.next().await {
            let line = line.map_err(|e| {
                ProviderError::new(ErrorClass::Retryable, "LogStream", format!("reading Job `{ns}/{name}`'s logs: {e}"))
            })?;
            out(idx, &line);
        }
        Ok(())
    }
}

/// A Job of this name exists and is not this state's.
/// A Job that ended (its `Complete` or `Failed` condition is true): nothing of it runs.
fn finished(j: &Job) -> bool {
    let conditions = j.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .is_some_and(|cs| cs.iter().any(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True"))
}

fn not_ours(loc: &str, ns: &str, name: &str) -> ProviderError {
    ProviderError::new(
        ErrorClass::Invalid,
        "NameTaken",
        format!(
            "a Job `{ns}/{name}` already exists in cluster {} and gpuplan does not own it \
             (no `{LABEL_LINEAGE}` label of this state); gpuplan leaves it alone: rename the job \
             or delete that Job yourself",
            describe(loc)
        ),
    )
}

/// An API error as a provider error naming the object and the cluster.
fn api_error(e: ::kube::Error, loc: &str, ns: &str, name: &str) -> ProviderError {
    let what = format!("`{ns}/{name}` in cluster {}", describe(loc));
    match e {
        ::kube::Error::Api(s) => {
            let class = match s.code {
                401 | 403 => ErrorClass::Auth,
                404 | 409 | 400 | 422 => ErrorClass::Invalid,
                429 => ErrorClass::Throttled,
                500..=599 => ErrorClass::Retryable,
                _ => ErrorClass::Fatal,
            };
            let reason = if s.reason.is_empty() { s.code.to_string() } else { s.reason.clone() };
            ProviderError::new(class, reason, format!("{what}: the API server answered {} {}", s.code, s.message))
        }
        other => ProviderError::new(
            ErrorClass::Retryable,
            "Unreachable",
            format!("{what}: cannot reach the API server: {}", error_chain(&other)),
        ),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s += &format!(": {m}");
        }
        src = c.source();
    }
    s
}

/// A replica's state from its Job's status.
fn replica_status(job: &Job, replica: u32, pods: &[Pod]) -> (JobState, String, Option<String>) {
    let status = job.status.clone().unwrap_or_default();
    let cond = |t: &str| {
        status.conditions.iter().flatten().find(|c| c.type_ == t && c.status == "True").map(|c| {
            let m = c.message.clone().unwrap_or_default();
            let r = c.reason.clone().unwrap_or_default();
            if m.is_empty() { r } else { format!("{r}: {m}") }
        })
    };
    let node = pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .find_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .or_else(|| pods.iter().find_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone())))
        .unwrap_or_default();
    if in_index_set(status.completed_indexes.as_deref().unwrap_or(""), replica) {
        return (JobState::Succeeded, node, None);
    }
    if let Some(m) = cond("Failed") {
        return (JobState::Failed, node, Some(m));
    }
    if cond("Complete").is_some() {
        return (JobState::Succeeded, node, None);
    }
    let running = pods.iter().any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
    let state = if running { JobState::Running } else { JobState::Queued };
    (state, node, None)
}

/// Is `i` in a Kubernetes index set such as `"1,3-5,7"`?
fn in_index_set(set: &str, i: u32) -> bool {
    set.split(',').filter(|p| !p.is_empty()).any(|part| match part.split_once('-') {
        Some((a, b)) => matches!((a.parse::<u32>(), b.parse::<u32>()), (Ok(a), Ok(b)) if (a..=b).contains(&i)),
        None => part.parse::<u32>() == Ok(i),
    })
}

#[async_trait]
impl Provider for KubeJobs {
    fn kind(&self) -> ProviderKind {
        self.kind
    }

    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }

    /// GPU health from node conditions and allocatable; cordon marks the node
    /// unschedulable (`health.rs`).
    fn health(&self) -> Option<&dyn super::health::HealthPort> {
        Some(self)
    }

    fn logs(&self) -> Option<&dyn LogPort> {
        Some(self)
    }

    fn cluster(&self) -> Option<&dyn ClusterPort> {
        Some(self)
    }
}

impl KubeJobs {
    /// Submit (or find) the Job of a launch.
    async fn submit_launch(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let Some(k) = &req.kube else {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "NotAKubernetesJob",
                format!("`{}` has no Kubernetes cluster", req.job),
            ));
        };
        let (loc, ns, name) = (k.cluster.as_str(), k.namespace.as_str(), k.name.as_str());
        let replica = k.replica;
        let status = |state| JobStatus {
            id: run_id(ns, name, replica),
            job: req.job.clone(),
            node_id: String::new(),
            state,
            attempt: req.attempt,
            message: None,
            started_ms: None,
            finished_ms: None,
            address: None,
        };
        let job: Job = serde_json::from_value(k.manifest.clone()).map_err(|e| {
            ProviderError::new(ErrorClass::Invalid, "BadManifest", format!("the plan's Job for `{}`: {e}", req.job))
        })?;
        let client = self.client(loc).await?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        let run = job.metadata.labels.as_ref().and_then(|l| l.get(LABEL_RUN)).cloned();
        // Submitted before (another replica of this plan, or a retried apply)?
        if let Some(j) = jobs.get_opt(name).await.map_err(|e| api_error(e, loc, ns, name))? {
            let labels = j.metadata.labels.clone().unwrap_or_default();
            if !self.owns(&j) {
                return Err(not_ours(loc, ns, name));
            }
            if run.is_some() && labels.get(LABEL_RUN) != run.as_ref() {
                // Ours, but another run's: a job of this name removed (or forgotten) and
                // added again. Never taken for this run; a finished one makes way.
                if !finished(&j) {
                    return Err(ProviderError::new(
                        ErrorClass::Invalid,
                        "RunExists",
                        format!(
                            "Job `{ns}/{name}` in cluster {} is still running for an earlier `{}` of the same name                              (gpuplan.dev/run={}); gpuplan does not take it for this one: let it finish, or delete                              it (`kubectl delete job -n {ns} {name}`), then apply again",
                            describe(loc),
                            req.job,
                            labels.get(LABEL_RUN).map(String::as_str).unwrap_or("none")
                        ),
                    ));
                }
                let dp = DeleteParams::background();
                jobs.delete(name, &dp).await.map_err(|e| api_error(e, loc, ns, name))?;
                return self.submit(&jobs, &client, &job, req, loc, ns, name).await.map(|()| status(JobState::Queued));
            }
            if labels.get(LABEL_ATTEMPT) != Some(&req.attempt.to_string()) {
                return Err(ProviderError::new(
                    ErrorClass::Invalid,
                    "AttemptExists",
                    format!(
                        "Job `{ns}/{name}` in cluster {} is attempt {} of `{}`; delete it with `gpuplan jobs cancel` before attempt {}",
                        describe(loc),
                        labels.get(LABEL_ATTEMPT).map(String::as_str).unwrap_or("?"),
                        req.job,
                        req.attempt
                    ),
                ));
            }
            return Ok(status(JobState::Queued));
        }
        self.submit(&jobs, &client, &job, req, loc, ns, name).await.map(|()| status(JobState::Queued))
    }
}

#[async_trait]
impl JobPort for KubeJobs {
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let status = self.submit_launch(req).await?;
        // A multi-node job: its headless Service, once its Job exists.
        if let Some(k) = &req.kube
            && let Some(svc) = &k.service
        {
            service::ensure(&self.client(&k.cluster).await?, k, svc).await?;
        }
        Ok(status)
    }

    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let (ns, name, replica) = split_run_id(id)?;
        let client = self.client(region).await?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        let mut out = JobStatus {
            id: id.to_string(),
            job: crate::addr::Address::new(crate::addr::Kind::Job, name),
            node_id: String::new(),
            state: JobState::Cancelled,
            attempt: 0,
            message: None,
            started_ms: None,
            finished_ms: None,
            address: None,
        };
        let Some(job) = self.owned_job(&jobs, region, ns, name).await? else {
            out.message = Some(format!("Job `{ns}/{name}` was deleted from the cluster"));
            return Ok(out);
        };
        // The attempt label is gpuplan's own (checked above by `owned_job`); without a
        // number the status says attempt 0 and the state's record keeps the real one.
        if let Some(a) = job.metadata.labels.as_ref().and_then(|l| l.get(LABEL_ATTEMPT)).and_then(|a| a.parse().ok()) {
            out.attempt = a;
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let selector = format!("{JOB_NAME_LABEL}={name},{INDEX_LABEL}={replica}");
        let list =
            pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| api_error(e, region, ns, name))?;
        let (state, node, message) = replica_status(&job, replica, &list.items);
        out.state = state;
        // Pool nodes are keyed by cloud instance id: the pod's node by its Node's provider id.
        out.node_id = self.node_ids.of(&client, region, &node).await;
        out.message = message;
        Ok(out)
    }

    /// Evict the replica's live pod(s); the Job and its other replicas go on.
    async fn preempt_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let (ns, name, replica) = split_run_id(id)?;
        let client = self.client(region).await?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        let mut out = JobStatus {
            id: id.to_string(),
            job: crate::addr::Address::new(crate::addr::Kind::Job, name),
            node_id: String::new(),
            state: JobState::Queued,
            attempt: 0,
            message: None,
            started_ms: None,
            finished_ms: None,
            address: None,
        };
        if self.owned_job(&jobs, region, ns, name).await?.is_none() {
            out.state = JobState::Cancelled;
            out.message = Some(format!("Job `{ns}/{name}` was already gone"));
            return Ok(out);
        }
        let pods: Api<Pod> = Api::namespaced(client, ns);
        let selector = format!("{JOB_NAME_LABEL}={name},{INDEX_LABEL}={replica}");
        let list =
            pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| api_error(e, region, ns, name))?;
        let live = list
            .items
            .iter()
            .filter(|p| matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending" | "Running")));
        let mut evicted = Vec::new();
        for pod in live {
            let Some(pod_name) = pod.metadata.name.as_deref() else { continue };
            match pods.evict(pod_name, &EvictParams::default()).await {
                Ok(_) => evicted.push(pod_name.to_string()),
                // Gone between the list and the eviction: nothing left to stop.
                Err(::kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(api_error(e, region, ns, pod_name)),
            }
        }
        out.message = Some(match evicted.as_slice() {
            [] => format!("replica {replica} of Job `{ns}/{name}` had no live pod to evict"),
            pods => format!(
                "pod {} of Job `{ns}/{name}` evicted; the Job replaces it without spending a retry",
                pods.join(", ")
            ),
        });
        Ok(out)
    }

    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let (ns, name, _) = split_run_id(id)?;
        let client = self.client(region).await?;
        let jobs: Api<Job> = Api::namespaced(client, ns);
        let mut message = format!("Job `{ns}/{name}` deleted with its pods");
        if self.owned_job(&jobs, region, ns, name).await?.is_some() {
            match jobs.delete(name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(::kube::Error::Api(s)) if s.code == 404 => message = format!("Job `{ns}/{name}` was already gone"),
                Err(e) => return Err(api_error(e, region, ns, name)),
            }
        } else {
            message = format!("Job `{ns}/{name}` was already gone");
        }
        Ok(JobStatus {
            id: id.to_string(),
            job: crate::addr::Address::new(crate::addr::Kind::Job, name),
            node_id: String::new(),
            state: JobState::Cancelled,
            attempt: 0,
            message: Some(message),
            started_ms: None,
            finished_ms: None,
            address: None,
        })
    }
}

#[async_trait]
impl LogPort for KubeJobs {
    /// The pods' output of the run's Job, every replica (`region` is the cluster).
    async fn job_logs(
        &self,
        region: &str,
        id: &str,
        follow: bool,
        out: &crate::providers::ports::LogSink<'_>,
    ) -> Result<(), ProviderError> {
        let (ns, name, _) = split_run_id(id)?;
        self.pod_logs(region, ns, name, follow, out).await
    }
}

#[async_trait]
impl ClusterPort for KubeJobs {
    /// The cluster answers, the namespace exists, and so do the four PriorityClasses
    /// gpuplan's Jobs name.
    async fn check_cluster(&self, region: &str, namespace: &str) -> Result<String, ProviderError> {
        let client = self.client(region).await?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        if namespaces.get_opt(namespace).await.map_err(|e| api_error(e, region, "namespaces", namespace))?.is_none() {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "NoNamespace",
                format!(
                    "namespace `{namespace}` does not exist in cluster {}; create it with `kubectl create namespace {namespace}`",
                    describe(region)
                ),
            ));
        }
        let classes: Api<PriorityClass> = Api::all(client);
        let mut missing = Vec::new();
        for p in [Priority::Critical, Priority::High, Priority::Medium, Priority::Low] {
            let name = format!("gpuplan-{}", crate::model::job::priority_str(p));
            if classes.get_opt(&name).await.map_err(|e| api_error(e, region, "priorityclasses", &name))?.is_none() {
                missing.push(name);
            }
        }
        if !missing.is_empty() {
            let cmds: Vec<String> =
                missing.iter().map(|m| format!("kubectl create priorityclass {m} --value=N")).collect();
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "NoPriorityClass",
                format!(
                    "cluster {} lacks the PriorityClass(es) {}, so Jobs of those priorities would never start; create them, higher values for higher priorities: {}",
                    describe(region),
                    missing.join(", "),
                    cmds.join("; ")
                ),
            ));
        }
        Ok(format!("namespace `{namespace}` and gpuplan's PriorityClasses are there"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_sets_read_like_kubernetes_writes_them() {
        assert!(in_index_set("0,2-4,7", 3));
        assert!(in_index_set("0,2-4,7", 7));
        assert!(!in_index_set("0,2-4,7", 5));
        assert!(!in_index_set("", 0));
    }

    #[test]
    fn locators_and_run_ids_round_trip() {
        let file = |l: &str| match parse_locator(l) {
            Some(Locator::File { path, context }) => Some((path.to_string(), context.map(str::to_string))),
            _ => None,
        };
        let l = locator("clusters/kind#1.yaml", Some("kind-gpu"));
        assert_eq!(file(&l), Some(("clusters/kind#1.yaml".into(), Some("kind-gpu".into()))));
        assert_eq!(file(&locator("~/.kube/config", None)), Some(("~/.kube/config".into(), None)));
        let cloud = cluster_locator("ap-guangzhou", "cls-8xk2p4");
        assert!(matches!(
            parse_locator(&cloud),
            Some(Locator::Cloud { region: "ap-guangzhou", cluster_id: "cls-8xk2p4" })
        ));
        assert_eq!(parse_run_id(&run_id("ml", "train-0", 3)), Some(("ml", "train-0", 3)));
        assert_eq!(parse_run_id("ml/train"), None);
    }
}
