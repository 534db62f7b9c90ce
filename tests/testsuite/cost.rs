//! The cost model against hand-computed numbers from the catalog rows, for small specs
//! on the sim provider; then `gpuplan cost` / `offers` as scripts see them.
//!
//! Catalog rows used (src/catalog/*.json):
//! - aws `p4de.24xlarge`: 8 × A100-80GB, 27.44705 USD/h on-demand; AWS spot = × (1 − 0.6).
//! - aws `g6.xlarge` 0.8048, `g6.2xlarge` 0.9776, `g6.4xlarge` 1.3232, `g6.8xlarge` 2.0144,
//!   `g6.16xlarge` 3.3968 USD/h: 1 × L4 each.
//! - tencentcloud `GN7.2XLARGE32`: 1 × T4, 6.5 CNY/h (as are `GN7.5XLARGE80` and
//!   `GN7.8XLARGE128`); Tencent spot = × (1 − 0.85). CNY → USD at 7.1 unless set.

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;
use gpuplan::cost::{self, CostReport, PriceBook, Rate};
use gpuplan::diag::Sources;
use gpuplan::plan::diff::{self, PlanInput};
use gpuplan::spec::{LoadOptions, Spec};
use gpuplan::state::State;
use serde_json::Value;

const P4DE: f64 = 27.44705;
const P4DE_SPOT: f64 = 27.44705 * 0.4; // 10.97882
const G6: f64 = 0.8048;
const G6_SPOT: f64 = 0.8048 * 0.4; // 0.32192

/// Money in reports is rounded to 1/10000 USD; sums of rounded pools may differ by a few.
#[track_caller]
fn close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 5e-4, "got {actual}, expected {expected}");
}

fn spec(hcl: &str) -> Spec {
    let mut sources = Sources::default();
    sources.add("main.hcl", hcl);
    let loaded = gpuplan::spec::load_sources(sources, &LoadOptions::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags);
    loaded.spec
}

/// Cost of creating `hcl` from an empty state, with `env` as the environment.
fn price(hcl: &str, env: &[(&str, &str)]) -> CostReport {
    let spec = spec(hcl);
    let state = State::new("lineage".into());
    let plan = diff::plan(&PlanInput {
        spec: &spec,
        state: &state,
        observed: None,
        targets: &[],
        replace: &[],
        health: None,
        destroy: false,
        spec_digest: String::new(),
        autoscale: &[],
        clocks: &Default::default(),
        job_statuses: None,
        stop_busy: false,
    })
    .expect("the state's keys are addresses");
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    cost::cost(&plan, &spec, &PriceBook::new(&spec, &env)).expect("the plan prices")
}

fn pool(name: &str, body: &str) -> String {
    format!("gpu_pool \"{name}\" {{\n  provider = \"sim\"\n{body}\n}}\n")
}

const SIM_US: &str = "provider \"sim\" {\n  region = \"us-east-1\"\n}\n";

fn train(min: u32, desired: u32, max: u32, base: u32, spot: u32) -> String {
    pool(
        "train",
        &format!(
            "  gpu = \"A100-80GB\"\n  gpus_per_node = 8\n  instance_types = [\"p4de.24xlarge\"]\n  nodes {{\n    min = {min}\n    desired = {desired}\n    max = {max}\n  }}\n  mix {{\n    on_demand_base = {base}\n    spot_percent = {spot}\n  }}"
        ),
    )
}

fn l4(min: u32, desired: u32, max: u32) -> String {
    pool(
        "serve",
        &format!(
            "  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {{\n    min = {min}\n    desired = {desired}\n    max = {max}\n  }}\n  mix {{\n    spot_percent = 50\n  }}"
        ),
    )
}

