//! The float64 HDR image and the comparison of two images.
use super::{DEFAULT_HEIGHT, DEFAULT_WIDTH};
use crate::host_memory::{bytes_of, filled_vec};
use crate::runtime::{Error, Result};

/// Luminance weights of R, G, B: `Y = 0.2126 R + 0.7152 G + 0.0722 B`.
pub const LUMA: [f64; 3] = [0.2126, 0.7152, 0.0722];

/// An RGB float64 image, row-major `(height, width, 3)`: the value of
/// channel `c` of pixel `(ix, iy)` is `data[(iy·width + ix)·3 + c]`. Pixel
/// `(ix, iy)` covers `[ix, ix+1) × [iy, iy+1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct HdrImage {
    width: usize,
    height: usize,
    data: Vec<f64>,
}

impl Default for HdrImage {
    /// A black 3840 × 2160 image (199 MB; panics where the machine cannot
    /// give them: [`HdrImage::new`] returns that as an error).
    fn default() -> Self {
        HdrImage::new(DEFAULT_WIDTH, DEFAULT_HEIGHT).expect("default size is valid")
    }
}

impl HdrImage {
    /// A black image; both sides in `1..=2^20`. The `width·height·3`
    /// float64 are checked against the machine's available memory and
    /// allocated fallibly: a size this machine cannot hold is an
    /// [`Error::HostMemory`] naming the image and its bytes, not an abort.
    pub fn new(width: usize, height: usize) -> Result<HdrImage> {
        let n = values_of(width, height)?;
        let data = filled_vec(n, 0.0f64, &|| {
            format!("the {width}×{height} float64 RGB image ({n} values)")
        })?;
        Ok(HdrImage {
            width,
            height,
            data,
        })
    }

    /// An image over existing data (length `width·height·3`).
    pub fn from_data(width: usize, height: usize, data: Vec<f64>) -> Result<HdrImage> {
        let n = values_of(width, height)?;
        if data.len() != n {
            return Err(Error::InvalidInput(format!(
                "image data of length {} for {width}×{height}×3 = {n}",
                data.len(),
            )));
        }
        Ok(HdrImage {
            width,
            height,
            data,
        })
    }

    /// Bytes of a `width × height` image's values (`width·height·3`
    /// float64), after the size check of [`HdrImage::new`]: what building
    /// one needs, to compare with
    /// [`crate::host_memory::available_bytes`] before committing to a run.
    pub fn bytes_for(width: usize, height: usize) -> Result<u64> {
        let n = values_of(width, height)?;
        bytes_of::<f64>(n as u128, &|| {
            format!("the {width}×{height} float64 RGB image")
        })
    }

    /// Width, pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Height, pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The values, row-major `(height, width, 3)`.
    pub fn data(&self) -> &[f64] {
        &self.data
    }

    /// The values, mutable (e.g. to add a direct-path render or a
    /// downloaded device image).
    pub fn data_mut(&mut self) -> &mut [f64] {
        &mut self.data
    }

    /// The values, by value.
    pub fn into_data(self) -> Vec<f64> {
        self.data
    }

    /// Pixel `(ix, iy)` as `[R, G, B]`.
    pub fn pixel(&self, ix: usize, iy: usize) -> [f64; 3] {
        let o = (iy * self.width + ix) * 3;
        [self.data[o], self.data[o + 1], self.data[o + 2]]
    }

    /// Sets every value to `v` (NaN to poison an output before a run).
    pub fn fill(&mut self, v: f64) {
        self.data.fill(v);
    }

    /// Adds `other` (same size) value by value.
    pub fn add(&mut self, other: &HdrImage) -> Result<()> {
        same_size(self, other)?;
        for (a, b) in self.data.iter_mut().zip(&other.data) {
            *a += b;
        }
        Ok(())
    }

    /// The first value (in memory order) that is not finite, as
    /// `(x, y, channel)` (channel 0 = R, 1 = G, 2 = B), or `None` when every
    /// value is finite: the check before writing an image out.
    pub fn first_non_finite(&self) -> Option<(usize, usize, usize)> {
        let k = self.data.iter().position(|v| !v.is_finite())?;
        let (p, c) = (k / 3, k % 3);
        Some((p % self.width, p / self.width, c))
    }

    /// The largest |value| over all channels.
    pub fn peak(&self) -> f64 {
        self.data.iter().fold(0.0f64, |m, v| m.max(v.abs()))
    }

