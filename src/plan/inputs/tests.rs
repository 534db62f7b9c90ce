//! A saved plan's inputs against what `apply PLANFILE` is given.

use std::collections::BTreeMap;

use super::*;
use crate::spec::varfile::VarValue;

fn inputs() -> PlanInputs {
    let var =
        |value: serde_json::Value, ty, from: &str| SavedVar { value, ty, from: from.into(), sensitive: Some(false) };
    PlanInputs {
        workspace: "prod".into(),
        variables: BTreeMap::from([
            ("nodes".to_string(), var(serde_json::json!(4), VarType::Number, "--var")),
            ("zones".to_string(), var(serde_json::json!(["a", "b"]), VarType::List, "`prod.vars.hcl`")),
        ]),
        overrides: vec!["min_spot_share".into()],
        sources: Fingerprint { gpuplan: "0".into(), files: BTreeMap::new(), env: BTreeMap::new() },
        made_at: None,
    }
}

fn flag(name: &str, text: &str) -> VarInput {
    VarInput { name: name.into(), value: VarValue::Text(text.into()), from: VarFrom::Flag }
}

fn check(vars: &[VarInput], targets: &[&str], overrides: &[&str]) -> Result<(), NotAsSaved> {
    check_in("prod", vars, targets, overrides)
}

fn check_in(workspace: &str, vars: &[VarInput], targets: &[&str], overrides: &[&str]) -> Result<(), NotAsSaved> {
    let targets: Vec<Address> = targets.iter().map(|t| t.parse().expect("address")).collect();
    let overrides: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
    let given = Given { workspace, vars, targets: &targets, replace: &[], overrides: &overrides };
    inputs().check_given(&["gpu_pool.a".parse().expect("address")], &[], &given, "p.plan")
}

#[test]
fn nothing_given_again_is_fine_and_the_same_values_are_too() {
    check(&[], &[], &[]).expect("nothing repeated");
    // The same value, spelled as the command line spells it; a list as JSON.
    check(&[flag("nodes", "4"), flag("zones", "[\"a\", \"b\"]")], &["gpu_pool.a"], &["min_spot_share"])
        .expect("the same values");
    // An earlier value replaced by a later one, as when planning.
    check(&[flag("nodes", "5"), flag("nodes", "4")], &[], &[]).expect("the later value counts");
}

#[test]
fn a_different_value_is_refused_naming_the_variable_and_both_values() {
    let e = check(&[flag("nodes", "5")], &[], &[]).unwrap_err();
    assert_eq!(e.message, "`--var` sets variable `nodes` to 5, but the plan was saved with 4 (from --var)");
    assert!(e.hint.contains("`gpuplan apply p.plan`"), "{}", e.hint);
    let file = VarInput {
        name: "zones".into(),
        value: VarValue::Typed(Value::List(vec![Value::String("a".into())])),
        from: VarFrom::File { file: "ci.vars.hcl".into(), key: Default::default(), value: Default::default() },
    };
    let e = check(&[file], &[], &[]).unwrap_err();
    assert!(e.message.starts_with("`ci.vars.hcl` sets variable `zones` to [\"a\"]"), "{}", e.message);
    let e = check(&[flag("nodes", "many")], &[], &[]).unwrap_err();
    assert!(e.message.contains("to another value"), "{}", e.message);
    let e = check(&[flag("team", "ml")], &[], &[]).unwrap_err();
    assert!(e.message.contains("declares no variable `team`"), "{}", e.message);
    // From a var file, as when planning, a name the spec does not declare is passed over.
    let shared = VarInput {
        name: "team".into(),
        value: VarValue::Typed(Value::String("ml".into())),
        from: VarFrom::File { file: "shared.vars.hcl".into(), key: Default::default(), value: Default::default() },
    };
    check(&[shared], &[], &[]).expect("an undeclared name in a var file");
}

#[test]
fn another_workspace_target_or_override_is_refused() {
    let e = check_in("default", &[], &[], &[]).unwrap_err();
    assert!(e.message.contains("saved in workspace `prod`") && e.message.contains("in workspace `default`"));
    assert_eq!(e.hint, "apply it in its workspace: `gpuplan --workspace prod apply p.plan`");
    let e = check(&[], &["gpu_pool.b"], &[]).unwrap_err();
    assert!(e.message.starts_with("the plan was saved with --target gpu_pool.a"), "{}", e.message);
    let e = check(&[], &[], &["other"]).unwrap_err();
    assert!(e.message.starts_with("the plan was saved with --override-policy min_spot_share"), "{}", e.message);
}

#[test]
fn saved_values_load_as_given_values_from_the_plan() {
    let args = inputs().var_args();
    assert_eq!(args.len(), 2);
    let VarArg::Value { name, value, from } = &args[0] else { panic!("{args:?}") };
    assert_eq!((name.as_str(), value, from.as_str()), ("nodes", &Value::Number(4.0), "the saved plan (--var)"));
}

#[test]
fn a_replacement_given_again_must_be_the_plans() {
    let saved: Vec<Address> = vec!["gpu_pool.a".parse().expect("address")];
    fn given(replace: &[Address]) -> Given<'_> {
        Given { workspace: "prod", vars: &[], targets: &[], replace, overrides: &[] }
    }
    inputs().check_given(&[], &saved, &given(&saved), "p.plan").expect("the plan's own replacement");
    inputs().check_given(&[], &saved, &given(&[]), "p.plan").expect("none given: the plan's own");
    let other: Vec<Address> = vec!["gpu_pool.b".parse().expect("address")];
    let e = inputs().check_given(&[], &saved, &given(&other), "p.plan").expect_err("another pool");
    assert_eq!(e.message, "the plan was saved with --replace gpu_pool.a, and a saved plan is applied as it was made");
    let e = inputs().check_given(&[], &[], &given(&other), "p.plan").expect_err("none saved");
    assert!(e.message.contains("saved without --replace"), "{}", e.message);
}
