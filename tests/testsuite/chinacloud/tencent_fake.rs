//! A fake Tencent Cloud API 3.0 endpoint (CVM 2017-03-12, TKE 2018-05-25, the Tag API
//! and STS 2018-08-13).
//!
//! It recomputes the TC3-HMAC-SHA256 signature of every request from the bytes it
//! received, answers bad signatures, unknown keys, stale timestamps and unknown actions
//! with Tencent's error envelope, keeps instances in memory, pages DescribeInstances by
//! Offset/Limit (max 100), honours ClientToken, and can be told to sell out a zone or to
//! throttle an action.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use gpuplan::providers::signing::{constant_time_eq, hex, hmac_sha256, sha256_hex, utc_date};
use serde_json::{Value, json};

use crate::chinacloud::identity::{self, Identity};
use crate::chinacloud::server::{self, Request, Response};

pub const SECRET_ID: &str = "AKIDgpuplanFAKE0001";
pub const SECRET_KEY: &str = "tc-secret-never-printed-7f3a";
/// The account that owns every instance here (the Tag API's resource names carry it).
pub const OWNER_UIN: &str = "100020512675";

#[derive(Debug, Clone)]
pub struct Instance {
    pub id: String,
    pub region: String,
    pub zone: String,
    pub instance_type: String,
    pub image: String,
    pub charge_type: String,
    pub state: String,
    pub latest_operation: String,
    pub tags: BTreeMap<String, String>,
    pub user_data: Option<String>,
    pub max_price: Option<String>,
    /// `CreatedTime` (RFC 3339); `None`: a moment ago.
    pub created_time: Option<String>,
}

#[derive(Default)]
pub struct State {
    /// Each instance's disks as RunInstances asked: (DiskType, DiskSize GB), the system
    /// disk first; absent: the image's default.
    pub disks: BTreeMap<String, Vec<(String, u64)>>,
    pub instances: BTreeMap<String, Instance>,
    pub tokens: HashMap<String, Vec<String>>,
    pub counter: u64,
    /// (zone, spot) pairs that answer a stock-out.
    pub sold_out: HashSet<(String, bool)>,
    /// Action → how many more calls to throttle.
    pub throttle: HashMap<String, u32>,
    /// Every authenticated call: (action, ClientToken or "").
    pub calls: Vec<(String, String)>,
    /// RunInstances calls allowed before the account's instance quota is reached.
    pub quota_after: Option<u32>,
    /// Instances AddExistedInstances joined to a cluster: id → (cluster, request body).
    pub joined: BTreeMap<String, (String, Value)>,
    /// Instances CreateClusterInstances created in a cluster: id → (cluster, request
    /// body, with `RunInstancePara` parsed into JSON).
    pub created_in_cluster: BTreeMap<String, (String, Value)>,
    /// The API server DescribeClusterKubeconfig hands out for `cls-gpuplan` (default: a
    /// made-up public address).
    pub kube_server: Option<String>,
    /// InquiryPriceRunInstances answers: (instance type, charge type) → CNY per hour.
    pub prices: HashMap<(String, String), f64>,
    /// DescribeAccountQuota: pay-as-you-go instances (used, total) per zone.
    pub postpaid_quota: Vec<(String, u64, u64)>,
    /// TAT: what `/var/log/gpuplan-job.log` holds on an instance.
    pub job_logs: HashMap<String, String>,
    /// TAT invocations: id → (instance, script it ran).
    pub invocations: HashMap<String, (String, String)>,
    /// Instances whose TAT agent is offline (the others' are online once running).
    pub agents_offline: HashSet<String>,
    /// What a job script run through TAT on an instance ends with: (TaskStatus, exit
    /// code, output); default SUCCESS, 0 and no output.
    pub task_results: HashMap<String, (String, i64, String)>,
    /// What gpuplan's GPU health read prints on an instance (none: empty output).
    pub health_outputs: HashMap<String, String>,
    /// TAT invocations cancelled with CancelInvocation.
    pub cancelled: HashSet<String>,
    /// STS and the CVM metadata endpoint (`identity.rs`).
    pub identity: Identity,
    /// TAT invocations' `Description`, as RunCommand gave it.
    pub descriptions: HashMap<String, String>,
    /// While set, a job's RunCommand (its script runs `docker run`; a GPU health read's
    /// does not) runs the command but answers only once it is cleared (an answer a killed
    /// client never reads).
    pub stall_run_command: bool,
    /// Secrets Manager: secret name → versions (id, creation time, `SecretString`).
    pub secrets: HashMap<String, Vec<(String, u64, String)>>,
    /// HPC clusters (`tencent_hpc_fake.rs`): id → the cluster as described, with `Region`.
    pub hpc_clusters: BTreeMap<String, Value>,
    /// Instance → the HPC cluster RunInstances put it in.
    pub hpc_of: BTreeMap<String, String>,
}

