//! An in-process Kubernetes API server double for the Kubernetes job backend tests: the
//! Job, Pod, pod log and PriorityClass endpoints over HTTP/1.1 on 127.0.0.1, driven by
//! kube-rs through a kubeconfig like any cluster.
//!
//! It keeps Jobs and their pods and runs the Job controller's rules on what gpuplan
//! submitted (and evicts pods through the Eviction API): an Indexed Job gets one pod per index; a pod that fails with a
//! `DisruptionTarget` condition is replaced without counting when the Job's
//! `podFailurePolicy` says `Ignore` for it, and counts otherwise; more failures than
//! `backoffLimit` fail the Job; every index succeeded completes it. Tests move pods
//! along (`run_all`, `succeed`, `fail`, `reclaim`) and read what the client did
//! (`requests`). Bearer-token auth; `deny(401|403)` answers everything with that code.
//!
//! Nodes (`node`) answer `GET /api/v1/nodes/NAME` and `GET /api/v1/nodes` with their
//! `spec.providerID` and the status a test gives them (`node_status`: conditions, capacity,
//! allocatable); a merge `PATCH` of one changes its `spec` (a cordon), and a test can bind
//! a pod to one (`run_on`).
//!
//! It also keeps `coordination.k8s.io/v1` Leases as the API server does for leader
//! election: every write gets a new `metadata.resourceVersion`, and a PUT naming another
//! version than the stored one is refused with 409 Conflict (optimistic concurrency), as
//! a POST of an existing Lease is with 409 AlreadyExists. Tests read the Lease, every
//! holder change the server accepted (`lease_holders`), and the conflicts it answered.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub const TOKEN: &str = "gpuplan-test-token";

#[derive(Default)]
struct Pod {
    name: String,
    index: u32,
    phase: &'static str,
    node: String,
    disrupted: bool,
    /// The scheduler found no node for it (`PodScheduled=False`, `Unschedulable`).
    unschedulable: bool,
    log: Vec<String>,
}

struct FakeJob {
    object: Value,
    pods: Vec<Pod>,
    failed: u32,
    pod_seq: u32,
}

#[derive(Default)]
struct Cluster {
    jobs: BTreeMap<(String, String), FakeJob>,
    priority_classes: Vec<String>,
    deny: Option<u16>,
    /// Job names whose creation is refused as invalid (422).
    invalid: Vec<String>,
    /// Namespaces that do not exist (every other one does).
    missing_namespaces: Vec<String>,
    requests: Vec<(String, String, String)>,
    leases: BTreeMap<(String, String), Value>,
    /// The cluster-wide resourceVersion counter.
    version: u64,
    /// Every accepted Lease write that changed its holder: (when, namespace/name, holder).
    holders: Vec<(std::time::Instant, String, Option<String>)>,
    lease_conflicts: usize,
    /// Nodes by name, as the API server serves them.
    nodes: BTreeMap<String, Value>,
    /// Services by (namespace, name); a Job's are deleted with it (its ownerReference).
    services: BTreeMap<(String, String), Value>,
}

#[derive(Clone)]
pub struct FakeApi {
    pub url: String,
    inner: Arc<Mutex<Cluster>>,
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).expect("percent-encoded byte"));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).expect("UTF-8 query")
}

