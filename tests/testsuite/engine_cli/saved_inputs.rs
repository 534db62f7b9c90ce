//! A saved plan carries what made it (issue 44, item 1): the variables' values from
//! every source, so `apply PLANFILE` needs none of them again, refuses a value given
//! again that differs, and says what changed when the spec is no longer the plan's.

use crate::engine_cli::{Fleet, PROVIDER, flat, pool};

/// `train` has `var.n` nodes from image `var.image`; `serve` one node.
fn spec() -> String {
    format!(
        "variable \"n\" {{\n  type    = number\n  default = 1\n}}\n\
         variable \"image\" {{\n  type    = string\n  default = \"ami-default\"\n}}\n{PROVIDER}{}{}",
        pool("train", &["us-east-1a", "us-east-1b"], 1, "  image = var.image")
            .replace("desired = 1", "desired = var.n"),
        pool("serve", &["us-east-1a"], 1, "")
    )
}

/// Images of the live nodes of `train`, sorted.
fn train_images(fleet: &Fleet) -> Vec<String> {
    let mut images: Vec<String> = fleet
        .live_tagged()
        .into_iter()
        .filter(|n| n.pool.to_string() == "gpu_pool.train")
        .map(|n| n.image.unwrap_or_default())
        .collect();
    images.sort();
    images
}

#[test]
fn the_issue_s_reproduction_on_init_s_fleet_applies() {
    let fleet = Fleet::new("");
    std::fs::remove_file(fleet.path().join("main.hcl")).unwrap();
    fleet.run(&["init"]).expect(0);
    fleet.run(&["plan", "--var", "nodes=4", "--out", "p.plan"]).expect(0);
    let ok = fleet.run(&["apply", "p.plan"]).expect(0);
    assert!(ok.stderr.contains("Nodes: 4 launched"), "{}", ok.stderr);
    fleet.run(&["plan", "--var", "nodes=4", "--detailed-exitcode"]).expect(0);
}

#[test]
fn a_plan_saved_with_a_var_applies_without_it() {
    let fleet = Fleet::new(&spec());
    fleet.run(&["plan", "--var", "n=3", "--out", "p.plan"]).expect(0);
    let ok = fleet.run(&["apply", "p.plan"]).expect(0);
    assert!(ok.stderr.contains("Apply complete!"), "{}", ok.stderr);
    assert_eq!(train_images(&fleet).len(), 3, "train's nodes as planned with n=3");
    // The same value given again is fine (a no-op now: a fresh plan, applied).
    fleet.run(&["plan", "--var", "n=3", "--out", "q.plan"]).expect(0);
    fleet.run(&["apply", "q.plan", "--var", "n=3"]).expect(0);
}

#[test]
fn values_from_var_files_auto_files_and_the_environment_are_carried_by_the_plan() {
    let fleet = Fleet::new(&spec());
    std::fs::write(fleet.path().join("fleet.auto.vars.hcl"), "n     = 2\nimage = \"ami-auto\"\n").unwrap();
    std::fs::create_dir(fleet.path().join("vars")).unwrap();
    std::fs::write(fleet.path().join("vars/ci.vars.hcl"), "image = \"ami-ci\"\n").unwrap();
    // The environment is below the auto file, the auto file below the command line, and
    // `--var` and `--var-file` count in command-line order.
    let env = [("GPUPLAN_VAR_n", "5"), ("GPUPLAN_VAR_image", "ami-env")];
    let args = ["plan", "--var", "n=4", "--var-file", "vars/ci.vars.hcl", "--var", "n=3", "--out", "p.plan"];
    fleet.run_env(&args, &env).expect(0);
    // The apply job has none of it: another checkout without the var file, another auto
    // file, no environment. The plan's own values are applied.
    std::fs::remove_dir_all(fleet.path().join("vars")).unwrap();
    std::fs::write(fleet.path().join("fleet.auto.vars.hcl"), "n = 9\n").unwrap();
    let ok = fleet.run(&["apply", "p.plan"]).expect(0);
    assert!(ok.stderr.contains("Apply complete!"), "{}", ok.stderr);
    assert_eq!(train_images(&fleet), ["ami-ci"; 3]);
    // What the file says it was made with: every variable, and where its value came from.
    let plan = gpuplan::engine::planfile::load(&fleet.path().join("p.plan")).unwrap();
    let inputs = plan.inputs.expect("the plan records what made it");
    let vars: Vec<(String, String, String)> =
        inputs.variables.iter().map(|(k, v)| (k.clone(), v.value.to_string(), v.from.clone())).collect();
    let image = ("image".into(), "\"ami-ci\"".into(), "`vars/ci.vars.hcl`".into());
    assert_eq!(vars, [image, ("n".into(), "3".into(), "--var".into())]);
    assert_eq!(inputs.workspace, "default");
    assert_eq!(inputs.sources.files.keys().collect::<Vec<_>>(), ["main.hcl"], "var files are not spec files");
}

