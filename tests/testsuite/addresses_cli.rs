//! Addresses are checked, the same way everywhere (`--target`, `state show|rm|mv`,
//! `jobs ...`, `import`): a full address or the name alone where only one kind has it,
//! and an unknown one is an error with a did-you-mean, exit 1, never a plan that does
//! nothing. Also `gpuplan import ADDR ID...` (Terraform's form) and `jobs show`.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("GPUPLAN_SIM_ZONE_CAPACITY")
        .args(args)
        .output()
        .expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(dir: &Path, args: &[&str]) -> Run {
    let r = run(dir, args);
    assert_eq!(r.code, 0, "gpuplan {args:?}\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

fn fails(dir: &Path, args: &[&str], message: &str, hint: &str) -> Run {
    let r = run(dir, args);
    assert_eq!(r.code, 1, "gpuplan {args:?}\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains(&format!("error: {message}")), "gpuplan {args:?}: {}", r.stderr);
    assert!(r.stderr.contains(&format!("hint: {hint}")), "gpuplan {args:?}: {}", r.stderr);
    r
}

/// The starter project of `gpuplan init`: `gpu_pool.starter` and `quota.starter` share a
/// name; `job_template.hello` and (with `--var jobs=1`) `job.hello[0]` another.
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    ok(tmp.path(), &["init"]);
    tmp
}

/// A saved plan's `--target` and `plan --destroy`'s take the same addresses: `apply
/// PLANFILE --target NAME` means the plan's own target by its short name, and a mistyped
/// destroy target is refused before anything is planned or saved.
#[test]
fn saved_and_destroy_plans_take_the_same_addresses() {
    let tmp = project();
    let dir = tmp.path();
    let r = fails(
        dir,
        &["plan", "--destroy", "--target", "gpu_pool.strater", "--out", "d.plan"],
        "no resource `gpu_pool.strater`",
        "did you mean `gpu_pool.starter`?",
    );
    assert!(!r.stdout.contains("No changes") && !dir.join("d.plan").exists(), "{}", r.stdout);
    ok(dir, &["plan", "--target", "gpu_pool.starter", "--out", "p.plan"]);
    fails(
        dir,
        &["apply", "p.plan", "--target", "quota.starter"],
        "the plan was saved with --target gpu_pool.starter",
        "drop --target",
    );
    let applied = ok(dir, &["apply", "p.plan", "--target", "starter"]);
    assert!(applied.stderr.contains("Apply complete! Resources: 1 added"), "{}", applied.stderr);
    let listed = ok(dir, &["state", "list"]);
    assert_eq!(listed.stdout.trim(), "gpu_pool.starter");
}

#[test]
fn a_mistyped_target_is_an_error_never_no_changes() {
    let tmp = project();
    let dir = tmp.path();
    let r = fails(
        dir,
        &["plan", "--target", "gpu_pool.nope"],
        "no resource `gpu_pool.nope` in the spec or the state",
        "`--target` takes",
    );
    assert!(r.stdout.is_empty() && !r.stderr.contains("No changes"), "{}{}", r.stdout, r.stderr);
    for args in [
        &["apply", "--auto-approve", "--target", "gpu_pool.strater"][..],
        &["destroy", "--auto-approve", "--target", "gpu_pool.strater"],
    ] {
        let r = fails(dir, args, "no resource `gpu_pool.strater`", "did you mean `gpu_pool.starter`?");
        assert!(!r.stderr.contains("complete!"), "{}", r.stderr);
    }
    assert!(!dir.join("state/default.json").exists(), "a mistyped target wrote the state");
    assert!(!dir.join("state/default.sim.json").exists(), "a mistyped target opened the cloud");
    fails(
        dir,
        &["plan", "--target", "starter"],
        "`starter` names more than one resource: `gpu_pool.starter`, `quota.starter`",
        "give its kind, e.g. `gpu_pool.starter`",
    );
    // A name alone that one kind has is that address: only the template is planned.
    let plan = ok(dir, &["plan", "--target", "hello", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let changed: Vec<&str> =
        doc["changes"].as_array().unwrap().iter().map(|c| c["address"].as_str().unwrap()).collect();
    assert_eq!(changed, ["job_template.hello"], "{}", plan.stdout);
    assert_eq!(doc["targets"], serde_json::json!(["job_template.hello"]));
}

#[test]
fn state_and_jobs_commands_take_the_same_addresses() {
    let tmp = project();
    let dir = tmp.path();
    fails(
        dir,
        &["state", "show", "starter"],
        "no resource `starter`: there is no state yet",
        "`gpuplan apply` creates",
    );
    ok(dir, &["apply", "--auto-approve", "--var", "jobs=1"]);
    let pool = ok(dir, &["state", "show", "gpu_pool.starter"]);
    fails(dir, &["state", "show", "starter"], "`starter` names more than one resource", "give its kind");
    fails(
        dir,
        &["state", "show", "gpu_pool.strater"],
        "no resource `gpu_pool.strater` in state",
        "did you mean `gpu_pool.starter`?",
    );
    fails(dir, &["state", "show", "quota.nope"], "no resource `quota.nope`", "`gpuplan state list` shows");
    // `job.hello` stands for its one instance, `hello[0]` too; the template is `job_template.hello`.
    assert_eq!(ok(dir, &["state", "show", "job.hello"]).stdout, ok(dir, &["state", "show", "hello[0]"]).stdout);
    assert!(pool.stdout.contains("\"kind\": \"gpu_pool\""), "{}", pool.stdout);

    // `jobs show` is `jobs status`; both resolve like the rest.
    let status = ok(dir, &["jobs", "status", "hello"]);
    assert_eq!(ok(dir, &["jobs", "show", "job.hello"]).stdout, status.stdout);
    fails(dir, &["jobs", "show", "helo"], "no job `helo`", "did you mean `job.hello`?");
    // `render` reads the spec alone, whose `job.hello` has `count = 0` without `--var`.
    fails(dir, &["jobs", "render", "hello"], "no job `hello` in the spec", "the spec declares no `job` blocks");

    // `state mv` takes a name alone for the destination (the same kind); `state rm` every
    // instance of an address without its key.
    ok(dir, &["state", "mv", "gpu_pool.starter", "renamed"]);
    let list = ok(dir, &["state", "list"]).stdout;
    assert!(list.contains("gpu_pool.renamed\n") && !list.contains("gpu_pool.starter"), "{list}");
    fails(dir, &["state", "rm", "job.hello", "gpu_pool.nope"], "no resource `gpu_pool.nope`", "`gpuplan state list`");
    assert!(ok(dir, &["state", "list"]).stdout.contains("job.hello[0]"), "a refused `state rm` removed something");
    ok(dir, &["state", "rm", "job.hello"]);
    assert!(!ok(dir, &["state", "list"]).stdout.contains("job.hello"));
}

/// `gpuplan import ADDR ID...` imports into a pool at once, launching and terminating
/// nothing, and `--provider` may be left out when there is one provider block.
#[test]
fn import_addr_ids_imports_at_once_and_checks_every_id() {
    let tmp = project();
    let dir = tmp.path();
    let launched = ok(dir, &["sim", "launch", "--gpu", "L4", "--count", "2"]);
    let ids: Vec<&str> = launched.stdout.lines().collect();
    assert_eq!(ids.len(), 2);
    let listed = ok(dir, &["import", "--region", "us-east-1"]);
    assert!(ids.iter().all(|id| listed.stdout.contains(id)), "{}", listed.stdout);

    let wrong = ok(dir, &["sim", "launch", "--gpu", "A100-40GB"]);
    let wrong = wrong.stdout.trim();
    let r = fails(
        dir,
        &["import", "starter", ids[0], wrong, "i-nope"],
        "the command line: instance",
        "import it into a pool of its GPU model",
    );
    assert!(r.stderr.contains("`i-nope` does not exist in sim region us-east-1"), "{}", r.stderr);
    assert!(r.stderr.contains("nothing was imported"), "{}", r.stderr);
    assert!(!dir.join("state/default.json").exists(), "a refused import wrote the state");
    fails(
        dir,
        &["import", "gpu_pool.strater", ids[0]],
        "no pool `gpu_pool.strater` in the spec",
        "did you mean `gpu_pool.starter`?",
    );
    fails(
        dir,
        &["import", "gpu_pool.starter", ids[0], "--provider", "aws"],
        "`gpu_pool.starter` is on provider `sim`, not `aws`",
        "drop `--provider`",
    );

    let imported = ok(dir, &["import", "starter", ids[0], ids[1]]);
    assert!(imported.stderr.contains("Instances: 2 imported."), "{}", imported.stderr);
    assert!(imported.stderr.contains("Nodes: 0 launched, 0 terminated."), "{}", imported.stderr);
    let state = ok(dir, &["state", "show", "gpu_pool.starter"]).stdout;
    assert!(ids.iter().all(|id| state.contains(id)), "{state}");
    assert!(!ok(dir, &["state", "list"]).stdout.contains("quota.starter"), "only the import was applied");
    let again = ok(dir, &["import", "gpu_pool.starter", ids[0]]);
    assert!(again.stderr.contains("Nothing to import"), "{}", again.stderr);

    // Several provider blocks: `--provider` must say which.
    let spec = std::fs::read_to_string(dir.join("main.hcl")).unwrap();
    std::fs::write(dir.join("main.hcl"), format!("{spec}\nprovider \"aws\" {{\n  region = \"us-east-1\"\n}}\n"))
        .unwrap();
    fails(
        dir,
        &["import", "--region", "us-east-1"],
        "the spec has 2 provider blocks: `aws`, `sim`",
        "say which to look in: `--provider aws`",
    );
}
