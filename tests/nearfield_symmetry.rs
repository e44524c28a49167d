//! Symmetry of near-field tables: the kernel groups, the dense signed
//! union-find oracle, the arithmetic ORBIT descriptors against the oracle
//! for every full entry, the representative counts and metadata bytes of
//! the issue, and the symmetry itself against built tables.
use hipkern::nearfield::{
    apply_to_entry, kernel_group, signed_permutations, Cases, DenseOrbits, EntryQuadrature, Kernel,
    NearFieldTable, OrbitDescriptors,
};
use std::collections::HashMap;

fn kernels(dim: usize) -> Vec<Kernel> {
    let l = Kernel::laplace(dim).unwrap();
    let mut out = vec![
        l.clone(),
        Kernel::constant(dim).unwrap(),
        Kernel::yukawa(dim, 1.5).unwrap(),
    ];
    for a in 0..dim {
        out.push(l.clone().axis_target_derivative(a).unwrap());
        out.push(l.clone().axis_source_derivative(a).unwrap());
    }
    out
}

fn directional(dim: usize) -> Vec<Kernel> {
    let l = Kernel::laplace(dim).unwrap();
    let dirs: Vec<Vec<f64>> = if dim == 2 {
        vec![
            vec![1.0, 0.0],
            vec![0.0, -2.0],
            vec![0.7, 0.7],
            vec![0.7, -0.7],
            vec![0.3, 0.8],
        ]
    } else {
        vec![
            vec![1.0, 0.0, 0.0],
            vec![0.5, 0.5, 0.0],
            vec![0.4, -0.4, 0.4],
            vec![0.2, 0.0, -0.9],
            vec![0.1, 0.2, 0.3],
        ]
    };
    dirs.iter()
        .map(|d| l.clone().directional_source_derivative(d).unwrap())
        .collect()
}

#[test]
fn groups_per_kernel() {
    assert_eq!(signed_permutations(2).len(), 8);
    assert_eq!(signed_permutations(3).len(), 48);
    let l3 = Kernel::laplace(3).unwrap();
    assert_eq!(kernel_group(&l3).len(), 48);
    assert!(kernel_group(&l3).iter().all(|(_, s)| *s == 1));
    let dx = l3.clone().axis_target_derivative(1).unwrap();
    let g = kernel_group(&dx);
    // π(1) = 1: 2 permutations of the other axes × 8 sign patterns.
    assert_eq!(g.len(), 16);
    assert!(g.iter().all(|(p, s)| p.perm[1] == 1 && *s == p.sign[1]));
    // Direction (0.5, 0.5, 0): swap axes 0, 1 (with equal signs), flip axis 2
    // freely, ε = ±1: 2 · 2 · 2 = 8.
    let dd = l3.directional_source_derivative(&[0.5, 0.5, 0.0]).unwrap();
    let g = kernel_group(&dd);
    assert_eq!(g.len(), 8);
    assert_eq!(g.iter().filter(|(_, s)| *s == -1).count(), 4);
}

/// Small tables exist for every kernel: each group element maps the table
/// to itself with its sign (the symmetry the reduction assumes), to
/// rounding. 2D q = 3 for every kernel, 3D q = 2 Laplace and a derivative at
/// low orders (the relation holds for any orders: the scheme is symmetric).
#[test]
fn built_tables_have_the_symmetry() {
    let cheap = EntryQuadrature {
        radial_level: 3,
        angular_order: 8,
    };
    let mut list: Vec<(Kernel, usize, EntryQuadrature)> = kernels(2)
        .into_iter()
        .chain(directional(2))
        .map(|k| (k, 3, EntryQuadrature::default()))
        .collect();
    let l3 = Kernel::laplace(3).unwrap();
    list.push((l3.clone(), 2, cheap));
    list.push((l3.clone().axis_source_derivative(2).unwrap(), 2, cheap));
    list.push((
        l3.directional_source_derivative(&[0.4, -0.4, 0.0]).unwrap(),
        2,
        cheap,
    ));
    for (k, q, quad) in list {
        let table = NearFieldTable::build(&k, q, 1.0, &quad).unwrap();
        let cases = Cases::new(k.dim()).unwrap();
        let data = table.data();
        let scale = data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let mut worst = 0.0f64;
        for (g, sg) in kernel_group(&k) {
            for (e, &v) in data.iter().enumerate() {
                let f = apply_to_entry(&g, &cases, q, e);
                let err = (data[f] - f64::from(sg) * v).abs() / scale;
                worst = worst.max(err);
            }
        }
        assert!(worst < 1e-14, "{k:?}: {worst:.2e}");
    }
}

