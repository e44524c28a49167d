//! Several devices in one process: every visible device driven at once,
//! one thread per device (`std::thread::scope`), each running every
//! primitive on fresh random inputs against its CPU reference, outputs
//! poisoned first and every element checked:
//!
//! - force: a device-built plan of a random graph and the float64
//!   assembly, against `assemble_reference_f64` (relative 1e−13, as
//!   tests/force_device.rs);
//! - PSF: `DeviceSink` in `atomic` and `tile32` modes on a small random
//!   field, against `CpuSink` (the acceptance of `docs/design/psf.md`,
//!   tests/common/psf.rs);
//! - List 1: a synthetic 3D Laplace table (q = 2) on a random 2:1 tree,
//!   dense and ORBIT layouts, against `evaluate_list1` (relative max-norm
//!   1e−13, as tests/nearfield_list1_device.rs).
//!
//! Each thread checks that its current device is as it found it (hipkern
//! never leaves a device bound). With one device the test says so and runs
//! on device 0. GPU tests (`gpu_*`) are ignored on the cpu platform.
mod common;
use common::edge_system;
use common::{check_close, current_device};
use hipkern::force::{assemble_device_into, assemble_reference_f64, DevicePlan, VirialSplit};
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, DenseOrbits, EntryQuadrature, Kernel, List1Evaluator,
    List1Layout, List1ReducedTables, List1Tables, RandomTreeConfig, ReducedTable,
};
use hipkern::psf::{CpuSink, DeviceSink, PsfCache, SinkMode, StarEvent};
use hipkern::rng::SplitMix64 as Rng;
use hipkern::{runtime, Device, Error, Stream};
use std::sync::Arc;

/// The List 1 tolerance (relative, max-norm), as tests/nearfield_list1_device.rs.
const LIST1_TOL: f64 = 1e-13;

/// The force plan built on the device from a random graph, and the
/// float64 assembly into poisoned outputs, against the CPU reference.
fn force(d: &Device, s: &Stream, rng: &mut Rng) {
    let k = d.ordinal();
    let n_ext = 3000 + rng.below(5000);
    let (src, dst, g, r) = edge_system(rng, n_ext, n_ext * 3 / 4, 128, Some(13));
    let (src_d, dst_d) = (d.htod_copy(&src).unwrap(), d.htod_copy(&dst).unwrap());
    let plan = DevicePlan::build(s, &src_d, &dst_d, n_ext, None).unwrap();
    let (g_d, r_d) = (d.htod_copy(&g).unwrap(), d.htod_copy(&r).unwrap());
    let mut f = d.alloc::<f64>(3 * n_ext).unwrap();
    let mut w = d.alloc::<f64>(9 * n_ext).unwrap();
    for split in [VirialSplit::Half, VirialSplit::Src] {
        s.fill(&mut f.as_slice_mut(), f64::NAN).unwrap();
        s.fill(&mut w.as_slice_mut(), f64::NAN).unwrap();
        assemble_device_into(s, &plan, &g_d, &r_d, split, &mut f, &mut w).unwrap();
        s.synchronize().unwrap();
        let want = assemble_reference_f64(&g, &r, &src, &dst, n_ext, None, split).unwrap();
        let what = format!("device {k}: force ({} edges, {split:?})", src.len());
        check_close(&what, &f.to_vec().unwrap(), &want.force, 1e-13);
        check_close(&what, &w.to_vec().unwrap(), &want.virial, 1e-13);
    }
}

/// `n` random events on a `w × h` image: centres up to 60 px beyond every
/// edge, random phases, supports that fit the cache, random flux and colours.
fn random_events(rng: &mut Rng, n: usize, w: usize, h: usize) -> Vec<StarEvent> {
    let u = |rng: &mut Rng| 0.5 * (rng.uniform_pm1() + 1.0);
    (0..n)
        .map(|_| StarEvent {
            x: -60.0 + u(rng) * (w as f64 + 120.0),
            y: -60.0 + u(rng) * (h as f64 + 120.0),
            flux: 10f64.powf(3.0 * u(rng)),
            r: u(rng),
            g: u(rng),
            b: u(rng),
            support: if rng.below(4) == 0 {
                0.3 + u(rng) * 47.1
            } else {
                45.84777786185942
            },
        })
        .collect()
}

/// The device sink (atomic and tile32) on a small random field against
/// the CPU sink; the downloaded image starts as NaN on the host.
fn psf(d: &Device, rng: &mut Rng, cache: &Arc<PsfCache>) {
    let k = d.ordinal();
    let (w, h) = (320 + rng.below(320), 240 + rng.below(240));
    let n_events = 2000 + rng.below(2000);
    let events = random_events(rng, n_events, w, h);
    let mut cpu = CpuSink::parallel(cache.clone(), w, h, 2).unwrap();
    cpu.accumulate(&events).unwrap();
    for mode in [SinkMode::Atomic, SinkMode::Tile32] {
        let mut dev = DeviceSink::builder(d, cache.clone(), w, h)
            .mode(mode)
            .build()
            .unwrap();
        dev.accumulate(&events).unwrap();
        let img = dev.finish().unwrap();
        let what = format!(
            "device {k}: PSF {} ({} events, {w}×{h})",
            mode.name(),
            events.len()
        );
        assert_eq!(dev.stats(), cpu.stats(), "{what}: stats");
        common::psf::check(&what, &img, cpu.image());
    }
}

