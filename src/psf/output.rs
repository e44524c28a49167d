//! Image output (`docs/design/psf.md#outputs`): FITS float32, `.npy` float64 and a tone-mapped
//! PNG preview.
//!
//! # FITS
//!
//! [`write_fits`] writes one primary HDU through the `fitsio` crate
//! (cfitsio 3.49, built from the source it bundles): `BITPIX = -32`
//! (IEEE float32, big-endian as FITS has it), `NAXIS1` = width,
//! `NAXIS2` = height, `NAXIS3` = 3 planes R, G, B; within a plane image row
//! `iy = 0` comes first, each row `ix = 0..width`. Every value is the
//! float64 value rounded once to float32 (to nearest). The header carries
//! the PSF and how the image was made ([`ImageMeta`]):
//!
//! | keyword    | value                                             |
//! |------------|---------------------------------------------------|
//! | `PLANE1..3`| `'R'`, `'G'`, `'B'`                                |
//! | `PSFMODEL` | `'MOFFAT'`                                         |
//! | `FWHM`     | PSF full width at half maximum, px                 |
//! | `BETA`     | Moffat exponent β                                  |
//! | `TAIL`     | flux fraction outside the support radius           |
//! | `ALPHA`    | Moffat scale α = FWHM / (2 √(2^{1/β} − 1)), px     |
//! | `SUPPORT`  | support radius R = α √(tail^{1/(1−β)} − 1), px     |
//! | `CACHERAD` | the cache's stamp radius, 47 px                    |
//! | `PHASES`   | sub-pixel phase intervals P per axis               |
//! | `NEVENTS`  | events replayed                                    |
//! | `NDIRECT`  | of them rendered by the direct path                |
//! | `NOUTSIDE` | of them wholly outside the image                   |
//! | `SINK`     | the sink that rendered it (`cpu`, `atomic`, ...)   |
//! | `CREATOR`  | `'hipkern <version>'`                              |
//!
//! Real values are written by cfitsio with 15 significant digits (its
//! `fits_write_key` default), e.g. `SUPPORT = 45.8477778618594`.
//!
//! # The PNG preview
//!
//! [`tone_map`] maps the HDR image to 8-bit sRGB:
//!
//! ```text
//! Y = 0.2126 R + 0.7152 G + 0.0722 B                    (per pixel)
//! w = the 99.9th percentile of Y over the pixels with Y > 0   (white point)
//! m(Y) = asinh(Y / (a·w)) / asinh(1 / a),  a = 0.02     (so m(w) = 1)
//! (R', G', B') = (R, G, B) · m(Y) / Y, each clamped to [0, 1]
//! byte = round(255 · srgb(c)),  srgb the IEC 61966-2-1 transfer curve
//! ```
//!
//! The asinh stretch is linear for `Y ≪ a·w` and logarithmic above, so
//! faint PSF wings stay visible while cores saturate to white; scaling all
//! three channels by `m(Y)/Y` keeps each pixel's hue. A black image (no
//! `Y > 0`) maps to black. PNG row 0 is image row `iy = 0` (the `.npy`
//! array as `imshow` shows it by default; FITS viewers show `iy = 0` at the
//! bottom). [`write_png`] writes it as an 8-bit RGB PNG with the sRGB chunk.
//!
//! # Writing
//!
//! Every writer replaces `path` whole: it writes a temporary file beside it
//! and renames it into place, so on an error `path` is as it was. A path
//! that is a folder, or in a folder that does not exist, is the caller's
//! [`Error::InvalidInput`](crate::Error::InvalidInput); a failure to
//! create, write, sync or rename the file (no write permission, a full
//! disk) is an [`Error::Io`](crate::Error::Io). Host buffers sized by the
//! image (the FITS planes, the PNG's luminances) are checked against the
//! machine and allocated fallibly
//! ([`Error::HostMemory`](crate::Error::HostMemory)).
use super::image::{HdrImage, LUMA};
use super::model::MoffatPsf;
#[cfg(feature = "fits")]
use super::CACHE_RADIUS;
#[cfg(feature = "fits")]
use crate::host_memory::filled_vec;
#[cfg(feature = "png")]
use crate::host_memory::reserve_vec;
use crate::runtime::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What the FITS header records about an image.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageMeta {
    /// The PSF it was rendered with.
    pub psf: MoffatPsf,
    /// The cache's phase intervals per axis `P`.
    pub phases: usize,
    /// Events replayed (all paths).
    pub events: u64,
    /// Of them, rendered by the direct path.
    pub direct: u64,
    /// Of them, wholly outside the image.
    pub outside: u64,
    /// The sink that rendered it (`cpu`, `atomic`, ...).
    pub sink: String,
}