#[test]
fn aws_pool_splits_spot_and_on_demand_and_prices_from_the_catalog() {
    // 5 nodes, 1 on-demand base, 60 % of the other 4 on spot = 2.4 → 2 spot, 3 on-demand.
    let c = price(&format!("{SIM_US}{}", train(5, 5, 5, 1, 60)), &[]);
    let p = &c.pools[0];
    assert_eq!((p.on_demand_before, p.spot_before, p.on_demand_after, p.spot_after), (0, 0, 3, 2));
    assert_eq!((p.gpus_before, p.gpus_after), (0, 40));
    assert_eq!(p.instance_type, "p4de.24xlarge");
    close(p.on_demand_price.as_ref().unwrap().usd_per_hour, 27.44705);
    close(p.spot_price.as_ref().unwrap().usd_per_hour, 10.97882);
    close(p.on_demand_hourly_after, 3.0 * P4DE); // 82.34115
    close(p.spot_hourly_after, 2.0 * P4DE_SPOT); // 21.95764
    close(p.hourly_before, 0.0);
    close(p.hourly_after, 3.0 * P4DE + 2.0 * P4DE_SPOT); // 104.29879
    close(p.price_per_gpu_hour, (3.0 * P4DE + 2.0 * P4DE_SPOT) / 40.0); // 2.60747
    assert_eq!(p.range, None, "min = max and no autoscaler: no range");
    assert!(p.alternatives.is_empty(), "instance_types is pinned: no alternatives");

    close(c.hourly_before, 0.0);
    close(c.hourly_after, 104.29879);
    close(c.hourly_delta, 104.29879);
    close(c.on_demand_hourly_after, 82.34115);
    close(c.spot_hourly_after, 21.95764);
    assert_eq!(c.hours_per_month, 730.0);
    close(c.monthly_after, 104.29879 * 730.0); // 76138.1167: hourly × 730, unrounded
    close(c.monthly_delta, 104.29879 * 730.0);
    assert_eq!(c.currency, "USD");
    assert!(c.exchange_rates.is_empty(), "no CNY price used: {:?}", c.exchange_rates);
    assert!(c.unpriced.is_empty());
}

#[test]
fn an_unknown_provider_kind_is_an_error_never_priced_as_sim() {
    // A state written by a newer gpuplan, or edited: the pool's recorded kind is unknown.
    let spec = spec(&format!("{SIM_US}{}", train(2, 2, 2, 1, 0)));
    let state = State::new("lineage".into());
    let mut plan = diff::plan(&PlanInput {
        spec: &spec,
        state: &state,
        observed: None,
        targets: &[],
        replace: &[],
        health: None,
        destroy: false,
        spec_digest: String::new(),
        autoscale: &[],
        clocks: &Default::default(),
        job_statuses: None,
        stop_busy: false,
    })
    .expect("the state's keys are addresses");
    for (kind, shown) in [("gcp", "`gcp`"), ("", "(none recorded)")] {
        plan.changes[0].pool.as_mut().unwrap().provider_kind = kind.into();
        let err = cost::cost(&plan, &spec, &PriceBook::new(&spec, &BTreeMap::new())).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("`gpu_pool.train`") && text.contains(shown), "{text}");
        let help = miette::Diagnostic::help(&err).map(|h| h.to_string()).unwrap_or_default();
        assert!(help.contains("resources.\"gpu_pool.train\".provider_kind") && help.contains("`sim`"), "{help}");
    }
}

/// The plan of `hcl` from an empty state (no refresh).
fn fresh_plan(spec: &Spec) -> gpuplan::plan::Plan {
    let state = State::new("lineage".into());
    diff::plan(&PlanInput {
        spec,
        state: &state,
        observed: None,
        targets: &[],
        replace: &[],
        health: None,
        destroy: false,
        spec_digest: String::new(),
        autoscale: &[],
        clocks: &Default::default(),
        job_statuses: None,
        stop_busy: false,
    })
    .expect("the state's keys are addresses")
}

#[test]
fn a_pool_with_nodes_nobody_can_price_is_a_plan_error_never_free() {
    use gpuplan::plan::model::{NodeDelete, TypeCount};
    use gpuplan::providers::Capacity;
    let spec = spec(&format!("{SIM_US}{}", train(2, 2, 2, 2, 0)));
    let prices = PriceBook::new(&spec, &BTreeMap::new());
    let clean = fresh_plan(&spec);
    let report = cost::cost(&clean, &spec, &prices).unwrap();
    assert!(cost::errors(&clean, &report).is_empty(), "{:?}", cost::errors(&clean, &report));

    // Two nodes the plan keeps, of a type the catalog has no price for.
    let mut plan = clean.clone();
    plan.changes[0].pool.as_mut().unwrap().before_types = vec![TypeCount {
        instance_type: "p9.mystery".into(),
        capacity: Capacity::OnDemand,
        count: 2,
        reservation: None,
    }];
    let report = cost::cost(&plan, &spec, &prices).unwrap();
    assert_eq!(report.unpriced, vec!["gpu_pool.train".parse().unwrap()]);
    let errors = cost::errors(&plan, &report);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].message.contains("`gpu_pool.train` cannot be priced")
            && errors[0].message.contains("2 × `p9.mystery`"),
        "{errors:?}"
    );
    assert!(errors[0].hint.as_deref().is_some_and(|h| h.contains("gpuplan offers --gpu A100-80GB")), "{errors:?}");

    // Removed by the plan, they are no error: the plan that replaces them prices.
    let pc = plan.changes[0].pool.as_mut().unwrap();
    pc.deletes = ["i-1", "i-2"]
        .map(|id| NodeDelete {
            id: id.into(),
            zone: "us-east-1a".into(),
            instance_type: "p9.mystery".into(),
            capacity: Capacity::OnDemand,
            reason: "replaced".into(),
            region: None,
            provider: None,
            reservation: None,
        })
        .to_vec();
    let report = cost::cost(&plan, &spec, &prices).unwrap();
    assert!(cost::errors(&plan, &report).is_empty(), "{:?}", cost::errors(&plan, &report));
    close(report.hourly_after, 2.0 * P4DE);
    assert_eq!(report.unpriced, vec!["gpu_pool.train".parse().unwrap()], "\"before\" leaves them out, and says so");
}

