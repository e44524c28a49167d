//! PSF sink benchmark (docs/design/psf.md, issue "PSF sink part 2"): every fixture ×
//! {atomic, tile16, tile32, adaptive, tile16 with host binning, tile32 with
//! host binning}.
//!
//! Per configuration, one sink (all scratch allocated once), then:
//! - wall: from the events handed to `accumulate` (host validation, staging
//!   into pinned buffers, uploads) through the image downloaded into pinned
//!   memory (`finish_pinned`), host clock; 2 warm-ups, median of 15 (the
//!   image is reset between runs, untimed);
//! - kernels: the same replay with device-event profiling (`profile`):
//!   binning pass, tile accumulation, atomic splats, the direct path's
//!   renders, and host binning (wall clock) summed over the chunks; median
//!   of 15;
//! - for a fixture with events too large for the cache (boundary), the
//!   wall time of the same replay less those events (the cached ones
//!   alone, through `accumulate`), and the ratio: what the direct path
//!   costs a frame;
//! - the image checked once against the row-parallel CPU float64 sink
//!   (the acceptance of docs/design/psf.md#acceptance), stats compared exactly;
//! - scratch: the peak bytes per buffer; the chunks' modes and centre-tile
//!   densities (events per occupied 32×32 centre tile).
//!
//! Also: the pinned download of the image alone, the device's copy
//! bandwidth, and a stream of frames with waited against overlapped
//! downloads (`end_frame`). Ratios against atomic (the peer) are from the same run.
//!
//! With HIPKERN_PSF_TORCH_PEER naming scripts/psf_torch_peer.py (and a
//! python3 with torch and numpy), each fixture's cached events are also
//! splatted by torch, the same model written the torch way (stamps
//! gathered whole, blended, masked by the support, `index_add_`), on the
//! same device in the same run: its time (CUDA events, events and stamps
//! already on the device), its image checked against the CPU sink of the
//! same events, and tile32's kernels against it.
use hipkern::psf::fixtures::{self, FIXTURE_NAMES};
use hipkern::psf::{
    AdaptiveThresholds, Binning, ChunkMode, CpuSink, DeviceSink, MoffatPsf, PsfCache, SinkMode,
    SinkTimings, StarEvent,
};
use hipkern::Device;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[path = "common/peer_json.rs"]
mod peer_json;

const WARMUP: usize = 2;
const REPS: usize = 15;

const CONFIGS: [(&str, SinkMode, Binning); 7] = [
    ("atomic", SinkMode::Atomic, Binning::Device),
    ("tile16", SinkMode::Tile16, Binning::Device),
    ("tile32", SinkMode::Tile32, Binning::Device),
    ("adaptive", SinkMode::Adaptive, Binning::Device),
    ("adaptive-spec", SinkMode::Adaptive, Binning::Device),
    ("tile16-host", SinkMode::Tile16, Binning::Host),
    ("tile32-host", SinkMode::Tile32, Binning::Host),
];

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn replay(sink: &mut DeviceSink, events: &[StarEvent], routed: bool) {
    if routed {
        sink.accumulate_routed(events).unwrap();
    } else {
        sink.accumulate(events).unwrap();
    }
}

struct Row {
    wall: (f64, f64, f64),
    kernels: f64,
    /// Routed fixtures: the wall time of the same replay without the
    /// direct path's events (the cached ones alone), ms.
    wall_cached: Option<f64>,
}