/// The oracle's classes are unions of group images and nothing else: every
/// entry has the representative of all its images, and each class is one
/// orbit (its size is the orbit's size).
#[test]
fn oracle_classes_are_orbits() {
    for dim in [2usize, 3] {
        for k in kernels(dim).into_iter().chain(directional(dim)) {
            let q = 2;
            let o = DenseOrbits::build(&k, q).unwrap();
            let cases = Cases::new(dim).unwrap();
            let group = kernel_group(&k);
            let mut size: HashMap<i32, usize> = HashMap::new();
            for e in 0..cases.n_entries(q) {
                *size.entry(o.canonical_entry_ids[e]).or_default() += 1;
                let mut orbit: Vec<usize> = group
                    .iter()
                    .map(|(g, _)| apply_to_entry(g, &cases, q, e))
                    .collect();
                orbit.sort_unstable();
                orbit.dedup();
                assert_eq!(
                    o.canonical_entry_ids[e] as usize, orbit[0],
                    "{k:?} entry {e}"
                );
                for (g, sg) in &group {
                    let f = apply_to_entry(g, &cases, q, e);
                    let rel = o.canonical_scales[f] * o.canonical_scales[e];
                    let zero = o.zero_by_symmetry
                        [o.representatives.binary_search(&(orbit[0] as u32)).unwrap()];
                    if !zero {
                        assert_eq!(rel, f64::from(*sg), "{k:?}: {e} → {f}");
                    }
                }
            }
            for (&r, &n) in &size {
                let mut orbit: Vec<usize> = group
                    .iter()
                    .map(|(g, _)| apply_to_entry(g, &cases, q, r as usize))
                    .collect();
                orbit.sort_unstable();
                orbit.dedup();
                assert_eq!(orbit.len(), n);
            }
        }
    }
}

#[test]
fn representative_counts() {
    let want2 = [7usize, 73, 357, 1084, 2641];
    let want3 = [10usize, 256, 2510, 12936, 48230];
    for (dim, want) in [(2usize, &want2[..]), (3, &want3[..])] {
        let k = Kernel::laplace(dim).unwrap();
        for (i, &w) in want.iter().enumerate() {
            let q = i + 1;
            let arith = OrbitDescriptors::build(&k, q).unwrap();
            assert_eq!(arith.n_rows(), w, "{dim}D q={q} (arithmetic)");
            if dim == 2 || q <= 4 {
                let o = DenseOrbits::build(&k, q).unwrap();
                assert_eq!(o.n_representatives(), w, "{dim}D q={q} (oracle)");
                assert_eq!(o.zero_entries, 0);
            }
        }
    }
}

#[test]
fn metadata_bytes_3d_q3() {
    let k = Kernel::laplace(3).unwrap();
    let d = OrbitDescriptors::build(&k, 3).unwrap();
    let o = DenseOrbits::build(&k, 3).unwrap();
    assert_eq!(o.canonical_entry_ids.len(), 101_331);
    assert_eq!(o.dense_map_bytes(), 1_215_972);
    assert_eq!(d.n_rows(), 2510);
    assert_eq!(d.n_case_orbits(), 10);
    assert!(d.metadata_bytes() <= 1576, "{} bytes", d.metadata_bytes());
    eprintln!(
        "3D q=3 scalar: {} rows, {} case orbits, {} metadata bytes (dense maps {} bytes)",
        d.n_rows(),
        d.n_case_orbits(),
        d.metadata_bytes(),
        o.dense_map_bytes()
    );
}

