//! Test files (`tests/*.test.hcl`) → [`TestFile`]: `variables {}` and ordered `run "NAME" {}`
//! blocks, every problem reported at its file:line:col in one pass. Parsing only: nothing
//! here loads the spec or touches a sim world.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::diag::{Diagnostic, Diagnostics, Sources, Span, did_you_mean};
use crate::spec::eval::{Scope, Value, eval};
use crate::spec::hcl;
use crate::spec::raw::{Attr, Block, Body, Expr, ExprKind, Step};

/// `tests/*.test.hcl` of a spec folder, sorted (none when there is no `tests/`).
pub fn test_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let tests = dir.join("tests");
    if !tests.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&tests)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_file() && name.ends_with(".test.hcl") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// One parsed test file.
#[derive(Debug, Clone)]
pub struct TestFile {
    /// Its id in the [`Sources`] it was parsed into.
    pub file: u32,
    /// The path as users see it.
    pub name: String,
    /// `variables {}`: defaults for every run of the file.
    pub variables: Vec<Attr>,
    pub runs: Vec<RunBlock>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Plan,
    Apply,
}

#[derive(Debug, Clone)]
pub struct RunBlock {
    pub name: String,
    /// The `run "NAME"` header.
    pub span: Span,
    pub command: Command,
    /// `variables {}` of this run (over the file's).
    pub variables: Vec<Attr>,
    /// `sim {}`: what to do to the world before planning, in the order written.
    pub sim: SimSetup,
    pub asserts: Vec<Assert>,
    /// `expect_failures = [policy.x, gpu_pool.y]`: addresses as written, with their spans.
    pub expect_failures: Vec<(String, Span)>,
}

#[derive(Debug, Clone, Default)]
pub struct SimSetup {
    pub steps: Vec<SimStep>,
    /// How long each job launched in this run runs (sim time).
    pub job_duration: Option<Duration>,
}

/// One change to the sim world before the run plans.
#[derive(Debug, Clone)]
pub enum SimStep {
    /// `capacity { zone = "us-east-1a"  spot = 0  on_demand = 4 }`: live nodes allowed per
    /// instance type in a zone.
    Capacity { zone: String, spot: Option<u32>, on_demand: Option<u32>, span: Span },
    /// `advance = "3h"`: the sim clock moves on.
    Advance { by: Duration, span: Span },
    /// `interrupt { pool = gpu_pool.train  count = 1 }`: spot reclaims.
    Interrupt { pool: crate::addr::Address, count: u32, span: Span },
    /// `fault { pool = gpu_pool.train  xid = 79  gpu = 3  count = 1 }` (or `ecc`,
    /// `missing_gpu`, `readiness_fail` = true): GPU faults on the pool's first live nodes.
    Fault { pool: crate::addr::Address, count: u32, fault: crate::providers::sim::Fault, span: Span },
}

#[derive(Debug, Clone)]
pub struct Assert {
    pub condition: Expr,
    pub error_message: Expr,
    pub span: Span,
}

const RUN_ATTRS: &[&str] = &["command", "expect_failures"];
const RUN_BLOCKS: &[&str] = &["variables", "sim", "assert"];

/// Read and parse test files into `sources`; problems go to `diags`.
pub fn load(paths: &[PathBuf], sources: &mut Sources, diags: &mut Diagnostics) -> Vec<TestFile> {
    let mut out = Vec::new();
    for path in paths {
        let name = crate::spec::display_path(path);
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let id = sources.add(name.clone(), text);
                let text = sources.get(id).map(|f| f.text.clone()).unwrap_or_default();
                if let Some(f) = parse(id, &name, &text, diags) {
                    out.push(f);
                }
            }
            Err(e) => diags.push(Diagnostic::error("gpuplan::test::io", format!("cannot read `{name}`: {e}"))),
        }
    }
    out
}

