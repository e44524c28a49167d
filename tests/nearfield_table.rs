//! Dense near-field tables (CPU, float64): entries against single `entry`
//! calls, the metadata (q_points, mode normalisers, case vectors,
//! case_indices), independence of the thread count, build times, and the
//! box-size scaling rules against tables built directly at the other size.

use hipkern::nearfield::{
    check_table_size, entry, gauss_legendre, q_points, CaseRef, Cases, DenseOrbits,
    EntryQuadrature, Kernel, NearFieldTable, ReducedTable, ScalingRule, MAX_TABLE_ENTRIES,
};
use hipkern::Error;
use std::time::Instant;

fn quad() -> EntryQuadrature {
    EntryQuadrature::default()
}

/// Low orders for the 3D tables of these tests (a 3D entry at the default
/// orders costs 2.2·10⁶ kernel evaluations, far too slow for a debug test
/// build): what is checked here (table = entry, scale covariance) holds for
/// any orders, since both sides use the same rule and the rule is
/// scale-invariant.
fn cheap_quad() -> EntryQuadrature {
    EntryQuadrature {
        radial_level: 2,
        angular_order: 6,
    }
}

/// Default orders in 2D, [`cheap_quad`] in 3D.
fn build(kernel: &Kernel, q: usize, l: f64) -> NearFieldTable {
    let quad = if kernel.dim() == 3 {
        cheap_quad()
    } else {
        quad()
    };
    NearFieldTable::build(kernel, q, l, &quad).unwrap()
}

/// Every `stride`-th entry of the table against `entry`; returns the worst
/// relative difference (to the table's largest magnitude).
fn check_against_entry(table: &NearFieldTable, stride: usize) -> f64 {
    let k = table.kernel();
    let nq = table.n_modes();
    let scale = table.data().iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut worst = 0.0f64;
    for id in (0..table.data().len()).step_by(stride) {
        let (case, s, t) = (id / (nq * nq), (id / nq) % nq, id % nq);
        let want = entry(
            k,
            table.q(),
            CaseRef::Id(case),
            s,
            t,
            table.extent(),
            table.quadrature(),
        )
        .unwrap();
        let got = table.get(case, s, t).unwrap();
        assert_eq!(got, table.data()[id]);
        let e = (got - want).abs() / scale;
        assert!(e <= 1e-14, "case {case} s {s} t {t}: {got} vs {want}");
        worst = worst.max(e);
    }
    worst
}

#[test]
fn table_entries_equal_single_entries() {
    let k2 = Kernel::laplace(2).unwrap();
    let t2 = build(&k2, 2, 1.0);
    let e2 = check_against_entry(&t2, 1);
    let kd = Kernel::laplace(2)
        .unwrap()
        .directional_source_derivative(&[0.3, -1.0])
        .unwrap();
    let ed = check_against_entry(&build(&kd, 2, 0.5), 3);
    let ky = Kernel::yukawa(2, 2.0).unwrap();
    let ey = check_against_entry(&build(&ky, 2, 2.0), 5);
    let k3 = Kernel::laplace(3).unwrap();
    let e3 = check_against_entry(&build(&k3, 1, 1.0), 7);
    println!("table vs entry: 2D {e2:.1e}, 2D dir {ed:.1e}, 2D Yukawa {ey:.1e}, 3D q=1 {e3:.1e}");
}

