//! The steps of expanding one resource block: `count`, `for_each` and the value other
//! blocks see. (Whole specs are covered by `tests/corpus` and the plan cases.)

use std::collections::{BTreeMap, BTreeSet};

use super::{Expansion, expand, instances_value};
use crate::addr::{InstanceKey, Kind};
use crate::diag::Diagnostics;
use crate::spec::eval::{Scope, Value};
use crate::spec::fields::Cx;
use crate::spec::hcl;

/// Expand the first block of `text` as a `kind`; the diagnostics' codes on failure.
fn expanded(kind: Kind, text: &str) -> Result<Expansion, Vec<(&'static str, String)>> {
    let mut diags = Diagnostics::default();
    let body = hcl::parse(0, text, &mut diags).expect("parses");
    let (declared, yaml) = (BTreeMap::new(), BTreeSet::new());
    let mut cx = Cx { scope: Scope::default(), diags: &mut diags, declared: &declared, yaml_files: &yaml };
    let result = expand(&mut cx, kind, &body.blocks[0]);
    match result {
        Ok(e) => {
            assert!(diags.items.is_empty(), "{:?}", diags.items);
            Ok(e)
        }
        Err(_) => Err(diags.items.iter().map(|d| (d.code, d.message.clone())).collect()),
    }
}

fn keys(e: &Expansion) -> Vec<Option<InstanceKey>> {
    e.instances.iter().map(|(k, _)| k.clone()).collect()
}

#[test]
fn count_expands_to_numbered_instances() {
    let e = expanded(Kind::Quota, "quota \"q\" {\n  count = 1 + 2\n}\n").unwrap();
    assert_eq!(keys(&e), [0, 1, 2].map(|i| Some(InstanceKey::Int(i))));
    assert!(e.instances.iter().all(|(_, each)| each.is_none()));
    assert_eq!(e.count.map(|c| c.value), Some(3));
    assert!(e.for_each.is_none());
    let zero = expanded(Kind::Quota, "quota \"q\" {\n  count = 0\n}\n").unwrap();
    assert!(zero.instances.is_empty());
}

#[test]
fn count_must_be_a_whole_number_in_range() {
    for (value, code) in
        [("-1", "gpuplan::spec::type"), ("1.5", "gpuplan::spec::type"), ("\"2\"", "gpuplan::spec::type")]
    {
        let errs = expanded(Kind::Quota, &format!("quota \"q\" {{\n  count = {value}\n}}\n")).err().unwrap();
        assert_eq!(errs[0].0, code, "{value}: {errs:?}");
        assert!(errs[0].1.contains("a whole number ≥ 0"), "{errs:?}");
    }
    let errs = expanded(Kind::Quota, "quota \"q\" {\n  count = 100001\n}\n").err().unwrap();
    assert_eq!(errs, [("gpuplan::spec::range", "`count` must be between 0 and 100000, found 100001".to_string())]);
}

#[test]
fn for_each_over_a_list_takes_each_distinct_string_sorted() {
    let e = expanded(Kind::Job, "job \"j\" {\n  for_each = [\"b\", \"a\", \"b\"]\n}\n").unwrap();
    let s = |k: &str| Value::String(k.into());
    assert_eq!(keys(&e), ["a", "b"].map(|k| Some(InstanceKey::Str(k.into()))));
    assert_eq!(e.instances[0].1, Some((s("a"), s("a"))));
    assert_eq!(e.for_each.map(|f| f.value), Some(Value::List(vec![s("b"), s("a"), s("b")])));

    let map = expanded(Kind::Job, "job \"j\" {\n  for_each = { x = 1, y = 2 }\n}\n").unwrap();
    assert_eq!(keys(&map), ["x", "y"].map(|k| Some(InstanceKey::Str(k.into()))));
    assert_eq!(map.instances[1].1, Some((s("y"), Value::Number(2.0))));

    let errs = expanded(Kind::Job, "job \"j\" {\n  for_each = [\"a\", 1]\n}\n").err().unwrap();
    assert_eq!(errs[0].1, "`for_each` must be a map or a list of strings, found number 1");
    let errs = expanded(Kind::Job, "job \"j\" {\n  for_each = 3\n}\n").err().unwrap();
    assert_eq!(errs[0].1, "`for_each` must be a map or a list of strings, found number 3");
}

#[test]
fn no_meta_argument_is_one_instance_and_both_or_a_provider_are_refused() {
    let one = expanded(Kind::Quota, "quota \"q\" {\n  max_gpus = 8\n}\n").unwrap();
    assert_eq!(keys(&one), [None]);
    assert!(one.count.is_none() && one.for_each.is_none());

    let errs = expanded(Kind::Quota, "quota \"q\" {\n  count = 1\n  for_each = [\"a\"]\n}\n").err().unwrap();
    assert_eq!(errs[0].0, "gpuplan::spec::count_for_each");
    let errs = expanded(Kind::Provider, "provider \"sim\" {\n  count = 2\n}\n").err().unwrap();
    assert_eq!(errs[0], ("gpuplan::spec::count", "providers cannot use `count` or `for_each`".to_string()));
}

