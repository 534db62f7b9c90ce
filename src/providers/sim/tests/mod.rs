//! Tests of the simulated cloud: node API, persistence and locking, faults and jobs.

mod faults;
mod nodes;
mod persist;
mod snapshot;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{SimCloud, SimConfig, SimProvider};
use crate::addr::Address;
use crate::providers::{Capacity, CreateNodes, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, Tags};

pub const LINEAGE: &str = "0f0e0d0c-lineage";

pub fn cloud_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state").join("default.sim.json")
}

pub fn open(path: &Path, config: SimConfig) -> Arc<SimCloud> {
    SimCloud::open(path, config).expect("open sim cloud")
}

/// A fresh cloud in a temp dir, with its provider.
pub fn fresh(config: SimConfig) -> (tempfile::TempDir, Arc<SimCloud>, SimProvider) {
    let dir = tempfile::tempdir().unwrap();
    let cloud = open(&cloud_path(&dir), config);
    let provider = SimProvider::new(cloud.clone());
    (dir, cloud, provider)
}

pub fn pool(name: &str) -> Address {
    format!("gpu_pool.{name}").parse().unwrap()
}

pub fn tags(pool: &Address) -> Tags {
    [(TAG_MANAGED, "true".to_string()), (TAG_LINEAGE, LINEAGE.to_string()), (TAG_ADDRESS, pool.to_string())]
        .into_iter()
        .collect()
}

/// `count` A100-80GB nodes of pool `name` in us-east-1a.
pub fn req(name: &str, capacity: Capacity, count: u32, token: &str) -> CreateNodes {
    let pool = pool(name);
    CreateNodes {
        tags: tags(&pool),
        pool,
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        zones: vec![],
        instance_types: vec!["p4de.24xlarge".into()],
        capacity,
        count,
        image: Some("ami-123".into()),
        max_spot_price: None,
        token: token.into(),
        user_data: None,
        join: None,
        hardware: None,
        reservation: None,
    }
}
