//! The provider seam: one narrow async trait every cloud implements.
//!
//! The executor (`apply/`) and refresh talk only to [`Provider`]; SDK and wire types never
//! leave a provider's folder. Errors carry an [`ErrorClass`] so retries, backoff and
//! fallbacks are decided in one place (`apply::policy`), not in each provider.
//!
//! Clouds: [`sim`] (embedded), [`tencentcloud`] (CVM, TKE) and [`alicloud`] (ECS, ACK).
//! The last two sign their own HTTP requests ([`signing`]) and share the client,
//! credentials and endpoint handling in [`http`] and the credential cache in
//! [`credentials`].

pub mod alicloud;
pub mod aws;
pub mod boot;
pub mod credentials;
pub mod health;
pub mod http;
pub mod job_env;
pub mod kube;
pub mod launch;
pub mod signed_json;
pub mod signing;
pub mod sim;
pub mod tencentcloud;
pub mod userdata;

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::ProviderKind;

// The vocabulary lives in `model/` (layer 0) so that state, plan and jobs need not depend
// on this layer; re-exported here for the providers' own code.
pub use crate::model::node::*;
pub use crate::model::tags::{self, Tags};

/// Providers by the local name pools use (`sim`, `aws`, an alias).
pub type ProviderSet = BTreeMap<String, Arc<dyn Provider>>;

/// The narrow interface every cloud implements. Object-safe: the executor holds
/// `Arc<dyn Provider>`.
#[async_trait]
pub trait Provider: Send + Sync {
    fn kind(&self) -> ProviderKind;

    /// The provider's clock, in ms since the epoch: spend accrues by it. Real clouds run
    /// on the wall clock; the sim cloud has its own (`GPUPLAN_SIM_START`, `sim advance`).
    fn clock_ms(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }

    /// Which credential source answered (`gpuplan check`), once a call has been made:
    /// its name, never a value. `None` for a cloud without credentials (sim).
    fn credential_source(&self) -> Option<String> {
        None
    }

    /// Priced offers for a GPU model (catalog prices, replaced by live ones if known).
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError>;

    /// Every node carrying gpuplan's tags in a region, paged internally (never one call
    /// per node).
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError>;

    /// Ask, ahead of the plan, the reads a first create of these new pools will make,
    /// and keep the answers for the run's creates. Called while refresh lists the fleet,
    /// and only by an apply that executes its own plan. Nothing here writes; a failed
    /// read is only a lost head start (the create asks again and reports it), so there
    /// is no error to return. Providers without such reads do nothing.
    async fn read_ahead(&self, _pools: &[NewPool]) {}

    /// Create one batch of nodes. Partial success returns the nodes made plus errors.
    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError>;

    /// Terminate nodes by id (batched by the provider to its API limit). Nodes without
    /// gpuplan's tags must be refused, never touched.
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError>;

    /// Instances by id whatever their tags (`import`): the ones that exist, each with its
    /// pool from its `gpuplan:address` tag (or [`unowned_pool`] without one). Missing
    /// ids are simply absent. Reads only.
    async fn describe_nodes(&self, _region: &str, _ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        Err(unsupported(self.kind(), "describe instances by id for `import`"))
    }

    /// Running GPU instances of a region that carry no `gpuplan:managed` tag, for
    /// `gpuplan import`; `filters` are exact tag matches (`KEY=VALUE`). Reads only.
    async fn list_unmanaged(&self, _region: &str, _filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        Err(unsupported(self.kind(), "list unmanaged instances for `gpuplan import`"))
    }

    /// Set `set` and remove the keys `remove` on instances in place (import, moved,
    /// removed). Never launches, stops, reboots or terminates anything; batched by the
    /// provider to its API limit.
    async fn tag_nodes(
        &self,
        _region: &str,
        _ids: &[String],
        _set: &Tags,
        _remove: &[String],
    ) -> Result<(), ProviderError> {
        Err(unsupported(self.kind(), "retag instances for `import`, `moved` and `removed`"))
    }

