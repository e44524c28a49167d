//! Near-field interaction cases, Gauss–Legendre nodes and target points
//! (CPU, always run).

use hipkern::nearfield::{
    gauss_legendre, legendre_gauss_unit, q_points, CaseKind, Cases, CASE_ENCODING_BASE,
    CASE_ENCODING_SHIFT, MAX_QUAD_ORDER,
};
use hipkern::Error;

fn kind_counts(cases: &Cases) -> [usize; 3] {
    let mut n = [0; 3];
    for id in 0..cases.len() {
        n[match cases.kind(id) {
            CaseKind::SameSize => 0,
            CaseKind::TargetSmaller => 1,
            CaseKind::TargetLarger => 2,
        }] += 1;
    }
    n
}

fn message(r: hipkern::Result<usize>) -> String {
    match r {
        Err(Error::InvalidInput(s)) => s,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn counts_per_dimension_and_kind() {
    let c2 = Cases::new(2).unwrap();
    assert_eq!(c2.len(), 33);
    assert_eq!(kind_counts(&c2), [9, 12, 12]);
    let c3 = Cases::new(3).unwrap();
    assert_eq!(c3.len(), 139);
    assert_eq!(kind_counts(&c3), [27, 56, 56]);
    for dim in [0, 1, 4] {
        assert!(matches!(Cases::new(dim), Err(Error::InvalidInput(_))));
    }
}

#[test]
fn kinds_follow_the_vectors() {
    for dim in [2, 3] {
        let cases = Cases::new(dim).unwrap();
        for id in 0..cases.len() {
            let v = cases.vector(id);
            let max = v.iter().map(|c| c.abs()).max().unwrap();
            let (kind, allowed): (CaseKind, &[i32]) = match max {
                0 | 4 => (CaseKind::SameSize, &[0, 4]),
                3 => (CaseKind::TargetSmaller, &[1, 3]),
                6 => (CaseKind::TargetLarger, &[2, 6]),
                _ => panic!("case {id} has vector {v:?}"),
            };
            assert_eq!(cases.kind(id), kind, "case {id} {v:?}");
            assert!(v.iter().all(|c| allowed.contains(&c.abs())), "{v:?}");
            let size = if max == 0 {
                1.0
            } else {
                f64::from(max - 2) / 2.0
            };
            assert_eq!(kind.target_size_ratio(), size);
        }
    }
}

#[test]
fn ids_sorted_by_code_and_round_trips() {
    for dim in [2, 3] {
        let cases = Cases::new(dim).unwrap();
        for id in 0..cases.len() {
            let v = cases.vector(id).to_vec();
            // Horner of c_k + 6 in base 13, first component most significant.
            let code = v.iter().fold(0usize, |acc, &c| {
                acc * CASE_ENCODING_BASE + (c + CASE_ENCODING_SHIFT) as usize
            });
            assert_eq!(cases.code(id), code);
            assert_eq!(cases.encode(&v), Some(code));
            assert_eq!(cases.id_of_vector(&v), Some(id));
            assert_eq!(cases.id_of_code(code), Some(id));
            if id > 0 {
                assert!(cases.code(id - 1) < cases.code(id));
                // Sorted by code is lexicographic order of the vectors.
                assert!(cases.vector(id - 1) < cases.vector(id));
            }
        }
        assert_eq!(cases.vector(cases.self_case()), vec![0; dim].as_slice());
        assert_eq!(cases.id_of_vector(&vec![1; dim]), None);
        assert_eq!(cases.id_of_vector(&vec![7; dim]), None);
        assert_eq!(cases.id_of_vector(&[0]), None);
    }
    // Known positions: 2D ids run (−6,−6), (−6,−2), (−6,2), (−6,6), (−4,−4), …
    let c2 = Cases::new(2).unwrap();
    assert_eq!(c2.vector(0), &[-6, -6]);
    assert_eq!(c2.vector(1), &[-6, -2]);
    assert_eq!(c2.vector(4), &[-4, -4]);
    assert_eq!(c2.vector(c2.len() - 1), &[6, 6]);
    assert_eq!(c2.self_case(), 16);
    assert_eq!(c2.code(c2.self_case()), 6 * 13 + 6);
    let c3 = Cases::new(3).unwrap();
    assert_eq!(c3.self_case(), 69);
}

#[test]
fn case_indices_is_the_code_lookup() {
    for dim in [2usize, 3] {
        let cases = Cases::new(dim).unwrap();
        let ci = cases.case_indices();
        assert_eq!(ci.len(), 13usize.pow(dim as u32));
        assert_eq!(ci.iter().filter(|&&x| x >= 0).count(), cases.len());
        assert!(ci.iter().all(|&x| x >= -1 && x < cases.len() as i32));
        for id in 0..cases.len() {
            assert_eq!(ci[cases.code(id)], id as i32);
        }
        // Every code with an id is a case's code (and ids increase with codes).
        let ids: Vec<i32> = ci.iter().copied().filter(|&x| x >= 0).collect();
        assert_eq!(ids, (0..cases.len() as i32).collect::<Vec<_>>());
    }
}

#[test]
fn entry_ids() {
    let cases = Cases::new(3).unwrap();
    let q = 3;
    assert_eq!(cases.n_entries(q), 139 * 729);
    assert_eq!(cases.entry_id(0, 0, 0, q).unwrap(), 0);
    assert_eq!(cases.entry_id(5, 7, 11, q).unwrap(), 5 * 729 + 7 * 27 + 11);
    assert_eq!(
        cases.entry_id(138, 26, 26, q).unwrap(),
        cases.n_entries(q) - 1
    );
    assert!(cases.entry_id(139, 0, 0, q).is_err());
    assert!(cases.entry_id(0, 27, 0, q).is_err());
    assert!(cases.entry_id(0, 0, 27, q).is_err());
    assert!(cases.entry_id(0, 0, 0, 0).is_err());
}

/// Builds the pair of every case and maps it back.
#[test]
fn pair_to_case_on_every_case() {
    for dim in [2, 3] {
        let cases = Cases::new(dim).unwrap();
        // Non-dyadic sizes and centres, so the comparisons need the tolerance.
        for (h_s, cs) in [
            (0.37, [0.1, -0.2, 0.3]),
            (1.0, [0.5, 0.5, 0.5]),
            (3e-7, [1.3, 7.1, -2.9]),
        ] {
            let cs = &cs[..dim];
            for id in 0..cases.len() {
                let c = cases.vector(id);
                let h_t = cases.kind(id).target_size_ratio() * h_s;
                let ct: Vec<f64> = (0..dim)
                    .map(|k| cs[k] + f64::from(c[k]) * h_s / 4.0)
                    .collect();
                assert_eq!(
                    cases.case_of_pair(&ct, h_t, cs, h_s).unwrap(),
                    id,
                    "case {id} {c:?} h_s {h_s}"
                );
            }
        }
    }
}

/// A box of a tree over `[origin, origin + extent]^dim`: level and integer
/// coordinates on that level's grid.
#[derive(Clone, Copy, Debug, PartialEq)]
struct TreeBox {
    level: u32,
    idx: [i64; 3],
}

const MAX_LEVEL: u32 = 5;

impl TreeBox {
    /// Closed extent on the finest grid, per axis.
    fn span(&self, k: usize) -> (i64, i64) {
        let w = 1i64 << (MAX_LEVEL - self.level);
        (self.idx[k] * w, (self.idx[k] + 1) * w)
    }
    fn children(&self, dim: usize) -> Vec<TreeBox> {
        (0..1usize << dim)
            .map(|bits| {
                let mut idx = [0; 3];
                for (k, x) in idx.iter_mut().enumerate().take(dim) {
                    *x = 2 * self.idx[k] + ((bits >> k) & 1) as i64;
                }
                TreeBox {
                    level: self.level + 1,
                    idx,
                }
            })
            .collect()
    }
}

/// Closed boxes intersect, interiors do not (for distinct leaves).
fn touching(a: &TreeBox, b: &TreeBox, dim: usize) -> bool {
    a != b
        && (0..dim).all(|k| {
            let (a0, a1) = a.span(k);
            let (b0, b1) = b.span(k);
            a0 <= b1 && b0 <= a1
        })
}

/// A 2:1-balanced tree refined towards a point near one corner, then
/// balanced by splitting the coarser box of any touching pair two or more
/// levels apart.
fn balanced_leaves(dim: usize, depth: u32) -> Vec<TreeBox> {
    let target = [0.3, 0.55, 0.45]; // in units of the root
    let contains = |b: &TreeBox| {
        (0..dim).all(|k| {
            let (lo, hi) = b.span(k);
            let s = (1i64 << MAX_LEVEL) as f64;
            lo as f64 <= target[k] * s && target[k] * s <= hi as f64
        })
    };
    let mut leaves = vec![TreeBox {
        level: 0,
        idx: [0; 3],
    }];
    loop {
        let split: Vec<usize> = (0..leaves.len())
            .filter(|&i| leaves[i].level < depth && contains(&leaves[i]))
            .collect();
        if split.is_empty() {
            break;
        }
        for &i in split.iter().rev() {
            let b = leaves.swap_remove(i);
            leaves.extend(b.children(dim));
        }
    }
    loop {
        let mut bad = None;
        'outer: for i in 0..leaves.len() {
            for j in 0..leaves.len() {
                if leaves[i].level + 1 < leaves[j].level && touching(&leaves[i], &leaves[j], dim) {
                    bad = Some(i);
                    break 'outer;
                }
            }
        }
        match bad {
            Some(i) => {
                let b = leaves.swap_remove(i);
                leaves.extend(b.children(dim));
            }
            None => break,
        }
    }
    leaves
}

#[test]
fn pair_to_case_on_a_balanced_tree() {
    for (dim, depth) in [(2usize, 5u32), (3, 4)] {
        let cases = Cases::new(dim).unwrap();
        let leaves = balanced_leaves(dim, depth);
        assert!(leaves.iter().any(|b| b.level == depth));
        // A root that is neither at the origin nor of dyadic extent.
        let origin = [-0.3, 0.17, 1.1];
        let extent = 0.7;
        let centre = |b: &TreeBox| -> Vec<f64> {
            let h = extent / f64::from(1u32 << b.level);
            (0..dim)
                .map(|k| origin[k] + (b.idx[k] as f64 + 0.5) * h)
                .collect()
        };
        let size = |b: &TreeBox| extent / f64::from(1u32 << b.level);
        let mut seen = vec![false; cases.len()];
        let mut n_pairs = 0;
        for t in &leaves {
            for s in &leaves {
                if !(t == s || touching(t, s, dim)) {
                    continue;
                }
                let lt = i64::from(t.level);
                let ls = i64::from(s.level);
                assert!((lt - ls).abs() <= 1, "tree not balanced");
                // Expected vector, exactly: 4(ct − cs)/h_s on the finest grid.
                let ws = 1i64 << (MAX_LEVEL - s.level);
                let wt = 1i64 << (MAX_LEVEL - t.level);
                let v: Vec<i32> = (0..dim)
                    .map(|k| {
                        let num = 2 * ((2 * t.idx[k] + 1) * wt - (2 * s.idx[k] + 1) * ws);
                        assert_eq!(num % ws, 0);
                        (num / ws) as i32
                    })
                    .collect();
                let expected = cases
                    .id_of_vector(&v)
                    .unwrap_or_else(|| panic!("{v:?} from {t:?} {s:?} is no case"));
                let got = cases
                    .case_of_pair(&centre(t), size(t), &centre(s), size(s))
                    .unwrap();
                assert_eq!(got, expected, "{t:?} {s:?}");
                let kind = match lt - ls {
                    0 => CaseKind::SameSize,
                    1 => CaseKind::TargetSmaller,
                    _ => CaseKind::TargetLarger,
                };
                assert_eq!(cases.kind(got), kind);
                seen[got] = true;
                n_pairs += 1;
            }
        }
        assert!(n_pairs > leaves.len());
        for kind in [
            CaseKind::SameSize,
            CaseKind::TargetSmaller,
            CaseKind::TargetLarger,
        ] {
            assert!(
                (0..cases.len()).any(|id| seen[id] && cases.kind(id) == kind),
                "no {kind:?} pair in the {dim}D tree"
            );
        }
        if dim == 2 {
            assert!(seen.iter().all(|&s| s), "2D tree misses a case");
        }
        // A parent with its child: overlapping, rejected.
        let p = leaves.iter().find(|b| b.level == 2).unwrap();
        let child = p.children(dim)[0];
        let m = message(cases.case_of_pair(&centre(&child), size(&child), &centre(p), size(p)));
        assert!(m.contains("overlap"), "{m}");
    }
}

#[test]
fn rejected_pairs() {
    let cases = Cases::new(2).unwrap();
    let h = 0.25;
    let cs = [0.125, 0.375];
    let at = |dx: f64, dy: f64| [cs[0] + dx * h, cs[1] + dy * h];

    let m = message(cases.case_of_pair(&at(2.0, 0.0), h, &cs, h));
    assert!(m.contains("do not touch"), "{m}");
    let m = message(cases.case_of_pair(&at(1.0, 1.5), h, &cs, h));
    assert!(m.contains("do not touch"), "{m}");

    // Target a quarter of the source, touching geometrically.
    let m = message(cases.case_of_pair(&at(0.625, 0.0), h / 4.0, &cs, h));
    assert!(m.contains("level difference 2"), "{m}");
    let m = message(cases.case_of_pair(&at(2.5, 0.0), 4.0 * h, &cs, h));
    assert!(m.contains("level difference 2"), "{m}");
    let m = message(cases.case_of_pair(&at(1.0, 0.0), 0.7 * h, &cs, h));
    assert!(m.contains("not a power of two"), "{m}");

    // Same size shifted by half a box; a small box inside a large one.
    let m = message(cases.case_of_pair(&at(0.5, 0.0), h, &cs, h));
    assert!(m.contains("overlap"), "{m}");
    let m = message(cases.case_of_pair(&at(0.25, 0.25), h / 2.0, &cs, h));
    assert!(m.contains("overlap"), "{m}");
    let m = message(cases.case_of_pair(&at(0.0, 0.0), h / 2.0, &cs, h));
    assert!(m.contains("overlap"), "{m}");

    // Touching, but misaligned by a quarter or a half box.
    let m = message(cases.case_of_pair(&at(1.0, 0.25), h, &cs, h));
    assert!(m.contains("not aligned"), "{m}");
    let m = message(cases.case_of_pair(&at(1.0, 0.5), h, &cs, h));
    assert!(m.contains("not aligned"), "{m}");
    let m = message(cases.case_of_pair(&at(1.0, 0.1), h, &cs, h));
    assert!(m.contains("not aligned"), "{m}");

    // Bad input.
    assert!(message(cases.case_of_pair(&[0.0; 3], h, &cs, h)).contains("components"));
    assert!(message(cases.case_of_pair(&at(1.0, 0.0), 0.0, &cs, h)).contains("positive"));
    assert!(message(cases.case_of_pair(&at(1.0, 0.0), h, &cs, f64::NAN)).contains("positive"));
    assert!(message(cases.case_of_pair(&[f64::NAN, 0.0], h, &cs, h)).contains("not finite"));

    // Within the tolerance (relative to h_s) is accepted, beyond it is not.
    let id = cases.id_of_vector(&[4, 0]).unwrap();
    assert_eq!(
        cases.case_of_pair(&at(1.0 + 1e-9, 0.0), h, &cs, h).unwrap(),
        id
    );
    assert!(cases.case_of_pair(&at(1.0 + 1e-5, 0.0), h, &cs, h).is_err());
}

#[test]
fn gauss_legendre_known_values() {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-15;
    for l in [1.0, 2.0, 0.3] {
        let (x, w) = gauss_legendre(1, l).unwrap();
        assert_eq!((x[0], w[0]), (l / 2.0, l));
        let (x, w) = gauss_legendre(2, l).unwrap();
        let d = l / (2.0 * 3f64.sqrt());
        assert!(
            close(x[0], l / 2.0 - d) && close(x[1], l / 2.0 + d),
            "{x:?}"
        );
        assert!(close(w[0], l / 2.0) && close(w[1], l / 2.0), "{w:?}");
    }
    // On [−1, 1]: q = 3, 4, 5 in closed form.
    let check = |q: usize, xs: &[f64], ws: &[f64]| {
        let (x, w) = legendre_gauss_unit(q).unwrap();
        for i in 0..q {
            assert!(close(x[i], xs[i]), "q {q} node {i}: {} vs {}", x[i], xs[i]);
            assert!(
                close(w[i], ws[i]),
                "q {q} weight {i}: {} vs {}",
                w[i],
                ws[i]
            );
        }
    };
    let a = 0.6f64.sqrt();
    check(3, &[-a, 0.0, a], &[5.0 / 9.0, 8.0 / 9.0, 5.0 / 9.0]);
    let r = 2.0 / 7.0 * (6.0f64 / 5.0).sqrt();
    let (x1, x2) = ((3.0 / 7.0 - r).sqrt(), (3.0 / 7.0 + r).sqrt());
    let s30 = 30f64.sqrt();
    let (w1, w2) = ((18.0 + s30) / 36.0, (18.0 - s30) / 36.0);
    check(4, &[-x2, -x1, x1, x2], &[w2, w1, w1, w2]);
    let r = 2.0 * (10.0f64 / 7.0).sqrt();
    let (x1, x2) = ((5.0 - r).sqrt() / 3.0, (5.0 + r).sqrt() / 3.0);
    let s70 = 70f64.sqrt();
    let (w1, w2) = ((322.0 + 13.0 * s70) / 900.0, (322.0 - 13.0 * s70) / 900.0);
    check(
        5,
        &[-x2, -x1, 0.0, x1, x2],
        &[w2, w1, 128.0 / 225.0, w1, w2],
    );
    // q = 20, largest node and its weight (Abramowitz & Stegun, Table 25.4).
    let (x, w) = legendre_gauss_unit(20).unwrap();
    assert!(close(x[19], 0.993_128_599_185_094_9), "{}", x[19]);
    assert!(close(w[19], 0.017_614_007_139_152_118), "{}", w[19]);
    assert!(close(x[10], 0.076_526_521_133_497_33), "{}", x[10]);
    assert!(close(w[10], 0.152_753_387_130_725_85), "{}", w[10]);
    assert!(legendre_gauss_unit(0).is_err());
    assert!(legendre_gauss_unit(MAX_QUAD_ORDER + 1).is_err());
    assert!(gauss_legendre(3, 0.0).is_err());
    assert!(gauss_legendre(3, f64::INFINITY).is_err());
}

#[test]
fn gauss_legendre_exactness() {
    for l in [1.0, 1.7] {
        for q in 1..=MAX_QUAD_ORDER {
            let (x, w) = gauss_legendre(q, l).unwrap();
            assert!(
                x.windows(2).all(|p| p[0] < p[1]),
                "q {q} nodes not ascending"
            );
            assert!(x[0] > 0.0 && x[q - 1] < l);
            assert!(w.iter().all(|&w| w > 0.0));
            let sum: f64 = w.iter().sum();
            assert!((sum - l).abs() <= 4e-15 * l, "q {q}: weights sum {sum}");
            for i in 0..q {
                assert!((x[i] + x[q - 1 - i] - l).abs() <= 2e-15 * l);
                assert_eq!(w[i], w[q - 1 - i]);
            }
            for k in 0..2 * q {
                let exact = l.powi(k as i32 + 1) / (k as f64 + 1.0);
                let got: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(k as i32)).sum();
                // x^k amplifies a node's rounding by k: a tolerance growing
                // with the degree.
                let tol = 1e-14 + 2e-15 * k as f64;
                assert!(
                    (got - exact).abs() <= tol * exact,
                    "q {q} degree {k}: {got} vs {exact}"
                );
            }
            // Degree 2q is not integrated exactly (the rule is Gaussian, no
            // more); the error shrinks fast with q, so look at small q only.
            if q <= 5 {
                let k = 2 * q as i32;
                let exact = l.powi(k + 1) / (k as f64 + 1.0);
                let got: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(k)).sum();
                assert!((got - exact).abs() > 1e-6 * exact, "q {q}");
            }
        }
    }
}

