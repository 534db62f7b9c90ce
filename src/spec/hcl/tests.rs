//! Tests for HCL parsing, templates, expressions and formatting.

use super::*;
use crate::diag::Sources;
use crate::spec::raw::{BinaryOp, ObjectKey, Step, TemplatePart, UnaryOp};

fn parse_ok(text: &str) -> Body {
    let mut d = Diagnostics::default();
    let body = parse(0, text, &mut d);
    assert!(d.items.is_empty(), "unexpected diagnostics: {:#?}", d.items);
    body.expect("parses")
}

fn attr<'a>(body: &'a Body, name: &str) -> &'a Expr {
    &body.attr(name).unwrap_or_else(|| panic!("no attribute {name}")).value
}

fn src(text: &str, span: Span) -> &str {
    &text[span.start as usize..span.end as usize]
}

fn expr_ok(text: &str) -> Expr {
    let mut d = Diagnostics::default();
    let e = parse_expression(0, text, 0, &mut d);
    assert!(d.items.is_empty(), "unexpected diagnostics: {:#?}", d.items);
    e.expect("parses")
}

/// The single error of a failed parse, with its 1-based line and column.
fn parse_err(text: &str) -> (Diagnostic, (usize, usize)) {
    let mut d = Diagnostics::default();
    assert!(parse(0, text, &mut d).is_none(), "expected a syntax error");
    assert_eq!(d.items.len(), 1, "{:#?}", d.items);
    let diag = d.items.remove(0);
    let mut sources = Sources::default();
    sources.add("t.hcl", text);
    let primary = diag.primary().expect("located");
    let lc = sources.line_col(0, primary.start);
    (diag, lc)
}

fn fmt_ok(text: &str) -> String {
    let mut d = Diagnostics::default();
    let out = format(0, text, &mut d).expect("formats");
    assert!(d.items.is_empty(), "unexpected diagnostics: {:#?}", d.items);
    out
}

/// Formatting keeps the tree (spans aside) and is idempotent.
fn assert_fmt_sound(text: &str) -> String {
    let out = fmt_ok(text);
    assert!(same::same_tree(&parse_ok(text), &parse_ok(&out)), "tree changed:\n{out}");
    assert_eq!(fmt_ok(&out), out, "not idempotent");
    out
}

// ---- structures -------------------------------------------------------------------

#[test]
fn blocks_labels_and_nested_bodies() {
    let text = "gpu_pool \"train\" {\n  gpu = \"A100\"\n  nodes {\n    min = 0\n  }\n}\nlocals {\n  x = 1\n}\nb one \"two\" {}\n";
    let body = parse_ok(text);
    assert_eq!(body.span, Span::new(0, 0, text.len()));
    assert_eq!(body.blocks.len(), 3);
    let pool = &body.blocks[0];
    assert_eq!(pool.kind.name, "gpu_pool");
    assert_eq!(pool.labels[0].name, "train");
    assert_eq!(src(text, pool.labels[0].span), "\"train\"");
    assert!(src(text, pool.span).starts_with("gpu_pool \"train\" {") && src(text, pool.span).ends_with("  }\n}"));
    assert!(src(text, pool.body.span).starts_with('{') && src(text, pool.body.span).ends_with('}'));
    assert_eq!(src(text, attr(&pool.body, "gpu").span), "\"A100\"");
    let nodes = &pool.body.blocks[0];
    assert_eq!(nodes.kind.name, "nodes");
    assert!(nodes.labels.is_empty());
    assert_eq!(attr(&nodes.body, "min").kind, ExprKind::Number(0.0));
    assert!(body.blocks[1].labels.is_empty());
    let b = &body.blocks[2];
    assert_eq!(b.labels.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["one", "two"]);
    assert_eq!(src(text, b.span), "b one \"two\" {}");
}

#[test]
fn attribute_key_span() {
    let text = "alpha = true\n";
    let body = parse_ok(text);
    assert_eq!(src(text, body.attrs[0].key.span), "alpha");
    assert_eq!(body.attrs[0].value.kind, ExprKind::Bool(true));
}

// ---- expressions ------------------------------------------------------------------

