//! A fake Alibaba Cloud endpoint: ECS 2014-05-26 (RPC, tag calls included) and ACK
//! (ROA): user_config, AttachInstances, and node pools (create, list, detail, attach).
//!
//! It recomputes the ACS3-HMAC-SHA256 signature of every request from what it received
//! (the query re-canonicalized, the signed headers, the body hash), answers bad
//! signatures, unknown keys, stale dates, reused nonces and unknown actions with
//! Alibaba's error shapes and HTTP statuses, keeps instances in memory, pages
//! DescribeInstances with MaxResults/NextToken, honours ClientToken, and can be told
//! to run out of stock or to throttle an action.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use gpuplan::providers::signing::{acs3, constant_time_eq, hex, hmac_sha256, percent_encode, sha256_hex};
use serde_json::{Value, json};

use crate::chinacloud::identity::{self, Identity};
use crate::chinacloud::server::{self, Request, Response, query_pairs};

pub const ACCESS_KEY_ID: &str = "LTAIgpuplanFAKE0001";
pub const ACCESS_KEY_SECRET: &str = "ali-secret-never-printed-9c1d";

#[derive(Debug, Clone)]
pub struct Instance {
    pub id: String,
    pub region: String,
    pub zone: String,
    pub instance_type: String,
    pub image: String,
    pub spot_strategy: String,
    pub spot_price_limit: Option<String>,
    pub status: String,
    pub tags: BTreeMap<String, String>,
    pub user_data: Option<String>,
    pub console: String,
    /// A spot instance the cloud is reclaiming (an operation lock `Recycling`).
    pub recycling: bool,
    /// `CreationTime` (to the minute, as ECS writes it); `None`: a moment ago.
    pub created_time: Option<String>,
}

#[derive(Default)]
pub struct State {
    /// Each instance's disks as RunInstances asked: (Category, Size GB), the system disk
    /// first; absent: the image's default.
    pub disks: BTreeMap<String, Vec<(String, u64)>>,
    pub instances: BTreeMap<String, Instance>,
    pub tokens: HashMap<String, Vec<String>>,
    pub nonces: HashSet<String>,
    pub counter: u64,
    /// (zone, spot) → instances still in stock (absent: unlimited).
    pub stock: HashMap<(String, bool), u64>,
    pub throttle: HashMap<String, u32>,
    /// Every authenticated call: (action, ClientToken or "").
    pub calls: Vec<(String, String)>,
    /// Instances AttachInstances attached: id → (cluster, request body).
    pub attached: BTreeMap<String, (String, Value)>,
    /// ACK node pools of `c-gpuplan`: nodepool id → CreateClusterNodePool request body.
    pub node_pools: BTreeMap<String, Value>,
    /// Instances AttachInstancesToNodePool attached: id → (nodepool id, request body).
    pub pool_attached: BTreeMap<String, (String, Value)>,
    /// The API server DescribeClusterUserKubeconfig hands out for `c-gpuplan`.
    pub kube_server: Option<String>,
    /// DescribePrice answers: (instance type, SpotStrategy) → CNY per hour.
    pub prices: HashMap<(String, String), f64>,
    /// DescribeAccountAttributes: (used, max) pay-as-you-go vCPUs.
    pub postpaid_vcpus: (u64, u64),
    /// Instances whose Cloud Assistant agent is not running (the others' run once the
    /// instance does).
    pub agents_offline: HashSet<String>,
    /// Cloud Assistant invocations: InvokeId → (instance, script, stopped).
    pub invocations: HashMap<String, (String, String, bool)>,
    /// What a script run through Cloud Assistant on an instance ends with:
    /// (InvokeRecordStatus, exit code, output); default Success, 0 and no output.
    pub results: HashMap<String, (String, i64, String)>,
    /// Instances on which the job script made `/var/log/gpuplan-job.log` (what gpuplan's
    /// boot check through Cloud Assistant finds).
    pub job_logs: HashSet<String>,
    /// STS and the ECS metadata endpoint (`identity.rs`).
    pub identity: Identity,
    /// Capacity reservations: PrivatePoolOptionsId → (ClientToken, the item as described).
    pub reservations: BTreeMap<String, (String, Value)>,
    /// KMS secrets: name → the current version's `SecretData`.
    pub secrets: HashMap<String, String>,
    /// Deployment sets (`alibaba_deployment_fake.rs`): id → the set as described, with `Region`.
    pub deployment_sets: BTreeMap<String, Value>,
    /// Instance → the deployment set RunInstances put it in.
    pub set_of: BTreeMap<String, String>,
    /// Instance → the `NetworkInterface.*` parameters it was launched with.
    pub interfaces: BTreeMap<String, BTreeMap<String, String>>,
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

    pub fn set_stock(&self, zone: &str, spot: bool, n: u64) {
        self.lock().stock.insert((zone.to_string(), spot), n);
    }

    pub fn throttle(&self, action: &str, times: u32) {
        self.lock().throttle.insert(action.to_string(), times);
    }

    pub fn calls(&self, action: &str) -> Vec<String> {
        self.lock().calls.iter().filter(|(a, _)| a == action).map(|(_, t)| t.clone()).collect()
    }

    pub fn remove(&self, id: &str) {
        self.lock().instances.remove(id);
    }

    pub fn stop(&self, id: &str, console: &str) {
        if let Some(i) = self.lock().instances.get_mut(id) {
            i.status = "Stopped".into();
            i.console = console.into();
        }
    }

