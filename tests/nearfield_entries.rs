//! Near-field table entries by the Duffy/radial scheme (CPU, float64):
//! K₀/K₁ against mpmath, closed forms, brute-force tensor Gauss–Legendre on
//! cases with the target outside the box, self-convergence of the default
//! orders, scaling rules, derivatives against finite differences, Yukawa's
//! small-λ limit, the input checks, and the ranges of extent, λ·L,
//! direction and target point (finite and scale-covariant at both ends of
//! each, refused just outside).

use hipkern::nearfield::{
    bessel_k0, bessel_k1, check_kernel_and_extent, entries_at_point, entry, entry_at_point,
    gauss_legendre, CaseRef, Cases, EntryQuadrature, Kernel, ScalingRule,
    DIRECTION_COMPONENT_RANGE, EXTENT_RANGE, MIN_FACE_DISTANCE, TARGET_REACH,
    YUKAWA_LAMBDA_EXTENT_RANGE,
};
use hipkern::Error;
use std::f64::consts::PI;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

fn default_quad() -> EntryQuadrature {
    EntryQuadrature::default()
}

/// A high-order run of the same scheme (the self-convergence reference).
fn high_quad() -> EntryQuadrature {
    EntryQuadrature {
        radial_level: 5,
        angular_order: 32,
    }
}

/// `∫_{[0,L]^d} φ_s`: the product of the Gauss–Legendre weights of the mode.
fn mode_integral(q: usize, d: usize, s: usize, l: f64) -> f64 {
    let (_, w) = gauss_legendre(q, l).unwrap();
    (0..d)
        .map(|k| w[(s / q.pow((d - 1 - k) as u32)) % q])
        .product()
}

/// The target point `t` of case vector `c`.
fn target(c: &[i32], q: usize, t: usize, l: f64) -> Vec<f64> {
    let d = c.len();
    let cases = Cases::new(d).unwrap();
    let id = cases.id_of_vector(c).unwrap();
    cases.target_points(id, q, l).unwrap()[t * d..(t + 1) * d].to_vec()
}

/// Brute force: composite tensor Gauss–Legendre (`panels` × `n` per axis)
/// of `φ_s(y) G(x − y)` over `[0, L]^d`, for every mode `s` at once.
fn brute_force(kernel: &Kernel, q: usize, x: &[f64], l: f64, panels: usize, n: usize) -> Vec<f64> {
    let d = kernel.dim();
    let (xi, _) = gauss_legendre(q, l).unwrap();
    let (u, w) = gauss_legendre(n, l / panels as f64).unwrap();
    let mut nodes = Vec::new();
    let mut weights = Vec::new();
    for p in 0..panels {
        for (&ui, &wi) in u.iter().zip(&w) {
            nodes.push(p as f64 * l / panels as f64 + ui);
            weights.push(wi);
        }
    }
    let lagrange = |i: usize, y: f64| {
        (0..q)
            .filter(|&j| j != i)
            .map(|j| (y - xi[j]) / (xi[i] - xi[j]))
            .product::<f64>()
    };
    let m = nodes.len();
    let nq = q.pow(d as u32);
    let mut out = vec![0.0; nq];
    let mut r = vec![0.0; d];
    let mut idx = vec![0usize; d];
    for flat in 0..m.pow(d as u32) {
        let mut wt = 1.0;
        for k in 0..d {
            idx[k] = (flat / m.pow((d - 1 - k) as u32)) % m;
            wt *= weights[idx[k]];
            r[k] = x[k] - nodes[idx[k]];
        }
        let g = wt * kernel.value(&r);
        for (s, o) in out.iter_mut().enumerate() {
            let mut phi = g;
            for k in 0..d {
                phi *= lagrange((s / q.pow((d - 1 - k) as u32)) % q, nodes[idx[k]]);
            }
            *o += phi;
        }
    }
    out
}

/// Largest error relative to the largest reference magnitude.
fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs() / scale))
}

#[test]
// The reference values are kept as mpmath printed them (20 digits).
#[allow(clippy::excessive_precision)]
fn bessel_k0_k1_against_mpmath() {
    // mpmath 1.3.0, mp.dps = 40: besselk(0, x), besselk(1, x).
    let table: &[(f64, f64, f64)] = &[
        (1e-08, 18.536612259610778388, 99999999.999999902725),
        (0.001, 7.0236888005623813228, 999.99623815608555346),
        (0.1, 2.4270690247020165578, 9.8538447808706055744),
        (0.5, 0.92441907122766586178, 1.6564411200033008937),
        (1.0, 0.42102443824070833334, 0.60190723019723457474),
        (1.5, 0.21380556264752573672, 0.27738780045684381609),
        (1.999, 0.11403383058923290871, 0.14004984207710966262),
        (2.0, 0.11389387274953343565, 0.13986588181652242728),
        (2.001, 0.11375409873668462698, 0.13968218830176755518),
        (3.0, 0.034739504386279248072, 0.040156431128194184377),
        (5.0, 0.0036910983340425942747, 0.0040446134454521642084),
        (10.0, 0.000017780062316167651811, 0.000018648773453825584597),
        (20.0, 5.7412378153365242927e-10, 5.8830579695570381777e-10),
        (50.0, 3.4101677497894955139e-23, 3.4441022267175556126e-23),
        (100.0, 4.6566282291759020189e-45, 4.6798537356369092866e-45),
        (
            500.0,
            3.9923216091177928774e-219,
            3.9963119385460033495e-219,
        ),
    ];
    let mut worst = (0.0f64, 0.0f64);
    for &(x, k0, k1) in table {
        let (e0, e1) = (rel(bessel_k0(x), k0), rel(bessel_k1(x), k1));
        worst = (worst.0.max(e0), worst.1.max(e1));
        assert!(e0 < 3e-15, "K0({x}) = {} vs {k0}: {e0:e}", bessel_k0(x));
        assert!(e1 < 3e-15, "K1({x}) = {} vs {k1}: {e1:e}", bessel_k1(x));
    }
    println!("K0 worst {:.2e}, K1 worst {:.2e}", worst.0, worst.1);
    assert!(bessel_k0(-1.0).is_nan() && bessel_k0(0.0) == f64::INFINITY);
}

