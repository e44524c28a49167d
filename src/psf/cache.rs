//! The immutable phase cache of pixel-integrated PSF stamps.
use super::model::MoffatPsf;
use super::support::{anchor_phase, support_box};
use super::{CACHE_RADIUS, DEFAULT_PHASES, STAMP_PIXELS, STAMP_SIDE};
use crate::host_memory::{bytes_of, filled_vec};
use crate::runtime::{Error, Result};
use crate::threads::{resolve_threads, run_workers};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The most phase intervals per axis a cache takes. The blend's error
/// falls as 1/P² (≈ 5e−5 relative at 64, ≈ 2e−7 at 1024), while the
/// stamps grow as (P+1)²: at 1024 they take 75,855,125,000 bytes
/// ([`PsfCache::bytes_for`]), which only a large host has. A build that
/// does not fit the machine is an [`Error::HostMemory`], found before
/// anything is allocated.
pub const MAX_PHASES: usize = 1024;

/// How to build a [`PsfCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Phase intervals per axis `P` (1..=[`MAX_PHASES`]; default 64):
    /// stamps at phases `(i/P, j/P)`, `i, j ∈ 0..=P`.
    pub phases: usize,
    /// Build threads (0..=[`super::MAX_THREADS`]); 0 =
    /// `std::thread::available_parallelism()`.
    pub threads: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            phases: DEFAULT_PHASES,
            threads: 0,
        }
    }
}

/// Pixel-integrated PSF stamps at `(P+1)²` sub-pixel phases
/// (`docs/design/psf.md#phase-cache`).
///
/// Stamp `(i, j)` is the PSF centred at phase `(i/P, j/P)` of the anchor
/// pixel (that is, at `(i/P, j/P)` relative to the anchor's lower corner),
/// integrated over each pixel `[dx, dx+1) × [dy, dy+1)`,
/// `dx, dy ∈ −47..=47` ([`CACHE_RADIUS`]), by
/// [`MoffatPsf::pixel_integral`].
///
/// # Layout
///
/// One contiguous float64 array ([`PsfCache::stamps`]), uploadable as is:
///
/// ```text
/// stamps[((j·(P+1) + i)·95 + (dy + 47))·95 + (dx + 47)]
/// ```
///
/// `i` the x phase, `j` the y phase, each stamp 95 × 95 row-major with its
/// rows along y. `(P+1)²·95²·8` bytes: 305,045,000 at P = 64.
///
/// # Build
///
/// Only the phases with `i ≤ P/2`, `j ≤ P/2` are integrated; the others are
/// their mirror images, `stamp(P−i, j)[dx, dy] = stamp(i, j)[−dx, dy]` and
/// likewise in y. This is exact, not an approximation: pixel centres are
/// formed from integer numerators (`(2P·dx + P − 2i) / 2P`, which only
/// changes sign under the mirror) and [`MoffatPsf::pixel_integral`] sums in
/// mirror-symmetric node pairs, so the copy is bitwise the stamp
/// [`PsfCache::compute_stamp`] would compute directly (a test checks it).
/// The canonical stamps are shared out to `threads` std threads, each
/// owning the (up to four) stamps of the mirror orbits it computes.
#[derive(Debug)]
pub struct PsfCache {
    psf: MoffatPsf,
    phases: usize,
    stamps: Vec<f64>,
    build_time: Duration,
}

impl PsfCache {
    /// The default cache (P = 64) for `psf`.
    pub fn build(psf: MoffatPsf) -> Result<PsfCache> {
        PsfCache::build_with(psf, &CacheConfig::default())
    }

    /// Bytes of the stamps of a cache with `phases` intervals per axis,
    /// `(P+1)²·95²·8`, after checking `phases` is in `1..=MAX_PHASES`
    /// (computed with checked arithmetic; nothing is allocated).
    pub fn bytes_for(phases: usize) -> Result<u64> {
        if !(1..=MAX_PHASES).contains(&phases) {
            return Err(Error::InvalidInput(format!(
                "PSF cache: phases = {phases} (need 1..={MAX_PHASES} intervals per axis)"
            )));
        }
        let side = phases as u128 + 1;
        bytes_of::<f64>(side * side * STAMP_PIXELS as u128, &|| stamps_name(phases))
    }

