use std::time::{Duration, SystemTime};

use super::*;
use crate::addr::{Address, Kind};
use crate::providers::Capacity;

const MIN: Duration = Duration::from_secs(60);

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn rules() -> Rules {
    Rules { queue_wait: 5 * MIN, utilization_above: 80, idle_for: 15 * MIN, step: 1, cooldown: 5 * MIN }
}

fn limits(current: u32) -> Limits {
    Limits { current, min: 1, max: 4, gpus_per_node: 8, on_demand_usd: 10.0, spot_usd: 4.0, ..Limits::default() }
}

/// One zone, all on-demand: the layout for `n` nodes is `n` in `a`.
fn one_bucket(n: u32) -> Vec<(String, Capacity, u32)> {
    vec![("a".into(), Capacity::OnDemand, n), ("a".into(), Capacity::Spot, 0)]
}

fn node(id: &str, busy: bool, idle_since: Option<SystemTime>) -> NodeSignal {
    NodeSignal { id: id.into(), zone: "a".into(), capacity: Capacity::OnDemand, busy, idle_since }
}

fn signals(nodes: Vec<NodeSignal>, queued: Vec<Demand>) -> Signals {
    Signals { nodes, usage_known: true, queued }
}

#[test]
fn a_job_waiting_longer_than_queue_wait_scales_up_by_step() {
    // The node idles (a job finished long ago), but the queued job needs a whole node.
    let s = signals(vec![node("n1", false, Some(t0() - 60 * MIN))], vec![Demand { gpus: 8, since: t0() }]);
    let now = t0() + 6 * MIN;
    let d = decide(&rules(), &limits(1), &s, None, now, &one_bucket);
    assert_eq!(d, Decision::Up { to: 2, reason: "1 job waited > 5m".into() });
    // Not yet waited long enough: hold, and no scale-down while anything is queued.
    let d = decide(&rules(), &limits(1), &s, None, t0() + 4 * MIN, &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("queued")), "{d:?}");
}

#[test]
fn high_utilization_scales_up_and_step_is_capped_by_max() {
    let s = signals(vec![node("n1", true, None), node("n2", true, None), node("n3", true, None)], vec![]);
    let r = Rules { step: 3, ..rules() };
    let d = decide(&r, &limits(3), &s, None, t0(), &one_bucket);
    assert_eq!(d, Decision::Up { to: 4, reason: "utilization 100% > 80%".into() });
    let d = decide(&r, &limits(4), &s, None, t0(), &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("at its max (4 nodes)")), "{d:?}");
}

#[test]
fn quota_and_budget_cap_the_step() {
    let s = signals(vec![node("n1", true, None)], vec![]);
    let r = Rules { step: 3, ..rules() };
    // 8 GPUs per node, 12 GPUs of quota left: one more node.
    let l = Limits { quota_gpus_left: Some(12), ..limits(1) };
    let d = decide(&r, &l, &s, None, t0(), &one_bucket);
    assert_eq!(d, Decision::Up { to: 2, reason: "utilization 100% > 80% (+1, limited by the quota)".into() });
    let l = Limits { quota_gpus_left: Some(7), ..limits(1) };
    let d = decide(&r, &l, &s, None, t0(), &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("the quota allows no more nodes")), "{d:?}");
    // 10 USD/h per on-demand node, 25 USD/h of budget left: two more nodes.
    let l = Limits { budget_usd_left: Some(25.0), ..limits(1) };
    let d = decide(&r, &l, &s, None, t0(), &one_bucket);
    assert_eq!(d, Decision::Up { to: 3, reason: "utilization 100% > 80% (+2, limited by the budget)".into() });
    let l = Limits { budget_usd_left: Some(5.0), ..limits(1) };
    let d = decide(&r, &l, &s, None, t0(), &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("the budget allows no more")), "{d:?}");
}

