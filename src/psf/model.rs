//! The Moffat PSF and its pixel integrals.
use super::reference::MAX_DIRECT_SUPPORT;
use super::CACHE_RADIUS;
use crate::runtime::{Error, Result};
use std::f64::consts::PI;

/// A circular Moffat PSF of unit total flux,
///
/// ```text
/// I(r) = (β − 1)/(π α²) · (1 + r²/α²)^(−β),   α = FWHM / (2 √(2^{1/β} − 1)),
/// ```
///
/// with the support radius taken from the encircled-flux tail: the flux
/// outside radius `r` is `(1 + r²/α²)^(1−β)`, so the radius outside which
/// the fraction `tail` lies is `R = α √(tail^{1/(1−β)} − 1)`
/// (FWHM 2.7, β 4.5, tail 1e−8 → R = 45.84777786185942 px).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoffatPsf {
    /// Full width at half maximum, pixels ([`MoffatPsf::MIN_FWHM`]..=[`MoffatPsf::MAX_FWHM`]).
    pub fwhm: f64,
    /// Moffat exponent β (> 1, so the total flux is finite;
    /// [`MoffatPsf::MIN_BETA`]..=[`MoffatPsf::MAX_BETA`]).
    pub beta: f64,
    /// Fraction of the flux allowed outside the support radius
    /// ([`MoffatPsf::MIN_TAIL`]..=[`MoffatPsf::MAX_TAIL`]).
    pub tail: f64,
}

impl Default for MoffatPsf {
    /// FWHM 2.7 px, β 4.5, tail 1e−8 (the PSF of `docs/design/psf.md#model`
    /// and the seed).
    fn default() -> Self {
        MoffatPsf {
            fwhm: 2.7,
            beta: 4.5,
            tail: 1e-8,
        }
    }
}

impl MoffatPsf {
    /// The smallest FWHM taken, pixels. Below it a PSF is so much narrower
    /// than a pixel that the 8-node pixel integrals
    /// ([`MoffatPsf::pixel_integral`]) miss its core: against 64 nodes the
    /// centre pixel is off by ≤ 1.2e−4 relative at 0.5 px (over β in
    /// 1.1..=100), by 5e−3 at 0.3 px and by 66 % at 0.1 px; at 1e−200 px
    /// `α²` underflows and every value is NaN.
    pub const MIN_FWHM: f64 = 0.5;
    /// The largest FWHM taken, pixels: ten times the cache's 95-px stamps,
    /// far beyond any imaging PSF, and it keeps every derived number
    /// (`α`, the normaliser, the stamps) well inside float64's range.
    pub const MAX_FWHM: f64 = 1000.0;
    /// The smallest β taken. The total flux diverges as β → 1, and the
    /// support radius `α √(tail^{1/(1−β)} − 1)` grows without bound: at
    /// β = 1.1 (FWHM 2.7) it stays within [`MAX_DIRECT_SUPPORT`] only for
    /// `tail ≥ 4.3e−3` ([`MoffatPsf::validate`] checks the combination).
    pub const MIN_BETA: f64 = 1.1;
    /// The largest β taken: at β = 100 a Moffat profile is a Gaussian for
    /// every practical purpose, and beyond it `2^{1/β} − 1` (in `α`) loses
    /// digits to cancellation.
    pub const MAX_BETA: f64 = 100.0;
    /// The smallest tail fraction taken: below 1e−15 the flux left outside
    /// the support is under float64's resolution of the image's totals
    /// (relative 1.1e−16 per value), so a smaller tail only widens the
    /// support.
    pub const MIN_TAIL: f64 = 1e-15;
    /// The largest tail fraction taken: the support must hold at least
    /// half the flux (the half-light radius); beyond it the support radius
    /// tends to 0 and events render nothing.
    pub const MAX_TAIL: f64 = 0.5;

    /// A validated PSF (see [`MoffatPsf::validate`]); an error names the
    /// parameter, its value and its valid range.
    pub fn new(fwhm: f64, beta: f64, tail: f64) -> Result<Self> {
        let psf = MoffatPsf { fwhm, beta, tail };
        psf.validate()?;
        Ok(psf)
    }

