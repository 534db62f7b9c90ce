//! The steps of expanding one resource block: `count`, `for_each` and the value other
//! blocks see. (Whole specs are covered by `tests/corpus` and the plan cases.)

use std::collections::{BTreeMap, BTreeSet};

use super::{Expansion, decode_with, expand, instances_value, merge_into};
use crate::addr::{InstanceKey, Kind};
use crate::diag::Diagnostics;
use crate::spec::eval::{Scope, Value};
use crate::spec::fields::Cx;
use crate::spec::hcl;
use crate::spec::order::{Item, Reference, references};

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
    super::decode(&files, &crate::spec::LoadOptions::default(), &[], &mut diags);
    let hint = diags.items.iter().find(|d| d.code == "gpuplan::spec::undeclared").and_then(|d| d.help.clone());
    assert_eq!(hint.as_deref(), Some("did you mean `zebra`?"), "{:?}", diags.items);
}

/// The references of the first block of `text`: (target, whether its value is read).
fn refs_of(text: &str) -> Vec<(String, bool)> {
    let mut diags = Diagnostics::default();
    let body = hcl::parse(0, text, &mut diags).expect("parses");
    let item = Item::Resource(Kind::GpuPool, &body.blocks[0]);
    references(&item).into_iter().map(|Reference { target, reads, .. }| (target.to_string(), reads)).collect()
}

#[test]
fn a_depends_on_list_names_what_it_waits_for_without_reading_it() {
    let text = "gpu_pool \"b\" {\n  gpu = gpu_pool.a.gpu\n  depends_on = [gpu_pool.c, gpu_pool.d[\"x\"], \"gpu_pool.e\"]\n  nodes {\n    max = local.most\n  }\n}\n";
    let mut got = refs_of(text);
    got.sort();
    let want = [
        ("gpu_pool.a", true),
        ("gpu_pool.c", false),
        ("gpu_pool.d", false),
        ("gpu_pool.e", false),
        ("local.most", true),
    ];
    assert_eq!(got, want.map(|(t, r)| (t.to_string(), r)));
    // Anything else in the list is evaluated, so what it refers to is read.
    let computed = refs_of("gpu_pool \"b\" {\n  depends_on = [gpu_pool.a, local.first]\n}\n");
    assert_eq!(computed, [("gpu_pool.a".to_string(), true), ("local.first".to_string(), true)]);
    let whole = refs_of("gpu_pool \"b\" {\n  depends_on = local.all\n}\n");
    assert_eq!(whole, [("local.all".to_string(), true)]);
}

#[test]
fn literals_refer_only_by_a_string_naming_a_resource_and_loop_variables_hide_only_their_expression() {
    // `labels` binds `local` as a loop variable: its own `local => local` is no reference,
    // but the next attribute's `local.r` is (the set of loop variables is per expression).
    let text = "gpu_pool \"b\" {\n  image = \"gpu_pool.a\"\n  gpu = \"A100\"\n  gpus_per_node = 8\n  \
        spot = true\n  labels = { for local in [\"x\"] : local => local }\n  region = local.r\n}\n";
    let mut got = refs_of(text);
    got.sort();
    assert_eq!(got, want(&[("gpu_pool.a", true), ("local.r", true)]));
}

/// The references of the first block of `text` decoded as a `kind`: (target, read).
fn refs_as(kind: Kind, text: &str) -> Vec<(String, bool)> {
    let mut diags = Diagnostics::default();
    let body = hcl::parse(0, text, &mut diags).expect("parses");
    let item = Item::Resource(kind, &body.blocks[0]);
    let mut got: Vec<_> =
        references(&item).into_iter().map(|Reference { target, reads, .. }| (target.to_string(), reads)).collect();
    got.sort();
    got
}

fn want(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
    pairs.iter().map(|(t, r)| (t.to_string(), *r)).collect()
}

#[test]
fn address_attributes_written_as_names_read_no_value() {
    // A quota listing every pool, and jobs naming theirs, build no pool's value.
    let quota =
        "quota \"q\" {\n  pools = [gpu_pool.a, gpu_pool.b[\"x\"], \"gpu_pool.c\"]\n  max_gpus = local.most\n}\n";
    assert_eq!(
        refs_as(Kind::Quota, quota),
        want(&[("gpu_pool.a", false), ("gpu_pool.b", false), ("gpu_pool.c", false), ("local.most", true)])
    );
    let job = "job \"j\" {\n  template = job_template.t\n  pool = gpu_pool.a\n  quota = quota.q\n  args = [gpu_pool.b.gpu]\n}\n";
    assert_eq!(
        refs_as(Kind::Job, job),
        want(&[("gpu_pool.a", false), ("gpu_pool.b", true), ("job_template.t", false), ("quota.q", false)])
    );
    let scaler = "autoscaler \"s\" {\n  pool = gpu_pool.a\n}\n";
    assert_eq!(refs_as(Kind::Autoscaler, scaler), want(&[("gpu_pool.a", false)]));
    // Computed addresses are evaluated, so what they name is read.
    let computed = "job \"j\" {\n  pool = local.p\n  quota = \"${quota.q.name}\"\n}\n";
    assert_eq!(refs_as(Kind::Job, computed), want(&[("local.p", true), ("quota.q", true)]));
    let listed = "quota \"q\" {\n  pools = [gpu_pool.a, local.more]\n}\n";
    assert_eq!(refs_as(Kind::Quota, listed), want(&[("gpu_pool.a", true), ("local.more", true)]));
    // The same names on other blocks are not addresses: their values are read.
    let other = "gpu_pool \"p\" {\n  pool = gpu_pool.a\n  pools = [gpu_pool.b]\n  template = job_template.t\n}\n";
    assert_eq!(
        refs_as(Kind::GpuPool, other),
        want(&[("gpu_pool.a", true), ("gpu_pool.b", true), ("job_template.t", true)])
    );
}

