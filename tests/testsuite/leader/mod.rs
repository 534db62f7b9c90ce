//! `gpuplan reconcile --leader-elect`: several real processes of the binary on one state
//! (the local file and the sim cloud in one folder), electing a leader through a Lease on
//! the Kubernetes API server double (`kube_fake`, with resourceVersion conflicts). The
//! lease lasts 3 s so takeovers happen in seconds.
//!
//! What must hold: one holder at a time; passes run only on the holder (every pass
//! prints one JSON line on its process's stdout); after `kill -9` a follower takes over
//! within twice the lease duration, after SIGTERM at once (the lease is released); no
//! change is applied twice; a leader that could not renew (stopped) applies nothing after
//! it lost the lease.

mod fixture;

use std::time::{Duration, Instant};

use crate::kube_fake::FakeApi;
use fixture::*;

/// Each pass was run by the replica that held the lease when it printed it (allowing the
/// report of a pass that began just before the holder changed).
fn passes_only_on_the_holder(api: &FakeApi, replicas: &[&Replica]) {
    let changes = api.lease_holders();
    for r in replicas {
        for (at, outcome) in r.passes() {
            let holder = changes.iter().rev().find(|(t, _)| *t <= at).and_then(|(_, h)| h.clone());
            let just_lost = changes.iter().rev().find(|(t, _)| *t <= at && at.duration_since(*t) < LEASE_DURATION);
            assert!(
                holder.as_deref() == Some(r.id.as_str()) || just_lost.is_some(),
                "{} ran a pass ({outcome}) while {holder:?} held the lease",
                r.id
            );
        }
    }
}

#[test]
fn three_replicas_one_leader_at_a_time_takeover_after_kill_9_and_at_once_after_sigterm() {
    let (tmp, api) = setup(2);
    let mut replicas: Vec<Replica> = ["r0", "r1", "r2"].iter().map(|id| Replica::start(tmp.path(), id)).collect();
    let ids = ["r0", "r1", "r2"];
    let first = holder(&api, &ids, Duration::from_secs(20));
    let leader = replicas.iter().position(|r| r.id == first).unwrap();
    wait_for("the leader's first pass", Duration::from_secs(30), || !replicas[leader].passes().is_empty());
    wait_for("the fleet", Duration::from_secs(30), || nodes(tmp.path()) == 2);
    std::thread::sleep(Duration::from_secs(2));

    // Followers: ready, `gpuplan_leader 0`, and no pass at all; the leader: `1`.
    for (i, r) in replicas.iter().enumerate() {
        let addr = r.metrics_addr();
        assert_eq!(http_get(&addr, "/healthz").0, 200);
        assert_eq!(http_get(&addr, "/readyz").0, 200, "{} stands by ready", r.id);
        let (code, body) = http_get(&addr, "/metrics");
        assert_eq!(code, 200);
        let want = if i == leader { "gpuplan_leader 1" } else { "gpuplan_leader 0" };
        assert!(body.lines().any(|l| l == want), "{}: want `{want}`:\n{body}", r.id);
        assert!(body.contains("gpuplan_lock_takeovers_total 0"), "{body}");
        if i != leader {
            assert!(r.passes().is_empty(), "follower {} ran a pass:\n{}", r.id, r.stderr());
            assert!(
                r.stderr().contains(&format!("Following: lease {NS}/{LEASE} is held by `{first}`")),
                "{}",
                r.stderr()
            );
        }
    }
    assert!(replicas[leader].stderr().contains(&format!("Leading: holding lease {NS}/{LEASE}")));

    // kill -9: no release; a follower takes over once the lease has not been renewed for
    // its duration, within twice that.
    replicas[leader].child.kill().unwrap();
    let killed_at = Instant::now();
    let killed = replicas.remove(leader);
    let left: Vec<&str> = replicas.iter().map(|r| r.id.as_str()).collect();
    let second = holder(&api, &left, LEASE_DURATION * 3);
    let takeover = killed_at.elapsed();
    assert!(takeover <= LEASE_DURATION * 2, "took over after {takeover:?}");
    let leader = replicas.iter().position(|r| r.id == second).unwrap();

    // The new leader applies a change to the spec, once.
    std::fs::write(tmp.path().join("main.hcl"), spec(3)).unwrap();
    wait_for("the new leader's apply", Duration::from_secs(30), || nodes(tmp.path()) == 3);
    std::thread::sleep(Duration::from_secs(2));

    // SIGTERM: the lease is released on exit, and the last replica takes over at once.
    replicas[leader].signal("-TERM");
    let termed_at = Instant::now();
    let last = replicas.iter().find(|r| r.id != second).unwrap().id.clone();
    let third = holder(&api, &[last.as_str()], Duration::from_secs(10));
    let handover = termed_at.elapsed();
    assert_eq!(third, last);
    assert!(handover < Duration::from_secs(2), "handed over {handover:?} after SIGTERM");
    let status = replicas[leader].child.wait().unwrap();
    assert!(status.success(), "SIGTERM ends the leader cleanly:\n{}", replicas[leader].stderr());
    assert!(
        replicas[leader].stderr().contains(&format!("Released lease {NS}/{LEASE}")),
        "{}",
        replicas[leader].stderr()
    );
    let third_idx = replicas.iter().position(|r| r.id == third).unwrap();
    wait_for("the third leader's pass", Duration::from_secs(20), || !replicas[third_idx].passes().is_empty());
    std::thread::sleep(Duration::from_secs(1));

    // One holder at a time, every pass on the holder, and each change applied once: two
    // applies in all (create 2 nodes, then add 1), the fleet exactly 3 nodes.
    let all: Vec<&Replica> = replicas.iter().chain(std::iter::once(&killed)).collect();
    passes_only_on_the_holder(&api, &all);
    let applied: usize = all.iter().map(|r| r.passes().iter().filter(|(_, o)| o == "applied").count()).sum();
    assert_eq!(applied, 2, "each change applied once");
    assert_eq!(nodes(tmp.path()), 3, "no node launched twice");
    let holders: Vec<Option<String>> = api.lease_holders().into_iter().map(|(_, h)| h).collect();
    assert_eq!(
        holders,
        vec![Some(first.clone()), Some(second.clone()), None, Some(third.clone())],
        "the holder changed only by takeover and release"
    );
    eprintln!(
        "takeover after kill -9: {takeover:?}; after SIGTERM: {handover:?}; lease conflicts: {}",
        api.lease_conflicts()
    );
}

