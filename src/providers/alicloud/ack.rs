//! ACK (CS 2015-12-15, ROA): the kubeconfig of the provider block's cluster,
//! `GET /k8s/{ClusterId}/user_config` (DescribeClusterUserKubeconfig; reference C.7).

use super::client::Client;
use crate::providers::{ErrorClass, ProviderError};

pub async fn kubeconfig(client: &Client, region: &str, private: bool) -> Result<String, ProviderError> {
    let cluster = client.config().cluster_id.clone().ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "MissingClusterId",
            "the Kubernetes job backend needs an ACK cluster\nhint: set `cluster_id` in `provider \"alicloud\"`",
        )
    })?;
    cluster_kubeconfig(client, &cluster, region, private).await
}

/// The kubeconfig of an ACK cluster by id (a pool's `kubernetes { cluster_id }`).
pub async fn cluster_kubeconfig(
    client: &Client,
    cluster: &str,
    region: &str,
    private: bool,
) -> Result<String, ProviderError> {
    let path = format!("/k8s/{cluster}/user_config");
    let query = vec![("PrivateIpAddress".to_string(), private.to_string())];
    let resp = client.cs("GET", &path, "DescribeClusterUserKubeconfig", region, &query).await?;
    resp["config"].as_str().map(String::from).ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Fatal,
            "BadResponse",
            format!("ACK DescribeClusterUserKubeconfig for `{cluster}` returned no `config`"),
        )
    })
}

/// ACK attaches at most this many instances per call (its console's batch size).
const ATTACH_BATCH: usize = 20;

/// Attach freshly created ECS instances to an ACK cluster (`AttachInstances`, `POST
/// /clusters/{id}/attach`) with gpuplan's node labels (ACK's `tags` are node labels; it
/// takes no taints, so spot nodes carry the capacity label without the taint). ACK
/// logs in with the pool's key pair; the instance keeps its name and data disks. The
/// attach runs as an ACK task; a refused instance comes back as one error each, and
/// the instances stay in the pool.
pub async fn attach(
    client: &Client,
    region: &str,
    join: &crate::providers::ClusterJoin,
    ids: &[String],
) -> Result<Vec<ProviderError>, ProviderError> {
    let tags: Vec<_> = join.labels.iter().map(|(k, v)| serde_json::json!({"key": k, "value": v})).collect();
    let path = format!("/clusters/{}/attach", join.cluster_id);
    let mut failed = Vec::new();
    for batch in ids.chunks(ATTACH_BATCH) {
        let mut body = serde_json::json!({
            "instances": batch,
            "tags": tags,
            "keep_instance_name": true,
            "format_disk": false,
        });
        if let Some(k) = &join.key_pair {
            body["key_pair"] = serde_json::json!(k);
        }
        let resp = client.cs_json(&path, "AttachInstances", region, &body).await?;
        for r in resp["list"].as_array().into_iter().flatten() {
            let code = r["code"].as_str().unwrap_or("200");
            if code != "200" {
                failed.push(ProviderError::new(
                    ErrorClass::Fatal,
                    "JoinFailed",
                    format!(
                        "{} did not attach to ACK cluster `{}`: {} {}",
                        r["instanceId"].as_str().unwrap_or("?"),
                        join.cluster_id,
                        code,
                        r["message"].as_str().unwrap_or("")
                    ),
                ));
            }
        }
    }
    Ok(failed)
}
