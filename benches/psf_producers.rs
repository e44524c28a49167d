//! Many producers into one sink (docs/design/psf.md, producers): N threads
//! (1, 2, 4, 8, 16; `HIPKERN_BENCH_THREADS`) each take work items from a
//! shared counter (OpenMP's dynamic schedule), generate the item's events
//! (a lensed star field of its own seed, `psf::sky`) and push them through
//! their own `Producer` into one `SinkHub`:
//!
//! - over a `DeviceSink` (tile32, sequence order, profiled) when a device
//!   opens, and over the row-parallel `CpuSink` with as many threads;
//! - wall: from the first thread's start to the image on the host (the
//!   device image downloaded), host clock, median of 3; events per second
//!   end to end, and against one producer (the 1-thread row, same sink);
//! - where the time goes, summed over the run: the producers' generation
//!   and push (hand-off included) time per thread, their waits for a
//!   buffer, the hub thread's time in the sink and idle, and the device's
//!   own time (binning and accumulation kernels, device events);
//! - the image of every row checked against the serial CPU reference (the
//!   acceptance of docs/design/psf.md#acceptance).
//!
//! `HIPKERN_BENCH_ITEMS` (default 64) items of about 2 × 5,000 events
//! (every star's two images), no event beyond the cache (the direct path
//! is timed by benches/psf_sink.rs).
use hipkern::psf::sky::{lensed_sky, LensedSkyConfig};
use hipkern::psf::{
    ChunkOrder, ChunkSink, CpuSink, DeviceSink, HdrImage, HubStats, MoffatPsf, PsfCache, SinkHub,
    SinkMode, StarEvent,
};
use hipkern::Device;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WIDTH: usize = 3840;
const HEIGHT: usize = 2160;
const REPS: usize = 3;

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

/// Work item `k`: a lensed field of its own seed, no supports beyond the cache.
fn item(k: usize) -> Vec<StarEvent> {
    let config = LensedSkyConfig {
        width: WIDTH,
        height: HEIGHT,
        stars: 4_500,
        cluster_stars: 500,
        support_flux: 1e300,
        seed: 1_000 + k as u64,
        ..LensedSkyConfig::default()
    };
    lensed_sky(&config).expect("sky").events
}

struct Run {
    wall: f64,
    events: u64,
    generate: Duration,
    push: Duration,
    stats: HubStats,
    image: HdrImage,
    device_ms: f64,
}

fn run<S: ChunkSink>(
    sink: S,
    threads: usize,
    items: usize,
    finish: impl FnOnce(S) -> (HdrImage, f64),
) -> Run {
    let t0 = Instant::now();
    let mut hub = SinkHub::builder(sink)
        .order(ChunkOrder::Sequence)
        .start()
        .unwrap();
    let next = AtomicUsize::new(0);
    let (mut generate, mut push, mut events) = (Duration::ZERO, Duration::ZERO, 0u64);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let mut p = hub.producer().unwrap();
                let next = &next;
                s.spawn(move || {
                    let (mut gen, mut push, mut n) = (Duration::ZERO, Duration::ZERO, 0u64);
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= items {
                            break;
                        }
                        let t = Instant::now();
                        let evs = item(k);
                        gen += t.elapsed();
                        let t = Instant::now();
                        p.begin(k as u64).unwrap();
                        p.extend(&evs).unwrap();
                        push += t.elapsed();
                        n += evs.len() as u64;
                    }
                    let t = Instant::now();
                    p.finish().unwrap();
                    push += t.elapsed();
                    (gen, push, n)
                })
            })
            .collect();
        for h in handles {
            let (g, p, n) = h.join().unwrap();
            generate += g;
            push += p;
            events += n;
        }
    });
    let stats = hub.finish().unwrap();
    let (image, device_ms) = finish(hub.into_sink().unwrap());
    Run {
        wall: t0.elapsed().as_secs_f64(),
        events,
        generate,
        push,
        stats,
        image,
        device_ms,
    }
}

fn report(name: &str, threads: usize, runs: Vec<Run>, base: &mut Option<f64>, want: &HdrImage) {
    let mut walls: Vec<f64> = runs.iter().map(|r| r.wall).collect();
    walls.sort_by(f64::total_cmp);
    let wall = walls[walls.len() / 2];
    let r = &runs[0];
    let rate = r.events as f64 / wall;
    let one = *base.get_or_insert(rate);
    let c = r.image.compare(want).unwrap();
    let verdict = match c.accept(1e-10) {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("MISMATCH {e}"),
    };
    let per = |d: Duration| d.as_secs_f64() / threads as f64;
    println!(
        "{name:>7} {threads:>3} | {:>9.3} {:>7.2} {:>6.2} | {:>7.3} {:>7.3} {:>7.3} | {:>7.3} {:>7.3} {:>8.1} | {verdict}",
        wall,
        rate / 1e6,
        rate / one,
        per(r.generate),
        per(r.push),
        r.stats.buffer_wait.as_secs_f64(),
        r.stats.sink_busy.as_secs_f64(),
        r.stats.sink_idle.as_secs_f64(),
        r.device_ms,
    );
}

fn main() {
    let threads = env_list("HIPKERN_BENCH_THREADS", &[1, 2, 4, 8, 16]);
    let items = env_list("HIPKERN_BENCH_ITEMS", &[64])[0];
    let cache = Arc::new(PsfCache::build(MoffatPsf::default()).unwrap());
    let all: Vec<StarEvent> = (0..items).flat_map(item).collect();
    let mut reference = CpuSink::parallel(cache.clone(), WIDTH, HEIGHT, 0).unwrap();
    reference.accumulate(&all).unwrap();
    let want = reference.into_image();
    println!(
        "psf producers: {items} items, {} events, {WIDTH}x{HEIGHT}, {} cores here; \
         times in s (per thread: generate, push incl. hand-off), device ms",
        all.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>7} {:>3} | {:>9} {:>7} {:>6} | {:>7} {:>7} {:>7} | {:>7} {:>7} {:>8} | check",
        "sink",
        "thr",
        "wall",
        "Mev/s",
        "vs 1",
        "gen",
        "push",
        "bufwait",
        "sinkbusy",
        "idle",
        "dev ms"
    );
    let device = Device::new(0).ok();
    if let Some(d) = &device {
        let mut base = None;
        for &t in &threads {
            let runs = (0..REPS)
                .map(|_| {
                    let sink = DeviceSink::builder(d, cache.clone(), WIDTH, HEIGHT)
                        .mode(SinkMode::Tile32)
                        .profile(true)
                        .build()
                        .unwrap();
                    run(sink, t, items, |mut s: DeviceSink| {
                        let img = s.finish().unwrap();
                        let tm = s.timings().unwrap_or_default();
                        (img, tm.bin_ms + tm.accumulate_ms + tm.atomic_ms)
                    })
                })
                .collect();
            report("device", t, runs, &mut base, &want);
        }
    } else {
        println!("(no device: CPU sink rows only)");
    }
    let mut base = None;
    for &t in &threads {
        let runs = (0..REPS)
            .map(|_| {
                let sink = CpuSink::parallel(cache.clone(), WIDTH, HEIGHT, t).unwrap();
                run(sink, t, items, |s: CpuSink| (s.into_image(), 0.0))
            })
            .collect();
        report("cpu", t, runs, &mut base, &want);
    }
}
