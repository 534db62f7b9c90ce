//! One provider type for both signed-JSON clouds: [`Cloud`] holds what every such cloud
//! has (its signed client, its run-command runner, its live-quote cache) plus what only
//! it keeps (`own`), and implements [`Provider`] once. Each cloud is a [`CloudApi`]
//! (`tencentcloud::Tencent`, `alicloud::Alibaba`) and writes, for `Cloud<itself>`, the
//! ports that truly differ (nodes, prices) and the small traits the shared ports run on:
//! [`Instances`], [`JobNodes`] and [`SendSecrets`] here (the job and log ports,
//! `jobs.rs`), and `adopt::Retag` (the adoption port, `adopt.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::agents::{AgentApi, Agents};
use super::client::{Client, Wire};
use crate::addr::Address;
use crate::model::ProviderKind;
use crate::providers::http::{CloudConfig, QuoteCache};
use crate::providers::reservations::ReservationPort;
use crate::providers::{
    AdoptionPort, CreateNodes, CreateResult, ErrorClass, JobPort, JobStatus, LaunchJob, ListFilter, LogPort, Node,
    NodePort, PlacementPort, PricePort, Provider, ProviderError, RunCommandPort, TAG_ADDRESS, TAG_JOB, TAG_LINEAGE,
    TAG_MANAGED, Tags,
};

/// One signed-JSON cloud: its wire, its run-command agent, its kind.
pub trait CloudApi: Send + Sync + Sized + 'static {
    type Wire: Wire;
    type Agent: AgentApi;
    const KIND: ProviderKind;
    /// What its launch call needs for an image, as a missing one's error says it.
    const IMAGE_NEEDED: &'static str;

    /// Its run-command API over the provider's client.
    fn agent(client: Arc<Client<Self::Wire>>) -> Self::Agent;

    /// Reserved capacity, where this cloud sells it.
    fn reservations(_cloud: &Cloud<Self>) -> Option<&dyn ReservationPort> {
        None
    }
}

/// The provider of one signed-JSON cloud's provider block.
pub struct Cloud<A: CloudApi> {
    pub client: Arc<Client<A::Wire>>,
    /// Warm-node runs, GPU health and job-node checks through the cloud's agent.
    pub agents: Agents<A::Agent>,
    /// Live quotes, for the run.
    pub quotes: QuoteCache,
    /// What only this cloud keeps.
    pub own: A,
}

impl<A: CloudApi> Cloud<A> {
    /// The provider of a block's settings; nothing is called until a port is used.
    pub fn build(config: CloudConfig, own: A) -> Result<Self, ProviderError> {
        let client = Arc::new(Client::new(config)?);
        Ok(Cloud { agents: Agents::new(A::agent(client.clone())), client, quotes: Default::default(), own })
    }

    /// The image a create launches: the pool's, else the provider block's; neither is an
    /// error that says where to set one.
    pub fn image_for(&self, req: &CreateNodes) -> Result<String, ProviderError> {
        req.image.clone().or_else(|| self.client.config().image.clone()).ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "MissingImage",
                format!(
                    "`{}` has no image to launch: {}\nhint: set `image` in the pool or in `provider \"{}\"`",
                    req.pool,
                    A::IMAGE_NEEDED,
                    A::KIND
                ),
            )
        })
    }
}

#[async_trait]
impl<A: CloudApi> Provider for Cloud<A>
where
    Cloud<A>: NodePort + PricePort + AdoptionPort + JobPort + LogPort + PlacementPort,
{
    fn kind(&self) -> ProviderKind {
        A::KIND
    }

    fn credential_source(&self) -> Option<String> {
        self.client.config().credentials.source()
    }

    fn nodes(&self) -> Option<&dyn NodePort> {
        Some(self)
    }

    fn prices(&self) -> Option<&dyn PricePort> {
        Some(self)
    }

    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }

    /// Job nodes and warm-node runs (`jobs.rs`).
    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }

    fn logs(&self) -> Option<&dyn LogPort> {
        Some(self)
    }

    /// The agents of pool nodes (`agents.rs`).
    fn run_command(&self) -> Option<&dyn RunCommandPort> {
        Some(&self.agents)
    }

    /// GPU health through the run-command agent (`agents.rs`).
    fn health(&self) -> Option<&dyn crate::providers::health::HealthPort> {
        Some(&self.agents)
    }

    fn reservations(&self) -> Option<&dyn ReservationPort> {
        A::reservations(self)
    }

    /// The groups a pool's nodes launch into: Tencent HPC clusters (`tencentcloud/hpc.rs`),
    /// Alibaba deployment sets (`alicloud/deployment.rs`).
    fn placement(&self) -> Option<&dyn PlacementPort> {
        Some(self)
    }
}

