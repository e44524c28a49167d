//! The device PSF sink (`docs/design/psf.md`): `atomic`, `tile16`, `tile32` and
//! `adaptive` modes.
//!
//! # What it computes
//!
//! Exactly what [`CpuSink`](super::CpuSink) computes, contribution by
//! contribution: the same support pixels (the per-row ranges of
//! [`super::support`], evaluated on the device with the same correctly
//! rounded float64 operations in the same order, never contracted into
//! fused multiply-adds), the same blend weights and blended value, the same
//! colour products; the direct path's pixel integrals
//! (`hipkern_psf_render_direct`) take the CPU's steps too, with the
//! device's `pow`. So only the order in which a pixel's contributions are
//! summed, and the last bits of direct-path values, may differ: images
//! agree within the acceptance's tolerances
//! (`docs/design/psf.md#acceptance`):
//!
//! - `atomic` (`hipkern_psf_splat_atomic`): float64 atomics into the image;
//!   the order of a pixel's sums varies from run to run.
//! - `tile16` / `tile32` (`hipkern_psf_tile_bin`, `hipkern_psf_tile_accumulate`):
//!   owner-computes. Per chunk the device prepares the events, builds
//!   per-tile lists of event indices (count, scan, scatter, sort: see
//!   [`super::binning`] for what the lists are) and one thread per pixel
//!   adds its tile's events in event order; a list longer than
//!   [`SEGMENT`](super::binning::SEGMENT) references is cut into segments
//!   whose partial sums a merge adds in segment order. No atomics touch
//!   the image: the image is bitwise the same on every run with the same
//!   chunking. A tile's list of one segment gives the CPU's own order.
//! - `adaptive`: per chunk, tiles (side [`AdaptiveThresholds::tile`]) when
//!   the chunk has at least [`AdaptiveThresholds::min_events`] events and
//!   at least [`AdaptiveThresholds::min_events_per_centre_tile`] events per
//!   occupied 32×32 centre tile on average, else `atomic`; the counts come
//!   from the binning pass (no extra pass over the events). The choice per
//!   chunk is in [`DeviceSink::chunk_log`]. The original values (tile16, 8,192
//!   events, 32 per centre tile: [`AdaptiveThresholds::SPEC`]) were right
//!   for lists built on the host; with device binning tiles win at every
//!   density measured (benches/RESULTS.md), so the defaults keep only the
//!   event count and take tile32.
//!
//! # Scratch
//!
//! Everything is allocated once when the sink is built: the image, the
//! stamps (uploaded once), two pinned host staging buffers and two device
//! event buffers of [`CHUNK_EVENTS`] events each, a few device words
//! (verdict, counters, binning totals), and for the tile modes the bounded
//! scratch of [`ScratchLimits`] (references, tasks, starts, partials) and the
//! prepared events of one chunk. A chunk that needs more of a buffer than
//! it has is refused with [`Error::ScratchExceeded`] naming it, before its
//! accumulation is launched: the image is exactly as before that chunk
//! and the sink stays usable. There is no implicit switch to another mode.
//! [`DeviceSink::scratch_peak`] reports the most each buffer held.
//!
//! # Streams
//!
//! Chunk `k` is written into staging slot `k mod 2`, copied on a copy
//! stream, and processed on the compute stream, so in `atomic` mode chunk
//! `k+1`'s upload runs while chunk `k`'s kernel does. Two events per slot
//! order the reuse: `uploaded` (the host waits on it before rewriting the
//! staging buffer; the compute stream waits on it before the kernels) and
//! `consumed` (the copy stream waits on it before overwriting the device
//! buffer). The tile modes wait for each chunk's binning pass (its totals
//! decide the launch size, the capacity check and the adaptive choice).
//! Every host↔device copy of the image is ordered on the compute stream,
//! except a frame's download ([`DeviceSink::end_frame`]): it reads a device
//! copy of the image on a stream of its own, beside the next frame's work.
//!
//! Every call makes the sink's device current for its own length and
//! restores the caller's current device (see [`crate::runtime`]).
//!
//! [`CHUNK_EVENTS`]: super::CHUNK_EVENTS
//! [`Error::ScratchExceeded`]: crate::Error::ScratchExceeded
mod accumulate;
mod frames;
mod launch;
mod options;
mod records;
mod scratch;

pub use options::{
    AdaptiveThresholds, Binning, DeviceSinkBuilder, ScratchLimits, ScratchUsage, SinkMode,
};
pub use records::{ChunkMode, ChunkRecord, SinkTimings};

use super::reference::SinkStats;
use super::PsfCache;
use crate::runtime::Pinned;
use crate::runtime::{Device, DeviceBuffer, Result, Stream};
use records::Profile;
use scratch::{Slot, TileScratch};
use std::sync::Arc;

