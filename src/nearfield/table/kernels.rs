//! The kernels of the near-field tables, in float64: values of `G(x − y)`
//! with their normalisation, closed-form gradients, and the derivative
//! wrappers (`docs/design/nearfield.md#kernels`). `x` is the target, `y` the source; every function
//! here takes `r = x − y`.
//!
//! Base kernels (`ρ = |r|`):
//!
//! | kernel | 2D | 3D |
//! |---|---|---|
//! | Laplace | `−ln(ρ)/(2π)` | `1/(4πρ)` |
//! | Yukawa(λ) | `K₀(λρ)/(2π)` | `e^{−λρ}/(4πρ)` |
//! | Constant | `1` | `1` |
//!
//! Derivative wrappers (axes 0-based): `∂G/∂x_a` (target), `∂G/∂y_a =
//! −∂G/∂r_a` (source), and `−d·∇_r G` for a fixed direction `d` used as
//! given (not normalised).

use crate::runtime::{Error, Result};
use std::f64::consts::PI;

/// Euler–Mascheroni constant.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// A base kernel (no derivative).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BaseKernel {
    /// 2D `−ln(ρ)/(2π)`, 3D `1/(4πρ)`.
    Laplace,
    /// 2D `K₀(λρ)/(2π)`, 3D `e^{−λρ}/(4πρ)`; `λ > 0` finite.
    Yukawa {
        /// The screening parameter λ.
        lambda: f64,
    },
    /// `G ≡ 1` in any dimension.
    Constant,
}

/// A derivative applied to a base kernel.
#[derive(Clone, Debug, PartialEq)]
pub enum Derivative {
    /// `∂G(x − y)/∂x_axis` (target derivative).
    AxisTarget(usize),
    /// `∂G(x − y)/∂y_axis` (source derivative, `= −∂G/∂r_axis`).
    AxisSource(usize),
    /// `Σ_k d_k ∂G(x − y)/∂y_k` with `d` as given (not normalised).
    DirectionalSource(Vec<f64>),
}

/// A kernel of a table: a base kernel in a dimension, optionally wrapped in
/// one derivative. Built through [`Kernel::new`] and the derivative
/// constructors, which check the dimension, the axis and the parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    base: BaseKernel,
    dim: usize,
    derivative: Option<Derivative>,
}

impl Kernel {
    /// A base kernel in dimension `dim`: Laplace and Yukawa in 2 or 3,
    /// Constant in 1..=3; Yukawa's λ finite and positive.
    pub fn new(base: BaseKernel, dim: usize) -> Result<Kernel> {
        match base {
            BaseKernel::Laplace | BaseKernel::Yukawa { .. } if dim != 2 && dim != 3 => {
                return Err(Error::InvalidInput(format!(
                    "kernel {base:?}: dimension {dim} is not supported (2 or 3)"
                )));
            }
            BaseKernel::Constant if !(1..=3).contains(&dim) => {
                return Err(Error::InvalidInput(format!(
                    "constant kernel: dimension {dim} is not supported (1, 2 or 3)"
                )));
            }
            BaseKernel::Yukawa { lambda } if !(lambda.is_finite() && lambda > 0.0) => {
                return Err(Error::InvalidInput(format!(
                    "Yukawa kernel: λ = {lambda} must be finite and positive"
                )));
            }
            _ => {}
        }
        Ok(Kernel {
            base,
            dim,
            derivative: None,
        })
    }

    /// Laplace in dimension `dim` (2 or 3).
    pub fn laplace(dim: usize) -> Result<Kernel> {
        Kernel::new(BaseKernel::Laplace, dim)
    }

    /// Yukawa(λ) in dimension `dim` (2 or 3).
    pub fn yukawa(dim: usize, lambda: f64) -> Result<Kernel> {
        Kernel::new(BaseKernel::Yukawa { lambda }, dim)
    }

    /// The constant kernel 1 in dimension `dim` (1..=3).
    pub fn constant(dim: usize) -> Result<Kernel> {
        Kernel::new(BaseKernel::Constant, dim)
    }

    fn wrap(self, d: Derivative) -> Result<Kernel> {
        if let Some(old) = &self.derivative {
            return Err(Error::InvalidInput(format!(
                "kernel already has a derivative ({old:?}); derivatives do not nest"
            )));
        }
        match &d {
            Derivative::AxisTarget(a) | Derivative::AxisSource(a) if *a >= self.dim => {
                return Err(Error::InvalidInput(format!(
                    "derivative axis {a} out of range for dimension {} (axes are 0-based)",
                    self.dim
                )));
            }
            Derivative::DirectionalSource(v) => {
                if v.len() != self.dim {
                    return Err(Error::InvalidInput(format!(
                        "derivative direction has {} components, dimension is {}",
                        v.len(),
                        self.dim
                    )));
                }
                if let Some(x) = v.iter().find(|x| !x.is_finite()) {
                    return Err(Error::InvalidInput(format!(
                        "derivative direction component {x} is not finite"
                    )));
                }
            }
            _ => {}
        }
        Ok(Kernel {
            derivative: Some(d),
            ..self
        })
    }

