//! [`SimProvider`]: the [`Provider`] trait and the ports the sim cloud has (nodes, prices,
//! jobs, adoption) over a shared [`SimCloud`].
//!
//! Every call sleeps the configured latency first and only then takes the cloud's lock,
//! so concurrent tasks overlap their latency the way they would against a remote cloud.

use std::sync::Arc;

use async_trait::async_trait;

use super::cloud::SimCloud;
use super::nodes::{PAGE, dedup};
use crate::providers::{
    AdoptionPort, CreateNodes, CreateResult, JobPort, JobStatus, LaunchJob, ListFilter, Node, NodePort, Offer,
    PricePort, Provider, ProviderError, Tags,
};
use crate::spec::model::ProviderKind;

#[derive(Clone)]
pub struct SimProvider {
    cloud: Arc<SimCloud>,
}

impl SimProvider {
    pub fn new(cloud: Arc<SimCloud>) -> Self {
        SimProvider { cloud }
    }

    pub fn cloud(&self) -> &Arc<SimCloud> {
        &self.cloud
    }

    /// The simulated network round trip, slept without holding any lock.
    async fn pause(&self) {
        if let Some(d) = self.cloud.config.latency {
            tokio::time::sleep(d).await;
        }
    }
}

#[async_trait]
impl Provider for SimProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Sim
    }

    fn clock_ms(&self) -> u64 {
        self.cloud.now_ms()
    }

    fn nodes(&self) -> Option<&dyn NodePort> {
        Some(self)
    }

    fn prices(&self) -> Option<&dyn PricePort> {
        Some(self)
    }

    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }

    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }

    /// Scripted faults (`gpuplan sim fault`) answer the reads.
    fn health(&self) -> Option<&dyn crate::providers::health::HealthPort> {
        Some(self)
    }
    fn reservations(&self) -> Option<&dyn crate::providers::reservations::ReservationPort> {
        Some(self)
    }
}

#[async_trait]
impl PricePort for SimProvider {
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        self.pause().await;
        self.cloud.api_offers(gpu, region)
    }
}

#[async_trait]
impl NodePort for SimProvider {
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let mut nodes = Vec::new();
        let mut after: Option<String> = None;
        loop {
            self.pause().await;
            let (page, next) = self.cloud.api_list_page(filter, after.as_deref())?;
            if nodes.is_empty() {
                nodes = page; // moved, not copied
            } else {
                nodes.extend(page);
            }
            match next {
                Some(id) => after = Some(id),
                None => return Ok(nodes),
            }
        }
    }

    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        self.pause().await;
        self.cloud.api_create(req)
    }

    /// Refuses the whole request when any id is not gpuplan's; otherwise terminates in
    /// batches of at most 1,000 and returns every requested id (unknown and already
    /// terminated ids count as done).
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        let ids = dedup(ids);
        self.cloud.check_terminate(region, &ids)?;
        for batch in ids.chunks(PAGE) {
            self.pause().await;
            self.cloud.api_terminate_batch(region, batch)?;
        }
        Ok(ids)
    }
}

#[async_trait]
impl AdoptionPort for SimProvider {
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        let mut out = Vec::new();
        for batch in dedup(ids).chunks(super::adopt::TAG_BATCH) {
            self.pause().await;
            out.extend(self.cloud.api_describe(region, batch)?);
        }
        Ok(out)
    }

    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        self.pause().await;
        self.cloud.api_list_unmanaged(region, filters)
    }

    async fn tag_nodes(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        for batch in dedup(ids).chunks(super::adopt::TAG_BATCH) {
            self.pause().await;
            self.cloud.api_tag(region, batch, set, remove)?;
        }
        Ok(())
    }
}

#[async_trait]
impl JobPort for SimProvider {
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        self.pause().await;
        self.cloud.api_launch_job(req)
    }

    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.pause().await;
        self.cloud.api_job_status(region, id)
    }

    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.pause().await;
        self.cloud.api_cancel_job(region, id)
    }

    /// The run ends as preempted, not cancelled: even an apply stopped before it records
    /// the stop leaves a run the next plan requeues.
    async fn preempt_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.pause().await;
        self.cloud.api_preempt_job(region, id)
    }
}
