//! The device PSF sink's owner-computes modes (`tile16`, `tile32`,
//! `adaptive`; device and host binning) against the float64 CPU sink, with
//! the acceptance of `docs/design/psf.md` (every value finite, the same zero pixels, max_rel <
//! 1e−10, max_abs < 1e−10 × peak, R/G/B/Y flux ≤ 1e−10); bitwise
//! determinism; host and device binning bitwise equal; the bounded
//! scratch's refusals (image bitwise unchanged, counters unchanged, the
//! sink usable after). Downloaded images start as NaN on the host. GPU
//! tests (`gpu_*`) are ignored on the cpu platform; the first test runs
//! everywhere.
mod common;
use hipkern::psf::binning::{bin_chunk, tile_count};
use hipkern::psf::fixtures::{self, FIXTURE_NAMES};
use hipkern::psf::{
    AdaptiveThresholds, Binning, ChunkMode, CpuSink, DeviceSink, PsfCache, ScratchLimits, SinkMode,
    StarEvent, CHUNK_EVENTS,
};
use hipkern::rng::SplitMix64 as Rng;
use hipkern::{Device, Error};

use common::psf::{bits, cache, check, gpu};

fn unit(rng: &mut Rng) -> f64 {
    0.5 * (rng.uniform_pm1() + 1.0)
}

/// `n` events spread over the image and 60 px beyond it, supports 0.3..47.4.
fn spread(rng: &mut Rng, n: usize, w: usize, h: usize) -> Vec<StarEvent> {
    (0..n)
        .map(|_| StarEvent {
            x: -60.0 + unit(rng) * (w as f64 + 120.0),
            y: -60.0 + unit(rng) * (h as f64 + 120.0),
            flux: 10f64.powf(3.0 * unit(rng)),
            r: unit(rng),
            g: unit(rng),
            b: unit(rng),
            support: 0.3 + unit(rng) * 47.1,
        })
        .collect()
}

/// `n` events crowded within `radius` px of (cx, cy) (long tile lists).
fn crowd(rng: &mut Rng, n: usize, cx: f64, cy: f64, radius: f64) -> Vec<StarEvent> {
    (0..n)
        .map(|_| StarEvent {
            x: cx + radius * rng.uniform_pm1(),
            y: cy + radius * rng.uniform_pm1(),
            flux: 10f64.powf(2.0 * unit(rng)),
            r: unit(rng),
            g: unit(rng),
            b: unit(rng),
            support: 2.0 + unit(rng) * 20.0,
        })
        .collect()
}

const MODES: [(SinkMode, Binning); 5] = [
    (SinkMode::Tile16, Binning::Device),
    (SinkMode::Tile32, Binning::Device),
    (SinkMode::Adaptive, Binning::Device),
    (SinkMode::Tile16, Binning::Host),
    (SinkMode::Tile32, Binning::Host),
];

fn sink(d: &Device, w: usize, h: usize, mode: SinkMode, binning: Binning) -> DeviceSink {
    DeviceSink::builder(d, cache(), w, h)
        .mode(mode)
        .binning(binning)
        .build()
        .unwrap()
}

/// Accumulates a whole event set (routed when some do not fit the cache).
fn feed(dev: &mut DeviceSink, events: &[StarEvent]) {
    if events.iter().all(|e| PsfCache::fits(e.x, e.y, e.support)) {
        dev.accumulate(events).unwrap();
    } else {
        dev.accumulate_routed(events).unwrap();
    }
}

// ---- always run ---------------------------------------------------------

