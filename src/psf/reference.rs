//! The CPU float64 sinks: the serial reference (the definition of the
//! result), its row-parallel twin, and the direct path.
//!
//! # What the cached sink computes
//!
//! Events are taken in chunks of at most [`CHUNK_EVENTS`]. A chunk is
//! validated whole before anything is accumulated ([`StarEvent::validate`],
//! and [`PsfCache::fits`] for every event): a rejected chunk leaves the
//! image as it was, and chunks accumulated before it stay. For each event,
//! in order, with anchor `(ax, ay)`, phase `(fx, fy)` (see
//! [`super::support`]), the blend's stamps `S00, S10, S01, S11` and weights
//! `w00, w10, w01, w11` ([`PsfCache::blend_weights`]) and `c = flux·(r, g, b)`
//! (three products), every support pixel `(ax + ox, ay + oy)` inside the
//! image gets
//!
//! ```text
//! v = ((w00·S00[o] + w10·S10[o]) + w01·S01[o]) + w11·S11[o],  o = offset (ox, oy)
//! R += v·c_r;  G += v·c_g;  B += v·c_b
//! ```
//!
//! An event none of whose support pixels is in the image is counted in
//! [`SinkStats::outside`] and skipped.
//!
//! # Parallel
//!
//! [`CpuSink::parallel`] splits the image's rows among std threads in
//! blocks of [`ROW_BLOCK`] rows dealt round-robin; each thread owns its rows
//! (disjoint `&mut` slices, no synchronisation) and walks every event of
//! the chunk in order, doing only its rows. Every pixel therefore sees the
//! same additions in the same order as in the serial sink: the result is
//! **bitwise** the serial one, for any number of threads. A count above
//! [`super::MAX_THREADS`] is refused; one the OS will not start in full
//! runs on the threads it did start (the rows of a refused thread go to
//! one that runs), with the same result.
//!
//! # The direct path
//!
//! [`render_direct`] renders any event exactly, without the cache: each
//! support pixel gets [`MoffatPsf::pixel_integral`] at the pixel's centre
//! relative to the event, times `flux·(r, g, b)`. Events whose support does
//! not fit the cache go this way ([`CpuSink::accumulate_routed`] routes
//! them itself).
use super::cache::{offset_index, PsfCache};
use super::event::StarEvent;
use super::image::HdrImage;
use super::model::MoffatPsf;
use super::support::{anchor_phase, row_span, support_box, support_rows};
use super::{CACHE_RADIUS, CHUNK_EVENTS};
use crate::runtime::{Error, Result};
use crate::threads::{resolve_threads, run_workers};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Rows per block in the parallel sink's round-robin split.
pub const ROW_BLOCK: usize = 8;

/// The largest support the direct path takes (pixels): beyond it offsets
/// would leave the range where float64 pixel arithmetic is exact.
pub const MAX_DIRECT_SUPPORT: f64 = 1e12;

/// Counters of a sink.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Chunks accumulated.
    pub chunks: u64,
    /// Events accepted (all paths).
    pub events: u64,
    /// Events that went through the cache and touched the image.
    pub cached: u64,
    /// Events rendered by the direct path that touched the image.
    pub direct: u64,
    /// Accepted events with no support pixel in the image (skipped).
    pub outside: u64,
    /// Event–pixel contributions added.
    pub contributions: u64,
}

impl DirectStats {
    /// What the direct path does with `events` on a `width × height` image,
    /// counted from the support contract alone (nothing rendered): what a
    /// device render of them reports.
    pub(crate) fn of(events: &[StarEvent], width: usize, height: usize) -> DirectStats {
        let mut st = DirectStats::default();
        for e in events {
            st.count(place(e, width, height).map_or(0, |(_, n)| n));
        }
        st
    }

    /// One event with `contributions` support pixels in the image.
    fn count(&mut self, contributions: u64) {
        if contributions == 0 {
            self.outside += 1;
        } else {
            self.rendered += 1;
            self.contributions += contributions;
        }
    }

