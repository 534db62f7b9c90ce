//! The apply executor: runs a plan's changes against the providers.
//!
//! - Changes run in dependency order (`after_changes`); independent ones run together.
//!   Provider calls are bounded by `--parallelism` (a semaphore around each call).
//! - One task per address, so no two operations ever touch one address at once.
//! - A failure stops that change's dependents; independent work finishes.
//! - Every finished operation is journaled (durable) before it is reported done
//!   (`recorder.rs`); the caller compacts the journal into the state file at the end.
//! - Cancellation (Ctrl-C / SIGTERM) stops starting new work; in-flight calls finish
//!   and are recorded. So does a lost state lock or Lease ([`Cancel::fenced`]), which
//!   also refuses every mutating cloud call ([`fence`]).
//! - Apply never re-reads the spec: it executes the plan it is given.

pub mod adopt;
pub mod cordon;
pub mod fence;
mod groups;
pub mod jobs;
pub mod policy;
pub mod pool;
pub mod progress;
pub mod recorder;
pub mod reservation;
mod spend;
pub mod tally;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::addr::Address;
use crate::plan::{Action, Plan, ResourceChange};
use crate::providers::Provider;
use crate::state::JournalEntry;
use crate::state::ResourceState;

pub use progress::Progress;
pub use recorder::Recorder;

pub use crate::providers::ProviderSet;

/// The one stop flag of an apply: set when the user asked to stop (Ctrl-C, SIGTERM), or,
/// for a cancel made with [`Cancel::fenced`], the moment a lock or Lease it runs under no
/// longer holds: a lost lock is a cancellation that also fails the run, so every place
/// that stops for one stops for the other. Every phase (adoption, run stops, pool changes,
/// job launches and run-command sends) checks it right before it starts an operation:
/// once set, nothing new starts, and what is in flight finishes and is recorded. Checking
/// is an atomic load (and a fence's clock read).
#[derive(Debug, Default)]
pub struct Cancel {
    flag: AtomicBool,
    /// The cancel this one follows (a signal's, a reconcile round's).
    parent: Option<Arc<Cancel>>,
    /// The right this run acts under (`crate::state::Fence`): the state lock, a Lease.
    fence: Option<crate::state::Fence>,
    /// Why the fence broke, recorded the first time it was seen broken.
    lost: std::sync::OnceLock<crate::state::fence::Broken>,
    /// Why it was cancelled, as the first caller of [`Cancel::cancel_because`] said.
    why: std::sync::OnceLock<String>,
}

impl Cancel {
    /// A cancel that follows `parent` and also fires once `fence` no longer holds.
    pub fn fenced(parent: Arc<Cancel>, fence: crate::state::Fence) -> Arc<Cancel> {
        Arc::new(Cancel { parent: Some(parent), fence: Some(fence), ..Cancel::default() })
    }
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }
    /// [`Cancel::cancel`], saying why (`SIGTERM received`): the first reason given is the
    /// one reported.
    pub fn cancel_because(&self, why: impl Into<String>) {
        // A second reason is deliberately dropped: the first cause is what stopped the apply.
        let _ = self.why.set(why.into());
        self.cancel();
    }
    /// Why it was cancelled, if the canceller (here or in a parent) said.
    fn why(&self) -> Option<&str> {
        self.why.get().map(String::as_str).or_else(|| self.parent.as_ref().and_then(|p| p.why()))
    }
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
            || self.lost().is_some()
            || self.parent.as_ref().is_some_and(|p| p.is_cancelled())
    }

    /// The lock or Lease this run acts under that no longer holds, if one does not (here
    /// or in a parent). Once seen, for good: a renewal that goes through later does not
    /// let the run start anything again.
    pub fn lost(&self) -> Option<&crate::state::fence::Broken> {
        if let Some(b) = self.lost.get() {
            return Some(b);
        }
        if let Some(Err(broken)) = self.fence.as_ref().map(crate::state::Fence::check) {
            self.flag.store(true, Ordering::SeqCst);
            return Some(self.lost.get_or_init(|| broken));
        }
        self.parent.as_ref().and_then(|p| p.lost())
    }

    /// Why work is skipped: the lost lock, or the interruption.
    pub fn reason(&self) -> String {
        match (self.lost(), self.why()) {
            (Some(b), _) => format!("not started: {b}"),
            (None, Some(why)) => format!("apply was interrupted ({why})"),
            (None, None) => "apply was interrupted".to_string(),
        }
    }
}

