//! The symmetry of a near-field table (seed `nearfield_symmetry.txt`):
//! the signed permutations of the axes that a kernel allows, acting on
//! entries `(case, source mode, target point)`, and the dense signed
//! union-find oracle.
//!
//! # The action
//!
//! A signed permutation `g = (π, σ)` maps a vector by `(g v)_k = σ_k
//! v_{π(k)}`. Acting about the source box's centre it maps the box to
//! itself, the case vector `c` to `g c`, a node index per axis `m` to
//! `(g m)_k = m_{π(k)}` (`σ_k = +1`) or `q − 1 − m_{π(k)}` (`σ_k = −1`,
//! the Gauss–Legendre nodes are symmetric), so the target point `t` of
//! case `c` to the target point `g t` of case `g c` and the Lagrange basis
//! function `φ_s` to `φ_{g s}`. With `y = g u`:
//!
//! ```text
//! T[g c, g s, g t] = ∫ φ_s(u) G(g (x_t − u)) du
//! ```
//!
//! - Radial kernels (Laplace, Yukawa, Constant): `G(g r) = G(r)`, every
//!   `g` (8 in 2D, 48 in 3D), sign `+1`.
//! - Axis target/source derivative on axis `a`: `(∂_a G)(g r) = σ_a
//!   (∂_{π(a)} G)(r)`; allowed are the `g` with `π(a) = a`, sign `σ_a`
//!   (first order: odd).
//! - Directional source derivative along `d`: `(d·∇G)(g r) = (gᵀd)·∇G(r)`;
//!   allowed are the `g` with `g d = ε d`, `ε = ±1` (the direction kept
//!   collinear), sign `ε` (first order: odd). Equality of direction
//!   components is exact: `(0.6, 0.6)` allows swapping the axes,
//!   `(0.6, 0.6000001)` does not.
//!
//! # The dense oracle
//!
//! [`DenseOrbits::build`] unions every entry `e` with `g e` for every
//! allowed `g` in a signed union-find (the sign of `e` relative to its
//! root). The root of each class is its smallest full entry id (union by
//! smaller id), which is the class's *representative*;
//! `canonical_scales[e]` is `±1` with `T[e] = canonical_scales[e] ·
//! T[canonical_entry_ids[e]]`. A class in which some entry is found equal
//! to minus itself (an odd entry invariant under a sign-changing
//! transform, e.g. a derivative-axis case offset 0 with both source and
//! target node centred) is mathematically zero: such *self-conflicting*
//! classes are counted; their scales keep the union-find's parity (a
//! deterministic convention: the processing order is fixed) and their
//! values are exactly 0.
use crate::host_memory::{bytes_of, check_available};
use crate::nearfield::cases::Cases;
use crate::nearfield::kernels::{Derivative, Kernel};
use crate::nearfield::limits::check_table_size;
use crate::runtime::Result;

/// A signed permutation of the axes: `(g v)_k = sign[k] · v[perm[k]]`
/// (axes `dim..3` unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignedPermutation {
    /// `π`.
    pub perm: [u8; 3],
    /// `σ`, each ±1.
    pub sign: [i8; 3],
}

impl SignedPermutation {
    /// Applies `g` to an integer vector (`dim` components).
    pub fn apply_vector(&self, v: &[i32], out: &mut [i32]) {
        for (k, o) in out.iter_mut().enumerate().take(v.len()) {
            *o = i32::from(self.sign[k]) * v[usize::from(self.perm[k])];
        }
    }

    /// Applies `g` to a flat node index (`q` nodes per axis, `dim` axes,
    /// axis 0 slowest).
    pub fn apply_node(&self, m: usize, q: usize, dim: usize) -> usize {
        let mut digits = [0usize; 3];
        let mut r = m;
        for k in (0..dim).rev() {
            digits[k] = r % q;
            r /= q;
        }
        let mut out = 0;
        for k in 0..dim {
            let x = digits[usize::from(self.perm[k])];
            out = out * q + if self.sign[k] > 0 { x } else { q - 1 - x };
        }
        out
    }
}

/// Every signed permutation of `dim` axes (8 in 2D, 48 in 3D): the
/// identity first, then permutations in lexicographic order, each with
/// its sign patterns in binary order (bit `k` set = axis `k` flipped).
pub fn signed_permutations(dim: usize) -> Vec<SignedPermutation> {
    let perms: Vec<[u8; 3]> = match dim {
        1 => vec![[0, 1, 2]],
        2 => vec![[0, 1, 2], [1, 0, 2]],
        _ => vec![
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ],
    };
    let mut out = Vec::new();
    for p in perms {
        for bits in 0..1u32 << dim {
            let mut sign = [1i8; 3];
            for (k, s) in sign.iter_mut().enumerate().take(dim) {
                if (bits >> k) & 1 == 1 {
                    *s = -1;
                }
            }
            out.push(SignedPermutation { perm: p, sign });
        }
    }
    out
}

