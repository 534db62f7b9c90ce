//! Which parts of the `plan` object the loaded policies can see ([`Reads::of`]): a pool's
//! facts hold 26 members, the starter policies read ten of them, and building every
//! member of 2,000 pools' facts (and freeing them) was most of a no-op plan's policy work.
//!
//! The answer is found from the policies' expressions alone, and errs towards "all": a
//! pool's facts are trimmed only when every way a policy reaches them names the member it
//! reads (`each.value.gpu`, `pool.labels`, `plan.pools[p].gpu`, `v["spot_share"]`), or
//! only asks whether a pool is there (`lookup(plan.pools, p, null) != null`, `keys(…)`,
//! `length(…)`). Anything that could see a pool's facts whole (`keys(each.value)`,
//! `jsonencode(plan.pools)`, `"${pool}"`, `for k, v in each.value`, a conditional or a
//! function handed a pool, a member no fact has, whose error lists the members) gets
//! every member, as does a reference to `plan` that names no member of it. `plan.changes`
//! (an object per change) is built only when a policy names it.
//!
//! So every verdict, message and error is the same as with every member built; a test
//! evaluates policies both ways and compares.

use crate::policy::model::Policy;
use crate::spec::raw::{BinaryOp, Expr, ExprKind, ObjectKey, Step, TemplatePart};

/// A pool's facts (`plan.pools[ADDRESS]`), in key order: the bits of [`Reads`] are these.
pub const POOL_FIELDS: [&str; 26] = [
    "action",
    "address",
    "destroys",
    "gpu",
    "gpus_after",
    "gpus_before",
    "gpus_per_node",
    "hourly_after",
    "hourly_before",
    "instance_type",
    "labels",
    "moving",
    "name",
    "nodes_after",
    "nodes_before",
    "on_demand_after",
    "peak_gpus",
    "peak_hourly",
    "peak_nodes",
    "price_per_gpu_hour",
    "provider",
    "region",
    "running_jobs",
    "runs_jobs",
    "spot_after",
    "spot_share",
];

/// The members of `plan` that policies can see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reads {
    /// Bit `i`: [`POOL_FIELDS`]`[i]` is built into each pool's facts.
    pool: u32,
    /// `plan.changes` is built.
    changes: bool,
}

impl Reads {
    /// Every member, as when nothing is known of the policies.
    pub const ALL: Reads = Reads { pool: (1 << POOL_FIELDS.len()) - 1, changes: true };

    /// What `policies` can see of `plan` (see the module's doc).
    pub fn of(policies: &[Policy]) -> Reads {
        let mut w = Walker { bound: Vec::new(), each: Kind::Other, reads: Reads { pool: 0, changes: false } };
        match policies.iter().try_for_each(|p| w.policy(p)) {
            Ok(()) => w.reads,
            Err(GiveUp) => Reads::ALL,
        }
    }

    /// Is [`POOL_FIELDS`]`[i]` built into a pool's facts?
    pub fn pool_field(&self, i: usize) -> bool {
        self.pool & (1 << i) != 0
    }

    /// Is `plan.changes` built?
    pub fn changes(&self) -> bool {
        self.changes
    }
}

/// What an expression's value may hold, as far as pools' facts go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No pool's facts (a number, a string, a label map, a quota, ...).
    Other,
    /// One pool's facts.
    Fact,
    /// A map or list of pools' facts (`plan.pools`, a `for` over it yielding its pools).
    Facts,
}

/// A way of reaching pools' facts that this module does not follow: build them whole.
struct GiveUp;

struct Walker<'p> {
    /// `for` variables, innermost last.
    bound: Vec<(&'p str, Kind)>,
    /// What `each.value` holds.
    each: Kind,
    reads: Reads,
}

impl<'p> Walker<'p> {
    fn policy(&mut self, p: &'p Policy) -> Result<(), GiveUp> {
        self.each = match &p.for_each {
            None => Kind::Other,
            Some(fe) => match self.kind(fe)? {
                Kind::Facts => Kind::Fact,
                Kind::Other => Kind::Other,
                // `for_each` over one pool's members sees them all.
                Kind::Fact => return Err(GiveUp),
            },
        };
        self.other(&p.assert)?;
        p.message.as_ref().map_or(Ok(()), |m| self.other(m))
    }

    /// `e` where its value is used as a whole: it must hold no pool's facts.
    fn other(&mut self, e: &'p Expr) -> Result<(), GiveUp> {
        match self.kind(e)? {
            Kind::Other => Ok(()),
            Kind::Fact | Kind::Facts => Err(GiveUp),
        }
    }

