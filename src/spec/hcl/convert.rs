//! hcl-edit syntax tree → raw tree. Pure mapping: every node gets a [`Span`] in the real
//! file (hcl-edit's byte range plus `base`, or the parent's span when hcl-edit has none).

use std::ops::Range;

use hcl_edit::Span as _;
use hcl_edit::expr::{self as hx, Expression as HExpr, TraversalOperator};
use hcl_edit::structure::{self as hs, BlockLabel, Structure};
use hcl_edit::template::{Element, Template};

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::spec::raw::{
    Attr, BinaryOp, Block, Body, Expr, ExprKind, ForExpr, Ident, ObjectKey, Step, TemplatePart, UnaryOp,
};

pub(super) struct Conv<'a> {
    pub file: u32,
    /// The text hcl-edit parsed (spans index into it before `base` is added).
    pub text: &'a str,
    /// Offset of `text` inside the file.
    pub base: usize,
    pub diags: &'a mut Diagnostics,
}

impl Conv<'_> {
    fn span(&self, range: Option<Range<usize>>, fallback: Span) -> Span {
        match range {
            Some(r) => Span::new(self.file, r.start + self.base, r.end + self.base),
            None => fallback,
        }
    }

    pub fn body(&mut self, body: &hs::Body, span: Span) -> Body {
        let mut out = Body { attrs: vec![], blocks: vec![], span };
        for structure in body.iter() {
            match structure {
                Structure::Attribute(a) => {
                    let aspan = self.span(a.span(), span);
                    let key = Ident::new(a.key.as_str(), self.span(a.key.span(), aspan));
                    let value = self.expr(&a.value, aspan);
                    out.attrs.push(Attr { key, value });
                }
                Structure::Block(b) => out.blocks.push(self.block(b, span)),
            }
        }
        out
    }

    fn block(&mut self, block: &hs::Block, parent: Span) -> Block {
        let span = self.span(block.span(), parent);
        let kind = Ident::new(block.ident.as_str(), self.span(block.ident.span(), span));
        let labels: Vec<Ident> = block
            .labels
            .iter()
            .map(|l| {
                let name = match l {
                    BlockLabel::Ident(i) => i.as_str().to_string(),
                    BlockLabel::String(s) => s.value().clone(),
                };
                Ident::new(name, self.span(l.span(), span))
            })
            .collect();
        // hcl-edit's body span covers only its structures; users expect `{ ... }`.
        let header_end = labels.last().map_or(kind.span.end, |l| l.span.end) as usize;
        let body_span = match super::lex::find(self.text.as_bytes(), header_end.saturating_sub(self.base), b"{") {
            Some(open) if open + self.base < span.end as usize => {
                Span::new(self.file, open + self.base, span.end as usize)
            }
            _ => span,
        };
        let body = self.body(&block.body, body_span);
        Block { kind, labels, body, span }
    }

    pub fn expr(&mut self, e: &HExpr, parent: Span) -> Expr {
        let sp = self.span(e.span(), parent);
        let kind = match e {
            HExpr::Null(_) => ExprKind::Null,
            HExpr::Bool(b) => ExprKind::Bool(*b.value()),
            HExpr::Number(n) => match n.value().as_f64() {
                Some(f) if f.is_finite() => ExprKind::Number(f),
                _ => {
                    self.diags.push(
                        Diagnostic::error("gpuplan::syntax", "number out of range")
                            .at(sp, "does not fit a 64-bit float")
                            .help("use a smaller number"),
                    );
                    ExprKind::Number(0.0)
                }
            },
            HExpr::String(s) => ExprKind::String(s.value().clone()),
            HExpr::Array(a) => ExprKind::Array(a.iter().map(|x| self.expr(x, sp)).collect()),
            HExpr::Object(o) => ExprKind::Object(
                o.iter()
                    .map(|(k, v)| {
                        let key = self.object_key(k, sp);
                        (key, self.expr(v.expr(), sp))
                    })
                    .collect(),
            ),
            HExpr::StringTemplate(t) => self.template(t, sp),
            HExpr::HeredocTemplate(h) => self.template(&h.template, sp),
            HExpr::Parenthesis(p) => return self.expr(p.inner(), sp),
            HExpr::Variable(v) => ExprKind::Traversal { root: Ident::new(v.as_str(), sp), steps: vec![] },
            HExpr::Traversal(t) => {
                let steps = t.operators.iter().map(|op| self.step(op.value(), self.span(op.span(), sp))).collect();
                match &t.expr {
                    HExpr::Variable(v) => {
                        ExprKind::Traversal { root: Ident::new(v.as_str(), self.span(v.span(), sp)), steps }
                    }
                    other => ExprKind::Access { expr: Box::new(self.expr(other, sp)), steps },
                }
            }
            HExpr::FuncCall(f) => self.call(f, sp),
            HExpr::Conditional(c) => ExprKind::Conditional {
                cond: Box::new(self.expr(&c.cond_expr, sp)),
                then: Box::new(self.expr(&c.true_expr, sp)),
                otherwise: Box::new(self.expr(&c.false_expr, sp)),
            },
            HExpr::UnaryOp(u) => {
                let inner = self.expr(&u.expr, sp);
                match (u.operator.value(), inner.kind) {
                    // `- 1` and `-1` mean the same; hcl-edit makes the first an operation and
                    // the second a literal. One shape keeps `fmt` round-trips exact.
                    (hx::UnaryOperator::Neg, ExprKind::Number(n)) => ExprKind::Number(-n),
                    (op, kind) => {
                        let op = match op {
                            hx::UnaryOperator::Neg => UnaryOp::Neg,
                            hx::UnaryOperator::Not => UnaryOp::Not,
                        };
                        ExprKind::Unary { op, expr: Box::new(Expr::new(kind, inner.span)) }
                    }
                }
            }
            HExpr::BinaryOp(b) => ExprKind::Binary {
                op: binary_op(*b.operator.value()),
                lhs: Box::new(self.expr(&b.lhs_expr, sp)),
                rhs: Box::new(self.expr(&b.rhs_expr, sp)),
            },
            HExpr::ForExpr(f) => self.for_expr(f, sp),
        };
        Expr::new(kind, sp)
    }

    fn object_key(&mut self, key: &hx::ObjectKey, parent: Span) -> ObjectKey {
        let sp = self.span(key.span(), parent);
        match key {
            hx::ObjectKey::Ident(i) => ObjectKey::Name(Ident::new(i.as_str(), sp)),
            hx::ObjectKey::Expression(HExpr::String(s)) => ObjectKey::Name(Ident::new(s.value().clone(), sp)),
            hx::ObjectKey::Expression(e) => ObjectKey::Expr(self.expr(e, sp)),
        }
    }

    fn step(&mut self, op: &TraversalOperator, sp: Span) -> Step {
        match op {
            TraversalOperator::AttrSplat(_) | TraversalOperator::FullSplat(_) => Step::Splat(sp),
            TraversalOperator::GetAttr(i) => Step::Attr(Ident::new(i.as_str(), self.span(i.span(), sp))),
            TraversalOperator::Index(e) => Step::Index(self.expr(e, sp)),
            TraversalOperator::LegacyIndex(n) => {
                let isp = self.span(n.span(), sp);
                Step::Index(Expr::new(ExprKind::Number(*n.value() as f64), isp))
            }
        }
    }

    fn call(&mut self, f: &hx::FuncCall, sp: Span) -> ExprKind {
        let parts: Vec<&str> =
            f.name.namespace.iter().chain(std::iter::once(&f.name.name)).map(|i| i.as_str()).collect();
        let name_span = self.span(f.name.name.span(), sp);
        let start = f.name.namespace.first().map_or(name_span, |n| self.span(n.span(), name_span));
        ExprKind::Call {
            name: Ident::new(parts.join("::"), start.join(name_span)),
            args: f.args.iter().map(|a| self.expr(a, sp)).collect(),
            expand_final: f.args.expand_final(),
        }
    }

    fn for_expr(&mut self, f: &hx::ForExpr, sp: Span) -> ExprKind {
        let ident = |c: &Self, i: &hcl_edit::Decorated<hcl_edit::Ident>| Ident::new(i.as_str(), c.span(i.span(), sp));
        ExprKind::For(Box::new(ForExpr {
            key_var: f.intro.key_var.as_ref().map(|k| ident(self, k)),
            value_var: ident(self, &f.intro.value_var),
            collection: self.expr(&f.intro.collection_expr, sp),
            key_expr: f.key_expr.as_ref().map(|k| self.expr(k, sp)),
            value_expr: self.expr(&f.value_expr, sp),
            cond: f.cond.as_ref().map(|c| self.expr(&c.expr, sp)),
            grouping: f.grouping,
        }))
    }

    /// Literals and interpolations, with `~` strip markers applied to the neighbouring
    /// literals (the raw tree has no place for them). No interpolation → a plain string.
    pub fn template(&mut self, t: &Template, sp: Span) -> ExprKind {
        let mut parts: Vec<TemplatePart> = vec![];
        let mut strip_next = false;
        for element in t.iter() {
            match element {
                Element::Literal(lit) => {
                    let s: &str = lit.value();
                    let s = if strip_next { s.trim_start() } else { s };
                    strip_next = false;
                    match parts.last_mut() {
                        Some(TemplatePart::Literal(prev)) => prev.push_str(s),
                        _ => parts.push(TemplatePart::Literal(s.to_string())),
                    }
                }
                Element::Interpolation(i) => {
                    if i.strip.strip_start()
                        && let Some(TemplatePart::Literal(prev)) = parts.last_mut()
                    {
                        prev.truncate(prev.trim_end().len());
                    }
                    strip_next = i.strip.strip_end();
                    let isp = self.span(i.span(), sp);
                    parts.push(TemplatePart::Interp(self.expr(&i.expr, isp)));
                }
                Element::Directive(_) => return ExprKind::Unsupported("template directives (%{...})".to_string()),
            }
        }
        parts.retain(|p| !matches!(p, TemplatePart::Literal(s) if s.is_empty()));
        if parts.iter().all(|p| matches!(p, TemplatePart::Literal(_))) {
            let mut s = String::new();
            for p in parts {
                if let TemplatePart::Literal(l) = p {
                    s.push_str(&l);
                }
            }
            return ExprKind::String(s);
        }
        ExprKind::Template(parts)
    }
}

fn binary_op(op: hx::BinaryOperator) -> BinaryOp {
    use hx::BinaryOperator as H;
    match op {
        H::Eq => BinaryOp::Eq,
        H::NotEq => BinaryOp::NotEq,
        H::LessEq => BinaryOp::LtEq,
        H::GreaterEq => BinaryOp::GtEq,
        H::Less => BinaryOp::Lt,
        H::Greater => BinaryOp::Gt,
        H::Plus => BinaryOp::Add,
        H::Minus => BinaryOp::Sub,
        H::Mul => BinaryOp::Mul,
        H::Div => BinaryOp::Div,
        H::Mod => BinaryOp::Mod,
        H::And => BinaryOp::And,
        H::Or => BinaryOp::Or,
    }
}
