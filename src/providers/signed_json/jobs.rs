//! The job and log ports of both signed-JSON clouds, once: a job runs on an idle warm node
//! through the cloud's agent when the plan chose one (`agents.rs`), else on a node made
//! for it (the node port's create, booted with the user-data job script), whose run each
//! cloud reads its own way ([`JobNodes`]). Run ids tell the two apart
//! (`<node>/<send>` for a warm node's run, an instance id for a job node's).

use async_trait::async_trait;

use super::agents::AgentApi;
use super::cloud::{Cloud, CloudApi, Instances, JobNodes, SendSecrets};
use crate::providers::http::job_node_request;
use crate::providers::launch::{self, command_run_id, is_command_run};
use crate::providers::ports::LogSink;
use crate::providers::{JobPort, JobStatus, LaunchJob, ListFilter, LogPort, Node, NodePort, ProviderError, TAG_JOB};

#[async_trait]
impl<A: CloudApi> JobPort for Cloud<A>
where
    Cloud<A>: NodePort + JobNodes + SendSecrets,
{
    /// On a warm node when the plan chose one (with its secrets read now), else on one
    /// node of the job's shape made for it.
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        if req.shape.is_none() && !req.node_id.is_empty() {
            return self.agents.launch(req, &self.send_time_secrets(req).await?).await;
        }
        let made = if Self::KEEP_JOB_NODE {
            self.create_nodes(&job_node_request(&LaunchJob { keep_node: true, ..req.clone() })?).await?
        } else {
            self.create_nodes(&job_node_request(req)?).await?
        };
        launch::launched(req, made, Self::STOCKOUT)
    }

    /// The send to warm node `node` under launch `token`, with its status, where the
    /// agent's sends take no idempotency token (TAT); `None` where they do.
    async fn find_sent(&self, region: &str, node: &str, token: &str) -> Result<Option<JobStatus>, ProviderError> {
        match self.agents.api().find(region, node, token).await? {
            Some(send) => self.agents.status(region, &command_run_id(node, &send)).await.map(Some),
            None => Ok(None),
        }
    }

    /// A warm node's send, or a job node's instance.
    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.agents.status(region, id).await } else { self.node_status(region, id).await }
    }

    /// A warm node's send is stopped and the node stays in its pool; a job node goes.
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.agents.cancel(region, id).await } else { self.node_cancel(region, id).await }
    }

    /// gpuplan's instances tagged `gpuplan:job`.
    async fn list_job_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_tagged(filter).await?;
        Ok(instances
            .iter()
            .filter(|i| Self::TAGS_OF(i).contains_key(TAG_JOB))
            .filter_map(|i| Self::to_any_node(i, &filter.region))
            .collect())
    }

    /// A finished job's instance goes, once checked to be a gpuplan job node (the node
    /// port's terminate then refuses one without gpuplan's managed tag and skips one
    /// already going). One no longer listed is released already; a warm node's run has no
    /// node of its own, and its send is left alone.
    async fn release_job_node(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        if is_command_run(id) {
            return Ok(());
        }
        let found = self.describe_ids(region, &[id.to_string()]).await?;
        if found.is_empty() {
            return Ok(());
        }
        launch::job_instance(found, Self::TAGS_OF, region, id)?;
        self.terminate_nodes(region, &[id.to_string()]).await.map(|_| ())
    }
}

#[async_trait]
impl<A: CloudApi> LogPort for Cloud<A>
where
    Cloud<A>: JobNodes,
{
    /// The job's own output: what its warm node's send or its job node holds (one
    /// replica per node).
    async fn job_logs(&self, region: &str, id: &str, _follow: bool, out: &LogSink<'_>) -> Result<(), ProviderError> {
        let text = if is_command_run(id) {
            self.agents.output(region, id).await?
        } else {
            self.node_output(region, id).await?
        };
        for line in crate::providers::userdata::job_output(&text) {
            out(0, line);
        }
        Ok(())
    }
}
