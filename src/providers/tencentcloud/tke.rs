//! TKE 2018-05-25: the kubeconfig of the provider block's cluster, for the Kubernetes
//! job backend (DescribeClusterKubeconfig; reference B.7), and pool nodes joining it:
//! on-demand CVMs gpuplan created join by AddExistedInstances, spot CVMs are created in
//! the cluster by CreateClusterInstances (AddExistedInstances refuses spot instances).

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
    let mut failed = Vec::new();
    for batch in ids.chunks(JOIN_BATCH) {
        let body = json!({
            "ClusterId": join.cluster_id,
            "InstanceIds": batch,
            "InstanceAdvancedSettings": advanced_settings(join),
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

/// gpuplan's node labels and taints as TKE's `InstanceAdvancedSettings`.
fn advanced_settings(join: &crate::providers::ClusterJoin) -> Value {
    let labels: Vec<_> = join.labels.iter().map(|(k, v)| json!({"Name": k, "Value": v})).collect();
    let taints: Vec<_> = join.taints.iter().map(|(k, v, e)| json!({"Key": k, "Value": v, "Effect": e})).collect();
    json!({"Labels": labels, "Taints": taints, "Unschedulable": 0})
}

/// Create CVMs inside a TKE cluster (`CreateClusterInstances`): TKE runs `run_body`, the
/// same RunInstances parameters a VM pool's batch sends (SPOTPAID and its market
/// options, gpuplan's tags, the batch's ClientToken), and adds the new CVMs to the
/// cluster with gpuplan's labels and taints. Returns the new instance ids.
///
/// Why this and not a TKE node pool: the CVMs are still gpuplan's, launched one batch at
/// a time with a ClientToken (a retried call never launches twice), tagged, so refresh
/// finds them like any VM pool's and a killed apply leaves nothing it cannot see; a node
/// pool's auto-scaling group would launch and replace spot CVMs on its own, outside
/// gpuplan's state and plan.
pub async fn create_in_cluster(
    client: &Client,
    region: &str,
    join: &crate::providers::ClusterJoin,
    run_body: &Value,
) -> Result<Vec<String>, ProviderError> {
    let body = json!({
        "ClusterId": join.cluster_id,
        // TKE takes the CVM parameters as a JSON string, not an object.
        "RunInstancePara": run_body.to_string(),
        "InstanceAdvancedSettings": advanced_settings(join),
    });
    let resp = client.call("tke", TKE_VERSION, "CreateClusterInstances", region, &body).await?;
    Ok(crate::providers::launch::string_ids(&resp["InstanceIdSet"]))
}