    /// The run-command agent of each of these pool nodes (`ids` in `region`): a job runs
    /// on an idle warm node only when its agent is online (`LaunchJob::node_id`, through
    /// the cloud's run-command API). `Ok(None)`: this cloud runs jobs on nodes of their own.
    async fn agents(
        &self,
        _region: &str,
        _ids: &[String],
    ) -> Result<Option<BTreeMap<String, AgentState>>, ProviderError> {
        Ok(None)
    }

    /// GPU health reads and cordons ([`health::HealthPort`]), where this cloud has them.
    fn health(&self) -> Option<&dyn health::HealthPort> {
        None
    }

    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError>;

    /// The run of a send to warm node `node_id` made under launch `token`, if the cloud
    /// ran one: an apply that stopped between the send and its record left the intent in
    /// state (`JobRecord::sending`), and the next plan asks before anything is sent again.
    /// `Ok(None)`: no such send. Clouds whose sends take an idempotency token (Alibaba's
    /// `ClientToken`) and the sim cloud (launch tokens) answer `Ok(None)`: sending again
    /// under the same token is that same send.
    async fn find_sent(&self, _region: &str, _node_id: &str, _token: &str) -> Result<Option<JobStatus>, ProviderError> {
        Ok(None)
    }

    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError>;
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError>;

    /// Stop one run for gpuplan's own reasons (a higher-priority job needs its GPUs, its
    /// node goes), so that it can be requeued from its checkpoint. Where the job is more
    /// than this run (a Kubernetes Job of several replicas), only this run stops; the
    /// status says what became of it (an evicted pod's replica is queued again by its
    /// Job). Clouds whose runs are the whole job cancel it.
    async fn preempt_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.cancel_job(region, id).await
    }

    /// The nodes made for jobs (tagged `gpuplan:job`) in a region, as `list_nodes` lists
    /// pool nodes: refresh compares them with the runs the state records, so a job node
    /// whose run the state does not know is found and terminated. Clouds without job
    /// nodes have none.
    async fn list_job_nodes(&self, _filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        Ok(Vec::new())
    }

    /// Terminate the node a finished job ran on, when the provider made that node for the
    /// job (a job VM: stopped, not terminated, so its output stays readable until then).
    /// Providers whose jobs run on pool nodes or in a cluster have nothing to release.
    async fn release_job_node(&self, _region: &str, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }

    /// The account quotas the cloud reports for launching instances in `region` (instance
    /// counts on Tencent, vCPUs on Alibaba), for `gpuplan check`. `Ok(None)`: this cloud
    /// does not report them through the API gpuplan uses.
    async fn quotas(&self, _region: &str) -> Result<Option<Vec<QuotaLine>>, ProviderError> {
        Ok(None)
    }

    /// `gpuplan check` of a cluster jobs are submitted to (`region` is its locator): can
    /// it be reached with these credentials, does the namespace exist, are gpuplan's
    /// PriorityClasses there. Providers without clusters have nothing to check.
    async fn check_cluster(&self, region: &str, _namespace: &str) -> Result<String, ProviderError> {
        Err(ProviderError::new(
            ErrorClass::Invalid,
            "NoCluster",
            format!("provider `{}` runs no cluster `{region}`", self.kind()),
        ))
    }

    /// The job's own output, line by line with its replica, for `gpuplan jobs logs`
    /// (`follow`: until it ends). Providers that cannot read it say so.
    async fn job_logs(
        &self,
        _region: &str,
        id: &str,
        _follow: bool,
        _out: &(dyn for<'l> Fn(u32, &'l str) + Send + Sync),
    ) -> Result<(), ProviderError> {
        Err(ProviderError::new(
            ErrorClass::Invalid,
            "NoJobOutput",
            format!("provider `{}` cannot read the output of run {id} yet", self.kind()),
        ))
    }
}

/// The pool an instance without a `gpuplan:address` tag reports: a name no address can
/// take (a leading `-` is not an identifier), so it never matches a pool.
pub fn unowned_pool() -> crate::addr::Address {
    crate::addr::Address::new(crate::addr::Kind::GpuPool, "-foreign")
}

/// The error of a provider that cannot do `what` yet.
fn unsupported(kind: crate::model::ProviderKind, what: &str) -> ProviderError {
    ProviderError::new(ErrorClass::Invalid, "NotSupported", format!("provider `{kind}` cannot {what} yet"))
}
