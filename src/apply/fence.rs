//! Providers behind the fence: while an apply runs, every call that changes a cloud
//! (create, terminate, tag, launch, cancel, preempt, release, cordon), in whichever port
//! it is, first asks the run's
//! [`Cancel`] whether the state lock and the Lease it acts under still hold, and is
//! refused (never sent) once one does not (docs/design/state-and-locks.md, "Expiry and fencing"). Reads go
//! through: they change nothing. This is the one place the pools, jobs and adoption
//! phases meet the fence; it owns no other rule.

use std::sync::Arc;

use async_trait::async_trait;

use super::Cancel;
use crate::model::ProviderKind;
use crate::model::health::NodeHealth;
use crate::model::reservation::{Offering, OfferingQuery, ReserveRequest, Reserved};
use crate::providers::health::HealthPort;
use crate::providers::reservations::ReservationPort;
use crate::providers::{
    AdoptionPort, ClusterPort, CreateNodes, CreateResult, ErrorClass, FabricPort, JobPort, JobStatus, LaunchJob,
    ListFilter, LogPort, NewPool, Node, NodePort, PlacementPort, PricePort, Provider, ProviderError, ProviderSet,
    QuotaLine, RunCommandPort, Tags, ports,
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
    /// The inner provider's health port (see the accessors below: always there when asked).
    fn inner_health(&self) -> Result<&dyn HealthPort, ProviderError> {
        self.inner.health().ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "NoHealth",
                format!("provider `{}` cannot read GPU health", self.inner.kind()),
            )
        })
    }

    /// Ok while every fence holds; the refusal (a fatal error: never retried) otherwise.
    fn check(&self) -> Result<(), ProviderError> {
        match self.cancel.lost() {
            None => Ok(()),
            Some(broken) => Err(ProviderError::new(ErrorClass::Fatal, LOCK_LOST, format!("not started: {broken}"))),
        }
    }
}

/// Each port of the inner provider, behind the fence: `Some` exactly where the inner
/// provider has the port, so a fenced provider has the capabilities it wraps and no other.
#[async_trait]
impl Provider for Fenced {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }
    fn clock_ms(&self) -> u64 {
        self.inner.clock_ms()
    }
    fn credential_source(&self) -> Option<String> {
        self.inner.credential_source()
    }
    fn nodes(&self) -> Option<&dyn NodePort> {
        self.inner.nodes().map(|_| self as &dyn NodePort)
    }
    fn prices(&self) -> Option<&dyn PricePort> {
        self.inner.prices()
    }
    fn jobs(&self) -> Option<&dyn JobPort> {
        self.inner.jobs().map(|_| self as &dyn JobPort)
    }
    fn logs(&self) -> Option<&dyn LogPort> {
        self.inner.logs()
    }
    fn cluster(&self) -> Option<&dyn ClusterPort> {
        self.inner.cluster()
    }
    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        self.inner.adoption().map(|_| self as &dyn AdoptionPort)
    }
    fn run_command(&self) -> Option<&dyn RunCommandPort> {
        self.inner.run_command()
    }
    fn health(&self) -> Option<&dyn HealthPort> {
        self.inner.health().map(|_| self as &dyn HealthPort)
    }
    fn reservations(&self) -> Option<&dyn ReservationPort> {
        self.inner.reservations().map(|_| self as &dyn ReservationPort)
    }
    /// Reads only: nothing to fence.
    fn secrets(&self) -> Option<&dyn crate::providers::secrets::SecretPort> {
        self.inner.secrets()
    }
    fn placement(&self) -> Option<&dyn PlacementPort> {
        self.inner.placement().map(|_| self as &dyn PlacementPort)
    }
    fn fabric(&self) -> Option<&dyn FabricPort> {
        self.inner.fabric().map(|_| self as &dyn FabricPort)
    }
}

// Below, `ports::*_of(&*self.inner)` cannot fail: the accessors above hand out the fenced
// port only where the inner one exists; should one ever not, the call fails as the bare
// provider's would.

#[async_trait]
impl NodePort for Fenced {
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        ports::nodes_of(&*self.inner)?.list_nodes(filter).await
    }
    async fn read_ahead(&self, pools: &[NewPool]) {
        if let Some(nodes) = self.inner.nodes() {
            nodes.read_ahead(pools).await
        }
    }
    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        self.check()?;
        ports::nodes_of(&*self.inner)?.create_nodes(req).await
    }
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        self.check()?;
        ports::nodes_of(&*self.inner)?.terminate_nodes(region, ids).await
    }
    async fn quotas(&self, region: &str) -> Result<Option<Vec<QuotaLine>>, ProviderError> {
        ports::nodes_of(&*self.inner)?.quotas(region).await
    }
}

