//! The CI recipes in `examples/ci/`: each file passes the linters CI platforms would apply
//! (actionlint for the GitHub workflow, the platforms' JSON schemas through
//! check-jsonschema; both installed by `scripts/test`), and every `gpuplan` command they
//! run exists with the flags they pass. The flow they encode (plan --out, show, apply
//! that plan, reconcile --once) runs end to end against the S3 backend in `state_s3.rs`
//! and here, where their own plan and apply lines run: variables from a var file when
//! planning, none when applying the saved plan in a later job.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const GITHUB: &str = "examples/ci/github/gpuplan.yml";
const GITLAB: &str = "examples/ci/gitlab/.gitlab-ci.yml";

fn tool(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{what} did not start ({e}): run the tests with `scripts/test`, which installs it"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

#[test]
fn the_github_workflow_passes_actionlint_and_the_workflow_schema() {
    tool(Command::new(root().join("scripts/actionlint")).arg(GITHUB), "actionlint");
    let venv = root().join(".venv/bin/check-jsonschema");
    tool(Command::new(&venv).args(["--builtin-schema", "vendor.github-workflows", GITHUB]), "check-jsonschema");
}

#[test]
fn the_gitlab_pipeline_passes_the_gitlab_ci_schema() {
    let venv = root().join(".venv/bin/check-jsonschema");
    tool(Command::new(&venv).args(["--builtin-schema", "vendor.gitlab-ci", GITLAB]), "check-jsonschema");
}

#[test]
fn the_linters_catch_a_broken_recipe() {
    // The checks above could pass vacuously; a broken copy must fail them.
    let tmp = tempfile::tempdir().unwrap();
    let gh = std::fs::read_to_string(root().join(GITHUB)).unwrap().replace("${{ github.sha }}", "${{ github.shaa }}");
    let gh_path = tmp.path().join("gpuplan.yml");
    std::fs::write(&gh_path, gh).unwrap();
    let out = Command::new(root().join("scripts/actionlint")).arg(&gh_path).current_dir(root()).output().unwrap();
    assert!(!out.status.success(), "actionlint accepted github.shaa");
    let gl = std::fs::read_to_string(root().join(GITLAB))
        .unwrap()
        .replace("  script:\n    - gpuplan -C \"$GPUPLAN_DIR\" check", "  scripts:\n    - x");
    let gl_path = tmp.path().join(".gitlab-ci.yml");
    std::fs::write(&gl_path, gl).unwrap();
    let out = Command::new(root().join(".venv/bin/check-jsonschema"))
        .args(["--builtin-schema", "vendor.gitlab-ci"])
        .arg(&gl_path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the GitLab schema accepted `scripts:`");
}

/// Every `gpuplan ...` command line in a recipe: its subcommand exists and each `--flag`
/// it passes is one that subcommand takes.
fn commands(path: &Path) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("gpuplan -C \"$GPUPLAN_DIR\" ") else { continue };
        let rest = &line[at + "gpuplan -C \"$GPUPLAN_DIR\" ".len()..];
        let mut words = rest.split_whitespace();
        let sub = words.next().unwrap().to_string();
        let flags = words
            .take_while(|w| !matches!(*w, "||" | ">" | "|" | ";"))
            .filter(|w| w.starts_with("--"))
            .map(|w| w.split('=').next().unwrap().to_string())
            .collect();
        out.push((sub, flags));
    }
    out
}

/// Both recipes run `gpuplan test` before they plan, write its JUnit file and publish it
/// where the CI system reads test reports.
#[test]
fn the_recipes_test_before_they_plan_and_publish_the_junit_file() {
    for (recipe, publish) in
        [(GITHUB, "report_paths: fleet/gpuplan-test.xml"), (GITLAB, "junit: fleet/gpuplan-test.xml")]
    {
        let text = std::fs::read_to_string(root().join(recipe)).unwrap();
        let test =
            text.find("test --junit-xml gpuplan-test.xml").unwrap_or_else(|| panic!("{recipe} runs no `gpuplan test`"));
        let plan = text.find("plan --out pr.plan").unwrap();
        assert!(test < plan, "{recipe} plans before it tests");
        assert!(text.contains(publish), "{recipe} does not publish the JUnit file");
    }
}