    /// Make an instance look launched `secs` ago (its `CreationTime`).
    pub fn age(&self, id: &str, secs: u64) {
        if let Some(i) = self.lock().instances.get_mut(id) {
            i.created_time = Some(to_the_minute(std::time::SystemTime::now() - std::time::Duration::from_secs(secs)));
        }
    }

    /// The cloud starts reclaiming spot instance `id` (it stays listed, locked `Recycling`).
    pub fn reclaim(&self, id: &str) {
        if let Some(i) = self.lock().instances.get_mut(id) {
            i.recycling = true;
        }
    }

    pub fn add(&self, region: &str, zone: &str, tags: &[(&str, &str)]) -> String {
        let mut s = self.lock();
        s.counter += 1;
        let id = format!("i-fake{:012x}", s.counter);
        s.instances.insert(
            id.clone(),
            Instance {
                id: id.clone(),
                region: region.into(),
                zone: zone.into(),
                instance_type: "ecs.gn6i-c4g1.xlarge".into(),
                image: "m-other".into(),
                spot_strategy: "NoSpot".into(),
                spot_price_limit: None,
                status: "Running".into(),
                tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                user_data: None,
                console: String::new(),
                recycling: false,
                created_time: None,
            },
        );
        id
    }
}

pub fn ok(mut body: Value) -> Response {
    body["RequestId"] = json!(uuid::Uuid::new_v4().to_string().to_uppercase());
    Response { status: 200, body: body.to_string() }
}

/// RPC error body with its HTTP status.
pub fn err(status: u16, code: &str, message: &str) -> Response {
    let body = json!({
        "RequestId": uuid::Uuid::new_v4().to_string().to_uppercase(),
        "HostId": "ecs.aliyuncs.com",
        "Code": code,
        "Message": message,
        "Recommend": format!("https://api.aliyun.com/troubleshoot?q={code}"),
    });
    Response { status, body: body.to_string() }
}

fn handle(state: &Mutex<State>, req: &Request) -> Response {
    let h = |k: &str| req.headers.get(k).map(String::as_str).unwrap_or("");
    {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = identity::alibaba_metadata(&mut s.identity, req) {
            return r;
        }
        if h("x-acs-version") == "2015-04-01" && h("x-acs-action") == "AssumeRoleWithOIDC" {
            return identity::alibaba_oidc(&mut s.identity, req);
        }
        if let Err(e) = verify(&mut s, req) {
            return e;
        }
    }
    let action = h("x-acs-action").to_string();
    let version = h("x-acs-version");
    let params: BTreeMap<String, String> = query_pairs(&req.query).into_iter().collect();
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.calls.push((action.clone(), params.get("ClientToken").cloned().unwrap_or_default()));
    if version == "2015-12-15" {
        return ack(&mut s, req);
    }
    if (version, action.as_str()) == ("2015-04-01", "AssumeRole") {
        return identity::alibaba_assume_role(&mut s.identity, req);
    }
    let kms = (version, action.as_str()) == ("2016-01-20", "GetSecretValue");
    let known = kms
        || version == "2014-05-26"
            && matches!(
                action.as_str(),
                "RunInstances"
                    | "DescribeInstances"
                    | "DeleteInstances"
                    | "GetInstanceConsoleOutput"
                    | "DescribePrice"
                    | "DescribeAccountAttributes"
                    | "TagResources"
                    | "UntagResources"
                    | "DescribeCloudAssistantStatus"
                    | "RunCommand"
                    | "DescribeInvocationResults"
                    | "StopInvocation"
                    | "CreateCapacityReservation"
                    | "DescribeCapacityReservations"
                    | "ReleaseCapacityReservation"
                    | "CreateDeploymentSet"
                    | "DescribeDeploymentSets"
                    | "DeleteDeploymentSet"
            );
    if !known {
        return err(404, "InvalidAction.NotFound", "Specified api is not found, please check your url and method.");
    }
    if let Some(n) = s.throttle.get_mut(&action)
        && *n > 0
    {
        *n -= 1;
        return err(400, "Throttling.User", "Request was denied due to user flow control.");
    }
    let Some(region) = params.get("RegionId").cloned() else {
        return err(400, "MissingRegionId", "RegionId is mandatory for this action.");
    };
    match action.as_str() {
        "GetSecretValue" => {
            let name = params.get("SecretName").cloned().unwrap_or_default();
            match s.secrets.get(&name) {
                Some(v) => {
                    ok(json!({"SecretName": name, "VersionId": "v1", "SecretData": v, "SecretDataType": "text"}))
                }
                None => err(404, "Forbidden.ResourceNotFound", "The resource is not found."),
            }
        }
        "RunInstances" => run(&mut s, &region, &params),
        "CreateDeploymentSet" | "DescribeDeploymentSets" | "DeleteDeploymentSet" => {
            crate::chinacloud::alibaba_deployment_fake::call(&mut s, &region, &action, &params)
        }
        "DescribeInstances" => describe(&s, &region, &params),
        "DeleteInstances" => delete(&mut s, &region, &params),
        "TagResources" | "UntagResources" => tag_resources(&mut s, &region, &action, &params),
        "DescribePrice" => describe_price(&s, &params),
        "CreateCapacityReservation" | "DescribeCapacityReservations" | "ReleaseCapacityReservation" => {
            capacity_reservation(&mut s, &action, &params)
        }
        "DescribeCloudAssistantStatus" | "RunCommand" | "DescribeInvocationResults" | "StopInvocation" => {
            cloud_assistant(&mut s, &action, &params)
        }
        "DescribeAccountAttributes" => {
            let (used, max) = s.postpaid_vcpus;
            let item = |name: &str, v: u64| json!({"AttributeName": name, "AttributeValues": {"ValueItem": [{"Value": v.to_string(), "Count": 1}]}});
            let asked: Vec<&String> =
                params.iter().filter(|(k, _)| k.starts_with("AttributeName.")).map(|(_, v)| v).collect();
            let items: Vec<Value> = asked
                .iter()
                .map(|n| match n.as_str() {
                    "max-postpaid-instance-vcpu-count" => item(n, max),
                    "used-postpaid-instance-vcpu-count" => item(n, used),
                    "max-spot-instance-vcpu-count" => item(n, 800),
                    _ => item(n, 0),
                })
                .collect();
            ok(json!({"AccountAttributeItems": {"AccountAttributeItem": items}}))
        }
        _ => match params.get("InstanceId").and_then(|id| s.instances.get(id)) {
            Some(i) => {
                use base64::Engine as _;
                ok(
                    json!({"InstanceId": i.id, "ConsoleOutput": base64::engine::general_purpose::STANDARD.encode(&i.console)}),
                )
            }
            None => err(404, "InvalidInstanceId.NotFound", "The specified InstanceId does not exist."),
        },
    }
}

