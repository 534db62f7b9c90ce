//! The launches the secret tests of both clouds send (`tencent_secrets.rs`,
//! `alibaba_secrets.rs`): one job with one secret variable, on a warm node or on a node
//! booted for it.

use gpuplan::model::secret::SecretRef;
use gpuplan::providers::{Capacity, CreateNodes, LaunchJob};

/// `job.finetune` in `region` with `var` set from `secret`: on warm node `node`, or on a
/// node of `shape` booted for it.
pub fn launch(region: &str, var: &str, node: &str, secret: &str, shape: Option<CreateNodes>) -> LaunchJob {
    LaunchJob {
        job: "job.finetune".parse().expect("addr"),
        pool: "gpu_pool.big".parse().expect("addr"),
        node_id: node.into(),
        region: region.into(),
        image: "ghcr.io/acme/train:1".into(),
        command: vec!["python".into(), "train.py".into()],
        env: Default::default(),
        secrets: [(var.to_string(), SecretRef::parse(secret).expect("a reference"))].into_iter().collect(),
        gpus: 1,
        attempt: 1,
        token: "gp-job-token".into(),
        shape,
        max_runtime_secs: Some(60),
        keep_node: false,
        kube: None,
        readiness: Default::default(),
    }
}

/// One on-demand node of `instance_type` booted for the job in `zone`.
pub fn job_node(region: &str, zone: &str, instance_type: &str, image: &str) -> CreateNodes {
    CreateNodes {
        pool: "gpu_pool.big".parse().expect("addr"),
        region: region.into(),
        zone: zone.into(),
        zones: vec![],
        instance_types: vec![instance_type.into()],
        capacity: Capacity::OnDemand,
        count: 1,
        image: Some(image.into()),
        max_spot_price: None,
        token: "gp-job-node".into(),
        tags: Default::default(),
        user_data: None,
        join: None,
        hardware: None,
        reservation: None,
    }
}
