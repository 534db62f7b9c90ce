//! Reading `policy` blocks from `policies/*.hcl` (and `--policy-dir`s), with located
//! diagnostics for anything malformed.

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Diagnostics, Sources, did_you_mean};
use crate::policy::model::{Enforcement, Policy};
use crate::spec::hcl;
use crate::spec::raw::ExprKind;

const ATTRS: &[&str] = &["enforcement", "assert", "message", "for_each", "description"];

/// Policy files of the given directories (missing directories are skipped), sorted.
pub fn policy_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) == Some("hcl") {
                files.push(p);
            }
        }
    }
    files.sort();
    files.dedup();
    files
}

/// Read and parse every policy file. Problems go to `diags`; good policies are returned.
pub fn load(files: &[PathBuf], sources: &mut Sources, diags: &mut Diagnostics) -> Vec<Policy> {
    let mut out = Vec::new();
    for path in files {
        let name = crate::spec::display_path(path);
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                diags.push(Diagnostic::error("gpuplan::policy::io", format!("cannot read `{name}`: {e}")));
                continue;
            }
        };
        let id = sources.add(name, text);
        let text = sources.get(id).map(|f| f.text.clone()).unwrap_or_default();
        out.extend(parse(id, &text, sources, diags));
    }
    let mut seen: Vec<(String, crate::diag::Span)> = Vec::new();
    out.retain(|p: &Policy| {
        if let Some((_, prev)) = seen.iter().find(|(n, _)| *n == p.name) {
            diags.push(
                Diagnostic::error(
                    "gpuplan::policy::duplicate",
                    format!("policy {:?} is defined more than once", p.name),
                )
                .at(p.span, "defined again here")
                .at(*prev, "first defined here"),
            );
            return false;
        }
        seen.push((p.name.clone(), p.span));
        true
    });
    out
}

/// Policies of one file.
pub fn parse(file: u32, text: &str, sources: &Sources, diags: &mut Diagnostics) -> Vec<Policy> {
    let Some(body) = hcl::parse(file, text, diags) else { return vec![] };
    let mut out = Vec::new();
    for a in &body.attrs {
        diags.push(
            Diagnostic::error(
                "gpuplan::policy::syntax",
                format!("`{}` cannot be set outside a `policy` block", a.key.name),
            )
            .at(a.key.span, "not inside a policy"),
        );
    }
    for b in &body.blocks {
        if b.kind.name != "policy" {
            let d = Diagnostic::error(
                "gpuplan::policy::syntax",
                format!("unknown block `{}` in a policy file", b.kind.name),
            )
            .at(b.kind.span, "only `policy` blocks belong here");
            diags.push(d.help("write `policy \"NAME\" { enforcement = \"hard\" assert = ... }`"));
            continue;
        }
        let Some(label) = b.labels.first().filter(|_| b.labels.len() == 1) else {
            diags.push(
                Diagnostic::error("gpuplan::policy::syntax", "a policy needs exactly one name")
                    .at(b.kind.span, "name missing"),
            );
            continue;
        };
        let head = b.kind.span.join(label.span);
        let mut ok = true;
        for a in &b.body.attrs {
            if !ATTRS.contains(&a.key.name.as_str()) {
                let d = Diagnostic::error(
                    "gpuplan::policy::unknown_attribute",
                    format!("unknown attribute `{}` in policy {:?}", a.key.name, label.name),
                )
                .at(a.key.span, "not a policy attribute");
                diags.push(match did_you_mean(&a.key.name, ATTRS.iter().copied()) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!("policy attributes: {}", ATTRS.join(", "))),
                });
                ok = false;
            }
        }
        let enforcement = match b.body.attr("enforcement").map(|a| &a.value) {
            None => Some(Enforcement::Hard),
            Some(e) => match &e.kind {
                ExprKind::String(s) if s == "advisory" => Some(Enforcement::Advisory),
                ExprKind::String(s) if s == "soft" => Some(Enforcement::Soft),
                ExprKind::String(s) if s == "hard" => Some(Enforcement::Hard),
                _ => {
                    diags.push(
                        Diagnostic::error(
                            "gpuplan::policy::enforcement",
                            "`enforcement` must be \"advisory\", \"soft\" or \"hard\"",
                        )
                        .at(e.span, "not an enforcement level"),
                    );
                    None
                }
            },
        };
        let Some(assert) = b.body.attr("assert").map(|a| a.value.clone()) else {
            diags.push(
                Diagnostic::error("gpuplan::policy::assert", format!("policy {:?} has no `assert`", label.name))
                    .at(head, "`assert` is required")
                    .help("add `assert = plan.cost.hourly_after <= 500` or another condition"),
            );
            continue;
        };
        let description = match b.body.attr("description").map(|a| &a.value.kind) {
            Some(ExprKind::String(s)) => Some(s.clone()),
            _ => None,
        };
        let (Some(enforcement), true) = (enforcement, ok) else { continue };
        let (line, _) = sources.line_col(file, head.start);
        let location = format!("{}:{line}", sources.get(file).map(|f| f.name.as_str()).unwrap_or("?"));
        let policy = Policy {
            name: label.name.clone(),
            enforcement,
            description,
            for_each: b.body.attr("for_each").map(|a| a.value.clone()),
            assert,
            message: b.body.attr("message").map(|a| a.value.clone()),
            span: head,
            location,
        };
        // A policy reading a fact the plan does not offer could never pass: reject it
        // now, with its location, rather than fail it on every plan.
        if crate::policy::check::check(&policy, diags) {
            out.push(policy);
        }
    }
    out
}

/// `<DIR>/policies` plus any `--policy-dir`s.
pub fn default_dirs(spec_dir: &Path, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = vec![spec_dir.join("policies")];
    dirs.extend(extra.iter().cloned());
    dirs
}