/// Parse one test file's text.
pub fn parse(file: u32, name: &str, text: &str, diags: &mut Diagnostics) -> Option<TestFile> {
    let body = hcl::parse(file, text, diags)?;
    let mut out = TestFile { file, name: name.to_string(), variables: Vec::new(), runs: Vec::new() };
    for a in &body.attrs {
        diags.push(
            Diagnostic::error("gpuplan::test::syntax", format!("`{}` cannot be set outside a block", a.key.name))
                .at(a.key.span, "not inside `run` or `variables`")
                .help("a test file holds `variables {}` and `run \"NAME\" {}` blocks"),
        );
    }
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut seen_variables = false;
    for b in &body.blocks {
        match b.kind.name.as_str() {
            "variables" => {
                if seen_variables {
                    diags.push(
                        Diagnostic::error("gpuplan::test::duplicate", "a test file has one `variables` block")
                            .at(b.kind.span, "second `variables` block"),
                    );
                }
                seen_variables = true;
                out.variables = variables(b, diags);
            }
            "run" => {
                if let Some(run) = run_block(b, diags) {
                    if !names.insert(run.name.clone()) {
                        diags.push(
                            Diagnostic::error(
                                "gpuplan::test::duplicate",
                                format!("run {:?} is defined twice", run.name),
                            )
                            .at(b.labels[0].span, "defined again here"),
                        );
                    }
                    out.runs.push(run);
                }
            }
            other => diags.push(unknown("block", other, &["variables", "run"], b.kind.span)),
        }
    }
    if out.runs.is_empty() && !diags.has_errors() {
        diags.push(
            Diagnostic::error("gpuplan::test::no_runs", format!("`{name}` has no `run` block"))
                .at(Span::new(file, 0, 0), "nothing to run")
                .help("add `run \"NAME\" { command = plan  assert { condition = ... error_message = \"...\" } }`"),
        );
    }
    Some(out)
}

fn unknown(what: &str, name: &str, known: &[&str], span: Span) -> Diagnostic {
    let mut d = Diagnostic::error("gpuplan::test::unknown", format!("unknown {what} `{name}` in a test file"))
        .at(span, format!("not a test {what}"));
    d = match did_you_mean(name, known.iter().copied()) {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => d.help(format!("expected one of: {}", known.join(", "))),
    };
    d
}

/// `variables { x = 1 }`: attributes only.
fn variables(b: &Block, diags: &mut Diagnostics) -> Vec<Attr> {
    no_labels(b, diags);
    for inner in &b.body.blocks {
        diags.push(
            Diagnostic::error("gpuplan::test::syntax", "`variables` holds attributes, not blocks")
                .at(inner.kind.span, "write `name = value`"),
        );
    }
    b.body.attrs.clone()
}

fn no_labels(b: &Block, diags: &mut Diagnostics) {
    if let Some(l) = b.labels.first() {
        diags.push(
            Diagnostic::error("gpuplan::test::syntax", format!("`{}` takes no label", b.kind.name))
                .at(l.span, "remove this label"),
        );
    }
}

fn run_block(b: &Block, diags: &mut Diagnostics) -> Option<RunBlock> {
    let Some(label) = b.labels.first() else {
        diags.push(
            Diagnostic::error("gpuplan::test::syntax", "a `run` block needs a name")
                .at(b.kind.span, "write `run \"NAME\" {`"),
        );
        return None;
    };
    let mut run = RunBlock {
        name: label.name.clone(),
        span: b.kind.span.join(label.span),
        command: Command::Apply,
        variables: Vec::new(),
        sim: SimSetup::default(),
        asserts: Vec::new(),
        expect_failures: Vec::new(),
    };
    for a in &b.body.attrs {
        match a.key.name.as_str() {
            "command" => run.command = command(&a.value, diags).unwrap_or(Command::Apply),
            "expect_failures" => run.expect_failures = expect_failures(&a.value, diags),
            other => diags.push(unknown("attribute", other, RUN_ATTRS, a.key.span)),
        }
    }
    for inner in &b.body.blocks {
        match inner.kind.name.as_str() {
            "variables" => run.variables.extend(variables(inner, diags)),
            "sim" => sim(inner, &mut run.sim, diags),
            "assert" => run.asserts.extend(assert(inner, diags)),
            other => diags.push(unknown("block", other, RUN_BLOCKS, inner.kind.span)),
        }
    }
    Some(run)
}

/// `plan` or `apply`, bare or quoted.
fn command(e: &Expr, diags: &mut Diagnostics) -> Option<Command> {
    let word = match &e.kind {
        ExprKind::Traversal { root, steps } if steps.is_empty() => root.name.clone(),
        ExprKind::String(s) => s.clone(),
        _ => String::new(),
    };
    match word.as_str() {
        "plan" => Some(Command::Plan),
        "apply" => Some(Command::Apply),
        _ => {
            diags.push(
                Diagnostic::error("gpuplan::test::command", "`command` is `plan` or `apply`")
                    .at(e.span, "not `plan` or `apply`"),
            );
            None
        }
    }
}

