//! Variables as Terraform takes them (issue 44, item 7): `--var-file` (HCL or YAML) on
//! every command that takes `--var`, `*.auto.vars.hcl` beside the spec, problems located
//! in the var file, an undeclared name a warning in a file and an error with `--var`.

use crate::engine_cli::{Fleet, PROVIDER, change, flat, pool};

/// `train` has `var.n` nodes (default 1).
fn spec() -> String {
    format!(
        "variable \"n\" {{\n  type    = number\n  default = 1\n}}\n{PROVIDER}{}",
        pool("train", &["us-east-1a"], 1, "").replace("desired = 1", "desired = var.n")
    )
}

fn desired(fleet: &Fleet, args: &[&str]) -> u64 {
    let mut all = vec!["plan", "--json"];
    all.extend_from_slice(args);
    let r = fleet.run(&all).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("plan --json");
    change(&plan, "gpu_pool.train")["pool"]["after"]["on_demand"].as_u64().expect("a count")
}

#[test]
fn var_files_in_hcl_and_yaml_and_auto_files_set_variables_in_terraform_s_order() {
    let fleet = Fleet::new(&spec());
    std::fs::write(fleet.path().join("two.vars.hcl"), "n = 2\n").unwrap();
    std::fs::write(fleet.path().join("three.vars.yaml"), "n: 3\n").unwrap();
    assert_eq!(desired(&fleet, &[]), 1, "var files are not read unless named (nor as spec files)");
    assert_eq!(desired(&fleet, &["--var-file", "two.vars.hcl"]), 2);
    assert_eq!(desired(&fleet, &["--var-file", "three.vars.yaml"]), 3);
    // Command-line order, later wins, whichever flag.
    assert_eq!(desired(&fleet, &["--var-file", "two.vars.hcl", "--var", "n=4"]), 4);
    assert_eq!(desired(&fleet, &["--var", "n=4", "--var-file", "two.vars.hcl"]), 2);
    // An auto file beside the spec is read by itself, above the environment and below
    // the command line.
    std::fs::write(fleet.path().join("fleet.auto.vars.hcl"), "n = 5\n").unwrap();
    let env = [("GPUPLAN_VAR_n", "6")];
    let r = fleet.run_env(&["plan", "--json"], &env).expect(0);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(change(&plan, "gpu_pool.train")["pool"]["after"]["on_demand"], 5);
    assert_eq!(desired(&fleet, &["--var-file", "two.vars.hcl"]), 2);
    // `validate`, `destroy` and `reconcile` take it too.
    fleet.run(&["validate", "--var-file", "two.vars.hcl"]).expect(0);
    for command in ["apply", "destroy", "reconcile"] {
        let help = fleet.run(&[command, "--help"]).expect(0);
        assert!(help.stdout.contains("--var-file <FILE>"), "`{command}` takes no --var-file");
    }
}

#[test]
fn problems_in_a_var_file_point_at_it_and_an_undeclared_name_warns_unless_given_by_flag() {
    let fleet = Fleet::new(&spec());
    std::fs::write(fleet.path().join("bad.vars.hcl"), "# CI\nn = \"many\"\n").unwrap();
    let r = fleet.run(&["validate", "--var-file", "bad.vars.hcl"]).expect(1);
    let err = flat(&r.stderr);
    assert!(err.contains("the value \"many\" for variable `n` (from `bad.vars.hcl`) is not a number"), "{err}");
    assert!(err.contains("[bad.vars.hcl:2:5]"), "not located in the var file: {err}");
    let r = fleet.run(&["plan", "--var-file", "missing.vars.hcl"]).expect(1);
    assert!(flat(&r.stderr).contains("cannot read the var file `missing.vars.hcl`"), "{}", r.stderr);

    // Undeclared in a file: a warning naming the file and line, and the plan goes on.
    std::fs::write(fleet.path().join("team.auto.vars.hcl"), "n = 2\nm = 1\n").unwrap();
    let r = fleet.run(&["plan"]).expect(0);
    let err = flat(&r.stderr);
    assert!(
        err.contains("`team.auto.vars.hcl` sets `m`, a variable the spec does not declare; it is ignored"),
        "{err}"
    );
    assert!(err.contains("[team.auto.vars.hcl:2:1]"), "{err}");
    assert!(r.stdout.contains("Plan: 1 to add"), "{}", r.stdout);
    // Undeclared with `--var`: an error, as in Terraform.
    let r = fleet.run(&["plan", "--var", "m=1"]).expect(1);
    assert!(flat(&r.stderr).contains("`--var m=...` sets a variable the spec does not declare"), "{}", r.stderr);
}
