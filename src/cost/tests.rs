//! The cost of a large plan, priced on several threads.

use crate::plan::diff::{PlanInput, plan_on};
use crate::state::State;

/// A plan large enough to be priced on several threads costs what one thread prices: the
/// same pools in the same order, the same totals to the cent.
#[test]
fn a_cost_split_over_threads_is_the_one_thread_cost() {
    let (loaded, plan) = large_plan(1_100);
    let prices = super::PriceBook::new(&loaded.spec, &Default::default());
    let one = super::cost_on(&plan, &loaded.spec, &prices, 1).expect("every pool is priced");
    assert_eq!(one.pools.len(), 1_100);
    assert!(one.spot_hourly_after > 0.0 && one.on_demand_hourly_after > 0.0);
    for threads in [2, 3, 8] {
        let split = super::cost_on(&plan, &loaded.spec, &prices, threads).expect("every pool is priced");
        assert_eq!(serde_json::to_value(&split).unwrap(), serde_json::to_value(&one).unwrap(), "{threads} threads");
    }
}

/// Priced in rounds (so that a large plan's costs do not all wait beside its report), a
/// plan costs what it costs priced at once: the same pools in the same order, the same
/// totals to the cent, on one thread or several.
#[test]
fn a_cost_priced_in_rounds_is_the_cost_priced_at_once() {
    let (loaded, plan) = large_plan(1_100);
    let prices = super::PriceBook::new(&loaded.spec, &Default::default());
    let whole = super::cost_in_rounds(&plan, &loaded.spec, &prices, 1, usize::MAX).expect("every pool is priced");
    for (threads, round) in [(1, 1), (1, 100), (2, 300), (3, 1_099)] {
        let rounds = super::cost_in_rounds(&plan, &loaded.spec, &prices, threads, round).expect("every pool is priced");
        let (a, b) = (serde_json::to_value(&rounds).unwrap(), serde_json::to_value(&whole).unwrap());
        assert_eq!(a, b, "{threads} threads, rounds of {round}");
    }
}

/// A plan of `n` new sim pools of two GPUs, some with spot, and its spec.
fn large_plan(n: usize) -> (crate::spec::Loaded, crate::plan::Plan) {
    let mut hcl = String::from("provider \"sim\" {\n  region = \"us-east-1\"\n}\n");
    for i in 0..n {
        let (gpu, spot) = if i % 3 == 0 { ("A10G", 50) } else { ("L4", 0) };
        hcl.push_str(&format!(
            "gpu_pool \"p{i:04}\" {{\n  provider = \"sim\"\n  gpu = \"{gpu}\"\n  gpus_per_node = 1\n  mix {{\n    spot_percent = {spot}\n  }}\n  nodes {{\n    min = 0\n    desired = {}\n    max = 4\n  }}\n}}\n",
            1 + i % 4
        ));
    }
    let mut sources = crate::diag::Sources::default();
    sources.add("main.hcl", hcl);
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(loaded.diags.items.is_empty(), "{:?}", loaded.diags.items);
    let state = State::new("00000000-0000-4000-8000-000000000000".into());
    let input =
        PlanInput { observed: Some(&[]), spec_digest: String::new(), ..PlanInput::offline(&loaded.spec, &state) };
    let plan = plan_on(&input, 1).expect("an empty state has no bad key");
    (loaded, plan)
}

/// A quota's cost counts the pools it lists, in whatever order the spec lists them, and
/// the pools of the jobs charged to it, each once: its pools come back sorted, and its
/// figures are those pools' own.
#[test]
fn a_quota_costs_the_pools_it_lists_in_any_order_each_once() {
    let (mut loaded, plan) = large_plan(40);
    let listed: Vec<crate::addr::Address> = ["p0031", "p0007", "p0020", "p0007", "p0002"]
        .iter()
        .map(|n| format!("gpu_pool.{n}").parse().unwrap())
        .collect();
    let q: crate::addr::Address = "quota.team".parse().unwrap();
    let pools = listed.iter().map(|a| crate::spec::model::Spanned::new(a.clone(), Default::default())).collect();
    let quota = crate::spec::model::Quota { pools, ..Default::default() };
    loaded.spec.quotas.insert(q, quota);
    let prices = super::PriceBook::new(&loaded.spec, &Default::default());
    let report = super::cost_on(&plan, &loaded.spec, &prices, 1).expect("every pool is priced");
    let [team] = report.quotas.as_slice() else { panic!("one quota: {:?}", report.quotas) };
    let names: Vec<String> = team.pools.iter().map(|a| a.name.clone()).collect();
    assert_eq!(names, ["p0002", "p0007", "p0020", "p0031"]);
    let mine: Vec<&crate::plan::report::PoolCost> =
        report.pools.iter().filter(|p| names.contains(&p.address.name)).collect();
    assert_eq!(mine.len(), 4);
    assert_eq!(team.gpus_after, mine.iter().map(|p| p.gpus_after).sum::<u64>());
    let hourly: f64 = mine.iter().map(|p| p.hourly_after).sum();
    assert!(hourly > 0.0);
    // The report's pools are rounded to the cent; the quota sums them unrounded.
    assert!((team.hourly_after - hourly).abs() < 0.05, "{} against {hourly}", team.hourly_after);
}