fn ack(s: &mut State, req: &Request) -> Response {
    let path = server::decode(&req.path);
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["", "k8s", "c-gpuplan", "user_config"] if req.method == "GET" && s.kube_server.is_some() => {
            let server = s.kube_server.clone().unwrap_or_default();
            ok(json!({"config": crate::kube_fake::kubeconfig_for(&server), "expiration": "2029-01-01T00:00:00Z"}))
        }
        ["", "clusters", "c-gpuplan", "attach"] if req.method == "POST" => attach(s, &req.body),
        ["", "clusters", "c-gpuplan", "nodepools"] if req.method == "GET" => {
            let pools: Vec<Value> = s.node_pools.iter().map(|(id, body)| node_pool_view(id, body)).collect();
            ok(json!({"nodepools": pools}))
        }
        ["", "clusters", "c-gpuplan", "nodepools"] if req.method == "POST" => create_node_pool(s, &req.body),
        ["", "clusters", "c-gpuplan", "nodepools", id] if req.method == "GET" => match s.node_pools.get(*id) {
            Some(body) => ok(node_pool_view(id, body)),
            None => err(404, "ErrorNodePoolNotFound", "node pool not found"),
        },
        ["", "clusters", "c-gpuplan", "nodepools", id, "attach"] if req.method == "POST" => {
            attach_to_pool(s, id, &req.body)
        }
        ["", "k8s", "c-gpuplan", "user_config"] if req.method == "GET" => {
            let private = query_pairs(&req.query).iter().any(|(k, v)| k == "PrivateIpAddress" && v == "true");
            let server = if private { "https://192.168.0.10:6443" } else { "https://47.0.0.10:6443" };
            ok(
                json!({"config": format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c-gpuplan\n  cluster:\n    server: {server}\n"), "expiration": "2029-01-01T00:00:00Z"}),
            )
        }
        ["", "k8s", _, "user_config"] => Response {
            status: 404,
            body: json!({"code": "ErrorClusterNotFound", "message": "cluster not found", "requestId": "R-1"})
                .to_string(),
        },
        _ => err(404, "InvalidAction.NotFound", "Specified api is not found, please check your url and method."),
    }
}

/// ECS DescribePrice: the instance line and a system-disk line; the test's price
/// (`prices`) or a list price per spot strategy.
fn describe_price(s: &State, params: &BTreeMap<String, String>) -> Response {
    let Some(itype) = params.get("InstanceType") else {
        return err(400, "MissingInstanceType", "InstanceType is mandatory for this action.");
    };
    if params.get("PriceUnit").map(String::as_str) != Some("Hour") {
        return err(400, "InvalidPriceUnit", "Spot prices need PriceUnit=Hour.");
    }
    let strategy = params.get("SpotStrategy").cloned().unwrap_or_else(|| "NoSpot".into());
    let default = if strategy == "NoSpot" { 3.1 } else { 0.9 };
    let cny = s.prices.get(&(itype.clone(), strategy)).copied().unwrap_or(default);
    let disk = 0.05;
    ok(json!({"PriceInfo": {"Price": {"Currency": "CNY", "OriginalPrice": cny + disk, "DiscountPrice": 0.0,
        "TradePrice": cny + disk, "DetailInfos": {"DetailInfo": [
            {"Resource": "instanceType", "OriginalPrice": cny, "DiscountPrice": 0.0, "TradePrice": cny},
            {"Resource": "systemDisk", "OriginalPrice": disk, "DiscountPrice": 0.0, "TradePrice": disk}]}}}}))
}

/// ACK AttachInstances: needs a key pair or password; `tags` are node labels.
fn attach(s: &mut State, body: &[u8]) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return err(400, "ErrorParamsInvalid", "the body is not JSON");
    };
    if body["key_pair"].as_str().is_none() && body["password"].as_str().is_none() {
        return err(400, "ErrorParamsInvalid", "one of key_pair and password is required");
    }
    let mut list = vec![];
    for id in body["instances"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if s.instances.contains_key(id) {
            s.attached.insert(id.to_string(), ("c-gpuplan".to_string(), body.clone()));
            list.push(json!({"code": "200", "instanceId": id, "message": "successful"}));
        } else {
            list.push(json!({"code": "400", "instanceId": id, "message": "instance not found"}));
        }
    }
    ok(json!({"list": list, "task_id": "T-attach-1"}))
}

