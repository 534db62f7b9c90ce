//! TKE 2018-05-25: the kubeconfig of the provider block's cluster, for the Kubernetes
//! job backend (DescribeClusterKubeconfig; reference B.7).

use serde_json::{Value, json};

use super::client::{Client, TKE_VERSION};
use crate::providers::{ErrorClass, ProviderError};

pub async fn kubeconfig(client: &Client, region: &str, extranet: bool) -> Result<String, ProviderError> {
    let cluster = client.config().cluster_id.clone().ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "MissingClusterId",
            "the Kubernetes job backend needs a TKE cluster\nhint: set `cluster_id` in `provider \"tencentcloud\"`",
        )
    })?;
    cluster_kubeconfig(client, &cluster, region, extranet).await
}

/// The kubeconfig of a TKE cluster by id (a pool's `kubernetes { cluster_id }`).
pub async fn cluster_kubeconfig(
    client: &Client,
    cluster: &str,
    region: &str,
    extranet: bool,
) -> Result<String, ProviderError> {
    let body = json!({"ClusterId": cluster, "IsExtranet": extranet});
    let resp = client.call("tke", TKE_VERSION, "DescribeClusterKubeconfig", region, &body).await?;
    resp["Kubeconfig"].as_str().map(String::from).ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Fatal,
            "BadResponse",
            format!("TKE DescribeClusterKubeconfig for `{cluster}` returned no Kubeconfig"),
        )
    })
}

/// TKE refuses more instance ids per AddExistedInstances call than this (undocumented;
/// CreateCluster's own limit for existing instances is 50).
const JOIN_BATCH: usize = 50;

/// Join freshly created pay-as-you-go CVMs to a TKE cluster with gpuplan's node labels
/// and taints (`AddExistedInstances`; TKE reinstalls their OS, keeping the image's login).
/// Returns one error per instance that did not join; the instances stay in the pool.
pub async fn add_existed(
    client: &Client,
    region: &str,
    join: &crate::providers::ClusterJoin,
    ids: &[String],
) -> Result<Vec<ProviderError>, ProviderError> {
    let labels: Vec<_> = join.labels.iter().map(|(k, v)| json!({"Name": k, "Value": v})).collect();
    let taints: Vec<_> = join.taints.iter().map(|(k, v, e)| json!({"Key": k, "Value": v, "Effect": e})).collect();
    let mut failed = Vec::new();
    for batch in ids.chunks(JOIN_BATCH) {
        let body = json!({
            "ClusterId": join.cluster_id,
            "InstanceIds": batch,
            "InstanceAdvancedSettings": {"Labels": labels, "Taints": taints, "Unschedulable": 0},
            "LoginSettings": {"KeepImageLogin": "true"},
        });
        let resp = client.call("tke", TKE_VERSION, "AddExistedInstances", region, &body).await?;
        let reasons = resp["FailedReasons"].as_array().cloned().unwrap_or_default();
        for (i, id) in resp["FailedInstanceIds"].as_array().into_iter().flatten().enumerate() {
            let why = reasons.get(i).and_then(Value::as_str).unwrap_or("no reason given");
            failed.push(ProviderError::new(
                ErrorClass::Fatal,
                "JoinFailed",
                format!("{} did not join TKE cluster `{}`: {why}", id.as_str().unwrap_or("?"), join.cluster_id),
            ));
        }
        for id in resp["TimeoutInstanceIds"].as_array().into_iter().flatten() {
            failed.push(ProviderError::new(
                ErrorClass::Fatal,
                "JoinTimeout",
                format!(
                    "{} timed out joining TKE cluster `{}` and may or may not have joined; check DescribeClusterInstances",
                    id.as_str().unwrap_or("?"),
                    join.cluster_id
                ),
            ));
        }
    }
    Ok(failed)
}