#[test]
fn closed_form_self_entries_q1() {
    let quad = default_quad();
    let k3 = Kernel::laplace(3).unwrap();
    let exact3 = (3.0 * (2.0 + 3f64.sqrt()).ln() - PI / 2.0) / (4.0 * PI);
    let v3 = entry(&k3, 1, CaseRef::Vector(&[0, 0, 0]), 0, 0, 1.0, &quad).unwrap();
    let k2 = Kernel::laplace(2).unwrap();
    let exact2 = (0.5 * 2f64.ln() + 1.5 - PI / 4.0) / (2.0 * PI);
    let self2 = Cases::new(2).unwrap().self_case();
    let v2 = entry(&k2, 1, CaseRef::Id(self2), 0, 0, 1.0, &quad).unwrap();
    println!(
        "3D self {v3:.17e} err {:.2e}; 2D self {v2:.17e} err {:.2e}",
        rel(v3, exact3),
        rel(v2, exact2)
    );
    assert!(rel(v3, exact3) < 1e-12);
    assert!(rel(v2, exact2) < 1e-12);
}

#[test]
fn constant_kernel_entries() {
    // A smooth integrand: a lower angular order suffices (and keeps the
    // 139 3D cases quick in debug builds).
    let quad = EntryQuadrature {
        radial_level: 4,
        angular_order: 10,
    };
    let mut worst1 = 0.0f64;
    for d in [2, 3] {
        let k = Kernel::constant(d).unwrap();
        let cases = Cases::new(d).unwrap();
        for id in 0..cases.len() {
            let v = entry(&k, 1, CaseRef::Id(id), 0, 0, 1.0, &quad).unwrap();
            worst1 = worst1.max((v - 1.0).abs());
            assert!((v - 1.0).abs() < 1e-14, "{d}D case {id}: {v}");
        }
    }
    let k = Kernel::constant(2).unwrap();
    let cases = Cases::new(2).unwrap();
    let mut worst = 0.0f64;
    for id in 0..cases.len() {
        for t in 0..4 {
            let x = &cases.target_points(id, 2, 1.0).unwrap()[2 * t..2 * t + 2];
            for v in entries_at_point(&k, 2, x, 1.0, &quad).unwrap() {
                worst = worst.max((v - 0.25).abs());
            }
        }
    }
    println!("constant q=1 worst |T − 1| = {worst1:.2e}, 2D q=2 worst |T − 0.25| = {worst:.2e}");
    assert!(worst < 1e-14);
}

