//! Tests of `format`: layout, comments, idempotence, and that meaning never changes.

use super::{format, parse};
use crate::diag::{Diagnostics, Span};
use crate::spec::raw::{Attr, Block, Body, Expr, ExprKind, ObjectKey, TemplatePart};

fn fmt(text: &str) -> String {
    let mut d = Diagnostics::default();
    let out = format(0, text, &mut d);
    assert!(d.items.is_empty(), "unexpected diagnostics: {:#?}", d.items);
    out.expect("formats")
}

/// The raw tree with every span zeroed, to compare meaning across layouts.
fn zeroed(mut parsed: Body) -> Body {
    fn expr(e: &mut Expr) {
        e.span = Span::default();
        match &mut e.kind {
            ExprKind::Array(items) => items.iter_mut().for_each(expr),
            ExprKind::Object(items) => items.iter_mut().for_each(|(k, v)| {
                match k {
                    ObjectKey::Name(i) => i.span = Span::default(),
                    ObjectKey::Expr(e) => expr(e),
                }
                expr(v)
            }),
            ExprKind::Template(parts) => parts.iter_mut().for_each(|p| {
                if let TemplatePart::Interp(e) = p {
                    expr(e)
                }
            }),
            _ => {}
        }
    }
    fn body(b: &mut Body) {
        b.span = Span::default();
        for Attr { key, value } in &mut b.attrs {
            key.span = Span::default();
            expr(value);
        }
        for Block { kind, labels, body: inner, span } in &mut b.blocks {
            kind.span = Span::default();
            labels.iter_mut().for_each(|l| l.span = Span::default());
            *span = Span::default();
            body(inner);
        }
    }
    body(&mut parsed);
    parsed
}

fn raw(text: &str) -> Body {
    let mut d = Diagnostics::default();
    let parsed = parse(0, text, &mut d).unwrap_or_else(|| panic!("does not parse: {:#?}\n{text}", d.items));
    zeroed(parsed)
}

/// Format, then check idempotence and that the raw tree is unchanged.
fn check(input: &str, expected: &str) {
    let out = fmt(input);
    assert_eq!(out, expected, "\n--- got ---\n{out}--- expected ---\n{expected}");
    assert_eq!(fmt(&out), out, "not idempotent");
    assert_eq!(raw(&out), raw(input), "meaning changed");
}

#[test]
fn reindents_to_two_spaces() {
    check(
        "gpu_pools:\n     train:\n          gpu:    A100\n          zones:\n          - a\n          -    b\n",
        "gpu_pools:\n  train:\n    gpu: A100\n    zones:\n      - a\n      - b\n",
    );
}

#[test]
fn keeps_comments_in_place() {
    let input = "\
# header comment
providers:   # trailing on a key
    sim: {}      # trailing on a value

    # own line, indented like the next line
    aws:
        region: us-east-1


# before the next kind
gpu_pools: {}
# at the end
";
    let expected = "\
# header comment
providers: # trailing on a key
  sim: {} # trailing on a value

  # own line, indented like the next line
  aws:
    region: us-east-1

# before the next kind
gpu_pools: {}
# at the end
";
    check(input, expected);
}

#[test]
fn normalizes_flow_collections() {
    check(
        "gpu_pools:\n  p:\n    nodes: {min:   0,desired: 2 ,  max: 4}\n    zones: [ a,b ,   c ]\n    empty: { }\n    e2: [ ]\n    nested: {a: [1,2], b: {c: d}}\n",
        "gpu_pools:\n  p:\n    nodes: {min: 0, desired: 2, max: 4}\n    zones: [a, b, c]\n    empty: {}\n    e2: []\n    nested: {a: [1, 2], b: {c: d}}\n",
    );
}

#[test]
fn multi_line_flow_collections_are_joined_unless_they_hold_comments() {
    check("locals:\n  l: [\n    a,\n    b\n  ]\n", "locals:\n  l: [a, b]\n");
    let with_comment = "locals:\n  l: [\n        a, # first\n        b\n  ]\n";
    check(with_comment, "locals:\n  l: [\n    a, # first\n    b\n    ]\n");
}