fn main() {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e) => {
            println!("psf_sink bench: no device ({e}); nothing to time");
            return;
        }
    };
    println!(
        "device: {} ({})",
        device.properties().name,
        device.properties().arch_name
    );
    let stream = device.new_stream().unwrap();
    // Copy bandwidth: 1 GiB device-to-device, read + write.
    let n = 1usize << 27;
    let src = device.alloc_zeroed::<f64>(n).unwrap();
    let mut dst = device.alloc::<f64>(n).unwrap();
    let mut copy = Vec::new();
    for i in 0..12 {
        let a = stream.record_event().unwrap();
        stream
            .copy_dtod_async(&src.as_slice(), &mut dst.as_slice_mut())
            .unwrap();
        let b = stream.record_event().unwrap();
        b.synchronize().unwrap();
        if i >= 2 {
            copy.push(f64::from(a.elapsed_ms(&b).unwrap()));
        }
    }
    let (copy_ms, _, _) = median(copy);
    let bw = 2.0 * (n * 8) as f64 / (copy_ms * 1e-3);
    println!(
        "copy bandwidth: {:.2} TB/s (1 GiB dtod, read+write)",
        bw / 1e12
    );
    drop((src, dst));

    let start = Instant::now();
    let cache = Arc::new(PsfCache::build(MoffatPsf::default()).unwrap());
    println!(
        "cache: P = {}, {:.1} MiB of float64 stamps (built in {:.2} s)",
        cache.phases(),
        cache.bytes() as f64 / (1u64 << 20) as f64,
        start.elapsed().as_secs_f64()
    );
    println!(
        "wall = accumulate (validate, stage, upload, kernels) + finish_pinned (image download \
         to pinned memory); kernels = bin + accumulate + atomic device time (+ host binning); \
         median of {REPS} after {WARMUP} warm-ups"
    );
    // HIPKERN_BENCH_FIXTURES=boundary,dense: only those fixtures (and the
    // frames of those of them that have frames rows);
    // HIPKERN_BENCH_CONFIGS=tile16,tile32: only those configurations, and
    // no frames.
    let fixtures_listed = Only::from_env("HIPKERN_BENCH_FIXTURES");
    let configs_listed = Only::from_env("HIPKERN_BENCH_CONFIGS");
    let mut torch_peer = std::env::var_os("HIPKERN_PSF_TORCH_PEER").map(|script| TorchPeer {
        script: PathBuf::from(script),
        dir: std::env::temp_dir().join(format!("hipkern-psf-peer-{}", std::process::id())),
        cache: cache.clone(),
        stamps_written: false,
    });
    for name in FIXTURE_NAMES
        .into_iter()
        .filter(|n| fixtures_listed.allows(n))
    {
        let f = fixtures::fixture(name).unwrap();
        let routed = !f.events.iter().all(|e| PsfCache::fits(e.x, e.y, e.support));
        let cached_only: Vec<StarEvent> = f
            .events
            .iter()
            .filter(|e| PsfCache::fits(e.x, e.y, e.support))
            .copied()
            .collect();
        let mut cpu = CpuSink::parallel(cache.clone(), f.width, f.height, 0).unwrap();
        cpu.accumulate_routed(&f.events).unwrap();
        let contributions = cpu.stats().contributions;
        println!(
            "\n## {name}: {} events, {}×{}, {} contributions{}",
            f.events.len(),
            f.width,
            f.height,
            contributions,
            if routed {
                ", some by the direct path"
            } else {
                ""
            }
        );
        println!(
            "{:<13} {:>9} {:>19} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>7}  scratch peak / chunk modes",
            "config", "wall ms", "spread", "kern ms", "bin", "accum", "atomic", "host", "Gc/s", "/atomic", "kern/at", "check"
        );
        let mut rows: Vec<(&str, Row)> = Vec::new();
        let mut download_ms = 0.0;
        for (label, mode, binning) in CONFIGS.into_iter().filter(|c| configs_listed.allows(c.0)) {
            // adaptive: the defaults; adaptive-spec: the original thresholds
            // (docs/design/psf.md#adaptive).
            let thresholds = if label == "adaptive-spec" {
                AdaptiveThresholds::SPEC
            } else {
                AdaptiveThresholds::default()
            };
            let mut sink = DeviceSink::builder(&device, cache.clone(), f.width, f.height)
                .mode(mode)
                .binning(binning)
                .adaptive(thresholds)
                .build()
                .unwrap();
            // Checked once (the first replay).
            replay(&mut sink, &f.events, routed);
            let img = sink.finish_pinned().unwrap().to_vec();
            let got = hipkern::psf::HdrImage::from_data(f.width, f.height, img).unwrap();
            let verdict = match got.compare(cpu.image()).unwrap().accept(1e-10) {
                Ok(()) if sink.stats() == cpu.stats() => "ok",
                _ => "FAILED",
            };
            let log = sink.chunk_log().to_vec();
            let peak = sink.scratch_peak();
            let mut wall = Vec::new();
            for i in 0..WARMUP + REPS {
                sink.reset().unwrap();
                let t0 = Instant::now();
                replay(&mut sink, &f.events, routed);
                sink.finish_pinned().unwrap();
                if i >= WARMUP {
                    wall.push(t0.elapsed().as_secs_f64() * 1e3);
                }
            }
            // Routed fixtures: the same replay less the direct path's events.
            let wall_cached = routed.then(|| {
                let mut w = Vec::new();
                for i in 0..WARMUP + REPS {
                    sink.reset().unwrap();
                    let t0 = Instant::now();
                    sink.accumulate(&cached_only).unwrap();
                    sink.finish_pinned().unwrap();
                    if i >= WARMUP {
                        w.push(t0.elapsed().as_secs_f64() * 1e3);
                    }
                }
                median(w).0
            });
            // The pinned download alone (nothing queued before it).
            let mut dl = Vec::new();
            for _ in 0..5 {
                let t0 = Instant::now();
                sink.finish_pinned().unwrap();
                dl.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            download_ms = median(dl).0;
            drop(sink);
            let mut prof = DeviceSink::builder(&device, cache.clone(), f.width, f.height)
                .mode(mode)
                .binning(binning)
                .adaptive(thresholds)
                .profile(true)
                .build()
                .unwrap();
            let mut kern = Vec::new();
            let mut timings = Vec::new();
            for i in 0..WARMUP + REPS {
                prof.reset().unwrap();
                replay(&mut prof, &f.events, routed);
                prof.sync().unwrap();
                let t = prof.timings().unwrap();
                if i >= WARMUP {
                    kern.push(
                        t.bin_ms + t.accumulate_ms + t.atomic_ms + t.host_binning_ms + t.direct_ms,
                    );
                    timings.push(t);
                }
            }
            let (k_med, _, _) = median(kern.clone());
            let t: SinkTimings = timings[kern.iter().position(|&k| k == k_med).unwrap()];
            let row = Row {
                wall: median(wall),
                kernels: k_med,
                wall_cached,
            };
            let at = rows.first().map(|(_, r)| (r.wall.0, r.kernels));
            let (rw, rk) = at.map_or((1.0, 1.0), |(w, k)| (row.wall.0 / w, row.kernels / k));
            let count = |m: ChunkMode| log.iter().filter(|c| c.mode == m).count();
            let density: Vec<String> = log
                .iter()
                .map(|c| {
                    if c.centre_tiles == 0 {
                        "-".to_string()
                    } else {
                        format!("{:.0}", c.centre_events as f64 / c.centre_tiles as f64)
                    }
                })
                .collect();
            println!(
                "{label:<13} {:>9.3} {:>8.3}..{:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.2} {:>9.3} {:>7.3} {:>7}  refs {:.1} MiB, tasks {:.0} KiB, partials {:.1} MiB, starts {:.0} KiB; atomic {} tile16 {} tile32 {}; density/chunk [{}]",
                row.wall.0,
                row.wall.1,
                row.wall.2,
                row.kernels,
                t.bin_ms,
                t.accumulate_ms,
                t.atomic_ms,
                t.host_binning_ms,
                contributions as f64 / (row.kernels * 1e-3) / 1e9,
                rw,
                rk,
                verdict,
                peak.references as f64 / (1u64 << 20) as f64,
                peak.tasks as f64 / 1024.0,
                peak.partials as f64 / (1u64 << 20) as f64,
                peak.starts as f64 / 1024.0,
                count(ChunkMode::Atomic),
                count(ChunkMode::Tile16),
                count(ChunkMode::Tile32),
                density.join(" ")
            );
            if let Some(wc) = row.wall_cached {
                println!(
                    "{label:<13} direct path: {:.3} ms of kernels; wall {:.3} ms against {wc:.3} ms for the cached events alone: {:.3}x",
                    t.direct_ms,
                    row.wall.0,
                    row.wall.0 / wc
                );
            }
            rows.push((label, row));
        }
        if let Some(peer) = torch_peer.as_mut() {
            let tile32 = rows
                .iter()
                .find(|(n, _)| *n == "tile32")
                .map(|r| r.1.kernels);
            peer.run(name, &f, &cached_only, (!routed).then_some(&cpu), tile32);
        }
        if rows.len() < CONFIGS.len() {
            continue;
        }
        let get = |l: &str| rows.iter().find(|(n, _)| *n == l).unwrap().1.wall.0;
        let better = get("atomic").min(get("tile16"));
        println!(
            "{name}: adaptive / min(atomic, tile16) wall = {:.3}; / min(atomic, tile16, tile32) {:.3}; adaptive-spec / min(atomic, tile16) {:.3}; tile16 / atomic {:.3}; tile32 / atomic {:.3}; pinned image download alone {download_ms:.3} ms ({:.1} GB/s)",
            get("adaptive") / better,
            get("adaptive") / better.min(get("tile32")),
            get("adaptive-spec") / better,
            get("tile16") / get("atomic"),
            get("tile32") / get("atomic"),
            (f.width * f.height * 24) as f64 / (download_ms * 1e-3) / 1e9
        );
    }
    for name in ["dense", "ordinary"]
        .into_iter()
        .filter(|n| configs_listed.0.is_none() && fixtures_listed.allows(n))
    {
        frames(&device, &cache, name);
    }
}

