//! `gpuplan import ADDR ID...`, Terraform's form: the instances become nodes of the pool
//! `ADDR` exactly as an `import { to = ADDR, ids = [ID...] }` block would make them, applied
//! at once. The block goes through the same planning (refresh, the checks that an ID exists,
//! belongs to no lineage and has the pool's GPU) and the same apply step (tags, then the
//! record), and nothing else of the plan is applied: nothing is launched or terminated,
//! and the next `gpuplan plan` shows what the spec would change in the pool.

use std::sync::Arc;

use super::output;
use super::{CliError, ExitStatus, Settings, addresses, common, load, runtime};
use crate::addr::Address;
use crate::apply::ApplyOptions;
use crate::diag::Span;
use crate::engine::{self, run::PlanRequest};
use crate::plan::Plan;
use crate::plan::adopt::{AdoptAction, Adoption};
use crate::spec::model::Spanned;

/// Where the block made from the command line "is": no spec file (see [`locate`]).
const COMMAND_LINE: Span = Span { file: u32::MAX, start: 0, end: 0 };

pub fn run(settings: &Settings, address: &str, ids: &[String], provider: Option<&str>) -> miette::Result<ExitStatus> {
    if ids.is_empty() {
        return Err(CliError::new(format!("`gpuplan import {address}` needs the IDs of the instances to import"))
            .hint(format!("e.g. `gpuplan import {address} i-0abc i-0def`"))
            .into());
    }
    let Some(mut loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let to = pool_address(&loaded.spec, address, provider)?;
    loaded.spec.imports.push(crate::spec::adopt::Import {
        to: Spanned::new(to.clone(), COMMAND_LINE),
        ids: ids.iter().map(|id| Spanned::new(id.clone(), COMMAND_LINE)).collect(),
        span: COMMAND_LINE,
    });
    let ws = settings.workspace().with_backend(&loaded.spec);
    runtime::block_on(async {
        let mut session = engine::open_session(&ws, "import")?;
        common::warn_stale_lock(&session);
        let providers = engine::providers::build(&ws, &loaded.spec, &session.state)?;
        let req =
            PlanRequest { refresh: true, targets: vec![to.clone()], env: settings.env.clone(), ..Default::default() };
        let mut plan = engine::run::plan(&loaded.spec, &session, &providers, &req).await?;
        locate(&mut plan, &loaded);
        if !plan.errors.is_empty() {
            output::stderr(&errors(&plan));
            return Ok(ExitStatus::Error);
        }
        let Some(import) = only_these(&plan, &to, ids) else {
            output::stderr(&format!("Nothing to import: the state already records {} in `{to}`.\n", ids.join(", ")));
            return Ok(ExitStatus::Success);
        };
        let plan = Plan { adoptions: vec![import], ..without_changes(plan) };
        let opts =
            ApplyOptions { parallelism: 1, progress: common::progress(settings), cancel: common::cancel_on_signal() };
        let report = engine::run::apply(&mut session, Arc::new(plan), &providers, &opts).await?;
        output::stderr(&common::report(&report, "Import"));
        if !report.succeeded() {
            return Ok(ExitStatus::Error);
        }
        output::stderr(&format!("hint: `gpuplan plan` shows what the spec would change in `{to}`\n"));
        Ok::<_, miette::Report>(ExitStatus::Success)
    })?
}

/// The pool `input` names in the spec (short names too), on `provider` when one is given.
fn pool_address(spec: &crate::spec::Spec, input: &str, provider: Option<&str>) -> Result<Address, CliError> {
    let pools: Vec<Address> = spec.gpu_pools.keys().cloned().collect();
    let lookup = addresses::Lookup {
        what: "pool",
        place: "in the spec".into(),
        otherwise: "declare the pool first; `gpuplan import --generate-config-out FILE` writes pools for what runs"
            .into(),
    };
    let to = addresses::resolve_one(input, &pools, &lookup)?;
    let on = &spec.gpu_pools[&to].provider.value;
    match provider {
        Some(p) if p != on => Err(CliError::new(format!("`{to}` is on provider `{on}`, not `{p}`"))
            .hint(format!("drop `--provider`, or pass `--provider {on}`"))),
        _ => Ok(to),
    }
}

/// Errors about the command line's block say so: it has no place in a spec file.
fn locate(plan: &mut Plan, loaded: &crate::spec::Loaded) {
    for e in plan.errors.iter_mut().filter(|e| e.span == Some(COMMAND_LINE)) {
        e.span = None;
        e.location = Some("the command line".into());
    }
    common::locate_errors(plan, loaded);
}

fn errors(plan: &Plan) -> String {
    let mut out = String::new();
    for e in &plan.errors {
        let at = e.location.as_ref().map(|l| format!("{l}: ")).unwrap_or_default();
        out.push_str(&format!("error: {at}{}\n", e.message));
        if let Some(hint) = &e.hint {
            out.push_str(&format!("hint: {hint}\n"));
        }
    }
    out.push_str("error: nothing was imported\n");
    out
}

/// The import of `ids` into `to`, from whichever of the plan's imports into `to` holds
/// them (the spec may import into the same pool): `None` when the state has them all.
fn only_these(plan: &Plan, to: &Address, ids: &[String]) -> Option<Adoption> {
    let into = plan.adoptions.iter().filter(|a| a.action == AdoptAction::Import && a.address == *to);
    let mut merged: Option<Adoption> = None;
    for a in into {
        let nodes = a.nodes.iter().filter(|n| ids.contains(&n.id)).cloned();
        match &mut merged {
            None => merged = Some(Adoption { nodes: nodes.collect(), ..a.clone() }),
            Some(m) => {
                m.nodes.extend(nodes);
                m.resource = m.resource.take().or_else(|| a.resource.clone());
            }
        }
    }
    merged.filter(|m| !m.nodes.is_empty())
}

/// The plan's record of the state it was made from, and nothing for apply to do.
fn without_changes(plan: Plan) -> Plan {
    Plan {
        changes: Vec::new(),
        jobs: Vec::new(),
        orphan_job_nodes: Vec::new(),
        evidence: Default::default(),
        health: Vec::new(),
        reservations: Vec::new(),
        autoscale: Vec::new(),
        adoptions: Vec::new(),
        placements: Vec::new(),
        ..plan
    }
}
