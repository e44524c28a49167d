//! Thread counts of the CPU paths (the PSF cache build and row-parallel
//! sink, List 1 planning) and running their workers without a panic when
//! the OS refuses a thread.
use crate::runtime::{Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};

/// The most threads a caller may ask a CPU path for. The work is
/// compute-bound and shared out by the caller's count, so threads beyond
/// the machine's hardware threads add no speed, only stacks and scheduling;
/// the largest single hosts today have several hundred hardware threads
/// (2 × 192-core EPYC with SMT: 768), so 1024 refuses nothing useful while
/// a mistyped count (2^40) is refused before any thread is spawned.
pub const MAX_THREADS: usize = 1024;

/// The machine's available parallelism, read once per process (each read
/// asks the OS and the cgroup files: ~14 µs, and a plan asks some fifteen
/// times); at least 1.
pub(crate) fn machine_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The thread count for `requested` (0 = the machine's available
/// parallelism, itself bounded by its hardware); above [`MAX_THREADS`] an
/// [`Error::InvalidInput`] naming `what` and the limit.
pub(crate) fn resolve_threads(requested: usize, what: &str) -> Result<usize> {
    match requested {
        0 => Ok(machine_threads()),
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
///
/// The helpers come from a pool kept for the process ([`POOL`]): starting
/// and ending threads costs more than a short pass (on the H100 machine's
/// 16-core host a List 1 planning pass of ~0.1 ms of work over 830,584
/// pairs took 0.5–1.3 ms with fresh threads). Where the pool is busy (a nested call,
/// or another thread's) or more threads are asked than the machine has,
/// or in a child process forked from one whose pool had started, the
/// helpers are fresh scoped threads. The helpers stay for the process's
/// life: they keep the CPU affinity of the thread that first needed them.
/// A panic in `worker` reaches the caller once every helper has stopped.
pub(crate) fn run_workers(threads: usize, worker: impl Fn() + Sync) {
    let worker: &(dyn Fn() + Sync) = &worker;
    if threads <= 1 {
        worker();
        return;
    }
    if !POOL.run(threads - 1, worker) {
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
}

/// The process's helper threads (started on demand, never stopped), which
/// run one caller's worker at a time.
static POOL: Pool = Pool {
    owner: AtomicU32::new(0),
    state: Mutex::new(PoolState {
        job: None,
        generation: 0,
        helpers: 0,
        claimed: 0,
        finished: 0,
        started: 0,
        panicked: false,
    }),
    wake: Condvar::new(),
    done: Condvar::new(),
};

struct Pool {
    /// The process whose helpers these are (0: none started). A forked
    /// child has none of them (and maybe a lock held by a thread that is
    /// not there): it never touches the pool.
    owner: AtomicU32,
    state: Mutex<PoolState>,
    /// Helpers wait here for a job.
    wake: Condvar,
    /// The caller waits here for its helpers.
    done: Condvar,
}

/// A caller's worker with its lifetime erased: [`Pool::run`] does not
/// return before every helper that took it has finished with it.
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn() + Sync + 'static));

// SAFETY: the worker behind the pointer is `Sync` (shared by the caller and
// its helpers) and outlives every use (`Pool::run` waits for them).
unsafe impl Send for Job {}

struct PoolState {
    /// The job in flight, if any (while one is, another caller gets fresh
    /// threads).
    job: Option<Job>,
    /// Counts jobs, so that a helper takes each at most once.
    generation: u64,
    /// Helpers the job in flight asks for, have taken it, have finished it.
    helpers: usize,
    claimed: usize,
    finished: usize,
    /// Helper threads alive.
    started: usize,
    /// A helper's run of the job panicked.
    panicked: bool,
}

fn lock(m: &Mutex<PoolState>) -> std::sync::MutexGuard<'_, PoolState> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// Runs `worker` on up to `helpers` pool threads and on the caller's;
    /// `false` (nothing run) when the pool is busy or `helpers` is not
    /// below the machine's hardware threads.
    fn run(&'static self, helpers: usize, worker: &(dyn Fn() + Sync)) -> bool {
        // The pool keeps at most a helper per hardware thread; a caller
        // asking more (up to MAX_THREADS) gets fresh threads.
        if helpers >= machine_threads() {
            return false;
        }
        let me = std::process::id();
        match self
            .owner
            .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {}
            Err(owner) if owner == me => {}
            Err(_) => return false,
        }
        let mut st = lock(&self.state);
        if st.job.is_some() {
            return false;
        }
        while st.started < helpers {
            let spawned = std::thread::Builder::new()
                .name("hipkern-worker".into())
                .spawn(move || self.helper());
            if spawned.is_err() {
                break;
            }
            st.started += 1;
        }
        // SAFETY (lifetime): the pointer is dereferenced only by helpers
        // that claimed this job, and this function returns (or unwinds)
        // only after all of them finished and the job was cleared.
        let job: Job = Job(unsafe {
            std::mem::transmute::<*const (dyn Fn() + Sync + '_), *const (dyn Fn() + Sync + 'static)>(
                worker,
            )
        });
        st.job = Some(job);
        st.generation += 1;
        st.helpers = helpers.min(st.started);
        st.claimed = 0;
        st.finished = 0;
        st.panicked = false;
        drop(st);
        self.wake.notify_all();
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(worker));
        let mut st = lock(&self.state);
        // Helpers that have not claimed the job yet no longer will: the
        // work is shared from a queue, which the caller has emptied.
        st.helpers = st.claimed;
        while st.finished < st.claimed {
            st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.job = None;
        let panicked = st.panicked;
        drop(st);
        if let Err(p) = mine {
            std::panic::resume_unwind(p);
        }
        assert!(!panicked, "a worker thread panicked");
        true
    }

    /// A helper: takes each job at most once while the job wants helpers,
    /// runs it and reports.
    fn helper(&self) {
        let mut seen = 0u64;
        loop {
            let mut st = lock(&self.state);
            let job = loop {
                if st.generation != seen {
                    seen = st.generation;
                    if let Some(job) = st.job.filter(|_| st.claimed < st.helpers) {
                        st.claimed += 1;
                        break job;
                    }
                }
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            };
            drop(st);
            // SAFETY: `Pool::run` keeps the worker alive until this helper
            // reports below (it waits for `finished == claimed`).
            let ok = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                (*job.0)()
            })) {
                Ok(()) => true,
                // Not dropped: a payload whose drop panics would end
                // this helper before it reports, and its caller would
                // wait for it.
                Err(payload) => {
                    std::mem::forget(payload);
                    false
                }
            };
            let mut st = lock(&self.state);
            st.finished += 1;
            st.panicked |= !ok;
            drop(st);
            self.done.notify_all();
        }
    }
}

