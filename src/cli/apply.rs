//! `gpuplan apply [PLANFILE]` and `gpuplan destroy`: execute a plan, saved or fresh.

use std::sync::Arc;

use super::output;
use super::{ApplyArgs, CliError, DestroyArgs, ExitStatus, Settings, common, load, runtime};
use crate::apply::ApplyOptions;
use crate::engine::{self, run::PlanRequest};
use crate::plan::Plan;
use crate::render;

pub fn apply(settings: &Settings, args: &ApplyArgs) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let Some(policies) = load::policies(settings, &args.policy_dir)? else { return Ok(ExitStatus::Error) };
    let saved = match &args.planfile {
        Some(p) => Some(common::read_plan(&settings.resolve_path(p))?),
        None => None,
    };
    let ws = settings.workspace();
    runtime::block_on(async {
        let mut session = engine::open_session(&ws, "apply")?;
        common::warn_stale_lock(&session);
        let providers = engine::providers::build(&ws, &loaded.spec, &session.state)?;
        let plan = match saved {
            Some(plan) => {
                engine::run::check_fresh(&plan, &session, Some(&loaded.spec))?;
                if engine::run::denied(&plan) {
                    return Ok(denied());
                }
                plan
            }
            None => {
                let req = PlanRequest {
                    refresh: true,
                    targets: args.target.clone(),
                    destroy: false,
                    env: settings.env.clone(),
                    policies,
                    overrides: args.override_policy.clone(),
                };
                let plan = engine::run::plan(&loaded.spec, &session, &providers, &req).await?;
                output::stdout(&render::plan_text(&plan, &text_options(settings)));
                common::warn_unused_overrides(&plan, &args.override_policy);
                common::warn_near_limits(&plan);
                if engine::run::denied(&plan) {
                    return Ok(denied());
                }
                if plan.has_changes()
                    && plan.errors.is_empty()
                    && !common::confirm(settings, "Do you want to perform these actions?", args.auto_approve)?
                {
                    output::stderr("Apply cancelled.\n");
                    return Ok(ExitStatus::Error);
                }
                plan
            }
        };
        execute(settings, &mut session, plan, &providers, args.parallelism as usize, "Apply").await
    })?
}

pub fn destroy(settings: &Settings, args: &DestroyArgs) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let ws = settings.workspace();
    runtime::block_on(async {
        let mut session = engine::open_session(&ws, "destroy")?;
        common::warn_stale_lock(&session);
        let providers = engine::providers::build(&ws, &loaded.spec, &session.state)?;
        let req = PlanRequest {
            refresh: true,
            targets: args.target.clone(),
            destroy: true,
            env: settings.env.clone(),
            ..PlanRequest::default()
        };
        let plan = engine::run::plan(&loaded.spec, &session, &providers, &req).await?;
        output::stdout(&render::plan_text(&plan, &text_options(settings)));
        if plan.has_changes()
            && plan.errors.is_empty()
            && !common::confirm(
                settings,
                "Do you really want to destroy everything this state owns?",
                args.auto_approve,
            )?
        {
            output::stderr("Destroy cancelled.\n");
            return Ok(ExitStatus::Error);
        }
        execute(settings, &mut session, plan, &providers, 10, "Destroy").await
    })?
}

fn denied() -> ExitStatus {
    output::stderr(
        "\nerror: a policy denied this plan; nothing was applied\nhint: fix the spec, or for a soft policy pass --override-policy NAME when planning\n",
    );
    ExitStatus::PolicyDenied
}

fn text_options(settings: &Settings) -> render::TextOptions {
    render::TextOptions { color: settings.color_stdout, width: settings.width }
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
    if !plan.has_changes() {
        output::stderr(&format!("\n{verb} complete! No changes.\n"));
        return Ok(ExitStatus::Success);
    }
    let opts = ApplyOptions { parallelism, progress: common::progress(settings), cancel: common::cancel_on_signal() };
    // The plan was shown; the apply owns it from here and frees it before it writes the state.
    let report = engine::run::apply(session, Arc::new(plan), providers, &opts).await?;
    output::stderr(&common::report(&report, verb));
    Ok(if report.succeeded() { ExitStatus::Success } else { ExitStatus::Error })
}
