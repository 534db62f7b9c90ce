//! Jobs on a Tencent VM pool through the CLI against the signature-checking fake: a
//! `desired = 0` pool runs its job on a node of its own; when that node disappears the run
//! ends (it does not count as running forever), the job is retried on a new node, and
//! nothing is left after destroy. A multi-node job on Tencent and Alibaba pools waits for
//! replica 0's address before its other replicas launch.

use std::collections::BTreeMap;

use gpuplan::providers::TAG_JOB;

use crate::chinacloud::tencent_fake::{Fake, SECRET_ID, SECRET_KEY};
use crate::chinacloud::{Fleet, alibaba_fake, pool, tencent_fake};

#[test]
fn a_job_whose_node_vanished_is_retried_on_a_new_node() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}\n{}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 0, "    spot_percent = 0"),
        "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 1\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n"
    );
    let f = Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let first: Vec<_> = fake.instances().into_iter().filter(|i| i.tags.contains_key(TAG_JOB)).collect();
    assert_eq!(first.len(), 1, "one node for the job, though the pool keeps none warm");
    fake.remove(&first[0].id);

    // The next plan sees the run ended with its node and launches attempt 2.
    let r = f.run(&["plan", "--json"]).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let job = &plan["jobs"][0];
    assert_eq!(job["placement"], "launch", "{job:#}");
    assert_eq!(job["attempt"], 2, "{job:#}");
    f.run(&["apply", "--auto-approve"]).expect(0);
    let second: Vec<_> = fake.instances().into_iter().filter(|i| i.tags.contains_key(TAG_JOB)).collect();
    assert_eq!(second.len(), 1);
    assert_ne!(second[0].id, first[0].id);
    assert_eq!(second[0].tags.get("gpuplan:attempt").map(String::as_str), Some("2"));

    f.run(&["destroy", "--auto-approve"]).expect(0);
    assert!(fake.instances().is_empty(), "nothing outlives destroy: {:?}", fake.instances());
}

/// A spot job node reclaimed while spot is sold out: the job comes back as attempt 2 on an
/// on-demand node, as the pool's `fallback = "on_demand"` allows.
#[test]
fn a_reclaimed_spot_job_resumes_on_on_demand_when_spot_is_gone() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}\n{}",
        fake.url,
        pool(
            "tencentcloud",
            &["ap-guangzhou-3"],
            "T4",
            "GN7.2XLARGE32",
            0,
            "    spot_percent = 100\n    fallback     = \"on_demand\""
        ),
        "job_template \"t\" {\n  image          = \"nginx\"\n  gpus           = 1\n  retries        = 1\n  preemptible    = true\n  checkpoint_uri = \"cos://ckpt/t\"\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n"
    );
    let f = Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let first: Vec<_> = fake.instances().into_iter().filter(|i| i.tags.contains_key(TAG_JOB)).collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].charge_type, "SPOTPAID");

    // Reclaimed, and no spot left in the zone.
    fake.set_state(&first[0].id, "SHUTDOWN");
    fake.sell_out("ap-guangzhou-3", true);
    let r = f.run(&["apply", "--auto-approve"]).expect(0);
    let second: Vec<_> = fake
        .instances()
        .into_iter()
        .filter(|i| i.tags.get("gpuplan:attempt").map(String::as_str) == Some("2"))
        .collect();
    assert_eq!(second.len(), 1, "{}\n{}\n{:?}", r.stdout, r.stderr, fake.instances());
    assert_eq!(second[0].charge_type, "POSTPAID_BY_HOUR", "falls back to on-demand");
    assert!(r.stderr.contains("falling back to on-demand"), "{}", r.stderr);
}