/// Every full entry: the arithmetic slot against the oracle. Rows and
/// oracle classes correspond one to one; zero-by-symmetry agrees; and the
/// signs agree: `scale(e) = sign(e) · sign(rep(e))`.
#[test]
fn arithmetic_slots_agree_with_the_oracle_for_every_entry() {
    for dim in [2usize, 3] {
        let qs: &[usize] = if dim == 2 {
            &[1, 2, 3, 4, 5]
        } else {
            &[1, 2, 3, 4]
        };
        for k in kernels(dim) {
            for &q in qs {
                let a = OrbitDescriptors::build(&k, q).unwrap();
                let o = DenseOrbits::build(&k, q).unwrap();
                assert_eq!(a.n_rows(), o.n_representatives(), "{k:?} q={q}");
                let nq = q.pow(dim as u32);
                let mut row_of_rep: HashMap<i32, usize> = HashMap::new();
                let mut rep_of_row: HashMap<usize, i32> = HashMap::new();
                let mut zero_conflicts = 0;
                for e in 0..o.canonical_entry_ids.len() {
                    let (c, s, t) = (e / (nq * nq), (e / nq) % nq, e % nq);
                    let slot = a.slot(c, s, t);
                    assert!(slot.row < a.n_rows());
                    let rep = o.canonical_entry_ids[e];
                    assert_eq!(
                        *row_of_rep.entry(rep).or_insert(slot.row),
                        slot.row,
                        "{k:?} q={q} e={e}"
                    );
                    assert_eq!(
                        *rep_of_row.entry(slot.row).or_insert(rep),
                        rep,
                        "{k:?} q={q} e={e}"
                    );
                    let r = rep as usize;
                    let rs = a.slot(r / (nq * nq), (r / nq) % nq, r % nq);
                    let zero =
                        o.zero_by_symmetry[o.representatives.binary_search(&(rep as u32)).unwrap()];
                    assert_eq!(slot.sign == 0, zero, "{k:?} q={q} e={e}");
                    if zero {
                        zero_conflicts += 1;
                    } else {
                        assert_eq!(
                            o.canonical_scales[e],
                            f64::from(slot.sign * rs.sign),
                            "{k:?} q={q} e={e}"
                        );
                    }
                }
                assert_eq!(zero_conflicts, o.zero_entries);
                if k.derivative().is_some() && q % 2 == 1 {
                    assert!(
                        o.zero_entries > 0,
                        "{k:?} q={q}: odd entries zero by symmetry"
                    );
                }
            }
        }
    }
}

#[test]
fn directional_kernels_go_to_the_fallback() {
    let k = Kernel::laplace(2)
        .unwrap()
        .directional_source_derivative(&[0.3, 0.8])
        .unwrap();
    let e = OrbitDescriptors::build(&k, 2).unwrap_err().to_string();
    assert!(e.contains("descriptor fallback"), "{e}");
}

use hipkern::nearfield::ReducedTable;
use hipkern::Error;