#[test]
fn literals() {
    let text = "a = null\nb = false\nc = 1.5e3\nd = \"x\\ny\"\ne = -3\nf = 18446744073709551615\n";
    let body = parse_ok(text);
    assert_eq!(attr(&body, "a").kind, ExprKind::Null);
    assert_eq!(attr(&body, "b").kind, ExprKind::Bool(false));
    assert_eq!(attr(&body, "c").kind, ExprKind::Number(1500.0));
    assert_eq!(attr(&body, "d").kind, ExprKind::String("x\ny".into()));
    assert_eq!(attr(&body, "e").kind, ExprKind::Number(-3.0));
    assert_eq!(src(text, attr(&body, "e").span), "-3");
    assert_eq!(attr(&body, "f").kind, ExprKind::Number(18446744073709551615.0));
}

#[test]
fn templates_in_strings() {
    let text = "a = \"gpu-${var.team}-x\"\nb = \"$${literal}\"\nc = \"${x}\"\nd = \"a ${~ x ~} b\"\n";
    let body = parse_ok(text);
    let a = attr(&body, "a");
    assert_eq!(src(text, a.span), "\"gpu-${var.team}-x\"");
    let ExprKind::Template(parts) = &a.kind else { panic!("{a:?}") };
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0], TemplatePart::Literal("gpu-".into()));
    let TemplatePart::Interp(inner) = &parts[1] else { panic!() };
    assert_eq!(src(text, inner.span), "var.team");
    assert_eq!(parts[2], TemplatePart::Literal("-x".into()));
    assert_eq!(attr(&body, "b").kind, ExprKind::String("${literal}".into()));
    assert!(matches!(&attr(&body, "c").kind, ExprKind::Template(p) if p.len() == 1));
    let ExprKind::Template(d) = &attr(&body, "d").kind else { panic!() };
    assert_eq!(d[0], TemplatePart::Literal("a".into()));
    assert_eq!(d[2], TemplatePart::Literal("b".into()));
}

#[test]
fn template_directives_are_unsupported() {
    let body = parse_ok("a = \"%{ if x }y%{ endif }\"\n");
    assert_eq!(attr(&body, "a").kind, ExprKind::Unsupported("template directives (%{...})".into()));
}

#[test]
fn heredocs() {
    let text = "a = <<EOT\nhello\n  world\nEOT\nb = <<-EOT\n    x ${y}\n    z\n  EOT\n";
    let body = parse_ok(text);
    assert_eq!(attr(&body, "a").kind, ExprKind::String("hello\n  world\n".into()));
    assert!(src(text, attr(&body, "a").span).starts_with("<<EOT"));
    let ExprKind::Template(parts) = &attr(&body, "b").kind else { panic!() };
    // `<<-` strips the common indentation (4 spaces here).
    assert_eq!(parts[0], TemplatePart::Literal("x ".into()));
    assert_eq!(parts[2], TemplatePart::Literal("\nz\n".into()));
}

#[test]
fn collections() {
    let text = "a = [1, \"two\", [3]]\no = { team = \"ml\", \"quoted\" = 1, (local.k) = 2, \"${p}x\" = 3 }\n";
    let body = parse_ok(text);
    let ExprKind::Array(items) = &attr(&body, "a").kind else { panic!() };
    assert_eq!(items.len(), 3);
    assert_eq!(src(text, items[1].span), "\"two\"");
    assert!(matches!(&items[2].kind, ExprKind::Array(v) if v.len() == 1));
    let ExprKind::Object(entries) = &attr(&body, "o").kind else { panic!() };
    let ObjectKey::Name(team) = &entries[0].0 else { panic!() };
    assert_eq!((team.name.as_str(), src(text, team.span)), ("team", "team"));
    assert_eq!(src(text, entries[0].1.span), "\"ml\"");
    assert!(matches!(&entries[1].0, ObjectKey::Name(i) if i.name == "quoted"));
    let ObjectKey::Expr(k) = &entries[2].0 else { panic!("{:?}", entries[2].0) };
    assert!(matches!(&k.kind, ExprKind::Traversal { root, .. } if root.name == "local"));
    assert!(matches!(&entries[3].0, ObjectKey::Expr(e) if matches!(e.kind, ExprKind::Template(_))));
}

