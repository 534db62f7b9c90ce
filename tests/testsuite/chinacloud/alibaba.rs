//! Alibaba Cloud (ECS, ACK) against the fake endpoint: through the CLI, through the
//! provider API, and raw requests for the fake's own checks.

use std::collections::BTreeMap;

use gpuplan::providers::alicloud::AlibabaProvider;
use std::sync::Arc;

use gpuplan::providers::http::{CloudConfig, CredentialCache, Credentials, Endpoint, Secret};
use gpuplan::providers::signing::{acs3, iso8601, sha256_hex};
use gpuplan::providers::{
    Capacity, CreateNodes, ErrorClass, JobPort, JobState, LaunchJob, ListFilter, NodePort, TAG_ADDRESS, TAG_ATTEMPT,
    TAG_JOB, TAG_LINEAGE, TAG_MANAGED, Tags,
};
use serde_json::Value;

use crate::chinacloud::alibaba_fake::{ACCESS_KEY_ID, ACCESS_KEY_SECRET, Fake};
use crate::chinacloud::{Fleet, pool};

const REGION: &str = "cn-hangzhou";
const ZH: &str = "cn-hangzhou-h";
const ZI: &str = "cn-hangzhou-i";

pub(crate) fn fleet(fake: &Fake, zones: &[&str], desired: u32, mix: &str) -> Fleet {
    // The endpoint comes from the environment here (the spec's `endpoint` is the other way).
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"{REGION}\"\n  image  = \"m-gpuplan\"\n}}\n{}",
        pool("alicloud", zones, "T4", "ecs.gn6i-c4g1.xlarge", desired, mix)
    );
    Fleet::new(
        &spec,
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    )
}

fn mix(fake: &Fake) -> (usize, usize) {
    let of_pool: Vec<_> = fake
        .instances()
        .into_iter()
        .filter(|i| i.tags.get(TAG_ADDRESS).map(String::as_str) == Some("gpu_pool.train"))
        .collect();
    let spot = of_pool.iter().filter(|i| i.spot_strategy != "NoSpot").count();
    (of_pool.len() - spot, spot)
}

#[test]
fn apply_plan_drift_repair_and_destroy_a_mixed_pool() {
    let fake = Fake::start();
    let foreign = fake.add(REGION, ZH, &[("team", "someone-else")]);
    let f = fleet(&fake, &[ZH, ZI], 5, "    on_demand_base = 1\n    spot_percent   = 50");
    let mut outputs = String::new();
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));
    assert_eq!(mix(&fake), (3, 2));
    assert!(
        fake.instances().iter().filter(|i| i.spot_strategy != "NoSpot").all(|i| i.spot_strategy == "SpotAsPriceGo")
    );
    for i in fake.instances().iter().filter(|i| i.id != foreign) {
        assert_eq!(i.tags.get(TAG_MANAGED).map(String::as_str), Some("true"), "{i:?}");
        assert!(i.tags.contains_key(TAG_LINEAGE), "{i:?}");
    }
    let r = f.run(&["plan", "--detailed-exitcode", "--out", "saved.plan"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));

    let victim = fake.instances().into_iter().find(|i| i.id != foreign).expect("a node").id;
    fake.remove(&victim);
    let r = f.run(&["drift", "--detailed-exitcode"]).expect(2);
    assert!(r.stdout.contains(&victim), "{}", r.stdout);
    outputs.push_str(&(r.stdout + &r.stderr));
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));
    assert_eq!(mix(&fake), (3, 2));
    f.run(&["plan", "--detailed-exitcode"]).expect(0);

    let r = f.run(&["destroy", "--auto-approve"]).expect(0);
    outputs.push_str(&(r.stdout + &r.stderr));
    let left: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(left, vec![foreign], "destroy leaves only what gpuplan does not own");
    assert!(!outputs.contains(ACCESS_KEY_SECRET), "the secret was printed");
    assert!(!f.all_files_text().contains(ACCESS_KEY_SECRET), "the secret was written to a file");
}

