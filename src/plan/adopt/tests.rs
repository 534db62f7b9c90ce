//! `moved`, `removed` and `import` blocks planned against a state and observed nodes:
//! what [`resolve`] hands the diff, and what the diff then plans on top.

use super::*;
use crate::plan::diff::{self, PlanInput};
use crate::plan::model::{Action, Plan};
use crate::providers::Capacity;

const POOL: &str = r#"
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-40GB"
  gpus_per_node  = 8
  instance_types = ["p4d.24xlarge"]
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
  mix {
    on_demand_base = 2
    spot_percent   = 0
  }
"#;

fn spec(text: &str) -> Spec {
    let mut sources = crate::diag::Sources::default();
    sources.add("main.hcl", format!("provider \"sim\" {{\n  region = \"us-east-1\"\n}}\n{text}"));
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    loaded.spec
}

fn pool(name: &str) -> String {
    format!("gpu_pool \"{name}\" {{{POOL}}}\n")
}

fn addr(s: &str) -> Address {
    s.parse().unwrap()
}

const LINEAGE: &str = "lineage-1";

fn node(id: &str, pool: &str, ours: bool) -> Node {
    let mut tags = Tags::new();
    if ours {
        tags.insert(TAG_MANAGED, "true");
        tags.insert(TAG_LINEAGE, LINEAGE);
        tags.insert(TAG_ADDRESS, pool);
        tags.insert(TAG_PROVIDER, "sim");
    }
    Node {
        provider: None,
        id: id.into(),
        pool: if ours { addr(pool) } else { crate::providers::unowned_pool() },
        instance_type: "p4d.24xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        state: NodeState::Running,
        image: None,
        tags,
    }
}

/// A state holding `pool` as `spec` declares `as_declared`, with `nodes`.
fn state_with(spec: &Spec, pool: &str, as_declared: &str, nodes: Vec<Node>) -> State {
    let mut state = State::new(LINEAGE.into());
    let config = JsonText::to_json(&spec.gpu_pools[&addr(as_declared)]).unwrap();
    let resource = ResourceState {
        kind: "gpu_pool".into(),
        provider: Some("sim".into()),
        provider_kind: Some("sim".into()),
        region: Some("us-east-1".into()),
        config,
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes,
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    };
    state.resources.insert(pool.into(), resource);
    state
}

/// What the engine does: resolve, then diff what is left.
fn plan(spec: &Spec, state: &State, observed: Option<&[Node]>) -> Plan {
    let r = resolve(spec, state, observed, false);
    let state = r.state.as_ref().unwrap_or(state);
    let observed = r.observed.as_deref().or(observed);
    let clocks = Default::default();
    let input = PlanInput { observed, spec_digest: String::new(), clocks: &clocks, ..PlanInput::offline(spec, state) };
    let mut plan = diff::plan(&input).unwrap();
    plan.adoptions = r.adoptions;
    plan.errors.extend(r.errors);
    plan.summarize();
    plan
}

fn action(plan: &Plan, a: &str) -> Option<Action> {
    plan.changes.iter().find(|c| c.address == addr(a)).map(|c| c.action)
}

fn launches_or_terminates(plan: &Plan) -> bool {
    plan.changes.iter().filter_map(|c| c.pool.as_ref()).any(|p| !p.creates.is_empty() || !p.deletes.is_empty())
}

#[test]
fn a_moved_pool_keeps_its_nodes_and_only_its_address_tag_changes() {
    let spec =
        spec(&format!("{}moved {{\n  from = gpu_pool.train\n  to   = gpu_pool.train_a100\n}}\n", pool("train_a100")));
    let nodes = vec![node("i-1", "gpu_pool.train", true), node("i-2", "gpu_pool.train", true)];
    let state = state_with(&spec, "gpu_pool.train", "gpu_pool.train_a100", nodes.clone());
    let plan = plan(&spec, &state, Some(&nodes));
    assert!(plan.errors.is_empty(), "{:?}", plan.errors);
    assert!(!launches_or_terminates(&plan), "a rename replaces nothing: {:?}", plan.changes);
    assert_eq!(action(&plan, "gpu_pool.train"), None, "the old address is not destroyed");
    assert_eq!(action(&plan, "gpu_pool.train_a100"), Some(Action::NoOp));
    let [m] = plan.adoptions.as_slice() else { panic!("one move: {:?}", plan.adoptions) };
    assert_eq!(
        (m.action, m.from.clone(), m.address.clone()),
        (AdoptAction::Move, Some(addr("gpu_pool.train")), addr("gpu_pool.train_a100"))
    );
    assert_eq!(m.nodes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["i-1", "i-2"]);
    assert_eq!(m.set_tags.get(TAG_ADDRESS), Some("gpu_pool.train_a100"));
    assert!(plan.has_changes());
}