/// One pool of a generated fleet: its `gpus_per_node` (a string fails to decode), the pool
/// its `depends_on` names (maybe one not declared), and whether it reads another pool's
/// region (which makes that pool's value read, so it ends a run decoded aside).
#[derive(Debug, Clone)]
struct GenPool {
    bad_gpus: bool,
    depends_on: Option<usize>,
    reads_region_of: Option<usize>,
}

fn gen_pool() -> impl proptest::strategy::Strategy<Value = GenPool> {
    use proptest::prelude::*;
    (
        proptest::bool::weighted(0.01),
        proptest::option::weighted(0.5, 0..420usize),
        proptest::option::weighted(0.01, 0..400usize),
    )
        .prop_map(|(bad_gpus, depends_on, reads_region_of)| GenPool { bad_gpus, depends_on, reads_region_of })
}

fn fleet_text(pools: &[GenPool]) -> String {
    let mut text = String::from("provider \"sim\" {\n  region = \"us-east-1\"\n}\n");
    for (i, p) in pools.iter().enumerate() {
        let gpus = if p.bad_gpus { "\"eight\"" } else { "8" };
        let region = match p.reads_region_of {
            Some(j) if j != i => format!("gpu_pool.p{j}.region"),
            _ => "\"us-east-1\"".to_string(),
        };
        text.push_str(&format!(
            "gpu_pool \"p{i}\" {{\n  provider = \"sim\"\n  region = {region}\n  gpu = \"A100-80GB\"\n  gpus_per_node = {gpus}\n  nodes {{\n    min = 0\n    desired = 1\n    max = 2\n  }}\n  labels = {{\n    team = \"t{}\"\n  }}\n",
            i % 7
        ));
        if let Some(j) = p.depends_on.filter(|j| *j != i) {
            text.push_str(&format!("  depends_on = [gpu_pool.p{j}]\n"));
        }
        text.push_str("}\n");
    }
    text
}

/// The spec and diagnostics of `text`, decoded with or without runs of pools aside.
fn decoded_both_ways(text: &str) -> [(String, String); 2] {
    [true, false].map(|aside| {
        let mut diags = Diagnostics::default();
        let body = hcl::parse(0, text, &mut diags).expect("parses");
        let files = [crate::spec::raw::File { file: 0, format: crate::spec::raw::Format::Hcl, body }];
        let decoded = decode_with(&files, &crate::spec::LoadOptions::default(), &[], &mut diags, aside);
        diags.sort();
        (format!("{:?}", decoded.spec), format!("{:?} {:?}", diags.items, decoded.partial))
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]
    /// Pools decoded on several threads give what one thread gives: the spec, every
    /// diagnostic once (a failed pool's dependents not reported again) and the partial
    /// results, over fleets with failing pools, references to undeclared and failed pools,
    /// and pools whose values are read (which split the runs).
    #[test]
    fn pools_decoded_aside_equal_one_thread(pools in proptest::collection::vec(gen_pool(), 300..400)) {
        let [aside, one] = decoded_both_ways(&fleet_text(&pools));
        proptest::prop_assert!(aside == one);
    }
}

#[test]
fn a_fleet_of_valid_pools_is_decoded_aside_and_equal() {
    let pools: Vec<GenPool> = (0..600usize)
        .map(|i| GenPool { bad_gpus: false, depends_on: i.checked_sub(1), reads_region_of: None })
        .collect();
    let [aside, one] = decoded_both_ways(&fleet_text(&pools));
    assert!(aside.0.contains("p599") && aside.1.starts_with("[]"), "{}", &aside.1[..200.min(aside.1.len())]);
    assert!(aside == one);
}

proptest::proptest! {
    /// A map with entries merged in at once ([`merge_into`]) equals the map with each
    /// entry inserted in turn: the same keys, a later entry's value over an earlier one's.
    #[test]
    fn entries_merged_at_once_equal_inserted_in_turn(
        before in proptest::collection::vec((0..60u32, 0..1_000u32), 0..40),
        added in proptest::collection::vec((0..60u32, 0..1_000u32), 0..80),
    ) {
        let mut inserted: BTreeMap<u32, u32> = before.iter().copied().collect();
        let mut merged = inserted.clone();
        for &(k, v) in &added {
            inserted.insert(k, v);
        }
        merge_into(&mut merged, added);
        proptest::prop_assert_eq!(merged, inserted);
    }
}
