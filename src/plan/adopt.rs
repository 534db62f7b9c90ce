//! `moved`, `removed` (with `destroy = false`) and `import` blocks, planned. Pure.
//!
//! [`resolve`] runs before the diff and hands it the world as it will be once these are
//! applied: moved resources under their new address, forgotten pools gone, imported
//! instances recorded in their pool. The diff then plans only what differs on top (no
//! node is replaced by a rename, nothing is launched for an import). The [`Adoption`]s it
//! returns are what apply does first: retag the instances in place, then record.
//!
//! Every step can be repeated: a half-applied move or import (instances retagged, state
//! not yet written) is planned again the same way, and the next apply finishes it.

use std::collections::{BTreeMap, BTreeSet};

use crate::addr::{Address, Kind};
use crate::diag::Span;
use crate::json_text::JsonText;
// The adoption types are plan data: they live in the plan's model, beside `PlanError`.
use crate::plan::model::PlanError;
pub use crate::plan::model::{AdoptAction, Adoption};
use crate::providers::{Node, NodeState, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER, Tags};
use crate::spec::Spec;
use crate::state::{ResourceState, State};

/// The world as the diff should see it, and what apply must do first to make it so.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The state with moves, forgets and imports applied; `None`: unchanged.
    pub state: Option<State>,
    /// The observed nodes likewise; `None`: unchanged.
    pub observed: Option<Vec<Node>>,
    pub adoptions: Vec<Adoption>,
    pub errors: Vec<PlanError>,
}

/// gpuplan's ownership tags, which a forgotten instance loses.
pub const OWNERSHIP_TAGS: [&str; 4] = [TAG_MANAGED, TAG_LINEAGE, TAG_ADDRESS, TAG_PROVIDER];

/// Plan the spec's `moved`, `removed` and `import` blocks against `state` and the
/// `observed` nodes. Observed nodes that do not carry this state's lineage can only be
/// instances described for an import: they are taken out, or in as imports.
pub fn resolve(spec: &Spec, state: &State, observed: Option<&[Node]>, destroy: bool) -> Resolved {
    let foreign = observed.is_some_and(|o| o.iter().any(|n| n.tags.get(TAG_LINEAGE) != Some(state.lineage.as_str())));
    if spec.moves.is_empty() && spec.removals.is_empty() && (spec.imports.is_empty() || destroy) && !foreign {
        return Resolved::default();
    }
    let mut w = World {
        state: state.clone(),
        observed: observed.map(|o| o.to_vec()),
        described: BTreeMap::new(),
        out: Resolved::default(),
    };
    if let Some(obs) = w.observed.as_mut() {
        let (ours, theirs): (Vec<Node>, Vec<Node>) =
            std::mem::take(obs).into_iter().partition(|n| n.tags.get(TAG_LINEAGE) == Some(state.lineage.as_str()));
        *obs = ours;
        w.described = theirs.into_iter().map(|n| (n.id.clone(), n)).collect();
    }
    w.moves(spec);
    if !destroy {
        w.forgets(spec);
        w.imports(spec);
    }
    let World { state, observed, mut out, .. } = w;
    out.state = Some(state);
    out.observed = observed;
    out
}

struct World {
    state: State,
    observed: Option<Vec<Node>>,
    /// Instances described for imports (not carrying this lineage), by id.
    described: BTreeMap<String, Node>,
    out: Resolved,
}

impl World {
    fn error(&mut self, address: &Address, span: Span, message: String, hint: Option<&str>) {
        self.out.errors.push(PlanError {
            address: address.clone(),
            message,
            hint: hint.map(str::to_string),
            location: None,
            span: Some(span),
        });
    }

