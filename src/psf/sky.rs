//! A lensed star field: star events for a frame of a star catalogue seen
//! through a point mass (the weak-field, thin-lens picture of a black
//! hole), the kind of frame the renderer the sink comes from produces
//! (`seeds/psf_replay.txt`: 3840×2160, a Schwarzschild lens). `hipkern
//! demo` renders one ([`lensed_sky`] with a [`LensedSkyConfig`]);
//! deterministic for a seed on every platform.
//!
//! # Sources
//!
//! `stars` field stars uniform over the frame widened on every side by the
//! PSF's support radius R (so stars just off the frame send their wings
//! in); then, at the same density, stars over the rest of the disc around
//! the lens whose sources' inner images can still pass `min_image_flux`:
//! |β| ≤ u_far = max(2, (2 F_max / min_image_flux)^{1/4}) (F_max the
//! brightest flux; for u ≥ 2, |μ−| < u^{−4}/(1 − u^{−4}) < 2 u^{−4}).
//! Their outer images fall off the frame, their inner ones close to the
//! lens: the sky behind the lens turned inside out within the ring (left
//! out, the centre would show a hole the frame's shape). Last,
//! `cluster_stars` from a round Gaussian of σ = `cluster_sigma`·θ_E
//! centred at the lens plus `cluster_offset`·θ_E: a compact background
//! cluster nearly behind the lens, whose images make the Einstein ring.
//!
//! Magnitudes follow a luminosity function `dN/dm ∝ 10^{k·m}` on
//! `[m_b, m_f]` (`lf_slope` k; star counts rise by about 0.3 dex a
//! magnitude, so many faint stars and few bright ones), drawn by inverting
//! its distribution function (v uniform in [0, 1)):
//!
//! ```text
//! m = m_b + log10(1 + v·(10^{k(m_f − m_b)} − 1)) / k      (k = 0: m uniform)
//! F = 10^{−0.4 (m − m_f)}                                  (1 at the faint limit)
//! ```
//!
//! Temperatures: `log T = log T_lo + (log T_hi − log T_lo)·v³` (mostly cool
//! stars, a tail of hot ones: for 3,000–30,000 K the median is 4,000 K and
//! one star in ten is above 16,000 K).
//!
//! # Colours
//!
//! The Planck spectrum `B(λ, T) = λ^{−5} / (exp(c₂/(λT)) − 1)`
//! (c₂ = hc/k = 1.438776877e7 nm·K) integrated against the CIE 1931 colour
//! matching functions (the multi-lobe Gaussian fit of Wyman, Sloan and
//! Shirley 2013) at λ = 380, 385, …, 780 nm gives XYZ; linear sRGB is the
//! IEC 61966-2-1 matrix times XYZ, negative components (outside the sRGB
//! gamut) clipped to 0, then scaled so that the luminance
//! `0.2126 r + 0.7152 g + 0.0722 b` ([`LUMA`]) is 1: an event's flux is its
//! luminance, its colour only says how it splits between R, G and B
//! ([`blackbody_rgb`]).
//!
//! # The lens
//!
//! Angles in Einstein radii θ_E (`einstein_radius_px`), relative to the
//! lens: a source at β (`u = |β|`) has images θ solving the point-lens
//! equation `β = θ − θ/|θ|²`, both on the line through the lens and the
//! source ([`point_lens`]):
//!
//! ```text
//! θ± = β̂ (u ± √(u² + 4)) / 2
//!    = β̂ (u + √(u²+4))/2  and  −β̂ · 2/(u + √(u²+4))   (as evaluated: no cancellation)
//! μ = 1 / det(∂β/∂θ) = 1 / (1 − |θ|^{−4})
//! |μ±| = (u² + 2) / (2u √(u² + 4)) ± ½
//! ```
//!
//! The outer image (θ+, outside the Einstein ring, on the source's side)
//! is brightened, μ+ ≥ 1; the inner one (θ−, inside the ring, on the other
//! side) has negative μ: its parity is flipped. Signed, μ+ + μ− = 1 (so
//! |μ+| − |μ−| = 1) and the total |μ+| + |μ−| = (u² + 2)/(u √(u² + 4)). Far
//! from the lens μ+ → 1 and μ− → 0 (as u^{−4}): the flux is conserved.
//! Sources near the lens (u ≲ 1) give two bright images close to the ring
//! |θ| = 1. A point source exactly behind the lens would be infinitely
//! magnified; a star has a size, so |μ| is capped at `max_magnification`.
//! (The thin-lens picture ignores the strong-field images and the shadow
//! of a real Schwarzschild hole, which lie well inside the ring.)
//!
//! # Events
//!
//! Each image is a [`StarEvent`] at `lens + θ_E·θ` (pixels) with flux
//! `F·min(|μ|, max_magnification)`, its source's colour, and support
//! `S(flux)`; images fainter than `min_image_flux` are dropped (mostly the
//! inner images of distant sources), as are those whose support misses the
//! frame. Sources are taken in order (frame, beyond the frame, cluster),
//! each giving its outer image, then its inner one: at most two events per
//! source ([`LensedSky::sources`]), mostly none for those beyond the frame.
//!
//! # Supports
//!
//! Faint stars have the model's support R; a star brighter than
//! `support_flux` (F_s) keeps its wings out to where the flux outside falls
//! to `tail·F_s`, so no star loses more than that absolute flux beyond its
//! support, up to the cap `max_support` ([`support_for_flux`]):
//!
//! ```text
//! S(F) = R                                                F ≤ F_s
//! S(F) = min(α √((tail·F_s/F)^{1/(1−β)} − 1), max_support)   F > F_s
//! ```
//!
//! S is continuous and increasing. Stars brighter than about 1.2 F_s need
//! more than the cache's 47 px ([`CACHE_RADIUS`](super::CACHE_RADIUS)) and
//! go by the direct path (`accumulate_routed`); for FWHM 2.7, β 4.5, tail
//! 1e−8: S(10 F_s) = 64 px, S(1000 F_s) = 123 px.
use super::event::StarEvent;
use super::image::{LUMA, MAX_IMAGE_SIDE};
use super::model::MoffatPsf;
use super::reference::MAX_DIRECT_SUPPORT;
use crate::host_memory::reserve_vec;
use crate::rng::SplitMix64;
use crate::runtime::{Error, Result};

