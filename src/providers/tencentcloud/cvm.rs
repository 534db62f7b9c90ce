//! The node port over CVM 2017-03-12: RunInstances in batches of at most 100 (spot as
//! SPOTPAID), DescribeInstances filtered by gpuplan's tags and paged with Offset/Limit
//! 100, TerminateInstances in batches of 100 after checking every id carries gpuplan's
//! tags, and the account's instance quotas.

use base64::Engine as _;
use serde_json::{Value, json};

use async_trait::async_trait;

use super::TencentProvider;
use super::client::CVM_VERSION;
use crate::addr::Address;
use crate::providers::launch;
use crate::providers::signed_json::cloud::{Instances, Where, record_join};
use crate::providers::{
    Capacity, CreateNodes, CreateResult, ListFilter, Node, NodePort, NodeState, ProviderError, QuotaLine, Tags,
};

/// Instances per RunInstances / TerminateInstances call, and per DescribeInstances page.
pub const BATCH: usize = 100;

#[async_trait]
impl NodePort for TencentProvider {
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_tagged(filter).await?;
        Ok(instances.iter().filter_map(|i| Self::to_node(i, &filter.region)).collect())
    }

    /// Create `req.count` instances: each allowed type in turn (preferred first) while the
    /// cloud reports no stock, batches of at most 100, one ClientToken per batch derived
    /// from the plan's token so a retried call never launches twice.
    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        let image = self.image_for(req)?;
        // Spot nodes of a pool in a TKE cluster are created in it (AddExistedInstances
        // refuses spot CVMs); they are in the cluster once the call answers.
        let in_cluster = req.join.as_ref().filter(|_| req.capacity == Capacity::Spot);
        let hpc = self.hpc_cluster_for(req).await?;
        let mut made = launch::create_in_batches(req, &image, BATCH, "ResourceInsufficient", |itype, n, token| {
            let mut body = self.run_body(req, &itype, &image, n, &token);
            if let Some(id) = &hpc {
                body["HpcClusterId"] = json!(id); // `fabric = "rdma"`: the pool's HPC cluster (`hpc.rs`)
            }
            async move {
                self.own.run_limit.wait().await;
                if let Some(join) = in_cluster {
                    return super::tke::create_in_cluster(&self.client, &req.region, join, &body).await;
                }
                let resp = self.client.call("cvm", CVM_VERSION, "RunInstances", &req.region, &body).await?;
                Ok(launch::string_ids(&resp["InstanceIdSet"]))
            }
        })
        .await?;
        // An on-demand batch of a pool in a TKE cluster: the new nodes join it. Instances
        // that do not join stay in the pool (tagged, recorded) and the apply reports them;
        // nothing is orphaned.
        if let Some(join) = &req.join
            && in_cluster.is_none()
            && !made.nodes.is_empty()
        {
            let ids: Vec<String> = made.nodes.iter().map(|n| n.id.clone()).collect();
            let joined = super::tke::add_existed(&self.client, &req.region, join, &ids).await;
            record_join(&mut made, &join.cluster_id, "did not join TKE cluster", joined);
        }
        Ok(made)
    }

    /// Refuse the whole request when any id lacks gpuplan's tag; then terminate in batches
    /// of 100. Ids the cloud no longer knows count as done.
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        let gone = |inst: &Value| inst["InstanceState"].as_str() == Some("TERMINATING");
        let (ids, live) = self.owned(region, ids, "terminate", gone).await?;
        for chunk in live.chunks(BATCH) {
            self.own.terminate_limit.wait().await;
            let body = json!({"InstanceIds": chunk});
            self.client.call("cvm", CVM_VERSION, "TerminateInstances", region, &body).await?;
        }
        Ok(ids)
    }

    /// `DescribeAccountQuota`: pay-as-you-go and spot instance quotas per zone.
    async fn quotas(&self, region: &str) -> Result<Option<Vec<QuotaLine>>, ProviderError> {
        let resp = self.client.call("cvm", CVM_VERSION, "DescribeAccountQuota", region, &serde_json::json!({})).await?;
        let q = &resp["AccountQuotaOverview"]["AccountQuota"];
        let mut out = Vec::new();
        for (set, what) in [("PostPaidQuotaSet", "pay-as-you-go instances"), ("SpotPaidQuotaSet", "spot instances")] {
            for z in q[set].as_array().into_iter().flatten() {
                out.push(QuotaLine {
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

impl TencentProvider {
    fn run_body(&self, req: &CreateNodes, itype: &str, image: &str, count: usize, token: &str) -> Value {
        let cfg = self.client.config();
        let tags: Vec<Value> = req.tags.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect();
        let mut body = json!({
            "InstanceChargeType": if req.capacity == Capacity::Spot { "SPOTPAID" } else { "POSTPAID_BY_HOUR" },
            "Placement": {"Zone": req.zone, "ProjectId": 0},
            "InstanceType": itype,
            "ImageId": image,
            "InstanceCount": count,
            "InstanceName": format!("gpuplan-{}", req.pool).replace(['.', '[', ']', '"'], "-"),
            "TagSpecification": [{"ResourceType": "instance", "Tags": tags}],
            "ClientToken": token,
        });
        if req.capacity == Capacity::Spot {
            let mut spot = json!({"SpotInstanceType": "one-time"});
            if let Some(usd) = req.max_spot_price {
                spot["MaxPrice"] = json!(format!("{:.4}", usd * cfg.cny_per_usd));
            }
            body["InstanceMarketOptions"] = json!({"MarketType": "spot", "SpotOptions": spot});
        }
        if let Some(subnet) = cfg.subnets.get(&req.zone) {
            let (vpc, subnet) = subnet.split_once('/').unwrap_or(("", subnet.as_str()));
            body["VirtualPrivateCloud"] = json!({"VpcId": vpc, "SubnetId": subnet});
        }
        if !cfg.security_groups.is_empty() {
            body["SecurityGroupIds"] = json!(cfg.security_groups);
        }
        if let Some(k) = &cfg.key_name {
            body["LoginSettings"] = json!({"KeyIds": [k]});
        }
        if let Some(u) = &req.user_data {
            body["UserData"] = json!(base64::engine::general_purpose::STANDARD.encode(u));
        }
        // `disk {}`: the system disk and data disks, tagged with the instance (the
        // TagSpecification above binds its tags to the instance's disks too).
        if let Some(d) = req.hardware.as_ref().and_then(|h| h.disks.as_ref()) {
            body["SystemDisk"] = json!({"DiskType": d.root.kind, "DiskSize": d.root.size_gb});
            if !d.data.is_empty() {
                let data: Vec<Value> = d
                    .data
                    .iter()
                    .map(|x| json!({"DiskType": x.kind, "DiskSize": x.size_gb, "DeleteWithInstance": true}))
                    .collect();
                body["DataDisks"] = json!(data);
            }
        }
        body
    }
}

#[async_trait]
impl Instances for TencentProvider {
    const TAGS_OF: fn(&Value) -> Tags = tags_of;
    const NODE_OF: fn(&Value, &str, Address) -> Option<Node> = node_of;
    const IS_RUNNING: fn(&Value) -> bool = |i| i["InstanceState"].as_str() == Some("RUNNING");

    /// DescribeInstances with a `tag:KEY` filter per tag (none without tags), paged with
    /// Offset/Limit 100 until `TotalCount`. Asked without a state filter: `q.running` is
    /// the caller's to check.
    async fn describe_where(&self, region: &str, q: &Where<'_>) -> Result<Vec<Value>, ProviderError> {
        let filters: Vec<Value> =
            q.tags.iter().map(|(k, v)| json!({"Name": format!("tag:{k}"), "Values": [v]})).collect();
        let mut out = Vec::new();
        let mut offset = 0u64;
        loop {
            let mut body = json!({"Offset": offset, "Limit": BATCH});
            if !filters.is_empty() {
                body["Filters"] = json!(filters);
            }
            let resp = self.client.call("cvm", CVM_VERSION, "DescribeInstances", region, &body).await?;
            let page = resp["InstanceSet"].as_array().cloned().unwrap_or_default();
            let total = resp["TotalCount"].as_u64().unwrap_or(0);
            let n = page.len() as u64;
            out.extend(page);
            offset += n;
            if n == 0 || offset >= total {
                return Ok(out);
            }
        }
    }

    /// Instances by id, 100 ids per call (no filters: the API takes one or the other).
    async fn describe_ids(&self, region: &str, ids: &[String]) -> Result<Vec<Value>, ProviderError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(BATCH) {
            let body = json!({"InstanceIds": chunk, "Limit": BATCH});
            let resp = self.client.call("cvm", CVM_VERSION, "DescribeInstances", region, &body).await?;
            out.extend(resp["InstanceSet"].as_array().cloned().unwrap_or_default());
        }
        Ok(out)
    }
}

/// An instance's tags as a map.
pub fn tags_of(inst: &Value) -> Tags {
    inst["Tags"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| Some((t["Key"].as_str()?, t["Value"].as_str()?))).collect())
        .unwrap_or_default()
}

/// A DescribeInstances entry as a node of `pool`, whatever its tags say.
pub fn node_of(inst: &Value, region: &str, pool: Address) -> Option<Node> {
    let tags = tags_of(inst);
    let capacity =
        if inst["InstanceChargeType"].as_str() == Some("SPOTPAID") { Capacity::Spot } else { Capacity::OnDemand };
    Some(Node {
        provider: None,
        id: inst["InstanceId"].as_str()?.to_string(),
        pool,
        instance_type: inst["InstanceType"].as_str().unwrap_or_default().to_string(),
        region: region.to_string(),
        zone: inst["Placement"]["Zone"].as_str().unwrap_or_default().to_string(),
        capacity,
        state: node_state(inst, capacity),
        image: inst["ImageId"].as_str().map(String::from),
        tags,
    })
}

/// Instance states (reference B.4). A spot instance shut down or terminating without
/// gpuplan having asked (its latest operation is not TerminateInstances) was reclaimed.
/// `STOPPED`, `STOPPING` and (otherwise) `SHUTDOWN` ("stopped, awaiting destruction") are
/// stopped, not gone: a pay-as-you-go instance keeps charging by default when stopped.
pub fn node_state(inst: &Value, capacity: Capacity) -> NodeState {
    let by_us = inst["LatestOperation"].as_str() == Some("TerminateInstances");
    match inst["InstanceState"].as_str().unwrap_or_default() {
        "PENDING" | "STARTING" => NodeState::Pending,
        "RUNNING" | "REBOOTING" => NodeState::Running,
        "SHUTDOWN" | "TERMINATING" if capacity == Capacity::Spot && !by_us => NodeState::Reclaimed,
        "STOPPED" | "STOPPING" => NodeState::Stopped,
        "SHUTDOWN" if !by_us => NodeState::Stopped,
        _ => NodeState::Terminated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{TAG_JOB, TAG_MANAGED};

    fn to_node(inst: &Value, region: &str) -> Option<Node> {
        TencentProvider::to_node(inst, region)
    }

    fn inst(state: &str, charge: &str, op: &str, tags: &[(&str, &str)]) -> Value {
        json!({
            "InstanceId": "ins-1", "InstanceState": state, "InstanceChargeType": charge,
            "InstanceType": "GN7.2XLARGE32", "Placement": {"Zone": "ap-guangzhou-3"}, "ImageId": "img-1",
            "LatestOperation": op,
            "Tags": tags.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn instances_map_to_nodes_and_reclaims_are_told_apart() {
        let pool = [(TAG_MANAGED, "true"), (crate::providers::TAG_ADDRESS, "gpu_pool.train")];
        let n = to_node(&inst("RUNNING", "SPOTPAID", "RunInstances", &pool), "ap-guangzhou").expect("node");
        assert_eq!((n.capacity, n.state, n.zone.as_str()), (Capacity::Spot, NodeState::Running, "ap-guangzhou-3"));
        let reclaimed = to_node(&inst("SHUTDOWN", "SPOTPAID", "RunInstances", &pool), "r").expect("node");
        assert_eq!(reclaimed.state, NodeState::Reclaimed);
        let ours = to_node(&inst("TERMINATING", "SPOTPAID", "TerminateInstances", &pool), "r").expect("node");
        assert_eq!(ours.state, NodeState::Terminated);
        let od = to_node(&inst("PENDING", "POSTPAID_BY_HOUR", "RunInstances", &pool), "r").expect("node");
        assert_eq!((od.capacity, od.state), (Capacity::OnDemand, NodeState::Pending));
        // Stopped is not gone: it may still bill.
        for s in ["STOPPED", "STOPPING", "SHUTDOWN"] {
            let stopped = to_node(&inst(s, "POSTPAID_BY_HOUR", "StopInstances", &pool), "r").expect("node");
            assert_eq!(stopped.state, NodeState::Stopped, "{s}");
        }
        let stopped_spot = to_node(&inst("STOPPED", "SPOTPAID", "StopInstances", &pool), "r").expect("node");
        assert_eq!(stopped_spot.state, NodeState::Stopped);
        // Job nodes and instances without a pool address are not pool nodes.
        let job = [(TAG_MANAGED, "true"), (crate::providers::TAG_ADDRESS, "gpu_pool.train"), (TAG_JOB, "job.x")];
        assert!(to_node(&inst("RUNNING", "SPOTPAID", "RunInstances", &job), "r").is_none());
        assert!(to_node(&inst("RUNNING", "SPOTPAID", "RunInstances", &[(TAG_MANAGED, "true")]), "r").is_none());
    }
}
