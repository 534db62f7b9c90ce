//! `--var` and `--var-file` in the order the command line gives them: later wins, as in
//! Terraform, whichever of the two flags sets a variable.

use std::path::Path;

use clap::ArgMatches;

use super::Command;

/// One variable argument as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawVar<'a> {
    /// `--var NAME=VALUE`, not yet split.
    Pair(&'a str),
    /// `--var-file FILE`, as typed (relative to `-C DIR`).
    File(&'a Path),
}

/// The `--var` and `--var-file` arguments of `command`, in command-line order (clap's
/// value indices of the subcommand's matches).
pub fn in_order<'a>(command: &'a Command, matches: &ArgMatches) -> Vec<RawVar<'a>> {
    let Some((pairs, files)) = command.vars() else { return Vec::new() };
    let Some((_, sub)) = matches.subcommand() else { return Vec::new() };
    let at = |id: &str| sub.indices_of(id).map(|i| i.collect::<Vec<_>>()).unwrap_or_default();
    let mut all: Vec<(usize, RawVar<'a>)> = at("var").into_iter().zip(pairs.iter().map(|p| RawVar::Pair(p))).collect();
    all.extend(at("var_file").into_iter().zip(files.iter().map(|f| RawVar::File(f))));
    all.sort_by_key(|(index, _)| *index);
    all.into_iter().map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::Cli;

    fn order(args: &[&str]) -> Vec<String> {
        let m = Cli::command().try_get_matches_from(args).expect("parses");
        let cli = Cli::from_arg_matches(&m).expect("matches");
        in_order(&cli.command, &m)
            .into_iter()
            .map(|v| match v {
                RawVar::Pair(p) => format!("var {p}"),
                RawVar::File(f) => format!("file {}", f.display()),
            })
            .collect()
    }

    #[test]
    fn vars_and_var_files_keep_their_command_line_order() {
        let got = order(&["gpuplan", "plan", "--var-file", "a.hcl", "--var", "n=1", "--var-file=b.yaml", "--var=n=2"]);
        assert_eq!(got, ["file a.hcl", "var n=1", "file b.yaml", "var n=2"]);
        assert_eq!(order(&["gpuplan", "destroy", "--var", "x=1", "--var-file", "f"]), ["var x=1", "file f"]);
        assert!(order(&["gpuplan", "cost"]).is_empty());
    }
}
