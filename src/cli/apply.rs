//! `gpuplan apply [PLANFILE]` and `gpuplan destroy`: execute a plan, saved or fresh.

use std::sync::Arc;

use super::output;
use super::{
    ApplyArgs, CliError, DestroyArgs, ExitStatus, Settings, addresses, common, load, outputs, runtime, verdicts,
};
use crate::apply::ApplyOptions;
use crate::engine::{self, Hints, PlanRequest};
use crate::plan::Plan;
use crate::plan::inputs::Given;
use crate::render;
use crate::spec::fingerprint::Fingerprint;

pub fn apply(settings: &Settings, args: &ApplyArgs) -> miette::Result<ExitStatus> {
    let (spec, pre) = engine::preread::alongside(&settings.workspace(), || match &args.planfile {
        Some(p) => saved_spec(settings, args, p),
        None => Ok(load::valid_spec(settings)?.map(SpecFor::Planning)),
    });
    let Some(spec) = spec? else { return Ok(ExitStatus::Error) };
    let Some(policies) = load::policies(settings, &args.policy.policy_dir)? else { return Ok(ExitStatus::Error) };
    let ws = settings.workspace().with_backend(spec.for_providers());
    runtime::block_on(async move {
        let mut session = engine::open_session_preread(&ws, "apply", pre.state)?;
        common::warn_stale_lock(&session);
        if let SpecFor::Saved { plan, .. } = &spec {
            engine::run::begin_state_of(&mut session, plan);
        }
        // A mistyped target stops here, before a cloud is opened.
        let (targets, replace) = match &spec {
            SpecFor::Planning(loaded) => (
                addresses::targets(&args.target, &loaded.spec, &session.state)?,
                addresses::replacements(&args.replace, &loaded.spec)?,
            ),
            SpecFor::Saved { .. } => (Vec::new(), Vec::new()),
        };
        let (providers, sim) = engine::providers::build_with_sim(&ws, spec.for_providers(), &session.state, pre.sim)?;
        let plan = match spec {
            SpecFor::Saved { plan, digest, part, changed } => {
                drop(part);
                engine::run::check_fresh_digest(&plan, &session, || Some(digest), &changed)?;
                if engine::run::denied(&plan) {
                    return Ok(denied(&plan, false)?);
                }
                *plan
            }
            SpecFor::Planning(loaded) => {
                let req = PlanRequest {
                    refresh: true,
                    targets,
                    replace,
                    destroy: false,
                    env: settings.env.clone(),
                    policies,
                    overrides: args.policy.override_policy.clone(),
                    autoscale: Vec::new(),
                };
                let ask = Ask {
                    question: "Do you want to perform these actions?",
                    verb: "Apply",
                    auto_approve: args.auto_approve,
                    verbose: args.verbose,
                    json: false,
                };
                match plan_and_confirm(settings, &session, loaded, &providers, (&req, &READ_AHEAD), &ask).await? {
                    Ok(plan) => plan,
                    Err(status) => return Ok(status),
                }
            }
        };
        let status = execute(settings, &mut session, plan, &providers, args.parallelism as usize, "Apply").await;
        if matches!(status, Ok(ExitStatus::Success)) {
            outputs::print_applied(&session.state);
        }
        settle(sim.as_deref());
        leave_to_exit(&mut session, providers, sim.as_deref());
        status
    })?
}

/// `apply` without a plan file executes the plan right after: the providers may ask the
/// reads of new pools' first creates while refresh lists the fleet.
const READ_AHEAD: Hints = Hints { read_ahead: true, shown_only: false, floating_prices_only: false };

/// `destroy` is a plan like any other: costed, checked against the policies (soft ones
/// overridable), shown, confirmed, and executed `--parallelism` at a time.
pub fn destroy(settings: &Settings, args: &DestroyArgs) -> miette::Result<ExitStatus> {
    destroy_flags_taken(args)?;
    let (loaded, pre) = engine::preread::alongside(&settings.workspace(), || load::valid_spec(settings));
    let Some(loaded) = loaded? else { return Ok(ExitStatus::Error) };
    let Some(policies) = load::policies(settings, &args.policy.policy_dir)? else { return Ok(ExitStatus::Error) };
    let ws = settings.workspace().with_backend(&loaded.spec);
    runtime::block_on(async move {
        let mut session = engine::open_session_preread(&ws, "destroy", pre.state)?;
        common::warn_stale_lock(&session);
        let targets = addresses::targets(&args.target, &loaded.spec, &session.state)?;
        let (providers, sim) = engine::providers::build_with_sim(&ws, &loaded.spec, &session.state, pre.sim)?;
        let req = PlanRequest {
            refresh: true,
            targets,
            replace: Vec::new(),
            destroy: true,
            env: settings.env.clone(),
            policies,
            overrides: args.policy.override_policy.clone(),
            autoscale: Vec::new(),
        };
        let ask = Ask {
            question: "Do you really want to destroy everything this state owns?",
            verb: "Destroy",
            auto_approve: args.auto_approve,
            verbose: args.verbose,
            json: args.json,
        };
        let plan =
            match plan_and_confirm(settings, &session, loaded, &providers, (&req, &Hints::default()), &ask).await? {
                Ok(plan) => plan,
                Err(status) => return Ok(status),
            };
        let status = execute(settings, &mut session, plan, &providers, args.parallelism as usize, "Destroy").await;
        settle(sim.as_deref());
        leave_to_exit(&mut session, providers, sim.as_deref());
        status
    })?
}

