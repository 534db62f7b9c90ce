//! Each step of a pool's change on its own; the plan cases (`tests/plan_cases`) show
//! them together.

use std::collections::BTreeMap;

use super::nodes::{FallbackPhase, age_rank, bucket_nodes, excess_deletes, fill_layout};
use super::removed::{catalog_gpus, orphan_provider, removal_reason};
use super::*;
use crate::catalog;
use crate::plan::diff::PlanInput;
use crate::providers::{Capacity, Node, NodeState, TAG_PROVIDER};
use crate::spec::Spec;
use crate::state::{ResourceState, State};

pub(super) const SPEC: &str = r#"
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  image          = "img-2"

  nodes {
    min     = 1
    desired = 4
    max     = 6
  }

  mix {
    on_demand_base = 1
    spot_percent   = 50
  }

  lifecycle {
    ignore_changes = ["labels"]
  }

  labels = { team = "ml" }
}
"#;

pub(super) fn spec(text: &str) -> Spec {
    let mut sources = crate::diag::Sources::default();
    sources.add("main.hcl", text);
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    loaded.spec
}

pub(super) fn train() -> Address {
    "gpu_pool.train".parse().unwrap()
}

pub(super) fn node(id: &str, zone: &str, capacity: Capacity) -> Node {
    Node {
        provider: None,
        id: id.into(),
        pool: train(),
        instance_type: "p4de.24xlarge".into(),
        region: "us-east-1".into(),
        zone: zone.into(),
        capacity,
        state: NodeState::Running,
        image: Some("img-2".into()),
        tags: Default::default(),
    }
}

pub(super) fn resource(config: serde_json::Value, nodes: Vec<Node>) -> ResourceState {
    ResourceState {
        kind: "gpu_pool".into(),
        provider: Some("sim".into()),
        provider_kind: Some("sim".into()),
        region: Some("us-east-1".into()),
        config: JsonText::from_value(&config),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes,
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    }
}

/// Everything a [`PoolCtx`] borrows.
pub(super) struct World {
    pub(super) spec: Spec,
    state: State,
    observed: Option<Vec<Node>>,
    autoscale: Vec<ScaleAction>,
    destroy: bool,
    clocks: BTreeMap<String, u64>,
}

impl World {
    pub(super) fn new(prior: Option<ResourceState>, observed: Option<Vec<Node>>) -> World {
        let mut state = State::new("lineage-1".into());
        if let Some(r) = prior {
            state.resources.insert("gpu_pool.train".into(), r);
        }
        World { spec: spec(SPEC), state, observed, autoscale: vec![], destroy: false, clocks: BTreeMap::new() }
    }

    pub(super) fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    pub(super) fn input(&self) -> PlanInput<'_> {
        PlanInput {
            observed: self.observed.as_deref(),
            destroy: self.destroy,
            spec_digest: String::new(),
            autoscale: &self.autoscale,
            clocks: &self.clocks,
            ..PlanInput::offline(&self.spec, &self.state)
        }
    }
}

/// Run `f` on the context of `gpu_pool.train` in `world` (`in_spec`: the pool is declared).
pub(super) fn with_cx<R>(world: &World, in_spec: bool, autoscaled: bool, f: impl FnOnce(&PoolCtx<'_, '_>) -> R) -> R {
    let input = world.input();
    let addr = train();
    let seen: BTreeMap<&str, &Node> = world.observed.iter().flatten().map(|n| (n.id.as_str(), n)).collect();
    let prior = world.state.resources.get("gpu_pool.train");
    let live: Vec<&Node> = match &world.observed {
        Some(nodes) => nodes.iter().filter(|n| n.is_live()).collect(),
        None => prior.map(|p| p.nodes.iter().filter(|n| n.is_live()).collect()).unwrap_or_default(),
    };
    let pool = if in_spec { world.spec.gpu_pools.get(&addr).map(Box::as_ref) } else { None };
    let jobs = super::JobNodes::new(&world.spec, &world.state, None);
    let cx = PoolCtx {
        input: &input,
        addr: &addr,
        pool,
        prior,
        live,
        stopped: vec![],
        seen_by_id: &seen,
        autoscaled,
        jobs: &jobs,
        texts: &Default::default(),
        known: None,
    };
    f(&cx)
}

pub(super) fn shape_of(world: &World) -> PoolShape {
    shape::shape(&world.spec, &world.spec.gpu_pools[&train()], catalog::catalog()).expect("the pool has a shape")
}

fn scale(to: u32, remove: &[&str]) -> ScaleAction {
    ScaleAction {
        pool: train(),
        from: 4,
        to,
        remove: remove.iter().map(|s| s.to_string()).collect(),
        reason: "idle".into(),
        at: "2026-01-01T00:00:00Z".into(),
    }
}

// ---- 1. drift ------------------------------------------------------------------------------