    /// Checks the parameters: `fwhm ∈ [MIN_FWHM, MAX_FWHM]` (0.5..=1000
    /// px), `beta ∈ [MIN_BETA, MAX_BETA]` (1.1..=100), `tail ∈ [MIN_TAIL,
    /// MAX_TAIL]` (1e−15..=0.5), and together a support radius `R` of at
    /// most [`MAX_DIRECT_SUPPORT`] (1e12 px, the largest any sink renders;
    /// it excludes heavy wings with a tiny tail, e.g. β 1.1 with tail
    /// 1e−8). Within these every derived number (`α`, the normaliser, `R`,
    /// the pixel integrals) is finite and positive, which is checked too.
    pub fn validate(&self) -> Result<()> {
        let range = |what: &str, v: f64, lo: f64, hi: f64, unit: &str, why: &str| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                // Plain decimals, but 1e-15 rather than 0.000000000000001.
                let num = |x: f64| {
                    if x != 0.0 && x.abs() < 1e-3 {
                        format!("{x:e}")
                    } else {
                        format!("{x}")
                    }
                };
                Err(Error::InvalidInput(format!(
                    "Moffat PSF: {what} = {v:e} is invalid (must be in {}..={}{unit}: {why})",
                    num(lo),
                    num(hi)
                )))
            }
        };
        range(
            "fwhm",
            self.fwhm,
            Self::MIN_FWHM,
            Self::MAX_FWHM,
            " px",
            "a narrower PSF is not resolved by the pixel integrals",
        )?;
        range(
            "beta",
            self.beta,
            Self::MIN_BETA,
            Self::MAX_BETA,
            "",
            "the total flux diverges as beta approaches 1",
        )?;
        range(
            "tail",
            self.tail,
            Self::MIN_TAIL,
            Self::MAX_TAIL,
            "",
            "the flux fraction outside the support radius",
        )?;
        let r = self.support_radius();
        if !(r.is_finite() && r > 0.0 && r <= MAX_DIRECT_SUPPORT) {
            return Err(Error::InvalidInput(format!(
                "Moffat PSF: fwhm {:e}, beta {:e}, tail {:e} give a support radius R = {r:e} px, \
                 beyond the {MAX_DIRECT_SUPPORT:e} px any sink renders: raise beta or tail",
                self.fwhm, self.beta, self.tail
            )));
        }
        // Implied by the ranges (the tests check their corners); kept so
        // that no NaN can come out of a PSF this accepts.
        let (a, n) = (self.alpha(), self.norm());
        let peak = self.pixel_integral(0.0, 0.0);
        let wing = self.pixel_integral(CACHE_RADIUS as f64, CACHE_RADIUS as f64);
        if !(a.is_finite() && a > 0.0 && n.is_finite() && n > 0.0)
            || !(peak.is_finite() && peak > 0.0 && wing.is_finite() && wing >= 0.0)
        {
            return Err(Error::InvalidInput(format!(
                "Moffat PSF: fwhm {:e}, beta {:e}, tail {:e} give a non-finite or non-positive \
                 α = {a:e}, normaliser {n:e} or pixel integral (centre {peak:e}, wing {wing:e})",
                self.fwhm, self.beta, self.tail
            )));
        }
        Ok(())
    }

    /// The scale `α = FWHM / (2 √(2^{1/β} − 1))`, pixels.
    pub fn alpha(&self) -> f64 {
        self.fwhm / (2.0 * ((2f64).powf(1.0 / self.beta) - 1.0).sqrt())
    }

    /// The peak normaliser `(β − 1)/(π α²)` (so the total flux is 1).
    pub fn norm(&self) -> f64 {
        let a = self.alpha();
        (self.beta - 1.0) / (PI * a * a)
    }

    /// The profile `I(r)` at distance `r` from the centre, per px².
    pub fn intensity(&self, r: f64) -> f64 {
        let a = self.alpha();
        self.norm() * (1.0 + r * r / (a * a)).powf(-self.beta)
    }

    /// The fraction of the flux outside radius `r`: `(1 + r²/α²)^(1−β)`.
    pub fn flux_outside(&self, r: f64) -> f64 {
        let a = self.alpha();
        (1.0 + r * r / (a * a)).powf(1.0 - self.beta)
    }

    /// The support radius `R = α √(tail^{1/(1−β)} − 1)`: the fraction
    /// `tail` of the flux lies outside it.
    pub fn support_radius(&self) -> f64 {
        self.alpha() * (self.tail.powf(1.0 / (1.0 - self.beta)) - 1.0).sqrt()
    }

    /// The PSF integrated over the unit pixel centred at `(cu, cv)`
    /// relative to the PSF's centre, i.e. over
    /// `[cu − ½, cu + ½] × [cv − ½, cv + ½]`, by tensor Gauss–Legendre with
    /// the number of nodes per axis chosen from `d`, the distance from the
    /// PSF centre to the nearest point of the pixel: 8 for `d < 4`, 6 for
    /// `d < 12`, 4 beyond. The integrand is analytic (a function of `r²`)
    /// with its nearest complex singularity at imaginary distance ≥ α from
    /// the pixel, so these rules converge geometrically; against 24 nodes
    /// the difference is ≈ 1.1e−16 absolute (≤ 3e−10 relative, in the far
    /// wing where values are ~1e−7) for FWHM 2.7, β 4.5, over every stamp
    /// offset (measured in `tests/psf_cpu.rs`).
    ///
    /// The sum is taken in mirror-symmetric pairs of nodes, so the result
    /// is bitwise the same for `(cu, cv)`, `(−cu, cv)`, `(cu, −cv)` and
    /// `(−cu, −cv)`; [`crate::psf::PsfCache`] relies on that.
    pub fn pixel_integral(&self, cu: f64, cv: f64) -> f64 {
        let du = (cu.abs() - 0.5).max(0.0);
        let dv = (cv.abs() - 0.5).max(0.0);
        let d2 = du * du + dv * dv;
        let rules = RULES.get_or_init(|| [HalfRule::new(4), HalfRule::new(6), HalfRule::new(8)]);
        let rule = if d2 < 16.0 {
            &rules[2]
        } else if d2 < 144.0 {
            &rules[1]
        } else {
            &rules[0]
        };
        self.integrate(cu, cv, rule)
    }

    /// [`MoffatPsf::pixel_integral`] with `n` Gauss–Legendre nodes per axis
    /// whatever the distance (`n` even, 2..=64): for convergence checks.
    pub fn pixel_integral_with(&self, cu: f64, cv: f64, n: usize) -> Result<f64> {
        if !(2..=64).contains(&n) || n % 2 != 0 {
            return Err(Error::InvalidInput(format!(
                "pixel_integral_with: n = {n} nodes (need an even number in 2..=64)"
            )));
        }
        Ok(self.integrate(cu, cv, &HalfRule::new(n)))
    }

    pub(crate) fn integrate(&self, cu: f64, cv: f64, rule: &HalfRule) -> f64 {
        let a = self.alpha();
        let ia2 = 1.0 / (a * a);
        let mb = -self.beta;
        let f = |q: f64| (1.0 + q * ia2).powf(mb);
        let h = rule.nodes.len();
        let mut v1 = [0.0f64; 32];
        let mut v2 = [0.0f64; 32];
        for l in 0..h {
            let t = 0.5 * rule.nodes[l];
            let (p, m) = (cv + t, cv - t);
            v1[l] = p * p;
            v2[l] = m * m;
        }
        let inner = |u2: f64| {
            let mut s = 0.0;
            for l in 0..h {
                s += rule.weights[l] * (f(u2 + v1[l]) + f(u2 + v2[l]));
            }
            s
        };
        let mut outer = 0.0;
        for k in 0..h {
            let t = 0.5 * rule.nodes[k];
            let (p, m) = (cu + t, cu - t);
            outer += rule.weights[k] * (inner(p * p) + inner(m * m));
        }
        self.norm() * 0.25 * outer
    }
}

