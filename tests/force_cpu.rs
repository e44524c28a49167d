//! Force/virial assembly, CPU paths: the plan-based segment reduction
//! against the float64 edge-loop reference on fresh random inputs, physics
//! identities, ghost folding, validation.
use hipkern::force::{
    assemble_reference_f64, assemble_with_plan, frame_virials, voigt, CsrPlan, Frames,
    GhostMapping, VirialSplit,
};
use hipkern::Error;

use hipkern::rng::SplitMix64 as Rng;

mod common;

/// All atoms are centres, every 17th isolated; int64 indices (the CPU
/// paths take int32 or int64).
fn system(
    rng: &mut Rng,
    n_ext: usize,
    per_atom: usize,
) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>) {
    let (src, dst, g, r) = common::edge_system(rng, n_ext, n_ext, per_atom, Some(17));
    let wide = |v: Vec<i32>| v.into_iter().map(i64::from).collect();
    (wide(src), wide(dst), g, r)
}

fn assert_close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_close_floor(what, got, want, rel, 1e-300);
}

/// As [`assert_close`], the scale at least `floor`: for results that can
/// cancel to exactly zero (one atom whose every edge is a self-edge: the
/// reference adds and subtracts each g, the plan sums the dst segment, then
/// the src one), the magnitude of the terms summed.
fn assert_close_floor(what: &str, got: &[f64], want: &[f64], rel: f64, floor: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(floor);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.is_finite(), "{what}[{i}] = {a}");
        assert!(
            (a - b).abs() <= rel * scale,
            "{what}[{i}]: {a} vs {b} (scale {scale})"
        );
    }
}

#[test]
fn plan_reduction_matches_the_f64_reference_on_random_systems() {
    let mut rng = Rng::from_clock();
    for &(n, per) in &[(1usize, 3usize), (7, 5), (700, 70), (3000, 40)] {
        let (src, dst, g, r) = system(&mut rng, n, per);
        let plan = CsrPlan::build(&src, &dst, n, None).unwrap();
        let max = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let (gm, rm) = (max(&g), max(&r));
        for split in [VirialSplit::Half, VirialSplit::Src] {
            let want = assemble_reference_f64(&g, &r, &src, &dst, n, None, split).unwrap();
            let got = assemble_with_plan(&plan, &g, &r, split).unwrap();
            assert_close_floor("force", &got.force, &want.force, 1e-13, gm);
            assert_close_floor("virial", &got.virial, &want.virial, 1e-13, gm * rm);
            // Bitwise reproducible.
            assert_eq!(got, assemble_with_plan(&plan, &g, &r, split).unwrap());
        }
    }
}

#[test]
fn hand_computed_two_edge_example() {
    // Edge 0: src 1 -> dst 0, edge 1: src 2 -> dst 0.
    let src = [1i32, 2];
    let dst = [0i32, 0];
    let g = [1.0, 2.0, 3.0, -1.0, 0.0, 0.5];
    let r = [0.5, 0.0, -1.0, 2.0, 1.0, 0.0];
    let a = assemble_reference_f64(&g, &r, &src, &dst, 3, None, VirialSplit::Half).unwrap();
    assert_eq!(&a.force[..3], &[0.0, 2.0, 3.5]);
    assert_eq!(&a.force[3..6], &[-1.0, -2.0, -3.0]);
    assert_eq!(&a.force[6..9], &[1.0, 0.0, -0.5]);
    // W_1 = ½ (−g0 ⊗ r0): row a = −½ g0[a] r0[b].
    let w1: Vec<f64> = (0..9).map(|i| -0.5 * g[i / 3] * r[i % 3]).collect();
    assert_eq!(&a.virial[9..18], &w1[..]);
    let plan = CsrPlan::build(&src, &dst, 3, None).unwrap();
    assert_eq!(plan.dst_order(), &[0, 1]);
    assert_eq!(plan.dst_row_ptr(), &[0, 2, 2, 2]);
    assert_eq!(plan.src_order(), &[0, 1]);
    assert_eq!(plan.src_row_ptr(), &[0, 0, 1, 2]);
    assert_eq!(
        assemble_with_plan(&plan, &g, &r, VirialSplit::Half).unwrap(),
        a
    );
}

