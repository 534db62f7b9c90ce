//! The least-disruption layout on hand-made pools; `plan/pool/keep_tests.rs` checks it
//! through the planner against a brute-force search.

use super::*;
use crate::spec::model::ProviderKind;

fn sim(zones: &[&str]) -> PoolShape {
    PoolShape {
        provider: "sim".into(),
        provider_kind: ProviderKind::Sim,
        region: "us-east-1".into(),
        zones: zones.iter().map(|z| z.to_string()).collect(),
        gpu: "L4".into(),
        gpus_per_node: 1,
        instance_types: vec!["g6.xlarge".into()],
        image: None,
        max_spot_price: None,
        hardware: None,
        cluster_placement: false,
        reserved: None,
    }
}

const IDLE: Worth = [1, 1, 0, 0];
const BUSY: Worth = [1, 1, 1, 1];

fn counts(layout: &Layout) -> Vec<(&str, Capacity, u32)> {
    layout.iter().filter(|b| b.2 > 0).map(|(z, c, k)| (z.as_str(), *c, *k)).collect()
}

#[test]
fn the_spot_node_that_runs_stays_where_an_even_layout_can_keep_it() {
    // The starter fleet (six zones): one spot node in us-east-1a, then 3 nodes at 50 % spot.
    let shape = sim(&["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"]);
    let usual = shape::layout(&shape, 3, 0, 50);
    assert_eq!(
        counts(&usual),
        [
            ("us-east-1a", Capacity::OnDemand, 1),
            ("us-east-1b", Capacity::OnDemand, 1),
            ("us-east-1c", Capacity::Spot, 1)
        ],
        "the usual layout would move the spot node"
    );
    let have: Have<'_> = [(("us-east-1a", Capacity::Spot), vec![IDLE])].into_iter().collect();
    let chosen = layout(&shape, 3, 0, 50, &have);
    // The on-demand nodes go where the usual layout has nodes, in the first zones.
    assert_eq!(
        counts(&chosen),
        [
            ("us-east-1a", Capacity::Spot, 1),
            ("us-east-1b", Capacity::OnDemand, 1),
            ("us-east-1c", Capacity::OnDemand, 1)
        ]
    );
    // Same buckets, same order as the usual layout: zone by zone, on-demand then spot.
    let keys = |l: &Layout| l.iter().map(|(z, c, _)| (z.clone(), *c)).collect::<Vec<_>>();
    assert_eq!(keys(&chosen), keys(&usual));
    // Over three zones that is the only even layout keeping the node.
    let three = sim(&["us-east-1a", "us-east-1b", "us-east-1c"]);
    assert_eq!(counts(&layout(&three, 3, 0, 50, &have)), counts(&chosen));
}

#[test]
fn without_nodes_to_keep_the_usual_layout_is_chosen() {
    let shape = sim(&["us-east-1a", "us-east-1b", "us-east-1c"]);
    for n in 0..8 {
        for (base, pct) in [(0, 0), (0, 50), (1, 70), (2, 100)] {
            assert_eq!(layout(&shape, n, base, pct, &Have::new()), shape::layout(&shape, n, base, pct));
            // Nodes only in a zone the pool no longer allows change nothing either.
            let elsewhere: Have<'_> = [(("us-east-1f", Capacity::Spot), vec![IDLE; 3])].into_iter().collect();
            assert_eq!(
                layout(&shape, n, base, pct, &elsewhere),
                shape::layout(&shape, n, base, pct),
                "{n} {base} {pct}"
            );
        }
    }
}

#[test]
fn among_layouts_keeping_as_many_the_busy_nodes_stay() {
    // One on-demand node wanted over two zones; one idle node in each, a job on 1b's.
    let shape = sim(&["us-east-1a", "us-east-1b"]);
    let have: Have<'_> =
        [(("us-east-1a", Capacity::OnDemand), vec![IDLE]), (("us-east-1b", Capacity::OnDemand), vec![BUSY])]
            .into_iter()
            .collect();
    assert_eq!(counts(&layout(&shape, 1, 0, 0, &have)), [("us-east-1b", Capacity::OnDemand, 1)]);
    // Both idle: the usual layout (1a first).
    let have: Have<'_> =
        [(("us-east-1a", Capacity::OnDemand), vec![IDLE]), (("us-east-1b", Capacity::OnDemand), vec![IDLE])]
            .into_iter()
            .collect();
    assert_eq!(counts(&layout(&shape, 1, 0, 0, &have)), [("us-east-1a", Capacity::OnDemand, 1)]);
}

#[test]
fn a_crowded_zone_keeps_what_an_even_spread_allows() {
    // Four spot nodes in 1b, three spot nodes wanted over two zones: the usual layout puts
    // two in 1a and one in 1b; two in 1b and one in 1a is as even and keeps one more.
    let shape = sim(&["us-east-1a", "us-east-1b"]);
    assert_eq!(counts(&shape::layout(&shape, 3, 0, 100))[0], ("us-east-1a", Capacity::Spot, 2));
    let have: Have<'_> = [(("us-east-1b", Capacity::Spot), vec![IDLE; 4])].into_iter().collect();
    let chosen = layout(&shape, 3, 0, 100, &have);
    assert_eq!(counts(&chosen), [("us-east-1a", Capacity::Spot, 1), ("us-east-1b", Capacity::Spot, 2)]);
}

#[test]
fn ec2_fleets_over_several_zones_have_one_layout() {
    let shape = PoolShape { provider_kind: ProviderKind::Aws, ..sim(&["us-east-1a", "us-east-1b"]) };
    let have: Have<'_> = [((shape::ANY_ZONE, Capacity::Spot), vec![IDLE; 2])].into_iter().collect();
    assert_eq!(layout(&shape, 3, 1, 50, &have), shape::layout(&shape, 3, 1, 50));
}

#[test]
fn totals_within_one_bind_when_the_extras_outnumber_the_zones() {
    // 3 zones, on-demand 2 (r = 2) and spot 2 (s = 2): r + s > z, so every zone gets an
    // extra and one zone both. Spot nodes in 1a and 1b, on-demand in 1a: all three stay.
    let shape = sim(&["us-east-1a", "us-east-1b", "us-east-1c"]);
    let have: Have<'_> = [
        (("us-east-1a", Capacity::Spot), vec![IDLE]),
        (("us-east-1b", Capacity::Spot), vec![IDLE]),
        (("us-east-1a", Capacity::OnDemand), vec![IDLE]),
    ]
    .into_iter()
    .collect();
    let chosen = layout(&shape, 4, 0, 50, &have);
    assert_eq!(
        counts(&chosen),
        [
            ("us-east-1a", Capacity::OnDemand, 1),
            ("us-east-1a", Capacity::Spot, 1),
            ("us-east-1b", Capacity::Spot, 1),
            ("us-east-1c", Capacity::OnDemand, 1)
        ]
    );
}