/// The positive half of an even Gauss–Legendre rule on [−1, 1]: nodes
/// `t_k > 0` and their weights; the rule is `{±t_k}` with `w_k` each.
#[derive(Clone, Debug)]
pub(crate) struct HalfRule {
    pub(crate) nodes: Vec<f64>,
    pub(crate) weights: Vec<f64>,
}

impl HalfRule {
    /// Newton iteration on `P_n` from the Chebyshev guesses (n even, ≤ 64).
    pub(crate) fn new(n: usize) -> HalfRule {
        let mut nodes = Vec::with_capacity(n / 2);
        let mut weights = Vec::with_capacity(n / 2);
        for k in 0..n / 2 {
            let mut x = (PI * (k as f64 + 0.75) / (n as f64 + 0.5)).cos();
            let mut dp = 1.0;
            for _ in 0..100 {
                let (mut p0, mut p1) = (1.0, x);
                for j in 2..=n {
                    let p2 = ((2 * j - 1) as f64 * x * p1 - (j - 1) as f64 * p0) / j as f64;
                    p0 = p1;
                    p1 = p2;
                }
                dp = n as f64 * (x * p1 - p0) / (x * x - 1.0);
                let dx = p1 / dp;
                x -= dx;
                if dx.abs() < 1e-17 {
                    break;
                }
            }
            nodes.push(x);
            weights.push(2.0 / ((1.0 - x * x) * dp * dp));
        }
        HalfRule { nodes, weights }
    }
}

