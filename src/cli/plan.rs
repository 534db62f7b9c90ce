//! `gpuplan plan`: refresh, diff and show what apply would do; `--out` saves it.

use super::output;
use super::{ExitStatus, PlanArgs, PlanFormat, Settings, addresses, common, load, runtime, verdicts};
use crate::engine::{self, Hints, PlanRequest};
use crate::plan::PlanInputs;
use crate::render;

/// Markdown plans are posted as pull-request comments, which GitHub caps at 65,536.
pub const MARKDOWN_LIMIT: usize = 60_000;

pub fn run(settings: &Settings, args: &PlanArgs) -> miette::Result<ExitStatus> {
    let (loaded, pre) = engine::preread::alongside(&settings.workspace(), || load::valid_spec(settings));
    let Some(loaded) = loaded? else { return Ok(ExitStatus::Error) };
    let Some(policies) = load::policies(settings, &args.policy.policy_dir)? else { return Ok(ExitStatus::Error) };
    // A plan writes nothing: no state, state folder or simulated cloud is created.
    let ws = settings.workspace().with_backend(&loaded.spec).reading();
    let format = if args.json { PlanFormat::Json } else { args.format.unwrap_or(PlanFormat::Text) };
    let save_to = args.out.as_ref().map(|out| settings.resolve_path(out));
    let status = std::thread::scope(|s| {
        // A plan saved or printed as JSON keeps the spec's digest (what `apply PLANFILE`
        // compares) and, saved, what it was made with: both read only the loaded spec, so
        // they are made on a thread of their own while the clouds are read and the plan is
        // composed, not after it on the main thread (a serialization of the whole spec and
        // a hash of its files: about 85 M instructions at 2,000 pools).
        let kept = (save_to.is_some() || format == PlanFormat::Json).then(|| {
            s.spawn(|| {
                let digest = crate::plan::diff::spec_digest(&loaded.spec);
                let inputs = save_to
                    .as_ref()
                    .map(|_| PlanInputs::of(&loaded, &settings.workspace, &args.policy.override_policy, &settings.env));
                (digest, inputs)
            })
        });
        runtime::block_on(async {
            let session = engine::open_session_preread(&ws, "plan", pre.state)?;
            common::warn_stale_lock(&session);
            let (providers, sim) = engine::providers::build_with_sim(&ws, &loaded.spec, &session.state, pre.sim)?;
            let req = PlanRequest {
                refresh: args.refresh,
                targets: addresses::targets(&args.target, &loaded.spec, &session.state)?,
                replace: replacements(args, &loaded.spec)?,
                destroy: args.destroy,
                env: settings.env.clone(),
                policies,
                overrides: args.policy.override_policy.clone(),
                autoscale: Vec::new(),
            };
            // A plan shown or saved is executed later, if at all: nothing to read ahead. The
            // digest is made beside (above), never by the plan itself.
            let hints = Hints { shown_only: true, ..Hints::default() };
            let mut plan = engine::run::plan_with(&loaded.spec, &session, &providers, &req, &hints).await?;
            common::locate_errors(&mut plan, &loaded);
            if let Some(kept) = kept {
                // A panic while digesting is a bug: surface it as one thread would.
                let (digest, inputs) = kept.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                plan.spec_digest = digest;
                plan.inputs = inputs;
            }
            let status = show_and_save(settings, args, &plan, &loaded, save_to.as_deref(), format, &session)?;
            // The locks are released (the state's by dropping the session, the sim cloud's by
            // closing it); the state, the plan and the providers' fleets are left to the exit.
            let engine::Session { backend, lock, state } = session;
            drop((lock, backend));
            if let Some(cloud) = sim {
                cloud.close();
            }
            common::leave_to_exit((plan, providers, state));
            Ok::<_, miette::Report>(status)
        })
    })??;
    common::leave_to_exit(loaded);
    Ok(status)
}

/// Show the plan in `format` while it is saved to `save_to` (serialized, compressed) on a
/// second thread; the save's outcome is reported after the plan, then the warnings and
/// the exit status.
fn show_and_save(
    settings: &Settings,
    args: &PlanArgs,
    plan: &crate::plan::Plan,
    loaded: &crate::spec::Loaded,
    save_to: Option<&std::path::Path>,
    format: PlanFormat,
    session: &engine::Session,
) -> miette::Result<ExitStatus> {
    let saved = std::thread::scope(|s| {
        let keys = session.backend.keys();
        let saving = save_to.map(|path| s.spawn(|| common::save_plan(path, plan, keys)));
        match format {
            PlanFormat::Text => {
                let opts =
                    render::TextOptions { color: settings.color_stdout, width: settings.width, verbose: args.verbose };
                common::show_plan(plan, &opts, loaded)
            }
            PlanFormat::Json => output::stdout_with(|out| render::write_plan_json(plan, out)),
            PlanFormat::Markdown => output::stdout(&render::plan_markdown(plan, MARKDOWN_LIMIT)),
        }
        // A panic while saving is a bug: surface it as one thread would.
        saving.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    if let Some(out) = &args.out {
        saved.transpose()?;
        if engine::run::denied(plan) {
            // Saved for review, but `apply` will refuse it: do not suggest applying it.
            output::stderr(&format!(
                "\nSaved the plan to: {} (denied by policy: apply will refuse it)\n",
                out.display()
            ));
        } else {
            output::stderr(&format!(
                "\nSaved the plan to: {}\nTo perform exactly these actions, run:\n  gpuplan apply {}\n",
                out.display(),
                out.display()
            ));
        }
    }
    note_unsaved(args, plan, format);
    common::warn_unused_overrides(plan, &args.policy.override_policy)?;
    common::warn_near_limits(plan)?;
    verdicts::warn_standing(plan);
    Ok(if !plan.errors.is_empty() {
        ExitStatus::Error
    } else if engine::run::denied(plan) {
        output::stderr(&verdicts::denial(plan, "it cannot be applied", format == PlanFormat::Text));
        ExitStatus::PolicyDenied
    } else if args.detailed_exitcode && plan.has_work() {
        ExitStatus::Changes
    } else {
        ExitStatus::Success
    })
}

/// As Terraform says of a plan without `-out`: `apply` plans again, so what it does may
/// differ. Said only of a text plan that has work and could be applied.
fn note_unsaved(args: &PlanArgs, plan: &crate::plan::Plan, format: PlanFormat) {
    if args.out.is_none()
        && format == PlanFormat::Text
        && plan.has_work()
        && plan.errors.is_empty()
        && !engine::run::denied(plan)
    {
        output::stderr(
            "\nNote: you didn't use --out to save this plan, so gpuplan can't guarantee to take\n\
             exactly these actions if you run `gpuplan apply` now.\n",
        );
    }
}

/// `--replace` addresses ([`addresses::replacements`]); a destroy replaces nothing.
fn replacements(args: &PlanArgs, spec: &crate::spec::Spec) -> Result<Vec<crate::addr::Address>, super::CliError> {
    if args.destroy && !args.replace.is_empty() {
        return Err(super::CliError::new("`--replace` cannot be combined with `--destroy`")
            .hint("a destroy removes every node already: drop `--replace`, or plan without `--destroy`"));
    }
    addresses::replacements(&args.replace, spec)
}