#[test]
fn forces_sum_to_zero_and_virial_totals_do_not_depend_on_the_split() {
    let mut rng = Rng::from_clock();
    let (src, dst, g, r) = system(&mut rng, 500, 30);
    let plan = CsrPlan::build(&src, &dst, 500, None).unwrap();
    let half = assemble_with_plan(&plan, &g, &r, VirialSplit::Half).unwrap();
    let all_src = assemble_with_plan(&plan, &g, &r, VirialSplit::Src).unwrap();
    let gmax = g.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for a in 0..3 {
        let s: f64 = half.force.iter().skip(a).step_by(3).sum();
        assert!(s.abs() <= 1e-12 * gmax * src.len() as f64, "ΣF[{a}] = {s}");
    }
    let th = frame_virials(&half.virial, Frames::Size(500)).unwrap()[0];
    let ts = frame_virials(&all_src.virial, Frames::Size(500)).unwrap()[0];
    let mut direct = [0.0f64; 9];
    for e in 0..src.len() {
        for c in 0..9 {
            direct[c] += -g[3 * e + c / 3] * r[3 * e + c % 3];
        }
    }
    assert_close("total virial (half)", &th, &direct, 1e-12);
    assert_close("total virial (src)", &ts, &direct, 1e-12);
}

#[test]
fn ghost_folding_equals_folding_the_extended_result() {
    let mut rng = Rng::from_clock();
    let (n_local, n_ext) = (300usize, 450usize);
    let mapping: Vec<i64> = (0..n_ext)
        .map(|k| {
            if k < n_local {
                k as i64
            } else {
                rng.below(n_local) as i64
            }
        })
        .collect();
    let (src, dst, g, r) = system(&mut rng, n_ext, 20);
    let ghosts = Some(GhostMapping {
        mapping: &mapping,
        n_local,
    });
    for split in [VirialSplit::Half, VirialSplit::Src] {
        let ext = assemble_reference_f64(&g, &r, &src, &dst, n_ext, None, split).unwrap();
        let mut fold_f = vec![0.0; 3 * n_local];
        let mut fold_w = vec![0.0; 9 * n_local];
        for (k, &m) in mapping.iter().enumerate() {
            let m = m as usize;
            (0..3).for_each(|c| fold_f[3 * m + c] += ext.force[3 * k + c]);
            (0..9).for_each(|c| fold_w[9 * m + c] += ext.virial[9 * k + c]);
        }
        let plan = CsrPlan::build(&src, &dst, n_ext, ghosts).unwrap();
        assert_eq!(plan.n_rows(), n_local);
        let got = assemble_with_plan(&plan, &g, &r, split).unwrap();
        assert_close("folded force", &got.force, &fold_f, 1e-13);
        assert_close("folded virial", &got.virial, &fold_w, 1e-13);
        let refm = assemble_reference_f64(&g, &r, &src, &dst, n_ext, ghosts, split).unwrap();
        assert_close("folded reference", &refm.force, &fold_f, 1e-13);
    }
}

#[test]
fn no_edges_and_isolated_atoms_give_exact_zeros() {
    let empty: [i64; 0] = [];
    let plan = CsrPlan::build(&empty, &empty, 5, None).unwrap();
    let a = assemble_with_plan::<f64>(&plan, &[], &[], VirialSplit::Half).unwrap();
    assert!(a.force.iter().chain(&a.virial).all(|x| x.to_bits() == 0));
    assert_eq!(a.force.len(), 15);
    let plan = CsrPlan::build(&[0i32], &[1i32], 4, None).unwrap();
    let a = assemble_with_plan(
        &plan,
        &[1.0f32, 2.0, 3.0],
        &[1.0, 1.0, 1.0],
        VirialSplit::Half,
    )
    .unwrap();
    for k in [2usize, 3] {
        assert!(a.force[3 * k..3 * k + 3]
            .iter()
            .chain(&a.virial[9 * k..9 * k + 9])
            .all(|x| x.to_bits() == 0));
    }
}

