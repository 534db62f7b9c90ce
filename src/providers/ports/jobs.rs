//! The job port: launch, follow, cancel and preempt runs, and the nodes a cloud made for
//! them. Every cloud gpuplan knows has it; its optional parts are [`super::LogPort`] and
//! [`super::ClusterPort`].

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::node::{JobStatus, LaunchJob, ListFilter, Node};

#[async_trait]
pub trait JobPort: Send + Sync {
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
    /// job (a job VM: stopped, not terminated, so its output stays readable until then),
    /// or a job node no run owns. Only that node: never a cancel of a run, and a warm
    /// node's run (`<node>/<command>`) has no node of its own to release. `Ok` once the
    /// node is gone, whether this call or an earlier one ended it; an instance that is not
    /// a gpuplan job node is refused. Providers whose jobs run on pool nodes or in a
    /// cluster have nothing to release.
    async fn release_job_node(&self, _region: &str, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
