//! Pieces the engine commands share: progress choice, Ctrl-C handling, confirmation,
//! the apply summary, and saved plan files.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;

use super::output;
use super::{CliError, Settings};
use crate::apply::progress::{Bar, Lines};
use crate::apply::{ApplyReport, Cancel, Progress, Status};
use crate::engine::run::RunError;
use crate::plan::{Action, Plan};

/// A bar on a terminal, lines in CI logs.
pub fn progress(settings: &Settings) -> Arc<dyn Progress> {
    if settings.interactive { Arc::new(Bar::new()) } else { Arc::new(Lines::new()) }
}

/// Ctrl-C and SIGTERM stop starting new work; in-flight operations finish and are saved.
/// The token is set before the message is printed, so no operation starts once a reader
/// of stderr has seen it. A second Ctrl-C changes nothing (as before): the apply still
/// finishes what is in flight and saves state; `kill -9` is the way to stop at once.
pub fn cancel_on_signal() -> Arc<Cancel> {
    let cancel = Arc::new(Cancel::default());
    let c = cancel.clone();
    // Registered before this returns, so a SIGTERM sent right after the apply starts counts.
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    tokio::spawn(async move {
        #[cfg(unix)]
        let why = match term {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "Ctrl-C",
                _ = term.recv() => "SIGTERM",
            },
            // No SIGTERM handler could be installed: SIGTERM keeps its default action (the
            // process ends at once), and Ctrl-C is still caught.
            Err(_) => match tokio::signal::ctrl_c().await {
                Ok(()) => "Ctrl-C",
                // No handler at all: both signals keep their default action.
                Err(_) => return,
            },
        };
        #[cfg(not(unix))]
        let why = match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            // No handler: Ctrl-C keeps its default action.
            Err(_) => return,
        };
        c.cancel_because(format!("{why} received"));
        output::stderr(&format!(
            "\nInterrupt received ({why}): no new operations will start; finishing the ones in flight and saving state...\n"
        ));
    });
    cancel
}

/// The lock was taken over from a process that died holding it (kill -9, a crash): say so,
/// since that run may have stopped half way. What it finished is in the journal, which
/// opening the session has already folded into the state.
pub fn warn_stale_lock(session: &crate::engine::Session) {
    if let Some(h) = &session.lock.stale {
        output::stderr(&takeover_warning(h));
    }
}

/// The warning for a lock taken over: an expired remote lock (naming its holder and when
/// it expired), or a local lock whose process died.
pub fn takeover_warning(h: &crate::state::LockInfo) -> String {
    match &h.expires {
        Some(expired) => format!(
            "warning: took over the expired state lock of `gpuplan {}` by {} (pid {}, id {}, since {}, expired {}): \
             it stopped renewing its lock; the operations it finished were kept, and this run shows what is left\n",
            h.operation, h.who, h.pid, h.id, h.created, expired
        ),
        None => format!(
            "warning: `gpuplan {}` (pid {}, {}, since {}) ended without releasing the state lock; \
             the operations it finished were kept, and this run shows what is left\n",
            h.operation, h.pid, h.who, h.created
        ),
    }
}

/// The answer to a confirmation prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `--auto-approve`, or `yes` typed or piped.
    Yes,
    /// Anything else: cancelled, as Terraform does.
    No,
    /// Standard input (not a terminal) ended before a line came: cancelled too, and the
    /// caller says how to answer without a terminal.
    NoInput,
}

/// Ask for `yes`: on the terminal, or from standard input when it is not one (`echo yes |
/// gpuplan apply`), as Terraform does. `--input=false` refuses to ask.
pub fn confirm(settings: &Settings, question: &str, auto_approve: bool) -> Result<Answer, CliError> {
    if auto_approve {
        return Ok(Answer::Yes);
    }
    if !settings.input {
        return Err(CliError::new("refusing to change the fleet without confirmation: `--input=false` forbids asking")
            .hint(NO_PROMPT_HINT));
    }
    output::stderr(&format!("\n{question}\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: "));
    // The prompt is on stderr, which is unbuffered; this only guards a future change.
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::new(format!("cannot read the answer: {e}")))?;
    if !settings.interactive {
        // A piped answer is not echoed: end the prompt's line.
        output::stderr("\n");
    }
    Ok(match (read, line.trim()) {
        (0, _) if !settings.interactive => Answer::NoInput,
        (_, "yes") => Answer::Yes,
        _ => Answer::No,
    })
}

