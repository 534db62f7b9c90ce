//! Addresses as commands take them: [`crate::addr::resolve`] against what a command
//! knows (the spec's addresses, the state's, its jobs), with the CLI's `error:`/`hint:`
//! wording. `--target`, `state show|rm|mv`, `jobs ...` and `import` all come here.

use super::CliError;
use crate::addr::Address;
use crate::addr::resolve::{self, ResolveError, Resolved};
use crate::spec::Spec;
use crate::state::State;

/// What a command looks an address up in, for its messages.
pub struct Lookup<'a> {
    /// `resource`, `job`, `pool`.
    pub what: &'a str,
    /// Where it looked: `in the spec or the state`, ``in state `state/default.json` ``.
    pub place: String,
    /// The hint when nothing is close: how to see what exists.
    pub otherwise: String,
}

/// Resolve `input` against `known`, or explain: a did-you-mean, or what exists.
pub fn resolve(input: &str, known: &[Address], lookup: &Lookup) -> Result<Resolved, CliError> {
    resolve::resolve(input, known).map_err(|e| match e {
        ResolveError::Invalid(e) => CliError::new(e.to_string()).hint(
            "an address is `KIND.NAME` (`gpu_pool.train`, `job.eval[2]`), or the name alone where one kind has it",
        ),
        ResolveError::Unknown { input, suggestion } => {
            let error = CliError::new(format!("no {} `{input}` {}", lookup.what, lookup.place));
            match suggestion {
                Some(near) => error.hint(format!("did you mean `{near}`?")),
                None => error.hint(lookup.otherwise.clone()),
            }
        }
        ResolveError::Ambiguous { input, candidates } => {
            let names: Vec<String> = candidates.iter().map(|c| format!("`{c}`")).collect();
            CliError::new(format!("`{input}` names more than one {}: {}", lookup.what, names.join(", ")))
                .hint(format!("give its kind, e.g. `{}`", candidates[0]))
        }
    })
}

/// [`resolve`], where exactly one address must be meant (`state show`, `state mv`): a
/// name without its instance key that selects several instances is refused, naming them.
pub fn resolve_one(input: &str, known: &[Address], lookup: &Lookup) -> Result<Address, CliError> {
    let mut r = resolve(input, known, lookup)?;
    if r.matches.len() == 1 {
        return Ok(r.matches.remove(0));
    }
    let names: Vec<String> = r.matches.iter().map(|a| format!("`{a}`")).collect();
    Err(CliError::new(format!("`{input}` selects {} instances: {}", names.len(), names.join(", ")))
        .hint(format!("name one with its key, e.g. `{}`", r.matches[0])))
}

/// `--target` values as addresses: each names something the spec declares or the state
/// holds (a resource removed from the spec is targeted to destroy it). A target that
/// names nothing is an error, never a plan that does nothing.
pub fn targets(inputs: &[String], spec: &Spec, state: &State) -> Result<Vec<Address>, CliError> {
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let mut known = declared(spec);
    known.extend(in_state(state));
    known.sort();
    known.dedup();
    let lookup = Lookup {
        what: "resource",
        place: "in the spec or the state".into(),
        otherwise: "`--target` takes an address the spec declares, e.g. `gpu_pool.NAME`; `gpuplan state list` shows the state's".into(),
    };
    inputs.iter().map(|i| resolve(i, &known, &lookup).map(|r| r.address)).collect()
}

/// `--replace` values as addresses: each names a pool the spec declares (or one instance
/// of a counted pool). Only a pool has nodes to replace: another kind is refused, saying
/// what to do instead.
pub fn replacements(inputs: &[String], spec: &Spec) -> Result<Vec<Address>, CliError> {
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let known = declared(spec);
    let pools: Vec<Address> = spec.gpu_pools.keys().cloned().collect();
    let lookup = Lookup {
        what: "resource",
        place: "in the spec".into(),
        otherwise: "`--replace` takes a pool the spec declares, e.g. `gpu_pool.NAME`".into(),
    };
    inputs
        .iter()
        .map(|i| {
            // A short name means the pool of that name (an autoscaler may share it); what
            // names no pool is looked up among all, to say what it is.
            if let Ok(r) = resolve::resolve(i, &pools) {
                return Ok(r.address);
            }
            let address = resolve(i, &known, &lookup)?.address;
            match address.kind {
                crate::addr::Kind::GpuPool => Ok(address),
                kind => Err(CliError::new(format!(
                    "`{address}` cannot be replaced: only a gpu_pool has nodes to replace"
                ))
                .hint(match kind {
                    crate::addr::Kind::Job => {
                        "`gpuplan jobs cancel NAME` stops a job's run; to run a job again, declare it under a new name"
                            .to_string()
                    }
                    _ => format!("a {kind} is configuration, with nothing to replace: change it in the spec and apply"),
                })),
            }
        })
        .collect()
}

/// Every address the spec declares (pools, quotas, job templates, jobs, autoscalers).
pub fn declared(spec: &Spec) -> Vec<Address> {
    let mut out: Vec<Address> = Vec::new();
    out.extend(spec.gpu_pools.keys().cloned());
    out.extend(spec.quotas.keys().cloned());
    out.extend(spec.job_templates.keys().cloned());
    out.extend(spec.jobs.keys().cloned());
    out.extend(spec.autoscalers.keys().cloned());
    out.extend(spec.reservations.keys().cloned());
    out
}

/// Every address the state holds (keys that are not addresses are refused when the state
/// is read, so none is lost here).
pub fn in_state(state: &State) -> Vec<Address> {
    state.resources.keys().filter_map(|k| k.parse().ok()).collect()
}