pub struct ApplyOptions {
    pub parallelism: usize,
    pub progress: Arc<dyn Progress>,
    pub cancel: Arc<Cancel>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Done,
    /// Done, but short of the plan (e.g. spot capacity with `fallback = "wait"`).
    Partial(String),
    Failed(String),
    /// Not started: a dependency failed, or apply was cancelled.
    Skipped(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub address: Address,
    pub action: Action,
    pub status: Status,
    pub created: usize,
    pub deleted: usize,
    /// Nodes the plan launches that the cloud did not deliver: the pool is this many
    /// nodes short of the plan (spot with `fallback = "wait"`). The apply did not do what
    /// the plan said, so it does not succeed; the next plan shows them again.
    pub missing: u32,
}

#[derive(Debug, Default)]
pub struct ApplyReport {
    pub outcomes: Vec<Outcome>,
    pub cancelled: bool,
    /// Instances imported, moved and forgotten (`adopt.rs`).
    pub adopted: adopt::Counts,
    /// What the jobs phase did (`jobs.rs`), for the closing line.
    pub jobs: tally::Tally,
}

impl ApplyReport {
    pub fn succeeded(&self) -> bool {
        !self.cancelled
            && self.outcomes.iter().all(|o| matches!(o.status, Status::Done | Status::Partial(_)) && o.missing == 0)
    }
    /// Nodes planned but not launched, over all changes.
    pub fn missing(&self) -> u32 {
        self.outcomes.iter().map(|o| o.missing).sum()
    }
    pub fn count(&self, f: impl Fn(&Status) -> bool) -> usize {
        self.outcomes.iter().filter(|o| f(&o.status)).count()
    }
}

/// Execute every non-no-op change of `plan` (the caller ends the progress display with
/// `done` once the jobs phase has run too). Every one of them gets an outcome: a task
/// that panics (a bug) is recorded as failed with the panic's message, its dependents
/// as skipped, so the run can never report success for work that did not happen.
pub async fn execute(plan: Arc<Plan>, providers: &ProviderSet, recorder: Recorder, opts: &ApplyOptions) -> ApplyReport {
    execute_keeping(plan, providers, recorder, opts, &jobs::Kept::default()).await
}

/// [`execute`], where the changes of the addresses in `kept` fail with their reason
/// without running (and so skip their dependents): the jobs whose runs could not be
/// cancelled keep their records.
pub async fn execute_keeping(
    plan: Arc<Plan>,
    providers: &ProviderSet,
    recorder: Recorder,
    opts: &ApplyOptions,
    kept: &jobs::Kept,
) -> ApplyReport {
    let work: Vec<usize> = (0..plan.changes.len()).filter(|i| plan.changes[*i].action != Action::NoOp).collect();
    let mut book = Book::new(&plan, &work);
    let semaphore = Arc::new(Semaphore::new(opts.parallelism.max(1)));
    let ledger_prices = Arc::new(spend::LedgerPrices::new(plan.clone()));
    let provider_set = Arc::new(providers.clone());
    let mut tasks: JoinSet<Outcome> = JoinSet::new();
    // Which change each task runs: a task that panics returns only its id.
    let mut task_change: HashMap<tokio::task::Id, usize> = HashMap::new();
    opts.progress.start(work.len());
    // Jobs whose replicas launch after the node changes: their change is only the
    // recorded configuration, so they are reported done once launched (`jobs::run`).
    let launched_later: BTreeSet<&Address> =
        plan.jobs.iter().filter(|j| j.needs_launch()).map(|j| &j.address).collect();

    // Tasks alive at once: enough to keep every provider permit busy and let journal
    // writes batch, without holding a future per change for a 100,000-change plan.
    let max_tasks = (opts.parallelism.max(1) * 8).max(256);
    let mut configs: Vec<usize> = Vec::new();
    loop {
        while tasks.len() < max_tasks
            && configs.len() < CONFIG_BATCH
            && let Some(i) = book.ready.pop_first()
        {
            let change = &plan.changes[i];
            if opts.cancel.is_cancelled() {
                book.settle(i, outcome(change, Status::Skipped(opts.cancel.reason())));
                continue;
            }
            if let Some(why) = kept.0.get(&change.address) {
                let out = outcome(change, Status::Failed(why.clone()));
                opts.progress.finished(&change.address.to_string(), &progress_message(&out.status));
                book.settle(i, out);
                continue;
            }
            if change.pool.is_none() && change.address.kind != crate::addr::Kind::Reservation {
                configs.push(i);
                continue;
            }
            let plan = plan.clone();
            let provider = change.pool.as_ref().and_then(|p| providers.get(&p.provider)).cloned();
            let ctx = pool::Ctx {
                recorder: recorder.clone(),
                semaphore: semaphore.clone(),
                cancel: opts.cancel.clone(),
                progress: opts.progress.clone(),
                prices: ledger_prices.clone(),
                providers: provider_set.clone(),
                pending: Default::default(),
            };
            let handle = tasks.spawn(async move { run_change(&plan.changes[i], &plan, provider, &ctx).await });
            task_change.insert(handle.id(), i);
        }
        if !configs.is_empty() {
            let batch = std::mem::take(&mut configs);
            record_configs(&mut book, batch, &recorder, opts, &launched_later).await;
            continue;
        }
        let Some(joined) = tasks.join_next_with_id().await else { break };
        // Every task is in the map; an unknown id is caught below as a change with no outcome.
        let Some((i, out)) = joined_outcome(joined, &mut task_change, &plan) else { continue };
        if !(out.status == Status::Done && launched_later.contains(&out.address)) {
            opts.progress.finished(&out.address.to_string(), &progress_message(&out.status));
        }
        book.settle(i, out);
    }
    // A change with no outcome here never started: it waited on one that never finished.
    for &i in &work {
        book.outcomes.entry(i).or_insert_with(|| {
            let why = "never started: it waits on a change that never finished".to_string();
            outcome(&plan.changes[i], Status::Skipped(why))
        });
    }
    ApplyReport {
        outcomes: book.outcomes.into_values().collect(),
        cancelled: opts.cancel.is_cancelled(),
        ..ApplyReport::default()
    }
}

/// The change a finished task ran and its outcome: a task that panicked or was cancelled
/// failed, with why. `None` for a task id not in `task_change`.
fn joined_outcome(
    joined: Result<(tokio::task::Id, Outcome), tokio::task::JoinError>,
    task_change: &mut HashMap<tokio::task::Id, usize>,
    plan: &Plan,
) -> Option<(usize, Outcome)> {
    match joined {
        Ok((id, out)) => Some((task_change.remove(&id)?, out)),
        Err(e) => {
            let i = task_change.remove(&e.id())?;
            let why = if e.is_panic() {
                format!("gpuplan bug: the change panicked ({}); what it finished is saved in state", panic_message(e))
            } else {
                "the change's task was cancelled before it finished".to_string()
            };
            Some((i, outcome(&plan.changes[i], Status::Failed(why))))
        }
    }
}

/// Configuration-only changes recorded with one journal append (one fsync).
const CONFIG_BATCH: usize = 2_048;

/// Ready configuration-only changes (jobs, quotas, templates): no provider call, only a
/// record, so they are written together, one append for the batch, instead of a task and
/// an fsync each (100,000 queued jobs are 100,000 such changes). Each is reported done
/// once durable, as a task's would be.
async fn record_configs(
    book: &mut Book<'_>,
    batch: Vec<usize>,
    recorder: &Recorder,
    opts: &ApplyOptions,
    launched_later: &BTreeSet<&Address>,
) {
    let plan = book.plan;
    let entries = batch.iter().map(|&i| config_entry(&plan.changes[i])).collect();
    let result = recorder.record(entries).await;
    for i in batch {
        let status = match &result {
            Ok(()) => Status::Done,
            Err(e) => Status::Failed(e.clone()),
        };
        let out = outcome(&plan.changes[i], status);
        if !(out.status == Status::Done && launched_later.contains(&out.address)) {
            opts.progress.finished(&out.address.to_string(), &progress_message(&out.status));
        }
        book.settle(i, out);
    }
}

/// The journal entry of a configuration-only change: its new configuration, or its removal.
fn config_entry(change: &ResourceChange) -> JournalEntry {
    let address = change.address.to_string();
    match change.action {
        Action::Delete => JournalEntry::DeleteResource { address },
        _ => JournalEntry::PutResource { address, resource: resource_state(change, None) },
    }
}

/// The executor's bookkeeping: what waits on what, what may start, what has finished.
struct Book<'p> {
    plan: &'p Plan,
    /// Unfinished dependencies per change.
    remaining: BTreeMap<usize, usize>,
    dependents: BTreeMap<usize, Vec<usize>>,
    ready: BTreeSet<usize>,
    outcomes: BTreeMap<usize, Outcome>,
}