/// A renderer's stream of frames (the fixture's events each frame, tile32):
/// each frame downloaded and waited for before the next (`finish_pinned`,
/// then `reset`), against `end_frame`, whose download runs beside the next
/// frame's work (each frame read with `ended_frame` before the next ends).
/// Per-frame wall time, median of 5 runs of FRAMES frames; the frames of
/// both loops compared bitwise.
fn frames(device: &Device, cache: &Arc<PsfCache>, name: &str) {
    const FRAMES: usize = 8;
    let f = fixtures::fixture(name).unwrap();
    let mut sink = DeviceSink::builder(device, cache.clone(), f.width, f.height)
        .mode(SinkMode::Tile32)
        .build()
        .unwrap();
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    let (mut serial, mut overlapped) = (Vec::new(), Vec::new());
    // Each frame is only touched (one value read) inside the timed loops;
    // the last frame of each loop is kept for the bitwise comparison.
    let (mut last_serial, mut last_overlapped) = (Vec::new(), Vec::new());
    for run in 0..WARMUP + 5 {
        sink.reset().unwrap();
        let t0 = Instant::now();
        for k in 0..FRAMES {
            sink.accumulate(&f.events).unwrap();
            std::hint::black_box(sink.finish_pinned().unwrap()[0]);
            if k < FRAMES - 1 {
                sink.reset().unwrap();
            }
        }
        let ts = t0.elapsed().as_secs_f64() * 1e3 / FRAMES as f64;
        // The last frame is still the device image (not reset).
        last_serial = sink.finish_pinned().unwrap().to_vec();
        sink.reset().unwrap();
        let t0 = Instant::now();
        for k in 0..FRAMES {
            sink.accumulate(&f.events).unwrap();
            if k > 0 {
                std::hint::black_box(sink.ended_frame().unwrap()[0]);
            }
            sink.end_frame().unwrap();
        }
        std::hint::black_box(sink.ended_frame().unwrap()[0]);
        let to = t0.elapsed().as_secs_f64() * 1e3 / FRAMES as f64;
        last_overlapped = sink.ended_frame().unwrap().to_vec();
        if run >= WARMUP {
            serial.push(ts);
            overlapped.push(to);
        }
    }
    let (s, o) = (median(serial).0, median(overlapped).0);
    println!(
        "\nframes ({name}, tile32, {FRAMES} a run, median of 5): waited download {s:.3} ms/frame, overlapped (end_frame) {o:.3} ms/frame: {:.3}x; frames equal bitwise: {}",
        s / o,
        if bits(&last_serial) == bits(&last_overlapped) {
            "yes"
        } else {
            "NO"
        }
    );
}

