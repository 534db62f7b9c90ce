//! Adopting what runs, through the CLI on the embedded cloud: `gpuplan sim launch` makes
//! hand-made nodes, `gpuplan import` writes pools and `import {}` blocks for them, `plan`
//! shows them as imports, `apply` tags and records them launching nothing; `moved {}`
//! renames a pool keeping every node; `removed {}` with `destroy = false` lets go of it.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;
use gpuplan::providers::sim::{SimCloud, SimConfig};
use gpuplan::providers::{Node, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED};

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

/// Every node of the sim cloud, by id.
fn nodes(dir: &Path) -> Vec<Node> {
    let cloud = SimCloud::open(&dir.join("state").join("default.sim.json"), SimConfig::default()).unwrap();
    let mut n = cloud.nodes();
    n.sort_by(|a, b| a.id.cmp(&b.id));
    n
}

const PROVIDER: &str = "provider \"sim\" {\n  region = \"us-east-1\"\n}\n";

/// Three hand-made nodes (2 on-demand, 1 spot), imported with a generated config.
fn imported(dir: &Path) -> Vec<String> {
    std::fs::write(dir.join("main.hcl"), PROVIDER).unwrap();
    let od = ok(dir, &["sim", "launch", "--gpu", "A100-40GB", "--count", "2", "--zone", "us-east-1a"]);
    let spot = ok(dir, &["sim", "launch", "--gpu", "A100-40GB", "--count", "1", "--spot", "--zone", "us-east-1a"]);
    let mut ids: Vec<String> = od.stdout.lines().chain(spot.stdout.lines()).map(str::to_string).collect();
    ids.sort();
    assert_eq!(ids.len(), 3);

    let table = ok(dir, &["import", "--provider", "sim"]);
    for id in &ids {
        assert!(table.stdout.contains(id.as_str()), "{}", table.stdout);
    }
    ok(dir, &["import", "--provider", "sim", "--generate-config-out", "imported.hcl"]);
    let again = run(dir, &["import", "--provider", "sim", "--generate-config-out", "imported.hcl"]);
    assert_eq!(again.code, 1, "never overwrites: {}", again.stderr);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    ids
}

#[test]
fn hand_made_nodes_are_imported_without_launching_or_terminating() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ids = imported(dir);
    let generated = std::fs::read_to_string(dir.join("imported.hcl")).unwrap();
    assert!(generated.contains("on_demand_base = 2") && generated.contains("spot_percent   = 100"), "{generated}");

    let plan = ok(dir, &["plan"]);
    assert!(plan.stdout.contains("Plan: 3 to import, 0 to add, 0 to change, 0 to destroy."), "{}", plan.stdout);
    for id in &ids {
        assert!(plan.stdout.contains(&format!("{id} (p4d.24xlarge")), "{}", plan.stdout);
    }
    let json = ok(dir, &["plan", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["summary"]["import"], 3, "{}", json.stdout);
    assert_eq!(doc["adoptions"].as_array().map(Vec::len), Some(3));
    assert!(doc["adoptions"].as_array().unwrap().iter().all(|a| a["action"] == "import"));
    let md = ok(dir, &["plan", "--format", "markdown"]);
    assert!(md.stdout.contains("3 to import"), "{}", md.stdout);

    let applied = ok(dir, &["apply", "--auto-approve"]);
    assert!(
        applied.stderr.contains("Instances: 3 imported") || applied.stdout.contains("Instances: 3 imported"),
        "{}{}",
        applied.stdout,
        applied.stderr
    );
    // The cloud holds the same three instances, all running: none launched, none ended.
    let after = nodes(dir);
    assert_eq!(after.iter().map(|n| n.id.clone()).collect::<Vec<_>>(), ids, "the same instances");
    assert!(after.iter().all(|n| n.is_live() && n.tags.get(TAG_MANAGED) == Some("true")));
    let plan = ok(dir, &["plan", "--detailed-exitcode"]);
    assert!(plan.stdout.contains("No changes."), "the import block may stay: {}", plan.stdout);

    // A rename with `moved {}` keeps every node, and only their address tag changes.
    let renamed = generated.replace("gpu_pool \"imported_p4d_24xlarge\"", "gpu_pool \"legacy\"");
    let renamed = renamed.replace("gpu_pool.imported_p4d_24xlarge", "gpu_pool.legacy");
    let moved = "moved {\n  from = gpu_pool.imported_p4d_24xlarge\n  to   = gpu_pool.legacy\n}\n";
    std::fs::write(dir.join("imported.hcl"), format!("{renamed}{moved}")).unwrap();
    let plan = ok(dir, &["plan"]);
    assert!(plan.stdout.contains("# gpu_pool.imported_p4d_24xlarge has moved to gpu_pool.legacy"), "{}", plan.stdout);
    assert!(plan.stdout.contains("0 to add, 0 to change, 0 to destroy"), "{}", plan.stdout);
    ok(dir, &["apply", "--auto-approve"]);
    let after = nodes(dir);
    assert_eq!(after.iter().map(|n| n.id.clone()).collect::<Vec<_>>(), ids, "a rename replaces nothing");
    assert!(after.iter().all(Node::is_live), "{after:?}");
    assert!(after.iter().all(|n| n.tags.get(TAG_ADDRESS) == Some("gpu_pool.legacy")), "{after:?}");
    let list = ok(dir, &["state", "list"]);
    assert!(list.stdout.contains("gpu_pool.legacy") && !list.stdout.contains("imported_p4d"), "{}", list.stdout);
    let plan = ok(dir, &["plan"]);
    assert!(plan.stdout.contains("No changes."), "{}", plan.stdout);

    // `removed` with `destroy = false`: forgotten, untagged, still running.
    let removed = "removed {\n  from = gpu_pool.legacy\n  lifecycle {\n    destroy = false\n  }\n}\n";
    std::fs::write(dir.join("imported.hcl"), removed).unwrap();
    let plan = ok(dir, &["plan"]);
    assert!(
        plan.stdout.contains("gpu_pool.legacy will no longer be managed by gpuplan, but will not be destroyed"),
        "{}",
        plan.stdout
    );
    assert!(plan.stdout.contains("0 to destroy"), "{}", plan.stdout);
    ok(dir, &["apply", "--auto-approve"]);
    let after = nodes(dir);
    assert_eq!(after.iter().filter(|n| n.is_live()).count(), 3, "{after:?}");
    assert!(after.iter().all(|n| n.tags.get(TAG_LINEAGE).is_none() && n.tags.get(TAG_MANAGED).is_none()), "{after:?}");
    let plan = ok(dir, &["plan"]);
    assert!(plan.stdout.contains("No changes."), "forgotten nodes are not orphans: {}", plan.stdout);
}

