//! Thread counts of the CPU paths (the PSF cache build and row-parallel
//! sink, List 1 planning) and running their workers without a panic when
//! the OS refuses a thread.
use crate::runtime::{Error, Result};
use std::sync::Mutex;

/// The most threads a caller may ask a CPU path for. The work is
/// compute-bound and shared out by the caller's count, so threads beyond
/// the machine's hardware threads add no speed, only stacks and scheduling;
/// the largest single hosts today have several hundred hardware threads
/// (2 × 192-core EPYC with SMT: 768), so 1024 refuses nothing useful while
/// a mistyped count (2^40) is refused before any thread is spawned.
pub const MAX_THREADS: usize = 1024;

/// The thread count for `requested` (0 = the machine's available
/// parallelism, itself bounded by its hardware); above [`MAX_THREADS`] an
/// [`Error::InvalidInput`] naming `what` and the limit.
pub(crate) fn resolve_threads(requested: usize, what: &str) -> Result<usize> {
    match requested {
        0 => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        t if t > MAX_THREADS => Err(Error::InvalidInput(format!(
            "{what}: threads = {t} (must be in 0..={MAX_THREADS}, 0 = all cores; more threads \
             than the machine's cores add no speed)"
        ))),
        t => Ok(t),
    }
}

/// Runs `worker` on `threads` threads, the caller's one included. Each
/// `worker` takes its work from a shared queue until it is empty, so when
/// the OS refuses a thread (a process or memory limit) the ones running
/// (at least the caller's) do all of it: slower, never a panic
/// (`std::thread::Scope::spawn` panics on a refused thread).
pub(crate) fn run_workers(threads: usize, worker: impl Fn() + Sync) {
    let worker = &worker;
    std::thread::scope(|scope| {
        for _ in 1..threads {
            if std::thread::Builder::new()
                .spawn_scoped(scope, worker)
                .is_err()
            {
                break;
            }
        }
        worker();
    });
}

/// Threads for `work` units when a thread should get at least
/// `per_thread` of them: the machine's available parallelism, fewer for
/// little work, at least 1.
pub(crate) fn threads_for(work: usize, per_thread: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(work.div_ceil(per_thread.max(1)))
        .max(1)
}

/// `work` applied to every item of `items`, on up to `threads` threads
/// through [`run_workers`] (a refused thread leaves its items to the
/// others); the results in item order.
pub(crate) fn map_on_threads<I: Send, R: Send>(
    threads: usize,
    items: Vec<I>,
    work: impl Fn(I) -> R + Sync,
) -> Vec<R> {
    let n = items.len();
    let queue = Mutex::new(items.into_iter().enumerate());
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..n).map(|_| None).collect());
    run_workers(threads.clamp(1, n.max(1)), || loop {
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
        let Some((k, item)) = next else { break };
        let r = work(item);
        results.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(r);
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every item is taken by a worker that runs it"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn mapped_results_come_in_item_order() {
        for threads in [1, 3, 64] {
            let got = map_on_threads(threads, (0..100u64).collect(), |x| x * x);
            assert_eq!(got, (0..100u64).map(|x| x * x).collect::<Vec<_>>());
        }
        assert!(map_on_threads(4, Vec::<u8>::new(), |x| x).is_empty());
    }

    #[test]
    fn counts_are_resolved_and_bounded() {
        assert!(resolve_threads(0, "x").unwrap() >= 1);
        assert_eq!(resolve_threads(MAX_THREADS, "x").unwrap(), MAX_THREADS);
        let m = resolve_threads(1 << 40, "the sink")
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("the sink: threads = 1099511627776") && m.contains("0..=1024"),
            "{m}"
        );
    }

    #[test]
    fn workers_share_out_all_the_work() {
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        run_workers(7, || {
            while next.fetch_add(1, Ordering::Relaxed) < 1000 {
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
        assert_eq!(done.load(Ordering::Relaxed), 1000);
    }
}
