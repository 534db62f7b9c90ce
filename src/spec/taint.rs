//! Which values are derived from a sensitive variable (`sensitive = true`, issue 50): a
//! local whose expression reads one (or reads such a local), and the attributes of a
//! resource whose expressions read one of those (or a sensitive attribute of another
//! resource). An output that reads any of them is sensitive too. Found from the
//! expressions' traversals, so it knows nothing of values: a derived value is sensitive
//! whatever it evaluates to.
//!
//! A resource's sensitive attributes are dotted paths into its configuration as plans and
//! state record it: `labels` (the whole attribute), `env.HF_TOKEN` (one key of an object
//! written in place), `nodes.desired` (an attribute of a nested block). Every view prints
//! `(sensitive)` at those paths (`render::facts`).

use std::collections::{BTreeMap, BTreeSet};

use crate::addr::Kind;
use crate::spec::raw::{Block, Body, Expr, ExprKind, Ident, ObjectKey, Step};

/// What reads a sensitive variable, directly or through others.
#[derive(Debug, Default)]
pub struct Tainted {
    vars: BTreeSet<String>,
    locals: BTreeSet<String>,
    /// `(kind, name)` of resource blocks, to the paths of their sensitive attributes.
    resources: BTreeMap<(String, String), BTreeSet<String>>,
}

impl Tainted {
    /// Locals and resource attributes reached from `sensitive` variables, to a fixed point.
    pub fn find(
        sensitive: impl IntoIterator<Item = String>,
        locals: &[(&Ident, &Expr)],
        resources: &[(Kind, &Block)],
        label: impl Fn(&Block) -> String,
    ) -> Tainted {
        let mut t = Tainted { vars: sensitive.into_iter().collect(), ..Tainted::default() };
        if t.vars.is_empty() {
            return t;
        }
        loop {
            let before = t.size();
            for (id, expr) in locals {
                if !t.locals.contains(&id.name) && t.reads(&[*expr]) {
                    t.locals.insert(id.name.clone());
                }
            }
            for (kind, b) in resources {
                let mut paths = BTreeSet::new();
                t.body_paths(&b.body, "", &mut paths);
                if !paths.is_empty() {
                    t.resources.entry((kind.as_str().to_string(), label(b))).or_default().extend(paths);
                }
            }
            if t.size() == before {
                return t;
            }
        }
    }

    fn size(&self) -> usize {
        self.locals.len() + self.resources.values().map(BTreeSet::len).sum::<usize>()
    }

    /// The sensitive attribute paths of every resource that has one, by `kind.name`.
    pub fn resource_paths(&self) -> BTreeMap<String, Vec<String>> {
        self.resources.iter().map(|((k, n), p)| (format!("{k}.{n}"), p.iter().cloned().collect())).collect()
    }

    /// The paths under `prefix` of `body`'s attributes that read something sensitive: an
    /// object written in place is looked at key by key, a nested block attribute by
    /// attribute.
    fn body_paths(&self, body: &Body, prefix: &str, out: &mut BTreeSet<String>) {
        for a in &body.attrs {
            let path = format!("{prefix}{}", a.key.name);
            match &a.value.kind {
                ExprKind::Object(items) => {
                    for (k, v) in items {
                        match k {
                            ObjectKey::Name(id) if self.attr_reads(&[v]) => {
                                out.insert(format!("{path}.{}", id.name));
                            }
                            // A computed key: the whole object is sensitive.
                            ObjectKey::Expr(e) if self.attr_reads(&[e, v]) => {
                                out.insert(path.clone());
                            }
                            _ => {}
                        }
                    }
                }
                _ if self.attr_reads(&[&a.value]) => {
                    out.insert(path);
                }
                _ => {}
            }
        }
        for b in &body.blocks {
            self.body_paths(&b.body, &format!("{prefix}{}.", b.kind.name), out);
        }
    }

    /// Does any of `exprs` read a sensitive variable, or a local or resource attribute
    /// derived from one? A whole resource (`gpu_pool.a`, or `gpu_pool.a.id`) counts when
    /// any of its attributes is sensitive: what an output reads.
    pub fn reads(&self, exprs: &[&Expr]) -> bool {
        self.reads_with(exprs, true)
    }

    /// As [`Tainted::reads`], for a resource's own attributes: `gpu_pool.a` alone there
    /// names the resource (a job's `pool`, a quota's `pools`), so only a reference to one
    /// of its sensitive attributes counts.
    fn attr_reads(&self, exprs: &[&Expr]) -> bool {
        self.reads_with(exprs, false)
    }

    fn reads_with(&self, exprs: &[&Expr], whole: bool) -> bool {
        let mut ts = Vec::new();
        exprs.iter().for_each(|e| e.traversals(&mut ts));
        ts.iter().any(|(root, steps, _)| match steps.first() {
            Some(Step::Attr(id)) if root.name == "var" => self.vars.contains(&id.name),
            Some(Step::Attr(id)) if root.name == "local" => self.locals.contains(&id.name),
            Some(Step::Attr(id)) => match self.resources.get(&(root.name.clone(), id.name.clone())) {
                None => false,
                Some(paths) => match steps.get(1) {
                    Some(Step::Attr(attr)) if !whole => paths.iter().any(|p| under(p, &attr.name)),
                    _ => whole,
                },
            },
            _ => false,
        })
    }
}

/// Is `path` the attribute `top`, or under it (`env.TOK` under `env`)?
fn under(path: &str, top: &str) -> bool {
    path == top || path.strip_prefix(top).is_some_and(|rest| rest.starts_with('.'))
}
