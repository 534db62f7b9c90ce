//! Alibaba Cloud: ECS 2014-05-26 for GPU nodes and job launches, ACK (CS 2015-12-15)
//! for the kubeconfig of the Kubernetes job backend. Requests are signed in-project with
//! ACS3-HMAC-SHA256 (`providers::signing::acs3`); wire types stay in this folder.
//!
//! - `client.rs`: RPC (ECS) and ROA (ACK) calls and the error envelope; `errors.rs`;
//!   `credentials.rs`: the credential chain (environment, RRSA, `~/.aliyun/config.json`,
//!   ECS RAM role).
//! - `ecs.rs`: run, paged tag-filtered describe, delete; `jobs.rs`: user-data job
//!   launches with exit codes from GetInstanceConsoleOutput; `warm.rs`: jobs on warm
//!   nodes through Cloud Assistant; `ack.rs`: user_config, and nodes joining the
//!   cluster (AttachInstances on demand, a tainted node pool for spot).
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
mod health;
mod jobs;
mod reservations;
mod secrets;
mod warm;

use async_trait::async_trait;

use crate::providers::http::{CloudConfig, catalog_offers};
use crate::providers::launch::is_command_run;
use crate::providers::{
    AdoptionPort, Capacity, CreateNodes, CreateResult, ErrorClass, JobPort, JobStatus, LaunchJob, ListFilter, LogPort,
    Node, NodePort, Offer, PricePort, Provider, ProviderError, RunCommandPort,
};
use crate::spec::model::ProviderKind;

pub use errors::class_of;

/// Endpoint override when the provider block sets none (tests, private endpoints).
pub const ENV_ENDPOINT: &str = "GPUPLAN_ALICLOUD_ENDPOINT";

pub struct AlibabaProvider {
    client: client::Client,
    quotes: crate::providers::http::QuoteCache,
}

