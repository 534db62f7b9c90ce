//! TKE 2018-05-25: the kubeconfig of the provider block's cluster, for the Kubernetes
//! job backend (DescribeClusterKubeconfig; reference B.7).

use serde_json::json;

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