/// CVM has no console output: the job's exit code comes from its log through TAT while
/// the node is still up. Exit 0 succeeds and the node goes; a node that stopped before
/// its exit code was read is not a success.
#[test]
fn tencent_job_exit_codes_come_through_tat() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}\n{}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 0, "    spot_percent = 0"),
        "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"ok\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n\njob \"lost\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n"
    );
    let f = Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let node = |job: &str| {
        fake.instances().into_iter().find(|i| i.tags.get(TAG_JOB).map(String::as_str) == Some(job)).expect("a node")
    };
    let (ok_node, lost_node) = (node("job.ok"), node("job.lost"));
    // The job script keeps the node up (no `shutdown`), so TAT can read it.
    use base64::Engine as _;
    let script = base64::engine::general_purpose::STANDARD.decode(ok_node.user_data.clone().unwrap()).unwrap();
    assert!(!String::from_utf8_lossy(&script).contains("shutdown -h now"));

    let state = |job: &str| {
        let r = f.run(&["jobs", "status", job, "--json"]).expect(0);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        (v["jobs"][0]["state"].as_str().unwrap().to_string(), v["jobs"][0]["runs"][0]["message"].clone())
    };
    assert_eq!(state("ok").0, "running", "no exit code yet");
    fake.lock().job_logs.insert(ok_node.id.clone(), "epoch 1\ngpuplan-job-exit=0\n".into());
    let (s, msg) = state("ok");
    assert_eq!(s, "succeeded");
    assert_eq!(msg, "exited 0 (read with TAT)");
    // `jobs logs` prints the job's own output, read the same way.
    let r = f.run(&["jobs", "logs", "ok"]).expect(0);
    assert_eq!(r.stdout, "[replica 0] epoch 1\n", "{}", r.stderr);
    // Running with no job log, inside the boot deadline: still booting, not failed.
    fake.age(&lost_node.id, 10 * 60);
    assert_eq!(state("lost").0, "running", "10 minutes after launch it may still boot");
    // Past it, the agent answers but the script never made its log: it never started.
    fake.age(&lost_node.id, 16 * 60);
    let (s, msg) = state("lost");
    assert_eq!(s, "failed", "{msg}");
    assert!(msg.as_str().is_some_and(|m| m.contains("never started") && m.contains("16m")), "{msg}");
    // Stopped before its exit code was read: never a success; awaited for the grace
    // from the stop, then failed (`stopped_nodes.rs` follows it through).
    fake.set_state(&lost_node.id, "STOPPED");
    assert_eq!(state("lost").0, "stopped, exit code awaited");
    fake.set_state(&lost_node.id, "RUNNING");

    // The next apply terminates both ended jobs' nodes.
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(fake.instances().iter().all(|i| !i.tags.contains_key(TAG_JOB)), "{:?}", fake.instances());
    assert!(!fake.calls("DescribeInvocationTasks").is_empty());
}

/// Nodes made for a job are in the spend ledger like pool nodes: a line per node, opened
/// at launch at the pool's price and charged to the job, its pool and its quota; closed
/// when the run ends with its node. Before, two job VMs left month-to-date at 0 with no
/// open nodes, and `jobs status` had no cost.
#[test]
fn job_nodes_are_in_the_spend_ledger_per_job_and_quota_until_their_runs_end() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}\n{}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 0, "    spot_percent = 0"),
        "quota \"ml\" {\n  pools = [gpu_pool.train]\n}\n\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"pair\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n  quota    = quota.ml\n  replicas = 2\n}\n"
    );
    let f = Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);
    f.run(&["apply", "--auto-approve"]).expect(0);
    // A multi-node job: replica 1 launches once a refresh read replica 0's address.
    f.run(&["apply", "--auto-approve"]).expect(0);
    let nodes: Vec<String> =
        fake.instances().into_iter().filter(|i| i.tags.contains_key(TAG_JOB)).map(|i| i.id).collect();
    assert_eq!(nodes.len(), 2, "one node per replica");

    let state: serde_json::Value = crate::state_plain::read(&f.path().join("state/default.json"));
    let ledger = state["spend"].as_object().cloned().unwrap_or_default();
    for id in &nodes {
        let line = &ledger[id.as_str()];
        assert_eq!(line["job"], "job.pair", "{ledger:#?}");
        assert_eq!(line["pool"], "gpu_pool.train", "{line:#}");
        // At the price the plan priced the pool's nodes at (the fake quotes a live one).
        assert!(line["usd_per_hour"].as_f64().is_some_and(|usd| usd > 0.0), "{line:#}");
        assert!(line["price_source"].as_str().is_some_and(|s| s.starts_with("live")), "{line:#}");
        assert!(line["end_ms"].is_null(), "{line:#}");
    }
    let r = f.run(&["cost", "--json"]).expect(0);
    let spend = &serde_json::from_str::<serde_json::Value>(&r.stdout).expect("JSON")["spend"];
    assert_eq!(spend["open_nodes"], 2, "{spend:#}");
    for key in [&spend["by_job"]["job.pair"], &spend["by_quota"]["quota.ml"], &spend["by_pool"]["gpu_pool.train"]] {
        assert!(key.is_number(), "{spend:#}");
    }
    let r = f.run(&["jobs", "status", "pair", "--json"]).expect(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert!(doc["jobs"][0]["cost_usd"].is_number(), "{doc:#}");

    // Both nodes vanish (the runs end with them): the next apply closes their lines.
    for id in &nodes {
        fake.remove(id);
    }
    f.run(&["apply", "--auto-approve"]).expect(0);
    let state: serde_json::Value = crate::state_plain::read(&f.path().join("state/default.json"));
    for id in &nodes {
        let line = &state["spend"][id.as_str()];
        assert!(line["end_ms"].as_u64().is_some_and(|e| e >= line["start_ms"].as_u64().unwrap()), "{line:#}");
    }
    let r = f.run(&["cost", "--json"]).expect(0);
    let spend = &serde_json::from_str::<serde_json::Value>(&r.stdout).expect("JSON")["spend"];
    assert_eq!(spend["open_nodes"], 0, "{spend:#}");
}

