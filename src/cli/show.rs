//! `gpuplan show PLANFILE`: render a saved plan (the artifact a pull-request job kept) as
//! text, JSON or markdown, reading nothing else: no spec, no state, no cloud; each view
//! with the variable values the plan was made with (`render::variables`). And
//! `gpuplan completions SHELL`.

use super::output;
use super::{Cli, CompletionShell, ExitStatus, PlanFormat, Settings, ShowArgs, common, plan::MARKDOWN_LIMIT};
use crate::render;

pub fn run(settings: &Settings, args: &ShowArgs) -> miette::Result<ExitStatus> {
    let plan = common::read_plan(&settings.resolve_path(&args.planfile))?;
    let format = if args.json { PlanFormat::Json } else { args.format.unwrap_or(PlanFormat::Text) };
    match format {
        PlanFormat::Text => {
            let opts =
                render::TextOptions { color: settings.color_stdout, width: settings.width, verbose: args.verbose };
            output::stdout(&render::variables::text(&plan));
            output::stdout_with(|out| render::write_plan_text(&plan, &opts, out))
        }
        PlanFormat::Json => output::stdout_with(|out| render::write_plan_json(&plan, out)),
        PlanFormat::Markdown => {
            // The variables close the comment, inside its limit.
            let vars = render::variables::markdown(&plan);
            let limit = MARKDOWN_LIMIT.saturating_sub(vars.chars().count());
            output::stdout(&(render::plan_markdown(&plan, limit) + &vars))
        }
    }
    Ok(ExitStatus::Success)
}

pub fn completions(shell: CompletionShell) -> miette::Result<ExitStatus> {
    use clap::CommandFactory;
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "gpuplan", &mut out);
    output::stdout(&String::from_utf8_lossy(&out));
    Ok(ExitStatus::Success)
}
