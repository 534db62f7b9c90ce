//! The node port ([`NodePort`]): refresh and terminate, one paged `DescribeInstances`
//! per region by tag filter, and `TerminateInstances` in batches of at most 1,000 after
//! checking every id's tags; creates go to a fleet (`fleet.rs`) or a reservation
//! (`reserved_launch.rs`), and reads ahead to `ahead.rs`.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Filter, Instance, InstanceLifecycleType, InstanceStateName};

use super::errors::from_sdk;
use async_trait::async_trait;

use super::{AwsProvider, Bucket, PAGE, read};
use crate::addr::Address;
use crate::providers::{
    Capacity, CreateNodes, CreateResult, ErrorClass, ListFilter, NewPool, Node, NodePort, NodeState, ProviderError,
    TAG_ADDRESS, TAG_JOB, TAG_LINEAGE, TAG_MANAGED, Tags,
};

/// Values per `instance-id` filter in the ownership check.
pub(super) const IDS_PER_FILTER: usize = 200;

pub fn filter(name: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Filter {
    Filter::builder().name(name).set_values(Some(values.into_iter().map(Into::into).collect())).build()
}

/// An instance's tags as a map.
pub fn tags(i: &Instance) -> Tags {
    i.tags().iter().filter_map(|t| Some((t.key()?, t.value().unwrap_or_default()))).collect()
}

pub fn is_managed(tags: &Tags) -> bool {
    tags.get(TAG_MANAGED).is_some_and(|v| v == "true")
}

/// Was this instance stopped or terminated by a spot interruption?
pub fn spot_reclaimed(i: &Instance) -> bool {
    i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot)
        && i.state_reason().and_then(|r| r.code()).is_some_and(|c| c.starts_with("Server.SpotInstance"))
}

/// A gpuplan node from an instance; `None` for one without a parsable address tag.
pub fn to_node(i: &Instance, region: &str) -> Option<Node> {
    let pool: Address = tags(i).get(TAG_ADDRESS)?.parse().ok()?;
    node_of(i, region, pool)
}

/// An instance as a node of `pool`, whatever its tags say.
pub fn node_of(i: &Instance, region: &str, pool: Address) -> Option<Node> {
    let tags = tags(i);
    let state = match i.state().and_then(|s| s.name()) {
        Some(InstanceStateName::Running) => NodeState::Running,
        _ if spot_reclaimed(i) => NodeState::Reclaimed,
        Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated) => NodeState::Terminated,
        // Stopped outside gpuplan: not serving, and its volumes still bill.
        Some(InstanceStateName::Stopping | InstanceStateName::Stopped) => NodeState::Stopped,
        _ => NodeState::Pending,
    };
    Some(Node {
        provider: None,
        id: i.instance_id()?.to_string(),
        pool,
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        region: region.to_string(),
        zone: i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string(),
        capacity: if i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot) {
            Capacity::Spot
        } else {
            Capacity::OnDemand
        },
        state,
        image: i.image_id().map(str::to_string),
        tags,
    })
}

impl AwsProvider {
    /// Every instance matching `filters` in a region: one paged call, 1,000 per page.
    pub(super) async fn describe_all(
        &self,
        region: &str,
        filters: Vec<Filter>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let client = self.client(region).await?;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = read(|| async {
                self.pace(region, "DescribeInstances", Bucket::NonMutating, None).await;
                client
                    .describe_instances()
                    .set_filters(Some(filters.clone()))
                    .max_results(PAGE as i32)
                    .set_next_token(token.clone())
                    .send()
                    .await
                    .map_err(|e| from_sdk("DescribeInstances", e))
            })
            .await?;
            for r in page.reservations() {
                out.extend(r.instances().iter().cloned());
            }
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// The job nodes a pool listing of this (region, lineage) saw, taken once: refresh's
    /// one `DescribeInstances` serves the orphan-job-node check that follows it.
    pub(super) fn seen_job_nodes(&self, f: &ListFilter) -> Option<Vec<Node>> {
        self.seen_job_nodes.lock().expect("job node cache").remove(&(f.region.clone(), f.lineage.clone()))
    }
}

/// The one tag filter of a listing: the lineage when there is one (only gpuplan writes
/// it; the managed tag is checked by [`split`]), else the managed tag: the server checks
/// every filter on every instance of the region, and a second one changes no answer.
pub(super) fn tag_filter(f: &ListFilter) -> Vec<Filter> {
    match &f.lineage {
        Some(l) => vec![filter(&format!("tag:{TAG_LINEAGE}"), [l.as_str()])],
        None => vec![filter(&format!("tag:{TAG_MANAGED}"), ["true"])],
    }
}

/// gpuplan's instances of a listing as (pool nodes, job nodes), each by id. Job nodes
/// belong to their job, not to the pool's node count (`jobs.rs`).
pub(super) fn split(instances: &[Instance], region: &str) -> (Vec<Node>, Vec<Node>) {
    let mut by_id = BTreeMap::new();
    let mut job_nodes = BTreeMap::new();
    for i in instances {
        let tags = tags(i);
        if !is_managed(&tags) {
            continue;
        }
        let slot = if tags.contains_key(TAG_JOB) { &mut job_nodes } else { &mut by_id };
        if let Some(n) = to_node(i, region) {
            slot.insert(n.id.clone(), n);
        }
    }
    (by_id.into_values().collect(), job_nodes.into_values().collect())
}

#[async_trait]
impl NodePort for AwsProvider {
    /// gpuplan's pool nodes of a region; the job nodes the same call saw are kept for
    /// the job-node listing that follows ([`AwsProvider::seen_job_nodes`]).
    async fn list_nodes(&self, f: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_all(&f.region, tag_filter(f)).await?;
        let (pool_nodes, job_nodes) = split(&instances, &f.region);
        self.seen_job_nodes.lock().expect("job node cache").insert((f.region.clone(), f.lineage.clone()), job_nodes);
        Ok(pool_nodes)
    }

