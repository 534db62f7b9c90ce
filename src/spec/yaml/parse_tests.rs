//! Tests of `parse`: the mapping onto raw blocks, scalar typing, spans, anchors and errors.

use super::expand::MAX_NODES;
use super::lower::TOP_LEVEL;
use super::parse;
use super::scalar::{Plain, classify, content_offset};
use super::tree;
use crate::addr::Kind;
use crate::diag::{Diagnostics, Span};
use crate::spec::raw::{Block, Body, Expr, ExprKind, ObjectKey};

fn ok(text: &str) -> Body {
    let mut d = Diagnostics::default();
    let body = parse(0, text, &mut d);
    assert!(d.items.is_empty(), "unexpected diagnostics: {:#?}", d.items);
    body.expect("parses")
}

/// Diagnostics of a file that must not parse cleanly, and what `parse` returned.
fn errors(text: &str) -> (Option<Body>, Diagnostics) {
    let mut d = Diagnostics::default();
    let body = parse(0, text, &mut d);
    assert!(d.has_errors(), "expected an error for {text:?}");
    (body, d)
}

fn codes(d: &Diagnostics) -> Vec<&'static str> {
    d.items.iter().map(|i| i.code).collect()
}

fn at(text: &str, span: Span) -> &str {
    &text[span.start as usize..span.end as usize]
}

fn attr<'b>(block: &'b Block, name: &str) -> &'b Expr {
    &block.body.attr(name).unwrap_or_else(|| panic!("no attribute {name}")).value
}

const SPEC: &str = "\
providers:
  sim: {}
gpu_pools:
  train:
    provider: sim
    gpus_per_node: 8
    zones: [us-east-1a, us-east-1b]
    nodes: {min: 0, desired: 2, max: 4}
  eval:
variables:
  team: {default: ml}
locals:
  region: us-east-1
  tags: {owner: infra}
outputs:
  pool_id: {value: x}
";

#[test]
fn resources_become_blocks_with_labels() {
    let body = ok(SPEC);
    let heads: Vec<(String, Vec<String>)> =
        body.blocks.iter().map(|b| (b.kind.name.clone(), b.labels.iter().map(|l| l.name.clone()).collect())).collect();
    let expect = |k: &str, l: &[&str]| (k.to_string(), l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        heads,
        vec![
            expect("provider", &["sim"]),
            expect("gpu_pool", &["train"]),
            expect("gpu_pool", &["eval"]),
            expect("variable", &["team"]),
            expect("locals", &[]),
            expect("output", &["pool_id"]),
        ]
    );
    assert_eq!(body.span, Span::new(0, 0, SPEC.len()));
    assert!(body.attrs.is_empty());
}

#[test]
fn attributes_nested_maps_and_lists() {
    let body = ok(SPEC);
    let train = &body.blocks[1];
    assert_eq!(attr(train, "provider").kind, ExprKind::String("sim".into()));
    assert_eq!(attr(train, "gpus_per_node").kind, ExprKind::Number(8.0));
    let ExprKind::Array(zones) = &attr(train, "zones").kind else { panic!("zones is not an array") };
    assert_eq!(zones.len(), 2);
    assert_eq!(zones[1].kind, ExprKind::String("us-east-1b".into()));
    let ExprKind::Object(nodes) = &attr(train, "nodes").kind else { panic!("nodes is not an object") };
    let keys: Vec<&str> = nodes
        .iter()
        .map(|(k, _)| match k {
            ObjectKey::Name(i) => i.name.as_str(),
            ObjectKey::Expr(_) => "?",
        })
        .collect();
    assert_eq!(keys, ["min", "desired", "max"]);
    assert_eq!(nodes[2].1.kind, ExprKind::Number(4.0));
    // `eval:` with no value is an empty body.
    assert!(body.blocks[2].body.attrs.is_empty());
    // locals: one block whose attributes are the local names.
    let locals = &body.blocks[4];
    let names: Vec<&str> = locals.body.attrs.iter().map(|a| a.key.name.as_str()).collect();
    assert_eq!(names, ["region", "tags"]);
}

