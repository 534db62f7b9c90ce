//! Least disruption through the planner ([`node_ops`]): on random pools, zone lists, sizes,
//! mixes and live nodes, the plan terminates no more nodes than the fewest any layout
//! the shape allows would, its result has the pool's shape, and planning that result again
//! changes nothing. The brute force below knows the shape's rules, not the planner's way.

use proptest::prelude::*;

use super::tests::{World, node, resource, shape_of, train, with_cx};
use super::*;
use crate::providers::Capacity;

/// Zones the pools draw from; `us-east-1e` holds nodes but is never allowed.
const ZONES: [&str; 5] = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e"];

/// One random case: the pool's zones, size and mix, and its live nodes oldest first.
#[derive(Debug, Clone)]
struct Case {
    zones: Vec<&'static str>,
    n: u32,
    base: u32,
    pct: u32,
    nodes: Vec<(usize, bool)>,
}

fn cases() -> impl Strategy<Value = Case> {
    let zones = proptest::sample::subsequence(ZONES[..4].to_vec(), 1..=4).prop_shuffle();
    let pct = prop_oneof![Just(0u32), Just(25), Just(50), Just(70), Just(100), 0u32..=100];
    let nodes = proptest::collection::vec((0usize..5, any::<bool>()), 0..=7);
    (zones, 0u32..=7, 0u32..=3, pct, nodes).prop_map(|(zones, n, base, pct, nodes)| Case { zones, n, base, pct, nodes })
}

fn capacity(spot: bool) -> Capacity {
    if spot { Capacity::Spot } else { Capacity::OnDemand }
}

/// Every (on-demand, spot) count per zone the shape allows for `case`: the split of
/// `shape::split`, each capacity type and the zones' totals within one of each other.
fn allowed_layouts(case: &Case) -> Vec<(Vec<u32>, Vec<u32>)> {
    fn compositions(total: u32, parts: usize) -> Vec<Vec<u32>> {
        if parts == 1 {
            return vec![vec![total]];
        }
        (0..=total)
            .flat_map(|first| {
                compositions(total - first, parts - 1).into_iter().map(move |mut rest| {
                    rest.insert(0, first);
                    rest
                })
            })
            .collect()
    }
    let even = |v: &[u32]| v.iter().max().unwrap_or(&0) - v.iter().min().unwrap_or(&0) <= 1;
    let (od, spot) = shape::split(case.n, case.base, case.pct);
    let z = case.zones.len();
    let ods: Vec<Vec<u32>> = compositions(od, z).into_iter().filter(|v| even(v)).collect();
    let spots: Vec<Vec<u32>> = compositions(spot, z).into_iter().filter(|v| even(v)).collect();
    let mut out = Vec::new();
    for o in &ods {
        for s in &spots {
            let totals: Vec<u32> = o.iter().zip(s).map(|(a, b)| a + b).collect();
            if even(&totals) {
                out.push((o.clone(), s.clone()));
            }
        }
    }
    out
}

/// Live nodes per (zone index in `case.zones`, spot), and those in no allowed zone.
fn have(case: &Case, nodes: &[Node]) -> (BTreeMap<(usize, bool), u32>, u32) {
    let mut by = BTreeMap::new();
    let mut outside = 0;
    for n in nodes {
        match case.zones.iter().position(|z| *z == n.zone) {
            Some(i) => *by.entry((i, n.capacity == Capacity::Spot)).or_default() += 1,
            None => outside += 1,
        }
    }
    (by, outside)
}

/// The fewest nodes any allowed layout terminates.
fn fewest_terminations(case: &Case, nodes: &[Node]) -> u32 {
    let (by, outside) = have(case, nodes);
    let over = |(od, spot): &(Vec<u32>, Vec<u32>)| -> u32 {
        by.iter().map(|(&(i, s), &k)| k.saturating_sub(if s { spot[i] } else { od[i] })).sum()
    };
    outside + allowed_layouts(case).iter().map(over).min().expect("the usual layout is allowed")
}

fn plan(case: &Case, nodes: &[Node]) -> NodeOps {
    let world = World::new(Some(resource(serde_json::json!({}), nodes.to_vec())), None);
    let mut shape = shape_of(&world);
    shape.zones = case.zones.iter().map(|z| z.to_string()).collect();
    let mut pool = world.spec.gpu_pools[&train()].as_ref().clone();
    pool.mix.on_demand_base.value = case.base;
    pool.mix.spot_percent.value = case.pct;
    let fresh: Vec<&Node> = nodes.iter().collect();
    with_cx(&world, true, false, |cx| node_ops(cx, &shape, &pool, case.n, &fresh, &[], None))
}