    /// A cache built with `config`. Refuses an invalid PSF, phases outside
    /// `1..=MAX_PHASES` and more than [`super::MAX_THREADS`] threads
    /// ([`Error::InvalidInput`]); stamps that do not fit the machine's
    /// available memory ([`Error::HostMemory`], before any allocation);
    /// and a stamp value that is not finite (an [`Error::InvalidInput`]
    /// naming the stamp, offset and PSF; not expected for a PSF that
    /// passes [`MoffatPsf::validate`]).
    pub fn build_with(psf: MoffatPsf, config: &CacheConfig) -> Result<PsfCache> {
        psf.validate()?;
        let p = config.phases;
        PsfCache::bytes_for(p)?;
        let threads = resolve_threads(config.threads, "PSF cache")?;
        let name = || stamps_name(p);
        let start = Instant::now();
        let n_stamps = (p + 1) * (p + 1);
        let mut stamps = filled_vec(n_stamps * STAMP_PIXELS, 0.0f64, &name)?;
        let failure: Mutex<Option<Error>> = Mutex::new(None);
        {
            let mut slots: Vec<Option<&mut [f64]>> =
                stamps.chunks_mut(STAMP_PIXELS).map(Some).collect();
            // One job per canonical phase: its stamp and its mirror images.
            let mut jobs = Vec::new();
            for j in 0..=p / 2 {
                for i in 0..=p / 2 {
                    let mut orbit = Vec::with_capacity(4);
                    for (mi, mj) in [(i, j), (p - i, j), (i, p - j), (p - i, p - j)] {
                        if let Some(slot) = slots[mj * (p + 1) + mi].take() {
                            orbit.push((mi != i, mj != j, slot));
                        }
                    }
                    jobs.push((i, j, orbit));
                }
            }
            // More threads than jobs would only wait on the queue.
            let workers = threads.clamp(1, jobs.len());
            let queue = Mutex::new(jobs.into_iter());
            run_workers(workers, || loop {
                let job = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                let Some((i, j, orbit)) = job else { break };
                let stamp = PsfCache::compute_stamp(&psf, p, i, j);
                if let Err(err) = check_stamp(&stamp, &psf, p, i, j) {
                    let mut f = failure.lock().unwrap_or_else(PoisonError::into_inner);
                    f.get_or_insert(err);
                    // Empty the queue: the build has failed.
                    if let Ok(mut q) = queue.lock() {
                        q.by_ref().for_each(drop);
                    }
                    break;
                }
                for (flip_x, flip_y, slot) in orbit {
                    for r in 0..STAMP_SIDE {
                        let sr = if flip_y { STAMP_SIDE - 1 - r } else { r };
                        for c in 0..STAMP_SIDE {
                            let sc = if flip_x { STAMP_SIDE - 1 - c } else { c };
                            slot[r * STAMP_SIDE + c] = stamp[sr * STAMP_SIDE + sc];
                        }
                    }
                }
            });
        }
        if let Some(err) = failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
            return Err(err);
        }
        Ok(PsfCache {
            psf,
            phases: p,
            stamps,
            build_time: start.elapsed(),
        })
    }

    /// Stamp `(i, j)` at `P = phases` integrated directly (what the build
    /// does for the canonical phases), 95 × 95 row-major (rows along y).
    /// `i, j` must be `≤ phases` (panics otherwise).
    pub fn compute_stamp(psf: &MoffatPsf, phases: usize, i: usize, j: usize) -> Vec<f64> {
        assert!(
            i <= phases && j <= phases,
            "phase ({i}, {j}) beyond P = {phases}"
        );
        let p = phases as i64;
        let den = (2 * p) as f64;
        // Pixel centre relative to the PSF centre, dx + ½ − i/P, from an
        // integer numerator so that mirrored phases give exactly −centre.
        let centre = |d: i64, k: usize| (2 * p * d + p - 2 * k as i64) as f64 / den;
        let r = CACHE_RADIUS as i64;
        let mut out = Vec::with_capacity(STAMP_PIXELS);
        for dy in -r..=r {
            let cv = centre(dy, j);
            for dx in -r..=r {
                out.push(psf.pixel_integral(centre(dx, i), cv));
            }
        }
        out
    }

    /// The PSF the stamps are of.
    pub fn psf(&self) -> &MoffatPsf {
        &self.psf
    }

    /// Phase intervals per axis, `P`.
    pub fn phases(&self) -> usize {
        self.phases
    }

    /// Every stamp, one contiguous array in the documented layout.
    pub fn stamps(&self) -> &[f64] {
        &self.stamps
    }

    /// Stamp `(i, j)` (95 × 95, rows along y); panics beyond `P`.
    pub fn stamp(&self, i: usize, j: usize) -> &[f64] {
        let k = self.stamp_index(i, j);
        &self.stamps[k * STAMP_PIXELS..(k + 1) * STAMP_PIXELS]
    }

    /// `j·(P+1) + i`, the stamp's position in [`PsfCache::stamps`].
    pub fn stamp_index(&self, i: usize, j: usize) -> usize {
        assert!(
            i <= self.phases && j <= self.phases,
            "phase ({i}, {j}) beyond P"
        );
        j * (self.phases + 1) + i
    }

    /// Bytes held by the stamps.
    pub fn bytes(&self) -> usize {
        self.stamps.len() * std::mem::size_of::<f64>()
    }

    /// Wall time the build took.
    pub fn build_time(&self) -> Duration {
        self.build_time
    }

    /// The blend's bracketing stamps and weights for phase `(fx, fy)`
    /// (each in `[0, 1]`): `gx = fx·P`, `i0 = min(⌊gx⌋, P−1)`,
    /// `tx = gx − i0` (likewise y); stamps `(i0, j0)`, `(i0+1, j0)`,
    /// `(i0, j0+1)`, `(i0+1, j0+1)` with weights `(1−tx)(1−ty)`,
    /// `tx(1−ty)`, `(1−tx)ty`, `tx·ty`. Returns the stamps' offsets into
    /// [`PsfCache::stamps`] and the weights, in that order.
    pub fn blend_weights(&self, fx: f64, fy: f64) -> ([usize; 4], [f64; 4]) {
        let p = self.phases;
        let split = |f: f64| {
            let g = f * p as f64;
            let i0 = (g.floor().max(0.0) as usize).min(p - 1);
            (i0, g - i0 as f64)
        };
        let (i0, tx) = split(fx);
        let (j0, ty) = split(fy);
        let base = |i: usize, j: usize| (j * (p + 1) + i) * STAMP_PIXELS;
        (
            [
                base(i0, j0),
                base(i0 + 1, j0),
                base(i0, j0 + 1),
                base(i0 + 1, j0 + 1),
            ],
            [
                (1.0 - tx) * (1.0 - ty),
                tx * (1.0 - ty),
                (1.0 - tx) * ty,
                tx * ty,
            ],
        )
    }

    /// The blended stamp value at phase `(fx, fy)` and offset `(dx, dy)`
    /// (`|dx|, |dy| ≤ 47`), summed as
    /// `((w00·S00 + w10·S10) + w01·S01) + w11·S11` (the sink's order).
    pub fn blend(&self, fx: f64, fy: f64, dx: i64, dy: i64) -> f64 {
        let (b, w) = self.blend_weights(fx, fy);
        let o = offset_index(dx, dy);
        let s = &self.stamps;
        ((w[0] * s[b[0] + o] + w[1] * s[b[1] + o]) + w[2] * s[b[2] + o]) + w[3] * s[b[3] + o]
    }

    /// Whether every pixel of the support of an event at `(x, y)` with
    /// radius `support` lies within the stamp (offsets in −47..=47 of the
    /// anchor): the condition for going through the cache. Depends only
    /// on the phase and the support: every support below 47.5 px fits,
    /// none from 48.5 px on; in between it depends on the phase.
    pub fn fits(x: f64, y: f64, support: f64) -> bool {
        // The common case without the row search: the phases lie in [0, 1],
        // so a support of at most 47 px reaches offsets ±47 at most (a
        // half-pixel margin over every rounding of the row ranges).
        if support <= CACHE_RADIUS as f64 && x.is_finite() && y.is_finite() {
            return true;
        }
        let (_, fx) = anchor_phase(x);
        let (_, fy) = anchor_phase(y);
        let r = CACHE_RADIUS as i64;
        match support_box(fx, fy, support) {
            None => true,
            Some(b) => b.oy_lo >= -r && b.oy_hi <= r && b.ox_lo >= -r && b.ox_hi <= r,
        }
    }
}

