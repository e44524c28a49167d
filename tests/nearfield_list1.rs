//! The CPU List 1 evaluator and the 2:1-balanced tree generator.
//!
//! The evaluator is checked against an independent integrator: for a
//! density that is a polynomial of degree < q per axis the tables'
//! Lagrange interpolant is exact, so List 1 at a target node is the volume
//! integral `Σ_{S ∈ L1(B)} ∫_S G(x − y) f(y) dy`, which `direct` computes by
//! tensor Gauss–Legendre on cells refined towards the target (a cell is
//! integrated once its side is at most its distance from the target;
//! the cells around the singularity at the deepest level are left out, a
//! contribution below 1e−15 at the depths used) — no Duffy map, no
//! tanh-sinh, nothing shared with the tables but the kernel's formula.
use hipkern::nearfield::{
    entries_at_point, evaluate_list1, evaluate_list1_with_threads, BalancedTree, Cases,
    EntryQuadrature, Kernel, List1Boxes, List1Tables, NearFieldTable, RandomTreeConfig,
};
use hipkern::rng::SplitMix64;
use hipkern::Error;
use std::f64::consts::PI;
use std::time::Instant;

/// A polynomial density `Π_k Σ_j c[k][j] y_k^j` of degree `< q` per axis.
struct Poly {
    coef: Vec<Vec<f64>>,
}

impl Poly {
    fn random(rng: &mut SplitMix64, dim: usize, q: usize) -> Poly {
        Poly {
            coef: (0..dim)
                .map(|_| {
                    let mut c: Vec<f64> = (0..q).map(|_| rng.uniform_pm1()).collect();
                    c[0] += 2.0; // keep it away from zero on average
                    c
                })
                .collect(),
        }
    }

    fn at(&self, y: &[f64]) -> f64 {
        self.coef
            .iter()
            .zip(y)
            .map(|(c, &x)| c.iter().rev().fold(0.0, |a, &cj| a * x + cj))
            .product()
    }
}

/// Tensor Gauss–Legendre on cells refined towards `x` (module docs).
struct Direct<'a> {
    kernel: &'a Kernel,
    x: Vec<f64>,
    nodes: Vec<f64>,
    weights: Vec<f64>,
    max_depth: u32,
}

impl Direct<'_> {
    fn new<'k>(kernel: &'k Kernel, x: &[f64], order: usize, max_depth: u32) -> Direct<'k> {
        let (nodes, weights) = hipkern::nearfield::gauss_legendre(order, 1.0).unwrap();
        Direct {
            kernel,
            x: x.to_vec(),
            nodes,
            weights,
            max_depth,
        }
    }

    fn cell(&self, lower: &[f64], s: f64, depth: u32, f: &Poly) -> f64 {
        let d = lower.len();
        let dist = (0..d)
            .map(|k| {
                let g = (lower[k] - self.x[k])
                    .max(self.x[k] - (lower[k] + s))
                    .max(0.0);
                g * g
            })
            .sum::<f64>()
            .sqrt();
        if s <= dist {
            let n = self.nodes.len();
            let mut total = 0.0;
            let mut y = vec![0.0; d];
            let mut r = vec![0.0; d];
            for i in 0..n.pow(d as u32) {
                let mut w = 1.0;
                for k in 0..d {
                    let m = (i / n.pow((d - 1 - k) as u32)) % n;
                    y[k] = lower[k] + s * self.nodes[m];
                    r[k] = self.x[k] - y[k];
                    w *= self.weights[m];
                }
                total += w * self.kernel.value(&r) * f.at(&y);
            }
            return total * s.powi(d as i32);
        }
        if depth == self.max_depth {
            return 0.0;
        }
        let h = 0.5 * s;
        let mut total = 0.0;
        let mut child = vec![0.0; d];
        for c in 0..1usize << d {
            for k in 0..d {
                child[k] = lower[k] + h * ((c >> k) & 1) as f64;
            }
            total += self.cell(&child, h, depth + 1, f);
        }
        total
    }
}

/// A random tree with a root that is neither the unit box nor at the
/// origin.
fn tree(dim: usize, seed: u64, max_level: u32) -> BalancedTree {
    let mut cfg = RandomTreeConfig::new(dim, seed, max_level);
    cfg.root_lower = (0..dim).map(|k| -0.4 + 0.3 * k as f64).collect();
    cfg.root_extent = 1.3;
    BalancedTree::random(&cfg).unwrap()
}

