//! Tencent Cloud: CVM 2017-03-12 for GPU nodes and job launches, TKE 2018-05-25 for the
//! kubeconfig of the Kubernetes job backend. Requests are JSON POSTs signed in-project
//! with TC3-HMAC-SHA256 (`providers::signing::tc3`); wire types stay in this folder.
//!
//! - `client.rs`: one signed call and its error envelope; `errors.rs`: codes → classes;
//!   `credentials.rs`: the credential chain (environment, OIDC, profile file, CVM role,
//!   AssumeRole).
//! - `cvm.rs`: run (batches of 100, ClientToken per batch), paged tag-filtered describe,
//!   terminate (only tagged instances, batches of 100); `jobs.rs`: user-data job launches;
//!   `warm.rs`: jobs on warm nodes through TAT;
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
mod health;
mod hpc;
mod jobs;
mod secrets;
mod tke;
mod warm;

use async_trait::async_trait;

use crate::providers::http::{CloudConfig, RateLimit, catalog_offers};
use crate::providers::launch::is_command_run;
use crate::providers::{
    AdoptionPort, Capacity, CreateNodes, CreateResult, ErrorClass, JobPort, JobStatus, LaunchJob, ListFilter, LogPort,
    Node, NodePort, Offer, PricePort, Provider, ProviderError, RunCommandPort,
};
use crate::spec::model::ProviderKind;

pub use errors::class_of;

/// Endpoint override when the provider block sets none (tests, private endpoints).
pub const ENV_ENDPOINT: &str = "GPUPLAN_TENCENTCLOUD_ENDPOINT";

pub struct TencentProvider {
    client: client::Client,
    run_limit: RateLimit,
    terminate_limit: RateLimit,
    quotes: crate::providers::http::QuoteCache,
    /// The account UIN (STS), asked once: the Tag API names instances with it.
    owner_uin: std::sync::Mutex<Option<String>>,
}

impl TencentProvider {
    pub fn new(config: CloudConfig) -> Result<Self, ProviderError> {
        Ok(TencentProvider {
            client: client::Client::new(config)?,
            run_limit: RateLimit::per_second(10),
            terminate_limit: RateLimit::per_second(10),
            quotes: Default::default(),
            owner_uin: Default::default(),
        })
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

#[async_trait]
impl Provider for TencentProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Tencentcloud
    }

    /// GPU health through the run-command agent (`health.rs`).
    fn health(&self) -> Option<&dyn crate::providers::health::HealthPort> {
        Some(self)
    }

    fn credential_source(&self) -> Option<String> {
        self.client.config().credentials.source()
    }

    fn prices(&self) -> Option<&dyn PricePort> {
        Some(self)
    }

    fn nodes(&self) -> Option<&dyn NodePort> {
        Some(self)
    }

    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }

    fn run_command(&self) -> Option<&dyn RunCommandPort> {
        Some(self)
    }

    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }

    /// HPC clusters for `fabric = "rdma"` (`hpc.rs`).
    fn placement(&self) -> Option<&dyn crate::providers::PlacementPort> {
        Some(self)
    }

    fn logs(&self) -> Option<&dyn LogPort> {
        Some(self)
    }
}

