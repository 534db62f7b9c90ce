//! The engine's own seams: what `apply FILE` keeps of a spec builds the same providers.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Workspace;
use crate::state::State;

const SPEC: &str = r#"
provider "sim" {
  region = "us-east-1"
}

provider "aws" {
  region   = "us-east-1"
  image    = "ami-0123456789abcdef0"
  endpoint = "http://127.0.0.1:9"
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {
    min     = 0
    desired = 1
    max     = 4
  }
  kubernetes {
    kubeconfig = "kube/config"
    namespace  = "ml"
  }
}

gpu_pool "serve" {
  provider      = "sim"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
}
"#;

/// The providers of a spec, by name and kind (each build opens the sim cloud, which only
/// one may hold: the set is dropped before the next build).
fn built(ws: &Workspace, spec: &crate::spec::Spec) -> Vec<(String, String)> {
    let state = State::new("00000000-0000-4000-8000-000000000000".into());
    let set = super::providers::build(ws, spec, &state).expect("providers build");
    set.iter().map(|(name, p)| (name.clone(), p.kind().to_string())).collect()
}

/// `apply FILE` frees the spec before it reads the plan and keeps only
/// `providers::providers_part`: the providers built from it are those the whole spec
/// gives (the sim cloud, the AWS block, the Kubernetes backend of the pool that has one).
#[test]
fn the_providers_part_of_a_spec_builds_the_providers_the_whole_spec_builds() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.hcl"), SPEC).unwrap();
    let loaded = crate::spec::load_dir(dir.path(), &crate::spec::LoadOptions::default()).expect("spec loads");
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let ws = Workspace {
        dir: dir.path().to_path_buf(),
        state_path: dir.path().join("state/default.json"),
        env: BTreeMap::new(),
        lock_timeout: Duration::ZERO,
        workspace: "default".into(),
        backend: None,
        encryption: None,
        read_only: false,
    };
    let part = super::providers::providers_part(&loaded.spec);
    assert_eq!(part.gpu_pools.keys().map(ToString::to_string).collect::<Vec<_>>(), ["gpu_pool.train"]);
    assert_eq!(part.providers, loaded.spec.providers);
    let whole = built(&ws, &loaded.spec);
    assert!(whole.len() >= 3, "sim, aws and a Kubernetes backend: {whole:?}");
    assert_eq!(built(&ws, &part), whole);
}

/// A plan only shown as text leaves the spec's digest out; any other records it, the same
/// digest `apply FILE` compares, and the changes are the same either way.
#[test]
fn a_plan_only_shown_skips_the_spec_digest_and_changes_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.hcl"), SPEC.replace("endpoint = \"http://127.0.0.1:9\"", "")).unwrap();
    let loaded = crate::spec::load_dir(dir.path(), &crate::spec::LoadOptions::default()).expect("spec loads");
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let state = State::new("00000000-0000-4000-8000-000000000000".into());
    let plan = |shown_only: bool| {
        let obs = super::Observation::default();
        let mut plan = super::compose(&loaded.spec, &state, &obs, &super::PlanRequest::default()).expect("plans");
        if !shown_only {
            super::run::digest(&mut plan, &loaded.spec);
        }
        plan
    };
    let (kept, shown) = (plan(false), plan(true));
    assert_eq!(kept.spec_digest, crate::plan::diff::spec_digest(&loaded.spec));
    assert_eq!(kept.spec_digest.len(), 64);
    assert_eq!(shown.spec_digest, "");
    let json = |p: &crate::plan::model::Plan| {
        let mut v = serde_json::to_value(p).unwrap();
        v["spec_digest"] = serde_json::Value::Null;
        v
    };
    assert_eq!(json(&kept), json(&shown));
    assert_eq!(kept.changes.len(), 2);
}
