//! Work split over the machine's cores in contiguous runs whose results come back in
//! order, so that the result is the same as one thread's (used by the diff and the cost of
//! large plans). A leaf module: it knows nothing of plans.

/// Runs per thread: more runs than threads, each taken by whichever thread is free.
const RUNS_PER_THREAD: usize = 4;

/// `f` of each contiguous run of `items`, in order: on one thread below `per_thread` items
/// per thread, else on up to `threads` threads (the calling thread among them). The items
/// are cut into [`RUNS_PER_THREAD`] runs per thread, and a thread that finishes one takes
/// the next not yet taken: a thread that starts late, or whose runs cost more (a new
/// thread's first allocations are fresh memory the kernel must zero), holds up less of
/// the work than with one run each. A panic in a run is resumed on the calling thread,
/// as it would have surfaced on one.
pub fn runs_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    per_thread: usize,
    f: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let threads = threads.min(items.len() / per_thread.max(1)).max(1);
    if threads == 1 {
        return vec![f(items)];
    }
    let runs: Vec<&[T]> = items.chunks(items.len().div_ceil(threads * RUNS_PER_THREAD)).collect();
    let next = AtomicUsize::new(0);
    let take_runs = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(run) = runs.get(i) else { return done };
            done.push((i, f(run)));
        }
    };
    let mut done = std::thread::scope(|s| {
        let handles: Vec<_> = (1..threads).map(|_| s.spawn(take_runs)).collect();
        let mut done = take_runs();
        for h in handles {
            done.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        done
    });
    done.sort_unstable_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Drop `value` on a thread of its own, so that freeing a large tree (the policies' input:
/// tens of thousands of allocations) runs beside the caller's next step instead of before
/// it. Where the thread cannot start, it is dropped here.
pub fn drop_aside<T: Send + 'static>(value: T) {
    // Where the thread cannot start, `spawn` drops the closure, and the value with it, on
    // this thread: only the head start is lost, so the error needs no report.
    if let Err(not_started) = std::thread::Builder::new().name("drop".into()).spawn(move || drop(value)) {
        drop(not_started);
    }
}

/// The machine's cores (1 when it cannot say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_dropped_aside_is_dropped() {
        struct Tell(std::sync::mpsc::Sender<()>);
        impl Drop for Tell {
            fn drop(&mut self) {
                self.0.send(()).expect("the test waits");
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        drop_aside(Tell(tx));
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("dropped on its thread");
    }

    #[test]
    fn runs_come_back_in_order_and_cover_every_item_once() {
        let items: Vec<u32> = (0..1_000).collect();
        for threads in [1, 2, 3, 8] {
            for per_thread in [1, 100, 400, 2_000] {
                let runs = runs_in_order(&items, threads, per_thread, |run| run.to_vec());
                assert_eq!(runs.concat(), items, "threads {threads}, per thread {per_thread}");
                let threads_used = threads.min(1_000 / per_thread).max(1);
                let expected = if threads_used == 1 {
                    1
                } else {
                    1_000usize.div_ceil(1_000usize.div_ceil(threads_used * RUNS_PER_THREAD))
                };
                assert_eq!(runs.len(), expected, "threads {threads}, per thread {per_thread}");
            }
        }
        assert_eq!(runs_in_order(&[] as &[u32], 4, 1, |run| run.len()), vec![0]);
    }

    /// A thread held up in one run does not hold up the others: while the first run waits,
    /// the other thread takes every remaining run, and the results still come back in the
    /// items' order.
    #[test]
    fn a_slow_run_leaves_the_rest_to_the_other_thread() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::{Duration, Instant};

        let items: Vec<u32> = (0..800).collect();
        let finished = AtomicUsize::new(0);
        let others = 2 * RUNS_PER_THREAD - 1;
        let runs = runs_in_order(&items, 2, 1, |run| {
            let mut others_done_first = false;
            if run[0] == 0 {
                let deadline = Instant::now() + Duration::from_secs(20);
                while Instant::now() < deadline && !others_done_first {
                    others_done_first = finished.load(Ordering::SeqCst) == others;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            finished.fetch_add(1, Ordering::SeqCst);
            (run.to_vec(), others_done_first)
        });
        assert!(runs[0].1, "the other runs waited for the first");
        assert_eq!(runs.len(), others + 1);
        assert_eq!(runs.into_iter().flat_map(|(r, _)| r).collect::<Vec<_>>(), items);
    }
}
