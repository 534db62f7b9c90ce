//! What `moved`, `removed` and `import` blocks get wrong whatever runs, found by
//! `validate` at the block: an import into a pool the spec does not declare, or into a
//! floating one; a `removed` block for a resource the spec still declares; `moved` blocks
//! that form a cycle. `plan` loads the spec the same way, so it reports these once, here;
//! `plan::adopt` keeps its own guards for the state it plans against. A block that
//! failed to decode is still declared: its own error is the one reported.

use std::collections::BTreeSet;

use crate::addr::{Address, Kind};
use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::spec::Spec;
use crate::spec::decode::Partial;

pub fn check(spec: &Spec, partial: &Partial, diags: &mut Diagnostics) {
    imports(spec, partial, diags);
    removals(spec, partial, diags);
    move_cycles(spec, diags);
}

fn imports(spec: &Spec, partial: &Partial, diags: &mut Diagnostics) {
    for block in &spec.imports {
        let to = &block.to.value;
        if let Some(pool) = spec.gpu_pools.get(to) {
            if pool.placement.is_some() {
                diags.push(
                    Diagnostic::error(
                        "gpuplan::spec::import_floating",
                        format!("cannot import into `{to}`: it is a floating pool (`placement {{}}`)"),
                    )
                    .at(block.to.span, "a floating pool has no provider until the plan picks one")
                    .at(pool.meta.span, "floating pool")
                    .help(
                        "import into a pool with `provider` and `region`, then add `placement` if you want it to move",
                    ),
                );
            }
            continue;
        }
        let base = to.base();
        if partial.failed.contains(&base) {
            continue;
        }
        let instances: Vec<&Address> = spec.gpu_pools.keys().filter(|a| a.base() == base).collect();
        let names = spec.gpu_pools.keys().map(|a| a.name.as_str());
        let d = Diagnostic::error(
            "gpuplan::spec::import_undeclared",
            format!("`import` into `{to}`, which the spec does not declare"),
        )
        .at(block.to.span, "no such pool in the spec");
        diags.push(match (instances.first(), did_you_mean(&to.name, names)) {
            (Some(first), _) => {
                d.help(format!("`{base}` has {} instance(s): import into one, e.g. `{first}`", instances.len()))
            }
            (None, Some(s)) => d.help(format!("did you mean `gpu_pool.{s}`?")),
            (None, None) => d.help("add the pool's block (`gpuplan import` writes one)"),
        });
    }
}

fn removals(spec: &Spec, partial: &Partial, diags: &mut Diagnostics) {
    for r in &spec.removals {
        let from = &r.from.value;
        let declared_at = declared_at(spec, from);
        if declared_at.is_none() && !(from.key.is_none() && partial.failed.contains(from)) {
            continue;
        }
        let mut d = Diagnostic::error(
            "gpuplan::spec::removed_declared",
            format!("`{from}` is in a `removed` block but still declared in the spec"),
        )
        .at(r.from.span, "still declared");
        if let Some(span) = declared_at {
            d = d.at(span, "declared here");
        }
        diags.push(d.help("delete its block, or the `removed` block"));
    }
}

/// The block of the first instance `a` names (without a key, any instance), if decoded.
fn declared_at(spec: &Spec, a: &Address) -> Option<Span> {
    fn first<'v, V: 'v>(
        map: impl IntoIterator<Item = (&'v Address, &'v V)>,
        a: &Address,
        meta: impl Fn(&V) -> Span,
    ) -> Option<Span> {
        map.into_iter().find(|(k, _)| k.matches_target(a)).map(|(_, v)| meta(v))
    }
    match a.kind {
        Kind::GpuPool => first(&spec.gpu_pools, a, |p| p.meta.span),
        Kind::Quota => first(&spec.quotas, a, |q| q.meta.span),
        Kind::JobTemplate => first(&spec.job_templates, a, |t| t.meta.span),
        Kind::Job => first(&spec.jobs, a, |j| j.meta.span),
        Kind::Autoscaler => first(&spec.autoscalers, a, |s| s.meta.span),
        Kind::Reservation => first(&spec.reservations, a, |s| s.meta.span),
        Kind::Provider => None,
    }
}

/// `moved` chains that come back to where they started, each cycle reported once, at
/// the first of its blocks, with every block of it labelled.
fn move_cycles(spec: &Spec, diags: &mut Diagnostics) {
    let mut seen: BTreeSet<Vec<usize>> = BTreeSet::new();
    for start in &spec.moves {
        let mut path: Vec<Address> = vec![start.from.value.clone()];
        let mut used: Vec<usize> = Vec::new();
        while let Some((i, next)) = step(spec, path.last().expect("the path starts non-empty")) {
            used.push(i);
            if let Some(at) = path.iter().position(|p| *p == next) {
                let mut cycle: Vec<usize> = used[at..].to_vec();
                let names: Vec<String> = path[at..].iter().chain([&next]).map(|a| format!("`{a}`")).collect();
                cycle.sort_unstable();
                if seen.insert(cycle.clone()) {
                    diags.push(cycle_error(spec, &cycle, &names));
                }
                break;
            }
            path.push(next);
        }
    }
}

fn cycle_error(spec: &Spec, cycle: &[usize], names: &[String]) -> Diagnostic {
    let mut d = Diagnostic::error(
        "gpuplan::spec::moved_cycle",
        format!("the `moved` blocks form a cycle: {}", names.join(" → ")),
    );
    for &i in cycle {
        let m = &spec.moves[i];
        d = d.at(m.from.span, format!("moves `{}` to `{}`", m.from.value, m.to.value));
    }
    d.help("each address may be moved from only once: remove the block that undoes another")
}

/// The `moved` block that takes `at` on (its index), and where: an exact `from` first,
/// else a `from` without a key for every instance, keys kept (as `plan::adopt` follows
/// them).
fn step(spec: &Spec, at: &Address) -> Option<(usize, Address)> {
    if let Some(i) = spec.moves.iter().position(|m| m.from.value == *at) {
        return Some((i, spec.moves[i].to.value.clone()));
    }
    let i = spec.moves.iter().position(|m| m.from.key.is_none() && at.key.is_some() && m.from.value == at.base())?;
    let m = &spec.moves[i];
    let to = match (&m.to.value.key, &at.key) {
        (None, Some(key)) => m.to.value.clone().with_key(key.clone()),
        _ => m.to.value.clone(),
    };
    Some((i, to))
}

#[cfg(test)]
mod tests;