/// The most sources one sky may draw (`stars`, `cluster_stars` and the
/// draws beyond the frame): 2^24, at most 2^25 events (1.9 GB of them).
pub const MAX_SKY_SOURCES: usize = 1 << 24;
/// The largest `max_support` accepted, px (the direct path's cost grows
/// as its square).
pub const MAX_SKY_SUPPORT: f64 = 4096.0;
/// The largest Einstein radius accepted, px.
pub const MAX_EINSTEIN_RADIUS: f64 = 1e7;

/// What [`lensed_sky`] draws; [`LensedSkyConfig::default`] is a
/// 3840×2160 frame (the seed's) for the device.
#[derive(Clone, Debug, PartialEq)]
pub struct LensedSkyConfig {
    /// Frame width, px (1..=[`MAX_IMAGE_SIDE`]).
    pub width: usize,
    /// Frame height, px.
    pub height: usize,
    /// Field stars, uniform over the frame (plus R on every side).
    pub stars: usize,
    /// Stars of the background cluster behind the lens.
    pub cluster_stars: usize,
    /// The cluster's Gaussian σ, Einstein radii (> 0).
    pub cluster_sigma: f64,
    /// The cluster's centre relative to the lens, Einstein radii.
    pub cluster_offset: [f64; 2],
    /// θ_E, px (> 0, ≤ [`MAX_EINSTEIN_RADIUS`]).
    pub einstein_radius_px: f64,
    /// The lens, px; `None`: the frame's centre.
    pub lens: Option<[f64; 2]>,
    /// Brightest magnitude of the luminosity function.
    pub mag_bright: f64,
    /// Faintest magnitude (flux 1); `mag_faint − mag_bright` in (0, 30].
    pub mag_faint: f64,
    /// k of `dN/dm ∝ 10^{k·m}`, in [0, 2].
    pub lf_slope: f64,
    /// Coolest temperature, K (≥ 1,000).
    pub temperature_min: f64,
    /// Hottest temperature, K (≤ 100,000, ≥ `temperature_min`).
    pub temperature_max: f64,
    /// The PSF the supports are for.
    pub psf: MoffatPsf,
    /// F_s: events brighter than this get supports beyond R (> 0).
    pub support_flux: f64,
    /// The largest support, px (R..=[`MAX_SKY_SUPPORT`]).
    pub max_support: f64,
    /// Cap on |μ| (≥ 1): a star's finite size.
    pub max_magnification: f64,
    /// Images fainter than this are dropped (> 0; it also bounds the
    /// field beyond the frame, module docs).
    pub min_image_flux: f64,
    /// The generator's seed.
    pub seed: u64,
}

impl Default for LensedSkyConfig {
    fn default() -> Self {
        LensedSkyConfig {
            width: super::DEFAULT_WIDTH,
            height: super::DEFAULT_HEIGHT,
            stars: 60_000,
            cluster_stars: 6_000,
            cluster_sigma: 0.35,
            cluster_offset: [0.12, -0.08],
            einstein_radius_px: 300.0,
            lens: None,
            mag_bright: 2.0,
            mag_faint: 12.0,
            lf_slope: 0.3,
            temperature_min: 3_000.0,
            temperature_max: 30_000.0,
            psf: MoffatPsf::default(),
            support_flux: 5_000.0,
            max_support: 128.0,
            max_magnification: 100.0,
            min_image_flux: 0.05,
            seed: 2026,
        }
    }
}

