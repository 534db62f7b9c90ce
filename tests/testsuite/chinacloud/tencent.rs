//! Tencent Cloud (CVM, TKE) against the fake endpoint: through the CLI, through the
//! provider API, and raw requests for the fake's own checks.

use std::sync::Arc;

use gpuplan::providers::http::{CloudConfig, CredentialCache, Credentials, Endpoint, Secret};
use gpuplan::providers::signing::tc3;
use gpuplan::providers::tencentcloud::TencentProvider;
use gpuplan::providers::{
    Capacity, CreateNodes, ErrorClass, JobPort, JobState, LaunchJob, ListFilter, NodePort, TAG_ADDRESS, TAG_ATTEMPT,
    TAG_JOB, TAG_LINEAGE, TAG_MANAGED,
};
use serde_json::Value;

use crate::chinacloud::tencent_fake::{Fake, SECRET_ID, SECRET_KEY};
use crate::chinacloud::{Fleet, pool};

const REGION: &str = "ap-guangzhou";
const Z3: &str = "ap-guangzhou-3";
const Z4: &str = "ap-guangzhou-4";

pub(crate) fn fleet(fake: &Fake, zones: &[&str], desired: u32, mix: &str) -> Fleet {
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"{REGION}\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}",
        fake.url,
        pool("tencentcloud", zones, "T4", "GN7.2XLARGE32", desired, mix)
    );
    Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)])
}

/// (on-demand, spot) instances of the pool in the fake.
fn mix(fake: &Fake) -> (usize, usize) {
    let of_pool: Vec<_> = fake
        .instances()
        .into_iter()
        .filter(|i| i.tags.get(TAG_ADDRESS).map(String::as_str) == Some("gpu_pool.train"))
        .collect();
    let spot = of_pool.iter().filter(|i| i.charge_type == "SPOTPAID").count();
    (of_pool.len() - spot, spot)
}

#[test]
fn apply_plan_drift_repair_and_destroy_a_mixed_pool() {
    let fake = Fake::start();
    let foreign = fake.add(REGION, Z3, &[("team", "someone-else")]);
    let f = fleet(&fake, &[Z3, Z4], 4, "    on_demand_base = 1\n    spot_percent   = 50");
    let mut outputs = String::new();
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));
    assert_eq!(mix(&fake), (3, 1));
    for i in fake.instances().iter().filter(|i| i.id != foreign) {
        assert_eq!(i.tags.get(TAG_MANAGED).map(String::as_str), Some("true"), "{i:?}");
        assert!(i.tags.contains_key(TAG_LINEAGE), "{i:?}");
        assert_eq!(i.image, "img-gpuplan");
    }
    let spot: Vec<_> = fake.instances().into_iter().filter(|i| i.charge_type == "SPOTPAID").collect();
    assert_eq!(spot.len(), 1);

    // Nothing to do afterwards; the saved plan and the state hold no secret.
    let r = f.run(&["plan", "--detailed-exitcode", "--out", "saved.plan"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));

    // Terminated behind gpuplan's back: drift, then repaired.
    let victim = fake.instances().into_iter().find(|i| i.id != foreign).expect("a node").id;
    fake.remove(&victim);
    let r = f.run(&["drift", "--detailed-exitcode"]).expect(2);
    assert!(r.stdout.contains(&victim), "{}", r.stdout);
    outputs.push_str(&(r.stdout + &r.stderr));
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));
    assert_eq!(mix(&fake), (3, 1));
    f.run(&["plan", "--detailed-exitcode"]).expect(0);

    let r = f.run(&["destroy", "--auto-approve"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));
    let left: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(left, vec![foreign], "destroy leaves only what gpuplan does not own");

    assert!(!outputs.contains(SECRET_KEY), "the secret key was printed");
    assert!(!f.all_files_text().contains(SECRET_KEY), "the secret key was written to a file");
    // Run and terminate calls stayed within the documented batch size.
    assert!(fake.calls("TerminateInstances").len() <= 2);
}