/// The float64 PSF sink on one device.
///
/// Same contract as [`CpuSink`](super::CpuSink): chunks of at most
/// [`CHUNK_EVENTS`], [`SinkStats`] with the same meaning, events refused
/// with errors naming them. Every event of a call is validated on the host
/// before anything is launched, so a bad event costs nothing; a scratch
/// capacity refusal ([`Error::ScratchExceeded`]) stops the call at the
/// chunk that needed too much, saying how many events went in.
///
/// [`CHUNK_EVENTS`]: super::CHUNK_EVENTS
/// [`Error::ScratchExceeded`]: crate::Error::ScratchExceeded
pub struct DeviceSink {
    device: Device,
    cache: Arc<PsfCache>,
    width: usize,
    height: usize,
    mode: SinkMode,
    binning: Binning,
    thresholds: AdaptiveThresholds,
    stream: Stream,
    copy: Stream,
    stamps: DeviceBuffer<f64>,
    image: DeviceBuffer<f64>,
    /// Totals, counters, verdict (see [`WORDS`](scratch::WORDS)).
    words: DeviceBuffer<u64>,
    scratch: Option<TileScratch>,
    slots: [Slot; 2],
    next: usize,
    /// [`DeviceSink::finish_pinned`]'s image, allocated on first use.
    pinned_image: Option<Pinned<f64>>,
    /// [`DeviceSink::end_frame`]'s buffers, allocated on first use.
    frames: Option<frames::Frames>,
    /// What the host counts itself: events, chunks, the direct path.
    host_stats: SinkStats,
    /// Device counts of refused chunks and of the time before the last
    /// reset (subtracted from the counters).
    counter_offset: [u64; 3],
    /// The counters as read at the last tile chunk's binning (every count
    /// of a tile-mode sink comes from a binning pass).
    last_counters: [u64; 3],
    /// As of the last synchronization.
    stats: SinkStats,
    peak: ScratchUsage,
    log: Vec<ChunkRecord>,
    profile: Option<Profile>,
}

impl std::fmt::Debug for DeviceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSink")
            .field("device", &self.device)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("mode", &self.mode)
            .field("binning", &self.binning)
            .field("phases", &self.cache.phases())
            .field("stats", &self.stats)
            .finish()
    }
}

impl DeviceSink {
    /// An `atomic`-mode sink onto a black `width × height` image (each side
    /// in `1..=2^20`) on `device`, over `cache` (its stamps are uploaded
    /// once, `(P+1)²·95²·8` bytes): `DeviceSink::builder(..).build()`. On
    /// the `cpu` platform no `Device` exists (`Device::new` gives
    /// [`Error::NoToolchain`]).
    ///
    /// [`Error::NoToolchain`]: crate::Error::NoToolchain
    pub fn new(
        device: &Device,
        cache: Arc<PsfCache>,
        width: usize,
        height: usize,
    ) -> Result<DeviceSink> {
        DeviceSink::builder(device, cache, width, height).build()
    }

    /// A builder with the defaults: `atomic`, device binning, the default
    /// scratch capacities and adaptive thresholds, no profiling.
    pub fn builder(
        device: &Device,
        cache: Arc<PsfCache>,
        width: usize,
        height: usize,
    ) -> DeviceSinkBuilder {
        DeviceSinkBuilder {
            device: device.clone(),
            cache,
            width,
            height,
            mode: SinkMode::Atomic,
            binning: Binning::Device,
            limits: ScratchLimits::default(),
            thresholds: AdaptiveThresholds::default(),
            profile: false,
        }
    }

    /// Image width.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Image height.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The mode.
    pub fn mode(&self) -> SinkMode {
        self.mode
    }

    /// Where tile lists are built.
    pub fn binning(&self) -> Binning {
        self.binning
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<PsfCache> {
        &self.cache
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The counters (as [`CpuSink::stats`](super::CpuSink::stats)); the
    /// device counts the contributions, and every accumulating call
    /// synchronizes before it returns, so they are up to date.
    pub fn stats(&self) -> SinkStats {
        self.stats
    }

    /// Capacity of each scratch buffer (zero in `atomic` mode, which has none).
    pub fn scratch_capacity(&self) -> ScratchUsage {
        self.scratch
            .as_ref()
            .map(TileScratch::capacity)
            .unwrap_or_default()
    }

    /// The most of each scratch buffer one chunk used so far.
    pub fn scratch_peak(&self) -> ScratchUsage {
        self.peak
    }

    /// Every chunk of the cached path so far, in order, with its mode.
    pub fn chunk_log(&self) -> &[ChunkRecord] {
        &self.log
    }

    /// Kernel times so far, as of the last synchronization; `None` unless
    /// built with [`DeviceSinkBuilder::profile`].
    pub fn timings(&self) -> Option<SinkTimings> {
        self.profile.as_ref().map(|p| p.timings)
    }
}

impl Drop for DeviceSink {
    fn drop(&mut self) {
        // No copy may still read a staging buffer, nor a kernel a buffer,
        // when they are freed. Errors are recorded on the device.
        for s in [&self.copy, &self.stream] {
            if let Err(e) = s.synchronize() {
                self.device.record_free_error(e);
            }
        }
        if let Some(Err(e)) = self.frames.as_ref().map(|f| f.synchronize()) {
            self.device.record_free_error(e);
        }
    }
}