    /// `∂/∂x_axis` of this kernel (target derivative).
    pub fn axis_target_derivative(self, axis: usize) -> Result<Kernel> {
        self.wrap(Derivative::AxisTarget(axis))
    }

    /// `∂/∂y_axis` of this kernel (source derivative).
    pub fn axis_source_derivative(self, axis: usize) -> Result<Kernel> {
        self.wrap(Derivative::AxisSource(axis))
    }

    /// `Σ_k d_k ∂/∂y_k` of this kernel, `d` as given (not normalised).
    pub fn directional_source_derivative(self, direction: &[f64]) -> Result<Kernel> {
        self.wrap(Derivative::DirectionalSource(direction.to_vec()))
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The base kernel.
    pub fn base(&self) -> BaseKernel {
        self.base
    }

    /// The derivative, if any.
    pub fn derivative(&self) -> Option<&Derivative> {
        self.derivative.as_ref()
    }

    /// The base kernel's value at `r = x − y` (`dim` components; `r ≠ 0`
    /// except for Constant).
    pub fn base_value(&self, r: &[f64]) -> f64 {
        let rho = norm(r);
        match (self.base, self.dim) {
            (BaseKernel::Constant, _) => 1.0,
            (BaseKernel::Laplace, 2) => -rho.ln() / (2.0 * PI),
            (BaseKernel::Laplace, _) => 1.0 / (4.0 * PI * rho),
            (BaseKernel::Yukawa { lambda }, 2) => bessel_k0(lambda * rho) / (2.0 * PI),
            (BaseKernel::Yukawa { lambda }, _) => (-lambda * rho).exp() / (4.0 * PI * rho),
        }
    }

    /// `g'(ρ)/ρ` of the base kernel `G = g(ρ)`, so that `∇_r G = (g'/ρ) r`.
    fn radial_factor(&self, rho: f64) -> f64 {
        match (self.base, self.dim) {
            (BaseKernel::Constant, _) => 0.0,
            (BaseKernel::Laplace, 2) => -1.0 / (2.0 * PI * rho * rho),
            (BaseKernel::Laplace, _) => -1.0 / (4.0 * PI * rho * rho * rho),
            (BaseKernel::Yukawa { lambda }, 2) => {
                -lambda * bessel_k1(lambda * rho) / (2.0 * PI * rho)
            }
            (BaseKernel::Yukawa { lambda }, _) => {
                -(-lambda * rho).exp() * (1.0 + lambda * rho) / (4.0 * PI * rho * rho * rho)
            }
        }
    }

    /// `∇_r G` of the base kernel at `r = x − y`, written into `grad`.
    pub fn base_gradient(&self, r: &[f64], grad: &mut [f64]) {
        let f = self.radial_factor(norm(r));
        for (g, &x) in grad.iter_mut().zip(r) {
            *g = f * x;
        }
    }

    /// The kernel's value at `r = x − y` (with the derivative, if any).
    ///
    /// # Panics
    /// If `r.len() != self.dim()`.
    pub fn value(&self, r: &[f64]) -> f64 {
        assert_eq!(
            r.len(),
            self.dim,
            "kernel evaluated at a point of wrong dimension"
        );
        match &self.derivative {
            None => self.base_value(r),
            Some(d) => {
                let f = self.radial_factor(norm(r));
                match d {
                    Derivative::AxisTarget(a) => f * r[*a],
                    Derivative::AxisSource(a) => -f * r[*a],
                    Derivative::DirectionalSource(v) => -f * symmetric_dot(v, r),
                }
            }
        }
    }
}

/// `|r|`, invariant bit for bit under permutations and sign changes of
/// the components (the symmetry of a table, `crate::nearfield::symmetry`): in 3D the
/// squares are added smallest first (also the more accurate order).
fn norm(r: &[f64]) -> f64 {
    match *r {
        [x, y, z] => {
            // Sorted by compare-and-swap (min/max only).
            let (a, b, c) = (x * x, y * y, z * z);
            let (a, b) = if b < a { (b, a) } else { (a, b) };
            let (b, c) = if c < b { (c, b) } else { (b, c) };
            let (a, b) = if b < a { (b, a) } else { (a, b) };
            ((a + b) + c).sqrt()
        }
        _ => r.iter().map(|x| x * x).sum::<f64>().sqrt(),
    }
}

/// `Σ_k v_k r_k` by compensated summation (TwoSum) of the rounded
/// products: to within rare last-bit ties the correctly rounded sum of
/// the products, so (nearly always) the same bits in any order of the
/// terms and exactly negated with them (a directional kernel's symmetry
/// permutes the products and may negate them all).
fn symmetric_dot(v: &[f64], r: &[f64]) -> f64 {
    let mut s = 0.0;
    let mut e = 0.0;
    for (a, b) in v.iter().zip(r) {
        let x = a * b;
        let t = s + x;
        let bb = t - s;
        e += (s - (t - bb)) + (x - bb);
        s = t;
    }
    s + e
}

/// Below this argument the power series are used, above it Steed's
/// continued fraction (Temme's CF2).
const K_SERIES_LIMIT: f64 = 2.0;

/// Above this argument `K₀` and `K₁` are below half the smallest
/// subnormal (`K₁(746) ≈ 6e−326`), so their float64 value is 0; returned
/// directly, since the continued fraction's recurrences lose themselves in
/// `∞·0` (NaN) for arguments beyond about 5e16.
const K_UNDERFLOW: f64 = 746.0;

/// Power series of `K₀` and `K₁` for `0 < x ≤ 2`:
/// `K₀ = −(ln(x/2) + γ) I₀ + Σ_{k≥1} H_k (x²/4)^k/(k!)²`,
/// `K₁ = 1/x + ln(x/2) I₁ − (x/4) Σ_{k≥0} (ψ(k+1) + ψ(k+2)) (x²/4)^k/(k!(k+1)!)`.
fn k01_series(x: f64) -> (f64, f64) {
    let y = 0.25 * x * x;
    let l = (0.5 * x).ln();
    // k = 0 terms.
    let mut term0 = 1.0; // (x²/4)^k/(k!)²
    let mut term1 = 1.0; // (x²/4)^k/(k!(k+1)!)
    let mut h = 0.0; // H_k
    let mut i0 = 1.0;
    let mut s0 = 0.0;
    let mut i1 = 1.0; // I₁ / (x/2)
    let mut s1 = 1.0 - 2.0 * EULER_GAMMA; // ψ(1) + ψ(2) = −2γ + 1
    for k in 1..60 {
        let kf = k as f64;
        term0 *= y / (kf * kf);
        term1 *= y / (kf * (kf + 1.0));
        h += 1.0 / kf;
        i0 += term0;
        s0 += h * term0;
        i1 += term1;
        // ψ(k+1) + ψ(k+2) = −2γ + 2H_k + 1/(k+1).
        s1 += (2.0 * h + 1.0 / (kf + 1.0) - 2.0 * EULER_GAMMA) * term1;
        if term0 < 1e-18 * i0 && term1 < 1e-18 * i1 {
            break;
        }
    }
    let k0 = -(l + EULER_GAMMA) * i0 + s0;
    let k1 = 1.0 / x + l * 0.5 * x * i1 - 0.25 * x * s1;
    (k0, k1)
}

/// Steed's method for Temme's continued fraction CF2 (ν = 0), `x ≥ 2`.
fn k01_cf(x: f64) -> (f64, f64) {
    let mut b = 2.0 * (1.0 + x);
    let mut d = 1.0 / b;
    let mut h = d;
    let mut delh = d;
    let mut q1 = 0.0;
    let mut q2 = 1.0;
    let a1 = 0.25;
    let mut q = a1;
    let mut c = a1;
    let mut a = -a1;
    let mut s = 1.0 + q * delh;
    for i in 1..10_000 {
        let fi = i as f64;
        a -= 2.0 * fi;
        c = -a * c / (fi + 1.0);
        let qnew = (q1 - b * q2) / a;
        q1 = q2;
        q2 = qnew;
        q += c * qnew;
        b += 2.0;
        d = 1.0 / (b + a * d);
        delh *= b * d - 1.0;
        h += delh;
        let dels = q * delh;
        s += dels;
        if (dels / s).abs() < 1e-17 {
            break;
        }
    }
    h *= a1;
    let k0 = (PI / (2.0 * x)).sqrt() * (-x).exp() / s;
    let k1 = k0 * (x + 0.5 - h) / x;
    (k0, k1)
}

/// The modified Bessel function `K₀(x)`, `x > 0`, float64 (about 1e−15
/// relative): power series for `x ≤ 2`, Temme's continued fraction up to
/// 746, 0 above (where it underflows). `+∞` at 0, NaN below.
pub fn bessel_k0(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        f64::NAN
    } else if x == 0.0 {
        f64::INFINITY
    } else if x <= K_SERIES_LIMIT {
        k01_series(x).0
    } else if x > K_UNDERFLOW {
        0.0
    } else {
        k01_cf(x).0
    }
}

/// The modified Bessel function `K₁(x)`, `x > 0` (as [`bessel_k0`]).
pub fn bessel_k1(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        f64::NAN
    } else if x == 0.0 {
        f64::INFINITY
    } else if x <= K_SERIES_LIMIT {
        k01_series(x).1
    } else if x > K_UNDERFLOW {
        0.0
    } else {
        k01_cf(x).1
    }
}
