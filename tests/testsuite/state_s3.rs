//! Remote state on S3, end to end: the real binary against moto's S3 server (started by
//! `scripts/test`, which exports GPUPLAN_TEST_MOTO_ENDPOINT; moto honours If-None-Match
//! and If-Match on PutObject). Each test uses a bucket of its own.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub(crate) fn endpoint() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!(
            "GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which installs moto into .venv/ and starts it"
        ),
    }
}

/// A raw HTTP/1.0 request to moto (bucket creation needs no signature there): (status, body).
fn http(method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let host = endpoint().trim_start_matches("http://").trim_end_matches('/').to_string();
    let mut s = TcpStream::connect(&host).expect("moto answers");
    let head = format!("{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let status: u16 = String::from_utf8_lossy(&out[..split]).split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, out[split + 4..].to_vec())
}

/// A new bucket for one test.
pub(crate) fn bucket() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!("gp-state-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let (status, _) = http("PUT", &format!("/{name}"), b"");
    assert_eq!(status, 200, "create bucket {name}");
    name
}

/// The S3 client the tests read and write objects with (signed, as moto wants for objects).
fn store(bucket: &str) -> object_store::aws::AmazonS3 {
    gpuplan::model::tls::install_ring();
    object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint())
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_bucket_name(bucket)
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .build()
        .expect("an S3 client")
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

pub(crate) fn object(bucket: &str, key: &str) -> Option<Vec<u8>> {
    use object_store::ObjectStoreExt;
    let s = store(bucket);
    block(async move {
        match s.get(&object_store::path::Path::from(key)).await {
            Ok(r) => Some(r.bytes().await.expect("object body").to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("GET {key}: {e}"),
        }
    })
}

fn put(bucket: &str, key: &str, body: &'static [u8]) {
    use object_store::ObjectStoreExt;
    let s = store(bucket);
    block(async move { s.put(&object_store::path::Path::from(key), body.into()).await.expect("PUT") });
}

fn spec(bucket: &str, endpoint: &str, pools: usize) -> String {
    let mut s = format!(
        r#"gpuplan {{
  backend "s3" {{
    bucket   = "{bucket}"
    key      = "fleets/prod.json"
    region   = "us-east-1"
    endpoint = "{endpoint}"
  }}
}}

provider "sim" {{}}
"#
    );
    for i in 0..pools {
        s += &format!(
            r#"
gpu_pool "p{i}" {{
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {{
    min     = 0
    desired = 2
    max     = 4
  }}
  mix {{
    on_demand_base = 0
    spot_percent   = 50
  }}
}}
"#
        );
    }
    s
}

pub(crate) fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ENDPOINT")
        .env_remove("AWS_PROFILE")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    run_env(dir, args, &[])
}

fn run_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = command(dir, args, env).output().expect("gpuplan runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn spawn(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
    command(dir, args, env).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("gpuplan starts")
}

pub(crate) fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn state_json(bucket: &str) -> serde_json::Value {
    decoded(&object(bucket, "fleets/prod.json").expect("the state object exists"))
}

