//! A job node that stopped without an exit line, on Tencent (CVM: TAT cannot reach a
//! stopped node) and Alibaba (ECS: no exit line on its console): `stopped, exit code
//! awaited`, never `running`, for a grace from the stop (`GPUPLAN_EXIT_CODE_GRACE`, 10
//! minutes unless set); then its run fails ("its node stopped and never posted an exit
//! code"), spends a retry, and its node is terminated while the retry launches.

use gpuplan::providers::{TAG_ATTEMPT, TAG_JOB};

use crate::chinacloud::{Fleet, pool};

const JOB: &str = "job_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 1\n}\n\njob \"once\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";

fn job_doc(f: &Fleet) -> serde_json::Value {
    let r = f.run(&["jobs", "status", "once", "--json"]).expect(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("jobs status JSON");
    doc["jobs"][0].clone()
}

fn runs(f: &Fleet) -> Vec<serde_json::Value> {
    let r = f.run(&["state", "pull"]).expect(0);
    let state: serde_json::Value = serde_json::from_str(&r.stdout).expect("state JSON");
    state["resources"]["job.once"]["job"]["runs"].as_array().cloned().unwrap_or_default()
}

/// The scenario on any cloud: `stop` stops the job's node without an exit line;
/// `job_nodes` lists the job nodes still there as (id, attempt).
fn stopped_node_awaits_then_fails(f: &Fleet, stop: impl Fn(&str), job_nodes: impl Fn() -> Vec<(String, String)>) {
    f.run(&["apply", "--auto-approve"]).expect(0);
    let first = job_nodes();
    assert_eq!(first.len(), 1, "{first:?}");
    let first = first[0].0.clone();
    stop(&first);

    // Within the grace: awaited, never running. The plan records the stop (the grace
    // counts from it: these clouds give no stop time); nothing is relaunched.
    let job = job_doc(f);
    assert_eq!(job["state"], "stopped, exit code awaited", "{job:#}");
    assert_eq!(job["runs"][0]["status"], "stopped", "{job:#}");
    let msg = job["runs"][0]["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.starts_with("its node stopped (") && msg.contains("exit code awaited until"), "{msg}");
    let r = f.run(&["plan", "--detailed-exitcode"]).expect(2);
    assert!(r.stdout.contains("    job.once  its node stopped: exit code awaited\n"), "{}", r.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let recorded = runs(f);
    assert_eq!(recorded.len(), 1, "no retry within the grace: {recorded:#?}");
    assert_eq!(recorded[0]["status"], "stopped", "{:#}", recorded[0]);
    assert!(recorded[0]["finished_at"].is_string(), "the stop is recorded: {:#}", recorded[0]);
    assert_eq!(job_nodes(), vec![(first.clone(), "1".to_string())], "the node is kept");
    // Recorded: nothing more to do until the grace ends.
    f.run(&["plan", "--detailed-exitcode"]).expect(0);

    // Past it: failed, a retry spent, the stopped node terminated and attempt 2 launched.
    let grace0 = [("GPUPLAN_EXIT_CODE_GRACE", "0s")];
    let r = f.run_env(&["plan"], &grace0).expect(0);
    assert!(r.stdout.contains(&format!("its ended node {first} is terminated")), "{}", r.stdout);
    f.run_env(&["apply", "--auto-approve"], &grace0).expect(0);
    let recorded = runs(f);
    assert_eq!(recorded.len(), 2, "{recorded:#?}");
    assert_eq!(recorded[0]["status"], "failed", "{:#}", recorded[0]);
    let why = recorded[0]["message"].as_str().unwrap_or_default();
    assert!(why.starts_with("its node stopped and never posted an exit code"), "{why}");
    assert_eq!(recorded[0]["node_released"], true, "{:#}", recorded[0]);
    let now = job_nodes();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now[0].0, first, "the stopped node is gone");
    assert_eq!(now[0].1, "2", "the retry runs: {now:?}");
    f.run(&["destroy", "--auto-approve"]).expect(0);
    assert!(job_nodes().is_empty());
}

#[test]
fn tencent_a_stopped_job_node_awaits_its_exit_code_then_fails_and_is_retried() {
    use crate::chinacloud::tencent_fake::{Fake, SECRET_ID, SECRET_KEY};
    let fake = Fake::start();
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}\n{JOB}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 0, "    spot_percent = 0"),
    );
    let f = Fleet::new(&spec, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);
    let job_nodes = || {
        let mut out: Vec<(String, String)> = fake
            .instances()
            .into_iter()
            .filter(|i| i.tags.contains_key(TAG_JOB))
            .map(|i| (i.id.clone(), i.tags.get(TAG_ATTEMPT).cloned().unwrap_or_default()))
            .collect();
        out.sort();
        out
    };
    stopped_node_awaits_then_fails(&f, |id| fake.set_state(id, "STOPPED"), job_nodes);
}

#[test]
fn alibaba_a_stopped_job_node_awaits_its_exit_code_then_fails_and_is_retried() {
    use crate::chinacloud::alibaba_fake::{ACCESS_KEY_ID, ACCESS_KEY_SECRET, Fake};
    let fake = Fake::start();
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}}\n{}\n{JOB}",
        pool("alicloud", &["cn-hangzhou-h"], "T4", "ecs.gn6i-c4g1.xlarge", 0, "    spot_percent = 0"),
    );
    let f = Fleet::new(
        &spec,
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    );
    let job_nodes = || {
        let mut out: Vec<(String, String)> = fake
            .instances()
            .into_iter()
            .filter(|i| i.tags.contains_key(TAG_JOB))
            .map(|i| (i.id.clone(), i.tags.get(TAG_ATTEMPT).cloned().unwrap_or_default()))
            .collect();
        out.sort();
        out
    };
    // Stopped with a console that holds the boot, but no exit line.
    stopped_node_awaits_then_fails(&f, |id| fake.stop(id, "boot\ntraining...\n"), job_nodes);
}