/// A generated frame's events and what became of its sources' images.
#[derive(Clone, Debug, PartialEq)]
pub struct LensedSky {
    /// The events, in order (module docs).
    pub events: Vec<StarEvent>,
    /// Sources drawn: `stars + cluster_stars` and those beyond the frame.
    pub sources: usize,
    /// Images dropped as fainter than `min_image_flux`.
    pub dropped_faint: usize,
    /// Images dropped as missing the frame.
    pub dropped_outside: usize,
    /// The lens, px.
    pub lens: [f64; 2],
}

/// One image of a point source: position (Einstein radii, relative to the
/// lens) and signed magnification.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LensImage {
    /// θ, Einstein radii.
    pub theta: [f64; 2],
    /// μ, negative for the inner (parity-flipped) image.
    pub magnification: f64,
}

/// The two images `[outer, inner]` of a point source at `beta` (Einstein
/// radii, relative to the lens; module docs). At `β = 0` exactly the images
/// are taken along +x and μ is infinite.
pub fn point_lens(beta: [f64; 2]) -> [LensImage; 2] {
    let u = beta[0].hypot(beta[1]);
    let dir = if u > 0.0 {
        [beta[0] / u, beta[1] / u]
    } else {
        [1.0, 0.0]
    };
    let s = u.mul_add(u, 4.0).sqrt();
    // θ+ = (u + s)/2 and θ− = (u − s)/2 = −2/(u + s): the second form has
    // no cancellation when u ≫ 1, where θ− is small.
    let outer = 0.5 * (u + s);
    let inner = -2.0 / (u + s);
    let image = |t: f64| {
        // μ = 1/(1 − t⁻⁴) = t⁴/(t⁴ − 1): exact for tiny t (inner images of
        // distant sources) where the u-form would cancel.
        let t4 = (t * t) * (t * t);
        LensImage {
            theta: [t * dir[0], t * dir[1]],
            magnification: t4 / (t4 - 1.0),
        }
    };
    [image(outer), image(inner)]
}

/// `(|μ+|, |μ−|)` from the closed form `(u² + 2)/(2u √(u² + 4)) ± ½`.
/// The second cancels for u ≫ 1; [`point_lens`] is the accurate
/// evaluation (and signed: μ− = −|μ−|).
pub fn point_lens_magnifications(u: f64) -> (f64, f64) {
    let a = (u * u + 2.0) / (2.0 * u * (u * u + 4.0).sqrt());
    (a + 0.5, a - 0.5)
}

/// The CIE 1931 colour matching functions (x̄, ȳ, z̄) at `nm`, by the
/// multi-lobe piecewise-Gaussian fit of Wyman, Sloan and Shirley (2013).
fn cie_xyz(nm: f64) -> [f64; 3] {
    let g = |mu: f64, s1: f64, s2: f64| {
        let t = (nm - mu) / if nm < mu { s1 } else { s2 };
        (-0.5 * t * t).exp()
    };
    [
        1.056 * g(599.8, 37.9, 31.0) + 0.362 * g(442.0, 16.0, 26.7) - 0.065 * g(501.1, 20.4, 26.2),
        0.821 * g(568.8, 46.9, 40.5) + 0.286 * g(530.9, 16.3, 31.1),
        1.217 * g(437.0, 11.8, 36.0) + 0.681 * g(459.0, 26.0, 13.8),
    ]
}

/// Wavelengths of the colour integral: 380..=780 nm every 5 nm.
const LAMBDA_STEPS: usize = 81;

/// The colour matching functions at the integral's wavelengths.
struct Cmf([[f64; 3]; LAMBDA_STEPS]);

impl Cmf {
    fn new() -> Cmf {
        let mut t = [[0.0; 3]; LAMBDA_STEPS];
        for (k, v) in t.iter_mut().enumerate() {
            *v = cie_xyz(380.0 + 5.0 * k as f64);
        }
        Cmf(t)
    }

    /// [`blackbody_rgb`] with the functions sampled once.
    fn rgb(&self, kelvin: f64) -> [f64; 3] {
        const C2: f64 = 1.438_776_877e7; // nm·K
        let mut xyz = [0.0f64; 3];
        for (k, cmf) in self.0.iter().enumerate() {
            let nm = 380.0 + 5.0 * k as f64;
            // λ⁻⁵ scaled by 500⁵ keeps the sums near 1 (the scale cancels).
            let l = 500.0 / nm;
            let b = (l * l) * (l * l) * l / (C2 / (nm * kelvin)).exp_m1();
            for c in 0..3 {
                xyz[c] += b * cmf[c];
            }
        }
        let [x, y, z] = xyz;
        let rgb = [
            (3.2406 * x - 1.5372 * y - 0.4986 * z).max(0.0),
            (-0.9689 * x + 1.8758 * y + 0.0415 * z).max(0.0),
            (0.0557 * x - 0.2040 * y + 1.0570 * z).max(0.0),
        ];
        let lum = LUMA[0] * rgb[0] + LUMA[1] * rgb[1] + LUMA[2] * rgb[2];
        rgb.map(|v| v / lum)
    }
}