/// A node pool as DescribeClusterNodePools / DescribeClusterNodePoolDetail show it.
fn node_pool_view(id: &str, body: &Value) -> Value {
    json!({
        "nodepool_info": {"nodepool_id": id, "name": body["nodepool_info"]["name"], "type": "ess"},
        "scaling_group": body["scaling_group"],
        "kubernetes_config": body["kubernetes_config"],
        "status": {"state": "active", "total_nodes": 0},
    })
}

/// ACK CreateClusterNodePool: a unique `nodepool_info.name`; a scaling group with
/// vSwitches, instance types, a login (key pair or password) and a valid spot strategy
/// (a price limit per type with `SpotWithPriceLimit`); labels `{key, value}` and taints
/// `{key, value, effect}` in `kubernetes_config`. The request is kept for the tests.
fn create_node_pool(s: &mut State, body: &[u8]) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return err(400, "ErrorParamsInvalid", "the body is not JSON");
    };
    let Some(name) = body["nodepool_info"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return err(400, "ErrorParamsInvalid", "nodepool_info.name is required");
    };
    if s.node_pools.values().any(|p| p["nodepool_info"]["name"] == name) {
        return err(400, "ErrorNodePoolNameDuplicated", &format!("a node pool named {name} already exists"));
    }
    let sg = &body["scaling_group"];
    let non_empty = |v: &Value| v.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_string));
    if !non_empty(&sg["vswitch_ids"]) || !non_empty(&sg["instance_types"]) {
        return err(400, "ErrorParamsInvalid", "scaling_group.vswitch_ids and instance_types are required");
    }
    if sg["key_pair"].as_str().is_none() && sg["login_password"].as_str().is_none() {
        return err(400, "ErrorParamsInvalid", "one of scaling_group.key_pair and login_password is required");
    }
    match sg["spot_strategy"].as_str().unwrap_or("NoSpot") {
        "NoSpot" | "SpotAsPriceGo" => {}
        "SpotWithPriceLimit" if sg["spot_price_limit"].as_array().is_some_and(|a| !a.is_empty()) => {}
        other => return err(400, "ErrorParamsInvalid", &format!("bad spot_strategy {other} (or no spot_price_limit)")),
    }
    let k = &body["kubernetes_config"];
    let labels_ok =
        k["labels"].as_array().is_none_or(|l| l.iter().all(|l| l["key"].is_string() && l["value"].is_string()));
    let effects = ["NoSchedule", "NoExecute", "PreferNoSchedule"];
    let taints_ok = k["taints"].as_array().is_none_or(|t| {
        t.iter().all(|t| {
            t["key"].is_string() && t["value"].is_string() && t["effect"].as_str().is_some_and(|e| effects.contains(&e))
        })
    });
    if !labels_ok || !taints_ok {
        return err(400, "ErrorParamsInvalid", "kubernetes_config.labels/taints are malformed");
    }
    s.counter += 1;
    let id = format!("np{:030x}", s.counter);
    s.node_pools.insert(id.clone(), body);
    ok(json!({"nodepool_id": id, "task_id": format!("T-np-{}", s.counter)}))
}

/// ACK AttachInstancesToNodePool: the node pool must exist, and so must every instance,
/// running; ACK logs in with the pool's key pair. The nodes get the pool's labels and taints.
fn attach_to_pool(s: &mut State, pool: &str, body: &[u8]) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return err(400, "ErrorParamsInvalid", "the body is not JSON");
    };
    if !s.node_pools.contains_key(pool) {
        return err(404, "ErrorNodePoolNotFound", "node pool not found");
    }
    let ids: Vec<&str> = body["instances"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if ids.is_empty() {
        return err(400, "ErrorParamsInvalid", "instances is required");
    }
    if let Some(bad) = ids.iter().find(|id| s.instances.get(**id).is_none_or(|i| i.status != "Running")) {
        return err(400, "ErrorInstanceNotRunning", &format!("instance {bad} is not running"));
    }
    for id in ids {
        s.pool_attached.insert(id.to_string(), (pool.to_string(), body.clone()));
    }
    ok(json!({"task_id": "T-attach-np-1"}))
}