#[test]
fn every_gpuplan_command_in_the_recipes_exists_with_its_flags() {
    for recipe in [GITHUB, GITLAB] {
        let cmds = commands(&root().join(recipe));
        let subs: Vec<&str> = cmds.iter().map(|(s, _)| s.as_str()).collect();
        for needed in ["test", "check", "plan", "show", "apply", "reconcile"] {
            assert!(subs.contains(&needed), "{recipe} runs no `gpuplan {needed}`");
        }
        for (sub, flags) in &cmds {
            let help = Command::new(env!("CARGO_BIN_EXE_gpuplan")).args([sub.as_str(), "--help"]).output().unwrap();
            assert!(help.status.success(), "{recipe}: `gpuplan {sub}` is not a command");
            let help = String::from_utf8_lossy(&help.stdout);
            for flag in flags {
                assert!(help.contains(flag.as_str()), "{recipe}: `gpuplan {sub}` takes no `{flag}`");
            }
        }
    }
}

/// The recipe's `gpuplan` command lines whose subcommand is `sub`, as argument lists
/// with `-C "$GPUPLAN_DIR"` pointed at `dir` (up to a shell operator).
fn invocations(path: &Path, sub: &str, dir: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let prefix = "gpuplan -C \"$GPUPLAN_DIR\" ";
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find(prefix) else { continue };
        let words: Vec<String> = line[at + prefix.len()..]
            .split_whitespace()
            .take_while(|w| !matches!(*w, "||" | ">" | "|" | ";"))
            .map(str::to_string)
            .collect();
        if words.first().map(String::as_str) == Some(sub) {
            let mut args = vec!["-C".to_string(), dir.display().to_string()];
            args.extend(words);
            out.push(args);
        }
    }
    out
}

/// The loop the recipes encode, with their own command lines, on the sim cloud: the plan
/// job plans with the fleet's var file into `pr.plan`; the apply job, in another
/// environment, applies that file with no variable flag, and gets what was planned.
#[test]
fn the_recipes_plan_with_variables_and_a_later_job_applies_the_saved_plan_without_them() {
    let spec = "provider \"sim\" {}\n\
                variable \"nodes\" {\n  type    = number\n  default = 1\n}\n\
                gpu_pool \"train\" {\n  provider      = \"sim\"\n  region        = \"us-east-1\"\n  gpu           = \"L4\"\n  gpus_per_node = 1\n  nodes {\n    min     = 0\n    desired = var.nodes\n    max     = 8\n  }\n}\n";
    for recipe in [GITHUB, GITLAB] {
        let fleet = tempfile::tempdir().unwrap();
        std::fs::write(fleet.path().join("main.hcl"), spec).unwrap();
        std::fs::write(fleet.path().join("production.vars.hcl"), "nodes = 3\n").unwrap();
        let plans = invocations(&root().join(recipe), "plan", fleet.path());
        let [plan] = plans.as_slice() else { panic!("{recipe}: one `gpuplan plan` line, found {plans:?}") };
        assert!(plan.iter().any(|a| a == "--var-file"), "{recipe} plans without its variables: {plan:?}");
        let applies = invocations(&root().join(recipe), "apply", fleet.path());
        let [apply] = applies.as_slice() else { panic!("{recipe}: one `gpuplan apply` line, found {applies:?}") };
        assert!(!apply.iter().any(|a| a.starts_with("--var")), "{recipe} repeats variables at apply: {apply:?}");

        let gpuplan = || {
            let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_gpuplan"));
            cmd.env("NO_COLOR", "1").env_remove("GPUPLAN_WORKSPACE").env_remove("GPUPLAN_VAR_nodes");
            cmd
        };
        // Exit 2: changes to review, as the recipe expects.
        gpuplan().args(plan).assert().code(2);
        // The apply job: another environment; only the plan artefact carries the values.
        std::fs::remove_file(fleet.path().join("production.vars.hcl")).unwrap();
        gpuplan().args(apply).env("GPUPLAN_VAR_nodes", "7").assert().success();
        let state: serde_json::Value = crate::state_plain::read(&fleet.path().join("state/default.json"));
        let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().map_or(0, Vec::len);
        assert_eq!(nodes, 3, "{recipe}: the apply job did not apply the plan's values: {state:#}");
    }
}