#[test]
fn spot_stock_out_falls_back_to_on_demand() {
    let fake = Fake::start();
    fake.sell_out(Z3, true);
    let f = fleet(&fake, &[Z3], 2, "    spot_percent = 100\n    fallback     = \"on_demand\"");
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(
        r.stderr.contains("ap-guangzhou-3 had no spot capacity; 2 on-demand nodes placed in ap-guangzhou-3"),
        "{}",
        r.stderr
    );
    assert_eq!(mix(&fake), (2, 0));
}

#[test]
fn spot_stock_out_with_fallback_fail_explains_and_exits_1() {
    let fake = Fake::start();
    fake.sell_out(Z3, true);
    let f = fleet(&fake, &[Z3], 1, "    spot_percent = 100\n    fallback     = \"fail\"");
    let r = f.run(&["apply", "--auto-approve"]).expect(1);
    assert!(r.stderr.contains("InsufficientOffering") || r.stderr.contains("could not be placed"), "{}", r.stderr);
    assert_eq!(mix(&fake), (0, 0));
}

#[test]
fn throttling_backs_off_and_retries_with_the_same_client_token() {
    let fake = Fake::start();
    fake.throttle("RunInstances", 2);
    let f = fleet(&fake, &[Z3], 1, "    spot_percent = 0");
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(mix(&fake), (1, 0));
    let tokens = fake.calls("RunInstances");
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert!(tokens.iter().all(|t| t == &tokens[0] && !t.is_empty()), "{tokens:?}");
    // Refresh backs off too.
    fake.throttle("DescribeInstances", 1);
    f.run(&["plan", "--detailed-exitcode"]).expect(0);
}

#[test]
fn missing_credentials_fail_with_a_hint() {
    let fake = Fake::start();
    let f = fleet(&fake, &[Z3], 1, "    spot_percent = 0");
    let f = Fleet::new(&std::fs::read_to_string(f.path().join("main.hcl")).expect("spec"), &[]);
    let r = f.run(&["plan"]).expect(1);
    assert!(r.stderr.contains("TENCENTCLOUD_SECRET_ID"), "{}", r.stderr);
}

pub(crate) fn provider(fake: &Fake, key: &str) -> TencentProvider {
    TencentProvider::new(CloudConfig {
        name: "tencentcloud".into(),
        endpoint: Some(Endpoint::parse(&fake.url).expect("endpoint")),
        credentials: Arc::new(CredentialCache::fixed(
            Credentials { id: SECRET_ID.into(), secret: Secret::new(key), token: None },
            "test",
        )),
        image: Some("img-test".into()),
        subnets: Default::default(),
        security_groups: vec![],
        key_name: None,
        cluster_id: Some("cls-gpuplan".into()),
        cny_per_usd: 7.0,
    })
    .expect("provider")
}

fn tags(lineage: &str) -> gpuplan::providers::Tags {
    [(TAG_MANAGED, "true"), (TAG_LINEAGE, lineage), (TAG_ADDRESS, "gpu_pool.big")].into_iter().collect()
}

fn create(count: u32, capacity: Capacity) -> CreateNodes {
    CreateNodes {
        pool: "gpu_pool.big".parse().expect("addr"),
        region: REGION.into(),
        zone: Z3.into(),
        zones: vec![],
        instance_types: vec!["GN7.2XLARGE32".into()],
        capacity,
        count,
        image: None,
        max_spot_price: Some(1.0),
        token: "gp-test-token".into(),
        tags: tags("L1"),
        user_data: None,
        join: None,
        hardware: None,
        reservation: None,
    }
}

