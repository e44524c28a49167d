//! Box-size scaling (`docs/design/nearfield.md#scaling`): a table for the
//! source box `[0, L]^d` gives the table for `[0, ρL]^d` without new
//! quadrature, for the kernels that are homogeneous (up to a logarithm)
//! in the distance.
//!
//! With `y = ρu`, `x_t(ρL) = ρ x_t(L)` and `φ_s^{ρL}(ρu) = φ_s^{L}(u)`:
//!
//! ```text
//! T_ρL[c, s, t] = ρ^d ∫_{[0,L]^d} φ_s(u) G(ρ (x_t − u)) du
//! ```
//!
//! - 3D Laplace, `G(ρr) = G(r)/ρ`: `ρ²·T`.
//! - 2D Laplace, `G(ρr) = G(r) − ln ρ/(2π)`:
//!   `ρ²·T − ρ²·ln ρ·N_s/(2π)`, `N_s = ∫_{[0,L]^2} φ_s` (the mode
//!   normaliser at the original extent `L`).
//! - Axis target/source and directional source derivatives of Laplace,
//!   `∂G(ρr) = ∂G(r)/ρ^{d−1}`: `ρ·T` in 2D and 3D.
//! - Constant: `ρ^d·T` (its derivatives are identically 0, any factor
//!   keeps them so; `ρ^{d−1}` by the same count as above).
//! - Yukawa: `e^{−λρr}` is not homogeneous; it needs one table per level
//!   (an error here).
use crate::nearfield::kernels::{BaseKernel, Kernel};
use crate::nearfield::quadrature::q_points;
use crate::nearfield::table::{mode_normalizers, NearFieldTable};
use crate::runtime::{Error, Result};
use std::f64::consts::PI;

/// How the entries of a kernel's table change when the box grows by `ρ`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalingRule {
    /// `T ↦ ρ^p · T`.
    Power(i32),
    /// 2D Laplace: `T ↦ ρ²·T − ρ²·ln ρ·N_s/(2π)`.
    LogShift2d,
}

impl ScalingRule {
    /// The rule of a kernel; an error (`InvalidInput`) for Yukawa, whose
    /// tables are built per level.
    pub fn of(kernel: &Kernel) -> Result<ScalingRule> {
        let d = kernel.dim() as i32;
        let deriv = kernel.derivative().is_some();
        match kernel.base() {
            BaseKernel::Yukawa { lambda } => Err(Error::InvalidInput(format!(
                "Yukawa kernel (λ = {lambda}) does not scale with the box size: \
                 build one table per level"
            ))),
            BaseKernel::Constant => Ok(ScalingRule::Power(if deriv { d - 1 } else { d })),
            BaseKernel::Laplace if deriv => Ok(ScalingRule::Power(1)),
            BaseKernel::Laplace if d == 2 => Ok(ScalingRule::LogShift2d),
            BaseKernel::Laplace => Ok(ScalingRule::Power(2)),
        }
    }

    /// One entry scaled: `value` the entry at extent `L`, `normalizer`
    /// `∫_{[0,L]^d} φ_s` of its source mode (used by [`LogShift2d`] only).
    ///
    /// [`LogShift2d`]: ScalingRule::LogShift2d
    pub fn apply(self, value: f64, rho: f64, normalizer: f64) -> f64 {
        match self {
            ScalingRule::Power(p) => rho.powi(p) * value,
            ScalingRule::LogShift2d => {
                let r2 = rho * rho;
                r2 * value - r2 * rho.ln() * normalizer / (2.0 * PI)
            }
        }
    }
}

fn check_rho(rho: f64, extent: f64) -> Result<()> {
    if !(rho.is_finite() && rho > 0.0 && (rho * extent).is_finite() && rho * extent > 0.0) {
        return Err(Error::InvalidInput(format!(
            "scaling factor ρ = {rho}: must be finite and positive (and ρL finite, L = {extent})"
        )));
    }
    Ok(())
}

impl NearFieldTable {
    /// The table for the source box `[0, ρL]^d` from this one by
    /// [`ScalingRule::of`] its kernel: entries scaled, `q_points` and mode
    /// normalisers those of extent `ρL`. Errors for Yukawa and for `ρ` not
    /// finite and positive.
    pub fn scaled(&self, rho: f64) -> Result<NearFieldTable> {
        let rule = ScalingRule::of(&self.kernel)?;
        check_rho(rho, self.extent)?;
        let d = self.dim();
        let l = rho * self.extent;
        let nq = self.n_modes();
        let data = self
            .data
            .iter()
            .enumerate()
            .map(|(id, &v)| rule.apply(v, rho, self.mode_normalizers[(id / nq) % nq]))
            .collect::<Vec<f64>>();
        // ρ so large (or small) that a scaled entry overflows: an error, not
        // a table holding inf or NaN.
        if let Some((id, v)) = data.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::InvalidInput(format!(
                "scaling by ρ = {rho:e}: entry {id} becomes {v}, not finite (overflow)"
            )));
        }
        Ok(NearFieldTable {
            kernel: self.kernel.clone(),
            q: self.q,
            extent: l,
            quad: self.quad,
            cases: self.cases.clone(),
            q_points: q_points(self.q, l, d)?,
            mode_normalizers: mode_normalizers(self.q, l, d)?,
            data,
        })
    }

    /// The table for a source box of extent `new_extent` (`ρ = new_extent/L`).
    pub fn scaled_to(&self, new_extent: f64) -> Result<NearFieldTable> {
        if !(new_extent.is_finite() && new_extent > 0.0) {
            return Err(Error::InvalidInput(format!(
                "box extent {new_extent}: must be finite and positive"
            )));
        }
        let mut t = self.scaled(new_extent / self.extent)?;
        t.extent = new_extent;
        t.q_points = q_points(self.q, new_extent, self.dim())?;
        t.mode_normalizers = mode_normalizers(self.q, new_extent, self.dim())?;
        Ok(t)
    }
}