#[test]
fn stock_out_falls_back_to_the_other_zone_then_on_demand() {
    let fake = Fake::start();
    // One spot node left in h, none in i: one lands in h, the rest go on-demand.
    fake.set_stock(ZH, true, 1);
    fake.set_stock(ZI, true, 0);
    let f = fleet(&fake, &[ZH, ZI], 3, "    spot_percent = 100\n    fallback     = \"on_demand\"");
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(r.stderr.contains("had no spot capacity; 1 on-demand node placed in"), "{}", r.stderr);
    assert_eq!(mix(&fake), (2, 1));
}

#[test]
fn throttling_backs_off_and_retries_with_the_same_client_token() {
    let fake = Fake::start();
    fake.throttle("RunInstances", 2);
    let f = fleet(&fake, &[ZH], 1, "    spot_percent = 0");
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(mix(&fake), (1, 0));
    let tokens = fake.calls("RunInstances");
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert!(tokens.iter().all(|t| t == &tokens[0] && !t.is_empty()), "{tokens:?}");
}

pub(crate) fn provider(fake: &Fake, secret: &str) -> AlibabaProvider {
    AlibabaProvider::new(CloudConfig {
        name: "alicloud".into(),
        endpoint: Some(Endpoint::parse(&fake.url).expect("endpoint")),
        credentials: Arc::new(CredentialCache::fixed(
            Credentials { id: ACCESS_KEY_ID.into(), secret: Secret::new(secret), token: None },
            "test",
        )),
        image: Some("m-test".into()),
        subnets: [(ZH.to_string(), "vsw-h".to_string())].into(),
        security_groups: vec!["sg-1".into()],
        key_name: None,
        cluster_id: Some("c-gpuplan".into()),
        cny_per_usd: 7.0,
    })
    .expect("provider")
}

fn create(count: u32, capacity: Capacity, max_spot_price: Option<f64>) -> CreateNodes {
    let tags: Tags =
        [(TAG_MANAGED, "true"), (TAG_LINEAGE, "L1"), (TAG_ADDRESS, "gpu_pool.big"), ("team", "ml platform")]
            .into_iter()
            .collect();
    CreateNodes {
        pool: "gpu_pool.big".parse().expect("addr"),
        region: REGION.into(),
        zone: ZH.into(),
        zones: vec![],
        instance_types: vec!["ecs.gn6i-c4g1.xlarge".into(), "ecs.gn6i-c8g1.2xlarge".into()],
        capacity,
        count,
        image: None,
        max_spot_price,
        token: "gp-ali-token".into(),
        tags,
        user_data: None,
        join: None,
        hardware: None,
        reservation: None,
    }
}

#[tokio::test]
async fn batches_paging_price_limits_and_only_tagged_deletes() {
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let made = p.create_nodes(&create(230, Capacity::Spot, Some(1.0))).await.expect("create");
    assert_eq!((made.nodes.len(), made.errors.len()), (230, 0));
    assert_eq!(fake.calls("RunInstances").len(), 3, "Amount at most 100");
    assert!(fake.instances().iter().all(|i| i.spot_strategy == "SpotWithPriceLimit"
        && i.spot_price_limit.as_deref() == Some("7.000")
        && i.tags.get("team").map(String::as_str) == Some("ml platform")));
    p.create_nodes(&create(230, Capacity::Spot, Some(1.0))).await.expect("again");
    assert_eq!(fake.instances().len(), 230, "the same token never launches twice");

    let before = fake.calls("DescribeInstances").len();
    let nodes = p.list_nodes(&ListFilter { region: REGION.into(), lineage: Some("L1".into()) }).await.expect("list");
    assert_eq!(nodes.len(), 230);
    assert_eq!(fake.calls("DescribeInstances").len() - before, 3, "MaxResults 100 + NextToken");

    let foreign = fake.add(REGION, ZH, &[]);
    let mut ids: Vec<String> = nodes.iter().map(|n| n.id.clone()).collect();
    ids.push(foreign);
    let e = p.terminate_nodes(REGION, &ids).await.expect_err("untagged refused");
    assert_eq!(e.class, ErrorClass::Invalid);
    assert_eq!(fake.instances().len(), 231);
    p.terminate_nodes(REGION, &ids[..230]).await.expect("delete");
    assert_eq!(fake.calls("DeleteInstances").len(), 3);
    assert_eq!(fake.instances().len(), 1);
}

