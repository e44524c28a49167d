//! The PSF sink (`docs/design/psf.md`) with the safe API: a Moffat PSF (FWHM 2.7,
//! β 4.5, tail 1e−8: support 45.85 px), a phase cache of P = 16 intervals
//! per axis (a small one: 289 stamps, 21 MB; the default P = 64 is 305 MB),
//! and a few thousand seeded star events on a 640 × 480 RGB float64 image,
//! some on the edges (their wings clipped), some off the image with wings
//! reaching in, a few wholly outside.
//!
//! The serial float64 CPU sink is the reference. With a device
//! (`Device::new(0)` succeeds) the device sink (`DeviceSink`, `atomic`
//! mode) renders the same events and is checked with the acceptance of
//! `docs/design/psf.md#acceptance`
//! (every value finite, the same zero pattern, max_rel < 1e−10, max_abs <
//! 1e−10 × peak, R/G/B/Y totals within 1e−10). Without one, the
//! row-parallel CPU sink is checked against the serial one the same way.
//! Then an event too large for the cache is refused, naming it, with
//! nothing accumulated.
//!
//!     cargo run --release --example psf
//!
//! Exit status 0 when every check holds, 1 on a mismatch, 2 when a call
//! fails.
use hipkern::psf::{CacheConfig, CpuSink, DeviceSink, HdrImage, MoffatPsf, PsfCache, StarEvent};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Result};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

const WIDTH: usize = 640;
const HEIGHT: usize = 480;
const EVENTS: usize = 3000;
const PHASES: usize = 16;
/// The acceptance tolerance (`docs/design/psf.md#acceptance`).
const TOL: f64 = 1e-10;

/// Seeded events: positions mostly inside, a tenth within 60 px outside the
/// edges; fluxes over four decades; colours in [0.2, 1].
fn events(rng: &mut SplitMix64, support: f64) -> Vec<StarEvent> {
    let u = |rng: &mut SplitMix64| 0.5 * (1.0 + rng.uniform_pm1());
    (0..EVENTS)
        .map(|k| {
            let margin = if k % 10 == 0 { 60.0 } else { 0.0 };
            StarEvent {
                x: -margin + (WIDTH as f64 + 2.0 * margin) * u(rng),
                y: -margin + (HEIGHT as f64 + 2.0 * margin) * u(rng),
                flux: 10f64.powf(4.0 * u(rng)),
                r: 0.2 + 0.8 * u(rng),
                g: 0.2 + 0.8 * u(rng),
                b: 0.2 + 0.8 * u(rng),
                support,
            }
        })
        .collect()
}

/// Prints the acceptance's comparison of `got` with `want`; true when it holds.
fn report(what: &str, got: &HdrImage, want: &HdrImage) -> Result<bool> {
    let c = got.compare(want)?;
    let verdict = c.accept(TOL);
    println!(
        "  {what}: {c:.2}  {}",
        match &verdict {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("MISMATCH: {e}"),
        }
    );
    Ok(verdict.is_ok())
}

fn run() -> Result<bool> {
    let psf = MoffatPsf::default();
    let t0 = Instant::now();
    let cache = Arc::new(PsfCache::build_with(
        psf,
        &CacheConfig {
            phases: PHASES,
            threads: 0,
        },
    )?);
    println!(
        "psf: Moffat FWHM {} beta {} tail {:e} (support {:.4} px), cache P={PHASES} ({} bytes) in {:.2} s",
        psf.fwhm,
        psf.beta,
        psf.tail,
        psf.support_radius(),
        cache.bytes(),
        t0.elapsed().as_secs_f64()
    );
    let evs = events(&mut SplitMix64::new(42), psf.support_radius());

    let t0 = Instant::now();
    let mut serial = CpuSink::new(cache.clone(), WIDTH, HEIGHT)?;
    serial.accumulate(&evs)?;
    let s = serial.stats();
    println!(
        "  serial CPU reference: {} events ({} touched the image, {} outside), {} contributions, {:.3} s",
        s.events,
        s.cached,
        s.outside,
        s.contributions,
        t0.elapsed().as_secs_f64()
    );
    let want = serial.into_image();
    let sums = want.sums();
    println!(
        "  totals R {:.6e} G {:.6e} B {:.6e} Y {:.6e}",
        sums.r, sums.g, sums.b, sums.y
    );
    // A valid event too large for the cache (support 60 px > 47 px radius).
    let too_big = StarEvent {
        x: 320.5,
        y: 240.5,
        flux: 1.0,
        r: 1.0,
        g: 1.0,
        b: 1.0,
        support: 60.0,
    };

    match Device::new(0) {
        Ok(device) => {
            println!("device 0: {}", device.properties().name);
            let mut sink = DeviceSink::new(&device, cache.clone(), WIDTH, HEIGHT)?;
            let t0 = Instant::now();
            sink.accumulate(&evs)?;
            let got = sink.finish()?;
            let d = sink.stats();
            println!(
                "  device sink (atomic): {} events, {} contributions, {:.3} s with the download",
                d.events,
                d.contributions,
                t0.elapsed().as_secs_f64()
            );
            let mut ok = d == s;
            if !ok {
                println!("  MISMATCH: device stats {d:?}, CPU stats {s:?}");
            }
            ok &= report("device vs serial CPU", &got, &want)?;
            // All or nothing: a refused call adds nothing.
            let refused = sink.accumulate(&[evs[0], too_big]);
            let after = sink.finish()?;
            let unchanged = after.data() == got.data();
            Ok(ok && refusal_holds(&refused, unchanged))
        }
        Err(e) => {
            println!("no device ({e}): the row-parallel CPU sink instead");
            let mut par = CpuSink::parallel(cache.clone(), WIDTH, HEIGHT, 0)?;
            par.accumulate(&evs)?;
            let mut ok = par.stats() == s;
            ok &= report(
                &format!("parallel CPU ({} threads) vs serial", par.threads()),
                par.image(),
                &want,
            )?;
            let before = par.image().data().to_vec();
            let refused = par.accumulate(&[evs[0], too_big]);
            let unchanged = par.image().data() == &before[..];
            Ok(ok && refusal_holds(&refused, unchanged))
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => {
            println!("psf: OK");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("psf: MISMATCH");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("psf: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints how the sink took an oversized event; whether it refused it and
/// left the image unchanged.
fn refusal_holds(refused: &Result<()>, unchanged: bool) -> bool {
    println!(
        "  a support-60 event: {}; image unchanged: {}",
        match refused {
            Ok(()) => "ACCEPTED (MISMATCH)".to_string(),
            Err(e) => format!("refused ({e})"),
        },
        if unchanged { "yes" } else { "NO (MISMATCH)" }
    );
    refused.is_err() && unchanged
}