/// The linear-sRGB colour of a blackbody at `kelvin` (module docs), with
/// unit luminance; an error for a temperature outside 1,000..=100,000 K.
pub fn blackbody_rgb(kelvin: f64) -> Result<[f64; 3]> {
    check_range("temperature", kelvin, 1_000.0, 100_000.0)?;
    Ok(Cmf::new().rgb(kelvin))
}

/// The support of an event of flux `flux` (module docs): R up to
/// `support_flux`, then growing, at most `max_support`.
pub fn support_for_flux(psf: &MoffatPsf, flux: f64, support_flux: f64, max_support: f64) -> f64 {
    if flux <= support_flux {
        return psf.support_radius();
    }
    let s =
        psf.alpha() * ((psf.tail * support_flux / flux).powf(1.0 / (1.0 - psf.beta)) - 1.0).sqrt();
    s.min(max_support)
}

fn check_range(name: &str, v: f64, lo: f64, hi: f64) -> Result<()> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "lensed sky: {name} = {v} (must be in [{lo}, {hi}])"
        )))
    }
}

/// The field beyond the frame: the disc around the lens whose sources'
/// inner images can pass `min_image_flux`, and the uniform draws over it
/// that give it the frame's density of stars.
struct FarField {
    radius_px: f64,
    draws: usize,
}

impl LensedSkyConfig {
    /// u_far·θ_E and the draws over that disc (module docs); `None` when
    /// the draws would be beyond any bound (a tiny `min_image_flux` with
    /// a large lens).
    fn far_field_checked(&self) -> Option<FarField> {
        let f_max = 10f64.powf(0.4 * (self.mag_faint - self.mag_bright));
        let u_far = (2.0 * f_max / self.min_image_flux).powf(0.25).max(2.0);
        let radius_px = u_far * self.einstein_radius_px;
        let r = self.psf.support_radius();
        let (w, h) = (self.width as f64 + 2.0 * r, self.height as f64 + 2.0 * r);
        let (cx, cy) = match self.lens {
            Some([x, y]) => (x + r, y + r),
            None => (0.5 * w, 0.5 * h),
        };
        // The disc within the frame (plus R): nothing beyond to draw.
        if cx - radius_px >= 0.0
            && cx + radius_px <= w
            && cy - radius_px >= 0.0
            && cy + radius_px <= h
        {
            return Some(FarField {
                radius_px,
                draws: 0,
            });
        }
        let draws =
            (self.stars as f64 * std::f64::consts::PI * radius_px * radius_px / (w * h)).ceil();
        (draws.is_finite() && draws <= MAX_SKY_SOURCES as f64).then_some(FarField {
            radius_px,
            draws: draws as usize,
        })
    }

    fn far_field(&self) -> FarField {
        self.far_field_checked().unwrap_or(FarField {
            radius_px: 0.0,
            draws: 0,
        })
    }