#[tokio::test]
async fn a_short_stock_delivers_part_then_tries_the_next_type() {
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    fake.set_stock(ZH, false, 2);
    let made = p.create_nodes(&create(5, Capacity::OnDemand, None)).await.expect("create");
    assert_eq!(made.nodes.len(), 2);
    assert_eq!(made.errors.len(), 1);
    assert_eq!(made.errors[0].class, ErrorClass::OutOfCapacity);
}

#[tokio::test]
async fn price_limit_below_market_is_invalid_with_a_hint() {
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let e = p.create_nodes(&create(1, Capacity::Spot, Some(0.01))).await.expect_err("too low");
    assert_eq!((e.class, e.code.as_str()), (ErrorClass::Invalid, "InvalidSpotPriceLimit.LowerThanPublicPrice"));
    assert!(e.message.contains("max_spot_price"), "{}", e.message);
}

#[tokio::test]
async fn wrong_secret_is_an_auth_error() {
    let fake = Fake::start();
    let p = provider(&fake, "nope");
    let e = p.list_nodes(&ListFilter { region: REGION.into(), lineage: None }).await.expect_err("bad secret");
    assert_eq!((e.class, e.code.as_str()), (ErrorClass::Auth, "SignatureDoesNotMatch"));
    assert!(e.message.contains("ALIBABA_CLOUD_ACCESS_KEY_ID"), "{}", e.message);
}

/// A one-GPU job `job.eval` on its own node of `capacity`, launched under `token`.
fn eval_job(token: &str, capacity: Capacity) -> LaunchJob {
    LaunchJob {
        job: "job.eval".parse().expect("addr"),
        pool: "gpu_pool.big".parse().expect("addr"),
        node_id: String::new(),
        region: String::new(),
        image: "ghcr.io/acme/eval:1".into(),
        command: vec!["eval".into()],
        env: Default::default(),
        secrets: Default::default(),
        gpus: 1,
        attempt: 1,
        token: token.into(),
        shape: Some(create(1, capacity, None)),
        max_runtime_secs: None,
        keep_node: false,
        kube: None,
        readiness: Default::default(),
    }
}

#[tokio::test]
async fn jobs_read_their_exit_code_from_the_console() {
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let req = eval_job("gp-job", Capacity::Spot);
    let st = p.launch_job(&req).await.expect("launch");
    let inst = fake.instances().into_iter().find(|i| i.id == st.id).expect("instance");
    assert_eq!(inst.tags.get(TAG_JOB).map(String::as_str), Some("job.eval"));
    assert!(inst.user_data.is_some());
    assert_eq!(p.job_status(REGION, &st.id).await.expect("status").state, JobState::Running);
    fake.stop(&st.id, "boot\ngpuplan-job-exit=3\n");
    let s = p.job_status(REGION, &st.id).await.expect("status");
    assert_eq!((s.state, s.message.as_deref()), (JobState::Failed, Some("exited 3 (console output)")));
    fake.stop(&st.id, "gpuplan-job-exit=0\n");
    assert_eq!(p.job_status(REGION, &st.id).await.expect("status").state, JobState::Succeeded);
}

/// A job node that fails its readiness check (the job script's `nvidia-smi` lists fewer
/// GPUs than the job needs): its console line and exit code come back as a failed run
/// that names the node, not the job. The same exit code without the line is the job's.
#[tokio::test]
async fn a_node_that_fails_its_readiness_check_fails_the_run_as_the_nodes_fault() {
    use base64::Engine;
    use gpuplan::providers::userdata::{NODE_UNREADY, readiness};
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let st = p.launch_job(&eval_job("gp-job-unready", Capacity::OnDemand)).await.expect("launch");
    let inst = fake.instances().into_iter().find(|i| i.id == st.id).expect("instance");
    let script = base64::engine::general_purpose::STANDARD.decode(inst.user_data.expect("user data")).unwrap();
    let script = String::from_utf8(script).unwrap();
    let (check, job) = (script.find("nvidia-smi -L").expect("the check"), script.find("docker run").unwrap());
    assert!(check < job, "the readiness check runs before the job:\n{script}");
    let why = "nvidia-smi lists 0 of the 1 GPUs the job needs";
    fake.stop(&st.id, &format!("boot\ngpuplan-node-unready={why}\ngpuplan-job-exit={NODE_UNREADY}\n"));
    let s = p.job_status(REGION, &st.id).await.expect("status");
    let msg = s.message.clone().unwrap_or_default();
    assert_eq!(
        (s.state, msg.as_str()),
        (JobState::Failed, format!("{}: {why}; the job did not run", readiness::UNREADY).as_str())
    );
    assert!(readiness::is_node_failure(&msg));
    fake.stop(&st.id, &format!("gpuplan-job-exit={NODE_UNREADY}\n"));
    let s = p.job_status(REGION, &st.id).await.expect("status");
    assert_eq!(s.message.as_deref(), Some("exited 123 (console output)"));
    assert!(!readiness::is_node_failure(s.message.as_deref().unwrap()));
}