#[test]
fn traversals_and_access() {
    let text =
        "a = gpu_pool.train.gpu[0].x\nb = v.*.id\nc = v[*].id\nd = [1, 2][0]\ne = (local.m).key\nf = x\ng = l.0\n";
    let body = parse_ok(text);
    let a = attr(&body, "a");
    assert_eq!(src(text, a.span), "gpu_pool.train.gpu[0].x");
    let ExprKind::Traversal { root, steps } = &a.kind else { panic!() };
    assert_eq!(root.name, "gpu_pool");
    assert_eq!(src(text, root.span), "gpu_pool");
    assert_eq!(steps.len(), 4);
    assert!(matches!(&steps[0], Step::Attr(i) if i.name == "train" && src(text, i.span) == "train"));
    assert!(matches!(&steps[2], Step::Index(e) if e.kind == ExprKind::Number(0.0) && src(text, e.span) == "0"));
    for name in ["b", "c"] {
        let ExprKind::Traversal { steps, .. } = &attr(&body, name).kind else { panic!() };
        assert!(matches!(steps[0], Step::Splat(_)), "{name}: {steps:?}");
        assert!(matches!(&steps[1], Step::Attr(i) if i.name == "id"));
    }
    let ExprKind::Access { expr, steps } = &attr(&body, "d").kind else { panic!() };
    assert!(matches!(expr.kind, ExprKind::Array(_)));
    assert_eq!(steps.len(), 1);
    let ExprKind::Access { expr, steps } = &attr(&body, "e").kind else { panic!() };
    assert!(matches!(&expr.kind, ExprKind::Traversal { root, steps } if root.name == "local" && steps.len() == 1));
    assert!(matches!(&steps[0], Step::Attr(i) if i.name == "key"));
    assert!(
        matches!(&attr(&body, "f").kind, ExprKind::Traversal { root, steps } if root.name == "x" && steps.is_empty())
    );
    let ExprKind::Traversal { steps, .. } = &attr(&body, "g").kind else { panic!() };
    assert!(matches!(&steps[0], Step::Index(e) if e.kind == ExprKind::Number(0.0)));
}

#[test]
fn calls() {
    let text = "a = max(1, var.x)\nb = concat(xs...)\nc = provider::aws::arn(1)\n";
    let body = parse_ok(text);
    let ExprKind::Call { name, args, expand_final } = &attr(&body, "a").kind else { panic!() };
    assert_eq!((name.name.as_str(), src(text, name.span)), ("max", "max"));
    assert_eq!(args.len(), 2);
    assert_eq!(src(text, args[1].span), "var.x");
    assert!(!expand_final);
    assert!(matches!(&attr(&body, "b").kind, ExprKind::Call { expand_final: true, .. }));
    let ExprKind::Call { name, .. } = &attr(&body, "c").kind else { panic!() };
    assert_eq!(name.name, "provider::aws::arn");
    assert_eq!(src(text, name.span), "provider::aws::arn");
}

#[test]
fn operators() {
    let e = expr_ok("!a && b || c == 1");
    let ExprKind::Binary { op: BinaryOp::Or, lhs, .. } = &e.kind else { panic!("{e:?}") };
    let ExprKind::Binary { op: BinaryOp::And, lhs, .. } = &lhs.kind else { panic!() };
    assert!(matches!(&lhs.kind, ExprKind::Unary { op: UnaryOp::Not, .. }));
    let ops = [
        ("1 + 2", BinaryOp::Add),
        ("1 - 2", BinaryOp::Sub),
        ("1 * 2", BinaryOp::Mul),
        ("1 / 2", BinaryOp::Div),
        ("1 % 2", BinaryOp::Mod),
        ("1 != 2", BinaryOp::NotEq),
        ("1 < 2", BinaryOp::Lt),
        ("1 <= 2", BinaryOp::LtEq),
        ("1 > 2", BinaryOp::Gt),
        ("1 >= 2", BinaryOp::GtEq),
    ];
    for (text, want) in ops {
        let e = expr_ok(text);
        assert!(matches!(e.kind, ExprKind::Binary { op, .. } if op == want), "{text}");
        assert_eq!(src(text, e.span), text);
    }
    let e = expr_ok("-x");
    assert!(matches!(&e.kind, ExprKind::Unary { op: UnaryOp::Neg, expr } if src("-x", expr.span) == "x"));
    assert_eq!(expr_ok("- 2").kind, ExprKind::Number(-2.0));
    assert_eq!(expr_ok("(1)").kind, ExprKind::Number(1.0));
}