#[test]
fn moves_follow_chains_and_carry_instance_keys() {
    let text = format!(
        "gpu_pool \"c\" {{\n  count = 2\n{POOL}}}\nmoved {{\n  from = gpu_pool.a\n  to   = gpu_pool.b\n}}\nmoved {{\n  from = gpu_pool.b\n  to   = gpu_pool.c\n}}\n"
    );
    let spec = spec(&text);
    let mut state = state_with(&spec, "gpu_pool.a[0]", "gpu_pool.c[0]", vec![node("i-1", "gpu_pool.a[0]", true)]);
    let other = state_with(&spec, "gpu_pool.a[1]", "gpu_pool.c[1]", vec![node("i-2", "gpu_pool.a[1]", true)]);
    state.resources.extend(other.resources);
    let observed = vec![node("i-1", "gpu_pool.a[0]", true), node("i-2", "gpu_pool.a[1]", true)];
    let plan = plan(&spec, &state, Some(&observed));
    assert!(plan.errors.is_empty(), "{:?}", plan.errors);
    let moved: Vec<(String, String)> =
        plan.adoptions.iter().map(|a| (a.from.as_ref().unwrap().to_string(), a.address.to_string())).collect();
    assert_eq!(
        moved,
        [("gpu_pool.a[0]".into(), "gpu_pool.c[0]".into()), ("gpu_pool.a[1]".into(), "gpu_pool.c[1]".into())]
    );
    // Each instance keeps its node (and grows to `desired` on top); none is replaced.
    let pools = plan.changes.iter().filter_map(|c| c.pool.as_ref());
    assert!(pools.clone().all(|p| p.deletes.is_empty()), "{:?}", plan.changes);
    assert!(pools.clone().all(|p| p.before.nodes() == 1), "{:?}", plan.changes);
}

#[test]
fn a_move_onto_an_address_the_state_has_is_an_error_at_the_block() {
    let spec = spec(&format!("{}moved {{\n  from = gpu_pool.train\n  to   = gpu_pool.b\n}}\n", pool("b")));
    let mut state = state_with(&spec, "gpu_pool.train", "gpu_pool.b", vec![node("i-1", "gpu_pool.train", true)]);
    state.resources.extend(state_with(&spec, "gpu_pool.b", "gpu_pool.b", vec![]).resources);
    let r = resolve(&spec, &state, None, false);
    let [e] = r.errors.as_slice() else { panic!("one error: {:?}", r.errors) };
    assert!(e.message.contains("the state already has `gpu_pool.b`"), "{}", e.message);
    assert_eq!(e.span, Some(spec.moves[0].span));
    assert!(r.adoptions.is_empty());
}

#[test]
fn removed_without_destroy_forgets_the_pool_and_terminates_nothing() {
    let spec = spec("removed {\n  from = gpu_pool.old\n  lifecycle {\n    destroy = false\n  }\n}\n");
    let full = self::spec(&pool("old"));
    let nodes = vec![node("i-1", "gpu_pool.old", true)];
    let state = state_with(&full, "gpu_pool.old", "gpu_pool.old", nodes.clone());
    let plan = plan(&spec, &state, Some(&nodes));
    assert!(plan.errors.is_empty(), "{:?}", plan.errors);
    assert!(plan.changes.is_empty(), "nothing destroyed, no orphan: {:?}", plan.changes);
    assert!(plan.drift.is_empty(), "{:?}", plan.drift);
    let [f] = plan.adoptions.as_slice() else { panic!("{:?}", plan.adoptions) };
    assert_eq!(f.action, AdoptAction::Forget);
    assert_eq!(f.remove_tags, OWNERSHIP_TAGS.map(str::to_string));

    // Without `destroy = false` it is a plain destroy.
    let spec = self::spec("removed {\n  from = gpu_pool.old\n}\n");
    let plan = self::plan(&spec, &state, Some(&nodes));
    assert_eq!(action(&plan, "gpu_pool.old"), Some(Action::Delete));
    assert!(plan.adoptions.is_empty());
}

#[test]
fn removed_names_a_pool_still_declared_is_an_error() {
    // `validate` refuses this spec first (`spec::adopt_check`); planned all the same, the
    // plan refuses it too.
    let mut sources = crate::diag::Sources::default();
    let text = format!(
        "provider \"sim\" {{\n  region = \"us-east-1\"\n}}\n{}removed {{\n  from = gpu_pool.old\n  lifecycle {{\n    destroy = false\n  }}\n}}\n",
        pool("old")
    );
    sources.add("main.hcl", &text);
    let loaded = crate::spec::load_sources(sources, &Default::default());
    let codes: Vec<&str> = loaded.diags.items.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["gpuplan::spec::removed_declared"]);
    let spec = loaded.spec;
    let r = resolve(&spec, &State::new(LINEAGE.into()), None, false);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert_eq!(r.errors[0].span, Some(spec.removals[0].span));
}

fn import_spec(ids: &str) -> Spec {
    spec(&format!("{}import {{\n  to  = gpu_pool.legacy\n  ids = [{ids}]\n}}\n", pool("legacy")))
}