#[test]
fn drift_reports_lost_changed_and_orphan_nodes_only_when_refreshed() {
    let known = vec![
        node("i-1", "us-east-1a", Capacity::OnDemand),
        node("i-2", "us-east-1a", Capacity::Spot),
        node("i-3", "us-east-1b", Capacity::Spot),
        node("i-4", "us-east-1b", Capacity::OnDemand),
    ];
    let prior = resource(serde_json::json!({"gpu": "A100-80GB"}), known.clone());
    // i-2 reclaimed, i-3 gone without a trace, i-4 moved zone, i-9 unknown to the state.
    let mut reclaimed = known[1].clone();
    reclaimed.state = NodeState::Reclaimed;
    let mut moved = known[3].clone();
    moved.zone = "us-east-1a".into();
    let observed = vec![known[0].clone(), reclaimed, moved, node("i-9", "us-east-1a", Capacity::Spot)];
    let world = World::new(Some(prior.clone()), Some(observed));

    let drift = with_cx(&world, true, false, observe_drift);
    let kinds: Vec<(&str, &str)> =
        drift.items.iter().map(|d| (d.kind.as_str(), d.node_id.as_deref().unwrap_or(""))).collect();
    assert_eq!(kinds, [("reclaimed", "i-2"), ("removed", "i-3"), ("changed", "i-4"), ("orphan", "i-9")]);
    assert_eq!(drift.forget, ["i-2", "i-3"]);
    assert_eq!(drift.adopt.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["i-9"]);
    assert!(drift.items[0].message.contains("reclaimed by the cloud"), "{}", drift.items[0].message);
    assert!(drift.items[3].message.ends_with("adopting it"), "{}", drift.items[3].message);

    // A pool gone from the spec terminates its orphans instead of adopting them.
    let gone = with_cx(&world, false, false, observe_drift);
    assert!(gone.adopt.is_empty());
    assert!(gone.items[3].message.ends_with("it will be terminated"), "{}", gone.items[3].message);

    // Without refresh the state is the truth: no drift at all.
    let unrefreshed = World::new(Some(prior), None);
    let none = with_cx(&unrefreshed, true, false, observe_drift);
    assert!(none.items.is_empty() && none.forget.is_empty() && none.adopt.is_empty());
}

// ---- 2. configuration ----------------------------------------------------------------------

#[test]
fn ignored_paths_add_the_node_count_for_an_autoscaled_pool_once() {
    let world = World::new(None, None);
    let pool = world.spec.gpu_pools.get(&train()).map(Box::as_ref);
    assert_eq!(ignored_paths(pool, false), ["labels"]);
    assert_eq!(ignored_paths(pool, true), ["labels", "nodes.desired"]);
    assert_eq!(ignored_paths(None, true), ["nodes.desired"]);
}

#[test]
fn keep_ignored_copies_and_removes_values_from_before() {
    let before = JsonText::from_value(&serde_json::json!({"labels": {"a": "1"}, "nodes": {"desired": 2}}));
    let mut after = JsonText::from_value(&serde_json::json!({"labels": {"b": "2"}, "nodes": {"desired": 5}, "x": 1}));
    keep_ignored(&before, &mut after, &["labels".into(), "x".into()]);
    assert_eq!(after.to_value(), serde_json::json!({"labels": {"a": "1"}, "nodes": {"desired": 5}}));
    let untouched = after.clone();
    keep_ignored(&before, &mut after, &[]);
    assert_eq!(after, untouched);
}

#[test]
fn the_autoscaler_owns_the_count_decision_then_recorded_then_live() {
    let recorded = JsonText::from_value(&serde_json::json!({"nodes": {"desired": 3}}));
    let nodes = vec![node("i-1", "us-east-1a", Capacity::OnDemand)];
    let world = World::new(Some(resource(recorded.to_value(), nodes)), None);
    let decision = scale(5, &[]);
    with_cx(&world, true, true, |cx| {
        assert_eq!(owned_count(cx, Some(&recorded), Some(&decision)), Some(5));
        assert_eq!(owned_count(cx, Some(&recorded), None), Some(3));
        assert_eq!(owned_count(cx, None, None), Some(1), "the live count");
    });
    // Not autoscaled, or not yet in the state: the spec's count rules.
    with_cx(&world, true, false, |cx| assert_eq!(owned_count(cx, Some(&recorded), Some(&decision)), None));
    let fresh = World::new(None, None);
    with_cx(&fresh, true, true, |cx| assert_eq!(owned_count(cx, None, Some(&decision)), None));
}

#[test]
fn set_desired_clamps_to_the_pools_bounds() {
    let world = World::new(None, None);
    let pool = &world.spec.gpu_pools[&train()];
    let mut after = JsonText::from_value(&serde_json::json!({"nodes": {"desired": 4, "min": 1}}));
    set_desired(&mut after, 9, pool);
    assert_eq!(after.pointer("/nodes/desired").and_then(|d| d.as_u64()), Some(6));
    set_desired(&mut after, 0, pool);
    assert_eq!(after.pointer("/nodes/desired").and_then(|d| d.as_u64()), Some(1));
    // No `nodes` object: nothing to set.
    let mut bare = JsonText::from_value(&serde_json::json!({"gpu": "L4"}));
    set_desired(&mut bare, 3, pool);
    assert_eq!(bare.to_value(), serde_json::json!({"gpu": "L4"}));
}