/// A state object's JSON, out of its compressed envelope (docs/design/state-and-locks.md).
pub(crate) fn decoded(object: &[u8]) -> serde_json::Value {
    assert!(object.starts_with(br#"{"encoding":"gzip+base64","format_version":3,"#), "an envelope");
    let text = gpuplan::state::envelope::decode(object).expect("an envelope gpuplan reads");
    crate::state_plain::plain(serde_json::from_slice(&text).unwrap())
}

pub(crate) fn node_count(state: &serde_json::Value, pool: &str) -> usize {
    state["resources"][pool]["nodes"].as_array().map_or(0, Vec::len)
}

fn setup(pools: usize) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let b = bucket();
    std::fs::write(tmp.path().join("main.hcl"), spec(&b, &endpoint(), pools)).unwrap();
    (tmp, b)
}

#[test]
fn apply_writes_the_state_object_and_no_local_state_and_the_next_plan_is_clean() {
    let (tmp, b) = setup(2);
    let init = run(tmp.path(), &["init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(init.stderr.contains(&format!("s3://{b}/fleets/prod.json")) && init.stderr.contains("can be locked"));
    assert!(object(&b, "fleets/prod.json").is_none(), "init writes no state");

    let apply = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert!(!tmp.path().join("state/default.json").exists(), "no local state file");
    assert!(!tmp.path().join("state/default.json.journal").exists(), "no local journal");
    let state = state_json(&b);
    assert_eq!(node_count(&state, "gpu_pool.p0"), 2);
    assert_eq!(node_count(&state, "gpu_pool.p1"), 2);
    assert!(object(&b, "fleets/prod.json.lock").is_none(), "the lock is released");
    // The first write has no previous version to keep (`workspaces_live_in_the_store...`
    // sees the backup of a second).
    assert!(object(&b, "fleets/prod.json.backup").is_none(), "a backup of nothing");

    let plan = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "a fresh runner sees the remote state:\n{}\n{}", plan.stdout, plan.stderr);
    let list = run(tmp.path(), &["state", "list"]);
    assert_eq!(list.stdout, "gpu_pool.p0\ngpu_pool.p1\n");

    // Another workspace is another object: `env:/staging/fleets/prod.json`. It must exist
    // first (`init` makes the one chosen); a mistyped one is refused, writing nothing.
    let staging = [("GPUPLAN_WORKSPACE", "staging")];
    let missing = run_env(tmp.path(), &["apply", "--auto-approve"], &staging);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(missing.stderr.contains("workspace `staging` does not exist"), "{}", missing.stderr);
    assert!(object(&b, "env:/staging/fleets/prod.json.lock").is_none(), "no lock taken");
    assert!(object(&b, "env:/staging/fleets/prod.json").is_none(), "no state written");
    let init = run_env(tmp.path(), &["init"], &staging);
    assert!(init.code == 0 && init.stderr.contains("workspace `staging`"), "{}", init.stderr);
    let ws = run_env(tmp.path(), &["apply", "--auto-approve"], &staging);
    assert_eq!(ws.code, 0, "{}", ws.stderr);
    let staged = object(&b, "env:/staging/fleets/prod.json").expect("the workspace's object");
    let staged = decoded(&staged);
    assert_ne!(staged["lineage"], state["lineage"], "a workspace has its own lineage");
}

/// Workspaces of a remote backend are the store's: listed from `env:/`, made by `workspace
/// new` (an empty state object), deleted with their objects; `default` is `key` itself.
#[test]
fn workspaces_live_in_the_store_and_are_listed_from_it() {
    let (tmp, b) = setup(1);
    let dir = tmp.path();
    assert_eq!(run(dir, &["workspace", "list"]).stdout, "* default\n");
    let new = run(dir, &["workspace", "new", "staging"]);
    assert_eq!(new.code, 0, "{}", new.stderr);
    assert!(new.stderr.contains("Switched to workspace `staging`"), "{}", new.stderr);
    let empty = decoded(&object(&b, "env:/staging/fleets/prod.json").expect("the new workspace's state"));
    assert_eq!(empty["resources"], serde_json::json!({}), "{empty}");
    assert!(object(&b, "env:/staging/fleets/prod.json.lock").is_none(), "the lock is released");
    assert!(object(&b, "fleets/prod.json").is_none(), "the default workspace is untouched");
    // Another checkout, sharing only the store, sees it too.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("main.hcl"), other.path().join("main.hcl")).unwrap();
    assert_eq!(run(other.path(), &["workspace", "list"]).stdout, "* default\n  staging\n");
    let twice = run(other.path(), &["workspace", "new", "staging"]);
    assert!(twice.code == 1 && twice.stderr.contains("already exists"), "{}", twice.stderr);

    // The selected workspace is the one applied.
    assert_eq!(run(dir, &["apply", "--auto-approve"]).code, 0);
    assert!(object(&b, "fleets/prod.json").is_none(), "applied in staging, not default");
    let state = decoded(&object(&b, "env:/staging/fleets/prod.json").unwrap());
    assert_eq!(node_count(&state, "gpu_pool.p0"), 2);
    assert!(object(&b, "env:/staging/fleets/prod.json.backup").is_some(), "the empty state is kept as the backup");

    assert_eq!(run(dir, &["workspace", "select", "default"]).code, 0);
    let refused = run(dir, &["workspace", "delete", "staging"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("still manages 1 resource with 2 live nodes"), "{}", refused.stderr);
    assert!(object(&b, "env:/staging/fleets/prod.json").is_some(), "a refused delete removes nothing");
    let forced = run(dir, &["workspace", "delete", "staging", "--force"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(forced.stderr.contains("keep running and billing"), "{}", forced.stderr);
    for key in
        ["env:/staging/fleets/prod.json", "env:/staging/fleets/prod.json.backup", "env:/staging/fleets/prod.json.lock"]
    {
        assert!(object(&b, key).is_none(), "{key} is left");
    }
    assert_eq!(run(dir, &["workspace", "list"]).stdout, "* default\n");
}

#[test]
fn a_second_writer_fails_at_once_naming_the_holder() {
    let (tmp, b) = setup(3);
    let slow =
        spawn(tmp.path(), &["apply", "--auto-approve", "--parallelism", "1"], &[("GPUPLAN_SIM_LATENCY", "700ms")]);
    wait_for("the first apply's lock", Duration::from_secs(30), || object(&b, "fleets/prod.json.lock").is_some());
    let lock: serde_json::Value = serde_json::from_slice(&object(&b, "fleets/prod.json.lock").unwrap()).unwrap();
    let id = lock["id"].as_str().unwrap().to_string();
    assert_eq!(lock["operation"], "apply");

    let t = Instant::now();
    let second = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(second.code, 1, "{}", second.stderr);
    assert!(t.elapsed() < Duration::from_secs(20), "without --lock-timeout it fails at once");
    assert!(second.stderr.contains("is locked by"), "{}", second.stderr);
    assert!(second.stderr.contains(&format!("gpuplan state unlock {id}")), "{}", second.stderr);
    assert!(second.stderr.contains(&format!("s3://{b}/fleets/prod.json.lock")), "{}", second.stderr);

    let first = slow.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(node_count(&state_json(&b), "gpu_pool.p2"), 2);

    // With --lock-timeout a waiter gets the lock once it is free.
    let wait = run(tmp.path(), &["plan", "--lock-timeout", "10s", "--detailed-exitcode"]);
    assert_eq!(wait.code, 0, "{}", wait.stderr);
}

#[test]
fn kill_9_mid_apply_leaves_the_lock_then_unlock_and_apply_converge_without_duplicates() {
    let (tmp, b) = setup(6);
    let mut child =
        spawn(tmp.path(), &["apply", "--auto-approve", "--parallelism", "1"], &[("GPUPLAN_SIM_LATENCY", "500ms")]);
    wait_for("a first progress write", Duration::from_secs(60), || {
        object(&b, "fleets/prod.json").is_some_and(|s| {
            let s = decoded(&s);
            (0..6).any(|i| node_count(&s, &format!("gpu_pool.p{i}")) > 0)
        })
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let partial = state_json(&b);
    let recorded: usize = (0..6).map(|i| node_count(&partial, &format!("gpu_pool.p{i}"))).sum();
    assert!(recorded > 0 && recorded < 12, "progress was written before the kill: {recorded} node(s)");

    let locked = run(tmp.path(), &["plan"]);
    assert_eq!(locked.code, 1, "{}", locked.stderr);
    let lock: serde_json::Value = serde_json::from_slice(&object(&b, "fleets/prod.json.lock").unwrap()).unwrap();
    let id = lock["id"].as_str().unwrap();
    assert!(locked.stderr.contains(&format!("gpuplan state unlock {id}")), "{}", locked.stderr);

    let wrong = run(tmp.path(), &["state", "unlock", "not-the-id"]);
    assert_eq!(wrong.code, 1, "{}", wrong.stderr);
    assert!(object(&b, "fleets/prod.json.lock").is_some(), "a wrong id removes nothing");
    let unlock = run(tmp.path(), &["state", "unlock", id]);
    assert_eq!(unlock.code, 0, "{}", unlock.stderr);
    assert!(unlock.stderr.contains("Unlocked") && unlock.stderr.contains("s3://"), "{}", unlock.stderr);

    let apply = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    let state = state_json(&b);
    for i in 0..6 {
        assert_eq!(node_count(&state, &format!("gpu_pool.p{i}")), 2, "gpu_pool.p{i}: no duplicate, none missing");
    }
    let plan = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "converged, no orphan left:\n{}", plan.stdout);
    let drift = run(tmp.path(), &["drift"]);
    assert_eq!(drift.code, 0, "{}\n{}", drift.stdout, drift.stderr);
}

#[test]
fn migrate_state_keeps_the_lineage_and_refuses_another_fleets_state() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bucket();
    let full = spec(&b, &endpoint(), 1);
    let local_only = full[full.find("provider \"sim\"").unwrap()..].to_string();
    std::fs::write(tmp.path().join("main.hcl"), &local_only).unwrap();
    assert_eq!(run(tmp.path(), &["apply", "--auto-approve"]).code, 0);
    let local: serde_json::Value = crate::state_plain::read(&tmp.path().join("state/default.json"));

    std::fs::write(tmp.path().join("main.hcl"), &full).unwrap();
    let before = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(before.code, 2, "without migration the remote is empty: the plan wants to create");
    // That plan left an empty remote state of a new lineage: migrating over it loses nothing.
    let m = run(tmp.path(), &["init", "--migrate-state"]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert!(m.stderr.contains("Migrated"), "{}", m.stderr);
    let remote = state_json(&b);
    assert_eq!(remote["lineage"], local["lineage"]);
    assert!(remote["serial"].as_u64() > local["serial"].as_u64());
    let plan = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
    let again = run(tmp.path(), &["init", "--migrate-state"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("nothing copied"), "{}", again.stderr);

    // A local state of another lineage is refused, and nothing is written.
    let mut other = local.clone();
    other["lineage"] = "another-fleet".into();
    other["serial"] = 99.into();
    std::fs::write(tmp.path().join("state/default.json"), serde_json::to_vec(&other).unwrap()).unwrap();
    let refused = run(tmp.path(), &["init", "--migrate-state"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("refusing to migrate"), "{}", refused.stderr);
    assert_eq!(state_json(&b), remote, "nothing written");
}

#[test]
fn state_push_checks_lineage_and_serial_and_pull_prints_the_state() {
    let (tmp, b) = setup(1);
    assert_eq!(run(tmp.path(), &["apply", "--auto-approve"]).code, 0);
    let pull = run(tmp.path(), &["state", "pull"]);
    assert_eq!(pull.code, 0, "{}", pull.stderr);
    let pulled: serde_json::Value = serde_json::from_str(&pull.stdout).unwrap();
    // The object leaves out the ownership tags gpuplan rebuilds on read; pull shows them.
    let mut stored = pulled.clone();
    for r in stored["resources"].as_object_mut().unwrap().values_mut() {
        for n in r["nodes"].as_array_mut().into_iter().flatten() {
            let tags = n.as_object_mut().unwrap().remove("tags").expect("pull shows the tags");
            assert!(tags.as_object().unwrap().keys().all(|k| k.starts_with("gpuplan:")), "{tags}");
        }
    }
    assert_eq!(stored, state_json(&b));

    let file = tmp.path().join("old.json");
    let mut old = pulled.clone();
    old["serial"] = (pulled["serial"].as_u64().unwrap() - 1).into();
    std::fs::write(&file, serde_json::to_vec(&old).unwrap()).unwrap();
    let refused = run(tmp.path(), &["state", "push", "old.json"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("lower than the current state"), "{}", refused.stderr);
    let mut foreign = pulled.clone();
    foreign["lineage"] = "x".into();
    std::fs::write(&file, serde_json::to_vec(&foreign).unwrap()).unwrap();
    let refused = run(tmp.path(), &["state", "push", "old.json"]);
    assert!(refused.code == 1 && refused.stderr.contains("another fleet"), "{}", refused.stderr);
    assert_eq!(state_json(&b), stored, "nothing written");

    std::fs::write(&file, serde_json::to_vec(&old).unwrap()).unwrap();
    let forced = run(tmp.path(), &["state", "push", "--force", "old.json"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    let now = state_json(&b);
    assert!(now["serial"].as_u64() > pulled["serial"].as_u64(), "a push always moves the serial forward");
    assert_eq!(now["history"].as_array().unwrap().last().unwrap()["event"], "state_push");
}

#[test]
fn a_corrupt_remote_state_is_an_error_naming_the_object_and_nothing_is_written() {
    let (tmp, b) = setup(1);
    put(&b, "fleets/prod.json", b"{\"format_version\": 1, \"serial\": ");
    let plan = run(tmp.path(), &["plan"]);
    assert_eq!(plan.code, 1);
    assert!(plan.stderr.contains(&format!("s3://{b}/fleets/prod.json")), "{}", plan.stderr);
    assert!(plan.stderr.contains("unreadable"), "{}", plan.stderr);
    let apply = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(apply.code, 1);
    assert_eq!(object(&b, "fleets/prod.json").unwrap(), b"{\"format_version\": 1, \"serial\": ");
    assert!(object(&b, "fleets/prod.json.lock").is_none(), "the lock is released on the error");
}

#[test]
fn a_missing_bucket_and_an_unreachable_endpoint_are_errors_naming_the_object() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), spec("no-such-bucket-gp", &endpoint(), 1)).unwrap();
    let r = run(tmp.path(), &["plan"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("s3://no-such-bucket-gp/fleets/prod.json"), "{}", r.stderr);
    assert!(r.stderr.contains("bucket"), "{}", r.stderr);
    assert!(!tmp.path().join("state/default.json").exists(), "no local fallback");

    std::fs::write(tmp.path().join("main.hcl"), spec("b", "http://127.0.0.1:9", 1)).unwrap();
    let r = run(tmp.path(), &["plan"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("s3://b/fleets/prod.json"), "{}", r.stderr);
    assert!(r.stderr.contains("reachable"), "{}", r.stderr);

    // No credentials anywhere: a clear error, not a hang on the metadata service.
    let (tmp2, _) = setup(1);
    let out = command(tmp2.path(), &["plan"], &[])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("credentials") || stderr.contains("AWS_ACCESS_KEY_ID"), "{stderr}");
}

#[test]
fn check_proves_each_provider_and_the_backend_and_names_each_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bucket();
    let ok = format!(
        "{}\nprovider \"aws\" {{\n  region   = \"us-east-1\"\n  endpoint = \"{}\"\n  image    = \"ami-0123456789abcdef0\"\n}}\n",
        spec(&b, &endpoint(), 1),
        endpoint()
    );
    std::fs::write(tmp.path().join("main.hcl"), &ok).unwrap();
    let r = run(tmp.path(), &["check"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!("ok   state backend: s3://{b}/fleets/prod.json: reachable, no state yet")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("ok   provider \"aws\" (aws, us-east-1)"), "{}", r.stdout);
    assert!(r.stdout.contains("ok   provider \"sim\""), "{}", r.stdout);
    assert!(r.stdout.contains("3 passed, 0 failed"), "{}", r.stdout);
    assert!(
        object(&b, "fleets/prod.json").is_none() && object(&b, "fleets/prod.json.lock").is_none(),
        "check writes nothing"
    );

    // A missing bucket and an unreachable cloud endpoint: both reported, with hints, exit 1.
    let bad = ok
        .replace(&format!("bucket   = \"{b}\""), "bucket   = \"no-such-bucket-gp\"")
        .replace(&format!("  endpoint = \"{}\"\n  image", endpoint()), "  endpoint = \"http://127.0.0.1:9\"\n  image");
    std::fs::write(tmp.path().join("main.hcl"), &bad).unwrap();
    let r = run(tmp.path(), &["check"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FAIL state backend: s3://no-such-bucket-gp/fleets/prod.json"), "{}", r.stdout);
    assert!(
        r.stdout.contains("the bucket does not exist") && r.stdout.contains("gpuplan never creates buckets"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("FAIL provider \"aws\" (aws, us-east-1)"), "{}", r.stdout);
    assert!(r.stdout.contains("1 passed, 2 failed"), "{}", r.stdout);
}

/// The CI recipes' flow (examples/ci/): plan on the pull request with `--out`, render it
/// for the comment with `show`, apply exactly that file on merge, reconcile on a schedule;
/// all against the S3 state. A plan applied once is refused the second time.
#[test]
fn the_ci_flow_plan_out_show_apply_planfile_reconcile_runs_on_remote_state() {
    let (tmp, b) = setup(2);
    assert_eq!(run(tmp.path(), &["check"]).code, 0);
    let plan = run(tmp.path(), &["plan", "--out", "pr.plan", "--detailed-exitcode", "--lock-timeout", "5m"]);
    assert_eq!(plan.code, 2, "{}", plan.stderr);
    let md = run(tmp.path(), &["show", "pr.plan", "--format", "markdown"]);
    assert_eq!(md.code, 0);
    assert!(md.stdout.contains("gpu_pool.p0") && md.stdout.contains("gpu_pool.p1"), "{}", md.stdout);
    let apply = run(tmp.path(), &["apply", "pr.plan", "--lock-timeout", "10m"]);
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(node_count(&state_json(&b), "gpu_pool.p1"), 2);
    let again = run(tmp.path(), &["apply", "pr.plan"]);
    assert_eq!(again.code, 1, "a plan applied once is stale: {}", again.stderr);
    assert!(object(&b, "fleets/prod.json.lock").is_none());
    let reconcile = run(tmp.path(), &["reconcile", "--once", "--lock-timeout", "10m", "--detailed-exitcode"]);
    assert_eq!(reconcile.code, 0, "nothing drifted:\n{}\n{}", reconcile.stdout, reconcile.stderr);
}

/// An S3 endpoint that refuses everything with `403 AccessDenied`, as a bucket policy
/// would (moto does not enforce auth): the error names the object and nothing is written.
#[test]
fn access_denied_is_a_clear_error_naming_the_object() {
    let (url, _) = crate::http_stub::serve(|_, _| {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";
        (403, "application/xml", xml.to_string())
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), spec("locked-down", &url, 1)).unwrap();
    for args in [&["plan"][..], &["apply", "--auto-approve"], &["state", "pull"]] {
        let r = run(tmp.path(), args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("s3://locked-down/fleets/prod.json"), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("access denied") && r.stderr.contains("AccessDenied"), "{args:?}: {}", r.stderr);
    }
    assert!(!tmp.path().join("state/default.json").exists(), "no local fallback");
    let check = run(tmp.path(), &["check"]);
    assert_eq!(check.code, 1);
    assert!(check.stdout.contains("FAIL state backend") && check.stdout.contains("access denied"), "{}", check.stdout);
}

/// Static keys from a shared credentials file (`AWS_PROFILE`), as CI runners and laptops
/// keep them: without them the store would fall through to the metadata service and fail.
#[test]
fn credentials_come_from_a_named_profile_in_the_shared_files() {
    let (tmp, b) = setup(1);
    let creds = tmp.path().join("aws-credentials");
    std::fs::write(&creds, "[ci]\naws_access_key_id = testing\naws_secret_access_key = testing\n").unwrap();
    let with_profile = |profile: &str| {
        command(tmp.path(), &["apply", "--auto-approve"], &[])
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
            .env("AWS_CONFIG_FILE", tmp.path().join("no-aws-config"))
            .env("AWS_PROFILE", profile)
            .output()
            .unwrap()
    };
    let out = with_profile("ci");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(node_count(&state_json(&b), "gpu_pool.p0"), 2);

    let out = with_profile("nope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("AWS_PROFILE=nope"), "{stderr}");
}

/// A remote lock left by a killed run stops every reconcile round; each round says so with
/// the holder and the `state unlock` command (not just the first one).
#[test]
fn reconcile_reports_a_dead_remote_lock_every_round_with_the_unlock_command() {
    let (tmp, b) = setup(1);
    put(
        &b,
        "fleets/prod.json.lock",
        br#"{"id":"5b0c1f5e-0000-4000-8000-00000000dead","who":"ci@runner-7","pid":4242,"operation":"apply","created":"2026-01-01T00:00:00Z"}"#,
    );
    let mut child = spawn(tmp.path(), &["reconcile", "--interval", "1s"], &[]);
    std::thread::sleep(Duration::from_millis(3500));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let unlock = "gpuplan state unlock 5b0c1f5e-0000-4000-8000-00000000dead";
    assert!(stderr.matches(unlock).count() >= 2, "every skipped round names the way out:\n{stderr}");
    assert!(stderr.contains("rounds in a row") && stderr.contains("ci@runner-7"), "{stderr}");
}

/// Remote locks expire (lifetime and renewal shortened for the test): a live holder's
/// heartbeat keeps its lock however long it works, so a waiter longer than the lifetime
/// still finds it locked; once the holder is killed (-9) its lock expires and the next
/// reconcile takes it over by compare-and-swap, naming the old holder, and converges.
#[test]
fn an_expired_lock_of_a_killed_holder_is_taken_over_and_a_live_one_never_is() {
    let fast = [("GPUPLAN_LOCK_TTL", "2s"), ("GPUPLAN_LOCK_RENEW", "400ms")];
    let (tmp, b) = setup(3);
    let slow_env = [fast[0], fast[1], ("GPUPLAN_SIM_LATENCY", "1s")];
    let mut holder = spawn(tmp.path(), &["apply", "--auto-approve", "--parallelism", "1"], &slow_env);
    wait_for("the first apply's lock", Duration::from_secs(30), || object(&b, "fleets/prod.json.lock").is_some());
    let lock = |b: &str| -> serde_json::Value {
        serde_json::from_slice(&object(b, "fleets/prod.json.lock").expect("a lock object")).unwrap()
    };
    let first = lock(&b);
    let id = first["id"].as_str().unwrap().to_string();
    let expires = |l: &serde_json::Value| humantime::parse_rfc3339_weak(l["expires"].as_str().unwrap()).unwrap();
    assert!(expires(&first) > std::time::SystemTime::now(), "the lock says when it expires: {first}");

    // A waiter for 3 s (longer than the 2 s lifetime) never gets a live holder's lock.
    let waiter = run_env(tmp.path(), &["plan", "--lock-timeout", "3s"], &fast);
    assert_eq!(waiter.code, 1, "{}", waiter.stderr);
    assert!(waiter.stderr.contains("is locked by"), "{}", waiter.stderr);
    let renewed = lock(&b);
    assert_eq!(renewed["id"], id.as_str(), "still the holder's lock");
    assert!(expires(&renewed) > expires(&first), "the heartbeat moved the expiry ahead: {first} → {renewed}");
    assert!(holder.try_wait().unwrap().is_none(), "the holder is still working");

    holder.kill().unwrap(); // SIGKILL: no release, no more renewals
    holder.wait().unwrap();
    let t = Instant::now();
    let next = run_env(tmp.path(), &["reconcile", "--once", "--lock-timeout", "20s"], &fast);
    assert_eq!(next.code, 0, "{}\n{}", next.stdout, next.stderr);
    assert!(t.elapsed() < Duration::from_secs(15), "taken over soon after expiry: {:?}", t.elapsed());
    assert!(next.stderr.contains("took over the expired state lock of `gpuplan apply`"), "{}", next.stderr);
    assert!(next.stderr.contains(&id) && next.stderr.contains(first["who"].as_str().unwrap()), "{}", next.stderr);
    assert!(object(&b, "fleets/prod.json.lock").is_none(), "the new holder released it");
    let state = state_json(&b);
    for i in 0..3 {
        assert_eq!(node_count(&state, &format!("gpu_pool.p{i}")), 2, "gpu_pool.p{i}: converged, no duplicate");
    }
}

/// A lock written without `expires` (older gpuplan, or another tool) never expires: it is
/// not taken over however old, and `state unlock` stays the way out.
#[test]
fn a_lock_without_an_expiry_is_never_taken_over() {
    let (tmp, b) = setup(1);
    put(
        &b,
        "fleets/prod.json.lock",
        br#"{"id":"5b0c1f5e-0000-4000-8000-0000000000aa","who":"ci@old","operation":"apply","created":"2020-01-01T00:00:00Z"}"#,
    );
    let out = run_env(
        tmp.path(),
        &["plan", "--lock-timeout", "1s"],
        &[("GPUPLAN_LOCK_TTL", "1s"), ("GPUPLAN_LOCK_RENEW", "200ms")],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("ci@old") && out.stderr.contains("gpuplan state unlock"), "{}", out.stderr);
    assert!(String::from_utf8_lossy(&object(&b, "fleets/prod.json.lock").unwrap()).contains("ci@old"));
}