/// Refuses a computed stamp `(i, j)` holding a value that is not finite,
/// naming the stamp, the offset, the value and the PSF.
fn check_stamp(stamp: &[f64], psf: &MoffatPsf, phases: usize, i: usize, j: usize) -> Result<()> {
    let Some(k) = stamp.iter().position(|v| !v.is_finite()) else {
        return Ok(());
    };
    let r = CACHE_RADIUS as i64;
    let (dx, dy) = ((k % STAMP_SIDE) as i64 - r, (k / STAMP_SIDE) as i64 - r);
    Err(Error::InvalidInput(format!(
        "PSF cache: stamp ({i}, {j}) at P = {phases} has the non-finite value {} at offset \
         ({dx}, {dy}) for {psf:?}",
        stamp[k]
    )))
}

/// What the stamps of a cache at `phases` are called in errors.
fn stamps_name(phases: usize) -> String {
    let side = phases as u128 + 1;
    format!(
        "the PSF cache's {} stamps of 95×95 float64 at P = {phases}",
        side * side
    )
}

/// `(dy + 47)·95 + (dx + 47)`: the position of offset `(dx, dy)` in a stamp.
#[inline]
pub fn offset_index(dx: i64, dy: i64) -> usize {
    let r = CACHE_RADIUS as i64;
    ((dy + r) * STAMP_SIDE as i64 + (dx + r)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_memory::available_bytes;

    #[test]
    fn the_cache_size_is_computed_before_anything_is_allocated() {
        assert_eq!(PsfCache::bytes_for(64).unwrap(), 305_045_000);
        assert_eq!(PsfCache::bytes_for(MAX_PHASES).unwrap(), 75_855_125_000);
        for p in [0, MAX_PHASES + 1, usize::MAX] {
            let e = PsfCache::bytes_for(p).unwrap_err();
            assert!(e.to_string().contains("need 1..=1024"), "{e}");
            let c = CacheConfig {
                phases: p,
                threads: 1,
            };
            assert!(matches!(
                PsfCache::build_with(MoffatPsf::default(), &c),
                Err(Error::InvalidInput(_))
            ));
        }
        // P = 1024 needs 76 GB: where the machine has less, the build is an
        // error naming the stamps and their bytes (never an abort). Where it
        // has more, the size computation above is the check (the build
        // would take minutes).
        let need = PsfCache::bytes_for(MAX_PHASES).unwrap();
        match available_bytes() {
            Some(a) if a < need => {
                let c = CacheConfig {
                    phases: MAX_PHASES,
                    threads: 1,
                };
                let e = PsfCache::build_with(MoffatPsf::default(), &c).unwrap_err();
                assert_eq!(
                    e,
                    Error::HostMemory {
                        what: stamps_name(MAX_PHASES),
                        needed_bytes: need,
                        available_bytes: e_available(&e),
                    }
                );
                let m = e.to_string();
                assert!(
                    m.contains("1050625 stamps") && m.contains("needs 75855125000 bytes"),
                    "{m}"
                );
            }
            a => eprintln!("{a:?} bytes available: P = 1024 fits, not built"),
        }
    }

    fn e_available(e: &Error) -> Option<u64> {
        match e {
            Error::HostMemory {
                available_bytes, ..
            } => *available_bytes,
            _ => None,
        }
    }

    #[test]
    fn thread_counts_beyond_the_limit_are_refused_at_once() {
        for threads in [1usize << 40, crate::psf::MAX_THREADS + 1] {
            let c = CacheConfig { phases: 2, threads };
            let m = PsfCache::build_with(MoffatPsf::default(), &c)
                .unwrap_err()
                .to_string();
            assert!(m.contains("threads") && m.contains("0..=1024"), "{m}");
        }
        // More threads than jobs (P = 1 has 1) and all cores both build the
        // same stamps as one thread.
        let one = CacheConfig {
            phases: 1,
            threads: 1,
        };
        let want = PsfCache::build_with(MoffatPsf::default(), &one).unwrap();
        for threads in [0, 5] {
            let c = CacheConfig { phases: 1, threads };
            let got = PsfCache::build_with(MoffatPsf::default(), &c).unwrap();
            assert_eq!(got.stamps(), want.stamps());
        }
    }

    #[test]
    fn a_non_finite_stamp_value_is_named() {
        let psf = MoffatPsf::default();
        let mut stamp = vec![0.0; STAMP_PIXELS];
        assert!(check_stamp(&stamp, &psf, 64, 3, 4).is_ok());
        stamp[offset_index(-2, 5)] = f64::NAN;
        let m = check_stamp(&stamp, &psf, 64, 3, 4).unwrap_err().to_string();
        assert!(
            m.contains("stamp (3, 4) at P = 64") && m.contains("NaN at offset (-2, 5)"),
            "{m}"
        );
    }
}