/// What a test reads of [`Configs`], owned (a `Configs` borrows from the planning input).
#[derive(Debug)]
struct ConfigsSeen {
    before: Option<JsonText>,
    after: Option<JsonText>,
    changed: Vec<String>,
    unfinished: bool,
    no_scale: bool,
    no_owned: bool,
}

fn configs_seen(cx: &PoolCtx<'_, '_>) -> ConfigsSeen {
    let c = configs(cx);
    ConfigsSeen {
        before: c.before.clone(),
        after: c.after.clone(),
        changed: c.changed.clone(),
        unfinished: c.unfinished,
        no_scale: c.scale.is_none(),
        no_owned: c.owned.is_none(),
    }
}

#[test]
fn configs_ignore_labels_share_unchanged_text_and_flag_an_unfinished_apply() {
    let world = World::new(None, None);
    let spec_cfg = JsonText::to_json(&world.spec.gpu_pools[&train()]).unwrap().to_value();
    let mut edited = spec_cfg.clone();
    edited["labels"] = serde_json::json!({"team": "old"});
    let world = World::new(Some(resource(edited, vec![])), None);
    let cfg = with_cx(&world, true, false, configs_seen);
    // Only `labels` differ, and `ignore_changes` covers them.
    assert!(cfg.changed.is_empty(), "{:?}", cfg.changed);
    assert!(!cfg.unfinished && cfg.no_scale && cfg.no_owned);
    assert_eq!(cfg.before, cfg.after);

    let mut desired = spec_cfg.clone();
    desired["nodes"]["desired"] = serde_json::json!(2);
    let world = World::new(Some(resource(desired, vec![])), None);
    assert_eq!(with_cx(&world, true, false, configs_seen).changed, ["nodes.desired"]);

    let world = World::new(Some(resource(serde_json::Value::Null, vec![])), None);
    let cfg = with_cx(&world, true, false, configs_seen);
    assert!(cfg.unfinished && cfg.before.is_none() && cfg.after.is_some() && cfg.changed.is_empty());
}

#[test]
fn before_counts_take_gpus_from_the_recorded_configuration_first() {
    let world = World::new(None, None);
    let shape = shape_of(&world);
    let a = node("i-1", "us-east-1a", Capacity::OnDemand);
    let b = node("i-2", "us-east-1a", Capacity::Spot);
    let live = [&a, &b];
    let recorded = JsonText::from_value(&serde_json::json!({"gpus_per_node": 4}));
    let counts = before_counts(&live, Some(&recorded), Some(&shape));
    assert_eq!((counts.on_demand, counts.spot, counts.gpus_per_node), (1, 1, 4));
    assert_eq!(before_counts(&live, None, Some(&shape)).gpus_per_node, 8);
    assert_eq!(before_counts(&[], None, None), NodeCounts::default());
}

// ---- 3. removed ----------------------------------------------------------------------------

#[test]
fn a_removed_pool_deletes_every_node_and_keeps_what_the_state_recorded() {
    let nodes = vec![node("i-2", "us-east-1b", Capacity::Spot), node("i-1", "us-east-1a", Capacity::OnDemand)];
    let cfg = serde_json::json!({"gpu": "A100-80GB", "lifecycle": {"prevent_destroy": true}});
    let world = World::new(Some(resource(cfg.clone(), nodes)), None);
    let cat = catalog::catalog();
    let (change, error) = with_cx(&world, false, false, |cx| {
        let before = before_counts(&cx.live, None, None);
        removed(cx, cat, Some(JsonText::from_value(&cfg)), before)
    })
    .expect("a pool with nodes is deleted");
    assert_eq!(change.action, Action::Delete);
    assert_eq!(change.reasons[0].code, "removed_from_spec");
    let pool = change.pool.expect("a pool change");
    assert_eq!(pool.deletes.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["i-1", "i-2"]);
    assert!(pool.deletes.iter().all(|d| d.reason == "removed from the spec"));
    assert_eq!((pool.provider.as_str(), pool.provider_kind.as_str(), pool.gpu.as_str()), ("sim", "sim", "A100-80GB"));
    // No configuration said how many GPUs a node has: the catalog knows the type.
    assert_eq!((pool.before.nodes(), pool.before.gpus_per_node, pool.after.nodes()), (2, 8, 0));
    let error = error.expect("prevent_destroy refuses");
    assert!(error.message.contains("would destroy it"), "{}", error.message);

    // Nothing recorded and nothing live: no change at all.
    let empty = World::new(None, None);
    assert!(with_cx(&empty, false, false, |cx| removed(cx, cat, None, NodeCounts::default())).is_none());
}

