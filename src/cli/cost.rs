//! `gpuplan cost`: what the fleet costs now and after the spec is applied.

use super::output;
use super::{CostArgs, ExitStatus, Settings, load, runtime};
use crate::engine::{self, run::PlanRequest};
use crate::render;

pub fn run(settings: &Settings, args: &CostArgs) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let ws = settings.workspace().with_backend(&loaded.spec).reading();
    runtime::block_on(async {
        let session = engine::open_session(&ws, "cost")?;
        let providers = engine::providers::build(&ws, &loaded.spec, &session.state)?;
        let req = PlanRequest { refresh: true, env: settings.env.clone(), ..PlanRequest::default() };
        let plan = engine::run::plan(&loaded.spec, &session, &providers, &req).await?;
        // What was spent, from the ledger in state, each line by its provider's clock.
        let spend = match &plan.spend {
            Some(s) => s.clone(),
            None => engine::gather::month_to_date(&loaded.spec, &session.state, &providers),
        };
        if args.json {
            let mut doc = serde_json::to_value(&plan.cost)
                .map_err(|e| super::CliError::new(format!("cannot write the cost report: {e}")))?;
            let spend_doc = serde_json::to_value(&spend)
                .map_err(|e| super::CliError::new(format!("cannot write the spend report: {e}")))?;
            match doc.as_object_mut() {
                Some(map) => {
                    map.insert("spend".into(), spend_doc);
                }
                None => doc = serde_json::json!({ "spend": spend_doc }),
            }
            let text = serde_json::to_string_pretty(&doc)
                .map_err(|e| super::CliError::new(format!("cannot write the cost report: {e}")))?;
            output::stdout(&format!("{text}\n"));
        } else {
            if let Some(report) = &plan.cost {
                output::stdout(&render::cost::cost_text(report, true, settings.width));
            }
            output::stdout(&render::cost::spend_text(&spend));
        }
        Ok::<_, miette::Report>(ExitStatus::Success)
    })?
}