/// Which instances a listing asks for: those whose tags match all of `tags` exactly, and
/// only running ones where `running` and the API filters by state (callers check too).
pub struct Where<'a> {
    pub tags: &'a [(String, String)],
    pub running: bool,
}

/// A cloud's instance reads, as its `DescribeInstances` answers them.
#[async_trait]
pub trait Instances: Send + Sync {
    /// An instance entry's tags.
    const TAGS_OF: fn(&Value) -> Tags;
    /// An instance entry as a node of `pool`, whatever its tags say.
    const NODE_OF: fn(&Value, &str, Address) -> Option<Node>;
    /// Whether an instance entry is running.
    const IS_RUNNING: fn(&Value) -> bool;

    /// A pool node from an instance entry; `None` for job nodes and instances whose
    /// address tag is not a pool address.
    fn to_node(inst: &Value, region: &str) -> Option<Node> {
        if Self::TAGS_OF(inst).contains_key(TAG_JOB) {
            return None;
        }
        Self::to_any_node(inst, region)
    }

    /// A node from an instance entry, job node or not. An instance without a parsable
    /// address tag is not gpuplan's: not a node of any pool.
    fn to_any_node(inst: &Value, region: &str) -> Option<Node> {
        let pool = Self::TAGS_OF(inst).get(TAG_ADDRESS)?.parse().ok()?;
        Self::NODE_OF(inst, region, pool)
    }

    /// An instance entry whatever its tags (adoption): one without an address tag is in
    /// no pool ([`crate::providers::unowned_pool`]).
    fn any_node(inst: &Value, region: &str) -> Option<Node> {
        Self::to_any_node(inst, region).or_else(|| Self::NODE_OF(inst, region, crate::providers::unowned_pool()))
    }

    /// The running instances among `found` that lack gpuplan's managed tag, as nodes in
    /// the pools their address tags name, if any (what `gpuplan import` may adopt).
    fn unmanaged(found: &[Value], region: &str) -> Vec<Node> {
        let running = found.iter().filter(|i| Self::IS_RUNNING(i));
        running
            .filter(|i| Self::TAGS_OF(i).get(TAG_MANAGED) != Some("true"))
            .filter_map(|i| Self::any_node(i, region))
            .collect()
    }

    /// Every instance of a region that `q` asks for, every page.
    async fn describe_where(&self, region: &str, q: &Where<'_>) -> Result<Vec<Value>, ProviderError>;

    /// Every instance with gpuplan's tags (and the filter's lineage) in a region.
    async fn describe_tagged(&self, filter: &ListFilter) -> Result<Vec<Value>, ProviderError> {
        let mut tags = vec![(TAG_MANAGED.to_string(), "true".to_string())];
        if let Some(l) = &filter.lineage {
            tags.push((TAG_LINEAGE.to_string(), l.clone()));
        }
        self.describe_where(&filter.region, &Where { tags: &tags, running: false }).await
    }

    /// Instances by id, whatever their tags, in as few calls as the API allows.
    async fn describe_ids(&self, region: &str, ids: &[String]) -> Result<Vec<Value>, ProviderError>;

    /// The ids a release of `ids` acts on: `ids` without repeats, and those of them that
    /// exist and are not `gone` already. One instance without gpuplan's managed tag
    /// refuses the whole request, so nothing is released (`verb` says what was refused).
    async fn owned(
        &self,
        region: &str,
        ids: &[String],
        verb: &str,
        gone: for<'v> fn(&'v Value) -> bool,
    ) -> Result<(Vec<String>, Vec<String>), ProviderError> {
        let ids = crate::providers::http::dedup(ids);
        let mut live = Vec::new();
        for inst in &self.describe_ids(region, &ids).await? {
            let id = inst["InstanceId"].as_str().unwrap_or_default().to_string();
            if Self::TAGS_OF(inst).get(TAG_MANAGED) != Some("true") {
                return Err(ProviderError::new(
                    ErrorClass::Invalid,
                    "UnmanagedInstance",
                    format!(
                        "refusing to {verb} `{id}` in {region}: it lacks the tag {TAG_MANAGED}=true, so gpuplan does not own it; nothing was {verb}d"
                    ),
                ));
            }
            if !gone(inst) {
                live.push(id);
            }
        }
        Ok((ids, live))
    }