/// Check the ACS3 signature, date window and nonce from the bytes received.
fn verify(s: &mut State, req: &Request) -> Result<(), Response> {
    let h = |k: &str| req.headers.get(k).map(String::as_str).unwrap_or("");
    let Some(rest) = h("authorization").strip_prefix("ACS3-HMAC-SHA256 ") else {
        return Err(err(400, "IncompleteSignature", "The request signature does not conform to Aliyun standards."));
    };
    let fields: HashMap<&str, &str> = rest.split(',').filter_map(|f| f.split_once('=')).collect();
    let key_id = fields.get("Credential").copied().unwrap_or("");
    let secret = if key_id == ACCESS_KEY_ID {
        ACCESS_KEY_SECRET.to_string()
    } else if s.identity.issued.contains_key(key_id) {
        let signed = fields.get("SignedHeaders").copied().unwrap_or("");
        if !signed.split(';').any(|k| k == "x-acs-security-token") {
            return Err(err(400, "SignatureDoesNotMatch", "`x-acs-security-token` must be signed."));
        }
        s.identity
            .temporary(key_id, h("x-acs-security-token"))
            .map_err(|why| err(400, "InvalidSecurityToken.Mismatch", why))?
    } else {
        return Err(err(404, "InvalidAccessKeyId.NotFound", "Specified access key is not found."));
    };
    let date = h("x-acs-date");
    let ts = humantime::parse_rfc3339(date)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    if ts.is_none_or(|t| t.abs_diff(server::now()) > 15 * 60) {
        return Err(err(
            400,
            "InvalidTimeStamp.Expired",
            &format!("Specified time stamp or date value is expired: {date}."),
        ));
    }
    if h("x-acs-content-sha256") != sha256_hex(&req.body) {
        return Err(err(400, "SignatureDoesNotMatch", "x-acs-content-sha256 does not match the body."));
    }
    let signed_headers = fields.get("SignedHeaders").copied().unwrap_or("");
    for required in ["host", "x-acs-action", "x-acs-version", "x-acs-date", "x-acs-signature-nonce"] {
        if !signed_headers.split(';').any(|k| k == required) {
            return Err(err(400, "SignatureDoesNotMatch", &format!("`{required}` must be signed.")));
        }
    }
    let canonical_headers: String = signed_headers.split(';').map(|k| format!("{k}:{}\n", h(k).trim())).collect();
    let mut pairs: Vec<(String, String)> =
        query_pairs(&req.query).into_iter().map(|(k, v)| (percent_encode(&k), percent_encode(&v))).collect();
    pairs.sort();
    let cq = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
    let canonical_request = format!(
        "{}\n{}\n{cq}\n{canonical_headers}\n{signed_headers}\n{}",
        req.method,
        req.path,
        h("x-acs-content-sha256")
    );
    let string_to_sign = format!("{}\n{}", acs3::ALGORITHM, sha256_hex(canonical_request.as_bytes()));
    let expected = hex(&hmac_sha256(secret.as_bytes(), string_to_sign.as_bytes()));
    if !constant_time_eq(&expected, fields.get("Signature").copied().unwrap_or("")) {
        return Err(err(
            400,
            "SignatureDoesNotMatch",
            &format!(
                "Specified signature is not matched with our calculation. server string to sign is:{string_to_sign}"
            ),
        ));
    }
    let nonce = h("x-acs-signature-nonce").to_string();
    if !s.nonces.insert(nonce) {
        return Err(err(400, "SignatureNonceUsed", "Specified signature nonce was used already."));
    }
    Ok(())
}

fn indexed(params: &BTreeMap<String, String>, prefix: &str) -> Vec<(String, String)> {
    (1..=20)
        .filter_map(|n| {
            Some((
                params.get(&format!("{prefix}.{n}.Key"))?.clone(),
                params.get(&format!("{prefix}.{n}.Value")).cloned().unwrap_or_default(),
            ))
        })
        .collect()
}