impl FakeApi {
    /// A cluster with gpuplan's four priority classes.
    pub fn start() -> FakeApi {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let inner = Arc::new(Mutex::new(Cluster {
            priority_classes: ["critical", "high", "medium", "low"].map(|p| format!("gpuplan-{p}")).to_vec(),
            ..Cluster::default()
        }));
        let api = FakeApi { url, inner };
        let served = api.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let s = served.clone();
                std::thread::spawn(move || s.serve(stream));
            }
        });
        api
    }

    fn serve(&self, mut stream: std::net::TcpStream) {
        let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let (mut len, mut auth) = (0usize, String::new());
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().expect("a numeric Content-Length");
            }
            if lower.starts_with("authorization:") {
                auth = h["authorization:".len()..].trim().to_string();
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body).expect("the whole body");
        let body = String::from_utf8_lossy(&body).into_owned();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let query: BTreeMap<String, String> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.split_once('=').map(|(k, v)| (decode(k), decode(v))))
            .collect();
        self.inner.lock().expect("cluster").requests.push((method.clone(), path.to_string(), body.clone()));

        // A followed log streams until its pod ends.
        if method == "GET" && path.ends_with("/log") && query.get("follow").map(String::as_str) == Some("true") {
            return self.follow(stream, path);
        }
        // A pod watch streams until the client goes.
        if method == "GET" && path.ends_with("/pods") && query.get("watch").map(String::as_str) == Some("true") {
            return self.watch_pods(stream, path);
        }
        let (code, reply) = if auth != format!("Bearer {TOKEN}") {
            status(401, "Unauthorized", "Unauthorized")
        } else {
            self.answer(&method, path, &query, &body)
        };
        let (ctype, text) = match reply {
            Value::String(s) => ("text/plain", s),
            v => ("application/json", v.to_string()),
        };
        let head = format!(
            "HTTP/1.1 {code} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            text.len()
        );
        // The client may have gone (a cancelled follow); nothing to report then.
        let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(text.as_bytes()));
    }

    /// `GET /api/v1/namespaces/NS/pods?watch=true`: ADDED for every pod, then every
    /// change of a pod's JSON as MODIFIED (and DELETED), one JSON event per chunk, until
    /// the client hangs up. Every event carries a new resourceVersion.
    fn watch_pods(&self, mut stream: std::net::TcpStream, path: &str) {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let ns: &str = path.split('/').nth(4).unwrap_or("");
        let mut sent: BTreeMap<String, Value> = BTreeMap::new();
        loop {
            let (now, mut version) = {
                let c = self.inner.lock().expect("cluster");
                let pods: BTreeMap<String, Value> = c
                    .jobs
                    .iter()
                    .filter(|((n, _), _)| n == ns)
                    .flat_map(|((_, job), j)| j.pods.iter().map(move |p| (p.name.clone(), pod_json(ns, job, p))))
                    .collect();
                (pods, c.version)
            };
            let mut events = Vec::new();
            for (name, pod) in &now {
                match sent.get(name) {
                    None => events.push(("ADDED", pod.clone())),
                    Some(old) if old != pod => events.push(("MODIFIED", pod.clone())),
                    Some(_) => {}
                }
            }
            for (name, pod) in &sent {
                if !now.contains_key(name) {
                    events.push(("DELETED", pod.clone()));
                }
            }
            for (kind, mut pod) in events {
                version += 1;
                pod["metadata"]["resourceVersion"] = json!(version.to_string());
                let line = format!("{}\n", json!({"type": kind, "object": pod}));
                if stream.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes()).is_err() {
                    return;
                }
            }
            self.inner.lock().expect("cluster").version = version;
            sent = now;
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// The scheduler finds no node for the live pod of `index` (it stays Pending).
    pub fn unschedulable(&self, ns: &str, name: &str, index: u32) {
        self.with_job(ns, name, |j| live(j, index).unschedulable = true)
    }

    fn follow(&self, mut stream: std::net::TcpStream, path: &str) {
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let segs: Vec<&str> = path.split('/').collect();
        let (ns, pod) = (segs[4].to_string(), segs[6].to_string());
        let mut sent = 0;
        loop {
            let (lines, done) = {
                let c = self.inner.lock().expect("cluster");
                let p = c.jobs.iter().filter(|((n, _), _)| *n == ns).flat_map(|(_, j)| &j.pods).find(|p| p.name == pod);
                match p {
                    Some(p) => (p.log[sent..].to_vec(), matches!(p.phase, "Succeeded" | "Failed")),
                    None => (vec![], true),
                }
            };
            for l in &lines {
                let chunk = format!("{l}\n");
                if stream.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes()).is_err() {
                    return;
                }
            }
            sent += lines.len();
            if done {
                let _ = stream.write_all(b"0\r\n\r\n");
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn answer(&self, method: &str, path: &str, query: &BTreeMap<String, String>, body: &str) -> (u16, Value) {
        let mut c = self.inner.lock().expect("cluster");
        if let Some(code) = c.deny {
            let reason = if code == 401 { "Unauthorized" } else { "Forbidden" };
            return status(code, reason, &format!("{reason}: the fake cluster denies everything"));
        }
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (method, segs.as_slice()) {
            ("GET", ["api", "v1", "nodes", name]) => match c.nodes.get(*name) {
                Some(node) => (200, node.clone()),
                None => status(404, "NotFound", &format!("nodes \"{name}\" not found")),
            },
            ("GET", ["api", "v1", "nodes"]) => {
                let items: Vec<Value> = c.nodes.values().cloned().collect();
                (200, json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}))
            }
            ("PATCH", ["api", "v1", "nodes", name]) => {
                let patch: Value = serde_json::from_str(body).unwrap_or_default();
                match c.nodes.get_mut(*name) {
                    Some(node) => {
                        for (k, v) in patch["spec"].as_object().into_iter().flatten() {
                            node["spec"][k] = v.clone();
                        }
                        (200, node.clone())
                    }
                    None => status(404, "NotFound", &format!("nodes \"{name}\" not found")),
                }
            }
            ("GET", ["api", "v1", "namespaces", ns]) => {
                if c.missing_namespaces.iter().any(|m| m == ns) {
                    status(404, "NotFound", &format!("namespaces \"{ns}\" not found"))
                } else {
                    (200, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
                }
            }
            ("GET", ["apis", "scheduling.k8s.io", "v1", "priorityclasses", name]) => {
                if c.priority_classes.iter().any(|p| p == name) {
                    (
                        200,
                        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": name}, "value": 1000}),
                    )
                } else {
                    status(404, "NotFound", &format!("priorityclasses.scheduling.k8s.io \"{name}\" not found"))
                }
            }
            ("POST", ["apis", "batch", "v1", "namespaces", ns, "jobs"]) => {
                let mut job: Value = serde_json::from_str(body).expect("a JSON Job");
                assert_eq!(job["kind"], "Job", "only Jobs are posted");
                let name = job["metadata"]["name"].as_str().expect("a named Job").to_string();
                if c.invalid.contains(&name) {
                    return status(
                        422,
                        "Invalid",
                        &format!("Job.batch \"{name}\" is invalid: spec.template: Invalid value"),
                    );
                }
                let key = (ns.to_string(), name.clone());
                if c.jobs.contains_key(&key) {
                    return status(409, "AlreadyExists", &format!("jobs.batch \"{name}\" already exists"));
                }
                job["metadata"]["namespace"] = json!(ns);
                job["metadata"]["uid"] = json!(format!("uid-{name}"));
                let completions = job["spec"]["completions"].as_u64().unwrap_or(1) as u32;
                let mut fj = FakeJob { object: job, pods: Vec::new(), failed: 0, pod_seq: 0 };
                for i in 0..completions {
                    new_pod(&mut fj, &name, i);
                }
                refresh(&mut fj);
                let obj = fj.object.clone();
                c.jobs.insert(key, fj);
                (201, obj)
            }
            ("GET", ["apis", "batch", "v1", "namespaces", ns, "jobs", name]) => {
                match c.jobs.get(&(ns.to_string(), name.to_string())) {
                    Some(j) => (200, j.object.clone()),
                    None => status(404, "NotFound", &format!("jobs.batch \"{name}\" not found")),
                }
            }
            ("POST", ["api", "v1", "namespaces", ns, "services"]) => {
                let mut svc: Value = serde_json::from_str(body).expect("a JSON Service");
                assert_eq!(svc["kind"], "Service", "only Services are posted here");
                let name = svc["metadata"]["name"].as_str().expect("a named Service").to_string();
                let key = (ns.to_string(), name.clone());
                if c.services.contains_key(&key) {
                    return status(409, "AlreadyExists", &format!("services \"{name}\" already exists"));
                }
                svc["metadata"]["namespace"] = json!(ns);
                c.services.insert(key, svc.clone());
                (201, svc)
            }
            ("GET", ["api", "v1", "namespaces", ns, "services", name]) => {
                match c.services.get(&(ns.to_string(), name.to_string())) {
                    Some(svc) => (200, svc.clone()),
                    None => status(404, "NotFound", &format!("services \"{name}\" not found")),
                }
            }
            ("DELETE", ["apis", "batch", "v1", "namespaces", ns, "jobs", name]) => {
                // The garbage collector: what the Job owns goes with it.
                let uid = json!(format!("uid-{name}"));
                c.services.retain(|(n, _), svc| {
                    n != ns
                        || !svc["metadata"]["ownerReferences"]
                            .as_array()
                            .is_some_and(|o| o.iter().any(|o| o["uid"] == uid))
                });
                match c.jobs.remove(&(ns.to_string(), name.to_string())) {
                    Some(_) => (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
                    None => status(404, "NotFound", &format!("jobs.batch \"{name}\" not found")),
                }
            }
            ("GET", ["api", "v1", "namespaces", ns, "pods"]) => {
                let want: Vec<(String, String)> = query
                    .get("labelSelector")
                    .map(|s| {
                        s.split(',').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect()
                    })
                    .unwrap_or_default();
                let items: Vec<Value> = c
                    .jobs
                    .iter()
                    .filter(|((n, _), _)| n == ns)
                    .flat_map(|((_, job), j)| j.pods.iter().map(move |p| pod_json(ns, job, p)))
                    .filter(|p| want.iter().all(|(k, v)| p["metadata"]["labels"][k] == json!(v)))
                    .collect();
                (200, json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}))
            }
            // The Eviction API: the pod fails with a `DisruptionTarget` condition, as the
            // eviction controller marks it, and its Job decides (replace it, uncounted, when
            // the pod failure policy ignores disruptions).
            ("POST", ["api", "v1", "namespaces", ns, "pods", pod, "eviction"]) => {
                let eviction: Value = serde_json::from_str(body).expect("a JSON Eviction");
                assert_eq!(eviction["metadata"]["name"], *pod, "the Eviction names its pod");
                let found = c.jobs.iter_mut().filter(|((n, _), _)| n == ns).find_map(|((_, job), j)| {
                    let i = j.pods.iter().position(|p| p.name == *pod && matches!(p.phase, "Pending" | "Running"))?;
                    Some((job.clone(), j, i))
                });
                match found {
                    Some((job, j, i)) => {
                        let index = j.pods[i].index;
                        j.pods[i].phase = "Failed";
                        j.pods[i].disrupted = true;
                        judge(j, &job, index, true);
                        refresh(j);
                        (
                            201,
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                        )
                    }
                    None => status(404, "NotFound", &format!("pods \"{pod}\" not found")),
                }
            }
            ("GET", ["api", "v1", "namespaces", ns, "pods", pod, "log"]) => {
                let p = c.jobs.iter().filter(|((n, _), _)| n == ns).flat_map(|(_, j)| &j.pods).find(|p| p.name == *pod);
                match p {
                    Some(p) => (200, Value::String(p.log.iter().map(|l| format!("{l}\n")).collect())),
                    None => status(404, "NotFound", &format!("pods \"{pod}\" not found")),
                }
            }
            (_, ["apis", "coordination.k8s.io", "v1", "namespaces", ns, "leases", rest @ ..]) => {
                lease_call(&mut c, method, ns, rest.first().copied(), body)
            }
            _ => status(404, "NotFound", &format!("the fake has no {method} {path}")),
        }
    }

    /// The Lease as stored.
    pub fn lease(&self, ns: &str, name: &str) -> Option<Value> {
        self.inner.lock().expect("cluster").leases.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// The holder the stored Lease names (`None`: no Lease, or no holder).
    pub fn lease_holder(&self, ns: &str, name: &str) -> Option<String> {
        self.lease(ns, name).and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
    }

    /// Every accepted write that changed a Lease's holder, in order, with when it landed.
    pub fn lease_holders(&self) -> Vec<(std::time::Instant, Option<String>)> {
        self.inner.lock().expect("cluster").holders.iter().map(|(at, _, h)| (*at, h.clone())).collect()
    }

    /// Lease writes refused with 409 (a stale resourceVersion, or creating an existing one).
    pub fn lease_conflicts(&self) -> usize {
        self.inner.lock().expect("cluster").lease_conflicts
    }

    fn with_job<T>(&self, ns: &str, name: &str, f: impl FnOnce(&mut FakeJob) -> T) -> T {
        let mut c = self.inner.lock().expect("cluster");
        let j = c.jobs.get_mut(&(ns.to_string(), name.to_string())).unwrap_or_else(|| panic!("no Job {ns}/{name}"));
        let out = f(j);
        refresh(j);
        out
    }

    /// The scheduler binds every pending pod to a node; each writes a first line.
    pub fn run_all(&self, ns: &str, name: &str) {
        self.with_job(ns, name, |j| {
            for p in j.pods.iter_mut().filter(|p| p.phase == "Pending") {
                p.phase = "Running";
                p.node = format!("gpu-node-{}", p.index);
                p.log.push(format!("replica {} starting on {}", p.index, p.node));
            }
        })
    }

    /// A Node named `name` whose `spec.providerID` is `provider_id` (as EKS, TKE and ACK
    /// set it: the cloud instance behind a node named otherwise).
    pub fn node(&self, name: &str, provider_id: &str) {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                          "spec": {"providerID": provider_id}});
        self.inner.lock().expect("cluster").nodes.insert(name.to_string(), node);
    }

    /// Node `name`'s `status` (conditions, capacity, allocatable).
    pub fn node_status(&self, name: &str, status: Value) {
        self.inner.lock().expect("cluster").nodes.get_mut(name).expect("a node")["status"] = status;
    }

    /// Node `name` as the API server holds it.
    pub fn node_object(&self, name: &str) -> Value {
        self.inner.lock().expect("cluster").nodes.get(name).cloned().expect("a node")
    }

    /// The scheduler binds the pending pod of `index` to node `node`; it starts running.
    pub fn run_on(&self, ns: &str, name: &str, index: u32, node: &str) {
        self.with_job(ns, name, |j| {
            let p = j.pods.iter_mut().find(|p| p.index == index && p.phase == "Pending").expect("a pending pod");
            p.phase = "Running";
            p.node = node.to_string();
        })
    }

    /// The running pod of `index` writes `line`.
    pub fn log(&self, ns: &str, name: &str, index: u32, line: &str) {
        self.with_job(ns, name, |j| live(j, index).log.push(line.to_string()))
    }

    pub fn succeed(&self, ns: &str, name: &str, index: u32) {
        self.with_job(ns, name, |j| live(j, index).phase = "Succeeded")
    }

    /// The pod of `index` exits non-zero: counts toward `backoffLimit`.
    pub fn fail(&self, ns: &str, name: &str, index: u32) {
        self.with_job(ns, name, |j| {
            live(j, index).phase = "Failed";
            judge(j, name, index, false);
        })
    }

    /// The node under the pod of `index` is reclaimed: the pod fails with a
    /// `DisruptionTarget` condition.
    pub fn reclaim(&self, ns: &str, name: &str, index: u32) {
        self.with_job(ns, name, |j| {
            let p = live(j, index);
            p.phase = "Failed";
            p.disrupted = true;
            judge(j, name, index, true);
        })
    }

    /// Put a Job there as someone else would (no gpuplan labels).
    pub fn foreign_job(&self, ns: &str, name: &str) {
        let object = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {"team": "data"}},
            "spec": {"template": {"spec": {"containers": [{"name": "etl", "image": "etl:1"}], "restartPolicy": "Never"}}}});
        self.inner
            .lock()
            .expect("cluster")
            .jobs
            .insert((ns.into(), name.into()), FakeJob { object, pods: vec![], failed: 0, pod_seq: 0 });
    }

    pub fn service(&self, ns: &str, name: &str) -> Option<Value> {
        self.inner.lock().expect("cluster").services.get(&(ns.to_string(), name.to_string())).cloned()
    }

    pub fn job(&self, ns: &str, name: &str) -> Option<Value> {
        self.inner.lock().expect("cluster").jobs.get(&(ns.to_string(), name.to_string())).map(|j| j.object.clone())
    }

    pub fn pods(&self, ns: &str, name: &str) -> usize {
        self.with_job(ns, name, |j| j.pods.len())
    }

    /// The names of the Job's live (pending or running) pods of `index`.
    pub fn live_pods(&self, ns: &str, name: &str, index: u32) -> Vec<String> {
        self.with_job(ns, name, |j| {
            j.pods
                .iter()
                .filter(|p| p.index == index && matches!(p.phase, "Pending" | "Running"))
                .map(|p| p.name.clone())
                .collect()
        })
    }

    pub fn deny(&self, code: u16) {
        self.inner.lock().expect("cluster").deny = Some(code);
    }

    pub fn refuse_as_invalid(&self, name: &str) {
        self.inner.lock().expect("cluster").invalid.push(name.to_string());
    }

    pub fn drop_namespace(&self, ns: &str) {
        self.inner.lock().expect("cluster").missing_namespaces.push(ns.to_string());
    }

    pub fn drop_priority_classes(&self) {
        self.inner.lock().expect("cluster").priority_classes.clear();
    }

    /// (method, path, body) of every request, in order.
    pub fn requests(&self) -> Vec<(String, String, String)> {
        self.inner.lock().expect("cluster").requests.clone()
    }

    pub fn count(&self, method: &str, path_suffix: &str) -> usize {
        self.requests().iter().filter(|(m, p, _)| m == method && p.ends_with(path_suffix)).count()
    }
}

