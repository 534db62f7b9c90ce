//! `gpuplan graph [--format dot|mermaid]`: the dependency graph on stdout.

use super::output;
use super::{ExitStatus, GraphArgs, GraphFormat, Settings, load};
use crate::graph;

pub fn run(settings: &Settings, args: &GraphArgs) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let g = graph::build(&loaded.spec);
    output::stdout(&match args.format {
        GraphFormat::Dot => g.to_dot(),
        GraphFormat::Mermaid => g.to_mermaid(),
    });
    Ok(ExitStatus::Success)
}