/// A comma-separated list of names from an environment variable; unset:
/// every name.
struct Only(Option<String>);

impl Only {
    fn from_env(var: &str) -> Self {
        Only(std::env::var(var).ok())
    }

    fn allows(&self, name: &str) -> bool {
        self.0
            .as_deref()
            .is_none_or(|o| o.split(',').any(|x| x.trim() == name))
    }
}

/// The torch stamp splat (scripts/psf_torch_peer.py) of one fixture's cached
/// events, through files in a folder of its own (the stamps and the image
/// raw float64, the events hipkern's N×7 `.npy`).
struct TorchPeer {
    script: PathBuf,
    dir: PathBuf,
    cache: Arc<PsfCache>,
    stamps_written: bool,
}

impl TorchPeer {
    /// Runs the peer on `cached` (the fixture's events that fit the cache),
    /// checks its image against the CPU sink of the same events (`cpu`: the
    /// fixture's own, when all its events are cached) and prints its time
    /// beside tile32's kernels. Any failure is printed, not raised: the peer
    /// is optional.
    fn run(
        &mut self,
        name: &str,
        f: &fixtures::Fixture,
        cached: &[StarEvent],
        cpu: Option<&CpuSink>,
        tile32_kernels: Option<f64>,
    ) {
        match self.try_run(name, f, cached, cpu) {
            Ok((ms, min, max, verdict)) => {
                let ratio = tile32_kernels
                    .map(|k| format!("; torch / tile32 kernels {:.2}x", ms / k))
                    .unwrap_or_default();
                println!(
                    "torch splat   {ms:>9.3} {min:>8.3}..{max:>8.3}  (torch stamp splat of the {} cached events, GPU time, median){ratio}; check {verdict}",
                    cached.len()
                );
            }
            Err(e) => println!("torch splat   not run: {e}"),
        }
    }