    /// Every state address a `moved` chain renames, to its final address.
    fn moves(&mut self, spec: &Spec) {
        if spec.moves.is_empty() {
            return;
        }
        // State keys are addresses gpuplan wrote; one that does not parse cannot be the
        // source of a `moved` block (those are parsed addresses), so it is skipped here.
        let addresses: Vec<Address> = self.state.resources.keys().filter_map(|k| k.parse().ok()).collect();
        let mut targets: BTreeMap<Address, Address> = BTreeMap::new();
        for from in &addresses {
            let Some((to, span)) = self.follow(spec, from) else { continue };
            if self.state.resources.contains_key(&to.to_string()) {
                let message = format!("cannot move `{from}` to `{to}`: the state already has `{to}`");
                self.error(&to, span, message, Some("remove the `moved` block, or `gpuplan state rm` one of them"));
                continue;
            }
            if let Some(other) = targets.iter().find(|(_, t)| **t == to).map(|(f, _)| f.clone()) {
                let message = format!("`{from}` and `{other}` would both move to `{to}`");
                self.error(&to, span, message, None);
                continue;
            }
            targets.insert(from.clone(), to);
        }
        for (from, to) in targets {
            self.rename(&from, &to);
        }
    }

    /// Where the `moved` blocks take `from` (following chains), with the span of the last
    /// block used; `None` when none applies. A cycle is reported and moves nothing.
    fn follow(&mut self, spec: &Spec, from: &Address) -> Option<(Address, Span)> {
        let mut at = from.clone();
        let mut last: Option<Span> = None;
        let mut seen: BTreeSet<Address> = BTreeSet::from([at.clone()]);
        while let Some((next, span)) = step(spec, &at) {
            if !seen.insert(next.clone()) {
                let message = format!("the `moved` blocks from `{from}` form a cycle through `{next}`");
                self.error(from, span, message, Some("each address may be moved from only once"));
                return None;
            }
            at = next;
            last = Some(span);
        }
        last.map(|span| (at, span))
    }

    /// Rename `from` to `to` in the state and the observed nodes, and plan the retag.
    fn rename(&mut self, from: &Address, to: &Address) {
        let (from_key, to_key) = (from.to_string(), to.to_string());
        if !crate::state::replay::move_resource(&mut self.state, &from_key, &to_key) {
            return;
        }
        let Some(resource) = self.state.resources.get(&to_key) else { return };
        let (provider, region) = (resource.provider.clone(), resource.region.clone());
        let mut nodes: Vec<Node> = match self.observed.as_mut() {
            Some(obs) => obs
                .iter_mut()
                .filter(|n| n.pool == *from || n.pool == *to)
                .map(|n| {
                    n.pool = to.clone();
                    n.tags.insert(TAG_ADDRESS, &to_key);
                    n.clone()
                })
                .collect(),
            None => resource.nodes.clone(),
        };
        nodes.retain(|n| n.state != NodeState::Terminated);
        self.out.adoptions.push(Adoption {
            action: AdoptAction::Move,
            address: to.clone(),
            from: Some(from.clone()),
            provider,
            region,
            nodes,
            set_tags: [(TAG_ADDRESS, to_key)].into_iter().collect(),
            remove_tags: vec![],
            resource: None,
        });
    }

    /// `removed` blocks with `destroy = false`: the resource leaves the state and its
    /// instances lose gpuplan's tags. With `destroy = true` the diff destroys it as any
    /// resource gone from the spec.
    fn forgets(&mut self, spec: &Spec) {
        for r in &spec.removals {
            if declared(spec, &r.from) {
                let message = format!("`{}` is in a `removed` block but still declared in the spec", r.from.value);
                self.error(&r.from, r.span, message, Some("delete its block, or the `removed` block"));
                continue;
            }
            if r.destroys() {
                continue;
            }
            let matching: Vec<String> = self
                .state
                .resources
                .keys()
                .filter(|k| k.parse::<Address>().is_ok_and(|a| matches(&r.from, &a)))
                .cloned()
                .collect();
            for key in matching {
                self.forget(&key);
            }
        }
    }

    fn forget(&mut self, key: &str) {
        let Some(resource) = self.state.resources.remove(key) else { return };
        let Ok(address) = key.parse::<Address>() else { return };
        let mut nodes: Vec<Node> = match self.observed.as_mut() {
            Some(obs) => {
                let (gone, kept): (Vec<Node>, Vec<Node>) =
                    std::mem::take(obs).into_iter().partition(|n| n.pool == address);
                *obs = kept;
                gone
            }
            None => resource.nodes.clone(),
        };
        nodes.retain(|n| n.state != NodeState::Terminated);
        self.out.adoptions.push(Adoption {
            action: AdoptAction::Forget,
            address,
            from: None,
            provider: resource.provider.clone(),
            region: resource.region.clone(),
            nodes,
            set_tags: Tags::new(),
            remove_tags: OWNERSHIP_TAGS.iter().map(|t| t.to_string()).collect(),
            resource: None,
        });
    }

