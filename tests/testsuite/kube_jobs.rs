//! The Kubernetes job backend through the binary: a sim pool with a `kubernetes {}` block
//! submits its jobs to the in-process API server double (`kube_fake.rs`) through kube-rs.

use std::path::Path;
use std::process::Command;

use crate::kube_fake::{FakeApi, kubeconfig_for};

fn spec(retries: u32, replicas: u32) -> String {
    format!(
        r#"
provider "sim" {{
  region = "us-east-1"
}}

gpu_pool "train" {{
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {{
    min     = 0
    desired = 2
    max     = 4
  }}
  kubernetes {{
    kubeconfig = "kube/config"
    context    = "fake"
    namespace  = "ml"
  }}
}}

job_template "finetune" {{
  image          = "ghcr.io/example/finetune:1.4"
  gpus           = 8
  retries        = {retries}
  checkpoint_uri = "s3://ckpt/ft"
}}

job "ft" {{
  template = job_template.finetune
  pool     = gpu_pool.train
  replicas = {replicas}
}}
"#
    )
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "120").env_remove("GPUPLAN_WORKSPACE");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GPUPLAN_")) {
        cmd.env_remove(k);
    }
    cmd.args(args);
    cmd
}

fn gpuplan(dir: &Path, args: &[&str]) -> Out {
    let out = command(dir, args).output().expect("gpuplan runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[track_caller]
fn ok(dir: &Path, args: &[&str]) -> Out {
    let out = gpuplan(dir, args);
    assert_eq!(out.code, 0, "{args:?}\n--- stdout\n{}\n--- stderr\n{}", out.stdout, out.stderr);
    out
}

fn fleet(api_url: &str, retries: u32, replicas: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.hcl"), spec(retries, replicas)).expect("write spec");
    // Not beside the spec files: every `*.yaml` there is read as spec.
    std::fs::create_dir(dir.path().join("kube")).expect("mkdir");
    std::fs::write(dir.path().join("kube/config"), kubeconfig_for(api_url)).expect("write kubeconfig");
    dir
}

fn lineage(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("state/default.json")).expect("local state");
    let state: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    state["lineage"].as_str().expect("a lineage").to_string()
}

/// `jobs status ft --json`: the job's state and its runs' states.
fn status(dir: &Path) -> (String, Vec<String>) {
    let out = ok(dir, &["jobs", "status", "ft", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let job = &v["jobs"][0];
    let runs =
        job["runs"].as_array().map(|r| r.iter().map(|r| r["status"].as_str().unwrap_or("").to_string()).collect());
    (job["state"].as_str().unwrap_or("").to_string(), runs.unwrap_or_default())
}

#[test]
fn apply_submits_once_status_converges_and_logs_stream() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 1, 2);
    let d = dir.path();
    let out = ok(d, &["apply", "--auto-approve"]);
    assert!(out.stderr.contains("job.ft") || out.stdout.contains("job.ft"), "{}\n{}", out.stdout, out.stderr);
    // Done once submitted, not when its configuration was recorded before that.
    let launched = out.stderr.find("job.ft: replica 0 attempt 1 launched").expect("a launch line");
    let done = out.stderr.find("job.ft: done").expect("a done line");
    assert!(launched < done, "{}", out.stderr);

    // One Job, in the pool's namespace, labelled as this state's.
    assert_eq!(api.count("POST", "/namespaces/ml/jobs"), 1);
    let job = api.job("ml", "ft").expect("the Job was created");
    let labels = &job["metadata"]["labels"];
    assert_eq!(labels["gpuplan.dev/lineage"], lineage(d).as_str());
    assert_eq!(labels["app.kubernetes.io/managed-by"], "gpuplan");
    assert_eq!(job["spec"]["completions"], 2);
    assert_eq!(job["spec"]["backoffLimit"], 1);
    assert_eq!(job["spec"]["template"]["spec"]["priorityClassName"], "gpuplan-medium");
    assert_eq!(api.pods("ml", "ft"), 2);
    assert_eq!(status(d).1, ["queued", "queued"], "submitted, not yet scheduled");

    // The scheduler starts both pods: status follows, with the nodes they run on.
    api.run_all("ml", "ft");
    assert_eq!(status(d).1, ["running", "running"]);
    let table = ok(d, &["jobs", "status", "ft"]).stdout;
    assert!(table.contains("gpu-node-1") && table.contains("ml/ft/1"), "{table}");

    // The pods' own output, per replica.
    api.log("ml", "ft", 0, "epoch 1 loss 0.52");
    let logs = ok(d, &["jobs", "logs", "ft"]).stdout;
    assert!(logs.contains("[replica 0] epoch 1 loss 0.52"), "{logs}");
    assert!(logs.contains("[replica 1] replica 1 starting on gpu-node-1"), "{logs}");

    // `--follow` prints lines as they come and returns when the pods end.
    let child = command(d, &["jobs", "logs", "ft", "--follow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(std::time::Duration::from_millis(700));
    api.log("ml", "ft", 1, "epoch 2 loss 0.31");
    api.succeed("ml", "ft", 0);
    api.succeed("ml", "ft", 1);
    let followed = child.wait_with_output().expect("follow ends when the pods end");
    let text = String::from_utf8_lossy(&followed.stdout);
    assert!(followed.status.success(), "{text}\n{}", String::from_utf8_lossy(&followed.stderr));
    assert!(text.contains("[replica 1] epoch 2 loss 0.31"), "{text}");
    assert!(text.contains("[replica 0] epoch 1 loss 0.52"), "{text}");

    assert_eq!(status(d), ("succeeded".to_string(), vec!["succeeded".to_string(), "succeeded".to_string()]));

    // Reruns never submit twice after success.
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(api.count("POST", "/namespaces/ml/jobs"), 1, "{:#?}", api.requests());
    assert_eq!(status(d).0, "succeeded");
}

/// A job the state forgot (`state rm`) and applied again is a new job: the old, finished
/// Job of the same name in the cluster (this state's lineage, attempt 1) is never taken
/// for the new one's, whose run identity (`gpuplan.dev/run`) differs. It is deleted and
/// the new job submitted; its status is the new run's, not the old one's success.
#[test]
fn a_re_added_job_never_adopts_the_old_finished_job_of_the_same_name() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 0, 1);
    let d = dir.path();
    ok(d, &["apply", "--auto-approve"]);
    let first = api.job("ml", "ft").expect("the Job was created");
    let run = first["metadata"]["labels"]["gpuplan.dev/run"].as_str().expect("the run's identity label").to_string();
    api.succeed("ml", "ft", 0);
    assert_eq!(status(d).0, "succeeded");

    ok(d, &["state", "rm", "job.ft"]);
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(api.count("POST", "/namespaces/ml/jobs"), 2, "submitted anew: {:#?}", api.requests());
    let second = api.job("ml", "ft").expect("the new Job");
    assert_ne!(second["metadata"]["labels"]["gpuplan.dev/run"].as_str(), Some(run.as_str()), "{second:#}");
    assert_eq!(status(d).1, ["queued"], "the new run, not the old one's success");

    // Submitted once: the next apply recognises its own run.
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(api.count("POST", "/namespaces/ml/jobs"), 2, "{:#?}", api.requests());

    // A Job of an earlier life that still runs is never deleted: the apply fails, naming it.
    api.run_all("ml", "ft");
    ok(d, &["state", "rm", "job.ft"]);
    let out = gpuplan(d, &["apply", "--auto-approve"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("still running for an earlier"), "{}", out.stderr);
    assert_eq!(api.count("POST", "/namespaces/ml/jobs"), 2);
    assert!(api.job("ml", "ft").is_some());
}

#[test]
fn a_reclaimed_pod_does_not_spend_retries_and_real_failures_do() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 1, 1);
    let d = dir.path();
    ok(d, &["apply", "--auto-approve"]);
    api.run_all("ml", "ft");
    // Two spot reclaims: replaced each time, nothing counted (backoffLimit is 1).
    for _ in 0..2 {
        api.reclaim("ml", "ft", 0);
        api.run_all("ml", "ft");
    }
    let job = api.job("ml", "ft").expect("job");
    assert_eq!(job["status"]["failed"], 0, "{job:#}");
    assert_eq!(api.pods("ml", "ft"), 3);
    assert_eq!(status(d).0, "running");

    // A real failure is retried once; the second fails the Job.
    api.fail("ml", "ft", 0);
    api.run_all("ml", "ft");
    assert_eq!(status(d).0, "running");
    api.fail("ml", "ft", 0);
    let (state, runs) = status(d);
    assert_eq!((state.as_str(), runs), ("failed", vec!["failed".to_string()]));

    // The cluster spent the retries: gpuplan does not submit the job again.
    let plan = ok(d, &["apply", "--auto-approve"]);
    assert_eq!(api.count("POST", "/namespaces/ml/jobs"), 1, "{}", plan.stdout);
    assert_eq!(status(d).0, "failed");
}