    /// Totals of R, G, B and Y, summed with Neumaier compensation (so a
    /// 1e−10 comparison of totals measures the images, not the summation).
    pub fn sums(&self) -> FluxSums {
        let mut acc = [Neumaier::default(); 3];
        for px in self.data.chunks_exact(3) {
            for c in 0..3 {
                acc[c].add(px[c]);
            }
        }
        let [r, g, b] = acc.map(|a| a.value());
        FluxSums {
            r,
            g,
            b,
            y: LUMA[0] * r + LUMA[1] * g + LUMA[2] * b,
        }
    }

    /// Compares this image (`out`) with `reference` (same size).
    pub fn compare(&self, reference: &HdrImage) -> Result<Comparison> {
        same_size(self, reference)?;
        let mut c = Comparison {
            nonfinite: 0,
            first_nonfinite: None,
            zero_mismatches: 0,
            first_zero_mismatch: None,
            max_abs: 0.0,
            max_rel: 0.0,
            peak: reference.peak(),
            flux_rel: [0.0; 4],
        };
        for (k, (&a, &b)) in self.data.iter().zip(&reference.data).enumerate() {
            if !a.is_finite() || !b.is_finite() {
                c.nonfinite += 1;
                c.first_nonfinite.get_or_insert(k);
                continue;
            }
            if (a == 0.0) != (b == 0.0) {
                c.zero_mismatches += 1;
                c.first_zero_mismatch.get_or_insert(k);
            }
            let d = (a - b).abs();
            c.max_abs = c.max_abs.max(d);
            if b != 0.0 {
                c.max_rel = c.max_rel.max(d / b.abs());
            }
        }
        let (s, r) = (self.sums(), reference.sums());
        let rel = |a: f64, b: f64| {
            if b == 0.0 {
                (a - b).abs()
            } else {
                ((a - b) / b).abs()
            }
        };
        c.flux_rel = [rel(s.r, r.r), rel(s.g, r.g), rel(s.b, r.b), rel(s.y, r.y)];
        Ok(c)
    }
}

/// The largest image side, pixels (`2^20`: the image's float64 values
/// then number at most `3·2^40`, far inside `usize` on 64-bit targets, and
/// PNG's and FITS's 32-bit sides hold it).
pub const MAX_IMAGE_SIDE: usize = 1 << 20;

/// `width·height·3` after checking both sides are in `1..=MAX_IMAGE_SIDE`.
fn values_of(width: usize, height: usize) -> Result<usize> {
    if width == 0 || height == 0 || width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(Error::InvalidInput(format!(
            "image size {width}×{height} (each side must be in 1..={MAX_IMAGE_SIDE})"
        )));
    }
    width
        .checked_mul(height)
        .and_then(|p| p.checked_mul(3))
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "image size {width}×{height}: width·height·3 overflows this platform's usize"
            ))
        })
}

fn same_size(a: &HdrImage, b: &HdrImage) -> Result<()> {
    if a.width != b.width || a.height != b.height {
        return Err(Error::InvalidInput(format!(
            "images of different sizes: {}×{} and {}×{}",
            a.width, a.height, b.width, b.height
        )));
    }
    Ok(())
}

#[derive(Clone, Copy, Default)]
struct Neumaier {
    sum: f64,
    comp: f64,
}

impl Neumaier {
    fn add(&mut self, v: f64) {
        let t = self.sum + v;
        if self.sum.abs() >= v.abs() {
            self.comp += (self.sum - t) + v;
        } else {
            self.comp += (v - t) + self.sum;
        }
        self.sum = t;
    }
    fn value(self) -> f64 {
        self.sum + self.comp
    }
}

/// Totals of an image's channels and luminance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluxSums {
    /// Σ R.
    pub r: f64,
    /// Σ G.
    pub g: f64,
    /// Σ B.
    pub b: f64,
    /// Σ Y = 0.2126 Σ R + 0.7152 Σ G + 0.0722 Σ B.
    pub y: f64,
}

/// How an image differs from a reference (the terms of
/// `docs/design/psf.md#acceptance`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Values not finite in either image.
    pub nonfinite: usize,
    /// Flat index of the first of them.
    pub first_nonfinite: Option<usize>,
    /// Values zero in one image and not in the other.
    pub zero_mismatches: usize,
    /// Flat index of the first of them.
    pub first_zero_mismatch: Option<usize>,
    /// max |out − ref| over finite values.
    pub max_abs: f64,
    /// max |out − ref| / |ref| over values where ref ≠ 0.
    pub max_rel: f64,
    /// The reference's peak |value|.
    pub peak: f64,
    /// |Σout − Σref| / |Σref| for R, G, B, Y (absolute where Σref = 0).
    pub flux_rel: [f64; 4],
}

