//! One entry of a near-field table by the singularity-aware Duffy/radial
//! scheme (`docs/design/nearfield.md#quadrature`), CPU float64:
//!
//! ```text
//! T[case, s, t] = ∫_{[0,L]^d} φ_s(y) G(x_t − y) dy
//! ```
//!
//! with `φ_s` the tensor Lagrange basis on the `q` Gauss–Legendre nodes
//! (flat index axis 0 slowest, [`crate::nearfield::q_points`]) and `x_t` the target
//! point of the case ([`crate::nearfield::Cases::target_points`]).
//!
//! # The scheme
//!
//! 1. The split point `p` is the target clamped to the box, `p_k =
//!    clamp(x_k, 0, L)`. For a target inside the box (the self case) `p =
//!    x_t`; for a target outside (every other case) `p` is the nearest point
//!    of the box's boundary, so the near-singularity sits next to a corner
//!    of the pieces below.
//! 2. The box is split at `p` into its `2^d` orthants (boxes with `p` at a
//!    corner); orthants of zero width are dropped.
//! 3. Each orthant (sides `a_k`, `y = p + σ∘a∘v`, `v ∈ [0,1]^d`) is split
//!    into the `d!` simplices `v_{π0} ≥ v_{π1} ≥ … ≥ 0`, all with `p` as a
//!    vertex, and each simplex is mapped from the unit cube by the Duffy map
//!    `v_{π0} = τ, v_{π1} = τ w₁, v_{π2} = τ w₁ w₂` (Jacobian `τ^{d−1}
//!    w₁^{d−2}`). Distance from `p` is proportional to `τ` along each ray, so
//!    the kernel's point singularity becomes a factor `τ^{d−1}` times a
//!    smooth (3D Laplace: `1/τ`, derivatives `1/τ²`) or logarithmic (2D)
//!    function of `τ`.
//! 4. `τ` carries a tanh-sinh (double exponential) rule on `[0, 1]`, step
//!    `h = 2^{−radial_level}`, nodes `kh` for `|kh| ≤ 3.5` (beyond, the
//!    weights are below 1e−16 of the total); the `w_i` carry
//!    `angular_order`-point Gauss–Legendre rules on `[0, 1]`, each through a
//!    sinh map `w = ε sinh(u·asinh(1/ε))` graded to the simplex's aspect
//!    ratio (`angular_rule`): without it an orthant made thin by a target
//!    near a face (q = 4: 0.069 L) needs about twice the angular order.
//! 5. Distances are formed as `(x − p) − step`, never `x − (p + step)`, so
//!    points next to the target keep their exact offset.
//! 6. The sum over a simplex is factored by axis, `Σ_τ ℓ_{π0} Σ_{w₁}
//!    ℓ_{π1} Σ_{w₂} G ℓ_{π2}`, each axis's basis values computed once per
//!    value of its coordinate, and every sum (over `w₂`, `w₁`, `τ`, the
//!    simplices) is compensated (TwoSum).
//!
//! # Rounding follows the symmetry
//!
//! A signed permutation of the axes (`crate::nearfield::symmetry`) maps a target
//! point and its pieces onto those of the image target, and the scheme
//! computes the image bit for bit (up to the sign): the nodes are exact
//! mirrors and the target points exact images (for `L` a power of two,
//! [`crate::nearfield::gauss_legendre`]); under a mirror `p ↦ L − p` each step and
//! distance component is exactly negated and `Lagrange1d` gives the
//! mirrored basis value exactly; under a permutation each simplex meets
//! its image with the same numbers in the same roles (the factored sum
//! follows the simplex's axis order `π`, not the axis index), the kernel's
//! norm adds sorted squares and the orthant's volume multiplies sorted
//! sides; only the final sum over the simplices runs in a different order,
//! compensated. Measured (tests/nearfield_symmetry.rs, `check_reduced`):
//! the symmetry-reduced tables equal the dense ones bit for bit for every
//! kernel at 2D q ≤ 4 and 3D q = 2, and at 3D q = 3 for Laplace, ∂/∂x₂
//! and a directional derivative.
//!
//! The cost of an entry is `2^d · d! · (7·2^{radial_level} + 1) ·
//! angular_order^{d−1}` kernel evaluations (at most; 3D self case with the
//! defaults: 2.2·10⁶). [`entries_at_point`] shares one pass among all
//! `q^d` source modes of a target point (per kernel evaluation `q` basis
//! values and `q` compensated additions; per value of `w₁` and `τ`,
//! `q^{d−1}` and `q^d`).
//!
//! # Accuracy of the defaults (radial level 4, angular order 20)
//!
//! Measured (tests/nearfield_entries.rs): closed-form q = 1 self entries
//! 4.4e−16 (3D) and 1.6e−16 (2D) relative; targets outside the box against
//! brute-force composite tensor Gauss–Legendre ≤ 3e−14; Laplace 2D q = 4 and
//! 3D q = 3 self and touching entries against the same scheme at radial
//! level 5, angular order 32 ≤ 3e−15 (3D q = 4 against level 5, order 40:
//! ≤ 1.5e−14, derivative kernels included). The limiting term is radial for
//! targets just outside the box (radial level 3 leaves 1e−9 on a 3D q = 4
//! derivative entry) and angular for self entries near a corner (angular
//! order 16 leaves 7e−12 on a 3D q = 4 derivative entry).
use crate::nearfield::cases::Cases;
use crate::nearfield::kernels::Kernel;
use crate::nearfield::limits::{check_finite, check_kernel_and_extent, check_target_point};
use crate::nearfield::quadrature::{gauss_legendre, legendre_gauss_unit, MAX_QUAD_ORDER};
use crate::runtime::{Error, Result};

