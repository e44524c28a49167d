//! Force/virial assembly on the device against the float64 CPU reference,
//! fresh random inputs, outputs poisoned with NaN first, every element
//! checked. GPU tests (`gpu_*`) are ignored on the cpu platform.
use hipkern::force::{
    assemble_atomic_device_into, assemble_device, assemble_device_into, assemble_reference_f64,
    CsrPlan, DeviceEdges, DevicePlan, GhostMapping, VirialSplit,
};
use hipkern::{Device, Error};

use hipkern::rng::SplitMix64 as Rng;

mod common;
use common::edge_system;

/// Per element: |a − b| ≤ rel·|b| + floor, floor = rel · max|ref|.
fn check(what: &str, got: &[f64], want: &[f64], rel: f64) {
    check_floor(what, got, want, rel, &vec![0.0; want.len()]);
}

/// [`check`] with an absolute floor per element as well: float32
/// accumulation in arbitrary (atomic) order leaves rounding of the order of
/// ε₃₂ times the summed magnitudes, also where the exact sum cancels to 0
/// (a self-edge adds g and −g to one row).
fn check_floor(what: &str, got: &[f64], want: &[f64], rel: f64, floor: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut worst = 0.0f64;
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.is_finite(), "{what}[{i}] = {a} (unwritten or poisoned)");
        let err = (a - b).abs();
        assert!(
            err <= rel * b.abs() + rel * scale + floor[i],
            "{what}[{i}]: {a} vs {b}"
        );
        worst = worst.max(err / scale.max(1e-300));
    }
    eprintln!(
        "{what}: max error / max|ref| = {worst:.2e} over {} values",
        got.len()
    );
}