#[test]
fn keeps_scalar_spellings() {
    check(
        "locals:\n  a:   'single # not a comment'\n  b:    \"double\\n\"\n  c: !!str   12\n  d: &anc  plain text\n  e:   *anc\n  f: ~\n  g:\n",
        "locals:\n  a: 'single # not a comment'\n  b: \"double\\n\"\n  c: !!str 12\n  d: &anc plain text\n  e: *anc\n  f: ~\n  g:\n",
    );
}

#[test]
fn block_scalars_move_with_their_key() {
    check(
        "job_templates:\n    t:\n        command: |\n            python train.py\n              --epochs 3\n\n            echo done\n        note: >-\n            folded\n            text\n        keep: |+\n            kept\n\n        after: 1\n",
        "job_templates:\n  t:\n    command: |\n      python train.py\n        --epochs 3\n\n      echo done\n    note: >-\n      folded\n      text\n    keep: |+\n      kept\n\n    after: 1\n",
    );
    // With an indentation indicator the content keeps its distance from the key.
    check("a:\n    b: |2\n         x\n", "a:\n  b: |2\n       x\n");
}

#[test]
fn sequences_of_mappings_are_compact() {
    check(
        "jobs:\n  j:\n    env:\n    -   name: A\n        value: 1\n    -\n        name: B\n    - - nested\n      - seq\n    -\n    - &x\n      k: v\n",
        "jobs:\n  j:\n    env:\n      - name: A\n        value: 1\n      - name: B\n      - - nested\n        - seq\n      -\n      - &x\n        k: v\n",
    );
}

#[test]
fn removes_the_document_marker_and_extra_blank_lines() {
    check("---\n\n\nproviders:\n  sim: {}\n\n\n\njobs: {}\n\n\n", "providers:\n  sim: {}\n\njobs: {}\n");
    check("--- # why\nproviders: {}\n...\n", "# why\nproviders: {}\n");
}

#[test]
fn trailing_whitespace_and_tabs_after_values_go() {
    check("providers:   \n  sim:\t{}   \n", "providers:\n  sim: {}\n");
}

#[test]
fn comments_between_key_and_value_stay_before_the_value() {
    check(
        "locals:\n  a: # why\n    1\n  b:\n    # about c\n    c: 2\n",
        "locals:\n  a: # why\n    1\n  b:\n    # about c\n    c: 2\n",
    );
}

#[test]
fn multi_line_plain_and_quoted_scalars_are_reindented() {
    check(
        "locals:\n      a: this is\n            a long plain\n      b: \"quoted\n         on two lines\"\n",
        "locals:\n  a: this is\n    a long plain\n  b: \"quoted\n    on two lines\"\n",
    );
}

#[test]
fn empty_and_comment_only_files() {
    assert_eq!(fmt(""), "");
    assert_eq!(fmt("\n\n"), "");
    assert_eq!(fmt("  # only a comment   \n\n\n# two\n"), "# only a comment\n\n# two\n");
}

#[test]
fn non_ascii_is_kept() {
    check("locals:\n    équipe:   \"données ☃\"  # ☃\n", "locals:\n  équipe: \"données ☃\" # ☃\n");
}

#[test]
fn unparsable_input_returns_none() {
    let mut d = Diagnostics::default();
    assert_eq!(format(0, "a: [1,\n", &mut d), None);
    assert_eq!(d.items[0].code, "gpuplan::syntax");
    let mut d = Diagnostics::default();
    assert_eq!(format(0, "a: 1\n---\nb: 2\n", &mut d), None);
    assert_eq!(d.items[0].code, "gpuplan::yaml::multiple_documents");
}