/// The reduced table built from representatives only against the
/// independently built dense table: the same representatives; the whole
/// reconstruction against the dense values per entry, relative with a
/// 1e−17 absolute floor; zero-by-symmetry entries exactly 0; the
/// reconstruction bit-identical to expanding the representatives with the
/// oracle's signs.
///
/// The issue asks for 1e−15 per entry, asserted here. Measured: 0 (bit
/// for bit) for every kernel (directional ones included) at 2D q ≤ 4 and
/// 3D q = 2, and at 3D q = 3 for Laplace (default orders), ∂/∂x₂ and a
/// directional derivative (`measure_reduced_errors`). The dense build still evaluates
/// every (case, target) pair on its own; they agree because the scheme's
/// rounding follows the symmetry (src/nearfield/table/entry.rs, "Rounding
/// follows the symmetry": exactly mirrored nodes and target points, mirror-
/// exact basis values, the sum factored in the simplex's axis order,
/// compensated sums). Before that: 1.6e−15 (2D Laplace q = 4), 3.8e−15
/// (2D ∂/∂x₁ q = 4), 3.5e−15 (3D ∂/∂x₂ q = 2).
fn check_reduced(k: &Kernel, q: usize, quad: &EntryQuadrature) -> (f64, usize) {
    let dense = NearFieldTable::build(k, q, 1.0, quad).unwrap();
    let red = ReducedTable::build(k, q, 1.0, quad).unwrap();
    let from_dense = ReducedTable::from_dense(&dense).unwrap();
    assert_eq!(red.reduced_entry_ids(), from_dense.reduced_entry_ids());
    let o = DenseOrbits::build(k, q).unwrap();
    assert_eq!(red.reduced_entry_ids(), &o.representatives[..]);
    let full = red.reconstruct_full_table_from_symmetry();
    let mut worst = 0.0f64;
    let mut zeros = 0;
    for (e, (&got, &want)) in full.iter().zip(dense.data()).enumerate() {
        let row = o
            .representatives
            .binary_search(&(o.canonical_entry_ids[e] as u32))
            .unwrap();
        if o.zero_by_symmetry[row] {
            assert_eq!(got.to_bits(), 0.0f64.to_bits(), "{k:?} q={q} e={e}");
            zeros += 1;
            continue;
        }
        let expanded = o.canonical_scales[e] * red.reduced_data()[row];
        assert_eq!(got.to_bits(), expanded.to_bits(), "{k:?} q={q} e={e}");
        let err = (got - want).abs() / want.abs().max(1e-17 / 1e-15);
        worst = worst.max(err);
    }
    (worst, zeros)
}

#[test]
fn reduced_tables_against_dense_tables_2d() {
    for k in kernels(2).into_iter().chain(directional(2)) {
        for q in 1..=4 {
            let (worst, zeros) = check_reduced(&k, q, &EntryQuadrature::default());
            assert!(worst <= 1e-15, "{k:?} q={q}: {worst:.2e}");
            if q >= 3 {
                eprintln!("{k:?} q={q}: worst {worst:.2e}, {zeros} zero entries");
            }
        }
    }
}

#[test]
fn reduced_tables_against_dense_tables_3d() {
    let cheap = EntryQuadrature {
        radial_level: 3,
        angular_order: 8,
    };
    let l = Kernel::laplace(3).unwrap();
    for k in [l.clone(), l.axis_target_derivative(2).unwrap()] {
        let (worst, zeros) = check_reduced(&k, 2, &cheap);
        eprintln!("{k:?} q=2: worst {worst:.2e}, {zeros} zero entries");
        assert!(worst <= 1e-15, "{k:?}: {worst:.2e}");
    }
}

#[test]
fn reduced_build_speed_up_2d() {
    let k = Kernel::laplace(2).unwrap();
    let q = 4;
    let quad = EntryQuadrature::default();
    let t0 = std::time::Instant::now();
    let dense = NearFieldTable::build(&k, q, 1.0, &quad).unwrap();
    let t_dense = t0.elapsed().as_secs_f64();
    let t0 = std::time::Instant::now();
    let red = ReducedTable::build(&k, q, 1.0, &quad).unwrap();
    let t_red = t0.elapsed().as_secs_f64();
    assert_eq!(red.reduced_entry_ids().len(), 1084);
    // 33 cases × 16 targets = 528 passes for the dense table.
    assert!(
        red.quadrature_passes() < 528 / 4,
        "{}",
        red.quadrature_passes()
    );
    eprintln!(
        "2D q=4: dense {} entries {t_dense:.3} s, reduced {} rows from {} passes {t_red:.3} s ({:.1}×)",
        dense.data().len(),
        red.reduced_entry_ids().len(),
        red.quadrature_passes(),
        t_dense / t_red
    );
}