#[test]
fn removal_reason_says_destroy_orphan_or_removed() {
    let mut world = World::new(Some(resource(serde_json::json!({}), vec![])), None);
    assert_eq!(with_cx(&world, false, false, removal_reason).1, "removed from the spec");
    world.destroy = true;
    let (reason, why) = with_cx(&world, false, false, removal_reason);
    assert_eq!((reason.code.to_string().as_str(), why), ("destroy", "destroy requested"));
    let orphans = World::new(None, Some(vec![node("i-1", "us-east-1a", Capacity::Spot)]));
    let (reason, why) = with_cx(&orphans, false, false, removal_reason);
    assert_eq!((reason.code.to_string().as_str(), why), ("orphan", "orphan"));
    assert!(reason.message.contains("in neither the spec nor the state"), "{}", reason.message);
}

#[test]
fn orphan_provider_is_the_nodes_tag_else_the_only_provider() {
    let world = World::new(None, None);
    let mut tagged = node("i-1", "us-east-1a", Capacity::Spot);
    tagged.tags = [(TAG_PROVIDER, "aws_east")].into_iter().collect();
    assert_eq!(orphan_provider(&world.spec, &[&tagged]).as_deref(), Some("aws_east"));
    let untagged = node("i-2", "us-east-1a", Capacity::Spot);
    assert_eq!(orphan_provider(&world.spec, &[&untagged]).as_deref(), Some("sim"));
    assert_eq!(orphan_provider(&Spec::default(), &[&untagged]), None);
}

#[test]
fn catalog_gpus_needs_a_known_kind_and_type() {
    let cat = catalog::catalog();
    let n = node("i-1", "us-east-1a", Capacity::Spot);
    assert_eq!(catalog_gpus(cat, Some("sim"), &[&n]), 8);
    assert_eq!(catalog_gpus(cat, Some("no-such-kind"), &[&n]), 0);
    assert_eq!(catalog_gpus(cat, Some("sim"), &[]), 0);
}

// ---- 4. nodes ------------------------------------------------------------------------------

#[test]
fn stale_reason_names_region_type_and_image_changes() {
    let world = World::new(None, None);
    let shape = shape_of(&world);
    let ok = node("i-1", "us-east-1a", Capacity::Spot);
    assert_eq!(stale_reason(&shape, &ok, None), None);
    let mut other_region = ok.clone();
    other_region.region = "us-west-2".into();
    assert_eq!(stale_reason(&shape, &other_region, None).as_deref(), Some("region us-west-2 → us-east-1"));
    let mut other_type = ok.clone();
    other_type.instance_type = "g6.xlarge".into();
    assert_eq!(
        stale_reason(&shape, &other_type, None).as_deref(),
        Some("instance type g6.xlarge no longer matches 8 × A100-80GB")
    );
    let mut old_image = ok.clone();
    old_image.image = Some("img-1".into());
    assert_eq!(stale_reason(&shape, &old_image, None).as_deref(), Some("image img-1 → img-2"));
    // A node that does not report its image is not replaced for it.
    old_image.image = None;
    assert_eq!(stale_reason(&shape, &old_image, None), None);
}

#[test]
fn fill_layout_creates_what_buckets_lack_and_returns_the_newest_extra_nodes() {
    // Oldest first in the state: a1, a2, a3 (all on-demand in zone a).
    let (a1, a2, a3) = (
        node("a1", "us-east-1a", Capacity::OnDemand),
        node("a2", "us-east-1a", Capacity::OnDemand),
        node("a3", "us-east-1a", Capacity::OnDemand),
    );
    let world = World::new(Some(resource(serde_json::json!({}), vec![a1.clone(), a2.clone(), a3.clone()])), None);
    let shape = shape_of(&world);
    let pool = &world.spec.gpu_pools[&train()];
    let layout = vec![("us-east-1a".to_string(), Capacity::OnDemand, 1), ("us-east-1b".to_string(), Capacity::Spot, 2)];
    let fresh = [&a3, &a1, &a2];
    let (creates, excess) = with_cx(&world, true, false, |cx| {
        let age = age_rank(cx.prior);
        let buckets = bucket_nodes(cx, &shape, &fresh, &age, None);
        let super::nodes::Filled { creates, excess, .. } =
            fill_layout(cx, &shape, pool, &layout, buckets, FallbackPhase::None);
        (creates, excess.into_iter().map(|n| n.id.clone()).collect::<Vec<_>>())
    });
    assert_eq!(excess, ["a2", "a3"], "the oldest node stays");
    assert_eq!(creates.len(), 1);
    let batch = &creates[0];
    assert_eq!((batch.zone.as_str(), batch.capacity, batch.count), ("us-east-1b", Capacity::Spot, 2));
    assert!(batch.token.starts_with("gp-") && batch.token.len() == 43, "{}", batch.token);
    assert_eq!(batch.tags.get("team"), Some("ml"));
    assert_eq!(batch.tags.get(crate::providers::TAG_ADDRESS), Some("gpu_pool.train"));

    // The autoscaler's idle node is taken even though it is the oldest (in place of a2).
    let idle = scale(2, &["a1"]);
    let mut excess = with_cx(&world, true, true, |cx| {
        let age = age_rank(cx.prior);
        let buckets = bucket_nodes(cx, &shape, &fresh, &age, Some(&idle));
        let excess = fill_layout(cx, &shape, pool, &layout, buckets, FallbackPhase::None).excess;
        excess.into_iter().map(|n| n.id.clone()).collect::<Vec<_>>()
    });
    excess.sort();
    assert_eq!(excess, ["a1", "a3"]);
}