/// GET, POST and PUT of Leases with resourceVersion preconditions.
fn lease_call(c: &mut Cluster, method: &str, ns: &str, name: Option<&str>, body: &str) -> (u16, Value) {
    let holder = |v: &Value| v["spec"]["holderIdentity"].as_str().map(str::to_string);
    match (method, name) {
        ("GET", Some(name)) => match c.leases.get(&(ns.to_string(), name.to_string())) {
            Some(l) => (200, l.clone()),
            None => status(404, "NotFound", &format!("leases.coordination.k8s.io \"{name}\" not found")),
        },
        ("POST", None) | ("PUT", Some(_)) => {
            let mut lease: Value = serde_json::from_str(body).expect("a JSON Lease");
            let name = lease["metadata"]["name"].as_str().expect("a named Lease").to_string();
            let key = (ns.to_string(), name.clone());
            let before = c.leases.get(&key).cloned();
            match (method, &before) {
                ("POST", Some(_)) => {
                    c.lease_conflicts += 1;
                    return status(
                        409,
                        "AlreadyExists",
                        &format!("leases.coordination.k8s.io \"{name}\" already exists"),
                    );
                }
                ("PUT", None) => {
                    return status(404, "NotFound", &format!("leases.coordination.k8s.io \"{name}\" not found"));
                }
                ("PUT", Some(cur)) if cur["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"] => {
                    c.lease_conflicts += 1;
                    return status(
                        409,
                        "Conflict",
                        &format!(
                            "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                        ),
                    );
                }
                _ => {}
            }
            c.version += 1;
            lease["metadata"]["resourceVersion"] = json!(c.version.to_string());
            lease["metadata"]["namespace"] = json!(ns);
            lease["apiVersion"] = json!("coordination.k8s.io/v1");
            lease["kind"] = json!("Lease");
            if before.as_ref().map(holder) != Some(holder(&lease)) {
                c.holders.push((std::time::Instant::now(), format!("{ns}/{name}"), holder(&lease)));
            }
            c.leases.insert(key, lease.clone());
            (if method == "POST" { 201 } else { 200 }, lease)
        }
        _ => status(405, "MethodNotAllowed", &format!("the fake has no {method} for leases")),
    }
}

/// A kubeconfig with one context, `fake`, for an API server at `url`.
pub fn kubeconfig_for(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n\
         contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n\
         users:\n- name: tester\n  user:\n    token: {TOKEN}\n"
    )
}