#[test]
fn conditional_and_for() {
    let text = "cond ? \"a\" : b";
    let e = expr_ok(text);
    let ExprKind::Conditional { cond, then, otherwise } = &e.kind else { panic!() };
    assert_eq!((src(text, cond.span), src(text, then.span), src(text, otherwise.span)), ("cond", "\"a\"", "b"));
    let text = "[for i, x in xs : x * 2 if x > 0]";
    let ExprKind::For(f) = expr_ok(text).kind else { panic!() };
    assert_eq!(f.key_var.as_ref().map(|k| k.name.as_str()), Some("i"));
    assert_eq!(src(text, f.value_var.span), "x");
    assert_eq!(src(text, f.collection.span), "xs");
    assert!(f.key_expr.is_none());
    assert_eq!(src(text, f.value_expr.span), "x * 2");
    assert_eq!(f.cond.as_ref().map(|c| src(text, c.span)), Some("x > 0"));
    let ExprKind::For(f) = expr_ok("{for k, v in m : v => k...}").kind else { panic!() };
    assert!(f.grouping && f.key_expr.is_some() && f.cond.is_none());
}

#[test]
fn expression_offsets() {
    let mut d = Diagnostics::default();
    let e = parse_expression(3, "a + b", 10, &mut d).expect("parses");
    assert_eq!(e.span, Span::new(3, 10, 15));
    let ExprKind::Binary { rhs, .. } = &e.kind else { panic!() };
    assert_eq!(rhs.span, Span::new(3, 14, 15));
    assert!(parse_expression(0, "a +", 7, &mut d).is_none());
    assert!(d.items[0].primary().is_some_and(|s| s.start >= 7));
}

// ---- templates (YAML values) --------------------------------------------------------

#[test]
fn template_offsets() {
    let file = "name: \"gpu-${var.team}\"\n";
    let offset = file.find("gpu").expect("present");
    let content = "gpu-${var.team}";
    let mut d = Diagnostics::default();
    let e = parse_template(1, content, offset, &mut d).expect("parses");
    assert!(d.items.is_empty());
    assert_eq!(e.span, Span::new(1, offset, offset + content.len()));
    let ExprKind::Template(parts) = &e.kind else { panic!() };
    let TemplatePart::Interp(inner) = &parts[1] else { panic!() };
    assert_eq!(src(file, inner.span), "var.team");
}

#[test]
fn template_plain_and_escaped() {
    let mut d = Diagnostics::default();
    let plain = parse_template(0, "a \"quoted\" C:\\path", 0, &mut d).expect("parses");
    assert_eq!(plain.kind, ExprKind::String("a \"quoted\" C:\\path".into()));
    let esc = parse_template(0, "cost $${x}", 0, &mut d).expect("parses");
    assert_eq!(esc.kind, ExprKind::String("cost ${x}".into()));
    assert!(parse_template(0, "bad ${", 5, &mut d).is_none());
    assert_eq!(d.items.len(), 1);
    assert_eq!(d.items[0].code, "gpuplan::syntax");
}

// ---- errors ------------------------------------------------------------------------

#[test]
fn syntax_error_missing_equals() {
    let (d, (line, col)) = parse_err("a = 1\nb 2\n");
    assert_eq!(d.code, "gpuplan::syntax");
    assert!(d.message.starts_with("invalid HCL syntax: missing `=`"), "{}", d.message);
    assert_eq!((line, col), (2, 3));
    assert!(d.help.is_some());
}

#[test]
fn syntax_error_unclosed_brace() {
    let text = "a = 1\npool \"x\" {\n  b = 2\n";
    let (d, (line, _)) = parse_err(text);
    assert!(d.message.contains("unclosed `{`"), "{}", d.message);
    assert!(line >= 3, "{line}");
    assert_eq!(d.labels[1].0.start as usize, text.find('{').expect("present"));
}

#[test]
fn syntax_error_unclosed_string() {
    let (d, (line, col)) = parse_err("a = 1\nb = \"abc\n");
    assert!(d.message.contains("unclosed string"), "{}", d.message);
    assert_eq!((line, col), (2, 5));
    assert!(d.help.as_deref().is_some_and(|h| h.contains('"')));
}

#[test]
fn syntax_error_unmatched_and_duplicate() {
    let (d, (line, _)) = parse_err("a = 1\n}\n");
    assert!(d.message.contains("unexpected `}`"), "{}", d.message);
    assert_eq!(line, 2);
    let (d, (line, col)) = parse_err("a = 1\na = 2\n");
    assert!(d.message.contains("defined twice"), "{}", d.message);
    assert_eq!((line, col), (2, 1));
}

#[test]
fn syntax_error_long_expectations_are_shortened() {
    let (d, (line, col)) = parse_err("a = 1 +\n");
    assert_eq!(d.message, "invalid HCL syntax: expected a value");
    assert_eq!((line, col), (1, 8));
    let (d, (_, col)) = parse_err("a = [1 2]\n");
    assert_eq!(col, 8);
    assert_eq!(d.help.as_deref(), Some("separate items with `,`"));
}