#[test]
fn a_leader_that_could_not_renew_applies_nothing_after_losing_its_lease() {
    let (tmp, api) = setup(1);
    let replicas: Vec<Replica> = ["a", "b"].iter().map(|id| Replica::start(tmp.path(), id)).collect();
    let first = holder(&api, &["a", "b"], Duration::from_secs(20));
    let (old, new) = if first == "a" { (&replicas[0], &replicas[1]) } else { (&replicas[1], &replicas[0]) };
    wait_for("the fleet", Duration::from_secs(30), || nodes(tmp.path()) == 1);
    std::thread::sleep(Duration::from_millis(1500));

    // The leader freezes (as a process cut off from the API server would): it cannot renew.
    // Frozen right after a pass, so it holds no state lock the new leader would wait for.
    let seen = old.passes().len();
    wait_for("a pass of the leader", Duration::from_secs(10), || old.passes().len() > seen);
    old.signal("-STOP");
    let second = holder(&api, &[new.id.as_str()], LEASE_DURATION * 3);
    assert_eq!(second, new.id);
    std::fs::write(tmp.path().join("main.hcl"), spec(2)).unwrap();
    wait_for("the new leader's apply", Duration::from_secs(30), || nodes(tmp.path()) == 2);
    let before = old.passes().len();
    old.signal("-CONT");
    let resumed = Instant::now();
    wait_for("the old leader steps down", Duration::from_secs(10), || old.stderr().contains("Stepped down"));
    std::thread::sleep(Duration::from_secs(3));

    let after: Vec<(Instant, String)> = old.passes().into_iter().skip(before).collect();
    // A pass frozen mid-way may report once; none starts after the resume.
    assert!(after.len() <= 1, "the old leader ran passes after losing its lease: {after:?}\n{}", old.stderr());
    assert!(after.iter().all(|(_, o)| o != "applied"), "the old leader applied after losing its lease: {after:?}");
    assert_eq!(nodes(tmp.path()), 2, "the new leader's fleet stands");
    let (_, body) = http_get(&old.metrics_addr(), "/metrics");
    assert!(body.lines().any(|l| l == "gpuplan_leader 0"), "{body}");
    assert!(resumed.elapsed() > Duration::from_secs(3));
    assert_eq!(api.lease_holder(NS, LEASE).as_deref(), Some(new.id.as_str()), "the lease stays with the new leader");
}

/// A change to the spec folder starts a pass within seconds, without waiting for the
/// interval (an hour here); a burst of writes makes one pass; rewriting the same content
/// makes none.
#[test]
fn a_spec_change_starts_a_pass_within_seconds_and_a_burst_makes_one_pass() {
    let (tmp, _api) = setup(1);
    let r = Replica::spawn(tmp.path(), "solo", &["--interval", "1h"]);
    wait_for("the first pass", Duration::from_secs(30), || r.passes().len() == 1);
    assert_eq!(nodes(tmp.path()), 1);
    std::thread::sleep(Duration::from_secs(1));

    std::fs::write(tmp.path().join("main.hcl"), spec(2)).unwrap();
    let changed = Instant::now();
    wait_for("a pass after the change", Duration::from_secs(10), || r.passes().len() == 2);
    let latency = r.passes()[1].0.duration_since(changed);
    assert!(latency < Duration::from_secs(5), "the pass started {latency:?} after the change");
    assert_eq!(r.passes()[1].1, "applied");
    assert_eq!(nodes(tmp.path()), 2);
    assert!(r.stderr().contains("Spec folder changed: starting a pass"), "{}", r.stderr());

    // A burst (a checkout writing the file several times) makes one pass.
    for desired in [4, 5, 6, 3] {
        std::fs::write(tmp.path().join("main.hcl"), spec(desired)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_for("a pass after the burst", Duration::from_secs(10), || r.passes().len() == 3);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(r.passes().len(), 3, "one pass for the burst: {:?}", r.passes());
    assert_eq!(nodes(tmp.path()), 3);

    // The same content written again is no change.
    std::fs::write(tmp.path().join("main.hcl"), spec(3)).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(r.passes().len(), 3, "no pass without a change");
    eprintln!("spec change to pass: {latency:?}");
}

/// `--lease-duration 1900ms` is rounded up to whole seconds, the Lease's unit: the Lease
/// says 2, as the leader's renew deadline assumes (it used to say 1 while the leader kept
/// 1.9 s, so a follower could take over while the leader still acted).
#[test]
fn a_lease_duration_with_a_fraction_is_written_rounded_up() {
    let (tmp, api) = setup(1);
    let args = [
        "--interval",
        "1h",
        "--leader-elect",
        "--lease-namespace",
        NS,
        "--lease-duration",
        "1900ms",
        "--lease-identity",
        "solo",
    ];
    let _r = Replica::spawn(tmp.path(), "solo", &args);
    holder(&api, &["solo"], Duration::from_secs(20));
    let lease = api.lease(NS, LEASE).expect("the lease");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 2, "{lease}");
}
