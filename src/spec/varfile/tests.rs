//! Var files and the order of variable values, through a whole load where the spec's
//! declarations matter.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::spec::{LoadOptions, Loaded, load_dir};

/// A spec folder declaring `nodes` (number, default 1), `gpu` (string, default "L4") and
/// `zones` (list, no default unless `zones_default`), plus `files`.
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = "provider \"sim\" {}\n\
                variable \"nodes\" {\n  type    = number\n  default = 1\n}\n\
                variable \"gpu\" {\n  type    = string\n  default = \"L4\"\n}\n\
                variable \"zones\" {\n  type    = list\n  default = [\"us-east-1a\"]\n}\n";
    std::fs::write(dir.path().join("main.hcl"), spec).expect("write");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    dir
}

fn load(dir: &Path, args: Vec<VarArg>, env: &[(&str, &str)]) -> Loaded {
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    load_dir(dir, &LoadOptions { vars: args, env, ..LoadOptions::default() }).expect("load")
}

fn value(loaded: &Loaded, name: &str) -> (serde_json::Value, String) {
    let v = &loaded.spec.variables[name];
    (v.value.value.to_json(), v.from.to_string())
}

/// Each diagnostic as `file:line:col message` (severity first).
fn located(loaded: &Loaded) -> Vec<String> {
    let loc = |d: &Diagnostic| d.primary().map(|s| loaded.sources.location(s)).unwrap_or_default();
    loaded.diags.items.iter().map(|d| format!("{:?} {} {}", d.severity, loc(d), d.message)).collect()
}

#[test]
fn values_follow_terraform_s_order_later_wins() {
    let dir = folder(&[
        ("b.auto.vars.hcl", "nodes = 3\ngpu = \"A10G\"\n"),
        ("a.auto.vars.hcl", "nodes = 2\nzones = [\"us-east-1b\", \"us-east-1c\"]\n"),
        ("prod.vars.yaml", "nodes: 5\ngpu: H100\n"),
    ]);
    let env = [("GPUPLAN_VAR_nodes", "9"), ("GPUPLAN_VAR_gpu", "T4")];
    // Environment < auto files (lexical: b after a) < the command line.
    let auto = load(dir.path(), vec![], &env);
    assert!(!auto.diags.has_errors(), "{:?}", located(&auto));
    assert_eq!(value(&auto, "nodes").0, 3);
    let (gpu, from) = value(&auto, "gpu");
    assert_eq!(gpu, "A10G");
    assert!(from.ends_with("/b.auto.vars.hcl`"), "{from}");
    assert_eq!(value(&auto, "zones").0, serde_json::json!(["us-east-1b", "us-east-1c"]));
    assert_eq!(auto.var_files.len(), 2, "the auto files are var files, not spec files");
    // `--var` and `--var-file` in command-line order.
    let file = VarArg::File(dir.path().join("prod.vars.yaml"));
    let flag = VarArg::Flag("nodes".into(), "4".into());
    let loaded = load(dir.path(), vec![flag.clone(), file.clone()], &env);
    assert_eq!(value(&loaded, "nodes").0, 5, "the file came last");
    let loaded = load(dir.path(), vec![file, flag], &env);
    assert_eq!(value(&loaded, "nodes"), (serde_json::json!(4), "--var".to_string()));
    assert_eq!(value(&loaded, "gpu").0, "H100");
    // Without any: the environment, then the default.
    let bare = folder(&[]);
    let loaded = load(bare.path(), vec![], &[("GPUPLAN_VAR_nodes", "7")]);
    assert_eq!(value(&loaded, "nodes"), (serde_json::json!(7), "the environment (GPUPLAN_VAR_nodes)".to_string()));
    assert_eq!(value(&loaded, "gpu"), (serde_json::json!("L4"), "default".to_string()));
    // A value that came from an input is not looked up in the environment.
    let flagged = load(bare.path(), vec![VarArg::Flag("nodes".into(), "2".into())], &[]);
    assert!(!flagged.env_read.contains(&"GPUPLAN_VAR_nodes".to_string()), "{:?}", flagged.env_read);
    assert!(flagged.env_read.contains(&"GPUPLAN_VAR_gpu".to_string()), "{:?}", flagged.env_read);
}

