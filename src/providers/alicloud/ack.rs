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
