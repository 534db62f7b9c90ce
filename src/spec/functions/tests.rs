//! The function table: sorted, documented, every example runs through the evaluator, and
//! what `call` reports for arity, types and unknown names.

use std::collections::BTreeMap;

use super::{FUNCTIONS, TABLE};
use crate::diag::{Diagnostic, Diagnostics};
use crate::spec::eval::{EvalError, Scope, Value, eval};
use crate::spec::hcl::parse_expression;

/// Evaluate `text` with `env` as the environment.
fn run(text: &str, env: &BTreeMap<String, String>) -> Result<Value, EvalError> {
    let mut d = Diagnostics::default();
    let expr = parse_expression(0, text, 0, &mut d).unwrap_or_else(|| panic!("`{text}` parses: {:?}", d.items));
    assert!(d.items.is_empty(), "`{text}`: {:?}", d.items);
    let mut scope = Scope { env: Some(env), ..Default::default() };
    eval(&expr, &mut scope)
}

fn error(text: &str) -> Diagnostic {
    match run(text, &BTreeMap::new()) {
        Err(EvalError::Diag(d)) => *d,
        other => panic!("`{text}` should fail with a diagnostic, got {other:?}"),
    }
}

#[test]
fn the_table_is_sorted_unique_and_is_the_list_of_names() {
    // `call` binary-searches the table.
    for pair in TABLE.windows(2) {
        assert!(pair[0].name < pair[1].name, "`{}` must sort before `{}`", pair[0].name, pair[1].name);
    }
    let names: Vec<&str> = TABLE.iter().map(|f| f.name).collect();
    assert_eq!(FUNCTIONS, names.as_slice());
    // The list users saw before the table existed: no function lost or renamed.
    let before = "abs ceil coalesce concat contains distinct element endswith env flatten floor format join \
                  jsonencode keys length lookup lower max merge min parseint pow range replace reverse secret signum \
                  sort split startswith substr sum title tobool tolist tonumber tostring trimspace upper values zipmap";
    assert_eq!(FUNCTIONS.join(" "), before);
}

#[test]
fn every_function_is_documented_and_its_example_runs() {
    let env = BTreeMap::new();
    for f in TABLE {
        assert!(f.signature.starts_with(&format!("{}(", f.name)), "`{}`: signature {:?}", f.name, f.signature);
        assert!(f.doc.len() > 10 && f.doc.ends_with('.'), "`{}`: doc {:?}", f.name, f.doc);
        let (call, expected) = f.example;
        assert!(call.starts_with(&format!("{}(", f.name)), "`{}`: the example calls something else: {call}", f.name);
        let got = run(call, &env).unwrap_or_else(|e| panic!("`{call}` fails: {e:?}"));
        assert_eq!(got.to_json().to_string(), expected, "`{call}`");
    }
}

#[test]
fn arity_is_checked_before_the_function_runs() {
    let d = error("abs()");
    assert_eq!(d.message, "`abs` takes 1 argument(s), got 0");
    assert_eq!(error("lookup({})").message, "`lookup` takes 2 to 3 argument(s), got 1");
    assert_eq!(error("format()").message, "`format` takes at least 1 argument(s), got 0");
    assert_eq!(error("range(1, 2, 3, 4)").message, "`range` takes 1 to 3 argument(s), got 4");
    // Functions of any arity check their arguments themselves.
    assert_eq!(error("min()").message, "`min` needs at least one number");
    assert_eq!(error("coalesce(null, \"\")").message, "`coalesce`: every argument is null or empty");
}

#[test]
fn argument_errors_name_the_function_and_point_at_the_argument() {
    let d = error("join(\"-\", [[1]])");
    assert_eq!(d.message, "`join` expects a string, found list");
    assert_eq!(error("sort([{}])").message, "`sort` expects a string, found object");
    assert_eq!(error("zipmap([[1]], [2])").message, "`zipmap` expects a string, found list");
    assert_eq!(error("upper([])").message, "`upper` expects a string, found list");
    assert_eq!(error("length(1)").message, "`length` needs a list, object or string, found number");
    assert_eq!(error("parseint(\"z\", 40)").message, "base must be a whole number from 2 to 36");
    assert_eq!(error("pow(10, 400)").message, "result is out of range");
}

#[test]
fn env_reads_the_scope_and_explains_an_unset_variable() {
    let env = BTreeMap::from([("TEAM".to_string(), "ml".to_string())]);
    assert_eq!(run("env(\"TEAM\")", &env).unwrap(), Value::String("ml".into()));
    let d = error("env(\"GPUPLAN_SURELY_UNSET\")");
    assert_eq!(d.code, "gpuplan::eval::env");
    assert!(d.help.as_deref().unwrap_or("").contains("export GPUPLAN_SURELY_UNSET="), "{:?}", d.help);
}

#[test]
fn an_unknown_function_suggests_a_close_name_or_lists_them_all() {
    let d = error("lenght([])");
    assert_eq!((d.code, d.message.as_str()), ("gpuplan::eval::unknown_function", "unknown function `lenght`"));
    assert_eq!(d.help.as_deref(), Some("did you mean `length`?"));
    let d = error("qqqqqqqq(1)");
    assert_eq!(d.help, Some(format!("available functions: {}", FUNCTIONS.join(", "))));
}