#[test]
fn excess_deletes_are_idle_then_newest_surplus_then_rebalance() {
    let nodes: Vec<Node> = ["n1", "n2", "n3", "n4"].iter().map(|id| node(id, "us-east-1a", Capacity::Spot)).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    let age: BTreeMap<&str, usize> = [("n1", 0), ("n2", 1), ("n3", 2), ("n4", 3)].into_iter().collect();
    let reasons = |surplus, scale: Option<&ScaleAction>| -> Vec<(String, String)> {
        excess_deletes(&refs, surplus, &age, scale).into_iter().map(|d| (d.id, d.reason)).collect()
    };
    let want = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    };
    assert_eq!(
        reasons(2, None),
        want(&[("n4", "surplus"), ("n3", "surplus"), ("n2", "rebalance"), ("n1", "rebalance")])
    );
    let idle = scale(2, &["n1"]);
    assert_eq!(
        reasons(1, Some(&idle)),
        want(&[("n1", "idle"), ("n4", "rebalance"), ("n3", "rebalance"), ("n2", "rebalance")])
    );
}

#[test]
fn node_ops_replace_stale_nodes_after_the_layout_work() {
    let good = node("g1", "us-east-1a", Capacity::OnDemand);
    let mut stale = node("s1", "us-east-1b", Capacity::Spot);
    stale.image = Some("img-1".into());
    let world = World::new(Some(resource(serde_json::json!({}), vec![good.clone(), stale.clone()])), None);
    let shape = shape_of(&world);
    let pool = &world.spec.gpu_pools[&train()];
    let ops = with_cx(&world, true, false, |cx| node_ops(cx, &shape, pool, 2, &[&good], &[&stale], None));
    // 2 nodes with 1 on-demand base and 50% spot of the rest: 2 on-demand, spread a/b.
    let made: Vec<(&str, Capacity, u32)> = ops.creates.iter().map(|c| (c.zone.as_str(), c.capacity, c.count)).collect();
    assert_eq!(made, [("us-east-1b", Capacity::OnDemand, 1)]);
    assert_eq!(ops.deletes.len(), 1);
    assert_eq!((ops.deletes[0].id.as_str(), ops.deletes[0].reason.as_str()), ("s1", "replaced: image img-1 → img-2"));
}

// ---- 4. count, action, reasons -------------------------------------------------------------

#[test]
fn target_count_is_desired_unless_the_count_is_owned_then_clamped_with_a_reason() {
    let world = World::new(Some(resource(serde_json::json!({}), vec![])), None);
    let pool = &world.spec.gpu_pools[&train()];
    with_cx(&world, true, false, |cx| {
        assert_eq!(target_count(cx, pool, &[], None, 9), (4, None));
        // `ignore_changes` on the count keeps the fresh nodes, within min..max.
        let (n, reason) = target_count(cx, pool, &["nodes.desired".into()], None, 9);
        let reason = reason.expect("clamped");
        assert_eq!((n, reason.code.to_string().as_str()), (6, "node_bounds"));
        assert_eq!(reason.message, "9 nodes is outside min..max (1..6); `ignore_changes` covers nodes.desired");
        assert_eq!(target_count(cx, pool, &["nodes".into()], None, 3), (3, None));
    });
    with_cx(&world, true, true, |cx| {
        let (n, reason) = target_count(cx, pool, &[], Some(0), 3);
        assert_eq!(n, 1);
        assert!(reason.expect("clamped").message.ends_with("the autoscaler owns the node count"));
    });
    // A pool the state does not know starts at `nodes.desired` even when autoscaled.
    let fresh = World::new(None, None);
    with_cx(&fresh, true, true, |cx| assert_eq!(target_count(cx, pool, &[], Some(6), 0), (4, None)));
}

#[test]
fn choose_action_covers_create_replace_update_and_no_op() {
    assert_eq!(choose_action(false, 3, 0, true, true), Action::Create);
    assert_eq!(choose_action(true, 1, 2, true, true), Action::Replace, "an immutable attribute changed");
    assert_eq!(choose_action(true, 2, 0, false, true), Action::Replace, "no matching node is left");
    assert_eq!(choose_action(true, 1, 2, false, true), Action::Update, "outdated nodes roll");
    assert_eq!(choose_action(true, 0, 2, false, true), Action::Update);
    assert_eq!(choose_action(true, 0, 2, false, false), Action::NoOp);
}

