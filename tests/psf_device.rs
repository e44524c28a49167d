//! The device PSF sink (`atomic` mode) against the float64 CPU sink
//! (`CpuSink`, the same cache shared through an `Arc`), with the
//! acceptance of `docs/design/psf.md#acceptance` (every value finite, the
//! same zero pixels, max_rel < 1e−10, max_abs < 1e−10 × peak, R/G/B/Y
//! flux ≤ 1e−10). The image a sink
//! downloads starts as NaN on the host, so an unwritten value shows; a new
//! sink's image is checked to be exactly zero. GPU tests (`gpu_*`) are ignored
//! on the cpu platform; the first test runs everywhere.
mod common;
use hipkern::psf::fixtures::{self, BOUNDARY_DIRECT_SUPPORTS, FIXTURE_NAMES};
use hipkern::psf::{CpuSink, DeviceSink, HdrImage, PsfCache, StarEvent, CHUNK_EVENTS};
use hipkern::rng::SplitMix64 as Rng;
use hipkern::runtime;

use common::psf::{bits, cache, check, gpu};

/// `n` fresh random events on a `w × h` image: centres up to 60 px beyond
/// every edge (wings, wholly outside ones), random phases, supports from
/// 0.3 px to 47.4 px (all fit the cache), random flux and colours.
fn random_events(rng: &mut Rng, n: usize, w: usize, h: usize) -> Vec<StarEvent> {
    let u = |rng: &mut Rng| 0.5 * (rng.uniform_pm1() + 1.0);
    (0..n)
        .map(|_| {
            let x = -60.0 + u(rng) * (w as f64 + 120.0);
            let y = -60.0 + u(rng) * (h as f64 + 120.0);
            let support = if rng.below(4) == 0 {
                0.3 + u(rng) * 47.1
            } else {
                45.84777786185942
            };
            StarEvent {
                x,
                y,
                flux: 10f64.powf(3.0 * u(rng)),
                r: u(rng),
                g: u(rng),
                b: u(rng),
                support,
            }
        })
        .collect()
}

// ---- always run ---------------------------------------------------------