    fn try_run(
        &mut self,
        name: &str,
        f: &fixtures::Fixture,
        cached: &[StarEvent],
        cpu: Option<&CpuSink>,
    ) -> Result<(f64, f64, f64, &'static str), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let stamps = self.dir.join("stamps.f64");
        if !self.stamps_written {
            write_f64(&stamps, self.cache.stamps())?;
            self.stamps_written = true;
        }
        let events = self.dir.join(format!("{name}.npy"));
        hipkern::psf::write_events_npy(&events, cached).map_err(|e| e.to_string())?;
        let (image, json) = (
            self.dir.join(format!("{name}-image.f64")),
            self.dir.join(format!("{name}.json")),
        );
        let out = std::process::Command::new("python3")
            .arg(&self.script)
            .args(["--stamps", &stamps.display().to_string()])
            .args(["--phases", &self.cache.phases().to_string()])
            .args(["--events", &events.display().to_string()])
            .args([
                "--width",
                &f.width.to_string(),
                "--height",
                &f.height.to_string(),
            ])
            .args(["--image", &image.display().to_string()])
            .args(["--json", &json.display().to_string()])
            .output()
            .map_err(|e| format!("python3: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "the peer failed ({}): {}",
                out.status,
                err.lines().last().unwrap_or("")
            ));
        }
        let rec = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
        let rec = peer_json::parse(&rec);
        let field = |k: &str| rec.get(k).ok_or(format!("no {k} in {}", json.display()));
        let (ms, min, max) = (field("median_ms")?, field("min_ms")?, field("max_ms")?);
        let bytes = std::fs::read(&image).map_err(|e| format!("{}: {e}", image.display()))?;
        let data: Vec<f64> = bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let got = hipkern::psf::HdrImage::from_data(f.width, f.height, data)
            .map_err(|e| format!("the peer's image: {e}"))?;
        let own;
        let reference = match cpu {
            Some(c) => c.image(),
            // The fixture has events beyond the stamps: the peer's reference
            // is the CPU sink of the cached ones alone.
            None => {
                let mut c = CpuSink::parallel(self.cache.clone(), f.width, f.height, 0)
                    .map_err(|e| e.to_string())?;
                c.accumulate(cached).map_err(|e| e.to_string())?;
                own = c;
                own.image()
            }
        };
        let verdict = match got
            .compare(reference)
            .map_err(|e| e.to_string())?
            .accept(1e-10)
        {
            Ok(()) => "ok",
            Err(_) => "FAILED",
        };
        for p in [&events, &image, &json] {
            let _ = std::fs::remove_file(p);
        }
        Ok((ms, min, max, verdict))
    }
}

impl Drop for TorchPeer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_f64(path: &Path, values: &[f64]) -> Result<(), String> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}