/// GPU health through Cloud Assistant: each node whose agent runs gets the capture
/// script; DCGM's report and a kernel XID come back as that node's findings, a healthy
/// capture as none. A node whose agent is not running is left out, never healthy.
#[tokio::test]
async fn gpu_health_is_read_through_cloud_assistant() {
    use crate::health_captures::agent_output;
    use gpuplan::model::health::{Signal, Source};
    use gpuplan::providers::Provider;
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let ids: Vec<String> = (0..3).map(|_| fake.add(REGION, ZH, &[(TAG_MANAGED, "true")])).collect();
    {
        let mut s = fake.lock();
        let bad = agent_output("nvidia-smi/a10g.xml", "dcgm/health-failure.json", "kernel/dmesg-xid-119.log");
        s.results.insert(ids[0].clone(), ("Success".into(), 0, bad));
        s.results.insert(ids[1].clone(), ("Success".into(), 0, agent_output("nvidia-smi/tesla-p100.xml", "", "")));
        s.agents_offline.insert(ids[2].clone());
    }
    let port = p.health().expect("Alibaba Cloud reads GPU health");
    let read = port.read_health(REGION, &ids).await.expect("read");
    assert_eq!(read.iter().map(|h| h.node_id.as_str()).collect::<Vec<_>>(), vec![ids[0].as_str(), ids[1].as_str()]);
    let bad: Vec<_> = read[0].findings.iter().map(|f| (f.signal, f.gpu, f.xid, f.source)).collect();
    assert_eq!(
        bad,
        vec![
            (Signal::EccUncorrectable, Some(0), None, Source::Dcgm),
            (Signal::NvlinkDown, Some(3), None, Source::Dcgm),
            (Signal::XidFatal, None, Some(119), Source::KernelLog),
        ]
    );
    assert_eq!((read[1].findings.len(), read[1].gpus_seen), (0, Some(1)));
    let scripts: Vec<String> = fake.lock().invocations.values().map(|(_, script, _)| script.clone()).collect();
    assert_eq!(scripts.iter().filter(|s| s.contains("dcgmi health -c -j")).count(), 2, "one read per running agent");
}

/// ECS posts the console late: a stopped job node whose console shows no exit line yet is
/// stopped with its exit code awaited (read again later; `jobs::refresh` fails it after a
/// grace), never running, and never a failure at once.
#[tokio::test]
async fn a_stopped_job_node_without_an_exit_code_yet_is_awaited_not_failed() {
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let req = eval_job("gp-job-late", Capacity::OnDemand);
    let st = p.launch_job(&req).await.expect("launch");
    fake.stop(&st.id, "");
    let s = p.job_status(REGION, &st.id).await.expect("status");
    assert_eq!(s.state, JobState::Stopped, "{s:?}");
    assert!(s.message.as_deref().is_some_and(|m| m.contains("no exit line on its console")), "{s:?}");
    fake.stop(&st.id, "boot\n");
    assert_eq!(p.job_status(REGION, &st.id).await.expect("status").state, JobState::Stopped);
    fake.stop(&st.id, "boot\ngpuplan-job-exit=0\n");
    assert_eq!(p.job_status(REGION, &st.id).await.expect("status").state, JobState::Succeeded);
}

#[tokio::test]
async fn ack_kubeconfig() {
    let fake = Fake::start();
    let p = provider(&fake, ACCESS_KEY_SECRET);
    let k = p.kubeconfig(REGION, true).await.expect("kubeconfig");
    assert!(k.contains("kind: Config") && k.contains("192.168.0.10"), "{k}");
}