fn poisoned(d: &Device, n: usize) -> hipkern::DeviceBuffer<f64> {
    d.htod_copy(&vec![f64::NAN; n]).unwrap()
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_assembly_matches_the_f64_reference() {
    let d = Device::new(0).unwrap();
    let s = d.new_stream().unwrap();
    let mut rng = Rng::from_clock();
    for &(n_ext, n_centres, per) in &[
        (1usize, 1usize, 2usize),
        (700, 600, 140),
        (8000, 6000, 200),
        (49_152, 32_768, 128),
    ] {
        let (src, dst, g, r) = edge_system(&mut rng, n_ext, n_centres, per, None);
        let plan = CsrPlan::build(&src, &dst, n_ext, None).unwrap();
        let dplan = DevicePlan::upload(&d, &plan).unwrap();
        let (g64, r64) = (d.htod_copy(&g).unwrap(), d.htod_copy(&r).unwrap());
        let g32h: Vec<f32> = g.iter().map(|&x| x as f32).collect();
        let r32h: Vec<f32> = r.iter().map(|&x| x as f32).collect();
        let (g32, r32) = (d.htod_copy(&g32h).unwrap(), d.htod_copy(&r32h).unwrap());
        for split in [VirialSplit::Half, VirialSplit::Src] {
            let want = assemble_reference_f64(&g, &r, &src, &dst, n_ext, None, split).unwrap();
            let mut f = poisoned(&d, 3 * n_ext);
            let mut w = poisoned(&d, 9 * n_ext);
            assemble_device_into(&s, &dplan, &g64, &r64, split, &mut f, &mut w).unwrap();
            s.synchronize().unwrap();
            let (fh, wh) = (f.to_vec().unwrap(), w.to_vec().unwrap());
            check(
                &format!("f64 force n={n_ext} {split:?}"),
                &fh,
                &want.force,
                1e-13,
            );
            check(
                &format!("f64 virial n={n_ext} {split:?}"),
                &wh,
                &want.virial,
                1e-13,
            );
            // Bitwise reproducible run to run.
            let (f2, w2) = assemble_device(&s, &dplan, &g64, &r64, split).unwrap();
            s.synchronize().unwrap();
            assert!(f2
                .to_vec()
                .unwrap()
                .iter()
                .zip(&fh)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert!(w2
                .to_vec()
                .unwrap()
                .iter()
                .zip(&wh)
                .all(|(a, b)| a.to_bits() == b.to_bits()));

            // f32 inputs, accumulated in f64: against the reference on the same f32 values.
            let g32w: Vec<f64> = g32h.iter().map(|&x| x as f64).collect();
            let r32w: Vec<f64> = r32h.iter().map(|&x| x as f64).collect();
            let want32 =
                assemble_reference_f64(&g32w, &r32w, &src, &dst, n_ext, None, split).unwrap();
            let (f3, w3) = assemble_device(&s, &dplan, &g32, &r32, split).unwrap();
            s.synchronize().unwrap();
            check(
                &format!("f32-in force n={n_ext} {split:?}"),
                &f3.to_vec().unwrap(),
                &want32.force,
                1e-13,
            );
            check(
                &format!("f32-in virial n={n_ext} {split:?}"),
                &w3.to_vec().unwrap(),
                &want32.virial,
                1e-13,
            );

            // The atomic reference path, f64 and f32.
            let edges = DeviceEdges::upload(&d, &src, &dst, n_ext, None).unwrap();
            let e = src.len();
            let mut outer = poisoned(&d, 9 * e);
            let mut fa = poisoned(&d, 3 * n_ext);
            let mut wa = poisoned(&d, 9 * n_ext);
            assemble_atomic_device_into(
                &s, &edges, &g64, &r64, split, &mut outer, &mut fa, &mut wa,
            )
            .unwrap();
            s.synchronize().unwrap();
            check(
                &format!("atomic f64 force n={n_ext}"),
                &fa.to_vec().unwrap(),
                &want.force,
                1e-12,
            );
            check(
                &format!("atomic f64 virial n={n_ext}"),
                &wa.to_vec().unwrap(),
                &want.virial,
                1e-12,
            );
            let mut outer32 = d.htod_copy(&vec![f32::NAN; 9 * e]).unwrap();
            let mut fa32 = d.htod_copy(&vec![f32::NAN; 3 * n_ext]).unwrap();
            let mut wa32 = d.htod_copy(&vec![f32::NAN; 9 * n_ext]).unwrap();
            assemble_atomic_device_into(
                &s,
                &edges,
                &g32,
                &r32,
                split,
                &mut outer32,
                &mut fa32,
                &mut wa32,
            )
            .unwrap();
            s.synchronize().unwrap();
            let fa32: Vec<f64> = fa32.to_vec().unwrap().iter().map(|&x| x as f64).collect();
            // 8 ε₃₂ per unit of each row's Σ|g| (both endpoints' shares).
            let mut floor = vec![0.0f64; 3 * n_ext];
            for (k, (&a, &b)) in src.iter().zip(&dst).enumerate() {
                for c in 0..3 {
                    let m = 8.0 * f64::from(f32::EPSILON) * g32w[3 * k + c].abs();
                    floor[3 * a as usize + c] += m;
                    floor[3 * b as usize + c] += m;
                }
            }
            check_floor(
                &format!("atomic f32 force n={n_ext}"),
                &fa32,
                &want32.force,
                1e-4,
                &floor,
            );
        }
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_ghost_folding_and_empty_inputs_on_the_device() {
    let d = Device::new(0).unwrap();
    let s = d.new_stream().unwrap();
    let mut rng = Rng::from_clock();
    let (n_local, n_ext) = (2000usize, 3500usize);
    let mapping: Vec<i64> = (0..n_ext)
        .map(|k| {
            if k < n_local {
                k as i64
            } else {
                rng.below(n_local) as i64
            }
        })
        .collect();
    let (src, dst, g, r) = edge_system(&mut rng, n_ext, n_local, 60, None);
    let ghosts = Some(GhostMapping {
        mapping: &mapping,
        n_local,
    });
    let plan = CsrPlan::build(&src, &dst, n_ext, ghosts).unwrap();
    let dplan = DevicePlan::upload(&d, &plan).unwrap();
    let (gd, rd) = (d.htod_copy(&g).unwrap(), d.htod_copy(&r).unwrap());
    let want =
        assemble_reference_f64(&g, &r, &src, &dst, n_ext, ghosts, VirialSplit::Half).unwrap();
    let mut f = poisoned(&d, 3 * n_local);
    let mut w = poisoned(&d, 9 * n_local);
    assemble_device_into(&s, &dplan, &gd, &rd, VirialSplit::Half, &mut f, &mut w).unwrap();
    s.synchronize().unwrap();
    check("folded force", &f.to_vec().unwrap(), &want.force, 1e-13);
    check("folded virial", &w.to_vec().unwrap(), &want.virial, 1e-13);

    // E = 0: exact zeros everywhere, poison overwritten.
    let empty: [i32; 0] = [];
    let plan = DevicePlan::upload(&d, &CsrPlan::build(&empty, &empty, 10, None).unwrap()).unwrap();
    let (ge, re) = (d.alloc::<f64>(0).unwrap(), d.alloc::<f64>(0).unwrap());
    let mut f = poisoned(&d, 30);
    let mut w = poisoned(&d, 90);
    assemble_device_into(&s, &plan, &ge, &re, VirialSplit::Half, &mut f, &mut w).unwrap();
    s.synchronize().unwrap();
    assert!(f
        .to_vec()
        .unwrap()
        .iter()
        .chain(&w.to_vec().unwrap())
        .all(|x| x.to_bits() == 0));
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_wrong_lengths_are_errors_and_outputs_stay_untouched() {
    let d = Device::new(0).unwrap();
    let s = d.new_stream().unwrap();
    let plan = DevicePlan::upload(
        &d,
        &CsrPlan::build(&[0i32, 1], &[1i32, 0], 2, None).unwrap(),
    )
    .unwrap();
    let g = d.htod_copy(&[1.0f64; 6]).unwrap();
    let short = d.htod_copy(&[1.0f64; 5]).unwrap();
    let mut f = poisoned(&d, 6);
    let mut w = poisoned(&d, 18);
    let mut f_short = poisoned(&d, 5);
    for (res, name) in [
        (
            assemble_device_into(&s, &plan, &short, &g, VirialSplit::Half, &mut f, &mut w),
            "g",
        ),
        (
            assemble_device_into(&s, &plan, &g, &short, VirialSplit::Half, &mut f, &mut w),
            "edge_vec",
        ),
        (
            assemble_device_into(&s, &plan, &g, &g, VirialSplit::Half, &mut f_short, &mut w),
            "force",
        ),
    ] {
        match res {
            Err(Error::InvalidInput(m)) => assert!(m.starts_with(name), "{m}"),
            other => panic!("expected an error naming {name}, got {other:?}"),
        }
    }
    s.synchronize().unwrap();
    assert!(
        f.to_vec().unwrap().iter().all(|x| x.is_nan()),
        "output written despite the error"
    );
}
