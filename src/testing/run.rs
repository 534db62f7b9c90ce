//! One test file's runs, in order, against its private world: load the spec with the
//! run's variables, shape the world, plan, apply (unless `command = plan`), check.

use std::sync::Arc;
use std::time::Instant;

use crate::apply::{ApplyOptions, Cancel, Status as ApplyStatus, progress::Quiet};
use crate::diag::{Sources, Span};
use crate::engine::{self, run::PlanRequest};
use crate::spec::eval::{EvalError, Scope, Value, eval};
use crate::spec::{self, LoadOptions};
use crate::testing::file::{Command, RunBlock, TestFile};
use crate::testing::world::{self, World};
use crate::testing::{Failure, FileReport, Options, RunReport, Status, check};

/// Run a file's runs (those `--run` selects) in order. After a run errors, the rest are
/// skipped: the state they would see is not the one their author expected.
pub fn file(f: &TestFile, sources: &Sources, opts: &Options) -> FileReport {
    let started = Instant::now();
    let selected: Vec<&RunBlock> =
        f.runs.iter().filter(|r| opts.runs.is_empty() || opts.runs.contains(&r.name)).collect();
    let setup = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
        .and_then(|rt| {
            World::new(&opts.dir, &opts.env).map(|w| (rt, w)).map_err(|e| format!("cannot create the test world: {e}"))
        });
    let mut runs = Vec::new();
    let mut broken = false;
    for run in selected {
        let location = sources.location(run.span);
        let t = Instant::now();
        let (status, failures) = match &setup {
            _ if broken => (Status::Skip, Vec::new()),
            Err(message) => {
                (Status::Error, vec![Failure { location: location.clone(), message: message.clone(), values: vec![] }])
            }
            Ok((rt, world)) => rt.block_on(one(f, run, sources, opts, world)),
        };
        broken |= status == Status::Error;
        runs.push(RunReport { name: run.name.clone(), location, status, duration: t.elapsed(), failures });
    }
    FileReport { file: f.name.clone(), runs, duration: started.elapsed() }
}

fn broken(sources: &Sources, span: Span, message: impl Into<String>) -> (Status, Vec<Failure>) {
    (Status::Error, vec![Failure { location: sources.location(span), message: message.into(), values: vec![] }])
}

async fn one(f: &TestFile, run: &RunBlock, sources: &Sources, opts: &Options, world: &World) -> (Status, Vec<Failure>) {
    let mut vars = Vec::new();
    let mut spans = Vec::new();
    // The run's variables come after the file's: later wins, as with `--var`.
    for a in f.variables.iter().chain(&run.variables) {
        match eval(&a.value, &mut Scope::default()) {
            Ok(v) => {
                vars.push((a.key.name.clone(), var_text(&v)));
                spans.push((a.key.name.clone(), a.key.span));
            }
            Err(e) => return broken(sources, a.value.span, eval_text(&e)),
        }
    }
    let loaded =
        match spec::load_dir(&opts.dir, &LoadOptions { env: opts.env.clone(), ..LoadOptions::with_flags(vars) }) {
            Ok(l) => crate::graph::checked(l),
            Err(e) => return broken(sources, run.span, format!("cannot read the spec folder: {e}")),
        };
    for (name, span) in &spans {
        let flag = format!("`--var {name}=");
        if loaded
            .diags
            .items
            .iter()
            .any(|d| d.code == "gpuplan::spec::undeclared_variable" && d.message.contains(&flag))
        {
            return broken(sources, *span, format!("the spec declares no variable `{name}`"));
        }
    }
    if loaded.diags.has_errors() {
        return check::spec_errors(run, sources, &loaded);
    }
    // Opened before the spec is simulated: the sim settings are those of its own block.
    let cloud = match world.open(&loaded.spec, run.sim.job_duration) {
        Ok(c) => c,
        Err(e) => return broken(sources, run.span, format!("cannot open the test world's sim cloud: {e}")),
    };
    for step in &run.sim.steps {
        if let Err(e) = world::step(&cloud, step) {
            return broken(sources, world::step_span(step), e);
        }
    }
    let spec = world::simulated(loaded.spec);
    let mut session = match engine::open_session(&world.ws, "test") {
        Ok(s) => s,
        Err(e) => return broken(sources, run.span, format!("cannot open the test world's state: {e}")),
    };
    let providers = world::providers(&cloud, &spec, &session.state);
    let req = PlanRequest {
        refresh: true,
        env: world.ws.env.clone(),
        policies: opts.policies.clone(),
        ..PlanRequest::default()
    };
    let plan = match engine::run::plan(&spec, &session, &providers, &req).await {
        Ok(p) => p,
        Err(e) => return broken(sources, run.span, format!("plan failed: {e}")),
    };
    let values = check::Values::new(&plan, &spec, &session.state);
    let mut apply_failed = Vec::new();
    if run.command == Command::Apply && plan.errors.is_empty() && !engine::run::denied(&plan) && plan.has_work() {
        let options = ApplyOptions { parallelism: 10, progress: Arc::new(Quiet), cancel: Arc::new(Cancel::default()) };
        match engine::run::apply(&mut session, Arc::new(plan.clone()), &providers, &options).await {
            Ok(report) => {
                for o in &report.outcomes {
                    match &o.status {
                        ApplyStatus::Failed(m) | ApplyStatus::Skipped(m) => {
                            apply_failed.push((o.address.base().to_string(), format!("apply failed: {m}")))
                        }
                        _ => {}
                    }
                }
            }
            Err(e) => return broken(sources, run.span, format!("apply failed: {e}")),
        }
    }
    let values = values.with_state(&session.state);
    check::verdict(run, sources, &plan, &apply_failed, &values)
}

/// A test variable as `--var` would give it: strings as they are, the rest as JSON.
fn var_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_json().to_string(),
    }
}

fn eval_text(e: &EvalError) -> String {
    match e {
        EvalError::Diag(d) => d.message.clone(),
        EvalError::Poisoned => "it refers to something that failed".into(),
    }
}
