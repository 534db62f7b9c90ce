//! Saved plans: applied exactly when fresh, refused when the state or the spec moved on.

use crate::engine_cli::{Fleet, PROVIDER, flat, pool, small_spec};

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
    // What changed is named, not only digests.
    assert!(flat(&r.stderr).contains("made from a different spec: `main.hcl` changed"), "{}", r.stderr);
    assert_eq!(fleet.live_tagged().len(), 3, "a refused plan launched nodes");
}

#[test]
fn a_saved_plan_keeps_what_apply_needs_and_is_compact() {
    let fleet = Fleet::new(&small_spec(3));
    fleet.run(&["plan", "--out", "p.plan"]).expect(0);
    let path = fleet.path().join("p.plan");
    let plan = gpuplan::engine::planfile::load(&path).expect("the saved plan reads back");
    // Made before there was any state: serial 0, and a lineage of its own, which the
    // state begins with when the plan is applied (checked at the end).
    assert!(!fleet.state_path().exists(), "a plan writes no state");
    assert_eq!(plan.serial, 0);
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
    fleet.run(&["apply", "p.plan"]).expect(0);
    let state = fleet.state();
    assert_eq!((state.lineage.as_str(), state.serial), (plan.lineage.as_str(), 1));
    assert!(fleet.live_tagged().iter().all(|n| n.tags.get("gpuplan:lineage") == Some(plan.lineage.as_str())));
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

/// A saved plan's spec digest, replaced: only a plan whose spec is decoded again notices.
fn forge_spec_digest(path: &std::path::Path) -> gpuplan::plan::Plan {
    let mut plan = gpuplan::engine::planfile::load(path).expect("the saved plan reads back");
    plan.spec_digest = "0".repeat(64);
    gpuplan::engine::planfile::save(path, &plan).expect("saved again");
    plan
}

#[test]
fn a_saved_plan_records_its_sources_and_apply_decodes_the_spec_again_only_when_they_changed() {
    // A pool's image comes from the environment, as in CI.
    let spec = format!(
        "{PROVIDER}{}{}",
        pool("train", &["us-east-1a", "us-east-1b"], 2, "  image = env(\"FLEET_IMAGE\", \"ami-1\")"),
        pool("serve", &["us-east-1a"], 1, "")
    );
    let fleet = Fleet::new(&spec);
    let env = [("FLEET_IMAGE", "ami-2"), ("UNRELATED", "plan")];
    fleet.run_env(&["plan", "--out", "p.plan"], &env).expect(0);
    let path = fleet.path().join("p.plan");
    let plan = gpuplan::engine::planfile::load(&path).expect("the saved plan reads back");
    let sources = &plan.inputs.as_ref().expect("a saved plan records what made it").sources;
    assert_eq!(sources.files.len(), 1, "{sources:?}");
    assert_eq!(sources.files["main.hcl"].len(), 64, "{sources:?}");
    let looked_up: Vec<&String> = sources.env.keys().collect();
    assert_eq!(looked_up, ["FLEET_IMAGE"], "the environment variables the spec looked up, and only those");

    // The spec's digest in the file is replaced. With the same files and the same value
    // of FLEET_IMAGE (UNRELATED differs, as between CI jobs), apply trusts the sources
    // and never decodes the spec: the forged digest goes unnoticed, which shows that.
    forge_spec_digest(&path);
    let ok = fleet.run_env(&["apply", "p.plan"], &[("FLEET_IMAGE", "ami-2"), ("UNRELATED", "apply")]).expect(0);
    assert!(ok.stderr.contains("Apply complete!"), "{}", ok.stderr);
    assert_eq!(fleet.live_tagged().len(), 3);

    // Another value of a variable the spec read: the whole spec is decoded, and its digest
    // is not the forged one.
    fleet.run_env(&["plan", "--out", "q.plan"], &env).expect(0);
    let q = fleet.path().join("q.plan");
    forge_spec_digest(&q);
    let r = fleet.run_env(&["apply", "q.plan"], &[("FLEET_IMAGE", "ami-3")]).expect(1);
    assert!(flat(&r.stderr).contains("different spec: the environment variable `FLEET_IMAGE` changed"), "{}", r.stderr);
    // And a plan that does not record what made it is refused, saying so.
    let mut old = gpuplan::engine::planfile::load(&q).expect("reads back");
    old.inputs = None;
    gpuplan::engine::planfile::save(&q, &old).expect("saved again");
    let r = fleet.run_env(&["apply", "q.plan"], &env).expect(1);
    assert!(flat(&r.stderr).contains("does not say what it was made with"), "{}", r.stderr);
    // Unforged, with the plan's value, it applies (a no-op: the fleet is as planned).
    fleet.run_env(&["plan", "--out", "r.plan"], &env).expect(0);
    fleet.run_env(&["apply", "r.plan"], &env).expect(0);
    assert_eq!(fleet.live_tagged().len(), 3, "a refused plan changed the fleet");
}

#[test]
fn a_plan_applied_with_another_var_value_is_refused_and_one_with_a_comment_added_applies() {
    let spec = format!(
        "variable \"n\" {{\n  type    = number\n  default = 2\n}}\n{}",
        small_spec(2).replacen("desired = 2", "desired = var.n", 1)
    );
    assert!(spec.contains("var.n"), "{spec}");
    let fleet = Fleet::new(&spec);
    fleet.run(&["plan", "--out", "p.plan", "--var", "n=3"]).expect(0);
    let r = fleet.run(&["apply", "p.plan", "--var", "n=2"]).expect(1);
    let err = flat(&r.stderr);
    assert!(err.contains("`--var` sets variable `n` to 2, but the plan was saved with 3 (from --var)"), "{err}");
    assert!(fleet.live_tagged().is_empty(), "a refused plan launched nodes");
    // A comment added: other sources, so the spec is decoded again; the same spec, so the
    // plan still applies.
    fleet.write_spec(&format!("# reviewed\n{spec}"));
    let ok = fleet.run(&["apply", "p.plan", "--var", "n=3"]).expect(0);
    assert!(ok.stderr.contains("Apply complete!"), "{}", ok.stderr);
    assert_eq!(fleet.live_tagged().len(), 4, "train's 3 nodes and serve's 1");
}
