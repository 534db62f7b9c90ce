//! What a pool's nodes are launched with beyond their instance type
//! (docs/design/big-runs.md): disks from `disk {}`, the fabric and placement group from
//! `network {}`. Plain data the plan puts in each create batch and the providers, the cost
//! and the renderers read.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The root disk's size when a `disk {}` block leaves it out: room for a CUDA training
/// image (10–20 GB) and its checkpoints.
pub const DEFAULT_ROOT_GB: u32 = 200;

/// One disk: its size and the cloud's type name (`gp3`, `CLOUD_BSSD`, `cloud_essd`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Disk {
    pub size_gb: u32,
    #[serde(rename = "type")]
    pub kind: String,
}

/// A node's root disk and its data disks, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Disks {
    pub root: Disk,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<Disk>,
}

impl Disks {
    /// Every disk of one node, root first.
    pub fn all(&self) -> impl Iterator<Item = &Disk> {
        std::iter::once(&self.root).chain(&self.data)
    }
}

impl fmt::Display for Disks {
    /// `root 500 GB gp3, data 2000 GB gp3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "root {} GB {}", self.root.size_gb, self.root.kind)?;
        for d in &self.data {
            write!(f, ", data {} GB {}", d.size_gb, d.kind)?;
        }
        Ok(())
    }
}

/// A fast interconnect between a pool's nodes: AWS Elastic Fabric Adapter, a Tencent HPC
/// cluster's RDMA, Alibaba's elastic RDMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Fabric {
    Efa,
    Rdma,
    Erdma,
}

impl Fabric {
    pub fn as_str(self) -> &'static str {
        match self {
            Fabric::Efa => "efa",
            Fabric::Rdma => "rdma",
            Fabric::Erdma => "erdma",
        }
    }
}

impl fmt::Display for Fabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The launch settings of one batch beyond its instance type. `None` everywhere: the
/// cloud's defaults (the image's own root disk, no fabric, no placement group).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hardware {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Disks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<Fabric>,
    /// The cluster placement group (AWS), HPC cluster (Tencent) or deployment set
    /// (Alibaba) the batch launches into: gpuplan's name for it, one per pool and zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group: Option<String>,
}

/// The name gpuplan gives a pool's placement group in `zone`: `gpuplan-<lineage
/// prefix>-<pool>-<zone>`, so two states never share one and a pool's groups are found
/// again by name.
pub fn placement_group_name(lineage: &str, pool: &str, zone: &str) -> String {
    format!("gpuplan-{}-{pool}-{zone}", short_lineage(lineage))
}

fn short_lineage(lineage: &str) -> String {
    lineage.chars().filter(char::is_ascii_alphanumeric).take(8).collect()
}

/// What a pool's cloud (`provider_kind`, [`crate::model::ProviderKind::as_str`]) calls the
/// group gpuplan makes per pool and zone, as views and messages name it: an EC2 (and sim)
/// placement group, a Tencent Cloud HPC cluster (`HpcClusterId`), an Alibaba Cloud
/// deployment set (`DeploymentSetId`).
pub fn group_noun(provider_kind: &str) -> &'static str {
    match provider_kind {
        "tencentcloud" => "HPC cluster",
        "alicloud" => "deployment set",
        _ => "placement group",
    }
}

/// The note that marks a group as made by state `lineage` where a cloud's group listing
/// answers no tags (an Alibaba deployment set's `Description`, a Tencent HPC cluster's
/// `Remark`): `gpuplan lineage <lineage>`.
pub fn group_note(lineage: &str) -> String {
    format!("gpuplan lineage {lineage}")
}

/// Whether group `name`'s `note` says gpuplan made it, in the state whose name prefix
/// `name` carries (a delete knows the name only, not the lineage).
pub fn note_owns(note: &str, name: &str) -> bool {
    note.strip_prefix("gpuplan lineage ")
        .is_some_and(|l| !l.is_empty() && name.starts_with(&format!("gpuplan-{}-", short_lineage(l))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cloud_names_its_group_by_its_own_word() {
        assert_eq!(group_noun("aws"), "placement group");
        assert_eq!(group_noun("sim"), "placement group");
        assert_eq!(group_noun("tencentcloud"), "HPC cluster");
        assert_eq!(group_noun("alicloud"), "deployment set");
    }

    #[test]
    fn a_group_note_owns_the_names_of_its_lineage_only() {
        let lineage = "f43bc88a-7532-4532-92c9-ead8405c7f0b";
        let name = placement_group_name(lineage, "train", "cn-hangzhou-h");
        assert!(note_owns(&group_note(lineage), &name));
        assert!(!note_owns(&group_note("0000aaaa-1111"), &name), "another state's");
        assert!(!note_owns("the data team's", &name), "someone else's");
        assert!(!note_owns("gpuplan lineage ", &name), "no lineage");
    }
}
