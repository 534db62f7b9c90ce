//! `gpuplan reconcile`: one pass (`--once`, the default) or a pass every `--interval` and
//! whenever the spec folder changes ([`crate::reconcile::triggers`]),
//! each refresh → drift → autoscale → plan → policies → apply, with a report per pass and
//! Prometheus metrics on `--metrics-addr`.
//!
//! This file parses the flags, serves the metrics, loads the spec and reports each round;
//! the loop, its triggers and jitter, the election and what to do after a failed pass
//! are [`crate::reconcile::runner`]'s. The loop holds the state lock only during a pass;
//! a round whose lock is taken by another run is skipped and says so. With
//! `--leader-elect` only the holder of a Kubernetes Lease runs rounds
//! ([`crate::reconcile::leader`]); the lease is released on exit. Ctrl-C or SIGTERM
//! stops the loop: an apply in flight finishes its started operations and saves state, a
//! sleep ends at once.

use std::sync::Arc;

use tokio::sync::watch;

use super::output;
use super::{CliError, ExitStatus, ReconcileArgs, Settings, common, error, load, runtime};
use crate::apply::{ApplyOptions, Cancel};
use crate::engine::run::PlanRequest;
use crate::metrics::{self, Metrics};
use crate::reconcile::leader::{self, Election, LeaseConfig, Role};
use crate::reconcile::runner::{self, Next};
use crate::reconcile::{self, Clock, NoQueue, Options, Outcome, triggers};
use crate::render;

pub fn run(settings: &Settings, args: &ReconcileArgs) -> miette::Result<ExitStatus> {
    let Some(policies) = load::policies(settings, &args.policy.policy_dir)? else { return Ok(ExitStatus::Error) };
    runtime::block_on(async {
        let cancel = Arc::new(Cancel::default());
        let (stop_tx, stop) = watch::channel(false);
        stop_on_signal(cancel.clone(), stop_tx);
        let metrics = Arc::new(Metrics::default());
        if let Some(addr) = args.metrics_addr {
            let listener = metrics::server::bind(addr).await.map_err(|e| {
                CliError::new(format!("cannot serve metrics on {addr}: {e}"))
                    .hint("pick a free address, e.g. `--metrics-addr 127.0.0.1:9464` (port 0 picks any free port)")
            })?;
            let bound = listener.local_addr().map_or_else(|_| addr.to_string(), |a| a.to_string());
            output::stderr(&format!("Serving metrics on http://{bound}/metrics\n"));
            tokio::spawn(metrics::server::serve(listener, metrics.clone(), stop.clone()));
        }
        let opts = Options {
            plan: PlanRequest {
                refresh: true,
                env: settings.env.clone(),
                policies,
                overrides: args.policy.override_policy.clone(),
                ..PlanRequest::default()
            },
            dry_run: args.dry_run,
            max_destroy: args.max_destroy,
            apply: ApplyOptions {
                parallelism: args.parallelism as usize,
                progress: common::progress(settings),
                cancel: cancel.clone(),
            },
        };
        let clock = Clock::start();
        let election = if args.leader_elect {
            Some(start_election(settings, args, &metrics).await?)
        } else {
            metrics.set_leader(true);
            metrics.set_ready(true);
            None
        };
        let Some(every) = args.interval else {
            return round(settings, args, &opts, &clock, &metrics, false).await;
        };
        // Pod triggers watch the clusters of the spec as it is at start.
        let home = settings.env.get("HOME").map(std::path::PathBuf::from);
        let pods = match crate::spec::load_dir(&settings.dir, &settings.load_options()) {
            Ok(l) => triggers::pod_targets(&l.spec, &settings.dir, home.as_deref()),
            // The first round reports what is wrong with the folder.
            Err(_) => Vec::new(),
        };
        let var_files = settings
            .vars
            .iter()
            .filter_map(|v| match v {
                crate::spec::varfile::VarArg::File(path) => Some(path.clone()),
                _ => None,
            })
            .collect();
        let wake_on = runner::Triggers { spec_dir: settings.dir.clone(), var_files, pods };
        let (base, clock, metrics) = (&opts, &clock, &metrics);
        runner::run(
            every,
            election,
            stop,
            wake_on,
            |line: &str| output::stderr(line),
            |fence| {
                // Elected, a round acts under this term's fence.
                let cancel = fence.map_or_else(|| base.apply.cancel.clone(), |f| Cancel::fenced(cancel.clone(), f));
                let apply =
                    ApplyOptions { parallelism: base.apply.parallelism, progress: base.apply.progress.clone(), cancel };
                let opts =
                    Options { plan: base.plan.clone(), dry_run: base.dry_run, max_destroy: base.max_destroy, apply };
                async move {
                    if let Err(report) = round(settings, args, &opts, clock, metrics, true).await {
                        // E.g. the spec folder vanished mid-checkout: report, count, try next round.
                        metrics.record_failure(clock.now());
                        error::print_report(&report, settings);
                    }
                }
            },
        )
        .await;
        output::stderr("Reconcile stopped.\n");
        Ok::<_, miette::Report>(ExitStatus::Success)
    })?
}

