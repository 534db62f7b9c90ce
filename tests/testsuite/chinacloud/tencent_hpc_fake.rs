//! The Tencent fake's HPC clusters (CVM 2017-03-12): `CreateHpcCluster` (Zone and a name
//! of 1-60 characters, tags of resource type `hpc`), `DescribeHpcClusters` (by name, zone
//! or ids), `DeleteHpcClusters` (refused with `ResourceInUse.HpcCluster` while an instance
//! is still in the cluster), and RunInstances' `HpcClusterId`: an HCC (RDMA) type launches
//! only into a cluster of its zone, and no other type takes one.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::chinacloud::server::Response;
use crate::chinacloud::tencent_fake::{State, err, ok};

/// The HPC cluster calls.
pub fn call(s: &mut State, region: &str, action: &str, body: &Value) -> Response {
    match action {
        "CreateHpcCluster" => create(s, region, body),
        "DescribeHpcClusters" => {
            let ids: Vec<&str> =
                body["HpcClusterIds"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let set: Vec<Value> = s
                .hpc_clusters
                .values()
                .filter(|c| c["Region"] == region)
                .filter(|c| body["Name"].is_null() || c["Name"] == body["Name"])
                .filter(|c| body["Zone"].is_null() || c["Zone"] == body["Zone"])
                .filter(|c| ids.is_empty() || ids.contains(&c["HpcClusterId"].as_str().unwrap_or_default()))
                .map(|c| view(s, c))
                .collect();
            ok(json!({"TotalCount": set.len(), "HpcClusterSet": set}))
        }
        _ => delete(s, body),
    }
}

fn create(s: &mut State, region: &str, body: &Value) -> Response {
    let (Some(zone), Some(name)) = (body["Zone"].as_str(), body["Name"].as_str()) else {
        return err("MissingParameter", "Zone and Name are required.");
    };
    if !zone.starts_with(region) {
        return err("InvalidZone.MismatchRegion", &format!("The zone `{zone}` is not in region `{region}`."));
    }
    if name.is_empty() || name.chars().count() > 60 {
        return err("InvalidParameterValue.Range", "Name must be 1 to 60 characters.");
    }
    let mut tags = BTreeMap::new();
    for spec in body["TagSpecification"].as_array().into_iter().flatten() {
        if spec["ResourceType"] != "hpc" {
            return err("InvalidParameterValue", "TagSpecification.ResourceType must be `hpc` here.");
        }
        for t in spec["Tags"].as_array().into_iter().flatten() {
            tags.insert(t["Key"].as_str().unwrap_or("").to_string(), t["Value"].as_str().unwrap_or("").to_string());
        }
    }
    s.counter += 1;
    let id = format!("hpc-{:08x}", s.counter);
    let cluster = json!({
        "HpcClusterId": id, "Name": name, "Remark": body["Remark"].as_str().unwrap_or(""), "Zone": zone,
        "Region": region, "Tags": tags, "CvmQuotaTotal": 100, "CreateTime": "2026-12-07T00:00:00Z",
    });
    s.hpc_clusters.insert(id, cluster.clone());
    ok(json!({"HpcClusterSet": [view(s, &cluster)]}))
}

fn delete(s: &mut State, body: &Value) -> Response {
    let ids: Vec<String> =
        body["HpcClusterIds"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect();
    if ids.is_empty() {
        return err("MissingParameter", "HpcClusterIds is required.");
    }
    for id in &ids {
        if !s.hpc_clusters.contains_key(id) {
            return err("ResourceNotFound.HpcCluster", &format!("The HPC cluster `{id}` does not exist."));
        }
        if !members(s, id).is_empty() {
            return err("ResourceInUse.HpcCluster", &format!("The HPC cluster `{id}` still has instances."));
        }
    }
    for id in &ids {
        s.hpc_clusters.remove(id);
    }
    ok(json!({}))
}

/// The instances still in cluster `id`.
pub fn members(s: &State, id: &str) -> Vec<String> {
    s.hpc_of.iter().filter(|(i, c)| *c == id && s.instances.contains_key(*i)).map(|(i, _)| i.clone()).collect()
}

fn view(s: &State, c: &Value) -> Value {
    let mut v = c.clone();
    let id = c["HpcClusterId"].as_str().unwrap_or_default();
    let ins = members(s, id);
    v["CurrentNum"] = json!(ins.len());
    v["InstanceIds"] = json!(ins);
    v.as_object_mut().map(|o| o.remove("Region"));
    v
}

/// RunInstances' `HpcClusterId` for `itype` in `zone`: the cluster the new instances join,
/// or the error CVM answers.
pub fn check_run(s: &State, zone: &str, itype: &str, body: &Value) -> Result<Option<String>, Response> {
    let hcc = itype.starts_with("HCC");
    match body["HpcClusterId"].as_str() {
        None if hcc => Err(err("MissingParameter", "HpcClusterId is required for a high-performance computing type.")),
        None => Ok(None),
        Some(_) if !hcc => Err(err("InvalidParameterCombination", "HpcClusterId is only for HCC instance types.")),
        Some(id) => match s.hpc_clusters.get(id) {
            Some(c) if c["Zone"] == zone => Ok(Some(id.to_string())),
            Some(_) => Err(err("InvalidParameterValue.HpcClusterZone", "The HPC cluster is in another zone.")),
            None => Err(err("InvalidParameterValue.HpcClusterId", &format!("The HPC cluster `{id}` does not exist."))),
        },
    }
}