#[test]
fn cancel_and_destroy_delete_the_job_with_its_pods() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 0, 1);
    let d = dir.path();
    ok(d, &["apply", "--auto-approve"]);
    api.run_all("ml", "ft");
    let out = ok(d, &["jobs", "cancel", "ft"]);
    assert!(out.stderr.contains("cancelled"), "{}", out.stderr);
    assert!(api.job("ml", "ft").is_none(), "the Job is deleted");
    let deletes: Vec<_> = api.requests().into_iter().filter(|(m, _, _)| m == "DELETE").collect();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert!(deletes[0].2.contains("\"propagationPolicy\":\"Background\""), "pods go with the Job: {deletes:?}");
    assert_eq!(status(d).0, "cancelled");

    // A second job instance, then destroy: its Job goes too.
    let dir2 = fleet(&api.url, 0, 1);
    let d2 = dir2.path();
    ok(d2, &["apply", "--auto-approve"]);
    assert!(api.job("ml", "ft").is_some());
    ok(d2, &["destroy", "--auto-approve"]);
    assert!(api.job("ml", "ft").is_none(), "destroy cancels the pool's Jobs");
}

#[test]
fn a_job_gpuplan_does_not_own_is_never_touched() {
    let api = FakeApi::start();
    api.foreign_job("ml", "ft");
    let dir = fleet(&api.url, 0, 1);
    let d = dir.path();
    let out = gpuplan(d, &["apply", "--auto-approve"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("job.ft"), "{all}");
    assert!(all.contains("ml/ft") && all.contains("does not own"), "{all}");
    assert!(all.contains("kube/config"), "names the cluster: {all}");
    // The other team's Job is as it was: never posted over, never deleted.
    assert_eq!(api.job("ml", "ft").expect("still there")["metadata"]["labels"]["team"], "data");
    assert_eq!(api.count("POST", "/jobs"), 0);
    // Nothing was recorded as running; cancel and destroy leave it alone too.
    assert!(status(d).1.is_empty());
    ok(d, &["jobs", "cancel", "ft"]);
    ok(d, &["destroy", "--auto-approve"]);
    assert_eq!(api.requests().iter().filter(|(m, _, _)| m == "DELETE").count(), 0);
    assert!(api.job("ml", "ft").is_some());
}

/// Each fault: apply exits 1 with an error naming the job and the cluster, and the state
/// records no run (the next apply tries again).
#[test]
fn faults_are_clear_errors_and_record_nothing() {
    let check = |dir: &Path, needles: &[&str]| {
        let out = gpuplan(dir, &["apply", "--auto-approve"]);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert_eq!(out.code, 1, "{all}");
        for n in ["job.ft", "kube/config"].iter().chain(needles) {
            assert!(all.contains(n), "missing {n:?} in\n{all}");
        }
        // The progress line says what happened, once it happened: never "done" first.
        assert!(!out.stderr.contains("job.ft: done"), "{}", out.stderr);
        assert!(out.stderr.contains("job.ft: failed: job launch failed"), "{}", out.stderr);
        assert!(status(dir).1.is_empty(), "no run recorded");
    };

    // Nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let url = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    check(fleet(&url, 0, 1).path(), &["cannot reach the API server"]);

    for code in [401u16, 403] {
        let api = FakeApi::start();
        api.deny(code);
        check(fleet(&api.url, 0, 1).path(), &[&format!("answered {code}")]);
    }

    let api = FakeApi::start();
    api.refuse_as_invalid("ft");
    check(fleet(&api.url, 0, 1).path(), &["answered 422", "is invalid"]);

    let api = FakeApi::start();
    api.drop_priority_classes();
    let dir = fleet(&api.url, 0, 1);
    check(dir.path(), &["no PriorityClass `gpuplan-medium`", "kubectl create priorityclass"]);
    assert_eq!(api.count("POST", "/jobs"), 0, "nothing is submitted without its priority class");
}

/// `gpuplan check` reaches the pool's cluster: the namespace and the PriorityClasses.
#[test]
fn check_reaches_the_cluster_and_names_what_is_missing() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 0, 1);
    let d = dir.path();
    let out = ok(d, &["check"]);
    let line =
        out.stdout.lines().find(|l| l.contains("Kubernetes cluster kube/config (context fake)")).expect("a line");
    assert!(line.starts_with("ok") && line.contains("namespace ml"), "{}", out.stdout);

    api.drop_namespace("ml");
    let out = gpuplan(d, &["check"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("namespace `ml` does not exist") && out.stdout.contains("kubectl create namespace ml"),
        "{}",
        out.stdout
    );

    let api = FakeApi::start();
    api.drop_priority_classes();
    let dir = fleet(&api.url, 0, 1);
    let out = gpuplan(dir.path(), &["check"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("lacks the PriorityClass(es) gpuplan-critical, gpuplan-high"), "{}", out.stdout);

    let api = FakeApi::start();
    api.deny(401);
    let dir = fleet(&api.url, 0, 1);
    let out = gpuplan(dir.path(), &["check"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("refused the kubeconfig's credentials"), "{}", out.stdout);
}

/// A low-priority preemptible Job of two replicas fills both nodes; a critical job comes.
fn preemption_spec(with_urgent: bool) -> String {
    let base = spec(1, 2)
        .replace(
            "  kubernetes {",
            "  mix {\n    spot_percent = 0\n    fallback     = \"on_demand\"\n  }\n  kubernetes {",
        )
        .replace(
            "  gpus           = 8\n",
            "  gpus           = 8\n  priority       = \"low\"\n  preemptible    = true\n",
        );
    let urgent = r#"
job_template "urgent" {
  image    = "x"
  gpus     = 8
  priority = "critical"
}

job "urgent" {
  template = job_template.urgent
  pool     = gpu_pool.train
}
"#;
    if with_urgent { format!("{base}{urgent}") } else { base }
}

#[test]
fn preempting_one_replica_evicts_its_pod_and_the_job_survives() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 1, 2);
    let d = dir.path();
    std::fs::write(d.join("main.hcl"), preemption_spec(false)).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    api.run_all("ml", "ft");
    assert_eq!(status(d).0, "running");

    std::fs::write(d.join("main.hcl"), preemption_spec(true)).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    let ft = plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == "job.ft").expect("job.ft");
    assert_eq!(ft["placement"], "preempt", "{plan:#}");
    let victim = ft["preempt"][0].as_str().expect("one run preempted").to_string();
    assert_eq!(ft["preempt"].as_array().unwrap().len(), 1, "one replica makes room: {ft:#}");
    let replica: u32 = victim.rsplit('/').next().unwrap().parse().expect("a replica index");
    let pods = api.live_pods("ml", "ft", replica);
    assert_eq!(pods.len(), 1, "{pods:?}");
    let other = api.live_pods("ml", "ft", 1 - replica);

    ok(d, &["apply", "--auto-approve"]);
    let evictions: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p.ends_with("/eviction"))
        .map(|(_, p, _)| p)
        .collect();
    assert_eq!(evictions, [format!("/api/v1/namespaces/ml/pods/{}/eviction", pods[0])], "{:#?}", api.requests());
    assert_eq!(api.count("DELETE", "/namespaces/ml/jobs/ft"), 0, "the Job is not deleted");
    let job = api.job("ml", "ft").expect("the Job survives");
    assert_eq!(job["status"]["failed"], 0, "an eviction spends no retry: {job:#}");
    assert_eq!(api.live_pods("ml", "ft", 1 - replica), other, "the other replica runs on");
    assert_eq!(api.live_pods("ml", "ft", replica).len(), 1, "the Job replaced the evicted pod");
    assert!(api.job("ml", "urgent").is_some(), "the critical job was submitted");
    assert_ne!(status(d).0, "failed");
}

