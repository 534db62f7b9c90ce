//! Providers behind the fence: while an apply runs, every call that changes a cloud
//! (create, terminate, tag, launch, cancel, preempt, release) first asks the run's
//! [`Cancel`] whether the state lock and the Lease it acts under still hold, and is
//! refused (never sent) once one does not (docs/design/state-and-locks.md, "Expiry and fencing"). Reads go
//! through: they change nothing. This is the one place the pools, jobs and adoption
//! phases meet the fence; it owns no other rule.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::Cancel;
use crate::model::ProviderKind;
use crate::providers::{
    AgentState, CreateNodes, CreateResult, ErrorClass, JobStatus, LaunchJob, ListFilter, NewPool, Node, Offer,
    Provider, ProviderError, ProviderSet, QuotaLine, Tags,
};

/// The code of a call refused because the lock or Lease no longer holds.
pub const LOCK_LOST: &str = "LockLost";

/// `providers`, each behind `cancel`'s fences.
pub fn guard(providers: &ProviderSet, cancel: &Arc<Cancel>) -> ProviderSet {
    providers
        .iter()
        .map(|(name, p)| {
            let fenced: Arc<dyn Provider> = Arc::new(Fenced { inner: p.clone(), cancel: cancel.clone() });
            (name.clone(), fenced)
        })
        .collect()
}

/// `providers` behind the fence of `lock` alone: for a command's few calls outside an apply.
pub fn under_lock(providers: &ProviderSet, lock: &crate::state::StateLock) -> ProviderSet {
    guard(providers, &Cancel::fenced(Arc::default(), lock.fence()))
}

/// Did this message come from a call the fence refused?
pub fn refused(message: &str) -> bool {
    message.starts_with(LOCK_LOST)
}

struct Fenced {
    inner: Arc<dyn Provider>,
    cancel: Arc<Cancel>,
}

impl Fenced {
    /// Ok while every fence holds; the refusal (a fatal error: never retried) otherwise.
    fn check(&self) -> Result<(), ProviderError> {
        match self.cancel.lost() {
            None => Ok(()),
            Some(broken) => Err(ProviderError::new(ErrorClass::Fatal, LOCK_LOST, format!("not started: {broken}"))),
        }
    }
}

#[async_trait]
impl Provider for Fenced {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }
    fn clock_ms(&self) -> u64 {
        self.inner.clock_ms()
    }
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError> {
        self.inner.offers(gpu, region).await
    }
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        self.inner.list_nodes(filter).await
    }
    async fn read_ahead(&self, pools: &[NewPool]) {
        self.inner.read_ahead(pools).await
    }
    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        self.check()?;
        self.inner.create_nodes(req).await
    }
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        self.check()?;
        self.inner.terminate_nodes(region, ids).await
    }
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        self.inner.describe_nodes(region, ids).await
    }
    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        self.inner.list_unmanaged(region, filters).await
    }
    async fn tag_nodes(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        self.check()?;
        self.inner.tag_nodes(region, ids, set, remove).await
    }
    async fn agents(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<Option<BTreeMap<String, AgentState>>, ProviderError> {
        self.inner.agents(region, ids).await
    }
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        self.check()?;
        self.inner.launch_job(req).await
    }
    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.inner.job_status(region, id).await
    }
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.check()?;
        self.inner.cancel_job(region, id).await
    }
    async fn preempt_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.check()?;
        self.inner.preempt_job(region, id).await
    }
    async fn list_job_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        self.inner.list_job_nodes(filter).await
    }
    async fn release_job_node(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.check()?;
        self.inner.release_job_node(region, id).await
    }
    async fn quotas(&self, region: &str) -> Result<Option<Vec<QuotaLine>>, ProviderError> {
        self.inner.quotas(region).await
    }
    async fn check_cluster(&self, region: &str, namespace: &str) -> Result<String, ProviderError> {
        self.inner.check_cluster(region, namespace).await
    }
    async fn job_logs(
        &self,
        region: &str,
        id: &str,
        follow: bool,
        out: &(dyn for<'l> Fn(u32, &'l str) + Send + Sync),
    ) -> Result<(), ProviderError> {
        self.inner.job_logs(region, id, follow, out).await
    }
}