    /// Adds these `n_events` direct events to a sink's counters.
    pub(crate) fn add_to(self, stats: &mut SinkStats, n_events: usize) {
        stats.events += n_events as u64;
        stats.direct += self.rendered;
        stats.outside += self.outside;
        stats.contributions += self.contributions;
    }
}

/// An event reduced to what the pixel loops need, with its support rows
/// clipped to the image (offsets from the anchor).
#[derive(Clone, Copy, Debug)]
pub(super) struct Placed {
    pub(super) ax: i64,
    pub(super) ay: i64,
    pub(super) fx: f64,
    pub(super) fy: f64,
    pub(super) s: f64,
    /// First and last row offsets with an in-image pixel.
    pub(super) oy_lo: i64,
    pub(super) oy_hi: i64,
}

/// Places an event on a `width × height` image: `None` when no support
/// pixel is in it. Also returns the number of its in-image pixels.
pub(super) fn place(e: &StarEvent, width: usize, height: usize) -> Option<(Placed, u64)> {
    let (w, h) = (width as f64, height as f64);
    let s = e.support;
    // Clearly outside (no pixel centre can be within s): skip before any
    // integer arithmetic, so far-away coordinates never overflow.
    if e.x + s + 1.0 < 0.0 || e.x - s - 1.0 > w || e.y + s + 1.0 < 0.0 || e.y - s - 1.0 > h {
        return None;
    }
    let (ax, fx) = anchor_phase(e.x);
    let (ay, fy) = anchor_phase(e.y);
    let (lo, hi) = support_rows(fy, s)?;
    let oy_lo = lo.max(-ay);
    let oy_hi = hi.min(height as i64 - 1 - ay);
    let mut n = 0u64;
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for oy in oy_lo..=oy_hi {
        if let Some((a, b)) = clip_span(fx, fy, s, oy, ax, width) {
            n += (b - a + 1) as u64;
            first = first.min(oy);
            last = last.max(oy);
        }
    }
    (n > 0).then_some((
        Placed {
            ax,
            ay,
            fx,
            fy,
            s,
            oy_lo: first,
            oy_hi: last,
        },
        n,
    ))
}

/// Row `oy`'s image columns `[ix_lo, ix_hi]` (absolute), clipped.
#[inline]
pub(super) fn clip_span(
    fx: f64,
    fy: f64,
    s: f64,
    oy: i64,
    ax: i64,
    width: usize,
) -> Option<(i64, i64)> {
    let (lo, hi) = row_span(fx, fy, s, oy)?;
    let a = ax.saturating_add(lo).max(0);
    let b = ax.saturating_add(hi).min(width as i64 - 1);
    (a <= b).then_some((a, b))
}

/// The number of event–pixel contributions of one event on a
/// `width × height` image (its support pixels inside the image).
pub fn event_contributions(e: &StarEvent, width: usize, height: usize) -> u64 {
    place(e, width, height).map_or(0, |(_, n)| n)
}

/// The event–pixel contributions of all `events` on a `width × height` image.
pub fn count_contributions(events: &[StarEvent], width: usize, height: usize) -> u64 {
    events
        .iter()
        .map(|e| event_contributions(e, width, height))
        .sum()
}

/// Why an event cannot go through the cache, if it cannot.
fn cache_refusal(e: &StarEvent, index: usize) -> Option<Error> {
    if PsfCache::fits(e.x, e.y, e.support) {
        return None;
    }
    let (_, fx) = anchor_phase(e.x);
    let (_, fy) = anchor_phase(e.y);
    let b = support_box(fx, fy, e.support);
    Some(Error::InvalidInput(format!(
        "event {index}: support = {} at (x, y) = ({}, {}) needs pixel offsets {:?} beyond the \
         cache radius {CACHE_RADIUS} px (offsets −{CACHE_RADIUS}..={CACHE_RADIUS}); \
         render it by the direct path",
        e.support, e.x, e.y, b
    )))
}

/// The serial or row-parallel CPU float64 sink over a shared [`PsfCache`].
#[derive(Debug)]
pub struct CpuSink {
    cache: Arc<PsfCache>,
    image: HdrImage,
    threads: usize,
    stats: SinkStats,
}

