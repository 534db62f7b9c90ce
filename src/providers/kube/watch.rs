//! Watching a cluster for gpuplan job pods that cannot be scheduled, so that `gpuplan
//! reconcile` starts a pass when a job waits for nodes (docs/design/reconcile.md) instead of at the
//! next interval.
//!
//! One watch (`GET .../pods?watch=true`, kube-rs's `Api::watch`) per cluster and
//! namespace of the spec's `kubernetes {}` blocks, on the pods carrying gpuplan's job
//! label. A pod counts once when it turns `Pending` with `PodScheduled=False` for
//! `Unschedulable` (the scheduler found no node), and again only after it was scheduled
//! or deleted. A watch that ends (the server's timeout) resumes from the last
//! `resourceVersion`; one that fails is retried after a pause. Clusters named by
//! `cluster_id` (fetched through a cloud API) are not watched.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use ::kube::api::{Api, WatchEvent, WatchParams};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;

/// The label every gpuplan Job's pods carry (`jobs/k8s.rs`).
const JOB_LABEL: &str = "gpuplan.dev/job";
/// Wait before a failed watch is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// A cluster and namespace to watch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WatchTarget {
    pub kubeconfig: PathBuf,
    pub context: Option<String>,
    pub namespace: String,
}

/// A pod waiting for nodes: Pending, and the scheduler said it fits on no node.
pub fn unschedulable(pod: &Pod) -> bool {
    let Some(status) = &pod.status else { return false };
    status.phase.as_deref() == Some("Pending")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
}

async fn client(target: &WatchTarget) -> Result<::kube::Client, String> {
    let text = std::fs::read_to_string(&target.kubeconfig)
        .map_err(|e| format!("cannot read the kubeconfig `{}`: {e}", target.kubeconfig.display()))?;
    let kc = Kubeconfig::from_yaml(&text).map_err(|e| e.to_string())?;
    let opts = KubeConfigOptions { context: target.context.clone(), ..Default::default() };
    let mut config = ::kube::Config::from_custom_kubeconfig(kc, &opts).await.map_err(|e| e.to_string())?;
    config.connect_timeout = Some(Duration::from_secs(10));
    // A watch is quiet for as long as nothing changes: only the connection is timed.
    config.read_timeout = None;
    ::kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Watch `target` forever (until the task is aborted), calling `pending` with the pod's
/// name when one of gpuplan's job pods turns unschedulable, and `failed` with the reason
/// when a watch fails (it is retried).
pub async fn watch_unschedulable(
    target: WatchTarget,
    pending: impl Fn(&str) + Send + Sync + 'static,
    failed: impl Fn(&str) + Send + Sync + 'static,
) {
    crate::model::tls::install_ring();
    let mut waiting: HashSet<String> = HashSet::new();
    let mut version = "0".to_string();
    loop {
        let api: Api<Pod> = match client(&target).await {
            Ok(c) => Api::namespaced(c, &target.namespace),
            Err(e) => {
                failed(&e);
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let params = WatchParams::default().labels(JOB_LABEL).timeout(290);
        let mut events = match api.watch(&params, &version).await {
            Ok(s) => s.boxed(),
            Err(e) => {
                failed(&e.to_string());
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        while let Some(event) = events.next().await {
            match event {
                Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod)) => {
                    version = pod.metadata.resource_version.clone().unwrap_or(version);
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if unschedulable(&pod) {
                        if waiting.insert(name.clone()) {
                            pending(&name);
                        }
                    } else {
                        waiting.remove(&name);
                    }
                }
                Ok(WatchEvent::Deleted(pod)) => {
                    version = pod.metadata.resource_version.clone().unwrap_or(version);
                    waiting.remove(&pod.metadata.name.unwrap_or_default());
                }
                Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                // 410 Gone: our version is too old; start again from the current list.
                Ok(WatchEvent::Error(s)) if s.code == 410 => version = "0".into(),
                Ok(WatchEvent::Error(s)) => failed(&s.message),
                Err(e) => {
                    failed(&e.to_string());
                    break;
                }
            }
        }
        // The server ended the watch (its timeout): resume, without spinning on a server
        // that ends every watch at once.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