    /// The type check, subnet look-up and template look-up of the new pools' first
    /// fleets (`ahead.rs`), every region at once.
    async fn read_ahead(&self, pools: &[NewPool]) {
        let mut by_region: BTreeMap<&str, Vec<&NewPool>> = BTreeMap::new();
        for p in pools {
            by_region.entry(p.region.as_str()).or_default().push(p);
        }
        futures::future::join_all(by_region.into_iter().map(|(region, pools)| self.read_ahead_in(region, pools))).await;
    }

    /// Into a capacity reservation (`reserved_launch.rs`: RunInstances targeting it), or
    /// a fleet (`fleet.rs`: CreateFleet over every allowed type and zone).
    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        match &req.reservation {
            Some(target) => self.create_reserved(req, target).await,
            None => self.create(req).await,
        }
    }

    /// Refuse the whole request when any id is an instance without gpuplan's tags;
    /// otherwise terminate the live ones in batches of at most 1,000. Ids that no longer
    /// exist or are already terminated count as done.
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        let mut seen = BTreeSet::new();
        let ids: Vec<String> = ids.iter().filter(|id| seen.insert(id.as_str())).cloned().collect();
        let mut live = Vec::new();
        let mut pools = BTreeSet::new();
        for chunk in ids.chunks(IDS_PER_FILTER) {
            let found = self.describe_all(region, vec![filter("instance-id", chunk.iter().cloned())]).await?;
            for i in &found {
                let id = i.instance_id().unwrap_or_default().to_string();
                if !is_managed(&tags(i)) {
                    return Err(ProviderError::new(
                        ErrorClass::Invalid,
                        "UnmanagedInstance",
                        format!(
                            "refusing to terminate `{id}`: it lacks the tag {TAG_MANAGED}=true, so gpuplan does not own it; nothing was terminated"
                        ),
                    ));
                }
                let gone = matches!(
                    i.state().and_then(|s| s.name()),
                    Some(InstanceStateName::Terminated | InstanceStateName::ShuttingDown)
                );
                if !gone {
                    let t = tags(i);
                    if let (Some(l), Some(a), false) = (t.get(TAG_LINEAGE), t.get(TAG_ADDRESS), t.contains_key(TAG_JOB))
                    {
                        pools.insert((l.to_string(), a.to_string()));
                    }
                    live.push(id);
                }
            }
        }
        self.terminate_owned(region, &live).await?;
        // The pools' launch templates go with their last node. A failure here leaves a
        // template behind, never a node: it is not worth failing the terminate for.
        for (lineage, pool) in pools {
            if let Err(e) = self.drop_template_if_unused(region, &lineage, &pool).await {
                self.warn_once(region, &format!("could not delete the launch template of `{pool}`: {e}"));
            }
        }
        Ok(ids)
    }
}

impl AwsProvider {
    /// `TerminateInstances` in batches; the ids were checked to be gpuplan's.
    pub(super) async fn terminate_owned(&self, region: &str, ids: &[String]) -> Result<(), ProviderError> {
        let client = self.client(region).await?;
        for batch in ids.chunks(PAGE) {
            let n = batch.len() as u32;
            self.pace(
                region,
                "TerminateInstances",
                Bucket::TerminateInstances,
                Some((Bucket::TerminateInstancesResource, n)),
            )
            .await;
            client
                .terminate_instances()
                .set_instance_ids(Some(batch.to_vec()))
                .send()
                .await
                .map_err(|e| from_sdk("TerminateInstances", e))?;
        }
        Ok(())
    }
}