#[test]
fn metadata() {
    let k = Kernel::laplace(2).unwrap();
    let l = 1.5;
    let q = 3;
    let t = build(&k, q, l);
    let cases = Cases::new(2).unwrap();
    assert_eq!(t.dim(), 2);
    assert_eq!(t.q(), q);
    assert_eq!(t.extent(), l);
    assert_eq!(t.n_modes(), 9);
    assert_eq!(t.data().len(), 33 * 81);
    assert_eq!(t.q_points(), q_points(q, l, 2).unwrap().as_slice());
    assert_eq!(t.case_indices(), cases.case_indices());
    assert_eq!(t.case_indices().len(), 169);
    let cv = t.case_vectors();
    assert_eq!(cv.len(), 33 * 2);
    for c in 0..33 {
        assert_eq!(&cv[2 * c..2 * c + 2], cases.vector(c));
    }
    // Normalisers: w_i w_j, summing to L².
    let (_, w) = gauss_legendre(q, l).unwrap();
    for s in 0..9 {
        assert!((t.mode_normalizers()[s] - w[s / 3] * w[s % 3]).abs() < 1e-15);
    }
    let sum: f64 = t.mode_normalizers().iter().sum();
    assert!((sum - l * l).abs() < 1e-14);
    // get is checked.
    assert!(matches!(t.get(33, 0, 0), Err(Error::InvalidInput(_))));
    assert!(matches!(t.get(0, 9, 0), Err(Error::InvalidInput(_))));
    assert!(matches!(t.get(0, 0, 9), Err(Error::InvalidInput(_))));
    // Constant kernel: every entry is ∫φ_s.
    let tc = build(&Kernel::constant(2).unwrap(), 2, 1.0);
    for (id, v) in tc.data().iter().enumerate() {
        assert!((v - 0.25).abs() < 1e-13, "entry {id}: {v}");
    }
}

#[test]
fn thread_count_does_not_change_the_table() {
    let k = Kernel::laplace(2)
        .unwrap()
        .axis_target_derivative(1)
        .unwrap();
    let a = NearFieldTable::build_with_threads(&k, 2, 1.0, &quad(), 1).unwrap();
    let b = NearFieldTable::build_with_threads(&k, 2, 1.0, &quad(), 3).unwrap();
    let c = NearFieldTable::build_with_threads(&k, 2, 1.0, &quad(), 1000).unwrap();
    assert_eq!(a.data(), b.data());
    assert_eq!(a.data(), c.data());
}

#[test]
fn build_errors() {
    let k = Kernel::laplace(2).unwrap();
    for (q, l) in [(0, 1.0), (65, 1.0), (2, 0.0), (2, f64::NAN)] {
        assert!(matches!(
            NearFieldTable::build(&k, q, l, &quad()),
            Err(Error::InvalidInput(_))
        ));
    }
}

#[test]
fn build_time_2d() {
    let k = Kernel::laplace(2).unwrap();
    for q in [2, 3] {
        let t0 = Instant::now();
        let t = build(&k, q, 1.0);
        println!(
            "2D Laplace q={q}: {} entries in {:.3} s",
            t.data().len(),
            t0.elapsed().as_secs_f64()
        );
    }
}