/// `destroy --out` and `destroy --json` without `--auto-approve`, refused before anything
/// is read. A reviewable destroy is a saved plan, as in Terraform (`plan -destroy -out`);
/// and like `terraform destroy -json`, a JSON plan on stdout is for a program, which
/// cannot answer a prompt: it says `--auto-approve`, or applies a saved plan.
fn destroy_flags_taken(args: &DestroyArgs) -> Result<(), CliError> {
    if args.out.is_some() {
        return Err(CliError::new("`destroy` does not save a plan").hint(
            "save a destroy for review with `gpuplan plan --destroy --out FILE`, then apply it with `gpuplan apply FILE`",
        ));
    }
    if args.json && !args.auto_approve {
        return Err(CliError::new("`destroy --json` cannot ask for confirmation").hint(
            "pass --auto-approve, or review with `gpuplan plan --destroy --out FILE --json` and `gpuplan apply FILE`",
        ));
    }
    Ok(())
}

/// After executing: fold the sim cloud's event log into its snapshot when it has grown as
/// long as the world ([`SimCloud::settle`](crate::providers::sim::SimCloud::settle)), so
/// that the plans that follow read one snapshot instead of replaying every launch. The
/// apply's outcome is already recorded; a failure here only leaves the log to be replayed,
/// and says so.
fn settle(sim: Option<&crate::providers::sim::SimCloud>) {
    if let Some(Err(e)) = sim.map(|cloud| cloud.settle()) {
        output::stderr(&format!(
            "warning: the sim cloud's event log was not folded into its snapshot ({e}); the next command replays it\n"
        ));
    }
}

/// The command's last step: the state it wrote and the providers (the sim cloud's world)
/// are left to the process's exit, which follows, instead of being freed one allocation
/// at a time: at 100,000 pools that took about 0.3 s after the state was written. The
/// lock is still released as the session drops, and the sim cloud's lock is released
/// here (its file removed): nothing left writes or holds anything the exit does not
/// release.
fn leave_to_exit(
    session: &mut engine::Session,
    providers: crate::apply::ProviderSet,
    sim: Option<&crate::providers::sim::SimCloud>,
) {
    if let Some(cloud) = sim {
        cloud.close();
    }
    let state = std::mem::replace(&mut session.state, crate::state::State::new(String::new()));
    std::mem::forget(state);
    std::mem::forget(providers);
}

/// The spec as `apply` keeps it: whole, to plan with, or for a saved plan only what
/// checking and executing that plan reads of it.
enum SpecFor {
    Planning(crate::spec::Loaded),
    Saved {
        plan: Box<Plan>,
        /// The spec's digest, which the plan must have been made from.
        digest: String,
        /// What the providers are built from ([`engine::providers::providers_part`]).
        part: crate::spec::Spec,
        /// What differs from the sources the plan was made from (`Fingerprint`), to name
        /// it if the spec is not the plan's.
        changed: Vec<String>,
    },
}