    /// Job node `id`, checked to be one of gpuplan's.
    async fn job_instance(&self, region: &str, id: &str) -> Result<Value, ProviderError> {
        let found = self.describe_ids(region, &[id.to_string()]).await?;
        crate::providers::launch::job_instance(found, Self::TAGS_OF, region, id)
    }
}

/// A create's join of its new nodes to a Kubernetes cluster, into its result: the nodes
/// the cluster refused are reported one error each, and a failed call says how many
/// nodes it left out (`how`: `did not join TKE cluster`). The nodes stay in the pool
/// (tagged, recorded) either way, and the apply reports them: nothing is orphaned.
pub fn record_join(
    made: &mut CreateResult,
    cluster: &str,
    how: &str,
    joined: Result<Vec<ProviderError>, ProviderError>,
) {
    match joined {
        Ok(failed) => made.errors.extend(failed),
        Err(e) => made.errors.push(ProviderError::new(
            ErrorClass::Fatal,
            e.code.clone(),
            format!(
                "{} {} created but {how} `{cluster}`: {}",
                crate::model::words::nodes(made.nodes.len()),
                crate::model::words::plural(made.nodes.len(), "was", "were"),
                e.message
            ),
        )),
    }
}

/// A cloud's jobs on nodes made for them (user data; `jobs.rs` runs the rest).
#[async_trait]
pub trait JobNodes: Instances {
    /// The code a sold-out launch answers.
    const STOCKOUT: &'static str;
    /// Whether a job node stays up after its job, for its exit code to be read through the
    /// agent (a cloud without console output).
    const KEEP_JOB_NODE: bool;

    /// A job node's run, from its instance (and its console or log).
    async fn node_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError>;

    /// Stop a job node's run: its node goes.
    async fn node_cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError>;

    /// A job node's output: its console or log.
    async fn node_output(&self, region: &str, id: &str) -> Result<String, ProviderError>;
}

/// The values of a job's secrets kept in this cloud's store, read at send time for a job
/// on a warm node (they travel only in the agent's parameters), by the reference's text.
#[async_trait]
pub trait SendSecrets: Send + Sync {
    async fn send_time_secrets(&self, req: &LaunchJob) -> Result<BTreeMap<String, String>, ProviderError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_join_keeps_the_nodes_and_says_how_many_it_left_out() {
        let node = |id: &str| Node {
            provider: None,
            id: id.into(),
            pool: "gpu_pool.p".parse().unwrap(),
            instance_type: "t".into(),
            region: "r".into(),
            zone: "z".into(),
            capacity: crate::providers::Capacity::OnDemand,
            state: crate::providers::NodeState::Running,
            image: None,
            tags: Tags::default(),
        };
        let mut made = CreateResult { nodes: vec![node("i-1"), node("i-2")], errors: vec![] };
        let refused = ProviderError::new(ErrorClass::Fatal, "JoinFailed", "i-2 did not join");
        record_join(&mut made, "cls-1", "did not join TKE cluster", Ok(vec![refused]));
        let down = ProviderError::new(ErrorClass::Throttled, "RequestLimitExceeded", "slow down");
        record_join(&mut made, "cls-1", "did not join TKE cluster", Err(down));
        assert_eq!(made.nodes.len(), 2, "the nodes stay in the pool");
        let said: Vec<_> = made.errors.iter().map(|e| (e.class, e.code.as_str(), e.message.as_str())).collect();
        assert_eq!(
            said,
            [
                (ErrorClass::Fatal, "JoinFailed", "i-2 did not join"),
                (
                    ErrorClass::Fatal,
                    "RequestLimitExceeded",
                    "2 nodes were created but did not join TKE cluster `cls-1`: slow down"
                ),
            ]
        );
    }
}