impl<'p> Book<'p> {
    /// The changes `work` (indexes into the plan's changes) with what each waits on.
    fn new(plan: &'p Plan, work: &[usize]) -> Self {
        let pos: BTreeMap<&Address, usize> = work.iter().map(|i| (&plan.changes[*i].address, *i)).collect();
        let mut book = Book {
            plan,
            remaining: BTreeMap::new(),
            dependents: BTreeMap::new(),
            ready: BTreeSet::new(),
            outcomes: BTreeMap::new(),
        };
        for &i in work {
            let deps: BTreeSet<usize> =
                plan.changes[i].after_changes.iter().filter_map(|a| pos.get(a).copied()).filter(|j| *j != i).collect();
            book.remaining.insert(i, deps.len());
            for j in deps {
                book.dependents.entry(j).or_default().push(i);
            }
        }
        book.ready = book.remaining.iter().filter(|(_, n)| **n == 0).map(|(i, _)| *i).collect();
        book
    }

    /// Record a change's outcome: its dependents become ready when it went through, and
    /// are skipped (transitively) when it did not.
    fn settle(&mut self, i: usize, out: Outcome) {
        let ok = matches!(out.status, Status::Done | Status::Partial(_));
        self.outcomes.insert(i, out);
        let mut stack = vec![(i, ok)];
        while let Some((j, ok)) = stack.pop() {
            for &d in self.dependents.get(&j).map(Vec::as_slice).unwrap_or_default() {
                if self.outcomes.contains_key(&d) {
                    continue;
                }
                if ok {
                    let n = self.remaining.entry(d).or_insert(1);
                    *n -= 1;
                    if *n == 0 {
                        self.ready.insert(d);
                    }
                } else {
                    let why = format!("depends on {}, which did not complete", self.plan.changes[j].address);
                    self.outcomes.insert(d, outcome(&self.plan.changes[d], Status::Skipped(why)));
                    self.ready.remove(&d);
                    stack.push((d, false));
                }
            }
        }
    }
}

