//! The CI recipes in `examples/ci/`: each file passes the linters CI platforms would apply
//! (actionlint for the GitHub workflow, the platforms' JSON schemas through
//! check-jsonschema; both installed by `scripts/test`), and every `gpuplan` command they
//! run exists with the flags they pass. The flow they encode (plan --out, show, apply
//! that plan, reconcile --once) runs end to end against the S3 backend in `state_s3.rs`
//! and here.

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