#[test]
fn the_value_others_see_is_a_list_an_object_or_the_one_instance() {
    let n = |x: f64| Value::Number(x);
    let counted = vec![(Some(InstanceKey::Int(0)), n(1.0)), (Some(InstanceKey::Int(1)), n(2.0))];
    assert_eq!(instances_value(true, false, counted), Value::List(vec![n(1.0), n(2.0)]));
    let keyed = vec![(Some(InstanceKey::Str("a".into())), n(1.0))];
    assert_eq!(instances_value(false, true, keyed), Value::Object([("a".to_string(), n(1.0))].into()));
    assert_eq!(instances_value(false, false, vec![(None, n(7.0))]), n(7.0));
    assert_eq!(instances_value(false, false, vec![]), Value::Null, "a failed instance leaves nothing");
}

/// A fleet large enough to be decoded on two threads, with every kind of outcome: pools
/// alone (most), pools a quota and a local refer to, `count` and `for_each` pools,
/// problems in some pools (a bad value, a reference to an undeclared pool close to a
/// declared one, a reference to a failed local), jobs and templates.
fn big_fleet() -> String {
    let mut text = String::from(
        "provider \"sim\" {\n  region = \"us-east-1\"\n}\n\
         variable \"gpus\" {\n  type = number\n  default = 1\n}\n\
         locals {\n  first = gpu_pool.p0000.gpu\n  broken = 1 + \"x\"\n}\n\
         quota \"team\" {\n  pools = [gpu_pool.p0001, gpu_pool.p0002]\n  max_gpus = 64\n}\n\
         job_template \"t\" {\n  image = \"img\"\n  gpus = 1\n}\n",
    );
    for i in 0..1_500 {
        let extra = match i % 100 {
            7 => "  gpus_per_node = \"many\"\n".to_string(),
            13 => format!("  image = gpu_pool.p{:04}x.gpu\n", i - 1),
            17 => "  image = local.broken\n".to_string(),
            23 => "  count = 2\n".to_string(),
            29 => "  for_each = { a = 1, b = 2 }\n  image = \"img-${each.key}\"\n".to_string(),
            31 => "  image = local.first\n".to_string(),
            _ => String::new(),
        };
        let per_node = if i % 100 == 7 { String::new() } else { "  gpus_per_node = var.gpus\n".to_string() };
        text.push_str(&format!(
            "gpu_pool \"p{i:04}\" {{\n  provider = \"sim\"\n  gpu = \"L4\"\n{per_node}{extra}  nodes {{\n    min = 0\n    desired = 1\n    max = 2\n  }}\n}}\n"
        ));
    }
    text.push_str("job \"j\" {\n  template = job_template.t\n  pool = gpu_pool.p0003\n}\n");
    text
}

#[test]
fn resources_decoded_on_two_threads_are_those_decoded_on_one() {
    let text = big_fleet();
    let mut sources = crate::diag::Sources::default();
    let id = sources.add("fleet.hcl", text.clone());
    let mut parse_diags = Diagnostics::default();
    let body = hcl::parse(id, &text, &mut parse_diags).expect("parses");
    assert!(parse_diags.items.is_empty(), "{:?}", parse_diags.items);
    let files = [crate::spec::raw::File { file: id, format: crate::spec::raw::Format::Hcl, body }];
    let opts = crate::spec::LoadOptions::default();
    let decoded = |threads: usize| {
        let mut diags = Diagnostics::default();
        let d = super::decode_on(&sources, &files, &opts, &mut diags, threads);
        (format!("{:?}", d.spec), format!("{:?}", d.partial_pools), diags.items)
    };
    let (one_spec, one_partial, one_diags) = decoded(1);
    let (two_spec, two_partial, two_diags) = decoded(2);
    // The fleet has what the test is about.
    let codes: BTreeSet<&str> = one_diags.iter().map(|d| d.code).collect();
    assert!(codes.len() >= 3, "kinds of problems: {codes:?}");
    assert!(one_diags.iter().any(|d| d.help.as_deref().is_some_and(|h| h.contains("did you mean"))), "{one_diags:?}");
    assert!(one_spec.contains("p0029[\\\"b\\\"]") || one_spec.contains("p0029"), "for_each instances decoded");
    assert_eq!(one_diags, two_diags, "the same problems, in the same order");
    assert!(one_spec == two_spec, "the same spec, spans included");
    assert!(one_partial == two_partial, "the same partly decoded pools");
}

#[test]
fn an_undeclared_reference_is_told_the_closest_declared_name_wherever_it_is_decoded() {
    // The pool referred to by mistake comes after the one that refers to it in the
    // decoding order (nothing refers to it); the hint still names it.
    let text = "provider \"sim\" {}\n\
        gpu_pool \"a\" {\n  provider = \"sim\"\n  gpu = \"L4\"\n  gpus_per_node = 1\n  image = gpu_pool.zebr.gpu\n  nodes {\n    min = 0\n    desired = 1\n    max = 2\n  }\n}\n\
        gpu_pool \"zebra\" {\n  provider = \"sim\"\n  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {\n    min = 0\n    desired = 1\n    max = 2\n  }\n}\n";
    let mut sources = crate::diag::Sources::default();
    let id = sources.add("f.hcl", text);
    let mut diags = Diagnostics::default();
    let body = hcl::parse(id, text, &mut diags).expect("parses");
    let files = [crate::spec::raw::File { file: id, format: crate::spec::raw::Format::Hcl, body }];
    super::decode_on(&sources, &files, &crate::spec::LoadOptions::default(), &mut diags, 1);
    let hint = diags.items.iter().find(|d| d.code == "gpuplan::spec::undeclared").and_then(|d| d.help.clone());
    assert_eq!(hint.as_deref(), Some("did you mean `zebra`?"), "{:?}", diags.items);
}
