//! Gauss–Legendre nodes and weights in float64, and the source box's tensor
//! nodes (`q_points` of a table).

use crate::runtime::{Error, Result};

/// The largest number of nodes per axis accepted (the tables use far fewer;
/// the Newton iteration below stays accurate to well beyond this).
pub const MAX_QUAD_ORDER: usize = 64;

fn check_order(q: usize) -> Result<()> {
    if q == 0 || q > MAX_QUAD_ORDER {
        return Err(Error::InvalidInput(format!(
            "quadrature order q = {q}: must be in 1..={MAX_QUAD_ORDER}"
        )));
    }
    Ok(())
}

fn check_extent(l: f64) -> Result<()> {
    if !(l.is_finite() && l > 0.0) {
        return Err(Error::InvalidInput(format!(
            "box extent L = {l}: must be finite and positive"
        )));
    }
    Ok(())
}

/// `P_n(x)` and `P_{n−1}(x)` by the three-term recurrence (n ≥ 1).
fn legendre_pair(n: usize, x: f64) -> (f64, f64) {
    let mut prev = 1.0; // P_0
    let mut cur = x; // P_1
    for k in 1..n {
        let kf = k as f64;
        let next = ((2.0 * kf + 1.0) * x * cur - kf * prev) / (kf + 1.0);
        prev = cur;
        cur = next;
    }
    (cur, prev)
}

/// The `q` Gauss–Legendre nodes (ascending) and weights on `[−1, 1]`.
///
/// Each positive root of `P_q` is found by Newton's method from the
/// estimate `cos(π(i + 3/4)/(q + 1/2))`, iterating until a step is below
/// 1e−14 relative (the error after it is then of the order of its square,
/// far below one ulp); the negative roots are their mirror images (the rule
/// is exactly symmetric, and `0` is a node exactly when `q` is odd).
/// Weights are `2 / ((1 − x²) P_q'(x)²)`.
pub fn legendre_gauss_unit(q: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    check_order(q)?;
    let n = q;
    let nf = n as f64;
    let mut nodes = vec![0.0; n];
    let mut weights = vec![0.0; n];
    let derivative = |x: f64| {
        let (p, pm1) = legendre_pair(n, x);
        (p, nf * (x * p - pm1) / (x * x - 1.0))
    };
    // Root i (largest first) goes to n − 1 − i, its mirror image to i.
    for i in 0..n.div_ceil(2) {
        // The middle root of an odd order is 0 exactly; no iteration needed.
        let mut x = 0.0;
        if 2 * i + 1 != n {
            x = (std::f64::consts::PI * (i as f64 + 0.75) / (nf + 0.5)).cos();
            for _ in 0..100 {
                let (p, dp) = derivative(x);
                let dx = p / dp;
                x -= dx;
                // Quadratic convergence: after a step this small the error
                // is far below one ulp.
                if dx.abs() <= 1e-14 * x.abs() {
                    break;
                }
            }
        }
        // P_q' at the root (at x = 0 the formula reads q·P_{q−1}(0)).
        let (_, dp) = derivative(x);
        let w = 2.0 / ((1.0 - x * x) * dp * dp);
        nodes[n - 1 - i] = x;
        nodes[i] = -x;
        weights[n - 1 - i] = w;
        weights[i] = w;
    }
    Ok((nodes, weights))
}

/// The `q` Gauss–Legendre nodes (ascending) and weights on `[0, L]`:
/// `ξ = (L/2)(1 + x)`, `w = (L/2) w_x` from [`legendre_gauss_unit`].
///
/// The nodes are exact mirror images, `ξ_{q−1−i} = L − ξ_i` with no
/// rounding: the upper half is `(L/2)(1 + x)` rounded to a multiple of
/// `2^{e−51}` (`2^e ≤ L < 2^{e+1}`; `2^{−51}` for `L = 1`, an error of at
/// most `2^{−52} L`, about one ulp of `L`), the lower half `L` minus it
/// (exact). With `L` a power of two every target point of every case
/// ([`crate::nearfield::Cases::target_points`]) is then computed exactly, so that a
/// signed permutation of the axes maps target points onto target points
/// bit for bit (the symmetry of a table, `crate::nearfield::symmetry`).
///
/// `q` in `1..=MAX_QUAD_ORDER`, `L` finite and positive. The rule is exact
/// for polynomials of degree `2q − 1` (to the rounding of the nodes);
/// `q = 1` is the midpoint `L/2` with weight `L`.
pub fn gauss_legendre(q: usize, l: f64) -> Result<(Vec<f64>, Vec<f64>)> {
    check_extent(l)?;
    let (x, w) = legendre_gauss_unit(q)?;
    let h = 0.5 * l;
    // The grid of the upper nodes, 2^{e−51} with 2^e ≤ L < 2^{e+1} (for a
    // subnormal L the smallest positive float). At L = 1 it is what the
    // target points need: ξ − L/2 on it is exact, and so are centre +
    // size·(ξ − L/2) for the sizes ½, 1, 2 and |x| < 3L.
    let exponent = ((l.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let grid = 2f64.powi(exponent - 51).max(f64::from_bits(1));
    let mut nodes = vec![0.0; q];
    for i in q / 2..q {
        let hi = if 2 * i + 1 == q {
            h
        } else {
            ((h * (1.0 + x[i])) / grid).round() * grid
        };
        nodes[i] = hi;
        nodes[q - 1 - i] = l - hi;
    }
    Ok((nodes, w.iter().map(|&w| h * w).collect()))
}

/// The source box's tensor nodes: `q^dim` points × `dim` coordinates,
/// row-major, point `m = Σ_k m_k q^{dim−1−k}` (axis 0 slowest) at
/// `(ξ_{m_0}, …, ξ_{m_{dim−1}})` with `ξ` from [`gauss_legendre`]`(q, L)`.
///
/// This is the order of volumential's `q_points` (nodes sorted in dictionary
/// order); `dim` in 1..=3.
pub fn q_points(q: usize, l: f64, dim: usize) -> Result<Vec<f64>> {
    if !(1..=3).contains(&dim) {
        return Err(Error::InvalidInput(format!(
            "dimension {dim}: must be 1, 2 or 3"
        )));
    }
    let (xi, _) = gauss_legendre(q, l)?;
    let n = q.pow(dim as u32);
    let mut out = Vec::with_capacity(n * dim);
    for m in 0..n {
        for k in 0..dim {
            let mk = (m / q.pow((dim - 1 - k) as u32)) % q;
            out.push(xi[mk]);
        }
    }
    Ok(out)
}