/// Synthetic reduced table: random values on the representatives, 0 on
/// the orbits that are zero by symmetry.
fn synthetic(k: &Kernel, q: usize, rng: &mut Rng) -> ReducedTable {
    let o = DenseOrbits::build(k, q).unwrap();
    let data = o
        .zero_by_symmetry
        .iter()
        .map(|&z| if z { 0.0 } else { rng.uniform_pm1() })
        .collect();
    let quad = EntryQuadrature::default();
    ReducedTable::from_parts(k, q, 1.0, &quad, o.representatives, data).unwrap()
}

/// List 1 of a synthetic 3D Laplace table (q = 2) on a random tree with an
/// off-origin root, dense and ORBIT layouts, into a poisoned output.
fn list1(d: &Device, s: &Stream, rng: &mut Rng) {
    let k = d.ordinal();
    let (kernel, q) = (Kernel::laplace(3).unwrap(), 2);
    let red = synthetic(&kernel, q, rng);
    let mut cfg = RandomTreeConfig::new(3, rng.next_u64(), 3);
    cfg.root_lower = vec![-0.4, -0.1, 0.2];
    cfg.root_extent = 1.3;
    let tree = BalancedTree::random(&cfg).unwrap();
    let targets = tree.all_boxes();
    let boxes = tree.list1_boxes(&targets);
    let nq = q.pow(3);
    let f: Vec<f64> = (0..tree.n_boxes() * nq)
        .map(|_| 0.5 + rng.uniform_pm1())
        .collect();
    let dense = red.to_dense().unwrap();
    let want = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &f).unwrap();
    let f_d = d.htod_copy(&f).unwrap();
    for layout in [List1Layout::Dense, List1Layout::Orbit] {
        let ev =
            List1Evaluator::from_reduced(d, &List1ReducedTables::Scaled(&red), layout).unwrap();
        let mut plan = ev.plan(&boxes).unwrap();
        let mut out = d.alloc::<f64>(plan.n_targets() * nq).unwrap();
        s.fill(&mut out.as_slice_mut(), f64::NAN).unwrap();
        ev.evaluate_into(s, &mut plan, &f_d, &mut out).unwrap();
        s.synchronize().unwrap();
        let got = out.to_vec().unwrap();
        let what = format!("device {k}: List 1 {layout} ({} boxes)", tree.n_boxes());
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        let (mut num, mut den) = (0.0f64, 0.0f64);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g.is_finite(), "{what}: element {i} is {g} (want {w})");
            num = num.max((g - w).abs());
            den = den.max(w.abs());
        }
        let err = if den > 0.0 { num / den } else { num };
        assert!(err <= LIST1_TOL, "{what}: relative error {err:.2e}");
    }
}

/// Every primitive on device `ordinal`, on this thread.
fn run_on(ordinal: usize, seed: u64, cache: &Arc<PsfCache>) {
    let before = current_device();
    let d = Device::new(ordinal).unwrap();
    let s = d.new_stream().unwrap();
    let mut rng = Rng::new(seed);
    force(&d, &s, &mut rng);
    psf(&d, &mut rng, cache);
    list1(&d, &s, &mut rng);
    drop(s);
    assert_eq!(
        current_device(),
        before,
        "device {ordinal}: the thread's current device changed"
    );
    assert!(
        d.take_free_errors().is_empty(),
        "device {ordinal}: free errors"
    );
    eprintln!("device {ordinal}: force, PSF and List 1 agree with the CPU");
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_every_primitive_on_every_device_at_once() {
    let n = runtime::device_count().expect("a GPU is required for this test");
    assert!(n > 0, "no device visible");
    if n == 1 {
        eprintln!("one device visible: running on device 0 only");
    }
    let seed = Rng::from_clock().next_u64();
    eprintln!("{n} device(s), seed {seed:#x}");
    // Built once, before the threads, and shared by every device's sinks.
    let cache = common::psf::cache();
    let failed: Vec<usize> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..n)
            .map(|k| {
                let cache = &cache;
                let seed = seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                std::thread::Builder::new()
                    .name(format!("device-{k}"))
                    .spawn_scoped(scope, move || run_on(k, seed, cache))
                    .unwrap()
            })
            .collect();
        let joined: Vec<bool> = threads.into_iter().map(|t| t.join().is_err()).collect();
        (0..n).filter(|&k| joined[k]).collect()
    });
    assert!(
        failed.is_empty(),
        "failed on devices {failed:?} (see above)"
    );
    if n >= 2 {
        // A buffer of one device into a call on another's stream is refused
        // before anything is launched.
        let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
        let s0 = d0.new_stream().unwrap();
        let mut b1 = d1.alloc::<u32>(16).unwrap();
        let err = s0.fill(&mut b1.as_slice_mut(), 1u32).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("device 1")),
            "{err}"
        );
    }
}
