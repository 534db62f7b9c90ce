//! Output changes against the state, and what a decoded `output` reads.

use crate::addr::Address;
use crate::plan::Action;
use crate::spec::{LoadOptions, Spec};
use crate::state::State;
use crate::state::model::OutputState;

const SPEC: &str = r#"
provider "sim" {
  region = "us-east-1"
}

variable "token" {
  type      = string
  default   = "t"
  sensitive = true
}

locals {
  both = [gpu_pool.a.name, gpu_pool.b.name]
}

gpu_pool "a" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
}

gpu_pool "b" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 1
    max     = 4
  }
}

output "a_gpus" {
  value = gpu_pool.a.gpus_per_node * gpu_pool.a.nodes.desired
}

output "names" {
  value = local.both
}

output "token" {
  value = "prefix-${var.token}"
}

output "constant" {
  value = 7
}
"#;

fn spec() -> Spec {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.hcl"), SPEC).expect("write spec");
    let loaded = crate::spec::load_dir(dir.path(), &LoadOptions::default()).expect("spec loads");
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    loaded.spec
}

fn addr(s: &str) -> Address {
    s.parse().expect("an address")
}

fn value(v: serde_json::Value) -> OutputState {
    OutputState { value: v, sensitive: false }
}

fn actions(changes: &[crate::plan::model::OutputChange]) -> Vec<(&str, Action)> {
    changes.iter().map(|c| (c.name.as_str(), c.action)).collect()
}

#[test]
fn outputs_read_resources_through_locals_and_a_sensitive_variable_makes_them_sensitive() {
    let spec = spec();
    assert_eq!(spec.outputs["a_gpus"].reads, [addr("gpu_pool.a")]);
    assert_eq!(spec.outputs["names"].reads, [addr("gpu_pool.a"), addr("gpu_pool.b")]);
    assert!(spec.outputs["constant"].reads.is_empty());
    assert!(spec.outputs["token"].sensitive.value, "it reads a sensitive variable");
    assert!(!spec.outputs["a_gpus"].sensitive.value);
}

#[test]
fn outputs_are_created_updated_deleted_and_left_as_they_are() {
    let spec = spec();
    let mut state = State::new("l".into());
    assert_eq!(
        actions(&super::changes(&spec, &state, &[], false)),
        [
            ("a_gpus", Action::Create),
            ("constant", Action::Create),
            ("names", Action::Create),
            ("token", Action::Create)
        ]
    );
    state.outputs.insert("a_gpus".into(), value(serde_json::json!(1)));
    state.outputs.insert("constant".into(), value(serde_json::json!(7)));
    state.outputs.insert("names".into(), value(serde_json::json!(["a", "b"])));
    state.outputs.insert("token".into(), value(serde_json::json!("prefix-t")));
    state.outputs.insert("gone".into(), value(serde_json::json!("x")));
    let changes = super::changes(&spec, &state, &[], false);
    assert_eq!(
        actions(&changes),
        [
            ("a_gpus", Action::Update),
            ("constant", Action::NoOp),
            ("gone", Action::Delete),
            ("names", Action::NoOp),
            // The same value, now sensitive: an update, so the state says so.
            ("token", Action::Update),
        ]
    );
    assert_eq!(changes[0].after, Some(value(serde_json::json!(2))));
    assert!(changes[4].sensitive());

    let destroy = super::changes(&spec, &state, &[], true);
    assert!(destroy.iter().all(|c| c.action == Action::Delete && c.after.is_none()), "{destroy:?}");
    assert_eq!(destroy.len(), state.outputs.len());

    // A targeted plan takes only the outputs it targets every resource of.
    let targeted = super::changes(&spec, &state, &[addr("gpu_pool.a")], false);
    assert_eq!(actions(&targeted), [("a_gpus", Action::Update)]);
    let both = super::changes(&spec, &state, &[addr("gpu_pool.a"), addr("gpu_pool.b")], false);
    assert_eq!(actions(&both), [("a_gpus", Action::Update), ("names", Action::NoOp)]);
}

#[test]
fn the_journal_entry_sets_and_removes_what_changed() {
    let spec = spec();
    let mut state = State::new("l".into());
    state.outputs.insert("gone".into(), value(serde_json::json!("x")));
    state.outputs.insert("constant".into(), value(serde_json::json!(7)));
    let changes = super::changes(&spec, &state, &[], false);
    let entry = super::journal_entry(&changes).expect("something changes");
    let base = state.clone();
    crate::state::apply_entry(&mut state, &entry);
    let names: Vec<&String> = state.outputs.keys().collect();
    assert_eq!(names, ["a_gpus", "constant", "names", "token"]);
    assert_eq!(state.outputs["a_gpus"].value, serde_json::json!(2));
    assert!(super::journal_entry(&super::changes(&spec, &state, &[], false)).is_none(), "converged");
    // The same through a replay, as a journal is read back.
    let mut replay = crate::state::Replay::new(base);
    replay.apply(&entry);
    assert_eq!(replay.finish().outputs, state.outputs);
}

/// A value derived from a sensitive variable is sensitive however it gets to an output:
/// through a local (and a local of that local) or through a resource whose block reads
/// it; outputs that read neither stay plain.
#[test]
fn outputs_derived_from_a_sensitive_variable_through_locals_and_resources_are_sensitive() {
    let text = SPEC.to_string()
        + r#"
locals {
  bearer = "Bearer ${var.token}"
  header = { auth = local.bearer }
}

gpu_pool "c" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    desired = 1
    max     = 2
  }
  labels = local.header
}

output "via_local" {
  value = local.header
}

output "via_pool" {
  value = gpu_pool.c.labels
}
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.hcl"), text).expect("write spec");
    let loaded = crate::spec::load_dir(dir.path(), &LoadOptions::default()).expect("spec loads");
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let o = &loaded.spec.outputs;
    assert!(o["via_local"].sensitive.value, "a local of a local of a sensitive variable");
    assert!(o["via_pool"].sensitive.value, "a pool whose labels read it");
    assert!(!o["names"].sensitive.value && !o["a_gpus"].sensitive.value, "plain outputs stay plain");
}
