//! Terraform's single-dash spellings (`-auto-approve`, `-var x=1`, `-out=p.plan`,
//! `-input=false`) as their `--` forms: one rewrite of the raw arguments before clap
//! parses them. It reads clap's own model of the command line, so every long flag of the
//! chosen subcommand (its own and the global ones) has a single-dash spelling, including
//! flags added later; it owns no list of flags.
//!
//! Left alone: real short flags and their clusters (`-C DIR`, `-Cdir`, `-v`, `-f`), the
//! value after a flag that takes one (`--var -x=1`), and everything after `--`. An
//! unknown single-dash word (`-auto-aprove`) becomes `--auto-aprove`, so that clap's
//! error names the word and suggests the flag it is close to, instead of complaining
//! about its first letter.

use std::ffi::OsString;

use clap::{Arg, Command, CommandFactory};

use super::Cli;

/// `args` (program name first) with single-dash long flags spelled with two dashes.
pub fn long_flags(args: Vec<OsString>) -> Vec<OsString> {
    // Most command lines have no single-dash word: they skip building clap's model.
    if !args.iter().skip(1).any(|a| a.to_str().is_some_and(single_dash_word)) {
        return args;
    }
    let mut cli = Cli::command();
    cli.build();
    rewrite(&cli, args)
}

/// The rewrite against a built `root` command (`Command::build` propagates the global
/// flags into every subcommand, and adds `--help` and `--version`).
fn rewrite(root: &Command, args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut args = args.into_iter();
    out.extend(args.next());
    let mut cmd = root;
    let mut value_next = false;
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            value_next = false;
            out.push(arg);
            continue;
        };
        if std::mem::take(&mut value_next) {
            out.push(arg);
            continue;
        }
        if text == "--" {
            out.push(arg);
            out.extend(args.by_ref());
            break;
        }
        if let Some(body) = text.strip_prefix("--") {
            value_next = long(cmd, name_of(body)).is_some_and(|a| separate_value(a, body));
            out.push(arg);
        } else if let Some(body) = text.strip_prefix('-').filter(|b| !b.is_empty()) {
            let (word, takes) = single_dash(cmd, body);
            value_next = takes;
            out.push(word.map_or(arg, OsString::from));
        } else {
            if let Some(sub) = cmd.find_subcommand(text) {
                cmd = sub;
            }
            out.push(arg);
        }
    }
    out
}

/// A word that may be a single-dash long flag: `-` and at least two more characters, the
/// first a letter (so `-5` and `-` stay values), not `--...`.
fn single_dash_word(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next() == Some('-') && chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.next().is_some()
}

/// `body` (the word without its dash): the word to pass on instead, if any, and whether
/// the next argument is this flag's value.
fn single_dash(cmd: &Command, body: &str) -> (Option<String>, bool) {
    let name = name_of(body);
    if name.len() > 1
        && let Some(a) = long(cmd, name)
    {
        return (Some(format!("--{body}")), separate_value(a, body));
    }
    if let Some(takes) = short_cluster(cmd, body) {
        return (None, takes);
    }
    if single_dash_word(&format!("-{body}")) {
        return (Some(format!("--{body}")), false);
    }
    (None, false)
}

/// `-vC DIR`, `-Cdir`, `-f`: a run of short flags, the last of which may take a value
/// (attached, or the next argument). `Some(takes the next argument)` when every letter
/// is a short flag of `cmd`.
fn short_cluster(cmd: &Command, body: &str) -> Option<bool> {
    for (i, c) in body.char_indices() {
        let a = cmd.get_arguments().find(|a| a.get_short() == Some(c) || has_short_alias(a, c))?;
        if a.get_action().takes_values() {
            return Some(i + c.len_utf8() == body.len());
        }
    }
    Some(false)
}

fn has_short_alias(a: &Arg, c: char) -> bool {
    a.get_all_short_aliases().is_some_and(|s| s.contains(&c))
}

/// The flag of `cmd` spelled `--name` (or an alias of it).
fn long<'c>(cmd: &'c Command, name: &str) -> Option<&'c Arg> {
    cmd.get_arguments().find(|a| a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name)))
}

/// `name=value` → `name`.
fn name_of(body: &str) -> &str {
    body.split_once('=').map_or(body, |(n, _)| n)
}

/// Does `--body` leave its value to the next argument? Not with `=VALUE` attached, and
/// not for flags whose value must be attached (`--refresh=false`).
fn separate_value(a: &Arg, body: &str) -> bool {
    a.get_action().takes_values() && !body.contains('=') && !a.is_require_equals_set()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(args: &[&str]) -> Vec<String> {
        let args: Vec<OsString> = std::iter::once("gpuplan").chain(args.iter().copied()).map(OsString::from).collect();
        long_flags(args).into_iter().skip(1).map(|a| a.into_string().expect("utf-8")).collect()
    }

    #[test]
    fn terraform_spellings_become_long_flags() {
        assert_eq!(rw(&["apply", "-auto-approve"]), ["apply", "--auto-approve"]);
        assert_eq!(rw(&["plan", "-var", "x=1", "-var=y=2"]), ["plan", "--var", "x=1", "--var=y=2"]);
        assert_eq!(rw(&["plan", "-out=p.plan", "-json"]), ["plan", "--out=p.plan", "--json"]);
        assert_eq!(
            rw(&["plan", "-refresh=false", "-detailed-exitcode"]),
            ["plan", "--refresh=false", "--detailed-exitcode"]
        );
        // Global flags, before or after the command.
        assert_eq!(
            rw(&["-no-color", "plan", "-lock-timeout=5s", "-target", "gpu_pool.a"]),
            ["--no-color", "plan", "--lock-timeout=5s", "--target", "gpu_pool.a"]
        );
        assert_eq!(rw(&["apply", "-input=false"]), ["apply", "--input=false"]);
    }

    #[test]
    fn short_flags_values_and_the_rest_after_a_double_dash_stay() {
        assert_eq!(rw(&["-C", "dir", "plan", "-v"]), ["-C", "dir", "plan", "-v"]);
        assert_eq!(rw(&["-Cdir", "plan"]), ["-Cdir", "plan"]);
        assert_eq!(rw(&["jobs", "logs", "-f", "train"]), ["jobs", "logs", "-f", "train"]);
        // A value that looks like a flag is still the value of the flag before it.
        assert_eq!(rw(&["plan", "-var", "-json=1"]), ["plan", "--var", "-json=1"]);
        assert_eq!(rw(&["-C", "-json", "plan"]), ["-C", "-json", "plan"]);
        assert_eq!(rw(&["plan", "--", "-json"]), ["plan", "--", "-json"]);
        // `--refresh` takes its value attached only: the next word is not its value.
        assert_eq!(rw(&["plan", "-refresh", "-json"]), ["plan", "--refresh", "--json"]);
    }

    #[test]
    fn a_flag_counts_only_for_the_command_that_has_it() {
        // `--auto-approve` is apply's; on plan it stays unknown, for clap to report
        // with its suggestion.
        assert_eq!(rw(&["plan", "-auto-aprove"]), ["plan", "--auto-aprove"]);
        assert_eq!(rw(&["sim", "advance", "-help"]), ["sim", "advance", "--help"]);
    }
}