#[test]
fn target_outside_against_brute_force() {
    let quad = default_quad();
    let mut report = Vec::new();
    // (kernel, case vector, q, target point): targets at ≥ 0.1 L from the box.
    let k2 = Kernel::laplace(2).unwrap();
    let k3 = Kernel::laplace(3).unwrap();
    let y2 = Kernel::yukawa(2, 2.5).unwrap();
    let y3 = Kernel::yukawa(3, 1.5).unwrap();
    let d2 = Kernel::laplace(2)
        .unwrap()
        .axis_target_derivative(1)
        .unwrap();
    let d3 = Kernel::laplace(3)
        .unwrap()
        .directional_source_derivative(&[0.3, -1.0, 2.0])
        .unwrap();
    let runs: Vec<(&str, &Kernel, Vec<i32>, usize, usize)> = vec![
        ("laplace2 [4,0] q2", &k2, vec![4, 0], 2, 0),
        ("laplace2 [-4,4] q3", &k2, vec![-4, 4], 3, 8),
        ("laplace2 [3,-1] q2", &k2, vec![3, -1], 2, 1),
        ("laplace2 [6,2] q3", &k2, vec![6, 2], 3, 4),
        ("yukawa2 [0,-4] q2", &y2, vec![0, -4], 2, 3),
        ("dy laplace2 [2,6] q2", &d2, vec![2, 6], 2, 2),
        ("laplace3 [4,0,0] q2", &k3, vec![4, 0, 0], 2, 0),
        ("laplace3 [4,-4,4] q2", &k3, vec![4, -4, 4], 2, 5),
        ("yukawa3 [-6,2,2] q2", &y3, vec![-6, 2, 2], 2, 7),
        ("dir laplace3 [1,3,-3] q2", &d3, vec![1, 3, -3], 2, 6),
    ];
    for (name, kernel, c, q, t) in runs {
        let d = c.len();
        let x = target(&c, q, t, 1.0);
        let dist = x
            .iter()
            .map(|&v| (v - v.clamp(0.0, 1.0)).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(dist >= 0.1, "{name}: target too close for brute force");
        let (panels, n) = if d == 2 { (8, 24) } else { (4, 16) };
        let reference = brute_force(kernel, q, &x, 1.0, panels, n);
        let ours = entries_at_point(kernel, q, &x, 1.0, &quad).unwrap();
        let e = max_rel(&ours, &reference);
        report.push(format!("{name}: {e:.2e}"));
        assert!(e < 1e-12, "{name}: {e:e}");
    }
    println!("brute force: {}", report.join("; "));
}

/// The default orders against a high-order run of the same scheme, every
/// source mode of the target point at once; Laplace, the nearest and
/// hardest target points (self, touching neighbours of each size).
fn check_default_orders(kernel: &Kernel, points: &[(Vec<i32>, usize, usize)]) -> f64 {
    let quad = default_quad();
    let hi = high_quad();
    let mut worst = 0.0f64;
    for (c, q, t) in points {
        let x = target(c, *q, *t, 1.0);
        let a = entries_at_point(kernel, *q, &x, 1.0, &quad).unwrap();
        let b = entries_at_point(kernel, *q, &x, 1.0, &hi).unwrap();
        let e = max_rel(&a, &b);
        worst = worst.max(e);
        assert!(e < 1e-12, "{c:?} q={q} t={t}: {e:e}");
    }
    worst
}

#[test]
fn default_orders_against_high_order_runs_2d() {
    let k2 = Kernel::laplace(2).unwrap();
    let e = check_default_orders(
        &k2,
        &[
            (vec![0, 0], 4, 0),
            (vec![0, 0], 4, 5),
            (vec![4, 4], 4, 0),
            (vec![-3, 1], 4, 15),
            (vec![6, -2], 4, 3),
        ],
    );
    println!("defaults vs high order: 2D q=4 {e:.2e}");
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow in debug builds (~40 s); run with --release"
)]
fn default_orders_against_high_order_runs_3d() {
    let k3 = Kernel::laplace(3).unwrap();
    let e = check_default_orders(
        &k3,
        &[
            (vec![0, 0, 0], 3, 0),
            (vec![4, 0, 0], 3, 0),
            (vec![3, 3, 3], 3, 26),
        ],
    );
    println!("defaults vs high order: 3D q=3 {e:.2e}");
}

#[test]
fn single_mode_matches_all_modes() {
    let k = Kernel::laplace(3).unwrap();
    let quad = EntryQuadrature {
        radial_level: 3,
        angular_order: 8,
    };
    let x = [0.3, 0.8, 0.55];
    let all = entries_at_point(&k, 2, &x, 1.0, &quad).unwrap();
    for (s, v) in all.iter().enumerate() {
        let one = entry_at_point(&k, 2, s, &x, 1.0, &quad).unwrap();
        assert!(rel(one, *v) < 1e-14, "mode {s}: {one} vs {v}");
    }
}

#[test]
fn laplace_scaling_rules() {
    let quad = default_quad();
    let k3 = Kernel::laplace(3).unwrap();
    let mut worst3 = 0.0f64;
    for l in [0.37, 2.5, 1e-3] {
        for (s, t) in [(0, 0), (3, 5), (7, 7)] {
            let a = entry(&k3, 2, CaseRef::Vector(&[0, 0, 0]), s, t, l, &quad).unwrap();
            let b = entry(&k3, 2, CaseRef::Vector(&[0, 0, 0]), s, t, 1.0, &quad).unwrap();
            let e = rel(a, l * l * b);
            worst3 = worst3.max(e);
            assert!(e < 1e-13, "3D L={l} s={s} t={t}: {e:e}");
        }
    }
    let k2 = Kernel::laplace(2).unwrap();
    let mut worst2 = 0.0f64;
    let l = 0.8;
    for rho in [0.3, 4.0, 1.0 / 64.0] {
        for (c, s, t) in [(vec![0, 0], 0, 0), (vec![0, 0], 2, 7), (vec![4, -4], 5, 1)] {
            let a = entry(&k2, 3, CaseRef::Vector(&c), s, t, rho * l, &quad).unwrap();
            let b = entry(&k2, 3, CaseRef::Vector(&c), s, t, l, &quad).unwrap();
            let shift = rho * rho * rho.ln() * mode_integral(3, 2, s, l) / (2.0 * PI);
            let predicted = rho * rho * b - shift;
            // Relative to the size of the terms (the sum may cancel).
            let e = (a - predicted).abs() / (rho * rho * b.abs()).max(shift.abs());
            worst2 = worst2.max(e);
            assert!(e < 1e-13, "2D ρ={rho} {c:?} s={s} t={t}: {e:e}");
        }
    }
    println!("scaling: 3D worst {worst3:.2e}, 2D worst {worst2:.2e}");
}