#[test]
fn nodes_replacing_ones_that_were_not_live_cost_what_they_cost() {
    use gpuplan::plan::model::NodeDelete;
    use gpuplan::providers::Capacity;
    let spec = spec(&format!("{SIM_US}{}", train(2, 2, 2, 2, 0)));
    let mut plan = fresh_plan(&spec);
    // Two nodes found stopped outside gpuplan: terminated, never counted in "before".
    plan.changes[0].pool.as_mut().unwrap().deletes = ["i-1", "i-2"]
        .map(|id| NodeDelete {
            id: id.into(),
            zone: "us-east-1a".into(),
            instance_type: "p4de.24xlarge".into(),
            capacity: Capacity::OnDemand,
            reason: "stopped outside gpuplan".into(),
            region: None,
            provider: None,
            reservation: None,
        })
        .to_vec();
    let report = cost::cost(&plan, &spec, &PriceBook::new(&spec, &BTreeMap::new())).unwrap();
    close(report.hourly_before, 0.0);
    close(report.hourly_after, 2.0 * P4DE);
    assert!(cost::errors(&plan, &report).is_empty(), "{:?}", cost::errors(&plan, &report));
}

#[test]
fn a_pool_that_asks_for_nodes_but_launches_none_is_a_plan_error_not_zero_cost() {
    let spec = spec(&format!("{SIM_US}{}", train(2, 2, 2, 2, 0)));
    let mut plan = fresh_plan(&spec);
    // What a pool with no zone for its shape planned before: its nodes, and no launches.
    plan.changes[0].pool.as_mut().unwrap().creates.clear();
    let report = cost::cost(&plan, &spec, &PriceBook::new(&spec, &BTreeMap::new())).unwrap();
    close(report.hourly_after, 0.0);
    let errors = cost::errors(&plan, &report);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .message
            .contains("`gpu_pool.train` asks for 2 nodes of 8 × A100-80GB in us-east-1, but the plan launches none"),
        "{errors:?}"
    );
}

const SIM_GZ: &str = "provider \"sim\" {\n  region = \"ap-guangzhou\"\n}\n";
const SIM_GZ_7: &str = "provider \"sim\" {\n  region      = \"ap-guangzhou\"\n  cny_per_usd = 7.0\n}\n";

fn t4() -> String {
    // 2 nodes, 50 % spot: 1 on-demand + 1 spot, instance type left open.
    pool(
        "t4",
        "  gpu = \"T4\"\n  gpus_per_node = 1\n  nodes {\n    min = 2\n    desired = 2\n    max = 2\n  }\n  mix {\n    spot_percent = 50\n  }",
    )
}

#[test]
fn cny_prices_convert_at_the_default_rate_and_the_rate_is_reported() {
    let c = price(&format!("{SIM_GZ}{}", t4()), &[]);
    let p = &c.pools[0];
    assert_eq!(p.instance_type, "GN7.2XLARGE32");
    let od = p.on_demand_price.as_ref().unwrap();
    assert_eq!(od.native, Some((6.5, "CNY".to_string())));
    close(od.usd_per_hour, 6.5 / 7.1); // 0.915493
    close(p.spot_price.as_ref().unwrap().usd_per_hour, 6.5 * 0.15 / 7.1); // 0.137324
    close(p.hourly_after, 6.5 / 7.1 + 6.5 * 0.15 / 7.1); // 1.052817
    close(c.hourly_after, 1.052817);
    assert_eq!(c.exchange_rates, vec![Rate { currency: "CNY".into(), per_usd: 7.1, source: "default".into() }]);
}

