//! The node port over ECS 2014-05-26: RunInstances (Amount ≤ 100 with MinAmount 1, so a short
//! stock delivers what it can; SpotAsPriceGo or SpotWithPriceLimit; Tag.N; ClientToken),
//! DescribeInstances filtered by gpuplan's tags and paged with MaxResults 100 + NextToken,
//! DeleteInstances (Force, ≤ 100 ids) after checking every id carries gpuplan's tags, and
//! the account's vCPU quotas (DescribeAccountAttributes).

use base64::Engine as _;
use serde_json::Value;

use async_trait::async_trait;

use super::AlibabaProvider;
use crate::addr::Address;
use crate::providers::launch;
use crate::providers::signed_json::cloud::{Instances, Where, record_join};
use crate::providers::{
    Capacity, CreateNodes, CreateResult, ListFilter, Node, NodePort, NodeState, ProviderError, QuotaLine, Tags,
};

pub const BATCH: usize = 100;

fn p(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

#[async_trait]
impl NodePort for AlibabaProvider {
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        let instances = self.describe_tagged(filter).await?;
        Ok(instances.iter().filter_map(|i| Self::to_node(i, &filter.region)).collect())
    }

    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        let image = self.image_for(req)?;
        let spot_join = req.join.as_ref().filter(|_| req.capacity == Capacity::Spot);
        if spot_join.is_some() {
            super::ack::spot_pool_vswitch(self.client.config(), req)?;
        }
        let network = self.network_params(req).await?; // `network {}` (`deployment.rs`)
        let mut made = launch::create_in_batches(req, &image, BATCH, "OperationDenied.NoStock", |itype, n, token| {
            let mut params = self.run_params(req, &itype, &image, n, &token);
            params.extend(network.iter().cloned());
            async move {
                let resp = self.client.ecs("RunInstances", &req.region, params).await?;
                Ok(launch::string_ids(&resp["InstanceIdSets"]["InstanceIdSet"]))
            }
        })
        .await?;
        // A pool in an ACK cluster: the new nodes are attached to it, spot ones through
        // the pool's tainted node pool. Instances that are not stay in the pool (tagged,
        // recorded) and the apply reports them.
        if let Some(join) = &req.join
            && !made.nodes.is_empty()
        {
            let ids: Vec<String> = made.nodes.iter().map(|n| n.id.clone()).collect();
            let attached = match spot_join {
                Some(join) => super::ack::attach_spot(&self.client, req, join, &image, &ids).await.map(|()| vec![]),
                None => super::ack::attach(&self.client, &req.region, join, &ids).await,
            };
            record_join(&mut made, &join.cluster_id, "not attached to ACK cluster", attached);
        }
        Ok(made)
    }

    /// Refuse the whole request when any id lacks gpuplan's tag; then delete in batches
    /// of 100 (`Force`). Ids the cloud no longer knows count as done.
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        let (ids, live) = self.owned(region, ids, "delete", |_| false).await?;
        for chunk in live.chunks(BATCH) {
            let mut params = vec![p("Force", "true")];
            for (i, id) in chunk.iter().enumerate() {
                params.push(p(format!("InstanceId.{}", i + 1), id));
            }
            match self.client.ecs("DeleteInstances", region, params).await {
                Ok(_) => {}
                // Released between the check and the call: done all the same.
                Err(e) if e.code == "InvalidInstanceId.NotFound" => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ids)
    }

    /// `DescribeAccountAttributes`: pay-as-you-go and spot vCPU quotas of the region.
    async fn quotas(&self, region: &str) -> Result<Option<Vec<QuotaLine>>, ProviderError> {
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
            QuotaLine { what: "pay-as-you-go vCPUs".into(), zone: None, used: value(names[1]), limit: value(names[0]) },
            QuotaLine { what: "spot vCPUs".into(), zone: None, used: value(names[3]), limit: value(names[2]) },
        ]))
    }
}

