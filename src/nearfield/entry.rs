//! One entry of a near-field table by the singularity-aware Duffy/radial
//! scheme of SPEC §5, CPU float64:
//!
//! ```text
//! T[case, s, t] = ∫_{[0,L]^d} φ_s(y) G(x_t − y) dy
//! ```
//!
//! with `φ_s` the tensor Lagrange basis on the `q` Gauss–Legendre nodes
//! (flat index axis 0 slowest, [`super::q_points`]) and `x_t` the target
//! point of the case ([`super::Cases::target_points`]).
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
//!
//! The cost of an entry is `2^d · d! · (7·2^{radial_level} + 1) ·
//! angular_order^{d−1}` kernel evaluations (at most; 3D self case with the
//! defaults: 2.2·10⁶). [`entries_at_point`] shares one pass among all
//! `q^d` source modes of a target point.
//!
//! # Accuracy of the defaults (radial level 4, angular order 20)
//!
//! Measured (tests/nearfield_entries.rs): closed-form q = 1 self entries
//! 1.2e−15 (3D) and 3.3e−16 (2D) relative; targets outside the box against
//! brute-force composite tensor Gauss–Legendre ≤ 3e−14; Laplace 2D q = 4 and
//! 3D q = 3 self and touching entries against the same scheme at radial
//! level 5, angular order 32 ≤ 3e−15 (3D q = 4 against level 5, order 40:
//! ≤ 1.5e−14, derivative kernels included). The limiting term is radial for
//! targets just outside the box (radial level 3 leaves 1e−9 on a 3D q = 4
//! derivative entry) and angular for self entries near a corner (angular
//! order 16 leaves 7e−12 on a 3D q = 4 derivative entry).
use super::cases::Cases;
use super::kernels::Kernel;
use super::quadrature::{gauss_legendre, legendre_gauss_unit};
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

/// The 1D Lagrange basis on the nodes `xi`: `ℓ_i(y)` for every `i`.
struct Lagrange1d {
    xi: Vec<f64>,
    inv_denominators: Vec<f64>,
}

impl Lagrange1d {
    fn new(xi: Vec<f64>) -> Lagrange1d {
        let inv_denominators = (0..xi.len())
            .map(|i| {
                1.0 / (0..xi.len())
                    .filter(|&j| j != i)
                    .map(|j| xi[i] - xi[j])
                    .product::<f64>()
            })
            .collect();
        Lagrange1d {
            xi,
            inv_denominators,
        }
    }

    fn eval(&self, i: usize, y: f64) -> f64 {
        let mut p = self.inv_denominators[i];
        for (j, &x) in self.xi.iter().enumerate() {
            if j != i {
                p *= y - x;
            }
        }
        p
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
/// `L` finite and positive. The kernel's dimension must be 2 or 3.
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
/// point; cost about that of one [`entry_at_point`] plus `q^d` multiply-adds
/// per point). Same arguments and checks as [`entry_at_point`].
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
    let nq = q.pow(d as u32);
    if let Some(s) = single {
        if s >= nq {
            return Err(Error::InvalidInput(format!(
                "near-field entry: source mode {s} out of range 0..{nq} (q = {q}, dimension {d})"
            )));
        }
    }
    let basis = Lagrange1d::new(xi);
    let mode: Vec<usize> = (0..d)
        .map(|k| (single.unwrap_or(0) / q.pow((d - 1 - k) as u32)) % q)
        .collect();
    let nout = if single.is_some() { 1 } else { nq };

    let (tr, wr) = tanh_sinh_unit(quad.radial_level)?;
    let (ta, wa) = legendre_gauss_unit(quad.angular_order)?;
    let ta: Vec<f64> = ta.iter().map(|t| 0.5 * (1.0 + t)).collect();
    let wa: Vec<f64> = wa.iter().map(|w| 0.5 * w).collect();

    let p: Vec<f64> = x.iter().map(|&c| c.clamp(0.0, l)).collect();
    let mut offset = [0.0f64; 3];
    for k in 0..d {
        offset[k] = x[k] - p[k];
    }
    let perms = permutations(d);
    let mut ang: Vec<([f64; 2], f64)> = Vec::new();
    let mut total = vec![0.0; nout];
    let mut simplex_sum = vec![0.0; nout];
    let mut ray_sum = vec![0.0; nout];
    // 1D basis values per axis at the current point (all-modes path).
    let mut lag = vec![0.0; 3 * q];
    let mut y = [0.0f64; 3];
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
        let volume: f64 = a[..d].iter().product();
        for perm in &perms {
            angular_rule(d, &a, perm, &ta, &wa, &mut ang);
            simplex_sum.fill(0.0);
            for (&t, &wt) in tr.iter().zip(&wr) {
                let jac_t = if d == 2 { t } else { t * t };
                ray_sum.fill(0.0);
                for (wv, wang) in &ang {
                    // v_{π0} = t, v_{π1} = t w₁, v_{π2} = t w₁ w₂.
                    for (j, &k) in perm.iter().enumerate() {
                        let vk = if j == 0 { t } else { t * wv[j - 1] };
                        let step = sigma[k] * a[k] * vk;
                        y[k] = p[k] + step;
                        // x − y as (x − p) − step: exact near p, where
                        // p + step rounds to p.
                        r[k] = offset[k] - step;
                    }
                    let g = wang * kernel.value(&r[..d]);
                    if single.is_some() {
                        let mut phi = g;
                        for k in 0..d {
                            phi *= basis.eval(mode[k], y[k]);
                        }
                        ray_sum[0] += phi;
                    } else {
                        for k in 0..d {
                            for i in 0..q {
                                lag[k * q + i] = basis.eval(i, y[k]);
                            }
                        }
                        accumulate_tensor(d, q, g, &lag, &mut ray_sum);
                    }
                }
                let f = wt * jac_t;
                for (s, rs) in simplex_sum.iter_mut().zip(&ray_sum) {
                    *s += f * rs;
                }
            }
            for (tot, ss) in total.iter_mut().zip(&simplex_sum) {
                *tot += volume * ss;
            }
        }
    }
    Ok(total)
}

/// `out[m] += g · Π_k lag[k·q + m_k]` over the flat modes `m` (axis 0
/// slowest).
fn accumulate_tensor(d: usize, q: usize, g: f64, lag: &[f64], out: &mut [f64]) {
    if d == 2 {
        for i in 0..q {
            let gi = g * lag[i];
            for j in 0..q {
                out[i * q + j] += gi * lag[q + j];
            }
        }
    } else {
        for i in 0..q {
            let gi = g * lag[i];
            for j in 0..q {
                let gij = gi * lag[q + j];
                let row = &mut out[(i * q + j) * q..(i * q + j + 1) * q];
                for (o, &lk) in row.iter_mut().zip(&lag[2 * q..3 * q]) {
                    *o += gij * lk;
                }
            }
        }
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
