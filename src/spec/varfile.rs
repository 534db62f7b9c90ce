//! Variable values from outside the spec, in Terraform's order: `*.auto.vars.hcl` files
//! beside the spec (lexical order), then `--var` and `--var-file` as the command line
//! gives them (later wins); `GPUPLAN_VAR_<name>` and `default` come below all of them
//! (`decode.rs` falls back to those). Var files are read here, into the load's
//! [`Sources`], so a problem in one points at its `file:line:col`.
//!
//! A var file holds `name = value` lines (HCL) or a mapping of names to values (YAML,
//! `*.yaml`/`*.yml`), values written as in the spec but without references. Files named
//! `*.vars.hcl`, `*.vars.yaml` or `*.vars.yml` are var files, never spec files, so one can
//! sit in the spec folder as Terraform's `*.tfvars` do. Nothing here knows which
//! variables the spec declares: `decode.rs` judges names and types.

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Diagnostics, Sources, Span};
use crate::spec::eval::{EvalError, Scope, Value, eval};
use crate::spec::raw::Attr;

/// The suffix of the var files read without being named (`prod.auto.vars.hcl`).
pub const AUTO_SUFFIX: &str = ".auto.vars.hcl";

/// The suffixes of var files: never read as spec files.
const SUFFIXES: [&str; 3] = [".vars.hcl", ".vars.yaml", ".vars.yml"];

/// One source of variable values, as the command line (or a caller) gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum VarArg {
    /// `--var NAME=VALUE`: text, read as the variable's type says.
    Flag(String, String),
    /// `--var-file FILE` (absolute, or relative to the working directory).
    File(PathBuf),
    /// A value decided elsewhere, e.g. the one a saved plan carries; `from` says where
    /// (shown in errors).
    Value { name: String, value: Value, from: String },
}

/// One variable value, read and placed in order.
#[derive(Debug, Clone, PartialEq)]
pub struct VarInput {
    pub name: String,
    pub value: VarValue,
    pub from: VarFrom,
}

#[derive(Debug, Clone, PartialEq)]
pub enum VarValue {
    /// From the command line or the environment: read by the declared type.
    Text(String),
    /// From a file or a saved plan: already a value, converted to the declared type.
    Typed(Value),
}

/// Where a value came from, for messages.
#[derive(Debug, Clone, PartialEq)]
pub enum VarFrom {
    Flag,
    /// A var file: its name as shown, the name's and the value's spans.
    File {
        file: String,
        key: Span,
        value: Span,
    },
    /// Decided elsewhere ([`VarArg::Value`]).
    Given(String),
}

impl VarFrom {
    /// `--var`, `` `prod.vars.hcl` ``, or the given label.
    pub fn describe(&self) -> String {
        match self {
            VarFrom::Flag => "`--var`".into(),
            VarFrom::File { file, .. } => format!("`{file}`"),
            VarFrom::Given(from) => from.clone(),
        }
    }
}

/// Is `path` a var file read without being named?
pub fn is_auto_var_file(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(AUTO_SUFFIX) && n.len() > AUTO_SUFFIX.len())
}

/// Is `path` named as a var file (`prod.vars.hcl`, `ci.vars.yaml`, the auto ones)?
pub fn is_var_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    SUFFIXES.iter().any(|s| name.ends_with(s) && name.len() > s.len())
}

/// Every value in force order (later wins): the `auto` var files (`*.auto.vars.hcl`, in
/// lexical order), then `args`. Files are added to `sources`; their problems go to `diags`.
pub fn resolve(auto: &[PathBuf], args: &[VarArg], sources: &mut Sources, diags: &mut Diagnostics) -> Vec<VarInput> {
    let mut inputs = Vec::new();
    for file in auto {
        inputs.extend(read_file(file, sources, diags));
    }
    for arg in args {
        match arg {
            VarArg::Flag(name, text) => {
                inputs.push(VarInput { name: name.clone(), value: VarValue::Text(text.clone()), from: VarFrom::Flag })
            }
            VarArg::File(path) => inputs.extend(read_file(path, sources, diags)),
            VarArg::Value { name, value, from } => inputs.push(VarInput {
                name: name.clone(),
                value: VarValue::Typed(value.clone()),
                from: VarFrom::Given(from.clone()),
            }),
        }
    }
    inputs
}

/// [`resolve`] for arguments that name no file (no auto files either): `None` if any does.
pub fn without_files(args: &[VarArg]) -> Option<Vec<VarInput>> {
    if args.iter().any(|a| matches!(a, VarArg::File(_))) {
        return None;
    }
    let mut unused = Sources::default();
    Some(resolve(&[], args, &mut unused, &mut Diagnostics::default()))
}

/// The values of one var file, in file order.
fn read_file(path: &Path, sources: &mut Sources, diags: &mut Diagnostics) -> Vec<VarInput> {
    let shown = super::display_path(path);
    let text = match std::fs::read(path).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => {
            diags.push(
                Diagnostic::error("gpuplan::vars::encoding", format!("the var file `{shown}` is not UTF-8 text"))
                    .help("save it as UTF-8"),
            );
            return Vec::new();
        }
        Err(e) => {
            diags.push(
                Diagnostic::error("gpuplan::vars::io", format!("cannot read the var file `{shown}`: {e}"))
                    .help("check the path given to --var-file (relative paths start at -C DIR)"),
            );
            return Vec::new();
        }
    };
    let id = sources.add(shown.clone(), text);
    let text = &sources.get(id).expect("just added").text;
    let yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"));
    let attrs = if yaml { super::yaml::parse_attrs(id, text, diags) } else { hcl_attrs(id, text, diags) };
    let mut inputs = Vec::new();
    for attr in attrs.unwrap_or_default() {
        match eval(&attr.value, &mut Scope::default()) {
            Ok(value) => inputs.push(VarInput {
                name: attr.key.name.clone(),
                value: VarValue::Typed(value),
                from: VarFrom::File { file: shown.clone(), key: attr.key.span, value: attr.value.span },
            }),
            Err(EvalError::Diag(mut d)) => {
                d.help = d.help.or_else(|| Some("a var file holds plain values, without references".into()));
                diags.push(*d)
            }
            // Nothing in a var file can be poisoned: it refers to nothing.
            Err(EvalError::Poisoned) => {}
        }
    }
    inputs
}

/// The `name = value` lines of an HCL var file; a block is an error.
fn hcl_attrs(id: u32, text: &str, diags: &mut Diagnostics) -> Option<Vec<Attr>> {
    let body = super::hcl::parse(id, text, diags)?;
    for b in &body.blocks {
        diags.push(
            Diagnostic::error(
                "gpuplan::vars::block",
                format!("a var file sets variables; `{}` is a block", b.kind.name),
            )
            .at(b.kind.span, "not `name = value`")
            .help("write one `name = value` line per variable; declare variables in the spec"),
        );
    }
    Some(body.attrs)
}

#[cfg(test)]
mod tests;
