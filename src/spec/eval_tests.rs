//! References read in place (`traverse`): what they evaluate to, that an argument naming
//! data the scope borrows is not copied, and that errors keep the reference's order.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::{Scope, Value, eval, eval_arg};
use crate::diag::Diagnostics;
use crate::spec::hcl::parse_expression;
use crate::spec::raw::Expr;

fn parse(text: &str) -> Expr {
    let mut d = Diagnostics::default();
    let expr = parse_expression(0, text, 0, &mut d).unwrap_or_else(|| panic!("`{text}` parses: {:?}", d.items));
    assert!(d.items.is_empty(), "`{text}`: {:?}", d.items);
    expr
}

fn obj(items: &[(&str, Value)]) -> Value {
    Value::Object(items.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

/// `plan` as policies see it: two pools with a `gpu` and a list of zones.
fn plan() -> BTreeMap<String, Value> {
    let pool = |gpu: &str| obj(&[("gpu", s(gpu)), ("zones", Value::List(vec![s("a"), s("b")]))]);
    let pools = obj(&[("gpu_pool.x", pool("A100-80GB")), ("gpu_pool.y", pool("L4"))]);
    BTreeMap::from([("plan".to_string(), obj(&[("pools", pools)]))])
}

fn run(text: &str, extra: &BTreeMap<String, Value>) -> Result<Value, String> {
    let mut scope = Scope { extra: Some(extra), ..Scope::default() };
    eval(&parse(text), &mut scope).map_err(|e| format!("{e:?}"))
}

#[test]
fn an_argument_that_names_borrowed_data_is_not_copied() {
    let extra = plan();
    let mut scope = Scope { extra: Some(&extra), ..Scope::default() };
    let pools = match &extra["plan"] {
        Value::Object(o) => &o["pools"],
        _ => unreachable!("built above"),
    };
    match eval_arg(&parse("plan.pools"), &mut scope) {
        Ok(Cow::Borrowed(v)) => assert!(std::ptr::eq(v, pools), "borrowed, but not the plan's own pools"),
        other => panic!("`plan.pools` as an argument should be read in place, got {other:?}"),
    }
    // Anything computed is owned.
    assert!(matches!(eval_arg(&parse("[1, 2]"), &mut scope), Ok(Cow::Owned(_))));
}

#[test]
fn references_through_keys_attributes_and_splats_read_what_they_name() {
    let extra = plan();
    let text =
        r#"[for p in ["gpu_pool.x", "gpu_pool.z", "gpu_pool.y"] : plan.pools[p].gpu if contains(keys(plan.pools), p)]"#;
    assert_eq!(run(text, &extra), Ok(Value::List(vec![s("A100-80GB"), s("L4")])));
    assert_eq!(run(r#"plan.pools["gpu_pool.y"].zones[1]"#, &extra), Ok(s("b")));
    assert_eq!(run(r#"plan.pools["gpu_pool.x"].zones[*]"#, &extra), Ok(Value::List(vec![s("a"), s("b")])));
    assert_eq!(run("length(plan.pools)", &extra), Ok(Value::Number(2.0)));
    assert_eq!(run(r#"lookup(plan.pools, "gpu_pool.q", "none")"#, &extra), Ok(s("none")));
    assert_eq!(run(r#"element(plan.pools["gpu_pool.x"].zones, 3)"#, &extra), Ok(s("b")));
    // A `for` variable is read in place too, and its value is unchanged for the next read.
    let twice = r#"[for p in plan.pools : "${p.gpu}/${p.gpu}"]"#;
    assert_eq!(run(twice, &extra), Ok(Value::List(vec![s("A100-80GB/A100-80GB"), s("L4/L4")])));
}

#[test]
fn errors_come_in_the_order_of_the_reference() {
    let extra = plan();
    // The attribute fails before the index's key is evaluated (there are no locals here).
    let e = run("plan.nope[local.k]", &extra).unwrap_err();
    assert!(e.contains("no attribute `nope`"), "{e}");
    // The key is evaluated before the step after it is read.
    let e = run("plan.pools[local.k].gpu", &extra).unwrap_err();
    assert!(e.contains("locals are not available here"), "{e}");
    let e = run(r#"plan.pools["gpu_pool.q"].gpu"#, &extra).unwrap_err();
    assert!(e.contains(r#"no key \"gpu_pool.q\""#), "{e}");
    let e = run(r#"plan.pools["gpu_pool.x"].zones[2]"#, &extra).unwrap_err();
    assert!(e.contains("index 2 is out of range for a list of 2"), "{e}");
    let e = run(r#"plan.pools["gpu_pool.x"].gpu.name"#, &extra).unwrap_err();
    assert!(e.contains("cannot read `name` of a string"), "{e}");
}

/// `lookup` of borrowed data lends the member it finds (a policy's
/// `lookup(plan.pools, p, null) != null` copies no pool), and gives what the function
/// gives everywhere else: the default, a computed object's member, its errors.
#[test]
fn lookup_of_borrowed_data_lends_the_member_found() {
    let extra = plan();
    let mut scope = Scope { extra: Some(&extra), ..Scope::default() };
    let x = match &extra["plan"] {
        Value::Object(o) => match &o["pools"] {
            Value::Object(p) => &p["gpu_pool.x"],
            _ => unreachable!("built above"),
        },
        _ => unreachable!("built above"),
    };
    match eval_arg(&parse(r#"lookup(plan.pools, "gpu_pool.x", null)"#), &mut scope) {
        Ok(Cow::Borrowed(v)) => assert!(std::ptr::eq(v, x), "borrowed, but not the plan's own pool"),
        other => panic!("the pool found should be lent, got {other:?}"),
    }
    assert!(matches!(
        eval_arg(&parse(r#"lookup(plan.pools, "gpu_pool.q", null)"#), &mut scope),
        Ok(Cow::Owned(Value::Null))
    ));
    assert!(matches!(eval_arg(&parse(r#"lookup({a = 1}, "a")"#), &mut scope), Ok(Cow::Owned(Value::Number(_)))));
    assert_eq!(run(r#"lookup(plan.pools, "gpu_pool.x", null) != null"#, &extra), Ok(Value::Bool(true)));
    assert_eq!(run(r#"lookup(plan.pools, "gpu_pool.q", null) == null"#, &extra), Ok(Value::Bool(true)));
    assert_eq!(run(r#"lookup(plan.pools, "gpu_pool.y", null).gpu"#, &extra), Ok(s("L4")));
    let e = run(r#"lookup(plan.pools, "gpu_pool.q") == null"#, &extra).unwrap_err();
    assert!(e.contains("no key") && e.contains("no default given"), "{e}");
    let e = run(r#"lookup(plan.pools, "gpu_pool.x", local.d) != null"#, &extra).unwrap_err();
    assert!(e.contains("locals are not available here"), "every argument is evaluated: {e}");
}