#[test]
fn spans_point_at_keys_and_values() {
    let body = ok(SPEC);
    let train = &body.blocks[1];
    assert_eq!(at(SPEC, train.kind.span), "gpu_pools");
    assert_eq!(at(SPEC, train.labels[0].span), "train");
    assert!(at(SPEC, train.span).starts_with("train:\n    provider: sim"));
    assert!(at(SPEC, train.span).ends_with("max: 4}"));
    let a = train.body.attr("zones").expect("zones");
    assert_eq!(at(SPEC, a.key.span), "zones");
    assert_eq!(at(SPEC, a.value.span), "[us-east-1a, us-east-1b]");
    assert_eq!(at(SPEC, attr(train, "gpus_per_node").span), "8");
    let ExprKind::Object(nodes) = &attr(train, "nodes").kind else { panic!() };
    let ObjectKey::Name(k) = &nodes[1].0 else { panic!() };
    assert_eq!(at(SPEC, k.span), "desired");
    assert_eq!(at(SPEC, nodes[1].1.span), "2");
}

#[test]
fn non_ascii_text_gets_byte_spans() {
    let text = "# équipe ☃\nlocals:\n  équipe: \"données ☃\"\n  owner: 'zoë'\n  plain: ünïcode\n";
    let body = ok(text);
    let attrs = &body.blocks[0].body.attrs;
    assert_eq!(at(text, attrs[0].key.span), "équipe");
    assert_eq!(at(text, attrs[0].value.span), "\"données ☃\"");
    assert_eq!(attrs[0].value.kind, ExprKind::String("données ☃".into()));
    assert_eq!(at(text, attrs[1].value.span), "'zoë'");
    assert_eq!(at(text, attrs[2].value.span), "ünïcode");
}

#[test]
fn providers_with_type_get_an_alias() {
    let text =
        "providers:\n  aws_eu:\n    type: aws\n    region: eu-west-1\n  aws_us: {type: aws, alias: us}\n  sim:\n";
    let body = ok(text);
    let b = &body.blocks;
    assert_eq!(b[0].labels[0].name, "aws");
    assert_eq!(at(text, b[0].labels[0].span), "aws");
    assert_eq!(attr(&b[0], "alias").kind, ExprKind::String("aws_eu".into()));
    assert!(b[0].body.attr("type").is_none(), "`type` is consumed");
    assert_eq!(attr(&b[0], "region").kind, ExprKind::String("eu-west-1".into()));
    // An explicit alias wins.
    assert_eq!(attr(&b[1], "alias").kind, ExprKind::String("us".into()));
    assert_eq!(b[1].labels[0].name, "aws");
    // No type: the name is the provider kind, no alias.
    assert_eq!(b[2].labels[0].name, "sim");
    assert!(b[2].body.attr("alias").is_none());
}

#[test]
fn provider_type_must_be_a_name() {
    let (_, d) = errors("providers:\n  x:\n    type: [aws]\n");
    assert_eq!(codes(&d), ["gpuplan::yaml::provider_type"]);
}

#[test]
fn plain_scalars_are_typed_by_the_core_schema() {
    for s in ["", "~", "null", "Null", "NULL"] {
        assert_eq!(classify(s), Plain::Null, "{s:?}");
    }
    for (s, b) in [("true", true), ("True", true), ("TRUE", true), ("false", false), ("FALSE", false)] {
        assert_eq!(classify(s), Plain::Bool(b), "{s:?}");
    }
    for (s, n) in [
        ("0", 0.0),
        ("-12", -12.0),
        ("+7", 7.0),
        ("0x1F", 31.0),
        ("0o17", 15.0),
        ("1.5", 1.5),
        ("-.5", -0.5),
        ("1e3", 1000.0),
        ("2.5E-1", 0.25),
        (".inf", f64::INFINITY),
        ("-.Inf", f64::NEG_INFINITY),
    ] {
        assert_eq!(classify(s), Plain::Number(n), "{s:?}");
    }
    assert!(matches!(classify(".nan"), Plain::Number(n) if n.is_nan()));
    for s in ["yes", "no", "on", "tRUE", "1_000", "0x", "0o8", "inf", "nan", "1e", "1.2.3", "12abc", "+", "-", "."] {
        assert_eq!(classify(s), Plain::String, "{s:?}");
    }
    assert_eq!(classify("1e400"), Plain::OutOfRange);
    assert_eq!(classify(&"9".repeat(400)), Plain::OutOfRange);
}

