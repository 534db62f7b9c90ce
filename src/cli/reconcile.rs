//! `gpuplan reconcile`: one pass (`--once`, the default) or a pass every `--interval` and
//! whenever the spec folder changes ([`crate::reconcile::triggers`]),
//! each refresh → drift → autoscale → plan → policies → apply, with a report per pass and
//! Prometheus metrics on `--metrics-addr`.
//!
//! The loop holds the state lock only during a pass; a round whose lock is taken by
//! another run is skipped and says so. With `--leader-elect` only the holder of a
//! Kubernetes Lease runs rounds ([`crate::reconcile::leader`]); the lease is released on exit. Ctrl-C or SIGTERM stops the loop: an apply in
//! flight finishes its started operations and saves state, a sleep ends at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::output;
use super::{CliError, ExitStatus, ReconcileArgs, Settings, common, error, load, runtime};
use crate::apply::{ApplyOptions, Cancel};
use crate::engine::run::PlanRequest;
use crate::metrics::{self, Metrics};
use crate::reconcile::leader::{self, Election, LeaseConfig, Role};
use crate::reconcile::{self, Clock, NoQueue, Options, Outcome, triggers};
use crate::render;

pub fn run(settings: &Settings, args: &ReconcileArgs) -> miette::Result<ExitStatus> {
    let Some(policies) = load::policies(settings, &args.policy_dir)? else { return Ok(ExitStatus::Error) };
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
        let mut opts = Options {
            plan: PlanRequest {
                refresh: true,
                env: settings.env.clone(),
                policies,
                overrides: args.override_policy.clone(),
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
        let mut stop = stop;
        // Passes also start when the spec folder changes (never two at once: the
        // watcher only ends the sleep below).
        let wake = Arc::new(Notify::new());
        let watcher = triggers::watch_spec_folder(settings.dir.clone(), wake.clone(), |_| {
            output::stderr("Spec folder changed: starting a pass\n");
        });
        // And when a job pod of a `kubernetes {}` pool cannot be scheduled (the clusters
        // of the spec as it is at start).
        let home = settings.env.get("HOME").map(std::path::PathBuf::from);
        let targets = match crate::spec::load_dir(&settings.dir, &settings.load_options()) {
            Ok(l) => triggers::pod_targets(&l.spec, &settings.dir, home.as_deref()),
            // The first round reports what is wrong with the folder.
            Err(_) => Vec::new(),
        };
        let pod_watchers = triggers::watch_pods(targets, wake.clone(), |line| output::stderr(&line));
        loop {
            // With an election, a round starts only on the leader, and acts under this
            // term's fence: the moment the lease lapses or is lost, its apply starts no new
            // operation and no mutating cloud call goes out; those in flight finish and are
            // saved, and the next leader adopts the rest.
            if let Some((e, _)) = &election {
                if !wait_for_lead(e, &mut stop).await {
                    break;
                }
                opts.apply.cancel = Cancel::fenced(cancel.clone(), e.fence());
            }
            let ran = round(settings, args, &opts, &clock, &metrics, true).await;
            if let Err(report) = ran {
                // E.g. the spec folder vanished mid-checkout: report, count, try next round.
                metrics.record_failure(clock.now());
                error::print_report(&report, settings);
            }
            if *stop.borrow() {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(jittered(every)) => {}
                _ = stop.changed() => {}
                _ = wake.notified() => {}
            }
            if *stop.borrow() {
                break;
            }
        }
        watcher.abort();
        for w in pod_watchers {
            w.abort();
        }
        if let Some((e, task)) = election {
            // Nothing runs any more: release the lease so a successor starts at once.
            e.shutdown();
            if task.await.is_ok() {
                output::stderr(&format!("Released lease {}.\n", e.lease));
            }
        }
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

/// Wait until this replica leads; `false` if asked to stop first.
async fn wait_for_lead(e: &Election, stop: &mut watch::Receiver<bool>) -> bool {
    loop {
        if *stop.borrow() {
            return false;
        }
        if e.leading() {
            return true;
        }
        tokio::select! {
            _ = tokio::time::sleep(LEAD_POLL) => {}
            _ = stop.changed() => {}
        }
    }
}

/// How often a follower looks at the election.
const LEAD_POLL: Duration = Duration::from_millis(100);

/// Said on every round a lock stops: who holds it since when, how many rounds it has
/// stopped in a row, and the way out when its holder is gone (a remote lock outlives a
/// killed process; nothing else would say so after the first round).
fn skip_message(e: &reconcile::ReconcileError, in_a_row: u64) -> String {
    let rounds = if in_a_row > 1 { format!(" ({in_a_row} rounds in a row)") } else { String::new() };
    let mut out = format!("Skipping this round{rounds}: another run holds the state lock.\n  {e}\n");
    if let Some(h) = e.lock_holder().filter(|h| h.expires.is_some()) {
        let ttl = Duration::from_millis(h.ttl_ms.unwrap_or(60_000));
        out += &format!(
            "  unless its holder renews it, a round takes it over once this process has seen it unchanged for {} (its holder's clock says it expires at {})\n",
            humantime::format_duration(ttl),
            h.expires.as_deref().unwrap_or_default()
        );
    } else if let Some(h) = e.lock_holder() {
        out += &format!(
            "  hint: if `gpuplan {}` by {} (since {}) is no longer running, release its lock with \
             `gpuplan state unlock {}`\n",
            h.operation, h.who, h.created, h.id
        );
    }
    out
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
        Err(e) if looping && e.is_locked() => {
            metrics.record_skip();
            output::stderr(&skip_message(&e, metrics.skipped_in_a_row()));
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
    let usd = crate::model::money::usd;
    for a in &pass.alerts {
        let what = format!(
            "budget alert: `{}` crossed {}% of its monthly budget in {} ({} of {} USD)",
            a.quota,
            a.threshold,
            a.month,
            usd(a.spent_usd),
            usd(a.budget_usd)
        );
        if a.delivered > 0 {
            output::stderr(&format!("{what}: posted to {} hook(s)\n", a.delivered));
        } else {
            // Not fatal: the pass did its work; the alert is tried again on the next pass.
            output::stderr(&format!(
                "warning: {what}: not delivered ({}); retried on the next pass\n",
                a.errors.join("; ")
            ));
        }
    }
    for a in &pass.standing {
        output::stderr(&standing_line(a));
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

/// A standing violation reported in this pass: once per verdict while it stands.
fn standing_line(a: &reconcile::standing::StandingAlert) -> String {
    let what = format!(
        "policy alert: `{}` ({}) fails on the fleet as it stands: {}",
        a.verdict,
        a.enforcement.as_str(),
        a.message
    );
    match (a.hooks, a.delivered) {
        (0, _) => format!("{what}\n  (reported once while it stands; no quota has `notify` hooks)\n"),
        (_, 0) => format!("warning: {what}: not delivered ({}); retried on the next pass\n", a.errors.join("; ")),
        (_, n) => format!("{what}: posted to {n} hook(s)\n"),
    }
}

/// `every` ± 10%, so many reconcilers started together do not hit the clouds together.
fn jittered(every: Duration) -> Duration {
    let r = (uuid::Uuid::new_v4().as_u128() % 10_001) as f64 / 10_000.0; // 0..=1
    every.mul_f64(0.9 + 0.2 * r)
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
