//! `gpuplan drift`: what the clouds run that the state or spec does not say.

use super::output;
use super::{DriftArgs, ExitStatus, Settings, common, load, runtime};
use crate::engine::{self, run::PlanRequest};
use crate::render;

pub fn run(settings: &Settings, args: &DriftArgs) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let ws = settings.workspace().with_backend(&loaded.spec).reading();
    runtime::block_on(async {
        let session = engine::open_session(&ws, "drift")?;
        common::warn_stale_lock(&session);
        let providers = engine::providers::build(&ws, &loaded.spec, &session.state)?;
        let req = PlanRequest { refresh: true, env: settings.env.clone(), ..PlanRequest::default() };
        let plan = engine::run::plan(&loaded.spec, &session, &providers, &req).await?;
        if args.json {
            output::stdout(&format!("{:#}\n", render::drift_json(&plan.drift)));
        } else {
            let opts = render::TextOptions { color: settings.color_stdout, width: settings.width, verbose: false };
            output::stdout(&render::drift_text(&plan.drift, &opts));
        }
        Ok::<_, miette::Report>(if args.detailed_exitcode && !plan.drift.is_empty() {
            ExitStatus::Changes
        } else {
            ExitStatus::Success
        })
    })?
}
