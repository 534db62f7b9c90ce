use super::*;
use crate::diag::Sources;
use crate::plan::diff::{self, PlanInput};
use crate::spec::eval::Value;
use crate::state::State;

/// The facts of a real plan (two pools, one with labels, a quota), as policies see them.
fn real_facts() -> Value {
    let text = r#"
provider "sim" {
  region = "us-east-1"
}
gpu_pool "train" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    desired = 2
    max     = 3
  }
  labels = { team = "ml" }
}
quota "ml" {
  pools        = [gpu_pool.train]
  max_gpus     = 8
  allowed_gpus = ["L4"]
}
reservation "odcr" {
  provider       = "sim"
  zone           = "us-east-1a"
  kind           = "on_demand"
  instance_type  = "g6.xlarge"
  instance_count = 1
}
"#;
    let mut sources = Sources::default();
    sources.add("main.hcl", text.to_string());
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let spec = &loaded.spec;
    let state = State::new("l-1".into());
    let input = PlanInput::offline(spec, &state);
    let mut plan = diff::plan(&input).expect("the state is empty");
    plan.reservations = crate::plan::reservations::plan(spec, &state, Default::default(), false, &|_| 0).lines;
    let prices = crate::cost::PriceBook::new(spec, &Default::default());
    let report = crate::cost::cost(&plan, spec, &prices).expect("every pool has a known provider");
    crate::policy::facts::plan_value(&plan, &report, spec, &Default::default())
}

/// Every attribute of `v` is in `fact` and every attribute `fact` lists is in `v`.
fn same_shape(fact: &Fact, v: &Value, path: &str) {
    match (fact, v) {
        (Fact::Leaf, Value::Object(_) | Value::List(_)) => panic!("{path} is a leaf in check.rs but {v:?}"),
        (Fact::Leaf, _) => {}
        (Fact::Object(fields), Value::Object(o)) => {
            // Lists a plan leaves out when empty (`skip_serializing_if`) are facts all the same.
            const OMITTED_WHEN_EMPTY: [&str; 1] = ["unpriced"];
            let mut listed: Vec<&str> = fields
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| o.contains_key(*n) || !OMITTED_WHEN_EMPTY.contains(n))
                .collect();
            let mut real: Vec<&str> = o.keys().map(String::as_str).collect();
            listed.sort();
            real.sort();
            assert_eq!(listed, real, "attributes of {path}");
            for (n, f) in fields.iter().filter(|(n, _)| o.contains_key(*n)) {
                same_shape(f, &o[*n], &format!("{path}.{n}"));
            }
        }
        (Fact::Map(e), Value::Object(o)) => {
            assert!(!o.is_empty(), "{path}: the sample plan should fill this map");
            for (k, x) in o {
                same_shape(e, x, &format!("{path}[{k:?}]"));
            }
        }
        (Fact::List(e), Value::List(l)) => {
            for x in l {
                same_shape(e, x, &format!("{path}[]"));
            }
        }
        _ => panic!("{path}: {fact:?} in check.rs, but the plan has {v:?}"),
    }
}

#[test]
fn fact_shapes_match_a_real_plans_facts() {
    same_shape(&PLAN, &real_facts(), "plan");
}

fn policy(text: &str) -> (Vec<Policy>, Diagnostics) {
    let mut sources = Sources::default();
    let id = sources.add("p.hcl", text.to_string());
    let mut diags = Diagnostics::default();
    let policies = crate::policy::load::parse(id, text, &sources, &mut diags);
    (policies, diags)
}

fn messages(text: &str) -> Vec<String> {
    policy(text).1.items.iter().map(|d| format!("{}: {}", d.message, d.help.clone().unwrap_or_default())).collect()
}

#[test]
fn the_shipped_policies_pass() {
    for (name, text) in [
        ("fleet_hourly_cap", include_str!("../../../policies/fleet_hourly_cap.hcl")),
        ("min_spot_share", include_str!("../../../policies/min_spot_share.hcl")),
        ("allowed_gpu_models", include_str!("../../../policies/allowed_gpu_models.hcl")),
        ("max_gpu_hour_price", include_str!("../../../policies/max_gpu_hour_price.hcl")),
        ("no_destroy_pool_with_jobs", include_str!("../../../policies/no_destroy_pool_with_jobs.hcl")),
    ] {
        let (p, d) = policy(text);
        assert!(d.items.is_empty(), "{name}: {:?}", d.items);
        assert_eq!(p.len(), 1, "{name}");
    }
}

#[test]
fn unknown_facts_are_reported_with_a_suggestion() {
    let m = messages("policy \"a\" {\n  assert = plan.cost.hourly_aftr <= 1\n}\n");
    assert_eq!(
        m,
        ["`plan.cost` has no attribute `hourly_aftr`: did you mean `hourly_after`? (see policies/README.md)"]
    );
    let m = messages("policy \"a\" {\n  assert = plan.nope > 1\n}\n");
    assert!(m[0].starts_with("`plan` has no attribute `nope`: it has: cost, pools"), "{m:?}");
}

#[test]
fn each_value_and_for_variables_follow_the_collection() {
    let text = "policy \"a\" {\n  for_each = { for k, p in plan.pools : k => p if p.nodes_aftr > 0 }\n  assert = each.value.spot_shar >= 30\n  message = \"${each.key} ${each.value.labels.team} ${plan.quotas[\"quota.x\"].max_gpu}\"\n}\n";
    let (p, d) = policy(text);
    assert!(p.is_empty(), "a policy with errors is not loaded");
    let m: Vec<&str> = d.items.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        m,
        [
            "`p` has no attribute `nodes_aftr`",
            "`each.value` has no attribute `spot_shar`",
            "`plan.quotas[…]` has no attribute `max_gpu`",
        ]
    );
}

#[test]
fn each_needs_for_each_and_names_and_functions_must_exist() {
    let m = messages("policy \"a\" {\n  assert = each.value.gpu == \"L4\"\n}\n");
    assert!(m[0].starts_with("`each` is only available in a policy that sets `for_each`"), "{m:?}");
    let m = messages("policy \"a\" {\n  assert = pln.cost.hourly_after < 1\n}\n");
    assert_eq!(m, ["unknown name `pln`: did you mean `plan`?"]);
    let m = messages("policy \"a\" {\n  assert = lenght(plan.changes) < 5\n}\n");
    assert_eq!(m, ["unknown function `lenght`: did you mean `length`?"]);
    let m = messages("policy \"a\" {\n  assert = plan.changes.action == \"create\"\n}\n");
    assert!(m[0].starts_with("cannot read `action` of a list"), "{m:?}");
}

#[test]
fn what_only_a_plan_can_tell_is_left_to_evaluation() {
    // A pool that may not exist, a computed key, a splat over the changes: all fine here.
    let text = "policy \"a\" {\n  assert = plan.pools[\"gpu_pool.x\"].gpu == \"L4\" && length(plan.changes[*].action) >= 0 && lookup(plan.pools, \"k\", {}) != null\n}\n";
    let (p, d) = policy(text);
    assert!(d.items.is_empty(), "{:?}", d.items);
    assert_eq!(p.len(), 1);
}
