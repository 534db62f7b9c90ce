//! Month-to-date spend from the state's ledger, by clocks the caller read: shared by
//! [`gather`](super::gather) (the spend quotas are checked against) and
//! [`compose`](super::compose) (the spend a plan shows). Pure.

use std::collections::BTreeMap;

use crate::cost;
use crate::jobs;
use crate::spec::Spec;
use crate::state::State;

/// Month-to-date spend from the ledger in `state`, each line by `clock` of its provider
/// (the sim cloud's own, the wall clock for real clouds), per pool, quota and job, with
/// the runs in `jobs` as observed.
pub fn spend_by(
    spec: &Spec,
    state: &State,
    clock: impl Fn(&str) -> u64,
    jobs: &[jobs::JobPlacement],
) -> crate::state::spend::SpendReport {
    accrue(spec, state, clock).report(state, Some(&observed_runs(jobs)))
}

/// The runs of `jobs` as observed, by job address (jobs with none left out).
pub fn observed_runs(jobs: &[jobs::JobPlacement]) -> BTreeMap<String, Vec<crate::model::JobRun>> {
    jobs.iter().filter(|j| !j.runs.is_empty()).map(|j| (j.address.to_string(), j.runs.clone())).collect()
}

/// The ledger in `state` summed as [`spend_by`] sums it, before any job run's share:
/// [`Accrued::report`](crate::state::spend::Accrued::report) adds them.
pub fn accrue(spec: &Spec, state: &State, clock: impl Fn(&str) -> u64) -> crate::state::spend::Accrued {
    // The quotas covering each pool, in the quotas' order, found once: a ledger line looks
    // its pool up instead of searching every quota's list of pools (4,000 lines over two
    // quotas of 1,000 pools were a third of a no-op plan).
    let mut quotas: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (q, pools) in cost::all_quota_pools(spec) {
        // Each quota's pools are distinct (a set).
        let q = q.to_string();
        for pool in pools {
            quotas.entry(pool.to_string()).or_default().push(q.clone());
        }
    }
    crate::state::spend::accrue(state, clock, |pool| quotas.get(pool).cloned().unwrap_or_default())
}

/// `work` on a thread of its own while `reads` runs on this one, both to their end: the
/// ledger summed while the clouds are read. On a multi-threaded runtime this thread
/// leaves its place in the runtime to another ([`tokio::task::block_in_place`]) and runs
/// `reads` itself; on another runtime (a test's current-thread one, which this thread
/// alone drives) `work` runs first, then `reads`. A panic in `work` is resumed here.
/// Either way `reads` runs to its end before the caller's task goes on: a future joined
/// with the caller in the same task is not polled meanwhile (none is: `gather` is awaited
/// alone), while the runtime's other tasks keep running on its workers.
pub async fn beside<F: std::future::Future, R: Send>(reads: F, work: impl FnOnce() -> R + Send) -> (F::Output, R) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    // No runtime, or one this thread alone drives: not an error, the work runs first.
    let Some(handle) = Handle::try_current().ok().filter(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) else {
        let done = work();
        return (reads.await, done);
    };
    tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let aside = s.spawn(work);
            let read = handle.block_on(reads);
            (read, aside.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::beside;
    use std::sync::mpsc;
    use std::time::Duration;

    /// On a multi-threaded runtime the work runs while the reads do: here it waits for a
    /// word the reads send, and the reads wait for its answer, which one thread running
    /// them in turn could never give.
    #[test]
    fn work_runs_on_its_own_thread_while_the_reads_run() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (to_work, work_hears) = mpsc::channel::<u32>();
        let (to_reads, reads_hear) = mpsc::channel::<u32>();
        let here = std::thread::current().id();
        let (read, (worked, on)) = rt.block_on(beside(
            async move {
                to_work.send(20).unwrap();
                tokio::task::yield_now().await;
                reads_hear.recv_timeout(Duration::from_secs(20)).expect("the work answers while the reads run") + 1
            },
            move || {
                let n = work_hears.recv_timeout(Duration::from_secs(20)).expect("the reads send while the work runs");
                to_reads.send(n * 2).unwrap();
                (n, std::thread::current().id())
            },
        ));
        assert_eq!((read, worked), (41, 20));
        assert_ne!(on, here, "the work ran on a thread of its own");
    }

    /// On a current-thread runtime the work runs first, on this thread, then the reads.
    #[test]
    fn on_a_current_thread_runtime_the_work_runs_first_here() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let order = std::sync::Mutex::new(Vec::new());
        let here = std::thread::current().id();
        let (read, on) = rt.block_on(beside(
            async {
                tokio::task::yield_now().await;
                order.lock().unwrap().push("reads");
                7
            },
            || {
                order.lock().unwrap().push("work");
                std::thread::current().id()
            },
        ));
        assert_eq!(read, 7);
        assert_eq!(on, here);
        assert_eq!(*order.lock().unwrap(), ["work", "reads"]);
    }

    /// A panic in the work surfaces on the caller's thread, after the reads end.
    #[test]
    fn a_panic_in_the_work_is_resumed_here() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(beside(async { 1 }, || -> u32 { panic!("summing failed") }))
        }));
        let payload = got.expect_err("the panic surfaced");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"summing failed"));
    }
}