/// Largest `|kh|` of the tanh-sinh rule: at 3.5 the nodes are within
/// `e^{−π sinh 3.5}` ≈ 3e−23 of the ends and the weights negligible.
const TANH_SINH_RANGE: f64 = 3.5;

/// Orders of the Duffy/radial scheme ([`entry`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryQuadrature {
    /// Tanh-sinh step `h = 2^{−radial_level}` in the radial coordinate
    /// (`7·2^{radial_level} + 1` nodes). Default 4 (113 nodes).
    pub radial_level: u32,
    /// Gauss–Legendre nodes per angular (Duffy) coordinate, each carried
    /// through a sinh map graded to the orthant's aspect ratio. Default 20.
    pub angular_order: usize,
}

impl Default for EntryQuadrature {
    fn default() -> Self {
        EntryQuadrature {
            radial_level: 4,
            angular_order: 20,
        }
    }
}

/// Which case an entry belongs to: by id (position in [`Cases`]) or by case
/// vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaseRef<'a> {
    /// A case id, `0..Cases::len()`.
    Id(usize),
    /// A case vector (`dim` integer components).
    Vector(&'a [i32]),
}

/// The tanh-sinh rule on `[0, 1]` with step `h = 2^{−level}`: nodes and
/// weights, with the nodes computed without cancellation at either end.
pub fn tanh_sinh_unit(level: u32) -> Result<(Vec<f64>, Vec<f64>)> {
    if level > 12 {
        return Err(Error::InvalidInput(format!(
            "tanh-sinh level {level}: must be at most 12"
        )));
    }
    let h = 0.5f64.powi(level as i32);
    let kmax = (TANH_SINH_RANGE / h).round() as i64;
    let mut nodes = Vec::with_capacity(2 * kmax as usize + 1);
    let mut weights = Vec::with_capacity(2 * kmax as usize + 1);
    for k in -kmax..=kmax {
        let u = k as f64 * h;
        let s = std::f64::consts::PI * u.sinh();
        // e = exp(−π|sinh u|) ≤ 1; t = e/(1+e) for u < 0, 1/(1+e) for u ≥ 0.
        let e = (-s.abs()).exp();
        let t = if u < 0.0 {
            e / (1.0 + e)
        } else {
            1.0 / (1.0 + e)
        };
        let w = h * std::f64::consts::PI * u.cosh() * e / ((1.0 + e) * (1.0 + e));
        nodes.push(t);
        weights.push(w);
    }
    Ok((nodes, weights))
}