fn facts<'a>(addr: &'a Address, action: Action) -> Facts<'a> {
    let counts = NodeCounts { on_demand: 2, spot: 2, gpus_per_node: 8 };
    Facts {
        addr,
        action,
        immutable_changed: &[],
        changed: &[],
        stale: 0,
        replaced: false,
        scale: None,
        owned: false,
        creates: false,
        lost: 0,
        before: counts,
        after: counts,
        unfinished: false,
        adopted: 0,
    }
}

fn codes(reasons: &[Reason]) -> Vec<String> {
    reasons.iter().map(|r| r.code.to_string()).collect()
}

#[test]
fn explain_orders_reasons_as_users_read_them() {
    let addr = train();
    let new = explain(&Facts { unfinished: true, adopted: 2, ..facts(&addr, Action::Create) });
    assert_eq!(codes(&new), ["new", "unfinished", "adopt"]);
    assert_eq!(new[0].message, "`gpu_pool.train` is new in the spec");

    let immutable = ["gpu"];
    let replace = explain(&Facts { immutable_changed: &immutable, stale: 3, ..facts(&addr, Action::Replace) });
    assert_eq!(replace[0].message, "gpu cannot change in place; 3 nodes will be replaced");
    let replace = explain(&Facts { stale: 1, ..facts(&addr, Action::Replace) });
    assert_eq!(replace[0].message, "nodes no longer match the pool; 1 node will be replaced");

    let decision = scale(6, &[]);
    let changed = ["gpu".to_string(), "labels.team".to_string(), "nodes.desired".to_string()];
    let after = NodeCounts { on_demand: 3, spot: 3, gpus_per_node: 8 };
    let update = explain(&Facts {
        changed: &changed,
        stale: 1,
        scale: Some(&decision),
        owned: true,
        creates: true,
        lost: 2,
        after,
        ..facts(&addr, Action::Update)
    });
    // `gpu` is immutable and `nodes.desired` belongs to the autoscaler: neither is "changed".
    assert_eq!(codes(&update), ["autoscale", "changed:labels.team", "outdated_nodes", "drift", "node_count"]);
    assert_eq!(update[3].message, "2 nodes disappeared outside gpuplan; restoring the mix");
    assert_eq!(update[4].message, "nodes 4 → 6");

    let mix = NodeCounts { on_demand: 3, spot: 1, gpus_per_node: 8 };
    let rebalance = explain(&Facts { lost: 1, after: mix, ..facts(&addr, Action::Update) });
    assert_eq!(codes(&rebalance), ["drift", "mix"]);
    assert_eq!(rebalance[0].message, "1 node disappeared outside gpuplan; dropping it from state");
    assert_eq!(rebalance[1].message, "on-demand/spot 2/2 → 3/1");
    assert!(explain(&facts(&addr, Action::NoOp)).is_empty());
}

#[test]
fn prevent_destroy_refuses_replacing_nodes_only_when_set() {
    let guarded = spec(&SPEC.replace("ignore_changes = [\"labels\"]", "prevent_destroy = true"));
    let plain = spec(SPEC);
    let addr = train();
    let replaced = [NodeDelete {
        id: "i-1".into(),
        zone: "us-east-1a".into(),
        instance_type: "p4de.24xlarge".into(),
        capacity: Capacity::Spot,
        reason: "replaced: image img-1 → img-2".into(),
        region: None,
        provider: None,
        reservation: None,
    }];
    let surplus = [NodeDelete { reason: "surplus".into(), ..replaced[0].clone() }];
    let pool = &guarded.gpu_pools[&addr];
    let err = prevent_destroy_error(&addr, pool, Action::Update, 0, &replaced, false).expect("refused");
    assert!(err.message.contains("would replace its nodes"), "{}", err.message);
    assert!(prevent_destroy_error(&addr, pool, Action::Replace, 0, &[], false).is_some());
    assert!(prevent_destroy_error(&addr, pool, Action::Update, 1, &[], false).is_some());
    assert!(prevent_destroy_error(&addr, pool, Action::Update, 0, &surplus, false).is_none(), "shrinking is allowed");
    assert!(prevent_destroy_error(&addr, &plain.gpu_pools[&addr], Action::Replace, 2, &replaced, false).is_none());
}

