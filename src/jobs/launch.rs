//! Launch requests: one replica attempt as apply will send it (a node of its own from
//! the pool's shape on a cloud, a pool node on sim, the job instance's Job on a
//! Kubernetes pool), with its idempotency token and environment. Pure.

use sha2::{Digest, Sha256};

use super::demand::{PlaceInput, incarnation, record};
use super::model::ReplicaLaunch;
use crate::addr::Address;
use crate::plan::shape::PoolShape;
use crate::providers::job_env::env;
use crate::providers::{
    Capacity, CreateNodes, KubeLaunch, LaunchJob, TAG_ADDRESS, TAG_ATTEMPT, TAG_JOB, TAG_LINEAGE, TAG_MANAGED,
    TAG_PROVIDER, TAG_REPLICA, Tags, kube,
};
use crate::spec::model::{Fallback, Job, JobTemplate, ProviderKind};

/// The `gpuplan.dev/run` label of a job instance's Kubernetes Job: its life and attempt,
/// hashed to a valid label value.
pub fn run_label(lineage: &str, job: &Address, incarnation: &str, attempt: u32) -> String {
    let digest = Sha256::digest(format!("{lineage}|{job}|{incarnation}|{attempt}").as_bytes());
    let hex = crate::hex::hex(&digest[..12]);
    format!("r{attempt}-{hex}")
}

/// The idempotency token of one replica attempt: the same attempt never launches twice,
/// however often it is planned.
pub fn token(lineage: &str, job: &Address, incarnation: &str, replica: u32, attempt: u32) -> String {
    let seed = format!("{lineage}|{job}|{incarnation}|{replica}|{attempt}");
    let digest = Sha256::digest(seed.as_bytes());
    let hex = crate::hex::hex(&digest[..20]);
    format!("gj-{hex}")
}

#[allow(clippy::too_many_arguments)]
pub(super) fn launch(
    input: &PlaceInput<'_>,
    addr: &Address,
    job: &Job,
    t: &JobTemplate,
    shape: &PoolShape,
    replica: u32,
    attempt: u32,
    capacity: Capacity,
    fallback: Option<Fallback>,
) -> ReplicaLaunch {
    let lineage = &input.state.lineage;
    let life = incarnation(input.state, record(input.state, addr));
    let token = token(lineage, addr, &life, replica, attempt);
    let mut command: Vec<String> = t.command.iter().map(|c| c.value.clone()).collect();
    command.extend(job.args.iter().map(|a| a.value.clone()));
    // Clouds make a node for the job from the pool's shape; sim runs it on a pool node.
    let node_shape = (shape.provider_kind != ProviderKind::Sim).then(|| {
        let tags: Tags = [
            (TAG_MANAGED, "true".to_string()),
            (TAG_LINEAGE, lineage.clone()),
            (TAG_ADDRESS, job.pool.value.to_string()),
            (TAG_PROVIDER, shape.provider.clone()),
            (TAG_JOB, addr.to_string()),
            (TAG_ATTEMPT, attempt.to_string()),
            (TAG_REPLICA, replica.to_string()),
        ]
        .into_iter()
        .collect();
        CreateNodes {
            pool: job.pool.value.clone(),
            region: shape.region.clone(),
            // Every replica in the pool's first zone: a multi-node job's start together.
            zone: shape.zones.first().cloned().unwrap_or_default(),
            zones: vec![],
            instance_types: shape.instance_types.clone(),
            capacity,
            count: 1,
            image: shape.image.clone(),
            max_spot_price: if capacity == Capacity::Spot { shape.max_spot_price } else { None },
            token: token.clone(),
            tags,
            user_data: None,
            join: None,
            hardware: job_hardware(shape, lineage, job),
            reservation: None,
        }
    });
    // A pool in a Kubernetes cluster: the cluster places the replica on one of the pool's
    // nodes; every replica carries the job instance's Job (the first creates it).
    let pool = input.spec.gpu_pools.get(&job.pool.value);
    let kube = pool.and_then(|p| p.kubernetes.as_ref()).map(|k| {
        let cluster = kube::pool_locator(k, &shape.region);
        // The run's identity: an old Job of the same name is never taken for this one.
        let run = run_label(lineage, addr, &life, attempt);
        let manifest = kube::manifest::launch_manifest(input.spec, addr, job, attempt, lineage, run);
        let service = kube::manifest::launch_service(input.spec, addr, job, lineage);
        KubeLaunch {
            cluster,
            namespace: k.namespace.value.clone(),
            name: kube::manifest::object_name(addr),
            replica,
            lineage: lineage.clone(),
            manifest,
            service,
        }
    });
    let node_shape = if kube.is_some() { None } else { node_shape };
    let env = env(addr, job, t, replica, attempt);
    let request = LaunchJob {
        job: addr.clone(),
        pool: job.pool.value.clone(),
        node_id: String::new(),
        region: String::new(),
        image: t.image.value.clone(),
        command,
        env: env.plain,
        secrets: env.secrets,
        gpus: t.gpus.value,
        attempt,
        token,
        shape: node_shape,
        max_runtime_secs: t.max_runtime.as_ref().map(|d| d.value.as_secs()),
        keep_node: false,
        kube: kube.clone(),
        // The pool's `health { readiness }` (default `nvidia-smi`): the job script runs it
        // before the job (`providers::userdata::readiness`), the sim before it starts a run.
        readiness: pool.map(|p| p.health().readiness.value).unwrap_or_default(),
    };
    let fallback = (capacity == Capacity::Spot && fallback == Some(Fallback::OnDemand)).then_some(Capacity::OnDemand);
    let (provider, region) = match &kube {
        Some(k) => (kube::name(&shape.provider), k.cluster.clone()),
        None => (shape.provider.clone(), shape.region.clone()),
    };
    // Room on a node is counted in what jobs' `gpus` count there: GPUs, or MIG slices.
    let gpus_per_node = shape.gpus_per_node * pool.map_or(1, |p| p.slices_per_gpu());
    ReplicaLaunch { replica, capacity, fallback, provider, region, gpus_per_node, request }
}

/// The hardware of a node made for `job`: its pool's disks and fabric, and for a job of
/// several replicas on a pool in a cluster placement group the group of the pool's first
/// zone, where every replica starts (docs/design/big-runs.md).
fn job_hardware(shape: &PoolShape, lineage: &str, job: &Job) -> Option<Box<crate::model::hardware::Hardware>> {
    let mut h = shape.hardware.clone().unwrap_or_default();
    if shape.cluster_placement
        && job.replicas.value > 1
        && let Some(zone) = shape.zones.first()
    {
        h.placement_group = Some(crate::model::hardware::placement_group_name(lineage, &job.pool.value.name, zone));
    }
    (h != crate::model::hardware::Hardware::default()).then(|| Box::new(h))
}