#[test]
fn quoted_block_and_str_tagged_scalars_are_strings() {
    let text = "locals:\n  a: \"1\"\n  b: 'true'\n  c: !!str 12\n  d: |\n    x\n  e: ~\n  f:\n  g: 0x10\n  h: -1.5e2\n";
    let body = ok(text);
    let v = |name: &str| attr(&body.blocks[0], name).kind.clone();
    assert_eq!(v("a"), ExprKind::String("1".into()));
    assert_eq!(v("b"), ExprKind::String("true".into()));
    assert_eq!(v("c"), ExprKind::String("12".into()));
    assert_eq!(at(text, attr(&body.blocks[0], "c").span), "12");
    assert_eq!(v("d"), ExprKind::String("x\n".into()));
    assert_eq!(at(text, attr(&body.blocks[0], "d").span), "|\n    x");
    assert_eq!(v("e"), ExprKind::Null);
    assert_eq!(v("f"), ExprKind::Null);
    assert_eq!(v("g"), ExprKind::Number(16.0));
    assert_eq!(v("h"), ExprKind::Number(-150.0));
}

#[test]
fn numbers_too_large_are_an_error() {
    let (body, d) = errors("locals:\n  big: 1e999\n");
    assert_eq!(codes(&d), ["gpuplan::yaml::number_out_of_range"]);
    assert_eq!(d.items[0].message, "number out of range");
    assert!(body.is_some(), "other values still parse");
}

#[test]
fn template_offsets_are_exact_when_the_source_is_the_value() {
    let offset = |text: &str| {
        let doc = tree::build(0, text, &mut Diagnostics::default()).expect("parses");
        let Some(tree::NodeKind::Mapping { entries, .. }) = doc.root.map(|r| r.kind) else { panic!() };
        let v = &entries[0].1;
        content_offset(text, v, v.scalar().expect("scalar"))
    };
    let t = "a: x-${var.y}\n";
    assert_eq!(&t[offset(t)..offset(t) + 2], "x-");
    let t = "a: 'x-${var.y}'\n";
    assert_eq!(&t[offset(t)..offset(t) + 2], "x-");
    let t = "a: \"é-${var.y}\"\n";
    assert_eq!(&t[offset(t)..offset(t) + 3], "é-");
    // An escape makes the text differ from the value: fall back to the scalar start.
    let t = "a: \"\\t${var.y}\"\n";
    assert_eq!(offset(t), 3);
    let t = "a: &x !!str v${a}\n";
    assert_eq!(&t[offset(t)..], "v${a}\n");
}

/// Needs the real `hcl::parse_template` (a `todo!()` in this branch).
#[test]
fn strings_with_interpolation_become_templates() {
    let text = "gpu_pools:\n  p:\n    name: \"pool-${var.team}\"\n    team: ${var.team}\n";
    let body = ok(text);
    let name = attr(&body.blocks[0], "name");
    assert!(!matches!(name.kind, ExprKind::String(_)), "got {:?}", name.kind);
    assert_eq!(at(text, name.span), "\"pool-${var.team}\"");
    let mut refs = vec![];
    attr(&body.blocks[0], "team").traversals(&mut refs);
    assert_eq!(refs.len(), 1);
    assert_eq!(at(text, refs[0].2), "var.team");
}