impl CpuSink {
    /// The serial reference sink onto a black `width × height` image.
    pub fn new(cache: Arc<PsfCache>, width: usize, height: usize) -> Result<CpuSink> {
        CpuSink::parallel(cache, width, height, 1)
    }

    /// The row-parallel sink with `threads` threads (0 = available
    /// parallelism; at most [`super::MAX_THREADS`]); bitwise the serial
    /// result. The image is checked against the machine's memory and
    /// allocated fallibly ([`HdrImage::new`]).
    pub fn parallel(
        cache: Arc<PsfCache>,
        width: usize,
        height: usize,
        threads: usize,
    ) -> Result<CpuSink> {
        // The thread count first: a refused count allocates nothing.
        let threads = resolve_threads(threads, "CPU sink")?;
        let image = HdrImage::new(width, height)?;
        Ok(CpuSink {
            cache,
            image,
            threads,
            stats: SinkStats::default(),
        })
    }

    /// A sink accumulating into an existing image (`threads` as in
    /// [`CpuSink::parallel`]).
    pub fn with_image(cache: Arc<PsfCache>, image: HdrImage, threads: usize) -> Result<CpuSink> {
        let threads = resolve_threads(threads, "CPU sink")?;
        Ok(CpuSink {
            cache,
            image,
            threads,
            stats: SinkStats::default(),
        })
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<PsfCache> {
        &self.cache
    }

    /// Threads used (1 = the serial reference).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The image so far.
    pub fn image(&self) -> &HdrImage {
        &self.image
    }

    /// The image, mutable (a caller's own direct-path adds).
    pub fn image_mut(&mut self) -> &mut HdrImage {
        &mut self.image
    }

    /// The image, by value.
    pub fn into_image(self) -> HdrImage {
        self.image
    }

    /// The counters so far.
    pub fn stats(&self) -> SinkStats {
        self.stats
    }

    /// Accumulates `events` through the cache, in chunks of at most
    /// [`CHUNK_EVENTS`]. Each chunk is validated whole first; the first bad
    /// event (invalid fields, or a support beyond the cache radius) is the
    /// error, naming its index in `events`, and leaves that chunk (and
    /// every later one) unapplied; earlier chunks stay accumulated.
    pub fn accumulate(&mut self, events: &[StarEvent]) -> Result<()> {
        for (c, chunk) in events.chunks(CHUNK_EVENTS).enumerate() {
            let base = c * CHUNK_EVENTS;
            for (k, e) in chunk.iter().enumerate() {
                e.validate(base + k)?;
                if let Some(err) = cache_refusal(e, base + k) {
                    return Err(err);
                }
            }
            self.apply_chunk(chunk);
            self.stats.chunks += 1;
        }
        Ok(())
    }

    /// Renders `events` by the direct path into the image, in order
    /// (validated whole first; see [`render_direct`]).
    pub fn accumulate_direct(&mut self, events: &[StarEvent]) -> Result<()> {
        render_direct(self.cache.psf(), events, &mut self.image)?
            .add_to(&mut self.stats, events.len());
        Ok(())
    }

    /// Like [`CpuSink::accumulate`], but events that do not fit the cache
    /// go by the direct path: per chunk, the fitting events through the
    /// cache (in order), then the others directly (in order), the order a
    /// device sink's mid-stream direct path gives. Returns how many went
    /// directly.
    pub fn accumulate_routed(&mut self, events: &[StarEvent]) -> Result<usize> {
        let mut n_direct = 0;
        for (c, chunk) in events.chunks(CHUNK_EVENTS).enumerate() {
            let base = c * CHUNK_EVENTS;
            for (k, e) in chunk.iter().enumerate() {
                check_routed(e, base + k)?;
            }
            let (cached, direct): (Vec<StarEvent>, Vec<StarEvent>) = chunk
                .iter()
                .partition(|e| PsfCache::fits(e.x, e.y, e.support));
            self.apply_chunk(&cached);
            self.stats.chunks += 1;
            if !direct.is_empty() {
                self.accumulate_direct(&direct)?;
                n_direct += direct.len();
            }
        }
        Ok(n_direct)
    }

    /// Accumulates one validated chunk whose events all fit the cache.
    fn apply_chunk(&mut self, chunk: &[StarEvent]) {
        let (width, height) = (self.image.width(), self.image.height());
        let cache = &*self.cache;
        let mut prepared = Vec::with_capacity(chunk.len());
        for e in chunk {
            self.stats.events += 1;
            match place(e, width, height) {
                None => self.stats.outside += 1,
                Some((p, n)) => {
                    self.stats.cached += 1;
                    self.stats.contributions += n;
                    let (bases, w) = cache.blend_weights(p.fx, p.fy);
                    let col = [e.flux * e.r, e.flux * e.g, e.flux * e.b];
                    prepared.push((p, bases, w, col));
                }
            }
        }
        if prepared.is_empty() {
            return;
        }
        let row_len = width * 3;
        // Threads beyond the row blocks would own no rows.
        let t = self.threads.clamp(1, height.div_ceil(ROW_BLOCK));
        // Thread k owns the row blocks b with b % t == k; its rows, in
        // order, are its blocks' rows. Each set is taken whole by one
        // worker (the lock is never contended), so a pixel sees the same
        // additions in the same order whoever runs it.
        let mut owned: Vec<Vec<&mut [f64]>> = (0..t).map(|_| Vec::new()).collect();
        for (iy, row) in self.image.data_mut().chunks_mut(row_len).enumerate() {
            owned[(iy / ROW_BLOCK) % t].push(row);
        }
        let stamps = cache.stamps();
        let work = |k: usize, rows: &mut [&mut [f64]]| {
            for (p, b, w, col) in &prepared {
                for oy in p.oy_lo..=p.oy_hi {
                    let iy = (p.ay + oy) as usize;
                    let block = iy / ROW_BLOCK;
                    if block % t != k {
                        continue;
                    }
                    let local = (block / t) * ROW_BLOCK + iy % ROW_BLOCK;
                    let Some((ix_lo, ix_hi)) = clip_span(p.fx, p.fy, p.s, oy, p.ax, width) else {
                        continue;
                    };
                    let o0 = offset_index(ix_lo - p.ax, oy);
                    let n = (ix_hi - ix_lo + 1) as usize;
                    let s0 = &stamps[b[0] + o0..b[0] + o0 + n];
                    let s1 = &stamps[b[1] + o0..b[1] + o0 + n];
                    let s2 = &stamps[b[2] + o0..b[2] + o0 + n];
                    let s3 = &stamps[b[3] + o0..b[3] + o0 + n];
                    let row = &mut rows[local][ix_lo as usize * 3..(ix_hi as usize + 1) * 3];
                    for (q, px) in row.chunks_exact_mut(3).enumerate() {
                        let v = ((w[0] * s0[q] + w[1] * s1[q]) + w[2] * s2[q]) + w[3] * s3[q];
                        px[0] += v * col[0];
                        px[1] += v * col[1];
                        px[2] += v * col[2];
                    }
                }
            }
        };
        if t == 1 {
            work(0, &mut owned[0]);
        } else {
            let sets: Vec<Mutex<Vec<&mut [f64]>>> = owned.into_iter().map(Mutex::new).collect();
            let next = AtomicUsize::new(0);
            run_workers(t, || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(set) = sets.get(k) else { break };
                work(k, &mut set.lock().unwrap_or_else(PoisonError::into_inner));
            });
        }
    }
}