#[test]
fn number_out_of_range() {
    for text in ["a = 1e999\n", &format!("a = {}\n", "9".repeat(400))] {
        let (d, (line, col)) = parse_err(text);
        assert_eq!(d.message, "number out of range");
        assert_eq!((line, col), (1, 5));
    }
}

#[test]
fn deep_nesting_is_refused() {
    let deep = format!("a = {}{}\n", "[".repeat(200), "]".repeat(200));
    let (d, (line, col)) = parse_err(&deep);
    assert_eq!(d.message, "nesting too deep (more than 64 levels)");
    assert_eq!((line, col), (1, 5 + 64));
    let blocks = format!("{}{}", "b {\n".repeat(100), "}\n".repeat(100));
    let (d, (line, _)) = parse_err(&blocks);
    assert!(d.message.starts_with("nesting too deep"));
    assert_eq!(line, 65);
    let interp = format!("a = {}x{}\n", "\"${".repeat(100), "}\"".repeat(100));
    assert!(parse_err(&interp).0.message.starts_with("nesting too deep"));
    let mut d = Diagnostics::default();
    assert!(parse_template(0, &format!("{}x{}", "${(".repeat(50), ")}".repeat(50)), 0, &mut d).is_none());
    // Exactly at the limit: accepted, and hcl-edit's own recursion copes.
    let ok = format!("a = {}{}\n", "[".repeat(64), "]".repeat(64));
    parse_ok(&ok);
    let ok = format!("{}{}", "b {\n".repeat(64), "}\n".repeat(64));
    assert_eq!(parse_ok(&ok).blocks.len(), 1);
}

#[test]
fn junk_does_not_panic() {
    let inputs = [
        "\0\0\0",
        "a = \"\u{0}\"",
        "\u{feff}a = 1",
        "a = <<EOF\nno end",
        "a = <<",
        "é = ü",
        "a = \"${",
        "a = \"\\",
        "/* unterminated",
        "a = 1.",
        "a = 1e",
        "{{{{]]]]",
        "a = ${x}",
        "\u{10ffff}\u{7f}",
    ];
    for text in inputs {
        let mut d = Diagnostics::default();
        let _ = parse(0, text, &mut d);
        let _ = format(0, text, &mut d);
        let _ = parse_expression(0, text, 0, &mut d);
        let _ = parse_template(0, text, 0, &mut d);
    }
    let bytes: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let text = String::from_utf8_lossy(&bytes);
    let mut d = Diagnostics::default();
    assert!(parse(0, &text, &mut d).is_none());
    assert!(d.has_errors());
}

// ---- formatting ----------------------------------------------------------------------

#[test]
fn fmt_aligns_equals_in_runs() {
    let text =
        "pool \"a\" {\ngpu=\"A100\"\n    gpus_per_node   =8\n\nx = 1\n  nodes {\n  min=0\n  desired = 2\n  }\n}\n";
    let want = "pool \"a\" {\n  gpu           = \"A100\"\n  gpus_per_node = 8\n\n  x = 1\n  nodes {\n    min     = 0\n    desired = 2\n  }\n}\n";
    assert_eq!(assert_fmt_sound(text), want);
}

#[test]
fn fmt_keeps_comments_and_aligns_trailing_ones() {
    let text = "# header\n\n\n\nb {   # open\n  // lead\n  a = 1 # one\n  long_name = 2    // two\n  /* block */\n  c = 3\n}\n";
    let want =
        "# header\n\nb { # open\n  // lead\n  a         = 1 # one\n  long_name = 2 // two\n  /* block */\n  c = 3\n}\n";
    assert_eq!(assert_fmt_sound(text), want);
}

#[test]
fn fmt_blank_lines_and_trailing_whitespace() {
    let text = "\n\na = 1   \n\n\n\nb {\n\n  c = 2\n\n}\n\n\n";
    assert_eq!(assert_fmt_sound(text), "a = 1\n\nb {\n  c = 2\n}\n");
    assert_eq!(fmt_ok("a = 1"), "a = 1\n");
    assert_eq!(fmt_ok(""), "");
}