#[test]
fn derivatives_against_finite_differences() {
    let quad = default_quad();
    let h = 1e-5;
    let mut worst = 0.0f64;
    for (base, c, q, t) in [
        (Kernel::laplace(3).unwrap(), vec![4, 0, -4], 2, 1),
        (Kernel::yukawa(3, 2.0).unwrap(), vec![-3, 1, 3], 2, 6),
        (Kernel::laplace(2).unwrap(), vec![4, 4], 3, 4),
        (Kernel::yukawa(2, 0.7).unwrap(), vec![2, -6], 2, 0),
        // The self case: the potential of a smooth density is smooth too.
        (Kernel::laplace(2).unwrap(), vec![0, 0], 2, 1),
    ] {
        let d = c.len();
        let q_s = 1;
        let x = target(&c, q, t, 1.0);
        let mut grad = vec![0.0; d];
        for a in 0..d {
            let mut xp = x.clone();
            let mut xm = x.clone();
            xp[a] += h;
            xm[a] -= h;
            let fp = entry_at_point(&base, q, q_s, &xp, 1.0, &quad).unwrap();
            let fm = entry_at_point(&base, q, q_s, &xm, 1.0, &quad).unwrap();
            grad[a] = (fp - fm) / (2.0 * h);
        }
        let scale = grad.iter().fold(0.0f64, |m, g| m.max(g.abs()));
        let dir: Vec<f64> = (0..d).map(|k| 0.5 - k as f64).collect();
        for (a, &ga) in grad.iter().enumerate() {
            let kt = base.clone().axis_target_derivative(a).unwrap();
            let ks = base.clone().axis_source_derivative(a).unwrap();
            let vt = entry_at_point(&kt, q, q_s, &x, 1.0, &quad).unwrap();
            let vs = entry_at_point(&ks, q, q_s, &x, 1.0, &quad).unwrap();
            for (v, want) in [(vt, ga), (vs, -ga)] {
                let e = (v - want).abs() / scale;
                worst = worst.max(e);
                assert!(e < 1e-6, "{c:?} axis {a}: {v} vs {want}: {e:e}");
            }
        }
        let kd = base.clone().directional_source_derivative(&dir).unwrap();
        let vd = entry_at_point(&kd, q, q_s, &x, 1.0, &quad).unwrap();
        let want: f64 = -dir.iter().zip(&grad).map(|(a, b)| a * b).sum::<f64>();
        let e = (vd - want).abs() / scale;
        worst = worst.max(e);
        assert!(e < 1e-6, "{c:?} directional: {vd} vs {want}: {e:e}");
    }
    println!("derivatives vs central differences (h = {h}): worst {worst:.2e}");
}

#[test]
fn yukawa_small_lambda_limit() {
    let quad = default_quad();
    let lambda = 1e-4;
    let mut worst = [0.0f64; 2];
    for (s, t) in [(0, 0), (5, 2)] {
        let l3 = Kernel::laplace(3).unwrap();
        let y3 = Kernel::yukawa(3, lambda).unwrap();
        let c = CaseRef::Vector(&[0, 4, 0]);
        let diff = entry(&y3, 2, c, s, t, 1.0, &quad).unwrap()
            - entry(&l3, 2, c, s, t, 1.0, &quad).unwrap();
        let first = -lambda * mode_integral(2, 3, s, 1.0) / (4.0 * PI);
        let e = rel(diff, first);
        worst[1] = worst[1].max(e);
        assert!(e < 1e-3, "3D: {diff} vs {first}");
        // 2D: K₀(λr) = −ln r − ln(λ/2) − γ + O(λ² r² ln λ).
        let l2 = Kernel::laplace(2).unwrap();
        let y2 = Kernel::yukawa(2, lambda).unwrap();
        let c = CaseRef::Vector(&[0, 0]);
        let diff = entry(&y2, 2, c, s % 4, t % 4, 1.0, &quad).unwrap()
            - entry(&l2, 2, c, s % 4, t % 4, 1.0, &quad).unwrap();
        let gamma = 0.577_215_664_901_532_9;
        let first = -((lambda / 2.0).ln() + gamma) * mode_integral(2, 2, s % 4, 1.0) / (2.0 * PI);
        let e = rel(diff, first);
        worst[0] = worst[0].max(e);
        assert!(e < 1e-6, "2D: {diff} vs {first}");
    }
    println!(
        "Yukawa λ = {lambda}: relative deviation from first order 2D {:.2e}, 3D {:.2e}",
        worst[0], worst[1]
    );
}

fn invalid(r: hipkern::Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::InvalidInput(s)) => s,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn input_checks() {
    let quad = default_quad();
    assert!(invalid(Kernel::laplace(1)).contains("dimension 1"));
    assert!(invalid(Kernel::yukawa(3, 0.0)).contains("λ"));
    assert!(invalid(Kernel::yukawa(2, f64::NAN)).contains("λ"));
    assert!(invalid(Kernel::constant(4)).contains("dimension 4"));
    let k = Kernel::laplace(2).unwrap();
    assert!(invalid(k.clone().axis_target_derivative(2)).contains("axis 2"));
    assert!(invalid(k.clone().axis_source_derivative(5)).contains("axis 5"));
    assert!(
        invalid(k.clone().directional_source_derivative(&[1.0, 0.0, 0.0])).contains("3 components")
    );
    let kd = k.clone().axis_target_derivative(0).unwrap();
    assert!(invalid(kd.axis_source_derivative(1)).contains("do not nest"));
    assert!(
        invalid(entry(&k, 2, CaseRef::Vector(&[0, 3]), 0, 0, 1.0, &quad))
            .contains("no interaction case")
    );
    assert!(invalid(entry(&k, 2, CaseRef::Id(33), 0, 0, 1.0, &quad)).contains("out of range"));
    assert!(invalid(entry(&k, 2, CaseRef::Id(0), 4, 0, 1.0, &quad)).contains("source mode 4"));
    assert!(invalid(entry(&k, 2, CaseRef::Id(0), 0, 4, 1.0, &quad)).contains("target point 4"));
    assert!(invalid(entry(&k, 2, CaseRef::Id(0), 0, 0, -1.0, &quad)).contains("L = -1"));
    assert!(invalid(entry_at_point(&k, 2, 0, &[0.5], 1.0, &quad)).contains("1 components"));
    let c1 = Kernel::constant(1).unwrap();
    assert!(invalid(entry_at_point(&c1, 2, 0, &[0.5], 1.0, &quad)).contains("dimension 1"));
    let bad = EntryQuadrature {
        radial_level: 3,
        angular_order: 0,
    };
    assert!(invalid(entry_at_point(&k, 2, 0, &[0.5, 0.5], 1.0, &bad)).contains("angular order"));
}

