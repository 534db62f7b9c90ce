//! [`record`](super::health::record) against the way it was first written (a set of every
//! live node built first), on generated fleets: the same evidence for any reads, record,
//! live nodes and removals.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::tests::{World, node};
use crate::model::health::{Finding, NodeHealth, Signal, Source};
use crate::plan::model::Evidence;
use crate::providers::{Capacity, Node};

/// `record` as first written: every live node that stays in a set, then each read.
fn by_live_set(
    input: &crate::plan::context::PlanInput<'_>,
    live: &BTreeMap<crate::addr::Address, Vec<&Node>>,
    going: &BTreeSet<&str>,
) -> Evidence {
    let mut out = Evidence::default();
    let Some(reads) = input.health else { return out };
    let recorded = &input.state.health;
    let live: BTreeSet<&str> =
        live.values().flatten().map(|n| n.id.as_str()).filter(|id| !going.contains(id)).collect();
    for (id, read) in reads.iter().filter(|(id, _)| live.contains(id.as_str())) {
        let before = recorded.get(id).map_or(&[][..], Vec::as_slice);
        let now: Vec<Finding> = read.findings.iter().map(|f| f.first_seen_in(before)).collect();
        if now.is_empty() {
            if recorded.contains_key(id) {
                out.remove.push(id.clone());
            }
        } else if recorded.get(id) != Some(&now) {
            out.set.insert(id.clone(), now);
        }
    }
    out.remove.extend(recorded.keys().filter(|id| !live.contains(id.as_str())).cloned());
    out
}

fn finding(gpu: u32, seen_ms: u64) -> Finding {
    Finding {
        signal: Signal::XidFatal,
        gpu: Some(gpu),
        pci_bus: None,
        xid: Some(79),
        detail: "GPU has fallen off the bus".into(),
        source: Source::Sim,
        seen_ms,
    }
}

/// One node of the generated fleet: (live, going, read with these faults, recorded with
/// these), each fault a GPU index and when it was seen.
type Case = (bool, bool, Option<Vec<(u32, u64)>>, Option<Vec<(u32, u64)>>);

fn faults() -> impl Strategy<Value = Vec<(u32, u64)>> {
    proptest::collection::vec((0u32..3, 1u64..5), 0..3)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn the_evidence_is_the_same_as_by_a_set_of_every_live_node(
        cases in proptest::collection::vec((any::<bool>(), any::<bool>(), proptest::option::of(faults()), proptest::option::of(faults())), 0..10),
        read_at_all in any::<bool>(),
    ) {
        let cases: Vec<Case> = cases;
        let mut world = World::new(None, None);
        let mut reads = BTreeMap::new();
        let nodes: Vec<Node> = (0..cases.len()).map(|i| node(&format!("i-{i:02}"), "us-east-1a", Capacity::OnDemand)).collect();
        let mut live: Vec<&Node> = Vec::new();
        let mut going: BTreeSet<&str> = BTreeSet::new();
        for ((is_live, is_going, read, recorded), n) in cases.iter().zip(&nodes) {
            if *is_live {
                live.push(n);
            }
            if *is_going {
                going.insert(n.id.as_str());
            }
            if let Some(read) = read {
                let findings = read.iter().map(|(g, t)| finding(*g, *t)).collect();
                reads.insert(n.id.clone(), NodeHealth { node_id: n.id.clone(), findings, ..NodeHealth::default() });
            }
            if let Some(rec) = recorded {
                world.state_mut().health.insert(n.id.clone(), rec.iter().map(|(g, t)| finding(*g, *t)).collect());
            }
        }
        let live: BTreeMap<crate::addr::Address, Vec<&Node>> = [(super::tests::train(), live)].into_iter().collect();
        let mut input = world.input();
        input.health = read_at_all.then_some(&reads);
        prop_assert_eq!(super::health::record(&input, &live, &going), by_live_set(&input, &live, &going));
    }
}