    /// Checks every field against its documented range; the error names
    /// the first one out of it.
    pub fn validate(&self) -> Result<()> {
        for (name, side) in [("width", self.width), ("height", self.height)] {
            if !(1..=MAX_IMAGE_SIDE).contains(&side) {
                return Err(Error::InvalidInput(format!(
                    "lensed sky: {name} = {side} (must be in 1..={MAX_IMAGE_SIDE})"
                )));
            }
        }
        let sources = self.stars.checked_add(self.cluster_stars);
        if sources.is_none_or(|n| n > MAX_SKY_SOURCES) {
            return Err(Error::InvalidInput(format!(
                "lensed sky: {} stars + {} cluster stars (at most {MAX_SKY_SOURCES} in all)",
                self.stars, self.cluster_stars
            )));
        }
        self.psf.validate()?;
        check_range("cluster_sigma", self.cluster_sigma, 1e-6, 1e6)?;
        for v in self.cluster_offset {
            check_range("cluster_offset", v, -1e6, 1e6)?;
        }
        check_range(
            "einstein_radius_px",
            self.einstein_radius_px,
            1e-3,
            MAX_EINSTEIN_RADIUS,
        )?;
        if let Some(l) = self.lens {
            for v in l {
                check_range("lens", v, -1e9, 1e9)?;
            }
        }
        check_range("mag_bright", self.mag_bright, -100.0, 100.0)?;
        check_range(
            "mag_faint",
            self.mag_faint,
            self.mag_bright,
            self.mag_bright + 30.0,
        )?;
        if self.mag_faint == self.mag_bright {
            return Err(Error::InvalidInput(format!(
                "lensed sky: mag_faint = mag_bright = {} (the range must not be empty)",
                self.mag_faint
            )));
        }
        check_range("lf_slope", self.lf_slope, 0.0, 2.0)?;
        check_range("temperature_min", self.temperature_min, 1_000.0, 100_000.0)?;
        check_range(
            "temperature_max",
            self.temperature_max,
            self.temperature_min,
            100_000.0,
        )?;
        check_range("support_flux", self.support_flux, 1e-300, 1e300)?;
        check_range(
            "max_support",
            self.max_support,
            self.psf.support_radius(),
            MAX_SKY_SUPPORT.min(MAX_DIRECT_SUPPORT),
        )?;
        check_range("max_magnification", self.max_magnification, 1.0, 1e12)?;
        check_range("min_image_flux", self.min_image_flux, 1e-300, 1e300)?;
        let Some(far) = self.far_field_checked() else {
            return Err(Error::InvalidInput(format!(
                "lensed sky: the stars beyond the frame whose inner images could pass \
                 min_image_flux = {:e} are too many to draw (raise min_image_flux or lower \
                 einstein_radius_px or stars)",
                self.min_image_flux
            )));
        };
        if self.stars + self.cluster_stars + far.draws > MAX_SKY_SOURCES {
            return Err(Error::InvalidInput(format!(
                "lensed sky: {} stars, {} cluster stars and {} draws beyond the frame \
                 (at most {MAX_SKY_SOURCES} in all; raise min_image_flux or lower stars)",
                self.stars, self.cluster_stars, far.draws
            )));
        }
        Ok(())
    }
}

/// Uniform in [0, 1) with 53 random bits.
fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal pair (Box–Muller).
fn normal_pair(rng: &mut SplitMix64) -> [f64; 2] {
    // 1 − v ∈ (0, 1]: the logarithm stays finite.
    let r = (-2.0 * (1.0 - unit(rng)).ln()).sqrt();
    let t = std::f64::consts::TAU * unit(rng);
    [r * t.cos(), r * t.sin()]
}