#[test]
fn reduced_parts_are_checked() {
    let k = Kernel::laplace(2).unwrap();
    let quad = EntryQuadrature::default();
    let red = ReducedTable::build(&k, 2, 1.0, &quad).unwrap();
    let ids = red.reduced_entry_ids().to_vec();
    let data = red.reduced_data().to_vec();
    let ok = ReducedTable::from_parts(&k, 2, 1.0, &quad, ids.clone(), data.clone()).unwrap();
    assert_eq!(
        ok.reconstruct_full_table_from_symmetry(),
        red.reconstruct_full_table_from_symmetry()
    );
    let msg = |r: hipkern::Result<ReducedTable>| match r {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("expected an error, got {other:?}"),
    };
    let m = msg(ReducedTable::from_parts(
        &k,
        2,
        1.0,
        &quad,
        ids.clone(),
        data[1..].to_vec(),
    ));
    assert!(m.contains("73 representative ids but 72 values"), "{m}");
    let mut bad_ids = ids.clone();
    bad_ids[5] += 1;
    let m = msg(ReducedTable::from_parts(
        &k,
        2,
        1.0,
        &quad,
        bad_ids,
        data.clone(),
    ));
    assert!(m.contains("reduced_entry_ids[5]"), "{m}");
    let mut nan = data.clone();
    nan[7] = f64::NAN;
    let m = msg(ReducedTable::from_parts(
        &k,
        2,
        1.0,
        &quad,
        ids.clone(),
        nan,
    ));
    assert!(m.contains("reduced_data[7] = NaN"), "{m}");
    let m = msg(ReducedTable::from_parts(
        &k,
        3,
        1.0,
        &quad,
        ids.clone(),
        data.clone(),
    ));
    assert!(m.contains("representative"), "{m}");
    // A derivative table: a zero-by-symmetry orbit must hold 0.
    let kd = k.axis_target_derivative(0).unwrap();
    let rd = ReducedTable::build(&kd, 3, 1.0, &quad).unwrap();
    assert!(rd.zero_orbits() > 0);
    let z = (0..rd.reduced_entry_ids().len())
        .find(|&i| {
            rd.representative_of(rd.reduced_entry_ids()[i] as usize)
                .unwrap()
                .sign
                == 0
        })
        .unwrap();
    let mut d2 = rd.reduced_data().to_vec();
    d2[z] = 1e-300;
    let m = msg(ReducedTable::from_parts(
        &kd,
        3,
        1.0,
        &quad,
        rd.reduced_entry_ids().to_vec(),
        d2,
    ));
    assert!(m.contains("zero by symmetry"), "{m}");
    assert!(red.get_entry_data(red.n_full_entries()).is_err());
}

use hipkern::nearfield::{FallbackDescriptors, LOOKUP_EMPTY};

/// The generated descriptor fallback, for every kernel (scalar, axis
/// derivatives and directional derivatives, which the arithmetic path
/// refuses), 2D q ≤ 4 and 3D q ≤ 3: every full entry's slot against the
/// dense oracle read here (representative = the oracle's root, sign = the
/// oracle's scale, the hash's row holds that representative); the maps are
/// the group's action; the hash holds each representative exactly once
/// and nothing else; sign corrections only in zero-by-symmetry orbits.
#[test]
fn fallback_slots_agree_with_the_oracle_for_every_entry() {
    for dim in [2usize, 3] {
        let qs: &[usize] = if dim == 2 { &[1, 2, 3, 4] } else { &[1, 2, 3] };
        let mut ks = kernels(dim);
        ks.extend(directional(dim));
        for k in &ks {
            for &q in qs {
                let f = FallbackDescriptors::prepare(k, q).unwrap();
                let o = DenseOrbits::build(k, q).unwrap();
                let cases = Cases::new(dim).unwrap();
                let group = kernel_group(k);
                let nq = q.pow(dim as u32);
                assert_eq!(f.n_transforms(), group.len());
                assert_eq!(f.n_rows(), o.n_representatives(), "{k:?} q={q}");
                // Maps: the transform's action on (c, s, t) as apply_to_entry.
                for (g, (perm, sg)) in group.iter().enumerate() {
                    assert_eq!(f.transform_signs[g], *sg);
                    for e in (0..cases.n_entries(q)).step_by(7) {
                        let (c, s, t) = (e / (nq * nq), (e / nq) % nq, e % nq);
                        let c2 = usize::from(f.transform_case_map[g * cases.len() + c]);
                        let s2 = usize::from(f.transform_qpoint_map[g * nq + s]);
                        let t2 = usize::from(f.transform_qpoint_map[g * nq + t]);
                        assert_eq!((c2 * nq + s2) * nq + t2, apply_to_entry(perm, &cases, q, e));
                    }
                }
                let mut keys: Vec<u32> = f
                    .representative_lookup_keys
                    .iter()
                    .copied()
                    .filter(|&k| k != LOOKUP_EMPTY)
                    .collect();
                keys.sort_unstable();
                assert_eq!(keys, o.representatives, "{k:?} q={q}");
                assert!(f.probe_count >= 1);
                for e in 0..o.canonical_entry_ids.len() {
                    let (c, s, t) = (e / (nq * nq), (e / nq) % nq, e % nq);
                    let slot = f.slot(c, s, t).unwrap();
                    let rep = o.canonical_entry_ids[e] as u32;
                    assert_eq!(slot.representative, rep, "{k:?} q={q} e={e}");
                    assert_eq!(f.representatives[slot.row as usize], rep);
                    assert_eq!(
                        f64::from(slot.sign),
                        o.canonical_scales[e],
                        "{k:?} q={q} e={e}"
                    );
                }
                for &id in &f.sign_lookup_ids {
                    let rep = o.canonical_entry_ids[id as usize] as u32;
                    let r = o.representatives.binary_search(&rep).unwrap();
                    assert!(
                        o.zero_by_symmetry[r],
                        "{k:?} q={q}: correction {id} outside a zero orbit"
                    );
                }
                assert!(f.slot(cases.len(), 0, 0).is_err());
                assert!(f.slot(0, nq, 0).is_err());
            }
        }
    }
}