fn run(s: &mut State, region: &str, params: &BTreeMap<String, String>) -> Response {
    let token = params.get("ClientToken").cloned().unwrap_or_default();
    if let Some(ids) = s.tokens.get(&token).filter(|_| !token.is_empty()) {
        return ok(json!({"InstanceIdSets": {"InstanceIdSet": ids}, "TradePrice": 0.0}));
    }
    let amount: u64 = params.get("Amount").and_then(|v| v.parse().ok()).unwrap_or(1);
    let min: u64 = params.get("MinAmount").and_then(|v| v.parse().ok()).unwrap_or(amount);
    if !(1..=100).contains(&amount) || min < 1 || min > amount {
        return err(400, "InvalidAmount.Malformed", "Amount must be 1-100 and MinAmount at most Amount.");
    }
    let (Some(zone), Some(itype), Some(image)) =
        (params.get("ZoneId"), params.get("InstanceType"), params.get("ImageId"))
    else {
        return err(400, "MissingParameter", "ZoneId, InstanceType and ImageId are required here.");
    };
    if !zone.starts_with(region) {
        return err(400, "InvalidZoneId.NotFound", "The specified zone does not exist in the region.");
    }
    let strategy = params.get("SpotStrategy").cloned().unwrap_or_else(|| "NoSpot".into());
    if !matches!(strategy.as_str(), "NoSpot" | "SpotAsPriceGo" | "SpotWithPriceLimit") {
        return err(400, "InvalidSpotStrategy", "The specified SpotStrategy is not valid.");
    }
    let limit = params.get("SpotPriceLimit").cloned();
    if strategy == "SpotWithPriceLimit" && limit.as_deref().and_then(|l| l.parse::<f64>().ok()).is_none_or(|l| l < 0.5)
    {
        return err(
            400,
            "InvalidSpotPriceLimit.LowerThanPublicPrice",
            "The specified SpotPriceLimit is lower than the current public price.",
        );
    }
    let spot = strategy != "NoSpot";
    let (set, nics) = match crate::chinacloud::alibaba_deployment_fake::check_run(s, region, itype, params) {
        Ok(launch) => launch,
        Err(refused) => return refused,
    };
    if let Some(refused) = private_pool(s, params, zone, itype, amount) {
        return refused;
    }
    let key = (zone.clone(), spot);
    let available = s.stock.get(&key).copied().unwrap_or(u64::MAX);
    if available < min {
        return err(
            403,
            "OperationDenied.NoStock",
            "The resource is out of stock in the specified zone. Please try other types, or choose other regions and zones.",
        );
    }
    let n = amount.min(available);
    if let Some(st) = s.stock.get_mut(&key) {
        *st -= n;
    }
    // ECS: a system disk of 20-2048 GB and data disks of 20-32768 GB, of a category it sells.
    let mut disks = Vec::new();
    let categories = ["cloud_essd", "cloud_auto", "cloud_efficiency"];
    let mut prefixes = vec![("SystemDisk".to_string(), 20, 2048)];
    prefixes.extend((1..=16).map(|i| (format!("DataDisk.{i}"), 20, 32768)));
    for (prefix, min, max) in prefixes {
        let (kind, size) = (params.get(&format!("{prefix}.Category")), params.get(&format!("{prefix}.Size")));
        if kind.is_none() && size.is_none() {
            continue;
        }
        let size: u64 = size.and_then(|v| v.parse().ok()).unwrap_or(0);
        let kind = kind.cloned().unwrap_or_default();
        if !categories.contains(&kind.as_str()) || !(min..=max).contains(&size) {
            return err(
                400,
                "InvalidDiskCategory.ValueNotSupported",
                "The specified disk category or size is not valid.",
            );
        }
        disks.push((kind, size));
    }
    let tags: BTreeMap<String, String> = indexed(params, "Tag").into_iter().collect();
    let mut ids = Vec::new();
    for _ in 0..n {
        s.counter += 1;
        let id = format!("i-fake{:012x}", s.counter);
        if !disks.is_empty() {
            s.disks.insert(id.clone(), disks.clone());
        }
        if let Some(d) = &set {
            s.set_of.insert(id.clone(), d.clone());
        }
        if !nics.is_empty() {
            s.interfaces.insert(id.clone(), nics.clone());
        }
        s.instances.insert(
            id.clone(),
            Instance {
                id: id.clone(),
                region: region.into(),
                zone: zone.clone(),
                instance_type: itype.clone(),
                image: image.clone(),
                spot_strategy: strategy.clone(),
                spot_price_limit: limit.clone(),
                status: "Running".into(),
                tags: tags.clone(),
                user_data: params.get("UserData").cloned(),
                console: String::new(),
                recycling: false,
                created_time: None,
            },
        );
        ids.push(id);
    }
    if !token.is_empty() {
        s.tokens.insert(token, ids.clone());
    }
    ok(json!({"InstanceIdSets": {"InstanceIdSet": ids}, "TradePrice": 0.0}))
}

/// A time as ECS's `CreationTime` writes it: `2026-11-26T15:16Z`.
fn to_the_minute(t: std::time::SystemTime) -> String {
    let full = humantime::format_rfc3339_seconds(t).to_string();
    format!("{}Z", &full[..16])
}

/// An instance's private address in the fake's VPC, the same for the same id.
pub fn private_ip(id: &str) -> String {
    let n = id.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("192.168.{}.{}", (n >> 8) % 250, n % 250 + 2)
}

fn view(i: &Instance) -> Value {
    json!({
        "InstanceId": i.id,
        "RegionId": i.region,
        "ZoneId": i.zone,
        "VpcAttributes": {"PrivateIpAddress": {"IpAddress": [private_ip(&i.id)]}},
        "InstanceType": i.instance_type,
        "ImageId": i.image,
        "Status": i.status,
        "CreationTime": i.created_time.clone().unwrap_or_else(|| to_the_minute(std::time::SystemTime::now())),
        "SpotStrategy": i.spot_strategy,
        "SpotPriceLimit": i.spot_price_limit.as_deref().and_then(|l| l.parse::<f64>().ok()).unwrap_or(0.0),
        "OperationLocks": {"LockReason": if i.recycling { json!([{"LockReason": "Recycling"}]) } else { json!([]) }},
        "Tags": {"Tag": i.tags.iter().map(|(k, v)| json!({"TagKey": k, "TagValue": v})).collect::<Vec<_>>()},
    })
}

fn describe(s: &State, region: &str, params: &BTreeMap<String, String>) -> Response {
    let max: usize = params.get("MaxResults").and_then(|v| v.parse().ok()).unwrap_or(10).clamp(10, 100);
    let ids: Option<Vec<String>> = match params.get("InstanceIds") {
        Some(j) => match serde_json::from_str::<Vec<String>>(j) {
            Ok(v) if v.len() <= 100 => Some(v),
            _ => {
                return err(
                    400,
                    "InvalidInstanceIds.Malformed",
                    "InstanceIds must be a JSON array of at most 100 ids.",
                );
            }
        },
        None => None,
    };
    let tags = indexed(params, "Tag");
    let after = params.get("NextToken").cloned().unwrap_or_default();
    let matching: Vec<&Instance> = s
        .instances
        .values()
        .filter(|i| i.region == region)
        .filter(|i| ids.as_ref().is_none_or(|ids| ids.contains(&i.id)))
        .filter(|i| tags.iter().all(|(k, v)| i.tags.get(k) == Some(v)))
        .collect();
    let page: Vec<&Instance> =
        matching.iter().filter(|i| after.is_empty() || i.id > after).take(max).copied().collect();
    let more = page.last().is_some_and(|last| matching.iter().any(|i| i.id > last.id));
    let next = if more { page.last().map(|i| i.id.clone()).unwrap_or_default() } else { String::new() };
    ok(json!({
        "TotalCount": matching.len(),
        "MaxResults": max,
        "NextToken": next,
        "Instances": {"Instance": page.iter().map(|i| view(i)).collect::<Vec<_>>()},
    }))
}