#[test]
fn nan_in_one_edge_reaches_only_its_endpoints() {
    let mut rng = Rng::from_clock();
    let (src, dst, mut g, r) = system(&mut rng, 200, 10);
    let bad = src.len() / 2;
    g[3 * bad + 1] = f64::NAN;
    let plan = CsrPlan::build(&src, &dst, 200, None).unwrap();
    for split in [VirialSplit::Half, VirialSplit::Src] {
        let a = assemble_with_plan(&plan, &g, &r, split).unwrap();
        let want = assemble_reference_f64(&g, &r, &src, &dst, 200, None, split).unwrap();
        let touched = [src[bad] as usize, dst[bad] as usize];
        for k in 0..200 {
            let f_nan = a.force[3 * k..3 * k + 3].iter().any(|x| x.is_nan());
            assert_eq!(f_nan, touched.contains(&k), "force row {k}");
            let w_nan = a.virial[9 * k..9 * k + 9].iter().any(|x| x.is_nan());
            let w_touched = match split {
                VirialSplit::Half => touched.contains(&k),
                VirialSplit::Src => k == touched[0],
            };
            assert_eq!(w_nan, w_touched, "virial row {k} ({split:?})");
            let wr = want.virial[9 * k..9 * k + 9].iter().any(|x| x.is_nan());
            assert_eq!(w_nan, wr, "reference agrees on row {k}");
        }
    }
}

#[test]
fn f32_inputs_are_accumulated_in_f64() {
    let mut rng = Rng::from_clock();
    let (src, dst, g, r) = system(&mut rng, 400, 50);
    let g32: Vec<f32> = g.iter().map(|&x| x as f32).collect();
    let r32: Vec<f32> = r.iter().map(|&x| x as f32).collect();
    let g64: Vec<f64> = g32.iter().map(|&x| x as f64).collect();
    let r64: Vec<f64> = r32.iter().map(|&x| x as f64).collect();
    let plan = CsrPlan::build(&src, &dst, 400, None).unwrap();
    let a = assemble_with_plan(&plan, &g32, &r32, VirialSplit::Half).unwrap();
    let want =
        assemble_reference_f64(&g64, &r64, &src, &dst, 400, None, VirialSplit::Half).unwrap();
    assert_close("force f32", &a.force, &want.force, 1e-13);
    assert_close("virial f32", &a.virial, &want.virial, 1e-13);
}

