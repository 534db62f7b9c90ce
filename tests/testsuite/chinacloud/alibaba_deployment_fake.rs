//! The Alibaba fake's deployment sets (ECS 2014-05-26 `CreateDeploymentSet`,
//! `DescribeDeploymentSets` by name or ids, `DeleteDeploymentSet`, refused with
//! `DependencyViolation.NotEmpty` while an instance is still in the set), RunInstances'
//! `DeploymentSetId`, and its elastic RDMA interface (`NetworkInterface.N.*` with
//! `NetworkInterfaceTrafficMode=HighPerformance`, only on eRDMA types, a secondary
//! interface needing its vSwitch and security group).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::chinacloud::alibaba_fake::{State, err, ok};
use crate::chinacloud::server::Response;

/// The instance families with elastic RDMA interfaces, as the fake knows them.
const ERDMA_FAMILIES: &[&str] = &["ecs.ebmgn7ex.", "ecs.gn8is"];

/// The deployment set calls.
pub fn call(s: &mut State, region: &str, action: &str, params: &BTreeMap<String, String>) -> Response {
    match action {
        "CreateDeploymentSet" => {
            let name = params.get("DeploymentSetName").cloned().unwrap_or_default();
            let strategy = params.get("Strategy").cloned().unwrap_or_else(|| "Availability".into());
            if !matches!(strategy.as_str(), "Availability" | "AvailabilityGroup" | "LowLatency") {
                return err(400, "InvalidParameter.Strategy", "The specified Strategy is not valid.");
            }
            if !(2..=128).contains(&name.chars().count()) || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
                return err(400, "InvalidDeploymentSetName.Malformed", "The specified DeploymentSetName is not valid.");
            }
            s.counter += 1;
            let id = format!("ds-fake{:08x}", s.counter);
            let set = json!({
                "DeploymentSetId": id, "DeploymentSetName": name, "DeploymentStrategy": strategy, "Region": region,
                "DeploymentSetDescription": params.get("Description").cloned().unwrap_or_default(),
                "CreationTime": "2026-12-07T00:00Z",
            });
            s.deployment_sets.insert(id.clone(), set);
            ok(json!({"DeploymentSetId": id}))
        }
        "DescribeDeploymentSets" => {
            let ids: Vec<String> =
                params.get("DeploymentSetIds").and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
            let name = params.get("DeploymentSetName");
            let sets: Vec<Value> = s
                .deployment_sets
                .values()
                .filter(|d| d["Region"] == region)
                .filter(|d| name.is_none_or(|n| d["DeploymentSetName"] == n.as_str()))
                .filter(|d| ids.is_empty() || ids.iter().any(|i| d["DeploymentSetId"] == i.as_str()))
                .map(|d| view(s, d))
                .collect();
            ok(
                json!({"TotalCount": sets.len(), "PageNumber": 1, "PageSize": 50, "DeploymentSets": {"DeploymentSet": sets}}),
            )
        }
        _ => {
            let id = params.get("DeploymentSetId").cloned().unwrap_or_default();
            if !s.deployment_sets.contains_key(&id) {
                return err(404, "InvalidDeploymentSetId.NotFound", "The specified DeploymentSetId does not exist.");
            }
            if !members(s, &id).is_empty() {
                return err(
                    403,
                    "DependencyViolation.NotEmpty",
                    "There are still instance(s) in the specified DeploymentSetId.",
                );
            }
            s.deployment_sets.remove(&id);
            ok(json!({}))
        }
    }
}

/// The instances still in set `id`.
pub fn members(s: &State, id: &str) -> Vec<String> {
    s.set_of.iter().filter(|(i, d)| *d == id && s.instances.contains_key(*i)).map(|(i, _)| i.clone()).collect()
}

fn view(s: &State, d: &Value) -> Value {
    let mut v = d.clone();
    let ins = members(s, d["DeploymentSetId"].as_str().unwrap_or_default());
    v["InstanceAmount"] = json!(ins.len());
    v["InstanceIds"] = json!({"InstanceId": ins});
    v.as_object_mut().map(|o| o.remove("Region"));
    v
}

/// What RunInstances of `itype` in `region` asks beyond the instance: the deployment set
/// its instances join and their `NetworkInterface.*` parameters, or the error ECS answers.
pub type Launch = (Option<String>, BTreeMap<String, String>);

pub fn check_run(s: &State, region: &str, itype: &str, params: &BTreeMap<String, String>) -> Result<Launch, Response> {
    let set = match params.get("DeploymentSetId") {
        None => None,
        Some(id) if s.deployment_sets.get(id).is_some_and(|d| d["Region"] == region) => Some(id.clone()),
        Some(_) => {
            return Err(err(404, "InvalidDeploymentSetId.NotFound", "The specified DeploymentSetId does not exist."));
        }
    };
    let nics: BTreeMap<String, String> = params
        .iter()
        .filter(|(k, _)| k.starts_with("NetworkInterface."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for n in 1..=8 {
        let get = |k: &str| nics.get(&format!("NetworkInterface.{n}.{k}")).map(String::as_str);
        match get("NetworkInterfaceTrafficMode") {
            None | Some("Standard") => {}
            Some("HighPerformance") if ERDMA_FAMILIES.iter().any(|f| itype.starts_with(f)) => {}
            Some("HighPerformance") => {
                return Err(err(403, "InvalidInstanceType.NotSupportERI", "The instance type does not support ERI."));
            }
            Some(_) => {
                return Err(err(400, "InvalidParameter.NetworkInterfaceTrafficMode", "Standard or HighPerformance."));
            }
        }
        if get("InstanceType") == Some("Secondary") && (get("VSwitchId").is_none() || get("SecurityGroupId").is_none())
        {
            return Err(err(
                400,
                "MissingParameter",
                "A secondary network interface needs VSwitchId and SecurityGroupId.",
            ));
        }
    }
    Ok((set, nics))
}
