//! Which values are derived from a sensitive variable (`sensitive = true`, issue 50): a
//! local whose expression reads one (or reads such a local), and a resource whose block
//! reads one of those. An output that reads any of them is sensitive too. Found from the
//! expressions' traversals, so it knows nothing of values: a derived value is sensitive
//! whatever it evaluates to.

use std::collections::BTreeSet;

use crate::addr::Kind;
use crate::spec::raw::{Block, Expr, Ident, Step};

/// What reads a sensitive variable, directly or through others.
#[derive(Debug, Default)]
pub struct Tainted {
    vars: BTreeSet<String>,
    locals: BTreeSet<String>,
    /// `(kind, name)` of resource blocks.
    resources: BTreeSet<(String, String)>,
}

impl Tainted {
    /// Locals and resources reached from `sensitive` variables, to a fixed point.
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
            let before = t.locals.len() + t.resources.len();
            for (id, expr) in locals {
                if !t.locals.contains(&id.name) && t.reads(&[*expr]) {
                    t.locals.insert(id.name.clone());
                }
            }
            for (kind, b) in resources {
                let key = (kind.as_str().to_string(), label(b));
                let mut exprs = Vec::new();
                crate::spec::order::collect_exprs(&b.body, &mut exprs);
                if !t.resources.contains(&key) && t.reads(&exprs) {
                    t.resources.insert(key);
                }
            }
            if t.locals.len() + t.resources.len() == before {
                return t;
            }
        }
    }

    /// Does any of `exprs` read a sensitive variable, or a local or resource derived
    /// from one?
    pub fn reads(&self, exprs: &[&Expr]) -> bool {
        let mut ts = Vec::new();
        exprs.iter().for_each(|e| e.traversals(&mut ts));
        ts.iter().any(|(root, steps, _)| match steps.first() {
            Some(Step::Attr(id)) if root.name == "var" => self.vars.contains(&id.name),
            Some(Step::Attr(id)) if root.name == "local" => self.locals.contains(&id.name),
            Some(Step::Attr(id)) => self.resources.contains(&(root.name.clone(), id.name.clone())),
            _ => false,
        })
    }
}
