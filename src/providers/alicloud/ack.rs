//! ACK (CS 2015-12-15, ROA): the kubeconfig of the provider block's cluster,
//! `GET /k8s/{ClusterId}/user_config` (DescribeClusterUserKubeconfig; reference C.7),
//! and pool nodes joining the cluster: on-demand ECS instances by AttachInstances (labels
//! as `tags`), spot ones through a node pool gpuplan keeps per pool, whose
//! `kubernetes_config` carries the labels and the spot taint (AttachInstances takes none).

use serde_json::{Value, json};

use super::client::Client;
use crate::providers::{ClusterJoin, CreateNodes, ErrorClass, ProviderError};

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

/// Attach freshly created on-demand ECS instances to an ACK cluster (`AttachInstances`,
/// `POST /clusters/{id}/attach`) with gpuplan's node labels (ACK's `tags` are node
/// labels; it takes no taints, which on-demand nodes do not need). ACK
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

/// How long a new node pool may take to become `active` before its nodes are attached.
const POOL_READY_TRIES: u32 = 30;
const POOL_READY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The vSwitch of the batch's zone, which the spot node pool's scaling group names;
/// checked before any instance is launched, so a missing one launches nothing.
pub fn spot_pool_vswitch(
    cfg: &crate::providers::http::CloudConfig,
    req: &CreateNodes,
) -> Result<String, ProviderError> {
    cfg.subnets.get(&req.zone).cloned().ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "MissingVSwitch",
            format!(
                "`{}`: spot nodes join ACK through a node pool, which needs the vSwitch of {}\nhint: set `subnets = {{ \"{}\" = \"vsw-…\" }}` in `provider \"alicloud\"`",
                req.pool, req.zone, req.zone
            ),
        )
    })
}

/// Attach freshly created spot ECS instances to the ACK node pool gpuplan keeps for the
/// pool's spot nodes (created on first use), so they join with the labels and the spot
/// taint of its `kubernetes_config` (`AttachInstancesToNodePool`; ACK logs in with the
/// node pool's key pair, the instance keeps its name and data disks).
pub async fn attach_spot(
    client: &Client,
    req: &CreateNodes,
    join: &ClusterJoin,
    image: &str,
    ids: &[String],
) -> Result<(), ProviderError> {
    let pool = spot_pool(client, req, join, image).await?;
    let path = format!("/clusters/{}/nodepools/{pool}/attach", join.cluster_id);
    for batch in ids.chunks(ATTACH_BATCH) {
        let body = json!({"instances": batch, "format_disk": false, "keep_instance_name": true});
        client.cs_json(&path, "AttachInstancesToNodePool", &req.region, &body).await?;
    }
    Ok(())
}

/// The node pool's name: one per gpuplan pool and cluster, found again by name, so a
/// rerun or an apply killed after creating it never makes a second one.
fn spot_pool_name(join: &ClusterJoin) -> String {
    let pool = join.labels.iter().find(|(k, _)| k == "gpuplan.dev/pool").map(|(_, v)| v.as_str()).unwrap_or("pool");
    let safe: String = pool.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    format!("gpuplan-{safe}-spot")
}

/// The id of the pool's spot node pool: found by name (`DescribeClusterNodePools`), else
/// created and waited for until `active`.
async fn spot_pool(
    client: &Client,
    req: &CreateNodes,
    join: &ClusterJoin,
    image: &str,
) -> Result<String, ProviderError> {
    let name = spot_pool_name(join);
    let path = format!("/clusters/{}/nodepools", join.cluster_id);
    let query = vec![("NodepoolName".to_string(), name.clone())];
    let resp = client.cs("GET", &path, "DescribeClusterNodePools", &req.region, &query).await?;
    let found =
        resp["nodepools"].as_array().into_iter().flatten().find(|p| p["nodepool_info"]["name"] == name.as_str());
    if let Some(id) = found.and_then(|p| p["nodepool_info"]["nodepool_id"].as_str()) {
        return Ok(id.to_string());
    }
    let body = spot_pool_body(client, req, join, image, &name)?;
    let resp = client.cs_json(&path, "CreateClusterNodePool", &req.region, &body).await?;
    let id = resp["nodepool_id"].as_str().map(String::from).ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Fatal,
            "BadResponse",
            format!("ACK CreateClusterNodePool `{name}` in `{}` returned no nodepool_id", join.cluster_id),
        )
    })?;
    wait_active(client, &req.region, join, &id).await?;
    Ok(id)
}

/// CreateClusterNodePool's body. The scaling group describes the nodes gpuplan launches
/// (types, vSwitch, spot strategy, image, key pair) but ACK never launches any: auto
/// scaling is off and no expected node count (`desired_size`) is set, so ACK neither
/// adds nodes nor replaces reclaimed ones; gpuplan launches, records and replaces them.
fn spot_pool_body(
    client: &Client,
    req: &CreateNodes,
    join: &ClusterJoin,
    image: &str,
    name: &str,
) -> Result<Value, ProviderError> {
    let cfg = client.config();
    let labels: Vec<_> = join.labels.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
    let taints: Vec<_> = join.taints.iter().map(|(k, v, e)| json!({"key": k, "value": v, "effect": e})).collect();
    let mut group = json!({
        "vswitch_ids": [spot_pool_vswitch(cfg, req)?],
        "instance_types": req.instance_types,
        "instance_charge_type": "PostPaid",
        "spot_strategy": "SpotAsPriceGo",
        "image_id": image,
        "security_group_ids": cfg.security_groups,
    });
    if let Some(usd) = req.max_spot_price {
        let cny = format!("{:.3}", usd * cfg.cny_per_usd);
        group["spot_strategy"] = json!("SpotWithPriceLimit");
        group["spot_price_limit"] =
            req.instance_types.iter().map(|t| json!({"instance_type": t, "price_limit": cny})).collect();
    }
    if let Some(k) = &join.key_pair {
        group["key_pair"] = json!(k);
    }
    Ok(json!({
        "nodepool_info": {"name": name, "type": "ess"},
        "scaling_group": group,
        "kubernetes_config": {"labels": labels, "taints": taints},
        "auto_scaling": {"enable": false},
    }))
}

/// Poll `DescribeClusterNodePoolDetail` until the new node pool is `active`: ACK refuses
/// to attach nodes to a pool still initialising.
async fn wait_active(client: &Client, region: &str, join: &ClusterJoin, id: &str) -> Result<(), ProviderError> {
    let path = format!("/clusters/{}/nodepools/{id}", join.cluster_id);
    let mut state = String::new();
    for _ in 0..POOL_READY_TRIES {
        let resp = client.cs("GET", &path, "DescribeClusterNodePoolDetail", region, &[]).await?;
        state = resp["status"]["state"].as_str().unwrap_or_default().to_string();
        if state == "active" {
            return Ok(());
        }
        tokio::time::sleep(POOL_READY_WAIT).await;
    }
    Err(ProviderError::new(
        ErrorClass::Retryable,
        "NodePoolNotActive",
        format!(
            "ACK node pool {id} in `{}` is still `{state}` after {} s",
            join.cluster_id,
            POOL_READY_TRIES as u64 * POOL_READY_WAIT.as_secs()
        ),
    ))
}