/// Build time per entry with the default orders (run with `--ignored
/// --nocapture`; release).
#[test]
#[ignore = "timing only"]
fn timing_per_entry() {
    let quad = default_quad();
    for (d, q) in [(2, 3), (2, 4), (3, 3), (3, 4)] {
        let k = Kernel::laplace(d).unwrap();
        let c = vec![0; d];
        let x = target(&c, q, 1, 1.0);
        let t0 = std::time::Instant::now();
        let reps = 5;
        for _ in 0..reps {
            entry_at_point(&k, q, 0, &x, 1.0, &quad).unwrap();
        }
        let one = t0.elapsed().as_secs_f64() / reps as f64;
        let t0 = std::time::Instant::now();
        for _ in 0..reps {
            entries_at_point(&k, q, &x, 1.0, &quad).unwrap();
        }
        let all = t0.elapsed().as_secs_f64() / reps as f64;
        println!(
            "{d}D q={q}: one entry {:.3} ms; all {} modes of a target {:.3} ms ({:.4} ms/entry)",
            one * 1e3,
            q.pow(d as u32),
            all * 1e3,
            all * 1e3 / q.pow(d as u32) as f64
        );
    }
}

/// Orders vs error on the hardest 3D q = 4 and 2D q = 4 points (self near a
/// corner, touching neighbours of each size), Laplace, a target derivative
/// and Yukawa, against radial level 5, angular order 40 (run with
/// `--ignored --nocapture`; release, about a minute).
#[test]
#[ignore = "accuracy study"]
fn accuracy_study() {
    let hi = EntryQuadrature {
        radial_level: 5,
        angular_order: 40,
    };
    for d in [2usize, 3] {
        let kernels = [
            ("laplace", Kernel::laplace(d).unwrap()),
            (
                "d/dx0 laplace",
                Kernel::laplace(d)
                    .unwrap()
                    .axis_target_derivative(0)
                    .unwrap(),
            ),
            ("yukawa(3)", Kernel::yukawa(d, 3.0).unwrap()),
        ];
        let points: Vec<(Vec<i32>, usize)> = if d == 2 {
            vec![
                (vec![0, 0], 0),
                (vec![4, 0], 0),
                (vec![3, 1], 0),
                (vec![-6, 2], 12),
            ]
        } else {
            vec![
                (vec![0, 0, 0], 0),
                (vec![4, 0, 0], 0),
                (vec![3, 3, 3], 0),
                (vec![-6, 2, 2], 48),
            ]
        };
        for (name, k) in &kernels {
            let refs: Vec<Vec<f64>> = points
                .iter()
                .map(|(c, t)| entries_at_point(k, 4, &target(c, 4, *t, 1.0), 1.0, &hi).unwrap())
                .collect();
            for (lev, ang) in [(3, 12), (3, 16), (4, 16), (4, 20), (5, 24)] {
                let quad = EntryQuadrature {
                    radial_level: lev,
                    angular_order: ang,
                };
                let mut worst = 0.0f64;
                for ((c, t), r) in points.iter().zip(&refs) {
                    let a = entries_at_point(k, 4, &target(c, 4, *t, 1.0), 1.0, &quad).unwrap();
                    worst = worst.max(max_rel(&a, r));
                }
                println!("{d}D q=4 {name}: radial level {lev}, angular {ang}: {worst:.2e}");
            }
        }
    }
}

/// The (case, target point) pairs of `dim`, `q` with one per orbit of the
/// cube's signed-permutation group (or all of them): the group maps a case
/// vector `c` to `c'_k = σ_k c_{π(k)}` and a target node index `t` to
/// `t'_k = t_{π(k)}` (`σ_k = 1`) or `q − 1 − t_{π(k)}` (`σ_k = −1`); the
/// representative is the orbit's smallest (case id, target). Returns
/// (case id, target, orbit size).
fn orbit_representatives(dim: usize, q: usize, all: bool) -> Vec<(usize, usize, usize)> {
    let cases = Cases::new(dim).unwrap();
    let nq = q.pow(dim as u32);
    let perms: Vec<Vec<usize>> = if dim == 2 {
        vec![vec![0, 1], vec![1, 0]]
    } else {
        vec![
            vec![0, 1, 2],
            vec![0, 2, 1],
            vec![1, 0, 2],
            vec![1, 2, 0],
            vec![2, 0, 1],
            vec![2, 1, 0],
        ]
    };
    let digits = |t: usize| -> Vec<usize> {
        (0..dim)
            .map(|k| (t / q.pow((dim - 1 - k) as u32)) % q)
            .collect()
    };
    let mut out = Vec::new();
    for c in 0..cases.len() {
        for t in 0..nq {
            let (v, td) = (cases.vector(c).to_vec(), digits(t));
            let mut images = Vec::new();
            for p in &perms {
                for signs in 0..1usize << dim {
                    let mut v2 = vec![0i32; dim];
                    let mut t2 = 0;
                    for k in 0..dim {
                        let flip = (signs >> k) & 1 == 1;
                        v2[k] = if flip { -v[p[k]] } else { v[p[k]] };
                        let tk = if flip { q - 1 - td[p[k]] } else { td[p[k]] };
                        t2 = t2 * q + tk;
                    }
                    images.push((cases.id_of_vector(&v2).unwrap(), t2));
                }
            }
            images.sort_unstable();
            images.dedup();
            if all {
                out.push((c, t, 1));
            } else if images[0] == (c, t) {
                out.push((c, t, images.len()));
            }
        }
    }
    out
}