#[test]
fn without_a_device_the_sink_is_a_clean_error() {
    // No Device on the cpu platform, so no DeviceSink can be made; the C ABI's
    // argument checks come before any runtime call.
    let expect_bad = common::check_no_device_contract();
    let null = std::ptr::null_mut::<f64>();
    let mut word = u64::MAX;
    // SAFETY: every call below is refused before any pointer is used.
    unsafe {
        let splat = |ev: *const f64, n: i64, p: i32, w: i32, h: i32, rep: *mut u64| {
            hipkern_sys::hipkern_psf_splat_atomic(
                ev,
                n,
                null,
                p,
                null,
                w,
                h,
                rep,
                std::ptr::null_mut(),
            )
        };
        let rep: *mut u64 = &mut word;
        // Null events / stamps / image with events to add.
        assert_eq!(splat(null, 1, 64, 16, 16, rep), expect_bad);
        // Null report word.
        assert_eq!(splat(null, 0, 64, 16, 16, std::ptr::null_mut()), expect_bad);
        // Negative count, phases out of 1..=1024, empty image.
        assert_eq!(splat(null, -1, 64, 16, 16, rep), expect_bad);
        assert_eq!(splat(null, 0, 0, 16, 16, rep), expect_bad);
        assert_eq!(splat(null, 0, 1025, 16, 16, rep), expect_bad);
        assert_eq!(splat(null, 0, 64, 0, 16, rep), expect_bad);
        assert_eq!(splat(null, 0, 64, 16, -3, rep), expect_bad);
        // Nothing to add: success on a device build, without touching anything.
        let nothing = splat(null, 0, 64, 16, 16, rep);
        if runtime::platform() == "cpu" {
            assert_eq!(nothing, hipkern_sys::HIPKERN_ERROR_NO_TOOLCHAIN);
        } else {
            assert_eq!(nothing, hipkern_sys::HIPKERN_SUCCESS as i32);
        }
    }
    assert_eq!(word, u64::MAX, "a refused call wrote the report word");
    // The direct path's entry: its PSF and sizes are checked before anything.
    let good = hipkern_sys::hipkern_psf_moffat {
        fwhm: 2.7,
        beta: 4.5,
        tail: 1e-8,
    };
    let bad_psfs = [
        (0.4, 4.5, 1e-8),
        (f64::NAN, 4.5, 1e-8),
        (2.7, 1.05, 1e-8),
        (2.7, 4.5, 0.6),
        (2.7, 4.5, 0.0),
        // beta 1.1 with tail 1e-15: a support radius beyond 1e12 px.
        (2.7, 1.1, 1e-15),
    ];
    let mut direct =
        |ev: *const f64, n: i64, psf: *const hipkern_sys::hipkern_psf_moffat, w: i32| {
            // SAFETY: every call here is refused before any pointer is used
            // (a null or invalid PSF, a bad size, or null device pointers).
            unsafe {
                hipkern_sys::hipkern_psf_render_direct(
                    ev,
                    n,
                    psf,
                    null,
                    w,
                    16,
                    &mut word,
                    std::ptr::null_mut(),
                )
            }
        };
    let ev = [0.0f64; 7];
    // With no events, only the PSF (or a size) can make a call fail.
    for (fwhm, beta, tail) in bad_psfs {
        let p = hipkern_sys::hipkern_psf_moffat { fwhm, beta, tail };
        assert_eq!(
            direct(ev.as_ptr(), 0, &p, 16),
            expect_bad,
            "{fwhm} {beta} {tail}"
        );
    }
    assert_eq!(direct(ev.as_ptr(), 0, std::ptr::null(), 16), expect_bad);
    assert_eq!(direct(ev.as_ptr(), -1, &good, 16), expect_bad);
    assert_eq!(direct(ev.as_ptr(), 0, &good, 0), expect_bad);
    // Events to add but a null image.
    assert_eq!(direct(ev.as_ptr(), 1, &good, 16), expect_bad);
    let nothing = direct(ev.as_ptr(), 0, &good, 16);
    if runtime::platform() == "cpu" {
        assert_eq!(nothing, hipkern_sys::HIPKERN_ERROR_NO_TOOLCHAIN);
    } else {
        assert_eq!(nothing, hipkern_sys::HIPKERN_SUCCESS as i32);
    }
    assert_eq!(word, u64::MAX, "a refused call wrote the report word");
}

