//! The sink's public work: accumulating events (through the cache, or
//! routed by the direct path), synchronizing, finishing, resetting and
//! replacing the image, and the host side of the device's verdict and
//! counters.
use super::scratch::{COUNTERS, REPORT, REPORT_NONE, WORDS};
use super::{DeviceSink, ScratchUsage, SinkTimings};
use crate::host_memory::filled_vec;
use crate::psf::event::StarEvent;
use crate::psf::image::HdrImage;
use crate::psf::reference::{check_routed, DirectStats, SinkStats};
use crate::psf::support::{anchor_phase, support_box};
use crate::psf::{PsfCache, CACHE_RADIUS, CHUNK_EVENTS};
use crate::runtime::Pinned;
use crate::runtime::{Error, Result};

fn cache_refusal(e: &StarEvent, index: usize) -> Error {
    let (_, fx) = anchor_phase(e.x);
    let (_, fy) = anchor_phase(e.y);
    Error::InvalidInput(format!(
        "event {index}: support = {} at (x, y) = ({}, {}) needs pixel offsets {:?} beyond the \
         cache radius {CACHE_RADIUS} px (offsets −{CACHE_RADIUS}..={CACHE_RADIUS}); \
         render it by the direct path",
        e.support,
        e.x,
        e.y,
        support_box(fx, fy, e.support)
    ))
}

pub(super) fn device_refusal(index: u64) -> Error {
    Error::InvalidInput(format!(
        "the device refused event {index} of a chunk although the host accepted it; \
         that chunk and the later ones were not accumulated"
    ))
}

impl DeviceSink {
    /// Accumulates `events` through the cache, in chunks of at most
    /// [`CHUNK_EVENTS`]. Every event of the call is validated first
    /// ([`StarEvent::validate`], and [`PsfCache::fits`]); the first bad one
    /// is the error, naming its index in `events`, and nothing of the call
    /// is accumulated. Chunks overlap their uploads with the previous
    /// chunk's kernels (`atomic`; the tile modes wait for each chunk's
    /// binning pass); the call returns when its work is done, with
    /// [`DeviceSink::stats`] up to date.
    pub fn accumulate(&mut self, events: &[StarEvent]) -> Result<()> {
        for (i, e) in events.iter().enumerate() {
            e.validate(i)?;
            if !PsfCache::fits(e.x, e.y, e.support) {
                return Err(cache_refusal(e, i));
            }
        }
        let _scope = self.device.enter()?;
        for (k, chunk) in events.chunks(CHUNK_EVENTS).enumerate() {
            self.launch_or_sync(chunk, k * CHUNK_EVENTS)?;
            self.host_stats.events += chunk.len() as u64;
            self.host_stats.chunks += 1;
        }
        self.sync()
    }

    /// Like [`DeviceSink::accumulate`], but events that do not fit the cache
    /// go by the direct path (`docs/design/psf.md#direct-path`): per chunk,
    /// the fitting events go to the device in order, then the others are
    /// rendered on the device from the PSF's pixel integrals
    /// (`hipkern_psf_render_direct`, in order, after the chunk's splat) —
    /// the order of [`CpuSink::accumulate_routed`](crate::psf::CpuSink::accumulate_routed),
    /// and its values to a few ulp (the device's `pow`; the rest is the
    /// CPU's float64 arithmetic). No synchronization per chunk beyond the
    /// mode's own.
    /// Every event of the call is validated first (fields, and a support of
    /// at most [`MAX_DIRECT_SUPPORT`](crate::psf::MAX_DIRECT_SUPPORT)); a bad one is the error, naming its
    /// index, and nothing is accumulated. Returns how many went directly.
    pub fn accumulate_routed(&mut self, events: &[StarEvent]) -> Result<usize> {
        for (i, e) in events.iter().enumerate() {
            check_routed(e, i)?;
        }
        let _scope = self.device.enter()?;
        let mut n_direct = 0;
        for (k, chunk) in events.chunks(CHUNK_EVENTS).enumerate() {
            let (cached, direct): (Vec<StarEvent>, Vec<StarEvent>) = chunk
                .iter()
                .partition(|e| PsfCache::fits(e.x, e.y, e.support));
            if !cached.is_empty() {
                self.launch_or_sync(&cached, k * CHUNK_EVENTS)?;
                self.host_stats.events += cached.len() as u64;
            }
            self.host_stats.chunks += 1;
            if !direct.is_empty() {
                let r = self.launch_direct(&direct);
                self.or_sync(r)?;
                // Counted on the host (the support contract gives the
                // device's pixels), once the render is queued.
                DirectStats::of(&direct, self.width, self.height)
                    .add_to(&mut self.host_stats, direct.len());
                n_direct += direct.len();
            }
        }
        self.sync()?;
        Ok(n_direct)
    }