fn delete(s: &mut State, region: &str, params: &BTreeMap<String, String>) -> Response {
    let ids: Vec<String> = (1..=101).filter_map(|n| params.get(&format!("InstanceId.{n}")).cloned()).collect();
    if ids.is_empty() || ids.len() > 100 {
        return err(400, "InvalidParameter", "InstanceId.N must hold 1 to 100 ids.");
    }
    let force = params.get("Force").map(String::as_str) == Some("true");
    for id in &ids {
        match s.instances.get(id).filter(|i| i.region == region) {
            None => {
                return err(
                    404,
                    "InvalidInstanceId.NotFound",
                    &format!("The specified InstanceId `{id}` does not exist."),
                );
            }
            Some(i) if i.status == "Running" && !force => {
                return err(
                    403,
                    "IncorrectInstanceStatus",
                    "The current status of the resource does not support this operation.",
                );
            }
            _ => {}
        }
    }
    for id in &ids {
        s.instances.remove(id);
    }
    ok(json!({}))
}

/// ECS `TagResources` (`Tag.N.Key/Value`) and `UntagResources` (`TagKey.N`) on
/// `ResourceType=instance`: at most 50 `ResourceId.N` and 20 tags, every id checked
/// before any is changed.
fn tag_resources(s: &mut State, region: &str, action: &str, params: &BTreeMap<String, String>) -> Response {
    if params.get("ResourceType").map(String::as_str) != Some("instance") {
        return err(400, "InvalidResourceType.NotSupported", "ResourceType must be instance here.");
    }
    let ids: Vec<String> = (1..=51).filter_map(|n| params.get(&format!("ResourceId.{n}")).cloned()).collect();
    let tags = indexed(params, "Tag");
    let keys: Vec<String> = (1..=21).filter_map(|n| params.get(&format!("TagKey.{n}")).cloned()).collect();
    let n = if action == "TagResources" { tags.len() } else { keys.len() };
    if ids.is_empty() || ids.len() > 50 || n == 0 || n > 20 {
        return err(400, "InvalidParameter", "ResourceId.N must hold 1 to 50 ids and the tags 1 to 20.");
    }
    for id in &ids {
        if s.instances.get(id).is_none_or(|i| i.region != region) {
            return err(404, "InvalidResourceId.NotFound", &format!("The specified ResourceId `{id}` does not exist."));
        }
    }
    for id in &ids {
        let Some(i) = s.instances.get_mut(id) else { continue };
        if action == "TagResources" {
            i.tags.extend(tags.iter().cloned());
        } else {
            i.tags.retain(|k, _| !keys.contains(k));
        }
    }
    ok(json!({}))
}

/// Cloud Assistant: agent status, RunCommand (base64 content, one instance), its results
/// and StopInvocation, as ECS answers them.
fn cloud_assistant(s: &mut State, action: &str, params: &BTreeMap<String, String>) -> Response {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    match action {
        "DescribeCloudAssistantStatus" => {
            let set: Vec<Value> = params
                .iter()
                .filter(|(k, _)| k.starts_with("InstanceId."))
                .filter_map(|(_, id)| s.instances.get(id))
                .map(|i| {
                    let on = i.status == "Running" && !s.agents_offline.contains(&i.id);
                    json!({"InstanceId": i.id, "CloudAssistantStatus": on.to_string(), "CloudAssistantVersion": "2.2.0"})
                })
                .collect();
            ok(
                json!({"TotalCount": set.len(), "InstanceCloudAssistantStatusSet": {"InstanceCloudAssistantStatus": set}}),
            )
        }
        "RunCommand" => {
            if params.get("Type").map(String::as_str) != Some("RunShellScript") {
                return err(400, "InvalidCommandType.NotSupported", "Type must be RunShellScript here.");
            }
            let content = params.get("CommandContent").cloned().unwrap_or_default();
            let script = match params.get("ContentEncoding").map(String::as_str) {
                Some("Base64") => match b64.decode(&content) {
                    Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                    Err(_) => return err(400, "InvalidCommandContent.Malformed", "CommandContent is not base64."),
                },
                _ => content,
            };
            let Some(id) = params.get("InstanceId.1").cloned() else {
                return err(400, "MissingInstanceId", "InstanceId is mandatory for this action.");
            };
            if s.instances.get(&id).is_none_or(|i| i.status != "Running") || s.agents_offline.contains(&id) {
                return err(403, "InstanceNotRunning", "The specified instance is not running or its agent is down.");
            }
            s.counter += 1;
            let invoke = format!("t-{:08}", s.counter);
            s.invocations.insert(invoke.clone(), (id, script, false));
            ok(json!({"CommandId": "c-gpuplan", "InvokeId": invoke}))
        }
        "DescribeInvocationResults" => {
            let invoke = params.get("InvokeId").cloned().unwrap_or_default();
            let Some((id, script, stopped)) = s.invocations.get(&invoke).cloned() else {
                return ok(json!({"Invocation": {"InvocationResults": {"InvocationResult": []}, "TotalCount": 0}}));
            };
            let (status, code, out) = if script.contains("[ -e /var/log/gpuplan-job.log ]") {
                // The boot check: whether the job's log exists on the node.
                let found = if s.job_logs.contains(&id) { "present" } else { "missing" };
                ("Success".into(), 0, format!("gpuplan-job-log={found}\n"))
            } else {
                s.results.get(&id).cloned().unwrap_or_else(|| ("Success".into(), 0, String::new()))
            };
            let status = if stopped { "Stopped".to_string() } else { status };
            // Base64 unless PlainText is asked for, as ECS does.
            let out = if params.get("ContentEncoding").map(String::as_str) == Some("PlainText") {
                out
            } else {
                b64.encode(out)
            };
            ok(json!({"Invocation": {"TotalCount": 1, "InvocationResults": {"InvocationResult": [{
                "InvokeId": invoke, "InstanceId": id, "InvokeRecordStatus": status, "InvocationStatus": status,
                "ExitCode": code, "Output": out, "Dropped": 0, "ErrorCode": "", "ErrorInfo": ""}]}}}))
        }
        _ => {
            let invoke = params.get("InvokeId").cloned().unwrap_or_default();
            match s.invocations.get_mut(&invoke) {
                Some(inv) => {
                    inv.2 = true;
                    ok(json!({}))
                }
                None => err(404, "InvalidInvokeId.NotFound", "The specified invocation does not exist."),
            }
        }
    }
}