async fn raw(fake: &Fake, action: &str, secret: &str, date: &str, nonce: &str) -> (u16, Value) {
    let host = fake.url.trim_start_matches("http://").to_string();
    let empty = sha256_hex(b"");
    let headers: BTreeMap<String, String> = [
        ("host", host.as_str()),
        ("x-acs-action", action),
        ("x-acs-version", "2014-05-26"),
        ("x-acs-date", date),
        ("x-acs-signature-nonce", nonce),
        ("x-acs-content-sha256", empty.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let query = vec![("RegionId".to_string(), REGION.to_string())];
    let sig = acs3::sign(
        ACCESS_KEY_ID,
        secret,
        &acs3::Request { method: "POST", path: "/", query: &query, headers: &headers, payload_hash: &empty },
    );
    let mut req = reqwest::Client::new().post(format!("{}/?{}", fake.url, acs3::canonical_query(&query)));
    for (k, v) in headers.iter().filter(|(k, _)| k.as_str() != "host") {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = req.header("Authorization", sig.authorization).send().await.expect("send");
    let status = resp.status().as_u16();
    (status, serde_json::from_str(&resp.text().await.expect("body")).expect("json"))
}

#[tokio::test]
async fn the_fake_answers_like_alibaba_cloud() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = Fake::start();
    let now = iso8601(crate::chinacloud::server::now());
    let (s, v) = raw(&fake, "DescribeInstances", ACCESS_KEY_SECRET, &now, "n1").await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = raw(&fake, "DescribeInstances", ACCESS_KEY_SECRET, &now, "n1").await;
    assert_eq!((s, v["Code"].as_str()), (400, Some("SignatureNonceUsed")));
    let (s, v) = raw(&fake, "DescribeInstances", "wrong", &now, "n2").await;
    assert_eq!((s, v["Code"].as_str()), (400, Some("SignatureDoesNotMatch")));
    let old = iso8601(crate::chinacloud::server::now() - 3600);
    let (s, v) = raw(&fake, "DescribeInstances", ACCESS_KEY_SECRET, &old, "n3").await;
    assert_eq!((s, v["Code"].as_str()), (400, Some("InvalidTimeStamp.Expired")));
    let (s, v) = raw(&fake, "DescribeNothing", ACCESS_KEY_SECRET, &now, "n4").await;
    assert_eq!((s, v["Code"].as_str()), (404, Some("InvalidAction.NotFound")));
    assert!(v["RequestId"].is_string() && v["Recommend"].is_string());
}

/// A job whose node stopped with a non-zero exit code (read from the console) failed: it
/// is retried as attempt 2 on a new node, and the failed one's node is deleted.
#[test]
fn a_failed_job_is_retried_on_a_new_node() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"{REGION}\"\n  image  = \"m-gpuplan\"\n}}\n{}\n{}",
        pool("alicloud", &[ZH], "T4", "ecs.gn6i-c4g1.xlarge", 0, "    spot_percent = 0"),
        "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 1\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n"
    );
    let f = Fleet::new(
        &spec,
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    );
    f.run(&["apply", "--auto-approve"]).expect(0);
    let first: Vec<_> = fake.instances().into_iter().filter(|i| i.tags.contains_key(TAG_JOB)).collect();
    assert_eq!(first.len(), 1);
    fake.stop(&first[0].id, "boot\ntraining...\ngpuplan-job-exit=3\n");
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    let now: Vec<_> = fake.instances().into_iter().filter(|i| i.tags.contains_key(TAG_JOB)).collect();
    assert_eq!(now.len(), 1, "the failed node is deleted, a new one runs: {:?}\n{}", now, r.stderr);
    assert_ne!(now[0].id, first[0].id);
    assert_eq!(now[0].tags.get(TAG_ATTEMPT).map(String::as_str), Some("2"));
}