/// Warm nodes take jobs on Tencent: on a pool with two idle warm nodes, a one-replica job
/// runs on one of them through TAT `RunCommand` (no RunInstances), its status and exit
/// code come back from `DescribeInvocationTasks`, and the node stays in the pool when the
/// job ends. A node whose TAT agent is offline is not warm: the plan says so.
#[test]
fn tencent_warm_nodes_take_jobs_through_tat_and_stay_in_their_pool() {
    let fake = Fake::start();
    let pool = pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 2, "    spot_percent = 0");
    let provider = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n",
        fake.url
    );
    let job = "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    let env = [("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)];
    let f = Fleet::new(&format!("{provider}{pool}"), &env);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let warm: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(warm.len(), 2);
    std::fs::write(f.path().join("main.hcl"), format!("{provider}{pool}{job}")).unwrap();

    // Both agents offline: no warm node, the job boots one, and the plan says why.
    fake.lock().agents_offline.extend(warm.iter().cloned());
    let r = f.run(&["plan", "--json"]).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let j = &plan["jobs"][0];
    assert_eq!(j["launches"][0]["node_shape"], true, "{j:#}");
    let skipped = j["warm_skipped"][0].as_str().unwrap_or("");
    assert!(skipped.ends_with(": TAT agent Offline") && warm.iter().all(|w| skipped.contains(w.as_str())), "{j:#}");

    fake.lock().agents_offline.clear();
    let r = f.run(&["plan", "--no-color"]).expect(0);
    let text = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let node = warm.iter().find(|w| text.contains(&format!("on warm node {w}"))).expect("a warm node named").clone();
    let runs_before = fake.calls("RunInstances").len();
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(fake.calls("RunInstances").len(), runs_before, "no instance launched for the job");
    let invocations = fake.lock().invocations.clone();
    let (on, script) = invocations.values().find(|(_, s)| s.contains("docker run")).expect("the job script via TAT");
    assert_eq!(on, &node);
    assert!(script.contains("exit \"$code\"") && !script.contains("shutdown -h now"));

    let state = || {
        let r = f.run(&["jobs", "status", "once", "--json"]).expect(0);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        (v["jobs"][0]["state"].as_str().unwrap().to_string(), v["jobs"][0]["runs"][0]["message"].clone())
    };
    fake.lock().task_results.insert(node.clone(), ("RUNNING".into(), -1, "epoch 1\n".into()));
    assert_eq!(state().0, "running");
    let r = f.run(&["jobs", "logs", "once"]).expect(0);
    assert_eq!(r.stdout, "[replica 0] epoch 1\n", "{}", r.stderr);
    fake.lock().task_results.insert(node.clone(), ("SUCCESS".into(), 0, "epoch 1\ngpuplan-job-exit=0\n".into()));
    let (s, msg) = state();
    assert_eq!((s.as_str(), msg.as_str()), ("succeeded", Some("exited 0 (read with TAT)")));

    // Recorded by the next apply; the node stays, in its pool, and nothing is left to do.
    f.run(&["apply", "--auto-approve"]).expect(0);
    let ids: Vec<String> = fake.instances().into_iter().map(|i| i.id).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&node));
    f.run(&["plan", "--detailed-exitcode"]).expect(0);
    f.run(&["destroy", "--auto-approve"]).expect(0);
}

