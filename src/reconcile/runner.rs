//! The reconcile loop (docs/design/reconcile.md): a pass every `--interval` (± 10 %
//! jitter) and whenever a trigger wakes it ([`triggers`]: the spec folder changed, a job
//! pod cannot be scheduled), only while this replica leads when a Kubernetes Lease is
//! elected ([`leader`]), and what to do after a pass fails ([`error_policy`], the shape
//! kube-runtime's controllers use). The CLI parses flags, loads the spec and reports each
//! round; the loop itself knows nothing of the terminal but the lines it is given to say.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::leader::Election;
use super::{ReconcileError, triggers};
use crate::engine::run::RunError;
use crate::state::{Fence, StateError};

/// What the loop does after a pass that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Another run holds the state lock: the pass never started. Skip this round (a
    /// skip, not a failure), say who holds the lock, try again at the next.
    Skip,
    /// A cloud or the state store did not answer, or the journal failed: report, count a
    /// failure, try again at the next round (each pass finishes what the last began).
    Retry,
    /// The state lock or this replica's Lease stopped holding mid-pass: the pass started
    /// nothing after that. Report, count a failure; with an election, stand by until
    /// leading again (the new holder adopts the rest).
    StandDown,
    /// Needs a person (a setting, credentials, a state that does not fit the spec):
    /// report and count a failure every round until someone fixes it.
    Alert,
}

/// [`Next`] for each kind of error a pass can end with.
pub fn error_policy(e: &ReconcileError) -> Next {
    match e {
        ReconcileError::Run(RunError::State(StateError::Locked { .. })) => Next::Skip,
        ReconcileError::Run(RunError::LockLost { .. }) => Next::StandDown,
        ReconcileError::Run(RunError::State(s)) if s.is_conflict() => Next::StandDown,
        ReconcileError::Run(RunError::State(StateError::Fenced { .. })) => Next::StandDown,
        ReconcileError::Run(RunError::State(
            StateError::Remote { .. }
            | StateError::ProgressStopped { .. }
            | StateError::Io { .. }
            | StateError::Errored { .. }
            | StateError::ErroredUnsaved { .. },
        )) => Next::Retry,
        ReconcileError::Run(RunError::Refresh { .. } | RunError::Journal(_)) => Next::Retry,
        ReconcileError::Run(_) | ReconcileError::Providers(_) => Next::Alert,
    }
}

/// Said on every round a lock stops: who holds it since when, how many rounds it has
/// stopped in a row, and the way out when its holder is gone (a remote lock outlives a
/// killed process; nothing else would say so after the first round).
pub fn skip_message(e: &ReconcileError, in_a_row: u64) -> String {
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

/// What wakes the loop besides its interval.
pub struct Triggers {
    /// The spec folder: a change starts a pass.
    pub spec_dir: PathBuf,
    /// `--var-file`s named on the command line: a change to one starts a pass too.
    pub var_files: Vec<PathBuf>,
    /// The clusters of `kubernetes {}` pools whose unschedulable job pods start a pass.
    pub pods: Vec<triggers::WatchTarget>,
}

/// Run `round` every `every` (jittered) and on each trigger until `stop` turns true;
/// with an `election`, only while leading, each round under this term's fence (the
/// moment the Lease lapses or is lost, its apply starts no new operation and no mutating
/// cloud call goes out; those in flight finish and are saved). The Lease is released on
/// the way out. `say` is given each line for the operator.
pub async fn run<R, F>(
    every: Duration,
    election: Option<(Election, tokio::task::JoinHandle<()>)>,
    mut stop: watch::Receiver<bool>,
    wake_on: Triggers,
    say: impl Fn(&str) + Clone + Send + Sync + 'static,
    mut round: R,
) where
    R: FnMut(Option<Fence>) -> F,
    F: Future<Output = ()>,
{
    // Passes also start on a trigger (never two at once: a trigger only ends the sleep).
    let wake = Arc::new(Notify::new());
    let said = say.clone();
    let watcher = triggers::watch_spec_folder(wake_on.spec_dir, wake_on.var_files, wake.clone(), move |_| {
        said("Spec folder changed: starting a pass\n");
    });
    let said = say.clone();
    let pod_watchers = triggers::watch_pods(wake_on.pods, wake.clone(), move |line| said(&line));
    loop {
        let fence = match &election {
            Some((e, _)) if !wait_for_lead(e, &mut stop).await => break,
            Some((e, _)) => Some(e.fence()),
            None => None,
        };
        round(fence).await;
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
            say(&format!("Released lease {}.\n", e.lease));
        }
    }
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

/// `every` ± 10%, so many reconcilers started together do not hit the clouds together.
pub fn jittered(every: Duration) -> Duration {
    let r = (uuid::Uuid::new_v4().as_u128() % 10_001) as f64 / 10_000.0; // 0..=1
    every.mul_f64(0.9 + 0.2 * r)
}

/// The lines a pass's alerts say on stderr: each budget threshold crossed (posted, or not
/// delivered and retried on the next pass) and each standing policy violation reported
/// for the first time.
pub fn alert_lines(pass: &super::Pass) -> Vec<String> {
    let usd = crate::model::money::usd;
    let mut out = Vec::new();
    for a in &pass.alerts {
        let what = format!(
            "budget alert: `{}` crossed {}% of its monthly budget in {} ({} of {} USD)",
            a.quota,
            a.threshold,
            a.month,
            usd(a.spent_usd),
            usd(a.budget_usd)
        );
        out.push(if a.delivered > 0 {
            format!("{what}: posted to {} hook(s)\n", a.delivered)
        } else {
            // Not fatal: the pass did its work; the alert is tried again on the next pass.
            format!("warning: {what}: not delivered ({}); retried on the next pass\n", a.errors.join("; "))
        });
    }
    out.extend(pass.standing.iter().map(standing_line));
    out
}

/// A standing violation reported in this pass: once per verdict while it stands.
fn standing_line(a: &super::standing::StandingAlert) -> String {
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
