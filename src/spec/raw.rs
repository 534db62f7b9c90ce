//! The raw tree: what HCL and YAML files parse into before any meaning is given.
//!
//! Both parsers (`hcl.rs`, `yaml.rs`) produce this one shape, so decoding, evaluation
//! and validation are written once. Every node keeps its [`Span`]. Nothing here knows
//! what a `gpu_pool` is.
//!
//! Mapping of the two spellings:
//! - HCL `gpu_pool "train" { ... }` and YAML `gpu_pools: { train: {...} }` both become a
//!   [`Block`] with `kind = "gpu_pool"` and `labels = ["train"]`.
//! - HCL nested blocks (`nodes { ... }`) are blocks; YAML nested maps are attributes whose
//!   value is an [`ExprKind::Object`]. The decoder accepts either form where a nested
//!   block is expected.
//! - HCL `locals { x = 1 }` and YAML `locals: { x: 1 }` become a label-less `locals` block.

use crate::diag::Span;

/// An identifier or key with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

impl Ident {
    pub fn new(name: impl Into<String>, span: Span) -> Self {
        Ident { name: name.into(), span }
    }
}

/// The contents of a file or of a block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Body {
    pub attrs: Vec<Attr>,
    pub blocks: Vec<Block>,
    /// Span of the whole body (for "missing attribute" errors, point at the block).
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    pub key: Ident,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub kind: Ident,
    pub labels: Vec<Ident>,
    pub body: Body,
    /// Span of the whole block, header through closing brace.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Null,
    Bool(bool),
    /// Numbers are f64; integer-typed fields check for a whole value in range.
    Number(f64),
    /// A literal string with no interpolation.
    String(String),
    /// `"a-${var.b}-c"`. A template made of exactly one interpolation yields that
    /// value unconverted, as in HCL.
    Template(Vec<TemplatePart>),
    Array(Vec<Expr>),
    Object(Vec<(ObjectKey, Expr)>),
    /// `var.team`, `gpu_pool.train.gpu`, `local.x[0]`, `count.index`, bare `string`.
    Traversal {
        root: Ident,
        steps: Vec<Step>,
    },
    Call {
        name: Ident,
        args: Vec<Expr>,
        expand_final: bool,
    },
    Unary {
        op: UnaryOp,
        expr: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Conditional {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `[for x in xs : f(x) if c]` and `{for k, v in m : k => v}`.
    For(Box<ForExpr>),
    /// An index or attribute access applied to a non-variable expression,
    /// e.g. `[1, 2][0]` or `(local.m).key`.
    Access {
        expr: Box<Expr>,
        steps: Vec<Step>,
    },
    /// A construct the evaluator does not support (splat, heredoc directives); the
    /// parser records what it was so the error can say so.
    Unsupported(String),
    /// A value the parser already reported as wrong (e.g. a YAML number too large for
    /// f64). Evaluating it fails without a second diagnostic.
    Invalid,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TemplatePart {
    Literal(String),
    Interp(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ObjectKey {
    /// `{ team = ... }` or `{ "team" = ... }`.
    Name(Ident),
    /// `{ (local.k) = ... }` or `{ "${x}" = ... }`.
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Attr(Ident),
    Index(Expr),
    /// `.*` / `[*]`
    Splat(Span),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Mod => "%",
            Eq => "==",
            NotEq => "!=",
            Lt => "<",
            LtEq => "<=",
            Gt => ">",
            GtEq => ">=",
            And => "&&",
            Or => "||",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ForExpr {
    pub key_var: Option<Ident>,
    pub value_var: Ident,
    pub collection: Expr,
    /// Set for object `for` expressions (`k => v`).
    pub key_expr: Option<Expr>,
    pub value_expr: Expr,
    pub cond: Option<Expr>,
    /// `...` grouping in object for expressions.
    pub grouping: bool,
}

/// One parsed file.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub file: u32,
    pub format: Format,
    pub body: Body,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Hcl,
    Yaml,
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Self {
        Expr { kind, span }
    }

    /// Every `root.attr...` traversal in this expression (for dependency analysis).
    pub fn traversals<'a>(&'a self, out: &mut Vec<(&'a Ident, &'a [Step], Span)>) {
        match &self.kind {
            ExprKind::Traversal { root, steps } => {
                out.push((root, steps.as_slice(), self.span));
                for s in steps {
                    if let Step::Index(e) = s {
                        e.traversals(out);
                    }
                }
            }
            ExprKind::Template(parts) => {
                for p in parts {
                    if let TemplatePart::Interp(e) = p {
                        e.traversals(out);
                    }
                }
            }
            ExprKind::Array(items) => items.iter().for_each(|e| e.traversals(out)),
            ExprKind::Object(items) => {
                for (k, v) in items {
                    if let ObjectKey::Expr(e) = k {
                        e.traversals(out);
                    }
                    v.traversals(out);
                }
            }
            ExprKind::Call { args, .. } => args.iter().for_each(|e| e.traversals(out)),
            ExprKind::Unary { expr, .. } => expr.traversals(out),
            ExprKind::Binary { lhs, rhs, .. } => {
                lhs.traversals(out);
                rhs.traversals(out);
            }
            ExprKind::Conditional { cond, then, otherwise } => {
                cond.traversals(out);
                then.traversals(out);
                otherwise.traversals(out);
            }
            ExprKind::For(f) => {
                // Loop variables shadow; callers filter them by name.
                f.collection.traversals(out);
                if let Some(k) = &f.key_expr {
                    k.traversals(out);
                }
                f.value_expr.traversals(out);
                if let Some(c) = &f.cond {
                    c.traversals(out);
                }
            }
            ExprKind::Access { expr, steps } => {
                expr.traversals(out);
                for s in steps {
                    if let Step::Index(e) = s {
                        e.traversals(out);
                    }
                }
            }
            ExprKind::Null
            | ExprKind::Bool(_)
            | ExprKind::Number(_)
            | ExprKind::String(_)
            | ExprKind::Unsupported(_)
            | ExprKind::Invalid => {}
        }
    }
}

impl Body {
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|a| a.key.name == name)
    }
}

/// A block's first label: its name (`"train"` of `gpu_pool "train"`); empty if it has none.
pub fn label(b: &Block) -> &str {
    b.labels.first().map(|l| l.name.as_str()).unwrap_or("")
}

/// The block's header: `gpu_pool "train"` in HCL; just the name in YAML, where the kind is
/// the plural key further up (YAML block spans start at the name).
pub fn head(b: &Block) -> Span {
    match (b.labels.first(), b.labels.last()) {
        (Some(first), Some(last)) if b.span.start > b.kind.span.start => first.span.join(last.span),
        (_, Some(last)) => b.kind.span.join(last.span),
        _ => b.kind.span,
    }
}