static RULES: std::sync::OnceLock<[HalfRule; 3]> = std::sync::OnceLock::new();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psf::{CacheConfig, PsfCache};

    fn message(r: Result<MoffatPsf>) -> String {
        match r {
            Err(Error::InvalidInput(m)) => m,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn the_ends_of_the_ranges_give_finite_stamps() {
        let mut accepted = Vec::new();
        for fwhm in [MoffatPsf::MIN_FWHM, MoffatPsf::MAX_FWHM] {
            for beta in [MoffatPsf::MIN_BETA, MoffatPsf::MAX_BETA] {
                for tail in [MoffatPsf::MIN_TAIL, MoffatPsf::MAX_TAIL] {
                    let psf = match MoffatPsf::new(fwhm, beta, tail) {
                        Ok(psf) => psf,
                        Err(e) => {
                            // Only the support-radius limit may refuse a
                            // corner: heavy wings with a tiny tail.
                            let m = e.to_string();
                            assert!(m.contains("support radius") && m.contains("1e12"), "{m}");
                            assert_eq!((beta, tail), (MoffatPsf::MIN_BETA, MoffatPsf::MIN_TAIL));
                            continue;
                        }
                    };
                    accepted.push((fwhm, beta, tail));
                    for v in [psf.alpha(), psf.norm(), psf.support_radius()] {
                        assert!(v.is_finite() && v > 0.0, "{psf:?}: {v}");
                    }
                    let cache = PsfCache::build_with(
                        psf,
                        &CacheConfig {
                            phases: 2,
                            threads: 2,
                        },
                    )
                    .unwrap();
                    assert!(cache.stamps().iter().all(|v| v.is_finite() && *v >= 0.0));
                    let centre: f64 = cache.stamp(1, 1).iter().sum();
                    assert!(centre > 0.0 && centre <= 1.0 + 1e-12, "{psf:?}: {centre}");
                }
            }
        }
        // Six of the eight corners; both β = 1.1, tail = 1e-15 ones are refused.
        assert_eq!(accepted.len(), 6, "{accepted:?}");
        // The heaviest wing with the largest tail, the narrowest PSF with the
        // heaviest wing and largest tail: both fine.
        assert!(MoffatPsf::new(
            MoffatPsf::MAX_FWHM,
            MoffatPsf::MIN_BETA,
            MoffatPsf::MAX_TAIL
        )
        .is_ok());
        // β = 1.1 at FWHM 2.7 needs tail ≥ 4.3e-3 (the MIN_BETA docs).
        assert!(MoffatPsf::new(2.7, 1.1, 4.4e-3).is_ok());
        assert!(MoffatPsf::new(2.7, 1.1, 4.2e-3).is_err());
    }

    #[test]
    fn values_beyond_the_ranges_are_refused_naming_the_range() {
        for (psf, what, range) in [
            (MoffatPsf::new(1e-200, 4.5, 1e-8), "fwhm", "0.5..=1000 px"),
            (MoffatPsf::new(0.499, 4.5, 1e-8), "fwhm", "0.5..=1000 px"),
            (MoffatPsf::new(1000.5, 4.5, 1e-8), "fwhm", "0.5..=1000 px"),
            (
                MoffatPsf::new(f64::INFINITY, 4.5, 1e-8),
                "fwhm",
                "0.5..=1000 px",
            ),
            (MoffatPsf::new(2.7, 1.09, 1e-8), "beta", "1.1..=100"),
            (MoffatPsf::new(2.7, 100.5, 1e-8), "beta", "1.1..=100"),
            (MoffatPsf::new(2.7, f64::NAN, 1e-8), "beta", "1.1..=100"),
            (MoffatPsf::new(2.7, 4.5, 9e-16), "tail", "1e-15..=0.5"),
            (MoffatPsf::new(2.7, 4.5, 0.51), "tail", "1e-15..=0.5"),
            (MoffatPsf::new(2.7, 4.5, -1.0), "tail", "1e-15..=0.5"),
        ] {
            let m = message(psf);
            assert!(
                m.contains(&format!("{what} = ")) && m.contains(range),
                "{m}"
            );
        }
        // A heavy wing with a tiny tail: a finite but useless support radius.
        let m = message(MoffatPsf::new(2.7, 1.1, 1e-8));
        assert!(
            m.contains("support radius R = ") && m.contains("raise beta or tail"),
            "{m}"
        );
        // The default PSF is well inside.
        MoffatPsf::default().validate().unwrap();
    }
}