#[tokio::test]
async fn batches_of_100_paged_lists_and_only_tagged_terminates() {
    let fake = Fake::start();
    let p = provider(&fake, SECRET_KEY);
    let made = p.create_nodes(&create(250, Capacity::Spot)).await.expect("create");
    assert_eq!((made.nodes.len(), made.errors.len()), (250, 0));
    assert_eq!(fake.calls("RunInstances").len(), 3, "batches of at most 100");
    let again = p.create_nodes(&create(250, Capacity::Spot)).await.expect("create again");
    assert_eq!(again.nodes.len(), 250);
    assert_eq!(fake.instances().len(), 250, "the same token never launches twice");
    assert!(fake.instances().iter().all(|i| i.max_price.as_deref() == Some("7.0000")), "USD bid in CNY");

    fake.add(REGION, Z3, &[(TAG_MANAGED, "true"), (TAG_LINEAGE, "other")]);
    let before = fake.calls("DescribeInstances").len();
    let nodes = p.list_nodes(&ListFilter { region: REGION.into(), lineage: Some("L1".into()) }).await.expect("list");
    assert_eq!(nodes.len(), 250);
    assert!(nodes.iter().all(|n| n.capacity == Capacity::Spot && n.zone == Z3));
    assert_eq!(fake.calls("DescribeInstances").len() - before, 3, "Limit 100, Offset paging");

    let foreign = fake.add(REGION, Z3, &[("team", "x")]);
    let ids: Vec<String> = nodes.iter().map(|n| n.id.clone()).chain([foreign.clone()]).collect();
    let e = p.terminate_nodes(REGION, &ids).await.expect_err("untagged refused");
    assert_eq!(e.class, ErrorClass::Invalid);
    assert_eq!(fake.instances().len(), 252, "nothing was terminated");
    let gone = p.terminate_nodes(REGION, &ids[..250]).await.expect("terminate");
    assert_eq!(gone.len(), 250);
    assert_eq!(fake.calls("TerminateInstances").len(), 3);
    assert_eq!(fake.instances().len(), 2);
}

#[tokio::test]
async fn a_quota_error_after_a_batch_reports_the_nodes_made() {
    let fake = Fake::start();
    fake.lock().quota_after = Some(1);
    let p = provider(&fake, SECRET_KEY);
    let made = p.create_nodes(&create(150, Capacity::OnDemand)).await.expect("partial");
    assert_eq!(made.nodes.len(), 100);
    assert_eq!(made.errors.len(), 1);
    assert_eq!(
        (made.errors[0].class, made.errors[0].code.as_str()),
        (ErrorClass::Quota, "LimitExceeded.InstanceQuota")
    );
    assert!(made.errors[0].message.contains("hint:"), "{}", made.errors[0].message);
}

#[tokio::test]
async fn wrong_key_is_an_auth_error_with_a_hint() {
    let fake = Fake::start();
    let p = provider(&fake, "not-the-key");
    let e = p.list_nodes(&ListFilter { region: REGION.into(), lineage: None }).await.expect_err("bad key");
    assert_eq!((e.class, e.code.as_str()), (ErrorClass::Auth, "AuthFailure.SignatureFailure"));
    assert!(e.message.contains("TENCENTCLOUD_SECRET_ID"), "{}", e.message);
    assert!(!e.message.contains("not-the-key"));
}

#[tokio::test]
async fn jobs_boot_from_user_data_and_end_with_the_instance() {
    use base64::Engine as _;
    let fake = Fake::start();
    let p = provider(&fake, SECRET_KEY);
    let req = LaunchJob {
        job: "job.finetune".parse().expect("addr"),
        pool: "gpu_pool.big".parse().expect("addr"),
        node_id: String::new(),
        region: String::new(),
        image: "ghcr.io/acme/train:1".into(),
        command: vec!["python".into(), "train.py".into()],
        env: Default::default(),
        secrets: Default::default(),
        gpus: 1,
        attempt: 2,
        token: "gp-job-token".into(),
        shape: Some(create(1, Capacity::OnDemand)),
        max_runtime_secs: Some(60),
        keep_node: false,
        kube: None,
        readiness: Default::default(),
    };
    let st = p.launch_job(&req).await.expect("launch");
    let inst = fake.instances().into_iter().find(|i| i.id == st.id).expect("instance");
    assert_eq!(inst.tags.get(TAG_JOB).map(String::as_str), Some("job.finetune"));
    assert_eq!(inst.tags.get(TAG_ATTEMPT).map(String::as_str), Some("2"));
    let script = base64::engine::general_purpose::STANDARD.decode(inst.user_data.expect("user data")).expect("b64");
    assert!(String::from_utf8_lossy(&script).contains("ghcr.io/acme/train:1"));
    // Job nodes are not pool nodes.
    assert!(p.list_nodes(&ListFilter { region: REGION.into(), lineage: None }).await.expect("list").is_empty());
    assert_eq!(p.job_status(REGION, &st.id).await.expect("status").state, JobState::Running);
    // The node is kept up for TAT to read the exit code: one that stopped first is no
    // success; its exit code is awaited (`jobs::refresh` fails the run after a grace).
    fake.set_state(&st.id, "STOPPED");
    assert_eq!(p.job_status(REGION, &st.id).await.expect("status").state, JobState::Stopped);
    fake.set_state(&st.id, "RUNNING");
    assert_eq!(p.cancel_job(REGION, &st.id).await.expect("cancel").state, JobState::Cancelled);
    assert!(fake.instances().is_empty());
}