/// A saved plan and what executing it reads of the spec: its digest, for the check that
/// the plan was made from this spec, and the providers' part, decoded with the plan's
/// variable values ([`crate::plan::PlanInputs`]).
///
/// The spec files are read first. The plan is read on this thread while another parses
/// the files and keeps only the providers' part ([`crate::spec::parse_providers_part`]).
/// When the files and the environment variables the spec looked up are the plan's
/// ([`crate::spec::fingerprint`]), the spec is the plan's, digest and all, and only that
/// part is decoded. Otherwise (an edited file, another value, a providers' part that
/// cannot stand alone) the plan goes, and the whole spec is loaded, digested and reduced
/// to its providers' part before the plan is read again: at 100,000 pools the spec and
/// the plan do not fit in memory side by side.
fn saved_spec(settings: &Settings, args: &ApplyArgs, file: &std::path::Path) -> miette::Result<Option<SpecFor>> {
    let path = settings.resolve_path(file);
    let read = load::read_spec(settings)?;
    let (plan, raw) = std::thread::scope(|s| {
        let raw = s.spawn(|| crate::spec::parse_providers_part(&read));
        let plan = common::read_plan(&path);
        // A panic while parsing is a bug: surface it as one thread would.
        (plan, raw.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    let plan = plan?;
    let Some(inputs) = plan.inputs.clone() else {
        return Err(CliError::new(format!("the plan file `{}` does not say what it was made with", file.display()))
            .hint("make the plan again with `gpuplan plan --out FILE`")
            .into());
    };
    if !given_as_saved(settings, args, &plan, &inputs, file)? {
        return Ok(None);
    }
    let opts = crate::spec::LoadOptions {
        vars: inputs.var_args(),
        auto_var_files: false,
        env: settings.env.clone(),
        ..Default::default()
    };
    let now = Fingerprint::of(&read.sources, &Default::default(), &inputs.sources.env_names(), &settings.env);
    let changed = now.changes_since(&inputs.sources);
    if changed.is_empty()
        && let Some((spec, skipped)) = raw.and_then(|raw| crate::spec::decode_providers_part(raw, &opts))
    {
        load::say_skipped(settings, &skipped);
        let digest = plan.spec_digest.clone();
        let part = engine::providers::providers_part(&spec);
        return Ok(Some(SpecFor::Saved { plan: Box::new(plan), digest, part, changed }));
    }
    drop(plan);
    let Some(loaded) = load::valid_spec_with(settings, read, &opts)? else { return Ok(None) };
    let digest = crate::plan::diff::spec_digest(&loaded.spec);
    let part = engine::providers::providers_part(&loaded.spec);
    drop(loaded);
    let plan = Box::new(common::read_plan(&path)?);
    Ok(Some(SpecFor::Saved { plan, digest, part, changed }))
}

/// Are the workspace, `--var`s, `--var-file`s, `--target`s and `--override-policy`s of
/// this `apply PLANFILE` the ones the plan was made with (those given; none need be)?
/// `Ok(false)`: a var file has problems (printed).
fn given_as_saved(
    settings: &Settings,
    args: &ApplyArgs,
    plan: &Plan,
    inputs: &crate::plan::PlanInputs,
    file: &std::path::Path,
) -> miette::Result<bool> {
    let mut sources = crate::diag::Sources::default();
    let mut diags = crate::diag::Diagnostics::default();
    let vars = crate::spec::varfile::resolve(&[], settings.given_vars(), &mut sources, &mut diags);
    if !diags.items.is_empty() {
        output::stderr(&crate::diag::render_text(&sources, &diags.items, settings.width, settings.color_stderr));
    }
    if diags.has_errors() {
        return Ok(false);
    }
    let targets = given_targets(&args.target, &plan.targets, "target")?;
    let replace = given_targets(&args.replace, &plan.replace, "replacement")?;
    let given = Given {
        workspace: &settings.workspace,
        vars: &vars,
        targets: &targets,
        replace: &replace,
        overrides: &args.policy.override_policy,
    };
    inputs
        .check_given(&plan.targets, &plan.replace, &given, &file.display().to_string())
        .map_err(|e| miette::Report::from(CliError::new(e.message).hint(e.hint)))?;
    Ok(true)
}

/// `--target`s (or `--replace`s: `what` is `target` or `replacement`) given to `apply
/// PLANFILE`, as the addresses they mean: a short name the plan's own resolve
/// ([`addresses::resolve`]), or else the full address typed, which [`Given`]'s check then
/// names as differing from the plan's.
fn given_targets(
    inputs: &[String],
    saved: &[crate::addr::Address],
    what: &str,
) -> Result<Vec<crate::addr::Address>, CliError> {
    let lookup = addresses::Lookup {
        what: "resource",
        place: format!("among the saved plan's {what}s"),
        otherwise: format!("`apply PLANFILE` takes the plan's own {what}s, or none"),
    };
    let mut out = Vec::new();
    for input in inputs {
        match addresses::resolve(input, saved, &lookup) {
            Ok(r) => out.push(r.address),
            Err(e) => out.push(input.parse().map_err(|_| e)?),
        }
    }
    Ok(out)
}

impl SpecFor {
    /// The spec the providers are built from.
    fn for_providers(&self) -> &crate::spec::Spec {
        match self {
            SpecFor::Planning(loaded) => &loaded.spec,
            SpecFor::Saved { part, .. } => part,
        }
    }
}

/// How to ask before changing the fleet.
struct Ask {
    question: &'static str,
    /// `Apply` or `Destroy`.
    verb: &'static str,
    auto_approve: bool,
    /// `--verbose`: the shown plan lists the policies that passed.
    verbose: bool,
    /// Show the plan as JSON on stdout (`destroy --json`).
    json: bool,
}

/// Plan afresh and show the plan with its cost and policy verdicts; then the plan to
/// execute, or the exit status when it must not go ahead (denied, or not confirmed).
///
/// The spec is the planner's: once the plan's errors are located in it, it goes before
/// the plan is shown (at 100,000 pools, about 130 MB that the rendering of the plan
/// and the apply would otherwise hold beside the plan).
async fn plan_and_confirm(
    settings: &Settings,
    session: &engine::Session,
    loaded: crate::spec::Loaded,
    providers: &crate::apply::ProviderSet,
    (req, hints): (&PlanRequest, &Hints),
    ask: &Ask,
) -> miette::Result<Result<Plan, ExitStatus>> {
    let mut plan = engine::run::plan_with(&loaded.spec, session, providers, req, hints).await?;
    common::locate_errors(&mut plan, &loaded);
    if ask.json {
        drop(loaded);
        output::stdout_with(|out| render::write_plan_json(&plan, out));
    } else {
        let opts = text_options(settings, ask.verbose);
        let frames = common::error_frames(&plan, &loaded, opts.width, opts.color);
        drop(loaded);
        output::stdout_with(|out| render::write_plan_text_framed(&plan, &opts, &frames, out));
    }
    common::warn_unused_overrides(&plan, &req.overrides)?;
    common::warn_near_limits(&plan)?;
    verdicts::warn_standing(&plan);
    if engine::run::denied(&plan) {
        return Ok(Err(denied(&plan, !ask.json)?));
    }
    if plan.has_work() && plan.errors.is_empty() {
        let answer = common::confirm(settings, ask.question, ask.auto_approve)?;
        if answer != common::Answer::Yes {
            // Terraform's wording; a pipe that ended unanswered also says how to answer.
            let mut text = format!("{} cancelled.\n", ask.verb);
            if answer == common::Answer::NoInput {
                text.push_str(&format!(
                    "hint: standard input ended without an answer: pipe `yes` to approve, or {}\n",
                    common::NO_PROMPT_HINT
                ));
            }
            output::stderr(&text);
            return Ok(Err(ExitStatus::Error));
        }
    }
    Ok(Ok(plan))
}

/// Refuse a denied plan, naming the policies that deny it (quoting their failures too
/// when the plan was not `shown` above).
fn denied(plan: &Plan, shown: bool) -> Result<ExitStatus, engine::run::RunError> {
    output::stderr(&verdicts::denial(plan, "nothing was applied", shown));
    Ok(ExitStatus::PolicyDenied)
}

fn text_options(settings: &Settings, verbose: bool) -> render::TextOptions {
    render::TextOptions { color: settings.color_stdout, width: settings.width, verbose }
}

async fn execute(
    settings: &Settings,
    session: &mut engine::Session,
    plan: Plan,
    providers: &crate::apply::ProviderSet,
    parallelism: usize,
    verb: &str,
) -> miette::Result<ExitStatus> {
    if !plan.errors.is_empty() {
        return Err(CliError::new(format!("the plan has {} error(s) and cannot be applied", plan.errors.len()))
            .hint("fix the errors shown above and plan again")
            .into());
    }
    if !plan.has_work() {
        output::stderr(&format!("\n{verb} complete! No changes.\n"));
        return Ok(ExitStatus::Success);
    }
    let opts = ApplyOptions { parallelism, progress: common::progress(settings), cancel: common::cancel_on_signal() };
    // The plan was shown; the apply owns it from here and frees it before it writes the state.
    let report = engine::run::apply(session, Arc::new(for_execution(plan)), providers, &opts).await?;
    output::stderr(&common::report(&report, verb));
    Ok(if report.succeeded() { ExitStatus::Success } else { ExitStatus::Error })
}

/// The plan as executing reads it. Of each pool's cost line the apply reads only the
/// prices its spend lines open at: the instance types the pool considered (four per
/// pool, about 28 MB at 100,000 pools) were for the shown plan, and go before the apply
/// builds the new state beside the plan.
fn for_execution(mut plan: Plan) -> Plan {
    for pool in plan.cost.iter_mut().flat_map(|c| c.pools.iter_mut()) {
        pool.alternatives = Vec::new();
    }
    plan
}