/// A job node whose user data never ran does not bill until `max_runtime` + 15 minutes:
/// past the boot deadline (15 minutes after its launch), Cloud Assistant answers that the
/// node has no job log, so the run fails ("never started", as on Tencent) and the next
/// apply deletes its node. Before the deadline, with the agent down, or with the log
/// there, the run stays running.
#[test]
fn alibaba_a_job_whose_user_data_never_ran_fails_past_the_boot_deadline() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"{REGION}\"\n  image  = \"m-gpuplan\"\n}}\n{}\n{}",
        pool("alicloud", &[ZH], "T4", "ecs.gn6i-c4g1.xlarge", 0, "    spot_percent = 0"),
        "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"lost\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n\njob \"busy\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n"
    );
    let f = Fleet::new(
        &spec,
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    );
    f.run(&["apply", "--auto-approve"]).expect(0);
    let node = |job: &str| {
        fake.instances().into_iter().find(|i| i.tags.get(TAG_JOB).map(String::as_str) == Some(job)).expect("a node").id
    };
    let (lost, busy) = (node("job.lost"), node("job.busy"));
    let state = |job: &str| {
        let r = f.run(&["jobs", "status", job, "--json"]).expect(0);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        (v["jobs"][0]["state"].as_str().unwrap().to_string(), v["jobs"][0]["runs"][0]["message"].clone())
    };
    fake.age(&lost, 10 * 60);
    assert_eq!(state("lost").0, "running", "10 minutes after launch it may still boot");
    assert!(fake.calls("RunCommand").is_empty(), "no boot check before the deadline");

    fake.age(&lost, 16 * 60);
    fake.age(&busy, 16 * 60);
    // The agent is down: nothing is known, the run keeps its max_runtime deadline.
    fake.lock().agents_offline.insert(lost.clone());
    let (s, msg) = state("lost");
    assert_eq!(s, "running", "{msg}");
    fake.lock().agents_offline.clear();
    // The job's script made its log: it started.
    fake.lock().job_logs.insert(busy.clone());
    assert_eq!(state("busy").0, "running");
    // The agent answers and there is no log: it never started.
    let (s, msg) = state("lost");
    assert_eq!(s, "failed", "{msg}");
    assert!(
        msg.as_str().is_some_and(|m| m.contains("never started") && m.contains("Cloud Assistant answered")),
        "{msg}"
    );
    assert!(!fake.calls("RunCommand").is_empty());

    // The next apply deletes the failed run's node; the other one keeps running.
    f.run(&["apply", "--auto-approve"]).expect(0);
    let left: Vec<String> =
        fake.instances().into_iter().filter(|i| i.tags.contains_key(TAG_JOB)).map(|i| i.id).collect();
    assert_eq!(left, vec![busy], "{left:?}");
}

/// A `Stopped` ECS instance is not released: its disks bill, and so does the instance
/// unless it was stopped in StopCharging mode. Drift says so, apply releases and replaces it.
#[test]
fn a_stopped_node_is_reported_and_released_not_forgotten() {
    let fake = Fake::start();
    let f = fleet(&fake, &[ZH], 1, "    on_demand_base = 1");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let id = fake.instances()[0].id.clone();
    fake.stop(&id, "");
    let r = f.run(&["drift", "--detailed-exitcode"]).expect(2);
    assert!(r.stdout.contains(&id) && r.stdout.contains("stopped outside gpuplan"), "{}", r.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let now: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(now.len(), 1);
    assert_ne!(now[0], id, "the stopped node was released and replaced");
    f.run(&["plan", "--detailed-exitcode"]).expect(0);
}

/// Warm nodes take jobs on Alibaba Cloud: on a pool with two idle warm nodes, a
/// one-replica job runs on one of them through Cloud Assistant `RunCommand` (no
/// RunInstances), its status, exit code and output come back from
/// `DescribeInvocationResults`, and the node stays in the pool when the job ends. A node
/// whose agent is not running is not warm: the plan says so.
#[test]
fn alibaba_warm_nodes_take_jobs_through_cloud_assistant_and_stay_in_their_pool() {
    let fake = Fake::start();
    let f = fleet(&fake, &[ZH], 2, "    spot_percent = 0");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let warm: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(warm.len(), 2);
    let spec = std::fs::read_to_string(f.path().join("main.hcl")).unwrap()
        + "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    std::fs::write(f.path().join("main.hcl"), spec).unwrap();

    fake.lock().agents_offline.extend(warm.iter().cloned());
    let r = f.run(&["plan", "--json"]).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let j = &plan["jobs"][0];
    assert_eq!(j["launches"][0]["node_shape"], true, "{j:#}");
    let skipped = j["warm_skipped"][0].as_str().unwrap_or("");
    assert!(skipped.ends_with(": Cloud Assistant agent not running"), "{j:#}");

    fake.lock().agents_offline.clear();
    let r = f.run(&["plan", "--json"]).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let node = plan["jobs"][0]["launches"][0]["warm_node"].as_str().expect("a warm node").to_string();
    assert!(warm.contains(&node));
    let runs_before = fake.calls("RunInstances").len();
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(fake.calls("RunInstances").len(), runs_before, "no instance launched for the job");
    let invocations = fake.lock().invocations.clone();
    // The job's script, not a plan's GPU health read (a command of its own).
    let (on, script, _) =
        invocations.values().find(|(_, s, _)| s.contains("docker run")).expect("the job script via Cloud Assistant");
    assert_eq!(on, &node);
    assert!(script.contains("docker run") && script.contains("exit \"$code\""));

    let state = || {
        let r = f.run(&["jobs", "status", "once", "--json"]).expect(0);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        (v["jobs"][0]["state"].as_str().unwrap().to_string(), v["jobs"][0]["runs"][0]["message"].clone())
    };
    fake.lock().results.insert(
        node.clone(),
        (
            "Failed".into(),
            125,
            "gpuplan-job-error=driver install failed: no dnf or yum on X\ngpuplan-job-exit=125\n".into(),
        ),
    );
    let (s, msg) = state();
    assert_eq!(s, "failed");
    assert_eq!(msg, "the node could not run the job: driver install failed: no dnf or yum on X");
    let r = f.run(&["jobs", "logs", "once"]).expect(0);
    assert!(r.stdout.contains("[replica 0] gpuplan-job-error=driver install failed"), "{}", r.stdout);

    // Recorded by the next apply; the node stays in its pool, nothing left to do.
    f.run(&["apply", "--auto-approve"]).expect(0);
    let ids: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&node));
    f.run(&["plan", "--detailed-exitcode"]).expect(0);
}