#[test]
fn the_tile_entry_points_refuse_bad_arguments_before_any_runtime_call() {
    let expect_bad = common::check_no_device_contract();
    let null = std::ptr::null_mut::<f64>();
    let mut word = u64::MAX;
    // SAFETY: every call below is refused by its argument checks before any
    // pointer is used.
    unsafe {
        let rep: *mut u64 = &mut word;
        let bin = |n: i64, tile: i32, sc: *const hipkern_sys::hipkern_psf_tile_scratch| {
            hipkern_sys::hipkern_psf_tile_bin(
                null,
                n,
                64,
                100,
                100,
                tile,
                1,
                1,
                sc,
                rep,
                std::ptr::null_mut(),
            )
        };
        // No scratch; a tile side other than 16 or 32; more events than a chunk.
        assert_eq!(bin(1, 16, std::ptr::null()), expect_bad);
        let sc: hipkern_sys::hipkern_psf_tile_scratch = std::mem::zeroed();
        assert_eq!(bin(1, 8, &sc), expect_bad);
        assert_eq!(bin(CHUNK_EVENTS as i64 + 1, 16, &sc), expect_bad);
        // A zeroed scratch (null buffers) is refused too.
        assert_eq!(bin(1, 16, &sc), expect_bad);
        let acc = hipkern_sys::hipkern_psf_tile_accumulate(
            null,
            64,
            null,
            100,
            100,
            16,
            1,
            1,
            1,
            0,
            &sc,
            rep,
            std::ptr::null_mut(),
        );
        assert_eq!(acc, expect_bad);
        let count = hipkern_sys::hipkern_psf_count(
            null,
            1,
            100,
            100,
            null.cast(),
            rep,
            std::ptr::null_mut(),
        );
        assert_eq!(count, expect_bad);
    }
    assert_eq!(word, u64::MAX, "a refused call wrote the report word");
}