/// A job sent to a warm node through TAT by an apply killed before TAT's answer came: the
/// intent to send was in state first, so the next plan asks TAT (`DescribeInvocationTasks`
/// by instance, then `DescribeInvocations`) and finds the invocation by the launch token
/// in its description. It adopts that run; nothing is sent twice.
#[test]
fn a_tat_send_whose_answer_was_lost_to_a_kill_is_adopted_not_sent_again() {
    let fake = Fake::start();
    let pool = pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 1, "    spot_percent = 0");
    let provider = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n",
        fake.url
    );
    let job = "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    let env = [("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)];
    let f = Fleet::new(&format!("{provider}{pool}"), &env);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let node = fake.instances()[0].id.clone();
    std::fs::write(f.path().join("main.hcl"), format!("{provider}{pool}{job}")).unwrap();
    fake.lock().task_results.insert(node.clone(), ("RUNNING".into(), -1, String::new()));

    // The job's sends, not the plans' GPU health reads (TAT commands of their own).
    let job_sends = || {
        let s = fake.lock();
        let mut sent: Vec<(String, String)> = s
            .invocations
            .iter()
            .filter(|(_, (_, script))| script.contains("docker run"))
            .map(|(inv, _)| (inv.clone(), s.descriptions.get(inv).cloned().unwrap_or_default()))
            .collect();
        sent.sort();
        sent
    };
    fake.lock().stall_run_command = true;
    let mut child = f.spawn(&["apply", "--auto-approve"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while job_sends().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the apply never sent the job");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    fake.lock().stall_run_command = false;
    let sent = job_sends();
    assert_eq!(sent.len(), 1, "{sent:?}");

    let r = f.run(&["plan", "--no-color"]).expect(0);
    assert!(r.stdout.contains(&format!("sent to warm node {node}")), "{}\n{}", r.stdout, r.stderr);
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(job_sends().len(), 1, "the job was sent once");
    assert!(!fake.calls("DescribeInvocations").is_empty());
    let r = f.run(&["jobs", "status", "once", "--json"]).expect(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["jobs"][0]["state"], "running", "{v:#}");
    assert_eq!(v["jobs"][0]["runs"][0]["id"], format!("{node}/{}", sent[0].0), "{v:#}");
    f.run(&["plan", "--detailed-exitcode"]).expect(0);
}

/// A multi-node job where RunInstances answers instance ids only (Tencent Cloud, Alibaba
/// Cloud): replica 0 launches first; the others wait until a refresh reads its private
/// address from DescribeInstances, then launch with it in their user data.
/// An instance as these tests read it: (id, tags, user data).
type Seen = (String, BTreeMap<String, String>, Option<String>);

fn multi_node_waits_for_replica_0_s_address(
    fleet: Fleet,
    instances: &dyn Fn() -> Vec<Seen>,
    private_ip: fn(&str) -> String,
) {
    let r = fleet.run(&["apply", "--auto-approve"]);
    assert!(r.stderr.contains("replica 1 waits for replica 0's private address"), "{}\n{}", r.stdout, r.stderr);
    let jobs = |v: Vec<Seen>| v.into_iter().filter(|i| i.1.contains_key(TAG_JOB)).collect::<Vec<_>>();
    let first = jobs(instances());
    assert_eq!(first.len(), 1, "replica 0 only: {first:?}");
    assert_eq!(first[0].1.get("gpuplan:replica").map(String::as_str), Some("0"));
    let master = private_ip(&first[0].0);

    // The next apply refreshes replica 0 (its address with it) and launches replica 1.
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let now = jobs(instances());
    let second = now.iter().find(|i| i.1.get("gpuplan:replica").map(String::as_str) == Some("1")).expect("replica 1");
    use base64::Engine as _;
    let script = base64::engine::general_purpose::STANDARD.decode(second.2.clone().expect("user data")).unwrap();
    let script = String::from_utf8_lossy(&script);
    assert!(script.contains(&format!("-e GPUPLAN_MASTER_ADDR={master}")), "{script}");
    assert!(script.contains("-e GPUPLAN_NODE_RANK=1") && script.contains("-e GPUPLAN_NNODES=2"), "{script}");
    fleet.run(&["destroy", "--auto-approve"]).expect(0);
}

const TWO_REPLICAS: &str = "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"ddp\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n  replicas = 2\n}\n";