/// How to change the fleet where no one can answer a prompt.
pub const NO_PROMPT_HINT: &str =
    "pass --auto-approve, or apply a saved plan: `gpuplan plan --out plan.out && gpuplan apply plan.out`";

/// `Apply complete! Resources: 2 added, 1 changed, 0 destroyed. Nodes: 3 launched, 1
/// terminated. Jobs: 1 launched, 1 requeued.` and what did not happen.
pub fn report(report: &ApplyReport, verb: &str) -> String {
    let mut out = String::new();
    let (mut added, mut changed, mut destroyed) = (0, 0, 0);
    for o in &report.outcomes {
        if !matches!(o.status, Status::Done | Status::Partial(_)) {
            continue;
        }
        match o.action {
            Action::Create => added += 1,
            Action::Update => changed += 1,
            Action::Delete => destroyed += 1,
            Action::Replace => {
                added += 1;
                destroyed += 1;
            }
            Action::NoOp | Action::Read => {}
        }
    }
    for o in &report.outcomes {
        match &o.status {
            Status::Failed(m) => out.push_str(&format!("Error: {} failed: {m}\n", o.address)),
            Status::Skipped(m) => out.push_str(&format!("Skipped: {}: {m}\n", o.address)),
            Status::Partial(m) if o.missing > 0 => out.push_str(&format!(
                "Error: {} is {} short of the plan: {m}\n",
                o.address,
                crate::model::words::nodes(o.missing as usize)
            )),
            Status::Partial(m) => out.push_str(&format!("Warning: {}: {m}\n", o.address)),
            Status::Done => {}
        }
    }
    // The plan's summary in the past tense: `Plan: … Nodes: 3 to launch, 1 to terminate.
    // Jobs: 1 to launch, 1 to requeue.`
    let jobs = report.jobs;
    let nodes_created: usize = report.outcomes.iter().map(|o| o.created).sum::<usize>() + jobs.nodes_launched;
    let nodes_deleted: usize = report.outcomes.iter().map(|o| o.deleted).sum::<usize>() + jobs.nodes_terminated;
    let mut resources = format!(
        "Resources: {added} added, {changed} changed, {destroyed} destroyed. Nodes: {nodes_created} launched, {nodes_deleted} terminated."
    );
    if jobs.launched + jobs.requeued > 0 {
        resources.push_str(&format!(" Jobs: {} launched, {} requeued.", jobs.launched, jobs.requeued));
    }
    let a = report.adopted;
    let adopted: Vec<String> = [(a.imported, "imported"), (a.moved, "moved"), (a.forgotten, "forgotten")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !adopted.is_empty() {
        resources.push_str(&format!(" Instances: {}.", adopted.join(", ")));
    }
    if report.succeeded() {
        out.push_str(&format!("\n{verb} complete! {resources}\n"));
    } else if report.cancelled {
        out.push_str(&format!(
            "\n{verb} interrupted. {resources}\nhint: run `gpuplan plan` to see the remaining work\n"
        ));
    } else if report.count(|s| !matches!(s, Status::Done | Status::Partial(_))) == 0 {
        // Every change went through, but the cloud delivered fewer nodes than planned.
        out.push_str(&format!(
            "\n{verb} incomplete: {} fewer than planned. {resources}\nhint: the cloud had no capacity for them; `gpuplan plan` shows them, and the next `gpuplan apply` (or `reconcile`) launches them\n",
            crate::model::words::nodes(report.missing() as usize)
        ));
    } else {
        let failed = report.count(|s| matches!(s, Status::Failed(_)));
        let skipped = report.count(|s| matches!(s, Status::Skipped(_)));
        out.push_str(&format!(
            "\n{verb} failed: {failed} change(s) failed, {skipped} skipped. {resources}\nhint: what completed is saved in state; fix the cause and run `gpuplan apply` again\n"
        ));
    }
    out
}

/// Write a saved plan atomically (`engine::planfile`), as a CLI error on failure.
/// Sealed with `keys` when the spec has `encryption {}`.
pub fn save_plan(path: &Path, plan: &Plan, keys: &crate::state::seal::Keyring) -> Result<(), CliError> {
    crate::engine::planfile::save_with(path, plan, keys).map_err(planfile_error)
}

pub fn read_plan(path: &Path) -> Result<Plan, CliError> {
    crate::engine::planfile::load(path).map_err(planfile_error)
}

fn planfile_error(e: crate::engine::planfile::PlanFileError) -> CliError {
    let hint = e.hint();
    let err = CliError::new(e.to_string());
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Say so when `--override-policy` names something that did not need overriding.
pub fn warn_unused_overrides(plan: &Plan, overrides: &[String]) -> Result<(), RunError> {
    let results = crate::engine::run::policy_results(plan);
    for name in crate::policy::unused_overrides(results, overrides) {
        let hard =
            results.iter().any(|r| r.name == name && !r.passed && r.enforcement == crate::policy::Enforcement::Hard);
        let why =
            if hard { "it is a hard policy and cannot be overridden" } else { "no soft policy by that name failed" };
        output::stderr(&format!("warning: --override-policy {name} had no effect: {why}\n"));
    }
    Ok(())
}

/// Quota checks that passed but reached `warn_percent` of their limit: a warning on stderr.
pub fn warn_near_limits(plan: &Plan) -> Result<(), RunError> {
    for r in crate::engine::run::policy_results(plan).iter().filter(|r| r.passed && r.warning) {
        output::stderr(&format!("warning: {}: {}\n", r.name, r.message));
    }
    Ok(())
}

/// Point each plan error at its block in the spec (`main.hcl:12:1`): planning knows spans,
/// only the loaded sources know files and lines.
pub fn locate_errors(plan: &mut Plan, loaded: &crate::spec::Loaded) {
    for e in plan.errors.iter_mut().filter(|e| e.location.is_none()) {
        e.location = error_span(e, &loaded.spec).map(|s| loaded.sources.location(s));
    }
}

/// The spec block or value a plan error is about: its own span, else its address's block.
fn error_span(e: &crate::plan::model::PlanError, spec: &crate::spec::Spec) -> Option<crate::diag::Span> {
    use crate::addr::Kind;
    if e.span.is_some() {
        return e.span;
    }
    let a = &e.address;
    match a.kind {
        Kind::GpuPool => spec.gpu_pools.get(a).map(|b| b.meta.span),
        Kind::Quota => spec.quotas.get(a).map(|b| b.meta.span),
        Kind::JobTemplate => spec.job_templates.get(a).map(|b| b.meta.span),
        Kind::Job => spec.jobs.get(a).map(|b| b.meta.span),
        Kind::Autoscaler => spec.autoscalers.get(a).map(|b| b.meta.span),
        Kind::Reservation => spec.reservations.get(a).map(|b| b.meta.span),
        Kind::Provider => None,
    }
}

/// Each plan error that points into the spec, drawn as `validate` draws its problems (a
/// frame with the source line, the `help:`), for the text view ([`crate::render::write_plan_text_framed`]);
/// `None` for the others, which the view writes as `Error:` lines.
pub fn error_frames(plan: &Plan, loaded: &crate::spec::Loaded, width: usize, color: bool) -> Vec<Option<String>> {
    plan.errors
        .iter()
        .map(|e| {
            let span = error_span(e, &loaded.spec)?;
            let mut d = crate::diag::Diagnostic::error("gpuplan::plan", e.message.clone()).at(span, "here");
            if let Some(hint) = &e.hint {
                d = d.help(hint.clone());
            }
            Some(crate::diag::render_text(&loaded.sources, &[d], width, color))
        })
        .collect()
}

/// The plan as text on stdout, its located errors drawn in frames from `loaded`'s sources.
pub fn show_plan(plan: &Plan, opts: &crate::render::TextOptions, loaded: &crate::spec::Loaded) {
    let frames = error_frames(plan, loaded, opts.width, opts.color);
    output::stdout_with(|out| crate::render::write_plan_text_framed(plan, opts, &frames, out))
}

/// Leave a command's large values to the process's exit instead of dropping them: the
/// command ends right after, and the OS takes the memory back at once, where freeing a
/// big spec, state and plan allocation by allocation was about a fifth of a no-op plan's
/// wall time at 2,000 pools (README, Small fleet). Only for values that own nothing but
/// memory and file locks the exit releases: a remote lock, a lease or a buffered writer
/// must still be dropped (the state session is dropped, only its `State` is left).
pub fn leave_to_exit<T>(value: T) {
    std::mem::forget(value);
}