/// The signed permutations a kernel allows, each with the sign it puts on
/// an entry (module docs), in the order of [`signed_permutations`].
pub fn kernel_group(kernel: &Kernel) -> Vec<(SignedPermutation, i8)> {
    let d = kernel.dim();
    signed_permutations(d)
        .into_iter()
        .filter_map(|g| match kernel.derivative() {
            None => Some((g, 1)),
            Some(Derivative::AxisTarget(a)) | Some(Derivative::AxisSource(a)) => {
                (usize::from(g.perm[*a]) == *a).then_some((g, g.sign[*a]))
            }
            Some(Derivative::DirectionalSource(v)) => {
                let image: Vec<f64> = (0..d)
                    .map(|k| f64::from(g.sign[k]) * v[usize::from(g.perm[k])])
                    .collect();
                if image.iter().zip(v).all(|(a, b)| a == b) {
                    Some((g, 1))
                } else if image.iter().zip(v).all(|(a, b)| *a == -b) {
                    Some((g, -1))
                } else {
                    None
                }
            }
        })
        .collect()
}

/// The image of a full entry id under `g` (module docs).
pub fn apply_to_entry(g: &SignedPermutation, cases: &Cases, q: usize, id: usize) -> usize {
    let d = cases.dim();
    let nq = q.pow(d as u32);
    let (c, s, t) = (id / (nq * nq), (id / nq) % nq, id % nq);
    let mut v = [0i32; 3];
    g.apply_vector(cases.vector(c), &mut v[..d]);
    let c2 = cases
        .id_of_vector(&v[..d])
        .expect("the cases are closed under signed permutations");
    (c2 * nq + g.apply_node(s, q, d)) * nq + g.apply_node(t, q, d)
}

/// The dense signed union-find oracle of a table (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct DenseOrbits {
    /// Representative (smallest full id of the class) per full entry.
    pub canonical_entry_ids: Vec<i32>,
    /// `±1` per full entry: `T[e] = scale · T[canonical]`.
    pub canonical_scales: Vec<f64>,
    /// The representatives, ascending.
    pub representatives: Vec<u32>,
    /// Per representative (same order): the class is zero by symmetry.
    pub zero_by_symmetry: Vec<bool>,
    /// Number of full entries in self-conflicting (zero) classes.
    pub zero_entries: usize,
}

impl DenseOrbits {
    /// Builds the oracle for `kernel`'s group at `q` nodes per axis.
    pub fn build(kernel: &Kernel, q: usize) -> Result<DenseOrbits> {
        let d = kernel.dim();
        // The same size limit as the table builders (int32 ids here), then
        // this machine's memory for the maps below: parent u32, parity i8,
        // conflict bool, canonical_entry_ids i32, canonical_scales f64.
        let size = check_table_size(d, q)?;
        let n = size.n_entries as usize;
        let what = || format!("the symmetry maps of {n} near-field table entries");
        check_available(bytes_of::<[u8; 18]>(n as u128, &what)?, &what)?;
        let cases = Cases::new(d)?;
        let group = kernel_group(kernel);
        let mut parent: Vec<u32> = (0..n as u32).collect();
        // Sign of an entry relative to its parent.
        let mut parity: Vec<i8> = vec![1; n];
        let mut conflict = vec![false; n];
        // Root and sign relative to the root, with path compression.
        fn find(parent: &mut [u32], parity: &mut [i8], e: usize) -> (usize, i8) {
            let mut path = Vec::new();
            let mut x = e;
            while parent[x] as usize != x {
                path.push(x);
                x = parent[x] as usize;
            }
            let root = x;
            // Walk back from the node next to the root, accumulating.
            let mut acc = 1i8;
            for &y in path.iter().rev() {
                acc *= parity[y];
                parity[y] = acc;
                parent[y] = root as u32;
            }
            (root, if path.is_empty() { 1 } else { parity[e] })
        }
        for e in 0..n {
            for (g, sg) in &group {
                let f = apply_to_entry(g, &cases, q, e);
                if f == e && *sg > 0 {
                    continue;
                }
                // T[f] = sg · T[e].
                let (re, pe) = find(&mut parent, &mut parity, e);
                let (rf, pf) = find(&mut parent, &mut parity, f);
                if re == rf {
                    // T[e] = pe T[r], T[f] = pf T[r]; consistent iff pf = sg·pe.
                    if pf != sg * pe {
                        conflict[re] = true;
                    }
                    continue;
                }
                // Attach the larger root under the smaller one:
                // T[rf] = pf·T[f] = pf·sg·T[e] = pf·sg·pe·T[re].
                let rel = pf * sg * pe;
                let (lo, hi) = if re < rf { (re, rf) } else { (rf, re) };
                parent[hi] = lo as u32;
                parity[hi] = rel;
                conflict[lo] |= conflict[hi];
            }
        }
        let mut ids = Vec::with_capacity(n);
        let mut scales = Vec::with_capacity(n);
        for e in 0..n {
            let (r, p) = find(&mut parent, &mut parity, e);
            ids.push(r as i32);
            scales.push(f64::from(p));
        }
        let representatives: Vec<u32> = (0..n as u32)
            .filter(|&e| ids[e as usize] == e as i32)
            .collect();
        let zero_by_symmetry: Vec<bool> = representatives
            .iter()
            .map(|&r| conflict[r as usize])
            .collect();
        let zero_entries = ids.iter().filter(|&&r| conflict[r as usize]).count();
        Ok(DenseOrbits {
            canonical_entry_ids: ids,
            canonical_scales: scales,
            representatives,
            zero_by_symmetry,
            zero_entries,
        })
    }

    /// Number of representatives (classes).
    pub fn n_representatives(&self) -> usize {
        self.representatives.len()
    }

    /// Bytes of the dense maps sent to a device: int32 ids + f64 scales.
    pub fn dense_map_bytes(&self) -> usize {
        self.canonical_entry_ids.len() * (4 + 8)
    }
}
