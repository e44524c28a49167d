//! Shared by the List 1 tests (tests/nearfield_list1_device.rs,
//! tests/nearfield_list1_payloads.rs): the kernels of the tables issue,
//! quadrature orders, random 2:1-balanced trees, source values, synthetic
//! and built reduced tables, the CPU reference on their dense
//! reconstruction, and the comparisons (relative max-norm error, bitwise
//! equality).
// Not every test binary that includes the common module uses these.
#![allow(dead_code)]
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, DenseOrbits, EntryQuadrature, Kernel, List1Boxes,
    List1ReducedTables, List1Tables, NearFieldTable, RandomTreeConfig, ReducedTable,
};
use hipkern::rng::SplitMix64;

/// The tolerance (relative, max-norm).
pub const TOL: f64 = 1e-13;

// ---------------------------------------------------------------- inputs

/// The kernels of the tables issue in dimension `dim` (name, kernel).
pub fn kernels(dim: usize) -> Vec<(&'static str, Kernel)> {
    let l = Kernel::laplace(dim).unwrap();
    let dir: Vec<f64> = if dim == 2 {
        vec![0.7, 0.7]
    } else {
        vec![0.4, -0.4, 0.4]
    };
    vec![
        ("laplace", l.clone()),
        ("constant", Kernel::constant(dim).unwrap()),
        ("yukawa", Kernel::yukawa(dim, 1.7).unwrap()),
        (
            "target-deriv",
            l.clone().axis_target_derivative(dim - 1).unwrap(),
        ),
        ("source-deriv", l.clone().axis_source_derivative(0).unwrap()),
        (
            "directional",
            l.directional_source_derivative(&dir).unwrap(),
        ),
    ]
}

pub fn is_yukawa(k: &Kernel) -> bool {
    matches!(k.base(), hipkern::nearfield::BaseKernel::Yukawa { .. })
}

pub fn is_directional(k: &Kernel) -> bool {
    matches!(
        k.derivative(),
        Some(hipkern::nearfield::Derivative::DirectionalSource(_))
    )
}

/// Quadrature orders: the defaults in 2D, cheap ones in 3D (module docs).
pub fn quad(dim: usize) -> EntryQuadrature {
    if dim == 2 {
        EntryQuadrature::default()
    } else {
        EntryQuadrature {
            radial_level: 2,
            angular_order: 5,
        }
    }
}

/// A random 2:1-balanced tree with an off-origin, non-unit root.
pub fn tree(dim: usize, seed: u64, max_level: u32) -> BalancedTree {
    let mut cfg = RandomTreeConfig::new(dim, seed, max_level);
    cfg.root_lower = (0..dim).map(|k| -0.4 + 0.3 * k as f64).collect();
    cfg.root_extent = 1.3;
    BalancedTree::random(&cfg).unwrap()
}

pub fn random_values(rng: &mut SplitMix64, n: usize) -> Vec<f64> {
    (0..n).map(|_| 0.5 + rng.uniform_pm1()).collect()
}

/// Reduced tables for a kernel on a tree: one scaled table, or (Yukawa)
/// one per level `0..=max_level`, built for the levels of the tree's
/// boxes (other levels hold a copy: they are never read).
pub enum Tables {
    Scaled(Box<ReducedTable>),
    PerLevel(Vec<ReducedTable>),
}

impl Tables {
    pub fn build(k: &Kernel, q: usize, t: &BalancedTree) -> Tables {
        let d = t.dim();
        if !is_yukawa(k) {
            return Tables::Scaled(Box::new(ReducedTable::build(k, q, 0.9, &quad(d)).unwrap()));
        }
        let top = t.max_level();
        let mut used = vec![false; top as usize + 1];
        for &l in t.levels() {
            used[l as usize] = true;
        }
        let built: Vec<Option<ReducedTable>> = (0..=top)
            .map(|l| {
                used[l as usize].then(|| {
                    let h = t.root_extent() / f64::from(1u32 << l);
                    ReducedTable::build(k, q, h, &quad(d)).unwrap()
                })
            })
            .collect();
        let any = built.iter().flatten().next().unwrap().clone();
        Tables::PerLevel(
            built
                .into_iter()
                .map(|x| x.unwrap_or_else(|| any.clone()))
                .collect(),
        )
    }

    pub fn view(&self) -> List1ReducedTables<'_> {
        match self {
            Tables::Scaled(t) => List1ReducedTables::Scaled(t),
            Tables::PerLevel(ts) => List1ReducedTables::PerLevel(ts),
        }
    }

    /// The dense reconstructions (the CPU reference's tables).
    pub fn dense(&self) -> Vec<NearFieldTable> {
        let one = |t: &ReducedTable| t.to_dense().unwrap();
        match self {
            Tables::Scaled(t) => vec![one(t)],
            Tables::PerLevel(ts) => ts.iter().map(one).collect(),
        }
    }
}

pub fn cpu_reference(
    dense: &[NearFieldTable],
    per_level: bool,
    boxes: &List1Boxes<'_>,
    f: &[f64],
) -> Vec<f64> {
    let tables = if per_level {
        List1Tables::PerLevel(dense)
    } else {
        List1Tables::Scaled(&dense[0])
    };
    evaluate_list1(boxes, &tables, f).unwrap()
}

/// `‖got − want‖∞ / ‖want‖∞` and the number of elements whose bits
/// differ (±0 counted equal). Panics on a non-finite element.
pub fn compare(what: &str, got: &[f64], want: &[f64]) -> (f64, usize) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    let mut differ = 0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(g.is_finite(), "{what}: element {i} is {g} (want {w})");
        num = num.max((g - w).abs());
        den = den.max(w.abs());
        if g.to_bits() != w.to_bits() && !(g == 0.0 && w == 0.0) {
            differ += 1;
        }
    }
    (if den > 0.0 { num / den } else { num }, differ)
}

/// Bitwise equality of two outputs.
pub fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Synthetic reduced table: random values on the representatives, 0 on
/// the orbits that are zero by symmetry.
pub fn synthetic(k: &Kernel, q: usize, extent: f64, rng: &mut SplitMix64) -> ReducedTable {
    let o = DenseOrbits::build(k, q).unwrap();
    let data = o
        .zero_by_symmetry
        .iter()
        .map(|&z| if z { 0.0 } else { rng.uniform_pm1() })
        .collect();
    ReducedTable::from_parts(
        k,
        q,
        extent,
        &EntryQuadrature::default(),
        o.representatives,
        data,
    )
    .unwrap()
}
