//! `for_each` filters read in place ([`kept_in_place`]): the same results, messages and
//! errors as evaluating the `for` expression whole.

use std::collections::BTreeMap;

use super::*;
use crate::diag::{Diagnostics, Sources};

fn policies(text: &str) -> Vec<Policy> {
    let mut sources = Sources::default();
    let file = sources.add("p.hcl", text.to_string());
    let mut diags = Diagnostics::default();
    let out = load::parse(file, text, &sources, &mut diags);
    assert!(!diags.has_errors(), "{:?}", diags.items);
    out
}

/// `plan.pools` with three pools: two labelled critical, one with a label that is no bool.
fn facts() -> BTreeMap<String, Value> {
    let pool = |spot: f64, critical: Value| {
        Value::Object(BTreeMap::from([
            ("labels".to_string(), Value::Object(BTreeMap::from([("critical".to_string(), critical)]))),
            ("spot_share".to_string(), Value::Number(spot)),
        ]))
    };
    let pools = BTreeMap::from([
        ("gpu_pool.a".to_string(), pool(10.0, Value::String("true".into()))),
        ("gpu_pool.b".to_string(), pool(50.0, Value::String("false".into()))),
        ("gpu_pool.c".to_string(), pool(0.0, Value::Number(1.0))),
    ]);
    BTreeMap::from([("plan".to_string(), Value::Object(BTreeMap::from([("pools".to_string(), Value::Object(pools))])))])
}

/// Each policy is evaluated as written (filtered in place) and with a key expression that
/// is no plain variable (`"${k}"`, evaluated whole): one and the same results.
#[test]
fn a_filter_read_in_place_gives_what_the_whole_for_gives() {
    let extra = facts();
    let conds = [
        "",
        " if v.spot_share < 30",
        " if lookup(v.labels, \"critical\", \"false\") != \"true\"",
        // Not a bool for every pool: evaluated whole, with its error.
        " if v.labels.critical",
        // Fails for the pools whose label is no number.
        " if v.labels.critical > 0",
    ];
    for cond in conds {
        let text = |key: &str| {
            format!(
                "policy \"p\" {{\n  enforcement = \"soft\"\n  for_each = {{ for k, v in plan.pools : {key} => v{cond} }}\n  assert = each.value.spot_share >= 30\n  message = \"${{each.key}}: ${{each.value.spot_share}}\"\n}}\n"
            )
        };
        let fast = policies(&text("k"));
        let whole = policies(&text("\"${k}\""));
        let mut scope = Scope { extra: Some(&extra), ..Scope::default() };
        let lent = kept_in_place(fast[0].for_each.as_ref().unwrap(), &mut scope);
        assert_eq!(lent.is_some(), cond.is_empty() || cond.contains('<') || cond.contains("lookup"), "{cond}");
        assert!(kept_in_place(whole[0].for_each.as_ref().unwrap(), &mut scope).is_none(), "{cond}");
        let strip = |rs: Vec<PolicyResult>| rs.into_iter().map(|r| (r.key, r.passed, r.message)).collect::<Vec<_>>();
        let (fast, whole) = (strip(one(&fast[0], &extra, &[])), strip(one(&whole[0], &extra, &[])));
        assert_eq!(fast, whole, "{cond}");
        assert!(!fast.is_empty(), "{cond}");
    }
}

/// What is lent is the pool's facts where they lie in `plan.pools`, not a copy.
#[test]
fn kept_members_are_lent_not_copied() {
    let extra = facts();
    let p = policies(
        "policy \"p\" {\n  enforcement = \"soft\"\n  for_each = { for addr, pool in plan.pools : addr => pool if pool.spot_share < 30 }\n  assert = true\n}\n",
    );
    let mut scope = Scope { extra: Some(&extra), ..Scope::default() };
    let kept = kept_in_place(p[0].for_each.as_ref().unwrap(), &mut scope).expect("a plain filter");
    let Value::Object(plan) = &extra["plan"] else { unreachable!() };
    let Value::Object(pools) = &plan["pools"] else { unreachable!() };
    let keys: Vec<&str> = kept.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["gpu_pool.a", "gpu_pool.c"]);
    for (k, v) in kept {
        assert!(std::ptr::eq(v, &pools[k.as_str()]), "{k}");
    }
    assert!(scope.bound.is_empty(), "the loop's variables are unbound again");
}