    /// Waits for everything queued, checks the device's verdict and brings
    /// the counters (and the profile) up to date.
    pub fn sync(&mut self) -> Result<()> {
        let _scope = self.device.enter()?;
        self.stream.synchronize()?;
        let words = self.read_words()?;
        if words[REPORT] != REPORT_NONE {
            self.reset_report()?;
            return Err(device_refusal(words[REPORT]));
        }
        self.fold_counters(&words);
        self.drain_profile()
    }

    /// Waits for everything queued and downloads the image. The sink goes
    /// on accumulating into the same device image afterwards.
    pub fn finish(&mut self) -> Result<HdrImage> {
        // Poisoned: a value the copy did not write would show as NaN. Host
        // memory for it is checked and allocated fallibly (the device may
        // hold an image the host has no room for).
        let (w, h) = (self.width, self.height);
        let mut data = filled_vec(w * h * 3, f64::NAN, &|| {
            format!("the host copy of the {w}×{h} float64 RGB image")
        })?;
        let _scope = self.device.enter()?;
        self.download(&mut data)?;
        HdrImage::from_data(self.width, self.height, data)
    }

    /// Like [`DeviceSink::finish`], into the sink's own page-locked copy of
    /// the image (allocated, and poisoned with NaN, on first use): the
    /// fastest way out (a pageable download of a 4K image takes 3–6× as
    /// long). The slice is height × width × 3, row-major.
    pub fn finish_pinned(&mut self) -> Result<&[f64]> {
        let _scope = self.device.enter()?;
        if self.pinned_image.is_none() {
            let mut p = Pinned::new(&self.device, self.width * self.height * 3)?;
            p.as_mut_slice().fill(f64::NAN);
            self.pinned_image = Some(p);
        }
        self.sync()?;
        let dst = self.pinned_image.as_mut().expect("allocated above");
        // SAFETY: the pinned buffer is owned by the sink and not touched
        // until the synchronize below has waited for the copy.
        unsafe {
            self.stream
                .copy_dtoh_async(&self.image.as_slice(), dst.as_mut_slice())?;
        }
        self.stream.synchronize()?;
        Ok(self
            .pinned_image
            .as_ref()
            .expect("allocated above")
            .as_slice())
    }

    /// Back to a black image and zero counters, chunk log, peaks and
    /// timings, keeping every buffer (for repeated replays).
    pub fn reset(&mut self) -> Result<()> {
        let _scope = self.device.enter()?;
        self.sync()?;
        self.stream.fill(&mut self.image.as_slice_mut(), 0.0f64)?;
        self.stream.synchronize()?;
        let words = self.read_words()?;
        self.counter_offset
            .copy_from_slice(&words[COUNTERS..COUNTERS + 3]);
        self.host_stats = SinkStats::default();
        self.stats = SinkStats::default();
        self.peak = ScratchUsage::default();
        self.log.clear();
        if let Some(p) = self.profile.as_mut() {
            p.timings = SinkTimings::default();
        }
        Ok(())
    }

    /// Replaces the device image by `image` (same size, else an error and
    /// the device image unchanged), after the work queued so far.
    pub fn upload_image(&mut self, image: &HdrImage) -> Result<()> {
        if image.width() != self.width || image.height() != self.height {
            return Err(Error::InvalidInput(format!(
                "upload_image: a {}×{} image into a {}×{} sink",
                image.width(),
                image.height(),
                self.width,
                self.height
            )));
        }
        let _scope = self.device.enter()?;
        self.upload(image.data())
    }

    pub(super) fn read_words(&self) -> Result<[u64; WORDS]> {
        let mut w = [0u64; WORDS];
        self.words.copy_to_host(&mut w)?;
        Ok(w)
    }

    pub(super) fn reset_report(&mut self) -> Result<()> {
        self.stream
            .fill(&mut self.words.slice_mut(REPORT..)?, REPORT_NONE)?;
        self.stream.synchronize()
    }

    /// stats = what the host counted + the device counters (less refused chunks').
    pub(super) fn fold_counters(&mut self, words: &[u64; WORDS]) {
        let c = |i: usize| words[COUNTERS + i].wrapping_sub(self.counter_offset[i]);
        let h = self.host_stats;
        self.stats = SinkStats {
            cached: c(0),
            outside: h.outside + c(1),
            contributions: h.contributions + c(2),
            ..h
        };
    }

    /// The device image into `dst` (width·height·3), after all queued work.
    fn download(&mut self, dst: &mut [f64]) -> Result<()> {
        self.sync()?;
        // SAFETY: dst is exclusively borrowed for this call, and the
        // synchronize below waits for the copy before returning.
        unsafe {
            self.stream.copy_dtoh_async(&self.image.as_slice(), dst)?;
        }
        self.stream.synchronize()
    }

    /// `src` (width·height·3) into the device image, after all queued work.
    fn upload(&mut self, src: &[f64]) -> Result<()> {
        // SAFETY: src is borrowed for this call, and the synchronize below
        // waits for the copy before returning.
        unsafe {
            self.stream
                .copy_htod_async(src, &mut self.image.as_slice_mut())?;
        }
        self.stream.synchronize()
    }
}