/// Every entry of the Laplace tables 2D q = 1..4 and 3D q = 1 against the
/// same scheme at much higher orders; 3D q = 2..4 one (case, target point)
/// per orbit of the cube's symmetry group, every source mode. Why one per
/// orbit is enough: the scheme is symmetric under the group (the orthants
/// at the clamped target, the d! simplices and the grading map to each
/// other under a signed axis permutation, and so do the Gauss–Legendre
/// nodes), so the entries of one orbit are the same sums in another order
/// and share their error to rounding. Criterion of the issue:
/// `|T − T_ref| ≤ 1e−12·|T_ref|` with an absolute floor of 1e−14, i.e.
/// `|T − T_ref| / max(|T_ref|, 1e−2) ≤ 1e−12`.
/// `cargo test --release --test nearfield_entries -- --ignored every_laplace_entry --nocapture`
#[test]
#[ignore = "accuracy study of every entry (release, 2 cores: about 10 minutes)"]
fn every_laplace_entry_against_high_orders() {
    let start = std::time::Instant::now();
    for (dim, q, all, hi) in [
        (2usize, 1usize, true, (6u32, 48usize)),
        (2, 2, true, (6, 48)),
        (2, 3, true, (6, 48)),
        (2, 4, true, (6, 48)),
        (3, 1, true, (5, 40)),
        (3, 2, false, (5, 40)),
        (3, 3, false, (5, 40)),
        (3, 4, false, (5, 40)),
    ] {
        let k = Kernel::laplace(dim).unwrap();
        let cases = Cases::new(dim).unwrap();
        let reps = orbit_representatives(dim, q, all);
        let covered: usize = reps.iter().map(|r| r.2).sum();
        let nq = q.pow(dim as u32);
        assert_eq!(covered, cases.len() * nq, "orbits cover every pair");
        let high = EntryQuadrature {
            radial_level: hi.0,
            angular_order: hi.1,
        };
        let items: Vec<(usize, usize)> = reps.iter().map(|r| (r.0, r.1)).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<(f64, f64, String)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut worst = (0.0f64, 0.0f64, String::new());
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&(c, t)) = items.get(i) else {
                                return worst;
                            };
                            let x =
                                &cases.target_points(c, q, 1.0).unwrap()[t * dim..(t + 1) * dim];
                            let a = entries_at_point(&k, q, x, 1.0, &default_quad()).unwrap();
                            let b = entries_at_point(&k, q, x, 1.0, &high).unwrap();
                            for (s, (a, b)) in a.iter().zip(&b).enumerate() {
                                let e = (a - b).abs() / b.abs().max(1e-2);
                                if e > worst.0 {
                                    worst.0 = e;
                                    worst.2 = format!("case {:?} s {s} t {t}", cases.vector(c));
                                }
                                if b.abs() > 1e-10 {
                                    worst.1 = worst.1.max((a - b).abs() / b.abs());
                                }
                            }
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let w = results
            .iter()
            .fold((0.0f64, 0.0f64, String::new()), |m, r| {
                (
                    m.0.max(r.0),
                    m.1.max(r.1),
                    if r.0 >= m.0 { r.2.clone() } else { m.2 },
                )
            });
        println!(
            "{dim}D q={q}: {} of {} (case, target) pairs{}, {} entries checked vs radial {} / angular {}: \
             worst |T−T_ref|/max(|T_ref|,1e−2) {:.2e} ({}), worst relative (|T_ref| > 1e−10) {:.2e}; {:.0} s so far",
            items.len(),
            cases.len() * nq,
            if all { "" } else { " (one per orbit)" },
            items.len() * nq,
            hi.0,
            hi.1,
            w.0,
            w.2,
            w.1,
            start.elapsed().as_secs_f64()
        );
        assert!(w.0 <= 1e-12, "{dim}D q={q}: {:.2e} at {}", w.0, w.2);
    }
}

fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

fn next_down(x: f64) -> f64 {
    f64::from_bits(x.to_bits() - 1)
}