    fn kind(&mut self, e: &'p Expr) -> Result<Kind, GiveUp> {
        match &e.kind {
            ExprKind::Null
            | ExprKind::Bool(_)
            | ExprKind::Number(_)
            | ExprKind::String(_)
            | ExprKind::Unsupported(_)
            | ExprKind::Invalid => Ok(Kind::Other),
            ExprKind::Template(parts) => {
                for p in parts {
                    if let TemplatePart::Interp(x) = p {
                        self.other(x)?;
                    }
                }
                Ok(Kind::Other)
            }
            ExprKind::Array(items) => items.iter().try_for_each(|x| self.other(x)).map(|()| Kind::Other),
            ExprKind::Object(items) => {
                for (k, v) in items {
                    if let ObjectKey::Expr(k) = k {
                        self.other(k)?;
                    }
                    self.other(v)?;
                }
                Ok(Kind::Other)
            }
            ExprKind::Traversal { root, steps } => {
                let (base, rest) = self.root(&root.name, steps)?;
                self.steps(base, rest)
            }
            ExprKind::Access { expr, steps } => {
                let base = self.kind(expr)?;
                self.steps(base, steps)
            }
            ExprKind::Call { name, args, expand_final } => self.call(&name.name, args, *expand_final),
            ExprKind::Unary { expr, .. } => self.other(expr).map(|()| Kind::Other),
            ExprKind::Binary { op, lhs, rhs } => {
                // `lookup(plan.pools, p, null) != null` asks only whether the pool is there.
                let is_null = |x: &Expr| matches!(x.kind, ExprKind::Null);
                if matches!(op, BinaryOp::Eq | BinaryOp::NotEq) && (is_null(lhs) || is_null(rhs)) {
                    self.kind(lhs)?;
                    self.kind(rhs)?;
                } else {
                    self.other(lhs)?;
                    self.other(rhs)?;
                }
                Ok(Kind::Other)
            }
            ExprKind::Conditional { cond, then, otherwise } => {
                self.other(cond)?;
                self.other(then)?;
                self.other(otherwise).map(|()| Kind::Other)
            }
            ExprKind::For(f) => {
                let elem = match self.kind(&f.collection)? {
                    Kind::Facts => Kind::Fact,
                    Kind::Other => Kind::Other,
                    Kind::Fact => return Err(GiveUp),
                };
                let depth = self.bound.len();
                if let Some(k) = &f.key_var {
                    self.bound.push((&k.name, Kind::Other));
                }
                self.bound.push((&f.value_var.name, elem));
                let value = self.for_body(f);
                self.bound.truncate(depth);
                match value? {
                    Kind::Other => Ok(Kind::Other),
                    Kind::Fact if !f.grouping => Ok(Kind::Facts),
                    Kind::Fact | Kind::Facts => Err(GiveUp),
                }
            }
        }
    }

    /// A `for` expression's key, condition and value, its variables bound: the value's kind.
    fn for_body(&mut self, f: &'p crate::spec::raw::ForExpr) -> Result<Kind, GiveUp> {
        if let Some(k) = &f.key_expr {
            self.other(k)?;
        }
        if let Some(c) = &f.cond {
            self.other(c)?;
        }
        self.kind(&f.value_expr)
    }

    /// A function call: `lookup`, `keys` and `length` of pools' facts ask only which pools
    /// there are; every other argument is used whole.
    fn call(&mut self, name: &str, args: &'p [Expr], expand_final: bool) -> Result<Kind, GiveUp> {
        match (name, args) {
            ("lookup", [object, rest @ ..]) if !expand_final && (1..=2).contains(&rest.len()) => {
                let found = match self.kind(object)? {
                    Kind::Facts => Kind::Fact,
                    Kind::Other => Kind::Other,
                    Kind::Fact => return Err(GiveUp),
                };
                rest.iter().try_for_each(|x| self.other(x))?;
                Ok(found)
            }
            ("keys" | "length", [one]) if !expand_final => match self.kind(one)? {
                Kind::Other | Kind::Facts => Ok(Kind::Other),
                Kind::Fact => Err(GiveUp),
            },
            _ => args.iter().try_for_each(|x| self.other(x)).map(|()| Kind::Other),
        }
    }

    /// What a traversal's root holds, and the steps after it. Bound `for` variables first,
    /// then `plan`, then `each`, as evaluation looks them up.
    fn root<'s>(&mut self, root: &str, steps: &'s [Step]) -> Result<(Kind, &'s [Step]), GiveUp> {
        if let Some((_, k)) = self.bound.iter().rev().find(|(n, _)| *n == root) {
            return Ok((*k, steps));
        }
        match root {
            "plan" => {
                let (name, rest) = match steps.split_first() {
                    Some((Step::Attr(id), rest)) => (id.name.as_str(), rest),
                    Some((Step::Index(Expr { kind: ExprKind::String(s), .. }), rest)) => (s.as_str(), rest),
                    // `plan` whole, or a member chosen at run time.
                    _ => return Err(GiveUp),
                };
                match name {
                    "pools" => Ok((Kind::Facts, rest)),
                    "changes" => {
                        self.reads.changes = true;
                        Ok((Kind::Other, rest))
                    }
                    _ => Ok((Kind::Other, rest)),
                }
            }
            "each" => match steps.split_first() {
                Some((Step::Attr(id), rest)) if id.name == "value" => Ok((self.each, rest)),
                Some((Step::Attr(id), rest)) if id.name == "key" => Ok((Kind::Other, rest)),
                _ => Err(GiveUp),
            },
            _ => Ok((Kind::Other, steps)),
        }
    }

    /// Follow `steps` from a value of kind `kind`: a pool's member named is recorded.
    fn steps(&mut self, mut kind: Kind, steps: &'p [Step]) -> Result<Kind, GiveUp> {
        for step in steps {
            kind = match (kind, step) {
                (_, Step::Splat(_)) if kind != Kind::Other => return Err(GiveUp),
                (Kind::Other, Step::Index(x)) => self.other(x).map(|()| Kind::Other)?,
                (Kind::Other, _) => Kind::Other,
                (Kind::Facts, Step::Index(x)) => self.other(x).map(|()| Kind::Fact)?,
                (Kind::Facts, _) => Kind::Fact,
                (Kind::Fact, Step::Attr(id)) => self.member(&id.name)?,
                (Kind::Fact, Step::Index(Expr { kind: ExprKind::String(s), .. })) => self.member(s)?,
                (Kind::Fact, _) => return Err(GiveUp),
            };
        }
        Ok(kind)
    }

    /// A pool's member read by name; one no pool has fails with every member listed.
    fn member(&mut self, name: &str) -> Result<Kind, GiveUp> {
        let i = POOL_FIELDS.iter().position(|f| *f == name).ok_or(GiveUp)?;
        self.reads.pool |= 1 << i;
        Ok(Kind::Other)
    }
}

#[cfg(test)]
#[path = "reads_tests.rs"]
mod tests;