#[test]
fn cny_rate_from_the_environment() {
    let c = price(&format!("{SIM_GZ}{}", t4()), &[("GPUPLAN_CNY_PER_USD", "6.9")]);
    close(c.pools[0].on_demand_hourly_after, 6.5 / 6.9); // 0.942029
    close(c.pools[0].spot_hourly_after, 0.975 / 6.9); // 0.141304
    close(c.hourly_after, 6.5 / 6.9 + 0.975 / 6.9); // 1.083333
    assert_eq!(
        c.exchange_rates,
        vec![Rate { currency: "CNY".into(), per_usd: 6.9, source: "GPUPLAN_CNY_PER_USD".into() }]
    );
}

#[test]
fn cny_rate_of_the_provider_block_wins_over_the_environment() {
    let c = price(&format!("{SIM_GZ_7}{}", t4()), &[("GPUPLAN_CNY_PER_USD", "6.9")]);
    close(c.hourly_after, 6.5 / 7.0 + 0.975 / 7.0); // 0.928571 + 0.139286 = 1.067857
    assert_eq!(
        c.exchange_rates,
        vec![Rate { currency: "CNY".into(), per_usd: 7.0, source: "provider \"sim\"".into() }]
    );
}

#[test]
fn an_open_instance_type_picks_the_cheapest_lists_alternatives_and_is_deterministic() {
    let hcl = format!("{SIM_US}{}", l4(2, 2, 2));
    let c = price(&hcl, &[]);
    let p = &c.pools[0];
    assert_eq!(p.instance_type, "g6.xlarge");
    let alts: Vec<(&str, f64, bool)> =
        p.alternatives.iter().map(|a| (a.instance_type.as_str(), a.usd_per_hour, a.chosen)).collect();
    assert_eq!(
        alts,
        vec![
            ("g6.xlarge", 0.8048, true),
            ("g6.2xlarge", 0.9776, false),
            ("g6.4xlarge", 1.3232, false),
            ("g6.8xlarge", 2.0144, false)
        ]
    );
    close(p.hourly_after, G6 + G6_SPOT); // 1 on-demand + 1 spot = 1.12672
    for _ in 0..3 {
        assert_eq!(price(&hcl, &[]), c);
    }
    // Among equally priced types (three GN7 sizes at 6.5 CNY) the choice is stable too.
    let t = price(&format!("{SIM_GZ}{}", t4()), &[]);
    assert_eq!(t.pools[0].alternatives.iter().filter(|a| a.chosen).count(), 1);
    assert_eq!(t.pools[0].alternatives.len(), 3);
    assert_eq!(price(&format!("{SIM_GZ}{}", t4()), &[]).pools[0].instance_type, t.pools[0].instance_type);
}

#[test]
fn autoscaled_pool_has_a_min_expected_max_range() {
    let hcl = format!("{SIM_US}{}autoscaler \"serve\" {{\n  pool = gpu_pool.serve\n}}\n", l4(1, 2, 6));
    let c = price(&hcl, &[]);
    let r = c.pools[0].range.expect("autoscaled pool has a range");
    close(r.hourly_min, G6); // 1 node: 50 % of 1 = 0 spot → 1 on-demand = 0.8048
    close(r.hourly_expected, G6 + G6_SPOT); // 2 nodes: 1 + 1 = 1.12672
    close(r.hourly_max, 3.0 * G6 + 3.0 * G6_SPOT); // 6 nodes: 3 + 3 = 3.38016
    close(c.range.hourly_min, 0.8048);
    close(c.range.hourly_expected, 1.12672);
    close(c.range.hourly_max, 3.38016);
}

#[test]
fn only_what_moves_the_count_makes_a_range() {
    // `min < max` with nothing to move the count: plan and apply hold it at `desired`.
    let c = price(&format!("{SIM_US}{}", l4(1, 2, 6)), &[]);
    assert_eq!(c.pools[0].range, None);
    close(c.range.hourly_min, G6 + G6_SPOT);
    close(c.range.hourly_max, G6 + G6_SPOT);
    // `ignore_changes` on the count hands it to someone else: the range is back.
    let ignored =
        l4(1, 2, 6).replace("  gpu = ", "  lifecycle {\n    ignore_changes = [\"nodes.desired\"]\n  }\n  gpu = ");
    let c = price(&format!("{SIM_US}{ignored}"), &[]);
    let r = c.pools[0].range.expect("a range");
    close(r.hourly_min, G6);
    close(r.hourly_max, 3.0 * G6 + 3.0 * G6_SPOT);
}