/// Every kernel family at both ends of the extent range: finite, and (the
/// scheme is scale-covariant) equal to the `L = 1` entry carried by the
/// scaling rule; radial level 0 has the smallest tanh-sinh node, so the
/// nearest approach to the target. Just outside the range: refused.
#[test]
fn extent_range_ends_are_finite_and_outside_is_refused() {
    let quad = EntryQuadrature {
        radial_level: 0,
        angular_order: 4,
    };
    let (lo, hi) = EXTENT_RANGE;
    let (dlo, dhi) = DIRECTION_COMPONENT_RANGE;
    let kernels: Vec<Kernel> = vec![
        Kernel::laplace(2).unwrap(),
        Kernel::laplace(3).unwrap(),
        Kernel::laplace(2)
            .unwrap()
            .axis_target_derivative(1)
            .unwrap(),
        Kernel::laplace(3)
            .unwrap()
            .axis_source_derivative(0)
            .unwrap(),
        Kernel::laplace(3)
            .unwrap()
            .directional_source_derivative(&[dhi, 0.0, -dlo])
            .unwrap(),
        Kernel::laplace(2)
            .unwrap()
            .directional_source_derivative(&[dlo, dlo])
            .unwrap(),
        Kernel::constant(3).unwrap(),
    ];
    for k in &kernels {
        let d = k.dim();
        let rule = ScalingRule::of(k).unwrap();
        for c in [vec![0; d], {
            // A half-size target (components ±1, ±3): inside the box's
            // slab on the axes with 1, the thinnest orthants.
            let mut v = vec![1; d];
            v[0] = 3;
            v
        }] {
            let (s, t) = (1, 2);
            let one = entry(k, 2, CaseRef::Vector(&c), s, t, 1.0, &quad).unwrap();
            // 2D Laplace's shift by ln ρ·N_s (ln ρ = ±115 here) amplifies
            // the coarse rule's error in ∫φ_s: the rule's own ∫φ_s (the
            // constant kernel's entry) is the covariant one.
            let constant = Kernel::constant(d).unwrap();
            let n_s = entry(&constant, 2, CaseRef::Vector(&c), s, t, 1.0, &quad).unwrap();
            for l in [lo, hi] {
                let v = entry(k, 2, CaseRef::Vector(&c), s, t, l, &quad).unwrap();
                let want = rule.apply(one, l, n_s);
                assert!(v.is_finite(), "{k:?} L = {l:e}: {v}");
                // (0 and 0 where the entry is zero by symmetry.)
                assert!(
                    v == want || rel(v, want) < 1e-11,
                    "{k:?} {c:?} L = {l:e}: {v} vs {want}"
                );
            }
            for l in [next_down(lo), next_up(hi), 1e150, 1e-150] {
                let e = invalid(entry(k, 2, CaseRef::Vector(&c), s, t, l, &quad));
                assert!(e.contains("[1e-50, 1e50]"), "{e}");
            }
        }
    }
    // The whole source box, all modes, at the ends (3D, the self case).
    let k = Kernel::laplace(3)
        .unwrap()
        .axis_target_derivative(2)
        .unwrap();
    for l in [lo, hi] {
        let x = [0.5 * l, 0.25 * l, 0.75 * l];
        let v = entries_at_point(&k, 3, &x, l, &quad).unwrap();
        assert!(v.iter().all(|v| v.is_finite()), "L = {l:e}");
    }
}

/// At q = 64 the Lagrange products scale like L^63: they overflowed (NaN)
/// at L = 1e−5 and underflowed (0) at 1e6 before the basis was evaluated in
/// power-of-two units; now they follow the 2D scaling rule.
#[test]
fn high_order_basis_at_small_and_large_extents() {
    let quad = EntryQuadrature {
        radial_level: 2,
        angular_order: 8,
    };
    let k = Kernel::laplace(2).unwrap();
    let rule = ScalingRule::of(&k).unwrap();
    let s = 64 * 20 + 31;
    let one = entry_at_point(&k, 64, s, &[0.5, 0.5], 1.0, &quad).unwrap();
    let constant = Kernel::constant(2).unwrap();
    let n_s = entry_at_point(&constant, 64, s, &[0.5, 0.5], 1.0, &quad).unwrap();
    for l in [1e-5, 1e6, 1e-50, 1e50] {
        let v = entry_at_point(&k, 64, s, &[0.5 * l, 0.5 * l], l, &quad).unwrap();
        let want = rule.apply(one, l, n_s);
        assert!(rel(v, want) < 1e-10, "L = {l:e}: {v} vs {want}");
    }
}