#[test]
fn an_import_records_running_instances_and_launches_nothing() {
    let spec = import_spec("\"i-1\", \"i-2\"");
    let state = State::new(LINEAGE.into());
    let observed = vec![node("i-1", "", false), node("i-2", "", false)];
    let plan = plan(&spec, &state, Some(&observed));
    assert!(plan.errors.is_empty(), "{:?}", plan.errors);
    assert_eq!(action(&plan, "gpu_pool.legacy"), Some(Action::NoOp), "{:?}", plan.changes);
    assert_eq!((plan.summary.import, plan.summary.add, plan.summary.destroy), (2, 0, 0));
    let [a] = plan.adoptions.as_slice() else { panic!("{:?}", plan.adoptions) };
    assert!(a.resource.is_some(), "a new pool is recorded with its configuration");
    for n in &a.nodes {
        assert_eq!(n.pool, addr("gpu_pool.legacy"));
        assert_eq!(n.tags.get(TAG_LINEAGE), Some(LINEAGE));
    }
}

#[test]
fn an_import_whose_pool_wants_more_adds_only_the_difference() {
    let spec = import_spec("\"i-1\"");
    let plan = plan(&spec, &State::new(LINEAGE.into()), Some(&[node("i-1", "", false)]));
    assert_eq!((plan.summary.import, plan.summary.change), (1, 1));
    let pc = plan.changes.iter().find_map(|c| c.pool.as_ref()).unwrap();
    assert_eq!(pc.creates.iter().map(|c| c.count).sum::<u32>(), 1);
    assert!(pc.deletes.is_empty());
}

#[test]
fn bad_import_ids_are_errors_at_their_place() {
    let spec = import_spec("\"i-missing\", \"i-owned\", \"i-t4\"");
    let mut owned = node("i-owned", "gpu_pool.x", true);
    owned.tags.insert(TAG_LINEAGE, "someone-else");
    let mut t4 = node("i-t4", "", false);
    t4.instance_type = "g4dn.xlarge".into();
    let plan = plan(&spec, &State::new(LINEAGE.into()), Some(&[owned, t4]));
    let messages: Vec<&str> = plan.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[0].contains("does not exist"), "{}", messages[0]);
    assert!(messages[1].contains("owned by another gpuplan state"), "{}", messages[1]);
    assert!(messages[2].contains("g4dn.xlarge"), "{}", messages[2]);
    for (e, id) in plan.errors.iter().zip(&spec.imports[0].ids) {
        assert_eq!(e.span, Some(id.span), "each error points at its id");
    }
    assert!(plan.adoptions.is_empty());
    assert!(
        plan.changes.iter().all(|c| c.address != crate::providers::unowned_pool()),
        "described nodes never become a pool"
    );
}

#[test]
fn an_import_tagged_before_an_interruption_is_finished_not_orphaned() {
    let spec = import_spec("\"i-1\"");
    // The apply tagged i-1 and died before recording it: refresh lists it as ours.
    let observed = vec![node("i-1", "gpu_pool.legacy", true)];
    let plan = plan(&spec, &State::new(LINEAGE.into()), Some(&observed));
    assert!(plan.errors.is_empty(), "{:?}", plan.errors);
    assert!(plan.drift.is_empty(), "not an orphan: {:?}", plan.drift);
    assert_eq!(plan.summary.import, 1);

    // Recorded: the block stays and plans nothing.
    let state = state_with(&spec, "gpu_pool.legacy", "gpu_pool.legacy", observed.clone());
    let plan = self::plan(&spec, &state, Some(&observed));
    assert!(plan.adoptions.is_empty() && plan.errors.is_empty(), "{:?} {:?}", plan.adoptions, plan.errors);
}

#[test]
fn an_import_into_a_pool_without_a_place_is_an_error_not_silence() {
    let pool = format!("gpu_pool \"legacy\" {{{POOL}}}\n")
        .replace("provider       = \"sim\"", "provider       = \"sim\"\n  region         = \"nowhere-1\"");
    let text = format!("{pool}import {{\n  to  = gpu_pool.legacy\n  ids = [\"i-1\"]\n}}\n");
    let mut sources = crate::diag::Sources::default();
    sources.add("main.hcl", format!("provider \"sim\" {{\n  region = \"us-east-1\"\n}}\n{text}"));
    // Validation refuses the region; planning must not import silently all the same.
    let spec = crate::spec::load_sources(sources, &Default::default()).spec;
    let r = resolve(&spec, &State::new(LINEAGE.into()), Some(&[node("i-1", "", false)]), false);
    assert!(r.adoptions.is_empty());
    let [e] = r.errors.as_slice() else { panic!("{:?}", r.errors) };
    assert!(e.message.contains("cannot import into `gpu_pool.legacy`"), "{}", e.message);
    assert_eq!(e.span, Some(spec.imports[0].span));
}
