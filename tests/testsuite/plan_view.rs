//! The plan a reviewer reads in ten seconds (issue 46), as `gpuplan init`'s starter fleet
//! shows it on the embedded cloud at 100 columns: the summary counts what costs money and
//! interrupts work, one line per job, one block and one error line per denial, and plan
//! errors drawn as `validate` draws them. The README's plan example is this module's
//! `starter_scaled_up` snapshot, checked here.

use std::path::Path;
use std::process::Command;

/// `(exit code, stdout, stderr)` of `gpuplan ARGS` in `dir`: plain, 100 columns, the sim
/// clock fixed.
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .env("GPUPLAN_SIM_START", crate::sim_run::SIM_START)
        .args(args)
        .output()
        .expect("gpuplan runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `gpuplan init` in a new folder, then `apply` with `vars` (`--var k=v` each).
fn applied_starter(vars: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = run(tmp.path(), &["init"]);
    assert_eq!(code, 0, "{err}");
    let mut args = vec!["apply", "--auto-approve"];
    for v in vars {
        args.extend(["--var", v]);
    }
    let (code, _, err) = run(tmp.path(), &args);
    assert_eq!(code, 0, "{err}");
    tmp
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({ omit_expression => true }, { insta::assert_snapshot!(name, text) });
}

/// The issue's scenario: the starter fleet (one spot node) planned with three nodes, half
/// spot. The summary counts the nodes launched and terminated, in text, JSON and the
/// apply's closing line alike.
///
/// The issue's "Done when": least disruption keeps the running spot node (its zone and
/// capacity fit the even layout), so the plan launches two on-demand nodes and
/// terminates none.
#[test]
fn the_starter_fleet_scaled_up_counts_nodes_to_launch_and_terminate() {
    let tmp = applied_starter(&[]);
    let vars = ["--var", "nodes=3", "--var", "spot_percent=50"];
    let (code, out, err) = run(tmp.path(), &[&["plan"][..], &vars].concat());
    assert_eq!(code, 0, "{err}");
    snapshot("starter_scaled_up", &out);
    assert!(
        out.contains("\nPlan: 0 to add, 1 to change, 0 to destroy. Nodes: 2 to launch, 0 to terminate.\n"),
        "{out}"
    );
    // Terraform's layout: one header line, `->` only, no empty or default attributes.
    assert!(out.contains("  # gpu_pool.starter will be updated in-place\n  ~ gpu_pool \"starter\" {\n"), "{out}");
    for noise in ["→", "# (", "lifecycle", "(1 GPUs)", "1 GPUs"] {
        assert!(!out.contains(noise), "`{noise}` in the plan:\n{out}");
    }

    let (code, json, err) = run(tmp.path(), &[&["plan", "--json"][..], &vars].concat());
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).expect("plan --json parses");
    let s = &doc["summary"];
    assert_eq!(
        (&s["add"], &s["change"], &s["destroy"], &s["nodes_launch"], &s["nodes_terminate"]),
        (&0.into(), &1.into(), &0.into(), &2.into(), &0.into()),
        "{s}"
    );
    assert_eq!((&s["jobs_launch"], &s["jobs_requeue"]), (&0.into(), &0.into()), "{s}");

    let (code, _, err) = run(tmp.path(), &[&["apply", "--auto-approve"][..], &vars].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Apply complete! Resources: 0 added, 1 changed, 0 destroyed. Nodes: 2 launched, 0 terminated.\n"),
        "{err}"
    );
}

/// A running job whose node the plan removes (two spot nodes, one job each, to a mix of
/// one spot in three: one spot node must go): one line, true to the template (the
/// starter's `hello` has no `checkpoint_uri` and no retries), the details under
/// `--verbose`, and `requeue` in the summary and the apply's closing line. The other job
/// keeps its node and is not listed.
#[test]
fn jobs_under_removed_nodes_read_one_line_each_and_claim_no_checkpoint() {
    let tmp = applied_starter(&["jobs=2", "nodes=2"]);
    let vars = ["--var", "nodes=3", "--var", "spot_percent=50", "--var", "jobs=2"];
    let (code, out, err) = run(tmp.path(), &[&["plan"][..], &vars].concat());
    assert_eq!(code, 0, "{err}");
    snapshot("starter_jobs_requeued", &out);
    let jobs: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("! job.hello[")).collect();
    assert_eq!(jobs.len(), 1, "{out}");
    for line in &jobs {
        assert!(line.contains(" requeued: node i-"), "{line}");
        assert!(line.ends_with(" removed (rebalance); attempt 2, no retry spent"), "{line}");
    }
    for untrue in ["checkpoint", "retries left", "retries not spent"] {
        assert!(!out.contains(untrue), "`{untrue}` in the plan:\n{out}");
    }
    assert!(out.contains("Nodes: 2 to launch, 1 to terminate.\n      Jobs: 0 to launch, 1 to requeue."), "{out}");

    let (code, verbose, err) = run(tmp.path(), &[&["plan", "--verbose"][..], &vars].concat());
    assert_eq!(code, 0, "{err}");
    assert!(verbose.contains("stops and is requeued as attempt 2, no retry spent"), "{verbose}");
    assert!(!verbose.contains("checkpoint") && !verbose.contains('→'), "{verbose}");

    let (code, json, err) = run(tmp.path(), &[&["plan", "--json"][..], &vars].concat());
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).expect("plan --json parses");
    assert_eq!(doc["summary"]["jobs_requeue"], 1, "{}", doc["summary"]);
    let reason = doc["jobs"][0]["reason"]["message"].as_str().expect("a reason");
    assert!(!reason.contains("checkpoint"), "{reason}");

    let (code, _, err) = run(tmp.path(), &[&["apply", "--auto-approve"][..], &vars].concat());
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(" Nodes: 2 launched, 1 terminated. Jobs: 0 launched, 1 requeued.\n"), "{err}");
}