#[async_trait]
impl AdoptionPort for Fenced {
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        ports::adoption_of(&*self.inner, ports::DESCRIBE)?.describe_nodes(region, ids).await
    }
    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        ports::adoption_of(&*self.inner, ports::LIST_UNMANAGED)?.list_unmanaged(region, filters).await
    }
    async fn tag_nodes(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        self.check()?;
        ports::adoption_of(&*self.inner, ports::RETAG)?.tag_nodes(region, ids, set, remove).await
    }
}

#[async_trait]
impl JobPort for Fenced {
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        self.check()?;
        ports::jobs_of(&*self.inner)?.launch_job(req).await
    }
    async fn find_sent(&self, region: &str, node_id: &str, token: &str) -> Result<Option<JobStatus>, ProviderError> {
        ports::jobs_of(&*self.inner)?.find_sent(region, node_id, token).await
    }
    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        ports::jobs_of(&*self.inner)?.job_status(region, id).await
    }
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.check()?;
        ports::jobs_of(&*self.inner)?.cancel_job(region, id).await
    }
    async fn preempt_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.check()?;
        ports::jobs_of(&*self.inner)?.preempt_job(region, id).await
    }
    async fn list_job_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        ports::jobs_of(&*self.inner)?.list_job_nodes(filter).await
    }
    async fn release_job_node(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.check()?;
        ports::jobs_of(&*self.inner)?.release_job_node(region, id).await
    }
}

/// Health reads go through; a cordon changes the cluster and is fenced.
#[async_trait]
impl HealthPort for Fenced {
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        self.inner_health()?.read_health(region, ids).await
    }
    async fn cordon(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.check()?;
        self.inner_health()?.cordon(region, id).await
    }
}

/// Buying and cancelling reservations are behind the fence too; reads go through.
#[async_trait]
impl ReservationPort for Fenced {
    async fn capacity_block_offerings(&self, region: &str, q: &OfferingQuery) -> Result<Vec<Offering>, ProviderError> {
        self.port()?.capacity_block_offerings(region, q).await
    }
    async fn reserve(&self, region: &str, req: &ReserveRequest) -> Result<Reserved, ProviderError> {
        self.check()?;
        self.port()?.reserve(region, req).await
    }
    async fn describe_reservations(&self, region: &str, ids: &[String]) -> Result<Vec<Reserved>, ProviderError> {
        self.port()?.describe_reservations(region, ids).await
    }
    async fn cancel_reservation(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.check()?;
        self.port()?.cancel_reservation(region, id).await
    }
}

impl Fenced {
    /// The inner provider's port ([`Provider::reservations`] offers this one only when it has one).
    fn port(&self) -> Result<&dyn ReservationPort, ProviderError> {
        self.inner.reservations().ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "Unsupported",
                format!("{} sells no reservations", self.inner.kind()),
            )
        })
    }
}

/// Making and deleting placement groups are writes: fenced.
#[async_trait]
impl PlacementPort for Fenced {
    async fn ensure_group(
        &self,
        region: &str,
        zone: &str,
        name: &str,
        strategy: &str,
        tags: &Tags,
    ) -> Result<(), ProviderError> {
        self.check()?;
        self.placement_port()?.ensure_group(region, zone, name, strategy, tags).await
    }
    async fn delete_group(&self, region: &str, name: &str) -> Result<(), ProviderError> {
        self.check()?;
        self.placement_port()?.delete_group(region, name).await
    }
}

impl Fenced {
    /// The inner provider's port ([`Provider::placement`] offers this one only when it has one).
    fn placement_port(&self) -> Result<&dyn PlacementPort, ProviderError> {
        self.inner.placement().ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "Unsupported",
                format!("provider `{}` makes no placement groups", self.inner.kind()),
            )
        })
    }
}

/// Readying a fabric (on AWS, adding security group rules) is a write: fenced.
#[async_trait]
impl FabricPort for Fenced {
    async fn ensure_fabric(&self, region: &str, fabric: crate::model::hardware::Fabric) -> Result<(), ProviderError> {
        self.check()?;
        let port = self.inner.fabric().ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "Unsupported",
                format!("provider `{}` has no fabric to ready", self.inner.kind()),
            )
        })?;
        port.ensure_fabric(region, fabric).await
    }
}
