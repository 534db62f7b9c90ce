//! Tencent Cloud: CVM 2017-03-12 for GPU nodes and job launches, TKE 2018-05-25 for the
//! kubeconfig of the Kubernetes job backend. Requests are JSON POSTs signed in-project
//! with TC3-HMAC-SHA256 (`providers::signing::tc3`); wire types stay in this folder.
//!
//! [`TencentProvider`] is the shared signed-JSON core (`providers::signed_json`: the
//! provider, the signed client, the job, log and adoption ports, the run-command runner,
//! health reads) over [`Tencent`]; this folder keeps only what is Tencent's:
//!
//! - `client.rs`: the TC3 wire (headers, signature, `Response.Error` envelope);
//!   `errors.rs`: its codes → classes table; `credentials.rs`: the credential chain
//!   (environment, OIDC, profile file, CVM role, AssumeRole).
//! - `cvm.rs`: the node port (run in batches of 100 with a ClientToken per batch, paged
//!   tag-filtered describe, terminate of tagged instances only, quotas); `prices.rs`:
//!   live quotes; `hpc.rs`: HPC clusters (the placement port, for `fabric = "rdma"`);
//!   `adopt.rs`: tag writes for adoption (Tag API); `jobs.rs`: job nodes read
//!   through TAT; `warm.rs`: TAT's calls and status words; `secrets.rs`: `tencent-ssm:`;
//!   `tke.rs`: DescribeClusterKubeconfig, and pool nodes joining the cluster
//!   (AddExistedInstances on demand, CreateClusterInstances for spot).
//!
//! RunInstances and TerminateInstances are limited client-side to 10 calls per second,
//! the documented API limit. Retries and backoff are the executor's (`apply::policy`).

mod adopt;
mod client;
pub mod credentials;
mod cvm;
mod errors;
mod hpc;
mod jobs;
mod prices;
mod secrets;
mod tke;
mod warm;

use std::sync::Arc;

use async_trait::async_trait;

use crate::providers::ProviderError;
use crate::providers::http::{CloudConfig, RateLimit};
use crate::providers::signed_json::client::Client;
use crate::providers::signed_json::cloud::{Cloud, CloudApi};
use crate::spec::model::ProviderKind;

pub use errors::class_of;

/// Endpoint override when the provider block sets none (tests, private endpoints).
pub const ENV_ENDPOINT: &str = "GPUPLAN_TENCENTCLOUD_ENDPOINT";

/// Tencent Cloud as a signed-JSON cloud: the shared core (`signed_json::cloud`) with
/// what only it keeps.
pub struct Tencent {
    run_limit: RateLimit,
    terminate_limit: RateLimit,
    /// The account UIN (STS), asked once: the Tag API names instances with it.
    owner_uin: std::sync::Mutex<Option<String>>,
}

impl CloudApi for Tencent {
    type Wire = client::Tc3;
    type Agent = warm::Tat;
    const KIND: ProviderKind = ProviderKind::Tencentcloud;
    const IMAGE_NEEDED: &'static str = "CVM needs an ImageId (`img-…`)";

    fn agent(client: Arc<Client<client::Tc3>>) -> warm::Tat {
        warm::Tat { client }
    }
}

/// The provider of a `provider "tencentcloud"` block.
pub type TencentProvider = Cloud<Tencent>;

impl TencentProvider {
    pub fn new(config: CloudConfig) -> Result<Self, ProviderError> {
        let own = Tencent {
            run_limit: RateLimit::per_second(10),
            terminate_limit: RateLimit::per_second(10),
            owner_uin: Default::default(),
        };
        Cloud::build(config, own)
    }

    /// The kubeconfig of the provider block's TKE cluster (`cluster_id`), for the
    /// Kubernetes job backend. `extranet` asks for the public API server address.
    pub async fn kubeconfig(&self, region: &str, extranet: bool) -> Result<String, ProviderError> {
        tke::kubeconfig(&self.client, region, extranet).await
    }
}

/// A pool's `kubernetes { cluster_id }`: the cluster's kubeconfig, for the API server's
/// public address (gpuplan usually runs outside the cluster's network).
#[async_trait]
impl crate::providers::kube::KubeconfigSource for TencentProvider {
    async fn kubeconfig(&self, cluster_id: &str, region: &str) -> Result<String, ProviderError> {
        tke::cluster_kubeconfig(&self.client, cluster_id, region, true).await
    }
}