/// An API server that accepts connections and never answers: `check` (like `plan`, which
/// reads job status the same way) fails after the read timeout instead of hanging.
#[test]
fn a_hung_api_server_times_out_instead_of_hanging() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        // Accept and hold the connections without a byte of answer.
        let mut open = Vec::new();
        for c in listener.incoming().take(8) {
            open.push(c);
        }
        std::thread::sleep(std::time::Duration::from_secs(60));
    });
    let dir = fleet(&url, 0, 1);
    let mut child = command(dir.path(), &["check"])
        .env("GPUPLAN_KUBE_READ_TIMEOUT", "2s")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gpuplan starts");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(45) {
            child.kill().ok();
            panic!("`gpuplan check` hung on a silent API server");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(status.code(), Some(1), "{stdout}");
    assert!(stdout.to_lowercase().contains("timed out") || stdout.contains("timeout"), "{stdout}");
    drop(held);
}

/// `reconcile` watches the job pods of its `kubernetes {}` pools: a pod the cluster cannot
/// schedule (Pending, `PodScheduled=False`, `Unschedulable`) starts a pass within seconds
/// though the interval is an hour, once per pod.
#[test]
fn an_unschedulable_job_pod_starts_a_reconcile_pass_within_seconds() {
    use std::io::BufRead;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let api = FakeApi::start();
    let dir = fleet(&api.url, 1, 1);
    let mut child = command(dir.path(), &["reconcile", "--interval", "1h", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gpuplan starts");
    let collect = |stream: Box<dyn std::io::Read + Send>| {
        let lines = Arc::new(Mutex::new(Vec::<(Instant, String)>::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream).lines().map_while(Result::ok) {
                sink.lock().unwrap().push((Instant::now(), line));
            }
        });
        lines
    };
    let out = collect(Box::new(child.stdout.take().unwrap()));
    let err = collect(Box::new(child.stderr.take().unwrap()));
    let passes = || out.lock().unwrap().iter().filter(|(_, l)| l.starts_with('{')).map(|(t, _)| *t).collect::<Vec<_>>();
    let stderr = || err.lock().unwrap().iter().map(|(_, l)| format!("{l}\n")).collect::<String>();
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !ok() {
            assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}\n{}", stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait("the first pass", &|| passes().len() == 1);
    assert!(api.job("ml", "ft").is_some(), "the first pass submitted the Job");
    std::thread::sleep(Duration::from_secs(1));

    api.unschedulable("ml", "ft", 0);
    let marked = Instant::now();
    wait("a pass for the waiting pod", &|| passes().len() == 2);
    let latency = passes()[1].duration_since(marked);
    assert!(latency < Duration::from_secs(5), "the pass started {latency:?} after the pod turned unschedulable");
    assert!(
        stderr().contains("Job pod `ml/ft-0-1` is waiting for nodes (unschedulable): starting a pass"),
        "{}",
        stderr()
    );
    // Still waiting is no new trigger.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(passes().len(), 2, "one pass per pod that turned unschedulable");
    child.kill().unwrap();
    child.wait().unwrap();
    eprintln!("unschedulable pod to pass: {latency:?}");
}

/// A cluster that names nodes as EKS does (`ip-….ec2.internal`), two 8-GPU jobs on the
/// pool's two nodes: `pin` (not preemptible) and `spot` (preemptible).
fn named_nodes_spec(desired: u32) -> String {
    let pool = spec(0, 1);
    let start = pool.find("job_template").expect("the template");
    let pool = pool[..start].replace("desired = 2", &format!("desired = {desired}"));
    let jobs = ["pin", "spot"].iter().map(|name| {
        format!(
            "job_template \"{name}\" {{\n  image          = \"x\"\n  gpus           = 8\n  preemptible    = {}\n  retries        = 1\n  checkpoint_uri = \"s3://ckpt/{name}\"\n}}\n\njob \"{name}\" {{\n  template = job_template.{name}\n  pool     = gpu_pool.train\n}}\n",
            *name == "spot"
        )
    });
    pool + &jobs.collect::<String>()
}

fn pool_nodes(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("state/default.json")).expect("local state");
    let state: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().cloned().unwrap_or_default();
    nodes.iter().map(|n| n["id"].as_str().expect("an id").to_string()).collect()
}