/// The fallback's plan-time resolution table exists for every kernel of
/// the tables issue (the scalar and axis-derivative kernels, and the
/// directional derivatives along (0.7, 0.7) and (0.4, −0.4, 0.4)), 2D q =
/// 1..4 and 3D q = 1..3, and gives `slot`'s row and sign for every full
/// entry; each canonical case resolves through the identity; 3D Laplace
/// has 10 case orbits. The other directional derivatives have it too
/// unless their compact rows need more than 15 bits (a direction with
/// little symmetry at 3D q = 3). A sign correction that breaks the
/// identity gives `None`.
#[test]
fn fallback_resolution_agrees_with_slot_for_every_entry() {
    for dim in [2usize, 3] {
        let qs: &[usize] = if dim == 2 { &[1, 2, 3, 4] } else { &[1, 2, 3] };
        let mut ks = kernels(dim);
        let n_cases = Cases::new(dim).unwrap().len();
        let issue_dir: Vec<f64> = if dim == 2 {
            vec![0.7, 0.7]
        } else {
            vec![0.4, -0.4, 0.4]
        };
        let issue_dir = Kernel::laplace(dim)
            .unwrap()
            .directional_source_derivative(&issue_dir)
            .unwrap();
        let n_plain = ks.len();
        ks.extend(directional(dim));
        assert!(ks[n_plain..].contains(&issue_dir));
        for (i, k) in ks.iter().enumerate() {
            for &q in qs {
                let f = FallbackDescriptors::prepare(k, q).unwrap();
                let Some(r) = f.resolution() else {
                    assert!(
                        i >= n_plain && k != &issue_dir && f.n_rows() > 0x8000,
                        "{k:?} q={q}: no resolution ({} rows)",
                        f.n_rows()
                    );
                    eprintln!("{k:?} q={q}: {} rows, no resolution table", f.n_rows());
                    continue;
                };
                let nq = q.pow(dim as u32);
                assert_eq!(r.case_orbit.len(), n_cases);
                assert_eq!(r.case_transform.len(), n_cases);
                assert_eq!(r.rows.len(), r.n_orbits() * nq * nq);
                assert_eq!(r.bytes(), 2 * n_cases + 2 * r.rows.len());
                for c in 0..n_cases {
                    let h = usize::from(r.case_transform[c]);
                    assert!(h < f.n_transforms());
                    assert!(usize::from(r.case_orbit[c]) < r.n_orbits());
                    for s in 0..nq {
                        for t in 0..nq {
                            let slot = f.slot(c, s, t).unwrap();
                            assert_eq!(
                                r.slot(&f, c, s, t),
                                (slot.row, slot.sign),
                                "{k:?} q={q} entry ({c}, {s}, {t})"
                            );
                        }
                    }
                }
                // The canonical case of each orbit maps to itself by the
                // identity (transform 0).
                let mut seen = vec![false; r.n_orbits()];
                for c in 0..n_cases {
                    let o = usize::from(r.case_orbit[c]);
                    if !seen[o] && r.case_transform[c] == 0 {
                        seen[o] = true;
                    }
                }
                assert!(seen.iter().all(|&x| x), "{k:?} q={q}");
                if dim == 3 && k == &Kernel::laplace(3).unwrap() {
                    assert_eq!(r.n_orbits(), 10);
                }
            }
        }
    }
    // A correction on one entry of a case that is not canonical (and not
    // on its canonical image) breaks the identity: no table.
    let k = Kernel::laplace(2).unwrap();
    let mut f = FallbackDescriptors::prepare(&k, 2).unwrap();
    let r = f.resolution().unwrap();
    let c = (0..n_cases_of(2))
        .find(|&c| r.case_transform[c] != 0)
        .unwrap();
    let id = (c * 16) as u32;
    let sign = f.slot(c, 0, 0).unwrap().sign;
    let at = f.sign_lookup_ids.partition_point(|&x| x < id);
    assert!(f.sign_lookup_ids.get(at) != Some(&id));
    f.sign_lookup_ids.insert(at, id);
    f.sign_lookup_signs.insert(at, -sign);
    assert_eq!(f.slot(c, 0, 0).unwrap().sign, -sign);
    assert!(f.resolution().is_none());
}