impl AlibabaProvider {
    fn run_params(&self, req: &CreateNodes, itype: &str, image: &str, n: usize, token: &str) -> Vec<(String, String)> {
        let cfg = self.client.config();
        let mut ps = vec![
            p("ZoneId", &req.zone),
            p("InstanceType", itype),
            p("ImageId", image),
            p("Amount", n.to_string()),
            p("MinAmount", "1"),
            p("InstanceChargeType", "PostPaid"),
            p("InstanceName", format!("gpuplan-{}", req.pool).replace(['.', '[', ']', '"'], "-")),
            p("ClientToken", token),
        ];
        if req.capacity == Capacity::Spot {
            match req.max_spot_price {
                Some(usd) => {
                    ps.push(p("SpotStrategy", "SpotWithPriceLimit"));
                    ps.push(p("SpotPriceLimit", format!("{:.3}", usd * cfg.cny_per_usd)));
                }
                None => ps.push(p("SpotStrategy", "SpotAsPriceGo")),
            }
        }
        // Into a capacity reservation (`capacity {}`): its private pool, by id.
        if let Some(r) = &req.reservation {
            ps.push(p("PrivatePoolOptions.MatchCriteria", "Target"));
            ps.push(p("PrivatePoolOptions.Id", &r.id));
        }
        for (i, (k, v)) in req.tags.iter().enumerate() {
            ps.push(p(format!("Tag.{}.Key", i + 1), k));
            ps.push(p(format!("Tag.{}.Value", i + 1), v));
        }
        if let Some(vsw) = cfg.subnets.get(&req.zone) {
            ps.push(p("VSwitchId", vsw));
        }
        for (i, sg) in cfg.security_groups.iter().enumerate() {
            ps.push(p(format!("SecurityGroupIds.{}", i + 1), sg));
        }
        if let Some(k) = &cfg.key_name {
            ps.push(p("KeyPairName", k));
        }
        if let Some(u) = &req.user_data {
            ps.push(p("UserData", base64::engine::general_purpose::STANDARD.encode(u)));
        }
        // `disk {}`: the system disk and data disks (the `Tag.N` above tag them too).
        if let Some(d) = req.hardware.as_ref().and_then(|h| h.disks.as_ref()) {
            ps.push(p("SystemDisk.Category", &d.root.kind));
            ps.push(p("SystemDisk.Size", d.root.size_gb.to_string()));
            for (i, x) in d.data.iter().enumerate() {
                ps.push(p(format!("DataDisk.{}.Category", i + 1), &x.kind));
                ps.push(p(format!("DataDisk.{}.Size", i + 1), x.size_gb.to_string()));
                ps.push(p(format!("DataDisk.{}.DeleteWithInstance", i + 1), "true"));
            }
        }
        ps
    }
}

#[async_trait]
impl Instances for AlibabaProvider {
    const TAGS_OF: fn(&Value) -> Tags = tags_of;
    const NODE_OF: fn(&Value, &str, Address) -> Option<Node> = node_of;
    const IS_RUNNING: fn(&Value) -> bool = |i| i["Status"].as_str() == Some("Running");

    /// DescribeInstances with `Tag.N` pairs (and `Status=Running` where `q.running`),
    /// paged with MaxResults 100 and NextToken until it ends or repeats.
    async fn describe_where(&self, region: &str, q: &Where<'_>) -> Result<Vec<Value>, ProviderError> {
        let mut base = vec![p("MaxResults", BATCH.to_string())];
        if q.running {
            base.push(p("Status", "Running"));
        }
        for (n, (k, v)) in q.tags.iter().enumerate() {
            base.push(p(format!("Tag.{}.Key", n + 1), k));
            base.push(p(format!("Tag.{}.Value", n + 1), v));
        }
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut params = base.clone();
            if let Some(t) = &next {
                params.push(p("NextToken", t));
            }
            let resp = self.client.ecs("DescribeInstances", region, params).await?;
            out.extend(resp["Instances"]["Instance"].as_array().cloned().unwrap_or_default());
            match resp["NextToken"].as_str().filter(|t| !t.is_empty()) {
                Some(t) if Some(t) != next.as_deref() => next = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// Instances by id, 100 ids per call.
    async fn describe_ids(&self, region: &str, ids: &[String]) -> Result<Vec<Value>, ProviderError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(BATCH) {
            let list = serde_json::to_string(chunk).unwrap_or_default();
            let params = vec![p("InstanceIds", list), p("MaxResults", BATCH.to_string())];
            let resp = self.client.ecs("DescribeInstances", region, params).await?;
            out.extend(resp["Instances"]["Instance"].as_array().cloned().unwrap_or_default());
        }
        Ok(out)
    }
}

pub fn tags_of(inst: &Value) -> Tags {
    inst["Tags"]["Tag"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| Some((t["TagKey"].as_str()?, t["TagValue"].as_str()?))).collect())
        .unwrap_or_default()
}