/// Runs are matched to pool nodes through each Node's `spec.providerID`, not its name:
/// scaling the pool to zero defers the node of the job that is not preemptible, and lists
/// the preemptible one as interrupted (its pod evicted, the Job runs it again).
#[test]
fn pods_are_matched_to_pool_nodes_through_the_node_s_provider_id() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 0, 1);
    let d = dir.path();
    std::fs::write(d.join("main.hcl"), named_nodes_spec(2)).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let nodes = pool_nodes(d);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    let (pin_node, spot_node) = (&nodes[0], &nodes[1]);
    api.node("ip-10-0-1-11.ec2.internal", &format!("aws:///us-east-1a/{pin_node}"));
    api.node("ip-10-0-1-12.ec2.internal", &format!("aws:///us-east-1a/{spot_node}"));
    api.run_on("ml", "pin", 0, "ip-10-0-1-11.ec2.internal");
    api.run_on("ml", "spot", 0, "ip-10-0-1-12.ec2.internal");

    std::fs::write(d.join("main.hcl"), named_nodes_spec(0)).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    let change = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").expect("pool");
    let ids = |list: &serde_json::Value| -> Vec<String> {
        list.as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(&change["pool"]["deletes"]), [spot_node.as_str()], "{change:#}");
    assert_eq!(ids(&change["pool"]["deferred"]), [pin_node.as_str()], "{change:#}");
    assert_eq!(change["pool"]["deferred"][0]["job"], "job.pin");
    let job = |addr: &str| plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == addr).cloned().unwrap();
    let spot = job("job.spot");
    assert_eq!(spot["reason"]["code"], "node_removed", "{spot:#}");
    assert_eq!(spot["interrupted"][0]["node"], spot_node.as_str(), "{spot:#}");
    assert_eq!((spot["before"].as_str(), spot["after"].as_str()), (Some("running"), Some("requeued")));
    assert_eq!(job("job.pin")["reason"]["code"], "removal_deferred");

    let evicted = api.live_pods("ml", "spot", 0);
    ok(d, &["apply", "--auto-approve"]);
    let evictions: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p.ends_with("/eviction"))
        .map(|(_, p, _)| p)
        .collect();
    assert_eq!(evictions, [format!("/api/v1/namespaces/ml/pods/{}/eviction", evicted[0])]);
    assert_eq!(pool_nodes(d), [pin_node.as_str()], "the node of the job that is not preemptible stays");
    assert_eq!(api.job("ml", "spot").expect("the Job survives")["status"]["failed"], 0);
}