/// A launch into a private pool (`PrivatePoolOptions.MatchCriteria=Target`): the capacity
/// reservation must be active, of this zone and type, with room; its `UsedAmount` grows.
fn private_pool(
    s: &mut State,
    params: &BTreeMap<String, String>,
    zone: &str,
    itype: &str,
    amount: u64,
) -> Option<Response> {
    if params.get("PrivatePoolOptions.MatchCriteria").map(String::as_str) != Some("Target") {
        return None;
    }
    let id = params.get("PrivatePoolOptions.Id").cloned().unwrap_or_default();
    let Some((_, item)) = s.reservations.get_mut(&id) else {
        return Some(err(404, "InvalidPrivatePoolOptionsId.NotFound", "The specified private pool does not exist."));
    };
    let res = &mut item["AllocatedResources"]["AllocatedResource"][0];
    let room = res["TotalAmount"].as_u64().unwrap_or(0).saturating_sub(res["UsedAmount"].as_u64().unwrap_or(0));
    if res["zoneId"] != zone || res["InstanceType"] != itype || room < amount {
        return Some(err(403, "InvalidParameter.PrivatePoolOptions", "The private pool cannot hold these instances."));
    }
    res["UsedAmount"] = json!(res["UsedAmount"].as_u64().unwrap_or(0) + amount);
    None
}

/// ECS capacity reservations: create (idempotent by ClientToken), describe by
/// `PrivatePoolOptions.Ids`, release (`Released`).
fn capacity_reservation(s: &mut State, action: &str, params: &BTreeMap<String, String>) -> Response {
    match action {
        "CreateCapacityReservation" => {
            let token = params.get("ClientToken").cloned().unwrap_or_default();
            if let Some((id, _)) = s.reservations.iter().find(|(_, (t, _))| !t.is_empty() && *t == token) {
                return ok(json!({"PrivatePoolOptionsId": id}));
            }
            let (Some(zone), Some(t), Some(n)) =
                (params.get("ZoneId.1"), params.get("InstanceType"), params.get("InstanceAmount"))
            else {
                return err(400, "MissingParameter", "ZoneId, InstanceType and InstanceAmount are mandatory.");
            };
            s.counter += 1;
            let id = format!("crp-fake{:04}", s.counter);
            let item = json!({
                "PrivatePoolOptionsId": id,
                "Status": "Active",
                "StartTime": "2026-12-07T00:00Z",
                "EndTimeType": params.get("EndTimeType").cloned().unwrap_or_default(),
                "EndTime": params.get("EndTime").cloned().unwrap_or_default(),
                "AllocatedResources": {"AllocatedResource": [
                    {"InstanceType": t, "zoneId": zone, "TotalAmount": n.parse::<u64>().unwrap_or(0), "UsedAmount": 0}
                ]},
            });
            s.reservations.insert(id.clone(), (token, item));
            ok(json!({"PrivatePoolOptionsId": id}))
        }
        "DescribeCapacityReservations" => {
            let ids: Vec<String> =
                params.get("PrivatePoolOptions.Ids").and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
            let items: Vec<Value> =
                ids.iter().filter_map(|id| s.reservations.get(id)).map(|(_, i)| i.clone()).collect();
            ok(json!({"CapacityReservationSet": {"CapacityReservationItem": items}}))
        }
        _ => {
            let id = params.get("PrivatePoolOptions.Id").cloned().unwrap_or_default();
            match s.reservations.get_mut(&id) {
                Some((_, item)) => {
                    item["Status"] = json!("Released");
                    ok(json!({}))
                }
                None => err(404, "InvalidPrivatePoolOptionsId.NotFound", "The specified private pool does not exist."),
            }
        }
    }
}