// ---- GPU ----------------------------------------------------------------

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_matches_the_cpu_sink_on_every_fixture() {
    let d = gpu();
    for name in FIXTURE_NAMES {
        let f = fixtures::fixture(name).unwrap();
        assert_eq!(f.psf, *cache().psf(), "{name}: fixture PSF");
        let mut dev = DeviceSink::new(&d, cache(), f.width, f.height).unwrap();
        assert_eq!((dev.width(), dev.height()), (f.width, f.height));
        let zero = dev.finish().unwrap();
        assert!(
            zero.data().iter().all(|v| v.to_bits() == 0),
            "{name}: a new sink's image is not exactly +0"
        );
        let mut cpu = CpuSink::parallel(cache(), f.width, f.height, 0).unwrap();
        let all_fit = f.events.iter().all(|e| PsfCache::fits(e.x, e.y, e.support));
        if all_fit {
            dev.accumulate(&f.events).unwrap();
            cpu.accumulate(&f.events).unwrap();
        } else {
            let nd = dev.accumulate_routed(&f.events).unwrap();
            assert_eq!(nd, cpu.accumulate_routed(&f.events).unwrap(), "{name}");
            assert!(nd > 0);
        }
        let img = dev.finish().unwrap();
        assert_eq!(dev.stats(), cpu.stats(), "{name}: stats");
        eprintln!("{name}: {} events, {:?}", f.events.len(), dev.stats());
        check(name, &img, cpu.image());
        // finish() leaves the sink usable: a second download is the same image.
        assert_eq!(bits(&dev.finish().unwrap()), bits(&img), "{name}");
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_direct_path_in_the_middle_of_a_stream() {
    let d = gpu();
    let f = fixtures::boundary();
    let mut dev = DeviceSink::new(&d, cache(), f.width, f.height).unwrap();
    let mut cpu = CpuSink::parallel(cache(), f.width, f.height, 0).unwrap();
    // Three calls whose chunks straddle the oversized events (indices
    // 20,000 + 37 k): the direct path runs between device chunks.
    let cuts = [0, 9_000, 21_000, 27_500, f.events.len()];
    let mut n_direct = 0;
    for w in cuts.windows(2) {
        let part = &f.events[w[0]..w[1]];
        let nd = dev.accumulate_routed(part).unwrap();
        assert_eq!(nd, cpu.accumulate_routed(part).unwrap());
        n_direct += nd;
        assert_eq!(dev.stats(), cpu.stats(), "after events {}..{}", w[0], w[1]);
    }
    assert_eq!(n_direct, BOUNDARY_DIRECT_SUPPORTS.len());
    let st = dev.stats();
    assert_eq!(st.direct + st.cached + st.outside, f.events.len() as u64);
    assert!(st.direct > 0 && st.outside > 0, "{st:?}");
    check(
        "boundary, routed in 4 calls",
        &dev.finish().unwrap(),
        cpu.image(),
    );
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_malformed_and_oversized_events_are_refused_naming_them() {
    let d = gpu();
    let (w, h) = (512, 384);
    let mut rng = Rng::from_clock();
    let good = random_events(&mut rng, 3_000, w, h);
    let mut dev = DeviceSink::new(&d, cache(), w, h).unwrap();
    dev.accumulate(&good).unwrap();
    let before = dev.finish().unwrap();
    let stats = dev.stats();
    // Two chunks; the bad event in the second, so an all-or-nothing call
    // must not have applied the first either.
    let mut many = random_events(&mut rng, CHUNK_EVENTS + 100, w, h);
    let at = CHUNK_EVENTS + 37;
    type Spoil = fn(&mut StarEvent);
    let cases: [(&str, Spoil); 10] = [
        ("x", |e| e.x = f64::NAN),
        ("y", |e| e.y = f64::INFINITY),
        ("flux", |e| e.flux = -1.0),
        ("flux", |e| e.flux = f64::NEG_INFINITY),
        ("r", |e| e.r = -0.5),
        ("g", |e| e.g = f64::NAN),
        ("b", |e| e.b = -1e-300),
        ("support", |e| e.support = 0.0),
        ("support", |e| e.support = -3.0),
        ("support", |e| e.support = f64::NAN),
    ];
    for (field, spoil) in cases {
        let keep = many[at];
        spoil(&mut many[at]);
        for routed in [false, true] {
            let err = if routed {
                dev.accumulate_routed(&many).unwrap_err()
            } else {
                dev.accumulate(&many).unwrap_err()
            };
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("event {at}: {field} = ")),
                "{field} (routed {routed}): {msg}"
            );
        }
        many[at] = keep;
    }
    // Too large for the cache: refused by accumulate, naming it.
    many[at].support = 60.0;
    let msg = dev.accumulate(&many).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("event {at}: support = 60")) && msg.contains("cache radius"),
        "{msg}"
    );
    // Too large even for the direct path: refused by accumulate_routed.
    many[at].support = 2e12;
    let msg = dev.accumulate_routed(&many).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("event {at}: support = ")) && msg.contains("direct path"),
        "{msg}"
    );
    let after = dev.finish().unwrap();
    assert_eq!(
        bits(&after),
        bits(&before),
        "a refused call changed the image"
    );
    assert_eq!(dev.stats(), stats, "a refused call changed the counters");
    // The sink is still usable, and still agrees with the CPU.
    many[at].support = 60.0;
    let mut cpu = CpuSink::parallel(cache(), w, h, 0).unwrap();
    cpu.accumulate(&good).unwrap();
    assert_eq!(
        dev.accumulate_routed(&many).unwrap(),
        cpu.accumulate_routed(&many).unwrap()
    );
    assert_eq!(dev.stats(), cpu.stats());
    check(
        "after refusals, routed",
        &dev.finish().unwrap(),
        cpu.image(),
    );
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_several_calls_fresh_random_events_and_an_upload_round_trip() {
    let d = gpu();
    let (w, h) = (1000, 700);
    let mut rng = Rng::from_clock(); // prints its seed
    let mut events = random_events(&mut rng, 40_000, w, h);
    // Supports at the cache's edge (47.3..48.6 px), kept where the host says
    // they fit: the device's own check must agree (finish() reports a
    // disagreement as an error).
    let mut edge = random_events(&mut rng, 4_000, w, h);
    for e in &mut edge {
        e.support = 47.3 + 1.3 * 0.5 * (rng.uniform_pm1() + 1.0);
    }
    edge.retain(|e| PsfCache::fits(e.x, e.y, e.support));
    assert!(edge.len() > 100, "{} edge events fit", edge.len());
    for (k, e) in edge.into_iter().enumerate() {
        events[(k * 9) % 40_000] = e;
    }
    let mut dev = DeviceSink::new(&d, cache(), w, h).unwrap();
    let mut cpu = CpuSink::parallel(cache(), w, h, 0).unwrap();
    // Calls of 1, 999, one chunk, one chunk + 1, and the rest: chunks in
    // both staging slots, slots reused across calls.
    let mut at = 0;
    for n in [1, 999, CHUNK_EVENTS, CHUNK_EVENTS + 1, usize::MAX] {
        let end = at + n.min(events.len() - at);
        dev.accumulate(&events[at..end]).unwrap();
        cpu.accumulate(&events[at..end]).unwrap();
        at = end;
    }
    dev.accumulate(&[]).unwrap();
    cpu.accumulate(&[]).unwrap();
    assert_eq!(dev.stats(), cpu.stats());
    let img = dev.finish().unwrap();
    check("random events, 5 calls", &img, cpu.image());

    // Round trip: a NaN image up and down bit for bit, then the real one.
    let mut nan = HdrImage::new(w, h).unwrap();
    nan.fill(f64::NAN);
    dev.upload_image(&nan).unwrap();
    assert_eq!(bits(&dev.finish().unwrap()), bits(&nan));
    dev.upload_image(&img).unwrap();
    assert_eq!(bits(&dev.finish().unwrap()), bits(&img));
    // A wrong size is refused and changes nothing.
    let err = dev
        .upload_image(&HdrImage::new(w, h + 1).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("upload_image"), "{err}");
    assert_eq!(bits(&dev.finish().unwrap()), bits(&img));
    // Accumulation continues from the uploaded image.
    let more = random_events(&mut rng, 5_000, w, h);
    dev.accumulate(&more).unwrap();
    cpu.accumulate(&more).unwrap();
    check(
        "random events, after the round trip",
        &dev.finish().unwrap(),
        cpu.image(),
    );
    // An uploaded host image (the CPU's) then device events on top.
    dev.upload_image(cpu.image()).unwrap();
    let last = random_events(&mut rng, 2_000, w, h);
    dev.accumulate(&last).unwrap();
    cpu.accumulate(&last).unwrap();
    check(
        "random events, on an uploaded CPU image",
        &dev.finish().unwrap(),
        cpu.image(),
    );
}