/// GPU health on a Kubernetes pool, from the API server double's Nodes: NVSentinel's
/// `SysLogsGPUFallenOff` marks its node (XID 79, first seen when the condition turned),
/// `nvidia.com/gpu` allocatable below capacity is `gpu_missing`, an application XID named
/// in node-problem-detector's `GPUXIDErrors` marks nothing, and a node matches its pool
/// node through `spec.providerID`. A cordon sets the Node's `spec.unschedulable`.
#[tokio::test(flavor = "multi_thread")]
async fn gpu_health_from_node_conditions_and_allocatable_and_a_cordon() {
    use gpuplan::model::health::{Signal, Source};
    use gpuplan::providers::Provider;
    use serde_json::json;
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::write(&cfg, kubeconfig_for(&api.url)).unwrap();
    let gpus = |alloc: &str| (json!({"nvidia.com/gpu": "8"}), json!({"nvidia.com/gpu": alloc}));
    let (cap, all) = gpus("8");
    api.node("ip-10-0-1-11.ec2.internal", "aws:///us-east-1a/i-0aaa");
    api.node_status("ip-10-0-1-11.ec2.internal", json!({"capacity": cap, "allocatable": all, "conditions": [
        {"type": "Ready", "status": "True"},
        {"type": "SysLogsGPUFallenOff", "status": "True", "reason": "GPUFallenOff",
         "message": "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", "lastTransitionTime": "2026-12-07T12:04:00Z"}]}));
    let (cap, all) = gpus("7");
    api.node("ip-10-0-1-12.ec2.internal", "aws:///us-east-1a/i-0bbb");
    api.node_status(
        "ip-10-0-1-12.ec2.internal",
        json!({"capacity": cap, "allocatable": all, "conditions": [
        {"type": "GPUXIDErrors", "status": "True", "reason": "XIDError", "message": "Xid 13 on GPU 0"}]}),
    );
    let (cap, all) = gpus("8");
    api.node("ip-10-0-1-13.ec2.internal", "aws:///us-east-1a/i-0ccc");
    api.node_status(
        "ip-10-0-1-13.ec2.internal",
        json!({"capacity": cap, "allocatable": all, "conditions": [
        {"type": "AcceleratedHardwareReady", "status": "True"}, {"type": "GPUMissing", "status": "False"}]}),
    );
    api.node("someone-elses", "aws:///us-east-1a/i-0zzz");

    let kube = gpuplan::providers::kube::KubeJobs::new(gpuplan::model::ProviderKind::Aws, dir.path(), None, "L1", None);
    let loc = gpuplan::providers::kube::locator(cfg.to_str().unwrap(), Some("fake"));
    let port = kube.health().expect("Kubernetes reads GPU health");
    let ids: Vec<String> = ["i-0aaa", "i-0bbb", "i-0ccc", "i-0gone"].map(String::from).to_vec();
    let read = port.read_health(&loc, &ids).await.expect("read");
    assert_eq!(read.iter().map(|h| h.node_id.as_str()).collect::<Vec<_>>(), ["i-0aaa", "i-0bbb", "i-0ccc"]);
    let f = &read[0].findings;
    assert_eq!(
        f.iter().map(|f| (f.signal, f.xid, f.source)).collect::<Vec<_>>(),
        [(Signal::XidFatal, Some(79), Source::Kubernetes)]
    );
    assert_eq!(f[0].seen_ms, 1_796_645_040_000, "first seen when the condition turned: {}", f[0].detail);
    assert!(f[0].detail.starts_with("NVSentinel SysLogsGPUFallenOff=True (GPUFallenOff)"), "{}", f[0].detail);
    let f = &read[1].findings;
    assert_eq!(f.iter().map(|f| f.signal).collect::<Vec<_>>(), [Signal::GpuMissing], "{f:?}");
    assert_eq!(
        (f[0].detail.as_str(), read[1].gpus_seen),
        ("7 of 8 nvidia.com/gpu allocatable (the device plugin took the rest out)", Some(7))
    );
    assert_eq!((read[2].findings.len(), read[2].gpus_seen), (0, Some(8)));

    port.cordon(&loc, "i-0aaa").await.expect("cordon");
    assert_eq!(api.node_object("ip-10-0-1-11.ec2.internal")["spec"]["unschedulable"], true);
    assert_eq!(api.node_object("ip-10-0-1-12.ec2.internal")["spec"].get("unschedulable"), None);
    let err = port.cordon(&loc, "i-0gone").await.expect_err("no such node");
    assert!(err.message.contains("no node of") && err.message.contains("i-0gone"), "{err}");
}