fn n_cases_of(dim: usize) -> usize {
    Cases::new(dim).unwrap().len()
}

/// A wrong descriptor is caught at payload preparation: each mutation of
/// a valid fallback (a transform's sign flipped, a map entry moved, a hash
/// row changed) fails `validate` against the oracle, naming an entry.
#[test]
fn fallback_validation_catches_wrong_descriptors() {
    let k = Kernel::laplace(2)
        .unwrap()
        .directional_source_derivative(&[0.7, 0.7])
        .unwrap();
    let q = 3;
    let f = FallbackDescriptors::prepare(&k, q).unwrap();
    let o = DenseOrbits::build(&k, q).unwrap();
    f.validate(&o).unwrap();
    assert!(f.n_transforms() > 1);
    let mut bad = f.clone();
    bad.transform_signs[1] = -bad.transform_signs[1];
    let e = bad.validate(&o).unwrap_err().to_string();
    assert!(e.contains("entry") && e.contains("oracle"), "{e}");
    let mut bad = f.clone();
    let nq = q * q;
    bad.transform_qpoint_map.swap(nq, nq + 1);
    assert!(bad.validate(&o).is_err());
    let mut bad = f.clone();
    let k0 = bad
        .representative_lookup_keys
        .iter()
        .position(|&x| x != LOOKUP_EMPTY)
        .unwrap();
    bad.representative_lookup_rows[k0] ^= 1;
    assert!(bad.validate(&o).is_err());
    let mut bad = f;
    bad.probe_count = 0;
    assert!(bad.validate(&o).unwrap_err().to_string().contains("probes"));
}

/// Sizes for the issue note: 3D q = 3 scalar Laplace and a directional
/// derivative; the fallback's metadata against the dense maps' bytes.
#[test]
fn fallback_sizes_3d_q3() {
    let k = Kernel::laplace(3).unwrap();
    let f = FallbackDescriptors::prepare(&k, 3).unwrap();
    let o = DenseOrbits::build(&k, 3).unwrap();
    assert_eq!(f.n_rows(), 2510);
    assert_eq!(f.n_transforms(), 48);
    assert!(
        f.metadata_bytes() < o.dense_map_bytes() / 10,
        "{}",
        f.metadata_bytes()
    );
    assert!(f.sign_lookup_ids.is_empty());
    println!(
        "3D q=3 Laplace fallback: {} bytes, probe count {}, dense maps {} bytes",
        f.metadata_bytes(),
        f.probe_count,
        o.dense_map_bytes()
    );
}