/// The asinh softening `a` of [`tone_map`]: `m(Y) = asinh(Y/(a·w)) / asinh(1/a)`.
pub const TONE_SOFTENING: f64 = 0.02;
/// The percentile of nonzero luminance taken as the white point `w`.
pub const TONE_PERCENTILE: f64 = 99.9;

/// An image mapped to 8-bit sRGB by [`tone_map`].
#[derive(Clone, Debug, PartialEq)]
pub struct Preview {
    /// Width, pixels.
    pub width: usize,
    /// Height, pixels.
    pub height: usize,
    /// Row-major `(height, width, 3)` bytes, row 0 = image row `iy = 0`.
    pub rgb: Vec<u8>,
    /// The white point `w` (luminance mapped to 1; 0 for a black image).
    pub white: f64,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh hidden name beside `target` made only of characters no tool
/// reads specially (cfitsio parses `[`, `(`, `!`, `.gz` in file names).
fn sibling_temp(target: &Path) -> Result<PathBuf> {
    if target.file_name().is_none() {
        return Err(Error::InvalidInput(format!(
            "output {} has no file name",
            target.display()
        )));
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(dir.join(format!(".hipkern-out-{}-{n}.tmp", std::process::id())))
}

/// Writes `target` through a temporary sibling: `write` fills the fresh
/// temporary path (which does not exist yet), then it is renamed into
/// place. On any error the temporary file is removed and `target` is
/// untouched. A target that is a folder, has no file name or lies in a
/// folder that does not exist is the caller's [`Error::InvalidInput`]; a
/// failed rename an [`Error::Io`].
pub(super) fn replace_via_temp(
    target: &Path,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    if target.is_dir() {
        return Err(Error::InvalidInput(format!(
            "output {} is a directory",
            target.display()
        )));
    }
    let temp = sibling_temp(target)?;
    if let Some(dir) = temp.parent() {
        if !dir.is_dir() {
            return Err(Error::InvalidInput(format!(
                "output {}: {} is not an existing folder",
                target.display(),
                dir.display()
            )));
        }
    }
    let result = write(&temp).and_then(|()| {
        fs::rename(&temp, target).map_err(|e| Error::Io {
            action: format!("cannot rename {} to {}", temp.display(), target.display()),
            message: e.to_string(),
        })
    });
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Creates `path` (which must not exist) for writing; a failure (a folder
/// without write permission, a full disk) is an [`Error::Io`].
pub(super) fn create_new(path: &Path, what: &str) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::Io {
            action: format!("cannot create {what} {}", path.display()),
            message: e.to_string(),
        })
}

/// The [`Error::Io`] of a failed write of `path`.
fn write_failure(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io {
        action: format!("cannot write {what} {}", path.display()),
        message: e.to_string(),
    }
}

/// Writes `image` as a float32 FITS file (layout and header in the module
/// docs), replacing `path` (through a temporary file beside it).
#[cfg(feature = "fits")]
pub fn write_fits(path: &Path, image: &HdrImage, meta: &ImageMeta) -> Result<()> {
    replace_via_temp(path, |temp| write_fits_new(temp, image, meta))
}

/// [`write_fits`] to a new file: `path` must not exist, and is written in
/// place (for a caller that stages its outputs itself). cfitsio creates
/// it, so it is named by path.
#[cfg(feature = "fits")]
pub fn write_fits_new(path: &Path, image: &HdrImage, meta: &ImageMeta) -> Result<()> {
    meta.psf.validate()?;
    let (w, h) = (image.width(), image.height());
    // Planes R, G, B, each row-major with iy = 0 first.
    let mut planes = filled_vec(image.data().len(), 0f32, &|| {
        format!("the float32 planes of the {w}×{h} FITS image")
    })?;
    for (p, px) in image.data().chunks_exact(3).enumerate() {
        for c in 0..3 {
            planes[c * w * h + p] = px[c] as f32;
        }
    }
    let fits_err = |e: fitsio::errors::Error| write_failure("FITS file", path, e);
    let Some(path_str) = path.to_str() else {
        return Err(Error::InvalidInput(format!(
            "cannot write FITS file {}: its folder's name is not UTF-8",
            path.display()
        )));
    };
    if path_str.contains(['[', ']', '(', ')']) {
        return Err(Error::InvalidInput(format!(
            "cannot write FITS file {}: cfitsio reads [ ] ( ) in a path as its extended \
             file-name syntax; choose a folder without them",
            path.display()
        )));
    }
    let description = fitsio::images::ImageDescription {
        data_type: fitsio::images::ImageType::Float,
        // C order (slowest first): NAXIS3 = 3, NAXIS2 = h, NAXIS1 = w.
        dimensions: &[3, h, w],
    };
    let mut f = fitsio::FitsFile::create(path_str)
        .with_custom_primary(&description)
        .open()
        .map_err(fits_err)?;
    let hdu = f.primary_hdu().map_err(fits_err)?;
    let psf = &meta.psf;
    hdu.write_key(&mut f, "PLANE1", ("R", "NAXIS3 plane 1: red"))
        .map_err(fits_err)?;
    hdu.write_key(&mut f, "PLANE2", ("G", "NAXIS3 plane 2: green"))
        .map_err(fits_err)?;
    hdu.write_key(&mut f, "PLANE3", ("B", "NAXIS3 plane 3: blue"))
        .map_err(fits_err)?;
    hdu.write_key(&mut f, "PSFMODEL", ("MOFFAT", "PSF profile"))
        .map_err(fits_err)?;
    for (key, value, comment) in [
        ("FWHM", psf.fwhm, "PSF full width at half maximum (px)"),
        ("BETA", psf.beta, "Moffat exponent beta"),
        ("TAIL", psf.tail, "flux fraction outside SUPPORT"),
        ("ALPHA", psf.alpha(), "Moffat scale alpha (px)"),
        ("SUPPORT", psf.support_radius(), "support radius R (px)"),
    ] {
        hdu.write_key(&mut f, key, (value, comment))
            .map_err(fits_err)?;
    }
    for (key, value, comment) in [
        (
            "CACHERAD",
            CACHE_RADIUS as i64,
            "PSF cache stamp radius (px)",
        ),
        (
            "PHASES",
            meta.phases as i64,
            "sub-pixel phase intervals P per axis",
        ),
        ("NEVENTS", meta.events as i64, "star events replayed"),
        ("NDIRECT", meta.direct as i64, "events by the direct path"),
        ("NOUTSIDE", meta.outside as i64, "events wholly outside"),
    ] {
        hdu.write_key(&mut f, key, (value, comment))
            .map_err(fits_err)?;
    }
    hdu.write_key(
        &mut f,
        "SINK",
        (meta.sink.as_str(), "sink that rendered it"),
    )
    .map_err(fits_err)?;
    let creator = format!("hipkern {}", env!("CARGO_PKG_VERSION"));
    hdu.write_key(&mut f, "CREATOR", (creator.as_str(), "program"))
        .map_err(fits_err)?;
    hdu.write_image(&mut f, &planes).map_err(fits_err)?;
    // Dropping closes (and flushes) the file, but `fitsio` drops the
    // close's status: check the length on disk instead, whole 2880-byte
    // blocks holding at least the header block and the padded data.
    drop(f);
    let data = (w * h * 3 * 4).div_ceil(2880) * 2880;
    let io = |e: std::io::Error| write_failure("FITS file", path, e);
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len() as usize;
    if len % 2880 != 0 || len < data + 2880 {
        return Err(write_failure(
            "FITS file",
            path,
            format!(
                "{len} bytes on disk, want ≥ {} in 2880-byte blocks",
                data + 2880
            ),
        ));
    }
    file.sync_all().map_err(io)
}

/// Writes `image` as a float64 `.npy` of shape `(height, width, 3)`,
/// replacing `path` (through a temporary file beside it).
pub fn write_image_npy(path: &Path, image: &HdrImage) -> Result<()> {
    replace_via_temp(path, |temp| {
        let io = |e: &dyn std::fmt::Display| write_failure(".npy file", path, e);
        let mut writer = BufWriter::new(create_new(temp, ".npy file")?);
        write_image_npy_to(&mut writer, image).map_err(|e| io(&e))?;
        let file = writer.into_inner().map_err(|e| io(&e.into_error()))?;
        file.sync_all().map_err(|e| io(&e))
    })
}

/// [`write_image_npy`]'s bytes to `w` (flushed), for a caller that stages
/// its outputs itself.
pub fn write_image_npy_to(w: &mut dyn Write, image: &HdrImage) -> std::io::Result<()> {
    w.write_all(&crate::npy::header(
        "<f8",
        &[image.height(), image.width(), 3],
    ))?;
    // In pieces, so that no copy of the image is made.
    let mut bytes = Vec::with_capacity(8 * 4096);
    for chunk in image.data().chunks(4096) {
        bytes.clear();
        bytes.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
        w.write_all(&bytes)?;
    }
    w.flush()
}

/// The sRGB transfer curve (IEC 61966-2-1) of a linear value in `[0, 1]`.
fn srgb_encode(c: f64) -> f64 {
    if c <= 0.003_130_8 {
        12.92 * c
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    }
}

/// The white point of [`tone_map`]: the [`TONE_PERCENTILE`]th percentile
/// (nearest rank) of the luminance over pixels with `Y > 0`, or 0 if none.
pub fn white_point(image: &HdrImage) -> f64 {
    white_point_in(image, &mut Vec::new())
}

/// [`white_point`] collecting the luminances in `ys` (empty; with room
/// for one per pixel it never reallocates).
fn white_point_in(image: &HdrImage, ys: &mut Vec<f64>) -> f64 {
    ys.extend(
        image
            .data()
            .chunks_exact(3)
            .map(|p| LUMA[0] * p[0] + LUMA[1] * p[1] + LUMA[2] * p[2])
            .filter(|&y| y > 0.0 && y.is_finite()),
    );
    if ys.is_empty() {
        return 0.0;
    }
    let n = ys.len();
    let rank = ((TONE_PERCENTILE / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1;
    let (_, v, _) = ys.select_nth_unstable_by(rank, f64::total_cmp);
    *v
}

/// Maps the pixels of `src` (RGB float64) to `out` (RGB bytes, zeroed,
/// the same number of pixels) against white point `white`.
fn tone_map_pixels(src: &[f64], out: &mut [u8], white: f64) {
    if white <= 0.0 {
        return;
    }
    let a = TONE_SOFTENING;
    let norm = (1.0 / a).asinh();
    for (out, px) in out.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
        let y = LUMA[0] * px[0] + LUMA[1] * px[1] + LUMA[2] * px[2];
        if !(y > 0.0 && y.is_finite()) {
            continue;
        }
        let scale = (y / (a * white)).asinh() / norm / y;
        for c in 0..3 {
            let v = (px[c] * scale).clamp(0.0, 1.0);
            let v = if v.is_nan() { 0.0 } else { v };
            out[c] = (255.0 * srgb_encode(v)).round() as u8;
        }
    }
}

/// Maps `image` to 8-bit sRGB (the mapping is in the module docs).
/// Non-finite values map to black.
pub fn tone_map(image: &HdrImage) -> Preview {
    let white = white_point(image);
    let mut rgb = vec![0u8; image.data().len()];
    tone_map_pixels(image.data(), &mut rgb, white);
    Preview {
        width: image.width(),
        height: image.height(),
        rgb,
        white,
    }
}

/// Tone-maps `image` ([`tone_map`]) and writes it as an 8-bit RGB PNG,
/// replacing `path`. Returns the preview's white point. The white point
/// needs one float64 per pixel, checked against the machine and allocated
/// fallibly ([`Error::HostMemory`]); the rows are then mapped and
/// compressed one at a time.
#[cfg(feature = "png")]
pub fn write_png(path: &Path, image: &HdrImage) -> Result<f64> {
    let mut white = 0.0;
    replace_via_temp(path, |temp| {
        let io = |e: &dyn std::fmt::Display| write_failure("PNG file", path, e);
        let mut writer = BufWriter::new(create_new(temp, "PNG file")?);
        white = write_png_to(&mut writer, image).map_err(|e| match e {
            PngError::Image(e) => e,
            PngError::Write(e) => io(&e),
        })?;
        let file = writer.into_inner().map_err(|e| io(&e.into_error()))?;
        file.sync_all().map_err(|e| io(&e))
    })?;
    Ok(white)
}

/// Why [`write_png_to`] failed: the image (too large for a PNG, or its
/// luminances for this machine), or the writer.
#[cfg(feature = "png")]
#[derive(Debug)]
pub enum PngError {
    /// The image cannot be made a PNG here; nothing was written.
    Image(Error),
    /// Writing to the writer failed.
    Write(std::io::Error),
}

#[cfg(feature = "png")]
impl std::fmt::Display for PngError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PngError::Image(e) => e.fmt(f),
            PngError::Write(e) => e.fmt(f),
        }
    }
}

