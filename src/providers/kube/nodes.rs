//! Which cloud instance a Kubernetes node is: a pod names its node (`spec.nodeName`), the
//! pool names its nodes by cloud instance id, and the Node's `spec.providerID` joins the
//! two. Without that join, a cluster whose nodes are not named by instance id (EKS names
//! them `ip-10-0-1-23.ec2.internal`, TKE by their private IP) never matches a run to a
//! pool node: idle-first removal, deferral for jobs that are not preemptible and the
//! plan's list of interrupted jobs would all miss it.
//!
//! - EKS: `aws:///us-east-1a/i-0abc123` → `i-0abc123`
//! - TKE: `qcloud:///800002/ins-abc123` → `ins-abc123`
//! - ACK: `cn-hangzhou.i-bp1abc123` → `i-bp1abc123`
//!
//! A node whose Node cannot be read (deleted since, or no RBAC `get` on nodes) or that has
//! no provider id keeps its name: as before, it then matches a pool node only when the
//! cluster names nodes by instance id.

use std::collections::HashMap;

use ::kube::api::Api;
use k8s_openapi::api::core::v1::Node;

/// The cloud instance id in a Node's `spec.providerID`, if it names one.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.trim();
    let found = match id.split_once("://") {
        // `aws:///zone/i-…`, `qcloud:///zone-id/ins-…`, `gce://project/zone/name`: the last segment.
        Some((_, path)) => path.rsplit('/').next(),
        // ACK: `<region>.<instance id>` (regions hold no dot).
        None => id.split_once('.').map(|(_, instance)| instance),
    };
    found.filter(|s| !s.is_empty())
}

/// Node name → instance id per cluster, asked once per node for the life of the process
/// (a node's provider id never changes).
#[derive(Default)]
pub struct NodeIds(tokio::sync::Mutex<HashMap<(String, String), String>>);

impl NodeIds {
    /// The instance id of node `name` in cluster `loc`, or `name` itself when the Node
    /// does not say (see the module docs).
    pub async fn of(&self, client: &::kube::Client, loc: &str, name: &str) -> String {
        if name.is_empty() {
            return String::new();
        }
        let key = (loc.to_string(), name.to_string());
        if let Some(id) = self.0.lock().await.get(&key) {
            return id.clone();
        }
        let nodes: Api<Node> = Api::all(client.clone());
        match nodes.get_opt(name).await {
            Ok(Some(node)) => {
                let provider_id = node.spec.and_then(|s| s.provider_id);
                let id = provider_id.as_deref().and_then(instance_id).unwrap_or(name).to_string();
                self.0.lock().await.insert(key, id.clone());
                id
            }
            // Deliberately not an error, and not remembered (the next status asks again): a
            // Node gone or one gpuplan may not read leaves the run keyed by its node's name,
            // which is what a cluster naming nodes by instance id needs, and the job's
            // status is read all the same.
            Ok(None) | Err(_) => name.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::instance_id;

    #[test]
    fn provider_ids_of_eks_tke_and_ack_name_their_instances() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc123def4567890"), Some("i-0abc123def4567890"));
        assert_eq!(instance_id("qcloud:///800002/ins-7ab3c9d1"), Some("ins-7ab3c9d1"));
        assert_eq!(instance_id("cn-hangzhou.i-bp1abcdefg1234567"), Some("i-bp1abcdefg1234567"));
        assert_eq!(instance_id("kind://docker/kind/kind-worker"), Some("kind-worker"));
        assert_eq!(instance_id("aws:///us-east-1a/"), None);
        assert_eq!(instance_id("node-without-a-provider"), None);
    }
}
