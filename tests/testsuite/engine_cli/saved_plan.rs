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