#[test]
fn anchors_and_aliases_are_copied() {
    let text = "x: &base {gpu: A100, nodes: [1, 2]}\ngpu_pools:\n  a: *base\n  b:\n    <<: *base\n    gpu: H100\n";
    let mut d = Diagnostics::default();
    let body = parse(0, text, &mut d);
    // `x` is not a block kind, but the anchor it defines still works.
    assert_eq!(codes(&d), ["gpuplan::spec::unknown_block"]);
    let body = body.expect("parses");
    let a = &body.blocks[0];
    assert_eq!(attr(a, "gpu").kind, ExprKind::String("A100".into()));
    assert_eq!(at(text, a.body.span), "*base");
    let ExprKind::Array(nodes) = &attr(a, "nodes").kind else { panic!() };
    assert_eq!(nodes.len(), 2);
    let b = &body.blocks[1];
    let names: Vec<&str> = b.body.attrs.iter().map(|a| a.key.name.as_str()).collect();
    assert_eq!(names, ["nodes", "gpu"], "merged keys never override written ones");
    assert_eq!(attr(b, "gpu").kind, ExprKind::String("H100".into()));
}

#[test]
fn alias_bombs_are_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..8 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let (body, d) = errors(&text);
    assert!(body.is_none());
    assert_eq!(codes(&d), ["gpuplan::yaml::too_large"]);
    assert!(d.items[0].message.contains(&MAX_NODES.to_string()));
}

#[test]
fn recursive_and_unknown_aliases_are_errors() {
    let (_, d) = errors("a: &x [1, *x]\n");
    assert_eq!(codes(&d), ["gpuplan::yaml::recursive_alias"]);
    let (_, d) = errors("a: *nope\n");
    assert_eq!(codes(&d), ["gpuplan::syntax"]);
    assert!(d.items[0].help.as_deref().unwrap_or("").contains("&name"));
}

#[test]
fn duplicate_keys_label_both() {
    let text = "gpu_pools:\n  a:\n    gpu: A100\n    gpu: H100\n";
    let (_, d) = errors(text);
    assert_eq!(codes(&d), ["gpuplan::yaml::duplicate_key"]);
    let labels = &d.items[0].labels;
    assert_eq!(labels.len(), 2);
    assert_eq!(labels[0].0, Span::new(0, 34, 37), "second occurrence first");
    assert_eq!(labels[1].0, Span::new(0, 20, 23));
    assert_eq!(at(text, labels[0].0), "gpu");
    assert!(d.items[0].help.is_some());
    // Parsing goes on with the first value only.
    let body = parse(0, text, &mut Diagnostics::default()).expect("still parses");
    assert_eq!(body.blocks[0].body.attrs.len(), 1);
    assert_eq!(attr(&body.blocks[0], "gpu").kind, ExprKind::String("A100".into()));
}

#[test]
fn multiple_documents_are_refused() {
    let text = "providers: {}\n---\njobs: {}\n";
    let (body, d) = errors(text);
    assert!(body.is_none());
    assert_eq!(codes(&d), ["gpuplan::yaml::multiple_documents"]);
    assert_eq!(at(text, d.items[0].labels[0].0), "---");
    // One document with an explicit start is fine.
    assert_eq!(ok("---\njobs: {}\n").blocks.len(), 0);
}

#[test]
fn empty_and_comment_only_files_declare_nothing() {
    for text in ["", "# just a comment\n\n# another\n", "---\n", "\n\n"] {
        let body = ok(text);
        assert_eq!(body, Body { span: Span::new(0, 0, text.len()), ..Body::default() }, "{text:?}");
    }
}

#[test]
fn top_level_must_be_a_mapping() {
    for text in ["- a\n- b\n", "just text\n", "[1, 2]\n"] {
        let (body, d) = errors(text);
        assert!(body.is_none());
        assert_eq!(codes(&d), ["gpuplan::yaml::not_a_mapping"], "{text:?}");
    }
}

#[test]
fn unknown_top_level_keys_suggest_the_plural() {
    let text = "gpu_pool:\n  a: {}\ngpu_pols:\n  b: {}\nfrobs: {}\nlocal: {}\n";
    let (body, d) = errors(text);
    assert!(body.is_some_and(|b| b.blocks.is_empty()));
    assert_eq!(codes(&d), ["gpuplan::spec::unknown_block"; 4]);
    let help: Vec<&str> = d.items.iter().map(|i| i.help.as_deref().unwrap_or("")).collect();
    assert_eq!(help[0], "did you mean `gpu_pools`? YAML uses the plural, with one entry per name under it");
    assert_eq!(help[1], "did you mean `gpu_pools`?");
    assert!(help[2].contains("providers, gpu_pools"), "{}", help[2]);
    assert!(help[3].contains("did you mean `locals`?"), "{}", help[3]);
    assert_eq!(at(text, d.items[1].labels[0].0), "gpu_pols");
}