#[test]
fn bad_import_ids_fail_the_plan_at_their_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), PROVIDER).unwrap();
    let t4 = ok(dir, &["sim", "launch", "--gpu", "T4", "--count", "1", "--zone", "us-east-1a"]);
    let t4 = t4.stdout.trim();
    let spec = format!(
        "{PROVIDER}gpu_pool \"legacy\" {{\n  provider = \"sim\"\n  gpu = \"A100-40GB\"\n  gpus_per_node = 8\n  nodes {{\n    min = 0\n    desired = 1\n    max = 1\n  }}\n}}\nimport {{\n  to  = gpu_pool.legacy\n  ids = [\n    \"i-nope\",\n    \"{t4}\",\n  ]\n}}\n"
    );
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    let plan = run(dir, &["plan"]);
    assert_eq!(plan.code, 1, "{}{}", plan.stdout, plan.stderr);
    // Drawn as `validate` draws its problems: a frame at the id's line and column.
    assert!(plan.stdout.contains("× instance `i-nope` does not exist"), "{}", plan.stdout);
    assert!(plan.stdout.contains("╭─[main.hcl:17:5]"), "{}", plan.stdout);
    assert!(plan.stdout.contains(&format!("× instance `{t4}` is a")), "{}", plan.stdout);
    assert!(plan.stdout.contains("╭─[main.hcl:18:5]"), "{}", plan.stdout);
}

/// An import into a pool the spec lacks, a `removed` block for a pool it still declares
/// and a cycle of `moved` blocks are wrong whatever runs: `validate` reports them, and
/// `plan` reports them the same way, each once, at its line, before touching anything.
#[test]
fn static_adoption_mistakes_fail_validate_and_plan_once_at_their_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = format!(
        "{PROVIDER}gpu_pool \"old\" {{\n  provider = \"sim\"\n  gpu = \"A100-40GB\"\n  gpus_per_node = 8\n  nodes {{\n    min = 0\n    desired = 0\n    max = 1\n  }}\n}}\nimport {{\n  to  = gpu_pool.nope\n  ids = [\"i-1\"]\n}}\nremoved {{\n  from = gpu_pool.old\n}}\nmoved {{\n  from = gpu_pool.a\n  to   = gpu_pool.b\n}}\nmoved {{\n  from = gpu_pool.b\n  to   = gpu_pool.a\n}}\n"
    );
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    let messages = [
        "`import` into `gpu_pool.nope`, which the spec does not declare",
        "`gpu_pool.old` is in a `removed` block but still declared in the spec",
        "the `moved` blocks form a cycle: `gpu_pool.a` → `gpu_pool.b` → `gpu_pool.a`",
    ];
    for cmd in ["validate", "plan"] {
        let r = run(dir, &[cmd]);
        assert_eq!(r.code, 1, "{cmd}: {}{}", r.stdout, r.stderr);
        let out = format!("{}{}", r.stdout, r.stderr);
        for m in messages {
            assert_eq!(out.matches(m).count(), 1, "{cmd}: `{m}` once in\n{out}");
        }
        for at in ["main.hcl:15:9", "main.hcl:19:10", "main.hcl:22:10"] {
            assert!(out.contains(at), "{cmd}: no `{at}` in\n{out}");
        }
        assert!(!dir.join("state").exists(), "{cmd} wrote state");
    }
}

#[test]
fn state_mv_renames_a_pool_and_retags_its_nodes_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pool = |name: &str| {
        format!(
            "{PROVIDER}gpu_pool \"{name}\" {{\n  provider = \"sim\"\n  zones = [\"us-east-1a\"]\n  gpu = \"A100-40GB\"\n  gpus_per_node = 8\n  nodes {{\n    min = 0\n    desired = 2\n    max = 2\n  }}\n}}\n"
        )
    };
    std::fs::write(dir.join("main.hcl"), pool("a")).unwrap();
    ok(dir, &["apply", "--auto-approve"]);
    let before: Vec<String> = nodes(dir).into_iter().map(|n| n.id).collect();
    std::fs::write(dir.join("main.hcl"), pool("b")).unwrap();
    let mv = run(dir, &["state", "mv", "gpu_pool.b", "gpu_pool.a"]);
    assert_eq!(mv.code, 1, "the state has no gpu_pool.b: {}", mv.stderr);
    ok(dir, &["state", "mv", "gpu_pool.a", "gpu_pool.b"]);
    let after = nodes(dir);
    assert_eq!(after.iter().map(|n| n.id.clone()).collect::<Vec<_>>(), before);
    assert!(after.iter().all(|n| n.tags.get(TAG_ADDRESS) == Some("gpu_pool.b")), "{after:?}");
    let plan = ok(dir, &["plan"]);
    assert!(plan.stdout.contains("No changes."), "{}", plan.stdout);
}
