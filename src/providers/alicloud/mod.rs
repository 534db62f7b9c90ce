//! Alibaba Cloud: ECS 2014-05-26 for GPU nodes and job launches, ACK (CS 2015-12-15)
//! for the kubeconfig of the Kubernetes job backend. Requests are signed in-project with
//! ACS3-HMAC-SHA256 (`providers::signing::acs3`); wire types stay in this folder.
//!
//! [`AlibabaProvider`] is the shared signed-JSON core (`providers::signed_json`: the
//! provider, the signed client, the job, log and adoption ports, the run-command runner,
//! health reads) over [`Alibaba`]; this folder keeps only what is Alibaba's:
//!
//! - `client.rs`: the ACS3 wire, RPC (ECS, KMS) and ROA (ACK) calls and the error
//!   envelope; `errors.rs`: its codes → classes table; `credentials.rs`: the credential
//!   chain (environment, RRSA, `~/.aliyun/config.json`, ECS RAM role).
//! - `ecs.rs`: the node port (run, paged tag-filtered describe, delete, quotas);
//!   `prices.rs`: live quotes; `adopt.rs`: tag writes for adoption; `reservations.rs`;
//!   `deployment.rs`: LowLatency deployment sets (the placement port);
//!   `jobs.rs`: job nodes with exit codes from GetInstanceConsoleOutput; `warm.rs`: Cloud
//!   Assistant's calls and status words; `secrets.rs`: `alicloud-kms:`; `ack.rs`:
//!   user_config, and nodes joining the cluster (AttachInstances on demand, a tainted node
//!   pool for spot).
//!
//! ECS publishes no per-API rate numbers (Quota Center only), so there is no client-side
//! limit: `Throttling*` answers make the executor back off (`apply::policy`).

mod ack;
mod adopt;
mod client;
pub mod credentials;
mod deployment;
mod ecs;
mod errors;
mod jobs;
mod prices;
mod reservations;
mod secrets;
mod warm;

use std::sync::Arc;

use async_trait::async_trait;

use crate::providers::ProviderError;
use crate::providers::http::CloudConfig;
use crate::providers::reservations::ReservationPort;
use crate::providers::signed_json::client::Client;
use crate::providers::signed_json::cloud::{Cloud, CloudApi};
use crate::spec::model::ProviderKind;

pub use errors::class_of;

/// Endpoint override when the provider block sets none (tests, private endpoints).
pub const ENV_ENDPOINT: &str = "GPUPLAN_ALICLOUD_ENDPOINT";

/// Alibaba Cloud as a signed-JSON cloud: the shared core (`signed_json::cloud`) keeps
/// all it needs.
pub struct Alibaba;

impl CloudApi for Alibaba {
    type Wire = client::Acs3;
    type Agent = warm::CloudAssistant;
    const KIND: ProviderKind = ProviderKind::Alicloud;
    const IMAGE_NEEDED: &'static str = "ECS needs an ImageId (`m-…` or a public image id)";

    fn agent(client: Arc<Client<client::Acs3>>) -> warm::CloudAssistant {
        warm::CloudAssistant { client }
    }

    /// Capacity reservations (`reservations.rs`).
    fn reservations(cloud: &Cloud<Self>) -> Option<&dyn ReservationPort> {
        Some(cloud)
    }
}

/// The provider of a `provider "alicloud"` block.
pub type AlibabaProvider = Cloud<Alibaba>;

impl AlibabaProvider {
    pub fn new(config: CloudConfig) -> Result<Self, ProviderError> {
        Cloud::build(config, Alibaba)
    }

    /// The kubeconfig of the provider block's ACK cluster (`cluster_id`), for the
    /// Kubernetes job backend. `private` asks for the intranet API server address.
    pub async fn kubeconfig(&self, region: &str, private: bool) -> Result<String, ProviderError> {
        ack::kubeconfig(&self.client, region, private).await
    }
}

/// A pool's `kubernetes { cluster_id }`: the cluster's kubeconfig, for the API server's
/// public address (gpuplan usually runs outside the cluster's network).
#[async_trait]
impl crate::providers::kube::KubeconfigSource for AlibabaProvider {
    async fn kubeconfig(&self, cluster_id: &str, region: &str) -> Result<String, ProviderError> {
        ack::cluster_kubeconfig(&self.client, cluster_id, region, false).await
    }
}