#[test]
fn pool_change_runs_the_steps_in_order() {
    // A known pool with one reclaimed node: the drift goes to the plan, the node to forget,
    // and a create restores the count.
    let known = vec![node("i-1", "us-east-1a", Capacity::OnDemand), node("i-2", "us-east-1b", Capacity::Spot)];
    let world0 = World::new(None, None);
    let cfg = JsonText::to_json(&world0.spec.gpu_pools[&train()]).unwrap().to_value();
    let mut reclaimed = known[1].clone();
    reclaimed.state = NodeState::Reclaimed;
    let world = World::new(Some(resource(cfg, known.clone())), Some(vec![known[0].clone(), reclaimed]));
    let mut plan = crate::plan::diff::plan(&world.input()).expect("the state's keys are addresses");
    plan.changes.clear();
    plan.drift.clear();
    let change = with_cx(&world, true, false, |cx| pool_change(cx, catalog::catalog(), &mut plan)).expect("a change");
    assert_eq!(change.action, Action::Update);
    assert_eq!(plan.drift.len(), 1);
    assert_eq!(plan.drift[0].kind, DriftKind::Reclaimed);
    let pool = change.pool.expect("a pool change");
    assert_eq!(pool.forget, ["i-2"]);
    assert_eq!(pool.creates.iter().map(|c| c.count).sum::<u32>(), 3, "4 desired, 1 live");
    assert_eq!(codes(&change.reasons), ["drift", "node_count"]);
    assert_eq!(pool.zones, ["us-east-1a", "us-east-1b"], "creates carry the zones to fall back to");
}

#[test]
fn fallback_nodes_stand_in_for_the_preferred_buckets_only_while_waiting() {
    use super::nodes::{fallback_phase, hold_fallbacks};
    use crate::spec::model::Fallback;
    let b1 = node("b1", "us-east-1b", Capacity::OnDemand);
    let b2 = node("b2", "us-east-1b", Capacity::OnDemand);
    let c1 = node("c1", "us-east-1c", Capacity::OnDemand);
    let mut prior = resource(serde_json::json!({}), vec![b1.clone(), b2.clone()]);
    prior.fallback = Some(crate::state::model::FallbackRecord {
        since_ms: 0,
        tried_ms: 0,
        failed_retries: 0,
        reason: "us-east-1a had no on-demand capacity".into(),
    });
    let mut world = World::new(Some(prior), None);
    let shape = shape_of(&world);
    let pool = world.spec.gpu_pools[&train()].clone();
    // No clock (no refresh): hold. Before the wait is over: hold. After: due.
    assert_eq!(with_cx(&world, true, false, |cx| fallback_phase(cx, &shape, &pool)), FallbackPhase::Hold);
    world.clocks.insert("sim".into(), 29 * 60_000);
    assert_eq!(with_cx(&world, true, false, |cx| fallback_phase(cx, &shape, &pool)), FallbackPhase::Hold);
    world.clocks.insert("sim".into(), 30 * 60_000);
    assert_eq!(with_cx(&world, true, false, |cx| fallback_phase(cx, &shape, &pool)), FallbackPhase::Due);

    // Same capacity in another allowed zone stands in; a zone the pool does not allow does not.
    let mut short =
        vec![("us-east-1a".to_string(), Capacity::OnDemand, 2), ("us-east-1a".to_string(), Capacity::Spot, 1)];
    let mut excess: Vec<&Node> = vec![&c1, &b1, &b2];
    let held = hold_fallbacks(&shape, Fallback::OnDemand, &mut short, &mut excess);
    assert_eq!(held.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["b1", "b2"]);
    assert_eq!(short[0].2, 0);
    assert_eq!(short[1].2, 1, "no on-demand node left to stand in for spot");
    assert_eq!(excess.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["c1"], "us-east-1c is not the pool's");

    // On-demand stands in for spot only with `fallback = "on_demand"`.
    let mut short = vec![("us-east-1a".to_string(), Capacity::Spot, 1)];
    let mut excess: Vec<&Node> = vec![&b1];
    assert!(hold_fallbacks(&shape, Fallback::Wait, &mut short, &mut excess).is_empty());
    let held = hold_fallbacks(&shape, Fallback::OnDemand, &mut short, &mut excess);
    assert_eq!((held[0].capacity, held[0].preferred_capacity), (Capacity::OnDemand, Capacity::Spot));
}

/// A job record in state with one run, running on `node`.
fn running_on(node: &str) -> ResourceState {
    let run = crate::model::JobRun {
        replica: 0,
        attempt: 1,
        id: format!("j-{node}"),
        provider: "sim".into(),
        region: "us-east-1".into(),
        node_id: node.into(),
        capacity: Capacity::OnDemand,
        gpus: 8,
        status: crate::providers::JobState::Running,
        message: None,
        launched_at: None,
        finished_at: None,
        own_node: false,
        node_released: false,
        preempted_for: None,
        max_runtime_secs: None,
        address: None,
    };
    let rec = crate::model::JobRecord { runs: vec![run], ..Default::default() };
    ResourceState { kind: "job".into(), job: Some(Box::new(rec)), ..resource(serde_json::json!({}), vec![]) }
}