pub fn capacity_of(inst: &Value) -> Capacity {
    match inst["SpotStrategy"].as_str() {
        Some("SpotAsPriceGo") | Some("SpotWithPriceLimit") => Capacity::Spot,
        _ => Capacity::OnDemand,
    }
}

/// A spot instance the cloud is recycling (reclaim notice), from its operation locks.
pub fn recycling(inst: &Value) -> bool {
    inst["OperationLocks"]["LockReason"]
        .as_array()
        .is_some_and(|a| a.iter().any(|l| l["LockReason"].as_str() == Some("Recycling")))
}

/// A DescribeInstances entry as a node of `pool`, whatever its tags say.
pub fn node_of(inst: &Value, region: &str, pool: Address) -> Option<Node> {
    let tags = tags_of(inst);
    let capacity = capacity_of(inst);
    let state = match inst["Status"].as_str().unwrap_or_default() {
        _ if capacity == Capacity::Spot && recycling(inst) => NodeState::Reclaimed,
        "Pending" | "Starting" => NodeState::Pending,
        "Running" => NodeState::Running,
        // Stopped is not released: its disks bill, and so does the instance unless it was
        // stopped in StopCharging mode.
        "Stopping" | "Stopped" => NodeState::Stopped,
        _ => NodeState::Terminated,
    };
    Some(Node {
        provider: None,
        id: inst["InstanceId"].as_str()?.to_string(),
        pool,
        instance_type: inst["InstanceType"].as_str().unwrap_or_default().to_string(),
        region: region.to_string(),
        zone: inst["ZoneId"].as_str().unwrap_or_default().to_string(),
        capacity,
        state,
        image: inst["ImageId"].as_str().map(String::from),
        tags,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::providers::TAG_MANAGED;

    fn to_node(inst: &Value, region: &str) -> Option<Node> {
        AlibabaProvider::to_node(inst, region)
    }

    fn inst(status: &str, strategy: &str, locks: &[&str]) -> Value {
        json!({
            "InstanceId": "i-1", "Status": status, "SpotStrategy": strategy, "ZoneId": "cn-hangzhou-h",
            "InstanceType": "ecs.gn6i-c4g1.xlarge", "ImageId": "m-1",
            "OperationLocks": {"LockReason": locks.iter().map(|l| json!({"LockReason": l})).collect::<Vec<_>>()},
            "Tags": {"Tag": [
                {"TagKey": TAG_MANAGED, "TagValue": "true"},
                {"TagKey": crate::providers::TAG_ADDRESS, "TagValue": "gpu_pool.train"},
            ]},
        })
    }

    #[test]
    fn instances_map_to_nodes_and_recycled_spot_is_reclaimed() {
        let n = to_node(&inst("Running", "SpotAsPriceGo", &[]), "cn-hangzhou").expect("node");
        assert_eq!((n.capacity, n.state, n.zone.as_str()), (Capacity::Spot, NodeState::Running, "cn-hangzhou-h"));
        let r = to_node(&inst("Running", "SpotWithPriceLimit", &["Recycling"]), "r").expect("node");
        assert_eq!(r.state, NodeState::Reclaimed);
        let od = to_node(&inst("Stopped", "NoSpot", &[]), "r").expect("node");
        assert_eq!((od.capacity, od.state), (Capacity::OnDemand, NodeState::Stopped), "stopped is not gone");
    }
}
