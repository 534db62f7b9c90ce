//! Cloud ownership and drift: untagged VMs are never touched; spot reclaims are seen,
//! reported and repaired.

use gpuplan::addr::Address;
use gpuplan::providers::{Capacity, NodeState};

use crate::engine_cli::{Fleet, PROVIDER, change, created, mix_of, pool, small_spec};

#[test]
fn untagged_nodes_survive_apply_and_destroy() {
    let fleet = Fleet::new(&small_spec(2));
    let foreign = fleet.sim(|c| c.insert_untagged("us-east-1", "us-east-1a", "g6.xlarge").expect("insert"));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let plan = fleet.run(&["plan"]).expect(0);
    assert!(!plan.stdout.contains(&foreign), "the plan mentions a VM gpuplan does not own:\n{}", plan.stdout);
    fleet.run(&["destroy", "--auto-approve"]).expect(0);
    let nodes = fleet.sim(|c| c.nodes());
    let node = nodes.iter().find(|n| n.id == foreign).expect("the untagged VM is still listed");
    assert_eq!(node.state, NodeState::Running);
    assert!(node.tags.is_empty(), "gpuplan tagged a VM it does not own: {:?}", node.tags);
}

#[test]
fn a_spot_reclaim_is_drift_and_apply_restores_the_mix() {
    let extra = "\n  mix {\n    on_demand_base = 1\n    spot_percent   = 100\n  }\n";
    let fleet = Fleet::new(&format!("{PROVIDER}{}", pool("batch", &["us-east-1a", "us-east-1b"], 5, extra)));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(mix_of(&fleet.live_tagged(), "gpu_pool.batch"), (1, 4));

    let addr: Address = "gpu_pool.batch".parse().unwrap();
    let reclaimed = fleet.sim(|c| c.interrupt(&addr, 2).expect("interrupt"));
    assert_eq!(reclaimed.len(), 2);
    let drift = fleet.run(&["drift", "--detailed-exitcode"]).expect(2);
    for id in &reclaimed {
        assert!(drift.stdout.contains(&format!("spot node {id}")), "{id} not reported:\n{}", drift.stdout);
    }
    assert!(drift.stdout.contains("reclaimed"), "{}", drift.stdout);

    let plan = fleet.plan_json();
    let c = change(&plan, "gpu_pool.batch");
    assert_eq!(c["action"], "update", "{c:#}");
    assert_eq!(created(c), 2, "{c:#}");
    assert!(c["pool"]["creates"].as_array().unwrap().iter().all(|b| b["capacity"] == "spot"), "{c:#}");

    fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(mix_of(&fleet.live_tagged(), "gpu_pool.batch"), (1, 4));
    fleet.run(&["drift", "--detailed-exitcode"]).expect(0);
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    let spot = fleet.live_tagged().iter().filter(|n| n.capacity == Capacity::Spot).count();
    assert_eq!(spot, 4);
}