// ---- GPU ----------------------------------------------------------------

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_every_tile_mode_matches_the_cpu_on_every_fixture_bitwise_repeatably() {
    let d = gpu();
    for name in FIXTURE_NAMES {
        let f = fixtures::fixture(name).unwrap();
        let mut cpu = CpuSink::parallel(cache(), f.width, f.height, 0).unwrap();
        // Routed: the same as accumulate when every event fits the cache.
        cpu.accumulate_routed(&f.events).unwrap();
        let mut device_bits: Vec<(SinkMode, Vec<u64>)> = Vec::new();
        for (mode, binning) in MODES {
            let what = format!("{name} {} {binning:?}", mode.name());
            let mut dev = sink(&d, f.width, f.height, mode, binning);
            let zero = dev.finish().unwrap();
            assert!(
                zero.data().iter().all(|v| v.to_bits() == 0),
                "{what}: new image"
            );
            feed(&mut dev, &f.events);
            let img = dev.finish().unwrap();
            assert_eq!(dev.stats(), cpu.stats(), "{what}: stats");
            check(&what, &img, cpu.image());
            let log = dev.chunk_log().to_vec();
            let tiles = log.iter().filter(|c| c.mode != ChunkMode::Atomic).count();
            eprintln!(
                "{what}: {} chunks, {tiles} by tiles, peak {:?}",
                log.len(),
                dev.scratch_peak()
            );
            let (peak, cap) = (dev.scratch_peak(), dev.scratch_capacity());
            assert!(peak.references <= cap.references && peak.tasks <= cap.tasks);
            assert!(peak.partials <= cap.partials && peak.starts <= cap.starts);
            if mode != SinkMode::Adaptive {
                assert!(
                    log.iter().all(|c| c.mode != ChunkMode::Atomic),
                    "{what}: {log:?}"
                );
                assert!(peak.references > 0, "{what}: no references");
            }
            // Determinism: the same chunks again give the same bits.
            dev.reset().unwrap();
            feed(&mut dev, &f.events);
            let again = dev.finish().unwrap();
            if mode == SinkMode::Adaptive && tiles < log.len() {
                check(&format!("{what}, again"), &again, cpu.image());
            } else {
                assert_eq!(bits(&again), bits(&img), "{what}: not bitwise repeatable");
            }
            assert_eq!(dev.chunk_log(), &log[..], "{what}: the same choices again");
            assert_eq!(dev.stats(), cpu.stats(), "{what}: stats after reset");
            if mode != SinkMode::Adaptive {
                let b = bits(&img);
                match device_bits.iter().find(|(m, _)| *m == mode) {
                    // Host binning gives the device's lists, so the same bits.
                    Some((_, want)) => assert!(*want == b, "{what}: host ≠ device binning"),
                    None => device_bits.push((mode, b)),
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_chunks_mix_modes_and_the_direct_path_runs_in_the_middle() {
    let d = gpu();
    let f = fixtures::boundary();
    let (w, h) = (f.width, f.height);
    let mut rng = Rng::from_clock();
    // A crowded chunk (tile16 by the default thresholds), the boundary
    // fixture routed (its direct-path events in the middle chunk), a thin
    // chunk (atomic: fewer than 8,192 events), another crowd.
    let first = crowd(&mut rng, CHUNK_EVENTS, w as f64 * 0.3, h as f64 * 0.4, 40.0);
    let thin = spread(&mut rng, 3000, w, h);
    let last = crowd(&mut rng, 12_000, w as f64 - 5.0, 3.0, 30.0);
    for mode in [SinkMode::Adaptive, SinkMode::Tile32, SinkMode::Tile16] {
        let mut dev = sink(&d, w, h, mode, Binning::Device);
        let mut cpu = CpuSink::parallel(cache(), w, h, 0).unwrap();
        dev.accumulate(&first).unwrap();
        cpu.accumulate(&first).unwrap();
        let nd = dev.accumulate_routed(&f.events).unwrap();
        assert_eq!(nd, cpu.accumulate_routed(&f.events).unwrap());
        assert!(nd > 0);
        dev.accumulate(&thin).unwrap();
        cpu.accumulate(&thin).unwrap();
        dev.accumulate(&last).unwrap();
        cpu.accumulate(&last).unwrap();
        let img = dev.finish().unwrap();
        assert_eq!(dev.stats(), cpu.stats(), "{}", mode.name());
        assert!(dev.stats().direct > 0);
        check(&format!("mixed stream, {}", mode.name()), &img, cpu.image());
        let modes: Vec<ChunkMode> = dev.chunk_log().iter().map(|c| c.mode).collect();
        eprintln!("{}: chunk modes {modes:?}", mode.name());
        if mode == SinkMode::Adaptive {
            // Default thresholds: tile32 for full chunks, atomic below 8,192 events.
            assert_eq!(modes.first(), Some(&ChunkMode::Tile32), "the crowd");
            assert!(modes.contains(&ChunkMode::Atomic), "the thin chunk");
            assert_eq!(modes.last(), Some(&ChunkMode::Tile32), "the last crowd");
            let thin_rec = dev.chunk_log()[modes.len() - 2];
            assert_eq!((thin_rec.events, thin_rec.mode), (3000, ChunkMode::Atomic));
        }
    }
    // Thresholds are parameters: with min_events 0 and 0 events per tile
    // every chunk goes to tiles, with an impossible density none does.
    for (th, want) in [
        (
            AdaptiveThresholds {
                min_events: 0,
                min_events_per_centre_tile: 0.0,
                tile: 16,
            },
            ChunkMode::Tile16,
        ),
        (
            AdaptiveThresholds {
                min_events: 0,
                min_events_per_centre_tile: 1e9,
                tile: 32,
            },
            ChunkMode::Atomic,
        ),
    ] {
        let mut dev = DeviceSink::builder(&d, cache(), w, h)
            .mode(SinkMode::Adaptive)
            .adaptive(th)
            .build()
            .unwrap();
        dev.accumulate(&thin).unwrap();
        dev.accumulate(&first).unwrap();
        dev.finish().unwrap();
        assert!(
            dev.chunk_log().iter().all(|c| c.mode == want),
            "{th:?}: {:?}",
            dev.chunk_log()
        );
    }
}

/// `events` in order, cut into the longest runs whose tile16 lists fit
/// `limits` (host lists are the device's). Twenty events at a time did not
/// always fit: the limits hold exactly `small`'s needs, and twenty crowded
/// events can need more references than forty spread ones.
fn fitting_parts(
    events: &[StarEvent],
    limits: &ScratchLimits,
    w: usize,
    h: usize,
) -> Vec<Vec<StarEvent>> {
    let fits = |part: &[StarEvent]| {
        let l = bin_chunk(part, w, h, 16);
        4 * l.references.len() as u64 <= limits.references
            && 24 * l.tasks.len() as u64 <= limits.tasks
            && 16 * 16 * 3 * 8 * l.partial_slots <= limits.partials
    };
    let mut parts: Vec<Vec<StarEvent>> = Vec::new();
    let mut part = Vec::new();
    for e in events {
        part.push(*e);
        if !fits(&part) {
            part.pop();
            assert!(
                !part.is_empty(),
                "one event alone exceeds the limits: {e:?}"
            );
            parts.push(std::mem::take(&mut part));
            part.push(*e);
        }
    }
    if !part.is_empty() {
        parts.push(part);
    }
    parts
}

/// Limits that hold `small`'s needs but not `big`'s in `buffer` (host lists
/// are the device's).
fn limits_between(
    buffer: &str,
    small: &[StarEvent],
    big: &[StarEvent],
    w: usize,
    h: usize,
) -> ScratchLimits {
    let (s, b) = (bin_chunk(small, w, h, 16), bin_chunk(big, w, h, 16));
    let mut l = ScratchLimits::default();
    match buffer {
        "references" => {
            l.references = 4 * s.references.len() as u64;
            assert!(b.references.len() > s.references.len());
        }
        "tasks" => {
            l.tasks = 24 * s.tasks.len() as u64;
            assert!(b.tasks.len() > s.tasks.len());
        }
        "partials" => {
            l.partials = 16 * 16 * 3 * 8 * s.partial_slots;
            assert!(b.partial_slots > s.partial_slots);
        }
        _ => unreachable!(),
    }
    l
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_scratch_capacity_refusals_leave_the_image_and_the_sink_usable() {
    let d = gpu();
    let (w, h) = (640, 480);
    let mut rng = Rng::from_clock();
    let small = spread(&mut rng, 40, w, h);
    let mut big = crowd(&mut rng, 3000, 200.0, 200.0, 30.0);
    big.extend(spread(&mut rng, 1500, w, h));
    // Two chunks, the second the one that needs too much; the first is
    // `small` and events wholly off the image (no tile, no reference).
    let mut two = small.clone();
    let off = StarEvent {
        x: -500.0,
        y: -500.0,
        ..small[0]
    };
    two.resize(CHUNK_EVENTS, off);
    two.extend_from_slice(&big);
    for binning in [Binning::Device, Binning::Host] {
        for buffer in ["references", "tasks", "partials"] {
            let what = format!("{buffer} ({binning:?} binning)");
            let limits = limits_between(buffer, &small, &big, w, h);
            let mut dev = DeviceSink::builder(&d, cache(), w, h)
                .mode(SinkMode::Tile16)
                .binning(binning)
                .scratch(limits)
                .build()
                .unwrap();
            let mut cpu = CpuSink::parallel(cache(), w, h, 0).unwrap();
            dev.accumulate(&small).unwrap();
            cpu.accumulate(&small).unwrap();
            let before = dev.finish().unwrap();
            let stats = dev.stats();
            let err = dev.accumulate(&big).unwrap_err();
            let Error::ScratchExceeded {
                buffer: b,
                needed_bytes,
                capacity_bytes,
                accumulated_events,
            } = err.clone()
            else {
                panic!("{what}: {err}");
            };
            assert_eq!((b, accumulated_events), (buffer, 0), "{what}: {err}");
            assert!(needed_bytes > capacity_bytes, "{what}: {err}");
            let msg = err.to_string();
            assert!(
                msg.contains(buffer) && msg.contains(&needed_bytes.to_string()),
                "{msg}"
            );
            assert_eq!(
                bits(&dev.finish().unwrap()),
                bits(&before),
                "{what}: image changed"
            );
            assert_eq!(dev.stats(), stats, "{what}: counters changed");
            // The second chunk of a call is refused; the first went in.
            let err = dev.accumulate(&two).unwrap_err();
            assert!(
                matches!(err, Error::ScratchExceeded { accumulated_events, .. }
                    if accumulated_events == CHUNK_EVENTS),
                "{what}: {err}"
            );
            cpu.accumulate(&two[..CHUNK_EVENTS]).unwrap();
            let img = dev.finish().unwrap();
            assert_eq!(
                dev.stats(),
                cpu.stats(),
                "{what}: after a half-refused call"
            );
            check(&format!("{what}: first chunk only"), &img, cpu.image());
            // Usable: the caller splits the refused events into calls that fit.
            for part in fitting_parts(&big, &limits, w, h) {
                dev.accumulate(&part).unwrap();
                cpu.accumulate(&part).unwrap();
            }
            assert_eq!(dev.stats(), cpu.stats(), "{what}: after splitting");
            check(
                &format!("{what}: split"),
                &dev.finish().unwrap(),
                cpu.image(),
            );
        }
    }
    // Starts: checked when the sink is built.
    let err = DeviceSink::builder(&d, cache(), 3840, 2160)
        .mode(SinkMode::Tile16)
        .scratch(ScratchLimits {
            starts: 1024,
            ..ScratchLimits::default()
        })
        .build()
        .unwrap_err();
    let need = 4 * tile_count(3840, 2160, 16) as u64;
    assert!(
        matches!(err, Error::ScratchExceeded { buffer: "starts", needed_bytes, capacity_bytes: 1024, .. }
            if needed_bytes == need),
        "{err}"
    );
    // The default holds a 4K image in tile16.
    DeviceSink::builder(&d, cache(), 3840, 2160)
        .mode(SinkMode::Tile16)
        .build()
        .unwrap();
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_frames_end_without_waiting_and_equal_one_frame_sinks() {
    // A stream of frames through end_frame / ended_frame: each frame is read
    // while the next one accumulates, and equals (bitwise: tile32 is
    // deterministic for a chunking) what a sink given that frame alone
    // finishes with; the image after end_frame is black.
    let d = gpu();
    let mut rng = Rng::from_clock(); // prints its seed
    let (w, h) = (700, 500);
    let frames: Vec<Vec<StarEvent>> = (0..4)
        .map(|k| {
            let mut ev = spread(&mut rng, 3_000 + 1_000 * k, w, h);
            ev.extend(crowd(&mut rng, 2_000, 350.0, 250.0, 40.0));
            if k == 2 {
                // One frame with an event for the direct path.
                ev.push(StarEvent {
                    support: 90.0,
                    ..ev[0]
                });
            }
            ev
        })
        .collect();
    let mut one = sink(&d, w, h, SinkMode::Tile32, Binning::Device);
    let mut want = Vec::new();
    for ev in &frames {
        one.reset().unwrap();
        feed(&mut one, ev);
        want.push(bits(&one.finish().unwrap()));
    }
    let mut cpu = CpuSink::parallel(cache(), w, h, 0).unwrap();
    cpu.accumulate(&frames[0]).unwrap();

    let ended_bits = |dev: &mut DeviceSink| -> Vec<u64> {
        dev.ended_frame()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let mut dev = sink(&d, w, h, SinkMode::Tile32, Binning::Device);
    let err = dev.ended_frame().unwrap_err();
    assert!(err.to_string().contains("no frame"), "{err}");
    for (k, ev) in frames.iter().enumerate() {
        feed(&mut dev, ev);
        if k > 0 {
            let got = ended_bits(&mut dev);
            assert!(got == want[k - 1], "frame {} differs", k - 1);
            if k == 1 {
                let img =
                    hipkern::psf::HdrImage::from_data(w, h, dev.ended_frame().unwrap().to_vec())
                        .unwrap();
                check("frame 0 against the CPU", &img, cpu.image());
            }
        }
        dev.end_frame().unwrap();
    }
    let last = ended_bits(&mut dev);
    assert!(last == want[3], "frame 3 differs");
    assert_eq!(dev.frames_ended(), 4);
    assert!(
        dev.finish()
            .unwrap()
            .data()
            .iter()
            .all(|v| v.to_bits() == 0),
        "the image after end_frame is not black"
    );
    // Two frames ended without a read between: the second replaces the first.
    feed(&mut dev, &frames[1]);
    dev.end_frame().unwrap();
    feed(&mut dev, &frames[2]);
    dev.end_frame().unwrap();
    let got = ended_bits(&mut dev);
    assert!(got == want[2], "the later of two unread frames");
}
