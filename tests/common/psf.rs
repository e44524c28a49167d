//! Shared by the PSF device tests: one cache per binary, the GPU, the
//! acceptance (`docs/design/psf.md#acceptance`) printed, an image's bits.
// Not every test binary that includes the common module uses these.
#![allow(dead_code)]
use hipkern::psf::{HdrImage, MoffatPsf, PsfCache};
use hipkern::Device;
use std::sync::{Arc, OnceLock};

/// The acceptance's tolerance.
pub const TOL: f64 = 1e-10;

/// One default cache (P = 64) per test binary.
pub fn cache() -> Arc<PsfCache> {
    static CACHE: OnceLock<Arc<PsfCache>> = OnceLock::new();
    CACHE
        .get_or_init(|| Arc::new(PsfCache::build(MoffatPsf::default()).expect("default cache")))
        .clone()
}

/// GPU 0, or the test fails saying it needs one.
pub fn gpu() -> Device {
    Device::new(0).expect("a GPU is required for this test")
}

/// The acceptance of `got` against `want`, printed.
pub fn check(what: &str, got: &HdrImage, want: &HdrImage) {
    let c = got.compare(want).unwrap();
    eprintln!(
        "{what}: {c:.3} (max_abs/peak {:.3e})",
        c.max_abs / c.peak.max(1e-300)
    );
    c.accept(TOL).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// The image's values as bits (for bitwise comparisons).
pub fn bits(img: &HdrImage) -> Vec<u64> {
    img.data().iter().map(|v| v.to_bits()).collect()
}
