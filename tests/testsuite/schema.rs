//! The JSON Schemas under `schemas/` are generated from the Rust types and checked in.
//! This test fails when they are stale (regenerate with
//! `GPUPLAN_UPDATE_SCHEMAS=1 cargo test --test testsuite schema`), and checks that the spec schema
//! accepts every YAML example and rejects a wrong document.

use std::path::{Path, PathBuf};

use gpuplan::diag::Diagnostics;
use gpuplan::schema;
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[test]
fn checked_in_schemas_are_current() {
    let update = std::env::var("GPUPLAN_UPDATE_SCHEMAS").is_ok_and(|v| v == "1");
    let dir = root().join("schemas");
    let all = schema::all();
    assert!(all.iter().any(|(n, _)| *n == "spec.schema.json") && all.iter().any(|(n, _)| *n == "state.schema.json"));
    for (name, schema) in all {
        let text = serde_json::to_string_pretty(&schema).expect("schema serializes") + "\n";
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).expect("mkdir schemas");
            std::fs::write(&path, &text).expect("write schema");
            continue;
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == text,
            "schemas/{name} is missing or stale: the Rust types changed.\n\
             Regenerate it with `GPUPLAN_UPDATE_SCHEMAS=1 cargo test --test testsuite schema` and commit the result."
        );
    }
}

fn spec_validator() -> jsonschema::Validator {
    let schema = schema::all().into_iter().find(|(n, _)| *n == "spec.schema.json").expect("spec schema").1;
    jsonschema::validator_for(&schema).expect("the spec schema is a valid JSON Schema")
}

/// The JSON document a YAML spec file stands for, as the schema sees it.
fn yaml_doc(text: &str) -> Value {
    let mut diags = Diagnostics::default();
    let body = gpuplan::spec::yaml::parse(0, text, &mut diags).expect("YAML parses");
    assert!(!diags.has_errors(), "{:?}", diags.items);
    schema::yaml_document(&body, text)
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

fn yaml_examples(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read examples") {
        let path = entry.expect("entry").path();
        // `examples/ci/` holds CI pipelines, not specs (`ci_recipes.rs` checks them).
        if path.is_dir() && !path.ends_with("ci") {
            yaml_examples(&path, out);
        } else if path.is_dir() {
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

#[test]
fn yaml_examples_match_the_spec_schema() {
    let v = spec_validator();
    let mut files = Vec::new();
    yaml_examples(&root().join("examples"), &mut files);
    assert!(!files.is_empty(), "no YAML examples found");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read");
        let doc = yaml_doc(&text);
        assert!(doc.get("gpu_pools").is_some(), "{}: the document lost its pools: {doc}", path.display());
        let errs = errors(&v, &doc);
        assert!(errs.is_empty(), "{} does not match spec.schema.json:\n{}", path.display(), errs.join("\n"));
    }
}

/// Valid YAML using what the examples do not: meta-arguments, every block kind,
/// expressions in place of literals.
const FEATURES: &str = r#"
providers:
  aws:
    region: us-east-1
    subnets: {us-east-1a: subnet-1}
    security_groups: [sg-1]
  sim:
    alias: lab
    latency: 50ms
    failure_rate: 0.1
variables:
  sizes:
    type: list
    default: [1, 2]
  secret:
    type: string
    default: x
    sensitive: true
locals:
  n: ${length(var.sizes)}
gpu_pools:
  train:
    provider: aws
    gpu: A10G
    gpus_per_node: 1
    count: 2
    depends_on: [gpu_pool.serve]
    lifecycle: {prevent_destroy: true, ignore_changes: [nodes.desired]}
    nodes: {min: 0, desired: "${local.n}", max: 4}
    mix: {fallback: wait, max_spot_price: 1.5}
  serve:
    provider: aws
    gpu: A10G
    gpus_per_node: 1
    for_each: {a: 1, b: 2}
    nodes: {desired: 1, max: 2}
quotas:
  q:
    pools: [gpu_pool.serve]
    warn_percent: 90
    budget: {monthly_usd: 1000}
job_templates:
  t: {image: "x:1", gpus: 1, priority: low, retries: 3}
jobs:
  j: {template: job_template.t, pool: gpu_pool.serve, replicas: 2, env: {A: b}}
autoscalers:
  a: {pool: gpu_pool.serve, step: 2}
outputs:
  o: {value: "${local.n}", sensitive: false}
"#;

#[test]
fn a_spec_using_every_feature_matches_the_schema() {
    let errs = errors(&spec_validator(), &yaml_doc(FEATURES));
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

#[test]
fn wrong_documents_fail_the_schema() {
    let v = spec_validator();
    let wrong = [
        (
            "a string for a count",
            "gpu_pools:\n  p: {provider: sim, gpu: L4, gpus_per_node: eight, nodes: {desired: 1, max: 1}}\n",
        ),
        (
            "an unknown attribute",
            "gpu_pools:\n  p: {provider: sim, gpu: L4, gpus_per_node: 1, colour: red, nodes: {desired: 1, max: 1}}\n",
        ),
        ("a missing required attribute", "gpu_pools:\n  p: {provider: sim, gpu: L4, gpus_per_node: 1}\n"),
        ("a bad enum value", "job_templates:\n  t: {image: x, gpus: 1, priority: urgent}\n"),
        (
            "spot_percent above 100",
            "gpu_pools:\n  p: {provider: sim, gpu: L4, gpus_per_node: 1, nodes: {desired: 1, max: 1}, mix: {spot_percent: 150}}\n",
        ),
        ("a reference that is not a name", "jobs:\n  j: {template: \"not a name\", pool: p}\n"),
    ];
    for (what, text) in wrong {
        assert!(!errors(&v, &yaml_doc(text)).is_empty(), "the schema accepted {what}");
    }
    // Direct JSON too, for what the YAML reader refuses before the schema sees it.
    assert!(!v.is_valid(&json!({"gpu_pools": {"p": {"provider": 1}}})));
    assert!(!v.is_valid(&json!({"gpu_pool": {}})), "the schema accepted an unknown top-level key");
    assert!(v.is_valid(&json!({})), "an empty document is a valid (empty) spec");
}

/// The plan schema accepts what `plan --json` prints: every plan case's JSON snapshot.
#[test]
fn every_plan_case_json_matches_the_plan_schema() {
    let schema = schema::all().into_iter().find(|(n, _)| *n == "plan.schema.json").expect("plan schema").1;
    let validator = jsonschema::validator_for(&schema).expect("the plan schema is a valid JSON Schema");
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("tests/plan_cases")).expect("plan cases") {
        let path = entry.expect("entry").path().join("json.snap");
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        // An insta snapshot: a `---` header, then the document.
        let body = text.splitn(3, "---\n").nth(2).expect("a snapshot header");
        let doc: Value = serde_json::from_str(body).expect("the snapshot is JSON");
        let errs = errors(&validator, &doc);
        assert!(errs.is_empty(), "{}: {errs:#?}", path.display());
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} plan cases checked");
    // And it is no blank cheque: a wrong action and a missing summary are refused.
    let mut wrong: Value = json!({"format_version": 1});
    assert!(!errors(&validator, &wrong).is_empty());
    wrong = serde_json::from_str(
        std::fs::read_to_string(root().join("tests/plan_cases/all_create/json.snap"))
            .unwrap()
            .splitn(3, "---\n")
            .nth(2)
            .unwrap(),
    )
    .unwrap();
    wrong["changes"][0]["action"] = json!("explode");
    assert!(
        errors(&validator, &wrong).iter().any(|e| e.contains("/changes/0/action")),
        "{:?}",
        errors(&validator, &wrong)
    );
}