#[test]
fn quota_totals_add_up_its_pools() {
    let hcl = format!(
        "{SIM_US}{}{}{}quota \"team\" {{\n  pools = [gpu_pool.train, gpu_pool.serve]\n}}\n",
        train(2, 2, 2, 1, 100),
        l4(1, 2, 6),
        "autoscaler \"serve\" {\n  pool = gpu_pool.serve\n}\n"
    );
    let c = price(&hcl, &[]);
    let q = &c.quotas[0];
    assert_eq!(q.address.to_string(), "quota.team");
    assert_eq!(q.gpus_after, 16 + 2);
    assert_eq!(q.gpus_max, 2 * 8 + 6);
    let train = P4DE + P4DE_SPOT; // 1 on-demand + 1 spot = 38.42587
    let serve = G6 + G6_SPOT; // 1.12672
    close(q.hourly_after, train + serve); // 39.55259
    close(q.monthly_after, (train + serve) * 730.0); // 28873.39
    close(q.hourly_max, train + 3.0 * G6 + 3.0 * G6_SPOT); // train fixed, serve at 6 nodes: 41.80603
    close(c.hourly_after, train + serve);
}

/// Every quota's pools gathered in one pass over the jobs are each quota's own: its
/// `pools`, plus the pools of the jobs charged to it (validation keeps those inside), sorted
/// and without repeats.
#[test]
fn all_quota_pools_in_one_pass_match_each_quotas_pools() {
    let job = |name: &str, pool: &str, quota: &str| {
        format!("job \"{name}\" {{\n  template = job_template.t\n  pool     = gpu_pool.{pool}\n{quota}}}\n")
    };
    let hcl = format!(
        "{SIM_US}{}{}{}{}job_template \"t\" {{\n  image = \"ghcr.io/example/x:1\"\n  gpus  = 1\n}}\n{}{}{}{}",
        train(2, 2, 2, 1, 100),
        l4(1, 2, 6),
        "quota \"team\" {\n  pools = [gpu_pool.train, gpu_pool.serve]\n}\n",
        "quota \"other\" {\n  pools = [gpu_pool.serve]\n}\n",
        job("a", "serve", "  quota    = quota.team\n"),
        job("b", "serve", "  quota    = quota.team\n"),
        job("c", "train", "  quota    = quota.team\n"),
        job("d", "serve", ""),
    );
    let spec = spec(&hcl);
    let all = cost::all_quota_pools(&spec);
    let names = |pools: &[gpuplan::addr::Address]| pools.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(names(&all[&"quota.team".parse().unwrap()]), ["gpu_pool.serve", "gpu_pool.train"]);
    assert_eq!(names(&all[&"quota.other".parse().unwrap()]), ["gpu_pool.serve"]);
    for (q, pools) in &all {
        assert_eq!(pools, &cost::quota_pools(&spec, q), "{q}");
    }
    assert_eq!(all.len(), 2);
}