/// The 1D Lagrange basis on the nodes `xi` (mirror-symmetric: `xi[q−1−i]
/// = L − xi[i]` exactly, [`gauss_legendre`]), evaluated mirror-exactly:
/// at `y = p + step` it takes the factors `y − xi[j]` as `(p − xi[j]) +
/// step` and multiplies them in mirror pairs `(j, q−1−j)`, so that the
/// mirrored point `(L − p) − step` gives `ℓ_{q−1−i}` bit for bit equal to
/// `ℓ_i` here (each factor is exactly negated, each pair product equal).
///
/// The factors are taken in units of `unit`, the power of two with
/// `unit ≤ L < 2·unit`: the products of `q − 1` of them scale like
/// `(L/unit)^{q−1}` instead of `L^{q−1}`, which at q = 64 overflows (or
/// underflows to 0) for `L` outside about `[5e−5, 3e5]`. Scaling by a
/// power of two is exact, so every value is bit for bit the one computed
/// in the units of `L` wherever that did not overflow.
struct Lagrange1d {
    q: usize,
    inv_unit: f64,
    inv_denominators: Vec<f64>,
}

impl Lagrange1d {
    fn new(xi: &[f64], l: f64) -> Lagrange1d {
        let q = xi.len();
        // 2^{−e} with 2^e ≤ L < 2^{e+1} (L is normal: check_kernel_and_extent).
        let exponent = ((l.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        let inv_unit = 2f64.powi(-exponent);
        let mut inv_denominators = vec![0.0; q];
        // Lower half (and the middle node) directly; the upper half by the
        // mirror, Π_{j≠i'}(x_{i'} − x_j) = (−1)^{q−1} Π_{j≠i}(x_i − x_j).
        let sign = if q % 2 == 0 { -1.0 } else { 1.0 };
        for i in 0..q.div_ceil(2) {
            let d = 1.0
                / (0..q)
                    .filter(|&j| j != i)
                    .map(|j| (xi[i] - xi[j]) * inv_unit)
                    .product::<f64>();
            inv_denominators[i] = d;
            inv_denominators[q - 1 - i] = if q - 1 - i == i { d } else { sign * d };
        }
        Lagrange1d {
            q,
            inv_unit,
            inv_denominators,
        }
    }

    /// `out[n] = ℓ_{modes[n]}(p + step)` from `p_minus_xi[j] = p − xi[j]`:
    /// the factors `f_j = (p − xi[j]) + step`, their mirror-pair products
    /// `P_m = f_m f_{q−1−m}`, and for each mode `i` the product of the
    /// inverse denominator, the pairs other than `i`'s in order, `i`'s
    /// partner `f_{q−1−i}` and the middle factor (odd `q`).
    fn values(&self, p_minus_xi: &[f64], step: f64, modes: &[usize], out: &mut [f64]) {
        let q = self.q;
        let mut f = [0.0f64; MAX_QUAD_ORDER];
        let mut pairs = [0.0f64; MAX_QUAD_ORDER / 2];
        for (fj, &d) in f.iter_mut().zip(p_minus_xi) {
            *fj = (d + step) * self.inv_unit;
        }
        for (m, pm) in pairs.iter_mut().enumerate().take(q / 2) {
            *pm = f[m] * f[q - 1 - m];
        }
        for (o, &i) in out.iter_mut().zip(modes) {
            let mi = i.min(q - 1 - i);
            let mut v = self.inv_denominators[i];
            for (m, &pm) in pairs[..q / 2].iter().enumerate() {
                if m != mi {
                    v *= pm;
                }
            }
            if 2 * i + 1 != q {
                v *= f[q - 1 - i];
                if q % 2 == 1 {
                    v *= f[q / 2];
                }
            }
            *o = v;
        }
    }
}

/// All permutations of `0..d` (d ≤ 3).
fn permutations(d: usize) -> Vec<Vec<usize>> {
    match d {
        1 => vec![vec![0]],
        2 => vec![vec![0, 1], vec![1, 0]],
        _ => vec![
            vec![0, 1, 2],
            vec![0, 2, 1],
            vec![1, 0, 2],
            vec![1, 2, 0],
            vec![2, 0, 1],
            vec![2, 1, 0],
        ],
    }
}

/// `w = ε sinh(α u)`, `α = asinh(1/ε)`: maps `u ∈ [0, 1]` onto `w ∈ [0, 1]`
/// with nodes graded towards 0 on the scale `ε`. Returns `(w, dw/du)`.
fn sinh_map(eps: f64, u: f64) -> (f64, f64) {
    let alpha = (1.0 / eps).asinh();
    let w = if u >= 1.0 {
        1.0
    } else {
        eps * (alpha * u).sinh()
    };
    (w, eps * alpha * (alpha * u).cosh())
}

/// The angular rule of one simplex: points `(w₁, w₁w₂)` and weights
/// (including the Duffy Jacobian `w₁^{d−2}`) on the unit cube of the Duffy
/// coordinates, from the `n`-point Gauss–Legendre rule `(u, c)` on `[0, 1]`
/// carried through [`sinh_map`] per coordinate.
///
/// Along a ray the distance from the split point is `τ·|(a_{π0}, a_{π1}w₁,
/// a_{π2}w₁w₂)|`, whose reciprocal has complex singularities at `w₁ =
/// ±iε₁`, `ε₁ = a_{π0}/|(a_{π1}, a_{π2} w₂)|` (taken at its smallest, `w₂ =
/// 1`, so that the integral over `w₂` is covered too), and (for fixed `w₁`) `w₂ = ±iε₂`, `ε₂ =
/// √(a_{π0}²/w₁² + a_{π1}²)/a_{π2}`. On a thin orthant (the target close to
/// a face) these sit close to `w = 0`, where plain Gauss–Legendre converges
/// slowly; the sinh map with these `ε` removes them (for the 3D Laplace
/// kernel it cancels the `1/|·|` factor exactly) and is nearly the identity
/// when `ε ≳ 1`.
fn angular_rule(
    d: usize,
    a: &[f64; 3],
    perm: &[usize],
    u: &[f64],
    c: &[f64],
    out: &mut Vec<([f64; 2], f64)>,
) {
    out.clear();
    let far = if d == 2 {
        a[perm[1]]
    } else {
        a[perm[1]].hypot(a[perm[2]])
    };
    let eps1 = a[perm[0]] / far;
    for (&u1, &c1) in u.iter().zip(c) {
        let (w1, j1) = sinh_map(eps1, u1);
        if d == 2 {
            out.push(([w1, 0.0], c1 * j1));
        } else {
            let a0 = a[perm[0]] / w1;
            let eps2 = (a0 * a0 + a[perm[1]] * a[perm[1]]).sqrt() / a[perm[2]];
            for (&u2, &c2) in u.iter().zip(c) {
                let (w2, j2) = sinh_map(eps2, u2);
                out.push(([w1, w1 * w2], c1 * j1 * c2 * j2 * w1));
            }
        }
    }
}

/// `∫_{[0,L]^d} φ_s(y) G(x − y) dy` for an arbitrary target point `x`
/// (`kernel.dim()` components, finite), by the scheme of the module docs.
///
/// `q` nodes per axis (`1..=MAX_QUAD_ORDER`), `s < q^d` the source mode,
/// `L` finite and positive. The kernel's dimension must be 2 or 3. The
/// kernel, `L` and `x` must be in the ranges of
/// [`crate::nearfield::check_kernel_and_extent`] (`x`: within
/// [`crate::nearfield::TARGET_REACH`]`·L` of the box's centre and, inside the box,
/// on a face or at least [`crate::nearfield::MIN_FACE_DISTANCE`]`·L` from it); a
/// value that still comes out NaN or infinite is an error naming it.
pub fn entry_at_point(
    kernel: &Kernel,
    q: usize,
    s: usize,
    x: &[f64],
    l: f64,
    quad: &EntryQuadrature,
) -> Result<f64> {
    Ok(integrate(kernel, q, Some(s), x, l, quad)?[0])
}

/// All source modes at once: `[∫ φ_s(y) G(x − y) dy for s in 0..q^d]`,
/// sharing one pass of the quadrature (the kernel is evaluated once per
/// point; cost about that of one [`entry_at_point`], the module docs).
/// Same arguments and checks as [`entry_at_point`].
pub fn entries_at_point(
    kernel: &Kernel,
    q: usize,
    x: &[f64],
    l: f64,
    quad: &EntryQuadrature,
) -> Result<Vec<f64>> {
    integrate(kernel, q, None, x, l, quad)
}

/// The scheme of the module docs for one mode (`Some(s)`, a vector of one)
/// or all modes (`None`, `q^d` values).
fn integrate(
    kernel: &Kernel,
    q: usize,
    single: Option<usize>,
    x: &[f64],
    l: f64,
    quad: &EntryQuadrature,
) -> Result<Vec<f64>> {
    let d = kernel.dim();
    if d != 2 && d != 3 {
        return Err(Error::InvalidInput(format!(
            "near-field entry: dimension {d} is not supported (2 or 3)"
        )));
    }
    if x.len() != d {
        return Err(Error::InvalidInput(format!(
            "near-field entry: target point has {} components, dimension is {d}",
            x.len()
        )));
    }
    if let Some(c) = x.iter().find(|c| !c.is_finite()) {
        return Err(Error::InvalidInput(format!(
            "near-field entry: target point component {c} is not finite"
        )));
    }
    if quad.angular_order == 0 {
        return Err(Error::InvalidInput(
            "near-field entry: angular order must be at least 1".into(),
        ));
    }
    let (xi, _) = gauss_legendre(q, l)?;
    check_kernel_and_extent(kernel, l)?;
    check_target_point(x, l)?;
    let nq = q.pow(d as u32);
    if let Some(s) = single {
        if s >= nq {
            return Err(Error::InvalidInput(format!(
                "near-field entry: source mode {s} out of range 0..{nq} (q = {q}, dimension {d})"
            )));
        }
    }
    let basis = Lagrange1d::new(&xi, l);
    // The modes evaluated per axis: all, or the one of `single`; `nm` of
    // them, output index `Σ_k n_k nm^{d−1−k}` (axis 0 slowest).
    let modes: Vec<Vec<usize>> = (0..d)
        .map(|k| match single {
            Some(s) => vec![(s / q.pow((d - 1 - k) as u32)) % q],
            None => (0..q).collect(),
        })
        .collect();
    let nm = modes[0].len();
    let nout = nm.pow(d as u32);
    let digits: Vec<[usize; 3]> = (0..nout)
        .map(|m| {
            let mut dg = [0usize; 3];
            for (k, x) in dg.iter_mut().enumerate().take(d) {
                *x = (m / nm.pow((d - 1 - k) as u32)) % nm;
            }
            dg
        })
        .collect();

    let (tr, wr) = tanh_sinh_unit(quad.radial_level)?;
    let (ta, wa) = legendre_gauss_unit(quad.angular_order)?;
    let ta: Vec<f64> = ta.iter().map(|t| 0.5 * (1.0 + t)).collect();
    let wa: Vec<f64> = wa.iter().map(|w| 0.5 * w).collect();
    let na = quad.angular_order;

    let p: Vec<f64> = x.iter().map(|&c| c.clamp(0.0, l)).collect();
    let mut offset = [0.0f64; 3];
    for k in 0..d {
        offset[k] = x[k] - p[k];
    }
    // p_k − ξ_j per axis (Lagrange1d::values).
    let p_minus_xi: Vec<Vec<f64>> = (0..d)
        .map(|k| xi.iter().map(|&xj| p[k] - xj).collect())
        .collect();
    let perms = permutations(d);
    let mut ang: Vec<([f64; 2], f64)> = Vec::new();
    let mut total = Compensated::new(nout);
    let mut simplex = Compensated::new(nout);
    // Partial sums over the inner Duffy coordinates: `inner[n]` over the
    // last one (3D: w₂), `outer[n₁·nm + n₂]` over w₁ (3D) — see below.
    let mut inner = Compensated::new(nm);
    let mut outer = Compensated::new(nm * nm);
    // 1D basis values (modes of one axis) at the current coordinate of the
    // simplex's axes π0, π1, π2.
    let mut lag = [vec![0.0; nm], vec![0.0; nm], vec![0.0; nm]];
    let mut r = [0.0f64; 3];
    for orthant in 0..(1usize << d) {
        // σ_k = +1 towards L, −1 towards 0; a_k the side.
        let mut sigma = [0.0f64; 3];
        let mut a = [0.0f64; 3];
        for k in 0..d {
            if orthant >> k & 1 == 1 {
                sigma[k] = 1.0;
                a[k] = l - p[k];
            } else {
                sigma[k] = -1.0;
                a[k] = p[k];
            }
        }
        if a[..d].iter().any(|&ak| ak <= 0.0) {
            continue;
        }
        // The orthant's volume, the same bits for any order of the sides.
        let volume = if d == 2 {
            a[0] * a[1]
        } else {
            let (s0, s1, s2) = sort3(a[0], a[1], a[2]);
            (s0 * s1) * s2
        };
        for perm in &perms {
            angular_rule(d, &a, perm, &ta, &wa, &mut ang);
            simplex.clear();
            // Coordinate `v` of axis `perm[j]`: its step from p, the
            // distance component and the basis values there.
            let set_axis = |j: usize, v: f64, r: &mut [f64; 3], lag: &mut [Vec<f64>; 3]| {
                let k = perm[j];
                let step = sigma[k] * a[k] * v;
                // x − y as (x − p) − step: exact near p, where p + step
                // rounds to p.
                r[k] = offset[k] - step;
                basis.values(&p_minus_xi[k], step, &modes[k], &mut lag[j]);
            };
            for (&t, &wt) in tr.iter().zip(&wr) {
                let jac_t = if d == 2 { t } else { t * t };
                // v_{π0} = t, v_{π1} = t w₁, v_{π2} = t w₁ w₂. The sum
                // over the ray is factored by axis: Σ_{w₁} ℓ_{π1} Σ_{w₂}
                // g ℓ_{π2} (3D), each axis's basis evaluated once per value
                // of its coordinate.
                set_axis(0, t, &mut r, &mut lag);
                if d == 2 {
                    inner.clear();
                    for (wv, wang) in &ang {
                        set_axis(1, t * wv[0], &mut r, &mut lag);
                        let g = wang * kernel.value(&r[..d]);
                        for (n, &lv) in lag[1].iter().enumerate() {
                            inner.add(n, g * lv);
                        }
                    }
                } else {
                    outer.clear();
                    for chunk in ang.chunks_exact(na) {
                        set_axis(1, t * chunk[0].0[0], &mut r, &mut lag);
                        inner.clear();
                        for (wv, wang) in chunk {
                            set_axis(2, t * wv[1], &mut r, &mut lag);
                            let g = wang * kernel.value(&r[..d]);
                            for (n, &lv) in lag[2].iter().enumerate() {
                                inner.add(n, g * lv);
                            }
                        }
                        for (n1, &l1) in lag[1].iter().enumerate() {
                            for n2 in 0..nm {
                                outer.add(n1 * nm + n2, l1 * inner.value(n2));
                            }
                        }
                    }
                }
                let f = wt * jac_t;
                for (m, dg) in digits.iter().enumerate() {
                    // The mode's digits in the simplex's axis order.
                    let ray = if d == 2 {
                        lag[0][dg[perm[0]]] * inner.value(dg[perm[1]])
                    } else {
                        lag[0][dg[perm[0]]] * outer.value(dg[perm[1]] * nm + dg[perm[2]])
                    };
                    simplex.add(m, f * ray);
                }
            }
            for m in 0..nout {
                total.add(m, volume * simplex.value(m));
            }
        }
    }
    let values: Vec<f64> = (0..nout).map(|m| total.value(m)).collect();
    check_finite(
        &format!("near-field entry at target point {x:?} (L = {l:e})"),
        &values,
        &|m| match single {
            Some(s) => format!("source mode {s}"),
            None => format!("source mode {m}"),
        },
    )?;
    Ok(values)
}

/// Three values in ascending order (min/max only: the same result for any
/// order of the arguments).
#[inline(always)]
fn sort3(a: f64, b: f64, c: f64) -> (f64, f64, f64) {
    let (a, b) = if b < a { (b, a) } else { (a, b) };
    let (b, c) = if c < b { (c, b) } else { (b, c) };
    let (a, b) = if b < a { (b, a) } else { (a, b) };
    (a, b, c)
}

/// `(s, e)` with `s = fl(a + b)` and `a + b = s + e` exactly (Knuth's
/// TwoSum; no branch, valid for any magnitudes).
#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Compensated sums, one per mode: the rounded sum and the running sum of
/// the exact rounding errors of its additions.
struct Compensated {
    sum: Vec<f64>,
    err: Vec<f64>,
}

impl Compensated {
    fn new(n: usize) -> Compensated {
        Compensated {
            sum: vec![0.0; n],
            err: vec![0.0; n],
        }
    }

    fn clear(&mut self) {
        self.sum.fill(0.0);
        self.err.fill(0.0);
    }

    #[inline(always)]
    fn add(&mut self, m: usize, x: f64) {
        let (s, e) = two_sum(self.sum[m], x);
        self.sum[m] = s;
        self.err[m] += e;
    }

    fn value(&self, m: usize) -> f64 {
        self.sum[m] + self.err[m]
    }
}

/// The table entry `T[case, s, t]` for the source box `[0, L]^d`
/// (`d = kernel.dim()`, 2 or 3): the target point `t` of the case
/// ([`Cases::target_points`]) and [`entry_at_point`].
pub fn entry(
    kernel: &Kernel,
    q: usize,
    case: CaseRef<'_>,
    s: usize,
    t: usize,
    l: f64,
    quad: &EntryQuadrature,
) -> Result<f64> {
    let d = kernel.dim();
    let cases = Cases::new(d)?;
    let id = match case {
        CaseRef::Id(id) if id < cases.len() => id,
        CaseRef::Id(id) => {
            return Err(Error::InvalidInput(format!(
                "case id {id} out of range 0..{} (dimension {d})",
                cases.len()
            )))
        }
        CaseRef::Vector(v) => cases.id_of_vector(v).ok_or_else(|| {
            Error::InvalidInput(format!(
                "case vector {v:?} is no interaction case of dimension {d}"
            ))
        })?,
    };
    let pts = cases.target_points(id, q, l)?;
    let nq = pts.len() / d;
    if t >= nq {
        return Err(Error::InvalidInput(format!(
            "near-field entry: target point {t} out of range 0..{nq} (q = {q}, dimension {d})"
        )));
    }
    entry_at_point(kernel, q, s, &pts[t * d..(t + 1) * d], l, quad)
}