/// The events of a lensed star field (module docs). The configuration is
/// checked first ([`LensedSkyConfig::validate`]); the event buffer is
/// checked against the machine's memory and allocated fallibly.
pub fn lensed_sky(config: &LensedSkyConfig) -> Result<LensedSky> {
    config.validate()?;
    let c = config;
    let (w, h) = (c.width as f64, c.height as f64);
    let lens = c.lens.unwrap_or([0.5 * w, 0.5 * h]);
    let te = c.einstein_radius_px;
    let r = c.psf.support_radius();
    let far = c.far_field();
    let what = || format!("the events of a lensed sky of {} stars", c.stars);
    // Every frame or cluster source may give two events, a source beyond
    // the frame mostly none or one; the vector grows (fallibly) past that.
    let mut events = reserve_vec::<StarEvent>(2 * (c.stars + c.cluster_stars) + far.draws, &what)?;
    let mut rng = SplitMix64::new(c.seed);
    let cmf = Cmf::new();
    let span = c.mag_faint - c.mag_bright;
    let growth = (c.lf_slope * span * std::f64::consts::LN_10).exp_m1();
    let (log_t0, log_t1) = (c.temperature_min.ln(), c.temperature_max.ln());
    let (mut sources, mut dropped_faint, mut dropped_outside) = (0, 0, 0);
    let in_frame = |p: [f64; 2]| p[0] >= -r && p[0] <= w + r && p[1] >= -r && p[1] <= h + r;
    for k in 0..c.stars + far.draws + c.cluster_stars {
        let pos = if k < c.stars {
            [
                -r + (w + 2.0 * r) * unit(&mut rng),
                -r + (h + 2.0 * r) * unit(&mut rng),
            ]
        } else if k < c.stars + far.draws {
            // Uniform in the disc; the part over the frame is already drawn.
            let rho = far.radius_px * unit(&mut rng).sqrt();
            let t = std::f64::consts::TAU * unit(&mut rng);
            let p = [lens[0] + rho * t.cos(), lens[1] + rho * t.sin()];
            if in_frame(p) {
                continue;
            }
            p
        } else {
            let n = normal_pair(&mut rng);
            let s = c.cluster_sigma * te;
            [
                lens[0] + (c.cluster_offset[0] * te + s * n[0]),
                lens[1] + (c.cluster_offset[1] * te + s * n[1]),
            ]
        };
        sources += 1;
        let v = unit(&mut rng);
        // The inverse CDF; ln_1p keeps small v accurate.
        let m = if c.lf_slope > 0.0 {
            c.mag_bright + (v * growth).ln_1p() / (c.lf_slope * std::f64::consts::LN_10)
        } else {
            c.mag_bright + span * v
        };
        let flux = 10f64.powf(-0.4 * (m - c.mag_faint));
        let t = unit(&mut rng);
        let kelvin = (log_t0 + (log_t1 - log_t0) * t * t * t).exp();
        let beta = [(pos[0] - lens[0]) / te, (pos[1] - lens[1]) / te];
        let mut colour = None;
        for img in point_lens(beta) {
            let f = flux * img.magnification.abs().min(c.max_magnification);
            if f < c.min_image_flux {
                dropped_faint += 1;
                continue;
            }
            let support = support_for_flux(&c.psf, f, c.support_flux, c.max_support);
            let x = lens[0] + te * img.theta[0];
            let y = lens[1] + te * img.theta[1];
            if x + support < 0.0 || y + support < 0.0 || x - support > w || y - support > h {
                dropped_outside += 1;
                continue;
            }
            // Only for sources with an image kept: most beyond the frame have none.
            let [cr, cg, cb] = *colour.get_or_insert_with(|| cmf.rgb(kelvin));
            if events.len() == events.capacity() {
                let more = events.len().max(1024);
                events.try_reserve(more).map_err(|_| Error::HostMemory {
                    what: what(),
                    needed_bytes: ((events.len() + more) * std::mem::size_of::<StarEvent>()) as u64,
                    available_bytes: crate::host_memory::available_bytes(),
                })?;
            }
            events.push(StarEvent {
                x,
                y,
                flux: f,
                r: cr,
                g: cg,
                b: cb,
                support,
            });
        }
    }
    Ok(LensedSky {
        events,
        sources,
        dropped_faint,
        dropped_outside,
        lens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psf::{validate_events, PsfCache};

    fn rng() -> SplitMix64 {
        SplitMix64::from_clock()
    }

    /// Fresh source positions: |β| from 1e−3 to 1e3, log-uniform.
    fn betas(n: usize) -> Vec<[f64; 2]> {
        let mut g = rng();
        (0..n)
            .map(|_| {
                let u = 10f64.powf(6.0 * unit(&mut g) - 3.0);
                let t = std::f64::consts::TAU * unit(&mut g);
                [u * t.cos(), u * t.sin()]
            })
            .collect()
    }

    #[test]
    fn magnifications_obey_the_point_lens_identities() {
        for beta in betas(10_000) {
            let u = beta[0].hypot(beta[1]);
            let [p, m] = point_lens(beta);
            assert!(p.magnification >= 1.0 && m.magnification <= 0.0, "{u}");
            // Signed sum 1, i.e. |μ+| − |μ−| = 1.
            let sum = p.magnification + m.magnification;
            assert!((sum - 1.0).abs() <= 1e-12 * p.magnification, "u {u}: {sum}");
            // The total against (u² + 2)/(u √(u² + 4)).
            let total = p.magnification.abs() + m.magnification.abs();
            let closed = (u * u + 2.0) / (u * (u * u + 4.0).sqrt());
            assert!((total / closed - 1.0).abs() < 1e-12, "u {u}");
            // The closed form per image, where it does not cancel.
            if u < 10.0 {
                let (mp, mm) = point_lens_magnifications(u);
                assert!((p.magnification / mp - 1.0).abs() < 1e-12, "u {u}");
                assert!((m.magnification.abs() - mm).abs() < 1e-12 * mp, "u {u}");
            }
        }
    }

    #[test]
    fn images_solve_the_lens_equation_on_the_sources_line() {
        for beta in betas(10_000) {
            let u = beta[0].hypot(beta[1]);
            for img in point_lens(beta) {
                let [tx, ty] = img.theta;
                let t2 = tx * tx + ty * ty;
                // β = θ − θ/|θ|².
                let back = [tx - tx / t2, ty - ty / t2];
                let scale = 1.0f64.max(u).max(1.0 / t2.sqrt());
                for a in 0..2 {
                    assert!(
                        (back[a] - beta[a]).abs() <= 1e-13 * scale,
                        "β {beta:?} θ {:?} → {back:?}",
                        img.theta
                    );
                }
                // Collinear with the lens and the source.
                assert!((tx * beta[1] - ty * beta[0]).abs() <= 1e-13 * t2.sqrt() * u);
            }
            let [p, m] = point_lens(beta);
            assert!(p.theta[0].hypot(p.theta[1]) >= 1.0);
            assert!(m.theta[0].hypot(m.theta[1]) <= 1.0);
            // The inner image is on the other side of the lens.
            assert!(p.theta[0] * m.theta[0] + p.theta[1] * m.theta[1] <= 0.0);
        }
    }

    #[test]
    fn flux_is_conserved_far_from_the_lens() {
        let mut g = rng();
        for _ in 0..1000 {
            let u = 1e2 * 10f64.powf(4.0 * unit(&mut g));
            let [p, m] = point_lens([u, 0.0]);
            // μ+ − 1 = −μ− ≈ u⁻⁴.
            // (μ+ itself rounds to within an ulp of 1.)
            let bound = 1.01 / u.powi(4);
            assert!(
                (p.magnification - 1.0).abs() <= bound + f64::EPSILON,
                "u {u}"
            );
            assert!(m.magnification.abs() <= bound, "u {u}");
            assert!(m.magnification < 0.0, "u {u}: the inner image exists");
        }
        // Near the lens both images are bright, at the ring.
        let [p, m] = point_lens([1e-4, 0.0]);
        assert!(p.magnification > 1e3 && m.magnification < -1e3);
        assert!((p.theta[0] - 1.0).abs() < 1e-4 && (m.theta[0] + 1.0).abs() < 1e-4);
        assert!(point_lens([0.0, 0.0])[0].magnification.is_infinite());
    }

    #[test]
    fn colours_are_finite_non_negative_unit_luminance_and_ordered() {
        let mut g = rng();
        let mut temps: Vec<f64> = (0..2000)
            .map(|_| 1_000.0 * 100f64.powf(unit(&mut g)))
            .collect();
        temps.extend([1_000.0, 3_000.0, 5_800.0, 6_500.0, 30_000.0, 100_000.0]);
        for t in temps {
            let c = blackbody_rgb(t).unwrap();
            assert!(c.iter().all(|v| v.is_finite() && *v >= 0.0), "{t} K: {c:?}");
            let y = LUMA[0] * c[0] + LUMA[1] * c[1] + LUMA[2] * c[2];
            assert!((y - 1.0).abs() < 1e-12, "{t} K: Y = {y}");
        }
        // Cool stars red, hot ones blue, the Sun near white.
        let (cool, sun, hot) = (
            blackbody_rgb(3_000.0).unwrap(),
            blackbody_rgb(5_800.0).unwrap(),
            blackbody_rgb(30_000.0).unwrap(),
        );
        assert!(cool[0] > 1.5 * cool[2] && hot[2] > 1.5 * hot[0]);
        assert!(sun.iter().all(|v| (0.6..1.4).contains(v)), "{sun:?}");
        for bad in [999.0, 1e6, f64::NAN, f64::INFINITY] {
            let e = blackbody_rgb(bad).unwrap_err().to_string();
            assert!(e.contains("temperature"), "{e}");
        }
    }

    #[test]
    fn supports_grow_with_flux_from_the_models() {
        let psf = MoffatPsf::default();
        let r = psf.support_radius();
        assert_eq!(support_for_flux(&psf, 1.0, 10.0, 128.0), r);
        assert_eq!(support_for_flux(&psf, 10.0, 10.0, 128.0), r);
        // Just above F_s: continuous.
        assert!((support_for_flux(&psf, 10.0 * (1.0 + 1e-12), 10.0, 128.0) - r).abs() < 1e-9);
        // The flux outside S(F) is tail·F_s.
        for ratio in [2.0, 10.0, 1e3] {
            let s = support_for_flux(&psf, ratio * 10.0, 10.0, 1e4);
            let lost = ratio * 10.0 * psf.flux_outside(s);
            assert!((lost / (psf.tail * 10.0) - 1.0).abs() < 1e-9, "{ratio}");
        }
        assert_eq!(support_for_flux(&psf, 1e30, 10.0, 128.0), 128.0);
        let mut last = 0.0;
        for k in 0..100 {
            let s = support_for_flux(&psf, 10f64.powf(k as f64 * 0.1), 10.0, 1e4);
            assert!(s >= last);
            last = s;
        }
    }

    /// A small frame, fresh seed.
    fn small(seed: u64) -> LensedSkyConfig {
        LensedSkyConfig {
            width: 640,
            height: 360,
            stars: 3_000,
            cluster_stars: 400,
            einstein_radius_px: 60.0,
            support_flux: 500.0,
            seed,
            ..LensedSkyConfig::default()
        }
    }

    #[test]
    fn skies_are_valid_bounded_and_deterministic() {
        let seed = rng().next_u64();
        let c = small(seed);
        let sky = lensed_sky(&c).unwrap();
        // The frame's and the cluster's, and many beyond the frame (u_far =
        // 25: a disc of 1,500 px around a 640×360 frame).
        assert!(sky.sources > 10 * 3_400, "{}", sky.sources);
        assert_eq!(
            sky.events.len() + sky.dropped_faint + sky.dropped_outside,
            2 * sky.sources
        );
        assert!(sky.events.len() <= 2 * sky.sources);
        // Every source over the frame has an outer image with flux ≥ 1
        // (μ+ ≥ 1), all kept but those off the frame; the cluster's both.
        assert!(sky.events.len() > 3_400, "{}", sky.events.len());
        validate_events(&sky.events).unwrap();
        let (w, h) = (c.width as f64, c.height as f64);
        let r = c.psf.support_radius();
        let mut direct = 0;
        for e in &sky.events {
            assert!(e.flux >= c.min_image_flux);
            assert!(e.support >= r && e.support <= c.max_support);
            assert!(e.x + e.support >= 0.0 && e.x - e.support <= w);
            assert!(e.y + e.support >= 0.0 && e.y - e.support <= h);
            let y = LUMA[0] * e.r + LUMA[1] * e.g + LUMA[2] * e.b;
            assert!((y - 1.0).abs() < 1e-12);
            if !PsfCache::fits(e.x, e.y, e.support) {
                direct += 1;
            }
        }
        // A few bright events exceed the cache; most do not.
        assert!(direct > 0 && direct * 50 < sky.events.len(), "{direct}");
        // The ring: the cluster's images crowd |θ| ≈ 1.
        let near_ring = sky
            .events
            .iter()
            .filter(|e| {
                let t = (e.x - sky.lens[0]).hypot(e.y - sky.lens[1]) / c.einstein_radius_px;
                (0.7..1.4).contains(&t)
            })
            .count();
        assert!(near_ring > 400, "{near_ring}");
        assert_eq!(lensed_sky(&c).unwrap(), sky);
        assert_ne!(lensed_sky(&small(seed ^ 1)).unwrap().events, sky.events);
    }

    #[test]
    fn the_luminosity_function_has_many_faint_stars_and_few_bright() {
        let c = LensedSkyConfig {
            cluster_stars: 0,
            einstein_radius_px: 1e-3,
            min_image_flux: 1e-6,
            ..small(rng().next_u64())
        };
        let sky = lensed_sky(&c).unwrap();
        // With a tiny lens the outer images are the sources (μ+ ≈ 1).
        let fluxes: Vec<f64> = sky
            .events
            .iter()
            .filter(|e| e.flux >= 0.999)
            .map(|e| e.flux)
            .collect();
        let max = 10f64.powf(0.4 * (c.mag_faint - c.mag_bright));
        assert!(fluxes.iter().all(|&f| f <= max * 1.001));
        // 0.3 dex a magnitude: each magnitude brighter has half as many.
        let faint = fluxes.iter().filter(|&&f| f < 2.512).count();
        let next = fluxes
            .iter()
            .filter(|&&f| (2.512..2.512 * 2.512).contains(&f))
            .count();
        let ratio = faint as f64 / next as f64;
        assert!((1.6..2.5).contains(&ratio), "{faint} / {next}");
    }

    #[test]
    fn bad_configurations_name_the_field() {
        let good = small(1);
        let cases: Vec<(&str, LensedSkyConfig)> = vec![
            (
                "width",
                LensedSkyConfig {
                    width: 0,
                    ..good.clone()
                },
            ),
            (
                "stars",
                LensedSkyConfig {
                    stars: usize::MAX,
                    ..good.clone()
                },
            ),
            (
                "einstein_radius_px",
                LensedSkyConfig {
                    einstein_radius_px: f64::NAN,
                    ..good.clone()
                },
            ),
            (
                "mag_faint",
                LensedSkyConfig {
                    mag_faint: 1.0,
                    ..good.clone()
                },
            ),
            (
                "lf_slope",
                LensedSkyConfig {
                    lf_slope: -1.0,
                    ..good.clone()
                },
            ),
            (
                "temperature_max",
                LensedSkyConfig {
                    temperature_max: 2_000.0,
                    ..good.clone()
                },
            ),
            (
                "max_support",
                LensedSkyConfig {
                    max_support: 10.0,
                    ..good.clone()
                },
            ),
            (
                "max_magnification",
                LensedSkyConfig {
                    max_magnification: 0.5,
                    ..good.clone()
                },
            ),
            (
                "cluster_sigma",
                LensedSkyConfig {
                    cluster_sigma: 0.0,
                    ..good.clone()
                },
            ),
            (
                "lens",
                LensedSkyConfig {
                    lens: Some([f64::INFINITY, 0.0]),
                    ..good.clone()
                },
            ),
            (
                "min_image_flux",
                LensedSkyConfig {
                    min_image_flux: 0.0,
                    ..good.clone()
                },
            ),
            // The field beyond the frame would need ~1e13 draws.
            (
                "min_image_flux",
                LensedSkyConfig {
                    min_image_flux: 1e-12,
                    einstein_radius_px: 1e5,
                    ..good.clone()
                },
            ),
        ];
        for (field, c) in cases {
            let e = lensed_sky(&c).unwrap_err().to_string();
            assert!(e.contains(field), "{field}: {e}");
        }
    }
}