#[test]
fn var_files_are_not_read_as_spec_files() {
    let dir = folder(&[("x.auto.vars.hcl", "nodes = 2\n"), ("prod.vars.hcl", "gpu = 1\n"), ("ci.vars.yml", "a: 1\n")]);
    let files = crate::spec::spec_files(dir.path()).expect("list");
    assert_eq!(files, [dir.path().join("main.hcl")]);
    assert!(is_var_file(Path::new("prod.vars.yaml")) && !is_var_file(Path::new(".vars.hcl")));
    assert!(is_auto_var_file(Path::new("fleet/prod.auto.vars.hcl")));
    assert!(!is_auto_var_file(Path::new(".auto.vars.hcl")) && !is_auto_var_file(Path::new("prod.vars.hcl")));
    // Not read at all when the caller says so (a saved plan's values are all of them).
    let opts = LoadOptions { auto_var_files: false, ..LoadOptions::default() };
    let loaded = load_dir(dir.path(), &opts).expect("load");
    assert_eq!(value(&loaded, "nodes").0, 1);
}

#[test]
fn problems_in_var_files_point_at_their_line_and_column() {
    let dir = folder(&[
        ("bad.auto.vars.hcl", "nodes = \"many\"\ngpu = var.other\n"),
        ("typo.vars.hcl", "\nnodez = 3\nzones {\n}\n"),
    ]);
    let loaded = load(dir.path(), vec![VarArg::File(dir.path().join("typo.vars.hcl"))], &[]);
    // Paths are shown as given (absolute here: the test runs elsewhere).
    let prefix = format!("{}/", dir.path().display());
    let got: Vec<String> = located(&loaded).iter().map(|d| d.replace(&prefix, "")).collect();
    let has = |needle: &str| got.iter().any(|d| d.contains(needle));
    assert!(has("Error bad.auto.vars.hcl:1:9 the value \"many\" for variable `nodes`"), "{got:#?}");
    assert!(has("Error bad.auto.vars.hcl:2:7"), "a reference in a var file: {got:#?}");
    // Undeclared in a file: a warning, with a did-you-mean, as Terraform does.
    assert!(has("Warning typo.vars.hcl:2:1 `typo.vars.hcl` sets `nodez`"), "{got:#?}");
    let nodez = loaded.diags.items.iter().find(|d| d.message.contains("nodez")).expect("the warning");
    assert_eq!(nodez.help.as_deref(), Some("did you mean `nodes`?"));
    assert!(has("Error typo.vars.hcl:3:1 a var file sets variables; `zones` is a block"), "{got:#?}");
    // Undeclared with `--var`: an error.
    let flagged = load(dir.path(), vec![VarArg::Flag("nodez".into(), "3".into())], &[]);
    assert!(
        flagged.diags.items.iter().any(|d| d.severity == crate::diag::Severity::Error && d.message.contains("nodez")),
        "{:?}",
        located(&flagged)
    );
    // A file that is not there.
    let missing = load(dir.path(), vec![VarArg::File(dir.path().join("nope.vars.hcl"))], &[]);
    assert!(located(&missing).iter().any(|d| d.contains("cannot read the var file") && d.contains("nope.vars.hcl")));
}

#[test]
fn a_yaml_var_file_is_a_mapping_of_names_to_values() {
    let dir = folder(&[("list.vars.yml", "- nodes\n")]);
    let mut sources = Sources::default();
    let mut diags = Diagnostics::default();
    let yaml = dir.path().join("v.vars.yaml");
    std::fs::write(&yaml, "zones: [a, b]\nnodes: 2\n").expect("write");
    let inputs = resolve(&[], &[VarArg::File(yaml)], &mut sources, &mut diags);
    assert!(diags.items.is_empty(), "{:?}", diags.items);
    let values: Vec<(&str, Value)> = inputs
        .iter()
        .map(|i| match &i.value {
            VarValue::Typed(v) => (i.name.as_str(), v.clone()),
            other => panic!("a file's value is typed: {other:?}"),
        })
        .collect();
    let list = Value::List(vec![Value::String("a".into()), Value::String("b".into())]);
    assert_eq!(values, [("zones", list), ("nodes", Value::Number(2.0))]);
    resolve(&[], &[VarArg::File(dir.path().join("list.vars.yml"))], &mut sources, &mut diags);
    assert!(diags.items.iter().any(|d| d.message.contains("must be a mapping")), "{:?}", diags.items);
}
