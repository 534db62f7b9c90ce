//! GPU health of a Kubernetes pool's nodes ([`crate::providers::health::HealthPort`]),
//! read from the cluster's Node objects (`docs/design/gpu-health.md`, "Sources"): the
//! node conditions that node-problem-detector, NVIDIA's NVSentinel and the EKS node
//! monitoring agent set ([`CONDITIONS`]), and `nvidia.com/gpu` allocatable below its
//! capacity (the device plugin takes an unhealthy GPU out of allocatable) →
//! `gpu_missing`. The pool names its nodes by cloud instance id; a Node is matched to
//! one by its `spec.providerID` (`nodes::instance_id`), else by its name. `cordon` sets
//! the Node's `spec.unschedulable`, as `kubectl cordon` does.

use ::kube::api::{Api, ListParams, Patch, PatchParams};
use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;

use super::KubeJobs;
use super::nodes::instance_id;
use crate::health::xid;
use crate::model::health::{Finding, NodeHealth, Signal, Source};
use crate::providers::health::HealthPort;
use crate::providers::{ErrorClass, Provider, ProviderError};

/// The extended resource the NVIDIA device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// A node condition that marks a node: its `type`, the `status` that means trouble, the
/// signal, the XID it stands for (else the XIDs its reason or message name, else none),
/// and who sets it.
pub struct ConditionRule {
    pub kind: &'static str,
    pub bad: &'static str,
    pub signal: Signal,
    pub xid: Option<u32>,
    pub set_by: &'static str,
}

/// The conditions read (`docs/design/reference/wave4-apis.md`, "Kubernetes").
pub const CONDITIONS: &[ConditionRule] = &[
    // AKS GPU health monitoring (node-problem-detector).
    ConditionRule {
        kind: "GPUMissing",
        bad: "True",
        signal: Signal::GpuMissing,
        xid: None,
        set_by: "node-problem-detector",
    },
    ConditionRule {
        kind: "GPUXIDErrors",
        bad: "True",
        signal: Signal::XidFatal,
        xid: None,
        set_by: "node-problem-detector",
    },
    // NVIDIA NVSentinel's syslog checks.
    ConditionRule { kind: "SysLogsXIDError", bad: "True", signal: Signal::XidFatal, xid: None, set_by: "NVSentinel" },
    ConditionRule {
        kind: "SysLogsGPUFallenOff",
        bad: "True",
        signal: Signal::XidFatal,
        xid: Some(79),
        set_by: "NVSentinel",
    },
    ConditionRule {
        kind: "SysLogsSXIDError",
        bad: "True",
        signal: Signal::NvlinkDown,
        xid: None,
        set_by: "NVSentinel",
    },
    // The EKS node monitoring agent (what Karpenter's node repair reads).
    ConditionRule {
        kind: "AcceleratedHardwareReady",
        bad: "False",
        signal: Signal::XidFatal,
        xid: None,
        set_by: "EKS node monitoring agent",
    },
];

/// The XIDs a condition's text names (`XID 79`, `Xid 48`, `NvidiaXID79Error`).
fn xids_in(text: &str) -> Vec<u32> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    for (at, _) in lower.match_indices("xid") {
        let rest = lower[at + 3..].trim_start_matches([' ', ':', '=']);
        if let Ok(n) = rest[..rest.bytes().take_while(u8::is_ascii_digit).count()].parse() {
            out.push(n);
        }
    }
    out.dedup();
    out
}