/// The nodes after `ops` is applied: those kept, and one new node per node created.
fn applied(nodes: &[Node], ops: &NodeOps) -> Vec<Node> {
    let mut after: Vec<Node> = nodes.iter().filter(|n| !ops.deletes.iter().any(|d| d.id == n.id)).cloned().collect();
    for (b, batch) in ops.creates.iter().enumerate() {
        for k in 0..batch.count {
            after.push(node(&format!("new-{b}-{k}"), &batch.zone, batch.capacity));
        }
    }
    after
}

proptest! {
    #[test]
    fn the_plan_terminates_the_fewest_nodes_its_shape_allows(case in cases()) {
        let nodes: Vec<Node> = case
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &(zone, spot))| node(&format!("i-{i}"), ZONES[zone], capacity(spot)))
            .collect();
        let ops = plan(&case, &nodes);
        prop_assert!(ops.held.is_empty() && !ops.retry);
        prop_assert_eq!(ops.deletes.len() as u32, fewest_terminations(&case, &nodes), "deletes: {:?}", ops.deletes);

        // The result has the pool's shape: the split, every zone allowed, spread within one.
        let after = applied(&nodes, &ops);
        prop_assert_eq!(after.len() as u32, case.n);
        let (by, outside) = have(&case, &after);
        prop_assert_eq!(outside, 0);
        let count = |i: usize, spot: bool| by.get(&(i, spot)).copied().unwrap_or(0);
        let z = case.zones.len();
        let od: Vec<u32> = (0..z).map(|i| count(i, false)).collect();
        let spot: Vec<u32> = (0..z).map(|i| count(i, true)).collect();
        prop_assert!(allowed_layouts(&case).contains(&(od.clone(), spot.clone())), "on-demand {od:?}, spot {spot:?}");

        // Converged: planning the result again changes nothing.
        let again = plan(&case, &after);
        prop_assert!(again.creates.is_empty() && again.deletes.is_empty(), "{:?}", again);
    }
}

#[test]
fn a_pool_that_fell_back_keeps_the_usual_layout_its_record_is_about() {
    // 4 nodes, 1 on-demand base, 50 % spot over 1a and 1b: the usual layout is 2
    // on-demand in 1a, 1 on-demand and 1 spot in 1b. The nodes run 1 + 1 spot in 1a and 2
    // on-demand in 1b, a layout as even.
    let nodes = vec![
        node("a-od", "us-east-1a", Capacity::OnDemand),
        node("a-spot", "us-east-1a", Capacity::Spot),
        node("b-od1", "us-east-1b", Capacity::OnDemand),
        node("b-od2", "us-east-1b", Capacity::OnDemand),
    ];
    let run = |fallback: Option<crate::state::model::FallbackRecord>| {
        let mut prior = resource(serde_json::json!({}), nodes.clone());
        prior.fallback = fallback;
        let world = World::new(Some(prior), None);
        let shape = shape_of(&world);
        let pool = world.spec.gpu_pools[&train()].as_ref().clone();
        let fresh: Vec<&Node> = nodes.iter().collect();
        with_cx(&world, true, false, |cx| node_ops(cx, &shape, &pool, 4, &fresh, &[], None))
    };
    // No fallback: the nodes are where an allowed layout puts them; nothing moves.
    let ops = run(None);
    assert!(ops.creates.is_empty() && ops.deletes.is_empty() && ops.held.is_empty(), "{ops:?}");
    // Fallen back and waiting: the nodes stand in for the usual layout's buckets, as before.
    let record = crate::state::model::FallbackRecord {
        since_ms: 0,
        tried_ms: 0,
        failed_retries: 0,
        reason: "us-east-1b had no spot capacity".into(),
    };
    let ops = run(Some(record));
    assert!(ops.creates.is_empty() && ops.deletes.is_empty(), "{ops:?}");
    let mut held: Vec<(&str, &str)> = ops.held.iter().map(|h| (h.id.as_str(), h.preferred_zone.as_str())).collect();
    held.sort();
    assert_eq!(held, [("a-spot", "us-east-1b"), ("b-od2", "us-east-1a")]);
}