/// The (case, target point, group element) triples whose image target
/// point is not bit for bit the group's image of the target point (`L =
/// 1`; a mirror `x ↦ 1 − x` checked exactly by TwoSum), and the number of
/// triples.
fn inexact_target_images(k: &Kernel, q: usize) -> (usize, usize) {
    let d = k.dim();
    let cases = Cases::new(d).unwrap();
    let group = kernel_group(k);
    let nq = q.pow(d as u32);
    let points: Vec<Vec<f64>> = (0..cases.len())
        .map(|c| cases.target_points(c, q, 1.0).unwrap())
        .collect();
    let mut bad = 0;
    let mut total = 0;
    for (c, pts) in points.iter().enumerate() {
        for t in 0..nq {
            let x = &pts[t * d..(t + 1) * d];
            for (g, _) in &group {
                let f = apply_to_entry(g, &cases, q, (c * nq) * nq + t);
                let (c2, t2) = (f / (nq * nq), f % nq);
                let y = &points[c2][t2 * d..(t2 + 1) * d];
                let exact = (0..d).all(|a| {
                    let xs = x[usize::from(g.perm[a])];
                    if g.sign[a] > 0 {
                        y[a] == xs
                    } else {
                        let s = y[a] + xs;
                        let bb = s - y[a];
                        s == 1.0 && (y[a] - (s - bb)) + (xs - bb) == 0.0
                    }
                });
                total += 1;
                bad += usize::from(!exact);
            }
        }
    }
    (bad, total)
}

/// Measurement for `check_reduced`'s note: the worst reconstruction error
/// per kernel and order, with the time of the dense and reduced builds and
/// the count of inexact target images. `HIPKERN_PROBE` picks the set:
/// `2d` (every kernel, q = 2..4, default orders; the default), `3d` (every
/// kernel, q = 2, radial level 3, angular order 8), `3d-default` (the
/// scalar and axis kernels, q = 2, default orders; about 2 minutes on 2
/// cores), `3d-q3` (Laplace, ∂/∂x₂ and a directional derivative, q = 3,
/// level 3, order 8), `3d-q3-default` (Laplace, q = 3, default orders;
/// about 1.5 minutes on 2 cores). Run with `--ignored --nocapture`.
#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn measure_reduced_errors() {
    let set = std::env::var("HIPKERN_PROBE").unwrap_or_else(|_| "2d".into());
    let cheap = EntryQuadrature {
        radial_level: 3,
        angular_order: 8,
    };
    let list: Vec<(Kernel, usize, EntryQuadrature)> = match set.as_str() {
        "2d" => kernels(2)
            .into_iter()
            .chain(directional(2))
            .flat_map(|k| (2..=4).map(move |q| (k.clone(), q, EntryQuadrature::default())))
            .collect(),
        "3d" => kernels(3)
            .into_iter()
            .chain(directional(3))
            .map(|k| (k, 2, cheap))
            .collect(),
        "3d-default" => kernels(3)
            .into_iter()
            .map(|k| (k, 2, EntryQuadrature::default()))
            .collect(),
        "3d-q3" => {
            let l = Kernel::laplace(3).unwrap();
            vec![
                (l.clone(), 3, cheap),
                (l.clone().axis_target_derivative(2).unwrap(), 3, cheap),
                (
                    l.directional_source_derivative(&[0.4, -0.4, 0.4]).unwrap(),
                    3,
                    cheap,
                ),
            ]
        }
        "3d-q3-default" => vec![(Kernel::laplace(3).unwrap(), 3, EntryQuadrature::default())],
        other => {
            panic!("HIPKERN_PROBE={other}: expected 2d, 3d, 3d-default, 3d-q3 or 3d-q3-default")
        }
    };
    for (k, q, quad) in list {
        let t0 = std::time::Instant::now();
        let (worst, _) = check_reduced(&k, q, &quad);
        let dt = t0.elapsed().as_secs_f64();
        let (bad, total) = inexact_target_images(&k, q);
        eprintln!(
            "{}D q={q} {:?} {:?}: worst {worst:.2e} ({dt:.2} s), inexact target images {bad}/{total}",
            k.dim(),
            k.base(),
            k.derivative(),
        );
    }
}