#[derive(Clone)]
pub struct Fake {
    pub url: String,
    pub state: Arc<Mutex<State>>,
}

impl Fake {
    pub fn start() -> Fake {
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        let addr = server::start(Arc::new(move |req: &Request| handle(&s, req)));
        Fake { url: format!("http://{addr}"), state }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn instances(&self) -> Vec<Instance> {
        self.lock().instances.values().cloned().collect()
    }

    pub fn sell_out(&self, zone: &str, spot: bool) {
        self.lock().sold_out.insert((zone.to_string(), spot));
    }

    pub fn throttle(&self, action: &str, times: u32) {
        self.lock().throttle.insert(action.to_string(), times);
    }

    pub fn calls(&self, action: &str) -> Vec<String> {
        self.lock().calls.iter().filter(|(a, _)| a == action).map(|(_, t)| t.clone()).collect()
    }

    /// Terminate behind gpuplan's back.
    pub fn remove(&self, id: &str) {
        self.lock().instances.remove(id);
    }

    pub fn set_state(&self, id: &str, state: &str) {
        if let Some(i) = self.lock().instances.get_mut(id) {
            i.state = state.to_string();
        }
    }

    /// Make an instance look launched `secs` ago (its `CreatedTime`).
    pub fn age(&self, id: &str, secs: u64) {
        if let Some(i) = self.lock().instances.get_mut(id) {
            let then = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
            i.created_time = Some(humantime::format_rfc3339_seconds(then).to_string());
        }
    }

    /// An instance someone else made, or one with gpuplan's tags made directly.
    pub fn add(&self, region: &str, zone: &str, tags: &[(&str, &str)]) -> String {
        let mut s = self.lock();
        s.counter += 1;
        let id = format!("ins-{:08x}", s.counter);
        s.instances.insert(
            id.clone(),
            Instance {
                id: id.clone(),
                region: region.into(),
                zone: zone.into(),
                instance_type: "GN7.2XLARGE32".into(),
                image: "img-other".into(),
                charge_type: "POSTPAID_BY_HOUR".into(),
                state: "RUNNING".into(),
                latest_operation: "RunInstances".into(),
                tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                user_data: None,
                max_price: None,
                created_time: None,
            },
        );
        id
    }
}

pub fn ok(mut body: Value) -> Response {
    body["RequestId"] = json!(uuid::Uuid::new_v4().to_string());
    Response { status: 200, body: json!({"Response": body}).to_string() }
}

/// Tencent answers errors with HTTP 200 and an `Error` object.
/// Secrets Manager's two reads: the versions of a secret, and one version's value.
fn secret(s: &State, action: &str, body: &Value) -> Response {
    let name = body["SecretName"].as_str().unwrap_or("");
    let Some(versions) = s.secrets.get(name) else {
        return err("ResourceNotFound", &format!("The secret `{name}` does not exist."));
    };
    if action == "ListSecretVersionIds" {
        let list: Vec<Value> = versions.iter().map(|(id, t, _)| json!({"VersionId": id, "CreateTime": t})).collect();
        return ok(json!({"SecretName": name, "Versions": list}));
    }
    let want = body["VersionId"].as_str().unwrap_or("");
    match versions.iter().find(|(id, _, _)| id == want) {
        Some((id, _, value)) => ok(json!({"SecretName": name, "VersionId": id, "SecretString": value})),
        None => err("ResourceNotFound", &format!("The version `{want}` of `{name}` does not exist.")),
    }
}

pub fn err(code: &str, message: &str) -> Response {
    ok(json!({"Error": {"Code": code, "Message": message}}))
}

fn handle(state: &Mutex<State>, req: &Request) -> Response {
    let h = |k: &str| req.headers.get(k).map(String::as_str).unwrap_or("");
    {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = identity::tencent_metadata(&mut s.identity, req) {
            return r;
        }
        if req.method != "POST" || req.path != "/" {
            return err("UnsupportedProtocol", "only POST / is served here");
        }
        if h("x-tc-action") == "AssumeRoleWithWebIdentity" {
            return identity::tencent_web_identity(&mut s.identity, req);
        }
        if let Err(e) = verify(&s, req) {
            return e;
        }
    }
    let action = h("x-tc-action").to_string();
    let version = h("x-tc-version");
    let region = h("x-tc-region").to_string();
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(_) => return err("InvalidParameter", "the request body is not JSON"),
    };
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.calls.push((action.clone(), body["ClientToken"].as_str().unwrap_or("").to_string()));
    let known = matches!(
        (version, action.as_str()),
        (
            "2017-03-12",
            "RunInstances"
                | "DescribeInstances"
                | "TerminateInstances"
                | "InquiryPriceRunInstances"
                | "DescribeAccountQuota"
                | "CreateHpcCluster"
                | "DescribeHpcClusters"
                | "DeleteHpcClusters"
        ) | ("2018-05-25", "DescribeClusterKubeconfig" | "AddExistedInstances" | "CreateClusterInstances")
            | ("2018-08-13", "TagResources" | "UnTagResources" | "GetCallerIdentity" | "AssumeRole")
            | ("2019-09-23", "ListSecretVersionIds" | "GetSecretValue")
            | (
                "2020-10-28",
                "RunCommand"
                    | "DescribeInvocationTasks"
                    | "DescribeInvocations"
                    | "DescribeAutomationAgentStatus"
                    | "CancelInvocation"
            )
    );
    if !known {
        return err("InvalidAction", &format!("The requested action `{action}` (version `{version}`) does not exist."));
    }
    if let Some(n) = s.throttle.get_mut(&action)
        && *n > 0
    {
        *n -= 1;
        return err("RequestLimitExceeded", "Your current request times equals to `limit` (10 per second).");
    }
    if region.is_empty() && action != "DescribeClusterKubeconfig" {
        return err("MissingParameter", "The request is missing a required parameter `Region`.");
    }
    if action == "RunInstances"
        && let Some(n) = s.quota_after.as_mut()
    {
        if *n == 0 {
            return err("LimitExceeded.InstanceQuota", "The instance quota of this account is exhausted.");
        }
        *n -= 1;
    }
    match action.as_str() {
        "ListSecretVersionIds" | "GetSecretValue" => secret(&s, &action, &body),
        "RunInstances" => run(&mut s, &region, &body),
        "CreateHpcCluster" | "DescribeHpcClusters" | "DeleteHpcClusters" => {
            crate::chinacloud::tencent_hpc_fake::call(&mut s, &region, &action, &body)
        }
        "DescribeInstances" => describe(&s, &region, &body),
        "TagResources" | "UnTagResources" => tag_resources(&mut s, &region, &action, &body),
        "GetCallerIdentity" => {
            ok(json!({"AccountId": OWNER_UIN, "Arn": format!("qcs::cam::uin/{OWNER_UIN}:uin/{OWNER_UIN}"),
                                          "UserId": OWNER_UIN, "PrincipalId": OWNER_UIN, "Type": "RootAccount"}))
        }
        "TerminateInstances" => terminate(&mut s, &region, &body),
        "AssumeRole" => identity::tencent_assume_role(&mut s.identity, &body),
        "AddExistedInstances" => add_existed(&mut s, &body),
        "CreateClusterInstances" => create_cluster_instances(&mut s, &region, &body),
        "InquiryPriceRunInstances" => inquiry_price(&s, &body),
        "RunCommand" => {
            use base64::Engine as _;
            let script = body["Content"]
                .as_str()
                .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            let Some(script) = script else { return err("InvalidParameterValue", "Content must be base64.") };
            let Some(id) = body["InstanceIds"][0].as_str().map(str::to_string) else {
                return err("MissingParameter", "InstanceIds is required.");
            };
            if s.instances.get(&id).is_none_or(|i| i.state != "RUNNING") {
                return err("InvalidInstanceId.NotRunning", "The agent can only run commands on running instances.");
            }
            s.counter += 1;
            let inv = format!("inv-{:08}", s.counter);
            let job = script.contains("docker run");
            s.invocations.insert(inv.clone(), (id, script));
            s.descriptions.insert(inv.clone(), body["Description"].as_str().unwrap_or("").to_string());
            if s.stall_run_command && job {
                drop(s);
                while state.lock().unwrap_or_else(|e| e.into_inner()).stall_run_command {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            ok(json!({"CommandId": "cmd-gpuplan", "InvocationId": inv}))
        }
        // Filters `invocation-id` and `instance-id` (each filter's values OR'ed, filters
        // AND'ed), paged by `Offset` and `Limit` (default 20, at most 100), as TAT does.
        "DescribeInvocationTasks" => {
            let matches = |inv: &str, instance: &str| {
                body["Filters"].as_array().into_iter().flatten().all(|f| {
                    let values: Vec<&str> =
                        f["Values"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
                    match f["Name"].as_str() {
                        Some("invocation-id") => values.contains(&inv),
                        Some("instance-id") => values.contains(&instance),
                        _ => false,
                    }
                })
            };
            let mut found: Vec<String> =
                s.invocations.iter().filter(|(inv, (id, _))| matches(inv, id)).map(|(inv, _)| inv.clone()).collect();
            found.sort();
            let total = found.len();
            let offset = body["Offset"].as_u64().unwrap_or(0) as usize;
            let limit = body["Limit"].as_u64().unwrap_or(20).min(100) as usize;
            let page: Vec<String> = found.into_iter().skip(offset).take(limit).collect();
            // As TAT does: without HideOutput = false, the output is left out.
            let hidden = body["HideOutput"].as_bool() != Some(false);
            let set: Vec<Value> = page.iter().map(|inv| task(&s, inv, hidden)).collect();
            ok(json!({"TotalCount": total, "InvocationTaskSet": set}))
        }
        "DescribeInvocations" => {
            let ids: Vec<&str> =
                body["InvocationIds"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
            if ids.len() > 100 {
                return err("InvalidParameterValue.LimitExceeded", "At most 100 InvocationIds.");
            }
            let set: Vec<Value> = ids
                .iter()
                .filter_map(|inv| s.invocations.get(*inv).map(|(id, _)| (inv, id)))
                .map(|(inv, id)| {
                    json!({"InvocationId": inv, "CommandId": "cmd-gpuplan", "InvocationStatus": "RUNNING",
                           "Description": s.descriptions.get(*inv).cloned().unwrap_or_default(),
                           "InvocationTaskBasicInfoSet": [{"InvocationTaskId": format!("invt-{inv}"),
                               "TaskStatus": "RUNNING", "InstanceId": id}]})
                })
                .collect();
            ok(json!({"TotalCount": set.len(), "InvocationSet": set}))
        }
        "DescribeAutomationAgentStatus" => {
            let ids: Vec<String> = body["InstanceIds"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            if ids.len() > 100 {
                return err("InvalidParameterValue.LimitExceeded", "At most 100 InstanceIds.");
            }
            let set: Vec<Value> = ids
                .iter()
                .filter(|id| s.instances.contains_key(*id))
                .map(|id| {
                    let online = !s.agents_offline.contains(id) && s.instances[id].state == "RUNNING";
                    json!({"InstanceId": id, "AgentStatus": if online { "Online" } else { "Offline" },
                           "Version": "1.0.0", "LastHeartbeatTime": "2026-11-26T10:00:00Z", "Environment": "Linux"})
                })
                .collect();
            ok(json!({"TotalCount": set.len(), "AutomationAgentSet": set}))
        }
        "CancelInvocation" => {
            let inv = body["InvocationId"].as_str().unwrap_or("").to_string();
            if !s.invocations.contains_key(&inv) {
                return err("ResourceNotFound.InvocationNotFound", "The invocation does not exist.");
            }
            s.cancelled.insert(inv);
            ok(json!({}))
        }
        "DescribeAccountQuota" => {
            let set: Vec<Value> = s
                .postpaid_quota
                .iter()
                .map(|(z, used, total)| json!({"Zone": z, "UsedQuota": used, "RemainingQuota": total - used, "TotalQuota": total}))
                .collect();
            ok(json!({"AppId": 1251783334u64, "AccountQuotaOverview": {"Region": region, "AccountQuota": {
                "PostPaidQuotaSet": set, "PrePaidQuotaSet": [], "SpotPaidQuotaSet": [], "ImageQuotaSet": [],
                "DisasterRecoverGroupQuotaSet": []}}}))
        }
        _ => match (body["ClusterId"].as_str(), &s.kube_server) {
            (Some("cls-gpuplan"), Some(server)) => ok(json!({"Kubeconfig": crate::kube_fake::kubeconfig_for(server)})),
            (Some("cls-gpuplan"), None) => ok(json!({"Kubeconfig": format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: cls-gpuplan\n  cluster:\n    server: https://{}.cls-gpuplan.example\n",
                if body["IsExtranet"].as_bool() == Some(true) { "public" } else { "private" }
            )})),
            _ => err("ResourceNotFound.ClusterNotFound", "The cluster does not exist."),
        },
    }
}

/// A TAT task as DescribeInvocationTasks lists it: a job script (a job on a warm node)
/// ends as the test says (`task_results`, else success), a check reads `job_logs`, a
/// GPU health read prints `health_outputs`.
fn task(s: &State, inv: &str, hidden: bool) -> Value {
    use base64::Engine as _;
    let (id, script) = s.invocations[inv].clone();
    let log = if script.contains("/var/log/gpuplan-job.log") {
        s.job_logs.get(&id).cloned().unwrap_or_default()
    } else {
        String::new()
    };
    let (status, code, log) = if script.contains("--- gpuplan health: end ---") {
        ("SUCCESS".to_string(), 0, s.health_outputs.get(&id).cloned().unwrap_or_default())
    } else if script.contains("docker run") {
        let (st, code, out) = s.task_results.get(&id).cloned().unwrap_or_else(|| ("SUCCESS".into(), 0, String::new()));
        if s.cancelled.contains(inv) { ("CANCELLED".to_string(), -1, out) } else { (st, code, out) }
    } else {
        ("SUCCESS".to_string(), 0, log)
    };
    let output = if hidden { String::new() } else { base64::engine::general_purpose::STANDARD.encode(log) };
    json!({"InvocationId": inv, "InvocationTaskId": format!("invt-{inv}"), "CommandId": "cmd-gpuplan",
           "InstanceId": id, "TaskStatus": status, "TaskResult": {"ExitCode": code, "Output": output, "Dropped": 0}})
}

/// CVM InquiryPriceRunInstances: `ImageId` and `Placement.Zone` are required, as the
/// API documents; the price is the test's (`prices`) or a list price per charge type.
fn inquiry_price(s: &State, body: &Value) -> Response {
    if body["ImageId"].as_str().is_none_or(str::is_empty) || body["Placement"]["Zone"].as_str().is_none() {
        return err("MissingParameter", "The request is missing a required parameter `ImageId` or `Placement.Zone`.");
    }
    let itype = body["InstanceType"].as_str().unwrap_or("").to_string();
    let charge = body["InstanceChargeType"].as_str().unwrap_or("POSTPAID_BY_HOUR").to_string();
    if charge == "SPOTPAID" && body["InstanceMarketOptions"]["MarketType"] != "spot" {
        return err("InvalidParameterCombination", "SPOTPAID needs InstanceMarketOptions.MarketType = spot.");
    }
    let default = if charge == "SPOTPAID" { 2.4 } else { 8.0 };
    let cny = s.prices.get(&(itype, charge)).copied().unwrap_or(default);
    ok(json!({"Price": {"InstancePrice": {"UnitPrice": cny * 1.25, "UnitPriceDiscount": cny, "ChargeUnit": "HOUR",
        "Discount": 80.0}, "BandwidthPrice": {"UnitPrice": 0.0, "UnitPriceDiscount": 0.0, "ChargeUnit": "GB"}}}))
}

/// TKE AddExistedInstances: only `cls-gpuplan` exists; spot instances are refused, as
/// TKE documents ("Spot instance is not supported").
fn add_existed(s: &mut State, body: &Value) -> Response {
    if body["ClusterId"].as_str() != Some("cls-gpuplan") {
        return err("ResourceNotFound.ClusterNotFound", "The cluster does not exist.");
    }
    if let Some(bad) = advanced_settings_error(&body["InstanceAdvancedSettings"]) {
        return bad;
    }
    let (mut ok_ids, mut failed, mut reasons) = (vec![], vec![], vec![]);
    for id in body["InstanceIds"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        match s.instances.get(id) {
            None => {
                failed.push(id.to_string());
                reasons.push(format!("instance {id} not found"));
            }
            Some(i) if i.charge_type == "SPOTPAID" => {
                failed.push(id.to_string());
                reasons.push("Spot instance is not supported".to_string());
            }
            Some(_) => {
                s.joined.insert(id.to_string(), ("cls-gpuplan".to_string(), body.clone()));
                ok_ids.push(id.to_string());
            }
        }
    }
    ok(
        json!({"SuccInstanceIds": ok_ids, "FailedInstanceIds": failed, "FailedReasons": reasons, "TimeoutInstanceIds": []}),
    )
}

/// TKE CreateClusterInstances: TKE creates the CVMs itself from `RunInstancePara`, a
/// JSON *string* of CVM RunInstances parameters, run here as RunInstances is (region,
/// zone, ClientToken, spot market options, tags), and adds them to `cls-gpuplan` with
/// the labels and taints of `InstanceAdvancedSettings`, which must be well-formed.
fn create_cluster_instances(s: &mut State, region: &str, body: &Value) -> Response {
    if body["ClusterId"].as_str() != Some("cls-gpuplan") {
        return err("InvalidParameterValue.ClusterNotFound", "The cluster does not exist.");
    }
    let Some(para) = body["RunInstancePara"].as_str() else {
        return err("MissingParameter", "RunInstancePara must be a JSON string of RunInstances parameters.");
    };
    let Ok(para) = serde_json::from_str::<Value>(para) else {
        return err("InvalidParameter", "RunInstancePara is not valid JSON.");
    };
    if let Some(bad) = advanced_settings_error(&body["InstanceAdvancedSettings"]) {
        return bad;
    }
    if para["InstanceChargeType"] == "SPOTPAID" && para["InstanceMarketOptions"]["MarketType"] != "spot" {
        return err("InvalidParameterValue", "SPOTPAID needs InstanceMarketOptions.MarketType = spot.");
    }
    let resp = run(s, region, &para);
    let answer: Value = serde_json::from_str(&resp.body).unwrap_or_default();
    if answer["Response"]["Error"].is_object() {
        return resp;
    }
    let mut recorded = body.clone();
    recorded["RunInstancePara"] = para;
    for id in answer["Response"]["InstanceIdSet"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        s.created_in_cluster.insert(id.to_string(), ("cls-gpuplan".to_string(), recorded.clone()));
    }
    let ids = answer["Response"]["InstanceIdSet"].clone();
    ok(json!({"InstanceIdSet": ids}))
}

/// `InstanceAdvancedSettings`: Labels `{Name, Value}`, Taints `{Key, Value, Effect}` with
/// a Kubernetes taint effect; an error answer for anything else.
fn advanced_settings_error(settings: &Value) -> Option<Response> {
    let labels_ok = settings["Labels"]
        .as_array()
        .is_some_and(|l| l.iter().all(|l| l["Name"].as_str().is_some_and(|n| !n.is_empty()) && l["Value"].is_string()));
    if !labels_ok {
        return Some(err("InvalidParameter", "InstanceAdvancedSettings.Labels must be a list of {Name, Value}."));
    }
    let effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
    let taints_ok = settings["Taints"].as_array().is_none_or(|t| {
        t.iter().all(|t| {
            t["Key"].as_str().is_some_and(|k| !k.is_empty())
                && t["Value"].is_string()
                && t["Effect"].as_str().is_some_and(|e| effects.contains(&e))
        })
    });
    if !taints_ok {
        return Some(err(
            "InvalidParameter",
            "InstanceAdvancedSettings.Taints must be a list of {Key, Value, Effect} with Effect NoSchedule, PreferNoSchedule or NoExecute.",
        ));
    }
    None
}

/// Check the TC3 signature and timestamp from the bytes received.
fn verify(s: &State, req: &Request) -> Result<(), Response> {
    let h = |k: &str| req.headers.get(k).map(String::as_str).unwrap_or("");
    let auth = h("authorization");
    let Some(rest) = auth.strip_prefix("TC3-HMAC-SHA256 ") else {
        return Err(err("AuthFailure.SignatureFailure", "The request authorization is not TC3-HMAC-SHA256."));
    };
    let fields: HashMap<&str, &str> = rest.split(", ").filter_map(|f| f.split_once('=')).collect();
    let credential = fields.get("Credential").copied().unwrap_or("");
    let parts: Vec<&str> = credential.split('/').collect();
    let [id, date, service, "tc3_request"] = parts.as_slice() else {
        return Err(err("AuthFailure.SignatureFailure", "The Credential of the authorization is malformed."));
    };
    let secret = if *id == SECRET_ID {
        SECRET_KEY.to_string()
    } else if s.identity.issued.contains_key(*id) {
        s.identity.temporary(id, h("x-tc-token")).map_err(|why| err("AuthFailure.TokenFailure", why))?
    } else {
        return Err(err(
            "AuthFailure.SecretIdNotFound",
            "The SecretId is not found, please ensure that your SecretId is correct.",
        ));
    };
    let ts: u64 = h("x-tc-timestamp").parse().unwrap_or(0);
    if ts.abs_diff(server::now()) > 300 {
        return Err(err(
            "AuthFailure.SignatureExpire",
            &format!("Signature expired. Timestamp is {ts}, server time is {}.", server::now()),
        ));
    }
    if *date != utc_date(ts) {
        return Err(err("AuthFailure.SignatureFailure", "The credential date does not match the timestamp (use UTC)."));
    }
    let signed_headers = fields.get("SignedHeaders").copied().unwrap_or("");
    let canonical_headers: String = signed_headers.split(';').map(|k| format!("{k}:{}\n", h(k).trim())).collect();
    let canonical_request = format!("POST\n/\n\n{canonical_headers}\n{signed_headers}\n{}", sha256_hex(&req.body));
    let string_to_sign =
        format!("TC3-HMAC-SHA256\n{ts}\n{date}/{service}/tc3_request\n{}", sha256_hex(canonical_request.as_bytes()));
    let k_date = hmac_sha256(format!("TC3{secret}").as_bytes(), date.as_bytes());
    let k_service = hmac_sha256(&k_date, service.as_bytes());
    let k_signing = hmac_sha256(&k_service, b"tc3_request");
    let expected = hex(&hmac_sha256(&k_signing, string_to_sign.as_bytes()));
    let got = fields.get("Signature").copied().unwrap_or("");
    if !signed_headers.split(';').any(|k| k == "host") || !constant_time_eq(&expected, got) {
        return Err(err(
            "AuthFailure.SignatureFailure",
            "The provided credentials could not be validated. Please check your signature is correct.",
        ));
    }
    let expected_service = match (h("x-tc-version"), h("x-tc-action")) {
        ("2018-05-25", _) => "tke",
        ("2020-10-28", _) => "tat",
        ("2019-09-23", _) => "ssm",
        ("2018-08-13", "GetCallerIdentity" | "AssumeRole") => "sts",
        ("2018-08-13", _) => "tag",
        _ => "cvm",
    };
    if *service != expected_service {
        return Err(err("AuthFailure.SignatureFailure", "The credential scope names another service."));
    }
    Ok(())
}

fn run(s: &mut State, region: &str, body: &Value) -> Response {
    let token = body["ClientToken"].as_str().unwrap_or("").to_string();
    if token.len() > 64 {
        return err("InvalidClientToken.TooLong", "The ClientToken exceeds 64 characters.");
    }
    if let Some(ids) = s.tokens.get(&token).filter(|_| !token.is_empty()) {
        return ok(json!({"InstanceIdSet": ids}));
    }
    let count = body["InstanceCount"].as_u64().unwrap_or(1);
    if !(1..=100).contains(&count) {
        return err("InvalidParameterValue.Range", "InstanceCount must be within [1, 100].");
    }
    let zone = body["Placement"]["Zone"].as_str().unwrap_or("").to_string();
    if !zone.starts_with(region) {
        return err("InvalidZone.MismatchRegion", &format!("The zone `{zone}` is not in region `{region}`."));
    }
    let (Some(itype), Some(image)) = (body["InstanceType"].as_str(), body["ImageId"].as_str()) else {
        return err("MissingParameter", "InstanceType and ImageId are required.");
    };
    let charge = body["InstanceChargeType"].as_str().unwrap_or("POSTPAID_BY_HOUR").to_string();
    let spot = charge == "SPOTPAID";
    if spot && body["InstanceMarketOptions"]["MarketType"].as_str().is_some_and(|m| m != "spot") {
        return err("InvalidParameterValue", "MarketType must be `spot`.");
    }
    if s.sold_out.contains(&(zone.clone(), spot)) {
        return if spot {
            err(
                "InvalidParameterValue.InsufficientOffering",
                "Insufficient spot inventory for the specified instance type.",
            )
        } else {
            err("ResourceInsufficient.SpecifiedInstanceType", "The specified instance type is sold out in this zone.")
        };
    }
    // CBS: a system disk of 20-1024 GB, data disks of 10-32000 GB, of a type CVM sells.
    let mut disks = Vec::new();
    let types = ["CLOUD_BSSD", "CLOUD_PREMIUM", "CLOUD_SSD", "CLOUD_HSSD"];
    let system = std::iter::once(&body["SystemDisk"]).filter(|d| !d.is_null()).map(|d| (d, 20, 1024));
    let data = body["DataDisks"].as_array().into_iter().flatten().map(|d| (d, 10, 32000));
    for (d, min, max) in system.chain(data) {
        let (kind, size) = (d["DiskType"].as_str().unwrap_or(""), d["DiskSize"].as_u64().unwrap_or(0));
        if !types.contains(&kind) || !(min..=max).contains(&size) {
            return err("InvalidParameterValue", &format!("disk {d} is not a valid DiskType and DiskSize"));
        }
        disks.push((kind.to_string(), size));
    }
    let hpc = match crate::chinacloud::tencent_hpc_fake::check_run(s, &zone, itype, body) {
        Ok(hpc) => hpc,
        Err(refused) => return refused,
    };
    let mut tags = BTreeMap::new();
    for spec in body["TagSpecification"].as_array().into_iter().flatten() {
        if spec["ResourceType"] == "instance" {
            for t in spec["Tags"].as_array().into_iter().flatten() {
                tags.insert(t["Key"].as_str().unwrap_or("").to_string(), t["Value"].as_str().unwrap_or("").to_string());
            }
        }
    }
    let mut ids = Vec::new();
    for _ in 0..count {
        s.counter += 1;
        let id = format!("ins-{:08x}", s.counter);
        if !disks.is_empty() {
            s.disks.insert(id.clone(), disks.clone());
        }
        s.instances.insert(
            id.clone(),
            Instance {
                id: id.clone(),
                region: region.into(),
                zone: zone.clone(),
                instance_type: itype.into(),
                image: image.into(),
                charge_type: charge.clone(),
                state: "RUNNING".into(),
                latest_operation: "RunInstances".into(),
                tags: tags.clone(),
                user_data: body["UserData"].as_str().map(String::from),
                max_price: body["InstanceMarketOptions"]["SpotOptions"]["MaxPrice"].as_str().map(String::from),
                created_time: None,
            },
        );
        if let Some(c) = &hpc {
            s.hpc_of.insert(id.clone(), c.clone());
        }
        ids.push(id);
    }
    if !token.is_empty() {
        s.tokens.insert(token, ids.clone());
    }
    ok(json!({"InstanceIdSet": ids}))
}

/// An instance's private address in the fake's VPC, the same for the same id.
pub fn private_ip(id: &str) -> String {
    let n = id.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("172.16.{}.{}", (n >> 8) % 250, n % 250 + 2)
}

fn view(i: &Instance) -> Value {
    json!({
        "InstanceId": i.id,
        "InstanceState": i.state,
        "InstanceChargeType": i.charge_type,
        "InstanceType": i.instance_type,
        "Placement": {"Zone": i.zone, "ProjectId": 0},
        "PrivateIpAddresses": [private_ip(&i.id)],
        "ImageId": i.image,
        "LatestOperation": i.latest_operation,
        "LatestOperationState": "SUCCESS",
        "CreatedTime": i.created_time.clone().unwrap_or_else(|| humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()),
        "Tags": i.tags.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect::<Vec<_>>(),
    })
}

fn describe(s: &State, region: &str, body: &Value) -> Response {
    let ids: Option<Vec<&str>> = body["InstanceIds"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect());
    let filters = body["Filters"].as_array().cloned().unwrap_or_default();
    if ids.is_some() && !filters.is_empty() {
        return err("InvalidParameterCombination", "InstanceIds and Filters cannot be specified at the same time.");
    }
    if ids.as_ref().is_some_and(|i| i.len() > 100) || filters.len() > 10 {
        return err("InvalidParameterValue.LimitExceeded", "At most 100 InstanceIds and 10 Filters per request.");
    }
    let limit = body["Limit"].as_u64().unwrap_or(20);
    if limit > 100 {
        return err("InvalidParameterValue.LimitExceeded", "Limit must be within [1, 100].");
    }
    let offset = body["Offset"].as_u64().unwrap_or(0) as usize;
    let matching: Vec<&Instance> = s
        .instances
        .values()
        .filter(|i| i.region == region)
        .filter(|i| ids.as_ref().is_none_or(|ids| ids.contains(&i.id.as_str())))
        .filter(|i| {
            filters.iter().all(|f| {
                let name = f["Name"].as_str().unwrap_or("");
                let values: Vec<&str> =
                    f["Values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                match name.strip_prefix("tag:") {
                    Some(key) => i.tags.get(key).is_some_and(|v| values.contains(&v.as_str())),
                    None if name == "zone" => values.contains(&i.zone.as_str()),
                    None => false,
                }
            })
        })
        .collect();
    let page: Vec<Value> = matching.iter().skip(offset).take(limit as usize).map(|i| view(i)).collect();
    ok(json!({"TotalCount": matching.len(), "InstanceSet": page}))
}

fn terminate(s: &mut State, region: &str, body: &Value) -> Response {
    let ids: Vec<String> =
        body["InstanceIds"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect();
    if ids.is_empty() || ids.len() > 100 {
        return err("InvalidParameterValue.LimitExceeded", "InstanceIds must hold 1 to 100 ids.");
    }
    for id in &ids {
        if s.instances.get(id).is_none_or(|i| i.region != region) {
            return err("InvalidInstanceId.NotFound", &format!("The instance `{id}` does not exist."));
        }
    }
    for id in &ids {
        s.instances.remove(id);
    }
    ok(json!({}))
}

/// The Tag API's `TagResources` (set `Tags`) and `UnTagResources` (drop `TagKeys`) on CVM
/// instances named `qcs::cvm:REGION:uin/OWNER:instance/ID`: at most 10 resources and 10
/// tags, all checked before any is changed; an unknown instance is a `FailedResources`
/// entry, as the API reports per resource.
fn tag_resources(s: &mut State, region: &str, action: &str, body: &Value) -> Response {
    let resources: Vec<&str> =
        body["ResourceList"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let tags: Vec<(String, String)> = body["Tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t["TagKey"].as_str()?.to_string(), t["TagValue"].as_str()?.to_string())))
        .collect();
    let keys: Vec<&str> = body["TagKeys"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let (set, n) = if action == "TagResources" { (true, tags.len()) } else { (false, keys.len()) };
    if resources.is_empty() || resources.len() > 10 || n == 0 || n > 10 {
        return err("InvalidParameterValue", "ResourceList and the tags must hold 1 to 10 entries.");
    }
    let prefix = format!("qcs::cvm:{region}:uin/{OWNER_UIN}:instance/");
    let mut ids = Vec::new();
    let mut failed = Vec::new();
    for r in &resources {
        match r.strip_prefix(&prefix) {
            Some(id) if s.instances.get(id).is_some_and(|i| i.region == region) => ids.push(id.to_string()),
            Some(_) => failed.push(json!({"Resource": r, "Code": "ResourceNotFound", "Message": "no such instance"})),
            None => {
                return err(
                    "InvalidParameterValue.ResourceDescriptionError",
                    &format!("`{r}` is not a CVM resource name of {region}"),
                );
            }
        }
    }
    for id in ids {
        let Some(i) = s.instances.get_mut(&id) else { continue };
        if set {
            i.tags.extend(tags.iter().cloned());
        } else {
            i.tags.retain(|k, _| !keys.contains(&k.as_str()));
        }
    }
    ok(json!({"FailedResources": failed}))
}