/// Target boxes to check: those whose List 1 has both a coarser and a finer
/// box first (every case kind), then random ones, `n` in all.
fn sample_targets(t: &BalancedTree, rng: &mut SplitMix64, n: usize) -> Vec<u32> {
    let (st, src, lv) = (t.list1_starts(), t.list1_sources(), t.levels());
    let mixed: Vec<u32> = (0..t.n_boxes())
        .filter(|&b| {
            let l = &src[st[b] as usize..st[b + 1] as usize];
            l.iter().any(|&s| lv[s as usize] < lv[b]) && l.iter().any(|&s| lv[s as usize] > lv[b])
        })
        .map(|b| b as u32)
        .collect();
    let mut out: Vec<u32> = mixed.iter().copied().take(n / 2).collect();
    while out.len() < n.min(t.n_boxes()) {
        let b = rng.below(t.n_boxes()) as u32;
        if !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

/// The sub-CSR of the tree's List 1 for `targets`.
fn sub_lists(t: &BalancedTree, targets: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let (st, src) = (t.list1_starts(), t.list1_sources());
    let mut starts = vec![0u32];
    let mut lists = Vec::new();
    for &b in targets {
        lists.extend_from_slice(&src[st[b as usize] as usize..st[b as usize + 1] as usize]);
        starts.push(lists.len() as u32);
    }
    (starts, lists)
}

/// Source values of `f` at every box's nodes.
fn values(t: &BalancedTree, q: usize, f: &Poly) -> Vec<f64> {
    t.box_points(q)
        .unwrap()
        .chunks_exact(t.dim())
        .map(|y| f.at(y))
        .collect()
}

/// List 1 on `n_targets` sampled boxes of `t` against `direct`; returns
/// the worst error relative to the largest |u| of the sample. `direct`
/// uses `order` Gauss–Legendre nodes per axis and cell and refines to
/// `max_depth`.
fn check_against_direct(
    t: &BalancedTree,
    tables: &List1Tables<'_>,
    kernel: &Kernel,
    q: usize,
    n_targets: usize,
    (order, max_depth): (usize, u32),
    seed: u64,
) -> f64 {
    let d = t.dim();
    let mut rng = SplitMix64::new(seed);
    let f = Poly::random(&mut rng, d, q);
    let targets = sample_targets(t, &mut rng, n_targets);
    let (starts, lists) = sub_lists(t, &targets);
    let boxes = List1Boxes {
        target_boxes: &targets,
        source_starts: &starts,
        source_boxes: &lists,
        ..t.list1_boxes(&targets)
    };
    let u = evaluate_list1(&boxes, tables, &values(t, q, &f)).unwrap();
    let pts = t.box_points(q).unwrap();
    let nq = q.pow(d as u32);
    let mut want: Vec<f64> = Vec::with_capacity(u.len());
    for (i, &b) in targets.iter().enumerate() {
        for m in 0..nq {
            let x = &pts[(b as usize * nq + m) * d..(b as usize * nq + m + 1) * d];
            let direct = Direct::new(kernel, x, order, max_depth);
            let mut sum = 0.0;
            for &s in &lists[starts[i] as usize..starts[i + 1] as usize] {
                let s = s as usize;
                let h = t.box_extent(s);
                let lower: Vec<f64> = (0..d).map(|k| t.centers()[s * d + k] - 0.5 * h).collect();
                sum += direct.cell(&lower, h, 0, &f);
            }
            want.push(sum);
        }
    }
    let scale = want.iter().fold(0.0f64, |a, x| a.max(x.abs()));
    let worst = u
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs() / scale)
        .fold(0.0, f64::max);
    eprintln!(
        "{:?} q={q}: {} boxes, {} targets × {nq} points, max|u| {scale:.3e}, worst rel {worst:.2e}",
        kernel,
        t.n_boxes(),
        targets.len()
    );
    worst
}

fn quad() -> EntryQuadrature {
    EntryQuadrature::default()
}

// ---------------------------------------------------------------- trees

/// Do two leaves touch (share at least a point)? On the finest grid.
fn touching(t: &BalancedTree, a: usize, b: usize) -> bool {
    let top = t.max_level();
    (0..t.dim()).all(|k| {
        let span = |i: usize| {
            let sh = top - t.levels()[i];
            let lo = u64::from(t.position(i)[k]) << sh;
            (lo, lo + (1u64 << sh))
        };
        let ((a0, a1), (b0, b1)) = (span(a), span(b));
        a0 <= b1 && b0 <= a1
    })
}

#[test]
fn uniform_trees() {
    for (dim, level) in [(2usize, 3u32), (3, 2)] {
        let t = BalancedTree::uniform(dim, level, &vec![0.0; dim], 2.0).unwrap();
        let side = 1usize << level;
        assert_eq!(t.n_boxes(), side.pow(dim as u32));
        assert!(t.levels().iter().all(|&l| l == level));
        let st = t.list1_starts();
        for b in 0..t.n_boxes() {
            // Interior boxes see 3^d boxes, faces fewer; 2^d at a corner.
            let n = (0..dim)
                .map(|k| {
                    let p = t.position(b)[k] as usize;
                    3 - usize::from(p == 0) - usize::from(p == side - 1)
                })
                .product::<usize>();
            assert_eq!((st[b + 1] - st[b]) as usize, n, "box {b}");
            let h = t.box_extent(b);
            assert_eq!(h, 2.0 / side as f64);
        }
    }
}

#[test]
fn random_trees_are_balanced_and_lists_are_complete() {
    for (dim, levels, seed) in [(2usize, 6u32, 1u64), (2, 5, 2), (3, 4, 3), (3, 3, 4)] {
        let t = tree(dim, seed, levels);
        assert_eq!(t, tree(dim, seed, levels), "same seed, same tree");
        assert_ne!(t, tree(dim, seed + 100, levels));
        let n = t.n_boxes();
        assert!(t.max_level() == levels && n > 1 << dim, "{n} leaves");
        // The leaves tile the root: volumes add up, no two overlap.
        let vol: f64 = (0..n).map(|b| t.box_extent(b).powi(dim as i32)).sum();
        assert!((vol / 1.3f64.powi(dim as i32) - 1.0).abs() < 1e-13);
        let top = t.max_level();
        let (st, src) = (t.list1_starts(), t.list1_sources());
        let cases = Cases::new(dim).unwrap();
        for a in 0..n {
            let list = &src[st[a] as usize..st[a + 1] as usize];
            assert!(list.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
            let want: Vec<u32> = (0..n)
                .filter(|&b| touching(&t, a, b))
                .map(|b| b as u32)
                .collect();
            assert_eq!(list, &want[..], "List 1 of leaf {a}");
            for &b in list {
                let b = b as usize;
                // Interiors never overlap (else the tiling is wrong) ...
                let overlap = (0..dim).all(|k| {
                    let span = |i: usize| {
                        let sh = top - t.levels()[i];
                        let lo = u64::from(t.position(i)[k]) << sh;
                        (lo, lo + (1u64 << sh))
                    };
                    let ((a0, a1), (b0, b1)) = (span(a), span(b));
                    a0 < b1 && b0 < a1
                });
                assert_eq!(overlap, a == b);
                // ... and every pair is one of the cases (2:1 balance).
                let d = dim;
                cases
                    .case_of_pair(
                        &t.centers()[a * d..a * d + d],
                        t.box_extent(a),
                        &t.centers()[b * d..b * d + d],
                        t.box_extent(b),
                    )
                    .unwrap();
                let back = &src[st[b] as usize..st[b + 1] as usize];
                assert!(back.contains(&(a as u32)), "List 1 is symmetric");
            }
        }
        eprintln!("{dim}D random tree, seed {seed}, {levels} levels: {n} leaves");
    }
}

#[test]
fn box_points_are_the_nodes_of_each_box() {
    let t = tree(2, 9, 4);
    let q = 3;
    let pts = t.box_points(q).unwrap();
    let (x, _) = hipkern::nearfield::gauss_legendre(q, 1.0).unwrap();
    for b in 0..t.n_boxes() {
        let h = t.box_extent(b);
        for m in 0..q * q {
            for k in 0..2 {
                let mk = if k == 0 { m / q } else { m % q };
                let want = t.centers()[b * 2 + k] - 0.5 * h + h * x[mk];
                let got = pts[(b * q * q + m) * 2 + k];
                assert!((got - want).abs() < 1e-15, "box {b} node {m} axis {k}");
            }
        }
    }
}

#[test]
fn tree_input_errors() {
    let cfg = RandomTreeConfig::new(4, 1, 3);
    let e = BalancedTree::random(&cfg).unwrap_err().to_string();
    assert!(e.contains("dimension 4"), "{e}");
    let mut cfg = RandomTreeConfig::new(2, 1, 21);
    let e = BalancedTree::random(&cfg).unwrap_err().to_string();
    assert!(e.contains("maximum level 21"), "{e}");
    cfg.max_level = 3;
    cfg.root_extent = -1.0;
    let e = BalancedTree::random(&cfg).unwrap_err().to_string();
    assert!(e.contains("root extent -1"), "{e}");
    let e = BalancedTree::uniform(3, 9, &[0.0; 3], 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 2^24"), "{e}");
}

// ------------------------------------------------------------ evaluator

#[test]
fn laplace_2d_against_direct_quadrature() {
    let k = Kernel::laplace(2).unwrap();
    let t = tree(2, 11, 5);
    for q in [3usize, 4] {
        // Built at an extent no box has: every pair is scaled, with the log
        // displacement.
        let table = NearFieldTable::build(&k, q, 0.7, &quad()).unwrap();
        let e = check_against_direct(&t, &List1Tables::Scaled(&table), &k, q, 12, (10, 40), 5);
        assert!(e < 1e-12, "2D Laplace q={q}: {e:.2e}");
    }
}

#[test]
fn derivatives_2d_against_direct_quadrature() {
    let t = tree(2, 12, 5);
    let base = Kernel::laplace(2).unwrap();
    for k in [
        base.clone().axis_target_derivative(1).unwrap(),
        base.clone().axis_source_derivative(0).unwrap(),
        base.directional_source_derivative(&[0.6, -1.3]).unwrap(),
    ] {
        let table = NearFieldTable::build(&k, 3, 1.0, &quad()).unwrap();
        // The derivative's singularity is 1/r: the cells left out at depth
        // 48 hold about 2^−48 of the box.
        let e = check_against_direct(&t, &List1Tables::Scaled(&table), &k, 3, 8, (10, 48), 6);
        assert!(e < 1e-11, "{k:?}: {e:.2e}");
    }
}

#[test]
fn yukawa_2d_per_level_tables_against_direct_quadrature() {
    let k = Kernel::yukawa(2, 2.5).unwrap();
    let t = tree(2, 13, 4);
    let q = 3;
    let tables: Vec<NearFieldTable> = (0..=t.max_level())
        .map(|l| {
            NearFieldTable::build(&k, q, t.root_extent() / f64::from(1u32 << l), &quad()).unwrap()
        })
        .collect();
    let e = check_against_direct(&t, &List1Tables::PerLevel(&tables), &k, q, 10, (10, 40), 7);
    assert!(e < 1e-12, "2D Yukawa: {e:.2e}");
    // One table cannot serve every level.
    let err = evaluate_list1(
        &t.list1_boxes(&t.all_boxes()),
        &List1Tables::Scaled(&tables[0]),
        &vec![1.0; t.n_boxes() * q * q],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("Yukawa") && err.contains("PerLevel"), "{err}");
}

#[test]
fn laplace_3d_against_direct_quadrature() {
    let k = Kernel::laplace(3).unwrap();
    let t = tree(3, 14, 3);
    let q = 2;
    let start = Instant::now();
    let table = NearFieldTable::build(&k, q, 1.0, &quad()).unwrap();
    eprintln!("3D q=2 table: {:.1} s", start.elapsed().as_secs_f64());
    let e = check_against_direct(&t, &List1Tables::Scaled(&table), &k, q, 4, (8, 24), 8);
    assert!(e < 1e-12, "3D Laplace q=2: {e:.2e}");
}

#[test]
fn scaled_table_equals_per_level_tables() {
    // The scaling rule inside the evaluator (2D Laplace: ρ² and the log
    // displacement; a derivative: ρ) against tables built at each level.
    let t = tree(2, 15, 5);
    let q = 3;
    let mut rng = SplitMix64::new(21);
    let f: Vec<f64> = (0..t.n_boxes() * q * q)
        .map(|_| rng.uniform_pm1())
        .collect();
    for k in [
        Kernel::laplace(2).unwrap(),
        Kernel::laplace(2)
            .unwrap()
            .axis_target_derivative(0)
            .unwrap(),
    ] {
        let one = NearFieldTable::build(&k, q, 1.0, &quad()).unwrap();
        let per: Vec<NearFieldTable> = (0..=t.max_level())
            .map(|l| {
                NearFieldTable::build(&k, q, t.root_extent() / f64::from(1u32 << l), &quad())
                    .unwrap()
            })
            .collect();
        let targets = t.all_boxes();
        let boxes = t.list1_boxes(&targets);
        let a = evaluate_list1(&boxes, &List1Tables::Scaled(&one), &f).unwrap();
        let b = evaluate_list1(&boxes, &List1Tables::PerLevel(&per), &f).unwrap();
        let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs() / scale)
            .fold(0.0, f64::max);
        assert!(worst < 1e-13, "{k:?}: {worst:.2e}");
    }
}

#[test]
fn thread_count_does_not_change_a_bit() {
    let t = tree(2, 16, 5);
    let q = 4;
    let k = Kernel::laplace(2).unwrap();
    let table = NearFieldTable::build(&k, q, 1.0, &quad()).unwrap();
    let mut rng = SplitMix64::from_clock();
    let f: Vec<f64> = (0..t.n_boxes() * q * q)
        .map(|_| rng.uniform_pm1())
        .collect();
    let targets = t.all_boxes();
    let boxes = t.list1_boxes(&targets);
    let one = evaluate_list1_with_threads(&boxes, &List1Tables::Scaled(&table), &f, 1).unwrap();
    for threads in [2, 3, 7] {
        let many =
            evaluate_list1_with_threads(&boxes, &List1Tables::Scaled(&table), &f, threads).unwrap();
        assert!(one
            .iter()
            .zip(&many)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

/// The potential of the uniform square/cube of side `a` at its centre:
/// 2D `a²·V₂ − a² ln a/(2π)`, 3D `a²·V₃`, with `V` the unit-box values of
/// `docs/design/nearfield.md#quadrature` (the q = 1 self entries).
fn uniform_box_centre_potential(dim: usize, a: f64) -> f64 {
    if dim == 2 {
        let v2 = ((2f64).ln() / 2.0 + 1.5 - PI / 4.0) / (2.0 * PI);
        a * a * v2 - a * a * a.ln() / (2.0 * PI)
    } else {
        let v3 = (3.0 * (2.0 + 3f64.sqrt()).ln() - PI / 2.0) / (4.0 * PI);
        a * a * v3
    }
}

#[test]
fn constant_density_same_size_cases_give_the_uniform_box() {
    // The entries of the same-size cases at the centre node (q = 3), summed
    // over cases and modes: the potential of the 3×3(×3) block of boxes at
    // its centre.
    for dim in [2usize, 3] {
        let k = Kernel::laplace(dim).unwrap();
        let cases = Cases::new(dim).unwrap();
        let (q, l) = (3usize, 0.8);
        let centre = (q.pow(dim as u32) - 1) / 2;
        let mut sum = 0.0;
        let mut n_cases = 0;
        for c in 0..cases.len() {
            if cases.vector(c).iter().all(|x| x.abs() % 4 == 0) {
                let x = &cases.target_points(c, q, l).unwrap()[centre * dim..(centre + 1) * dim];
                sum += entries_at_point(&k, q, x, l, &quad())
                    .unwrap()
                    .iter()
                    .sum::<f64>();
                n_cases += 1;
            }
        }
        assert_eq!(n_cases, 3usize.pow(dim as u32));
        let want = uniform_box_centre_potential(dim, 3.0 * l);
        assert!(
            ((sum - want) / want).abs() < 1e-13,
            "{dim}D: {sum} vs {want}"
        );
    }
    // The same through the evaluator on a uniform 2D tree: an interior box's
    // centre node.
    let t = BalancedTree::uniform(2, 3, &[0.25, -1.0], 1.6).unwrap();
    let k = Kernel::laplace(2).unwrap();
    let table = NearFieldTable::build(&k, 3, 1.0, &quad()).unwrap();
    let targets = t.all_boxes();
    let u = evaluate_list1(
        &t.list1_boxes(&targets),
        &List1Tables::Scaled(&table),
        &vec![1.0; t.n_boxes() * 9],
    )
    .unwrap();
    let want = uniform_box_centre_potential(2, 3.0 * 0.2);
    let mut checked = 0;
    for b in 0..t.n_boxes() {
        if t.position(b).iter().all(|&p| p > 0 && p < 7) {
            let got = u[b * 9 + 4];
            assert!(
                ((got - want) / want).abs() < 1e-13,
                "box {b}: {got} vs {want}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 36);
}

fn message<T: std::fmt::Debug>(r: hipkern::Result<T>) -> String {
    match r {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn invalid_inputs_are_named() {
    let t = tree(2, 17, 4);
    let q = 2;
    let k = Kernel::laplace(2).unwrap();
    let table = NearFieldTable::build(&k, q, 1.0, &quad()).unwrap();
    let tables = List1Tables::Scaled(&table);
    let targets = t.all_boxes();
    let good = t.list1_boxes(&targets);
    let f = vec![0.5; t.n_boxes() * q * q];
    assert!(evaluate_list1(&good, &tables, &f).is_ok());
    let run = |b: &List1Boxes<'_>, f: &[f64]| message(evaluate_list1(b, &tables, f));

    let mut starts = t.list1_starts().to_vec();
    starts[3] = starts[2] - 1;
    let m = run(
        &List1Boxes {
            source_starts: &starts,
            ..good
        },
        &f,
    );
    assert!(
        m.contains("not monotone") && m.contains("source_starts[3]"),
        "{m}"
    );
    let mut starts = t.list1_starts().to_vec();
    starts[0] = 1;
    let m = run(
        &List1Boxes {
            source_starts: &starts,
            ..good
        },
        &f,
    );
    assert!(m.contains("source_starts[0] = 1"), "{m}");
    let m = run(
        &List1Boxes {
            source_starts: &t.list1_starts()[1..],
            ..good
        },
        &f,
    );
    assert!(m.contains("n_targets + 1"), "{m}");
    let mut starts = t.list1_starts().to_vec();
    *starts.last_mut().unwrap() -= 1;
    let m = run(
        &List1Boxes {
            source_starts: &starts,
            ..good
        },
        &f,
    );
    assert!(m.contains("source_boxes has"), "{m}");

    let mut tb = targets.clone();
    tb[5] = t.n_boxes() as u32;
    let m = run(
        &List1Boxes {
            target_boxes: &tb,
            ..good
        },
        &f,
    );
    assert!(
        m.contains("target_boxes[5]") && m.contains("out of range"),
        "{m}"
    );
    let mut sb = t.list1_sources().to_vec();
    sb[7] = u32::MAX;
    let m = run(
        &List1Boxes {
            source_boxes: &sb,
            ..good
        },
        &f,
    );
    assert!(m.contains("source_boxes[7] = 4294967295"), "{m}");

    // A pair that is not a List 1 pair: box 0's list gets a far box.
    let far = (0..t.n_boxes())
        .find(|&b| {
            let c = &t.centers()[b * 2..b * 2 + 2];
            (c[0] - t.centers()[0]).abs() > 0.5 || (c[1] - t.centers()[1]).abs() > 0.5
        })
        .unwrap();
    let mut sb = t.list1_sources().to_vec();
    sb[0] = far as u32;
    let m = run(
        &List1Boxes {
            source_boxes: &sb,
            ..good
        },
        &f,
    );
    assert!(
        m.contains("target box 0")
            && m.contains(&format!("source box {far}"))
            && m.contains("do not touch"),
        "{m}"
    );

    let mut centers = t.centers().to_vec();
    centers[9] = f64::NAN;
    let m = run(
        &List1Boxes {
            centers: &centers,
            ..good
        },
        &f,
    );
    assert!(m.contains("centre of box 4"), "{m}");
    let mut levels = t.levels().to_vec();
    levels[2] = 40;
    let m = run(
        &List1Boxes {
            levels: &levels,
            ..good
        },
        &f,
    );
    assert!(m.contains("box 2 has level 40"), "{m}");
    let m = run(
        &List1Boxes {
            root_extent: 0.0,
            ..good
        },
        &f,
    );
    assert!(m.contains("root extent 0"), "{m}");
    // A wrong level moves the box's size: the pair check catches it.
    let mut levels = t.levels().to_vec();
    levels[0] += 2;
    let m = run(
        &List1Boxes {
            levels: &levels,
            ..good
        },
        &f,
    );
    assert!(m.contains("not a List 1 pair"), "{m}");

    let m = run(&good, &f[1..]);
    assert!(m.contains("source_values has"), "{m}");
    let mut fb = f.clone();
    fb[4 * 3 + 1] = f64::INFINITY;
    let m = run(&good, &fb);
    assert!(m.contains("source value 1 of box 3"), "{m}");

    // Tables that do not fit.
    let k3 = Kernel::laplace(3).unwrap();
    let t3 = NearFieldTable::build(
        &k3,
        1,
        1.0,
        &EntryQuadrature {
            radial_level: 2,
            angular_order: 4,
        },
    )
    .unwrap();
    let m = message(evaluate_list1(&good, &List1Tables::Scaled(&t3), &f));
    assert!(m.contains("3D") && m.contains("2D"), "{m}");
    let m = message(evaluate_list1(&good, &List1Tables::PerLevel(&[]), &f));
    assert!(m.contains("empty"), "{m}");
    let min_level = *t.levels().iter().min().unwrap() as usize;
    let few = vec![table.clone(); min_level];
    let m = message(evaluate_list1(&good, &List1Tables::PerLevel(&few), &f));
    assert!(
        m.contains(&format!(
            "source boxes at level {min_level} but only {min_level} per-level tables"
        )),
        "{m}"
    );
    let wrong = vec![table.clone(); t.max_level() as usize + 1];
    let m = message(evaluate_list1(&good, &List1Tables::PerLevel(&wrong), &f));
    assert!(m.contains("has extent 1,"), "{m}");
}

#[test]
#[ignore = "timing (release, 2 cores); run with --nocapture"]
fn evaluator_timing() {
    let t = BalancedTree::uniform(3, 4, &[0.0; 3], 1.0).unwrap();
    let q = 2;
    let k = Kernel::laplace(3).unwrap();
    let table = NearFieldTable::build(
        &k,
        q,
        1.0,
        &EntryQuadrature {
            radial_level: 2,
            angular_order: 4,
        },
    )
    .unwrap();
    let f = vec![1.0; t.n_boxes() * 8];
    let targets = t.all_boxes();
    let start = Instant::now();
    let u = evaluate_list1(&t.list1_boxes(&targets), &List1Tables::Scaled(&table), &f).unwrap();
    eprintln!(
        "3D uniform level 4, q=2: {} boxes, {} pairs, {:.3} s",
        t.n_boxes(),
        t.list1_sources().len(),
        start.elapsed().as_secs_f64()
    );
    assert_eq!(u.len(), t.n_boxes() * 8);
}

/// The pairs are checked on several threads (a thread per 2,048 targets at
/// most), yet the refusal named is the one a single pass would name: a
/// source box out of range before any pair that is not a List 1 pair,
/// each the first in pair order, wherever the threads split the targets.
#[test]
fn refusals_keep_their_order_across_threads() {
    let t = BalancedTree::uniform(2, 7, &[0.0; 2], 1.0).unwrap(); // 16,384 boxes
    let targets = t.all_boxes();
    let good = t.list1_boxes(&targets);
    let n = t.n_boxes();
    let last = t.list1_sources().len() - 1;
    // A far source for the first target (not a List 1 pair).
    let far = (0..n)
        .find(|&b| (t.centers()[2 * b] - t.centers()[0]).abs() > 0.5)
        .unwrap() as u32;
    let pairs = |sb: &[u32]| {
        List1Boxes {
            source_boxes: sb,
            ..good
        }
        .pairs()
        .unwrap_err()
        .to_string()
    };
    // A refusal in the first targets, a source out of range in the last.
    let mut sb = t.list1_sources().to_vec();
    sb[0] = far;
    sb[last] = n as u32;
    let m = pairs(&sb);
    assert!(
        m.contains(&format!("source_boxes[{last}] = {n} is out of range")),
        "{m}"
    );
    // Both in the same target's list: the range still comes first.
    let mut sb = t.list1_sources().to_vec();
    sb[0] = far;
    sb[2] = n as u32 + 7;
    let m = pairs(&sb);
    assert!(
        m.contains("source_boxes[2]") && m.contains("out of range"),
        "{m}"
    );
    // Two refusals, one early and one late: the early one is named.
    let mut sb = t.list1_sources().to_vec();
    sb[last] = far;
    sb[1] = far;
    let m = pairs(&sb);
    assert!(
        m.contains("source_boxes[1]") && m.contains("not a List 1 pair"),
        "{m}"
    );
    // Two sources out of range: the first.
    let mut sb = t.list1_sources().to_vec();
    sb[last] = u32::MAX;
    sb[3] = u32::MAX;
    let m = pairs(&sb);
    assert!(m.contains("source_boxes[3] = 4294967295"), "{m}");
    // And the good lists give every case.
    assert_eq!(good.pairs().unwrap().cases.len(), last + 1);
}
