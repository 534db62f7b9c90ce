//! GPU health end to end on AWS (docs/design/gpu-health.md), through the binary against
//! moto behind a scripted Systems Manager front (moto answers `DescribeInstanceInformation`
//! 500 and every command with empty output): a plan on a fleet whose agents are offline or
//! unreachable is unchanged (the read leaves the nodes out, asks once, and says why); a
//! node whose agent reports XID 79 is shown with its evidence and replaced; and a job on a
//! `readiness = "dcgm"` pool boots with DCGM's check in its user data.
//! Needs moto (`scripts/test` exports `GPUPLAN_TEST_MOTO_ENDPOINT`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use base64::Engine;

use crate::aws::cli::{Run, lineage, pool_spec, run};
use crate::aws::fake_ec2::{FakeEc2, Reply, forward};
use crate::health_captures::agent_output;

const REGION: &str = "eu-west-1";

fn endpoint() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`"),
    }
}

/// What the front answers about the SSM agents.
#[derive(Clone, Copy, PartialEq)]
enum Agents {
    /// Every agent `ConnectionLost`.
    Offline,
    /// `DescribeInstanceInformation` fails with 500, as moto's does.
    Unreachable,
    /// Every agent `Online`; `GetCommandInvocation` of a node in the outputs answers them.
    Online,
}

struct Front {
    ec2: FakeEc2,
    agents: Arc<Mutex<Agents>>,
    outputs: Arc<Mutex<BTreeMap<String, String>>>,
}

fn front() -> Front {
    let host = endpoint().trim_start_matches("http://").trim_end_matches('/').to_string();
    let agents = Arc::new(Mutex::new(Agents::Offline));
    let outputs: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let (a, o) = (agents.clone(), outputs.clone());
    let ec2 = FakeEc2::start(move |req, _| {
        let target = req.headers.get("x-amz-target").map(String::as_str).unwrap_or("");
        let asked: serde_json::Value = serde_json::from_str(&req.body).unwrap_or_default();
        let mode = *a.lock().unwrap();
        match target {
            "AmazonSSM.DescribeInstanceInformation" if mode == Agents::Unreachable => {
                Reply { status: 500, body: "<html>Internal Server Error</html>".into() }
            }
            "AmazonSSM.DescribeInstanceInformation" => {
                let ping = if mode == Agents::Online { "Online" } else { "ConnectionLost" };
                let ids = asked["Filters"][0]["Values"].as_array().cloned().unwrap_or_default();
                let list: Vec<serde_json::Value> =
                    ids.iter().map(|id| serde_json::json!({"InstanceId": id, "PingStatus": ping})).collect();
                Reply { status: 200, body: serde_json::json!({"InstanceInformationList": list}).to_string() }
            }
            "AmazonSSM.GetCommandInvocation" => {
                let out = asked["InstanceId"].as_str().and_then(|id| o.lock().unwrap().get(id).cloned());
                match out {
                    Some(out) => {
                        let doc = serde_json::json!({"CommandId": asked["CommandId"], "InstanceId": asked["InstanceId"],
                            "Status": "Success", "ResponseCode": 0, "StandardOutputContent": out});
                        Reply { status: 200, body: doc.to_string() }
                    }
                    None => forward(&host, req),
                }
            }
            _ => forward(&host, req),
        }
    });
    Front { ec2, agents, outputs }
}

impl Front {
    fn calls(&self, action: &str) -> usize {
        let target = format!("AmazonSSM.{action}");
        self.ec2.requests().iter().filter(|r| r.headers.get("x-amz-target") == Some(&target)).count()
    }
}

#[track_caller]
fn ok(dir: &Path, args: &[&str]) -> Run {
    let r = run(dir, args);
    assert!(r.code == 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
    r
}

fn pool_nodes(dir: &Path) -> Vec<String> {
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().cloned().unwrap_or_default();
    nodes.iter().map(|n| n["id"].as_str().unwrap().to_string()).collect()
}

/// The moto pool of two on-demand nodes with a `health {}` block and `more` HCL.
fn spec(url: &str, health: &str, more: &str) -> String {
    pool_spec(url, REGION, &["eu-west-1a"], 2, 2, 0, "")
        .replace("  labels = { team = \"ml\" }\n", &format!("  labels = {{ team = \"ml\" }}\n{health}"))
        + more
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_on_aws_reads_gpu_health_through_ssm_and_replaces_a_bad_node() {
    let f = front();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let block = "  health {\n    readiness = \"dcgm\"\n  }\n";
    std::fs::write(d.join("main.hcl"), spec(&f.ec2.url, block, "")).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let nodes = pool_nodes(d);
    assert_eq!(nodes.len(), 2, "{nodes:?}");

    // Agents offline: nothing sent, nothing to plan, nothing to warn about.
    let r = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("GPU health") && !r.stdout.contains("GPU health"), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(f.calls("SendCommand"), 0);

    // Systems Manager unreachable: the plan is the same, says why, and asks once.
    *f.agents.lock().unwrap() = Agents::Unreachable;
    let asked = f.calls("DescribeInstanceInformation");
    let r = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("warning: the GPU health of 2 nodes in aws (eu-west-1) could not be read"),
        "{}",
        r.stderr
    );
    assert_eq!(f.calls("DescribeInstanceInformation") - asked, 1, "a best-effort read does not back off and retry");

    // Agents online: one node's kernel log has XID 79, the other is healthy.
    *f.agents.lock().unwrap() = Agents::Online;
    let (bad, good) = (nodes[0].clone(), nodes[1].clone());
    f.outputs.lock().unwrap().extend([
        (bad.clone(), agent_output("nvidia-smi/a10g.xml", "", "kernel/xid-79.log")),
        (good.clone(), agent_output("nvidia-smi/a10g.xml", "dcgm/health-healthy.json", "")),
    ]);
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    let health = plan["health"].as_array().unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(health.len(), 1, "{plan:#}");
    assert_eq!((health[0]["node"].as_str(), health[0]["xid"].as_u64()), (Some(bad.as_str()), Some(79)));
    assert_eq!(health[0]["action"], "replace");
    let text = ok(d, &["plan"]).stdout;
    assert!(text.contains(&format!("-/+ {bad} replace: XID 79 (")), "{text}");
    ok(d, &["apply", "--auto-approve"]);
    let after = pool_nodes(d);
    assert!(!after.contains(&bad) && after.contains(&good) && after.len() == 2, "{after:?}");

    // A job on this `readiness = "dcgm"` pool boots with DCGM's check before the job.
    let job = "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    *f.agents.lock().unwrap() = Agents::Offline;
    std::fs::write(d.join("main.hcl"), spec(&f.ec2.url, block, job)).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let user_data = job_user_data(d).await;
    assert!(user_data.contains("readiness check (dcgm)") && user_data.contains("dcgmi diag -r 1"), "{user_data}");
    ok(d, &["destroy", "--auto-approve"]);
}

/// The user data moto keeps for the state's one job instance.
async fn job_user_data(dir: &Path) -> String {
    use gpuplan::providers::aws::AwsSettings;
    let sdk = AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    }
    .load()
    .await;
    let ec2 = AwsSettings::client(&sdk, REGION);
    let found = ec2
        .describe_instances()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:gpuplan:lineage").values(lineage(dir)).build())
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag-key").values("gpuplan:job").build())
        .send()
        .await
        .expect("DescribeInstances");
    let ids: Vec<String> = found
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(String::from))
        .collect();
    assert_eq!(ids.len(), 1, "one job instance: {ids:?}");
    let attr = ec2
        .describe_instance_attribute()
        .instance_id(&ids[0])
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
        .send()
        .await
        .expect("DescribeInstanceAttribute");
    let encoded = attr.user_data().and_then(|u| u.value()).expect("user data");
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).unwrap()).unwrap()
}

/// `grace` counts from a fault's first sighting, which the state keeps: a read through
/// Systems Manager carries no time of its own. A capture with uncorrectable ECC errors
/// and a failed row remap is within `grace` at first (the plan only records it); the state
/// keeps when it was first seen across plans; once that is older than `grace` the node is
/// replaced, and the state forgets the node that went.
#[tokio::test(flavor = "multi_thread")]
async fn a_fault_s_first_sighting_is_kept_in_state_and_grace_counts_from_it() {
    let f = front();
    *f.agents.lock().unwrap() = Agents::Online;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), spec(&f.ec2.url, "", "")).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let bad = pool_nodes(d)[0].clone();
    f.outputs.lock().unwrap().insert(bad.clone(), agent_output("nvidia-smi/a10g-row-remap-failure.xml", "", ""));

    let state = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(d.join("state/default.json")).unwrap()).unwrap()
    };
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    assert!(plan.get("health").is_none(), "within grace: {plan:#}");
    let text = ok(d, &["plan"]).stdout;
    assert!(text.contains("No changes to the fleet. GPU faults read on the nodes"), "{text}");
    ok(d, &["apply", "--auto-approve"]);
    let kept = state()["health"][&bad].clone();
    let signals: Vec<&str> = kept.as_array().unwrap().iter().map(|f| f["signal"].as_str().unwrap()).collect();
    assert_eq!(signals, ["ecc_uncorrectable", "row_remap_failure"], "{kept:#}");
    let first = kept[0]["seen_ms"].as_u64().unwrap();
    // Read again later: the first sighting stands.
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(state()["health"][&bad][0]["seen_ms"].as_u64(), Some(first));

    // Ten minutes on, as the state sees it: past the default five minutes of grace.
    let mut s = state();
    for f in s["health"][&bad].as_array_mut().unwrap() {
        f["seen_ms"] = (first - 600_000).into();
    }
    std::fs::write(d.join("state/default.json"), serde_json::to_vec_pretty(&s).unwrap()).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    let h = &plan["health"][0];
    assert_eq!(
        (h["node"].as_str(), h["signal"].as_str(), h["action"].as_str()),
        (Some(bad.as_str()), Some("ecc_uncorrectable"), Some("replace")),
        "{plan:#}"
    );
    ok(d, &["apply", "--auto-approve"]);
    assert!(!pool_nodes(d).contains(&bad));
    assert!(state().get("health").is_none_or(|h| h.get(&bad).is_none()), "the node that went is forgotten");
    ok(d, &["destroy", "--auto-approve"]);
}
