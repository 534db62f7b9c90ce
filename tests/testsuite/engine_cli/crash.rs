//! Crashes and contention: kill -9 mid-apply, two applies at once, a damaged state file.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use gpuplan::providers::TAG_ADDRESS;

use crate::engine_cli::{Fleet, PROVIDER, change, created, flat, pool, small_spec, wait_until};

const POOLS: usize = 20;
const DESIRED: u32 = 3;

fn many_pools() -> String {
    let mut spec = PROVIDER.to_string();
    for i in 0..POOLS {
        spec += &pool(&format!("p{i:02}"), &["us-east-1a", "us-east-1b"], DESIRED, "");
    }
    spec
}

fn journal_lines(fleet: &Fleet) -> usize {
    std::fs::read(fleet.path().join("state/default.json.journal"))
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

#[test]
fn sigterm_mid_apply_finishes_in_flight_work_saves_state_and_exits_1() {
    let fleet = Fleet::new(&many_pools());
    let child = fleet.spawn(&["apply", "--auto-approve", "--parallelism", "2"], &[("GPUPLAN_SIM_LATENCY", "100ms")]);
    wait_until(Duration::from_secs(30), "the journal to have entries", || journal_lines(&fleet) >= 6);
    let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("reaped");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Interrupt received"), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    // Graceful: the journal was folded into the state and the lock released.
    assert!(!fleet.dir.path().join("state/default.json.journal").exists(), "journal left behind");
    assert!(!fleet.dir.path().join("state/default.json.lock").exists(), "lock left behind");

    let r = fleet.run(&["plan", "--json"]).expect(0);
    assert!(!flat(&r.stderr).contains("pid"), "a clean stop leaves no stale lock: {}", r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("plan --json is JSON");
    let state = fleet.state();
    let live = fleet.live_tagged();
    let in_state: BTreeSet<String> =
        state.resources.values().flat_map(|r| r.nodes.iter().map(|n| n.id.clone())).collect();
    // Everything that was launched is recorded: nothing to adopt, nothing unknown.
    for n in &live {
        assert!(in_state.contains(&n.id), "live node {} missing from state after a graceful stop", n.id);
    }
    let mut remaining = 0;
    for i in 0..POOLS {
        let c = change(&plan, &format!("gpu_pool.p{i:02}"));
        assert_eq!(c["pool"]["adopt"], serde_json::json!([]), "{c:#}");
        remaining += created(c);
    }
    assert_eq!(remaining + live.len() as u64, (POOLS * DESIRED as usize) as u64);
    assert!(remaining > 0, "the apply finished before the signal");
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(fleet.live_tagged().len(), POOLS * DESIRED as usize);
}

#[test]
fn kill_9_mid_apply_leaves_exactly_the_remaining_work() {
    let fleet = Fleet::new(&many_pools());
    let mut child =
        fleet.spawn(&["apply", "--auto-approve", "--parallelism", "2"], &[("GPUPLAN_SIM_LATENCY", "100ms")]);
    // The header plus a few finished operations.
    wait_until(Duration::from_secs(30), "the journal to have entries", || journal_lines(&fleet) >= 6);
    let pid = child.id();
    child.kill().expect("kill -9");
    child.wait().expect("reaped");

    let r = fleet.run(&["plan", "--json"]).expect(0);
    let warning = flat(&r.stderr);
    assert!(warning.contains(&format!("`gpuplan apply` (pid {pid},")), "no stale-lock warning: {warning}");
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("plan --json is JSON");
    let state = fleet.state(); // the plan folded the journal in
    let live = fleet.live_tagged();
    let mut live_by_pool: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for n in &live {
        let addr = n.tags.get(TAG_ADDRESS).unwrap_or_default().to_string();
        live_by_pool.entry(addr).or_default().insert(n.id.clone());
    }
    let known: BTreeSet<String> = (0..POOLS).map(|i| format!("gpu_pool.p{i:02}")).collect();
    for (addr, ids) in &live_by_pool {
        assert!(known.contains(addr), "node(s) {ids:?} carry an unknown address `{addr}`");
        assert!(ids.len() <= DESIRED as usize, "`{addr}` has {} live nodes for {DESIRED} desired", ids.len());
    }
    let (mut untouched, mut started) = (0, 0);
    for addr in &known {
        let c = change(&plan, addr);
        let live: BTreeSet<String> = live_by_pool.get(addr).cloned().unwrap_or_default();
        let recorded = state.resources.get(addr);
        let in_state: BTreeSet<String> =
            recorded.map(|r| r.nodes.iter().map(|n| n.id.clone()).collect()).unwrap_or_default();
        let adopt: BTreeSet<String> = c["pool"]["adopt"]
            .as_array()
            .map(|a| a.iter().map(|n| n.as_str().or(n["id"].as_str()).unwrap_or_default().to_string()).collect())
            .unwrap_or_default();
        assert_eq!(created(c) + live.len() as u64, DESIRED as u64, "`{addr}` would not end at {DESIRED}: {c:#}");
        assert_eq!(c["pool"]["deletes"], serde_json::json!([]), "`{addr}` deletes nodes: {c:#}");
        assert_eq!(adopt, &live - &in_state, "`{addr}`: every live node the state lacks is adopted");
        // A pool the kill caught after the cloud made its nodes but before the journal
        // recorded them has no state record: it is created again, adopting those nodes.
        let expected = match (recorded, live.is_empty()) {
            (None, _) => "create",
            (Some(r), false) if !r.config.is_null() && live.len() == DESIRED as usize && adopt.is_empty() => "no-op",
            _ => "update",
        };
        assert_eq!(c["action"], expected, "`{addr}`: {c:#}");
        if recorded.is_none() && live.is_empty() {
            untouched += 1;
        } else {
            started += 1;
        }
    }
    assert!(started > 0, "the apply was killed before it did anything");
    assert!(untouched > 0, "the apply finished before it was killed");

    let r = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(r.stderr.contains("Apply complete!"), "{}", r.stderr);
    let again = fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    assert!(again.stdout.contains("No changes"), "{}", again.stdout);
    assert_eq!(fleet.live_tagged().len(), POOLS * DESIRED as usize);
}

#[test]
fn a_second_apply_fails_on_the_lock_naming_the_holder_and_the_first_completes() {
    let fleet = Fleet::new(&many_pools());
    fleet.run(&["plan"]).expect(0);
    assert!(!fleet.state_path().exists(), "a plan writes no state");
    let env = [("GPUPLAN_SIM_LATENCY", "100ms")];
    let first = fleet.spawn(&["apply", "--auto-approve", "--parallelism", "2"], &env);
    let pid = first.id();
    // It holds the lock once it journals (the lock is taken before the journal opens).
    wait_until(Duration::from_secs(30), "the first apply to start", || journal_lines(&fleet) >= 1);
    let second = fleet.run_env(&["apply", "--auto-approve", "--lock-timeout", "1s"], &env).expect(1);
    let err = flat(&second.stderr);
    assert!(err.contains("is locked"), "{err}");
    assert!(err.contains(&format!("(pid {pid}) running `apply`")), "holder's pid and operation missing: {err}");
    let out = first.wait_with_output().expect("first apply ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let state = fleet.state();
    assert_eq!(state.serial, 1, "one apply, one state write");
    assert_eq!(state.resources.len(), POOLS);
    assert_eq!(fleet.live_tagged().len(), POOLS * DESIRED as usize);
}

#[test]
fn a_truncated_state_file_is_refused_and_left_as_it_was() {
    let fleet = Fleet::new(&small_spec(2));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    // A second write keeps the first as the backup.
    fleet.write_spec(&small_spec(3));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let path = fleet.state_path();
    let backup = fleet.path().join("state/default.json.backup");
    let full = std::fs::read(&path).expect("state");
    std::fs::write(&path, &full[..full.len() / 2]).expect("truncate");
    let (state_before, backup_before) = (std::fs::read(&path).unwrap(), std::fs::read(&backup).expect("backup"));

    let r = fleet.run(&["plan"]).expect(1);
    let err = flat(&r.stderr);
    assert!(r.stderr.contains("unreadable"), "{}", r.stderr);
    assert!(err.contains("default.json`"), "the state file is not named: {}", r.stderr);
    assert!(err.contains("default.json.backup"), "the backup is not named: {}", r.stderr);
    fleet.run(&["apply", "--auto-approve"]).expect(1);
    assert_eq!(std::fs::read(&path).unwrap(), state_before, "the state file changed");
    assert_eq!(std::fs::read(&backup).unwrap(), backup_before, "the backup changed");
}
