//! A job sent to a warm node through SSM `SendCommand` (which takes no idempotency token)
//! by an apply killed after moto ran the send and before gpuplan read the answer: the
//! intent was durable in state before the send, so the next plan asks SSM (`ListCommands`
//! of the node) and finds the command by the launch token in its comment, and adopts it.
//! Nothing is sent twice.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::aws::cli::{pool_spec, run};
use crate::aws::fake_ec2::{FakeEc2, Reply, forward};
use crate::sigterm_moto::{endpoint, gpuplan};

/// A front for moto: SSM agents are online (moto answers `DescribeInstanceInformation`
/// 500); a job's `SendCommand` goes to moto, then its answer waits while `stall` holds;
/// everything else (the plans' GPU health reads included) goes to moto. Counts the job
/// sends and `ListCommands` it saw.
struct Front {
    fake: FakeEc2,
    stall: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    listed: Arc<AtomicUsize>,
}

fn front() -> Front {
    let host = endpoint().trim_start_matches("http://").trim_end_matches('/').to_string();
    let stall = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let listed = Arc::new(AtomicUsize::new(0));
    let (st, se, li) = (stall.clone(), sent.clone(), listed.clone());
    let fake = FakeEc2::start(move |req, _| match req.headers.get("x-amz-target").map(String::as_str) {
        Some("AmazonSSM.DescribeInstanceInformation") => {
            let asked: serde_json::Value = serde_json::from_str(&req.body).expect("a JSON request");
            let ids = asked["Filters"][0]["Values"].as_array().cloned().unwrap_or_default();
            let list: Vec<serde_json::Value> =
                ids.iter().map(|id| serde_json::json!({"InstanceId": id, "PingStatus": "Online"})).collect();
            Reply { status: 200, body: serde_json::json!({"InstanceInformationList": list}).to_string() }
        }
        Some("AmazonSSM.SendCommand") if !req.body.contains("gpuplan health read") => {
            let reply = forward(&host, req);
            se.fetch_add(1, Ordering::SeqCst);
            while st.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            reply
        }
        Some("AmazonSSM.ListCommands") => {
            li.fetch_add(1, Ordering::SeqCst);
            forward(&host, req)
        }
        _ => forward(&host, req),
    });
    Front { fake, stall, sent, listed }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ssm_send_whose_answer_was_lost_to_a_kill_is_adopted_not_sent_again() {
    let region = "ap-northeast-1";
    let f = front();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pool = pool_spec(&f.fake.url, region, &["ap-northeast-1a"], 1, 1, 0, "");
    std::fs::write(dir.join("main.hcl"), &pool).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let job = "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    std::fs::write(dir.join("main.hcl"), pool + job).unwrap();

    f.stall.store(true, Ordering::SeqCst);
    let mut child = gpuplan(dir, &["apply", "--auto-approve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpuplan starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while f.sent.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the apply never sent the job");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("kill -9 between the send and its record");
    child.wait().expect("reaped");
    f.stall.store(false, Ordering::SeqCst);

    let r = run(dir, &["plan", "--no-color"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("adopted: sent to warm node"), "{}\n{}", r.stdout, r.stderr);
    assert!(f.listed.load(Ordering::SeqCst) >= 1, "SSM was asked");
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(f.sent.load(Ordering::SeqCst), 1, "the job was sent once");
    let sent = f
        .fake
        .requests()
        .into_iter()
        .find(|q| q.body.contains("AWS-RunShellScript") && !q.body.contains("gpuplan health read"))
        .expect("the send");
    let comment =
        serde_json::from_str::<serde_json::Value>(&sent.body).unwrap()["Comment"].as_str().unwrap().to_string();
    let r = run(dir, &["jobs", "status", "once", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let runs = v["jobs"][0]["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 1, "{v:#}");
    let token = comment.split_whitespace().nth(1).expect("the token after `gpuplan`");
    assert!(token.starts_with("gj-"), "{comment}");
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}