#[test]
fn q_points_order() {
    let (xi, _) = gauss_legendre(3, 2.0).unwrap();
    let p2 = q_points(3, 2.0, 2).unwrap();
    assert_eq!(p2.len(), 9 * 2);
    for m in 0..9 {
        assert_eq!(&p2[2 * m..2 * m + 2], &[xi[m / 3], xi[m % 3]]);
    }
    let p3 = q_points(3, 2.0, 3).unwrap();
    assert_eq!(p3.len(), 27 * 3);
    for m in 0..27 {
        assert_eq!(
            &p3[3 * m..3 * m + 3],
            &[xi[m / 9], xi[(m / 3) % 3], xi[m % 3]]
        );
    }
    // Dictionary order (volumential sorts q_points that way).
    for m in 1..27 {
        assert!(p3[3 * (m - 1)..3 * m] < p3[3 * m..3 * m + 3]);
    }
    assert!(q_points(3, 1.0, 4).is_err());
    assert!(q_points(0, 1.0, 2).is_err());
}

#[test]
fn target_points_per_case() {
    for dim in [2, 3] {
        let cases = Cases::new(dim).unwrap();
        for (q, l) in [(1, 1.0), (3, 1.0), (4, 1.3)] {
            let src = q_points(q, l, dim).unwrap();
            assert_eq!(cases.target_points(cases.self_case(), q, l).unwrap(), src);
            for id in 0..cases.len() {
                let c = cases.vector(id);
                let size = cases.kind(id).target_size_ratio();
                let tp = cases.target_points(id, q, l).unwrap();
                assert_eq!(tp.len(), src.len());
                for (m, (p, s)) in tp.chunks(dim).zip(src.chunks(dim)).enumerate() {
                    for k in 0..dim {
                        // Target box: centre L/2 + c_k L/4, side size·L.
                        let centre = l / 2.0 + f64::from(c[k]) * l / 4.0;
                        let lo = centre - size * l / 2.0;
                        let hi = centre + size * l / 2.0;
                        assert!(lo < p[k] && p[k] < hi, "case {id} point {m}");
                        // The source node carried affinely into the target box.
                        let expect = centre + size * (s[k] - l / 2.0);
                        assert!((p[k] - expect).abs() <= 1e-15 * l * 4.0);
                    }
                }
                // Same-size neighbour: a translate of the source nodes.
                if cases.kind(id) == CaseKind::SameSize {
                    for (p, s) in tp.chunks(dim).zip(src.chunks(dim)) {
                        for k in 0..dim {
                            let shift = f64::from(c[k]) * l / 4.0;
                            assert!((p[k] - s[k] - shift).abs() <= 4e-16 * 4.0 * l);
                        }
                    }
                }
            }
        }
        assert!(cases.target_points(cases.len(), 2, 1.0).is_err());
        assert!(cases.target_points(0, 0, 1.0).is_err());
        assert!(cases.target_points(0, 2, -1.0).is_err());
    }
}