/// `max_abs … (peak …), max_rel …, flux rel R … G … B … Y …, non-finite
/// N, zero mismatches M`, every number in `{:e}` form (precision as the
/// formatter's, e.g. `{:.2}`).
impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = |f: &mut std::fmt::Formatter<'_>, x: f64| match f.precision() {
            Some(p) => write!(f, "{x:.p$e}"),
            None => write!(f, "{x:e}"),
        };
        f.write_str("max_abs ")?;
        e(f, self.max_abs)?;
        f.write_str(" (peak ")?;
        e(f, self.peak)?;
        f.write_str("), max_rel ")?;
        e(f, self.max_rel)?;
        f.write_str(", flux rel")?;
        for (name, v) in ["R", "G", "B", "Y"].iter().zip(self.flux_rel) {
            write!(f, " {name} ")?;
            e(f, v)?;
        }
        write!(
            f,
            ", non-finite {}, zero mismatches {}",
            self.nonfinite, self.zero_mismatches
        )
    }
}

impl Comparison {
    /// The acceptance (`docs/design/psf.md#acceptance`) with tolerance `tol`
    /// (1e−10 there): every value finite, the same zero pattern,
    /// `max_rel < tol`, `max_abs < tol · peak`, each flux difference
    /// ≤ `tol`. The error lists every failed term.
    pub fn accept(&self, tol: f64) -> Result<()> {
        let mut why = Vec::new();
        if self.nonfinite > 0 {
            why.push(format!(
                "{} non-finite values (first at flat index {:?})",
                self.nonfinite, self.first_nonfinite
            ));
        }
        if self.zero_mismatches > 0 {
            why.push(format!(
                "{} values zero in one image only (first at flat index {:?})",
                self.zero_mismatches, self.first_zero_mismatch
            ));
        }
        if self.max_rel.is_nan() || self.max_rel >= tol {
            why.push(format!("max_rel {:e} ≥ {tol:e}", self.max_rel));
        }
        if self.max_abs > 0.0 && self.max_abs >= tol * self.peak {
            why.push(format!(
                "max_abs {:e} ≥ {tol:e} × peak {:e}",
                self.max_abs, self.peak
            ));
        }
        for (name, v) in ["R", "G", "B", "Y"].iter().zip(self.flux_rel) {
            if v.is_nan() || v > tol {
                why.push(format!("{name} flux relative difference {v:e} > {tol:e}"));
            }
        }
        if why.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "images differ: {}",
                why.join("; ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_memory::available_bytes;

    #[test]
    fn first_non_finite_names_the_pixel_and_channel() {
        let mut img = HdrImage::new(4, 3).unwrap();
        assert_eq!(img.first_non_finite(), None);
        img.data_mut()[(2 * 4 + 3) * 3 + 1] = f64::INFINITY;
        assert_eq!(img.first_non_finite(), Some((3, 2, 1)));
        img.data_mut()[(4 + 2) * 3 + 2] = f64::NAN;
        assert_eq!(img.first_non_finite(), Some((2, 1, 2)));
    }

    #[test]
    fn sizes_are_checked_before_allocating() {
        let side = MAX_IMAGE_SIDE;
        let need = HdrImage::bytes_for(side, side).unwrap();
        assert_eq!(need, 24 << 40);
        // 26 TB: beyond this machine (and any other), an error naming it.
        if available_bytes().is_some_and(|a| a < need) {
            let e = HdrImage::new(side, side).unwrap_err();
            assert!(matches!(e, Error::HostMemory { needed_bytes, .. } if needed_bytes == need));
            assert!(
                e.to_string().contains("1048576×1048576 float64 RGB image"),
                "{e}"
            );
        }
        for (w, h) in [(0, 1), (1, 0), (side + 1, 1), (1, usize::MAX)] {
            assert!(matches!(HdrImage::new(w, h), Err(Error::InvalidInput(_))));
            assert!(matches!(
                HdrImage::bytes_for(w, h),
                Err(Error::InvalidInput(_))
            ));
        }
        assert!(HdrImage::from_data(2, 2, vec![0.0; 11]).is_err());
        assert_eq!(HdrImage::bytes_for(3840, 2160).unwrap(), 199_065_600);
    }
}
