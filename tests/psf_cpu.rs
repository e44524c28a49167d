//! PSF sink, CPU paths: the Moffat model, the phase cache (normalisation,
//! centroids, mirror-exact build), the support contract, the serial
//! reference against exact pixel integrals (the blend's 1/P² accuracy),
//! the parallel sink (bitwise), the direct path, validation (nothing
//! accumulated from a rejected chunk), event files and fixtures.
use hipkern::psf::fixtures::{self, centre_tiles, fixture_contributions, BOUNDARY_DIRECT_SUPPORTS};
use hipkern::psf::support::{anchor_phase, row_span, support_box, support_rows};
use hipkern::psf::{
    count_contributions, encode_events, event_contributions, parse_events, read_events,
    render_direct, write_events, write_events_npy, write_fits, write_image_npy, write_png,
    CacheConfig, CpuSink, EventFormat, HdrImage, ImageMeta, MoffatPsf, PsfCache, StarEvent,
    CACHE_RADIUS, CHUNK_EVENTS, MAX_PHASES, MAX_THREADS, STAMP_PIXELS, STAMP_SIDE,
};
use hipkern::rng::SplitMix64 as Rng;
use hipkern::Error;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The default cache (P = 64), built once per test binary.
fn cache() -> Arc<PsfCache> {
    static CACHE: OnceLock<Arc<PsfCache>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let c = PsfCache::build(MoffatPsf::default()).expect("cache builds");
            eprintln!(
                "PsfCache P = {}: built in {:.3} s, {} bytes ({:.1} MiB)",
                c.phases(),
                c.build_time().as_secs_f64(),
                c.bytes(),
                c.bytes() as f64 / (1 << 20) as f64
            );
            Arc::new(c)
        })
        .clone()
}

