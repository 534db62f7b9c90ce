//! HPC clusters on CVM ([`PlacementPort`], `network { fabric = "rdma" }`,
//! docs/design/big-runs.md): Tencent's RDMA (HCC) instance types launch only into an HPC
//! cluster of their zone, and an HPC cluster is what packs CVM nodes close (Tencent's
//! disaster-recovery groups spread them), so a pool with `fabric = "rdma"` gets one per
//! zone, under gpuplan's placement-group name. `DescribeHpcClusters` by name first (a
//! retried apply finds the one it made), `CreateHpcCluster` with gpuplan's tags
//! (`TagSpecification`, resource type `hpc`) and the lineage in its `Remark` (which the
//! listing answers), `DeleteHpcClusters` once the pool's nodes are gone. A cluster of
//! gpuplan's name that this state did not make is refused, never launched into or
//! deleted. `RunInstances` names the cluster by id (`HpcClusterId`), looked up by name
//! once per launch.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::TencentProvider;
use super::client::CVM_VERSION;
use crate::model::hardware::{group_note, note_owns};
use crate::providers::ports::still_in_use;
use crate::providers::{CreateNodes, ErrorClass, PlacementPort, ProviderError, TAG_LINEAGE, Tags};

/// CVM's limit on an HPC cluster's name.
const MAX_NAME: usize = 60;
/// CVM's answer while instances (shutting down ones included) are still in the cluster.
const IN_USE: &str = "ResourceInUse.HpcCluster";

fn not_owned(name: &str, region: &str) -> ProviderError {
    ProviderError::new(
        ErrorClass::Invalid,
        "HpcClusterNotOwned",
        format!(
            "HPC cluster `{name}` in {region} exists but was not made by this state (its Remark is not gpuplan's for \
             this lineage): rename or delete it, gpuplan will not launch into it or delete it"
        ),
    )
}

impl TencentProvider {
    /// The HPC cluster named `name` in `region`, if any.
    async fn hpc_named(&self, region: &str, name: &str) -> Result<Option<Value>, ProviderError> {
        let body = json!({"Name": name, "Offset": 0, "Limit": 100});
        let resp = self.client.call("cvm", CVM_VERSION, "DescribeHpcClusters", region, &body).await?;
        Ok(resp["HpcClusterSet"].as_array().into_iter().flatten().find(|c| c["Name"] == name).cloned())
    }

    /// The `HpcClusterId` a launch of `req` names: its pool's cluster in its zone, made
    /// by apply before the launch; `None` for a batch without one.
    pub(super) async fn hpc_cluster_for(&self, req: &CreateNodes) -> Result<Option<String>, ProviderError> {
        let Some(name) = req.hardware.as_ref().and_then(|h| h.placement_group.as_deref()) else { return Ok(None) };
        let Some(c) = self.hpc_named(&req.region, name).await? else {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "HpcClusterNotFound",
                format!("HPC cluster `{name}` in {} is gone: the next apply makes it again", req.region),
            ));
        };
        if c["Remark"].as_str() != req.tags.get(TAG_LINEAGE).map(group_note).as_deref() {
            return Err(not_owned(name, &req.region));
        }
        Ok(c["HpcClusterId"].as_str().map(str::to_string))
    }
}

#[async_trait]
impl PlacementPort for TencentProvider {
    async fn ensure_group(
        &self,
        region: &str,
        zone: &str,
        name: &str,
        _strategy: &str,
        tags: &Tags,
    ) -> Result<(), ProviderError> {
        if name.chars().count() > MAX_NAME {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "InvalidParameterValue.HpcClusterName",
                format!("HPC cluster name `{name}` is over Tencent's {MAX_NAME} characters: shorten the pool's name"),
            ));
        }
        let note = group_note(tags.get(TAG_LINEAGE).unwrap_or_default());
        if let Some(c) = self.hpc_named(region, name).await? {
            return if c["Remark"] == note.as_str() && c["Zone"] == zone {
                Ok(())
            } else {
                Err(not_owned(name, region))
            };
        }
        let tags: Vec<Value> = tags.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect();
        let body = json!({
            "Zone": zone,
            "Name": name,
            "Remark": note,
            "TagSpecification": [{"ResourceType": "hpc", "Tags": tags}],
        });
        self.client.call("cvm", CVM_VERSION, "CreateHpcCluster", region, &body).await?;
        Ok(())
    }

    async fn delete_group(&self, region: &str, name: &str) -> Result<(), ProviderError> {
        let Some(c) = self.hpc_named(region, name).await? else { return Ok(()) };
        if !note_owns(c["Remark"].as_str().unwrap_or_default(), name) {
            return Err(not_owned(name, region));
        }
        let body = json!({"HpcClusterIds": [c["HpcClusterId"]]});
        match self.client.call("cvm", CVM_VERSION, "DeleteHpcClusters", region, &body).await {
            // Nodes still shutting down: asked again under the throttle's longer retries.
            Err(e) if e.code == IN_USE => Err(still_in_use(e)),
            other => other.map(|_| ()),
        }
    }
}
