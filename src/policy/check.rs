//! Static checks of policy expressions, before any plan exists: every `plan.…` path names
//! a fact that [`facts::plan_value`](super::facts::plan_value) provides, `each` is used
//! only with `for_each`, and every function exists. What only a real plan can tell (a
//! missing map key, a division by zero) is left to evaluation, which fails the policy.
//!
//! The fact shapes below mirror `facts.rs`; a test compares them with a real plan's facts.

use crate::diag::{Diagnostic, Diagnostics, did_you_mean};
use crate::policy::model::Policy;
use crate::spec::functions::FUNCTIONS;
use crate::spec::raw::{Expr, ExprKind, ObjectKey, Step, TemplatePart};

/// The shape of a fact: a scalar, an object with fixed attributes, or a map (any key) or
/// list of one element shape.
#[derive(Debug)]
pub enum Fact {
    Leaf,
    Object(&'static [(&'static str, Fact)]),
    Map(&'static Fact),
    List(&'static Fact),
}

const RANGE: Fact =
    Fact::Object(&[("hourly_min", Fact::Leaf), ("hourly_expected", Fact::Leaf), ("hourly_max", Fact::Leaf)]);

const COST: Fact = Fact::Object(&[
    ("currency", Fact::Leaf),
    ("hours_per_month", Fact::Leaf),
    ("hourly_before", Fact::Leaf),
    ("hourly_after", Fact::Leaf),
    ("hourly_delta", Fact::Leaf),
    ("monthly_before", Fact::Leaf),
    ("monthly_after", Fact::Leaf),
    ("monthly_delta", Fact::Leaf),
    ("on_demand_hourly_after", Fact::Leaf),
    ("spot_hourly_after", Fact::Leaf),
    ("range", RANGE),
    (
        "exchange_rates",
        Fact::List(&Fact::Object(&[("currency", Fact::Leaf), ("per_usd", Fact::Leaf), ("source", Fact::Leaf)])),
    ),
    ("unpriced", Fact::List(&Fact::Leaf)),
]);

const POOL: Fact = Fact::Object(&[
    ("address", Fact::Leaf),
    ("name", Fact::Leaf),
    ("action", Fact::Leaf),
    ("provider", Fact::Leaf),
    ("region", Fact::Leaf),
    ("gpu", Fact::Leaf),
    ("gpus_per_node", Fact::Leaf),
    ("gpus_before", Fact::Leaf),
    ("gpus_after", Fact::Leaf),
    ("nodes_before", Fact::Leaf),
    ("nodes_after", Fact::Leaf),
    ("on_demand_after", Fact::Leaf),
    ("spot_after", Fact::Leaf),
    ("spot_share", Fact::Leaf),
    ("hourly_before", Fact::Leaf),
    ("hourly_after", Fact::Leaf),
    ("price_per_gpu_hour", Fact::Leaf),
    ("moving", Fact::Leaf),
    ("peak_nodes", Fact::Leaf),
    ("peak_gpus", Fact::Leaf),
    ("peak_hourly", Fact::Leaf),
    ("instance_type", Fact::Leaf),
    ("labels", Fact::Map(&Fact::Leaf)),
    ("destroys", Fact::Leaf),
    ("runs_jobs", Fact::Leaf),
    ("running_jobs", Fact::List(&Fact::Leaf)),
]);

const QUOTA: Fact = Fact::Object(&[
    ("address", Fact::Leaf),
    ("pools", Fact::List(&Fact::Leaf)),
    ("gpus_after", Fact::Leaf),
    ("gpus_max", Fact::Leaf),
    ("hourly_after", Fact::Leaf),
    ("monthly_after", Fact::Leaf),
    ("gpus_peak", Fact::Leaf),
    ("hourly_peak", Fact::Leaf),
    ("max_gpus", Fact::Leaf),
    ("allowed_gpus", Fact::List(&Fact::Leaf)),
]);

/// `plan`, as policies see it.
pub const PLAN: Fact = Fact::Object(&[
    ("cost", COST),
    ("pools", Fact::Map(&POOL)),
    ("quotas", Fact::Map(&QUOTA)),
    ("changes", Fact::List(&Fact::Object(&[("address", Fact::Leaf), ("kind", Fact::Leaf), ("action", Fact::Leaf)]))),
    (
        "summary",
        Fact::Object(&[("add", Fact::Leaf), ("change", Fact::Leaf), ("destroy", Fact::Leaf), ("import", Fact::Leaf)]),
    ),
    ("moves", Fact::Leaf),
    ("reservations", Fact::Map(&RESERVATION)),
]);

/// `plan.reservations[ADDRESS]` (docs/design/big-runs.md).
const RESERVATION: Fact = Fact::Object(&[
    ("address", Fact::Leaf),
    ("action", Fact::Leaf),
    ("kind", Fact::Leaf),
    ("instance_type", Fact::Leaf),
    ("count", Fact::Leaf),
    ("zone", Fact::Leaf),
    ("start", Fact::Leaf),
    ("end", Fact::Leaf),
    ("commitment_usd", Fact::Leaf),
    ("usd_per_hour", Fact::Leaf),
    ("cancellable", Fact::Leaf),
    ("used", Fact::Leaf),
    ("state", Fact::Leaf),
]);

/// What an expression is known to produce.
#[derive(Debug, Clone)]
enum Shape {
    /// Anything: the result of a function, an operator, a literal.
    Any,
    Fact(&'static Fact),
    /// A `for` expression over facts.
    Map(Box<Shape>),
    List(Box<Shape>),
}

impl Shape {
    /// The element of a map or list, when known.
    fn elem(&self) -> Shape {
        match self {
            Shape::Fact(f) => match *f {
                Fact::Map(e) | Fact::List(e) => Shape::Fact(e),
                _ => Shape::Any,
            },
            Shape::Map(e) | Shape::List(e) => (**e).clone(),
            Shape::Any => Shape::Any,
        }
    }
}

struct Checker<'d> {
    /// `each.value`'s shape; `None` without `for_each`.
    each: Option<Shape>,
    /// `for` variables, innermost last.
    bound: Vec<(String, Shape)>,
    diags: &'d mut Diagnostics,
    failed: bool,
}

/// Check a policy's `for_each`, `assert` and `message`; `false` if anything was reported.
pub fn check(p: &Policy, diags: &mut Diagnostics) -> bool {
    let mut c = Checker { each: None, bound: Vec::new(), diags, failed: false };
    if let Some(fe) = &p.for_each {
        let shape = c.infer(fe);
        c.each = Some(shape.elem());
    }
    c.infer(&p.assert);
    if let Some(m) = &p.message {
        c.infer(m);
    }
    !c.failed
}

impl Checker<'_> {
    fn error(&mut self, d: Diagnostic) {
        self.failed = true;
        self.diags.push(d);
    }

    fn infer(&mut self, e: &Expr) -> Shape {
        match &e.kind {
            ExprKind::Traversal { root, steps } => {
                let (base, rest, what) = match self.root(root, steps, e) {
                    Some(r) => r,
                    None => return Shape::Any,
                };
                self.walk(base, rest, what)
            }
            ExprKind::Access { expr, steps } => {
                let base = self.infer(expr);
                self.walk(base, steps, "this value".into())
            }
            ExprKind::Template(parts) => {
                for p in parts {
                    if let TemplatePart::Interp(x) = p {
                        self.infer(x);
                    }
                }
                Shape::Any
            }
            ExprKind::Array(items) => {
                for x in items {
                    self.infer(x);
                }
                Shape::Any
            }
            ExprKind::Object(items) => {
                for (k, v) in items {
                    if let ObjectKey::Expr(k) = k {
                        self.infer(k);
                    }
                    self.infer(v);
                }
                Shape::Any
            }
            ExprKind::Call { name, args, .. } => {
                if !FUNCTIONS.contains(&name.name.as_str()) {
                    let d = Diagnostic::error(
                        "gpuplan::policy::unknown_function",
                        format!("unknown function `{}`", name.name),
                    )
                    .at(name.span, "no such function");
                    self.error(match did_you_mean(&name.name, FUNCTIONS.iter().copied()) {
                        Some(s) => d.help(format!("did you mean `{s}`?")),
                        None => d.help(format!("functions: {}", FUNCTIONS.join(", "))),
                    });
                }
                for a in args {
                    self.infer(a);
                }
                Shape::Any
            }
            ExprKind::Unary { expr, .. } => {
                self.infer(expr);
                Shape::Any
            }
            ExprKind::Binary { lhs, rhs, .. } => {
                self.infer(lhs);
                self.infer(rhs);
                Shape::Any
            }
            ExprKind::Conditional { cond, then, otherwise } => {
                self.infer(cond);
                self.infer(then);
                self.infer(otherwise);
                Shape::Any
            }
            ExprKind::For(f) => {
                let coll = self.infer(&f.collection);
                let elem = coll.elem();
                let n = self.bound.len();
                if let Some(k) = &f.key_var {
                    self.bound.push((k.name.clone(), Shape::Any));
                }
                self.bound.push((f.value_var.name.clone(), elem));
                if let Some(k) = &f.key_expr {
                    self.infer(k);
                }
                let value = self.infer(&f.value_expr);
                if let Some(c) = &f.cond {
                    self.infer(c);
                }
                self.bound.truncate(n);
                match (&f.key_expr, f.grouping) {
                    (Some(_), false) => Shape::Map(Box::new(value)),
                    (Some(_), true) => Shape::Map(Box::new(Shape::List(Box::new(value)))),
                    (None, _) => Shape::List(Box::new(value)),
                }
            }
            ExprKind::Null
            | ExprKind::Bool(_)
            | ExprKind::Number(_)
            | ExprKind::String(_)
            | ExprKind::Unsupported(_)
            | ExprKind::Invalid => Shape::Any,
        }
    }

    /// The shape a traversal's root names, the steps after it, and how to call it.
    fn root<'e>(
        &mut self,
        root: &crate::spec::raw::Ident,
        steps: &'e [Step],
        e: &Expr,
    ) -> Option<(Shape, &'e [Step], String)> {
        if let Some((_, s)) = self.bound.iter().rev().find(|(n, _)| *n == root.name) {
            return Some((s.clone(), steps, format!("`{}`", root.name)));
        }
        match root.name.as_str() {
            "plan" => Some((Shape::Fact(&PLAN), steps, "`plan`".into())),
            "each" => {
                let Some(value) = self.each.clone() else {
                    self.error(
                        Diagnostic::error(
                            "gpuplan::policy::each",
                            "`each` is only available in a policy that sets `for_each`",
                        )
                        .at(e.span, "no `for_each` in this policy")
                        .help("add `for_each = plan.pools` (or another map) to check each element"),
                    );
                    return None;
                };
                match steps.first() {
                    Some(Step::Attr(id)) if id.name == "key" => Some((Shape::Any, &steps[1..], "`each.key`".into())),
                    Some(Step::Attr(id)) if id.name == "value" => Some((value, &steps[1..], "`each.value`".into())),
                    _ => {
                        self.error(
                            Diagnostic::error("gpuplan::policy::each", "use `each.key` or `each.value`")
                                .at(e.span, "`each` has only `key` and `value`"),
                        );
                        None
                    }
                }
            }
            other => {
                let mut names = vec!["plan"];
                if self.each.is_some() {
                    names.push("each");
                }
                names.extend(self.bound.iter().map(|(n, _)| n.as_str()));
                let d = Diagnostic::error("gpuplan::policy::unknown_name", format!("unknown name `{other}`"))
                    .at(root.span, "not something a policy can read");
                let d = match did_you_mean(other, names.iter().copied()) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!(
                        "policies read {}; quote plain strings",
                        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                    )),
                };
                self.error(d);
                None
            }
        }
    }

    /// Follow attribute and index steps from `shape`, reporting attributes no fact has.
    fn walk(&mut self, mut shape: Shape, steps: &[Step], mut what: String) -> Shape {
        for (i, step) in steps.iter().enumerate() {
            shape = match step {
                Step::Attr(id) => match self.attr(&shape, &id.name, id.span, &what) {
                    Some(s) => s,
                    None => return Shape::Any,
                },
                Step::Index(x) => {
                    self.infer(x);
                    match (&shape, &x.kind) {
                        (Shape::Fact(Fact::Object(_)), ExprKind::String(k)) => {
                            match self.attr(&shape, k, x.span, &what) {
                                Some(s) => s,
                                None => return Shape::Any,
                            }
                        }
                        (Shape::Fact(Fact::Object(_)), _) => Shape::Any,
                        _ => shape.elem(),
                    }
                }
                Step::Splat(_) => {
                    // Each element goes through the remaining steps.
                    let elem = match &shape {
                        Shape::Fact(Fact::List(_)) | Shape::List(_) => shape.elem(),
                        _ => shape.clone(),
                    };
                    self.walk(elem, &steps[i + 1..], format!("an element of {what}"));
                    return Shape::Any;
                }
            };
            what = match step {
                Step::Attr(id) => format!("{}.{}`", what.trim_end_matches('`'), id.name),
                _ => format!("{}[…]`", what.trim_end_matches('`')),
            };
        }
        shape
    }

    fn attr(&mut self, shape: &Shape, name: &str, span: crate::diag::Span, what: &str) -> Option<Shape> {
        let fact: &'static Fact = match shape {
            Shape::Fact(f) => f,
            Shape::Map(e) => return Some((**e).clone()),
            Shape::List(_) => return self.list_attr(name, span, what),
            Shape::Any => return Some(Shape::Any),
        };
        match fact {
            Fact::Object(fields) => match fields.iter().find(|(n, _)| *n == name) {
                Some((_, f)) => Some(Shape::Fact(f)),
                None => {
                    let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
                    let d = Diagnostic::error("gpuplan::policy::fact", format!("{what} has no attribute `{name}`"))
                        .at(span, "not a fact of the plan");
                    self.error(match did_you_mean(name, names.iter().copied()) {
                        Some(s) => d.help(format!("did you mean `{s}`? (see policies/README.md)")),
                        None => d.help(format!("it has: {}", names.join(", "))),
                    });
                    None
                }
            },
            Fact::Map(e) => Some(Shape::Fact(e)),
            Fact::List(_) => self.list_attr(name, span, what),
            Fact::Leaf => {
                self.error(
                    Diagnostic::error(
                        "gpuplan::policy::fact",
                        format!("cannot read `{name}` of {what}, which is a single value"),
                    )
                    .at(span, "no attributes here"),
                );
                None
            }
        }
    }

    fn list_attr(&mut self, name: &str, span: crate::diag::Span, what: &str) -> Option<Shape> {
        self.error(
            Diagnostic::error("gpuplan::policy::fact", format!("cannot read `{name}` of a list ({what})"))
                .at(span, "this is a list")
                .help("pick one element first, e.g. `[0]`, or use a `for` expression"),
        );
        None
    }
}

#[cfg(test)]
mod tests;