fn new_pod(j: &mut FakeJob, job: &str, index: u32) {
    j.pod_seq += 1;
    j.pods.push(Pod { name: format!("{job}-{index}-{}", j.pod_seq), index, phase: "Pending", ..Pod::default() });
}

/// The current (last) pod of `index`.
fn live(j: &mut FakeJob, index: u32) -> &mut Pod {
    j.pods.iter_mut().rev().find(|p| p.index == index).expect("a pod for this index")
}

/// The Job controller's decision on a failed pod of `index`.
fn judge(j: &mut FakeJob, name: &str, index: u32, disrupted: bool) {
    let ignored = disrupted
        && j.object["spec"]["podFailurePolicy"]["rules"].as_array().is_some_and(|rules| {
            rules.iter().any(|r| {
                r["action"] == "Ignore"
                    && r["onPodConditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "DisruptionTarget" && c["status"] == "True"))
            })
        });
    if !ignored {
        j.failed += 1;
    }
    let limit = j.object["spec"]["backoffLimit"].as_u64().unwrap_or(6) as u32;
    if j.failed <= limit {
        new_pod(j, name, index);
    }
}

/// The Job's status from its pods, as the controller writes it.
fn refresh(j: &mut FakeJob) {
    let completions = j.object["spec"]["completions"].as_u64().unwrap_or(1) as u32;
    let limit = j.object["spec"]["backoffLimit"].as_u64().unwrap_or(6) as u32;
    let done: Vec<u32> =
        (0..completions).filter(|i| j.pods.iter().any(|p| p.index == *i && p.phase == "Succeeded")).collect();
    let active = j.pods.iter().filter(|p| matches!(p.phase, "Pending" | "Running")).count();
    let mut conditions = Vec::new();
    if j.failed > limit {
        conditions.push(json!({"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
                               "message": "Job has reached the specified backoff limit"}));
        conditions.push(json!({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                               "message": "Job has reached the specified backoff limit"}));
    } else if done.len() as u32 == completions {
        conditions.push(json!({"type": "SuccessCriteriaMet", "status": "True"}));
        conditions.push(json!({"type": "Complete", "status": "True"}));
    }
    let completed: Vec<String> = done.iter().map(u32::to_string).collect();
    j.object["status"] = json!({
        "active": active, "succeeded": done.len(), "failed": j.failed,
        "completedIndexes": completed.join(","), "conditions": conditions,
    });
}

fn pod_json(ns: &str, job: &str, p: &Pod) -> Value {
    let mut conditions = vec![];
    if p.disrupted {
        conditions.push(json!({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}));
    }
    if p.unschedulable && p.phase == "Pending" {
        conditions.push(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}));
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": p.name, "namespace": ns, "labels": {
            "batch.kubernetes.io/job-name": job, "job-name": job, "gpuplan.dev/job": job,
            "batch.kubernetes.io/job-completion-index": p.index.to_string()}},
        "spec": {"nodeName": if p.node.is_empty() { Value::Null } else { json!(p.node) },
                 "containers": [{"name": "job", "image": "x"}]},
        "status": {"phase": p.phase, "conditions": conditions},
    })
}
