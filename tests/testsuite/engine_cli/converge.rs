//! Convergence and the exit-code contract: apply, then nothing left to do.

use crate::engine_cli::{Fleet, small_spec};

#[test]
fn apply_converges_and_a_second_apply_changes_nothing() {
    let fleet = Fleet::new(&small_spec(3));
    let first = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(first.stderr.contains("Apply complete! Resources: 3 added"), "{}", first.stderr);
    let plan = fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    assert!(plan.stdout.contains("No changes"), "{}", plan.stdout);
    let serial = fleet.state().serial;
    let again = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(again.stderr.contains("No changes"), "{}", again.stderr);
    assert_eq!(fleet.state().serial, serial, "an apply with nothing to do wrote the state");
    assert_eq!(fleet.live_tagged().len(), 4);
}

#[test]
fn plan_detailed_exitcode_is_2_with_changes_0_without_and_1_for_a_bad_spec() {
    let fleet = Fleet::new(&small_spec(2));
    let r = fleet.run(&["plan", "--detailed-exitcode"]).expect(2);
    assert!(r.stdout.contains("Plan: 3 to add, 0 to change, 0 to destroy."), "{}", r.stdout);
    // Without the flag, changes are not an error.
    fleet.run(&["plan"]).expect(0);
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    fleet.write_spec(&small_spec(4));
    fleet.run(&["plan", "--detailed-exitcode"]).expect(2);
    fleet.write_spec("gpu_pool \"broken\" {\n  gpu = \n}\n");
    let bad = fleet.run(&["plan", "--detailed-exitcode"]).expect(1);
    assert!(bad.stderr.contains("main.hcl"), "{}", bad.stderr);
}

#[test]
fn destroy_leaves_no_live_tagged_node_and_an_empty_state() {
    let fleet = Fleet::new(&small_spec(2));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(fleet.live_tagged().len(), 3);
    let r = fleet.run(&["destroy", "--auto-approve"]).expect(0);
    assert!(r.stderr.contains("Destroy complete! Resources: 0 added, 0 changed, 3 destroyed."), "{}", r.stderr);
    assert_eq!(fleet.live_tagged(), vec![]);
    let state = fleet.state();
    assert!(state.resources.is_empty(), "{:#?}", state.resources);
    // Destroying again has nothing to do.
    fleet.run(&["destroy", "--auto-approve"]).expect(0);
}

#[test]
fn apply_without_a_terminal_or_auto_approve_refuses() {
    let fleet = Fleet::new(&small_spec(1));
    let r = fleet.run(&["apply"]).expect(1);
    assert!(r.stderr.contains("--auto-approve"), "{}", r.stderr);
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
    assert_eq!(fleet.live_tagged(), vec![], "a refused apply launched nodes");
    let d = fleet.run(&["destroy"]).expect(0); // nothing to destroy: no question to ask
    assert!(d.stderr.contains("No changes"), "{}", d.stderr);
}