// ---------------------------------------------------------------------------------------
// Through the CLI: updates and deletes need an applied state.

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("GPUPLAN_CNY_PER_USD")
        .args(args)
        .output()
        .expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let r = run(dir, args);
    assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{}", r.stdout))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn scaling_up_and_deleting_an_applied_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // 2 nodes: 1 on-demand base, the other on spot = 27.44705 + 10.97882 = 38.42587 USD/h.
    std::fs::write(dir.join("main.hcl"), format!("{SIM_US}{}", train(2, 2, 4, 1, 100))).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Scale up to 4: 1 on-demand + 3 spot = 27.44705 + 32.93646 = 60.38351 USD/h.
    std::fs::write(dir.join("main.hcl"), format!("{SIM_US}{}", train(2, 4, 4, 1, 100))).unwrap();
    let plan = json(dir, &["plan", "--json"]);
    assert_eq!(plan["changes"][0]["address"], "gpu_pool.train");
    assert_eq!(plan["changes"][0]["action"], "update");
    let c = json(dir, &["cost", "--json"]);
    close(num(&c["hourly_before"]), P4DE + P4DE_SPOT);
    close(num(&c["hourly_after"]), P4DE + 3.0 * P4DE_SPOT);
    close(num(&c["hourly_delta"]), 2.0 * P4DE_SPOT); // 21.95764
    close(num(&c["monthly_before"]), (P4DE + P4DE_SPOT) * 730.0); // 28050.885
    close(num(&c["monthly_after"]), (P4DE + 3.0 * P4DE_SPOT) * 730.0); // 44079.96
    close(num(&c["monthly_delta"]), 2.0 * P4DE_SPOT * 730.0); // 16029.08
    let p = &c["pools"][0];
    assert_eq!(
        [&p["on_demand_before"], &p["spot_before"], &p["on_demand_after"], &p["spot_after"]],
        [&Value::from(1), &Value::from(1), &Value::from(1), &Value::from(3)]
    );
    close(num(&p["spot_hourly_after"]), 3.0 * P4DE_SPOT);
    // min 2 < max 4, but nothing moves the count (no autoscaler, no ignore_changes): the
    // pool costs what `desired` costs, and no range is claimed.
    assert!(p.get("range").is_none(), "{p}");
    close(num(&c["range"]["hourly_min"]), P4DE + 3.0 * P4DE_SPOT);
    close(num(&c["range"]["hourly_max"]), P4DE + 3.0 * P4DE_SPOT);
    assert_eq!(c["currency"], "USD");
    assert_eq!(c["exchange_rates"], serde_json::json!([]));

    // Delete: the pool's cost goes to 0 and the fleet falls by what it cost.
    std::fs::write(dir.join("main.hcl"), SIM_US).unwrap();
    let c = json(dir, &["cost", "--json"]);
    let p = &c["pools"][0];
    assert_eq!(p["address"], "gpu_pool.train");
    close(num(&p["hourly_before"]), P4DE + P4DE_SPOT);
    close(num(&p["hourly_after"]), 0.0);
    assert_eq!(p["gpus_after"], 0);
    close(num(&c["hourly_after"]), 0.0);
    close(num(&c["hourly_delta"]), -(P4DE + P4DE_SPOT));
    close(num(&c["monthly_delta"]), -(P4DE + P4DE_SPOT) * 730.0);
}

fn copy_quickstart(to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart");
    std::fs::create_dir_all(to.join("policies")).unwrap();
    for sub in ["", "policies"] {
        for e in std::fs::read_dir(from.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), to.join(sub).join(e.file_name())).unwrap();
            }
        }
    }
}

#[test]
fn quickstart_cost_json_matches_the_hand_computed_total() {
    let tmp = tempfile::tempdir().unwrap();
    copy_quickstart(&tmp.path().join("q"));
    let c = json(tmp.path(), &["cost", "-C", "q", "--json"]);
    // train: 3 nodes, 1 base + 70 % of 2 = 1.4 → 1 spot: 2 × 27.44705 + 10.97882 = 65.87292
    // inference: 2 × g6.xlarge, 50 % spot: 0.8048 + 0.32192 = 1.12672
    let expected = 2.0 * P4DE + P4DE_SPOT + G6 + G6_SPOT; // 66.99964
    close(num(&c["hourly_after"]), expected);
    close(num(&c["hourly_before"]), 0.0);
    close(num(&c["monthly_after"]), expected * 730.0);
    let quota = &c["quotas"][0];
    assert_eq!(quota["address"], "quota.ml_team");
    assert_eq!(quota["gpus_after"], 24 + 2);
}

#[test]
fn offers_json_lists_the_cheapest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = json(tmp.path(), &["offers", "--gpu", "A100-80GB", "--count", "16", "--provider", "aws", "--json"]);
    let rows = rows.as_array().expect("a list of offers");
    assert!(!rows.is_empty());
    let totals: Vec<f64> = rows.iter().map(|r| num(&r["usd_per_hour_total"])).collect();
    let cheapest = totals.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(totals[0], cheapest);
    assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{totals:?}");
    assert!(rows.iter().all(|r| r["provider"] == "aws" && r["gpu"] == "A100-80GB"));
    // 16 GPUs = 2 × p4de.24xlarge = 54.8941 USD/h.
    assert_eq!(rows[0]["instance_type"], "p4de.24xlarge");
    assert_eq!(rows[0]["nodes"], 2);
    close(totals[0], 2.0 * P4DE);
}

#[test]
fn offers_for_an_unknown_gpu_exit_1_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(tmp.path(), &["offers", "--gpu", "A100-80", "--json"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("unknown GPU model `A100-80`"), "{}", r.stderr);
    assert!(r.stderr.contains("did you mean `A100-80GB`?"), "{}", r.stderr);
}