/// A destroy under running jobs: the failing policy is one block in the plan, its message
/// is printed once in the whole command, one `error:` line follows, and one hint names
/// the one way through.
#[test]
fn a_denied_destroy_reads_each_failure_once() {
    let tmp = applied_starter(&["jobs=2"]);
    let (code, out, err) = run(tmp.path(), &["destroy", "--auto-approve"]);
    assert_eq!(code, 3, "{out}\n{err}");
    snapshot("starter_destroy_denied", &format!("{out}\n--- stderr ---\n{err}"));
    let both = format!("{out}{err}");
    assert_eq!(both.matches("would be destroyed under running").count(), 1, "{both}");
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    assert!(err.contains("error: policy `no_destroy_pool_with_jobs` (soft) denies this plan; nothing was applied\n"));
    assert_eq!(err.matches("hint:").count(), 1, "{err}");
    assert!(err.contains("--override-policy no_destroy_pool_with_jobs"), "{err}");
    assert!(!both.contains("` and `gpuplan jobs cancel"), "one command, not one per job: {both}");
    // Where the plan is not shown as text, the one error line quotes the failure.
    let (code, json, err) = run(tmp.path(), &["plan", "--json", "--var", "jobs=2", "--var", "gpu=A10G"]);
    assert_eq!(code, 3, "{err}");
    assert!(json.starts_with('{'), "{json}");
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    assert!(
        err.contains(
            "error: policy `no_destroy_pool_with_jobs` (soft) denies this plan; it cannot be applied: \
             gpu_pool.starter would be replaced under running job.hello[0]"
        ),
        "{err}"
    );
}

/// An error the plan finds in the spec (an import of an instance the cloud does not
/// have: only the refresh can tell) is drawn with its source line, as `validate` draws
/// its problems, by `plan` and by `apply`, never as a line cut at the width. An error
/// `validate` finds (an import into an undeclared pool) is drawn the same way on stderr.
#[test]
fn plan_errors_in_the_spec_are_drawn_with_their_source_line() {
    let tmp = applied_starter(&[]);
    let main = tmp.path().join("main.hcl");
    let spec = std::fs::read_to_string(&main).expect("main.hcl");
    let import = "\nimport {\n  to  = gpu_pool.starter\n  ids = [\"i-0abc\"]\n}\n";
    std::fs::write(&main, format!("{spec}{import}")).expect("write main.hcl");
    for args in [&["plan"][..], &["apply", "--auto-approve"]] {
        let (code, out, err) = run(tmp.path(), args);
        assert_eq!(code, 1, "{args:?}: {out}\n{err}");
        assert!(out.contains("× instance `i-0abc` does not exist in sim region us-east-1\n"), "{out}");
        assert!(out.contains("╭─[main.hcl:"), "a frame naming the file: {out}");
        assert!(out.contains("│   ids = [\"i-0abc\"]\n"), "the source line: {out}");
        assert!(out.contains("help: check the ID and the pool's provider and region"), "{out}");
        assert!(!out.contains("Error: main.hcl"), "the one-line form: {out}");
    }
    std::fs::write(&main, format!("{spec}{}", import.replace("gpu_pool.starter", "gpu_pool.nope"))).expect("write");
    let (code, out, err) = run(tmp.path(), &["plan"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("× `import` into `gpu_pool.nope`, which the spec does not declare\n"), "{err}");
    assert!(err.contains("│   to  = gpu_pool.nope\n"), "the source line: {err}");
    assert!(err.contains("error: the spec has 1 problem; nothing was done\n"), "{err}");
}

/// The README's plan example is the `starter_scaled_up` snapshot's text, between its
/// markers: when the view changes, the snapshot and then the README follow
/// (`GPUPLAN_UPDATE_README=1 cargo nextest run -E 'test(readme_plan_example)'` copies it).
#[test]
fn the_readme_plan_example_is_the_snapshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let snap =
        std::fs::read_to_string(root.join("tests/testsuite/snapshots/testsuite__plan_view__starter_scaled_up.snap"))
            .expect("the snapshot");
    // The snapshot's body: what follows its `---` header.
    let body = snap.splitn(3, "---\n").nth(2).expect("a snapshot header");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let start = "<!-- plan example: tests/testsuite/snapshots/testsuite__plan_view__starter_scaled_up.snap -->\n```\n";
    let at = readme.find(start).expect("the README marks its plan example") + start.len();
    let end = at + readme[at..].find("```\n").expect("the example's fence closes");
    let want = body.trim_end_matches('\n').to_string() + "\n";
    if std::env::var("GPUPLAN_UPDATE_README").is_ok_and(|v| v == "1") {
        let updated = format!("{}{want}{}", &readme[..at], &readme[end..]);
        std::fs::write(root.join("README.md"), updated).expect("write README.md");
        return;
    }
    assert_eq!(
        &readme[at..end],
        want,
        "README.md's plan example differs from the snapshot: run with GPUPLAN_UPDATE_README=1 to copy it"
    );
}
