//! Spot stock-outs and the pool's `fallback`: on-demand instead, wait short, or fail.

use gpuplan::providers::Capacity;

use crate::engine_cli::{Fleet, PROVIDER, mix_of, pool};

/// Two all-spot nodes in one zone whose spot capacity is zero.
fn stocked_out(fallback: &str) -> Fleet {
    let extra = format!("\n  mix {{\n    spot_percent = 100\n    fallback     = \"{fallback}\"\n  }}\n");
    let fleet = Fleet::new(&format!("{PROVIDER}{}", pool("burst", &["us-east-1a"], 2, &extra)));
    fleet.sim(|c| c.set_capacity("us-east-1a", Capacity::Spot, Some(0)).expect("set capacity"));
    fleet
}

#[test]
fn fallback_on_demand_launches_on_demand_nodes_instead() {
    let fleet = stocked_out("on_demand");
    let r = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(
        r.stderr.contains("us-east-1a had no spot capacity; 2 on-demand nodes placed in us-east-1a"),
        "{}",
        r.stderr
    );
    assert_eq!(mix_of(&fleet.live_tagged(), "gpu_pool.burst"), (2, 0));
}

#[test]
fn fallback_wait_completes_short_says_so_exits_1_and_retries_next_time() {
    let fleet = stocked_out("wait");
    // Waiting is what the pool asked for, but the fleet is not what the plan said.
    let r = fleet.run(&["apply", "--auto-approve"]).expect(1);
    assert!(r.stderr.contains("Error: gpu_pool.burst is 2 nodes short of the plan"), "{}", r.stderr);
    assert!(r.stderr.contains("Apply incomplete: 2 nodes fewer than planned"), "{}", r.stderr);
    assert_eq!(mix_of(&fleet.live_tagged(), "gpu_pool.burst"), (0, 0));
    // The pool is recorded, and the shortfall is still planned.
    assert!(fleet.state().resources.contains_key("gpu_pool.burst"));
    fleet.run(&["plan", "--detailed-exitcode"]).expect(2);
    fleet.sim(|c| c.set_capacity("us-east-1a", Capacity::Spot, None).expect("restore capacity"));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(mix_of(&fleet.live_tagged(), "gpu_pool.burst"), (0, 2));
}

#[test]
fn fallback_fail_exits_1() {
    let fleet = stocked_out("fail");
    let r = fleet.run(&["apply", "--auto-approve"]).expect(1);
    assert!(r.stderr.contains("gpu_pool.burst failed"), "{}", r.stderr);
    assert_eq!(fleet.live_tagged(), vec![]);
}

#[test]
fn on_demand_fallback_nodes_are_not_churned_while_spot_stays_short() {
    let fleet = stocked_out("on_demand");
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let before: Vec<String> = fleet.live_tagged().into_iter().map(|n| n.id).collect();
    assert_eq!(before.len(), 2);
    // The fallback is recorded: the next plan is empty (a note, not a change) until the
    // preferred placement is due again (`retry_preferred`, 30 minutes by default).
    let r = fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    assert!(r.stdout.contains("Note: `gpu_pool.burst`: 2 on-demand nodes instead of spot"), "{}", r.stdout);
    fleet.sim(|c| c.advance(std::time::Duration::from_secs(31 * 60)).map(|_| ()).expect("advance"));
    // Due, but spot is still short: the try leaves the on-demand nodes where they are.
    fleet.run(&["plan", "--detailed-exitcode"]).expect(2);
    let r = fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert!(r.stderr.contains("the nodes they were to replace stay where they run"), "{}", r.stderr);
    assert!(r.stderr.contains("0 changed, 0 destroyed. Nodes: 0 launched, 0 terminated."), "{}", r.stderr);
    let after: Vec<String> = fleet.live_tagged().into_iter().map(|n| n.id).collect();
    assert_eq!(after, before, "the on-demand nodes were replaced by new on-demand nodes");
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    // Once spot is back and the (doubled) wait is over, the pool moves to spot.
    fleet.sim(|c| c.set_capacity("us-east-1a", Capacity::Spot, None).expect("restore capacity"));
    fleet.sim(|c| c.advance(std::time::Duration::from_secs(61 * 60)).map(|_| ()).expect("advance"));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(mix_of(&fleet.live_tagged(), "gpu_pool.burst"), (0, 2));
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
}

/// A shortfall names every zone that had no room, in the order they were tried, and the
/// last answer is the last zone's: three zones of one on-demand node each cannot hold a
/// pool of six. The node that could not be placed is the one planned for its own zone,
/// and every node recorded is in the zone the cloud put it in.
#[test]
fn a_shortfall_names_each_zone_that_had_no_room_not_only_the_last_answer_s() {
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    let fleet = Fleet::new(&format!("{PROVIDER}{}", pool("wide", &zones, 6, "")));
    fleet.sim(|c| {
        for z in zones {
            c.set_capacity(z, Capacity::OnDemand, Some(1)).expect("set capacity");
        }
    });
    let r = fleet.run(&["apply", "--auto-approve"]).expect(1);
    let err = crate::engine_cli::flat(&r.stderr);
    assert!(
        err.contains(
            "1 on-demand node in us-east-1b could not be placed: us-east-1b, us-east-1a, us-east-1c had no \
             on-demand capacity (last answer: insufficient on-demand capacity in zone `us-east-1c`"
        ),
        "{}",
        r.stderr
    );
    let live = fleet.live_tagged();
    assert_eq!(live.len(), 3, "{live:?}");
    let recorded = &fleet.state().resources["gpu_pool.wide"].nodes;
    for n in &live {
        let rec = recorded.iter().find(|r| r.id == n.id).unwrap_or_else(|| panic!("{} not recorded", n.id));
        assert_eq!(rec.zone, n.zone, "{} is recorded in another zone than it runs in", n.id);
    }
}

/// A spot batch that fell back to on-demand and found none there either says both: no
/// spot, then no on-demand capacity, never an on-demand answer alone for spot nodes.
#[test]
fn a_spot_shortfall_after_an_on_demand_fallback_names_both_capacity_types() {
    let fleet = stocked_out("on_demand");
    fleet.sim(|c| c.set_capacity("us-east-1a", Capacity::OnDemand, Some(0)).expect("set capacity"));
    let r = fleet.run(&["apply", "--auto-approve"]).expect(1);
    let err = crate::engine_cli::flat(&r.stderr);
    assert!(
        err.contains(
            "2 spot nodes in us-east-1a could not be placed: us-east-1a had no spot capacity; us-east-1a had no \
             on-demand capacity (last answer: insufficient on-demand capacity in zone `us-east-1a`"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(fleet.live_tagged(), vec![]);
}