/// 3D build times at the default orders (run with `--release --ignored
/// --nocapture`).
#[test]
#[ignore = "timing only"]
fn build_time_3d() {
    let k = Kernel::laplace(3).unwrap();
    for q in [1, 2] {
        let t0 = Instant::now();
        let t = NearFieldTable::build(&k, q, 1.0, &quad()).unwrap();
        println!(
            "3D Laplace q={q}: {} entries in {:.3} s ({} threads)",
            t.data().len(),
            t0.elapsed().as_secs_f64(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    }
}

/// `scaled(ρ)` against a table built at `ρL`: the worst error per entry,
/// relative to the larger of the scaled value's terms, with a floor of
/// 1e−3 of the table's largest magnitude for entries that cancel to ~0.
fn check_scaling(kernel: &Kernel, q: usize, l: f64, rhos: &[f64]) -> f64 {
    let base = build(kernel, q, l);
    let rule = ScalingRule::of(kernel).unwrap();
    let nq = base.n_modes();
    let mut worst = 0.0f64;
    for &rho in rhos {
        let direct = build(kernel, q, rho * l);
        let scaled = base.scaled(rho).unwrap();
        assert_eq!(scaled.extent(), rho * l);
        assert_eq!(scaled.q_points(), direct.q_points());
        for (a, b) in scaled
            .mode_normalizers()
            .iter()
            .zip(direct.mode_normalizers())
        {
            assert!((a - b).abs() <= 1e-15 * b.abs());
        }
        let floor = 1e-3 * direct.data().iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (id, (&got, &want)) in scaled.data().iter().zip(direct.data()).enumerate() {
            let v = base.data()[id];
            let n = base.mode_normalizers()[(id / nq) % nq];
            let terms = match rule {
                ScalingRule::Power(p) => (rho.powi(p) * v).abs(),
                ScalingRule::LogShift2d => (rho * rho * v)
                    .abs()
                    .max((rho * rho * rho.ln() * n).abs() / (2.0 * std::f64::consts::PI)),
            };
            let e = (got - want).abs() / terms.max(floor);
            assert!(
                e <= 1e-13,
                "{kernel:?} q={q} ρ={rho} entry {id}: scaled {got} direct {want} ({e:.2e})"
            );
            worst = worst.max(e);
        }
    }
    worst
}

#[test]
fn scaling_laplace_2d() {
    let k = Kernel::laplace(2).unwrap();
    assert_eq!(ScalingRule::of(&k).unwrap(), ScalingRule::LogShift2d);
    let e = check_scaling(&k, 2, 1.0, &[0.3, 4.0, 1.0 / 64.0]);
    let e2 = check_scaling(&k, 3, 0.7, &[2.5]);
    println!("scaling 2D Laplace: worst {:.2e}", e.max(e2));
}

#[test]
fn scaling_laplace_derivatives() {
    let mut worst = 0.0f64;
    for k in [
        Kernel::laplace(2)
            .unwrap()
            .axis_target_derivative(0)
            .unwrap(),
        Kernel::laplace(2)
            .unwrap()
            .axis_source_derivative(1)
            .unwrap(),
        Kernel::laplace(2)
            .unwrap()
            .directional_source_derivative(&[2.0, -0.5])
            .unwrap(),
    ] {
        assert_eq!(ScalingRule::of(&k).unwrap(), ScalingRule::Power(1));
        worst = worst.max(check_scaling(&k, 2, 1.0, &[0.3, 8.0]));
    }
    let k3 = Kernel::laplace(3)
        .unwrap()
        .axis_target_derivative(2)
        .unwrap();
    assert_eq!(ScalingRule::of(&k3).unwrap(), ScalingRule::Power(1));
    worst = worst.max(check_scaling(&k3, 1, 1.0, &[0.25]));
    println!("scaling Laplace derivatives: worst {worst:.2e}");
}

#[test]
fn scaling_laplace_3d_and_constant() {
    let k3 = Kernel::laplace(3).unwrap();
    assert_eq!(ScalingRule::of(&k3).unwrap(), ScalingRule::Power(2));
    let e3 = check_scaling(&k3, 1, 1.0, &[0.3, 4.0]);
    let kc = Kernel::constant(2).unwrap();
    assert_eq!(ScalingRule::of(&kc).unwrap(), ScalingRule::Power(2));
    let ec = check_scaling(&kc, 2, 1.0, &[0.3, 4.0]);
    assert_eq!(
        ScalingRule::of(&Kernel::constant(3).unwrap()).unwrap(),
        ScalingRule::Power(3)
    );
    println!("scaling: 3D Laplace worst {e3:.2e}, 2D Constant worst {ec:.2e}");
}

#[test]
fn yukawa_does_not_scale() {
    let k = Kernel::yukawa(2, 1.0).unwrap();
    match ScalingRule::of(&k) {
        Err(Error::InvalidInput(m)) => assert!(m.contains("per level"), "{m}"),
        other => panic!("{other:?}"),
    }
    let t = build(&k, 1, 1.0);
    assert!(matches!(t.scaled(2.0), Err(Error::InvalidInput(_))));
    let k3 = Kernel::yukawa(3, 1.0)
        .unwrap()
        .axis_source_derivative(0)
        .unwrap();
    assert!(ScalingRule::of(&k3).is_err());
    let tl = build(&Kernel::laplace(2).unwrap(), 1, 1.0);
    // scaled_to(L') is scaled(L'/L) with the extent exactly L'.
    let to = tl.scaled_to(2.0).unwrap();
    assert_eq!(to.extent(), 2.0);
    assert_eq!(to.data(), tl.scaled(2.0).unwrap().data());
    assert!(tl.scaled_to(-2.0).is_err());
    for rho in [0.0, -1.0, f64::INFINITY, f64::NAN] {
        assert!(matches!(tl.scaled(rho), Err(Error::InvalidInput(_))));
    }
}

/// The size limit is the builders', the oracle's and `check_table_size`'s
/// alike, refused up front (3D q = 64 needs 76 TB: refused at once, with
/// the entries, the bytes and the limit); so are extents, λ·L and
/// directions outside their ranges (issue 28: NaN tables before).
#[test]
fn sizes_and_ranges_are_refused_before_any_work() {
    let t0 = Instant::now();
    let k3 = Kernel::laplace(3).unwrap();
    for q in [16, 64] {
        let Err(Error::InvalidInput(size)) = check_table_size(3, q) else {
            panic!("3D q = {q} accepted")
        };
        for e in [
            NearFieldTable::build(&k3, q, 1.0, &quad()).unwrap_err(),
            ReducedTable::build(&k3, q, 1.0, &quad()).unwrap_err(),
            DenseOrbits::build(&k3, q).unwrap_err(),
        ] {
            let Error::InvalidInput(m) = e else {
                panic!("expected InvalidInput, got {e:?}")
            };
            assert_eq!(m, size);
            assert!(m.contains("2,147,483,647 entries"), "{m}");
            assert_eq!(MAX_TABLE_ENTRIES, 2_147_483_647);
            assert!(m.contains("q ≤ 15"), "{m}");
        }
    }
    assert!(check_table_size(3, 64)
        .unwrap_err()
        .to_string()
        .contains("76,416,058,130,432 bytes"));
    let s = check_table_size(3, 15).unwrap();
    assert_eq!(s.n_entries, 139 * 15u64.pow(6));
    assert_eq!(s.dense_bytes, 8 * s.n_entries);
    let y2 = Kernel::yukawa(2, 1e-300).unwrap();
    let dir = Kernel::laplace(2)
        .unwrap()
        .directional_source_derivative(&[1e308, 1.0])
        .unwrap();
    let k2 = Kernel::laplace(2).unwrap();
    for (k, l, needle) in [
        (&k3, 1e150, "[1e-50, 1e50]"),
        (&k3, 1e-150, "[1e-50, 1e50]"),
        (&y2, 1.0, "λ·L"),
        (&dir, 1.0, "direction component 0"),
        (&k2, 1e51, "[1e-50, 1e50]"),
    ] {
        for e in [
            NearFieldTable::build(k, 2, l, &quad()).unwrap_err(),
            ReducedTable::build(k, 2, l, &quad()).unwrap_err(),
        ] {
            let Error::InvalidInput(m) = e else {
                panic!("expected InvalidInput, got {e:?}")
            };
            assert!(m.contains(needle), "{m}");
        }
    }
    // All of it without quadrature.
    assert!(t0.elapsed().as_secs_f64() < 5.0);
}

/// Both ends of the extent range give finite tables (3D, every entry).
#[test]
fn tables_at_the_extent_range_ends_are_finite() {
    let k = Kernel::laplace(3)
        .unwrap()
        .axis_source_derivative(1)
        .unwrap();
    let (lo, hi) = hipkern::nearfield::EXTENT_RANGE;
    for l in [lo, hi] {
        let t = NearFieldTable::build(&k, 1, l, &cheap_quad()).unwrap();
        assert!(t.data().iter().all(|v| v.is_finite()));
        let r = ReducedTable::build(&k, 1, l, &cheap_quad()).unwrap();
        assert!(r.reduced_data().iter().all(|v| v.is_finite()));
    }
}