/// Threads for `work` units when a thread should get at least
/// `per_thread` of them: the machine's available parallelism, fewer for
/// little work, at least 1.
pub(crate) fn threads_for(work: usize, per_thread: usize) -> usize {
    machine_threads()
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

    /// The pool's paths: nested calls (the pool busy: fresh threads),
    /// callers on several threads at once, more threads than the machine
    /// has, and repeated calls reusing the helpers; every item once.
    #[test]
    fn pooled_nested_and_concurrent_calls_do_all_the_work() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for round in 0..50 {
            let outer = map_on_threads(cores, (0..8u64).collect(), |x| {
                map_on_threads(2, (0..100u64).collect(), move |y| x * 1000 + y)
                    .iter()
                    .sum::<u64>()
            });
            let want: Vec<u64> = (0..8u64).map(|x| 100 * x * 1000 + 4950).collect();
            assert_eq!(outer, want, "round {round}");
        }
        std::thread::scope(|s| {
            for t in 0..4u64 {
                s.spawn(move || {
                    for _ in 0..50 {
                        let got = map_on_threads(cores, (0..64u64).collect(), |x| x + t);
                        assert_eq!(got, (0..64u64).map(|x| x + t).collect::<Vec<_>>());
                    }
                });
            }
        });
        let got = map_on_threads(cores + 5, (0..200u64).collect(), |x| x * 3);
        assert_eq!(got, (0..200u64).map(|x| x * 3).collect::<Vec<_>>());
    }

    /// A worker's panic reaches the caller (after the helpers stopped), on
    /// a helper or on the caller's own thread, and the pool works after.
    #[test]
    fn a_worker_panic_reaches_the_caller() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for bad in [0u64, 63] {
            let r = std::panic::catch_unwind(|| {
                map_on_threads(cores.max(2), (0..64u64).collect(), |x| {
                    assert_ne!(x, bad, "item {bad}");
                    x
                })
            });
            assert!(r.is_err(), "item {bad}'s panic was lost");
        }
        let got = map_on_threads(cores.max(2), (0..64u64).collect(), |x| x);
        assert_eq!(got, (0..64u64).collect::<Vec<_>>());
    }

    /// A child forked while the pool's lock is held (by a thread the child
    /// does not have) still does its work: it never touches the pool.
    #[cfg(unix)]
    #[test]
    fn a_forked_child_works_without_the_pool() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return; // one core: no pool
        }
        let _ = map_on_threads(2, (0..8u64).collect(), |x| x); // the pool is this process's
        let held = lock(&POOL.state);
        // SAFETY: the child computes, then leaves by _exit (no destructors,
        // no return into the test harness).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let got = map_on_threads(2, (0..1000u64).collect(), |x| x * 2);
            let ok = got == (0..1000u64).map(|x| x * 2).collect::<Vec<_>>();
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        drop(held);
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: `pid` is this process's child; `status` is writable.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if t0.elapsed() > std::time::Duration::from_secs(30) {
                // SAFETY: as above.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                panic!("the forked child hung on the pool");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child status {status}"
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