/// `disk {}` reaches RunInstances as `SystemDisk.*` and `DataDisk.N.*`
/// (docs/design/big-runs.md), the data disk's category defaulting to the root's.
#[test]
fn disks_are_launched_as_system_and_data_disks() {
    let fake = Fake::start();
    let f = fleet(&fake, &[ZH], 1, "    spot_percent = 0");
    let main = f.path().join("main.hcl");
    let spec = std::fs::read_to_string(&main).unwrap().replace(
        "  mix {",
        "  disk {\n    size_gb = 250\n    type    = \"cloud_auto\"\n    data    = [{ size_gb = 800 }]\n  }\n  mix {",
    );
    std::fs::write(&main, spec).unwrap();
    f.run(&["apply", "--auto-approve"]).expect(0);
    let disks: Vec<Vec<(String, u64)>> = fake.lock().disks.values().cloned().collect();
    assert_eq!(disks, vec![vec![("cloud_auto".to_string(), 250), ("cloud_auto".to_string(), 800)]]);
}

/// A plan on Alibaba Cloud reads GPU health through Cloud Assistant end to end: a node
/// whose DCGM reports a failure and whose kernel log has XID 119 is shown with its
/// evidence and replaced, new node first; the node whose agent is offline stays.
#[test]
fn a_plan_reads_gpu_health_through_cloud_assistant_and_replaces_a_bad_node() {
    use crate::health_captures::agent_output;
    let fake = Fake::start();
    let f = fleet(&fake, &[ZH], 2, "    spot_percent = 0");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let ids: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(ids.len(), 2);
    let (bad, offline) = (ids[0].clone(), ids[1].clone());
    {
        let mut s = fake.lock();
        let capture = agent_output("nvidia-smi/a10g.xml", "dcgm/health-failure.json", "kernel/dmesg-xid-119.log");
        s.results.insert(bad.clone(), ("Success".into(), 0, capture));
        s.agents_offline.insert(offline.clone());
    }
    let r = f.run(&["plan", "--json"]).expect(0);
    let plan: Value = serde_json::from_str(&r.stdout).expect("JSON");
    let health = plan["health"].as_array().unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(health.len(), 1, "{plan:#}");
    assert_eq!((health[0]["node"].as_str(), health[0]["action"].as_str()), (Some(bad.as_str()), Some("replace")));
    f.run(&["apply", "--auto-approve"]).expect(0);
    let now: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!now.contains(&bad) && now.contains(&offline), "{now:?}");
}
