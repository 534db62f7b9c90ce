//! Work split over the machine's cores in contiguous runs whose results come back in
//! order, so that the result is the same as one thread's (used by the diff and the cost of
//! large plans). A leaf module: it knows nothing of plans.

/// `f` of each contiguous run of `items`, in order: on one thread below `per_thread` items
/// per thread, else on up to `threads` threads (the calling thread takes the first run).
/// A panic in a run is resumed on the calling thread, as it would have surfaced on one.
pub fn runs_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    per_thread: usize,
    f: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let threads = threads.min(items.len() / per_thread.max(1)).max(1);
    if threads == 1 {
        return vec![f(items)];
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let mut runs = items.chunks(chunk);
        let first = runs.next().unwrap_or_default();
        let handles: Vec<_> = runs.map(|run| s.spawn(move || f(run))).collect();
        let mut out = vec![f(first)];
        out.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))));
        out
    })
}

/// The machine's cores (1 when it cannot say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_come_back_in_order_and_cover_every_item_once() {
        let items: Vec<u32> = (0..1_000).collect();
        for threads in [1, 2, 3, 8] {
            for per_thread in [1, 100, 400, 2_000] {
                let runs = runs_in_order(&items, threads, per_thread, |run| run.to_vec());
                assert_eq!(runs.concat(), items, "threads {threads}, per thread {per_thread}");
                let expected = threads.min(1_000 / per_thread).max(1);
                assert_eq!(runs.len(), expected, "threads {threads}, per thread {per_thread}");
            }
        }
        assert_eq!(runs_in_order(&[] as &[u32], 4, 1, |run| run.len()), vec![0]);
    }
}
