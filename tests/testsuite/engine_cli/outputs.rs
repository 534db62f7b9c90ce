//! `output` blocks through the binary: shown as changes in `plan` (text, `--json`,
//! markdown), printed after `apply` and recorded in state, read back by `gpuplan output`
//! as `terraform output` does, and removed by `destroy`.

use crate::engine_cli::{Fleet, PROVIDER, pool};

/// One pool and four outputs: a number, a string, a list and a sensitive variable.
fn spec(desired: u32) -> String {
    format!(
        r#"{PROVIDER}{}
variable "token" {{
  type      = string
  default   = "s3cr3t-token"
  sensitive = true
}}

output "train_gpus" {{
  value       = gpu_pool.train.gpus_per_node * gpu_pool.train.nodes.desired
  description = "GPUs of the training pool"
}}

output "train_id" {{
  value = gpu_pool.train.id
}}

output "zones" {{
  value = gpu_pool.train.zones
}}

output "token" {{
  value = var.token
}}
"#,
        pool("train", &["us-east-1a", "us-east-1b"], desired, "")
    )
}

/// The files under the fleet's directory, with their sizes and modification times.
fn files(fleet: &Fleet) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut dirs = vec![fleet.path().to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").map(|e| e.expect("entry")) {
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                dirs.push(e.path());
            } else {
                out.push((e.path().display().to_string(), meta.len(), meta.modified().expect("mtime")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn apply_records_outputs_and_output_reads_them_as_terraform_does() {
    let fleet = Fleet::new(&spec(2));
    let plan = fleet.run(&["plan"]).expect(0);
    assert!(plan.stdout.contains("Changes to Outputs:\n  + token      = (sensitive)\n"), "{}", plan.stdout);
    assert!(plan.stdout.contains("  + train_gpus = 2\n"), "{}", plan.stdout);
    assert!(plan.stdout.contains("  + zones      = [\"us-east-1a\", \"us-east-1b\"]\n"), "{}", plan.stdout);
    assert!(!plan.stdout.contains("s3cr3t"), "a sensitive value in the plan: {}", plan.stdout);
    let markdown = fleet.run(&["plan", "--format", "markdown"]).expect(0);
    assert!(markdown.stdout.contains("+ token      = (sensitive)"), "{}", markdown.stdout);
    assert!(!markdown.stdout.contains("s3cr3t"), "{}", markdown.stdout);
    let json = fleet.plan_json();
    assert_eq!(
        json["output_changes"]["train_gpus"],
        serde_json::json!({"actions": ["create"], "after": 2, "after_sensitive": false, "before": null, "before_sensitive": false})
    );
    assert_eq!(json["output_changes"]["token"]["after"], serde_json::Value::Null, "{json:#}");
    assert_eq!(json["output_changes"]["token"]["after_sensitive"], true, "{json:#}");

    let applied = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(
        applied.stdout.ends_with(
            "\nOutputs:\n\ntoken      = (sensitive)\ntrain_gpus = 2\ntrain_id   = \"gpu_pool.train\"\nzones      = [\"us-east-1a\", \"us-east-1b\"]\n"
        ),
        "{}",
        applied.stdout
    );
    let state = fleet.state();
    assert_eq!(state.outputs["train_gpus"].value, serde_json::json!(2));
    assert!(state.outputs["token"].sensitive);
    assert_eq!(state.outputs["token"].value, "s3cr3t-token", "the state keeps the value, as Terraform's does");

    // `output` reads the state and writes nothing: no lock, no new or touched file.
    let before = files(&fleet);
    let list = fleet.run(&["output"]).expect(0);
    assert_eq!(
        list.stdout,
        "token      = (sensitive)\ntrain_gpus = 2\ntrain_id   = \"gpu_pool.train\"\nzones      = [\"us-east-1a\", \"us-east-1b\"]\n"
    );
    assert_eq!(fleet.run(&["output", "train_gpus"]).expect(0).stdout, "2\n");
    assert_eq!(fleet.run(&["output", "token"]).expect(0).stdout, "\"s3cr3t-token\"\n");
    assert_eq!(fleet.run(&["output", "train_id", "--raw"]).expect(0).stdout, "gpu_pool.train");
    assert_eq!(fleet.run(&["output", "train_gpus", "--raw"]).expect(0).stdout, "2");
    assert_eq!(
        fleet.run(&["output", "zones", "--json"]).expect(0).stdout,
        "[\n  \"us-east-1a\",\n  \"us-east-1b\"\n]\n"
    );
    let all: serde_json::Value = serde_json::from_str(&fleet.run(&["output", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(all["token"], serde_json::json!({"sensitive": true, "type": "string", "value": "s3cr3t-token"}));
    assert_eq!(all["train_gpus"], serde_json::json!({"sensitive": false, "type": "number", "value": 2}));
    assert_eq!(all["zones"]["type"], serde_json::json!(["tuple", ["string", "string"]]));
    assert_eq!(files(&fleet), before, "`gpuplan output` wrote or touched a file");

    let unknown = fleet.run(&["output", "train_gpu"]).expect(1);
    assert!(unknown.stderr.contains("output `train_gpu` not found in state"), "{}", unknown.stderr);
    assert!(unknown.stderr.contains("did you mean `train_gpus`?"), "{}", unknown.stderr);
    let list_raw = fleet.run(&["output", "zones", "--raw"]).expect(1);
    assert!(list_raw.stderr.contains("`--raw` prints only strings, numbers and bools"), "{}", list_raw.stderr);
    assert!(list_raw.stderr.contains("gpuplan output zones --json"), "{}", list_raw.stderr);
    assert!(fleet.run(&["output", "--raw"]).expect(1).stderr.contains("`--raw` prints one output"));
    assert_eq!(files(&fleet), before, "a failed `gpuplan output` wrote or touched a file");

    // Converged: nothing to change, outputs included.
    let again = fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    assert!(!again.stdout.contains("Changes to Outputs"), "{}", again.stdout);
}

#[test]
fn a_changed_output_is_a_change_to_apply_and_destroy_removes_them() {
    let fleet = Fleet::new(&spec(2));
    fleet.run(&["apply", "--auto-approve"]).expect(0);

    // Only outputs change: the plan says so, `--detailed-exitcode` says 2, and applying it
    // records the new values without touching the cloud.
    let only_outputs = spec(2)
        .replace("gpu_pool.train.gpus_per_node * gpu_pool.train.nodes.desired", "gpu_pool.train.nodes.max")
        .replace("output \"train_id\" {\n  value = gpu_pool.train.id\n}\n", "");
    fleet.write_spec(&only_outputs);
    let plan = fleet.run(&["plan", "--detailed-exitcode"]).expect(2);
    assert!(
        plan.stdout.starts_with(
            "Changes to Outputs:\n  ~ train_gpus = 2 -> 16\n  - train_id   = \"gpu_pool.train\" -> null\n\nYou can apply this plan to save these new output values to the state, without changing the fleet.\n"
        ),
        "{}",
        plan.stdout
    );
    assert!(!plan.stdout.contains("No changes"), "{}", plan.stdout);
    let json = fleet.plan_json();
    assert_eq!(json["output_changes"]["train_id"]["actions"], serde_json::json!(["delete"]));
    assert_eq!(json["output_changes"]["train_gpus"]["actions"], serde_json::json!(["update"]));
    assert_eq!(json["output_changes"]["zones"]["actions"], serde_json::json!(["no-op"]));
    let nodes = fleet.live_tagged().len();
    let applied = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(
        applied.stderr.contains("Apply complete! Resources: 0 added, 0 changed, 0 destroyed."),
        "{}",
        applied.stderr
    );
    assert_eq!(fleet.live_tagged().len(), nodes);
    assert_eq!(fleet.state().outputs["train_gpus"].value, serde_json::json!(16));
    assert!(!fleet.state().outputs.contains_key("train_id"));
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);

    // A targeted plan takes only the outputs of what it targets.
    fleet.write_spec(&format!(
        "{}{}output \"serve_id\" {{\n  value = gpu_pool.serve.id\n}}\n",
        spec(3).replace("gpu_pool.train.gpus_per_node * gpu_pool.train.nodes.desired", "gpu_pool.train.nodes.max"),
        pool("serve", &["us-east-1a"], 1, "")
    ));
    let targeted = fleet.run(&["plan", "--target", "gpu_pool.serve"]).expect(0);
    assert!(targeted.stdout.contains("  + serve_id = \"gpu_pool.serve\"\n"), "{}", targeted.stdout);
    assert!(!targeted.stdout.contains("train_id"), "{}", targeted.stdout);

    let destroy = fleet.run(&["destroy", "--auto-approve"]).expect(0);
    assert!(destroy.stdout.contains("  - train_gpus = 16 -> null\n"), "{}", destroy.stdout);
    assert!(!destroy.stdout.contains("Outputs:\n\n"), "destroy prints no outputs: {}", destroy.stdout);
    assert!(fleet.state().outputs.is_empty(), "{:?}", fleet.state().outputs);
    let none = fleet.run(&["output"]).expect(0);
    assert_eq!(none.stdout, "");
    assert!(none.stderr.contains("warning: no outputs found"), "{}", none.stderr);
}