#[test]
fn fmt_normalizes_spacing() {
    let text = "a = [ \"a\" ,\"b\" ]\nb = {a=1,b=[1,2]}\nc = max( 1 ,2 )\nd = x[ 0 ].y\ne = -x+1\nf = !a&&b\ng = c?1:2\nh = {}\ni = [for x in xs: x*2 if x>1]\nj = concat(xs ...)\nk = v[*].id\n";
    let want = "a = [\"a\", \"b\"]\nb = { a = 1, b = [1, 2] }\nc = max(1, 2)\nd = x[0].y\ne = -x + 1\nf = !a && b\ng = c ? 1 : 2\nh = {}\ni = [for x in xs : x * 2 if x > 1]\nj = concat(xs...)\nk = v[*].id\n";
    assert_eq!(assert_fmt_sound(text), want);
}

#[test]
fn fmt_multiline_expressions() {
    let text = "labels = {\nteam = \"ml\"\n    owner_email = \"a@b\"\n}\nzones = [\n\"a\",\n  \"b\",\n]\nx = merge(a, [\n1,\n])\n";
    let want = "labels = {\n  team        = \"ml\"\n  owner_email = \"a@b\"\n}\nzones = [\n  \"a\",\n  \"b\",\n]\nx = merge(a, [\n  1,\n])\n";
    assert_eq!(assert_fmt_sound(text), want);
}

#[test]
fn fmt_keeps_heredocs_and_strings_verbatim() {
    let text = "b {\nmsg = <<EOT\n  keep   this   \n    as is\nEOT\n    s = \"a  ${ x+1 }  b\"\n}\n";
    let want = "b {\n  msg = <<EOT\n  keep   this   \n    as is\nEOT\n  s = \"a  ${ x+1 }  b\"\n}\n";
    assert_eq!(assert_fmt_sound(text), want);
}

#[test]
fn fmt_design_example_round_trips() {
    let text = r#"provider "sim" {}                      # embedded cloud

gpu_pool "train" {
  provider       = "sim"               # the provider block's name (or alias)
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b"]   # optional
  gpu            = "A100-80GB"
  nodes {
    min     = 0
    desired = 2
  }
  labels = { team = var.team }
  count = length(var.x) > 0 ? 1 : 0
}

policy "fleet_hourly_cap" {
  assert      = plan.cost.hourly_after <= 500
  message     = "fleet would cost ${plan.cost.hourly_after} USD/h"
}
"#;
    let out = assert_fmt_sound(text);
    let col = |prefix: &str| out.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.find('#'));
    assert!(col("  provider = \"sim\" ").is_some(), "{out}");
    assert_eq!(col("  provider = \"sim\" "), col("  zones    = [\"us-east-1a\", \"us-east-1b\"] #"), "{out}");
    assert!(out.starts_with("provider \"sim\" {} # embedded cloud\n"), "{out}");
    assert!(out.contains("  labels = { team = var.team }\n  count  = length(var.x) > 0 ? 1 : 0\n"), "{out}");
    assert!(out.contains("  assert  = plan.cost.hourly_after <= 500\n"), "{out}");
}

#[test]
fn fmt_crlf_becomes_lf() {
    let text = "a = 1 # c\r\nb {\r\n    c = 2\r\n}\r\n";
    assert_eq!(assert_fmt_sound(text), "a = 1 # c\nb {\n  c = 2\n}\n");
}

#[test]
fn fmt_refuses_invalid_input() {
    let mut d = Diagnostics::default();
    assert!(format(0, "a = {", &mut d).is_none());
    assert!(d.has_errors());
}

const CORPUS: &str = r#"# fleet
provider "sim" {}
gpu_pool "train" {
  gpu = "A100" // model
  zones = ["a", "b"]
  labels = { team = var.team, "x-y" = 1 }
  nodes {
    min = 0
    max = local.n[0] * 2 + -1
  }
  msg = "gpu-${var.team}-${x ? 1 : 2}"
  cmd = <<-EOT
    run ${var.x}
  EOT
  m = { for k, v in var.m : k => v if v != null }
  l = [for x in xs : upper(x)]
  s = v[*].id
  c = concat(a, [1, 2]...)
  /* block */
}
"#;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    /// Whitespace inserted anywhere: if the result still parses, `fmt` must keep its tree,
    /// be idempotent and never fall back to "left unchanged".
    #[test]
    fn fmt_survives_random_whitespace(edits in proptest::collection::vec((0usize..2000, 0usize..4), 1..12)) {
        let mut text = CORPUS.to_string();
        for (pos, what) in edits {
            let mut at = pos % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.insert_str(at, ["  ", "\n", "\n\n", "\t"][what]);
        }
        let mut d = Diagnostics::default();
        if let Some(before) = parse(0, &text, &mut d) {
            let out = format(0, &text, &mut d).expect("formats");
            proptest::prop_assert!(d.items.is_empty(), "{:?}\n{text}", d.items);
            proptest::prop_assert!(same::same_tree(&before, &parse_ok(&out)));
            proptest::prop_assert_eq!(fmt_ok(&out), out);
        }
    }

    #[test]
    fn parse_never_panics(text in "[a-z0-9 \\n\"{}\\[\\]()=.,:?!<>$%*#/~-]{0,80}") {
        let mut d = Diagnostics::default();
        if parse(0, &text, &mut d).is_some() {
            let out = format(0, &text, &mut d).expect("formats");
            proptest::prop_assert!(d.items.is_empty(), "{:?}", d.items);
            proptest::prop_assert_eq!(fmt_ok(&out), out);
        } else {
            proptest::prop_assert!(d.has_errors());
        }
        let _ = parse_expression(0, &text, 3, &mut d);
        let _ = parse_template(0, &text, 3, &mut d);
    }
}