/// `[policy.min_spot_share, gpu_pool.train]`.
fn expect_failures(e: &Expr, diags: &mut Diagnostics) -> Vec<(String, Span)> {
    let ExprKind::Array(items) = &e.kind else {
        diags.push(
            Diagnostic::error("gpuplan::test::expect_failures", "`expect_failures` is a list of addresses")
                .at(e.span, "write e.g. `[policy.fleet_hourly_cap, gpu_pool.train]`"),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        match address_text(item) {
            Some(text) => out.push((text, item.span)),
            None => diags.push(
                Diagnostic::error("gpuplan::test::expect_failures", "not an address")
                    .at(item.span, "write `policy.NAME`, `quota.NAME` or a block address such as `gpu_pool.NAME`"),
            ),
        }
    }
    out
}

/// `policy.x` or `gpu_pool.y`: a kind this run can expect to fail, and one name.
fn address_text(e: &Expr) -> Option<String> {
    let ExprKind::Traversal { root, steps } = &e.kind else { return None };
    let [Step::Attr(name)] = steps.as_slice() else { return None };
    let known = root.name == "policy" || crate::addr::Kind::parse(&root.name).is_some();
    known.then(|| format!("{}.{}", root.name, name.name))
}

fn sim(b: &Block, out: &mut SimSetup, diags: &mut Diagnostics) {
    no_labels(b, diags);
    for a in &b.body.attrs {
        match a.key.name.as_str() {
            "advance" => {
                if let Some(by) = duration(&a.value, diags) {
                    out.steps.push(SimStep::Advance { by, span: a.key.span });
                }
            }
            "job_duration" => out.job_duration = duration(&a.value, diags),
            other => diags.push(unknown("attribute", other, &["advance", "job_duration"], a.key.span)),
        }
    }
    for inner in &b.body.blocks {
        match inner.kind.name.as_str() {
            "capacity" => out.steps.extend(capacity(inner, diags)),
            "interrupt" => out.steps.extend(interrupt(inner, diags)),
            "fault" => out.steps.extend(fault(inner, diags)),
            other => diags.push(unknown("block", other, &["capacity", "interrupt", "fault"], inner.kind.span)),
        }
    }
    // Steps happen in the order they are written, attributes and blocks alike.
    out.steps.sort_by_key(|s| match s {
        SimStep::Capacity { span, .. }
        | SimStep::Advance { span, .. }
        | SimStep::Interrupt { span, .. }
        | SimStep::Fault { span, .. } => span.start,
    });
}

fn capacity(b: &Block, diags: &mut Diagnostics) -> Option<SimStep> {
    no_labels(b, diags);
    check_attrs(&b.body, &["zone", "spot", "on_demand"], diags);
    let zone = required(b, "zone", diags).and_then(|e| string(e, diags))?;
    let spot = b.body.attr("spot").and_then(|a| count(&a.value, diags));
    let on_demand = b.body.attr("on_demand").and_then(|a| count(&a.value, diags));
    if spot.is_none() && on_demand.is_none() {
        diags.push(
            Diagnostic::error("gpuplan::test::sim", "`capacity` sets `spot`, `on_demand` or both")
                .at(b.kind.span, "no limit given")
                .help("e.g. `capacity { zone = \"us-east-1a\"  spot = 0 }`: no spot node can launch there"),
        );
        return None;
    }
    Some(SimStep::Capacity { zone, spot, on_demand, span: b.kind.span })
}

fn interrupt(b: &Block, diags: &mut Diagnostics) -> Option<SimStep> {
    no_labels(b, diags);
    check_attrs(&b.body, &["pool", "count"], diags);
    let pool = pool_of(b, diags)?;
    let count = match b.body.attr("count") {
        Some(a) => count(&a.value, diags)?,
        None => 1,
    };
    Some(SimStep::Interrupt { pool, count, span: b.kind.span })
}

/// `fault { pool = ...  count = N  xid = 79  gpu = 3 }`, or `ecc`, `missing_gpu`,
/// `readiness_fail` set to true: exactly one fault.
fn fault(b: &Block, diags: &mut Diagnostics) -> Option<SimStep> {
    use crate::providers::sim::Fault;
    no_labels(b, diags);
    check_attrs(&b.body, &["pool", "count", "xid", "gpu", "ecc", "missing_gpu", "readiness_fail"], diags);
    let pool = pool_of(b, diags)?;
    let nodes = match b.body.attr("count") {
        Some(a) => count(&a.value, diags)?,
        None => 1,
    };
    let gpu = match b.body.attr("gpu") {
        Some(a) => Some(count(&a.value, diags)?),
        None => None,
    };
    let set = |name: &str| b.body.attr(name).is_some_and(|a| matches!(a.value.kind, ExprKind::Bool(true)));
    let mut faults = Vec::new();
    if let Some(a) = b.body.attr("xid") {
        faults.push(Fault::Xid { code: count(&a.value, diags)?, gpu });
    }
    if set("ecc") {
        faults.push(Fault::Ecc { gpu });
    }
    if set("missing_gpu") {
        faults.push(Fault::MissingGpu);
    }
    if set("readiness_fail") {
        faults.push(Fault::ReadinessFail);
    }
    if faults.len() != 1 {
        diags.push(
            Diagnostic::error("gpuplan::test::sim", "`fault` names one fault")
                .at(b.kind.span, format!("{} faults here", faults.len()))
                .help("one of `xid = 79`, `ecc = true`, `missing_gpu = true`, `readiness_fail = true`"),
        );
        return None;
    }
    Some(SimStep::Fault { pool, count: nodes, fault: faults.remove(0), span: b.kind.span })
}

/// The `pool` of a `sim {}` step, as a pool address.
fn pool_of(b: &Block, diags: &mut Diagnostics) -> Option<crate::addr::Address> {
    let pool_expr = required(b, "pool", diags)?;
    let text = match &pool_expr.kind {
        ExprKind::String(s) => Some(s.clone()),
        _ => address_text(pool_expr),
    };
    let pool = match text.as_deref().map(str::parse::<crate::addr::Address>) {
        Some(Ok(a)) if a.kind == crate::addr::Kind::GpuPool => a,
        _ => {
            diags.push(
                Diagnostic::error("gpuplan::test::sim", "`pool` names a pool")
                    .at(pool_expr.span, "write e.g. `gpu_pool.train`"),
            );
            return None;
        }
    };
    Some(pool)
}

fn assert(b: &Block, diags: &mut Diagnostics) -> Option<Assert> {
    no_labels(b, diags);
    check_attrs(&b.body, &["condition", "error_message"], diags);
    let condition = required(b, "condition", diags).cloned();
    let error_message = required(b, "error_message", diags).cloned();
    Some(Assert { condition: condition?, error_message: error_message?, span: b.kind.span })
}

fn check_attrs(body: &Body, known: &[&str], diags: &mut Diagnostics) {
    for a in body.attrs.iter().filter(|a| !known.contains(&a.key.name.as_str())) {
        diags.push(unknown("attribute", &a.key.name, known, a.key.span));
    }
    for b in &body.blocks {
        diags.push(unknown("block", &b.kind.name, &[], b.kind.span));
    }
}

fn required<'b>(b: &'b Block, name: &str, diags: &mut Diagnostics) -> Option<&'b Expr> {
    let found = b.body.attr(name).map(|a| &a.value);
    if found.is_none() {
        diags.push(
            Diagnostic::error("gpuplan::test::missing", format!("`{}` needs `{name}`", b.kind.name))
                .at(b.kind.span, format!("no `{name}` here")),
        );
    }
    found
}