/// Releasing an ended run's node terminates that instance alone; again, or once the cloud
/// no longer lists it, the release is done (not `JobNotFound`, which fails an orphan's
/// release); a warm node's run (`<node>/<invocation>`) has no node of its own, so nothing
/// is called; a pool node is refused.
#[tokio::test]
async fn releasing_a_job_node_terminates_it_alone_and_a_gone_one_is_released() {
    let fake = Fake::start();
    let p = provider(&fake, SECRET_KEY);
    let pool_node = p.create_nodes(&create(1, Capacity::OnDemand)).await.expect("create").nodes[0].id.clone();
    let mut req = LaunchJob {
        job: "job.done".parse().expect("addr"),
        pool: "gpu_pool.big".parse().expect("addr"),
        node_id: String::new(),
        region: String::new(),
        image: "ghcr.io/acme/train:1".into(),
        command: vec!["true".into()],
        env: Default::default(),
        secrets: Default::default(),
        gpus: 1,
        attempt: 1,
        token: "gp-release-a".into(),
        shape: Some(create(1, Capacity::OnDemand)),
        max_runtime_secs: None,
        keep_node: false,
        kube: None,
        readiness: Default::default(),
    };
    let done = p.launch_job(&req).await.expect("launch").id;
    req.token = "gp-release-b".into();
    let other = p.launch_job(&req).await.expect("launch").id;
    p.release_job_node(REGION, &done).await.expect("release");
    let mut left: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    left.sort();
    let mut want = vec![pool_node.clone(), other.clone()];
    want.sort();
    assert_eq!(left, want, "only the released node went");
    p.release_job_node(REGION, &done).await.expect("a node no longer listed is released");
    assert_eq!(fake.calls("TerminateInstances").len(), 1);
    let before = fake.lock().calls.len();
    p.release_job_node(REGION, &format!("{pool_node}/inv-0123")).await.expect("a warm node's run");
    assert_eq!(fake.lock().calls.len(), before, "no call for a warm node's run");
    let err = p.release_job_node(REGION, &pool_node).await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Invalid, "{err}");
    assert_eq!(fake.instances().len(), 2, "the pool node stays");
}