// ---- the fast path (`fast.rs`) against hcl-edit ----

/// A small deterministic generator (xorshift), so a failing seed can be replayed.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
    fn space(&mut self) -> &'static str {
        self.pick(&["", " ", "  ", "\t", " "])
    }
    fn name(&mut self) -> String {
        let n = self.pick(&["gpu", "nodes", "min", "a", "_x", "pool-1", "gpu_pool", "p000001", "T2", "provider"]);
        n.to_string()
    }
    fn comment(&mut self) -> &'static str {
        self.pick(&["", "", "", " # note", " // two slashes", "#", " # has \"quotes\" and ${x}"])
    }
    fn value(&mut self, depth: usize) -> String {
        let max = if depth > 3 { 6 } else { 8 };
        match self.below(max) {
            0 => format!(
                "\"{}\"",
                self.pick(&["", "L4", "us-east-1", "a b", "$5 and 100%", "tab\there", "#not", "//no"])
            ),
            1 => self.pick(&["0", "1", "12", "3.5", "0.25", "100000", "999999999999999"]).to_string(),
            2 => self.pick(&["true", "false", "null"]).to_string(),
            3 => {
                let mut t = self.name();
                for _ in 0..self.below(3) {
                    t.push('.');
                    t.push_str(&self.name());
                }
                t
            }
            4 | 5 => self.name(),
            6 => {
                let n = self.below(4);
                let multi = self.below(2) == 0;
                let mut s = String::from("[");
                for k in 0..n {
                    s.push_str(if multi { "\n    " } else { self.space() });
                    s.push_str(&self.value(depth + 1));
                    if k + 1 < n || self.below(2) == 0 {
                        s.push(',');
                    }
                }
                s.push_str(if multi { "\n  ]" } else { "]" });
                s
            }
            _ => {
                let n = self.below(4);
                let multi = n == 0 || self.below(2) == 0;
                let mut s = String::from("{");
                let mut keys = vec![];
                for k in 0..n {
                    // hcl-edit refuses a key given twice: plain files do not.
                    let key = self.name();
                    if keys.contains(&key) {
                        continue;
                    }
                    keys.push(key.clone());
                    s.push_str(if multi { "\n    " } else { " " });
                    if self.below(3) == 0 {
                        s.push_str(&format!("\"{key}\""));
                    } else {
                        s.push_str(&key);
                    }
                    s.push_str(self.pick(&[" = ", "=", " : ", ": "]));
                    s.push_str(&self.value(depth + 1));
                    if multi {
                        s.push_str(self.pick(&["", ",", "", " # c"]));
                    } else if k + 1 < n {
                        s.push(',');
                    }
                }
                s.push_str(if multi { "\n  }" } else { " }" });
                s
            }
        }
    }
    fn body(&mut self, depth: usize, out: &mut String) {
        let mut keys = vec![];
        for _ in 0..self.below(5) {
            out.push_str(self.pick(&["", "", "\n", "# a comment line\n", "  // another\n"]));
            out.push_str(&"  ".repeat(depth));
            if depth < 3 && self.below(3) == 0 {
                out.push_str(&self.name());
                for _ in 0..self.below(3) {
                    out.push(' ');
                    if self.below(2) == 0 {
                        out.push_str(&format!("\"{}\"", self.pick(&["train", "a b", "", "x-1"])));
                    } else {
                        out.push_str(&self.name());
                    }
                }
                out.push_str(self.space());
                out.push('{');
                out.push_str(self.comment());
                out.push('\n');
                self.body(depth + 1, out);
                out.push_str(&"  ".repeat(depth));
                out.push('}');
            } else {
                let key = self.name();
                if keys.contains(&key) {
                    out.push('\n');
                    continue;
                }
                keys.push(key.clone());
                out.push_str(&key);
                out.push_str(self.space());
                out.push('=');
                out.push_str(self.space());
                out.push_str(&self.value(0));
            }
            out.push_str(self.space());
            out.push_str(self.comment());
            out.push('\n');
        }
    }
}

