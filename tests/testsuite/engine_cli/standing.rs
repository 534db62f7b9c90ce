//! Standing policy violations through the binary (docs/design/cli.md, "The daily loop"): after an
//! apply with `--override-policy`, a soft policy keeps failing on the fleet as it stands.
//! A plan without changes is not denied for it (`plan` and `reconcile` exit 0) and says
//! so; a plan with changes is denied as before and names what was already failing;
//! `reconcile` reports it once (its hooks, its metric), not as a failed pass.

use std::io::{BufRead, BufReader, Read, Write};
use std::time::Duration;

use crate::engine_cli::{Fleet, PROVIDER, pool, wait_until};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One on-demand pool (0 % spot, below `min_spot_share`), with extra spec text.
fn spec(desired: u32, extra: &str) -> String {
    format!("{PROVIDER}{}{extra}", pool("train", &["us-east-1a"], desired, ""))
}

/// A fleet whose `min_spot_share` fails and was overridden at apply: a standing violation.
fn overridden_fleet(extra: &str) -> Fleet {
    let fleet = Fleet::new(&spec(2, extra));
    std::fs::create_dir_all(fleet.path().join("policies")).expect("mkdir policies");
    std::fs::copy(format!("{ROOT}/policies/min_spot_share.hcl"), fleet.path().join("policies/min_spot_share.hcl"))
        .expect("copy the policy");
    // Planned on a new fleet, the failure is the plan's own, not a standing one.
    let first = fleet.run(&["plan"]).expect(3);
    assert!(first.stdout.contains("FAIL min_spot_share (soft): gpu_pool.train runs 0%"), "{}", first.stdout);
    assert!(!first.stderr.contains("already failing"), "{}", first.stderr);
    fleet.run(&["apply", "--auto-approve", "--override-policy", "min_spot_share"]).expect(0);
    fleet
}