fn message(e: Error) -> String {
    match e {
        Error::InvalidInput(m) => m,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

fn ev(x: f64, y: f64, flux: f64, support: f64) -> StarEvent {
    StarEvent {
        x,
        y,
        flux,
        r: 1.0,
        g: 0.5,
        b: 0.25,
        support,
    }
}

#[test]
fn moffat_numbers() {
    let psf = MoffatPsf::default();
    let r = psf.support_radius();
    assert!((r - 45.84777786185942).abs() < 1e-12, "R = {r:.17}");
    let a = psf.alpha();
    let want_a = 2.7 / (2.0 * (2f64.powf(1.0 / 4.5) - 1.0).sqrt());
    assert!((a - want_a).abs() < 1e-15);
    // Half maximum at FWHM/2, unit flux, the tail at R.
    let half = psf.intensity(1.35) / psf.intensity(0.0);
    assert!((half - 0.5).abs() < 1e-14, "I(FWHM/2)/I(0) = {half}");
    assert!((psf.norm() - 3.5 / (std::f64::consts::PI * a * a)).abs() < 1e-16);
    assert!((psf.flux_outside(r) / 1e-8 - 1.0).abs() < 1e-12);
    assert_eq!(psf.flux_outside(0.0), 1.0);
    // Bad parameters are named.
    for (p, what) in [
        (MoffatPsf::new(0.0, 4.5, 1e-8), "fwhm"),
        (MoffatPsf::new(f64::NAN, 4.5, 1e-8), "fwhm"),
        (MoffatPsf::new(2.7, 1.0, 1e-8), "beta"),
        (MoffatPsf::new(2.7, f64::INFINITY, 1e-8), "beta"),
        (MoffatPsf::new(2.7, 4.5, 0.0), "tail"),
        (MoffatPsf::new(2.7, 4.5, 1.0), "tail"),
    ] {
        let m = message(p.unwrap_err());
        assert!(m.contains(what), "{m}");
    }
}

#[test]
fn pixel_integrals_are_converged() {
    // The adaptive 8/6/4-node rule against 16 and 24 nodes per axis, over
    // every stamp offset at several phases.
    let psf = MoffatPsf::default();
    let mut worst = 0.0f64;
    let mut worst_rel = 0.0f64;
    for &(fx, fy) in &[(0.0, 0.0), (0.5, 0.5), (0.123, 0.877), (1.0, 0.25)] {
        for dy in -47..=47i64 {
            for dx in -47..=47i64 {
                let (cu, cv) = (dx as f64 + 0.5 - fx, dy as f64 + 0.5 - fy);
                let v = psf.pixel_integral(cu, cv);
                let v16 = psf.pixel_integral_with(cu, cv, 16).unwrap();
                let v24 = psf.pixel_integral_with(cu, cv, 24).unwrap();
                assert!(
                    (v16 - v24).abs() <= 1e-17 + 1e-14 * v24,
                    "16 vs 24 nodes at {cu}, {cv}"
                );
                worst = worst.max((v - v24).abs());
                worst_rel = worst_rel.max((v - v24).abs() / v24);
            }
        }
    }
    eprintln!("pixel integrals vs 24 nodes: max abs {worst:e}, max rel {worst_rel:e}");
    assert!(worst < 1e-14, "max abs {worst:e}");
    assert!(worst_rel < 1e-9, "max rel {worst_rel:e}");
    // Mirror-symmetric sums: bitwise equal under sign flips.
    for &(cu, cv) in &[(0.3, -1.7), (12.25, 3.5), (-40.1, 0.0)] {
        let v = psf.pixel_integral(cu, cv);
        assert_eq!(v.to_bits(), psf.pixel_integral(-cu, cv).to_bits());
        assert_eq!(v.to_bits(), psf.pixel_integral(cu, -cv).to_bits());
        assert_eq!(v.to_bits(), psf.pixel_integral(-cu, -cv).to_bits());
    }
    assert!(psf.pixel_integral_with(0.0, 0.0, 3).is_err());
}

#[test]
fn cache_layout_and_mirror_exact_build() {
    let c = cache();
    let p = c.phases();
    assert_eq!(p, 64);
    assert_eq!(STAMP_SIDE, 95);
    assert_eq!(c.stamps().len(), 65 * 65 * 95 * 95);
    assert_eq!(c.bytes(), 305_045_000);
    assert_eq!(c.stamp_index(3, 5), 5 * 65 + 3);
    // Stamps that are mirror copies are bitwise what a direct computation gives.
    for &(i, j) in &[
        (0, 0),
        (32, 32),
        (40, 3),
        (7, 60),
        (64, 64),
        (33, 31),
        (64, 0),
    ] {
        let direct = PsfCache::compute_stamp(c.psf(), p, i, j);
        let got = c.stamp(i, j);
        assert!(
            direct
                .iter()
                .zip(got)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "stamp ({i}, {j}) differs from its direct computation"
        );
    }
    // The layout: value at (dx, dy) is the pixel integral of that pixel.
    let (i, j, dx, dy) = (17usize, 45usize, -3i64, 11i64);
    let v = c.stamps()[((j * 65 + i) * 95 + (dy + 47) as usize) * 95 + (dx + 47) as usize];
    let cu = (2 * 64 * dx + 64 - 2 * i as i64) as f64 / 128.0;
    let cv = (2 * 64 * dy + 64 - 2 * j as i64) as f64 / 128.0;
    assert_eq!(v, c.psf().pixel_integral(cu, cv));
    assert!(PsfCache::build_with(
        MoffatPsf::default(),
        &CacheConfig {
            phases: 0,
            threads: 1
        }
    )
    .is_err());
}

/// Gauss–Legendre nodes and weights on [−1, 1] (Newton on P_n).
fn gauss_legendre(n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|k| {
            let mut x = (std::f64::consts::PI * (k as f64 + 0.75) / (n as f64 + 0.5)).cos();
            let mut dp = 1.0;
            for _ in 0..100 {
                let (mut p0, mut p1) = (1.0, x);
                for j in 2..=n {
                    let p2 = ((2 * j - 1) as f64 * x * p1 - (j - 1) as f64 * p0) / j as f64;
                    p0 = p1;
                    p1 = p2;
                }
                dp = n as f64 * (x * p1 - p0) / (x * x - 1.0);
                let dx = p1 / dp;
                x -= dx;
                if dx.abs() < 1e-16 {
                    break;
                }
            }
            (x, 2.0 / ((1.0 - x * x) * dp * dp))
        })
        .collect()
}

/// The PSF's flux inside the axis-aligned rectangle `[x0, x1] × [y0, y1]`
/// (relative to its centre, which lies inside), independently of the
/// pixel integrals: the rectangle is a fan of triangles from the centre,
/// and the flux of a fan in direction θ out to distance ρ(θ) is
/// `(1 − (1 + ρ²/α²)^(1−β)) dθ/2π`; along an edge at normal distance D,
/// `dθ = D dt/(D² + t²)`.
fn rectangle_flux(psf: &MoffatPsf, x0: f64, x1: f64, y0: f64, y1: f64, rule: &[(f64, f64)]) -> f64 {
    let edge = |d: f64, t0: f64, t1: f64| {
        let mut s = 0.0;
        let pieces = 4;
        for q in 0..pieces {
            let a = t0 + (t1 - t0) * q as f64 / pieces as f64;
            let b = t0 + (t1 - t0) * (q + 1) as f64 / pieces as f64;
            let (m, h) = (0.5 * (a + b), 0.5 * (b - a));
            for &(x, w) in rule {
                let t = m + h * x;
                let r2 = d * d + t * t;
                s += w * h * (1.0 - psf.flux_outside(r2.sqrt())) * d / r2;
            }
        }
        s
    };
    (edge(x1, y0, y1) + edge(-x0, y0, y1) + edge(y1, x0, x1) + edge(-y0, x0, x1))
        / (2.0 * std::f64::consts::PI)
}

#[test]
fn stamps_hold_the_flux_and_their_centroid_is_the_phase() {
    let c = cache();
    let psf = *c.psf();
    let p = c.phases();
    let r = CACHE_RADIUS as f64;
    let (mut min_sum, mut worst_centroid, mut worst_square) = (f64::INFINITY, 0.0f64, 0.0f64);
    let rule = gauss_legendre(40);
    for j in 0..=p {
        for i in 0..=p {
            let (fx, fy) = (i as f64 / p as f64, j as f64 / p as f64);
            let s = c.stamp(i, j);
            let (mut sum, mut mx, mut my) = (0.0, 0.0, 0.0);
            for (k, v) in s.iter().enumerate() {
                let (dx, dy) = ((k % STAMP_SIDE) as f64 - r, (k / STAMP_SIDE) as f64 - r);
                sum += v;
                mx += v * (dx + 0.5);
                my += v * (dy + 0.5);
            }
            // The stamp covers [−47, 48)² relative to the anchor: the disk
            // of the inscribed radius is inside, the circumscribed outside.
            let r_in = (47.0 + fx.min(fy)).min(48.0 - fx.max(fy));
            let r_out =
                ((47.0 + fx.max(1.0 - fx)).powi(2) + (47.0 + fy.max(1.0 - fy)).powi(2)).sqrt();
            assert!(
                sum >= 1.0 - psf.flux_outside(r_in) - 1e-12,
                "stamp ({i},{j}) sum {sum}"
            );
            assert!(
                sum <= 1.0 - psf.flux_outside(r_out) + 1e-12,
                "stamp ({i},{j}) sum {sum}"
            );
            assert!(sum >= 1.0 - psf.tail - 1e-9, "stamp ({i},{j}) sum {sum}");
            // And it is the PSF's flux over exactly the square it covers.
            let want = rectangle_flux(&psf, -r - fx, r + 1.0 - fx, -r - fy, r + 1.0 - fy, &rule);
            worst_square = worst_square.max((sum - want).abs());
            min_sum = min_sum.min(sum);
            let (cx, cy) = (mx / sum, my / sum);
            worst_centroid = worst_centroid.max((cx - fx).abs()).max((cy - fy).abs());
        }
    }
    eprintln!(
        "stamps: min sum 1 − {:e}, worst centroid error {worst_centroid:e} px",
        1.0 - min_sum
    );
    eprintln!("stamps: |sum − flux over the square| ≤ {worst_square:e}");
    assert!(
        worst_centroid < 1e-6,
        "centroid off by {worst_centroid:e} px"
    );
    assert!(
        worst_square < 1e-12,
        "stamp sum vs square flux {worst_square:e}"
    );
}

#[test]
fn support_rows_follow_the_contract() {
    // Brute force: pixel centre offset within s, evaluated as the contract says.
    let mut rng = Rng::new(7);
    for _ in 0..300 {
        let fx = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let fy = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let s = 0.1 + 30.0 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let rows = support_rows(fy, s);
        for oy in -40..=40i64 {
            let dy = (oy as f64 + 0.5) - fy;
            let in_rows = rows.is_some_and(|(a, b)| a <= oy && oy <= b);
            assert_eq!(in_rows, s * s - dy * dy >= 0.0, "row {oy}, fy {fy}, s {s}");
            let span = row_span(fx, fy, s, oy);
            for ox in -40..=40i64 {
                let dx = (ox as f64 + 0.5) - fx;
                let inside = span.is_some_and(|(a, b)| a <= ox && ox <= b);
                let want = s * s - dy * dy >= 0.0 && dx.abs() <= (s * s - dy * dy).sqrt();
                assert_eq!(
                    inside, want,
                    "pixel ({ox}, {oy}), phase ({fx}, {fy}), s {s}"
                );
                if inside {
                    let b = support_box(fx, fy, s).unwrap();
                    assert!(b.ox_lo <= ox && ox <= b.ox_hi && b.oy_lo <= oy && oy <= b.oy_hi);
                }
            }
        }
    }
    // The cache takes any support below 47.5 px; 47.5 needs offset −48 at phase 0.
    for &f in &[0.0, 0.25, 0.5, 0.999, 1.0] {
        assert!(PsfCache::fits(100.0 + f, 50.0 + f, 47.49), "phase {f}");
    }
    assert!(!PsfCache::fits(100.0, 50.0, 47.5));
    assert!(!PsfCache::fits(100.5, 50.5, 48.1));
    for _ in 0..2000 {
        let x = 100.0 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let y = 100.0 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let s = 47.5 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        assert!(PsfCache::fits(x, y, s), "({x}, {y}), support {s}");
        assert!(!PsfCache::fits(x, y, 48.5 + s));
    }
    // fits() skips the row search for supports ≤ 47 px: the boxes there
    // (phases 0 and 1 included) stay within ±47.
    for k in 0..=4700 {
        let s = f64::from(k) / 100.0;
        for &(fx, fy) in &[(0.0, 0.0), (1.0, 1.0), (0.0, 1.0), (0.5, 0.5), (1.0, 0.0)] {
            if let Some(b) = support_box(fx, fy, s) {
                assert!(
                    b.ox_lo >= -47 && b.ox_hi <= 47 && b.oy_lo >= -47 && b.oy_hi <= 47,
                    "{s}"
                );
            }
        }
    }
    assert_eq!(anchor_phase(-1e-20), (-1, 1.0));
    assert_eq!(std::mem::size_of::<StarEvent>(), 56);
    assert_eq!(anchor_phase(-2.25), (-3, 0.75));
}

/// ‖cached − direct‖∞ / ‖direct‖∞ over a few events at random phases, each
/// alone on a 128×128 image.
fn blend_error(c: &Arc<PsfCache>, seed: u64) -> f64 {
    let mut rng = Rng::new(seed);
    let r = c.psf().support_radius();
    let mut worst = 0.0f64;
    for _ in 0..12 {
        let x = 60.0 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let y = 60.0 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let e = [ev(x, y, 2.0, r)];
        let mut sink = CpuSink::new(c.clone(), 128, 128).unwrap();
        sink.accumulate(&e).unwrap();
        let mut direct = HdrImage::new(128, 128).unwrap();
        render_direct(c.psf(), &e, &mut direct).unwrap();
        let d = sink
            .image()
            .data()
            .iter()
            .zip(direct.data())
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        worst = worst.max(d / direct.peak());
    }
    worst
}

#[test]
fn reference_matches_exact_pixel_integrals_to_the_blend_accuracy() {
    let psf = MoffatPsf::default();
    let mut errs = Vec::new();
    for p in [16, 32] {
        let c = Arc::new(
            PsfCache::build_with(
                psf,
                &CacheConfig {
                    phases: p,
                    threads: 0,
                },
            )
            .unwrap(),
        );
        errs.push(blend_error(&c, 11));
    }
    errs.push(blend_error(&cache(), 11));
    eprintln!(
        "blend error vs exact pixel integrals: P=16 {:e}, P=32 {:e}, P=64 {:e}; ratios {:.3}, {:.3}",
        errs[0],
        errs[1],
        errs[2],
        errs[0] / errs[1],
        errs[1] / errs[2]
    );
    assert!(errs[2] < 1e-4 && errs[2] > 1e-6, "P=64 error {:e}", errs[2]);
    for k in 0..2 {
        let ratio = errs[k] / errs[k + 1];
        assert!(
            (3.3..4.7).contains(&ratio),
            "error ratio {ratio} (want ≈ 4)"
        );
    }
    // At an exact cache phase the blend is the stamp itself: exact.
    let c = cache();
    let e = [ev(60.0 + 5.0 / 64.0, 61.0 + 0.5, 1.0, psf.support_radius())];
    let mut sink = CpuSink::new(c.clone(), 128, 128).unwrap();
    sink.accumulate(&e).unwrap();
    let mut direct = HdrImage::new(128, 128).unwrap();
    render_direct(&psf, &e, &mut direct).unwrap();
    let cmp = sink.image().compare(&direct).unwrap();
    assert!(
        cmp.max_rel < 1e-13,
        "exact phase: max_rel {:e}",
        cmp.max_rel
    );
}

#[test]
fn reference_is_the_documented_blend() {
    let c = cache();
    let e = ev(20.3, 30.7, 3.0, 10.0);
    let mut sink = CpuSink::new(c.clone(), 64, 64).unwrap();
    sink.accumulate(&[e]).unwrap();
    let img = sink.image();
    let (fx, fy) = (20.3 - 20.0, 30.7 - 30.0);
    for (ix, iy) in [(20usize, 30usize), (25, 28), (11, 31), (29, 30)] {
        let v = c.blend(fx, fy, ix as i64 - 20, iy as i64 - 30);
        let px = img.pixel(ix, iy);
        assert_eq!(px[0], v * (e.flux * e.r), "pixel ({ix}, {iy})");
        assert_eq!(px[1], v * (e.flux * e.g));
        assert_eq!(px[2], v * (e.flux * e.b));
    }
    // Outside the support: zero.
    assert_eq!(img.pixel(31, 30), [0.0; 3]);
    assert_eq!(sink.stats().contributions, event_contributions(&e, 64, 64));
}

#[test]
fn edges_wings_and_outside_events() {
    let c = cache();
    let r = c.psf().support_radius();
    let (w, h) = (200usize, 150usize);
    let wing = ev(-10.25, 70.5, 1.0, r); // centre off the image, wing reaches in
    let outside = ev(-r - 2.0, 70.5, 1.0, r);
    let far = ev(1e15, -1e300, 1.0, r);
    let corner = ev(199.9, 149.9, 1.0, r);
    let mut sink = CpuSink::new(c.clone(), w, h).unwrap();
    sink.accumulate(&[wing, outside, far, corner]).unwrap();
    let st = sink.stats();
    assert_eq!((st.events, st.cached, st.outside), (4, 2, 2));
    assert_eq!(st.contributions, count_contributions(&[wing, corner], w, h));
    assert!(sink.image().pixel(0, 70)[0] > 0.0);
    assert_eq!(sink.image().pixel(40, 70)[0], 0.0);
    // The wing's flux is that part of the exact render on a wider image.
    let mut direct = HdrImage::new(w, h).unwrap();
    render_direct(c.psf(), &[wing, corner], &mut direct).unwrap();
    let cmp = sink.image().compare(&direct).unwrap();
    assert!(cmp.max_rel < 2e-4 && cmp.zero_mismatches == 0, "{cmp:?}");
}

#[test]
fn bad_events_are_named_and_their_chunk_is_not_applied() {
    let c = cache();
    let mut rng = Rng::new(3);
    let mut events: Vec<StarEvent> = (0..CHUNK_EVENTS + 500)
        .map(|_| {
            let x = 64.0 * (rng.uniform_pm1() + 1.0);
            let y = 64.0 * (rng.uniform_pm1() + 1.0);
            ev(x, y, 1.0, 1.5)
        })
        .collect();
    let bad_at = CHUNK_EVENTS + 123;
    type Breaker = fn(&mut StarEvent);
    let cases: Vec<(Breaker, &str)> = vec![
        (|e| e.x = f64::NAN, "x = NaN"),
        (|e| e.y = f64::INFINITY, "y = inf"),
        (|e| e.flux = -1.0, "flux"),
        (|e| e.g = -0.5, "g"),
        (|e| e.b = f64::NEG_INFINITY, "b = -inf"),
        (|e| e.support = 0.0, "support"),
        (|e| e.support = -3.0, "support"),
        (|e| e.support = f64::NAN, "support = NaN"),
        (|e| e.support = 60.0, "cache radius"),
    ];
    let mut first = CpuSink::new(c.clone(), 128, 128).unwrap();
    first.accumulate(&events[..CHUNK_EVENTS]).unwrap();
    for (break_it, what) in cases {
        let keep = events[bad_at];
        break_it(&mut events[bad_at]);
        let mut sink = CpuSink::new(c.clone(), 128, 128).unwrap();
        let m = message(sink.accumulate(&events).unwrap_err());
        assert!(m.contains(&format!("event {bad_at}")), "{m}");
        assert!(m.contains(what), "{what}: {m}");
        // The first chunk stayed, nothing of the second.
        assert_eq!(sink.image(), first.image(), "{what}");
        assert_eq!(sink.stats(), first.stats());
        events[bad_at] = keep;
    }
    // An oversized event is named with its values, and the direct path renders it.
    let r = c.psf().support_radius();
    let big = ev(100.5, 90.25, 5.0, 60.0);
    let mut sink = CpuSink::new(c.clone(), 256, 256).unwrap();
    let m = message(sink.accumulate(&[ev(30.0, 30.0, 1.0, r), big]).unwrap_err());
    assert!(
        m.contains("event 1") && m.contains("support = 60") && m.contains("100.5"),
        "{m}"
    );
    assert_eq!(sink.image().peak(), 0.0);
    let n = sink
        .accumulate_routed(&[ev(30.0, 30.0, 1.0, r), big])
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(sink.stats().direct, 1);
    // The same by hand, the direct path in the middle of a stream.
    let mut by_hand = CpuSink::new(c.clone(), 256, 256).unwrap();
    by_hand.accumulate(&[ev(30.0, 30.0, 1.0, r)]).unwrap();
    by_hand.accumulate_direct(&[big]).unwrap();
    assert_eq!(by_hand.image(), sink.image());
    by_hand.accumulate(&[ev(200.0, 30.0, 1.0, r)]).unwrap();
    assert_eq!(by_hand.stats().cached, 2);
    let mut alone = HdrImage::new(256, 256).unwrap();
    let d = render_direct(c.psf(), &[big], &mut alone).unwrap();
    assert_eq!(d.contributions, event_contributions(&big, 256, 256));
    // All of the flux within 60 px (the image holds the whole support).
    let sums = alone.sums();
    let want = 5.0 * (1.0 - c.psf().flux_outside(60.0));
    assert!(
        (sums.r / want - 1.0).abs() < 1e-6,
        "direct flux {} vs {want}",
        sums.r
    );
    assert!(
        render_direct(c.psf(), &[ev(1.0, 1.0, -1.0, 3.0)], &mut alone)
            .unwrap_err()
            .to_string()
            .contains("event 0")
    );
}

#[test]
fn event_files_round_trip_and_bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let psf = MoffatPsf::new(3.1, 3.5, 1e-7).unwrap();
    let events: Vec<StarEvent> = (0..37)
        .map(|k| {
            ev(
                k as f64 * 1.5,
                100.0 - k as f64,
                0.1 * k as f64,
                1.0 + k as f64,
            )
        })
        .collect();
    let bin = dir.path().join("e.bin");
    write_events(&bin, &psf, &events).unwrap();
    let f = read_events(&bin).unwrap();
    assert_eq!(
        (f.format, f.psf, &f.events),
        (EventFormat::Binary, Some(psf), &events)
    );
    let npy = dir.path().join("e.npy");
    write_events_npy(&npy, &events).unwrap();
    let f = read_events(&npy).unwrap();
    assert_eq!(
        (f.format, f.psf, &f.events),
        (EventFormat::Npy, None, &events)
    );

    let bytes = encode_events(&psf, &events);
    assert_eq!(bytes.len(), 48 + 56 * 37);
    let refuse = |b: &[u8], what: &str| {
        let m = message(parse_events(b, "t.bin").unwrap_err());
        assert!(m.contains("t.bin") && m.contains(what), "{what}: {m}");
    };
    refuse(&bytes[..30], "truncated header");
    refuse(&bytes[..bytes.len() - 1], "truncated");
    refuse(&bytes[..48 + 56 * 10], "says 37 events");
    let mut extra = bytes.clone();
    extra.extend_from_slice(&[0; 56]);
    refuse(&extra, "trailing");
    let mut magic = bytes.clone();
    magic[0] = b'X';
    refuse(&magic, "magic");
    refuse(b"hello", "magic");
    let mut version = bytes.clone();
    version[8] = 2;
    refuse(&version, "version 2");
    let mut rec = bytes.clone();
    rec[12] = 48;
    refuse(&rec, "record size 48");
    let mut count = bytes.clone();
    count[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    refuse(&count, "count");
    let mut beta = bytes.clone();
    beta[32..40].copy_from_slice(&0.5f64.to_le_bytes());
    refuse(&beta, "beta");
    let mut nan = bytes.clone();
    let o = 48 + 56 * 5 + 8 * 2; // event 5, flux
    nan[o..o + 8].copy_from_slice(&f64::NAN.to_le_bytes());
    refuse(&nan, "event 5: flux = NaN");
    // An empty event file is fine.
    assert!(parse_events(&encode_events(&psf, &[]), "e")
        .unwrap()
        .events
        .is_empty());

    // .npy of the wrong shape or dtype.
    use ndarray_npy::WriteNpyExt;
    let six = dir.path().join("six.npy");
    ndarray::Array2::<f64>::zeros((4, 6))
        .write_npy(std::fs::File::create(&six).unwrap())
        .unwrap();
    assert!(message(read_events(&six).unwrap_err()).contains("(4, 6)"));
    let f32s = dir.path().join("f32.npy");
    ndarray::Array2::<f32>::zeros((4, 7))
        .write_npy(std::fs::File::create(&f32s).unwrap())
        .unwrap();
    assert!(message(read_events(&f32s).unwrap_err()).contains("float64"));
    let mut trunc = std::fs::read(&npy).unwrap();
    trunc.truncate(trunc.len() - 9);
    assert!(parse_events(&trunc, "cut.npy").is_err());
    // Fortran order reads as the same events.
    let fort = dir.path().join("fortran.npy");
    let flat: Vec<f64> = events.iter().flat_map(|e| e.to_array()).collect();
    let a = ndarray::Array2::from_shape_vec((37, 7), flat).unwrap();
    a.t()
        .as_standard_layout()
        .t()
        .write_npy(std::fs::File::create(&fort).unwrap())
        .unwrap();
    assert_eq!(read_events(&fort).unwrap().events, events);
}

#[test]
fn parallel_sink_is_bitwise_the_serial_reference() {
    let c = cache();
    let f = fixtures::boundary();
    let t0 = Instant::now();
    let mut serial = CpuSink::new(c.clone(), f.width, f.height).unwrap();
    let n_direct = serial.accumulate_routed(&f.events).unwrap();
    let t_serial = t0.elapsed();
    assert_eq!(n_direct, BOUNDARY_DIRECT_SUPPORTS.len());
    let t0 = Instant::now();
    let mut par = CpuSink::parallel(c.clone(), f.width, f.height, 3).unwrap();
    par.accumulate_routed(&f.events).unwrap();
    let t_par = t0.elapsed();
    eprintln!(
        "boundary fixture: serial {:.2} s, 3 threads {:.2} s, stats {:?}",
        t_serial.as_secs_f64(),
        t_par.as_secs_f64(),
        serial.stats()
    );
    assert_eq!(par.stats(), serial.stats());
    assert!(
        par.image()
            .data()
            .iter()
            .zip(serial.image().data())
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "parallel differs from serial"
    );
    let st = serial.stats();
    assert_eq!(st.chunks, 3);
    assert_eq!(st.contributions, fixture_contributions(&f));
    assert!(st.outside >= 40, "{st:?}");
    let cmp = par.image().compare(serial.image()).unwrap();
    cmp.accept(1e-10).unwrap();
    assert_eq!(cmp.max_abs, 0.0);
    // Its text (the CLI's check line and the example print it).
    let text = format!(
        "max_abs {:e} (peak {:e}), max_rel {:e}, flux rel R {:e} G {:e} B {:e} Y {:e}, \
         non-finite {}, zero mismatches {}",
        cmp.max_abs,
        cmp.peak,
        cmp.max_rel,
        cmp.flux_rel[0],
        cmp.flux_rel[1],
        cmp.flux_rel[2],
        cmp.flux_rel[3],
        cmp.nonfinite,
        cmp.zero_mismatches
    );
    assert_eq!(cmp.to_string(), text);
    assert!(format!("{cmp:.2}").contains(&format!("(peak {:.2e})", cmp.peak)));
    // Flux: each event deposits at most flux·(1 − 0) and, inside, ≥ flux·(1 − tail − blend).
    let sums = serial.image().sums();
    assert!(sums.r.is_finite() && sums.y > 0.0);
    // A poisoned or perturbed image fails the acceptance, naming why.
    let mut bad = serial.image().clone();
    bad.data_mut()[12345] = f64::NAN;
    let k = bad
        .data()
        .iter()
        .position(|v| *v != 0.0 && v.is_finite())
        .unwrap();
    bad.data_mut()[k] *= 1.0 + 1e-9;
    let m = message(
        bad.compare(serial.image())
            .unwrap()
            .accept(1e-10)
            .unwrap_err(),
    );
    assert!(m.contains("non-finite") && m.contains("max_rel"), "{m}");
}

#[test]
fn fixtures_have_the_specified_shapes() {
    let d = fixtures::dense();
    assert_eq!(d.events.len(), 65_536);
    let tiles = centre_tiles(&d.events, d.width, d.height);
    let peak = tiles.values().max().copied().unwrap();
    eprintln!("dense: {} tiles, peak {peak}", tiles.len());
    assert_eq!(tiles.len(), 30);
    let dd = fixtures::dispersed();
    assert_eq!(dd.events.len(), 65_536);
    let dtiles = centre_tiles(&dd.events, dd.width, dd.height);
    eprintln!("dispersed: {} tiles", dtiles.len());
    assert!(dtiles.len() > 3000);
    for (a, b) in d.events.iter().zip(&dd.events) {
        assert_eq!(anchor_phase(a.x).1, anchor_phase(b.x).1);
        assert_eq!(anchor_phase(a.y).1, anchor_phase(b.y).1);
        assert_eq!(
            (a.flux, a.r, a.g, a.b, a.support),
            (b.flux, b.r, b.g, b.b, b.support)
        );
    }
    let (nd, ndd) = (fixture_contributions(&d), fixture_contributions(&dd));
    eprintln!("dense / dispersed contributions: {nd} / {ndd}");
    assert_eq!(nd, ndd);
    assert!(nd > 400_000_000);
    let m = fixtures::magnified();
    let mt = centre_tiles(&m.events, m.width, m.height);
    eprintln!(
        "magnified: {} events, {} tiles, peak {}",
        m.events.len(),
        mt.len(),
        mt.values().max().unwrap()
    );
    assert_eq!((m.events.len(), mt.len()), (16_454, 367));
    let o = fixtures::ordinary();
    let ot = centre_tiles(&o.events, o.width, o.height);
    eprintln!(
        "ordinary: {} events, {} tiles, peak {}",
        o.events.len(),
        ot.len(),
        ot.values().max().unwrap()
    );
    assert_eq!((o.events.len(), ot.len()), (12_765, 8));
    let b = fixtures::boundary();
    assert_eq!(b.events.len(), 32_771);
    assert!(b.events.len() > 2 * CHUNK_EVENTS);
    let oversized: Vec<usize> = (0..b.events.len())
        .filter(|&k| !PsfCache::fits(b.events[k].x, b.events[k].y, b.events[k].support))
        .collect();
    assert_eq!(
        oversized,
        (0..8).map(|k| 20_000 + 37 * k).collect::<Vec<_>>()
    );
    for f in [&d, &dd, &m, &o, &b] {
        hipkern::psf::validate_events(&f.events).unwrap();
        assert_eq!(fixtures::fixture(f.name).unwrap(), *f);
    }
    assert!(fixtures::fixture("nope").is_err());
    // Deterministic.
    assert_eq!(fixtures::ordinary(), o);
    let _ = STAMP_PIXELS;
}

/// Issue 28's hostile inputs, through the public API: each is an error
/// naming the problem and its limit, never an abort, a NaN image or a run
/// without end.
#[test]
fn hostile_inputs_are_errors_not_aborts() {
    let dir = tempfile::tempdir().unwrap();
    // An N×7 .npy whose header claims 2^40 rows (a 61.6 TB allocation).
    let npy = dir.path().join("huge.npy");
    write_events_npy(&npy, &[ev(1.0, 2.0, 3.0, 4.0)]).unwrap();
    let mut bytes = std::fs::read(&npy).unwrap();
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8(bytes[10..10 + len].to_vec()).unwrap();
    // The same header length: the claim eats into the padding.
    let claim = header.trim_end().replace("(1, 7)", "(1099511627776, 7)");
    let claim = format!("{claim:<width$}\n", width = len - 1);
    assert_eq!(claim.len(), len);
    bytes.splice(10..10 + len, claim.bytes());
    std::fs::write(&npy, &bytes).unwrap();
    let m = message(read_events(&npy).unwrap_err());
    assert!(
        m.contains("huge.npy") && m.contains("(1099511627776, 7)") && m.contains("holds 56 bytes"),
        "{m}"
    );
    // The cache's documented maximum P is computed, not allocated blindly;
    // beyond it, and absurd thread counts, are refused at once.
    assert_eq!(PsfCache::bytes_for(MAX_PHASES).unwrap(), 75_855_125_000);
    for (phases, threads, want) in [
        (MAX_PHASES + 1, 1, "phases = 1025"),
        (4, 1usize << 40, "threads = 1099511627776"),
    ] {
        let c = CacheConfig { phases, threads };
        let m = message(PsfCache::build_with(MoffatPsf::default(), &c).unwrap_err());
        assert!(m.contains(want), "{m}");
    }
    assert_eq!(MAX_THREADS, 1024);
    let small = CacheConfig {
        phases: 2,
        threads: 1,
    };
    let small = Arc::new(PsfCache::build_with(MoffatPsf::default(), &small).unwrap());
    let m = message(CpuSink::parallel(small, 64, 64, 1 << 40).unwrap_err());
    assert!(m.contains("0..=1024"), "{m}");
    // A FWHM whose α² underflows: refused with the valid range.
    let m = message(MoffatPsf::new(1e-200, 4.5, 1e-8).unwrap_err());
    assert!(
        m.contains("fwhm = 1e-200") && m.contains("0.5..=1000 px"),
        "{m}"
    );
    // The check before writing an image.
    let mut img = HdrImage::new(5, 4).unwrap();
    assert_eq!(img.first_non_finite(), None);
    img.data_mut()[(3 * 5 + 1) * 3] = f64::NAN;
    assert_eq!(img.first_non_finite(), Some((1, 3, 0)));
    // A folder that does not exist is the caller's; a rename the file
    // system refuses is the machine's (Error::Io).
    let meta = ImageMeta {
        psf: MoffatPsf::default(),
        phases: 64,
        events: 0,
        direct: 0,
        outside: 0,
        sink: "cpu".into(),
    };
    let nowhere = dir.path().join("missing").join("img.fits");
    assert!(matches!(
        write_fits(&nowhere, &img, &meta),
        Err(Error::InvalidInput(_))
    ));
    let long = dir.path().join("i".repeat(300));
    for r in [
        write_image_npy(&long, &img),
        write_png(&long, &img).map(drop),
        write_events(&long, &MoffatPsf::default(), &[]),
    ] {
        assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");
    }
}