/// [`write_png`]'s bytes to `w` (flushed), for a caller that stages its
/// outputs itself. Returns the preview's white point.
#[cfg(feature = "png")]
pub fn write_png_to(w: &mut dyn Write, image: &HdrImage) -> std::result::Result<f64, PngError> {
    let (width, height) = (image.width(), image.height());
    let (Ok(pw), Ok(ph)) = (u32::try_from(width), u32::try_from(height)) else {
        return Err(PngError::Image(Error::InvalidInput(format!(
            "image {width}×{height} is too large for a PNG"
        ))));
    };
    let mut ys = reserve_vec::<f64>(width * height, &|| {
        format!("the luminances of the {width}×{height} image's PNG preview")
    })
    .map_err(PngError::Image)?;
    let white = white_point_in(image, &mut ys);
    drop(ys);
    let io = |e: &dyn std::fmt::Display| PngError::Write(std::io::Error::other(e.to_string()));
    let mut encoder = png::Encoder::new(&mut *w, pw, ph);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_source_srgb(png::SrgbRenderingIntent::Perceptual);
    let mut writer = encoder.write_header().map_err(|e| io(&e))?;
    let mut stream = writer.stream_writer().map_err(|e| io(&e))?;
    let mut row = vec![0u8; width * 3];
    for src in image.data().chunks_exact(width * 3) {
        row.fill(0);
        tone_map_pixels(src, &mut row, white);
        stream.write_all(&row).map_err(|e| io(&e))?;
    }
    stream.finish().map_err(|e| io(&e))?;
    writer.finish().map_err(|e| io(&e))?;
    w.flush().map_err(PngError::Write)?;
    Ok(white)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tone_map_fixed_points() {
        // One pixel at the white point maps to (255, 255, 255) when grey.
        let mut img = HdrImage::new(4, 1).unwrap();
        img.data_mut()[..3].copy_from_slice(&[1.0, 1.0, 1.0]);
        let p = tone_map(&img);
        assert_eq!(p.white, 1.0);
        assert_eq!(&p.rgb[..3], &[255, 255, 255]);
        assert!(p.rgb[3..].iter().all(|&b| b == 0));
        // Black stays black.
        let p = tone_map(&HdrImage::new(3, 2).unwrap());
        assert_eq!(p.white, 0.0);
        assert!(p.rgb.iter().all(|&b| b == 0));
    }

    #[test]
    fn tone_map_is_monotone_and_keeps_hue_order() {
        let n = 1000;
        let mut img = HdrImage::new(n, 1).unwrap();
        for (i, px) in img.data_mut().chunks_exact_mut(3).enumerate() {
            let v = 1e-6 * 1.02f64.powi(i as i32);
            px.copy_from_slice(&[v, 0.5 * v, 0.25 * v]);
        }
        let p = tone_map(&img);
        for i in 1..n {
            assert!(p.rgb[3 * i] >= p.rgb[3 * (i - 1)]);
            let px = &p.rgb[3 * i..3 * i + 3];
            assert!(px[0] >= px[1] && px[1] >= px[2], "{px:?}");
        }
        assert_eq!(p.rgb[3 * (n - 1)], 255);
    }

    #[test]
    fn srgb_curve_ends() {
        assert_eq!(srgb_encode(0.0), 0.0);
        assert!((srgb_encode(1.0) - 1.0).abs() < 1e-12);
        // Continuous at the knee.
        let k = 0.003_130_8;
        assert!((12.92 * k - (1.055 * f64::powf(k, 1.0 / 2.4) - 0.055)).abs() < 1e-6);
    }
}