/// What a snapshot holds: exit code, stdout and stderr, with the pass's time hidden.
fn shown(r: &crate::engine_cli::Run) -> String {
    let text = format!("exit code: {}\n----- stdout -----\n{}----- stderr -----\n{}", r.code, r.stdout, r.stderr);
    text.lines()
        .map(|l| match l.strip_prefix("reconcile ").and_then(|rest| rest.split_once(": ")) {
            Some((_, verdict)) => format!("reconcile <time>: {verdict}"),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Snapshots live with the others in `tests/testsuite/snapshots/`.
fn snapshot(name: &str, r: &crate::engine_cli::Run) {
    insta::with_settings!({ snapshot_path => "../snapshots", omit_expression => true }, {
        insta::assert_snapshot!(name, shown(r));
    });
}

#[test]
fn a_plan_without_changes_is_not_denied_for_a_standing_violation() {
    let fleet = overridden_fleet("");
    let plan = fleet.run(&["plan"]).expect(0);
    snapshot("standing_plan_without_changes", &plan);
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    let apply = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(apply.stderr.contains("Apply complete! No changes."), "{}", apply.stderr);

    // Reconcile: no failed pass; the violation is reported once, then stays recorded.
    let first = fleet.run(&["reconcile", "--once", "--detailed-exitcode"]).expect(0);
    snapshot("standing_reconcile_first_pass", &first);
    let standing = fleet.state().standing;
    assert_eq!(standing.keys().collect::<Vec<_>>(), ["min_spot_share[gpu_pool.train]"], "{standing:?}");
    let second = fleet.run(&["reconcile", "--once"]).expect(0);
    assert!(!second.stderr.contains("policy alert"), "reported twice: {}", second.stderr);
    assert!(second.stdout.contains("no changes; the fleet matches the spec, but 1 policy verdict fails on it"));

    // Once it passes, it is forgotten: a recurrence is reported again.
    std::fs::remove_file(fleet.path().join("policies/min_spot_share.hcl")).expect("rm policy");
    fleet.run(&["reconcile", "--once"]).expect(0);
    assert!(fleet.state().standing.is_empty(), "{:?}", fleet.state().standing);
}

#[test]
fn a_plan_with_changes_is_denied_and_names_what_was_already_failing() {
    let fleet = overridden_fleet("");
    std::fs::write(
        fleet.path().join("policies/fleet_cap.hcl"),
        "policy \"fleet_cap\" {\n  enforcement = \"hard\"\n  assert      = plan.cost.hourly_after <= 2\n  message     = \"the fleet would cost ${plan.cost.hourly_after} USD/h\"\n}\n",
    )
    .expect("write policy");
    fleet.write_spec(&spec(3, ""));
    let plan = fleet.run(&["plan"]).expect(3);
    snapshot("standing_plan_with_changes", &plan);
    // The hard policy fails only because of this change, and is not offered an override.
    // One error line naming both (the plan above quoted each failure once).
    assert!(
        plan.stderr.contains(
            "error: policies `fleet_cap` (hard), `min_spot_share` (soft, already failing before this change) deny this plan"
        ),
        "{}",
        plan.stderr
    );
    assert!(plan.stderr.contains("hint: hard policy `fleet_cap` cannot be overridden"), "{}", plan.stderr);
    assert!(!plan.stderr.contains("--override-policy fleet_cap"), "{}", plan.stderr);
    let apply = fleet.run(&["apply", "--auto-approve", "--override-policy", "min_spot_share"]).expect(3);
    assert!(
        apply.stderr.contains("error: policy `fleet_cap` (hard) denies this plan; nothing was applied"),
        "{}",
        apply.stderr
    );
    assert!(!apply.stderr.contains("--override-policy fleet_cap"), "{}", apply.stderr);
    let pass = fleet.run(&["reconcile", "--once"]).expect(3);
    assert!(pass.stdout.contains("a policy denied the plan; nothing applied"), "{}", pass.stdout);
}

#[test]
fn reconcile_posts_a_standing_violation_to_the_hooks_once() {
    let (url, log) = crate::http_stub::serve(|_, _| (200, "text/plain", "ok".into()));
    let quota = format!(
        "\nquota \"team\" {{\n  pools    = [gpu_pool.train]\n  max_gpus = 32\n  notify   = [\"{url}/hook\"]\n}}\n"
    );
    let fleet = overridden_fleet(&quota);
    let first = fleet.run(&["reconcile", "--once"]).expect(0);
    assert!(first.stderr.contains("fails on the fleet as it stands"), "{}", first.stderr);
    assert!(first.stderr.contains("posted to 1 hook(s)"), "{}", first.stderr);
    fleet.run(&["reconcile", "--once"]).expect(0);
    let posts = log.lock().expect("log").clone();
    assert_eq!(posts.len(), 1, "{posts:?}");
    let body: serde_json::Value = serde_json::from_str(&posts[0].1).expect("JSON body");
    let text = body["text"].as_str().expect("a text");
    assert!(text.contains("policy `min_spot_share[gpu_pool.train]` (soft) fails on the fleet as it stands"), "{text}");
}

/// GET `/metrics` from `addr`: the body.
fn metrics(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("write");
    let mut response = String::new();
    s.read_to_string(&mut response).expect("read");
    response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()
}

#[test]
fn the_metrics_count_standing_violations_and_the_pass_does_not_fail() {
    let fleet = overridden_fleet("");
    let mut child = fleet.spawn(&["reconcile", "--interval", "1h", "--metrics-addr", "127.0.0.1:0"], &[]);
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
    let addr = lines
        .find_map(|l| l.strip_prefix("Serving metrics on http://").map(|a| a.trim_end_matches("/metrics").to_string()))
        .expect("the metrics address on stderr");
    let mut body = String::new();
    wait_until(Duration::from_secs(60), "the first pass in the metrics", || {
        body = metrics(&addr);
        body.contains("gpuplan_reconcile_runs_total 1\n")
    });
    let killed = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(killed.expect("kill runs").success());
    child.wait().expect("gpuplan exits");
    assert!(body.contains("# TYPE gpuplan_policy_standing gauge\n"), "{body}");
    assert!(body.contains("gpuplan_policy_standing{policy=\"min_spot_share\"} 1\n"), "{body}");
    assert!(body.contains("gpuplan_reconcile_failures_total 0\n"), "{body}");
}