pub(crate) fn progress_message(status: &Status) -> String {
    match status {
        Status::Done => "done".to_string(),
        Status::Partial(m) => format!("done, but {m}"),
        Status::Failed(m) => format!("failed: {m}"),
        Status::Skipped(m) => format!("skipped: {m}"),
    }
}

/// The text a task panicked with (`panic!("...")` gives a `&str` or a `String`).
fn panic_message(e: tokio::task::JoinError) -> String {
    let payload = e.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "no message".to_string()
    }
}

fn outcome(change: &ResourceChange, status: Status) -> Outcome {
    Outcome { address: change.address.clone(), action: change.action, status, created: 0, deleted: 0, missing: 0 }
}

async fn run_change(
    change: &ResourceChange,
    plan: &Plan,
    provider: Option<Arc<dyn Provider>>,
    ctx: &pool::Ctx,
) -> Outcome {
    if change.address.kind == crate::addr::Kind::Reservation {
        return reservation::run(change, plan, ctx).await;
    }
    if let Some(pc) = &change.pool {
        let Some(provider) = provider else {
            return outcome(change, Status::Failed(format!("provider `{}` is not configured", pc.provider)));
        };
        return groups::run(change, pc, &plan.lineage, provider, ctx).await;
    }
    // Configuration-only resources (the executor batches them: `record_configs`).
    match ctx.recorder.record(vec![config_entry(change)]).await {
        Ok(()) => outcome(change, Status::Done),
        Err(e) => outcome(change, Status::Failed(e)),
    }
}

/// The state record of a change once applied.
pub fn resource_state(change: &ResourceChange, pool: Option<&crate::plan::model::PoolChange>) -> ResourceState {
    ResourceState {
        kind: change.address.kind.to_string(),
        provider: pool.map(|p| p.provider.clone()),
        provider_kind: pool.map(|p| p.provider_kind.clone()),
        region: pool.map(|p| p.region.clone()),
        config: change.after.clone().unwrap_or_default(),
        sensitive: change.sensitive.as_deref().cloned().unwrap_or_default(),
        dependencies: change.after_changes.iter().map(|a| a.to_string()).collect(),
        nodes: vec![],
        job: None,
        // Pools: set by `pool::run` from what apply placed where.
        fallback: pool.and_then(|p| p.fell_back.as_deref().cloned()),
        placement: pool.and_then(|p| p.placement.as_deref().cloned()),
        reservation: None,
    }
}
