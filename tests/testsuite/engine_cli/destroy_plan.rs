//! A destroy reviewed like any change (issue 44, item 4): `plan --destroy` in every view
//! and saved, `show` and `apply` of the saved file, policies and the job rules as for any
//! plan; `destroy --json` as Terraform's.

use crate::engine_cli::{Fleet, flat, small_spec};

#[test]
fn a_destroy_is_planned_saved_shown_and_applied_from_the_file() {
    let fleet = Fleet::new(&small_spec(2));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let serial = fleet.state().serial;

    let json = fleet.run(&["plan", "--destroy", "--json"]).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&json.stdout).expect("plan --destroy --json is JSON");
    assert_eq!(plan["summary"]["destroy"], 3, "{}", json.stdout);
    let actions: Vec<&str> =
        plan["changes"].as_array().unwrap().iter().map(|c| c["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["delete"; 3]);
    let md = fleet.run(&["plan", "--destroy", "--format", "markdown"]).expect(0);
    assert!(md.stdout.contains("0 to add, 0 to change, 3 to destroy"), "{}", md.stdout);
    fleet.run(&["plan", "--destroy", "--detailed-exitcode"]).expect(2);

    fleet.run(&["plan", "--destroy", "--out", "d.plan"]).expect(0);
    assert_eq!(fleet.live_tagged().len(), 3, "planning a destroy removed nodes");
    assert_eq!(fleet.state().serial, serial, "planning a destroy wrote the state");
    let shown = fleet.run(&["show", "d.plan"]).expect(0);
    assert!(shown.stdout.contains("# gpu_pool.train will be destroyed"), "{}", shown.stdout);
    assert!(shown.stdout.contains("Plan: 0 to add, 0 to change, 3 to destroy."), "{}", shown.stdout);

    let applied = fleet.run(&["apply", "d.plan"]).expect(0);
    assert!(
        applied.stderr.contains("Apply complete! Resources: 0 added, 0 changed, 3 destroyed."),
        "{}",
        applied.stderr
    );
    assert!(fleet.live_tagged().is_empty(), "the saved destroy left nodes running");
    assert!(fleet.state().resources.is_empty(), "the saved destroy left resources in state");
    // Applied once; the state moved on, so the same file is stale now.
    let again = fleet.run(&["apply", "d.plan"]).expect(1);
    assert!(flat(&again.stderr).contains("the saved plan is stale"), "{}", again.stderr);
}

#[test]
fn a_destroy_plan_under_a_running_job_is_denied_and_with_the_override_cancels_the_job_first() {
    let fleet = Fleet::new("");
    std::fs::remove_file(fleet.path().join("main.hcl")).unwrap();
    fleet.run(&["init"]).expect(0);
    fleet.run(&["apply", "--auto-approve", "--var", "jobs=1"]).expect(0);

    // The starter policy stops a destroy under a running job, as for any plan.
    let denied = fleet.run(&["plan", "--destroy", "--out", "d.plan"]).expect(3);
    let text = flat(&format!("{}{}", denied.stdout, denied.stderr));
    assert!(text.contains("FAIL no_destroy_pool_with_jobs (soft)"), "{text}");
    assert!(text.contains("cancel with `gpuplan jobs cancel`"), "{text}");
    assert!(text.contains("denied by policy: apply will refuse it"), "{text}");
    let refused = fleet.run(&["apply", "d.plan"]).expect(3);
    assert!(
        refused.stderr.contains("policy `no_destroy_pool_with_jobs` (soft) denies this plan"),
        "{}",
        refused.stderr
    );
    assert_eq!(fleet.live_tagged().len(), 1, "a denied destroy removed the node");

    // Overridden when planning, the saved plan records it; apply cancels the job's run
    // before it terminates the node under it.
    let args = ["plan", "--destroy", "--override-policy", "no_destroy_pool_with_jobs", "--out", "d.plan"];
    fleet.run(&args).expect(0);
    let applied = fleet.run(&["apply", "d.plan"]).expect(0);
    let cancelled = applied.stderr.find("cancelled").unwrap_or_else(|| panic!("no run cancelled: {}", applied.stderr));
    let terminated = applied.stderr.find("terminated 1 node").expect("the node terminated");
    assert!(cancelled < terminated, "the node went before its job was cancelled: {}", applied.stderr);
    assert!(fleet.live_tagged().is_empty());
    assert!(fleet.state().resources.is_empty());
}

#[test]
fn destroy_json_prints_the_plan_and_needs_auto_approve_and_destroy_out_points_at_plan_destroy() {
    let fleet = Fleet::new(&small_spec(1));
    fleet.run(&["apply", "--auto-approve"]).expect(0);

    let r = fleet.run(&["destroy", "--out", "d.plan"]).expect(1);
    assert!(
        r.stderr.contains("hint: save a destroy for review with `gpuplan plan --destroy --out FILE`"),
        "{}",
        r.stderr
    );
    // Terraform's `destroy -json` cannot prompt either: a program reads the output.
    let r = fleet.run(&["destroy", "--json"]).expect(1);
    assert!(flat(&r.stderr).contains("`destroy --json` cannot ask for confirmation"), "{}", r.stderr);
    assert!(!fleet.path().join("d.plan").exists());
    assert_eq!(fleet.live_tagged().len(), 2, "a refused destroy removed nodes");

    let r = fleet.run(&["destroy", "--json", "--auto-approve"]).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("only the JSON plan on stdout");
    assert_eq!(plan["summary"]["destroy"], 3);
    assert!(r.stderr.contains("Destroy complete!"), "{}", r.stderr);
    assert!(fleet.live_tagged().is_empty());
}