#[test]
fn realistic_spec_round_trips() {
    let input = "\
# Fleet for the ML team
providers:
    sim: {}
    aws_eu: { type: aws, region: eu-west-1 }   # second AWS account

gpu_pools:
    train:
        provider: sim
        gpu: A100-80GB
        gpus_per_node: 8
        zones: [us-east-1a,us-east-1b]
        nodes: {min: 0, desired: 2, max: 8}
        mix:
            on_demand_base: 1
            spot_percent: 70     # of the rest
            fallback: on_demand
        labels:
            team: ml
            'cost center': \"42\"

job_templates:
    finetune:
        image: ghcr.io/acme/train:1.4
        command:
        - python
        - train.py
        env:
          - {name: EPOCHS, value: '3'}
        max_runtime: 6h
";
    let out = fmt(input);
    assert_eq!(fmt(&out), out);
    assert_eq!(raw(&out), raw(input));
    assert!(out.contains("\n  aws_eu: {type: aws, region: eu-west-1} # second AWS account\n"), "{out}");
    assert!(out.contains("\n    command:\n      - python\n      - train.py\n"), "{out}");
    assert!(out.contains("\n      spot_percent: 70 # of the rest\n"), "{out}");
    assert!(!out.lines().any(|l| l.ends_with(' ')), "trailing whitespace:\n{out}");
}

#[test]
fn crlf_and_odd_layouts_format_stably() {
    let cases = [
        "providers:\r\n  sim: {}\r\n# c\r\njobs:\r\n    j: {a: 1}\r\n",
        "a:\n- b\n- c: d\n  e: f\n",
        "? a\n: b\nc: [x, {y: z}, w: v]\n",
        "k: &a {x: 1}\nl: *a\nm: {*a : 2}\n",
        "k: [a, # one\n  b]\n",
        "- top\n- level\n",
        "'quoted key': \"v\" # c\n\"k2\":   'v2'\n",
        "a: |\n  x\n\n\n# after\nb: 2\n",
        "a:\n  - |\n    in seq\n  - >\n    folded\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: !!str\nb: !custom x\nc: !!map\n  d: 1\n",
        "a:    # c1\n  # c2\n  b: 1 # c3\n  # c4\n# c5\n",
    ];
    for input in cases {
        let out = fmt(input);
        assert_eq!(fmt(&out), out, "not idempotent for {input:?}");
        assert!(!out.lines().any(|l| l.ends_with([' ', '\t', '\r'])), "trailing whitespace in {out:?}");
        assert!(out.ends_with('\n') && !out.ends_with("\n\n"), "{out:?}");
        let comments = |t: &str| t.matches('#').count();
        assert_eq!(comments(&out), comments(input), "a comment was lost: {input:?} -> {out:?}");
    }
}

#[test]
fn formatting_junk_is_idempotent_when_it_succeeds() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let pieces = [
        "a",
        "b: ",
        "- ",
        "\n",
        "  ",
        "[",
        "]",
        "{",
        "}",
        ", ",
        "# c",
        "'q'",
        "\"d\"",
        "|\n",
        "&x ",
        "*x",
        "é",
        "? ",
        ": ",
        "\t",
        "!!str ",
        "|+\n",
        ">-\n",
        "    ",
        "'a''b'",
        "\"a\\\"b\"",
        "...\n",
        "---\n",
        "\r\n",
        "- a: 1\n",
        "k:\n",
        "|2\n",
        "<<: ",
        "\n\n",
        "%YAML 1.2\n",
        "x y",
    ];
    let mut formatted = 0;
    for _ in 0..20_000 {
        let s: String = (0..(seed % 24))
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                pieces[(seed % pieces.len() as u64) as usize]
            })
            .collect();
        let mut d = Diagnostics::default();
        if let Some(out) = format(0, &s, &mut d) {
            formatted += 1;
            let mut d2 = Diagnostics::default();
            let again = format(0, &out, &mut d2);
            assert_eq!(again.as_deref(), Some(out.as_str()), "not idempotent for {s:?} -> {out:?}: {:?}", d2.items);
        } else {
            assert!(d.has_errors(), "None without a diagnostic for {s:?}");
            let code = d.items[0].code;
            assert_ne!(code, "gpuplan::yaml::fmt_changed_meaning", "formatter bug on {s:?}");
        }
    }
    assert!(formatted > 100, "only {formatted} inputs formatted");
}