/// One Node's health, as pool node `id`, read at `now_ms` (a condition's own
/// `lastTransitionTime` is when it was first seen).
pub fn node_health(id: &str, node: &Node, now_ms: u64) -> NodeHealth {
    let status = node.status.as_ref();
    let mut findings = Vec::new();
    for c in status.and_then(|s| s.conditions.as_ref()).into_iter().flatten() {
        let Some(rule) = CONDITIONS.iter().find(|r| r.kind == c.type_ && r.bad == c.status) else { continue };
        let seen_ms = c.last_transition_time.as_ref().and_then(|t| u64::try_from(t.0.as_millisecond()).ok());
        let text = format!("{} {}", c.reason.as_deref().unwrap_or(""), c.message.as_deref().unwrap_or(""));
        let detail = format!(
            "{} {}={} ({}): {}",
            rule.set_by,
            c.type_,
            c.status,
            c.reason.as_deref().unwrap_or("-"),
            c.message.as_deref().unwrap_or("").trim()
        );
        let finding = |xid| Finding {
            signal: rule.signal,
            gpu: None,
            pci_bus: None,
            xid,
            detail: detail.clone(),
            source: Source::Kubernetes,
            seen_ms: seen_ms.unwrap_or(now_ms),
        };
        let named = if rule.signal == Signal::XidFatal && rule.xid.is_none() { xids_in(&text) } else { vec![] };
        if named.is_empty() {
            findings.push(finding(rule.xid));
        } else {
            // Application XIDs (13, 31, 43, ...) named in the condition mark nothing.
            findings.extend(named.into_iter().filter(|x| xid::marks_node(*x)).map(|x| finding(Some(x))));
        }
    }
    let gpus = |m: Option<
        &std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| { m.and_then(|m| m.get(GPU_RESOURCE)).and_then(|q| q.0.trim().parse::<u32>().ok()) };
    let capacity = gpus(status.and_then(|s| s.capacity.as_ref()));
    let allocatable = gpus(status.and_then(|s| s.allocatable.as_ref()));
    if let (Some(cap), Some(alloc)) = (capacity, allocatable)
        && alloc < cap
    {
        findings.push(Finding {
            signal: Signal::GpuMissing,
            gpu: None,
            pci_bus: None,
            xid: None,
            detail: format!("{alloc} of {cap} {GPU_RESOURCE} allocatable (the device plugin took the rest out)"),
            source: Source::Kubernetes,
            seen_ms: now_ms,
        });
    }
    let cordoned = Some(node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false));
    NodeHealth { node_id: id.to_string(), findings, gpus_seen: allocatable, cordoned }
}

/// The pool node id a Node stands for.
fn node_id(node: &Node) -> String {
    let name = node.metadata.name.clone().unwrap_or_default();
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(instance_id).map_or(name, str::to_string)
}

#[async_trait]
impl HealthPort for KubeJobs {
    /// `region` is the cluster locator; `ids` the pool's node ids. A node with no Node in
    /// the cluster (not joined yet, or gone) is left out.
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        let client = self.client(region).await?;
        let nodes: Api<Node> = Api::all(client);
        let list =
            nodes.list(&ListParams::default()).await.map_err(|e| super::api_error(e, region, "nodes", "(list)"))?;
        let now = self.clock_ms();
        let mut out: Vec<NodeHealth> = list
            .items
            .iter()
            .map(|n| (node_id(n), n))
            .filter(|(id, _)| ids.contains(id))
            .map(|(id, n)| node_health(&id, n, now))
            .collect();
        out.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        Ok(out)
    }

    async fn cordon(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        let client = self.client(region).await?;
        let nodes: Api<Node> = Api::all(client);
        let list =
            nodes.list(&ListParams::default()).await.map_err(|e| super::api_error(e, region, "nodes", "(list)"))?;
        let Some(name) = list.items.iter().find(|n| node_id(n) == id).and_then(|n| n.metadata.name.clone()) else {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "NodeNotFound",
                format!("no node of {} is instance {id}: nothing to cordon", super::describe(region)),
            ));
        };
        let patch = serde_json::json!({"spec": {"unschedulable": true}});
        nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| super::api_error(e, region, "nodes", &name))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(conditions: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}, "status": {"conditions": conditions}}))
            .expect("a Node")
    }

    #[test]
    fn eks_accelerated_hardware_not_ready_names_its_xid_or_counts_whole() {
        let h = node_health(
            "i-1",
            &node(serde_json::json!([{"type": "AcceleratedHardwareReady", "status": "False",
                "reason": "NvidiaXID79Error", "message": "GPU fell off the bus"}])),
            5,
        );
        assert_eq!(
            h.findings.iter().map(|f| (f.signal, f.xid, f.seen_ms)).collect::<Vec<_>>(),
            [(Signal::XidFatal, Some(79), 5)]
        );
        let h = node_health(
            "i-1",
            &node(serde_json::json!([{"type": "AcceleratedHardwareReady", "status": "False", "reason": "DCGMError"}])),
            5,
        );
        assert_eq!(h.findings.iter().map(|f| (f.signal, f.xid)).collect::<Vec<_>>(), [(Signal::XidFatal, None)]);
        assert!(
            h.findings[0].detail.starts_with("EKS node monitoring agent AcceleratedHardwareReady=False (DCGMError)")
        );
        // True is healthy; no allocatable is no GPU count.
        let h =
            node_health("i-1", &node(serde_json::json!([{"type": "AcceleratedHardwareReady", "status": "True"}])), 5);
        assert_eq!((h.findings.len(), h.gpus_seen), (0, None));
        assert_eq!(xids_in("Xid: 48, then XID 13 and xid=95"), vec![48, 13, 95]);
    }
}