/// Events for the direct path only (none fits the cache) on a `w × h`
/// image: supports 48–400 px at random positions (centres up to 100 px
/// beyond the edges), pairs at one position (their order matters), one
/// whose support covers the whole image many times over, one off the image
/// whose wings reach in, one wholly outside.
fn direct_events(rng: &mut Rng, n: usize, w: usize, h: usize) -> Vec<StarEvent> {
    let u = |rng: &mut Rng| 0.5 * (rng.uniform_pm1() + 1.0);
    let mut ev: Vec<StarEvent> = (0..n)
        .map(|_| StarEvent {
            x: -100.0 + u(rng) * (w as f64 + 200.0),
            y: -100.0 + u(rng) * (h as f64 + 200.0),
            flux: 10f64.powf(4.0 * u(rng)),
            r: u(rng),
            g: u(rng),
            b: u(rng),
            support: 48.0 + u(rng) * 352.0,
        })
        .collect();
    let twin = StarEvent { flux: 7.0, ..ev[0] };
    ev.push(twin);
    ev.push(StarEvent {
        x: 0.5 * w as f64 + 0.25,
        y: 0.5 * h as f64 - 0.125,
        support: 1e6,
        ..ev[1]
    });
    ev.push(StarEvent {
        x: -90.0,
        y: 0.3 * h as f64,
        support: 120.0,
        ..ev[2]
    });
    ev.push(StarEvent {
        x: w as f64 + 500.0,
        y: -500.0,
        support: 200.0,
        ..ev[3]
    });
    ev
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_direct_path_matches_the_cpu_value_by_value() {
    // The device renders the direct path (hipkern_psf_render_direct): the
    // CPU's pixels and float64 steps, the device's pow. On a random
    // nonzero image, so the adds land on values; every value checked.
    let d = gpu();
    let mut rng = Rng::from_clock(); // prints its seed
    let (w, h) = (517, 389); // partial 16 × 16 tiles on both edges
    let start: Vec<f64> = (0..w * h * 3).map(|_| 1.0 + rng.uniform_pm1()).collect();
    let start = HdrImage::from_data(w, h, start).unwrap();
    let mut events = direct_events(&mut rng, 40, w, h);
    // A cached event among them: the order across both paths holds.
    events.insert(
        5,
        StarEvent {
            x: 100.3,
            y: 200.7,
            flux: 50.0,
            r: 1.0,
            g: 0.5,
            b: 0.25,
            support: 20.0,
        },
    );
    let mut dev = DeviceSink::new(&d, cache(), w, h).unwrap();
    dev.upload_image(&start).unwrap();
    let mut cpu = CpuSink::with_image(cache(), start.clone(), 0).unwrap();
    let nd = dev.accumulate_routed(&events).unwrap();
    assert_eq!(nd, cpu.accumulate_routed(&events).unwrap());
    assert_eq!(nd, events.len() - 1);
    assert_eq!(dev.stats(), cpu.stats());
    let st = dev.stats();
    assert!(st.direct >= 20 && st.outside >= 1, "{st:?}");
    let got = dev.finish().unwrap();
    let (g, c, s0) = (got.data(), cpu.image().data(), start.data());
    let (mut worst, mut changed) = (0.0f64, 0usize);
    for i in 0..g.len() {
        if c[i].to_bits() == s0[i].to_bits() {
            // Untouched by the CPU: untouched (bitwise) on the device.
            assert_eq!(
                g[i].to_bits(),
                s0[i].to_bits(),
                "value {i}: {} vs {}",
                g[i],
                s0[i]
            );
            continue;
        }
        changed += 1;
        let rel = (g[i] - c[i]).abs() / c[i].abs();
        worst = worst.max(rel);
        assert!(
            rel <= 1e-13,
            "value {i} (pixel {}): device {} cpu {} rel {rel:e}",
            i / 3,
            g[i],
            c[i]
        );
    }
    eprintln!(
        "{changed} of {} values changed; worst relative difference {worst:e}",
        g.len()
    );
    assert!(
        changed > g.len() / 2,
        "the whole-image event touched every pixel"
    );
    // Same inputs, same bits: no atomics on the device.
    let mut again = DeviceSink::new(&d, cache(), w, h).unwrap();
    again.upload_image(&start).unwrap();
    again.accumulate_routed(&events).unwrap();
    assert_eq!(bits(&again.finish().unwrap()), bits(&got));

    // On a black image every contribution shows, down to the far wings
    // (values ~1e−14·flux at 100 px): each value within 1e−13 of itself on
    // the CPU, and the same pixels zero. With supports at the direct
    // path's limit: one centred 1e12 px off the image reaching in, one far
    // off with a small support (skipped by every tile).
    events.push(StarEvent {
        x: -1e12 + 200.0,
        y: 0.5 * h as f64,
        support: 1e12,
        ..events[7]
    });
    events.push(StarEvent {
        x: 1e300,
        y: -1e300,
        support: 60.0,
        ..events[8]
    });
    let mut dev = DeviceSink::new(&d, cache(), w, h).unwrap();
    let mut cpu = CpuSink::parallel(cache(), w, h, 0).unwrap();
    assert_eq!(
        dev.accumulate_routed(&events).unwrap(),
        cpu.accumulate_routed(&events).unwrap()
    );
    assert_eq!(dev.stats(), cpu.stats());
    let got = dev.finish().unwrap();
    let (g, c) = (got.data(), cpu.image().data());
    let mut worst = 0.0f64;
    for i in 0..g.len() {
        if c[i] == 0.0 {
            assert_eq!(
                g[i].to_bits(),
                c[i].to_bits(),
                "value {i}: device {} cpu 0",
                g[i]
            );
            continue;
        }
        let rel = (g[i] - c[i]).abs() / c[i].abs();
        worst = worst.max(rel);
        assert!(
            rel <= 1e-13,
            "black image, value {i}: device {} cpu {} rel {rel:e}",
            g[i],
            c[i]
        );
    }
    eprintln!("black image: worst relative difference {worst:e}");
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_direct_entry_point_refuses_a_bad_event_and_adds_nothing() {
    // Through the C ABI (the safe sink checks on the host first): the
    // device's check names the first bad event, and nothing is added.
    let d = gpu();
    let stream = d.new_stream().unwrap();
    let (w, h) = (64usize, 48usize);
    let mut rng = Rng::new(0x5EED_D1EC);
    let good = direct_events(&mut rng, 6, w, h);
    let poison: Vec<f64> = (0..w * h * 3).map(|i| i as f64 * 0.5).collect();
    let mut image = d.htod_copy(&poison).unwrap();
    let psf = hipkern_sys::hipkern_psf_moffat {
        fwhm: 2.7,
        beta: 4.5,
        tail: 1e-8,
    };
    type Spoil = fn(&mut StarEvent);
    let bads: [(usize, Spoil); 4] = [
        (3, |e| e.support = 2e12),
        (1, |e| e.flux = -1.0),
        (4, |e| e.x = f64::INFINITY),
        (0, |e| e.support = 0.0),
    ];
    for (at, spoil) in bads {
        let mut ev = good.clone();
        spoil(&mut ev[at]);
        // A second bad one later: the first is named.
        ev[5].b = f64::NAN;
        let flat: Vec<f64> = ev.iter().flat_map(|e| e.to_array()).collect();
        let events = d.htod_copy(&flat).unwrap();
        let mut report = d.htod_copy(&[u64::MAX]).unwrap();
        // SAFETY: events holds ev.len()·7 float64, image w·h·3 float64,
        // report one word, all on this device; the stream is this device's.
        let rc = unsafe {
            hipkern_sys::hipkern_psf_render_direct(
                events.as_ptr(),
                ev.len() as i64,
                &psf,
                image.as_mut_ptr(),
                w as i32,
                h as i32,
                report.as_mut_ptr(),
                stream.as_raw(),
            )
        };
        assert_eq!(rc, hipkern_sys::HIPKERN_SUCCESS as i32);
        stream.synchronize().unwrap();
        assert_eq!(report.to_vec().unwrap(), vec![at as u64]);
        let after = image.to_vec().unwrap();
        assert!(
            after
                .iter()
                .zip(&poison)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "a refused call changed the image"
        );
    }
}