#[test]
fn idle_nodes_scale_down_never_a_busy_one_and_never_below_min() {
    let s = signals(
        vec![
            node("busy", true, None),
            node("idle-long", false, Some(t0())),
            node("idle-new", false, Some(t0() + 50 * MIN)),
        ],
        vec![],
    );
    let now = t0() + 60 * MIN;
    let r = Rules { step: 2, ..rules() };
    let d = decide(&r, &limits(3), &s, None, now, &one_bucket);
    assert_eq!(d, Decision::Down { to: 2, remove: vec!["idle-long".into()], reason: "1 node idle > 15m".into() });
    // At min: hold.
    let l = Limits { min: 3, ..limits(3) };
    let d = decide(&r, &l, &s, None, now, &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("at its min")), "{d:?}");
    // Only busy nodes: nothing to remove.
    let s = signals(vec![node("b1", true, None), node("b2", true, None)], vec![]);
    let d = decide(&rules(), &limits(2), &s, None, now, &one_bucket);
    assert!(matches!(d, Decision::Up { .. }), "100% busy scales up, not down: {d:?}");
}

#[test]
fn unknown_usage_never_scales_down() {
    let s = Signals { nodes: vec![node("n1", false, Some(t0()))], usage_known: false, queued: vec![] };
    let d = decide(&rules(), &limits(2), &s, None, t0() + 60 * MIN, &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("unknown")), "{d:?}");
}

#[test]
fn cooldown_holds_both_directions() {
    let last = Some(t0());
    let busy = signals(vec![node("n1", true, None)], vec![]);
    let d = decide(&rules(), &limits(1), &busy, last, t0() + 2 * MIN, &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("cooldown (3m left)")), "{d:?}");
    let d = decide(&rules(), &limits(1), &busy, last, t0() + 5 * MIN, &one_bucket);
    assert!(matches!(d, Decision::Up { to: 2, .. }), "{d:?}");
    let idle = signals(vec![node("n1", false, Some(t0() - 60 * MIN)), node("n2", true, None)], vec![]);
    let d = decide(&rules(), &limits(2), &idle, last, t0() + MIN, &one_bucket);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("cooldown")), "{d:?}");
}

#[test]
fn scale_down_only_where_the_mix_shrinks() {
    // Two zones; going from 2 to 1 node keeps zone a and empties zone b (round-robin).
    let layout = |n: u32| {
        let a = n.div_ceil(2);
        vec![
            ("a".to_string(), Capacity::OnDemand, a),
            ("a".to_string(), Capacity::Spot, 0),
            ("b".to_string(), Capacity::OnDemand, n - a),
            ("b".to_string(), Capacity::Spot, 0),
        ]
    };
    let mut in_b = node("nb", true, None);
    in_b.zone = "b".into();
    let s = signals(vec![node("na", false, Some(t0())), in_b.clone()], vec![]);
    let now = t0() + 60 * MIN;
    let l = Limits { min: 0, ..limits(2) };
    let d = decide(&rules(), &l, &s, None, now, &layout);
    assert!(matches!(&d, Decision::Hold { why } if why.contains("mix")), "the busy node in b must stay: {d:?}");
    in_b.busy = false;
    in_b.idle_since = Some(t0());
    let s = signals(vec![node("na", false, Some(t0())), in_b], vec![]);
    let d = decide(&rules(), &l, &s, None, now, &layout);
    assert_eq!(d, Decision::Down { to: 1, remove: vec!["nb".into()], reason: "1 node idle > 15m".into() });
}

#[test]
fn queued_demand_is_per_pool_and_oldest_first() {
    let pool = Address::new(Kind::GpuPool, "train");
    let other = Address::new(Kind::GpuPool, "serve");
    let w = |p: &Address, secs: u64| Waiting {
        job: Address::new(Kind::Job, "j"),
        pool: p.clone(),
        gpus: 8,
        since: t0() + Duration::from_secs(secs),
    };
    let q = queued_demand(&[w(&pool, 30), w(&other, 0), w(&pool, 10)], &pool);
    assert_eq!(
        q.iter().map(|d| d.since).collect::<Vec<_>>(),
        vec![t0() + Duration::from_secs(10), t0() + Duration::from_secs(30)]
    );
}