    /// `import` blocks: each ID checked (it runs, nobody owns it, it has the pool's GPU),
    /// then recorded in the pool as if already imported.
    fn imports(&mut self, spec: &Spec) {
        let cat = crate::catalog::catalog();
        for block in &spec.imports {
            let to = &block.to.value;
            let Some(pool) = spec.gpu_pools.get(to) else {
                let message = format!("`import` into `{to}`, which the spec does not declare");
                self.error(to, block.span, message, Some("add the pool's block (`gpuplan import` writes one)"));
                continue;
            };
            let Some(shape) = crate::plan::shape::shape(spec, pool, cat) else {
                // A floating pool has no provider until placement picks one, and an
                // instance already runs somewhere: the pool must say where.
                let (message, hint) = if pool.placement.is_some() {
                    (
                        format!("cannot import into `{to}`: it is a floating pool (`placement {{}}`)"),
                        "import into a pool with `provider` and `region`, then add `placement` if you want it to move",
                    )
                } else {
                    (
                        format!("cannot import into `{to}`: its provider, region or GPU shape does not resolve"),
                        "run `gpuplan validate`",
                    )
                };
                self.error(to, block.span, message, Some(hint));
                continue;
            };
            let mut adoption = Adoption {
                action: AdoptAction::Import,
                address: to.clone(),
                from: None,
                provider: Some(shape.provider.clone()),
                region: Some(shape.region.clone()),
                nodes: vec![],
                set_tags: self.ownership(to, &shape.provider),
                remove_tags: vec![],
                resource: None,
            };
            for id in &block.ids {
                match self.check_import(to, &id.value, &shape, cat) {
                    Ok(Some(node)) => adoption.nodes.push(node),
                    Ok(None) => {}
                    Err((message, hint)) => self.error(to, id.span, message, hint),
                }
            }
            if adoption.nodes.is_empty() {
                continue;
            }
            let key = to.to_string();
            if !self.state.resources.contains_key(&key) {
                let resource = ResourceState {
                    kind: Kind::GpuPool.to_string(),
                    provider: Some(shape.provider.clone()),
                    provider_kind: Some(shape.provider_kind.to_string()),
                    region: Some(shape.region.clone()),
                    config: JsonText::to_json(pool).unwrap_or_default(),
                    sensitive: Vec::new(),
                    dependencies: vec![],
                    nodes: vec![],
                    job: None,
                    fallback: None,
                    placement: None,
                    reservation: None,
                };
                self.state.resources.insert(key.clone(), resource.clone());
                adoption.resource = Some(resource);
            }
            if let Some(r) = self.state.resources.get_mut(&key) {
                r.nodes.extend(adoption.nodes.iter().cloned());
            }
            if let Some(obs) = self.observed.as_mut() {
                let ids: BTreeSet<&str> = adoption.nodes.iter().map(|n| n.id.as_str()).collect();
                obs.retain(|n| !ids.contains(n.id.as_str()));
                obs.extend(adoption.nodes.iter().cloned());
            }
            self.out.adoptions.push(adoption);
        }
    }

    fn ownership(&self, to: &Address, provider: &str) -> Tags {
        [
            (TAG_MANAGED, "true".to_string()),
            (TAG_LINEAGE, self.state.lineage.clone()),
            (TAG_ADDRESS, to.to_string()),
            (TAG_PROVIDER, provider.to_string()),
        ]
        .into_iter()
        .collect()
    }