#[test]
fn scale_in_keeps_nodes_that_run_jobs_and_defers_those_of_non_preemptible_ones() {
    // Oldest first: i-1 (idle), i-2 (job.a), i-3 (job.b); one node wanted.
    let nodes: Vec<Node> = ["i-1", "i-2", "i-3"].iter().map(|id| node(id, "us-east-1a", Capacity::OnDemand)).collect();
    let text = SPEC.replace("desired = 4", "desired = 1").replace("spot_percent   = 50", "spot_percent   = 0")
        + r#"
job_template "t" {
  image       = "x"
  gpus        = 8
  preemptible = PREEMPTIBLE
}
job "a" {
  template = job_template.t
  pool     = gpu_pool.train
}
job "b" {
  template = job_template.t
  pool     = gpu_pool.train
}
"#;
    let run = |preemptible: bool| {
        let mut world = World::new(Some(resource(serde_json::json!({}), nodes.clone())), None);
        world.spec = spec(&text.replace("PREEMPTIBLE", &preemptible.to_string()));
        world.state.resources.insert("job.a".into(), running_on("i-2"));
        world.state.resources.insert("job.b".into(), running_on("i-3"));
        let mut plan = crate::plan::diff::plan(&world.input()).expect("the state's keys are addresses");
        let change = with_cx(&world, true, false, |cx| pool_change(cx, catalog::catalog(), &mut plan));
        change.expect("a change")
    };
    // Preemptible jobs: the idle node goes first, then the newest job's.
    let change = run(true);
    let pool = change.pool.as_ref().expect("a pool change");
    let mut deleted: Vec<&str> = pool.deletes.iter().map(|d| d.id.as_str()).collect();
    deleted.sort();
    assert_eq!(deleted, ["i-1", "i-3"], "the oldest node runs a job and stays; the idle one goes");
    assert!(pool.deferred.is_empty());

    // Not preemptible: job.b's node stays until it ends; only the idle node goes now.
    let change = run(false);
    let pool = change.pool.as_ref().expect("a pool change");
    let deleted: Vec<&str> = pool.deletes.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(deleted, ["i-1"]);
    let deferred: Vec<(&str, String)> = pool.deferred.iter().map(|d| (d.id.as_str(), d.job.to_string())).collect();
    assert_eq!(deferred, [("i-3", "job.b".to_string())]);
    let note = change.reasons.iter().find(|r| r.code == ReasonCode::Deferred).expect("a deferred reason");
    assert!(note.message.contains("removal of node i-3") && note.message.contains("job.b"), "{}", note.message);
}

/// A configuration text from the memo is the text `JsonText::to_json` makes; pools that
/// serialize alike (here two with only their names apart) share one copy, and a pool that
/// differs gets its own.
#[test]
fn config_texts_are_the_canonical_texts_shared_between_alike_pools() {
    let alike = SPEC.replace("gpu_pool \"train\"", "gpu_pool \"eval\"");
    let other = SPEC.replace("gpu_pool \"train\"", "gpu_pool \"big\"").replace("desired = 4", "desired = 5");
    let spec = spec(&format!(
        "{SPEC}\n{}\n{}",
        &alike[alike.find("gpu_pool").unwrap()..],
        &other[other.find("gpu_pool").unwrap()..]
    ));
    let pool = |name: &str| spec.gpu_pools[&format!("gpu_pool.{name}").parse::<Address>().unwrap()].as_ref();
    let mut texts = ConfigTexts::default();
    let (train, eval, big) =
        (texts.of(pool("train")).unwrap(), texts.of(pool("eval")).unwrap(), texts.of(pool("big")).unwrap());
    for (name, text) in [("train", &train), ("eval", &eval), ("big", &big)] {
        assert_eq!(text.as_str(), JsonText::to_json(pool(name)).unwrap().as_str(), "{name}");
    }
    assert_eq!(train.as_str().as_ptr(), eval.as_str().as_ptr(), "alike pools share one copy");
    assert_ne!(train, big);
    assert!(big.as_str().contains("\"desired\":5"), "{}", big.as_str());
}

/// Every pool of the examples, the plan cases and the bad-input corpus (network, disk,
/// capacity, placement, health, kubernetes and lifecycle blocks among them) gets its
/// configuration text in one pass (`json_text/sorted.rs`), and it is the two-pass text.
#[test]
fn every_example_pool_gets_the_two_pass_text() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pools = 0;
    for dir in ["examples", "tests/plan_cases", "tests/corpus"] {
        for file in walk(&root.join(dir)) {
            let mut sources = crate::diag::Sources::default();
            sources.add(file.display().to_string(), std::fs::read_to_string(&file).unwrap());
            let loaded = crate::spec::load_sources(sources, &Default::default());
            for pool in loaded.spec.gpu_pools.values() {
                let two_pass = JsonText::parse(&serde_json::to_string(pool).unwrap()).unwrap();
                let one_pass = crate::json_text::one_pass(pool).unwrap();
                assert_eq!(one_pass, two_pass.as_str(), "{}", file.display());
                pools += 1;
            }
        }
    }
    assert!(pools > 50, "only {pools} pools compared");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "hcl" || e == "yaml") {
            files.push(path);
        }
    }
    files
}