fn invalid(r: Result<impl std::fmt::Debug, Error>) -> String {
    match r {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn bad_indices_and_lengths_are_named_errors() {
    let m = invalid(CsrPlan::build(&[0i64, 1, 5], &[1i64, 0, 0], 5, None));
    assert!(m.contains("src[2] = 5") && m.contains("n_ext = 5"), "{m}");
    let m = invalid(CsrPlan::build(&[0i64, 1], &[1i64, -1], 5, None));
    assert!(m.contains("dst[1] = -1"), "{m}");
    let m = invalid(CsrPlan::build(&[0i64, 1], &[1i64], 5, None));
    assert!(m.contains("src has 2") && m.contains("dst has 1"), "{m}");
    let mapping = [0i64, 1, 2, 1];
    let m = invalid(CsrPlan::build(
        &[0i64],
        &[3i64],
        4,
        Some(GhostMapping {
            mapping: &mapping,
            n_local: 2,
        }),
    ));
    assert!(
        m.contains("mapping[2] = 2") && m.contains("n_local = 2"),
        "{m}"
    );
    let m = invalid(CsrPlan::build(
        &[0i64],
        &[3i64],
        4,
        Some(GhostMapping {
            mapping: &mapping[..3],
            n_local: 3,
        }),
    ));
    assert!(m.contains("mapping has 3"), "{m}");
    let plan = CsrPlan::build(&[0i32, 1], &[1i32, 0], 2, None).unwrap();
    let m = invalid(assemble_with_plan(
        &plan,
        &[0.0f64; 5],
        &[0.0; 6],
        VirialSplit::Half,
    ));
    assert!(m.contains("g has 5 values"), "{m}");
    let m = invalid(assemble_with_plan(
        &plan,
        &[0.0f64; 6],
        &[0.0; 7],
        VirialSplit::Half,
    ));
    assert!(m.contains("edge_vec has 7"), "{m}");
    let m = invalid(assemble_reference_f64(
        &[0.0f64; 6],
        &[0.0; 6],
        &[0i32, 9],
        &[1i32, 0],
        2,
        None,
        VirialSplit::Half,
    ));
    assert!(m.contains("src[1] = 9"), "{m}");
}

#[test]
fn from_parts_validates_and_round_trips() {
    let mut rng = Rng::from_clock();
    let (src, dst, _, _) = system(&mut rng, 50, 6);
    let p = CsrPlan::build(&src, &dst, 50, None).unwrap();
    let e = p.n_edges();
    let q = CsrPlan::from_parts(
        e,
        p.dst_order().to_vec(),
        p.dst_row_ptr().to_vec(),
        p.src_order().to_vec(),
        p.src_row_ptr().to_vec(),
    )
    .unwrap();
    assert_eq!(p, q);
    type Edit<'a> = &'a dyn Fn(&mut Vec<i32>, &mut Vec<i32>, &mut Vec<i32>, &mut Vec<i32>);
    let parts = |f: Edit| {
        let (mut a, mut b, mut c, mut d) = (
            p.dst_order().to_vec(),
            p.dst_row_ptr().to_vec(),
            p.src_order().to_vec(),
            p.src_row_ptr().to_vec(),
        );
        f(&mut a, &mut b, &mut c, &mut d);
        invalid(CsrPlan::from_parts(e, a, b, c, d))
    };
    let i = p.dst_row_ptr().iter().position(|&x| x > 0).unwrap();
    let m = parts(&|_, b, _, _| {
        b[i] = b[i + 1] + 1;
    });
    assert!(m.contains("dst_row_ptr is not monotone"), "{m}");
    // Ends one short of E, still monotone (trailing empty rows, which the
    // random system may have, end one short too).
    let m = parts(&|_, _, _, d| {
        let short = d[d.len() - 1] - 1;
        for x in d.iter_mut() {
            *x = (*x).min(short);
        }
    });
    assert!(m.contains("src_row_ptr ends at"), "{m}");
    let m = parts(&|_, _, _, d| {
        d.pop();
    });
    assert!(m.contains("entries but src_row_ptr"), "{m}");
    let m = parts(&|a, _, _, _| {
        a[1] = a[0];
    });
    assert!(m.contains("a second time"), "{m}");
    let m = parts(&|_, _, c, _| {
        c[0] = e as i32;
    });
    assert!(
        m.contains("src_order[0]") && m.contains("out of range"),
        "{m}"
    );
    let m = parts(&|_, b, _, _| {
        b[0] = 1;
    });
    assert!(m.contains("dst_row_ptr[0] = 1"), "{m}");
}

#[test]
fn frame_totals_and_voigt_order() {
    let virial: Vec<f64> = (0..36).map(|i| i as f64).collect();
    let by_size = frame_virials(&virial, Frames::Size(2)).unwrap();
    assert_eq!(by_size.len(), 2);
    assert_eq!(by_size[0][0], 0.0 + 9.0);
    let ids = [1i64, 0, 1, 0];
    let by_id = frame_virials(
        &virial,
        Frames::Ids {
            frame_of: &ids,
            n_frames: 2,
        },
    )
    .unwrap();
    assert_eq!(by_id[1][4], 4.0 + 22.0);
    assert!(frame_virials(&virial, Frames::Size(3)).is_err());
    assert!(frame_virials(
        &virial,
        Frames::Ids {
            frame_of: &[0, 0, 2, 0],
            n_frames: 2
        }
    )
    .is_err());
    let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    assert_eq!(voigt(&w), [1.0, 5.0, 9.0, 2.0, 3.0, 6.0]);
}