    /// One import ID: `Ok(Some(node))` to import (tags as they will be), `Ok(None)` when
    /// the state already holds it in this pool, `Err` why it cannot be imported.
    fn check_import(
        &mut self,
        to: &Address,
        id: &str,
        shape: &crate::plan::shape::PoolShape,
        cat: &crate::catalog::Catalog,
    ) -> Result<Option<Node>, (String, Option<&'static str>)> {
        let holder = self.state.resources.iter().find(|(_, r)| r.nodes.iter().any(|n| n.id == id));
        match holder {
            Some((key, _)) if *key == to.to_string() => return Ok(None),
            Some((key, _)) => {
                return Err((format!("instance `{id}` is already managed by gpuplan as part of `{key}`"), None));
            }
            None => {}
        }
        // Tagged by an earlier import that stopped before recording it: this lineage's
        // refresh found it, under this pool.
        let ours = self.observed.as_ref().and_then(|o| o.iter().find(|n| n.id == id)).cloned();
        let node = match (ours, self.described.remove(id)) {
            (Some(n), _) if n.pool == *to => n,
            (Some(n), _) => {
                return Err((format!("instance `{id}` is tagged by this state for `{}`, not `{to}`", n.pool), None));
            }
            (None, Some(n)) => n,
            (None, None) if self.observed.is_none() => {
                return Err((format!("cannot import `{id}` without refreshing"), Some("plan without --refresh=false")));
            }
            (None, None) => {
                return Err((
                    format!("instance `{id}` does not exist in {} region {}", shape.provider, shape.region),
                    Some("check the ID and the pool's provider and region"),
                ));
            }
        };
        if let Some(lineage) = node.tags.get(TAG_LINEAGE).filter(|l| *l != self.state.lineage) {
            let owner = node.tags.get(TAG_ADDRESS).unwrap_or("?");
            return Err((
                format!("instance `{id}` is owned by another gpuplan state (lineage {lineage}, `{owner}`)"),
                Some("only instances no gpuplan state manages can be imported"),
            ));
        }
        if !node.is_live() {
            return Err((format!("instance `{id}` is not running ({:?})", node.state).to_lowercase(), None));
        }
        let gpu = cat.instance_type(shape.provider_kind, &node.instance_type).map(|t| t.gpu.clone());
        if gpu.as_deref() != Some(shape.gpu.as_str()) {
            let has = gpu.unwrap_or_else(|| "no GPU the catalog knows".into());
            return Err((
                format!("instance `{id}` is a {} with {has}, but `{to}` has {}", node.instance_type, shape.gpu),
                Some("import it into a pool of its GPU model"),
            ));
        }
        let mut node = node;
        node.pool = to.clone();
        node.tags.extend(self.ownership(to, &shape.provider).iter());
        Ok(Some(node))
    }
}

/// The address one `moved` block takes `at` to, with the block's span. A block whose
/// `from` has no instance key moves every instance, keys kept (as Terraform does).
fn step(spec: &Spec, at: &Address) -> Option<(Address, Span)> {
    let exact = spec.moves.iter().find(|m| m.from.value == *at);
    if let Some(m) = exact {
        return Some((m.to.value.clone(), m.span));
    }
    let m = spec.moves.iter().find(|m| m.from.key.is_none() && at.key.is_some() && m.from.value == at.base())?;
    let to = if m.to.key.is_none() { m.to.value.clone().with_key(at.key.clone()?) } else { m.to.value.clone() };
    Some((to, m.span))
}

/// Does `pattern` (an address as written in a block; without a key, every instance)
/// name `a`?
fn matches(pattern: &Address, a: &Address) -> bool {
    a.matches_target(pattern)
}

/// Is `a` (or, without a key, any instance of it) declared in the spec?
fn declared(spec: &Spec, a: &Address) -> bool {
    fn any<'k>(mut keys: impl Iterator<Item = &'k Address>, a: &Address) -> bool {
        keys.any(|k| k.matches_target(a))
    }
    match a.kind {
        Kind::GpuPool => any(spec.gpu_pools.keys(), a),
        Kind::Quota => any(spec.quotas.keys(), a),
        Kind::JobTemplate => any(spec.job_templates.keys(), a),
        Kind::Job => any(spec.jobs.keys(), a),
        Kind::Autoscaler => any(spec.autoscalers.keys(), a),
        Kind::Reservation => any(spec.reservations.keys(), a),
        Kind::Provider => false,
    }
}

#[cfg(test)]
mod tests;