#[async_trait]
impl PricePort for TencentProvider {
    /// Catalog offers priced live with `InquiryPriceRunInstances` (the discounted hourly
    /// price, `UnitPriceDiscount`, in CNY), for pay-as-you-go and spot. The call needs an
    /// image: without the provider block's `image` the catalog prices stand.
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        let cfg = self.client.config();
        let offers = catalog_offers(ProviderKind::Tencentcloud, gpu, region, cfg.cny_per_usd);
        let Some(image) = cfg.image.clone() else {
            eprintln!(
                "warning: provider \"{}\" has no `image`, which InquiryPriceRunInstances needs; using catalog prices",
                cfg.name
            );
            return Ok(offers);
        };
        let cny = cfg.cny_per_usd;
        crate::providers::http::quoted_offers(
            ProviderKind::Tencentcloud,
            offers,
            &self.quotes,
            |region, itype, zone, cap| {
                let image = image.clone();
                async move {
                    let mut body = serde_json::json!({
                        "Placement": {"Zone": zone, "ProjectId": 0},
                        "ImageId": image,
                        "InstanceType": itype,
                        "InstanceCount": 1,
                        "InstanceChargeType": if cap == Capacity::Spot { "SPOTPAID" } else { "POSTPAID_BY_HOUR" },
                    });
                    if cap == Capacity::Spot {
                        body["InstanceMarketOptions"] =
                            serde_json::json!({"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}});
                    }
                    let resp = self
                        .client
                        .call("cvm", client::CVM_VERSION, "InquiryPriceRunInstances", &region, &body)
                        .await?;
                    let price = &resp["Price"]["InstancePrice"];
                    let cny_per_hour = price["UnitPriceDiscount"]
                        .as_f64()
                        .or_else(|| price["UnitPrice"].as_f64())
                        .ok_or_else(|| {
                            ProviderError::new(
                                ErrorClass::Fatal,
                                "BadResponse",
                                format!("InquiryPriceRunInstances for {itype} in {zone} returned no hourly price"),
                            )
                        })?;
                    Ok(cny_per_hour / cny)
                }
            },
        )
        .await
    }
}

#[async_trait]
impl NodePort for TencentProvider {
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_tagged(filter).await?;
        Ok(instances.iter().filter_map(|i| cvm::to_node(i, &filter.region)).collect())
    }

    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        self.run_instances(req).await
    }

    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        self.terminate(region, ids).await
    }

    /// `DescribeAccountQuota`: pay-as-you-go and spot instance quotas per zone.
    async fn quotas(&self, region: &str) -> Result<Option<Vec<crate::providers::QuotaLine>>, ProviderError> {
        let resp = self
            .client
            .call("cvm", client::CVM_VERSION, "DescribeAccountQuota", region, &serde_json::json!({}))
            .await?;
        let q = &resp["AccountQuotaOverview"]["AccountQuota"];
        let mut out = Vec::new();
        for (set, what) in [("PostPaidQuotaSet", "pay-as-you-go instances"), ("SpotPaidQuotaSet", "spot instances")] {
            for z in q[set].as_array().into_iter().flatten() {
                out.push(crate::providers::QuotaLine {
                    what: what.into(),
                    zone: z["Zone"].as_str().map(str::to_string),
                    used: z["UsedQuota"].as_u64().unwrap_or(0),
                    limit: z["TotalQuota"].as_u64().unwrap_or(0),
                });
            }
        }
        Ok(Some(out))
    }
}

#[async_trait]
impl RunCommandPort for TencentProvider {
    async fn agents(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<std::collections::BTreeMap<String, crate::providers::AgentState>, ProviderError> {
        self.agent_states(region, ids).await
    }
}

#[async_trait]
impl JobPort for TencentProvider {
    /// On a warm node when the plan chose one (TAT), else on a node made for it.
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        if req.shape.is_none() && !req.node_id.is_empty() {
            return self.launch_on_node(req).await;
        }
        self.launch(req).await
    }

    /// TAT's invocations on the warm node: the one whose description carries the token.
    async fn find_sent(&self, region: &str, node_id: &str, token: &str) -> Result<Option<JobStatus>, ProviderError> {
        self.find_invocation(region, node_id, token).await
    }

    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.command_status(region, id).await } else { self.status(region, id).await }
    }

    async fn list_job_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_tagged(filter).await?;
        Ok(instances
            .iter()
            .filter(|i| cvm::tags_of(i).contains_key(crate::providers::TAG_JOB))
            .filter_map(|i| cvm::to_any_node(i, &filter.region))
            .collect())
    }

    async fn release_job_node(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.release(region, id).await
    }

    /// A job on a warm node: its invocation is cancelled and the node stays in its pool.
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.cancel_command(region, id).await } else { self.cancel(region, id).await }
    }
}

#[async_trait]
impl LogPort for TencentProvider {
    /// The job's own output: what its node's log or console holds (one replica per node).
    async fn job_logs(
        &self,
        region: &str,
        id: &str,
        _follow: bool,
        out: &crate::providers::ports::LogSink<'_>,
    ) -> Result<(), ProviderError> {
        let text = if is_command_run(id) {
            Some(self.command_output(region, id).await?)
        } else {
            self.job_log(region, id).await?
        };
        let text = text.ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Retryable,
                "NoAgentAnswer",
                format!("the TAT agent on {id} did not answer; try again"),
            )
        })?;
        for line in crate::providers::userdata::job_output(&text) {
            out(0, line);
        }
        Ok(())
    }
}
