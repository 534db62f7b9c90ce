//! Plan snapshot cases: one directory per case under `tests/plan_cases/<case>/`.
//!
//! Inputs (cargo's in/out habit: the case is the directory):
//! - `main.hcl` (any spec files): the spec as it is now;
//! - `state.json` (optional): the prior state; absent means a fresh state;
//! - `observed.json` (optional): a JSON list of `providers::Node` from refresh; absent
//!   means `--refresh=false` (the state's own nodes are the truth);
//! - `args.json` (optional): `{"targets": ["gpu_pool.x"], "destroy": true}`;
//! - `job_status.json` (optional): run id → job status from refresh (jobs cases).
//!
//! Outputs, snapshotted with insta beside the inputs: `text.snap` (no colour, width 100),
//! `json.snap` (`render::plan_json`) and `markdown.snap` (`render::plan_markdown`).
//! Everything goes through `engine::compose`, the pure step `gpuplan plan`
//! runs after its refresh (diff, cost, the case's `policies/` and quotas, job admission),
//! so the snapshots show the cost and verdicts users see: no clock, no network. Each case is planned twice and both plans must be equal.

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use gpuplan::addr::Address;
use gpuplan::engine::run::PlanRequest;
use gpuplan::plan::Plan;
use gpuplan::providers::{JobStatus, Node};
use gpuplan::render;
use gpuplan::state::State;

/// The lineage of a case without `state.json`.
const FRESH_LINEAGE: &str = "00000000-0000-4000-8000-000000000000";

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    destroy: bool,
    /// Autoscaler decisions, as `reconcile` passes them to the planner.
    #[serde(default)]
    autoscale: Vec<gpuplan::plan::model::ScaleAction>,
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plan_cases")
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("`{}`: {e}", path.display())))
}

/// Load a case and plan it.
fn plan_case(dir: &Path) -> Plan {
    let loaded = gpuplan::spec::load_dir(dir, &Default::default()).expect("case directory reads");
    assert!(!loaded.diags.has_errors(), "{}: the spec has errors: {:?}", dir.display(), loaded.diags.items);
    let state: State = read_json(&dir.join("state.json")).unwrap_or_else(|| State::new(FRESH_LINEAGE.into()));
    let observed: Option<Vec<Node>> = read_json(&dir.join("observed.json"));
    let args: Args = read_json(&dir.join("args.json")).unwrap_or_default();
    let targets: Vec<Address> = args.targets.iter().map(|t| t.parse().expect("target parses")).collect();
    // `job_status.json` (optional): run id → `providers::JobStatus` as refresh saw it.
    let statuses: Option<BTreeMap<String, JobStatus>> = read_json(&dir.join("job_status.json"));
    // The case's own `policies/`, as `gpuplan plan` reads them (quotas are always checked).
    let mut sources = gpuplan::diag::Sources::default();
    let mut diags = gpuplan::diag::Diagnostics::default();
    let files = gpuplan::policy::load::policy_files(&[dir.join("policies")]);
    let policies = gpuplan::policy::load::load(&files, &mut sources, &mut diags);
    assert!(!diags.has_errors(), "{}: policy errors: {:?}", dir.display(), diags.items);
    let req = PlanRequest {
        refresh: observed.is_some(),
        targets,
        destroy: args.destroy,
        policies,
        autoscale: args.autoscale,
        ..PlanRequest::default()
    };
    // The same pure step as `gpuplan plan` after its gather: diff, cost, policies, jobs.
    let obs = gpuplan::engine::Observation { nodes: observed, job_statuses: statuses, ..Default::default() };
    let mut plan = gpuplan::engine::compose(&loaded.spec, &state, &obs, &req).expect("the case plans");
    gpuplan::engine::run::digest(&mut plan, &loaded.spec);
    plan
}

fn check(case: &str) {
    let dir = cases_dir().join(case);
    assert!(dir.is_dir(), "no case directory `{}`", dir.display());
    let plan = plan_case(&dir);
    assert_eq!(plan, plan_case(&dir), "{case}: planning twice gave two plans");
    let text = render::plan_text(&plan, &render::TextOptions { color: false, width: 100, verbose: false });
    let json = format!("{:#}\n", render::plan_json(&plan));
    let markdown = render::plan_markdown(&plan, 60_000);
    insta::with_settings!({
        snapshot_path => dir.clone(),
        prepend_module_to_snapshot => false,
        omit_expression => true,
        description => format!("plan case `{case}`"),
    }, {
        insta::assert_snapshot!("text", text);
        insta::assert_snapshot!("json", json);
        insta::assert_snapshot!("markdown", markdown);
    });
}

/// Every case directory has a test below, and every test a directory.
#[test]
fn every_case_directory_is_tested() {
    let mut found: Vec<String> = std::fs::read_dir(cases_dir())
        .expect("tests/plan_cases exists")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut listed: Vec<String> = CASES.iter().map(|c| c.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed);
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        const CASES: &[&str] = &[$(stringify!($name)),*];
        $(#[test] fn $name() { check(stringify!($name)); })*
    };
}

cases!(
    all_create,
    noop_after_apply,
    scale_up,
    scale_down,
    mix_spot_up,
    zone_added,
    placement_group_zone_dropped,
    placement_group_destroy,
    spot_reclaimed,
    node_terminated_outside,
    orphan_adopted,
    orphan_pool_removed,
    gpu_change_replace,
    prevent_destroy_replace,
    prevent_destroy_delete,
    prevent_destroy_quota,
    ignore_changes_desired,
    interrupted_create,
    autoscaled_pool,
    autoscale_down_idle,
    target_one_pool,
    destroy,
    quota_removed,
    jobs_admission,
    jobs_preempted_relaunch,
    outputs_changed,
    standing_violation,
    standing_violation_changed,
);
