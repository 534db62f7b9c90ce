//! A plan's GPU health entries (docs/design/gpu-health.md): each unhealthy node with its
//! evidence and its fate (`plan --json`'s `health[]`), where apply cordons a quarantined
//! node, and the faults read that the state records ([`Evidence`]). Plain data, below the
//! plan's model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::health::Finding;

use crate::addr::Address;

/// One unhealthy node in a plan: its evidence and its fate (`plan --json`'s `health[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthEntry {
    /// The pool.
    pub address: Address,
    pub node: String,
    pub signal: crate::model::health::Signal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xid: Option<u32>,
    /// When the fault was first seen (RFC 3339).
    pub seen: String,
    /// `replace` or `quarantine`.
    pub action: String,
    /// What keeps a replacement waiting (`max_repairs`); absent when it goes ahead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
    /// The evidence in words: `XID 79 (GPU has fallen off the bus) on GPU 3, seen 12:04`.
    pub evidence: String,
    /// When the plan judged it (ms, the provider's clock): a replacement apply makes is
    /// recorded at this time, for `max_repairs`' hour.
    #[serde(default)]
    pub at_ms: u64,
    /// A quarantined node of a pool in a Kubernetes cluster that is not cordoned yet:
    /// apply cordons it there. Absent on VM clouds, where placement alone keeps jobs off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon: Option<Cordon>,
}

/// Where apply cordons a quarantined node: the Kubernetes backend of the pool's provider
/// (`kube:aws`) and the cluster's locator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cordon {
    pub provider: String,
    pub cluster: String,
}

/// What the state's `health` (each live node's faults, first seen) becomes once applied:
/// `set` replaces a node's faults, `remove` forgets nodes that read healthy or are gone.
/// Empty when the state already says what this plan read.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Evidence {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, Vec<Finding>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl Evidence {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }
}