/// GPU health through TAT: each node whose agent is online runs the capture script, and
/// its output (nvidia-smi XML with a row-remap failure, kernel XID 79 on the same PCI
/// bus) comes back as that node's findings, the XID on its GPU index. A node whose agent
/// is offline, or whose output is no capture, is left out, never reported healthy.
#[tokio::test]
async fn gpu_health_is_read_through_tat() {
    use crate::health_captures::agent_output;
    use gpuplan::model::health::Signal;
    use gpuplan::providers::Provider;
    let fake = Fake::start();
    let p = provider(&fake, SECRET_KEY);
    let ids: Vec<String> = (0..4).map(|_| fake.add(REGION, Z3, &[(TAG_MANAGED, "true")])).collect();
    let kernel = "[ 9.1] NVRM: Xid (PCI:0000:00:1e): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    {
        let mut s = fake.lock();
        let bad = agent_output("nvidia-smi/a10g-row-remap-failure.xml", "", "")
            .replace("--- gpuplan health: end ---", &format!("{kernel}\n--- gpuplan health: end ---"));
        s.health_outputs.insert(ids[0].clone(), bad);
        s.health_outputs.insert(ids[1].clone(), agent_output("nvidia-smi/a10g.xml", "dcgm/health-healthy.json", ""));
        s.agents_offline.insert(ids[2].clone());
        // ids[3] answers nothing gpuplan can read.
    }
    let port = p.health().expect("Tencent Cloud reads GPU health");
    let read = port.read_health(REGION, &ids).await.expect("read");
    assert_eq!(read.iter().map(|h| h.node_id.as_str()).collect::<Vec<_>>(), vec![ids[0].as_str(), ids[1].as_str()]);
    let bad: Vec<_> = read[0].findings.iter().map(|f| (f.signal, f.gpu, f.xid)).collect();
    assert_eq!(
        bad,
        vec![
            (Signal::EccUncorrectable, Some(0), None),
            (Signal::RowRemapFailure, Some(0), None),
            (Signal::XidFatal, Some(0), Some(79)),
        ]
    );
    assert_eq!((read[1].findings.len(), read[1].gpus_seen), (0, Some(1)));
    let sent = fake.lock().invocations.values().filter(|(_, script)| script.contains("nvidia-smi -q -x")).count();
    assert_eq!(sent, 3, "one health read per online node");
    port.cordon(REGION, &ids[0]).await.expect("no call needed on a VM");
}

#[tokio::test]
async fn tke_kubeconfig() {
    let fake = Fake::start();
    let p = provider(&fake, SECRET_KEY);
    let k = p.kubeconfig(REGION, true).await.expect("kubeconfig");
    assert!(k.contains("kind: Config") && k.contains("https://public.cls-gpuplan"), "{k}");
}

/// A raw signed request, for the fake's own checks.
async fn raw(fake: &Fake, action: &str, key: &str, timestamp: u64) -> Value {
    let host = fake.url.trim_start_matches("http://").to_string();
    let body = br#"{"Limit": 1}"#;
    let sig = tc3::sign(
        SECRET_ID,
        key,
        &tc3::Request {
            method: "POST",
            host: &host,
            content_type: "application/json",
            service: "cvm",
            timestamp,
            payload: body,
        },
    );
    let resp = reqwest::Client::new()
        .post(format!("{}/", fake.url))
        .header("Content-Type", "application/json")
        .header("X-TC-Action", action)
        .header("X-TC-Timestamp", timestamp.to_string())
        .header("X-TC-Version", "2017-03-12")
        .header("X-TC-Region", REGION)
        .header("Authorization", sig.authorization)
        .body(body.to_vec())
        .send()
        .await
        .expect("send");
    serde_json::from_str(&resp.text().await.expect("body")).expect("json")
}

#[tokio::test]
async fn the_fake_answers_like_tencent_cloud() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = Fake::start();
    let now = crate::chinacloud::server::now();
    let code = |v: &Value| v["Response"]["Error"]["Code"].as_str().unwrap_or("").to_string();
    let good = raw(&fake, "DescribeInstances", SECRET_KEY, now).await;
    assert_eq!(code(&good), "", "{good}");
    assert_eq!(good["Response"]["TotalCount"], 0);
    assert_eq!(code(&raw(&fake, "DescribeInstances", "wrong", now).await), "AuthFailure.SignatureFailure");
    assert_eq!(code(&raw(&fake, "DescribeInstances", SECRET_KEY, now - 600).await), "AuthFailure.SignatureExpire");
    assert_eq!(code(&raw(&fake, "DescribeNothing", SECRET_KEY, now).await), "InvalidAction");
    assert!(raw(&fake, "DescribeNothing", SECRET_KEY, now).await["Response"]["RequestId"].is_string());
}

