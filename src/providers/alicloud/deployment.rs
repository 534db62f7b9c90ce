//! Deployment sets on ECS ([`PlacementPort`], `network { placement_group = "cluster" }`,
//! docs/design/big-runs.md), and the eRDMA interface of `fabric = "erdma"`.
//!
//! A pool's group in a zone is a deployment set of strategy `LowLatency` (ECS places its
//! instances close together in the network, for low latency between them; the other
//! strategies, `Availability` and `AvailabilityGroup`, spread them over hosts). Found by
//! name first (`DescribeDeploymentSets`, so a retried apply finds the one it made), made
//! with `CreateDeploymentSet` with the lineage in its `Description` (the listing answers
//! it; the call takes no tags), deleted with `DeleteDeploymentSet` once the pool's nodes
//! are gone. A set of gpuplan's name that this state did not make is refused, never
//! launched into or deleted. `RunInstances` names the set by id (`DeploymentSetId`),
//! looked up by name once per launch.

use async_trait::async_trait;
use serde_json::Value;

use super::AlibabaProvider;
use crate::model::hardware::{Fabric, group_note, note_owns};
use crate::providers::ports::still_in_use;
use crate::providers::{CreateNodes, ErrorClass, PlacementPort, ProviderError, TAG_LINEAGE, Tags};

/// The strategy that packs a set's instances close (`placement_group = "cluster"`).
const LOW_LATENCY: &str = "LowLatency";
/// ECS's answer while instances are still in the set.
const NOT_EMPTY: &str = "DependencyViolation.NotEmpty";

fn p(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

fn not_owned(name: &str, region: &str) -> ProviderError {
    ProviderError::new(
        ErrorClass::Invalid,
        "DeploymentSetNotOwned",
        format!(
            "deployment set `{name}` in {region} exists but was not made by this state (its Description is not \
             gpuplan's for this lineage): rename or delete it, gpuplan will not launch into it or delete it"
        ),
    )
}

impl AlibabaProvider {
    /// The deployment set named `name` in `region`, if any.
    async fn set_named(&self, region: &str, name: &str) -> Result<Option<Value>, ProviderError> {
        let params = vec![p("DeploymentSetName", name), p("PageSize", "50")];
        let resp = self.client.ecs("DescribeDeploymentSets", region, params).await?;
        let sets = resp["DeploymentSets"]["DeploymentSet"].as_array().cloned().unwrap_or_default();
        Ok(sets.into_iter().find(|s| s["DeploymentSetName"] == name))
    }

    /// What a launch of `req` adds to `RunInstances` for `network {}`: its pool's
    /// deployment set in its zone (made by apply before the launch), by id, and for
    /// `fabric = "erdma"` one elastic RDMA interface: a secondary interface in the zone's
    /// vSwitch and the first security group with `NetworkInterfaceTrafficMode`
    /// `HighPerformance` (the primary stays as configured).
    pub(super) async fn network_params(&self, req: &CreateNodes) -> Result<Vec<(String, String)>, ProviderError> {
        let mut out = Vec::new();
        let Some(h) = req.hardware.as_ref() else { return Ok(out) };
        if let Some(name) = h.placement_group.as_deref() {
            let Some(set) = self.set_named(&req.region, name).await? else {
                return Err(ProviderError::new(
                    ErrorClass::Invalid,
                    "DeploymentSetNotFound",
                    format!("deployment set `{name}` in {} is gone: the next apply makes it again", req.region),
                ));
            };
            if set["DeploymentSetDescription"].as_str() != req.tags.get(TAG_LINEAGE).map(group_note).as_deref() {
                return Err(not_owned(name, &req.region));
            }
            out.push(p("DeploymentSetId", set["DeploymentSetId"].as_str().unwrap_or_default()));
        }
        if h.fabric == Some(Fabric::Erdma) {
            let cfg = self.client.config();
            let (Some(vsw), Some(sg)) = (cfg.subnets.get(&req.zone), cfg.security_groups.first()) else {
                return Err(ProviderError::new(
                    ErrorClass::Invalid,
                    "MissingParameter",
                    format!(
                        "`{}`: the eRDMA interface needs a vSwitch of {} (`subnets`) and a security group \
                         (`security_groups`) in the provider block; nothing was launched",
                        req.pool, req.zone
                    ),
                ));
            };
            out.push(p("NetworkInterface.1.InstanceType", "Secondary"));
            out.push(p("NetworkInterface.1.NetworkInterfaceTrafficMode", "HighPerformance"));
            out.push(p("NetworkInterface.1.VSwitchId", vsw));
            out.push(p("NetworkInterface.1.SecurityGroupId", sg));
        }
        Ok(out)
    }
}

#[async_trait]
impl PlacementPort for AlibabaProvider {
    async fn ensure_group(
        &self,
        region: &str,
        _zone: &str,
        name: &str,
        _strategy: &str,
        tags: &Tags,
    ) -> Result<(), ProviderError> {
        let note = group_note(tags.get(TAG_LINEAGE).unwrap_or_default());
        if let Some(set) = self.set_named(region, name).await? {
            return if set["DeploymentSetDescription"] == note.as_str() {
                Ok(())
            } else {
                Err(not_owned(name, region))
            };
        }
        let params = vec![p("DeploymentSetName", name), p("Description", note), p("Strategy", LOW_LATENCY)];
        self.client.ecs("CreateDeploymentSet", region, params).await?;
        Ok(())
    }

    async fn delete_group(&self, region: &str, name: &str) -> Result<(), ProviderError> {
        let Some(set) = self.set_named(region, name).await? else { return Ok(()) };
        if !note_owns(set["DeploymentSetDescription"].as_str().unwrap_or_default(), name) {
            return Err(not_owned(name, region));
        }
        let id = set["DeploymentSetId"].as_str().unwrap_or_default();
        match self.client.ecs("DeleteDeploymentSet", region, vec![p("DeploymentSetId", id)]).await {
            // Nodes still being released: asked again under the throttle's longer retries.
            Err(e) if e.code == NOT_EMPTY => Err(still_in_use(e)),
            other => other.map(|_| ()),
        }
    }
}