#[test]
fn kinds_and_entries_must_be_mappings() {
    let (_, d) = errors("gpu_pools: [a, b]\njobs:\n  x: 3\n");
    assert_eq!(codes(&d), ["gpuplan::yaml::expected_mapping"; 2]);
    assert!(d.items[1].message.contains("`jobs.x`"), "{}", d.items[1].message);
}

#[test]
fn syntax_errors_are_located_with_a_hint() {
    let cases = [
        ("gpu_pools:\n\tx: 1\n", 11, "spaces"),
        ("a: \"open\n", 3, "quote"),
        ("a: [1, 2\n", 9, "close"),
        ("a: 1\n b: 2\n", 7, "indentation"),
    ];
    for (text, offset, hint) in cases {
        let (body, d) = errors(text);
        assert!(body.is_none());
        assert_eq!(codes(&d), ["gpuplan::syntax"], "{text:?}");
        let diag = &d.items[0];
        assert!(diag.message.starts_with("invalid YAML syntax: "), "{}", diag.message);
        assert_eq!(diag.labels[0].0.start as usize, offset, "{text:?}: {}", diag.message);
        assert!(diag.help.as_deref().unwrap_or("").contains(hint), "{text:?}: {:?}", diag.help);
    }
}

#[test]
fn syntax_error_offsets_are_bytes() {
    let text = "é: ü\n\tb: 1\n";
    let (_, d) = errors(text);
    let span = d.items[0].labels[0].0;
    assert_eq!(at(text, span), "\t");
}

#[test]
fn deep_nesting_is_refused() {
    let block: String = (0..100).map(|i| format!("{}k{i}:\n", "  ".repeat(i))).collect();
    let (body, d) = errors(&block);
    assert!(body.is_none());
    assert_eq!(codes(&d), ["gpuplan::yaml::too_deep"]);
    // Flow nesting fails too (in saphyr or here), without overflowing the stack.
    for n in [65, 300, 100_000] {
        let flow = format!("a: {}{}\n", "[".repeat(n), "]".repeat(n));
        let (body, _) = errors(&flow);
        assert!(body.is_none());
    }
    // 60 levels is fine.
    let ok_depth = format!("a: {}1{}\n", "[".repeat(60), "]".repeat(60));
    assert!(parse(0, &ok_depth, &mut Diagnostics::default()).is_some());
}

#[test]
fn junk_never_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let alphabet: Vec<char> = " \t\n:-[]{},#&*!|>'\"?%@`~\\0x1aé☃\u{0}\u{feff}".chars().collect();
    for len in 0..400 {
        let s: String = (0..len % 60)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                alphabet[(seed % alphabet.len() as u64) as usize]
            })
            .collect();
        let mut d = Diagnostics::default();
        let body = parse(0, &s, &mut d);
        if body.is_none() {
            assert!(d.has_errors(), "None without an error for {s:?}");
        }
        for item in &d.items {
            for (span, _) in &item.labels {
                assert!(s.get(span.start as usize..span.end as usize).is_some(), "bad span for {s:?}");
            }
        }
        let _ = super::format(0, &s, &mut Diagnostics::default());
    }
}

#[test]
fn top_level_keys_are_the_kind_plurals() {
    let resources: Vec<(&str, &str)> = TOP_LEVEL[..7].to_vec();
    let kinds: Vec<(&str, &str)> = Kind::ALL.iter().map(|k| (k.plural(), k.as_str())).collect();
    assert_eq!(resources, kinds);
}

#[test]
fn byte_order_mark_is_skipped_in_spans() {
    let text = "\u{feff}locals:\n  a: ü1\n";
    let body = ok(text);
    let a = &body.blocks[0].body.attrs[0];
    assert_eq!(at(text, a.key.span), "a");
    assert_eq!(at(text, a.value.span), "ü1");
}