#[cfg(test)]
mod write_tests {
    use super::*;

    #[cfg(feature = "fits")]
    fn meta() -> ImageMeta {
        ImageMeta {
            psf: MoffatPsf::default(),
            phases: 64,
            events: 1,
            direct: 0,
            outside: 0,
            sink: "cpu".into(),
        }
    }

    fn image() -> HdrImage {
        let mut img = HdrImage::new(37, 5).unwrap();
        for (k, v) in img.data_mut().iter_mut().enumerate() {
            *v = (k % 11) as f64 * 0.1;
        }
        img
    }

    #[test]
    fn bad_paths_are_input_and_file_system_failures_io() {
        let dir = tempfile::tempdir().unwrap();
        let img = image();
        let nowhere = dir.path().join("no").join("x");
        let long = dir.path().join("x".repeat(300));
        type Write<'a> = Box<dyn Fn(&Path) -> Result<()> + 'a>;
        #[allow(unused_mut)] // without the fits and png features
        let mut writes: Vec<Write> = vec![Box::new(|p| write_image_npy(p, &img))];
        #[cfg(feature = "fits")]
        writes.push(Box::new(|p| write_fits(p, &img, &meta())));
        #[cfg(feature = "png")]
        writes.push(Box::new(|p| write_png(p, &img).map(drop)));
        for write in writes {
            assert!(matches!(write(&nowhere), Err(Error::InvalidInput(_))));
            assert!(matches!(write(dir.path()), Err(Error::InvalidInput(_))));
            match write(&long) {
                Err(Error::Io { action, .. }) => {
                    assert!(action.contains("cannot rename"), "{action}")
                }
                other => panic!("expected Io, got {other:?}"),
            }
        }
        // Nothing is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_npy_is_its_header_then_the_values_little_endian() {
        let img = image();
        let mut bytes = Vec::new();
        write_image_npy_to(&mut bytes, &img).unwrap();
        let header = crate::npy::header("<f8", &[5, 37, 3]);
        assert_eq!(&bytes[..header.len()], header.as_slice());
        let values: Vec<f64> = bytes[header.len()..]
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(values.as_slice(), img.data());
    }

    #[cfg(feature = "png")]
    #[test]
    fn the_streamed_png_is_the_tone_map() {
        let dir = tempfile::tempdir().unwrap();
        let img = image();
        let path = dir.path().join("p.png");
        let white = write_png(&path, &img).unwrap();
        let preview = tone_map(&img);
        assert_eq!(white, preview.white);
        let decoder = png::Decoder::new(std::io::BufReader::new(File::open(&path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0u8; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (37, 5));
        assert_eq!(&buf[..info.buffer_size()], preview.rgb.as_slice());
    }
}