/// A node stopped outside gpuplan (STOPPED, or SHUTDOWN: stopped, awaiting destruction) is
/// not gone: a stopped pay-as-you-go instance keeps charging by default. Drift says so and
/// apply terminates it and launches a replacement; before, it was read as terminated and
/// forgotten while it went on billing.
#[test]
fn a_stopped_node_is_reported_and_terminated_not_forgotten() {
    let fake = Fake::start();
    let f = fleet(&fake, &[Z3], 2, "    on_demand_base = 2");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let ids: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(ids.len(), 2);
    fake.set_state(&ids[0], "STOPPED");
    fake.set_state(&ids[1], "SHUTDOWN");
    let r = f.run(&["drift", "--json"]).expect(0);
    let doc: Value = serde_json::from_str(&r.stdout).expect("drift json");
    let kinds: Vec<&str> = doc["drift"].as_array().unwrap().iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["stopped", "stopped"], "{}", r.stdout);
    let plan = f.run(&["plan", "--detailed-exitcode"]).expect(2);
    assert!(plan.stdout.contains("was stopped outside gpuplan"), "{}", plan.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let now: Vec<(String, String)> = fake.instances().into_iter().map(|i| (i.id, i.state)).collect();
    assert!(now.iter().all(|(id, _)| !ids.contains(id)), "the stopped nodes were terminated: {now:?}");
    assert_eq!(now.len(), 2, "and replaced: {now:?}");
    f.run(&["plan", "--detailed-exitcode"]).expect(0);
}

/// `disk {}` reaches RunInstances as `SystemDisk` and `DataDisks` (docs/design/big-runs.md),
/// the data disk's type defaulting to the root's, and the plan prices them per GB-month.
#[test]
fn disks_are_launched_as_system_and_data_disks() {
    let fake = Fake::start();
    let f = fleet(&fake, &[Z3], 1, "    spot_percent = 0");
    let main = f.path().join("main.hcl");
    let spec = std::fs::read_to_string(&main).unwrap().replace(
        "  mix {",
        "  disk {\n    size_gb = 300\n    data    = [{ size_gb = 1000 }, { size_gb = 500, type = \"CLOUD_PREMIUM\" }]\n  }\n  mix {",
    );
    std::fs::write(&main, spec).unwrap();
    let plan = f.run(&["plan"]).expect(0);
    assert!(
        plan.stdout.contains("disks root 300 GB CLOUD_BSSD, data 1000 GB CLOUD_BSSD, data 500 GB CLOUD_PREMIUM"),
        "{}",
        plan.stdout
    );
    f.run(&["apply", "--auto-approve"]).expect(0);
    let disks: Vec<Vec<(String, u64)>> = fake.lock().disks.values().cloned().collect();
    let want =
        vec![("CLOUD_BSSD".to_string(), 300), ("CLOUD_BSSD".to_string(), 1000), ("CLOUD_PREMIUM".to_string(), 500)];
    assert_eq!(disks, vec![want]);
}

/// A plan on Tencent Cloud reads GPU health through TAT end to end: a node whose agent
/// reports XID 79 in its kernel log is shown with its evidence and replaced, new node
/// first; the other node, whose agent is offline, is left out and stays.
#[test]
fn a_plan_reads_gpu_health_through_tat_and_replaces_a_bad_node() {
    use crate::health_captures::agent_output;
    let fake = Fake::start();
    let f = fleet(&fake, &[Z3], 2, "    spot_percent = 0");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let ids: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(ids.len(), 2);
    let (bad, offline) = (ids[0].clone(), ids[1].clone());
    {
        let mut s = fake.lock();
        s.health_outputs.insert(bad.clone(), agent_output("nvidia-smi/a10g.xml", "", "kernel/xid-79.log"));
        s.agents_offline.insert(offline.clone());
    }
    let r = f.run(&["plan", "--json"]).expect(0);
    let plan: Value = serde_json::from_str(&r.stdout).expect("JSON");
    let health = plan["health"].as_array().unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(health.len(), 1, "{plan:#}");
    assert_eq!((health[0]["node"].as_str(), health[0]["xid"].as_u64()), (Some(bad.as_str()), Some(79)));
    assert_eq!(health[0]["action"], "replace");
    let text = f.run(&["plan"]).expect(0).stdout;
    assert!(text.contains(&format!("-/+ {bad} replace: XID 79 (")), "{text}");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let now: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!now.contains(&bad) && now.contains(&offline), "{now:?}");
}