impl AlibabaProvider {
    pub fn new(config: CloudConfig) -> Result<Self, ProviderError> {
        Ok(AlibabaProvider { client: client::Client::new(config)?, quotes: Default::default() })
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

#[async_trait]
impl Provider for AlibabaProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Alicloud
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

    fn logs(&self) -> Option<&dyn LogPort> {
        Some(self)
    }

    /// Deployment sets for `placement_group = "cluster"` (`deployment.rs`).
    fn placement(&self) -> Option<&dyn crate::providers::PlacementPort> {
        Some(self)
    }

    /// Capacity reservations (`reservations.rs`).
    fn reservations(&self) -> Option<&dyn crate::providers::reservations::ReservationPort> {
        Some(self)
    }
}

#[async_trait]
impl PricePort for AlibabaProvider {
    /// Catalog offers priced live with `DescribePrice` (the instance line's `TradePrice`
    /// per hour; `SpotAsPriceGo` for spot), in CNY or USD as the account's site answers.
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        let cny = self.client.config().cny_per_usd;
        let offers = catalog_offers(ProviderKind::Alicloud, gpu, region, cny);
        crate::providers::http::quoted_offers(
            ProviderKind::Alicloud,
            offers,
            &self.quotes,
            |region, itype, zone, cap| async move {
                let params: Vec<(String, String)> = [
                    ("ResourceType", "instance"),
                    ("InstanceType", itype.as_str()),
                    ("ZoneId", zone.as_str()),
                    ("SpotStrategy", if cap == Capacity::Spot { "SpotAsPriceGo" } else { "NoSpot" }),
                    ("PriceUnit", "Hour"),
                    ("Period", "1"),
                    ("Amount", "1"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
                let resp = self.client.ecs("DescribePrice", &region, params).await?;
                let price = &resp["PriceInfo"]["Price"];
                // The total includes the system disk: the instance's own line when listed.
                let line = price["DetailInfos"]["DetailInfo"]
                    .as_array()
                    .and_then(|d| d.iter().find(|l| l["Resource"] == "instanceType"))
                    .and_then(|l| l["TradePrice"].as_f64());
                let amount = line.or_else(|| price["TradePrice"].as_f64()).ok_or_else(|| {
                    ProviderError::new(
                        ErrorClass::Fatal,
                        "BadResponse",
                        format!("DescribePrice for {itype} in {zone} returned no TradePrice"),
                    )
                })?;
                Ok(if price["Currency"] == "USD" { amount } else { amount / cny })
            },
        )
        .await
    }
}

#[async_trait]
impl NodePort for AlibabaProvider {
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_tagged(filter).await?;
        Ok(instances.iter().filter_map(|i| ecs::to_node(i, &filter.region)).collect())
    }

    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        self.run_instances(req).await
    }

    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        self.delete(region, ids).await
    }

    /// `DescribeAccountAttributes`: pay-as-you-go and spot vCPU quotas of the region.
    async fn quotas(&self, region: &str) -> Result<Option<Vec<crate::providers::QuotaLine>>, ProviderError> {
        let names = [
            "max-postpaid-instance-vcpu-count",
            "used-postpaid-instance-vcpu-count",
            "max-spot-instance-vcpu-count",
            "used-spot-instance-vcpu-count",
        ];
        let params: Vec<(String, String)> =
            names.iter().enumerate().map(|(i, n)| (format!("AttributeName.{}", i + 1), n.to_string())).collect();
        let resp = self.client.ecs("DescribeAccountAttributes", region, params).await?;
        let value = |name: &str| -> u64 {
            resp["AccountAttributeItems"]["AccountAttributeItem"]
                .as_array()
                .and_then(|items| items.iter().find(|i| i["AttributeName"] == name))
                .and_then(|i| i["AttributeValues"]["ValueItem"].as_array()?.first().cloned())
                // ECS answers numbers as strings (some SDK versions as numbers): either.
                .and_then(|v| v["Value"].as_str().and_then(|s| s.parse().ok()).or_else(|| v["Value"].as_u64()))
                // An attribute ECS leaves out reads as 0: a quota that then looks too
                // small fails `check` (visibly), never passes it.
                .unwrap_or(0)
        };
        Ok(Some(vec![
            crate::providers::QuotaLine {
                what: "pay-as-you-go vCPUs".into(),
                zone: None,
                used: value(names[1]),
                limit: value(names[0]),
            },
            crate::providers::QuotaLine {
                what: "spot vCPUs".into(),
                zone: None,
                used: value(names[3]),
                limit: value(names[2]),
            },
        ]))
    }
}

#[async_trait]
impl RunCommandPort for AlibabaProvider {
    async fn agents(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<std::collections::BTreeMap<String, crate::providers::AgentState>, ProviderError> {
        self.agent_states(region, ids).await
    }
}

#[async_trait]
impl JobPort for AlibabaProvider {
    /// On a warm node when the plan chose one (Cloud Assistant), else on a node made for it.
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        if req.shape.is_none() && !req.node_id.is_empty() {
            return self.launch_on_node(req).await;
        }
        self.launch(req).await
    }

    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.command_status(region, id).await } else { self.status(region, id).await }
    }

    async fn list_job_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_tagged(filter).await?;
        Ok(instances
            .iter()
            .filter(|i| ecs::tags_of(i).contains_key(crate::providers::TAG_JOB))
            .filter_map(|i| ecs::to_any_node(i, &filter.region))
            .collect())
    }

    async fn release_job_node(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.release(region, id).await
    }

    /// A job on a warm node: its invocation is stopped and the node stays in its pool.
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.cancel_command(region, id).await } else { self.cancel(region, id).await }
    }
}

#[async_trait]
impl LogPort for AlibabaProvider {
    /// The job's own output: what its node's log or console holds (one replica per node).
    async fn job_logs(
        &self,
        region: &str,
        id: &str,
        _follow: bool,
        out: &crate::providers::ports::LogSink<'_>,
    ) -> Result<(), ProviderError> {
        let text =
            if is_command_run(id) { self.command_output(region, id).await? } else { self.console(region, id).await? };
        for line in crate::providers::userdata::job_output(&text) {
            out(0, line);
        }
        Ok(())
    }
}