/// A literal (or constant expression) of the file.
fn constant(e: &Expr, diags: &mut Diagnostics) -> Option<Value> {
    match eval(e, &mut Scope::default()) {
        Ok(v) => Some(v),
        Err(crate::spec::eval::EvalError::Diag(d)) => {
            diags.push(*d);
            None
        }
        Err(crate::spec::eval::EvalError::Poisoned) => None,
    }
}

fn string(e: &Expr, diags: &mut Diagnostics) -> Option<String> {
    match constant(e, diags)? {
        Value::String(s) => Some(s),
        other => {
            diags.push(
                Diagnostic::error("gpuplan::test::type", format!("expected a string, found {}", other.type_name()))
                    .at(e.span, "not a string"),
            );
            None
        }
    }
}

fn count(e: &Expr, diags: &mut Diagnostics) -> Option<u32> {
    match constant(e, diags)? {
        Value::Number(n) if n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 => Some(n as u32),
        other => {
            diags.push(
                Diagnostic::error("gpuplan::test::type", format!("expected a whole number, found {other}"))
                    .at(e.span, "not a whole number"),
            );
            None
        }
    }
}

fn duration(e: &Expr, diags: &mut Diagnostics) -> Option<Duration> {
    let text = string(e, diags)?;
    let Ok(d) = humantime::parse_duration(&text) else {
        diags.push(
            Diagnostic::error("gpuplan::test::duration", format!("`{text}` is not a duration"))
                .at(e.span, "write e.g. \"90m\" or \"3h\""),
        );
        return None;
    };
    if let Err(why) = crate::model::time::check_duration(d) {
        diags.push(
            Diagnostic::error("gpuplan::test::duration", format!("`{text}` is too long: {why}"))
                .at(e.span, format!("at most \"{}\"", crate::model::time::MAX_DURATION_TEXT)),
        );
        return None;
    }
    Some(d)
}