/// What a routed sink takes (`accumulate_routed`, the producers of
/// [`super::producers`]): [`StarEvent::validate`], and a support within
/// the direct path's limit. The error names `index`.
pub(crate) fn check_routed(e: &StarEvent, index: usize) -> Result<()> {
    e.validate(index)?;
    if e.support > MAX_DIRECT_SUPPORT {
        return Err(Error::InvalidInput(format!(
            "event {index}: support = {:e} px exceeds the direct path's limit {MAX_DIRECT_SUPPORT:e} px",
            e.support
        )));
    }
    Ok(())
}

/// What [`render_direct`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectStats {
    /// Events that touched the image.
    pub rendered: u64,
    /// Events with no support pixel in the image (skipped).
    pub outside: u64,
    /// Event–pixel contributions added.
    pub contributions: u64,
}

/// The direct path: adds `events` (any support up to
/// [`MAX_DIRECT_SUPPORT`]) into `image` exactly, each support pixel getting
/// the PSF integrated over it ([`MoffatPsf::pixel_integral`] at the pixel
/// centre relative to the event, `(ox + ½ − fx, oy + ½ − fy)`) times
/// `flux·(r, g, b)`. Same support pixels as the cached sink. All events are
/// validated first; a bad one is the error (naming its index) and nothing
/// is added.
pub fn render_direct(
    psf: &MoffatPsf,
    events: &[StarEvent],
    image: &mut HdrImage,
) -> Result<DirectStats> {
    psf.validate()?;
    for (k, e) in events.iter().enumerate() {
        check_routed(e, k)?;
    }
    let (width, height) = (image.width(), image.height());
    let mut st = DirectStats::default();
    let data = image.data_mut();
    for e in events {
        let placed = place(e, width, height);
        st.count(placed.map_or(0, |(_, n)| n));
        let Some((p, _)) = placed else {
            continue;
        };
        let col = [e.flux * e.r, e.flux * e.g, e.flux * e.b];
        for oy in p.oy_lo..=p.oy_hi {
            let Some((ix_lo, ix_hi)) = clip_span(p.fx, p.fy, p.s, oy, p.ax, width) else {
                continue;
            };
            let iy = (p.ay + oy) as usize;
            let cv = (oy as f64 + 0.5) - p.fy;
            for ix in ix_lo..=ix_hi {
                let cu = ((ix - p.ax) as f64 + 0.5) - p.fx;
                let v = psf.pixel_integral(cu, cv);
                let o = (iy * width + ix as usize) * 3;
                data[o] += v * col[0];
                data[o + 1] += v * col[1];
                data[o + 2] += v * col[2];
            }
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psf::{CacheConfig, MAX_IMAGE_SIDE, MAX_THREADS};

    fn small_cache() -> Arc<PsfCache> {
        let c = CacheConfig {
            phases: 4,
            threads: 2,
        };
        Arc::new(PsfCache::build_with(MoffatPsf::default(), &c).unwrap())
    }

    #[test]
    fn thread_counts_are_bounded_and_checked_before_the_image() {
        let cache = small_cache();
        // The count is refused before a 26 TB image is even considered.
        let side = MAX_IMAGE_SIDE;
        for threads in [1usize << 40, MAX_THREADS + 1] {
            let e = CpuSink::parallel(cache.clone(), side, side, threads).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidInput(m) if m.contains("0..=1024")),
                "{e}"
            );
            let img = HdrImage::new(3, 3).unwrap();
            assert!(CpuSink::with_image(cache.clone(), img, threads).is_err());
        }
        assert!(CpuSink::parallel(cache, 8, 8, 0).unwrap().threads() >= 1);
    }

    #[test]
    fn more_threads_than_row_blocks_is_still_the_serial_result() {
        let cache = small_cache();
        let events: Vec<StarEvent> = (0..40)
            .map(|k| StarEvent {
                x: 3.3 * k as f64 - 10.0,
                y: 0.7 * k as f64,
                flux: 1.0 + k as f64,
                r: 1.0,
                g: 0.5,
                b: 0.25,
                support: 6.0,
            })
            .collect();
        let mut serial = CpuSink::new(cache.clone(), 90, 21).unwrap();
        serial.accumulate(&events).unwrap();
        for threads in [2, 3, 64] {
            let mut par = CpuSink::parallel(cache.clone(), 90, 21, threads).unwrap();
            par.accumulate(&events).unwrap();
            assert_eq!(par.stats(), serial.stats());
            assert!(par
                .image()
                .data()
                .iter()
                .zip(serial.image().data())
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        assert!(serial.image().peak() > 0.0);
    }
}