/// Yukawa at both ends of the λ·L range (2D K₀/K₁, 3D e^(−λr)(1 + λr)),
/// finite; just outside, and the λ = 1e−300 and 1e300 of issue 28, refused.
#[test]
fn yukawa_lambda_extent_range() {
    let quad = EntryQuadrature {
        radial_level: 0,
        angular_order: 4,
    };
    let (lo, hi) = YUKAWA_LAMBDA_EXTENT_RANGE;
    for d in [2, 3] {
        let self_case = vec![0; d];
        for lambda in [lo, hi] {
            for k in [
                Kernel::yukawa(d, lambda).unwrap(),
                Kernel::yukawa(d, lambda)
                    .unwrap()
                    .axis_source_derivative(0)
                    .unwrap(),
            ] {
                for l in [1.0, EXTENT_RANGE.0, EXTENT_RANGE.1] {
                    // λ·L at the end of the range when L = 1; inside or
                    // refused otherwise.
                    let r = entry(&k, 2, CaseRef::Vector(&self_case), 1, 1, l, &quad);
                    let x = lambda * l;
                    if (lo..=hi).contains(&x) {
                        let v = r.unwrap();
                        assert!(v.is_finite(), "{k:?} L = {l:e}: {v}");
                    } else {
                        assert!(invalid(r).contains("λ·L"));
                    }
                }
            }
        }
        for lambda in [next_down(lo), next_up(hi), 1e-300, 1e300] {
            let k = Kernel::yukawa(d, lambda).unwrap();
            let e = invalid(entry(&k, 2, CaseRef::Vector(&self_case), 0, 0, 1.0, &quad));
            assert!(e.contains("[1e-200, 1e200]"), "{e}");
        }
    }
    // Small λ·L is Laplace's limit (2D: K₀ ≈ −ln(λr/2) − γ): finite.
    let k = Kernel::yukawa(2, 1e-200).unwrap();
    let v = entry(&k, 3, CaseRef::Vector(&[0, 0]), 4, 4, 1.0, &default_quad()).unwrap();
    let lap = entry(
        &Kernel::laplace(2).unwrap(),
        3,
        CaseRef::Vector(&[0, 0]),
        4,
        4,
        1.0,
        &default_quad(),
    )
    .unwrap();
    let first = -((1e-200f64 / 2.0).ln() + 0.577_215_664_901_532_9) * mode_integral(3, 2, 4, 1.0)
        / (2.0 * PI);
    assert!(rel(v - lap, first) < 1e-12, "{v} {lap} {first}");
}

/// Directions: 0 or magnitudes in [1e−50, 1e50] per component; 1e308 (issue
/// 28: NaN) and just outside refused, by the kernel check and by entry.
#[test]
fn direction_component_range() {
    let quad = EntryQuadrature {
        radial_level: 1,
        angular_order: 4,
    };
    let (lo, hi) = DIRECTION_COMPONENT_RANGE;
    let base = Kernel::laplace(2).unwrap();
    let axis = entry(
        &base.clone().axis_source_derivative(0).unwrap(),
        2,
        CaseRef::Id(0),
        1,
        2,
        1.0,
        &quad,
    )
    .unwrap();
    for x in [lo, hi, -hi] {
        let k = base
            .clone()
            .directional_source_derivative(&[x, 0.0])
            .unwrap();
        let v = entry(&k, 2, CaseRef::Id(0), 1, 2, 1.0, &quad).unwrap();
        assert!(rel(v, x * axis) < 1e-13, "{x:e}: {v} vs {}", x * axis);
    }
    for x in [1e308, next_up(hi), next_down(lo), -1e-300] {
        let k = base
            .clone()
            .directional_source_derivative(&[1.0, x])
            .unwrap();
        let e = invalid(check_kernel_and_extent(&k, 1.0));
        assert!(
            e.contains("component 1") && e.contains("[1e-50, 1e50]"),
            "{e}"
        );
        assert!(invalid(entry(&k, 2, CaseRef::Id(0), 0, 0, 1.0, &quad)).contains("component 1"));
    }
}

/// Free target points: within TARGET_REACH·L of the centre and, inside the
/// box, on a face or MIN_FACE_DISTANCE·L from it; a component of 1e308 or
/// 1e−200 (issue 28: NaN) refused.
#[test]
fn free_target_point_range() {
    let quad = EntryQuadrature {
        radial_level: 0,
        angular_order: 4,
    };
    for k in [
        Kernel::laplace(2).unwrap(),
        Kernel::laplace(2)
            .unwrap()
            .axis_target_derivative(0)
            .unwrap(),
    ] {
        for l in [1.0, EXTENT_RANGE.0, EXTENT_RANGE.1] {
            let ok = [
                0.5 * l + TARGET_REACH * l,
                0.5 * l - TARGET_REACH * l,
                // Twice the limit: L·1e−8 itself rounds either way.
                2.0 * MIN_FACE_DISTANCE * l,
                l - 2.0 * MIN_FACE_DISTANCE * l,
                0.0,
                l,
            ];
            for x in ok {
                let v = entry_at_point(&k, 2, 1, &[x, 0.25 * l], l, &quad).unwrap();
                assert!(v.is_finite(), "{k:?} L = {l:e} x = {x:e}: {v}");
            }
            for x in [
                0.5 * l + 1.01 * TARGET_REACH * l,
                0.5 * MIN_FACE_DISTANCE * l,
            ] {
                let e = invalid(entry_at_point(&k, 2, 1, &[0.25 * l, x], l, &quad));
                assert!(e.contains("component 1"), "{e}");
            }
        }
        for x in [1e308, 1e-200, -1e308] {
            assert!(
                invalid(entry_at_point(&k, 2, 0, &[x, 0.5], 1.0, &quad)).contains("component 0")
            );
        }
    }
}

/// K₀ and K₁ are 0 where they underflow, never NaN (the continued fraction
/// gave NaN beyond about 5e16: 2D Yukawa with a large λ·L).
#[test]
fn bessel_k_underflow_is_zero_not_nan() {
    let mut x = 500.0f64;
    while x < 1e300 {
        let (k0, k1) = (bessel_k0(x), bessel_k1(x));
        assert!(k0.is_finite() && k1.is_finite(), "x = {x:e}: {k0} {k1}");
        assert!(k0 >= 0.0 && k1 >= k0, "x = {x:e}: {k0} {k1}");
        x *= 1.003;
    }
    assert_eq!(bessel_k0(746.5), 0.0);
    assert!(bessel_k1(700.0) > 0.0);
}
