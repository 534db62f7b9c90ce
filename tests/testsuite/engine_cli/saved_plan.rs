//! Saved plans: applied exactly when fresh, refused when the state or the spec moved on.

use crate::engine_cli::{Fleet, flat, small_spec};

#[test]
fn a_fresh_saved_plan_applies_and_a_stale_one_is_refused() {
    let fleet = Fleet::new(&small_spec(2));
    fleet.run(&["plan", "--out", "stale.json"]).expect(0);
    // Someone applies in between: the state's serial moves on.
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let serial = fleet.state().serial;
    let r = fleet.run(&["apply", "stale.json"]).expect(1);
    assert!(flat(&r.stderr).contains("the saved plan is stale"), "{}", r.stderr);
    assert_eq!(fleet.state().serial, serial, "a refused plan wrote the state");

    fleet.write_spec(&small_spec(3));
    fleet.run(&["plan", "--out", "fresh.json"]).expect(0);
    let nodes = fleet.live_tagged().len();
    let ok = fleet.run(&["apply", "fresh.json"]).expect(0); // no --auto-approve needed
    assert!(ok.stderr.contains("Apply complete!"), "{}", ok.stderr);
    assert_eq!(fleet.live_tagged().len(), nodes + 1);
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
}

#[test]
fn a_plan_saved_before_a_spec_edit_is_refused() {
    let fleet = Fleet::new(&small_spec(2));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    fleet.write_spec(&small_spec(3));
    fleet.run(&["plan", "--out", "p.json"]).expect(0);
    fleet.write_spec(&small_spec(4));
    let r = fleet.run(&["apply", "p.json"]).expect(1);
    assert!(flat(&r.stderr).contains("different spec"), "{}", r.stderr);
    assert_eq!(fleet.live_tagged().len(), 3, "a refused plan launched nodes");
}

#[test]
fn a_saved_plan_keeps_what_apply_needs_and_is_compact() {
    let fleet = Fleet::new(&small_spec(3));
    fleet.run(&["plan", "--out", "p.plan"]).expect(0);
    let path = fleet.path().join("p.plan");
    let plan = gpuplan::engine::planfile::load(&path).expect("the saved plan reads back");
    let state = fleet.state();
    assert_eq!((plan.lineage.as_str(), plan.serial), (state.lineage.as_str(), state.serial));
    assert!(plan.spec_digest.len() >= 12, "no spec digest: {}", plan.spec_digest);
    assert_eq!(plan.changes.len(), 3);
    assert!(plan.cost.is_some(), "the saved plan lost its cost report");
    assert!(!plan.policies.is_empty(), "the saved plan lost its policy verdicts");
    // Written again, it reads back equal (the file is the plan, nothing lost or added).
    let again = fleet.path().join("again.plan");
    gpuplan::engine::planfile::save(&again, &plan).unwrap();
    assert_eq!(gpuplan::engine::planfile::load(&again).unwrap(), plan);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[..2], [0x1f, 0x8b], "a plan file is a gzip stream");
}

#[test]
fn a_truncated_or_corrupt_plan_file_is_refused_naming_it() {
    let fleet = Fleet::new(&small_spec(2));
    fleet.run(&["plan", "--out", "p.plan"]).expect(0);
    let bytes = std::fs::read(fleet.path().join("p.plan")).unwrap();
    let mut corrupt = bytes.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0x55;
    for (name, content) in [("cut.plan", &bytes[..bytes.len() - 9]), ("bad.plan", &corrupt[..])] {
        std::fs::write(fleet.path().join(name), content).unwrap();
        let r = fleet.run(&["apply", name]).expect(1);
        let err = flat(&r.stderr);
        assert!(err.contains(&format!("/{name}` is truncated or corrupt")), "{}", r.stderr);
        assert!(err.contains("hint: save the plan again with `gpuplan plan --out FILE`"), "{}", r.stderr);
        assert!(fleet.live_tagged().is_empty(), "a refused plan file launched nodes");
    }
    // The intact file still applies.
    fleet.run(&["apply", "p.plan"]).expect(0);
    assert_eq!(fleet.live_tagged().len(), 3, "train's 2 nodes and serve's 1");
}

#[test]
fn a_plan_that_cannot_be_saved_is_still_shown_and_the_failure_names_the_file() {
    // The plan is shown while the file is written on another thread: a failed write must
    // still fail the command, after the plan, and never claim the plan was saved.
    let fleet = Fleet::new(&small_spec(2));
    let r = fleet.run(&["plan", "--out", "no-such-dir/p.plan"]).expect(1);
    assert!(r.stdout.contains("Plan: 3 to add"), "the plan was not shown: {}", r.stdout);
    let err = flat(&r.stderr);
    assert!(err.contains("cannot write") && err.contains("no-such-dir/p.plan"), "{}", r.stderr);
    assert!(!err.contains("Saved the plan"), "{}", r.stderr);
    assert!(!fleet.path().join("no-such-dir").exists());
}