#[test]
fn tencent_multi_node_replicas_rendezvous_on_the_address_describe_instances_gives() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}\n{TWO_REPLICAS}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 0, "    spot_percent = 0"),
    );
    let f = Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);
    let instances = || fake.instances().into_iter().map(|i| (i.id, i.tags, i.user_data)).collect();
    multi_node_waits_for_replica_0_s_address(f, &instances, tencent_fake::private_ip);
}

#[test]
fn alibaba_multi_node_replicas_rendezvous_on_the_address_describe_instances_gives() {
    let fake = alibaba_fake::Fake::start();
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}}\n{}\n{TWO_REPLICAS}",
        pool("alicloud", &["cn-hangzhou-h"], "T4", "ecs.gn6i-c4g1.xlarge", 0, "    spot_percent = 0"),
    );
    let f = Fleet::new(
        &spec,
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    );
    let instances = || fake.instances().into_iter().map(|i| (i.id, i.tags, i.user_data)).collect();
    multi_node_waits_for_replica_0_s_address(f, &instances, alibaba_fake::private_ip);
}

/// A multi-node job whose replica 0 is reclaimed while replica 1 has not started yet: the
/// plan requeues the whole job, apply stops replica 1, and both come back as attempt 2,
/// with no retry spent (the template allows none).
#[test]
fn a_multi_node_job_that_loses_a_replica_before_all_started_is_requeued_whole() {
    let fake = Fake::start();
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}\n{}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 0, "    spot_percent = 100"),
        "job_template \"t\" {\n  image          = \"nginx\"\n  gpus           = 1\n  retries        = 0\n  preemptible    = true\n  checkpoint_uri = \"cos://ckpt/t\"\n}\n\njob \"ddp\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n  replicas = 2\n}\n"
    );
    let f = Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);
    f.run(&["apply", "--auto-approve"]).expect(0);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let replica = |r: &str, attempt: &str| {
        fake.instances().into_iter().find(|i| {
            i.tags.get("gpuplan:replica").map(String::as_str) == Some(r)
                && i.tags.get("gpuplan:attempt").map(String::as_str) == Some(attempt)
        })
    };
    let (zero, one) = (replica("0", "1").expect("replica 0"), replica("1", "1").expect("replica 1"));
    assert_eq!(zero.charge_type, "SPOTPAID");
    // Replica 1 still boots when replica 0's spot node is reclaimed.
    fake.set_state(&one.id, "PENDING");
    fake.set_state(&zero.id, "SHUTDOWN");

    let r = f.run(&["plan", "--no-color"]).expect(0);
    let text = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let says = format!(
        "requeued whole from its checkpoint: replica 0 was lost before all replicas started; runs {} stop, no retry spent",
        one.id
    );
    assert!(text.contains(&says), "{}\n{}", r.stdout, r.stderr);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let gone = fake.instances().into_iter().find(|i| i.id == one.id).map(|i| i.state);
    assert!(gone.is_none() || gone.as_deref() == Some("SHUTDOWN"), "replica 1 was stopped: {gone:?}");
    assert!(replica("0", "2").is_some(), "replica 0 launches again as attempt 2: {:?}", fake.instances());
    // Replica 1's attempt 2 follows once replica 0's address is read; no retry spent.
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(replica("1", "2").is_some(), "{:?}", fake.instances());
    let r = f.run(&["jobs", "status", "ddp", "--json"]).expect(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let runs = v["jobs"][0]["runs"].as_array().expect("runs");
    let stopped = runs.iter().find(|r| r["id"] == one.id.as_str()).expect("replica 1's first run");
    assert_eq!(stopped["status"], "preempted", "{v:#}");
    assert_eq!(v["jobs"][0]["state"], "running", "retries = 0, yet the job goes on: {v:#}");
    f.run(&["destroy", "--auto-approve"]).expect(0);
}