/// Start the election, and say every change of role on stderr and in the metrics.
async fn start_election(
    settings: &Settings,
    args: &ReconcileArgs,
    metrics: &Arc<Metrics>,
) -> miette::Result<(Election, tokio::task::JoinHandle<()>)> {
    let cfg = LeaseConfig::new(
        args.lease_name.clone(),
        args.lease_namespace.clone(),
        leader::identity(args.lease_identity.as_deref(), &settings.env),
        args.lease_duration,
    );
    let identity = cfg.identity.clone();
    let (election, task) = leader::start(cfg).await?;
    output::stderr(&format!("Leader election on lease {} as `{identity}`\n", election.lease));
    let (mut role, m, lease) = (election.role(), metrics.clone(), election.lease.clone());
    tokio::spawn(async move {
        let mut was_leader = false;
        while role.changed().await.is_ok() {
            let now = role.borrow_and_update().clone();
            let line = match &now {
                Role::Starting => continue,
                Role::Leader => format!("Leading: holding lease {lease}\n"),
                Role::Follower { .. } if was_leader => format!("Stepped down: no longer holding lease {lease}\n"),
                Role::Follower { leader: Some(l) } => format!("Following: lease {lease} is held by `{l}`\n"),
                Role::Follower { leader: None } => format!("Following: waiting for lease {lease}\n"),
            };
            was_leader = now == Role::Leader;
            m.set_leader(was_leader);
            // Followers are ready too: they stand by to take over.
            m.set_ready(true);
            output::stderr(&line);
        }
    });
    Ok((election, task))
}

/// One round: load the spec, run a pass, report, update the metrics. In the loop, errors
/// are reported and counted, and the loop goes on; with `--once` they end the command.
async fn round(
    settings: &Settings,
    args: &ReconcileArgs,
    opts: &Options,
    clock: &Clock,
    metrics: &Metrics,
    looping: bool,
) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else {
        metrics.record_failure(clock.now());
        return Ok(ExitStatus::Error);
    };
    let ws = settings.workspace().with_backend(&loaded.spec);
    let pass = match reconcile::pass(&ws, &loaded.spec, opts, &NoQueue, clock).await {
        Ok(pass) => pass,
        Err(e) if looping && runner::error_policy(&e) == Next::Skip => {
            metrics.record_skip();
            output::stderr(&runner::skip_message(&e, metrics.skipped_in_a_row()));
            return Ok(ExitStatus::Success);
        }
        Err(e) if looping => {
            metrics.record_failure(clock.now());
            error::print_report(&miette::Report::new(e), settings);
            return Ok(ExitStatus::Error);
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(h) = &pass.lock_taken_over {
        output::stderr(&common::takeover_warning(h));
    }
    if args.json {
        output::stdout_with(|out| reconcile::report::write_json(&pass, out));
    } else {
        let opts = render::TextOptions { color: settings.color_stdout, width: settings.width, verbose: false };
        output::stdout(&reconcile::report::text(&pass, &opts));
    }
    for line in runner::alert_lines(&pass) {
        output::stderr(&line);
    }
    common::warn_near_limits(&pass.plan)?;
    metrics.record_pass(&loaded.spec, &pass);
    Ok(match pass.outcome {
        Outcome::NoChanges => ExitStatus::Success,
        Outcome::Applied | Outcome::DryRun if args.detailed_exitcode => ExitStatus::Changes,
        Outcome::Applied | Outcome::DryRun => ExitStatus::Success,
        Outcome::Denied | Outcome::MaxDestroy { .. } => ExitStatus::PolicyDenied,
        Outcome::PlanErrors | Outcome::ApplyFailed | Outcome::Interrupted => ExitStatus::Error,
    })
}

/// Ctrl-C and SIGTERM: stop starting new apply work, end the sleep, stop the loop.
/// SIGTERM is registered before this returns, so a signal sent right after start counts.
fn stop_on_signal(cancel: Arc<Cancel>, stop: watch::Sender<bool>) {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let Ok(mut term) = term else { return };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        cancel.cancel_because("a stop signal was received");
        output::stderr("\nStopping: finishing the operations in flight, then exiting...\n");
        let _ = stop.send(true);
    });
}