/// A multi-node job in a cluster: the Indexed Job's pods live under a headless Service of
/// its name, owned by the Job, so each replica reaches replica 0's pod by name with the
/// rendezvous variables a VM pool's replicas get; the Service goes with the Job.
#[test]
fn a_multi_node_job_rendezvous_through_a_headless_service_owned_by_its_job() {
    let api = FakeApi::start();
    let dir = fleet(&api.url, 0, 2);
    let d = dir.path();
    ok(d, &["apply", "--auto-approve"]);
    let job = api.job("ml", "ft").expect("the Job was created");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["subdomain"], "ft", "{pod}");
    let env = pod["containers"][0]["env"].as_array().expect("env");
    let value = |name: &str| env.iter().find(|e| e["name"] == name).cloned().unwrap_or_default();
    assert_eq!(value("GPUPLAN_MASTER_ADDR")["value"], "ft-0.ft");
    assert_eq!(value("GPUPLAN_MASTER_PORT")["value"], "29500");
    assert_eq!(value("GPUPLAN_NNODES")["value"], "2");
    assert_eq!(
        value("GPUPLAN_NODE_RANK")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );

    let svc = api.service("ml", "ft").expect("the headless Service was created");
    assert_eq!(svc["spec"]["clusterIP"], "None");
    assert_eq!(svc["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(svc["spec"]["selector"]["gpuplan.dev/job"], "ft");
    assert_eq!(job["spec"]["template"]["metadata"]["labels"]["gpuplan.dev/job"], "ft", "the selector finds the pods");
    let owner = &svc["metadata"]["ownerReferences"][0];
    assert_eq!((owner["kind"].as_str(), owner["uid"].as_str()), (Some("Job"), job["metadata"]["uid"].as_str()));
    assert_eq!(api.count("POST", "/namespaces/ml/services"), 1, "one Service for the job's two replicas");

    // Rendered the same way, Service included.
    let rendered = ok(d, &["jobs", "render", "ft"]).stdout;
    assert!(rendered.contains("kind: Service") && rendered.contains("clusterIP: None"), "{rendered}");

    // Cancelled: the Job goes, and its Service with it.
    ok(d, &["jobs", "cancel", "ft"]);
    assert!(api.job("ml", "ft").is_none() && api.service("ml", "ft").is_none());
}

/// The fleet of [`spec`] with a `health {}` block of `action`.
fn health_spec(action: &str) -> String {
    spec(0, 1).replace("  kubernetes {\n", &format!("  health {{\n    action = \"{action}\"\n  }}\n  kubernetes {{\n"))
}

/// Done when: the Kubernetes double shows a cordon and a replace from node conditions.
/// node-problem-detector's `GPUXIDErrors` naming XID 79 on one pool node's Node marks it:
/// a quarantine pool's plan shows the cordon and its apply patches the Node's
/// `spec.unschedulable` (once: a cordoned node is not cordoned again); the same pool set to
/// replace replaces the node, new node first.
#[test]
fn node_conditions_drive_a_cordon_and_a_replace() {
    use serde_json::json;
    let api = FakeApi::start();
    let dir = fleet(&api.url, 0, 1);
    let d = dir.path();
    std::fs::write(d.join("main.hcl"), health_spec("quarantine")).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let nodes = pool_nodes(d);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    // A node the cluster does not have yet (not joined) is quarantined with nothing to cordon.
    ok(d, &["sim", "fault", &nodes[0], "--xid", "79"]);
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    assert_eq!(plan["health"][0]["action"], "quarantine", "{plan:#}");
    assert!(plan["health"][0].get("cordon").is_none(), "{plan:#}");
    ok(d, &["sim", "fault", &nodes[0], "--clear"]);
    let gpus = json!({"nvidia.com/gpu": "8"});
    let (bad, good) = ("ip-10-0-1-11.ec2.internal", "ip-10-0-1-12.ec2.internal");
    api.node(bad, &format!("aws:///us-east-1a/{}", nodes[0]));
    api.node_status(
        bad,
        json!({"capacity": gpus, "allocatable": gpus, "conditions": [
        {"type": "GPUXIDErrors", "status": "True", "reason": "XIDError",
         "message": "Xid 79: GPU has fallen off the bus", "lastTransitionTime": "2026-12-07T12:04:00Z"}]}),
    );
    api.node(good, &format!("aws:///us-east-1a/{}", nodes[1]));
    api.node_status(good, json!({"capacity": gpus, "allocatable": gpus}));

    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    let health = plan["health"].as_array().unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(health.len(), 1, "{plan:#}");
    let h = &health[0];
    assert_eq!(
        (h["node"].as_str(), h["signal"].as_str(), h["xid"].as_u64()),
        (Some(nodes[0].as_str()), Some("xid_fatal"), Some(79))
    );
    assert_eq!(
        (h["action"].as_str(), h["cordon"]["provider"].as_str()),
        (Some("quarantine"), Some("@kubernetes.sim")),
        "{h:#}"
    );
    let text = ok(d, &["plan"]).stdout;
    let line =
        format!("!   {} quarantine, cordon: XID 79 (node-problem-detector GPUXIDErrors=True (XIDError)", nodes[0]);
    assert!(text.contains(&line) && text.contains("1 to cordon"), "{text}");
    assert_eq!(gpuplan(d, &["plan", "--detailed-exitcode"]).code, 2, "a cordon is a change");

    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(api.node_object(bad)["spec"]["unschedulable"], true);
    assert_eq!(api.node_object(good)["spec"].get("unschedulable"), None);
    assert_eq!(api.count("PATCH", &format!("/nodes/{bad}")), 1);
    assert_eq!(pool_nodes(d), nodes, "a quarantine keeps the node");
    // Cordoned already: still quarantined, nothing left to call.
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    assert_eq!(plan["health"][0]["action"], "quarantine", "{plan:#}");
    assert!(plan["health"][0].get("cordon").is_none(), "{plan:#}");
    ok(d, &["apply", "--auto-approve"]);
    let patches = api.requests().into_iter().filter(|(m, p, _)| m == "PATCH" && p.contains("/nodes/")).count();
    assert_eq!(patches, 1, "no second cordon");

    // The same pool set to replace: the node goes, a new one first.
    std::fs::write(d.join("main.hcl"), health_spec("replace")).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"]).stdout).expect("JSON");
    assert_eq!(plan["health"][0]["action"], "replace", "{plan:#}");
    let change = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").expect("pool");
    let deletes = change["pool"]["deletes"].as_array().unwrap();
    assert_eq!(deletes.len(), 1, "{change:#}");
    assert_eq!(deletes[0]["id"], nodes[0].as_str());
    assert!(deletes[0]["reason"].as_str().unwrap().starts_with("replaced: XID 79"), "{change:#}");
    ok(d, &["apply", "--auto-approve"]);
    let after = pool_nodes(d);
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(!after.contains(&nodes[0]) && after.contains(&nodes[1]), "{after:?}");
}