#[test]
fn a_value_given_again_that_differs_is_refused_naming_the_variable() {
    let fleet = Fleet::new(&spec());
    std::fs::write(fleet.path().join("ci.vars.hcl"), "image = \"ami-ci\"\n").unwrap();
    fleet.run(&["plan", "--var-file", "ci.vars.hcl", "--out", "p.plan"]).expect(0);
    std::fs::write(fleet.path().join("other.vars.hcl"), "\nimage = \"ami-other\"\n").unwrap();
    let r = fleet.run(&["apply", "p.plan", "--var-file", "other.vars.hcl"]).expect(1);
    let err = flat(&r.stderr);
    assert!(
        err.contains(
            "`other.vars.hcl` sets variable `image` to \"ami-other\", but the plan was saved with \"ami-ci\" (from `ci.vars.hcl`)"
        ),
        "{err}"
    );
    assert!(err.contains("hint: drop it (the plan keeps its own values: `gpuplan apply p.plan`)"), "{err}");
    assert!(fleet.live_tagged().is_empty(), "a refused plan launched nodes");
    // A target or an override the plan was not made with: refused too.
    let r = fleet.run(&["apply", "p.plan", "--target", "gpu_pool.serve"]).expect(1);
    assert!(flat(&r.stderr).contains("the plan was saved without --target"), "{}", r.stderr);
    // The same file again: applied.
    fleet.run(&["apply", "p.plan", "--var-file", "ci.vars.hcl"]).expect(0);
    assert_eq!(train_images(&fleet), ["ami-ci"]);
}

#[test]
fn a_plan_file_of_the_previous_format_is_refused_with_the_fix() {
    let fleet = Fleet::new(&spec());
    fleet.run(&["plan", "--out", "p.plan"]).expect(0);
    let path = fleet.path().join("p.plan");
    let mut old = gpuplan::engine::planfile::load(&path).unwrap();
    old.format_version = 1;
    old.inputs = None;
    gpuplan::engine::planfile::save(&path, &old).unwrap();
    let r = fleet.run(&["apply", "p.plan"]).expect(1);
    let err = flat(&r.stderr);
    assert!(err.contains("p.plan` has format 1; this gpuplan reads format 2"), "{err}");
    assert!(err.contains("hint: make the plan again with this version of gpuplan"), "{err}");
    assert!(fleet.live_tagged().is_empty());
}

/// `show PLANFILE` says what the plan will be applied with, as Terraform's `show -json
/// PLANFILE` does: each variable's value and where it came from, in every format; a
/// sensitive one is `(sensitive)` there, and a value given again to `apply` that differs
/// is refused without naming either value.
#[test]
fn show_prints_the_variables_a_saved_plan_was_made_with_hiding_sensitive_ones() {
    let secret = "variable \"token\" {\n  type      = string\n  default   = \"s3cr3t\"\n  sensitive = true\n}\n";
    let fleet = Fleet::new(&format!("{secret}{}", spec()));
    fleet.run(&["plan", "--var", "n=3", "--out", "p.plan"]).expect(0);

    let text = fleet.run(&["show", "p.plan"]).expect(0).stdout;
    let head = "(less than a minute ago) with these variables:\n  \
                image = \"ami-default\"  (default)\n  n     = 3  (--var)\n  token = (sensitive)  (default)\n";
    assert!(text.starts_with("Saved plan of workspace `default`, made "), "{text}");
    assert!(text.contains(head), "{text}");
    let md = fleet.run(&["show", "p.plan", "--format", "markdown"]).expect(0).stdout;
    assert!(md.contains("Variables of this saved plan") && md.contains("n     = 3  (--var)\n"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&fleet.run(&["show", "p.plan", "--json"]).expect(0).stdout).unwrap();
    let vars = &json["variables"];
    assert_eq!(vars["n"], serde_json::json!({"from": "--var", "value": 3}), "{vars:#}");
    assert_eq!(vars["token"], serde_json::json!({"from": "default", "sensitive": true, "value": "(sensitive)"}));
    // The document `plan --out FILE --json` prints is the one `show --json FILE` does.
    let saving = fleet.run(&["plan", "--var", "n=3", "--out", "q.plan", "--json"]).expect(0).stdout;
    let saving: serde_json::Value = serde_json::from_str(&saving).unwrap();
    assert_eq!(&saving["variables"], vars);
    for shown in [&text, &md, &json.to_string()] {
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }

    let r = fleet.run(&["apply", "p.plan", "--var", "token=other"]).expect(1);
    let err = flat(&r.stderr);
    assert!(err.contains("sets variable `token` to another value, but the plan was saved with (sensitive)"), "{err}");
    assert!(!err.contains("s3cr3t") && !err.contains("other\""), "{err}");
}