fn fast_and_slow(text: &str) -> (Option<Body>, Option<Body>, usize) {
    let mut d = Diagnostics::default();
    let slow = parse_with_hcl_edit(7, text, &mut d);
    (fast::parse(7, text), slow, d.items.len())
}

#[test]
fn the_fast_path_reads_generated_plain_files_exactly_as_hcl_edit_does() {
    for seed in 1..4000u64 {
        let mut g = Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut text = String::new();
        g.body(0, &mut text);
        let (fast, slow, errors) = fast_and_slow(&text);
        assert_eq!(errors, 0, "seed {seed}: hcl-edit refused the generated text:\n{text}");
        let fast = fast.unwrap_or_else(|| panic!("seed {seed}: the fast path gave up on plain text:\n{text}"));
        assert_eq!(Some(fast), slow, "seed {seed}:\n{text}");
    }
}

#[test]
fn the_fast_path_gives_way_to_hcl_edit_on_anything_else_and_never_disagrees() {
    // Each is spliced into generated files at random places: whenever the fast path still
    // answers, hcl-edit must accept the text and give the same tree.
    let hazards = [
        "${x}",
        "-1",
        " + 1",
        "/* c */",
        "\r",
        "é",
        "[0]",
        ".0",
        ".*",
        "(",
        ")",
        "{ a = 1 }",
        "\"\\n\"",
        "<<EOF\n",
        "?",
        ":",
        "=",
        "==",
        "!",
        ",",
        "]",
        "[",
        "}",
        "{",
        "\n",
        "\"",
        "for",
        " in ",
        "1e5",
        "01",
        "1.",
        "%{",
        "$${",
        "\\",
        "#",
        "//",
        "/",
        "a b",
        "\t",
        "x = 1\n",
        "}\n",
        "b {\n",
        "\"lbl\" ",
        "true.x",
        "null(",
    ];
    let mut checked = 0;
    for seed in 1..6000u64 {
        let mut g = Gen(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        let mut text = String::new();
        g.body(0, &mut text);
        let mut at = g.below(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.insert_str(at, g.pick(&hazards));
        let (fast, slow, errors) = fast_and_slow(&text);
        if let Some(fast) = fast {
            assert_eq!(errors, 0, "seed {seed}: the fast path accepted text hcl-edit refuses:\n{text:?}");
            assert_eq!(Some(fast), slow, "seed {seed}:\n{text:?}");
            checked += 1;
        }
    }
    // The splices must not all land where they end the fast path, or nothing was compared.
    assert!(checked > 500, "only {checked} spliced files were read by the fast path");
}

#[test]
fn the_fast_path_reads_a_fleet_file_and_stops_at_what_it_does_not_know() {
    let pools = "gpu_pool \"p000001\" {\n  provider      = \"sim\"\n  gpu           = \"L4\"\n  gpus_per_node = 1\n  depends_on    = [gpu_pool.p000000]\n  labels        = { team = \"ml\" }\n  nodes {\n    min     = 0\n    desired = 1\n  }\n}\n";
    assert!(fast::parse(0, pools).is_some(), "the shape of every generated fleet file must take the fast path");
    for other in [
        "a = \"x-${var.b}\"\n",
        "a = -1\n",
        "a = 1 + 2\n",
        "a = max(1, 2)\n",
        "a = local.x[0]\n",
        "a = [for x in y : x]\n",
        "b { c = 1 }\n",
        "a = <<EOF\nx\nEOF\n",
        "a = 1\r\n",
        "/* c */ a = 1\n",
    ] {
        assert!(fast::parse(0, other).is_none(), "the fast path must leave {other:?} to hcl-edit");
        // ...which still reads it (the debug cross-check is not involved: hcl-edit only).
        assert!(!parse_ok(other).attrs.is_empty() || !parse_ok(other).blocks.is_empty(), "{other:?} read as empty");
    }
}
