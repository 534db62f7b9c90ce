//! Comparing raw trees while ignoring spans: what `fmt` must preserve (checked on every
//! run before formatted text is handed out, and in tests).

use crate::diag::Span;
use crate::spec::raw::{Body, Expr, ExprKind, ObjectKey, Step, TemplatePart};

/// True when two trees are equal ignoring spans (what `fmt` must preserve).
pub(super) fn same_tree(a: &Body, b: &Body) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    zero_body(&mut a);
    zero_body(&mut b);
    a == b
}

fn zero_body(b: &mut Body) {
    b.span = Span::default();
    for a in &mut b.attrs {
        a.key.span = Span::default();
        zero_expr(&mut a.value);
    }
    for blk in &mut b.blocks {
        blk.span = Span::default();
        blk.kind.span = Span::default();
        blk.labels.iter_mut().for_each(|l| l.span = Span::default());
        zero_body(&mut blk.body);
    }
}

fn zero_expr(e: &mut Expr) {
    e.span = Span::default();
    let zero_steps = |steps: &mut Vec<Step>| {
        for s in steps {
            match s {
                Step::Attr(i) => i.span = Span::default(),
                Step::Index(e) => zero_expr(e),
                Step::Splat(sp) => *sp = Span::default(),
            }
        }
    };
    match &mut e.kind {
        ExprKind::Null
        | ExprKind::Bool(_)
        | ExprKind::Number(_)
        | ExprKind::String(_)
        | ExprKind::Unsupported(_)
        | ExprKind::Invalid => {}
        ExprKind::Template(parts) => parts.iter_mut().for_each(|p| {
            if let TemplatePart::Interp(e) = p {
                zero_expr(e)
            }
        }),
        ExprKind::Array(items) => items.iter_mut().for_each(zero_expr),
        ExprKind::Object(items) => {
            for (k, v) in items {
                match k {
                    ObjectKey::Name(i) => i.span = Span::default(),
                    ObjectKey::Expr(e) => zero_expr(e),
                }
                zero_expr(v);
            }
        }
        ExprKind::Traversal { root, steps } => {
            root.span = Span::default();
            zero_steps(steps);
        }
        ExprKind::Call { name, args, .. } => {
            name.span = Span::default();
            args.iter_mut().for_each(zero_expr);
        }
        ExprKind::Unary { expr, .. } => zero_expr(expr),
        ExprKind::Binary { lhs, rhs, .. } => {
            zero_expr(lhs);
            zero_expr(rhs);
        }
        ExprKind::Conditional { cond, then, otherwise } => {
            zero_expr(cond);
            zero_expr(then);
            zero_expr(otherwise);
        }
        ExprKind::For(f) => {
            if let Some(k) = &mut f.key_var {
                k.span = Span::default();
            }
            f.value_var.span = Span::default();
            zero_expr(&mut f.collection);
            f.key_expr.iter_mut().for_each(zero_expr);
            zero_expr(&mut f.value_expr);
            f.cond.iter_mut().for_each(zero_expr);
        }
        ExprKind::Access { expr, steps } => {
            zero_expr(expr);
            zero_steps(steps);
        }
    }
}
